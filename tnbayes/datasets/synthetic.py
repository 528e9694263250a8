"""Synthetic benchmark generators (noisy sinc, two spirals, SE1/SE2, 1-D toys).

Every generator returns a :class:`~tnbayes.datasets.Split` and is reproducible: the same
arguments (including ``seed``) give bit-identical arrays.

Datasets belong to no axis.
"""

from __future__ import annotations

import numpy as np

from ._load import Split

__all__ = [
    "make_sinc",
    "make_two_spirals",
    "make_se1",
    "make_se2",
    "make_toy_1d",
    "se1_function",
    "se2_function",
    "toy_1d_function",
]


def _check_count(value: int, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r}).")
    if int(value) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def _check_noise(noise_std: float) -> float:
    v = float(noise_std)
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"noise_std must be a finite non-negative number, got {noise_std!r}.")
    return v


def _check_range(x_range: tuple[float, float]) -> tuple[float, float]:
    lo, hi = (float(v) for v in x_range)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"x_range must be (low, high) with low < high, got {x_range!r}.")
    return lo, hi


# ----------------------------------------------------------------------------------------------
# Noisy sinc (TNKF paper, SPEC section 6)
# ----------------------------------------------------------------------------------------------

def make_sinc(
    n_train: int = 2**14,
    n_test: int = 2**13,
    noise_std: float = 0.1,
    seed: int | None = 0,
    *,
    x_range: tuple[float, float] = (-2.2, 2.2),
    grid: bool = True,
) -> Split:
    """Noisy sinc regression data of the TNKF paper (Lucassen, Suykens & Batselier 2021).

    ``f(x) = sin(pi x) / (pi x)`` (MATLAB's and numpy's normalised ``sinc``) and
    ``y = f(x) + noise_std * eps`` with ``eps ~ N(0, 1)`` for training *and* test targets.
    As in the reference code (``maximilianluc/LSSVM-TNKF``, ``Noisy Sinc/``) the inputs are
    equally spaced grids over ``x_range = (-2.2, 2.2)`` of ``2**14`` training and ``2**13`` test
    points; a test RMSE near ``noise_std`` is the best achievable.

    Parameters
    ----------
    n_train, n_test : int
        Numbers of training and test points.
    noise_std : float, default 0.1
        Standard deviation of the additive Gaussian noise.
    seed : int or None, default 0
        Seed of ``numpy.random.default_rng`` (noise, and inputs when ``grid=False``).
    x_range : (float, float), default (-2.2, 2.2)
        Input interval.
    grid : bool, default True
        ``True``: ``numpy.linspace`` grids (paper); ``False``: i.i.d. uniform inputs, sorted.

    Returns
    -------
    Split
        ``X_train`` (n_train, 1), ``y_train`` (n_train,), ``X_test`` (n_test, 1),
        ``y_test`` (n_test,). The noise-free values are ``numpy.sinc(X[:, 0])``.
    """
    n_train = _check_count(n_train, "n_train")
    n_test = _check_count(n_test, "n_test")
    noise_std = _check_noise(noise_std)
    lo, hi = _check_range(x_range)
    rng = np.random.default_rng(seed)
    if grid:
        x_tr, x_te = np.linspace(lo, hi, n_train), np.linspace(lo, hi, n_test)
    else:
        x_tr = np.sort(rng.uniform(lo, hi, n_train))
        x_te = np.sort(rng.uniform(lo, hi, n_test))
    y_tr = np.sinc(x_tr) + noise_std * rng.standard_normal(n_train)
    y_te = np.sinc(x_te) + noise_std * rng.standard_normal(n_test)
    return Split(
        X_train=x_tr.reshape(-1, 1), y_train=y_tr, X_test=x_te.reshape(-1, 1), y_test=y_te,
        name="sinc", split=0, n_splits=None, feature_names=["x"], target_name="y",
        task="regression",
        description=(f"Noisy sinc: y = sin(pi x)/(pi x) + {noise_std} * N(0,1), x on "
                     f"{'a grid' if grid else 'uniform draws'} over [{lo}, {hi}]; seed={seed}."),
        source="synthetic (TNKF paper, maximilianluc/LSSVM-TNKF 'Noisy Sinc')",
    )


# ----------------------------------------------------------------------------------------------
# Two spirals (TNKF paper)
# ----------------------------------------------------------------------------------------------

