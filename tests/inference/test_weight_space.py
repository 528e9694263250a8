"""tnbayes.inference.weight_space: the exact posterior of dense weights against a dense GP computation.

The reference is the function-space GP with covariance ``σ_f² Φ diag(s)² Φᵀ + σ² I``, computed directly with
dense linear algebra (no sufficient statistics, no weight space)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tnbayes.inference.weight_space import (
    WeightSpaceStatistics,
    accumulate_statistics,
    bayesian_ridge,
    condition_weight_posterior,
    latent_moments,
    neg_log_marginal_likelihood,
    weight_covariance,
    weight_posterior,
)

DT = torch.float64


def _problem(n=40, m=9, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Phi = torch.randn(n, m, generator=gen, dtype=DT)
    y = Phi @ torch.randn(m, generator=gen, dtype=DT) + 0.3 + 0.2 * torch.randn(n, generator=gen, dtype=DT)
    s = torch.rand(m, generator=gen, dtype=DT) + 0.1
    hyper = [torch.tensor(v, dtype=DT) for v in (1.3, 0.2, 0.3)]  # σ_f², σ², c
    return Phi, y, s, hyper


def _statistics(Phi, y):
    return WeightSpaceStatistics(gram=Phi.T @ Phi, rhs=Phi.T @ y, ones=Phi.sum(0), sum_y=y.sum(), yy=y @ y,
                                 n=int(Phi.shape[0]))


def _dense_gp(Phi, y, s, outputscale, noise, const, Phi_test):
    """−log p(y), and the latent mean and covariance at the test rows, of the GP with k = σ_f² Φ S² Φᵀ."""
    Z, Z_test = Phi * s, Phi_test * s
    C = outputscale * Z @ Z.T + noise * torch.eye(Phi.shape[0], dtype=DT)
    r = y - const
    nll = 0.5 * (r @ torch.linalg.solve(C, r) + torch.logdet(C) + Phi.shape[0] * math.log(2 * math.pi))
    cross = outputscale * Z_test @ Z.T
    mean = const + cross @ torch.linalg.solve(C, r)
    cov = outputscale * Z_test @ Z_test.T - cross @ torch.linalg.solve(C, cross.T)
    return nll, mean, cov


def test_evidence_and_predictive_equal_the_dense_gp():
    Phi, y, s, (outputscale, noise, const) = _problem()
    Phi_test = torch.randn(6, Phi.shape[1], generator=torch.Generator().manual_seed(5), dtype=DT)
    stats = _statistics(Phi, y)
    nll, mean, cov = _dense_gp(Phi, y, s, outputscale, noise, const, Phi_test)
    assert float(neg_log_marginal_likelihood(s, outputscale, noise, const, stats)) * len(y) == pytest.approx(
        float(nll), rel=1e-12)
    w_mean, chol = weight_posterior(s, outputscale, noise, const, stats)
    ours_mean, ours_cov = latent_moments([Phi_test[:4] * s, Phi_test[4:] * s], w_mean, chol, float(noise), True)
    torch.testing.assert_close(const + ours_mean, mean, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ours_cov, cov, rtol=1e-10, atol=1e-12)
    _, ours_var = latent_moments([Phi_test * s], w_mean, chol, float(noise), False)
    torch.testing.assert_close(ours_var, cov.diagonal(), rtol=1e-10, atol=1e-12)
    # the weight covariance σ² B⁻¹ is that of w | y in the dense model: Cov(w) = σ_f² I − σ_f⁴ Zᵀ C⁻¹ Z
    Z = Phi * s
    C = outputscale * Z @ Z.T + noise * torch.eye(len(y), dtype=DT)
    dense_cov = outputscale * torch.eye(len(s), dtype=DT) - outputscale**2 * Z.T @ torch.linalg.solve(C, Z)
    torch.testing.assert_close(weight_covariance(chol, float(noise)), dense_cov, rtol=1e-10, atol=1e-12)


def test_closed_form_gradient():
    Phi, y, _, _ = _problem()
    stats = _statistics(Phi, y)
    gen = torch.Generator().manual_seed(0)
    args = [torch.rand(9, generator=gen, dtype=DT) + 0.1] + [torch.tensor(v, dtype=DT) for v in (1.3, 0.2, 0.3)]
    args = [a.requires_grad_() for a in args]
    assert torch.autograd.gradcheck(lambda *a: neg_log_marginal_likelihood(*a, stats), args)


def test_statistics_accumulate_over_chunks():
    Phi, y, _, _ = _problem(n=37)
    X = torch.arange(37, dtype=DT)[:, None]

    def features(rows: torch.Tensor) -> torch.Tensor:
        return Phi[rows[:, 0].long()]

    direct = _statistics(Phi, y)
    for chunk_size in (5, 37, 100):
        stats = accumulate_statistics(features, X, y, chunk_size)
        assert stats.n == 37 and stats.num_features == 9
        for name in ("gram", "rhs", "ones", "sum_y", "yy"):
            torch.testing.assert_close(getattr(stats, name), getattr(direct, name), rtol=1e-12, atol=1e-12)


def test_conditioning_on_new_rows_equals_the_posterior_on_all_rows():
    Phi, y, s, (outputscale, noise, const) = _problem(n=50)
    old, new = slice(0, 35), slice(35, 50)
    w_mean, chol = weight_posterior(s, outputscale, noise, const, _statistics(Phi[old], y[old]))
    rows = [(Phi[35:42] * s, y[35:42] - const), (Phi[42:] * s, y[42:] - const)]
    cond_mean, cond_chol = condition_weight_posterior(w_mean, chol, rows)
    all_mean, all_chol = weight_posterior(s, outputscale, noise, const, _statistics(Phi, y))
    torch.testing.assert_close(cond_mean, all_mean, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(cond_chol, all_chol, rtol=1e-10, atol=1e-12)
    assert Phi[new].shape[0] == 15


def test_bayesian_ridge_matches_scikit_learn_bayesian_ridge():
    from sklearn.linear_model import BayesianRidge

    rng = np.random.default_rng(5)
    Z = rng.standard_normal((200, 30)) / 4
    y = Z @ rng.standard_normal(30) + 0.3 * rng.standard_normal(200)
    Zt, yt = torch.tensor(Z), torch.tensor(y)
    post = bayesian_ridge(Zt.T @ Zt, Zt.T @ yt, float(yt @ yt), 200)
    reference = BayesianRidge(fit_intercept=False, tol=1e-12, max_iter=10_000, alpha_1=0, alpha_2=0, lambda_1=0,
                              lambda_2=0, compute_score=True).fit(Z, y)
    assert post.noise_variance == pytest.approx(1 / reference.alpha_, rel=1e-6)
    assert post.prior_variance == pytest.approx(1 / reference.lambda_, rel=1e-6)
    np.testing.assert_allclose(post.mean.numpy(), reference.coef_, rtol=1e-6, atol=1e-9)
    covariance = post.eigenvectors @ torch.diag(post.covariance_eigenvalues) @ post.eigenvectors.T
    np.testing.assert_allclose(covariance.numpy(), reference.sigma_, rtol=1e-6, atol=1e-12)
    assert post.log_marginal_likelihood == pytest.approx(reference.scores_[-1], rel=1e-6)


def test_bayesian_ridge_posterior_is_the_weight_posterior_at_its_variances():
    """The fixed point and the Cholesky form solve one model: at the fixed point's σ_w² and σ² they agree."""
    Phi, y, _, _ = _problem(n=60, m=12, seed=3)
    post = bayesian_ridge(Phi.T @ Phi, Phi.T @ y, float(y @ y), 60)
    ones = torch.ones(12, dtype=DT)
    hyper = [torch.tensor(v, dtype=DT) for v in (post.prior_variance, post.noise_variance, 0.0)]
    mean, chol = weight_posterior(ones, *hyper, _statistics(Phi, y))
    torch.testing.assert_close(post.mean, mean, rtol=1e-9, atol=1e-12)
    covariance = post.eigenvectors @ torch.diag(post.covariance_eigenvalues) @ post.eigenvectors.T
    torch.testing.assert_close(covariance, weight_covariance(chol, post.noise_variance), rtol=1e-9, atol=1e-12)
    nll = float(neg_log_marginal_likelihood(ones, *hyper, _statistics(Phi, y))) * 60
    assert post.log_marginal_likelihood == pytest.approx(-nll, rel=1e-10)


