"""Block tensor trains: B vectors of one TT format held as one TT whose last core carries the column index (the
*format* axis).

A *block TT* of B columns ``U = [u_1, …, u_B]`` (each of modes ``(n_1, …, n_d)``) is a :class:`TTVector` with modes
``(n_1, …, n_{d−1}, n_d·B)``: its last core, reshaped to ``(r, n_d, B)``, holds the column index b fastest; the
first d − 1 cores are shared by every column. The block Kalman filters of :mod:`tnbayes.inference.kalman` process B
measurement rows per step in this format: one rounding of the block instead of one per row, and the B rank-one
covariance corrections ``Σ_b u_b v_bᵀ`` as one term of :func:`~tnbayes.tensors.randomized_round_sum` (the triple
``(U, V, B)``) whose cost is that of a single outer product of the blocks' ranks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from tnbayes.tensors.tt import TTMatrix, TTVector
from tnbayes.tensors.tt_rounding import block_sum, inner_product_step, truncation_rank

__all__ = ["block_columns", "block_dot", "block_from_dense", "block_gram", "block_matvec", "block_matvec_rounded",
           "block_mix", "block_outer", "block_transpose_norms_squared", "block_weighted_sum", "columns_to_block"]


def _last(block: TTVector, batch: int) -> torch.Tensor:
    """The last core of a block TT as (r, n_d, B)."""
    core = block.cores[-1]
    return core.reshape(core.shape[0], core.shape[1] // batch, batch)


def _with_last(block: TTVector, last: torch.Tensor) -> TTVector:
    """``block`` with its last core replaced by ``last`` (r, n_d, B')."""
    return TTVector(list(block.cores[:-1]) + [last.reshape(last.shape[0], -1, 1)])


def columns_to_block(vectors: Sequence[TTVector]) -> TTVector:
    """B TT-vectors of one shape as one block TT, exactly: stacked block-diagonally (ranks Σ_b r_b; round the
    result to compress it).

    Parameters
    ----------
    vectors : sequence of B TTVector with modes (n_1, …, n_d)

    Returns
    -------
    TTVector with modes (n_1, …, n_{d−1}, n_d·B)
    """
    B = len(vectors)
    stacked: list[torch.Tensor] | None = None
    for b, x in enumerate(vectors):
        last = x.cores[-1].new_zeros(x.cores[-1].shape[0], x.cores[-1].shape[1], B)
        last[:, :, b] = x.cores[-1][:, :, 0]
        cores = list(x.cores[:-1]) + [last.reshape(last.shape[0], -1, 1)]
        stacked = cores if stacked is None else block_sum(stacked, cores)
    return TTVector(stacked)


def block_columns(block: TTVector, batch: int) -> list[TTVector]:
    """The B columns of a block TT as TT-vectors (sharing the first d − 1 cores)."""
    last = _last(block, batch)
    return [TTVector(list(block.cores[:-1]) + [last[:, :, b:b + 1]]) for b in range(batch)]


def block_from_dense(columns: torch.Tensor, shape: Sequence[int], *, tol: float = 0.0,
                     max_rank: int | None = None) -> TTVector:
    """TT-SVD of B dense vectors as one block TT (the tensor (n_1, …, n_d·B), the column index fastest).

    The unfoldings of a block are very wide (B·N / n_1 columns at the first step), where an SVD is slow:
    :func:`~tnbayes.tensors.tt_svd` takes the Gram route there (float64, ``tol`` ≥
    :data:`~tnbayes.tensors.tt_rounding.GRAM_MIN_TOL` or 0 with a cap: eigenvectors of the small Gram matrices,
    singular values accurate to ~√ε relative).

    Parameters
    ----------
    columns : torch.Tensor of shape (B, N)
        The vectors (N = Π shape), one per row.
    shape : sequence of int
        Modes (n_1, …, n_d).
    tol, max_rank
        Relative accuracy (of the Frobenius norm of the whole block) and rank cap.

    Returns
    -------
    TTVector with modes (n_1, …, n_{d−1}, n_d·B)
    """
    B = columns.shape[0]
    modes = [int(s) for s in shape[:-1]] + [int(shape[-1]) * B]
    return TTVector.from_dense(columns.T.reshape(*modes), modes, tol=tol, max_rank=max_rank)


def block_matvec(matrix: TTMatrix, block: TTVector, batch: int) -> TTVector:
    """``A U`` column by column, as a block TT (exact: ranks multiply).

    Parameters
    ----------
    matrix : TTMatrix with modes (m_1, …, m_d) × (n_1, …, n_d)
    block : block TTVector with modes (n_1, …, n_{d−1}, n_d·B)
    batch : int
        B.

    Returns
    -------
    block TTVector with modes (m_1, …, m_{d−1}, m_d·B)
    """
    cores = []
    last_index = len(matrix.cores) - 1
    for k, (a, x) in enumerate(zip(matrix.cores, block.cores)):
        if k == last_index:
            x = x.reshape(x.shape[0], x.shape[1] // batch, batch)  # the column index as the right rank
        core = torch.einsum("amnb,cnd->acmbd", a, x)
        cores.append(core.reshape(a.shape[0] * x.shape[0], a.shape[1], a.shape[3] * x.shape[2]))
    cores[-1] = cores[-1].reshape(cores[-1].shape[0], -1, 1)
    return TTVector(cores)


def block_mix(block: TTVector, weights: torch.Tensor, batch: int) -> TTVector:
    """``U Wᵀ``: column i is ``Σ_j W_ij u_j`` (the last core times Wᵀ; ranks unchanged).

    Parameters
    ----------
    block : block TTVector of B columns
    weights : torch.Tensor of shape (B', B)
    batch : int
        B.

    Returns
    -------
    block TTVector of B' columns
    """
    return _with_last(block, torch.einsum("rmj,ij->rmi", _last(block, batch), weights.to(block.dtype)))


def block_weighted_sum(block: TTVector, coefficients: torch.Tensor, batch: int) -> TTVector:
    """``U c = Σ_b c_b u_b`` as a TT-vector of the block's ranks.

    Parameters
    ----------
    block : block TTVector of B columns
    coefficients : torch.Tensor of shape (B,)
    batch : int
        B.

    Returns
    -------
    TTVector with modes (n_1, …, n_d)
    """
    return block_mix(block, coefficients.reshape(1, -1), batch)


def block_gram(block: TTVector, batch: int, other: TTVector | None = None) -> torch.Tensor:
    """``UᵀU`` (B × B) of a block TT, or ``UᵀV`` with a second block of the same modes.

    Parameters
    ----------
    block : block TTVector of B columns
        U.
    batch : int
        B.
    other : block TTVector of B columns, optional
        V (default: U).

    Returns
    -------
    torch.Tensor of shape (B, B)
        Entry (i, j) is ``⟨u_i, v_j⟩``.
    """
    other = block if other is None else other
    if other.shape != block.shape:
        raise ValueError(f"block_gram needs two blocks with the same modes; got {block.shape} and {other.shape}.")
    env = torch.ones(1, 1, dtype=block.dtype, device=block.device)
    for core, other_core in zip(block.cores[:-1], other.cores[:-1]):
        env = inner_product_step(env, core, other_core)
    return inner_product_step(env, _last(block, batch), _last(other, batch))


def block_matvec_rounded(matrix: TTMatrix, block: TTVector, batch: int, tol: float = 0.0,
                         max_rank: int | None = None) -> TTVector:
    """``matrix`` times every column of a block TT, rounded, without forming the rank-``r_A·r_U`` product (zip-up).

    The block version of :meth:`~tnbayes.tensors.TTMatrix.matvec_rounded`: the product is built core by core
    from the left and split by a truncated SVD after each core (singular values above a tenth of the final
    tolerance kept), the column index riding on the last core; a final rounding gives ``tol`` / ``max_rank``.

    Parameters
    ----------
    matrix : TTMatrix with modes (m_1, …, m_d) × (n_1, …, n_d)
    block : block TTVector with modes (n_1, …, n_{d−1}, n_d·B)
    batch : int
        B.
    tol : float
        Relative accuracy of the block (Frobenius norm of all columns).
    max_rank : int, optional

    Returns
    -------
    block TTVector with modes (m_1, …, m_{d−1}, m_d·B)
    """
    d = len(matrix.cores)
    carry = torch.ones(1, 1, 1, dtype=matrix.dtype, device=matrix.device)  # (t, r_A, r_U)
    cores: list[torch.Tensor] = []
    for k, (a, x) in enumerate(zip(matrix.cores, block.cores)):
        if k == d - 1:
            x = _last(block, batch)  # the column index as the right rank
        # matrix products, not einsum: the contraction of a few small cores per call makes its overhead count
        t, ra, rx = carry.shape
        rd = x.shape[2]
        partial = (carry.reshape(t * ra, rx) @ x.reshape(rx, -1)).reshape(t, ra, x.shape[1], rd)  # (t, r_A, j, r_U')
        m, rb = a.shape[1], a.shape[3]
        product = (partial.permute(0, 3, 1, 2).reshape(t * rd, -1) @ a.permute(0, 2, 1, 3).reshape(-1, m * rb))
        product = product.reshape(t, rd, m, rb).permute(0, 2, 3, 1)  # (t, m, r_A', r_U')
        if k == d - 1:
            cores.append(product.reshape(t, m * rb * rd, 1))  # rb = 1, rd = B: the column index fastest
            break
        u, sv, vh = torch.linalg.svd(product.reshape(t * m, rb * rd), full_matrices=False)
        delta = 0.1 * tol * float(torch.linalg.vector_norm(sv)) / math.sqrt(max(d - 1, 1))
        rank = truncation_rank(sv, delta, max_rank)
        cores.append(u[:, :rank].reshape(t, m, rank))
        carry = (sv[:rank, None] * vh[:rank]).reshape(rank, rb, rd)
    return TTVector(cores).round(tol, max_rank)


def block_dot(block: TTVector, vector: TTVector, batch: int) -> torch.Tensor:
    """``u_bᵀ x`` for every column of a block TT → shape (B,).

    Parameters
    ----------
    block : block TTVector with modes (n_1, …, n_{d−1}, n_d·B)
    vector : TTVector with modes (n_1, …, n_d)
    batch : int
        B.
    """
    env = torch.ones(1, 1, dtype=vector.dtype, device=vector.device)
    for u, x in zip(block.cores[:-1], vector.cores[:-1]):
        env = inner_product_step(env, u, x)
    return inner_product_step(env, _last(block, batch), vector.cores[-1]).reshape(-1)


def block_transpose_norms_squared(matrix: TTMatrix, block: TTVector, batch: int) -> torch.Tensor:
    """``‖Aᵀ u_b‖²`` for every column of a block TT, without forming ``Aᵀ U`` → shape (B,).

    With ``A = L`` a covariance root these are the predictive variances ``u_bᵀ P u_b`` of B rows (the block
    version of :meth:`~tnbayes.tensors.TTMatrix.transpose_matvec_norm_squared`).

    Parameters
    ----------
    matrix : TTMatrix with modes (n_1, …, n_d) × (m_1, …, m_d)
    block : block TTVector with modes (n_1, …, n_{d−1}, n_d·B)
    batch : int
        B.
    """
    env = torch.ones(1, 1, 1, 1, dtype=matrix.dtype, device=matrix.device)  # (u, A, A, u) ranks
    last = len(matrix.cores) - 1
    for k, (a, x) in enumerate(zip(matrix.cores, block.cores)):
        if k == last:
            x = _last(block, batch)
            t = torch.einsum("pqsu,pib->qsuib", env, x)
            t = torch.einsum("qsuib,qijd->sudjb", t, a)
            return torch.einsum("sudjb,skje,ukb->b", t, a, x)
        t = torch.einsum("pqsu,pic->qsuic", env, x)
        t = torch.einsum("qsuic,qijd->sucjd", t, a)
        t = torch.einsum("sucjd,skje->ucdke", t, a)
        env = torch.einsum("ucdke,ukf->cdef", t, x)
    raise AssertionError("unreachable")


def block_outer(left: TTVector, right: TTVector, batch: int) -> TTMatrix:
    """``Σ_b u_b v_bᵀ`` of two block TTs as a TT-matrix of ranks ``r_U·r_V`` (formed; see
    :func:`~tnbayes.tensors.randomized_round_sum` for rounding it without forming it).

    Parameters
    ----------
    left : block TTVector with modes (m_1, …, m_{d−1}, m_d·B)
    right : block TTVector with modes (n_1, …, n_{d−1}, n_d·B)
    batch : int
        B.

    Returns
    -------
    TTMatrix with modes (m_1, …, m_d) × (n_1, …, n_d)
    """
    cores = []
    for u, v in zip(left.cores[:-1], right.cores[:-1]):
        core = torch.einsum("amb,cnd->acmnbd", u, v)
        cores.append(core.reshape(u.shape[0] * v.shape[0], u.shape[1], v.shape[1], u.shape[2] * v.shape[2]))
    u, v = _last(left, batch), _last(right, batch)
    core = torch.einsum("amj,cnj->acmn", u, v)
    cores.append(core.reshape(u.shape[0] * v.shape[0], u.shape[1], v.shape[1], 1))
    return TTMatrix(cores)
