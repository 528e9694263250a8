"""Index shapes and orderings for tensorized vectors: how a length-n vector becomes a d-way tensor.

:func:`prime_factors` and :func:`tensorize_shape` choose the mode sizes (quantized bases and the TNKF's
tensorized kernel rows both use them); :func:`hierarchical_order` chooses which point gets which index so
that smooth functions of the points have low TT ranks. Nothing here depends on a tensor format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["check_tt_shape", "hierarchical_order", "prime_factors", "tensorize_shape", "tt_bond_bounds"]


def check_tt_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """Mode sizes as a tuple of positive ints.

    Parameters
    ----------
    shape : sequence of int
        At least one mode, each of size ≥ 1.

    Returns
    -------
    tuple of int
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) == 0 or any(s < 1 for s in shape):
        raise ValueError(f"A TT shape needs at least one mode and positive mode sizes; got {shape}.")
    return shape


def tt_bond_bounds(modes: Sequence[int]) -> list[int]:
    """The largest rank of each bond of a TT-vector with these modes: the smaller side of its unfolding there (a
    TT-matrix with square modes n_k × n_k: the squares of its modes' bounds).

    Parameters
    ----------
    modes : sequence of int
        Mode sizes (n_1, …, n_d).

    Returns
    -------
    list of int
        d − 1 bounds, ``min(n_1⋯n_k, n_{k+1}⋯n_d)`` for the bond after core k.
    """
    total, left, bounds = math.prod(modes), 1, []
    for n in modes[:-1]:
        left *= int(n)
        bounds.append(min(left, total // left))
    return bounds


def prime_factors(n: int) -> list[int]:
    """Prime factorisation of ``n`` in ascending order.

    Parameters
    ----------
    n : int
        ``n ≥ 1`` (``prime_factors(1) == [1]``).

    Returns
    -------
    list of int
        Sorted prime factors with multiplicity; their product is ``n``.
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"prime_factors needs n >= 1; got {n}.")
    if n == 1:
        return [1]
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


def tensorize_shape(n: int, max_factor: int | None = 16, *, merge_to: int | None = None
                    ) -> tuple[tuple[int, ...], int]:
    """Mode sizes for a length-``n`` vector: the sorted prime factorisation of ``n`` or of a padded length.

    The TNKF paper reshapes by the sorted prime factors. A large prime factor makes a large core (a prime
    ``n`` gives a single core: no compression at all), so when the largest prime factor of ``n`` exceeds
    ``max_factor`` the length is padded to the smallest ``n_padded ≥ n`` whose prime factors are all
    ``≤ max_factor`` (the entries beyond ``n`` are zeros; for ``max_factor ≥ 2`` the padding is less
    than ``n``, at most a factor 2 for powers of two and usually a few percent).

    Parameters
    ----------
    n : int
        Vector length, ``n ≥ 1``.
    max_factor : int or None
        Largest allowed prime factor; None keeps ``n`` and its prime factors whatever they are.
    merge_to : int, optional
        Merge neighbouring sorted prime factors while their product stays ≤ ``merge_to`` (e.g. 4 turns
        2¹⁴ into seven modes of 4). Fewer, larger modes mean fewer (and larger) small linear-algebra
        calls per TT operation; the TT ranks at the remaining splits are unchanged.

    Returns
    -------
    shape : tuple of int
        Sorted mode sizes (ascending), product ``n_padded``.
    n_padded : int
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"tensorize_shape needs n >= 1; got {n}.")
    if max_factor is not None and int(max_factor) < 2:
        raise ValueError(f"max_factor must be >= 2 or None; got {max_factor}.")
    candidate = n
    while max_factor is not None and max(prime_factors(candidate)) > int(max_factor):
        candidate += 1
    modes = prime_factors(candidate)
    if merge_to is not None and len(modes) > 1:
        merged = [modes[0]]
        for factor in modes[1:]:
            if merged[-1] * factor <= int(merge_to):
                merged[-1] *= factor
            else:
                merged.append(factor)
        modes = sorted(merged)
    return tuple(modes), candidate


def hierarchical_order(points: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """Order points so that the digits of their TT index follow a recursive principal-axis partition.

    A length-``n_padded`` vector indexed by points (a kernel row ``k(x, x_j)``, LS-SVM dual weights)
    is reshaped into a tensor of modes ``shape`` whose first mode is the most significant digit of
    the index. This order makes each digit a level of a cluster tree: the points are sorted along
    their first principal axis and cut into ``shape[0]`` consecutive groups of ``prod(shape[1:])``
    points, each group is sorted along *its own* first principal axis and cut into ``shape[1]``
    groups, and so on. Entries whose indices share the leading digits then belong to one compact
    cluster, so a smooth function of the points varies little with the trailing digits and its
    tensor has low TT ranks — in any input dimension, where sorting by one coordinate or one
    principal component only helps in 1-D. (Measured on Adult, 19 683 points in 108 inputs, kernel
    rows of an RBF kernel at relative accuracy 0.1: mean largest TT rank 3.4 in this order, 5.8
    sorted by the first principal component, 6.7 in the data's order.) Padding entries
    (``n < n_padded``) stay at the end.

    Parameters
    ----------
    points : torch.Tensor of shape (n, D)
    shape : sequence of int
        TT mode sizes with ``prod(shape) >= n`` (e.g. from :func:`tensorize_shape`).

    Returns
    -------
    torch.Tensor of shape (n,), int64
        A permutation: entry ``i`` of the reordered vector belongs to point ``order[i]``.
    """
    modes = check_tt_shape(shape)
    if points.ndim != 2 or points.shape[0] > math.prod(modes):
        raise ValueError(f"hierarchical_order needs points of shape (n, D) with n <= prod(shape) = "
                         f"{math.prod(modes)}; got {tuple(points.shape)}.")
    points = points.to(torch.float64)
    block_sizes = [math.prod(modes[k + 1:]) for k in range(len(modes))]
    groups = [torch.arange(points.shape[0], device=points.device)]
    for size in block_sizes:
        next_groups = []
        for group in groups:
            if group.numel() > 2:
                centred = points[group] - points[group].mean(0)
                axis = torch.linalg.svd(centred, full_matrices=False)[2][0]
                group = group[torch.argsort(centred @ axis, stable=True)]
            next_groups.extend(group.split(size))
        groups = next_groups
    return torch.cat(groups) if groups else torch.arange(0, device=points.device)
