"""CPD kernel machine (T-KRR): the full-rank posterior against the dense Hilbert GP, hyper-parameters, rank search,
Laplace variants, persistence, classification (the engine's own tests are in tests/inference/)."""

import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tests.cpd_problems import cpd_data as _data


# ---------------------------------------------------------------- the estimator
def _fixed(**kwargs):
    base = dict(lengthscale=[0.7, 0.9], outputscale=1.0, noise_variance=0.02, c=2.5, max_sweeps=300, tol=1e-15)
    base.update(kwargs)
    return base


def test_full_rank_posterior_equals_dense_hilbert_gp():
    X, y = _data(300, 2)
    M = 12
    cpd = tnbayes.CPDKernelMachine(rank=M, num_basis=M, uncertainty="last_core", **_fixed()).fit(X, y)
    dense = tnbayes.HilbertGP(num_basis=M, structure="product", mean_constant=0.0, lengthscale=[0.7, 0.9],
                              outputscale=1.0, noise_variance=0.02, c=2.5).fit(X, y)
    Xt = np.random.default_rng(5).uniform(-1, 1, size=(80, 2))
    pc, pd = cpd.posterior(Xt), dense.posterior(Xt)
    scale = float(np.std(y))
    assert float((pc.mean - pd.mean).abs().max()) / scale < 1e-6
    np.testing.assert_allclose(pc.variance.numpy(), pd.variance.numpy(), rtol=1e-6)
    full_c = cpd.posterior(Xt[:7], full_covariance=True, observation_noise=False).covariance
    full_d = dense.posterior(Xt[:7], full_covariance=True, observation_noise=False).covariance
    np.testing.assert_allclose(full_c.numpy(), full_d.numpy(), atol=1e-8 * scale**2)


def test_low_rank_fit_estimates_hyperparameters_and_is_calibrated():
    X, y = _data(400, 3, seed=2)
    Xt, yt = _data(300, 3, seed=3)
    model = tnbayes.CPDKernelMachine(rank=5).fit(X, y)
    assert model.hyperparameter_source_.startswith("marginal likelihood")
    # λ = σ²/σ_f² with the GP's σ²; the predictive noise is never below it
    assert model.penalty_ * model.outputscale_ <= model.noise_variance_ + 1e-12
    metrics = tnbayes.metrics.evaluate(model.posterior(Xt), yt)
    assert metrics["rmse"] < 0.13  # noise std is 0.1
    assert 0.9 <= metrics["coverage_95"] <= 0.99
    # the residual noise estimate agrees with the marginal-likelihood one
    assert model.residual_noise_variance_ == pytest.approx(model.noise_variance_, rel=0.3)


def test_all_cores_variance_exceeds_last_core_variance():
    X, y = _data(200, 3)
    kwargs = dict(rank=3, num_basis=8, lengthscale=0.6, outputscale=1.0, noise_variance=0.01, seed=0)
    last = tnbayes.CPDKernelMachine(uncertainty="last_core", **kwargs).fit(X, y)
    every = tnbayes.CPDKernelMachine(uncertainty="all_cores", **kwargs).fit(X, y)
    none = tnbayes.CPDKernelMachine(uncertainty="none", **kwargs).fit(X, y)
    Xt = _data(50, 3, seed=9)[0]
    v_last = last.posterior(Xt, observation_noise=False).variance
    v_all = every.posterior(Xt, observation_noise=False).variance
    torch.testing.assert_close(last.posterior(Xt).mean, every.posterior(Xt).mean)
    assert bool((v_all >= v_last - 1e-12).all()) and float(v_all.sum()) > float(v_last.sum())
    assert float(none.posterior(Xt, observation_noise=False).variance.abs().max()) == 0.0


def test_diagonal_penalty_form_and_given_penalty_use_residual_noise():
    X, y = _data(300, 2)
    kwargs = dict(rank=4, num_basis=10, lengthscale=0.6, penalty=1e-3, penalty_form="diagonal")
    model = tnbayes.CPDKernelMachine(noise_estimate="training", **kwargs).fit(X, y)
    assert model.hyperparameter_source_ == "given"
    assert model.noise_variance_ == model.residual_noise_variance_
    assert 0.005 < model.noise_std < 0.2
    # the default: the noise the held-out rows call for, close to the residual estimate on a well-specified fit
    held = tnbayes.CPDKernelMachine(**kwargs).fit(X, y)
    assert held.noise_variance_ == held.held_out_noise_variance_
    assert 0.5 < held.noise_variance_ / model.noise_variance_ < 2.0


def test_save_load_round_trip(tmp_path):
    X, y = _data(150, 2)
    model = tnbayes.CPDKernelMachine(rank=3, num_basis=8, lengthscale=0.6, outputscale=1.0, noise_variance=0.01).fit(X, y)
    model.save(tmp_path / "cpd.pt")
    loaded = tnbayes.load_model(tmp_path / "cpd.pt")
    Xt = _data(20, 2, seed=4)[0]
    a, b = model.posterior(Xt), loaded.posterior(Xt)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)
    assert loaded.history_ == model.history_


