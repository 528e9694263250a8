"""Where ALS starts (tnbayes.inference.als_start): the seeded random draw wherever its products do not vanish, and the
mean features where they do, against dense float64 computations of both."""

import math

import pytest
import torch

from tnbayes.basis import FourierPolynomialFeatures, TensorProductFeatures
from tnbayes.data import StreamedRows
from tnbayes.inference import CPDALS
from tnbayes.inference.als_start import INITIAL_PERTURBATION, aligned_cores
from tnbayes.tensors import random_cpd
from tests.cpd_problems import FourierFeatures, cpd_data, hilbert_features


class ScaledRows(TensorProductFeatures):
    """K real modes of size 2 whose features at a row are (1, cos x₁)·x₀: the products of a row scale as x₀^K."""

    def __init__(self, num_modes: int) -> None:
        self.mode_sizes = [2] * num_modes

    def mode_features(self, X: torch.Tensor, mode: int) -> torch.Tensor:
        return (torch.stack([torch.ones_like(X[:, 1]), torch.cos(X[:, 1] + mode)], dim=1) * X[:, :1]).unsqueeze(0)


def _scaled_rows(below: int, between: int, n: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows with x₀ = 1 (products about 10⁻⁶ at 20 modes), ``below`` rows with x₀ = 0.01 (about 10⁻⁴⁶: below the
    smallest normal float32, 1.2·10⁻³⁸) and ``between`` rows with x₀ = 0.1 (about 10⁻²⁶: above it, below its root)."""
    generator = torch.Generator().manual_seed(1)
    X = torch.ones(n, 2, dtype=torch.float32)
    X[:below, 0] = 0.01
    X[below:below + between, 0] = 0.1
    X[:, 1] = torch.rand(n, generator=generator)
    return X, torch.randn(n, generator=generator).to(torch.float32)


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


@pytest.mark.parametrize("below, between, expected", [(90, 60, "random"), (100, 60, "random"),
                                                      (102, 0, "mean feature"), (140, 30, "mean feature")])
def test_the_vanishing_share_counts_the_rows_whose_products_fall_below_the_smallest_normal_number(below, between,
                                                                                                  expected):
    """Rows built to lie on each side of the smallest normal float32 and between it and its square root: the share
    is that of a dense float64 computation of every row's largest product below the smallest normal number (rows
    between it and its root do not count), and only a share above one half (not equal to it) changes the start."""
    features = ScaledRows(20)
    X, y = _scaled_rows(below, between)
    engine = CPDALS(features, X, y, 3, 1.0, seed=0, chunk_size=64)
    drawn = random_cpd(features.mode_sizes, 3, generator=torch.Generator().manual_seed(0))
    products = torch.ones(X.shape[0], 3, dtype=torch.float64)
    for mode in range(features.num_modes):
        products *= features.mode_features(X.double(), mode)[0] @ drawn[mode]
    largest = products.abs().amax(dim=1)
    tiny = torch.finfo(torch.float32).tiny
    assert int((largest < tiny).sum()) == below
    assert int(((largest >= tiny) & (largest < math.sqrt(tiny))).sum()) == between
    assert engine.start.vanishing_share == below / X.shape[0]
    assert engine.start.kind == expected


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

    X64 = X.double()
    directions = []
    for mode in range(features.num_modes):
        mean = features.mode_features(X64, mode)[0].mean(dim=0).conj()
        directions.append(mean / mean.norm())
    reference = aligned_cores(directions, 4, seed=0, dtype=torch.complex128, device="cpu")
    for chunk_size in (64, None):
        engine = CPDALS(features, X, y, 4, 0.01, seed=0, chunk_size=chunk_size)
        assert engine.start.kind == "mean feature"
        for core, expected in zip(engine.factors, reference):
            torch.testing.assert_close(core.to(torch.complex128), expected, rtol=1e-5, atol=1e-6)
    # each core: the direction in every column plus 0.3·√R times a unit-norm random_cpd core of the same seed
    noise = random_cpd(features.mode_sizes, 4, generator=torch.Generator().manual_seed(0), dtype=torch.complex128)
    for core, direction, random_part in zip(reference, directions, noise):
        torch.testing.assert_close(core, direction.unsqueeze(1) + INITIAL_PERTURBATION * 2.0 * random_part)
    assert abs(engine.history[0] - yy) > 1e-3 * yy
    engine.run(3)
    assert engine.history[-1] < yy


def test_a_streamed_source_starts_as_the_same_rows_in_memory():
    features, X, y = _many_modes()
    chunks = [(X[i:i + 70], y[i:i + 70]) for i in range(0, X.shape[0], 70)]
    streamed = CPDALS(features, StreamedRows(chunks, X.shape[0], X.shape[1], dtype=X.dtype), None, 4, 0.01, seed=0)
    in_memory = CPDALS(features, X, y, 4, 0.01, seed=0)
    assert streamed.start == in_memory.start and streamed.start.kind == "mean feature"
    for a, b in zip(streamed.factors, in_memory.factors):
        torch.testing.assert_close(a, b)


def test_the_mean_feature_of_weighted_components_is_their_weighted_mean():
    """Two complex components (periods 1.5 and 4) with weights 0.25 and 1: each mode starts along the unit mean of
    0.25·φ¹ + φ² (dense, float64). 250 modes of 8 Fourier features vanish in float32 from the random draw."""
    generator = torch.Generator().manual_seed(2)
    X = torch.rand(150, 250, generator=generator)
    y = torch.randn(150, generator=generator)
    features = FourierFeatures(250, 8, [1.5, 4.0])
    weights = torch.tensor([0.25, 1.0])
    engine = CPDALS(features, X, y, 2, 0.1, component_weights=weights, seed=5)
    assert engine.start.kind == "mean feature"
    directions = []
    for mode in range(features.num_modes):
        phi = features.mode_features(X.double(), mode)  # (2, n, 8)
        mean = (0.25 * phi[0] + phi[1]).mean(dim=0).conj()
        directions.append(mean / mean.norm())
    reference = aligned_cores(directions, 2, seed=5, dtype=torch.complex128, device="cpu")
    for core, expected in zip(engine.factors, reference):
        torch.testing.assert_close(core.to(torch.complex128), expected, rtol=1e-5, atol=1e-6)
