"""tnbayes.basis.combine: product, additive and truncated-product feature maps."""

from __future__ import annotations

import pytest
import torch

from tnbayes.basis import additive_features, indexed_product_features, product_features, top_product_indices

DT = torch.float64


def test_product_and_additive_feature_maps():
    torch.manual_seed(1)
    per_dim = torch.randn(3, 5, 4, dtype=DT)  # (D, N, M)
    Z = product_features(per_dim)
    assert Z.shape == (5, 64)
    for n in range(5):
        torch.testing.assert_close(Z[n], torch.kron(torch.kron(per_dim[0, n], per_dim[1, n]), per_dim[2, n]))
    torch.testing.assert_close(Z @ Z.T, torch.stack([p @ p.T for p in per_dim]).prod(0))
    A = additive_features(per_dim)
    assert A.shape == (5, 12)
    torch.testing.assert_close(A @ A.T, torch.stack([p @ p.T for p in per_dim]).mean(0))
    with pytest.raises(ValueError, match="structure='additive'"):
        product_features(per_dim, max_features=63)


def test_truncated_product_indices():
    gen = torch.Generator().manual_seed(0)
    per_dim = torch.randn(3, 7, 4, generator=gen, dtype=torch.float64)
    grid = torch.cartesian_prod(torch.arange(4), torch.arange(4), torch.arange(4))
    torch.testing.assert_close(indexed_product_features(per_dim, [0, 1, 2], grid), product_features(per_dim))
    log_w = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    top = top_product_indices(log_w, 17)
    everything = torch.cartesian_prod(torch.arange(5), torch.arange(5), torch.arange(5))
    score = log_w[0, everything[:, 0]] + log_w[1, everything[:, 1]] + log_w[2, everything[:, 2]]
    best = everything[torch.argsort(score, descending=True)[:17]]
    assert set(map(tuple, top.tolist())) == set(map(tuple, best.tolist()))
    steep = torch.tensor([[0.0, -1.0, -2.0], [0.0, -50.0, -100.0]])  # the second dimension is negligible
    assert top_product_indices(steep, 9, min_log_ratio=10.0).tolist() == [[0, 0], [1, 0], [2, 0]]