def test_bad_input_messages():
    X, y = _data(60, 2)
    with pytest.raises(ValueError, match="rank"):
        tnbayes.CPDKernelMachine(rank=0).fit(X, y)
    with pytest.raises(ValueError, match="uncertainty"):
        tnbayes.CPDKernelMachine(uncertainty="full").fit(X, y)
    with pytest.raises(ValueError, match="lengthscale has 3 values"):
        tnbayes.CPDKernelMachine(lengthscale=[1, 2, 3]).fit(X, y)
    with pytest.raises(tnbayes.NotFittedError, match="fit"):
        tnbayes.CPDKernelMachine().posterior(X)
    model = tnbayes.CPDKernelMachine(rank=2, num_basis=6, lengthscale=0.5, noise_variance=0.01, outputscale=1.0, c=1.2,
                                     out_of_box="raise").fit(X, y)
    with pytest.raises(ValueError, match="larger boundary factor c"):
        model.predict(np.array([[10.0, 0.0]]))


# ---------------------------------------------------------------- classification
def test_classifier_on_string_labels():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(400, 2))
    labels = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 < 0.5, "inside", "outside")
    clf = tnbayes.CPDKernelClassifier(rank=4).fit(X[:300], labels[:300])
    assert list(clf.classes_) == ["inside", "outside"]
    assert clf.score(X[300:], labels[300:]) > 0.9
    proba = clf.predict_proba(X[300:])
    assert proba.shape == (100, 2) and np.allclose(proba.sum(1), 1.0)
    # probabilities agree with the predicted labels
    assert np.all((proba[:, 1] > 0.5) == (clf.predict(X[300:]) == "outside"))
    with pytest.raises(ValueError, match="exactly two classes"):
        tnbayes.CPDKernelClassifier().fit(X[:30], np.arange(30) % 3)


def test_classifier_paper_hyperparameters():
    X = np.random.default_rng(0).uniform(0, 4, size=(100, 3)) * np.array([1.0, 2.0, 0.5])
    params = tnbayes.CPDKernelClassifier.paper_hyperparameters(X)
    assert params["penalty"] == 1e-5 and len(params["lengthscale"]) == 3
    # in [0, 1]-scaled units the lengthscale is the mean column std
    X01 = (X - X.min(0)) / (X.max(0) - X.min(0))
    ell0 = X01.std(0).mean()
    np.testing.assert_allclose(np.array(params["lengthscale"]) * X.std(0) / (X.max(0) - X.min(0)), ell0)


def test_automatic_rank_stops_at_first_rank_matching_the_gp_noise():
    from tnbayes.models.cpd import AUTO_RANK_TOLERANCE, AUTO_RANKS

    X, y = _data(300, 3, seed=4)
    model = tnbayes.CPDKernelMachine(max_sweeps=4, noise_estimate="training").fit(X, y)
    tried = [entry["rank"] for entry in model.rank_search_]
    assert tried == list(AUTO_RANKS[: len(tried)]) and model.rank_ == tried[-1]
    ml_noise = model.penalty_ * model.outputscale_
    last = model.rank_search_[-1]["residual_noise_variance"]
    assert last <= AUTO_RANK_TOLERANCE * ml_noise or model.rank_ == AUTO_RANKS[-1]
    assert all(e["residual_noise_variance"] > AUTO_RANK_TOLERANCE * ml_noise for e in model.rank_search_[:-1])
    assert model.noise_variance_ == pytest.approx(max(ml_noise, model.residual_noise_variance_))


def test_classifier_save_load_keeps_labels(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(120, 2))
    labels = np.where(X[:, 0] > 0, "right", "left")
    clf = tnbayes.CPDKernelClassifier(rank=2, num_basis=6, lengthscale=0.7, penalty=1e-3).fit(X, labels)
    clf.save(tmp_path / "clf.pt")
    loaded = tnbayes.load_model(tmp_path / "clf.pt")
    assert list(loaded.predict(X[:10])) == list(clf.predict(X[:10]))
    np.testing.assert_array_equal(loaded.predict_proba(X[:10]), clf.predict_proba(X[:10]))


def test_chunk_size_and_tol_are_validated():
    X, y = _data(40, 2)
    with pytest.raises(ValueError, match="chunk_size"):
        tnbayes.CPDKernelMachine(chunk_size=0, lengthscale=0.5, penalty=0.1).fit(X, y)
    with pytest.raises(ValueError, match="tol"):
        tnbayes.CPDKernelMachine(tol=float("nan"), lengthscale=0.5, penalty=0.1).fit(X, y)


