"""GPyTorch's RBF kernel without the slow exponentials of far pairs of inputs.

``exp(−d²/2)`` underflows once the scaled squared distance ``d²`` passes about 1 417 in float64 (175 in float32):
the value drops below the dtype's smallest normal number, to a subnormal or to 0. Torch's CPU ``exp`` computes such
arguments on a slow path, many times slower per entry than ordinary ones (subnormal results slowest), so a dense
kernel block of inputs far apart on the lengthscale's scale (short lengthscales, wide data: most pairs of the
2¹⁴-point sinc of the TNKF paper) spends most of its time there. :func:`exp_flushing_underflow` sets those entries to
0 without evaluating ``exp`` on them (those whose argument is below ``log(finfo.tiny)``);
:class:`UnderflowSafeRBFKernel` is ``gpytorch.kernels.RBFKernel`` with it. The entries that change are below
``finfo.tiny`` (2.2e-308 in float64) times the outputscale, and their gradient is 0 instead of a number as small;
every other entry is GPyTorch's to the last bit. Gradients come from autograd through GPyTorch's distance, where
``RBFKernel`` with one lengthscale and inputs without gradients uses its own backward (``RBFCovariance``): the same
gradient up to round-off. The measured effect is in docs/benchmarks.md.
"""

from __future__ import annotations

import math

import gpytorch
import torch

__all__ = ["UnderflowSafeRBFKernel", "exp_flushing_underflow"]


def exp_flushing_underflow(exponent: torch.Tensor) -> torch.Tensor:
    """``exp(exponent)``, with exactly 0 where ``exponent < log(finfo.tiny)`` (where the value would be below the
    dtype's smallest normal number: a subnormal or 0), without evaluating ``exp`` there.

    Parameters
    ----------
    exponent : torch.Tensor of any shape, floating point
        Changed in place (and returned) when it does not require a gradient; a new tensor otherwise.

    Returns
    -------
    torch.Tensor of the same shape
    """
    below = exponent < math.log(torch.finfo(exponent.dtype).tiny)
    if exponent.requires_grad:
        return exponent.masked_fill(below, 0.0).exp().masked_fill(below, 0.0)
    return exponent.masked_fill_(below, 0.0).exp_().masked_fill_(below, 0.0)


class UnderflowSafeRBFKernel(gpytorch.kernels.RBFKernel):
    """``gpytorch.kernels.RBFKernel``, ``k(x, x') = exp(−‖(x − x')/ℓ‖² / 2)``, with entries below the dtype's smallest
    normal number set to exactly 0 by :func:`exp_flushing_underflow` (the same arguments, constraints and priors;
    its inputs (..., n, D) and (..., m, D), its output (..., n, m), or (..., n) with ``diag=True``)."""

    def forward(self, x1: torch.Tensor, x2: torch.Tensor, diag: bool = False, **params) -> torch.Tensor:
        """The kernel block of ``x1`` (..., n, D) and ``x2`` (..., m, D): shape (..., n, m), or (..., n) with
        ``diag``."""
        squared = self.covar_dist(x1.div(self.lengthscale), x2.div(self.lengthscale), square_dist=True, diag=diag,
                                  **params)
        return exp_flushing_underflow(squared.div_(-2.0))  # a new tensor: divided in place, as GPyTorch does
