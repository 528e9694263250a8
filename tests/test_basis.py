"""Tests of tnbayes.basis against independent references (scipy quadrature, GPyTorch exact kernels)."""

from __future__ import annotations

import math
import warnings

import gpytorch
import numpy as np
import pytest
import scipy.integrate
import scipy.special
import torch

from tnbayes.basis import (
    ApproximationWarning,
    HilbertBasis,
    VFFBasis,
    additive_features,
    check_hilbert_approximation,
    choose_hilbert_parameters,
    hilbert_lengthscale_range,
    product_features,
    resolve_kernel,
    spectral_density,
    sqrt_spectral_density,
)

DT = torch.float64


# ----------------------------------------------------------------------------- references
def matern_reference(r: np.ndarray, lengthscale: float, nu: float) -> np.ndarray:
    """Matérn-ν via the modified Bessel function (independent of tnbayes and GPyTorch)."""
    r = np.abs(np.asarray(r, dtype=float))
    s = math.sqrt(2 * nu) * r / lengthscale
    with np.errstate(invalid="ignore"):
        out = 2 ** (1 - nu) / scipy.special.gamma(nu) * s**nu * scipy.special.kv(nu, s)
    return np.where(r == 0, 1.0, out)


def exact_kernel(name: str, nu: float | None, x1: torch.Tensor, x2: torch.Tensor, lengthscale) -> torch.Tensor:
    """Exact GPyTorch kernel matrix (unit variance).

    The lengthscale is assigned as a float64 tensor: assigning a Python float goes through a float32
    tensor in GPyTorch's setter, which perturbs ℓ by ~1e-9 relative — visible at the 1e-8 level.
    """
    D = x1.shape[-1]
    if name == "se":
        k = gpytorch.kernels.RBFKernel(ard_num_dims=D)
    else:
        k = gpytorch.kernels.MaternKernel(nu=nu, ard_num_dims=D)
    k = k.to(DT)
    k.lengthscale = torch.as_tensor(lengthscale, dtype=DT).expand(1, D)
    with torch.no_grad():
        return k(x1, x2).to_dense()


KERNELS = [("se", None), ("matern", 0.5), ("matern", 1.5), ("matern", 2.5), ("matern", 0.8), ("matern", 4.0)]


# ----------------------------------------------------------------------------- spectral densities
@pytest.mark.parametrize("kernel,nu", KERNELS)
def test_spectral_density_integrates_back_to_kernel(kernel, nu):
    """(1/2π) ∫ S(ω) e^{iωr} dω = (1/π) ∫_0^∞ S(ω) cos(ωr) dω must equal k(r): catches 2π/square bugs."""
    ell = 0.7

    def S(w: float) -> float:
        return float(spectral_density(torch.tensor(w, dtype=DT), ell, kernel, nu))

    for r in (0.0, 0.15, 0.6, 1.4):
        if r == 0.0:
            integral = scipy.integrate.quad(S, 0, np.inf, limit=500)[0]
        else:  # QAWF: Fourier integral over [0, ∞), robust for the slowly decaying Matérn-1/2 density
            integral = scipy.integrate.quad(S, 0, np.inf, weight="cos", wvar=r, limlst=200)[0]
        approx = integral / math.pi
        if kernel == "se":
            expected = math.exp(-0.5 * r**2 / ell**2)
        else:
            expected = float(matern_reference(np.array(r), ell, nu))
        assert approx == pytest.approx(expected, abs=2e-7), (kernel, nu, r)


def test_spectral_density_closed_forms_and_aliases():
    w = torch.linspace(0, 20, 41, dtype=DT)
    ell = 0.3
    lam3, lam5 = math.sqrt(3) / ell, math.sqrt(5) / ell
    torch.testing.assert_close(spectral_density(w, ell, "matern12"), 2 * ell / (1 + (ell * w) ** 2))
    torch.testing.assert_close(spectral_density(w, ell, "matern32"), 4 * lam3**3 / (lam3**2 + w**2) ** 2)
    torch.testing.assert_close(spectral_density(w, ell, "matern52"), 16 / 3 * lam5**5 / (lam5**2 + w**2) ** 3)
    torch.testing.assert_close(spectral_density(w, ell, "rbf"), math.sqrt(2 * math.pi) * ell * torch.exp(-0.5 * (w * ell) ** 2))
    torch.testing.assert_close(spectral_density(w, ell, "Matern-5/2"), spectral_density(w, ell, "matern", nu=2.5))
    torch.testing.assert_close(spectral_density(w, ell, "se", outputscale=3.0), 3.0 * spectral_density(w, ell, "se"))
    assert resolve_kernel("matern", 0.8) == ("matern", 0.8)
    with pytest.raises(ValueError, match="needs a smoothness"):
        resolve_kernel("matern")
    with pytest.raises(ValueError, match="no .*smoothness"):
        resolve_kernel("rbf", nu=2.5)
    with pytest.raises(ValueError, match="Unknown kernel"):
        resolve_kernel("cauchy")


