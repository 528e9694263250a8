"""QTKM, TKM and FeatureLearningKM with no arguments stay bounded and sound on degenerate targets and many inputs.

A constant (or nearly constant) target must give back the constant with a positive, finite predictive variance
(the noise floored as in the GP models); a 32-input problem of which two inputs matter must give bounded
predictions with a variance of the right size, in a few seconds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tnbayes

MODELS = {"QTKM": tnbayes.QTKM, "TKM": tnbayes.TKM, "FeatureLearningKM": tnbayes.FeatureLearningKM}


def _inputs(n: int, d: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (n, d))


def _check_constant_prediction(model, X: np.ndarray, constant: float, tolerance: float) -> None:
    post = model.posterior(X)
    mean, variance = post.mean.numpy(), post.variance.numpy()
    np.testing.assert_allclose(mean, constant, rtol=0, atol=tolerance)
    assert np.all(np.isfinite(variance)) and np.all(variance > 0)
    assert model.noise_variance_ > 0 and np.isfinite(model.noise_variance_)
    # the constant itself is a likely observation under the predictive distribution
    log_prob = post.log_prob(torch.full((X.shape[0],), constant, dtype=post.mean.dtype)).numpy()
    assert np.all(np.isfinite(log_prob))
    assert np.all(log_prob > -10.0)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("constant", [3.0, 3.3, -0.1])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_constant_target(name, constant, dtype):
    X = _inputs(120, 3)
    model = MODELS[name](dtype=dtype).fit(X, np.full(120, constant))
    tolerance = 1e-9 if dtype == "float64" else 1e-5
    _check_constant_prediction(model, _inputs(40, 3, seed=1) * 0.9, constant, tolerance * max(1.0, abs(constant)))


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_nearly_constant_target(name, dtype):
    """y = 3 + 1e-9·noise: the spread is noise (float32 cannot even hold it: the target is then constant)."""
    X = _inputs(120, 3)
    y = 3.0 + 1e-9 * np.random.default_rng(2).standard_normal(120)
    model = MODELS[name](dtype=dtype).fit(X, y)
    post = model.posterior(_inputs(40, 3, seed=1) * 0.9)
    mean, variance = post.mean.numpy(), post.variance.numpy()
    np.testing.assert_allclose(mean, 3.0, rtol=0, atol=1e-7 if dtype == "float64" else 1e-5)
    assert np.all(np.isfinite(variance)) and np.all(variance > 0)
    log_prob = post.log_prob(torch.full((40,), 3.0, dtype=post.mean.dtype)).numpy()
    assert np.all(np.isfinite(log_prob))


def _many_inputs(n: int, d: int, seed: int, inputs: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, d)) if inputs == "uniform" else rng.standard_normal((n, d))
    y = np.sin(3.0 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("inputs", ["uniform", "normal"])
def test_many_inputs_two_relevant(name, inputs):
    """32 inputs, 2 of them relevant, n = 500: bounded predictions and a predictive variance of the right size.

    With standard-normal inputs the isotropic product kernel of QTKM/TKM is nearly diagonal and its exact KRR
    interpolates (the rank search used to chase a round-off noise to R = 80); FL's raw features used to leave the
    32-fold products unregularised (test predictions several std(y) away).
    """
    X, y = _many_inputs(700, 32, 0, inputs)
    X_train, y_train, X_test, y_test = X[:500], y[:500], X[500:], y[500:]
    X_test = np.clip(X_test, X_train.min(axis=0), X_train.max(axis=0))
    model = MODELS[name]().fit(X_train, y_train)
    mean, std = model.predict(X_test, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)
    rmse = float(np.sqrt(np.mean((mean - y_test) ** 2)))
    assert rmse < 1.2 * float(np.std(y_train))
    assert float(np.max(np.abs(mean - y_train.mean()))) < 5.0 * float(np.std(y_train))
    # calibrated to within a factor: the standardised squared errors average about 1
    assert float(np.mean(((mean - y_test) / std) ** 2)) < 5.0
