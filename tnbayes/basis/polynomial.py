"""Pure-power polynomial features of one input dimension (the *basis* axis)::

    ψ(x) = [1, x, x², …, x^{M−1}]                                     (real, length M)

Their exact factorisation into short Kronecker factors is in :mod:`tnbayes.basis.quantized`.
"""

from __future__ import annotations

import torch

from ._checks import check_num_basis

__all__ = ["polynomial_features"]


def polynomial_features(x: torch.Tensor, num_basis: int) -> torch.Tensor:
    """Pure powers ``[1, x, …, x^{M−1}]`` of a 1-D input.

    Parameters
    ----------
    x : torch.Tensor of shape (n,)
    num_basis : int

    Returns
    -------
    torch.Tensor of shape (n, M)
    """
    powers = torch.arange(check_num_basis(num_basis), dtype=x.dtype, device=x.device)
    return x.unsqueeze(-1) ** powers
