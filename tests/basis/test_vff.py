"""tnbayes.basis.vff: variational Fourier features against exact Matérn kernels."""

from __future__ import annotations

import pytest
import torch

from tnbayes.basis import VFFBasis

DT = torch.float64


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
def test_vff_converges_to_exact_matern_inside_interval(nu, final_tol, exact_kernel):
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
