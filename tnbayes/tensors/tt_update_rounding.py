"""TT-rounding of a TT-matrix plus a scaled outer product from Gram matrices, without forming it (the *format* axis).

:func:`round_rank_one_update` rounds ``A + s·u vᵀ`` (``A`` a TT-matrix, ``u`` and ``v`` TT-vectors) to a tolerance
and a rank cap without forming the sum, whose ranks ``r_A + r_u·r_v`` make Oseledets' rounding cost
O(d n (r_A + r_u r_v)³) per call (the row update of the square-root Kalman filter: 8 + 12·12 on Adult). It is that
rounding's left-to-right sweep of truncated SVDs of the unfoldings, where each SVD comes from the eigenvectors of
``M = Z G Zᵀ`` — ``Z`` the current core after the truncated left bases, ``G`` the Gram matrix of the sum's right
interface: all of them (the same result up to round-off) where the bond is small next to the cap, otherwise the
leading ones from a subspace iteration with a fixed start that only multiplies by M (the same result up to the
iteration's error, which the tests bound by 1.05× the formed rounding's).

With ``u`` and ``v`` right-orthonormal (made so by a QR sweep unless the caller says they are, e.g. from
:func:`~tnbayes.tensors.tt_svd` with ``norm_core=0``) the Gram of their right interface is the identity, so ``G``
has two blocks left, built right to left at O(d n r_A r_u r_v (r_A + r_u + r_v)): ``A``'s own ``G_A`` and the
cross term ``X`` of ``A`` with ``u ⊗ v``; then ``M = Z_A (G_A − X Xᵀ) Z_Aᵀ + Y Yᵀ`` with ``Y = Z_uv + Z_A X``
(the Schur complement of the identity block), with no Kronecker product: M is formed, or multiplied by through
``Z_A`` and ``Y`` (four large products and one r_A × r_A), whichever costs fewer flops (:func:`bond_basis_plan`).

Singular values come from an eigendecomposition of their squares, computed in float64 whatever the cores' dtype, so
they are resolved to about √eps of the largest (1.5e-8): tails below that are kept rather than discarded (the rank
cap still applies), so with a tolerance relative to a small ``reference_norm`` the ranks can reach the cap where the
formed sum's rounding would stop below it.

References
----------
I. V. Oseledets, "Tensor-train decomposition", SIAM J. Sci. Comput. 33(5), 2011 (Algorithm 2).
H. Al Daas, G. Ballard, L. Manning, "Parallel tensor train rounding using Gram SVD", IPDPS 2022.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from tnbayes.tensors.tt import TTMatrix, TTVector
from tnbayes.tensors.tt_rounding import gram_rank, right_orthogonalize

__all__ = ["bond_basis_plan", "round_rank_one_update"]


def _right_grams(matrix: list[torch.Tensor], left: list[torch.Tensor], right: list[torch.Tensor]) -> list[tuple]:
    """Gram blocks of the right interfaces of ``A`` and of ``u ⊗ v`` (right-orthonormal: their own Gram is the
    identity) at every bond k < d − 1 (after core k): ``(G_A (a, a), X (a, b·c))``, ``X`` the cross term."""
    d = len(matrix)
    gaa = matrix[0].new_ones(1, 1)
    gao = matrix[0].new_ones(1, 1, 1)
    grams: list[tuple] = [()] * (d - 1)
    for k in range(d - 1, 0, -1):
        a, u, v = matrix[k], left[k], right[k]
        ra, ni, nj, ra1 = a.shape
        rb, rc = u.shape[0], v.shape[0]
        gaa = (a.reshape(-1, ra1) @ gaa).reshape(ra, -1) @ a.reshape(ra, -1).T
        cross = (gao.reshape(-1, gao.shape[2]) @ v.reshape(-1, v.shape[2]).T).reshape(ra1, -1, rc, nj)  # (p, q, c, j)
        cross = u.reshape(-1, u.shape[2]) @ cross.permute(1, 0, 2, 3).reshape(u.shape[2], -1)  # (b i, p c j)
        cross = cross.reshape(rb, ni, ra1, rc, nj).permute(1, 4, 2, 0, 3)  # (i, j, p, b, c)
        gao = (a.reshape(ra, -1) @ cross.reshape(-1, rb * rc)).reshape(ra, rb, rc)
        grams[k - 1] = (gaa, gao.reshape(ra, rb * rc))
    return grams


#: columns beyond the rank cap of the subspace iteration that replaces a full eigendecomposition of a bond's
#: ``Z G Zᵀ`` when the cap is well below its size
SUBSPACE_OVERSAMPLING = 8
_START_BLOCKS: dict[tuple, torch.Tensor] = {}


def _start_block(size: int, width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A fixed Gaussian (size, width) block (seeded by its shape, drawn on the CPU), cached."""
    key = (size, width, dtype, str(device))
    if key not in _START_BLOCKS:
        generator = torch.Generator().manual_seed(size * 1009 + width)
        with torch.inference_mode(False):  # a normal tensor, whichever mode the first caller runs in
            block = torch.randn(size, width, generator=generator, dtype=torch.float64).to(dtype).to(device)
        _START_BLOCKS[key] = block
    return _START_BLOCKS[key]


