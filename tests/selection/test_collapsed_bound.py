"""The collapsed bound (SGPR) fit against a dense computation of Titsias' bound and the exact marginal likelihood."""

import math

import numpy as np
import pytest
import torch

from tnbayes.selection import MarginalLikelihoodSettings, fit_collapsed_bound


def _se(A, B, lengthscale, outputscale):
    return outputscale * np.exp(-0.5 * (((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1))


def _titsias_bound_and_exact(X, y, Z, lengthscale, outputscale, noise, mean):
    """Per row: log N(y | c, Q + σ²I) − tr(K − Q)/(2σ²) with Q = K_xz K_zz⁻¹ K_zx, and log N(y | c, K + σ²I)."""
    n = X.shape[0]
    K = _se(X, X, lengthscale, outputscale)
    Kxz, Kzz = _se(X, Z, lengthscale, outputscale), _se(Z, Z, lengthscale, outputscale)
    Q = Kxz @ np.linalg.solve(Kzz + 1e-10 * np.eye(len(Z)), Kxz.T)

    def log_normal(C):
        sign, logdet = np.linalg.slogdet(C)
        r = y - mean
        return -0.5 * (logdet + r @ np.linalg.solve(C, r) + n * math.log(2 * math.pi))

    bound = log_normal(Q + noise * np.eye(n)) - np.trace(K - Q) / (2 * noise)
    return bound / n, log_normal(K + noise * np.eye(n)) / n


def test_the_fitted_bound_is_titsias_bound_below_the_exact_marginal_likelihood():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(300)
    y = (y - y.mean()) / y.std()
    Z = torch.as_tensor(X[::10].copy())
    fit = fit_collapsed_bound(torch.as_tensor(X), torch.as_tensor(y), Z, MarginalLikelihoodSettings(prior=None),
                              steps=150)
    bound, exact = _titsias_bound_and_exact(X, y, fit.inducing.numpy(), fit.lengthscale.numpy(), fit.outputscale,
                                            fit.noise_variance, fit.mean)
    assert fit.bound == pytest.approx(bound, abs=1e-6)
    assert bound < exact
    assert fit.num_points == 300 and fit.inducing.shape == (30, 2)
    # the steps improved the bound from GPyTorch's defaults (log 2 everywhere) and found the signal
    start_bound, _ = _titsias_bound_and_exact(X, y, X[::10], np.full(2, math.log(2)), math.log(2), math.log(2), 0.0)
    assert fit.bound > start_bound + 0.5
    assert fit.noise_variance < 0.1
