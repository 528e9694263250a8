"""One meaning of ``n_iter_``, ``history_`` and ``converged_`` across every estimator (docs/concepts.md), and the
ConvergenceWarning of an ALS fit that ends its sweep budget far from converged."""

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import tnbayes
from tnbayes.models.registry import list_models, make_model

#: small settings per registry name, so every fit takes well under a second
FAST_SETTINGS = {
    "cpd": dict(rank=2, num_basis=4, max_sweeps=3, hyper_max_points=30),
    "cpd_diag": dict(rank=2, num_basis=4, max_sweeps=3, hyper_max_points=30),
    "exact_gp": dict(num_restarts=0, max_iter=20),
    "exact_gp_matern": dict(num_restarts=0, max_iter=20),
    "fl": dict(rank=2, num_basis=4, max_sweeps=3),
    "hilbert_gp": dict(max_iter=20, structure="product"),
    "hilbert_gp_additive": dict(max_iter=20),
    "qtkm": dict(rank=2, max_sweeps=3, hyper_max_points=30),
    "rffnet": dict(max_epochs=15, initial_relevance=0.5),
    "svgp": dict(num_inducing=16, max_iter=30),
    "svgp_matern": dict(num_inducing=16, max_iter=30),
    "tkm": dict(rank=2, max_sweeps=3, hyper_max_points=30),
    "tnkf": dict(hyper_max_points=30),
    "tt_kalman_gp": dict(hyper_max_points=30, max_num_basis=6),
}

CLASSIFIERS = {
    "CPDKernelClassifier": lambda: tnbayes.CPDKernelClassifier(rank=2, num_basis=4, max_sweeps=2,
                                                               hyper_max_points=30),
    "RFFNetClassifier": lambda: tnbayes.RFFNetClassifier(max_epochs=10),
    "TNKFClassifier": lambda: tnbayes.TNKFClassifier(hyper_max_points=30),
}


def _data(n=30):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.cos(2 * X[:, 0]) + 0.05 * rng.standard_normal(n)


def _check_vocabulary(model):
    assert isinstance(model.n_iter_, int) and model.n_iter_ >= 1
    assert isinstance(model.history_, list) and len(model.history_) == model.n_iter_
    assert all(isinstance(value, float) and math.isfinite(value) for value in model.history_)
    assert isinstance(model.converged_, bool)


def test_every_registered_model_has_fast_settings():
    assert set(list_models()) <= set(FAST_SETTINGS)


@pytest.mark.parametrize("name", list_models())
def test_registered_models_share_the_iteration_vocabulary(name, tmp_path):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make_model(name, **FAST_SETTINGS.get(name, {})).fit(X, y)
    _check_vocabulary(model)
    model.save(tmp_path / "model.pt")
    loaded = tnbayes.load_model(tmp_path / "model.pt")
    assert (loaded.n_iter_, loaded.history_, loaded.converged_) == (model.n_iter_, model.history_, model.converged_)


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifiers_share_the_iteration_vocabulary(name):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CLASSIFIERS[name]().fit(X, y > np.median(y))
    _check_vocabulary(model)


def test_als_models_count_sweeps_and_keep_the_finer_records():
    X, y = _data()
    model = tnbayes.CPDKernelMachine(rank=2, num_basis=4, max_sweeps=4, tol=0.0, lengthscale=0.5, penalty=1e-2,
                                     noise_variance=0.01).fit(X, y)
    assert model.n_iter_ == 4 and not model.converged_  # tol = 0: the whole budget, and no warning
    assert model.history_ == model.sweep_objectives_
    assert len(model.update_objectives_) > len(model.history_)
    converged = tnbayes.CPDKernelMachine(rank=2, num_basis=4, max_sweeps=200, tol=1e-3, lengthscale=0.5,
                                         penalty=1e-2, noise_variance=0.01).fit(X, y)
    assert converged.converged_ and converged.n_iter_ < 200 and converged.last_relative_change_ <= 1e-3


def test_als_far_from_converged_warns_naming_max_sweeps():
    X, y = _data()
    with pytest.warns(ConvergenceWarning, match=r"max_sweeps=1 .*changing by"):
        model = tnbayes.CPDKernelMachine(rank=2, num_basis=4, max_sweeps=1, lengthscale=0.5, penalty=1e-2,
                                         noise_variance=0.01).fit(X, y)
    assert not model.converged_ and model.last_relative_change_ > 0.02


def test_als_near_convergence_does_not_warn():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = tnbayes.CPDKernelMachine(rank=2, num_basis=4, max_sweeps=40, lengthscale=0.5, penalty=1e-2,
                                         noise_variance=0.01).fit(X, y)
    assert model.last_relative_change_ <= 0.02


def test_early_stopping_sets_converged():
    X, y = _data(60)
    stopped = tnbayes.RFFNet(max_epochs=200, patience=2, initial_relevance=0.5).fit(X, y)
    assert stopped.converged_ == (stopped.epochs_ < 200) and stopped.history_ == stopped.training_losses_