def make_two_spirals(
    n: int = 2**20,
    seed: int | None = None,
    *,
    test_every: int = 4,
    disjoint: bool = False,
    radius: float = 6.0,
    mesh: float = 180.0,
    noise_std: float = 0.0,
) -> Split:
    """Two-spiral classification data of the TNKF paper (``maximilianluc/LSSVM-TNKF``).

    Each spiral has ``M = n // 2`` points; point ``i = 1..M`` has angle
    ``phi_i = pi * i / mesh + phase`` and radius ``r_i = radius * (M + 20 - i) / (M + 20)`` at
    ``(r_i cos phi_i, r_i sin phi_i)``. Spiral 1 has phase 0 and label +1, spiral 2 phase pi
    and label -1. Rows are spiral 1 (i = 1..M) followed by spiral 2.

    The test set is every ``test_every``-th point of each spiral, starting with the first
    (``i = 1, 1 + test_every, ...``; MATLAB ``1:step:end``). **By default the training set is
    all ``n`` points, as in the paper and its code** ("2^20 training points, test = every 4th
    point"), so the test points are also training points and test accuracy measures how well
    the classifier fits the data. Pass ``disjoint=True`` for a proper hold-out (training set =
    the other points).

    Parameters
    ----------
    n : int, default 2**20
        Total number of points (even).
    seed : int or None
        Seed of the optional input noise (unused when ``noise_std == 0``, the paper setting).
    test_every : int, default 4
        Stride of the test subset within each spiral.
    disjoint : bool, default False
        Remove the test points from the training set.
    radius : float, default 6.0
        Outer radius.
    mesh : float, default 180
        Points per half turn (the angle step is ``pi / mesh``).
    noise_std : float, default 0
        Standard deviation of Gaussian noise added to both coordinates of every point.

    Returns
    -------
    Split
        ``X_train`` (n_train, 2), ``y_train`` (n_train,) in {+1.0, -1.0}, ``X_test``
        (n_test, 2), ``y_test`` (n_test,), with ``n_test = 2 * ceil(M / test_every)`` and
        ``n_train = n`` (default) or ``n - n_test`` (``disjoint=True``).
    """
    n = _check_count(n, "n", minimum=2)
    if n % 2:
        raise ValueError(f"n must be even (two spirals of n/2 points), got {n}.")
    test_every = _check_count(test_every, "test_every")
    noise_std = _check_noise(noise_std)
    m = n // 2
    i = np.arange(1, m + 1, dtype=np.float64)
    r = radius * (m + 20 - i) / (m + 20)
    parts = []
    for phase in (0.0, np.pi):
        phi = np.pi * i / mesh + phase
        parts.append(np.column_stack([r * np.cos(phi), r * np.sin(phi)]))
    X = np.vstack(parts)
    if noise_std > 0:
        X = X + noise_std * np.random.default_rng(seed).standard_normal(X.shape)
    y = np.concatenate([np.ones(m), -np.ones(m)])
    in_test_one = (np.arange(m) % test_every) == 0
    is_test = np.concatenate([in_test_one, in_test_one])
    train = ~is_test if disjoint else np.ones(n, dtype=bool)
    return Split(
        X_train=X[train], y_train=y[train], X_test=X[is_test], y_test=y[is_test],
        name="two-spirals", split=0, n_splits=None, feature_names=["x1", "x2"],
        target_name="label", task="classification",
        description=(f"Two spirals, n={n} ({m} per spiral), labels +1/-1, test = every "
                     f"{test_every}th point of each spiral; training set = "
                     f"{'the other points' if disjoint else 'all points (paper protocol)'}."),
        source="synthetic (TNKF paper, maximilianluc/LSSVM-TNKF 'Two-Spiral')",
    )


# ----------------------------------------------------------------------------------------------
# SE1 / SE2 (Gregorova et al. 2018; RFFNet paper, SPEC section 7)
# ----------------------------------------------------------------------------------------------

