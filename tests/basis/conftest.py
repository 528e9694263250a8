"""Independent references the basis tests compare against, as fixtures (scipy's Bessel function, GPyTorch)."""

from __future__ import annotations

import math

import gpytorch
import numpy as np
import pytest
import scipy.special
import torch

DT = torch.float64


def _matern_reference(r: np.ndarray, lengthscale: float, nu: float) -> np.ndarray:
    """Matérn-ν via the modified Bessel function (independent of tnbayes and GPyTorch)."""
    r = np.abs(np.asarray(r, dtype=float))
    s = math.sqrt(2 * nu) * r / lengthscale
    with np.errstate(invalid="ignore"):
        out = 2 ** (1 - nu) / scipy.special.gamma(nu) * s**nu * scipy.special.kv(nu, s)
    return np.where(r == 0, 1.0, out)


def _exact_kernel(name: str, nu: float | None, x1: torch.Tensor, x2: torch.Tensor, lengthscale) -> torch.Tensor:
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


@pytest.fixture
def matern_reference():
    """``matern_reference(r, lengthscale, nu)``: the Matérn-ν kernel at distances r (numpy)."""
    return _matern_reference


@pytest.fixture
def exact_kernel():
    """``exact_kernel(name, nu, x1, x2, lengthscale)``: GPyTorch's exact kernel matrix ("se" or "matern")."""
    return _exact_kernel
