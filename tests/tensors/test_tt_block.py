"""Block TTs (B columns in one TT, the column index on the last core) against dense linear algebra."""

from __future__ import annotations

import torch

from tnbayes.tensors import TTMatrix, TTVector, randomized_round_sum
from tnbayes.tensors.tt_block import (
    block_columns,
    block_from_dense,
    block_gram,
    block_matvec,
    block_mix,
    block_weighted_sum,
    columns_to_block,
)

SHAPE = (3, 4, 2)


def _dense_block(block: TTVector, batch: int) -> torch.Tensor:
    """(N, B) of a block TT."""
    return block.to_dense().reshape(-1, batch)


def _random_columns(batch: int, rank: int = 2, seed: int = 0) -> list[TTVector]:
    generator = torch.Generator().manual_seed(seed)
    return [TTVector.random(SHAPE, rank, generator=generator) for _ in range(batch)]


def test_columns_to_block_and_back_are_exact():
    columns = _random_columns(5)
    dense = torch.stack([x.to_dense().reshape(-1) for x in columns], dim=1)
    for block in (columns_to_block(columns), columns_to_block(columns).round(0.0, 24)):
        assert torch.allclose(_dense_block(block, 5), dense, atol=1e-10)
        for x, y in zip(block_columns(block, 5), columns):
            assert torch.allclose(x.to_dense(), y.to_dense(), atol=1e-10)


def test_block_from_dense_matvec_mix_sum_and_gram_match_dense():
    generator = torch.Generator().manual_seed(2)
    columns = torch.randn(4, 24, dtype=torch.float64, generator=generator)  # B = 4 rows of N = 24
    block = block_from_dense(columns, SHAPE)
    assert torch.allclose(_dense_block(block, 4), columns.T, atol=1e-10)
    matrix = TTMatrix.from_dense(torch.randn(24, 24, dtype=torch.float64, generator=generator), SHAPE, SHAPE)
    product = block_matvec(matrix, block, 4)
    assert torch.allclose(_dense_block(product, 4), matrix.to_dense() @ columns.T, atol=1e-9)
    weights = torch.randn(3, 4, dtype=torch.float64, generator=generator)
    assert torch.allclose(_dense_block(block_mix(block, weights, 4), 3), columns.T @ weights.T, atol=1e-10)
    coefficients = torch.randn(4, dtype=torch.float64, generator=generator)
    assert torch.allclose(block_weighted_sum(block, coefficients, 4).to_dense().reshape(-1), columns.T @ coefficients,
                          atol=1e-10)
    assert torch.allclose(block_gram(block, 4), columns @ columns.T, atol=1e-9)


def test_randomized_round_sum_of_a_block_outer_term_is_the_sum_of_outer_products():
    U, V = _random_columns(4, seed=4), _random_columns(4, seed=5)
    base = TTMatrix.from_dense(torch.randn(24, 24, dtype=torch.float64, generator=torch.Generator().manual_seed(6)),
                               SHAPE, SHAPE, max_rank=2)
    expected = base.to_dense() - sum(u.to_dense().reshape(-1, 1) * v.to_dense().reshape(1, -1) for u, v in zip(U, V))
    result = randomized_round_sum([base, (columns_to_block(U), columns_to_block(V), 4)], [1.0, -1.0], max_rank=30,
                                  generator=torch.Generator().manual_seed(7))
    assert torch.allclose(result.to_dense(), expected, atol=1e-9)
