"""Tensorized shapes and point orderings (tnbayes.tensors.shapes): prime factors, padded mode sizes, the
hierarchical order whose kernel rows have low TT ranks."""

import math

import numpy as np
import pytest
import torch

from tnbayes.tensors import TTVector, hierarchical_order, prime_factors, tensorize_shape


@pytest.mark.parametrize("n, expected", [(1, [1]), (2, [2]), (12, [2, 2, 3]), (97, [97]), (2**10, [2] * 10),
                                         (19683, [3] * 9), (360, [2, 2, 2, 3, 3, 5])])
def test_prime_factors(n, expected):
    assert prime_factors(n) == expected
    assert math.prod(prime_factors(n)) == n


def test_tensorize_shape_pads_large_prime_factors():
    assert tensorize_shape(1024) == ((2,) * 10, 1024)
    shape, padded = tensorize_shape(97, max_factor=16)  # 97 is prime
    assert padded == 98 and shape == (2, 7, 7)
    shape, padded = tensorize_shape(2 * 1009, max_factor=7)
    assert padded >= 2018 and max(shape) <= 7 and math.prod(shape) == padded
    assert padded < 2018 * 1.1
    assert tensorize_shape(97, max_factor=None) == ((97,), 97)
    assert tensorize_shape(2**14, merge_to=4) == ((4,) * 7, 2**14)
    assert tensorize_shape(3**9, merge_to=9) == ((3, 9, 9, 9, 9), 3**9)
    assert tensorize_shape(2**5 * 3, merge_to=4) == ((2, 3, 4, 4), 96)
    for n in range(1, 300):
        shape, padded = tensorize_shape(n)
        assert padded >= n and max(shape) <= 16 and list(shape) == sorted(shape) and math.prod(shape) == padded


@pytest.mark.parametrize("n, D", [(512, 3), (500, 5), (97, 2)])
def test_hierarchical_order_is_a_permutation_that_lowers_kernel_row_ranks(n, D):
    """Tree order: a permutation of the n points (padding at the end) whose kernel rows compress better than the
    data's own (random) order — measured with TT-SVD at relative accuracy 0.1 on an RBF kernel."""
    g = torch.Generator().manual_seed(n)
    X = torch.rand(n, D, generator=g, dtype=torch.float64)
    shape, n_padded = tensorize_shape(n, 16)
    order = hierarchical_order(X, shape)
    assert order.dtype == torch.int64 and torch.equal(order.sort().values, torch.arange(n))
    rows = torch.zeros(16, n_padded, dtype=torch.float64)

    def mean_rank(columns):
        rows[:, :n] = torch.exp(-torch.cdist(X[:16], X[columns]).pow(2) / 2.0)
        return np.mean([max(TTVector.from_dense(r, shape, tol=1e-1).ranks) for r in rows])

    assert mean_rank(order) < 0.7 * mean_rank(torch.arange(n))
    # the leading digit is a principal-axis split: its groups are separated along the first principal axis
    block = math.prod(shape[1:])
    centred = X - X.mean(0)
    axis = torch.linalg.svd(centred, full_matrices=False)[2][0]
    projection = (centred @ axis)[order]
    first, second = projection[:block], projection[block:2 * block]
    assert first.max() <= second.min() or first.min() >= second.max()
    with pytest.raises(ValueError, match="prod"):
        hierarchical_order(X, (2, 2))
