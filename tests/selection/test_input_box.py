"""The one out-of-box rule (tnbayes.selection.input_box), checked on every model with a bounded basis domain."""

import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis import ApproximationWarning
from tnbayes.selection import OutOfBoxWarning, prediction_box


def _data(n=120, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d)) * np.array([1.0, 50.0])[:d] + np.array([3.0, 200.0])[:d]
    y = np.sin(3 * X[:, 0]) + 0.01 * X[:, -1] + 0.05 * rng.standard_normal(n)
    return X, y


# small, fixed settings: the rule is what is tested, not the fit
BOXED_MODELS = {
    "CPDKernelMachine": lambda **kw: tnbayes.CPDKernelMachine(rank=2, num_basis=8, lengthscale=[0.6, 30.0],
                                                              outputscale=1.0, noise_variance=0.01, **kw),
    "HilbertGP": lambda **kw: tnbayes.HilbertGP(num_basis=8, c=1.5, lengthscale=1.0, outputscale=1.0,
                                                noise_variance=0.01, **kw),
    "TTKalmanGP": lambda **kw: tnbayes.TTKalmanGP(num_basis=6, lengthscale=1.0, outputscale=1.0, noise_variance=0.01,
                                                  **kw),
    "QTKM": lambda **kw: tnbayes.QTKM(rank=2, num_basis=4, penalty=1e-3, period=2.0, max_sweeps=2, **kw),
    "TKM": lambda **kw: tnbayes.TKM(rank=2, num_basis=4, penalty=1e-3, period=2.0, max_sweeps=2, **kw),
    "FeatureLearningKM": lambda **kw: tnbayes.FeatureLearningKM(rank=2, num_basis=2, periods=[2.0, 4.0], max_sweeps=2,
                                                                **kw),
}


def _fit(name, **kwargs):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        return BOXED_MODELS[name](**kwargs).fit(X, y), X


def test_prediction_box_is_the_training_range_plus_half_the_margin():
    training_range = torch.tensor([[-1.0, 0.0], [1.0, 2.0]])
    domain = (torch.tensor([-3.0, 0.5]), torch.tensor([2.0, 1.5]))
    box = prediction_box(training_range, domain)
    # column 0: halfway between -1 and -3, between 1 and 2; column 1: the data reach beyond the domain
    torch.testing.assert_close(box, torch.tensor([[-2.0, 0.5], [1.5, 1.5]]))


@pytest.mark.parametrize("name", sorted(BOXED_MODELS))
def test_box_contains_the_training_range(name):
    model, X = _fit(name)
    low, high = model.input_box()
    assert np.all(low <= X.min(0) + 1e-9) and np.all(high >= X.max(0) - 1e-9)
    assert np.all(high - low > X.max(0) - X.min(0))  # a margin beyond the training range


@pytest.mark.parametrize("name", sorted(BOXED_MODELS))
def test_far_points_are_clipped_to_the_box_edge_with_one_warning(name):
    model, X = _fit(name)
    low, high = model.input_box()
    far = np.array([[X[0, 0], 1e6], [-1e6, X[1, 1]], [X[2, 0], X[2, 1]]])
    edge = np.array([[X[0, 0], high[1]], [low[0], X[1, 1]], [X[2, 0], X[2, 1]]])
    with pytest.warns(OutOfBoxWarning, match=r"2 of 3 test rows lie outside") as record:
        post_far = model.posterior(far)
    assert len([w for w in record if issubclass(w.category, OutOfBoxWarning)]) == 1
    assert f"{high[1]:.6g}" in str(record[0].message)  # the box in the user's units
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutOfBoxWarning)
        post_edge = model.posterior(edge)
        inside = model.posterior(X[:5])  # inside: no warning
    torch.testing.assert_close(post_far.mean, post_edge.mean)
    torch.testing.assert_close(post_far.variance, post_edge.variance)
    assert bool(torch.isfinite(post_far.mean).all()) and bool((post_far.variance > 0).all())
    assert inside.mean.shape == (5,)


@pytest.mark.parametrize("name", sorted(BOXED_MODELS))
def test_raise_policy_names_the_value_and_the_box_in_user_units(name):
    model, X = _fit(name, out_of_box="raise")
    low, high = model.input_box()
    with pytest.raises(ValueError, match=r"value 1e\+06.*input 1: \[" + f"{low[1]:.6g}".replace(".", r"\.")):
        model.predict(np.array([[X[0, 0], 1e6]]))
    model.predict(np.array([[X[0, 0], high[1] - 1e-6]]))  # just inside: fine


@pytest.mark.parametrize("name", sorted(BOXED_MODELS))
def test_unknown_policy_is_refused(name):
    X, y = _data()
    with pytest.raises(ValueError, match="out_of_box"):
        BOXED_MODELS[name](out_of_box="extend").fit(X, y)


@pytest.mark.parametrize("model", [tnbayes.ExactGP(num_restarts=0), tnbayes.RFFNet(max_epochs=5)])
def test_models_without_a_bounded_basis_predict_anywhere(model):
    X, y = _data(60)
    model.fit(X, y)
    assert model.input_box() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutOfBoxWarning)
        assert np.all(np.isfinite(model.predict(np.array([[1e3, -1e4]]))))


def test_the_box_survives_save_and_load(tmp_path):
    model, X = _fit("CPDKernelMachine")
    model.save(tmp_path / "m.tnb")
    loaded = tnbayes.load_model(tmp_path / "m.tnb")
    for a, b in zip(model.input_box(), loaded.input_box()):
        np.testing.assert_array_equal(a, b)
