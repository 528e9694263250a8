"""RFFNet and RFFNetClassifier: the Bayesian last layer, relevances, calibration, persistence and bad parameters.

The engines have their own tests: tests/basis/test_random_fourier.py (the features),
tests/inference/test_proximal_adam.py (the training), tests/inference/test_weight_space.py (the last layer)."""

import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis.random_fourier import RFFNetModule
from tnbayes.inference import weight_space
from tnbayes.models import rffnet


def _regression_data(n=400, p=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    return X, y


def test_old_import_paths_are_the_moved_objects():
    assert rffnet.RFFNetModule is RFFNetModule and rffnet.bayesian_last_layer is weight_space.bayesian_ridge
    assert rffnet.LastLayerPosterior is weight_space.BayesianRidgePosterior


def test_posterior_is_the_last_layers_gaussian():
    X, y = _regression_data(200)
    model = tnbayes.RFFNet(num_features=50, max_epochs=5).fit(X, y)
    Xs = model.x_scaler_.transform(torch.tensor(X[:9]))
    z = model._features(Xs)
    covariance = (model.weight_eigenvectors_ @ torch.diag(model.weight_covariance_eigenvalues_)
                  @ model.weight_eigenvectors_.T)
    post = model.posterior(X[:9])
    scale = float(model.y_scaler_.scale_)
    torch.testing.assert_close(post.mean, model.y_scaler_.inverse_transform(z @ model.weight_mean_))
    expected = (torch.einsum("ns,st,nt->n", z, covariance, z) + model.noise_variance_) * scale**2
    torch.testing.assert_close(post.variance, expected, rtol=1e-10, atol=1e-14)
    full = model.posterior(X[:9], full_covariance=True)
    torch.testing.assert_close(full.covariance.diagonal(), post.variance, rtol=1e-10, atol=1e-14)


def test_fit_recovers_relevant_inputs_and_is_calibrated():
    X, y = _regression_data(3000, p=8)
    Xte, yte = _regression_data(1000, p=8, seed=1)
    model = tnbayes.RFFNet().fit(X, y)
    assert set(np.argsort(-model.scaled_relevances_)[:2]) == {0, 1}
    assert model.scaled_relevances_.max() == 1.0 and model.scaled_relevances_.min() == 0.0
    report = tnbayes.metrics.evaluate(model.posterior(Xte), yte)
    assert report["rmse"] < 0.2  # noise std 0.1, var(y) ≈ 0.8
    assert 0.9 <= report["coverage_95"] <= 0.99
    network = np.sqrt(np.mean((model.predict_network(Xte) - yte) ** 2))
    assert network < 0.3
    assert model.best_epoch_ < model.epochs_ and len(model.validation_losses_) == model.epochs_


def _sine(seed, n=330):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("seed", [0, 3, 4, 5])
def test_a_fit_that_predicts_the_mean_says_so_and_what_to_do(seed):
    """30 rows of a 1-D sine: an epoch is one Adam step, early stopping on the 3-row validation split ends training
    with λ near 0, and the last layer's marginal likelihood finds no signal — RFFNet() predicts the mean. It must
    warn, and the remedy it names must work. Reference: scikit-learn's GaussianProcessRegressor on the same rows."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    X, y = _sine(seed)
    X_train, y_train, X_test, y_test = X[:30], y[:30], X[30:], y[30:]
    with pytest.warns(ConvergenceWarning, match=r"explains -?\d+\.\d% of the variance of y.*initial_relevance=1\.0"):
        model = tnbayes.RFFNet().fit(X_train, y_train)
    assert tnbayes.metrics.evaluate(model.posterior(X_test), y_test)["rmse"] > 0.95 * y_test.std()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        remedy = tnbayes.RFFNet(initial_relevance=1.0).fit(X_train, y_train)
    rmse = tnbayes.metrics.evaluate(remedy.posterior(X_test), y_test)["rmse"]
    gpr = GaussianProcessRegressor(ConstantKernel() * RBF() + WhiteKernel(), normalize_y=True, random_state=0)
    reference = float(np.sqrt(np.mean((gpr.fit(X_train, y_train).predict(X_test) - y_test) ** 2)))
    assert rmse < 2 * reference and rmse < 0.3 * y_test.std()


def test_classifier_with_constant_features_warns_and_a_fitted_regressor_does_not():
    from sklearn.exceptions import ConvergenceWarning

    X, y = _sine(0)
    with pytest.warns(ConvergenceWarning, match="nearly constant over the training inputs"):
        tnbayes.RFFNetClassifier().fit(X[:30], y[:30] > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        tnbayes.RFFNetClassifier(initial_relevance=1.0).fit(X[:30], y[:30] > 0)
        tnbayes.RFFNet().fit(X[:200], y[:200])


def test_plot_relevances_draws_the_scaled_or_raw_relevances():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y = _regression_data(100)
    model = tnbayes.RFFNet(num_features=20, max_epochs=2).fit(X, y)
    for scaled, values, label in ((True, model.scaled_relevances_, "scaled |λ|"),
                                  (False, model.relevances_.numpy(), "λ")):
        ax = model.plot_relevances(scaled=scaled)
        np.testing.assert_allclose(ax.containers[0].markerline.get_ydata(), values)
        assert ax.get_ylabel() == label and ax.get_title() == "RFFNet relevances"
        plt.close(ax.figure)


def test_classifier_on_rings_finds_the_two_relevant_inputs():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 4))
    radius = np.hypot(X[:, 0], X[:, 1])
    labels = np.digitize(radius, [0.8, 1.5])  # three classes by radius in the first two inputs
    model = tnbayes.RFFNetClassifier(num_features=200).fit(X[:1500], labels[:1500])
    assert model.score(X[1500:], labels[1500:]) > 0.9
    assert set(np.argsort(-model.scaled_relevances_)[:2]) == {0, 1}
    proba = model.predict_proba(X[1500:])
    assert proba.shape == (500, 3)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="predict_proba"):
        model.posterior(X[:3])


def test_classifier_save_load(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 3))
    labels = np.array(["a", "b", "c"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 1).astype(int)]
    model = tnbayes.RFFNetClassifier(max_epochs=5).fit(X, labels)
    model.save(tmp_path / "c.tnb")
    loaded = tnbayes.load_model(tmp_path / "c.tnb")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    with torch.no_grad():
        Xs = model.x_scaler_.transform(torch.tensor(X)).to(torch.float32)
        torch.testing.assert_close(loaded.module_(Xs), model.module_(Xs))


@pytest.mark.parametrize("kwargs, match", [
    ({"learning_rate": 0}, "learning_rate"), ({"penalty": -1.0}, "penalty"), ({"batch_size": 0}, "batch_size"),
    ({"schedule": "sweep"}, "schedule"), ({"validation_fraction": 1.0}, "validation_fraction"),
    ({"num_features": 2.5}, "num_features"), ({"last_layer_mean": "map"}, "last_layer_mean"),
    ({"training_dtype": "float16"}, "training_dtype"),
])
def test_bad_parameters_raise(kwargs, match):
    X, y = _regression_data(50)
    with pytest.raises(ValueError, match=match):
        tnbayes.RFFNet(**kwargs).fit(X, y)


def test_too_many_features_for_memory():
    X, y = _regression_data(50)
    with pytest.raises(MemoryError, match="num_features"):
        tnbayes.RFFNet(num_features=10**7).fit(X, y)
