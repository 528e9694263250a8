"""Small regression problems and feature maps shared by the CPD engine tests (tests/inference, tests/tensors) and the
CPD model tests (tests/models): one definition each, imported as ``from tests.cpd_problems import ...``."""

from __future__ import annotations

import json

import numpy as np
import torch

from tnbayes._model_file import payload_checksum

from tnbayes.basis import BasisFeatures, HilbertBasis, TensorProductFeatures


def cpd_data(n=300, d=2, seed=0):
    """Smooth product-form targets on [−1, 1]^d with noise std 0.1: X (n, d), y (n,) numpy arrays."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1:]).prod(1) + 0.1 * rng.standard_normal(n)
    return X, y


def hilbert_features(d=2, m=8, ls=0.5):
    """SE Hilbert features, m per input on [−2, 2]^d, one lengthscale ``ls``."""
    return BasisFeatures(HilbertBasis(m, L=[2.0] * d), [ls] * d)


def qtkm_data(n=200, d=2, seed=0, noise=0.05):
    """Additive smooth targets on [−1, 1]^d: X (n, d), y (n,) numpy arrays."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + 0.5 * np.cos(2 * X[:, -1]) + noise * rng.standard_normal(n)
    return X, y


def fl_data(n=200, d=3, seed=0):
    """Targets on the unit cube (FL's input range): X (n, d), y (n,) numpy arrays."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(2 * np.pi * X[:, 0]) + X[:, 1] ** 2 - 0.5 * X[:, -1] + 0.1 * rng.standard_normal(n)
    return X, y


def discrete_data(n, d, levels, seed=0):
    """Inputs with ``levels[j]`` distinct values in column j (what the per-value grouping serves): tensors."""
    rng = np.random.default_rng(seed)
    X = np.stack([rng.integers(0, lv, n) / lv - 0.5 for lv in levels[:d]], axis=1)
    y = np.sin(3 * X).sum(1) + 0.1 * rng.standard_normal(n)
    return torch.tensor(X), torch.tensor(y)


class FourierFeatures(TensorProductFeatures):
    """exp(i 2π k x / P), k = −M/2 … M/2 − 1, one mode per input, P components with different periods."""

    def __init__(self, num_dims, m, periods):
        self.mode_sizes = [m] * num_dims
        self.num_components = len(periods)
        self.is_complex = True
        self.periods = periods
        self.k = torch.arange(-m // 2, m // 2, dtype=torch.float64)

    def mode_features(self, X, mode):
        x = X[:, mode].to(torch.float64)
        return torch.stack([torch.exp(2j * torch.pi * x[:, None] * self.k / p) for p in self.periods])


def rewrite_as_before_renames(path, parameters: dict[str, str], fitted: dict[str, str] | None = None,
                              factors_shape: tuple[int, ...] | None = None) -> None:
    """Make a saved model file look like one tnbayes 0.1 wrote: the constructor parameters ``{old: new}`` under their
    old names, the fitted attributes ``{old: new}`` likewise, and ``factors_`` in the shape ``factors_shape``."""
    payload = torch.load(path, weights_only=True)
    params = json.loads(payload["params_json"])
    for old, new in parameters.items():
        params[old] = params.pop(new)
    payload["params_json"] = json.dumps(params)
    scalars = json.loads(payload["scalars_json"])
    for old, new in (fitted or {}).items():
        scalars[old] = scalars.pop(new)
    payload["scalars_json"] = json.dumps(scalars)
    if factors_shape is not None:
        payload["tensors"]["factors_"] = payload["tensors"]["factors_"].reshape(factors_shape)
    payload["checksum"] = payload_checksum(payload)
    torch.save(payload, path)
