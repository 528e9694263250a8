"""tnbayes.basis.spectral: spectral densities against scipy quadrature and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate
import torch

from tnbayes.basis import resolve_kernel, spectral_density, sqrt_spectral_density

DT = torch.float64


KERNELS = [("se", None), ("matern", 0.5), ("matern", 1.5), ("matern", 2.5), ("matern", 0.8), ("matern", 4.0)]


@pytest.mark.parametrize("kernel,nu", KERNELS)
def test_spectral_density_integrates_back_to_kernel(kernel, nu, matern_reference):
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