@pytest.mark.parametrize("kernel,nu", [("se", None), ("matern", 0.5), ("matern", 2.5), ("matern", 0.8)])
def test_spectral_density_gradients(kernel, nu):
    w = torch.tensor([0.0, 1.0, 7.0], dtype=DT)
    ell = torch.tensor(0.4, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(lambda l: spectral_density(w, l, kernel, nu), (ell,))
    # Far in the tail √S underflows to 0; the gradient must stay finite (log-space evaluation).
    big = torch.tensor([1e3, 1e6], dtype=DT)
    g = torch.autograd.grad(sqrt_spectral_density(big, ell, kernel, nu).sum(), ell)[0]
    assert torch.isfinite(g)


# ----------------------------------------------------------------------------- Hilbert basis
def test_eigenfunctions_orthonormal_on_box():
    basis = HilbertBasis(num_basis=12, L=1.7, center=0.4)
    x = torch.linspace(0.4 - 1.7, 0.4 + 1.7, 4001, dtype=DT)[:, None]
    phi = basis.eigenfunctions(x)[0]  # (N, M)
    gram = torch.trapezoid(phi.unsqueeze(-1) * phi.unsqueeze(-2), x[:, 0], dim=0)
    torch.testing.assert_close(gram, torch.eye(12, dtype=DT), atol=1e-6, rtol=0)
    torch.testing.assert_close(phi[[0, -1]], torch.zeros(2, 12, dtype=DT), atol=1e-12, rtol=0)  # Dirichlet


def test_hilbert_se_acceptance_error_below_1e8():
    """Acceptance criterion: SE, ℓ = 0.2, x in [-1, 1], c = 2 (L = 2), M = 64 → max error < 1e-8."""
    x = torch.linspace(-1, 1, 301, dtype=DT)[:, None]
    basis = HilbertBasis(num_basis=64, L=2.0)
    K = basis.kernel_matrix(x, None, 0.2, "se")
    err = float((K - exact_kernel("se", None, x, x, 0.2)).abs().max())
    assert err < 1e-8, err


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, 0.8])
def test_hilbert_matern_error_decreases_with_M(nu):
    x = torch.linspace(-1, 1, 101, dtype=DT)[:, None]
    if nu in (0.5, 1.5, 2.5):
        K_exact = exact_kernel("matern", nu, x, x, 0.3)
    else:
        K_exact = torch.as_tensor(matern_reference((x - x.T).numpy(), 0.3, nu))
    errors = []
    for M in (16, 32, 64, 128, 256):
        K = HilbertBasis(num_basis=M, L=2.0).kernel_matrix(x, None, 0.3, "matern", nu)
        errors.append(float((K - K_exact).abs().max()))
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < {0.5: 0.03, 1.5: 1e-3, 2.5: 1e-4, 0.8: 0.02}[nu], errors


def test_hilbert_2d_product_and_additive_match_exact():
    torch.manual_seed(0)
    X1 = torch.rand(40, 2, dtype=DT) * 2 - 1
    X2 = torch.rand(30, 2, dtype=DT) * 2 - 1
    ell = torch.tensor([0.3, 0.5], dtype=DT)
    basis = HilbertBasis(num_basis=64, L=[2.0, 3.0])  # image terms ~exp(-(2(L-1)/ℓ)²/2) < 1e-9
    K_prod = basis.kernel_matrix(X1, X2, ell, "se", structure="product")
    torch.testing.assert_close(K_prod, exact_kernel("se", None, X1, X2, ell), atol=1e-8, rtol=0)
    K_add = basis.kernel_matrix(X1, X2, ell, "se", structure="additive")
    k1 = exact_kernel("se", None, X1[:, :1], X2[:, :1], 0.3)
    k2 = exact_kernel("se", None, X1[:, 1:], X2[:, 1:], 0.5)
    torch.testing.assert_close(K_add, (k1 + k2) / 2, atol=1e-8, rtol=0)


