"""tnbayes.basis.rules: the (M, c) rule of thumb and the approximation check."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from tnbayes.basis import (
    ApproximationWarning,
    check_hilbert_approximation,
    choose_hilbert_parameters,
    hilbert_lengthscale_range,
)


@pytest.mark.parametrize(
    "kernel,S,ell,c_expected,M_expected",
    [
        ("se", 1.0, 0.2, 1.2, 11),        # c = max(0.64, 1.2); M = ⌈1.75·1.2/0.2⌉ = ⌈10.5⌉
        ("se", 1.0, 0.5, 1.6, 6),         # c = 3.2·0.5 = 1.6; M = ⌈1.75·1.6/0.5⌉ = ⌈5.6⌉
        ("se", 2.0, 1.0, 1.6, 6),         # only ℓ/S matters for c and M
        ("matern52", 2.0, 1.0, 2.05, 11),  # c = 4.1·0.5; M = ⌈2.65·2.05/0.5⌉ = ⌈10.865⌉
        ("matern32", 1.0, 0.1, 1.2, 42),   # M = ⌈3.42·1.2/0.1⌉ = ⌈41.04⌉
    ],
)
def test_choose_hilbert_parameters_published_rule(kernel, S, ell, c_expected, M_expected):
    a1, a2 = {"se": (3.2, 1.75), "matern52": (4.1, 2.65), "matern32": (4.5, 3.42)}[kernel]
    c_formula = max(a1 * ell / S, 1.2)
    assert c_formula == pytest.approx(c_expected)
    assert math.ceil(a2 * c_formula / (ell / S) - 1e-9) == M_expected
    M, c, L = choose_hilbert_parameters(half_range=S, lengthscale_min=ell, kernel=kernel)
    assert M == M_expected
    assert c[0] == pytest.approx(c_expected) and L[0] == pytest.approx(c_expected * S)


def test_choose_hilbert_parameters_from_data_and_ranges():
    X = np.column_stack([np.linspace(-1, 1, 50), np.linspace(0, 10, 50)])
    M, c, L = choose_hilbert_parameters(X, lengthscale_min=[0.2, 1.0], lengthscale_max=[0.5, 5.0], kernel="rbf")
    # dim 0: S=1, c=max(3.2·0.5, 1.2)=1.6, M=⌈1.75·1.6/0.2⌉=14;  dim 1: S=5, c=3.2, M=⌈1.75·3.2/0.2⌉=28
    np.testing.assert_allclose(c, [1.6, 3.2])
    np.testing.assert_allclose(L, [1.6, 16.0])
    assert M == 28
    with pytest.raises(ValueError, match="matern12"):
        choose_hilbert_parameters(half_range=1.0, lengthscale_min=0.3, kernel="matern12")
    with pytest.raises(ValueError, match="exactly one"):
        choose_hilbert_parameters(lengthscale_min=0.3)


def test_check_hilbert_approximation_warns_outside_representable_range():
    M, c, L = choose_hilbert_parameters(half_range=1.0, lengthscale_min=0.2, lengthscale_max=0.5)
    rng = hilbert_lengthscale_range(L, M)
    assert rng.lengthscale_min[0] <= 0.2 and rng.lengthscale_max[0] >= 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_hilbert_approximation(0.3, L, M, "se", half_range=1.0)
    assert issubclass(ApproximationWarning, UserWarning)
    with pytest.warns(ApproximationWarning, match="below the smallest lengthscale"):
        assert not check_hilbert_approximation(0.05, L, M, "se")
    with pytest.warns(ApproximationWarning, match="too small"):
        check_hilbert_approximation(2.0, L, M, "se")
    with pytest.warns(ApproximationWarning, match="half-range"):
        check_hilbert_approximation(0.3, 1.1, 40, "se", half_range=1.0)
    # on a bound of the range within round-off (a fit that stopped there): no warning; just beyond it: one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_hilbert_approximation(float(rng.lengthscale_max[0]) * (1 + 1e-12), L, M, "se")
        assert check_hilbert_approximation(float(rng.lengthscale_min[0]) * (1 - 1e-12), L, M, "se")
    with pytest.warns(ApproximationWarning, match="too small"):
        check_hilbert_approximation(float(rng.lengthscale_max[0]) * 1.001, L, M, "se")
