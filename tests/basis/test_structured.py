"""tnbayes.basis.structured: the Hilbert basis laid out as product, additive and hybrid feature maps."""

from __future__ import annotations

import math

import torch

from tnbayes.basis import HilbertBasis, log_spectral_density, top_product_indices
from tnbayes.basis.structured import HilbertLayout

DT = torch.float64


def _layout_kernel(layout: HilbertLayout, X1, X2, lengthscale, block=None) -> torch.Tensor:
    s = layout.feature_weights(lengthscale, "se", None, block)
    return (layout.unweighted_features(X1) * s) @ (layout.unweighted_features(X2) * s).T


def test_product_and_additive_layouts_are_the_basis_features_combined():
    gen = torch.Generator().manual_seed(0)
    X1, X2 = torch.rand(9, 2, generator=gen, dtype=DT) * 2 - 1, torch.rand(7, 2, generator=gen, dtype=DT) * 2 - 1
    basis = HilbertBasis(12, L=[2.0, 2.5], num_dims=2)
    ell = torch.tensor([0.4, 0.7], dtype=DT)
    per_dim = [basis.features(X, ell, "se") for X in (X1, X2)]  # (D, N, M): √S-weighted eigenfunctions
    K = [per_dim[0][d] @ per_dim[1][d].T for d in range(2)]
    torch.testing.assert_close(_layout_kernel(HilbertLayout(basis, "product", [0, 1]), X1, X2, ell), K[0] * K[1])
    torch.testing.assert_close(_layout_kernel(HilbertLayout(basis, "additive", []), X1, X2, ell), (K[0] + K[1]) / 2)


def test_hybrid_layout_is_the_share_weighted_sum_of_its_blocks():
    gen = torch.Generator().manual_seed(1)
    X1, X2 = torch.rand(8, 3, generator=gen, dtype=DT) * 2 - 1, torch.rand(5, 3, generator=gen, dtype=DT) * 2 - 1
    basis = HilbertBasis(6, L=2.0, num_dims=3)
    ell, ell_p, rho = torch.tensor([0.5, 0.8, 1.1], dtype=DT), torch.tensor([0.6, 0.9], dtype=DT), 0.3
    everything = torch.cartesian_prod(torch.arange(6), torch.arange(6))  # the full product over inputs 0 and 2
    hybrid = HilbertLayout(basis, "hybrid", [0, 2], everything)
    K = _layout_kernel(hybrid, X1, X2, ell, {"share": rho, "product_lengthscale": ell_p})
    additive = _layout_kernel(HilbertLayout(basis, "additive", []), X1, X2, ell)
    ell_full = torch.tensor([0.6, 1.0, 0.9], dtype=DT)
    p1, p2 = basis.features(X1, ell_full, "se"), basis.features(X2, ell_full, "se")
    product = (p1[0] @ p2[0].T) * (p1[2] @ p2[2].T)
    torch.testing.assert_close(K, (1 - rho) * additive + rho * product)
    floor = hybrid.product_lengthscale_floor("se", None)
    torch.testing.assert_close(floor, 1.75 * basis.L[[0, 2]] / 6)


def test_select_product_block_keeps_the_largest_prior_variances_and_drops_flat_inputs():
    basis = HilbertBasis(8, L=2.0, num_dims=3)
    ell = torch.tensor([0.3, 50.0, 0.5], dtype=DT)  # input 1 is nearly irrelevant: only its first function counts
    block = HilbertLayout.select_product_block(basis, ell, [0, 1, 2], "se", None, 20, 1e-30)
    assert block["inputs"] == [0, 2] and block["indices"].shape == (20, 2)
    log_w = log_spectral_density(basis.sqrt_eigenvalues(), ell.unsqueeze(-1), "se", None)
    expected = top_product_indices(log_w, 20, min_log_ratio=-math.log(1e-30))
    assert (expected[:, 1] == 0).all()
    torch.testing.assert_close(block["indices"], expected[:, [0, 2]])