def test_hilbert_features_shapes_weights_and_from_data():
    X = torch.tensor([[0.0, 10.0], [2.0, 14.0], [1.0, 12.0]], dtype=DT)
    basis = HilbertBasis.from_data(X, num_basis=5, c=1.5)
    torch.testing.assert_close(basis.center, torch.tensor([1.0, 12.0], dtype=DT))
    torch.testing.assert_close(basis.L, torch.tensor([1.5, 3.0], dtype=DT))
    assert basis.sqrt_eigenvalues().shape == (2, 5)
    torch.testing.assert_close(basis.sqrt_eigenvalues()[1], math.pi * torch.arange(1, 6, dtype=DT) / 6.0)
    Z = basis.features(X, lengthscale=[0.5, 2.0], kernel="matern52")
    assert Z.shape == (2, 3, 5)
    # Features are eigenfunctions times √S(√λ_j): the unit-variance-prior convention.
    w = sqrt_spectral_density(basis.sqrt_eigenvalues()[0], 0.5, "matern52")
    torch.testing.assert_close(Z[0], basis.eigenfunctions(X)[0] * w)
    # numpy input, batch lengthscales (..., D) broadcast to (..., D, N, M)
    assert basis.features(X.numpy(), torch.ones(4, 2, dtype=DT)).shape == (4, 2, 3, 5)
    with pytest.raises(ValueError, match="3 columns"):
        basis.features(torch.zeros(2, 3, dtype=DT), 1.0)
    with pytest.raises(ValueError, match="constant"):
        HilbertBasis.from_data(torch.ones(4, 1, dtype=DT), 4)


def test_hilbert_outside_box_raises_with_column_value_and_fix():
    basis = HilbertBasis(num_basis=8, L=[1.0, 2.0], center=[0.0, 1.0])
    ok = torch.tensor([[0.9, -0.9], [-1.0, 3.0]], dtype=DT)  # boundary values are inside
    basis.features(ok, 0.5)
    bad = torch.tensor([[0.0, 1.0], [0.5, 3.5]], dtype=DT)
    with pytest.raises(ValueError) as info:
        basis.features(bad, 0.5)
    msg = str(info.value)
    assert "column 1" in msg and "3.5" in msg and "[-1, 3]" in msg and "larger L" in msg and "c" in msg


# ----------------------------------------------------------------------------- combining features
def test_product_and_additive_feature_maps():
    torch.manual_seed(1)
    per_dim = torch.randn(3, 5, 4, dtype=DT)  # (D, N, M)
    Z = product_features(per_dim)
    assert Z.shape == (5, 64)
    for n in range(5):
        torch.testing.assert_close(Z[n], torch.kron(torch.kron(per_dim[0, n], per_dim[1, n]), per_dim[2, n]))
    torch.testing.assert_close(Z @ Z.T, torch.stack([p @ p.T for p in per_dim]).prod(0))
    A = additive_features(per_dim)
    assert A.shape == (5, 12)
    torch.testing.assert_close(A @ A.T, torch.stack([p @ p.T for p in per_dim]).mean(0))
    with pytest.raises(ValueError, match="structure='additive'"):
        product_features(per_dim, max_features=63)


# ----------------------------------------------------------------------------- rule of thumb
@pytest.mark.parametrize(
    "kernel,S,ell,c_expected,M_expected",
    [
        ("se", 1.0, 0.2, 1.2, 11),        # c = max(0.64, 1.2); M = ⌈1.75·1.2/0.2⌉ = ⌈10.5⌉
        ("se", 1.0, 0.5, 1.6, 6),         # c = 3.2·0.5 = 1.6; M = ⌈1.75·1.6/0.5⌉ = ⌈5.6⌉
        ("se", 2.0, 1.0, 1.6, 6),         # only ℓ/S matters for c and M
        ("matern52", 2.0, 1.0, 2.05, 11),  # c = 4.1·0.5; M = ⌈2.65·2.05/0.5⌉ = ⌈10.865⌉
        ("matern32", 1.0, 0.1, 1.2, 42),   # M = ⌈3.42·1.2/0.1⌉ = ⌈41.04⌉
    ],
)
def test_choose_hilbert_parameters_published_rule(kernel, S, ell, c_expected, M_expected):
    a1, a2 = {"se": (3.2, 1.75), "matern52": (4.1, 2.65), "matern32": (4.5, 3.42)}[kernel]
    c_formula = max(a1 * ell / S, 1.2)
    assert c_formula == pytest.approx(c_expected)
    assert math.ceil(a2 * c_formula / (ell / S) - 1e-9) == M_expected
    M, c, L = choose_hilbert_parameters(half_range=S, lengthscale_min=ell, kernel=kernel)
    assert M == M_expected
    assert c[0] == pytest.approx(c_expected) and L[0] == pytest.approx(c_expected * S)


