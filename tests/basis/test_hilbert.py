"""tnbayes.basis.hilbert: Laplace eigenfunctions and the Hilbert basis against exact GPyTorch kernels."""

from __future__ import annotations

import math

import pytest
import torch

from tnbayes.basis import HilbertBasis, sqrt_spectral_density

DT = torch.float64


def test_eigenfunctions_orthonormal_on_box():
    basis = HilbertBasis(num_basis=12, L=1.7, center=0.4)
    x = torch.linspace(0.4 - 1.7, 0.4 + 1.7, 4001, dtype=DT)[:, None]
    phi = basis.eigenfunctions(x)[0]  # (N, M)
    gram = torch.trapezoid(phi.unsqueeze(-1) * phi.unsqueeze(-2), x[:, 0], dim=0)
    torch.testing.assert_close(gram, torch.eye(12, dtype=DT), atol=1e-6, rtol=0)
    torch.testing.assert_close(phi[[0, -1]], torch.zeros(2, 12, dtype=DT), atol=1e-12, rtol=0)  # Dirichlet


def test_hilbert_se_acceptance_error_below_1e8(exact_kernel):
    """Acceptance criterion: SE, ℓ = 0.2, x in [-1, 1], c = 2 (L = 2), M = 64 → max error < 1e-8."""
    x = torch.linspace(-1, 1, 301, dtype=DT)[:, None]
    basis = HilbertBasis(num_basis=64, L=2.0)
    K = basis.kernel_matrix(x, None, 0.2, "se")
    err = float((K - exact_kernel("se", None, x, x, 0.2)).abs().max())
    assert err < 1e-8, err


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, 0.8])
def test_hilbert_matern_error_decreases_with_M(nu, exact_kernel, matern_reference):
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


def test_hilbert_2d_product_and_additive_match_exact(exact_kernel):
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
