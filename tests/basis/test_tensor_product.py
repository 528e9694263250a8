"""Tensor-product feature maps (tnbayes.basis.tensor_product): modes against the 1-D bases and dense features."""

import numpy as np
import pytest
import torch

from tnbayes.basis import BasisFeatures, FourierPolynomialFeatures, HilbertBasis, kron_rows


def _product_features(features: FourierPolynomialFeatures, X: torch.Tensor) -> torch.Tensor:
    """Dense Φ (n, Π_k M_k) of a tensor-product map, mode 0 varying fastest (kron_rows convention)."""
    return kron_rows([features.mode_features(X, k)[0] for k in range(features.num_modes)])


def test_basis_features_match_hilbert_basis():
    X = np.random.default_rng(0).uniform(-1, 1, size=(50, 3))
    basis = HilbertBasis(7, L=[1.5, 2.0, 2.5], center=[0.1, 0.0, -0.1])
    feats = BasisFeatures(basis, [0.3, 0.6, 0.9], kernel="matern52")
    ref = basis.features(torch.tensor(X), [0.3, 0.6, 0.9], kernel="matern52")
    for d in range(3):
        torch.testing.assert_close(feats.mode_features(torch.tensor(X), d)[0], ref[d])


@pytest.mark.parametrize("kind", ["fourier", "polynomial"])
def test_feature_map_modes_and_kernel_match_dense_features(kind):
    X = torch.rand(30, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64) - 0.5
    quantized = FourierPolynomialFeatures(2, 8, kind, 1.5, quantized=True)
    plain = FourierPolynomialFeatures(2, 8, kind, 1.5, quantized=False)
    raw = FourierPolynomialFeatures(2, 8, kind, 1.5, quantized=True, normalize=False)
    scale = 8.0 if kind == "fourier" else 1.0  # only Fourier features are normalised
    torch.testing.assert_close(_product_features(raw, X) / scale, _product_features(plain, X), rtol=0, atol=1e-12)
    if kind == "fourier":  # normalised: k(x, x) = 1 for any D
        torch.testing.assert_close(plain.kernel(X, X).diagonal().real, torch.ones(30, dtype=torch.float64))
    assert quantized.mode_sizes == [2, 2, 2, 2, 2, 2] and plain.mode_sizes == [8, 8]
    torch.testing.assert_close(_product_features(quantized, X), _product_features(plain, X), rtol=0, atol=1e-12)
    phi = _product_features(plain, X)
    torch.testing.assert_close(plain.kernel(X, X[:7]), phi @ phi[:7].conj().T if kind == "fourier" else phi @ phi[:7].T,
                               rtol=1e-10, atol=1e-10)
