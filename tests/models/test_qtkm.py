"""QTKM / TKM: the complex ↔ real equivalence, ALS against dense ridge regression and exact KRR, Laplace variances
against a dense Bayesian computation, persistence, bad input (the quantization itself: tests/basis/test_quantized.py)."""

import math

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis import FourierPolynomialFeatures, fourier_features
from tests.cpd_problems import qtkm_data as _regression


def _inputs(n=40, seed=0):
    return torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 0.5


# ---------------------------------------------------------------- complex least squares = a real ridge regression
def _dense_complex_ridge(phi, y, penalty):
    gram = phi.conj().T @ phi + penalty * torch.eye(phi.shape[1], dtype=phi.dtype)
    return torch.linalg.solve(gram, phi.conj().T @ y.to(phi.dtype))


def _stacked_real_ridge(phi, y, penalty):
    """Ridge on [[Re Φ, −Im Φ], [Im Φ, Re Φ]] with targets [y; 0]: the realified complex problem."""
    C, S = phi.real, phi.imag
    design = torch.cat([torch.cat([C, -S], 1), torch.cat([S, C], 1)], 0)
    targets = torch.cat([y, torch.zeros_like(y)])
    gram = design.T @ design + penalty * torch.eye(design.shape[1], dtype=design.dtype)
    return torch.linalg.solve(gram, design.T @ targets), gram


