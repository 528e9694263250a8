"""Turn per-dimension feature matrices into the feature map of a product or additive kernel.

The functions take the ``(..., D, N, M)`` tensor that every 1-D basis in :mod:`tnbayes.basis` returns.

- product kernel ``k(x, x') = Π_d k_d(x_d, x'_d)``: row-wise Kronecker (Khatri–Rao) product,
  ``M^D`` columns — only for small ``M^D``; the tensor-network models exist for everything else;
- additive kernel ``k(x, x') = (1/D) Σ_d k_d(x_d, x'_d)``: concatenated blocks scaled by ``1/√D``,
  ``D·M`` columns. The ``1/D`` keeps the kernel unit-variance like every other kernel in tnbayes, so an
  outer ``ScaleKernel``/output scale keeps its meaning as the prior variance of f;
- a truncated product kernel: the columns of the Khatri–Rao product for a chosen set of multi-indices
  (:func:`indexed_product_features`), e.g. those of largest prior variance (:func:`top_product_indices`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import torch

__all__ = ["DEFAULT_MAX_PRODUCT_FEATURES", "product_features", "additive_features", "indexed_product_features",
           "top_product_indices", "num_structured_features"]

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


def indexed_product_features(per_dim: torch.Tensor, dims: Sequence[int], indices: torch.Tensor) -> torch.Tensor:
    """Selected columns of the row-wise Kronecker product over some dimensions (a truncated product kernel).

    Parameters
    ----------
    per_dim : torch.Tensor of shape (..., D, N, M)
    dims : sequence of int
        The k dimensions of the product (distinct, in ``0..D-1``).
    indices : torch.Tensor of shape (J, k), integer
        Row i is the multi-index of column i: ``indices[i, a]`` is the (0-based) function of dimension ``dims[a]``.

    Returns
    -------
    torch.Tensor of shape (..., N, J)
        Column i is ``Π_a per_dim[..., dims[a], :, indices[i, a]]``; with all of ``{0..M-1}^k`` in Kronecker order
        this is :func:`product_features` of ``per_dim[..., dims, :, :]``.
    """
    dims = [int(d) for d in dims]
    D, M = per_dim.shape[-3], per_dim.shape[-1]
    if not dims or len(set(dims)) != len(dims) or min(dims) < 0 or max(dims) >= D:
        raise ValueError(f"dims must be distinct dimensions in 0..{D - 1}; got {dims!r}.")
    indices = torch.as_tensor(indices, device=per_dim.device)
    shape_ok = indices.ndim == 2 and indices.shape[1] == len(dims)
    if not shape_ok or indices.numel() and (indices.min() < 0 or indices.max() >= M):
        raise ValueError(f"indices must be a (J, {len(dims)}) integer tensor with entries in 0..{M - 1}.")
    out = per_dim[..., dims[0], :, indices[:, 0]]
    for a in range(1, len(dims)):
        out = out * per_dim[..., dims[a], :, indices[:, a]]
    return out


def top_product_indices(log_weights: torch.Tensor, num: int, *, min_log_ratio: float | None = None) -> torch.Tensor:
    """The multi-indices with the largest products of per-dimension weights (best-first search).

    For a product kernel with per-dimension spectral weights ``S_a(ω_j)``, these are the ``num`` basis functions
    of largest prior variance ``Π_a S_a(ω_{j_a})``: the best truncation of the product expansion to ``num`` columns.

    Parameters
    ----------
    log_weights : torch.Tensor of shape (k, M)
        ``log_weights[a, j]``: log weight of function j of dimension a.
    num : int
        How many multi-indices (at most ``M^k``).
    min_log_ratio : float, optional
        Also stop at multi-indices whose weight is below the largest by more than this (in log units), so that a
        dimension whose other functions are negligible is not filled in once the others run out.

    Returns
    -------
    torch.Tensor of shape (J, k), int64, J ≤ min(num, M^k)
        In order of decreasing ``Σ_a log_weights[a, j_a]`` (ties in the order the search meets them).
    """
    k, M = log_weights.shape
    num = min(int(num), M**k)
    log_weights = torch.nan_to_num(log_weights.detach().double().cpu(), nan=-1e300, neginf=-1e300)
    order = torch.argsort(log_weights, dim=1, descending=True)  # (k, M)
    sorted_w = torch.gather(log_weights, 1, order).tolist()
    start = (0,) * k
    heap = [(-sum(row[0] for row in sorted_w), start)]
    seen = {start}
    chosen: list[tuple[int, ...]] = []
    cutoff = math.inf if min_log_ratio is None else heap[0][0] + float(min_log_ratio)
    while heap and len(chosen) < num and heap[0][0] <= cutoff:
        negative, rank = heapq.heappop(heap)
        chosen.append(rank)
        for a in range(k):
            if rank[a] + 1 < M:
                child = rank[:a] + (rank[a] + 1,) + rank[a + 1:]
                if child not in seen:
                    seen.add(child)
                    heapq.heappush(heap, (negative - sorted_w[a][rank[a] + 1] + sorted_w[a][rank[a]], child))
    ranks = torch.tensor(chosen, dtype=torch.int64).reshape(-1, k)
    return torch.gather(order, 1, ranks.T).T.contiguous()
