"""CPD kernel machine (T-KRR): the ALS engine against dense computations, Laplace variances, classification."""

import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis import HilbertBasis
from tnbayes.basis import BasisFeatures
from tnbayes.inference import CPDALS, solve_spd
from tnbayes.tensors import cpd_norm_squared, cpd_to_dense, random_cpd


def _data(n=300, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1:]).prod(1) + 0.1 * rng.standard_normal(n)
    return X, y


def _features(d=2, m=8, ls=0.5):
    return BasisFeatures(HilbertBasis(m, L=[2.0] * d), [ls] * d)


# ---------------------------------------------------------------- tensors
def test_cpd_norm_and_dense_agree():
    factors = random_cpd([3, 4, 5], 2, generator=torch.Generator().manual_seed(0))
    dense = cpd_to_dense(factors)
    assert dense.shape == (3, 4, 5)
    manual = sum(torch.einsum("i,j,k->ijk", *(f[:, r] for f in factors)) for r in range(2))
    torch.testing.assert_close(dense, manual)
    assert float(cpd_norm_squared(factors)) == pytest.approx(float((dense**2).sum()), rel=1e-12)
    complex_factors = random_cpd([3, 2], 2, generator=torch.Generator().manual_seed(1), dtype=torch.complex128)
    assert float(cpd_norm_squared(complex_factors)) == pytest.approx(float(cpd_to_dense(complex_factors).abs().square().sum()))
    for f in factors:
        assert float(torch.linalg.norm(f)) == pytest.approx(1.0)


def test_basis_features_match_hilbert_basis():
    X, _ = _data(50, 3)
    basis = HilbertBasis(7, L=[1.5, 2.0, 2.5], center=[0.1, 0.0, -0.1])
    feats = BasisFeatures(basis, [0.3, 0.6, 0.9], kernel="matern52")
    ref = basis.features(torch.tensor(X), [0.3, 0.6, 0.9], kernel="matern52")
    for d in range(3):
        torch.testing.assert_close(feats.mode_features(torch.tensor(X), d)[0], ref[d])


# ---------------------------------------------------------------- ALS engine
@pytest.mark.parametrize("regularizer", ["full", "diagonal"])
@pytest.mark.parametrize("normalize", [True, False])
def test_objective_never_increases(regularizer, normalize):
    X, y = _data(200, 3)
    engine = CPDALS(_features(3, 6), torch.tensor(X), torch.tensor(y), 4, 0.05, regularizer=regularizer,
                    normalize_cores=normalize, seed=3)
    engine.run(8, tol=0.0)
    history = np.array(engine.history)
    assert len(history) > 20
    assert np.all(np.diff(history) <= 1e-10 * history[0]), np.diff(history).max()
    # the objective tracked from the normal equations equals a direct evaluation
    assert engine.objective() == pytest.approx(history[-1], rel=1e-9)


def test_full_rank_map_equals_dense_ridge_solution():
    X, y = _data(300, 2)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    feats = _features(2, 6)
    Z = feats.basis.features(Xt, [0.5, 0.5])
    Phi = (Z[0][:, :, None] * Z[1][:, None, :]).reshape(len(X), -1)
    lam = 0.02
    w = torch.linalg.solve(Phi.T @ Phi + lam * torch.eye(36, dtype=Phi.dtype), Phi.T @ yt)
    engine = CPDALS(feats, Xt, yt, 6, lam, seed=1)
    engine.run(200, tol=1e-15)
    assert float((engine.predict(Xt) - Phi @ w).abs().max()) < 1e-6
    assert float((cpd_to_dense(engine.factors).reshape(-1) - w).abs().max()) < 1e-6


def test_chunk_size_does_not_change_the_result():
    X, y = _data(257, 3)
    runs = []
    for chunk in (16, 100, 10_000):
        engine = CPDALS(_features(3, 5), torch.tensor(X), torch.tensor(y), 3, 0.1, chunk_size=chunk, seed=0)
        engine.run(4, tol=0.0)
        runs.append(torch.stack(engine.factors))
    for other in runs[1:]:
        torch.testing.assert_close(other, runs[0], rtol=1e-9, atol=1e-11)


