"""Tensor-train toolkit against dense torch computations on random inputs."""

import math

import numpy as np
import pytest
import torch

from tnbayes.tensors import TTMatrix, TTVector, randomized_round_sum, tt_svd

SHAPES = [(2, 3, 4), (2, 2, 2, 2, 2), (5,), (3, 1, 4, 2), (7, 2)]


def _random_tt(shape, rank, seed):
    return TTVector.random(shape, rank if len(shape) > 1 else [], generator=torch.Generator().manual_seed(seed))


def _random_ttm(row_shape, col_shape, rank, seed):
    g = torch.Generator().manual_seed(seed)
    ranks = [1] + [rank] * (len(row_shape) - 1) + [1]
    return TTMatrix([torch.randn(ranks[k], m, n, ranks[k + 1], generator=g, dtype=torch.float64)
                     for k, (m, n) in enumerate(zip(row_shape, col_shape))])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", SHAPES)
def test_tt_svd_exact_and_truncated(shape, seed):
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(*shape, generator=g, dtype=torch.float64)
    tt = TTVector.from_dense(dense)
    torch.testing.assert_close(tt.to_dense(), dense.reshape(-1), rtol=1e-12, atol=1e-12)
    for tol in (0.1, 0.3):
        approx = TTVector.from_dense(dense, tol=tol)
        err = torch.linalg.vector_norm(approx.to_dense() - dense.reshape(-1)) / torch.linalg.vector_norm(dense)
        assert err <= tol + 1e-12
    capped = TTVector.from_dense(dense, max_rank=1)
    assert max(capped.ranks) == 1


def test_tt_svd_recovers_low_rank_exactly():
    low = _random_tt((3, 4, 5, 2), 2, seed=3)
    rebuilt = TTVector.from_dense(low.to_dense(), shape=(3, 4, 5, 2), tol=1e-12)
    assert max(rebuilt.ranks) <= 2
    torch.testing.assert_close(rebuilt.to_dense(), low.to_dense(), rtol=1e-10, atol=1e-10)
    cores = tt_svd(torch.zeros(2, 3, 4))
    assert [tuple(c.shape) for c in cores] == [(1, 2, 1), (1, 3, 1), (1, 4, 1)]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("shape", SHAPES)
def test_vector_algebra_matches_dense(shape, seed):
    x, y = _random_tt(shape, 3, seed), _random_tt(shape, 2, seed + 100)
    xd, yd = x.to_dense(), y.to_dense()
    torch.testing.assert_close((x + y).to_dense(), xd + yd)
    torch.testing.assert_close((x - y).to_dense(), xd - yd)
    torch.testing.assert_close((2.5 * x).to_dense(), 2.5 * xd)
    torch.testing.assert_close((x / 4).to_dense(), xd / 4)
    torch.testing.assert_close(x.hadamard(y).to_dense(), xd * yd)
    torch.testing.assert_close(x.dot(y), xd @ yd)
    torch.testing.assert_close(x.norm(), torch.linalg.vector_norm(xd))
    torch.testing.assert_close(x.outer(y).to_dense(), torch.outer(xd, yd))
    assert (x + y).ranks[1:-1] == tuple(a + b for a, b in zip(x.ranks[1:-1], y.ranks[1:-1]))
    assert x.numel == xd.numel()


@pytest.mark.parametrize("seed", range(5))
def test_rounding_removes_redundant_rank_and_respects_tolerance(seed):
    shape = (2, 3, 2, 4, 3)
    x = _random_tt(shape, 3, seed)
    doubled = x + x  # rank 6, represents 2x exactly
    rounded = doubled.round(1e-12)
    assert max(rounded.ranks) <= 3
    torch.testing.assert_close(rounded.to_dense(), 2 * x.to_dense())
    for tol in (0.05, 0.2, 0.5):
        approx = doubled.round(tol)
        err = torch.linalg.vector_norm(approx.to_dense() - doubled.to_dense()) / doubled.norm()
        assert err <= tol + 1e-12
    assert max(doubled.round(max_rank=2).ranks) <= 2
    # rounding an exact-rank TT with tol=0 keeps it
    torch.testing.assert_close(x.round().to_dense(), x.to_dense())