def test_bayesian_ridge_with_duplicated_features_is_the_model_on_the_distinct_ones():
    """[Z, Z] w with w ~ N(0, σ_w² I) is Z u with u ~ N(0, 2σ_w² I): the same evidence, noise and predictions,
    though ZᵀZ of the duplicated features is singular (its null directions must carry no data)."""
    rng = np.random.default_rng(8)
    Z = torch.tensor(rng.standard_normal((120, 15)) / 3)
    y = Z @ torch.tensor(rng.standard_normal(15)) + 0.2 * torch.tensor(rng.standard_normal(120))
    twice = torch.cat([Z, Z], dim=1)
    single = bayesian_ridge(Z.T @ Z, Z.T @ y, float(y @ y), 120)
    double = bayesian_ridge(twice.T @ twice, twice.T @ y, float(y @ y), 120)
    assert double.noise_variance == pytest.approx(single.noise_variance, rel=1e-8)
    assert 2 * double.prior_variance == pytest.approx(single.prior_variance, rel=1e-8)
    assert double.log_marginal_likelihood == pytest.approx(single.log_marginal_likelihood, rel=1e-8)
    torch.testing.assert_close(twice @ double.mean, Z @ single.mean, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("n", [40, 150])
def test_bayesian_ridge_on_exactly_fitted_targets_stays_finite(n):
    """y = Z w without noise, Z of 60 features of which the last 10 repeat others (ZᵀZ singular), 40 or 150 rows.
    MacKay's fixed point drives σ² to the round-off of ‖y − Zm‖² and must stop there, with a finite prior variance
    and a mean that reproduces y (before the round-off floors, the round-off in Zᵀy along the null directions of ZᵀZ
    grew the mean without bound: α → 0 and a division by zero)."""
    rng = np.random.default_rng(9)
    distinct = torch.tensor(rng.standard_normal((n, 50)) / 4)
    Z = torch.cat([distinct, distinct[:, :10]], dim=1)
    y = Z @ torch.tensor(rng.standard_normal(60))
    post = bayesian_ridge(Z.T @ Z, Z.T @ y, float(y @ y), n)
    assert math.isfinite(post.prior_variance) and 0 < post.prior_variance < 1e3
    # σ² → 0 (with 40 rows as slowly as n − γ → 0: the iteration cap ends it)
    assert math.isfinite(post.log_marginal_likelihood) and 0 < post.noise_variance < 1e-6 * float(y.var())
    assert bool(torch.isfinite(post.covariance_eigenvalues).all()) and float(post.covariance_eigenvalues.min()) > 0
    assert float(torch.linalg.vector_norm(Z @ post.mean - y)) < 1e-3 * float(torch.linalg.vector_norm(y))