def _se_inputs(X: np.ndarray, min_columns: int, name: str) -> np.ndarray:
    """``X`` as a float64 (n, p) array with at least ``min_columns`` columns, or a ``ValueError`` saying so."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] < min_columns:
        raise ValueError(f"{name} needs inputs of shape (n, p) with p >= {min_columns}; got shape {X.shape}.")
    return X


def se1_function(X: np.ndarray) -> np.ndarray:
    """Noise-free SE1 target ``sin((x1 + x3)^2) * sin(x7 * x8 * x9)`` (1-based indices).

    Parameters
    ----------
    X : ndarray of shape (n, p) with p >= 9
        Inputs; only the columns 0, 2, 6, 7 and 8 are used.

    Returns
    -------
    ndarray of shape (n,)
        Values in [-1, 1].
    """
    X = _se_inputs(X, 9, "se1_function")
    return np.sin((X[:, 0] + X[:, 2]) ** 2) * np.sin(X[:, 6] * X[:, 7] * X[:, 8])


def se2_function(X: np.ndarray) -> np.ndarray:
    """Noise-free SE2 target ``log((x11 + x12 + x13 + x14 + x15)^2)`` (1-based indices).

    Parameters
    ----------
    X : ndarray of shape (n, p) with p >= 15
        Inputs; only the columns 10 to 14 are used.

    Returns
    -------
    ndarray of shape (n,)
        Unbounded below (the log of a square), ``-inf`` where the five inputs sum to zero.
    """
    X = _se_inputs(X, 15, "se2_function")
    return np.log(X[:, 10:15].sum(axis=1) ** 2)


def _make_se(fun, p: int, name: str, formula: str, relevant: str, n_train: int, n_val: int,
             n_test: int, noise_std: float, seed: int | None) -> Split:
    n_train = _check_count(n_train, "n_train")
    n_val = _check_count(n_val, "n_val", minimum=0)
    n_test = _check_count(n_test, "n_test")
    noise_std = _check_noise(noise_std)
    rng = np.random.default_rng(seed)
    n = n_train + n_val + n_test
    X = rng.standard_normal((n, p))
    y = fun(X) + noise_std * rng.standard_normal(n)
    a, b = n_train, n_train + n_val
    return Split(
        X_train=X[:a], y_train=y[:a], X_test=X[b:], y_test=y[b:],
        X_val=X[a:b], y_val=y[a:b],
        name=name, split=0, n_splits=None, feature_names=[f"x{j}" for j in range(1, p + 1)],
        target_name="y", task="regression",
        description=(f"{name.upper()} (Gregorova et al. 2018): X ~ N(0, I_{p}), y = {formula} "
                     f"+ {noise_std} * N(0,1); only {relevant} (1-based) are relevant; "
                     f"seed={seed}."),
        source="synthetic (Gregorova et al. 2018; RFFNet, Otto & Izbicki)",
    )


def make_se1(
    n_train: int = 50_000,
    n_val: int = 2_000,
    n_test: int = 2_000,
    noise_std: float = 0.1,
    seed: int | None = 0,
) -> Split:
    """SE1 feature-selection benchmark: 18 inputs, only x1, x3, x7, x8, x9 matter.

    ``X ~ N(0, I_18)`` and ``y = sin((x1 + x3)^2) * sin(x7 * x8 * x9) + noise_std * eps``
    (1-based indices, i.e. columns 0, 2, 6, 7, 8). See :func:`se1_function`.

    Parameters
    ----------
    n_train, n_val, n_test : int
        Sizes of the training, validation and test sets (defaults 50,000 / 2,000 / 2,000).
    noise_std : float, default 0.1
    seed : int or None, default 0
        Seed of ``numpy.random.default_rng``; rows are drawn train, then val, then test.

    Returns
    -------
    Split
        ``X_train`` (n_train, 18), ``y_train`` (n_train,), ``X_val`` (n_val, 18),
        ``y_val`` (n_val,), ``X_test`` (n_test, 18), ``y_test`` (n_test,).
    """
    return _make_se(se1_function, 18, "se1", "sin((x1+x3)^2) * sin(x7*x8*x9)",
                    "x1, x3, x7, x8, x9", n_train, n_val, n_test, noise_std, seed)


def make_se2(n_train: int = 50_000, n_val: int = 2_000, n_test: int = 2_000, noise_std: float = 0.1,
             seed: int | None = 0) -> Split:
    """SE2 feature-selection benchmark: 100 inputs, only x11..x15 matter.

    ``X ~ N(0, I_100)`` and ``y = log((x11 + ... + x15)^2) + noise_std * eps`` (1-based
    indices, i.e. columns 10..14). The target has a heavy lower tail (log of a squared
    Gaussian). See :func:`se2_function`.

    Parameters
    ----------
    n_train, n_val, n_test, noise_std, seed
        As in :func:`make_se1` (same defaults).

    Returns
    -------
    Split
        ``X_train`` (n_train, 100), ``y_train`` (n_train,), ``X_val`` (n_val, 100),
        ``y_val`` (n_val,), ``X_test`` (n_test, 100), ``y_test`` (n_test,).
    """
    return _make_se(se2_function, 100, "se2", "log((x11+...+x15)^2)", "x11..x15",
                    n_train, n_val, n_test, noise_std, seed)


# ----------------------------------------------------------------------------------------------
# 1-D toys
# ----------------------------------------------------------------------------------------------

_TOY_KINDS = ("sin", "step", "heteroscedastic")
_TOY_NOISE = {"sin": 0.1, "step": 0.1, "heteroscedastic": 0.3}


def toy_1d_function(kind: str, x: np.ndarray) -> np.ndarray:
    """Noise-free mean of :func:`make_toy_1d`.

    ``"sin"`` and ``"heteroscedastic"``: ``sin(2x) + 0.3 cos(5x)``; ``"step"``: ``-1`` for
    ``x < 0`` and ``+1`` for ``x >= 0``.

    Parameters
    ----------
    kind : {"sin", "step", "heteroscedastic"}
    x : ndarray of shape (n,) or (n, 1)

    Returns
    -------
    ndarray of shape (n,)
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if kind in ("sin", "heteroscedastic"):
        return np.sin(2 * x) + 0.3 * np.cos(5 * x)
    if kind == "step":
        return np.where(x < 0, -1.0, 1.0)
    raise ValueError(f"kind must be one of {_TOY_KINDS}, got {kind!r}.")


