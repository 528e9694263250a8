"""Plain (unquantized) Fourier features of one input dimension (the *basis* axis)::

    ψ(x) = [exp(i 2π k x / P)]_{k = −⌊M/2⌋ … M − 1 − ⌊M/2⌋}        (complex, length M, period P)

Fourier features are periodic with period P: an input farther than P/2 from the origin would be read as
one wrapped around the period, so such inputs raise ``ValueError`` (:func:`check_in_period`). Their exact
factorisation into short Kronecker factors is in :mod:`tnbayes.basis.quantized`.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_num_basis, check_period

__all__ = ["fourier_frequencies", "fourier_features", "check_in_period"]


def fourier_frequencies(num_basis: int) -> torch.Tensor:
    """Integer frequencies ``k = −⌊M/2⌋ … M − 1 − ⌊M/2⌋`` of the Fourier features (−M/2 … M/2 − 1 for even M).

    Returns
    -------
    torch.Tensor of shape (M,), int64
    """
    num_basis = check_num_basis(num_basis)
    return torch.arange(num_basis) - num_basis // 2


def check_in_period(x: torch.Tensor, period: float, center: float = 0.0) -> None:
    """Raise ``ValueError`` if any input lies farther than P/2 from ``center`` (Fourier features would wrap around).

    Parameters
    ----------
    x : torch.Tensor of any shape
        Scaled inputs.
    period : float
    center : float
        Centre of the accepted window [center − P/2, center + P/2].
    """
    half = 0.5 * float(period)
    offset = (x.detach() - float(center)).abs()
    outside = offset > half * (1.0 + 1e-10)
    if bool(outside.any()):
        worst = float(offset.max())
        raise ValueError(
            f"{int(outside.sum())} input value(s) lie outside the Fourier period interval "
            f"[{center - half:.6g}, {center + half:.6g}] (farthest {worst:.6g} from {center:g} in the model's scaled "
            f"units). Fourier features with period P = {float(period):.6g} are periodic, so these inputs would be "
            f"read as points wrapped around the period — silently wrong predictions. Fix: refit with a larger period "
            f"(P > 2·{worst:.6g}), or keep queries closer to the training range."
        )


def fourier_features(x: torch.Tensor, num_basis: int, period: float) -> torch.Tensor:
    """Unquantized Fourier features ``exp(i 2π k x / P)`` of a 1-D input.

    Parameters
    ----------
    x : torch.Tensor of shape (n,)
    num_basis : int
        M.
    period : float
        P.

    Returns
    -------
    torch.Tensor of shape (n, M), complex (complex128 for float64 inputs)
    """
    period = check_period(period)
    k = fourier_frequencies(num_basis).to(device=x.device, dtype=x.dtype)
    return torch.polar(torch.ones((), dtype=x.dtype, device=x.device), (2 * math.pi / period) * x.unsqueeze(-1) * k)