def test_choose_hilbert_parameters_from_data_and_ranges():
    X = np.column_stack([np.linspace(-1, 1, 50), np.linspace(0, 10, 50)])
    M, c, L = choose_hilbert_parameters(X, lengthscale_min=[0.2, 1.0], lengthscale_max=[0.5, 5.0], kernel="rbf")
    # dim 0: S=1, c=max(3.2·0.5, 1.2)=1.6, M=⌈1.75·1.6/0.2⌉=14;  dim 1: S=5, c=3.2, M=⌈1.75·3.2/0.2⌉=28
    np.testing.assert_allclose(c, [1.6, 3.2])
    np.testing.assert_allclose(L, [1.6, 16.0])
    assert M == 28
    with pytest.raises(ValueError, match="matern12"):
        choose_hilbert_parameters(half_range=1.0, lengthscale_min=0.3, kernel="matern12")
    with pytest.raises(ValueError, match="exactly one"):
        choose_hilbert_parameters(lengthscale_min=0.3)


def test_check_hilbert_approximation_warns_outside_representable_range():
    M, c, L = choose_hilbert_parameters(half_range=1.0, lengthscale_min=0.2, lengthscale_max=0.5)
    rng = hilbert_lengthscale_range(L, M)
    assert rng.lengthscale_min[0] <= 0.2 and rng.lengthscale_max[0] >= 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_hilbert_approximation(0.3, L, M, "se", half_range=1.0)
    assert issubclass(ApproximationWarning, UserWarning)
    with pytest.warns(ApproximationWarning, match="below the smallest lengthscale"):
        assert not check_hilbert_approximation(0.05, L, M, "se")
    with pytest.warns(ApproximationWarning, match="too small"):
        check_hilbert_approximation(2.0, L, M, "se")
    with pytest.warns(ApproximationWarning, match="half-range"):
        check_hilbert_approximation(0.3, 1.1, 40, "se", half_range=1.0)


# ----------------------------------------------------------------------------- VFF
def test_vff_kuu_is_spd_and_features_reproduce_q():
    basis = VFFBasis(num_frequencies=10, a=-2.0, b=2.0)
    x = torch.linspace(-1, 1, 17, dtype=DT)[:, None]
    for nu, rank in ((0.5, 1), (1.5, 2), (2.5, 3)):
        d, V = basis.kuu_parts(0.4, nu)
        assert d.shape == (1, 21) and V.shape == (1, 21, rank)
        Kuu = basis.kuu(0.4, nu)[0]
        torch.testing.assert_close(Kuu, Kuu.T)
        assert float(torch.linalg.eigvalsh(Kuu).min()) > 0
        Kuf = basis.cross_covariance(x)[0].T
        Q_dense = Kuf.T @ torch.linalg.solve(Kuu, Kuf)
        Z = basis.features(x, 0.4, nu)[0]
        torch.testing.assert_close(Z @ Z.T, Q_dense, atol=1e-10, rtol=1e-8)
    with pytest.raises(ValueError, match="closed forms only"):
        basis.features(x, 0.4, 3.5)


@pytest.mark.parametrize("nu,final_tol", [(0.5, 2e-2), (1.5, 1e-4), (2.5, 1e-5)])
def test_vff_converges_to_exact_matern_inside_interval(nu, final_tol):
    """Q = k_uᵀ K_uu⁻¹ k_u → Matérn-ν on the data range as M grows ([a, b] twice as wide as the data)."""
    x = torch.linspace(-1, 1, 101, dtype=DT)[:, None]
    K_exact = exact_kernel("matern", nu, x, x, 0.2)
    errors = {}
    for M in (8, 32, 128):
        Z = VFFBasis(num_frequencies=M, a=-2.0, b=2.0).features(x, 0.2, nu)[0]
        errors[M] = float((Z @ Z.T - K_exact).abs().max())
    print(f"VFF Matérn-{nu} max error vs M:", {m: f"{e:.1e}" for m, e in errors.items()})
    assert errors[8] > errors[32] > errors[128], errors
    assert errors[128] < final_tol, errors


def test_vff_outside_interval_raises():
    basis = VFFBasis(num_frequencies=4, a=[-1.0, 0.0], b=[1.0, 2.0])
    with pytest.raises(ValueError, match="column 1"):
        basis.features(torch.tensor([[0.0, 2.5]], dtype=DT), 0.5, 1.5)
    with pytest.raises(ValueError, match="a < b"):
        VFFBasis(4, a=1.0, b=1.0)
