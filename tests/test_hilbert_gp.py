"""HilbertGP against GPyTorch's exact GP (tnbayes.ExactGP) and dense computations."""

import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis import ApproximationWarning


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, d))
    y = np.sin(2 * X[:, 0]) * (np.cos(X[:, 1]) if d > 1 else 1.0) + 0.1 * rng.standard_normal(n)
    return X, y


def _hilbert_with_hyperparameters_of(exact, **kwargs):
    return tnbayes.HilbertGP(lengthscale=exact.lengthscale_.tolist(), outputscale=exact.outputscale_,
                             noise_variance=exact.noise_variance_, mean_constant=exact.mean_constant_, **kwargs)


@pytest.mark.parametrize("d, num_basis, c", [(1, 128, 3.0), (2, 40, 3.0)])
def test_posterior_equals_exact_gp_with_identical_hyperparameters(d, num_basis, c):
    X, y = _data(150 * d, d)
    exact = tnbayes.ExactGP(num_restarts=0).fit(X, y)
    hilbert = _hilbert_with_hyperparameters_of(exact, num_basis=num_basis, c=c, structure="product").fit(X, y)
    Xt = np.random.default_rng(9).uniform(-3, 3, size=(60, d))
    for noise in (True, False):
        pe, ph = exact.posterior(Xt, observation_noise=noise), hilbert.posterior(Xt, observation_noise=noise)
        scale = float(np.std(y))
        assert float((pe.mean - ph.mean).abs().max()) / scale < 1e-5
        np.testing.assert_allclose(ph.variance.numpy(), pe.variance.numpy(), rtol=1e-5, atol=1e-10 * scale**2)
    full = hilbert.posterior(Xt[:10], full_covariance=True)
    exact_full = exact.posterior(Xt[:10], full_covariance=True)
    np.testing.assert_allclose(full.covariance.numpy(), exact_full.covariance.numpy(), atol=1e-5 * float(np.var(y)))
    assert hilbert.neg_mll_ == pytest.approx(exact.neg_mll_, abs=1e-6)


@pytest.mark.parametrize("name", ["snelson", "mcycle", "co2-monthly"])
def test_marginal_likelihood_fit_matches_exact_gp(name):
    data = tnbayes.datasets.load(name)
    X, y = data.X_train, data.y_train
    if data.y_test is not None:
        X, y = np.vstack([X, data.X_test]), np.concatenate([y, data.y_test])
    exact = tnbayes.ExactGP(num_restarts=1).fit(X, y)
    hilbert = tnbayes.HilbertGP().fit(X, y)
    np.testing.assert_allclose(hilbert.lengthscale_.numpy(), exact.lengthscale_.numpy(), rtol=0.02)
    assert hilbert.outputscale_ == pytest.approx(exact.outputscale_, rel=0.02)
    assert hilbert.noise_variance_ == pytest.approx(exact.noise_variance_, rel=0.02)
    assert hilbert.mean_constant_ == pytest.approx(exact.mean_constant_, abs=0.02)


def test_chunk_size_does_not_change_the_result():
    X, y = _data(300, 2)
    a = tnbayes.HilbertGP(num_basis=16, c=2.5, lengthscale=[0.6, 1.0], outputscale=1.0, noise_variance=0.05).fit(X, y)
    b = tnbayes.HilbertGP(num_basis=16, c=2.5, lengthscale=[0.6, 1.0], outputscale=1.0, noise_variance=0.05,
                          chunk_size=7).fit(X, y)
    Xt = X[:20]
    assert torch.allclose(a.posterior(Xt).mean, b.posterior(Xt).mean, rtol=0, atol=1e-12)
    assert torch.allclose(a.posterior(Xt).variance, b.posterior(Xt).variance, rtol=1e-10)


