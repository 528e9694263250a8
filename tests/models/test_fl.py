"""FL (feature-learning tensor kernel machine): objective, engine reuse, baseline, contract (skipped families:
tests/inference/test_als.py)."""

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.inference import CPDALS
from tnbayes.models.fl import cross_validate_period
from tests.cpd_problems import fl_data as _data


@pytest.mark.parametrize("mixture_penalty", ["l1", "l2", "fixed_norm"])
@pytest.mark.parametrize("nonnegative", [False, True])
def test_objective_never_increases(mixture_penalty, nonnegative):
    X, y = _data()
    model = tnbayes.FeatureLearningKM(rank=4, num_basis=4, mixture_penalty=mixture_penalty, nonnegative=nonnegative,
                                      max_sweeps=6).fit(X, y)
    history = np.array(model.objective_history_)
    assert len(history) == 2 * 6  # after every core sweep and every λ update
    assert np.all(np.diff(history) <= 1e-9 * abs(history[0]))
    if nonnegative:
        assert float(model.feature_weights_.min()) >= 0
    if mixture_penalty == "fixed_norm":
        assert float(model.feature_weights_.norm()) <= 1 + 1e-9


def test_single_family_without_learning_is_the_quantized_cpd_model():
    """FL with one period and λ fixed at 1 is the engine's quantized CPD model with raw features and penalty α."""
    from tnbayes.basis import FourierPolynomialFeatures

    X, y = _data(150, 2)
    fl = tnbayes.FeatureLearningKM(rank=3, num_basis=8, periods=[3.0], mixture_penalty="none", initial_weights="ones",
                                   penalty=0.05, max_sweeps=5, uncertainty="none", normalize_features=False).fit(X, y)
    Xs = fl.x_scaler_.transform(torch.tensor(X))  # [0, 1]
    assert float(Xs.min()) == 0.0 and float(Xs.max()) == 1.0
    engine = CPDALS(FourierPolynomialFeatures(2, 8, "fourier", 3.0, quantized=True, normalize=False), Xs,
                    fl.y_scaler_.transform(torch.tensor(y)), 3, 0.05, seed=0)
    engine.run(5, tol=0.0)
    expected = fl.y_scaler_.inverse_transform(engine.predict(Xs).real)
    np.testing.assert_allclose(fl.predict(X), expected.numpy(), rtol=1e-9, atol=1e-9)


def test_l1_sparsifies_and_plot_and_importances():
    X, y = _data()
    model = tnbayes.FeatureLearningKM(rank=4, num_basis=4, mixture_penalty_strength=5.0, max_sweeps=5).fit(X, y)
    assert 0 < len(model.active_families_) < len(model.periods_)
    assert set(model.feature_importances()) == set(model.periods_)
    ax = model.plot_feature_weights()
    assert len(ax.patches) == len(model.periods_)


def test_fl_fits_and_is_calibrated_on_smooth_data():
    X, y = _data(400, 3, seed=1)
    Xtest, ytest = _data(300, 3, seed=2)
    Xtest = np.clip(Xtest, X.min(0), X.max(0))
    model = tnbayes.FeatureLearningKM(num_basis=4).fit(X, y)  # default rank from N
    report = tnbayes.metrics.evaluate(model.posterior(Xtest), ytest)
    assert report["rmse"] < 0.2
    assert 0.85 <= report["coverage_95"] <= 0.995


def test_cross_validation_baseline_picks_a_period_from_the_set():
    X, y = _data(120, 2)
    best, table, seconds = cross_validate_period(X, y, [2.0, 25.0, 600.0], rank=3, num_basis=4, max_sweeps=3)
    assert best in (2.0, 25.0, 600.0) and set(table) == {2.0, 25.0, 600.0}
    assert table[best] == min(table.values()) and seconds > 0
    with pytest.raises(ValueError, match="folds"):
        cross_validate_period(X, y, [2.0], folds=1)