def test_rounding_is_best_when_rank_unconstrained_by_truncation():
    """Rounding to rank r after TT-SVD of a matrix (d = 2) equals the truncated SVD (Eckart–Young)."""
    g = torch.Generator().manual_seed(0)
    dense = torch.randn(8, 9, generator=g, dtype=torch.float64)
    tt = TTVector.from_dense(dense)
    r2 = tt.round(max_rank=2).to_dense().reshape(8, 9)
    u, s, vh = torch.linalg.svd(dense)
    torch.testing.assert_close(r2, (u[:, :2] * s[:2]) @ vh[:2])


ROW_COL = [((2, 3), (3, 2)), ((2, 2, 2), (2, 2, 2)), ((4,), (3,)), ((3, 2, 2), (2, 5, 1))]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("row_shape, col_shape", ROW_COL)
def test_matrix_algebra_matches_dense(row_shape, col_shape, seed):
    A = _random_ttm(row_shape, col_shape, 3, seed)
    B = _random_ttm(row_shape, col_shape, 2, seed + 1)
    C = _random_ttm(col_shape, (2,) * len(col_shape), 2, seed + 2)
    x = _random_tt(col_shape, 2, seed + 3)
    u = _random_tt(row_shape, 2, seed + 4)
    Ad, Bd, Cd, xd, ud = A.to_dense(), B.to_dense(), C.to_dense(), x.to_dense(), u.to_dense()
    assert Ad.shape == (math.prod(row_shape), math.prod(col_shape))
    torch.testing.assert_close((A + B).to_dense(), Ad + Bd)
    torch.testing.assert_close((A - 3.0 * B).to_dense(), Ad - 3.0 * Bd)
    torch.testing.assert_close(A.matvec(x).to_dense(), Ad @ xd)
    torch.testing.assert_close((A @ x).to_dense(), Ad @ xd)
    torch.testing.assert_close(A.matmul(C).to_dense(), Ad @ Cd)
    torch.testing.assert_close(A.T.to_dense(), Ad.T)
    torch.testing.assert_close(A.hadamard(B).to_dense(), Ad * Bd)
    torch.testing.assert_close(A.dot(B), (Ad * Bd).sum())
    torch.testing.assert_close(A.norm(), torch.linalg.matrix_norm(Ad))
    torch.testing.assert_close(A.quadratic_form(u, x), ud @ Ad @ xd)
    dense_back = TTMatrix.from_dense(Ad, row_shape, col_shape)
    torch.testing.assert_close(dense_back.to_dense(), Ad)
    approx = (A + A).round(0.3)
    assert torch.linalg.matrix_norm(approx.to_dense() - 2 * Ad) <= 0.3 * torch.linalg.matrix_norm(2 * Ad) + 1e-10
    torch.testing.assert_close((A + A).round(1e-12).to_dense(), 2 * Ad)


def test_square_matrix_helpers():
    shape = (2, 3, 2)
    eye = TTMatrix.identity(shape)
    torch.testing.assert_close(eye.to_dense(), torch.eye(12, dtype=torch.float64))
    v = _random_tt(shape, 2, 7)
    torch.testing.assert_close(TTMatrix.diagonal(v).to_dense(), torch.diag(v.to_dense()))
    A = _random_ttm(shape, shape, 3, 8)
    torch.testing.assert_close(A.trace(), torch.trace(A.to_dense()))
    torch.testing.assert_close(A.quadratic_form(v), v.to_dense() @ A.to_dense() @ v.to_dense())
    torch.testing.assert_close(eye.matvec(v).to_dense(), v.to_dense())