def test_estimated_lengthscale_below_basis_resolution_is_raised():
    from tnbayes.basis import ApproximationWarning
    from tnbayes.basis import LENGTHSCALE_RESOLUTION

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(-1, 1, 200), rng.integers(0, 7, 200)])  # a discrete input
    y = np.sin(3 * X[:, 0]) + 0.3 * rng.standard_normal(200) * (X[:, 1] % 2)
    model = tnbayes.CPDKernelMachine(rank=3, num_basis=6, max_num_basis=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    c = model.box_half_width_ / model.data_half_range_
    shortest = LENGTHSCALE_RESOLUTION * c * model.data_half_range_ / model.num_basis_
    assert bool((model.lengthscale_ >= shortest - 1e-12).all())


def test_many_inputs_two_relevant_are_found_with_no_arguments():
    """32 inputs, 2 of which matter (the defaults issue): CPDKernelMachine() must not inherit a collapsed ML-II
    (RMSE = std(y)); it finds the two inputs and predicts well below std(y), with intervals that cover."""
    from tnbayes import metrics

    rng = np.random.default_rng(7)
    n, d = 300, 32
    X = rng.uniform(-1, 1, size=(n + 200, d))
    y = np.sin(3 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.standard_normal(n + 200)
    model = tnbayes.CPDKernelMachine().fit(X[:n], y[:n])
    scores = metrics.evaluate(model.posterior(X[n:]), y[n:])
    assert scores["rmse"] < 0.3 * y[n:].std()
    assert set(np.argsort(model.lengthscale_.numpy())[:2]) == {0, 1}
    assert 0.85 <= scores["coverage_95"] <= 1.0


def test_regularizer_is_a_deprecated_alias_of_penalty_form():
    X, y = _data(120, 2)
    kwargs = dict(rank=3, num_basis=6, lengthscale=0.6, penalty=1e-3, noise_estimate="training")
    new = tnbayes.CPDKernelMachine(penalty_form="diagonal", **kwargs).fit(X, y)
    with pytest.warns(FutureWarning, match="'regularizer' was renamed 'penalty_form'"):
        old = tnbayes.CPDKernelMachine(regularizer="diagonal", **kwargs).fit(X, y)
    assert old.penalty_form == "diagonal" and old.history_ == new.history_
    torch.testing.assert_close(old.posterior(X[:10]).mean, new.posterior(X[:10]).mean, rtol=0, atol=0)
    with pytest.raises(TypeError, match="pass only penalty_form"):
        tnbayes.CPDKernelMachine(regularizer="full", penalty_form="diagonal", **kwargs).fit(X, y)
    assert tnbayes.make_model("cpd_diag").penalty_form == "diagonal"


def test_factors_are_stacked_cores_and_files_with_3d_factors_still_load(tmp_path):
    from tests.cpd_problems import rewrite_as_before_renames

    X, y = _data(120, 2)
    model = tnbayes.CPDKernelMachine(rank=3, num_basis=6, lengthscale=0.6, penalty=1e-3, noise_variance=0.01,
                                     penalty_form="diagonal").fit(X, y)
    assert model.factors_.shape == (2 * 6, 3)  # (Σ_k M_k, R), as for QTKM and FL
    torch.testing.assert_close(torch.cat(model.cores()), model.factors_, rtol=0, atol=0)
    model.save(tmp_path / "cpd.pt")
    rewrite_as_before_renames(tmp_path / "cpd.pt", {"regularizer": "penalty_form"}, factors_shape=(2, 6, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the user passed no old name: no warning
        loaded = tnbayes.load_model(tmp_path / "cpd.pt")
    assert loaded.penalty_form == "diagonal" and loaded.factors_.shape == (12, 3)
    a, b = model.posterior(X[:10]), loaded.posterior(X[:10])
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)


def test_a_given_penalty_far_too_large_for_the_given_noise_warns_that_the_fit_predicts_the_mean():
    """λ = 10⁸ keeps W near 0 while the given noise (10⁻³, standardised) says y can be explained: the fit explains
    under 1% of yᵀy, warns, and points at the given penalty or noise; a sensible penalty learns y without it."""
    from sklearn.exceptions import ConvergenceWarning

    X, y = _data(120, 2)
    with pytest.warns(ConvergenceWarning, match=r"predicts about the mean of y\. Check a given penalty"):
        model = tnbayes.CPDKernelMachine(rank=2, max_sweeps=5, penalty=1e8, noise_variance=1e-3).fit(X, y)
    assert model.score(X, y) < 0.01
    assert any("predicts about the mean" in line for line in model.fit_report_)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tnbayes.CPDKernelMachine(rank=2, max_sweeps=5, penalty=1e-3, noise_variance=1e-3).fit(X, y).score(
            X, y) > 0.5
    assert not any("predicts about the mean" in str(w.message) for w in caught)
