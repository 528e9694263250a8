"""Where ALS starts (tnbayes.inference.als_start): the seeded random draw wherever its products do not vanish, and the
mean features where they do, against dense float64 computations of both."""

import math

import pytest
import torch

from tnbayes.basis import FourierPolynomialFeatures
from tnbayes.inference import CPDALS
from tnbayes.inference.als_start import INITIAL_PERTURBATION, VANISHING_SHARE, aligned_cores
from tnbayes.tensors import random_cpd
from tests.cpd_problems import cpd_data, hilbert_features


def _many_modes(dtype=torch.float32):
    """20 inputs with 16 Fourier features each, quantized: 80 complex modes of size 2 (QTKM's features)."""
    generator = torch.Generator().manual_seed(0)
    X = (2 * torch.rand(200, 20, generator=generator, dtype=torch.float64) - 1).to(dtype)
    y = (torch.sin(3 * X[:, 0].double()) + X[:, 1].double() + 0.05 * torch.randn(200, generator=generator,
                                                                                    dtype=torch.float64)).to(dtype)
    return FourierPolynomialFeatures(20, 16, "fourier", 4.0, quantized=True), X, y - y.mean()


def test_the_random_start_is_kept_where_its_products_do_not_vanish():
    X, y = cpd_data(200, 3)
    features = hilbert_features(3, 6)
    engine = CPDALS(features, torch.tensor(X), torch.tensor(y), 4, 0.05, seed=3)
    assert engine.start.kind == "random" and engine.start.vanishing_share == 0.0
    drawn = random_cpd(features.mode_sizes, 4, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(a, b) for a, b in zip(engine.factors, drawn))


def test_the_vanishing_share_is_that_of_the_random_products_computed_in_float64():
    features, X, y = _many_modes()
    engine = CPDALS(features, X, y, 4, 1.0, seed=0, chunk_size=64)
    drawn = random_cpd(features.mode_sizes, 4, generator=torch.Generator().manual_seed(0), dtype=torch.complex128)
    X64 = X.double()
    products = torch.ones(200, 4, dtype=torch.complex128)
    for mode in range(features.num_modes):  # about e^-200 per row: representable in float64
        products *= features.mode_features(X64, mode)[0] @ drawn[mode]
    vanishing = float((products.abs().amax(dim=1) < math.sqrt(torch.finfo(torch.float32).tiny)).double().mean())
    assert vanishing > VANISHING_SHARE
    assert engine.start.vanishing_share == vanishing


def test_where_the_random_products_vanish_als_starts_from_the_mean_features():
    """From the float32 random draw, ALS never leaves W = 0 (every product underflows, so the objective stays yᵀy).
    The default start is aligned_cores of the unit mean features computed densely in float64, whatever the chunks,
    and its products do not vanish: the objective at the start is not yᵀy, and ALS lowers it."""
    features, X, y = _many_modes()
    yy = float((y.double() ** 2).sum())
    drawn = random_cpd(features.mode_sizes, 4, generator=torch.Generator().manual_seed(0), dtype=torch.complex64)
    stuck = CPDALS(features, X, y, 4, 0.01, factors=drawn)
    stuck.run(3)
    assert stuck.start.kind == "given" and all(not bool(core.any()) for core in stuck.factors)
    assert stuck.history[0] == stuck.history[-1] == pytest.approx(yy, rel=1e-6)

    for chunk_size in (64, None):
        engine = CPDALS(features, X, y, 4, 0.01, seed=0, chunk_size=chunk_size)
        assert engine.start.kind == "mean feature"
        X64 = X.double()
        directions = []
        for mode in range(features.num_modes):
            mean = features.mode_features(X64, mode)[0].mean(dim=0).conj()
            directions.append(mean / mean.norm())
        reference = aligned_cores(directions, 4, seed=0, dtype=torch.complex128, device="cpu")
        for core, expected in zip(engine.factors, reference):
            torch.testing.assert_close(core.to(torch.complex128), expected, rtol=1e-5, atol=1e-6)
    # the random part of each column is INITIAL_PERTURBATION of a unit column
    spread = (reference[0] - directions[0].unsqueeze(1)).norm()
    assert float(spread) == pytest.approx(INITIAL_PERTURBATION * math.sqrt(4), rel=1e-12)
    assert abs(engine.history[0] - yy) > 1e-3 * yy
    engine.run(3)
    assert engine.history[-1] < yy
