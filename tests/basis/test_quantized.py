"""Plain Fourier and polynomial features (tnbayes.basis.fourier, tnbayes.basis.polynomial) and their exact
quantization (tnbayes.basis.quantized)."""

import math

import pytest
import torch

from tnbayes.basis import (
    fourier_features,
    fourier_frequencies,
    kron_rows,
    polynomial_features,
    quantized_factor_sizes,
    quantized_factors,
)


def _inputs(n=40, seed=0):
    return torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 0.5


@pytest.mark.parametrize("num_basis", [2, 7, 12, 16, 64, 90])
@pytest.mark.parametrize("kind", ["fourier", "polynomial"])
def test_kronecker_of_factors_reproduces_features(num_basis, kind):
    x = _inputs()
    factors = quantized_factors(x, num_basis, kind, period=1.5)
    assert [f.shape[1] for f in factors] == quantized_factor_sizes(num_basis)
    assert math.prod(quantized_factor_sizes(num_basis)) == num_basis
    full = fourier_features(x, num_basis, 1.5) if kind == "fourier" else polynomial_features(x, num_basis)
    assert full.shape == (x.numel(), num_basis)
    torch.testing.assert_close(kron_rows(factors), full, rtol=0, atol=1e-12)


def test_fourier_frequencies_and_power_of_two_factors():
    assert fourier_frequencies(16).tolist() == list(range(-8, 8))
    assert fourier_frequencies(5).tolist() == [-2, -1, 0, 1, 2]
    assert quantized_factor_sizes(64) == [2] * 6
    x = _inputs(5)
    # the paper's factor form for M = 2^K: exp(−iπxM/(KP))·[1, exp(i2πx2^{m−1}/P)]
    M, K, P = 16, 4, 2.0
    for m, factor in enumerate(quantized_factors(x, M, "fourier", P)):
        expected = torch.exp(-1j * math.pi * x * M / (K * P)).unsqueeze(-1) * torch.stack(
            [torch.ones_like(x), torch.exp(2j * math.pi * x * 2**m / P)], -1)
        torch.testing.assert_close(factor, expected.to(torch.complex128), rtol=0, atol=1e-13)


def test_old_module_path_of_the_plain_features_still_works():
    from tnbayes.basis import quantized

    assert quantized.fourier_features is fourier_features and quantized.polynomial_features is polynomial_features
