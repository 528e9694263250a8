"""Canonical polyadic (CP) decomposition algebra in torch.

A rank-R CPD tensor of order K is held as a list of K factor matrices ``W_k`` of shape (M_k, R)::

    W = Σ_r w_r^(1) ⊗ w_r^(2) ⊗ … ⊗ w_r^(K),     w_r^(k) = W_k[:, r]

Real and complex factors are both supported; inner products conjugate the first argument.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "random_cpd",
    "cpd_factor_grams",
    "cpd_hadamard_gram",
    "cpd_norm_squared",
    "cpd_to_dense",
    "check_cpd_factors",
]


def check_cpd_factors(factors: Sequence[torch.Tensor]) -> int:
    """Check that ``factors`` is a non-empty list of 2-D tensors with a common rank.

    Parameters
    ----------
    factors : sequence of torch.Tensor of shape (M_k, R)

    Returns
    -------
    int
        The CP rank R.
    """
    if len(factors) == 0:
        raise ValueError("A CPD needs at least one factor matrix.")
    ranks = {f.shape[-1] for f in factors if f.ndim == 2}
    if any(f.ndim != 2 for f in factors) or len(ranks) != 1:
        shapes = [tuple(f.shape) for f in factors]
        raise ValueError(f"CPD factors must be matrices of shape (M_k, R) with one common R; got {shapes}.")
    return ranks.pop()


def random_cpd(mode_sizes: Sequence[int], rank: int, *, generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Standard-normal factor matrices, each scaled to unit Frobenius norm (T-KRR's initialisation).

    Parameters
    ----------
    mode_sizes : sequence of int
        M_k for each of the K modes.
    rank : int
        R.
    generator : torch.Generator, optional
        Source of randomness (CPU generator; the factors are moved to ``device`` afterwards).
    dtype : torch.dtype
        Real or complex dtype. Complex factors have independent standard-normal real and imaginary parts.
    device : torch.device or str

    Returns
    -------
    list of torch.Tensor of shape (M_k, R)
    """
    factors = []
    for size in mode_sizes:  # drawn in double precision so float32 and float64 runs start alike
        factor = torch.randn(int(size), int(rank), generator=generator, dtype=torch.float64)
        if dtype.is_complex:
            factor = torch.complex(factor, torch.randn(int(size), int(rank), generator=generator, dtype=torch.float64))
        factors.append((factor / torch.linalg.norm(factor)).to(dtype=dtype, device=device))
    return factors


def cpd_factor_grams(factors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Per-mode Gram matrices ``W_kᴴ W_k``.

    Returns
    -------
    list of torch.Tensor of shape (R, R)
    """
    return [f.conj().transpose(-2, -1) @ f for f in factors]


def cpd_hadamard_gram(grams: Sequence[torch.Tensor], skip: int | None = None) -> torch.Tensor:
    """Element-wise product of the per-mode Grams, leaving out mode ``skip``.

    ``H_d = ⊙_{k≠d} W_kᴴ W_k`` is the matrix of the ‖W‖² penalty seen by core d:
    ``‖W‖² = Σ_m W_d[m, :] H_d W_d[m, :]ᴴ`` (with the conjugate on the left factor for complex data).

    Parameters
    ----------
    grams : sequence of torch.Tensor of shape (R, R)
    skip : int, optional

    Returns
    -------
    torch.Tensor of shape (R, R)
    """
    result = None
    for k, gram in enumerate(grams):
        if k == skip:
            continue
        result = gram.clone() if result is None else result * gram
    if result is None:  # a single mode and it is skipped
        rank = grams[0].shape[-1]
        return torch.ones(rank, rank, dtype=grams[0].dtype, device=grams[0].device)
    return result


def cpd_norm_squared(factors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Squared Frobenius norm ``‖W‖² = 1ᵀ (⊙_k W_kᴴ W_k) 1`` without forming W.

    Returns
    -------
    torch.Tensor (real scalar)
    """
    check_cpd_factors(factors)
    return cpd_hadamard_gram(cpd_factor_grams(factors)).sum().real


def cpd_to_dense(factors: Sequence[torch.Tensor], *, max_entries: int = 10**8) -> torch.Tensor:
    """The full tensor W (for tests and small problems only).

    Parameters
    ----------
    factors : sequence of torch.Tensor of shape (M_k, R)
    max_entries : int
        Refuse tensors with more entries than this.

    Returns
    -------
    torch.Tensor of shape (M_1, …, M_K)
    """
    check_cpd_factors(factors)
    sizes = [int(f.shape[0]) for f in factors]
    total = 1
    for size in sizes:
        total *= size
    if total > max_entries:
        raise ValueError(f"The dense tensor would have {total:.3g} entries (> max_entries={max_entries:.3g}).")
    dense = factors[0]
    for factor in factors[1:]:
        dense = (dense.unsqueeze(-2) * factor.unsqueeze(0)).reshape(-1, factor.shape[-1])
    return dense.sum(-1).reshape(sizes)