def test_projection_cache_off_gives_the_same_fit():
    X, y = _data(120, 3)
    a = CPDALS(_features(3, 5), torch.tensor(X), torch.tensor(y), 3, 0.1, seed=0)
    b = CPDALS(_features(3, 5), torch.tensor(X), torch.tensor(y), 3, 0.1, seed=0, memory_budget=0)
    assert a.caches_projections and not b.caches_projections
    a.run(3, tol=0.0)
    b.run(3, tol=0.0)
    torch.testing.assert_close(torch.stack(a.factors), torch.stack(b.factors), rtol=1e-9, atol=1e-11)


def test_float32_engine_runs_and_tracks_float64():
    X, y = _data(200, 2)
    f64 = CPDALS(_features(2, 6), torch.tensor(X), torch.tensor(y), 3, 0.1, seed=0)
    f32 = CPDALS(_features(2, 6), torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32), 3, 0.1, seed=0)
    f64.run(5, tol=0.0)
    f32.run(5, tol=0.0)
    assert f32.factors[0].dtype == torch.float32
    diff = (f32.predict(torch.tensor(X, dtype=torch.float32)).double() - f64.predict(torch.tensor(X))).abs().max()
    assert float(diff) < 1e-3


def test_solve_spd_falls_back_to_jitter_and_rejects_indefinite():
    A = torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=torch.float64)  # singular PSD
    x, _, jitter = solve_spd(A, torch.tensor([1.0, 1.0], dtype=torch.float64))
    assert jitter > 0 and torch.isfinite(x).all()
    with pytest.raises(ValueError, match="not positive definite"):
        solve_spd(torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64), torch.ones(2, dtype=torch.float64))


