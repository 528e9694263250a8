"""Tests of the synthetic generators of tnbayes.datasets (tnbayes/datasets/synthetic.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tnbayes import datasets


# ----------------------------------------------------------------------------------------------
# Synthetic generators
# ----------------------------------------------------------------------------------------------

def test_make_sinc() -> None:
    s = datasets.make_sinc()
    assert s.X_train.shape == (2**14, 1) and s.X_test.shape == (2**13, 1)
    assert s.X_train[0, 0] == -2.2 and s.X_train[-1, 0] == 2.2
    resid = s.y_test - np.sinc(s.X_test[:, 0])
    assert abs(resid.std() - 0.1) < 0.005
    t = datasets.make_sinc()
    np.testing.assert_array_equal(s.y_train, t.y_train)
    u = datasets.make_sinc(n_train=100, n_test=50, seed=1, grid=False)
    assert u.X_train.shape == (100, 1) and not np.array_equal(u.y_test, s.y_test[:50])


def test_make_two_spirals() -> None:
    n = 2**12
    s = datasets.make_two_spirals(n)
    m = n // 2
    assert s.X_train.shape == (n, 2) and s.task == "classification"
    assert s.y_train.sum() == 0 and set(np.unique(s.y_train)) == {-1.0, 1.0}
    assert s.X_test.shape == (2 * (m // 4), 2) and s.y_test.sum() == 0  # type: ignore[union-attr]
    # test = every 4th point of each spiral, starting with the first
    np.testing.assert_array_equal(s.X_test[: m // 4], s.X_train[:m:4])
    np.testing.assert_array_equal(s.X_test[m // 4:], s.X_train[m::4])
    r = np.hypot(*s.X_train.T)
    assert r.max() < 6 and abs(r[0] - 6 * (m + 19) / (m + 20)) < 1e-12
    np.testing.assert_allclose(s.X_train[m:], -s.X_train[:m], atol=1e-12)  # phase pi
    d = datasets.make_two_spirals(n, disjoint=True)
    assert d.n_train == n - s.n_test and d.y_train.sum() == 0
    e = datasets.make_two_spirals(n, seed=1, noise_std=0.01)
    f = datasets.make_two_spirals(n, seed=1, noise_std=0.01)
    np.testing.assert_array_equal(e.X_train, f.X_train)
    with pytest.raises(ValueError, match="even"):
        datasets.make_two_spirals(11)


def test_default_two_spirals_size() -> None:
    s = datasets.make_two_spirals()
    assert s.n_train == 2**20 and s.n_test == 2**18


def test_make_se1_relevant_variables() -> None:
    s = datasets.make_se1(n_train=2000, n_val=100, n_test=200, seed=3)
    assert s.X_train.shape == (2000, 18) and s.X_val.shape == (100, 18)  # type: ignore[union-attr]
    assert s.X_test.shape == (200, 18) and s.y_val.shape == (100,)  # type: ignore[union-attr]
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 18))
    f = datasets.se1_function(X)
    irrelevant = [j for j in range(18) if j not in (0, 2, 6, 7, 8)]
    X2 = X.copy()
    X2[:, irrelevant] = rng.standard_normal((500, len(irrelevant)))
    np.testing.assert_array_equal(datasets.se1_function(X2), f)
    for j in (0, 2, 6, 7, 8):  # each 1-based variable 1, 3, 7, 8, 9 matters
        X3 = X.copy()
        X3[:, j] += 0.5
        assert np.abs(datasets.se1_function(X3) - f).max() > 1e-3
    x = np.zeros((1, 18))
    x[0, [0, 2, 6, 7, 8]] = [0.5, 0.7, 1.0, 1.1, 1.2]
    assert np.isclose(datasets.se1_function(x)[0], np.sin(1.2**2) * np.sin(1.0 * 1.1 * 1.2))
    resid = s.y_train - datasets.se1_function(s.X_train)
    assert abs(resid.std() - 0.1) < 0.01
    t = datasets.make_se1(n_train=2000, n_val=100, n_test=200, seed=3)
    np.testing.assert_array_equal(s.y_test, t.y_test)


def test_make_se2() -> None:
    s = datasets.make_se2(n_train=1000, n_val=50, n_test=60, seed=0)
    assert s.X_train.shape == (1000, 100) and s.X_val.shape == (50, 100)  # type: ignore[union-attr]
    x = np.zeros((1, 100))
    x[0, 10:15] = [0.1, 0.2, 0.3, 0.4, 0.5]
    x[0, 15:] = 7.0  # irrelevant
    assert np.isclose(datasets.se2_function(x)[0], np.log(1.5**2))
    resid = s.y_train - datasets.se2_function(s.X_train)
    assert abs(resid.std() - 0.1) < 0.01
    assert datasets.make_se1().X_train.shape == (50_000, 18)


@pytest.mark.parametrize("kind", ["sin", "step", "heteroscedastic"])
def test_make_toy_1d(kind: str) -> None:
    s = datasets.make_toy_1d(kind, n=300, seed=2)
    assert s.X_train.shape == (300, 1) and s.X_test.shape == (500, 1)
    assert np.all(np.diff(s.X_train[:, 0]) >= 0)
    np.testing.assert_array_equal(s.y_train, datasets.make_toy_1d(kind, n=300, seed=2).y_train)
    resid = s.y_train - datasets.toy_1d_function(kind, s.X_train)
    if kind == "heteroscedastic":
        left, right = resid[s.X_train[:, 0] < -1], resid[s.X_train[:, 0] > 1]
        assert left.std() < right.std()
    else:
        assert abs(resid.std() - 0.1) < 0.03
    g = datasets.make_toy_1d(kind, n=300, gap=(-1.0, 0.5))
    assert g.n_train == 300
    assert not np.any((g.X_train > -1.0) & (g.X_train < 0.5))
    with pytest.raises(ValueError, match="kind"):
        datasets.make_toy_1d("cosine")
