"""TT-SVDs of a batch of dense vectors against :func:`tt_svd` of each alone and against the dense vectors, and the
batched contractions to dense vectors against the per-TT ones and dense products."""

import math

import pytest
import torch

from tnbayes.tensors import TTMatrix, TTVector, cores_to_dense, matvec_to_dense, tt_svd, tt_svd_batched

SHAPE = (3, 3, 3, 3, 3, 3)
N = math.prod(SHAPE)


def _rows(count: int = 12, seed: int = 0, dtype: torch.dtype = torch.float64, noisy_every: int = 3) -> torch.Tensor:
    """Kernel-like rows: smooth bumps at random centres (low TT ranks), every third (``noisy_every``) with noise
    (full ranks)."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.linspace(0, 1, N, dtype=torch.float64)
    rows = [torch.exp(-(grid - float(centre)) ** 2 / 0.01) for centre in torch.rand(count, generator=g)]
    noisy = [row + (0.3 * torch.randn(N, generator=g, dtype=torch.float64) if i % noisy_every == 0 else 0.0)
             for i, row in enumerate(rows)]
    return torch.stack(noisy).to(dtype)


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


@pytest.mark.parametrize(("tol", "cap"), [(0.0, 4), (1e-3, 3), (1e-9, 5)])
def test_with_a_binding_cap_each_tt_is_the_one_tt_svd_gives_it_alone(tol, cap):
    rows = _rows(noisy_every=1)
    cores = tt_svd_batched(rows, SHAPE, tol=tol, max_rank=cap)
    assert [c.shape[3] for c in cores] == [3, min(cap, 9), cap, cap, 3, 1]  # the cap binds for every row
    dense = cores_to_dense(cores)
    for b, row in enumerate(rows):
        alone = tt_svd(row.reshape(SHAPE), tol=tol, max_rank=cap)
        assert [c.shape for c in alone] == [c[b].shape for c in cores]
        assert _relative(dense[b], cores_to_dense(alone)) < (1e-7 if tol == 0.0 else 1e-10)  # tol 0: to √eps
        assert dense[b].dtype == row.dtype


@pytest.mark.parametrize(("tol", "cap"), [(1e-3, None), (3e-2, None), (1e-2, 27), (1e-9, None)])
def test_each_tt_meets_the_tolerance_of_its_own_norm(tol, cap):
    rows = _rows()
    dense = cores_to_dense(tt_svd_batched(rows, SHAPE, tol=tol, max_rank=cap))
    for b, row in enumerate(rows):
        alone = cores_to_dense(tt_svd(row.reshape(SHAPE), tol=tol, max_rank=cap))
        error = _relative(dense[b], row)
        assert error <= tol * (1 + 1e-6) + 1e-14
        # as accurate as tt_svd alone, which may take the bonds in another order (see the docstring)
        assert error <= 2 * _relative(alone, row) + 1e-14


def test_lower_ranks_carry_zero_slices_that_represent_nothing():
    rows = _rows(6)
    product = torch.ones(N, dtype=torch.float64)  # rank 1 at every bond
    rows[1] = product
    cores = tt_svd_batched(rows, SHAPE, tol=1e-8)
    assert max(c.shape[3] for c in cores) > 1  # the noisy rows keep more
    torch.testing.assert_close(cores_to_dense([c[1] for c in cores]), product, rtol=1e-12, atol=1e-12)
    # beyond its own rank 1 the basis columns of the rank-one row are zero
    assert float(cores[0][1, :, :, 1:].abs().max()) == 0.0


@pytest.mark.parametrize(("tol", "cap"), [(3e-2, None), (1e-4, None), (1e-1, 5), (1e-9, None)])
def test_a_tensors_tt_does_not_depend_on_the_others_in_the_batch(tol, cap):
    rows = _rows()  # ranks differ between the rows
    together = cores_to_dense(tt_svd_batched(rows, SHAPE, tol=tol, max_rank=cap))
    for b in range(rows.shape[0]):
        alone = cores_to_dense(tt_svd_batched(rows[b:b + 1], SHAPE, tol=tol, max_rank=cap))[0]
        torch.testing.assert_close(together[b], alone, rtol=0, atol=1e-12 * float(rows[b].norm()))


def test_the_gram_route_pads_with_leading_zero_columns():
    rows = _rows(6)
    rows[1] = torch.ones(N, dtype=torch.float64)  # rank 1 at every bond
    cores = tt_svd_batched(rows, SHAPE, tol=1e-4)  # at least GRAM_MIN_TOL: the Gram route
    first = cores[0]  # (B, 1, 3, k): the first bond from the left
    assert first.shape[3] == 3
    assert float(first[1, :, :, :2].abs().max()) == 0.0 and float(first[1, :, :, 2].abs().max()) > 0.1
    torch.testing.assert_close(cores_to_dense([c[1] for c in cores]), rows[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_svd_route_matches_tt_svd(dtype):
    rows = _rows(dtype=dtype)  # float32, or a tolerance below GRAM_MIN_TOL: LAPACK's SVD
    tol = 1e-12 if dtype == torch.float64 else 1e-4
    cores = tt_svd_batched(rows, SHAPE, tol=tol, max_rank=4)
    dense = cores_to_dense(cores)
    for b, row in enumerate(rows):
        alone = cores_to_dense(tt_svd(row.reshape(SHAPE), tol=tol, max_rank=4))
        assert _relative(dense[b], alone) < (1e-10 if dtype == torch.float64 else 1e-4)


def test_batched_contractions_match_one_tt_at_a_time_and_dense_products():
    g = torch.Generator().manual_seed(5)
    matrix = TTMatrix([torch.randn(1 if k == 0 else 3, 3, 3, 1 if k == len(SHAPE) - 1 else 3, generator=g,
                                   dtype=torch.float64) for k in range(len(SHAPE))])
    cores = tt_svd_batched(_rows(5), SHAPE, tol=1e-6)
    dense = cores_to_dense(cores)
    assert dense.shape == (5, N)
    for transpose in (False, True):
        products = matvec_to_dense(matrix.cores, cores, transpose=transpose)
        reference = dense @ (matrix.to_dense() if transpose else matrix.to_dense().T)
        torch.testing.assert_close(products, reference, rtol=1e-10, atol=1e-10)
        for b in range(5):
            one = [c[b] for c in cores]
            torch.testing.assert_close(dense[b], TTVector(one).to_dense(), rtol=1e-13, atol=1e-13)
            torch.testing.assert_close(products[b], matvec_to_dense(matrix.cores, one, transpose=transpose),
                                       rtol=1e-12, atol=1e-12)


def test_rejects_tensors_that_do_not_fit_the_shape():
    with pytest.raises(ValueError, match=r"shape \(B, 729\)"):
        tt_svd_batched(torch.zeros(2, 728, dtype=torch.float64), SHAPE)
    with pytest.raises(ValueError, match=r"shape \(B, 729\)"):
        tt_svd_batched(torch.zeros(729, dtype=torch.float64), SHAPE)
    with pytest.raises(ValueError, match="at least one tensor"):
        tt_svd_batched(torch.zeros(0, 729, dtype=torch.float64), SHAPE)


def test_a_bond_that_keeps_everything_takes_the_cholesky_shortcut_in_any_batch():
    """Where no tensor of the batch discards anything at a bond, the batch takes ``leading_factor``'s Cholesky
    shortcut (the identity as the first core's basis, as ``tt_svd`` alone); with a batch-mate that truncates there,
    the eigenvectors: another basis of the same tensor."""
    g = torch.Generator().manual_seed(3)
    shape = (2, 3, 2)
    full = torch.randn(2, 12, generator=g, dtype=torch.float64)  # generic: full TT ranks, nothing to discard at 1e-3
    alone = tt_svd_batched(full, shape, tol=1e-3)
    torch.testing.assert_close(alone[0], torch.eye(2, dtype=torch.float64).expand(2, 2, 2).reshape(2, 1, 2, 2))
    single = tt_svd(full[0].reshape(shape), tol=1e-3)
    torch.testing.assert_close(alone[0][0], single[0])
    torch.testing.assert_close(cores_to_dense(alone), full, rtol=0, atol=1e-12)
    rank_one = torch.outer(torch.tensor([1.0, 2.0], dtype=torch.float64), torch.arange(6.0, dtype=torch.float64) + 1)
    mixed = tt_svd_batched(torch.stack([full[0], rank_one.reshape(-1)]), shape, tol=1e-3)
    assert not torch.allclose(mixed[0][0], alone[0][0])  # eigenvectors, not the identity
    torch.testing.assert_close(cores_to_dense(mixed)[0], full[0], rtol=0, atol=1e-12)  # the same tensor
    assert _relative(cores_to_dense(mixed)[1], rank_one.reshape(-1)) < 1e-12