def test_engine_rejects_bad_arguments():
    X, y = torch.zeros(5, 2, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
    with pytest.raises(ValueError, match="rank"):
        CPDALS(_features(), X, y, 0, 0.1)
    with pytest.raises(ValueError, match="regularizer"):
        CPDALS(_features(), X, y, 2, 0.1, regularizer="l1")
    with pytest.raises(ValueError, match="penalty"):
        CPDALS(_features(), X, y, 2, -1.0)
    with pytest.raises(MemoryError, match="Lower the rank"):
        CPDALS(_features(m=1000), X, y, 100_000, 0.1)


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


def test_diagonal_regularizer_and_given_penalty_use_residual_noise():
    X, y = _data(300, 2)
    kwargs = dict(rank=4, num_basis=10, lengthscale=0.6, penalty=1e-3, regularizer="diagonal")
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


class _FourierFeatures(tnbayes.inference.TensorProductFeatures):
    """exp(i 2π k x / P), k = −M/2 … M/2 − 1, one mode per input, P components with different periods."""

    def __init__(self, num_dims, m, periods):
        self.mode_sizes = [m] * num_dims
        self.num_components = len(periods)
        self.is_complex = True
        self.periods = periods
        self.k = torch.arange(-m // 2, m // 2, dtype=torch.float64)

    def mode_features(self, X, mode):
        x = X[:, mode].to(torch.float64)
        return torch.stack([torch.exp(2j * torch.pi * x[:, None] * self.k / p) for p in self.periods])


def _dense_design(features, X, weights):
    """Σ_p c_p (Φ^p_1 ⊙ … row-wise Kronecker) for two modes → (N, M²)."""
    parts = []
    for p in range(features.num_components):
        a, b = features.mode_features(X, 0)[p], features.mode_features(X, 1)[p]
        parts.append(weights[p] * (a[:, :, None] * b[:, None, :]).reshape(len(X), -1))
    return sum(parts)


@pytest.mark.parametrize("periods, weights", [((3.0,), (1.0,)), ((3.0, 5.0), (0.7, -0.4))])
def test_complex_and_mixture_full_rank_match_dense_complex_ridge(periods, weights):
    X, y = _data(200, 2)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    feats = _FourierFeatures(2, 6, periods)
    lam = 0.05
    engine = CPDALS(feats, Xt, yt, 6, lam, component_weights=weights, seed=2)
    engine.run(300, tol=1e-15)
    A = _dense_design(feats, Xt, weights)
    w = torch.linalg.solve(A.mH @ A + lam * torch.eye(36, dtype=A.dtype), A.mH @ yt.to(A.dtype))
    assert engine.factors[0].is_complex()
    assert float((engine.predict(Xt) - A @ w).abs().max()) < 1e-6
    assert np.all(np.diff(engine.history) <= 1e-10 * engine.history[0])
    # per-component predictions combine to the prediction
    comps = engine.component_predictions(Xt)
    torch.testing.assert_close(comps @ torch.tensor(weights, dtype=comps.dtype), engine.predict(Xt))


def test_complex_conditional_variance_matches_real_model():
    """Real features stored as complex give the same Laplace variance as the real model."""
    from tnbayes.inference import conditional_core_variance

    X, y = _data(100, 2)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    real = _features(2, 5)

    class AsComplex(tnbayes.inference.TensorProductFeatures):
        mode_sizes, num_components, is_complex = real.mode_sizes, 1, True

        def mode_features(self, X, mode):
            return real.mode_features(X, mode).to(torch.complex128)

    factors = random_cpd([5, 5], 2, generator=torch.Generator().manual_seed(0))
    a = CPDALS(real, Xt, yt, 2, 0.1, factors=factors, normalize_cores=False)
    b = CPDALS(AsComplex(), Xt, yt, 2, 0.1, factors=factors, normalize_cores=False)
    sa, sb = a.normal_equations(0), b.normal_equations(0)
    _, la, _ = solve_spd(sa.gram + 0.1 * sa.penalty, sa.rhs)
    _, lb, _ = solve_spd(sb.gram + 0.1 * sb.penalty, sb.rhs)
    va = conditional_core_variance(real, a.factors, 0, la, Xt[:20])
    vb = conditional_core_variance(AsComplex(), b.factors, 0, lb, Xt[:20])
    torch.testing.assert_close(va, vb.to(va.dtype))


def test_estimated_lengthscale_below_basis_resolution_is_raised():
    from tnbayes.basis import ApproximationWarning
    from tnbayes.models.cpd import LENGTHSCALE_RESOLUTION

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


class _GroupedFourier(_FourierFeatures):
    def mode_inputs(self):
        return list(range(len(self.mode_sizes)))


def _discrete_data(n, d, levels, seed=0):
    rng = np.random.default_rng(seed)
    X = np.stack([rng.integers(0, lv, n) / lv - 0.5 for lv in levels[:d]], axis=1)
    y = np.sin(3 * X).sum(1) + 0.1 * rng.standard_normal(n)
    return torch.tensor(X), torch.tensor(y)


@pytest.mark.parametrize("kind", ["hilbert", "quantized", "tkm", "mixture"])
def test_grouped_normal_equations_equal_per_row_accumulation(kind):
    """Accumulating per distinct input value is exact: every core's system equals the per-row one."""
    from tnbayes.basis import FourierPolynomialFeatures

    levels = [5, 12, 400]  # the last column is (nearly) continuous: left ungrouped under "auto"
    X, y = _discrete_data(600, 3, levels)
    weights = None
    if kind == "hilbert":
        feats = BasisFeatures(HilbertBasis(8, L=[1.2] * 3), lengthscale=0.4)
    elif kind == "quantized":
        feats = FourierPolynomialFeatures(3, 8, period=2.0, quantized=True)
    elif kind == "tkm":
        feats = FourierPolynomialFeatures(3, 8, period=2.0, quantized=False)
    else:
        feats, weights = _GroupedFourier(3, 6, (3.0, 5.0)), (0.7, -0.4)
    per_row = CPDALS(feats, X, y, 3, 0.1, component_weights=weights, seed=1, group_inputs=False)
    grouped = CPDALS(feats, X, y, 3, 0.1, component_weights=weights, seed=1, group_inputs="auto")
    assert per_row.grouped_modes == []
    assert 0 < len(grouped.grouped_modes) < feats.num_modes  # the 400-level column stays per row
    for mode in range(feats.num_modes):
        a, b = per_row.normal_equations(mode), grouped.normal_equations(mode)
        scale = float(a.gram.abs().max())
        assert float((a.gram - b.gram).abs().max()) < 1e-12 * scale
        assert float((a.rhs - b.rhs).abs().max()) < 1e-12 * max(1.0, float(a.rhs.abs().max()))
    per_row.run(4, tol=0.0)
    grouped.run(4, tol=0.0)
    for fa, fb in zip(per_row.factors, grouped.factors):
        torch.testing.assert_close(fa, fb, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(per_row.sweep_objectives, grouped.sweep_objectives, rtol=1e-10)
    # predictions on the training rows are gathered from per-value tables when grouped
    torch.testing.assert_close(grouped.predict(grouped.X), per_row.predict(per_row.X), rtol=1e-9, atol=1e-11)
    assert grouped.objective() == pytest.approx(per_row.objective(), rel=1e-10)


def test_group_inputs_is_validated():
    X, y = _discrete_data(50, 2, [3, 4])
    feats = BasisFeatures(HilbertBasis(4, L=[1.2] * 2), lengthscale=0.4)
    with pytest.raises(ValueError, match="group_inputs"):
        CPDALS(feats, X, y, 2, 0.1, group_inputs="yes")
    assert CPDALS(feats, X, y, 2, 0.1, group_inputs=True).grouped_modes == [0, 1]


def test_summed_core_variances_equal_per_core_design_solves():
    from tnbayes.basis import FourierPolynomialFeatures
    from tnbayes.inference import design_matrix, summed_core_variances

    X, y = _discrete_data(300, 3, [5, 12, 400])
    feats = FourierPolynomialFeatures(3, 8, period=2.0, quantized=True)
    engine = CPDALS(feats, X, y, 3, 0.1, seed=0)
    engine.run(2, tol=0.0)
    modes, chols, expected = [0, 4, 8], [], torch.zeros(50, dtype=torch.float64)
    for mode in modes:
        system = engine.normal_equations(mode)
        _, chol, _ = solve_spd(system.gram + 0.1 * system.penalty, system.rhs)
        chols.append(chol)
        design = design_matrix(feats, engine.factors, X[:50], mode)
        expected += torch.linalg.solve_triangular(chol, design.mH, upper=False).abs().square().sum(0)
    got = summed_core_variances(feats, engine.factors, modes, chols, X[:50], chunk_size=17)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("group_inputs", [False, "auto"])
def test_partial_products_give_the_same_sweeps(group_inputs):
    """Prefix/suffix products of the cached projections (O(K) per sweep) give the same cores as recomputing
    ⊙_{k≠d} for every update — with core normalisation, several components and partly grouped inputs."""
    from tnbayes.basis import FourierPolynomialFeatures
    from tnbayes.models.fl import PeriodMixtureFeatures

    X, y = _discrete_data(300, 3, [4, 50, 300])
    for feats, weights in ((FourierPolynomialFeatures(3, 8, period=2.0, quantized=True), None),
                           (PeriodMixtureFeatures(3, 8, (1.5, 3.0, 7.0), center=0.0), (0.6, 0.0, -0.3))):
        engines = []
        for keep in (False, True):
            engine = CPDALS(feats, X, y, 3, 0.05, component_weights=weights, seed=2, group_inputs=group_inputs)
            assert engine.caches_projections and engine.keeps_partial_products
            engine.keeps_partial_products = keep
            engine.run(3, tol=0.0)
            engine.set_component_weights((0.5, 0.2, 0.1) if weights else (1.0,))  # changes the active support
            engine.run(1, tol=0.0)
            engines.append(engine)
        for fa, fb in zip(engines[0].factors, engines[1].factors):
            torch.testing.assert_close(fa, fb, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(engines[0].history, engines[1].history, rtol=1e-10)


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
