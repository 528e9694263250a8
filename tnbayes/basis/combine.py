"""Turn per-dimension feature matrices into the feature map of a product or additive kernel.

Both functions take the ``(..., D, N, M)`` tensor that every 1-D basis in :mod:`tnbayes.basis` returns.

- product kernel ``k(x, x') = Π_d k_d(x_d, x'_d)``: row-wise Kronecker (Khatri–Rao) product,
  ``M^D`` columns — only for small ``M^D``; the tensor-network models exist for everything else;
- additive kernel ``k(x, x') = (1/D) Σ_d k_d(x_d, x'_d)``: concatenated blocks scaled by ``1/√D``,
  ``D·M`` columns. The ``1/D`` keeps the kernel unit-variance like every other kernel in tnbayes, so an
  outer ``ScaleKernel``/output scale keeps its meaning as the prior variance of f.
"""

from __future__ import annotations

import math

import torch

__all__ = ["DEFAULT_MAX_PRODUCT_FEATURES", "product_features", "additive_features", "num_structured_features"]

#: Largest number of product-kernel feature columns (M^D) built unless the caller raises the limit.
DEFAULT_MAX_PRODUCT_FEATURES = 20_000


def num_structured_features(num_dims: int, num_per_dim: int, structure: str) -> int:
    """Number of feature columns of the combined map.

    Parameters
    ----------
    num_dims : int
        D.
    num_per_dim : int
        Columns per dimension (M for the Hilbert basis, 2M+1 for VFF).
    structure : {"product", "additive"}

    Returns
    -------
    int
        ``num_per_dim ** num_dims`` (product) or ``num_dims * num_per_dim`` (additive).
    """
    if structure == "product":
        return int(num_per_dim) ** int(num_dims)
    if structure == "additive":
        return int(num_dims) * int(num_per_dim)
    raise ValueError(f"structure must be 'product' or 'additive'; got {structure!r}.")


def product_features(per_dim: torch.Tensor, *, max_features: int = DEFAULT_MAX_PRODUCT_FEATURES) -> torch.Tensor:
    """Row-wise Kronecker product of per-dimension features (feature map of the product kernel).

    Parameters
    ----------
    per_dim : torch.Tensor of shape (..., D, N, M)
    max_features : int
        Refuse (``ValueError``) when ``M^D`` exceeds this.

    Returns
    -------
    torch.Tensor of shape (..., N, M^D)
        Row n is ``kron(per_dim[..., 0, n], per_dim[..., 1, n], ..., per_dim[..., D-1, n])``
        (dimension 0 is the slowest-varying index).

    Raises
    ------
    ValueError
        If ``M^D > max_features``.
    """
    D, M = per_dim.shape[-3], per_dim.shape[-1]
    total = M**D
    if total > max_features:
        raise ValueError(
            f"structure='product' needs M^D = {M}^{D} = {total:.3g} feature columns, above the limit "
            f"max_product_features={max_features}. Use structure='additive' ({D * M} columns), fewer basis "
            f"functions per dimension, a larger max_product_features if you have the memory "
            f"(N x M^D numbers), or a tensor-network model (CPD/TT weights), which never forms the "
            f"Kronecker product."
        )
    out = per_dim[..., 0, :, :]
    for d in range(1, D):
        nxt = per_dim[..., d, :, :]
        out = (out.unsqueeze(-1) * nxt.unsqueeze(-2)).reshape(*out.shape[:-1], out.shape[-1] * M)
    return out


def additive_features(per_dim: torch.Tensor) -> torch.Tensor:
    """Concatenated per-dimension features scaled by ``1/√D`` (feature map of the mean of 1-D kernels).

    Parameters
    ----------
    per_dim : torch.Tensor of shape (..., D, N, M)

    Returns
    -------
    torch.Tensor of shape (..., N, D·M)
        Columns ``d·M .. (d+1)·M - 1`` are ``per_dim[..., d, :, :] / √D``, so that
        ``Z Zᵀ = (1/D) Σ_d Z_d Z_dᵀ``.
    """
    D = per_dim.shape[-3]
    blocks = per_dim.transpose(-3, -2)  # (..., N, D, M)
    return blocks.reshape(*blocks.shape[:-2], D * per_dim.shape[-1]) / math.sqrt(D)
