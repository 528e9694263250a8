"""QTKM / TKM: exact quantization of the features, the complex ↔ real equivalence, ALS against dense ridge
regression and exact KRR, Laplace variances against a dense Bayesian computation, persistence, bad input."""

import math

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis import (
    fourier_features,
    fourier_frequencies,
    kron_rows,
    polynomial_features,
    quantized_factor_sizes,
    quantized_factors,
)
from tnbayes.basis import FourierPolynomialFeatures
from tnbayes.inference import CPDALS
from tnbayes.selection.cross_validation import DEFAULT_PENALTY_GRID, select_krr_hyperparameters


def _inputs(n=40, seed=0):
    return torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 0.5


def _regression(n=200, d=2, seed=0, noise=0.05):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + 0.5 * np.cos(2 * X[:, -1]) + noise * rng.standard_normal(n)
    return X, y


def _product_features(features: FourierPolynomialFeatures, X: torch.Tensor) -> torch.Tensor:
    """Dense Φ (n, Π_k M_k) of a tensor-product map, mode 0 varying fastest (kron_rows convention)."""
    return kron_rows([features.mode_features(X, k)[0] for k in range(features.num_modes)])


# ---------------------------------------------------------------- quantization is exact
@pytest.mark.parametrize("num_basis", [2, 7, 12, 16, 64, 90])
@pytest.mark.parametrize("kind", ["fourier", "polynomial"])
def test_kronecker_of_factors_reproduces_features(num_basis, kind):
    x = _inputs()
    factors = quantized_factors(x, num_basis, kind, period=1.5)
    assert [f.shape[1] for f in factors] == quantized_factor_sizes(num_basis)
    assert math.prod(quantized_factor_sizes(num_basis)) == num_basis
    full = fourier_features(x, num_basis, 1.5) if kind == "fourier" else polynomial_features(x, num_basis)
    assert full.shape == (x.numel(), num_basis)
    torch.testing.assert_close(kron_rows(factors), full, rtol=0, atol=1e-12)


def test_fourier_frequencies_and_power_of_two_factors():
    assert fourier_frequencies(16).tolist() == list(range(-8, 8))
    assert fourier_frequencies(5).tolist() == [-2, -1, 0, 1, 2]
    assert quantized_factor_sizes(64) == [2] * 6
    x = _inputs(5)
    # the paper's factor form for M = 2^K: exp(−iπxM/(KP))·[1, exp(i2πx2^{m−1}/P)]
    M, K, P = 16, 4, 2.0
    for m, factor in enumerate(quantized_factors(x, M, "fourier", P)):
        expected = torch.exp(-1j * math.pi * x * M / (K * P)).unsqueeze(-1) * torch.stack(
            [torch.ones_like(x), torch.exp(2j * math.pi * x * 2**m / P)], -1)
        torch.testing.assert_close(factor, expected.to(torch.complex128), rtol=0, atol=1e-13)


@pytest.mark.parametrize("kind", ["fourier", "polynomial"])
def test_feature_map_modes_and_kernel_match_dense_features(kind):
    X = torch.rand(30, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64) - 0.5
    quantized = FourierPolynomialFeatures(2, 8, kind, 1.5, quantized=True)
    plain = FourierPolynomialFeatures(2, 8, kind, 1.5, quantized=False)
    raw = FourierPolynomialFeatures(2, 8, kind, 1.5, quantized=True, normalize=False)
    scale = 8.0 if kind == "fourier" else 1.0  # only Fourier features are normalised
    torch.testing.assert_close(_product_features(raw, X) / scale, _product_features(plain, X), rtol=0, atol=1e-12)
    if kind == "fourier":  # normalised: k(x, x) = 1 for any D
        torch.testing.assert_close(plain.kernel(X, X).diagonal().real, torch.ones(30, dtype=torch.float64))
    assert quantized.mode_sizes == [2, 2, 2, 2, 2, 2] and plain.mode_sizes == [8, 8]
    torch.testing.assert_close(_product_features(quantized, X), _product_features(plain, X), rtol=0, atol=1e-12)
    phi = _product_features(plain, X)
    torch.testing.assert_close(plain.kernel(X, X[:7]), phi @ phi[:7].conj().T if kind == "fourier" else phi @ phi[:7].T,
                               rtol=1e-10, atol=1e-10)


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


def test_quantized_engine_solves_2r_unknowns_per_core():
    X = torch.rand(50, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 0.5
    y = torch.sin(4 * X[:, 0]) * X[:, 1]
    features = FourierPolynomialFeatures(3, 16, "fourier", 2.0, quantized=True)
    engine = CPDALS(features, X, y, 5, 1.0)
    assert features.num_modes == 12
    assert engine.normal_equations(0).gram.shape == (10, 10)
    engine.run(5)
    assert all(b <= a * (1 + 1e-9) for a, b in zip(engine.history, engine.history[1:]))


# ---------------------------------------------------------------- hyper-parameters
def test_krr_cross_validation_picks_a_sensible_period_and_penalty():
    X, y = _regression(n=240, d=2, seed=1, noise=0.1)
    Xs = torch.as_tensor(X) / 2.0  # [-0.5, 0.5]
    selection = select_krr_hyperparameters(Xs, torch.as_tensor(y), num_basis=16, folds=3)
    assert selection.period in (1.25, 1.5, 2.0, 3.0, 5.0, 9.0, 17.0, 33.0, 65.0)
    assert len(selection.table) == 9 * len(DEFAULT_PENALTY_GRID)
    assert selection.cv_mse == min(row["cv_mse"] for row in selection.table)
    assert selection.cv_mse < 0.05  # noise variance 0.01, signal variance ≈ 0.6
    assert 0.003 < selection.noise_variance < 0.03


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