def make_toy_1d(
    kind: str = "sin",
    n: int = 200,
    noise_std: float | None = None,
    seed: int | None = 0,
    *,
    n_test: int = 500,
    x_range: tuple[float, float] = (-3.0, 3.0),
    gap: tuple[float, float] | None = None,
) -> Split:
    """Small 1-D regression toys for demos and tests.

    Training inputs are ``n`` i.i.d. uniform draws over ``x_range`` (sorted); test inputs are
    an ``n_test``-point ``linspace`` grid over ``x_range``. Targets (train and test) are
    ``toy_1d_function(kind, x) + sigma(x) * eps`` with ``eps ~ N(0, 1)``:

    * ``"sin"``: ``sin(2x) + 0.3 cos(5x)``, constant ``sigma = noise_std`` (default 0.1);
    * ``"step"``: a unit step from -1 to +1 at ``x = 0`` (non-stationary), ``sigma = noise_std``
      (default 0.1);
    * ``"heteroscedastic"``: the ``"sin"`` mean with noise growing linearly across the range,
      ``sigma(x) = noise_std * (0.1 + 0.9 (x - low) / (high - low))`` (default ``noise_std``
      0.3).

    Parameters
    ----------
    kind : {"sin", "step", "heteroscedastic"}, default "sin"
    n : int, default 200
        Number of training points.
    noise_std : float, optional
        Noise level (see above for its meaning and defaults).
    seed : int or None, default 0
        Seed of ``numpy.random.default_rng``.
    n_test : int, default 500
        Number of test grid points.
    x_range : (float, float), default (-3, 3)
    gap : (float, float), optional
        Leave out training inputs in this interval (test inputs still cover it), to show
        how predictive uncertainty grows away from the data.

    Returns
    -------
    Split
        ``X_train`` (n, 1), ``y_train`` (n,), ``X_test`` (n_test, 1), ``y_test`` (n_test,).
    """
    if kind not in _TOY_KINDS:
        raise ValueError(f"kind must be one of {_TOY_KINDS}, got {kind!r}.")
    n = _check_count(n, "n")
    n_test = _check_count(n_test, "n_test")
    noise_std = _check_noise(_TOY_NOISE[kind] if noise_std is None else noise_std)
    lo, hi = _check_range(x_range)
    rng = np.random.default_rng(seed)
    g0c = g1c = lo
    if gap is not None:
        g0, g1 = sorted(float(v) for v in gap)
        g0c, g1c = max(g0, lo), min(g1, hi)
    gap_len = max(0.0, g1c - g0c)
    keep_len = (hi - lo) - gap_len
    if keep_len <= 0:
        raise ValueError(f"gap {gap!r} covers the whole x_range {x_range!r}.")
    # Sample uniformly on the kept length and map past the gap (exactly n points).
    u = rng.uniform(0.0, keep_len, n)
    x_tr = np.where(u < g0c - lo, lo + u, lo + u + gap_len)
    x_tr = np.sort(x_tr)
    x_te = np.linspace(lo, hi, n_test)

    def sigma(x: np.ndarray) -> np.ndarray:
        if kind == "heteroscedastic":
            return noise_std * (0.1 + 0.9 * (x - lo) / (hi - lo))
        return np.full_like(x, noise_std)

    y_tr = toy_1d_function(kind, x_tr) + sigma(x_tr) * rng.standard_normal(n)
    y_te = toy_1d_function(kind, x_te) + sigma(x_te) * rng.standard_normal(n_test)
    return Split(
        X_train=x_tr.reshape(-1, 1), y_train=y_tr, X_test=x_te.reshape(-1, 1), y_test=y_te,
        name=f"toy-{kind}", split=0, n_splits=None, feature_names=["x"], target_name="y",
        task="regression",
        description=(f"1-D toy '{kind}' (see tnbayes.datasets.make_toy_1d), n={n}, "
                     f"noise_std={noise_std}, x_range=({lo}, {hi}), gap={gap}, seed={seed}."),
        source="synthetic",
    )