def test_weight_posterior_is_the_dense_bayesian_linear_regression():
    X, y = _data(80, 1)
    model = tnbayes.HilbertGP(num_basis=20, c=2.0).fit(X, y)
    Xs = model.x_scaler_.transform(torch.tensor(X))
    ys = model.y_scaler_.transform(torch.tensor(y)) - model.mean_constant_
    Z = model.basis_.features(Xs, model.lengthscale_)[0]  # (N, M)
    prior_prec = torch.eye(20, dtype=torch.float64) / model.outputscale_
    cov = torch.linalg.inv(Z.T @ Z / model.noise_variance_ + prior_prec)
    mean = cov @ Z.T @ ys / model.noise_variance_
    torch.testing.assert_close(model.weight_mean_, mean, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(model.weight_covariance(), cov, rtol=1e-8, atol=1e-12)


def test_inputs_outside_the_box_raise():
    X, y = _data(100, 1)
    model = tnbayes.HilbertGP(num_basis=32, c=1.2).fit(X, y)
    model.predict(np.array([[3.2]]))  # inside the box (c = 1.2), outside the data
    with pytest.raises(ValueError, match="outside"):
        model.predict(np.array([[10.0]]))


def test_defaults_pick_structure_and_warn_when_basis_too_small():
    X, y = _data(200, 4)
    model = tnbayes.HilbertGP().fit(X, y)
    assert model.structure_ == "additive"
    assert tnbayes.metrics.rmse(y, model.predict(X)) < 0.6
    X1, y1 = _data(100, 1)
    with pytest.warns(ApproximationWarning):
        tnbayes.HilbertGP(num_basis=6, c=2.0, lengthscale=0.05).fit(X1, y1)


def test_matern_kernel_fits():
    X, y = _data(150, 1)
    model = tnbayes.HilbertGP(kernel="matern52").fit(X, y)
    assert tnbayes.metrics.rmse(y, model.predict(X)) < 0.15
    with warnings.catch_warnings():
        warnings.simplefilter("error", ApproximationWarning)
        tnbayes.HilbertGP(kernel="matern12", num_basis=64).fit(X, y)


def test_bad_fixed_hyperparameters_and_constant_columns():
    X, y = _data(60, 2)
    with pytest.raises(ValueError, match="lengthscale has 3 values"):
        tnbayes.HilbertGP(lengthscale=[0.5, 0.6, 0.7]).fit(X, y)
    with pytest.raises(ValueError, match="ard=False takes one"):
        tnbayes.HilbertGP(lengthscale=[0.5, 0.6], ard=False).fit(X, y)
    with pytest.raises(ValueError, match="noise_variance must be a finite positive"):
        tnbayes.HilbertGP(noise_variance=0.0).fit(X, y)
    with pytest.raises(ValueError, match="c must be"):
        tnbayes.HilbertGP(c=0.5).fit(X, y)
    X[:, 1] = 0.3
    y = np.sin(2 * X[:, 0]) + 0.1 * np.random.default_rng(1).standard_normal(len(y))
    model = tnbayes.HilbertGP().fit(X, y)
    assert tnbayes.metrics.rmse(y, model.predict(X)) < 0.2


def test_reported_basis_matches_the_one_used(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(300, 2))
    y = np.sin(45 * X[:, 0]) + np.sin(3 * X[:, 1]) + 0.05 * rng.standard_normal(300)
    with pytest.warns(ApproximationWarning):
        model = tnbayes.HilbertGP(structure="additive", max_adapt_rounds=1).fit(X, y)
    assert model.num_basis_ == model.basis_.num_basis
    model.save(tmp_path / "m.tnb")
    loaded = tnbayes.load_model(tmp_path / "m.tnb")
    np.testing.assert_array_equal(loaded.predict(X[:5]), model.predict(X[:5]))


def test_float32_model_keeps_float64_accuracy():
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, size=(4000, 1))
    y = np.sin(2 * X[:, 0]) + 0.001 * rng.standard_normal(4000)
    m64 = tnbayes.HilbertGP().fit(X, y)
    m32 = tnbayes.HilbertGP(dtype="float32").fit(X, y)
    assert m32.posterior(X[:3]).mean.dtype == torch.float32
    assert m32.noise_std == pytest.approx(m64.noise_std, rel=1e-2)  # float32 inputs, float64 internals


def test_out_of_box_error_is_in_user_units():
    X, y = _data(100, 1)
    model = tnbayes.HilbertGP(num_basis=32, c=1.2).fit(X + 100.0, y)
    with pytest.raises(ValueError, match=r"value 110.*outside the box \[9[0-9.]+, 10[0-9.]+\]"):
        model.predict(np.array([[110.0]]))


def test_out_of_box_clip_predicts_at_the_training_range_edge():
    X, y = _data(100, 1)
    model = tnbayes.HilbertGP(num_basis=32, c=1.2, out_of_box="clip").fit(X + 100.0, y)
    edge = np.array([[float((X + 100.0).max())]])
    far = model.posterior(np.array([[110.0]]))
    at_edge = model.posterior(edge)
    torch.testing.assert_close(far.mean, at_edge.mean)
    torch.testing.assert_close(far.variance, at_edge.variance)
    with pytest.raises(ValueError, match="out_of_box"):
        tnbayes.HilbertGP(out_of_box="extend")