def bond_basis_plan(rows: int, columns: int, max_rank: int | None) -> tuple[int | None, bool]:
    """How :func:`round_rank_one_update` finds a bond's basis from ``M = Z G Zᵀ`` (rows × rows, ``Z`` with
    ``columns`` = r_A + r_u·r_v columns): the subspace iteration's width (None: a full eigendecomposition, when the
    cap is not well below the size — rows < 2 (cap + :data:`SUBSPACE_OVERSAMPLING`)) and whether M is formed (for a
    full eigendecomposition always; for the subspace iteration when forming it, at 2·rows²·columns flops, and three
    products with it cost fewer flops than three multiplications through Z, at 4·rows·columns·width each).

    Parameters
    ----------
    rows, columns : int
    max_rank : int, optional

    Returns
    -------
    width : int or None
    formed : bool
    """
    width = None if max_rank is None else int(max_rank) + SUBSPACE_OVERSAMPLING
    if width is None or 2 * width > rows:
        return None, True
    return width, rows * (2 * columns + 6 * width) <= 12 * columns * width


def _bond_basis(apply: Callable[[torch.Tensor], torch.Tensor], formed: torch.Tensor | None, like: torch.Tensor,
                width: int | None, trace: float, delta: float, max_rank: int | None) -> tuple[torch.Tensor, float]:
    """Orthonormal leading eigenvectors of the PSD matrix ``M`` (size × size, the rows of ``like``) that ``apply``
    multiplies by (``formed``: M itself, then used instead of ``apply``; or None), as many as :func:`gram_rank`
    keeps, and the sum of their eigenvalues.

    Without a ``width``, ``formed`` is fully decomposed. With one: two steps of subspace iteration from a fixed
    Gaussian Ω of ``width`` columns (``M Ω`` orthonormalised, then ``M Q`` — ``M² Ω`` at once would lose directions
    below eps^¼ of the largest) and Rayleigh–Ritz; the energy outside the subspace (``trace`` minus the Ritz values)
    counts as discarded, so the rank is never lower than the exact one.
    """
    size = like.shape[0]
    if formed is not None:
        apply = formed.__matmul__
    if width is None:
        values, vectors = torch.linalg.eigh(formed)
        squares = values.tolist()
        rank = gram_rank(squares, delta, max_rank)
        return _fixed_signs(vectors[:, size - rank:]), sum(squares[size - rank:])
    q, _ = torch.linalg.qr(apply(_start_block(size, width, like.dtype, like.device)))
    q, _ = torch.linalg.qr(apply(q))  # orthonormalised between the products: M² would square the eigenvalue ratios
    values, vectors = torch.linalg.eigh(q.T @ apply(q))
    squares = values.tolist()
    outside = max(trace - sum(squares), 0.0)
    rank = gram_rank([outside, *squares], delta, max_rank)
    return _fixed_signs(q @ vectors[:, width - rank:]), sum(squares[width - rank:])


def _fixed_signs(basis: torch.Tensor) -> torch.Tensor:
    """``basis`` (size, rank) with each column's largest-magnitude entry made positive. An eigenvector's sign is
    LAPACK's (or cuSOLVER's) choice; the next bond's subspace iteration starts from a fixed block in the coordinates
    this basis defines, so without a fixed sign its result would depend on the library, not only on the matrix.
    (The largest entry of an orthonormal column is not 0, so its sign is ±1.)"""
    return basis * basis.gather(0, basis.abs().argmax(dim=0, keepdim=True)).sign()


