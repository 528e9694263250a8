"""Leave-one-out predictions of an exact GP and the leave-one-out objective, against refits without each point
(dense numpy) and against scipy's optimiser."""

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.stats
import torch

from tnbayes.selection import (
    MarginalLikelihoodSettings,
    build_exact_gp,
    estimate_kernel_hyperparameters,
    fit_marginal_likelihood,
    leave_one_out_loss,
    leave_one_out_predictions,
    leave_one_out_scores,
)


def _data(n=40, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    # heavy-tailed noise: the kernel is misspecified, as on the data sets where leave-one-out matters
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_t(2, size=n)
    return torch.as_tensor(X), torch.as_tensor((y - y.mean()) / y.std())


def _se(A, B, lengthscale, outputscale):
    d2 = (((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2).sum(-1)
    return outputscale * np.exp(-0.5 * d2)


def _refit_without_each_point(X, y, lengthscale, outputscale, noise, mean):
    """Mean and variance of y_i predicted by the exact GP conditioned on the other N − 1 points (N solves)."""
    n = X.shape[0]
    means, variances = np.empty(n), np.empty(n)
    for i in range(n):
        rest = np.arange(n) != i
        K = _se(X[rest], X[rest], lengthscale, outputscale) + noise * np.eye(n - 1)
        k = _se(X[rest], X[i:i + 1], lengthscale, outputscale)[:, 0]
        means[i] = mean + k @ np.linalg.solve(K, y[rest] - mean)
        variances[i] = outputscale + noise - k @ np.linalg.solve(K, k)
    return means, variances


def _model_at(X, y, lengthscale, outputscale, noise, mean, prior=None):
    model = build_exact_gp(X, y, MarginalLikelihoodSettings(prior=prior))
    with torch.no_grad():
        model.covar_module.base_kernel.lengthscale = torch.as_tensor(lengthscale, dtype=torch.float64).reshape(1, -1)
        model.covar_module.outputscale = outputscale
        model.likelihood.noise = noise
        model.mean_module.constant.fill_(mean)
    return model


def test_closed_form_equals_refitting_without_each_point():
    X, y = _data()
    values = dict(lengthscale=np.array([0.7, 1.6]), outputscale=1.3, noise=0.05, mean=0.2)
    model = _model_at(X, y, **values)
    with torch.no_grad():
        mean, variance = leave_one_out_predictions(model)
    ref_mean, ref_variance = _refit_without_each_point(X.numpy(), y.numpy(), **values)
    # GPyTorch forms squared distances as |a|² + |b|² − 2ab, good to about 1e-8 relative
    np.testing.assert_allclose(mean.numpy(), ref_mean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(variance.numpy(), ref_variance, rtol=1e-6)
    r2, log_density = leave_one_out_scores(model)
    t = y.numpy()
    assert r2 == pytest.approx(1 - ((t - ref_mean) ** 2).sum() / ((t - t.mean()) ** 2).sum(), rel=1e-6)
    assert log_density == pytest.approx(scipy.stats.norm.logpdf(t, ref_mean, np.sqrt(ref_variance)).mean(), rel=1e-6)
    # without a prior the loss is the negative mean log density
    assert float(leave_one_out_loss(model).detach()) == pytest.approx(-log_density, rel=1e-12)


def test_the_loss_adds_the_hyper_priors_as_the_marginal_likelihood_does():
    X, y = _data()
    values = dict(lengthscale=np.array([0.7, 1.6]), outputscale=1.3, noise=0.05, mean=0.2)
    plain, with_prior = _model_at(X, y, **values), _model_at(X, y, prior="dimension_scaled", **values)
    log_prior = sum(float(prior.log_prob(closure(module)).sum()) for _, module, prior, closure, _ in
                    with_prior.named_priors())
    assert log_prior != 0.0
    assert float(leave_one_out_loss(with_prior).detach()) == pytest.approx(
        float(leave_one_out_loss(plain).detach()) - log_prior / X.shape[0], rel=1e-12)


def test_leave_one_out_objective_keeps_the_lengthscales_and_reaches_the_scales_optimum():
    X, y = _data(n=60, seed=3)
    marginal = fit_marginal_likelihood(X, y, MarginalLikelihoodSettings(prior=None, num_restarts=1))
    loo = fit_marginal_likelihood(X, y, MarginalLikelihoodSettings(prior=None, num_restarts=1,
                                                                   objective="leave_one_out"))
    lengthscale = marginal.model.covar_module.base_kernel.lengthscale.detach().reshape(-1).numpy()
    np.testing.assert_array_equal(loo.model.covar_module.base_kernel.lengthscale.detach().reshape(-1).numpy(),
                                  lengthscale)
    assert loo.marginal_likelihood_optimum_log_density == pytest.approx(marginal.leave_one_out_log_density)
    assert loo.leave_one_out_log_density > marginal.leave_one_out_log_density
    assert marginal.marginal_likelihood_optimum_log_density == marginal.leave_one_out_log_density

    # scipy over (log outputscale, log noise, mean), the loss by N dense refits: no better point than ours
    Xn, t = X.numpy(), y.numpy()

    def loss(theta):
        means, variances = _refit_without_each_point(Xn, t, lengthscale, math.exp(theta[0]), math.exp(theta[1]),
                                                     theta[2])
        return -scipy.stats.norm.logpdf(t, means, np.sqrt(variances)).mean()

    start = [math.log(float(marginal.model.covar_module.outputscale)), math.log(float(marginal.model.likelihood.noise)),
             float(marginal.model.mean_module.constant)]
    best = scipy.optimize.minimize(loss, start, method="Nelder-Mead",
                                   options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
    assert -loo.leave_one_out_log_density <= best.fun + 1e-6
    assert loo.objective == pytest.approx(-loo.leave_one_out_log_density, rel=1e-10)


def test_a_spent_time_limit_skips_the_leave_one_out_run():
    X, y = _data(n=50, seed=1)
    marginal = fit_marginal_likelihood(X, y, MarginalLikelihoodSettings(num_restarts=0))
    stopped = fit_marginal_likelihood(X, y, MarginalLikelihoodSettings(num_restarts=0, objective="leave_one_out",
                                                                       time_limit=0.0))
    for a, b in zip(marginal.model.parameters(), stopped.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not stopped.leave_one_out_run and stopped.starts == marginal.starts
    assert stopped.marginal_likelihood_optimum_log_density == stopped.leave_one_out_log_density
    estimate = estimate_kernel_hyperparameters(X, y, objective="leave_one_out", time_limit=0.0)
    assert estimate.objective == "marginal_likelihood" and "no leave-one-out run" in estimate.describe()


@pytest.mark.parametrize("field, value", [("objective", "loo"), ("time_limit", -1.0)])
def test_bad_objective_settings_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        MarginalLikelihoodSettings(**{field: value}).validate()
