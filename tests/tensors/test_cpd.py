"""CPD algebra (tnbayes.tensors.cpd) and the contractions of CPD weights with feature maps
(tnbayes.tensors.cpd_contractions)."""

import pytest
import torch

from tnbayes.tensors import (PartialProducts, cpd_norm_squared, cpd_predict, cpd_to_dense, design_matrix,
                             mode_projections, product_except, random_cpd)
from tests.cpd_problems import FourierFeatures


def test_cpd_norm_and_dense_agree():
    factors = random_cpd([3, 4, 5], 2, generator=torch.Generator().manual_seed(0))
    dense = cpd_to_dense(factors)
    assert dense.shape == (3, 4, 5)
    manual = sum(torch.einsum("i,j,k->ijk", *(f[:, r] for f in factors)) for r in range(2))
    torch.testing.assert_close(dense, manual)
    assert float(cpd_norm_squared(factors)) == pytest.approx(float((dense**2).sum()), rel=1e-12)
    complex_factors = random_cpd([3, 2], 2, generator=torch.Generator().manual_seed(1), dtype=torch.complex128)
    assert float(cpd_norm_squared(complex_factors)) == pytest.approx(float(cpd_to_dense(complex_factors).abs().square().sum()))
    for f in factors:
        assert float(torch.linalg.norm(f)) == pytest.approx(1.0)


def test_partial_products_equal_direct_products_through_a_sweep_with_changes():
    projections = torch.randn(5, 2, 7, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    partial = PartialProducts(5)
    for mode in [0, 1, 2, 3, 4, 3, 2, 1, 0]:
        torch.testing.assert_close(partial.except_mode(projections, mode), product_except(projections, mode))
        projections[mode] *= 1.5  # as an ALS update changes the core's projections
        partial.invalidate(mode)
    assert torch.equal(PartialProducts(1).except_mode(projections[:1], 0), torch.ones(2, 7, 3, dtype=torch.float64))


def test_prediction_is_the_design_row_times_the_core():
    features = FourierFeatures(3, 4, (2.0, 3.0))
    factors = random_cpd(features.mode_sizes, 2, generator=torch.Generator().manual_seed(1), dtype=torch.complex128)
    X = torch.rand(9, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    weights = torch.tensor([0.7, -0.2], dtype=torch.float64)
    prediction = cpd_predict(features, factors, X, weights, chunk_size=4)
    assert prediction.shape == (9,)
    for mode in range(3):  # f is linear in every core: f(X) = A_d vec(W_d)
        design = design_matrix(features, factors, X, mode, weights)
        torch.testing.assert_close(design @ factors[mode].reshape(-1), prediction)
    assert mode_projections(features, factors, X).shape == (3, 2, 9, 2)
