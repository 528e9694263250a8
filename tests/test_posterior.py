"""GaussianPosterior against scipy.stats and dense torch computations."""

import numpy as np
import pytest
import scipy.stats as st
import torch
from linear_operator.operators import DiagLinearOperator

from tnbayes import GaussianPosterior


@pytest.fixture
def diag_post():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(7, generator=g, dtype=torch.float64)
    var = torch.rand(7, generator=g, dtype=torch.float64) + 0.1
    return GaussianPosterior(mean, variance=var)


@pytest.fixture
def full_post():
    g = torch.Generator().manual_seed(1)
    A = torch.randn(5, 5, generator=g, dtype=torch.float64)
    cov = A @ A.T + 0.5 * torch.eye(5, dtype=torch.float64)
    return GaussianPosterior(torch.randn(5, generator=g, dtype=torch.float64), covariance=cov)


def test_moments_and_quantiles_match_scipy(diag_post):
    m, s = diag_post.mean.numpy(), diag_post.stddev.numpy()
    for p in (0.025, 0.3, 0.975):
        np.testing.assert_allclose(diag_post.quantile(p).numpy(), st.norm.ppf(p, m, s), rtol=1e-12, atol=1e-12)
    lo, hi = diag_post.interval(0.9)
    ref_lo, ref_hi = st.norm.interval(0.9, m, s)
    np.testing.assert_allclose(lo.numpy(), ref_lo, atol=1e-12)
    np.testing.assert_allclose(hi.numpy(), ref_hi, atol=1e-12)
    q = diag_post.quantile(torch.tensor([0.1, 0.5]))
    assert q.shape == (2, 7)


def test_log_prob_per_point_matches_scipy(diag_post):
    y = np.linspace(-1, 1, 7)
    ref = st.norm.logpdf(y, diag_post.mean.numpy(), diag_post.stddev.numpy())
    np.testing.assert_allclose(diag_post.log_prob(y).numpy(), ref, rtol=1e-12)


def test_full_covariance_marginals_mvn_and_samples(full_post):
    cov = full_post.covariance
    np.testing.assert_allclose(full_post.variance.numpy(), torch.diagonal(cov).numpy())
    mvn = full_post.mvn
    y = torch.zeros(5, dtype=torch.float64)
    ref = st.multivariate_normal(full_post.mean.numpy(), cov.numpy()).logpdf(y.numpy())
    assert abs(float(mvn.log_prob(y)) - ref) < 1e-10
    draws = full_post.rsample(torch.Size([40000]), generator=torch.Generator().manual_seed(2))
    assert draws.shape == (40000, 5)
    emp = torch.cov(draws.T)
    assert torch.allclose(emp, cov, atol=0.1 * float(cov.abs().max()))


def test_diagonal_never_forms_dense_matrix(diag_post):
    assert diag_post.is_diagonal
    assert isinstance(diag_post.mvn.lazy_covariance_matrix, DiagLinearOperator)
    draws = diag_post.rsample((3, 2))
    assert draws.shape == (3, 2, 7)


def test_affine_transformation(full_post):
    t = full_post.affine(2.0, 3.0)
    np.testing.assert_allclose(t.mean.numpy(), 2 + 3 * full_post.mean.numpy())
    np.testing.assert_allclose(t.covariance.numpy(), 9 * full_post.covariance.numpy())


def test_to_arviz(diag_post):
    tree = diag_post.to_arviz(50, observed=np.zeros(7))
    draws = tree["posterior_predictive"]["y"]
    assert draws.shape == (1, 50, 7)
    assert "observed_data" in tree.children


def test_errors(diag_post):
    with pytest.raises(ValueError, match="exactly one"):
        GaussianPosterior(torch.zeros(3))
    with pytest.raises(ValueError, match="strictly in"):
        diag_post.interval(1.5)
    with pytest.raises(ValueError, match="3 entries but this posterior is over"):
        diag_post.log_prob(np.zeros(3))
    zero = GaussianPosterior(torch.zeros(2, dtype=torch.float64), variance=torch.zeros(2, dtype=torch.float64),
                             observation_noise=False)
    with pytest.raises(ValueError, match="observation_noise=True"):
        zero.log_prob([0.0, 0.0])
