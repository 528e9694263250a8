"""ExactGP against a dense numpy/scipy Gaussian-process computation."""

import numpy as np
import pytest
import scipy.optimize
import torch

import tnbayes
from tnbayes import metrics


def _toy(n=120, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d)) * np.arange(1, d + 1)
    y = 3.0 + 2.0 * np.sin(X[:, 0]) + 0.3 * X[:, -1] + 0.1 * rng.standard_normal(n)
    return X, y


def _dense_neg_mll(log_params, Xs, ys):
    """Negative log marginal likelihood per point of the ScaleKernel(RBF-ARD) + noise GP, numpy."""
    d = Xs.shape[1]
    ls, outputscale, noise, const = np.exp(log_params[:d]), np.exp(log_params[d]), np.exp(log_params[d + 1]), log_params[d + 2]
    diff = (Xs[:, None, :] - Xs[None, :, :]) / ls
    K = outputscale * np.exp(-0.5 * (diff**2).sum(-1)) + noise * np.eye(len(ys))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L, ys - const)
    return (0.5 * alpha @ alpha + np.log(np.diag(L)).sum() + 0.5 * len(ys) * np.log(2 * np.pi)) / len(ys)


def test_posterior_equals_dense_gp_formula():
    X, y = _toy()
    model = tnbayes.ExactGP(num_restarts=1).fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    ls = model.lengthscale_.numpy()
    sf2, sn2, c = model.outputscale_, model.noise_variance_, model.mean_constant_
    Xt = np.random.default_rng(5).uniform(-3, 3, size=(30, 2))
    Xts = (Xt - X.mean(0)) / X.std(0)

    def k(A, B):
        return sf2 * np.exp(-0.5 * (((A[:, None] - B[None]) / ls) ** 2).sum(-1))

    K = k(Xs, Xs) + sn2 * np.eye(len(y))
    Ks = k(Xts, Xs)
    mean = c + Ks @ np.linalg.solve(K, ys - c)
    var = sf2 - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T)) + sn2
    post = model.posterior(Xt)
    np.testing.assert_allclose(post.mean.numpy(), y.mean() + y.std() * mean, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(post.variance.numpy(), y.var() * var, rtol=1e-7)
    latent = model.posterior(Xt, observation_noise=False)
    np.testing.assert_allclose(latent.variance.numpy(), y.var() * (var - sn2), rtol=1e-6, atol=1e-12)
    assert model.noise_std**2 == pytest.approx(sn2 * y.var())


def test_marginal_likelihood_is_at_a_local_optimum():
    X, y = _toy(seed=1)
    model = tnbayes.ExactGP().fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    theta = np.concatenate([np.log(model.lengthscale_.numpy()),
                            [np.log(model.outputscale_), np.log(model.noise_variance_), model.mean_constant_]])
    ours = _dense_neg_mll(theta, Xs, ys)
    assert ours == pytest.approx(model.neg_mll_, abs=1e-8)
    polished = scipy.optimize.minimize(_dense_neg_mll, theta, args=(Xs, ys), method="L-BFGS-B")
    assert ours - polished.fun < 1e-5
    assert model.log_marginal_likelihood() == pytest.approx(-ours * len(y), rel=1e-8)


def test_full_covariance_and_samples_are_consistent():
    X, y = _toy(n=60)
    model = tnbayes.ExactGP(num_restarts=0).fit(X, y)
    Xt = X[:10] + 0.05
    full = model.posterior(Xt, full_covariance=True)
    diag = model.posterior(Xt)
    np.testing.assert_allclose(full.variance.numpy(), diag.variance.numpy(), rtol=1e-8)
    assert full.rsample(torch.Size([4])).shape == (4, 10)


def test_matern_and_float32_run():
    X, y = _toy(n=80)
    m = tnbayes.ExactGP(kernel="matern", nu=1.5, num_restarts=0, dtype="float32").fit(X, y)
    post = m.posterior(X)
    assert post.mean.dtype == torch.float32
    assert metrics.rmse(y, post) < 0.3


def test_refuses_sizes_that_do_not_fit():
    X, y = _toy(n=50)
    with pytest.raises(MemoryError, match="HilbertGP"):
        tnbayes.ExactGP(max_train_size=40).fit(X, y)


def test_uci_yacht_split0_close_to_reference():
    """One fixed split of yacht: a cheap version of the 20-split benchmark in benchmarks/."""
    data = tnbayes.datasets.load("yacht", split=0)
    model = tnbayes.ExactGP().fit(data.X_train, data.y_train)
    ev = metrics.evaluate(model.posterior(data.X_test), data.y_test)
    assert ev["rmse"] < 1.0 and ev["nlpd"] < 1.0
