"""TT-SVDs of many dense vectors at once (the *format* axis): one batched call per bond for all of them.

:func:`tt_svd_batched` compresses B dense tensors of the same shape each into its own TT, bond by bond as
:func:`~tnbayes.tensors.tt_svd` compresses one, with one batched Gram product, ``eigh`` and product per bond for the
whole batch instead of a dozen small calls per bond and tensor (how ``TNKF`` compresses its test rows and the
held-out rows of a block), or, where no tensor of the batch discards anything at a bond, a batched Cholesky
factorisation that says so (as :func:`~tnbayes.tensors.tt_rounding.leading_factor` takes it). The TTs share
their ranks, the largest any of them needs at each bond: one whose own truncation keeps fewer carries zero slices
there, which represent nothing. The batched cores, of shape ``(B, r_{k-1}, n_k, r_k)``, go as they are to
:func:`~tnbayes.tensors.cores_to_dense` and :func:`~tnbayes.tensors.matvec_to_dense`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from tnbayes.tensors.shapes import tt_bond_bounds
from tnbayes.tensors.tt_rounding import gram_rank, uses_gram_route

__all__ = ["tt_svd_batched"]


def tt_svd_batched(tensors: torch.Tensor, shape: Sequence[int], *, tol: float = 0.0,
                   max_rank: int | None = None) -> list[torch.Tensor]:
    """TT-SVD of each of B dense tensors, the truncations of :func:`~tnbayes.tensors.tt_svd` in one batch.

    Each tensor's bonds are truncated as ``tt_svd`` truncates them (its own tolerance ``tol·‖X_b‖``, the rank cap,
    the same Gram or SVD route), so each TT meets ``tt_svd``'s error bound. The bonds are taken in the order
    ``tt_svd`` takes them for a TT at the largest ranks its modes and the cap allow (the SVD route from the left,
    the Gram route from the shorter side of each unfolding), which depends on the shape and the cap alone: a
    tensor's TT does not depend on the others in the batch, up to round-off and an orthogonal change of basis at the
    bonds where it keeps every singular value (the batch takes the Cholesky shortcut there only when no tensor of it
    discards anything, the eigenvectors otherwise: the same tensor either way). For a tensor whose ranks reach those
    bounds, which a binding cap gives, it is the TT ``tt_svd`` gives it alone, up to the same; for one whose
    tolerance keeps lower ranks, the Gram route can take its bonds in another order than ``tt_svd`` would, which gives
    another TT within the same bound. Without a tolerance the Gram route keeps singular values down to round-off
    (about √eps of the largest, see :func:`~tnbayes.tensors.tt_svd`), so there the two can differ at that level.

    Parameters
    ----------
    tensors : torch.Tensor of shape (B, N)
        The dense tensors, flattened (n_1 slowest).
    shape : sequence of int
        The d mode sizes (product N).
    tol : float
        Relative accuracy of each: ``‖X_b − TT_b‖_F ≤ tol·‖X_b‖_F`` when ``max_rank`` does not bind.
    max_rank : int, optional
        Upper bound on every TT rank.

    Returns
    -------
    list of torch.Tensor of shape (B, r_{k-1}, n_k, r_k)
        The cores of the B TTs, stacked; r_k is the largest rank any of them keeps at bond k.
    """
    shape = [int(size) for size in shape]
    d = len(shape)
    if tensors.ndim != 2 or tensors.shape[1] != math.prod(shape):
        raise ValueError(f"tensors must have shape (B, {math.prod(shape)}) for TT modes {shape}; got "
                         f"{tuple(tensors.shape)}.")
    batch = tensors.shape[0]
    if batch == 0:
        raise ValueError("tt_svd_batched needs at least one tensor; got a batch of 0.")
    deltas = (tol * torch.linalg.vector_norm(tensors, dim=1) / math.sqrt(max(d - 1, 1))).tolist()
    gram = uses_gram_route(tensors.dtype, tol, max_rank)

    bounds = (1, *tt_bond_bounds(shape), 1)

    def largest_rank(bond: int) -> int:  # of any TT of these modes at bond k (after core k − 1), under the cap
        return bounds[bond] if max_rank is None else min(bounds[bond], int(max_rank))

    left_cores: list[torch.Tensor] = []
    right_cores: list[torch.Tensor] = []
    left_rank, right_rank, low, high = 1, 1, 0, d - 1
    rest = tensors
    while low < high:
        rows, columns = left_rank * shape[low], shape[high] * right_rank
        # tt_svd's side for TTs at the largest ranks (the Gram route from the shorter side, the SVD route from the
        # left), from the shape and cap alone: a tensor's TT does not depend on the others in the batch
        if not gram or largest_rank(low) * shape[low] <= shape[high] * largest_rank(high + 1):
            u, rest = _leading_factors(rest.reshape(batch, rows, -1), deltas, max_rank, gram)
            left_cores.append(u.reshape(batch, left_rank, shape[low], u.shape[2]))
            left_rank, low, rest = u.shape[2], low + 1, rest.reshape(batch, -1)
        else:
            u, rest_t = _leading_factors(rest.reshape(batch, -1, columns).mT, deltas, max_rank, gram)
            right_cores.insert(0, u.mT.reshape(batch, u.shape[2], shape[high], right_rank))
            right_rank, high, rest = u.shape[2], high - 1, rest_t.mT.reshape(batch, -1)
    return [*left_cores, rest.reshape(batch, left_rank, shape[low], right_rank), *right_cores]


def _leading_factors(matrix: torch.Tensor, deltas: list[float], max_rank: int | None,
                     gram: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~tnbayes.tensors.tt_rounding.leading_factor` of each matrix of a batch (B, m, n) with its own
    ``delta``, by the same route (``gram``: the eigenvectors of the smaller Gram matrix; else LAPACK's SVD):
    ``u`` (B, m, k) and ``rest`` (B, k, n), k the largest rank kept, with ``u_b rest_b`` the truncation of matrix b
    at its own rank k_b. The directions beyond k_b carry nothing: their columns of ``u_b`` are zero (the SVD route:
    the last k − k_b; the Gram route: the first k − k_b), or, where the Gram is ``mᵀm`` (m > n) and ``u_b`` the Q of
    a QR, ``rest_b`` has rank k_b. Where the cap allows every direction and a Cholesky factorisation of each Gram
    matrix minus its ``delta²·I`` succeeds (nothing would be discarded in any of them), no ``eigh``, as in
    ``leading_factor``: ``u`` is the identity (m ≤ n) or the Q of a QR of the matrix (m > n)."""
    m, n = matrix.shape[1:]
    wide = m <= n
    if gram:
        grams = matrix @ matrix.mT if wide else matrix.mT @ matrix
        short = min(m, n)
        if max_rank is None or max_rank >= short:  # as leading_factor: nothing to discard where Cholesky tells so
            identity = torch.eye(short, dtype=matrix.dtype, device=matrix.device)
            squares = torch.tensor(deltas, dtype=matrix.dtype, device=matrix.device).square()[:, None, None]
            if not bool(torch.linalg.cholesky_ex(grams - squares * identity).info.any()):  # for every matrix
                return (identity.expand(matrix.shape[0], short, short), matrix) if wide else torch.linalg.qr(matrix)
        values, vectors = torch.linalg.eigh(grams)
    else:
        u, singular_values, vh = torch.linalg.svd(matrix, full_matrices=False)
        values = singular_values.flip(1).square()  # ascending squares, as truncation_rank takes them
    own_ranks = [gram_rank(row, delta, max_rank) for row, delta in zip(values.tolist(), deltas)]
    rank = max(own_ranks)
    keeps = None  # (B, k): which of the k columns each matrix keeps, where some keep fewer than the batch's rank
    if min(own_ranks) < rank:
        ranks = torch.tensor(own_ranks, device=matrix.device)[:, None]
        position = torch.arange(rank, device=matrix.device)
        keeps = (position >= rank - ranks if gram else position < ranks).to(matrix.dtype)
    if not gram:  # the leading singular triplets, descending
        u, rest = u[:, :, :rank], singular_values[:, :rank, None] * vh[:, :rank]
        return (u, rest) if keeps is None else (u * keeps[:, None, :], keeps[:, :, None] * rest)
    # eigh sorts ascending: the last `rank` eigenvectors, of which matrix b keeps its last ranks[b]
    kept = vectors[:, :, vectors.shape[2] - rank:]
    if keeps is not None:
        kept = kept * keeps[:, None, :]
    if wide:
        return kept, kept.mT @ matrix
    q, r = torch.linalg.qr(matrix @ kept)
    return q, r @ kept.mT