def round_rank_one_update(matrix: TTMatrix, left: TTVector, right: TTVector, scale: float, *, tol: float,
                          max_rank: int | None, reference_norm: float | None = None,
                          right_orthonormal: bool = False) -> TTMatrix:
    """``round(A + scale · u vᵀ)``, Oseledets' TT-rounding of the sum, without forming the sum.

    Parameters
    ----------
    matrix : TTMatrix with row modes (n_1, …, n_d) and column modes (m_1, …, m_d)
        ``A``.
    left : TTVector with modes (n_1, …, n_d)
        ``u``.
    right : TTVector with modes (m_1, …, m_d)
        ``v``.
    scale : float
        ``s``.
    tol : float
        Relative accuracy: the discarded part has Frobenius norm ≤ ``tol·‖A + s u vᵀ‖`` when ``max_rank`` does
        not bind (split evenly over the d − 1 bonds, as :func:`~tnbayes.tensors.round_cores`).
    max_rank : int, optional
        Cap of every rank.
    reference_norm : float, optional
        Make the bound ``tol·reference_norm`` instead (never below round-off of the sum's norm), e.g. the norm of
        the update.
    right_orthonormal : bool
        ``u`` and ``v`` already have right-orthonormal cores 1..d-1 (e.g. from :func:`~tnbayes.tensors.tt_svd`
        with ``norm_core=0``); otherwise a QR sweep makes them so first (the same result, up to how orthonormal
        the given cores are: float32 factors to about 1e-7).

    Returns
    -------
    TTMatrix
        The rounded sum; cores 0..d-2 are left-orthonormal (``‖result‖_F = ‖last core‖_F``).
    """
    if left.shape != matrix.row_shape or right.shape != matrix.col_shape:
        raise ValueError(f"u needs modes {matrix.row_shape} and v {matrix.col_shape}; got {left.shape} and "
                         f"{right.shape}.")
    dtype = matrix.cores[0].dtype  # the Gram algebra runs in float64 (it squares singular values), cast back after
    a_cores, u_cores, v_cores = ([c if c.dtype == torch.float64 else c.to(torch.float64) for c in t.cores]
                                 for t in (matrix, left, right))
    if not right_orthonormal:
        u_cores, v_cores = right_orthogonalize(u_cores), right_orthogonalize(v_cores)
    d = len(a_cores)
    grams = _right_grams(a_cores, u_cores, v_cores)
    carried_a = a_cores[0].new_ones(1, 1)  # the truncated left basis against A's rank index
    carried_uv = a_cores[0].new_full((1, 1, 1), float(scale))  # … against the ranks of u ⊗ v
    out = []
    trace = delta = math.nan
    for k in range(d):
        a, u, v = a_cores[k], u_cores[k], v_cores[k]
        r, (ra, ni, nj, ra1), rb1, rc1 = carried_a.shape[0], a.shape, u.shape[2], v.shape[2]
        rows = r * ni * nj
        z_a = (carried_a @ a.reshape(ra, -1)).reshape(rows, ra1)
        rb, rc = u.shape[0], v.shape[0]
        z_uv = (carried_uv.reshape(r * rb, rc) @ v.reshape(rc, -1)).reshape(r, rb, nj * rc1)  # (p, b, j c)
        z_uv = torch.matmul(u.reshape(rb, -1).T, z_uv).reshape(r, ni, rb1, nj, rc1)  # (p, i, b, j, c)
        z_uv = z_uv.transpose(2, 3).reshape(rows, rb1 * rc1)
        if k == d - 1:
            out.append((z_a + z_uv).reshape(r, ni, nj, 1))
            break
        gaa, cross = grams[k]
        joint, schur = torch.addmm(z_uv, z_a, cross), gaa - cross @ cross.T

        def apply(x: torch.Tensor) -> torch.Tensor:  # Z G Zᵀ x = Z_A (G_A − X Xᵀ) Z_Aᵀ x + Y Yᵀ x
            return torch.addmm(z_a @ (schur @ (z_a.T @ x)), joint, joint.T @ x)

        width, form = bond_basis_plan(rows, ra1 + joint.shape[1], max_rank)
        formed = torch.addmm(z_a @ schur @ z_a.T, joint, joint.T) if form else None
        if k == 0:  # the whole sum's squared norm, trace(Z G Zᵀ) at the first bond
            trace = max(float((z_a @ schur * z_a).sum()) + float(joint.square().sum()), 0.0)
            norm = math.sqrt(trace)
            if reference_norm is not None:
                norm = max(float(reference_norm), norm * torch.finfo(a_cores[0].dtype).eps)
            delta = tol * norm / math.sqrt(max(d - 1, 1))
        basis, trace = _bond_basis(apply, formed, z_a, width, trace, delta, max_rank)
        rank = basis.shape[1]
        out.append(basis.reshape(r, ni, nj, rank))
        carried_a = basis.T @ z_a
        carried_uv = (basis.T @ z_uv).reshape(rank, rb1, rc1)
    return TTMatrix(out if dtype == torch.float64 else [c.to(dtype) for c in out])