def test_float32_and_bad_input():
    x = TTVector.from_dense(torch.arange(24, dtype=torch.float32))
    assert x.dtype == torch.float32 and x.shape == (2, 2, 2, 3)
    np.testing.assert_allclose(x.to_dense().numpy(), np.arange(24), atol=1e-4)
    with pytest.raises(ValueError, match="reshape"):
        TTVector.from_dense(torch.zeros(10), shape=(3, 3))
    with pytest.raises(ValueError, match="different mode sizes"):
        _random_tt((2, 3), 1, 0) + _random_tt((3, 2), 1, 0)
    with pytest.raises(ValueError, match="ranks do not match"):
        TTVector([torch.zeros(1, 2, 2), torch.zeros(3, 2, 1)])
    with pytest.raises(ValueError, match="r_0 = 1"):
        TTVector([torch.zeros(2, 2, 1)])
    with pytest.raises(TypeError, match="hadamard"):
        _random_tt((2, 3), 1, 0) * _random_tt((2, 3), 1, 0)
    with pytest.raises(ValueError, match="matvec"):
        TTMatrix.identity((2, 3)).matvec(_random_tt((3, 2), 1, 0))


def test_rounding_relative_to_a_reference_norm_keeps_small_updates():
    big = _random_tt((2, 3, 4, 3, 2), 2, seed=11)
    small = _random_tt((2, 3, 4, 3, 2), 2, seed=12) * (1e-4 * float(big.norm()))
    total = big + small
    exact = total.to_dense()
    state = total.round(1e-2)  # error allowed: 1e-2·‖total‖ ≫ ‖small‖, so the update can be dropped
    update = total.round(1e-2, reference_norm=float(small.norm()))
    assert torch.linalg.vector_norm(update.to_dense() - exact) <= 1e-2 * small.norm() + 1e-12
    assert torch.linalg.vector_norm(state.to_dense() - exact) > 0.5 * small.norm()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matvec_rounded_matches_dense_and_keeps_ranks_small(seed):
    generator = torch.Generator().manual_seed(seed)
    A = TTMatrix([torch.randn(r0, 3, 4, r1, generator=generator, dtype=torch.float64)
                  for r0, r1 in ((1, 5), (5, 6), (6, 4), (4, 1))])
    x = TTVector.random((4, 4, 4, 4), 5, generator=generator)
    exact = A.to_dense() @ x.to_dense()
    y = A.matvec_rounded(x)  # tol = 0: exact
    torch.testing.assert_close(y.to_dense(), exact, rtol=1e-10, atol=1e-10)
    assert max(y.ranks) <= 9  # the natural bound of a 3×3×3×3 vector, not r_A·r_x = 30
    approx = A.matvec_rounded(x, tol=1e-2, max_rank=None)
    assert float(torch.linalg.vector_norm(approx.to_dense() - exact)) <= 1.05e-2 * float(torch.linalg.vector_norm(exact))
    with pytest.raises(ValueError, match="modes"):
        A.matvec_rounded(TTVector.random((3, 3, 3, 3), 2))


def test_randomized_round_sum_is_exact_with_room_and_near_optimal_when_truncating():
    """Sums of TT-matrices and implicit outer products u cᵀ: exact when the sketch rank exceeds the true
    ranks; when truncating, the error is within a small factor of deterministic rounding of the formed sum."""
    g = torch.Generator().manual_seed(0)
    shape = (3, 4, 2, 3)
    L = TTMatrix.from_dense(torch.randn(72, 72, dtype=torch.float64, generator=g), shape, shape, max_rank=3)
    us = [TTVector.random(shape, 2, generator=g) for _ in range(3)]
    cs = [TTVector.random(shape, 3, generator=g) for _ in range(3)]
    scales = [1.0, -1.0, 0.5, 2.0]
    dense = L.to_dense() + sum(s * u.outer(c).to_dense() for s, u, c in zip(scales[1:], us, cs))
    full = randomized_round_sum([L] + list(zip(us, cs)), scales, max_rank=100, generator=g)
    assert isinstance(full, TTMatrix)
    torch.testing.assert_close(full.to_dense(), dense, rtol=1e-10, atol=1e-10)
    formed = L
    for s, u, c in zip(scales[1:], us, cs):
        formed = formed + u.outer(c) * s
    for rank in (2, 4, 8):
        best = float((formed.round(0.0, rank).to_dense() - dense).norm())
        sketched = randomized_round_sum([L] + list(zip(us, cs)), scales, max_rank=rank, generator=g)
        assert max(sketched.ranks) <= rank
        assert float((sketched.to_dense() - dense).norm()) <= 1.5 * best + 1e-12
    vectors = [TTVector.random(shape, 3, generator=g) for _ in range(4)]
    total = randomized_round_sum(vectors, max_rank=50, generator=g)
    assert isinstance(total, TTVector)
    torch.testing.assert_close(total.to_dense(), sum(v.to_dense() for v in vectors), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="max_rank"):
        randomized_round_sum(vectors, max_rank=0)


