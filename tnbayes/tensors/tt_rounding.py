"""Deterministic tensor-train kernels on plain lists of 3-way cores (the *format* axis).

TT-SVD of a dense tensor (Oseledets 2011, Algorithm 1), TT-rounding (Algorithm 2: right-to-left QR, then
left-to-right truncated SVDs), the left-orthogonalising QR sweep and the block-diagonal sum of two TTs. Every
function takes and returns cores of shape ``(r_{k-1}, n_k, r_k)`` with ``r_0 = r_d = 1`` (a TT-matrix is passed
with its row and column modes merged); :class:`~tnbayes.tensors.TTVector` and
:class:`~tnbayes.tensors.TTMatrix` build their methods on them, and so do the Kalman filters of
:mod:`tnbayes.inference.kalman`, which round blocks of TTs that are not TT objects of their own.

References
----------
I. V. Oseledets, "Tensor-train decomposition", SIAM J. Sci. Comput. 33(5), 2011.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["block_sum", "left_orthogonalize", "round_cores", "truncation_rank", "tt_svd"]


def truncation_rank(singular_values: torch.Tensor, delta: float, max_rank: int | None) -> int:
    """Smallest rank whose discarded tail has Frobenius norm ≤ ``delta``, capped at ``max_rank`` (≥ 1).

    Parameters
    ----------
    singular_values : torch.Tensor of shape (k,)
        Non-increasing singular values.
    delta : float
        Allowed Frobenius norm of the discarded values.
    max_rank : int, optional
        Cap of the rank (None: none).

    Returns
    -------
    int
        The rank to keep, between 1 and ``k`` (and ``max_rank``).
    """
    tail = torch.flip(torch.cumsum(torch.flip(singular_values.double() ** 2, [0]), 0), [0])  # tail[k] = Σ_{j≥k} s_j²
    keep = int((tail > delta**2).sum())  # tail is non-increasing: keep the first `keep` values
    keep = max(keep, 1)
    if max_rank is not None:
        keep = min(keep, int(max_rank))
    return keep


def tt_svd(tensor: torch.Tensor, *, tol: float = 0.0, max_rank: int | None = None) -> list[torch.Tensor]:
    """TT-SVD of a dense d-way tensor (Oseledets 2011, Algorithm 1).

    Parameters
    ----------
    tensor : torch.Tensor of shape (n_1, …, n_d)
    tol : float
        Relative accuracy: ``‖X − TT‖_F ≤ tol·‖X‖_F`` when ``max_rank`` does not bind.
    max_rank : int, optional
        Upper bound on every TT rank.

    Returns
    -------
    list of torch.Tensor
        Cores of shape ``(r_{k-1}, n_k, r_k)``.
    """
    shape = tuple(tensor.shape)
    d = len(shape)
    norm = float(torch.linalg.vector_norm(tensor))
    delta = tol * norm / math.sqrt(max(d - 1, 1))
    cores, rank = [], 1
    rest = tensor.reshape(1, -1)
    for k in range(d - 1):
        rest = rest.reshape(rank * shape[k], -1)
        u, s, vh = torch.linalg.svd(rest, full_matrices=False)
        new_rank = truncation_rank(s, delta, max_rank)
        cores.append(u[:, :new_rank].reshape(rank, shape[k], new_rank))
        rest = s[:new_rank, None] * vh[:new_rank]
        rank = new_rank
    cores.append(rest.reshape(rank, shape[-1], 1))
    return cores


def block_sum(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Cores of the sum of two TTs with the same modes: block-diagonal in the ranks (exact, ranks add).

    Parameters
    ----------
    a, b : sequence of torch.Tensor of shape (r_{k-1}, n_k, r_k)
        The cores of the two terms (their ranks may differ).

    Returns
    -------
    list of torch.Tensor
        Cores of shape ``(r^a_{k-1} + r^b_{k-1}, n_k, r^a_k + r^b_k)`` (the first core concatenated on its right
        rank, the last on its left rank).
    """
    d = len(a)
    if d == 1:
        return [a[0] + b[0]]
    cores = []
    for k, (x, y) in enumerate(zip(a, b)):
        n = x.shape[1]
        if k == 0:
            cores.append(torch.cat([x, y], dim=2))
        elif k == d - 1:
            cores.append(torch.cat([x, y], dim=0))
        else:
            core = x.new_zeros(x.shape[0] + y.shape[0], n, x.shape[2] + y.shape[2])
            core[: x.shape[0], :, : x.shape[2]] = x
            core[x.shape[0]:, :, x.shape[2]:] = y
            cores.append(core)
    return cores


def left_orthogonalize(cores: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """QR sweep left to right: cores 0..d-2 become left-orthonormal and the norm sits in the last core.

    Parameters
    ----------
    cores : sequence of torch.Tensor of shape (r_{k-1}, n_k, r_k)

    Returns
    -------
    list of torch.Tensor
        Cores of the same tensor; ``‖last core‖_F`` is its Frobenius norm.
    """
    cores = list(cores)
    for k in range(len(cores) - 1):
        r0, n, r1 = cores[k].shape
        q, r = torch.linalg.qr(cores[k].reshape(r0 * n, r1))
        cores[k] = q.reshape(r0, n, q.shape[1])
        cores[k + 1] = torch.einsum("ab,bnc->anc", r, cores[k + 1])
    return cores


def round_cores(cores: Sequence[torch.Tensor], tol: float, max_rank: int | None,
                reference_norm: float | None = None) -> list[torch.Tensor]:
    """Oseledets' TT-rounding: right-to-left QR, then left-to-right truncated SVDs (Algorithm 2).

    Parameters
    ----------
    cores : sequence of torch.Tensor of shape (r_{k-1}, n_k, r_k)
    tol : float
        Relative accuracy ``‖x − round(x)‖ ≤ tol·‖x‖`` when ``max_rank`` does not bind.
    max_rank : int, optional
        Cap of every rank.
    reference_norm : float, optional
        Make the bound ``tol·reference_norm`` instead of ``tol·‖x‖`` (never below round-off of ``‖x‖``).

    Returns
    -------
    list of torch.Tensor
        The rounded cores; cores 0..d-2 are left-orthonormal.
    """
    cores = list(cores)
    d = len(cores)
    if d == 1:
        return [cores[0].clone()]
    # right-to-left orthogonalisation: cores 1..d-1 right-orthonormal, the norm in core 0
    for k in range(d - 1, 0, -1):
        r0, n, r1 = cores[k].shape
        q, r = torch.linalg.qr(cores[k].reshape(r0, n * r1).T)  # (n r1, s), (s, r0)
        cores[k] = q.T.reshape(q.shape[1], n, r1)
        cores[k - 1] = torch.einsum("anb,cb->anc", cores[k - 1], r)
    norm = float(torch.linalg.vector_norm(cores[0]))
    if reference_norm is not None:  # never below round-off of the whole, so zero updates cannot inflate ranks
        norm = max(float(reference_norm), norm * torch.finfo(cores[0].dtype).eps)
    delta = tol * norm / math.sqrt(d - 1)
    for k in range(d - 1):
        r0, n, r1 = cores[k].shape
        u, s, vh = torch.linalg.svd(cores[k].reshape(r0 * n, r1), full_matrices=False)
        rank = truncation_rank(s, delta, max_rank)
        cores[k] = u[:, :rank].reshape(r0, n, rank)
        cores[k + 1] = torch.einsum("ab,bnc->anc", s[:rank, None] * vh[:rank], cores[k + 1])
    return cores