def test_bad_parameters_are_rejected():
    X, y = _data(60, 2)
    for kwargs, match in [({"mixture_penalty": "lasso"}, "mixture_penalty"), ({"periods": [0.5]}, "periods"),
                          ({"periods": []}, "periods"), ({"penalty": -1.0}, "penalty"), ({"max_sweeps": 0}, "max_sweeps"),
                          ({"initial_weights": [1.0]}, "initial_weights"), ({"rank": 0}, "rank")]:
        with pytest.raises(ValueError, match=match):
            tnbayes.FeatureLearningKM(**kwargs).fit(X, y)
    model = tnbayes.FeatureLearningKM(rank=2, num_basis=2, periods=[2.0], max_sweeps=2, out_of_box="raise").fit(X, y)
    with pytest.raises(ValueError, match="period"):
        model.predict(np.full((1, 2), 50.0))  # farther than θ/2 from the centre of the [0, 1] training range
    with pytest.raises(ValueError, match="out_of_box"):
        tnbayes.FeatureLearningKM(out_of_box="wrap").fit(X, y)


def test_save_load_round_trip(tmp_path):
    X, y = _data(80, 2)
    model = tnbayes.FeatureLearningKM(rank=2, num_basis=4, max_sweeps=3).fit(X, y)
    model.save(tmp_path / "fl.pt")
    loaded = tnbayes.load_model(tmp_path / "fl.pt")
    a, b = model.posterior(X[:10]), loaded.posterior(X[:10])
    torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=0)
    torch.testing.assert_close(a.variance, b.variance, rtol=0, atol=0)
    torch.testing.assert_close(loaded.feature_weights_, model.feature_weights_)


def test_old_parameter_names_warn_and_fit_the_same():
    X, y = _data(80, 2)
    common = dict(rank=2, num_basis=4, max_sweeps=3)
    new = tnbayes.FeatureLearningKM(penalty=1e-4, mixture_penalty_strength=0.5, mixture_penalty="l2", **common).fit(X, y)
    with pytest.warns(FutureWarning) as caught:
        old = tnbayes.FeatureLearningKM(alpha=1e-4, beta=0.5, regularization="l2", **common).fit(X, y)
    assert {str(w.message).split("'")[3] for w in caught} == {"penalty", "mixture_penalty_strength", "mixture_penalty"}
    assert (old.penalty, old.mixture_penalty_strength, old.mixture_penalty) == (1e-4, 0.5, "l2")
    np.testing.assert_array_equal(old.predict(X), new.predict(X))
    with pytest.warns(FutureWarning, match="penalty_"):
        assert old.alpha_ == old.penalty_ == 1e-4
    from tnbayes.models import fl

    with pytest.warns(FutureWarning, match="DEFAULT_PENALTY"):
        assert fl.DEFAULT_ALPHA == fl.DEFAULT_PENALTY


def test_files_saved_with_the_old_names_still_load(tmp_path):
    from tests.cpd_problems import rewrite_as_before_renames

    X, y = _data(80, 2)
    model = tnbayes.FeatureLearningKM(rank=2, num_basis=4, max_sweeps=3, penalty=1e-4, mixture_penalty="l2").fit(X, y)
    model.save(tmp_path / "fl.pt")
    rewrite_as_before_renames(tmp_path / "fl.pt", {"alpha": "penalty", "beta": "mixture_penalty_strength",
                                                   "regularization": "mixture_penalty"}, {"alpha_": "penalty_"})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        loaded = tnbayes.load_model(tmp_path / "fl.pt")
    assert (loaded.penalty, loaded.mixture_penalty, loaded.penalty_) == (1e-4, "l2", 1e-4)
    torch.testing.assert_close(loaded.posterior(X[:10]).mean, model.posterior(X[:10]).mean, rtol=0, atol=0)


def test_epochs_is_the_old_name_of_max_sweeps(tmp_path):
    X, y = _data(80, 2)
    new = tnbayes.FeatureLearningKM(rank=2, num_basis=4, max_sweeps=3).fit(X, y)
    with pytest.warns(FutureWarning, match="'epochs' was renamed 'max_sweeps'"):
        old = tnbayes.FeatureLearningKM(rank=2, num_basis=4, epochs=3).fit(X, y)
    assert old.max_sweeps == 3 and old.n_iter_ == new.n_iter_ == 3
    np.testing.assert_array_equal(old.predict(X), new.predict(X))