def test_randomized_round_sum_old_import_path_is_the_same_function():
    import tnbayes.tensors.tt as tt_module

    assert tt_module.randomized_round_sum is randomized_round_sum


def test_gram_and_rank_one_contractions_match_dense():
    """tt_gram (the Gram matrix of TT-vectors) and the batched contractions with rank-one vectors ⊗_k f_k(i)."""
    from tnbayes.tensors import tt_gram

    g = torch.Generator().manual_seed(3)
    shape = (3, 4, 2)
    vectors = [TTVector.random(shape, r, generator=g) for r in (1, 2, 3, 2)]
    dense = torch.stack([v.to_dense() for v in vectors])
    torch.testing.assert_close(tt_gram(vectors), dense @ dense.T, rtol=1e-12, atol=1e-12)
    assert tt_gram([]).shape == (0, 0)
    raw = torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    factors = [raw[0, :, :3], raw[1], raw[2, :, :2]]  # d = 3 factors (n, n_k) of n = 5 rank-one vectors
    rows = torch.stack([torch.kron(torch.kron(factors[0][i], factors[1][i]), factors[2][i]) for i in range(5)])
    x = vectors[2]
    torch.testing.assert_close(x.dot_rank_one(factors), rows @ x.to_dense(), rtol=1e-12, atol=1e-12)
    A = _random_ttm(shape, (2, 3, 2), 2, seed=4)
    dense_A = A.to_dense()
    torch.testing.assert_close(A.transpose_matvec_norms_squared_rank_one(factors), ((rows @ dense_A) ** 2).sum(1),
                               rtol=1e-12, atol=1e-12)
    projected = A.transpose_matvec_rank_one([f[1] for f in factors])
    torch.testing.assert_close(projected.to_dense(), dense_A.T @ rows[1], rtol=1e-12, atol=1e-12)


def test_tt_state_round_trip():
    from tnbayes.tensors import has_tt_state, tt_from_state, tt_state

    x = _random_tt((2, 3, 4), 2, seed=5)
    A = _random_ttm((2, 3), (3, 2), 2, seed=6)
    state = {**tt_state(x, "mean"), **tt_state(A, "root"), "other": torch.zeros(1)}
    assert set(state) == {"mean.0", "mean.1", "mean.2", "root.0", "root.1", "other"}
    back_x, back_A = tt_from_state(state, "mean", "vector"), tt_from_state(state, "root", "matrix")
    assert isinstance(back_x, TTVector) and isinstance(back_A, TTMatrix)
    assert all(torch.equal(a, b) for a, b in zip(back_x.cores, x.cores))
    assert all(torch.equal(a, b) for a, b in zip(back_A.cores, A.cores))
    assert has_tt_state(state, "root") and not has_tt_state(state, "correction")
    with pytest.raises(KeyError, match="correction"):
        tt_from_state(state, "correction", "matrix")
    with pytest.raises(ValueError, match="kind"):
        tt_from_state(state, "mean", "tensor")
