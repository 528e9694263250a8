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

__all__ = ["block_sum", "cores_to_dense", "gram_rank", "inner_product_step", "leading_factor", "left_orthogonalize",
           "matvec_to_dense", "middle_bond", "right_orthogonalize", "round_cores", "truncation_rank", "tt_svd",
           "uses_gram_route"]

#: a truncated SVD through the eigendecomposition of the smaller Gram matrix resolves singular values down to about
#: √eps·σ_max (1.5e-8 in float64): :func:`tt_svd` takes that route in float64 when the tolerance is at least this
#: large, or 0 with a rank cap (the leading ranks are kept), and LAPACK's SVD otherwise
GRAM_MIN_TOL = 1e-6


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
    return gram_rank(singular_values.flip(0) ** 2, delta, max_rank)


def leading_factor(matrix: torch.Tensor, delta: float, max_rank: int | None, *,
                   gram: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Truncated SVD ``matrix ≈ u @ rest`` with orthonormal ``u``: the rank of :func:`truncation_rank`.

    Parameters
    ----------
    matrix : torch.Tensor of shape (m, n)
    delta : float
        Allowed Frobenius norm of the discarded singular values.
    max_rank : int, optional
    gram : bool
        Through the eigendecomposition of the smaller Gram matrix (``matrix matrixᵀ`` when m ≤ n, else
        ``matrixᵀ matrix`` and a QR of the kept columns) instead of an SVD: matrix products and one small
        ``eigh``, several times faster for the small and very unequal shapes of TT sweeps, with singular values
        resolved to about √eps·σ_max (see :data:`GRAM_MIN_TOL`). When the rank can stay full and a Cholesky
        factorisation of the Gram matrix minus ``delta²·I`` succeeds (nothing would be discarded), no ``eigh``:
        ``u`` is the identity (m ≤ n) or the Q of a QR of ``matrix`` (m > n).

    Returns
    -------
    u : torch.Tensor of shape (m, k)
        Orthonormal columns.
    rest : torch.Tensor of shape (k, n)
        ``uᵀ matrix`` (the singular values times the right singular vectors, up to a rotation).
    """
    m, n = matrix.shape
    if not gram:
        u, s, vh = torch.linalg.svd(matrix, full_matrices=False)
        rank = truncation_rank(s, delta, max_rank)
        return u[:, :rank], s[:rank, None] * vh[:rank]
    wide = m <= n
    gram_matrix = matrix @ matrix.T if wide else matrix.T @ matrix
    short = min(m, n)
    if max_rank is None or max_rank >= short:  # nothing to discard when σ_min² > delta²: Cholesky tells
        identity = torch.eye(short, dtype=matrix.dtype, device=matrix.device)
        if int(torch.linalg.cholesky_ex(gram_matrix - (delta * delta) * identity).info) == 0:
            return (identity, matrix) if wide else torch.linalg.qr(matrix)
    values, vectors = torch.linalg.eigh(gram_matrix)
    rank = gram_rank(values, delta, max_rank)
    kept = vectors[:, vectors.shape[1] - rank:]  # the leading eigenvectors (eigh sorts ascending; order is free)
    if wide:
        return kept, kept.T @ matrix
    u, r = torch.linalg.qr(matrix @ kept)
    return u, r @ kept.T


def cores_to_dense(cores: Sequence[torch.Tensor]) -> torch.Tensor:
    """The full tensor of TT cores, flattened, contracted from both ends towards the middle bond.

    Parameters
    ----------
    cores : sequence of torch.Tensor of shape (r_{k-1}, n_k, r_k), or (B, r_{k-1}, n_k, r_k)
        One TT, or B TTs of equal ranks (e.g. from :func:`~tnbayes.tensors.tt_svd_batched`).

    Returns
    -------
    torch.Tensor of shape (n_1·…·n_d,), or (B, n_1·…·n_d)
        Index order of the modes: n_1 slowest.

    Notes
    -----
    Left to right alone costs Π_{j<d} n_j · r_{d-1} · n_d r_d at the last core, the largest ranks meeting the
    largest partial products; splitting where the left and right partial products are about √N keeps every
    product near N·r.
    """
    d = len(cores)
    batch = tuple(cores[0].shape[:-3])
    sizes = [int(c.shape[-2]) for c in cores]
    split = middle_bond(sizes)
    left = cores[0].reshape(*batch, sizes[0], -1)
    for core in cores[1:split]:
        left = (left @ core.reshape(*batch, core.shape[-3], -1)).reshape(*batch, -1, core.shape[-1])
    right = cores[-1].reshape(*batch, cores[-1].shape[-3], -1)
    for core in reversed(cores[split:-1]):
        right = (core.reshape(*batch, -1, core.shape[-1]) @ right).reshape(*batch, core.shape[-3], -1)
    return (left @ right).reshape(*batch, -1) if split < d else left.reshape(*batch, -1)


def middle_bond(sizes: Sequence[int]) -> int:
    """Where to join a TT contracted from both ends: the number of leading modes whose product first reaches the
    square root of the product of all, so every partial product stays near N times a rank.

    Parameters
    ----------
    sizes : sequence of int
        The d mode sizes.

    Returns
    -------
    int
        Between 1 and d − 1 (1 for d = 1).
    """
    d = len(sizes)
    total, split, left_size = math.prod(sizes), 1, sizes[0]
    while split < d - 1 and left_size * left_size < total:
        left_size *= sizes[split]
        split += 1
    return split


def matvec_to_dense(matrix: Sequence[torch.Tensor], vector: Sequence[torch.Tensor], *,
                    transpose: bool = False) -> torch.Tensor:
    """The dense product of a TT-matrix and a TT-vector, ``A x`` (or ``Aᵀ x``), without forming the product's cores.

    Parameters
    ----------
    matrix : sequence of torch.Tensor of shape (r_{k-1}, m_k, n_k, r_k)
        The cores of ``A`` (row modes m, column modes n).
    vector : sequence of torch.Tensor of shape (s_{k-1}, n_k, s_k), or (B, s_{k-1}, n_k, s_k)
        The cores of ``x`` (modes m_k with ``transpose``), or of B vectors of equal ranks (e.g. from
        :func:`~tnbayes.tensors.tt_svd_batched`).
    transpose : bool
        Compute ``Aᵀ x`` (contract the row modes).

    Returns
    -------
    torch.Tensor of shape (m_1·…·m_d,), or (B, m_1·…·m_d)
        (n_1·…·n_d with ``transpose``); n_1 slowest, as :func:`cores_to_dense`.

    Notes
    -----
    Contracted from both ends towards the bond of :func:`cores_to_dense`, core by core with ``A`` and ``x`` in turn,
    so the partial results stay near N·r_A·r_x numbers and no core of rank r_A·r_x is formed (``cores_to_dense`` of
    :meth:`TTMatrix.matvec` forms d of them; the measured saving is in docs/benchmarks.md).
    """
    if len(matrix) != len(vector):
        raise ValueError(f"matvec_to_dense needs as many vector cores as matrix cores; got {len(vector)} and "
                         f"{len(matrix)}.")
    batch = tuple(vector[0].shape[:-3])
    cores = [c if transpose else c.transpose(1, 2) for c in matrix]  # (r, contracted q, output p, r')
    split = middle_bond([int(c.shape[2]) for c in cores])
    left = cores[0].new_ones(*batch, 1, 1, 1)  # (output so far, r_A, r_x)
    for a, x in zip(cores[:split], vector[:split]):
        (ra, q, p, ra1), rx1, size = a.shape, x.shape[-1], left.shape[-3]
        part = (left.reshape(*batch, size * ra, -1) @ x.reshape(*batch, x.shape[-3], -1)).reshape(*batch, size,
                                                                                                   ra * q, rx1)
        # each output's (r_A q, r_x') slice times the core: (output, p r_A', r_x'), a view of the next partial result
        left = (a.reshape(ra * q, p * ra1).T @ part).reshape(*batch, size * p, ra1, rx1)
    right = cores[0].new_ones(*batch, 1, 1, 1)  # (r_A, r_x, output so far)
    for a, x in zip(reversed(cores[split:]), reversed(vector[split:])):
        (ra, q, p, ra1), rx, size = a.shape, x.shape[-3], right.shape[-1]
        part = x.reshape(*batch, rx * q, -1) @ right.transpose(-3, -2).reshape(*batch, x.shape[-1], ra1 * size)
        part = part.reshape(*batch, rx, q, ra1, size).movedim(-4, -2).reshape(*batch, q * ra1, rx * size)
        part = a.permute(0, 2, 1, 3).reshape(ra * p, q * ra1) @ part
        right = part.reshape(*batch, ra, p, rx, size).transpose(-3, -2).reshape(*batch, ra, rx, p * size)
    return (left.reshape(*batch, left.shape[-3], -1) @ right.reshape(*batch, -1, right.shape[-1])).reshape(*batch, -1)


def gram_rank(squares: torch.Tensor | Sequence[float], delta: float, max_rank: int | None) -> int:
    """:func:`truncation_rank` from the ascending eigenvalues of a Gram matrix (the squared singular values).

    Parameters
    ----------
    squares : torch.Tensor of shape (k,), or k floats
        Non-decreasing, as ``torch.linalg.eigh`` returns them (round-off may make the smallest negative).
    delta : float
        Allowed Frobenius norm of the discarded singular values.
    max_rank : int, optional

    Returns
    -------
    int
        Between 1 and ``k`` (and ``max_rank``).
    """
    # ascending cumulative sums are the tails of the descending values: keep those whose tail exceeds delta² (a
    # loop over Python floats: the k ≤ a few hundred values cost less than the array calls of a cumulative sum)
    threshold, tail, keep = delta * delta, 0.0, 0
    for value in squares.detach().tolist() if isinstance(squares, torch.Tensor) else squares:
        tail += max(value, 0.0)
        keep += tail > threshold
    keep = max(keep, 1)
    return keep if max_rank is None else min(keep, int(max_rank))


def uses_gram_route(dtype: torch.dtype, tol: float, max_rank: int | None) -> bool:
    """Whether :func:`tt_svd` truncates through Gram matrices (:func:`leading_factor` with ``gram``) rather than
    LAPACK's SVD: in float64 with ``tol`` at least :data:`GRAM_MIN_TOL`, or 0 with a ``max_rank``.

    Parameters
    ----------
    dtype : torch.dtype
    tol : float
    max_rank : int, optional

    Returns
    -------
    bool
    """
    return dtype == torch.float64 and (tol >= GRAM_MIN_TOL or (tol == 0 and max_rank is not None))


def tt_svd(tensor: torch.Tensor, *, tol: float = 0.0, max_rank: int | None = None,
           reference_norm: float | None = None, norm_core: int | None = None) -> list[torch.Tensor]:
    """TT-SVD of a dense d-way tensor (Oseledets 2011, Algorithm 1).

    Parameters
    ----------
    tensor : torch.Tensor of shape (n_1, …, n_d)
    tol : float
        Relative accuracy: ``‖X − TT‖_F ≤ tol·‖X‖_F`` when ``max_rank`` does not bind.
    max_rank : int, optional
        Upper bound on every TT rank.
    reference_norm : float, optional
        Make the bound ``tol·reference_norm`` instead of ``tol·‖X‖`` (never below round-off of ``‖X‖``), as
        :func:`round_cores` does.
    norm_core : int, optional
        The core that holds the norm: the bonds left of it are truncated from the left, those right of it from the
        right (0: cores 1..d-1 right-orthonormal, as :func:`~tnbayes.tensors.round_rank_one_update` takes its
        factors). Default: the Gram route chooses each bond's side from the shapes, the SVD route truncates left
        to right (the last core holds the norm).

    Returns
    -------
    list of torch.Tensor
        Cores of shape ``(r_{k-1}, n_k, r_k)``; one core holds the norm, the cores left of it are left-orthonormal
        and those right of it right-orthonormal.

    Notes
    -----
    In float64 when ``tol`` is at least :data:`GRAM_MIN_TOL`, or 0 with a ``max_rank``, the truncated SVDs come from
    Gram matrices (:func:`leading_factor`) and each bond is truncated from its shorter side unless ``norm_core`` is
    given, see :func:`_tt_svd_both_ends`; otherwise by LAPACK's SVD. The Gram
    route resolves singular values down to about √eps·‖X‖ whatever ``reference_norm`` is: where ``tol`` times it is
    smaller, singular values near round-off are kept (ranks can exceed an SVD's, the error does not).
    """
    shape = tuple(tensor.shape)
    d = len(shape)
    norm = float(torch.linalg.vector_norm(tensor))
    if reference_norm is not None:
        norm = max(float(reference_norm), norm * torch.finfo(tensor.dtype).eps)
    delta = tol * norm / math.sqrt(max(d - 1, 1))
    if norm_core is not None and not 0 <= int(norm_core) < d:
        raise ValueError(f"norm_core must be a core index in [0, {d - 1}]; got {norm_core}.")
    gram = uses_gram_route(tensor.dtype, tol, max_rank)
    if norm_core is None and not gram:
        norm_core = d - 1
    return _tt_svd_both_ends(tensor, delta, max_rank, gram=gram, norm_core=norm_core)


def _tt_svd_both_ends(tensor: torch.Tensor, delta: float, max_rank: int | None, *, gram: bool,
                      norm_core: int | None) -> list[torch.Tensor]:
    """TT-SVD with each bond truncated from the left or from the right, the truncated SVDs by Gram matrices
    (``gram``) or LAPACK.

    Without a ``norm_core``, bonds are taken from the left while the left dimension (rank × mode) is at most the
    right one, otherwise from the right, so every Gram matrix is that of the short side of a wide unfolding (no QR),
    and a bond whose smallest singular value already exceeds ``delta`` costs a Cholesky factorisation (see
    :func:`leading_factor`); with one, the bonds left of it from the left and the others from the right. The bases
    taken are orthonormal, so each truncation sees the singular values of the partly truncated tensor's unfolding,
    and the error is within ``delta·√(d − 1)`` as for Oseledets' left-to-right sweep.
    """
    shape = tuple(tensor.shape)
    left_cores: list[torch.Tensor] = []
    right_cores: list[torch.Tensor] = []
    left_rank, right_rank, low, high = 1, 1, 0, len(shape) - 1
    rest = tensor.reshape(-1)
    while low < high:
        rows, columns = left_rank * shape[low], shape[high] * right_rank
        if low < norm_core if norm_core is not None else rows <= columns:
            u, rest = leading_factor(rest.reshape(rows, -1), delta, max_rank, gram=gram)
            left_cores.append(u.reshape(left_rank, shape[low], u.shape[1]))
            left_rank, low = u.shape[1], low + 1
        else:
            u, rest_t = leading_factor(rest.reshape(-1, columns).T, delta, max_rank, gram=gram)
            right_cores.insert(0, u.T.reshape(u.shape[1], shape[high], right_rank))
            right_rank, high, rest = u.shape[1], high - 1, rest_t.T
    return [*left_cores, rest.reshape(left_rank, shape[low], right_rank), *right_cores]


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


def _times_left_rank(factor: torch.Tensor, core: torch.Tensor) -> torch.Tensor:
    """``factor`` (a, b) applied to the left rank of ``core`` (b, n, c) → (a, n, c): one matrix product (an
    ``einsum`` costs several microseconds more per call, which the sweeps of small cores pay d times)."""
    return (factor @ core.reshape(core.shape[0], -1)).reshape(factor.shape[0], *core.shape[1:])


def inner_product_step(env: torch.Tensor, core: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """One step of the inner product of two TTs from the left: ``Σ_{a,b,n} env[a, b] core[a, n, c] other[b, n, d]``.

    Two matrix products (an ``einsum`` of three operands costs more than both at the sizes of TT cores).

    Parameters
    ----------
    env : torch.Tensor of shape (a, b)
    core : torch.Tensor of shape (a, n, c)
    other : torch.Tensor of shape (b, n, d)

    Returns
    -------
    torch.Tensor of shape (c, d)
    """
    a, n, c = core.shape
    carried = (env.T @ core.reshape(a, n * c)).reshape(-1, c)  # (b n, c)
    return carried.T @ other.reshape(carried.shape[0], -1)


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
        cores[k + 1] = _times_left_rank(r, cores[k + 1])
    return cores


def right_orthogonalize(cores: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """QR sweep right to left: cores 1..d-1 become right-orthonormal and the norm sits in the first core
    (:func:`left_orthogonalize` of the reversed train, each core's rank indices swapped).

    Parameters
    ----------
    cores : sequence of torch.Tensor of shape (r_{k-1}, n_k, r_k)

    Returns
    -------
    list of torch.Tensor
        Cores of the same tensor; ``‖first core‖_F`` is its Frobenius norm.
    """
    mirrored = left_orthogonalize([core.permute(2, 1, 0) for core in reversed(cores)])
    return [core.permute(2, 1, 0) for core in reversed(mirrored)]


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
    cores = right_orthogonalize(cores)  # cores 1..d-1 right-orthonormal, the norm in core 0
    norm = float(torch.linalg.vector_norm(cores[0]))
    if reference_norm is not None:  # never below round-off of the whole, so zero updates cannot inflate ranks
        norm = max(float(reference_norm), norm * torch.finfo(cores[0].dtype).eps)
    delta = tol * norm / math.sqrt(d - 1)
    for k in range(d - 1):
        r0, n, r1 = cores[k].shape
        u, s, vh = torch.linalg.svd(cores[k].reshape(r0 * n, r1), full_matrices=False)
        rank = truncation_rank(s, delta, max_rank)
        cores[k] = u[:, :rank].reshape(r0, n, rank)
        cores[k + 1] = _times_left_rank(s[:rank, None] * vh[:rank], cores[k + 1])
    return cores