def test_complex_fit_equals_real_stacked_formulation():
    x = _inputs(60, seed=3)
    y = torch.sin(6 * x) + 0.3 * x
    phi = fourier_features(x, 8, 1.5)
    w = _dense_complex_ridge(phi, y, 0.1)
    v, _ = _stacked_real_ridge(phi, y, 0.1)
    torch.testing.assert_close(torch.cat([w.real, w.imag]), v, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close((phi @ w).real, phi.real @ v[:8] - phi.imag @ v[8:], rtol=1e-10, atol=1e-10)


def test_tkm_single_input_is_exact_ridge_with_exact_posterior_variance():
    """D = 1 unquantized: one ALS core update is the exact ridge solution; the Laplace variance is exact."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 4, size=(80, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(80)
    model = tnbayes.TKM(rank=1, num_basis=10, period=1.5, penalty=1e-3, noise_variance=0.02, max_sweeps=1,
                        normalize_y=False, uncertainty="last_core").fit(X, y)
    Xs = model.x_scaler_.transform(torch.as_tensor(X))
    phi = fourier_features(Xs[:, 0], 10, 1.5) / math.sqrt(10)  # the model's normalised features
    penalty = 1e-3 * 80
    w = _dense_complex_ridge(phi, torch.as_tensor(y), penalty)
    torch.testing.assert_close(model.weight_tensor(), w, rtol=1e-8, atol=1e-10)
    X_test = np.linspace(0.1, 3.9, 25)[:, None]
    post = model.posterior(X_test, observation_noise=False)
    phi_test = fourier_features(model.x_scaler_.transform(torch.as_tensor(X_test))[:, 0], 10, 1.5) / math.sqrt(10)
    torch.testing.assert_close(post.mean, (phi_test @ w).real, rtol=1e-8, atol=1e-10)
    # Bayesian reading of the stacked real problem: cov = σ²(ÃᵀÃ + λI)⁻¹, Re f(x) = [Re ψ, −Im ψ]·[a; b]
    _, gram = _stacked_real_ridge(phi, torch.as_tensor(y), penalty)
    row = torch.cat([phi_test.real, -phi_test.imag], 1)
    variance = 0.02 * (row * torch.linalg.solve(gram, row.T).T).sum(1)
    torch.testing.assert_close(post.variance, variance, rtol=1e-8, atol=1e-12)


def test_qtkm_at_full_rank_matches_exact_krr():
    """A rank-sufficient quantized CPD converges to exact KRR with the same λ and P (3 cores of size 2)."""
    X, y = _regression(n=120, d=1, seed=2)
    penalty, period = 1e-3, 1.5
    model = tnbayes.QTKM(rank=4, num_basis=8, period=period, penalty=penalty, max_sweeps=300, tol=1e-14,
                         normalize_y=False).fit(X, y)
    Xs = model.x_scaler_.transform(torch.as_tensor(X))
    features = FourierPolynomialFeatures(1, 8, "fourier", period, quantized=False)
    kernel = features.kernel(Xs, Xs)
    alpha = torch.linalg.solve(kernel + 120 * penalty * torch.eye(120, dtype=kernel.dtype),
                               torch.as_tensor(y).to(kernel.dtype))
    X_test = np.linspace(-0.9, 0.9, 30)[:, None]
    Xt = model.x_scaler_.transform(torch.as_tensor(X_test))
    expected = (features.kernel(Xt, Xs) @ alpha).real
    np.testing.assert_allclose(model.predict(X_test), expected.numpy(), atol=1e-6)


# ---------------------------------------------------------------- hyper-parameters


@pytest.mark.parametrize("cls", [tnbayes.QTKM, tnbayes.TKM])
def test_default_fit_is_good_and_calibrated(cls):
    X, y = _regression(n=400, d=2, seed=4, noise=0.1)
    X_test, y_test = _regression(n=400, d=2, seed=5, noise=0.1)
    model = cls().fit(X, y)
    report = tnbayes.metrics.evaluate(model.posterior(X_test * 0.95), y_test)
    assert report["rmse"] < 0.15
    assert 0.85 < report["coverage_95"] <= 1.0
    assert model.hyperparameter_source_.startswith("3-fold CV")
    assert model.rank_search_[-1]["rank"] == model.rank_


def test_polynomial_features_and_non_power_of_two_basis():
    X, y = _regression(n=150, d=2, seed=6)
    poly = tnbayes.QTKM(rank=6, num_basis=8, feature_map="polynomial").fit(X, y)
    assert poly.period_ is None and not poly.factors_.is_complex()
    assert poly.score(X, y) > 0.9
    twelve = tnbayes.QTKM(rank=6, num_basis=12).fit(X, y)
    assert [c.shape[0] for c in twelve.cores()] == [2, 2, 3, 2, 2, 3]
    assert twelve.core_choleskys_.shape == (6, 18, 18)
    post = twelve.posterior(X[:20])
    assert torch.all(post.variance > twelve.noise_variance_ * twelve.y_scaler_.scale_**2 * 0.999)


# ---------------------------------------------------------------- persistence and bad input
def test_save_load_round_trip(tmp_path):
    X, y = _regression(n=120, d=2)
    model = tnbayes.QTKM(rank=5, num_basis=12, period=2.0, penalty=1e-3).fit(X, y)
    path = tmp_path / "qtkm.pt"
    model.save(path)
    loaded = tnbayes.load_model(path)
    assert isinstance(loaded, tnbayes.QTKM)
    a, b = model.posterior(X[:30]), loaded.posterior(X[:30])
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)


def test_bad_input_gets_clear_errors():
    X, y = _regression(n=60, d=2)
    with pytest.raises(tnbayes.NotFittedError, match="fit"):
        tnbayes.QTKM().posterior(X)
    with pytest.raises(ValueError, match="num_basis"):
        tnbayes.QTKM(num_basis=1).fit(X, y)
    with pytest.raises(ValueError, match="period"):
        tnbayes.QTKM(period=0.8).fit(X, y)
    with pytest.raises(ValueError, match="feature_map"):
        tnbayes.QTKM(feature_map="wavelet").fit(X, y)
    model = tnbayes.QTKM(rank=2, period=1.25, penalty=1e-2, out_of_box="raise").fit(X, y)
    with pytest.raises(ValueError, match="longer period"):
        model.posterior(X * 1.5)  # scaled |x| ≈ 0.75 > P/2
    with pytest.raises(ValueError, match="NaN|nan|finite"):
        model.posterior(np.full((2, 2), np.nan))
    with pytest.raises(ValueError):
        model.posterior(X[:, :1])


def test_weight_tensor_dim_is_deprecated_and_ignored():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 4, size=(40, 1))
    model = tnbayes.TKM(rank=1, num_basis=8, period=1.5, penalty=1e-3, max_sweeps=1).fit(X, np.sin(2 * X[:, 0]))
    with pytest.warns(FutureWarning, match="dim is ignored"):
        ignored = model.weight_tensor(0)
    torch.testing.assert_close(ignored, model.weight_tensor(), rtol=0, atol=0)


# ---------------------------------------------------------------- two-valued (one-hot) columns
def _one_hot_mix(n, seed):
    """Two numeric inputs and a four-level category one-hot coded; the category shifts y additively."""
    rng = np.random.default_rng(seed)
    numeric, category = rng.standard_normal((n, 2)), rng.integers(0, 4, n)
    X = np.hstack([numeric, np.eye(4)[category]])
    return X, np.sin(3 * numeric[:, 0]) + 0.5 * numeric[:, 1] ** 2 + 0.5 * category + 0.1 * rng.standard_normal(n)


def test_two_valued_columns_get_the_width_their_cross_validation_chooses():
    """The width of the one-hot columns is the argmin of the same CV run on the narrowed subsample by hand (the
    independent reference), the scaler maps their 0/1 to ±width/2, and the narrowed fit predicts better than the
    paper's common width: at full width the period-3 kernel decorrelates the four categories, each fitted alone."""
    from tnbayes.selection.cross_validation import select_krr_hyperparameters

    X, y = _one_hot_mix(300, seed=0)
    X_test, y_test = _one_hot_mix(500, seed=1)
    model = tnbayes.TKM().fit(X, y)
    full = tnbayes.TKM(binary_width_grid=(1.0,)).fit(X, y)
    assert model.binary_columns_ == [2, 3, 4, 5] and full.binary_width_ == 1.0
    Xs = full.x_scaler_.transform(torch.tensor(X))
    ys = full.y_scaler_.transform(torch.tensor(y))
    scores = {1.0: full.krr_selection_["cv_mse"]}
    for width in (0.125, 0.03125):
        scale = torch.tensor([1.0, 1.0] + [width] * 4, dtype=torch.float64)
        scores[width] = select_krr_hyperparameters(Xs * scale, ys, num_basis=16, periods=[full.period_]).cv_mse
    assert model.binary_width_ == min(scores, key=scores.get) != 1.0
    assert model.krr_selection_["cv_mse"] == pytest.approx(scores[model.binary_width_], rel=1e-12)
    scaled = model.x_scaler_.transform(torch.tensor(X))
    torch.testing.assert_close(scaled[:, 2:].unique(), torch.tensor([-0.5, 0.5], dtype=torch.float64)
                               * model.binary_width_)
    torch.testing.assert_close(scaled[:, :2], Xs[:, :2])
    narrow = tnbayes.metrics.evaluate(model.posterior(X_test), y_test)["rmse"]
    common = tnbayes.metrics.evaluate(full.posterior(X_test), y_test)["rmse"]
    assert narrow < 0.8 * common


def test_two_valued_columns_survive_save_load_and_chunked_fits(tmp_path):
    from tnbayes.data import ChunkedData

    X, y = _one_hot_mix(300, seed=2)
    kwargs = dict(rank=4, max_sweeps=3, tol=0.0, noise_variance=0.01, penalty=1e-4)
    model = tnbayes.QTKM(**kwargs).fit(X, y)
    assert model.binary_width_ < 1.0
    streamed = tnbayes.QTKM(**kwargs).fit(ChunkedData.from_arrays(X, y, 64))
    assert streamed.binary_width_ == model.binary_width_ and streamed.period_ == model.period_
    torch.testing.assert_close(streamed.posterior(X[:50]).mean, model.posterior(X[:50]).mean, rtol=1e-7, atol=1e-9)
    path = tmp_path / "qtkm_binary.pt"
    model.save(path)
    loaded = tnbayes.load_model(path)
    assert torch.equal(loaded.posterior(X[:50]).mean, model.posterior(X[:50]).mean)
    assert loaded.binary_width_ == model.binary_width_ and loaded.binary_columns_ == model.binary_columns_


def test_given_penalty_and_period_keep_the_width_or_take_a_given_one():
    from tnbayes.selection.cross_validation import two_valued_columns

    X, y = _one_hot_mix(200, seed=3)
    fitted = tnbayes.QTKM(rank=4, max_sweeps=3, tol=0.0, noise_variance=0.01).fit(X, y)
    given = dict(rank=4, max_sweeps=3, tol=0.0, noise_variance=0.01, penalty=fitted.penalty_, period=fitted.period_)
    assert tnbayes.QTKM(**given).fit(X, y).binary_width_ == 1.0  # no CV, no width chosen
    again = tnbayes.QTKM(**given, binary_width_grid=(fitted.binary_width_,)).fit(X, y)
    assert again.binary_width_ == fitted.binary_width_ < 1.0
    assert torch.equal(again.factors_, fitted.factors_)
    # a sample whose two values of a column are not the data's extremes (a rare third value) does not count
    sample = torch.tensor([[0.0, 1.0], [1.0, 2.0], [0.0, 1.0]])
    assert two_valued_columns(sample) == [0, 1]
    assert two_valued_columns(sample, torch.tensor([[0.0, 1.0], [1.0, 3.0]])) == [0]


def test_without_two_valued_columns_nothing_changes():
    X, y = _regression(n=200, d=3, seed=7)
    default = tnbayes.QTKM(rank=6, max_sweeps=4, tol=0.0).fit(X, y)
    paper = tnbayes.QTKM(rank=6, max_sweeps=4, tol=0.0, binary_width_grid=(1.0,)).fit(X, y)
    assert default.binary_columns_ == [] and default.binary_width_ == 1.0
    assert torch.equal(default.factors_, paper.factors_)
    with pytest.raises(ValueError, match="binary_width_grid"):
        tnbayes.QTKM(binary_width_grid=(1.0, 2.0)).fit(X, y)


def test_a_float32_fit_whose_random_start_vanishes_starts_from_the_mean_features():
    """In float32, 20 inputs are 80 quantized modes: the random starting cores' products underflow, and from them ALS
    stayed at W = 0 and the model predicted the mean of y (with a warning). It now starts from each mode's mean
    feature, says so, and learns y about as well as the float64 fit, which keeps the random start."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 20))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.05 * rng.standard_normal(200)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        single = tnbayes.QTKM(rank=4, max_sweeps=3, dtype=torch.float32).fit(X, y)
        double = tnbayes.QTKM(rank=4, max_sweeps=3).fit(X, y)
    assert any("mean feature" in line and "float32" in line for line in single.fit_report_)
    assert not any("mean feature" in line for line in double.fit_report_)
    assert double.score(X, y) > 0.5 and single.score(X, y) > double.score(X, y) - 0.1


def test_a_fit_left_at_zero_names_the_underflow_and_float64():
    """Where every core stays zero (here: ALS given float32 random cores whose products underflow), the mean-only
    warning names the start, the number of modes and the remedy. A fit no longer reaches this state on these rows, so
    the check is called directly on that engine (a real fit's mean-only warning: tests/models/test_cpd.py)."""
    from sklearn.exceptions import ConvergenceWarning

    from tnbayes.basis import FourierPolynomialFeatures
    from tnbayes.inference import CPDALS
    from tnbayes.tensors import random_cpd

    generator = torch.Generator().manual_seed(0)
    X = 2 * torch.rand(200, 20, generator=generator) - 1
    y = torch.sin(3 * X[:, 0]) + X[:, 1]
    features = FourierPolynomialFeatures(20, 16, "fourier", 4.0, quantized=True)
    cores = random_cpd(features.mode_sizes, 4, generator=generator, dtype=torch.complex64)
    engine = CPDALS(features, X, y - y.mean(), 4, 1.0, factors=cores)
    engine.run(2)
    assert all(not bool(core.any()) for core in engine.factors)
    model = tnbayes.QTKM(rank=4)
    model.effective_dof_, model.fit_report_ = 0.0, []
    with pytest.warns(ConvergenceWarning, match=r"predicts about the mean.*Every core is zero.*\(given\) over its 80 "
                                                r"modes.*float32.*dtype=torch.float64"):
        model._warn_if_mean_only(engine, features.num_modes, residual=1.0, reference_noise=0.01)
