"""The Gram-matrix TT kernels against dense SVDs and Oseledets' rounding of the formed sum: the truncated factor,
TT-SVD from both ends, the contractions to a dense vector, and the rounding of a TT-matrix plus an outer product."""

import math

import pytest
import torch

import tnbayes.tensors.tt_update_rounding as update_rounding
from tnbayes.tensors import TTMatrix, TTVector
from tnbayes.tensors.tt_rounding import (cores_to_dense, gram_rank, leading_factor, matvec_to_dense,
                                         right_orthogonalize, truncation_rank, tt_svd)
from tnbayes.tensors.tt_update_rounding import SUBSPACE_OVERSAMPLING, bond_basis_plan, round_rank_one_update


def _decaying(rows, columns, seed=0):
    """A matrix with singular values 2^-k (so every tolerance picks a definite rank)."""
    g = torch.Generator().manual_seed(seed)
    q1, _ = torch.linalg.qr(torch.randn(rows, min(rows, columns), generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(columns, min(rows, columns), generator=g, dtype=torch.float64))
    values = 2.0 ** -torch.arange(min(rows, columns), dtype=torch.float64)
    return (q1 * values) @ q2.T


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("cap", [None, 2, 50])
def test_gram_rank_is_the_smallest_rank_whose_discarded_tail_is_within_delta(dtype, cap):
    g = torch.Generator().manual_seed(3)
    squares = torch.sort(torch.rand(30, generator=g, dtype=torch.float64) ** 4).values
    squares[:3] = torch.tensor([-1e-17, 0.0, 1e-18])  # round-off below zero counts as zero
    squares = squares.to(dtype)
    values = [max(float(x), 0.0) for x in squares]  # ascending: the tail of rank k is the sum of the first n − k
    for delta in (0.0, 1e-9, 0.05, 0.3, 1.0, 100.0):
        smallest = next(k for k in range(1, len(values) + 1) if sum(values[:len(values) - k]) <= delta * delta)
        assert gram_rank(squares, delta, cap) == (smallest if cap is None else min(smallest, cap))


def test_gram_rank_counts_no_tail_from_a_nan_on():
    # as NumPy's count of cumulative sums above delta² did: a NaN makes every later tail NaN, never above delta²
    assert gram_rank(torch.tensor([1.0, float("nan")], dtype=torch.float64), 0.5, None) == 1
    assert gram_rank(torch.tensor([float("nan"), 1.0, 2.0], dtype=torch.float64), 0.5, None) == 1


@pytest.mark.parametrize("shape", [(6, 40), (40, 6)])
@pytest.mark.parametrize("delta, cap", [(1e-3, None), (0.0, 3), (0.2, 4)])
def test_gram_factor_keeps_the_svd_rank_and_its_best_approximation(shape, delta, cap):
    matrix = _decaying(*shape)
    u, rest = leading_factor(matrix, delta, cap, gram=True)
    singular = torch.linalg.svdvals(matrix)
    rank = truncation_rank(singular, delta, cap)
    assert u.shape[1] == rank
    torch.testing.assert_close(u.T @ u, torch.eye(rank, dtype=torch.float64), atol=1e-12, rtol=0)
    best = torch.sqrt((singular[rank:] ** 2).sum())  # the Eckart–Young error of that rank
    assert abs(float(torch.linalg.matrix_norm(matrix - u @ rest)) - float(best)) < 1e-9


def test_tt_svd_from_both_ends_stays_within_its_bound():
    """Gram route (float64, tol ≥ 1e-6): the error stays within tol·‖x‖, the ranks within the exact TT ranks (and
    below them for a loose tolerance); every core but one is orthonormal."""
    g = torch.Generator().manual_seed(3)
    shape = (3, 4, 3, 5, 3)
    exact = TTVector([torch.randn(r0, n, r1, generator=g, dtype=torch.float64) * s
                      for r0, n, r1, s in zip([1, 3, 6, 6, 3], shape, [3, 6, 6, 3, 1], [1, 0.5, 0.3, 0.2, 1])])
    dense = exact.to_dense().reshape(shape)
    exact_ranks = [c.shape[2] for c in tt_svd(dense)]  # tol 0 without a cap: LAPACK's SVD, left to right
    for tol in (1e-1, 1e-4):
        cores = tt_svd(dense, tol=tol)
        error = torch.linalg.vector_norm(cores_to_dense(cores) - dense.reshape(-1))
        assert float(error) <= tol * float(torch.linalg.vector_norm(dense)) * (1 + 1e-9)
        ranks = [c.shape[2] for c in cores]
        assert all(r <= e for r, e in zip(ranks, exact_ranks))
        if tol == 1e-1:
            assert sum(ranks) < sum(exact_ranks)
    orthonormal = 0
    for core in cores:
        left, right = core.reshape(-1, core.shape[2]), core.reshape(core.shape[0], -1)
        orthonormal += bool(torch.allclose(left.T @ left, torch.eye(left.shape[1], dtype=torch.float64), atol=1e-10)
                            or torch.allclose(right @ right.T, torch.eye(right.shape[0], dtype=torch.float64),
                                              atol=1e-10))
    assert orthonormal >= len(cores) - 1


def _orthonormal_sides(cores):
    """Per core: 'left' (left-orthonormal), 'right' (right-orthonormal), 'both' or '' (neither)."""
    sides = []
    for core in cores:
        left, right = core.reshape(-1, core.shape[2]), core.reshape(core.shape[0], -1)
        is_left = torch.allclose(left.T @ left, torch.eye(left.shape[1], dtype=core.dtype), atol=1e-10)
        is_right = torch.allclose(right @ right.T, torch.eye(right.shape[0], dtype=core.dtype), atol=1e-10)
        sides.append("both" if is_left and is_right else "left" if is_left else "right" if is_right else "")
    return sides


@pytest.mark.parametrize("tol, cap", [(1e-4, None), (1e-3, 4), (0.0, 3), (0.0, None), (1e-8, 4)])  # Gram, LAPACK
@pytest.mark.parametrize("norm_core", [0, 2, 4])
def test_tt_svd_puts_the_norm_in_the_core_asked_for(tol, cap, norm_core):
    """With ``norm_core`` the cores left of it are left-orthonormal and those right of it right-orthonormal, on the
    Gram route and on LAPACK's; the error stays within the bound, and on this tensor (well separated singular
    values) the ranks are the default sweep's."""
    g = torch.Generator().manual_seed(8)
    shape = (3, 4, 3, 5, 3)
    dense = TTVector([torch.randn(r0, n, r1, generator=g, dtype=torch.float64) * s
                      for r0, n, r1, s in zip([1, 3, 6, 6, 3], shape, [3, 6, 6, 3, 1], [1, 0.5, 0.3, 0.2, 1])]
                     ).to_dense().reshape(shape)
    cores = tt_svd(dense, tol=tol, max_rank=cap, norm_core=norm_core)
    sides = _orthonormal_sides(cores)
    assert all(side in ("left", "both") for side in sides[:norm_core]), sides
    assert all(side in ("right", "both") for side in sides[norm_core + 1:]), sides
    error = float(torch.linalg.vector_norm(cores_to_dense(cores) - dense.reshape(-1)))
    if cap is None:
        assert error <= tol * float(torch.linalg.vector_norm(dense)) * (1 + 1e-9) + 1e-12
    assert [c.shape[2] for c in cores] == [c.shape[2] for c in tt_svd(dense, tol=tol, max_rank=cap)]
    with pytest.raises(ValueError, match="norm_core"):
        tt_svd(dense, tol=tol, norm_core=len(shape))


def test_right_orthogonalize_keeps_the_tensor_and_moves_the_norm_to_the_first_core():
    tt = TTVector.random((3, 2, 4, 3), 3, generator=torch.Generator().manual_seed(12))
    cores = right_orthogonalize(tt.cores)
    torch.testing.assert_close(cores_to_dense(cores), tt.to_dense(), rtol=1e-12, atol=1e-12)
    assert all(side in ("right", "both") for side in _orthonormal_sides(cores)[1:])
    assert abs(float(torch.linalg.vector_norm(cores[0])) - float(tt.norm())) < 1e-12


def test_tt_svd_with_a_reference_norm_and_a_zero_tensor():
    x = torch.randn(3, 3, 3, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    loose = tt_svd(x, tol=1e-3, reference_norm=100.0 * float(torch.linalg.vector_norm(x)))
    assert max(c.shape[2] for c in loose[:-1]) < max(c.shape[2] for c in tt_svd(x, tol=1e-3)[:-1])
    zero = tt_svd(torch.zeros(3, 3, 3, dtype=torch.float64), tol=1e-3)
    assert all(c.shape[2] == 1 for c in zero[:-1]) and float(cores_to_dense(zero).abs().max()) == 0.0


@pytest.mark.parametrize("shape", [(2,), (3, 4), (2, 3, 2, 5, 3), (3,) * 7])
def test_cores_to_dense_equals_the_left_to_right_contraction(shape):
    tt = TTVector.random(shape, 4, generator=torch.Generator().manual_seed(5))
    full = tt.cores[0].reshape(shape[0], -1)
    for core in tt.cores[1:]:
        full = (full @ core.reshape(core.shape[0], -1)).reshape(-1, core.shape[2])
    torch.testing.assert_close(cores_to_dense(tt.cores), full.reshape(-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("row_shape, col_shape", [((3,), (2,)), ((2, 3), (3, 2)), ((3, 2, 4, 2, 3), (2, 3, 2, 3, 2)),
                                                  ((3,) * 7, (3,) * 7)])
@pytest.mark.parametrize("transpose", [False, True])
def test_matvec_to_dense_equals_the_dense_product(row_shape, col_shape, transpose):
    """``A x`` and ``Aᵀ x`` of a TT-matrix (unequal row and column modes, ranks that differ by bond) and a TT-vector,
    against the product of the dense matrix and vector."""
    g = torch.Generator().manual_seed(11)
    d = len(row_shape)
    ranks = [1] + [3 + k for k in range(d - 1)] + [1]
    matrix = TTMatrix([torch.randn(ranks[k], row_shape[k], col_shape[k], ranks[k + 1], generator=g,
                                   dtype=torch.float64) for k in range(d)])
    vector = TTVector.random(row_shape if transpose else col_shape, 4, generator=g)
    dense = matrix.to_dense().T if transpose else matrix.to_dense()
    expected = dense @ vector.to_dense()
    result = matvec_to_dense(matrix.cores, vector.cores, transpose=transpose)
    assert result.shape == expected.shape
    with pytest.raises(ValueError, match="as many vector cores"):
        matvec_to_dense(matrix.cores, vector.cores + vector.cores[-1:])
    scale = float(expected.abs().max())  # entries sum products of many cores: round-off relative to the largest
    torch.testing.assert_close(result, expected, rtol=0, atol=1e-13 * scale)


def _update_case(shape, matrix_rank, vector_rank, seed=6):
    g = torch.Generator().manual_seed(seed)
    d = len(shape)
    ranks = [1] + [matrix_rank] * (d - 1) + [1]
    matrix = TTMatrix([torch.randn(ranks[k], n, n, ranks[k + 1], generator=g, dtype=torch.float64)
                       for k, n in enumerate(shape)])
    left = TTVector.random(shape, vector_rank, generator=g)
    right = TTVector.random(shape, vector_rank, generator=g)
    return matrix, left, right


@pytest.mark.parametrize("shape", [(3,), (3, 2), (3, 2, 3, 2)])
@pytest.mark.parametrize("tol, cap, reference", [(0.0, 2, None), (1e-2, None, None), (1e-3, 2, 5.0)])
def test_rank_one_update_equals_rounding_the_formed_sum(shape, tol, cap, reference):
    """With a full eigendecomposition per bond (no cap, or one too close to the bond size for the subspace
    iteration) the result is Oseledets' rounding of the formed ``A + s u vᵀ``, to round-off (one and two cores
    too)."""
    matrix, left, right = _update_case(shape, 3, 3)
    result = round_rank_one_update(matrix, left, right, -0.4, tol=tol, max_rank=cap, reference_norm=reference)
    formed = (matrix - left.outer(right) * 0.4).round(tol, cap, reference_norm=reference)
    assert result.ranks == formed.ranks
    torch.testing.assert_close(result.to_dense(), formed.to_dense(), rtol=0, atol=1e-10)
    last = result.cores[-1]
    assert abs(float(torch.linalg.vector_norm(last)) - float(torch.linalg.matrix_norm(result.to_dense()))) < 1e-9


@pytest.mark.parametrize("vector_rank, formed", [(6, False), (12, True)])
def test_rank_one_update_by_subspace_iteration_is_near_the_deterministic_rounding(vector_rank, formed):
    """Cap well below the bond size (8 · 9 ≥ 2 (cap + oversampling)): the subspace iteration's error against the
    dense sum is within 1% of Oseledets' rounding of the formed sum, the ranks within the cap (an update half the
    matrix's norm: without oversampling the error is 9% larger, with 2 columns 1.1%); with the bond matrix
    multiplied through Z (vector ranks 6) and formed (ranks 12, Adult's case)."""
    cap = 8
    assert 9 * cap >= 2 * (cap + SUBSPACE_OVERSAMPLING)
    assert bond_basis_plan(9 * cap, cap + vector_rank ** 2, cap) == (cap + SUBSPACE_OVERSAMPLING, formed)
    matrix, left, right = _update_case((3,) * 5, cap, vector_rank)
    scale = -0.5 * float(torch.linalg.matrix_norm(matrix.to_dense())) / float(
        torch.linalg.vector_norm(left.to_dense()) * torch.linalg.vector_norm(right.to_dense()))
    dense = matrix.to_dense() + scale * torch.outer(left.to_dense(), right.to_dense())
    result = round_rank_one_update(matrix, left, right, scale, tol=1e-3, max_rank=cap)
    formed = (matrix + left.outer(right) * scale).round(1e-3, cap)
    assert max(result.ranks) <= cap
    error, best = (float(torch.linalg.matrix_norm(t.to_dense() - dense)) for t in (result, formed))
    assert best > 0 and error <= 1.01 * best, (error, best)


@pytest.mark.parametrize("cap", [None, 3, 8])
def test_rank_one_update_of_right_orthonormal_factors_skips_only_the_qr_sweep(cap, monkeypatch):
    """Factors already right-orthonormal (a TT-SVD with the norm in core 0, as the Kalman filter makes them) with
    ``right_orthonormal=True`` give what the default path (its own QR sweep) gives for the same vectors."""
    matrix, left, right = _update_case((3,) * 5, 8, 4, seed=13)
    left_svd, right_svd = (TTVector(tt_svd(t.to_dense().reshape(t.shape), tol=1e-12, norm_core=0))
                           for t in (left, right))
    swept = round_rank_one_update(matrix, left, right, -0.7, tol=1e-3, max_rank=cap)
    sweeps = []
    monkeypatch.setattr(update_rounding, "right_orthogonalize", lambda cores: sweeps.append(1) or list(cores))
    given = round_rank_one_update(matrix, left_svd, right_svd, -0.7, tol=1e-3, max_rank=cap, right_orthonormal=True)
    assert not sweeps
    assert swept.ranks == given.ranks
    gap = float(torch.linalg.matrix_norm(swept.to_dense() - given.to_dense()))
    assert gap <= 1e-9 * float(torch.linalg.matrix_norm(swept.to_dense())), gap


def test_rank_one_update_refuses_mismatched_vectors():
    matrix, left, right = _update_case((3, 2, 3), 2, 2)
    with pytest.raises(ValueError, match="modes"):
        round_rank_one_update(matrix, TTVector.random((2, 3, 3), 2), right, 1.0, tol=0.0, max_rank=None)
    assert math.isfinite(float(round_rank_one_update(matrix, left, right, 1.0, tol=0.0, max_rank=4).norm()))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_rank_one_update_keeps_a_small_update_relative_to_its_norm(dtype):
    """The filter's case: an update 1e-4 of the matrix's norm, rounded relative to the update's own norm. The
    subspace iteration (cap 20 against bonds of 8 · 9 + …) must resolve it as Oseledets' rounding of the formed sum
    does (squaring M at once lost it: 0.58 of the update against 0.074), in float32 too (the Gram algebra runs in
    float64)."""
    matrix, left, right = _update_case((3,) * 5, 8, 4, seed=9)
    size = float(torch.linalg.matrix_norm(matrix.to_dense()))
    scale = -1e-4 * size / float(torch.linalg.vector_norm(left.to_dense()) * torch.linalg.vector_norm(right.to_dense()))
    update = scale * torch.outer(left.to_dense(), right.to_dense())
    reference = float(torch.linalg.matrix_norm(update))
    dense = matrix.to_dense() + update
    formed = (matrix + left.outer(right) * scale).round(1e-3, 20, reference_norm=reference)
    best = float(torch.linalg.matrix_norm(formed.to_dense() - dense)) / reference
    cast = TTMatrix([c.to(dtype) for c in matrix.cores])
    result = round_rank_one_update(cast, TTVector([c.to(dtype) for c in left.cores]),
                                   TTVector([c.to(dtype) for c in right.cores]), scale, tol=1e-3, max_rank=20,
                                   reference_norm=reference)
    assert result.cores[0].dtype == dtype
    error = float(torch.linalg.matrix_norm(result.to_dense().double() - dense)) / reference
    allowed = 1.05 * best + (0.0 if dtype == torch.float64 else 1e-6 * size / reference)  # float32 storage
    assert error <= allowed, (error, best)



@pytest.mark.parametrize("cap", [20, 3])
def test_rank_one_update_does_not_depend_on_the_eigenvector_signs(cap, monkeypatch):
    """An eigendecomposition's signs are the library's choice (LAPACK and cuSOLVER choose differently). With every
    other eigenvector's sign flipped (an equally valid decomposition) the rounding is the same to round-off, also where
    the subspace iteration has not converged (cap 3 against bonds of 3 · 9): each bond's basis has fixed signs, so
    the next bond starts its iteration from the same block."""
    matrix, left, right = _update_case((3,) * 6, 8, 4, seed=5)
    a = round_rank_one_update(matrix, left, right, -0.3, tol=1e-3, max_rank=cap)
    eigh = torch.linalg.eigh

    def flipped(matrix_to_decompose):
        values, vectors = eigh(matrix_to_decompose)
        signs = torch.ones(vectors.shape[1], dtype=vectors.dtype)
        signs[1::2] = -1.0
        return values, vectors * signs

    monkeypatch.setattr(torch.linalg, "eigh", flipped)
    b = round_rank_one_update(matrix, left, right, -0.3, tol=1e-3, max_rank=cap)
    assert a.ranks == b.ranks
    gap = float(torch.linalg.matrix_norm(a.to_dense() - b.to_dense()))
    assert gap <= 1e-10 * float(torch.linalg.matrix_norm(a.to_dense())), gap
