"""Primal TT Kalman filter: exact against the dense HilbertGP posterior, square-root PSD, options."""

import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis import ApproximationWarning


def _data(n, D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, D))
    return X, np.sin(2 * X[:, 0]) * np.cos(X[:, -1]) + 0.1 * rng.standard_normal(n)


def _fixed(D, M):
    return dict(lengthscale=[1.4] * D, outputscale=1.3, noise_variance=0.05, mean_constant=0.0, num_basis=M, c=2.0)


@pytest.mark.parametrize("D, M, batch_size", [(2, 8, 5), (3, 5, 1), (3, 5, 16)])
def test_untruncated_filter_equals_dense_hilbert_gp(D, M, batch_size):
    X, y = _data(150, D)
    Xq = np.random.default_rng(1).uniform(-1, 1, (40, D))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        dense = tnbayes.HilbertGP(structure="product", **_fixed(D, M)).fit(X, y)
        tt = tnbayes.TTKalmanGP(tol=0.0, max_rank=None, batch_size=batch_size, **_fixed(D, M)).fit(X, y)
    a, b = dense.posterior(Xq), tt.posterior(Xq)
    torch.testing.assert_close(b.mean, a.mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(b.variance, a.variance, rtol=1e-6, atol=1e-8)
    full_a, full_b = dense.posterior(Xq[:9], full_covariance=True), tt.posterior(Xq[:9], full_covariance=True)
    torch.testing.assert_close(full_b.covariance, full_a.covariance, rtol=1e-6, atol=1e-8)
    # the TT covariance of the weights is the dense one (v = s∘w: cov_v = S σ²B⁻¹ S)
    s = dense.feature_weights_
    cov_v = s[:, None] * dense.weight_covariance() * s[None, :]
    torch.testing.assert_close(tt.posterior_cov_tt(tol=0.0).to_dense(), cov_v, rtol=1e-6, atol=1e-10)
    mean_v = s * dense.weight_mean_
    torch.testing.assert_close(tt.posterior_mean_tt_.to_dense(), mean_v, rtol=1e-6, atol=1e-8)


def test_truncated_square_root_keeps_the_covariance_psd():
    """Aggressive rounding (correction rank ≤ 2) still gives P = L Lᵀ ⪰ 0, and every variance ≥ 0."""
    X, y = _data(200, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        tt = tnbayes.TTKalmanGP(max_rank=2, tol=1e-2, batch_size=4, **_fixed(3, 5)).fit(X, y)
    assert max(r for _, r in tt.rank_history_) <= 2
    assert max(tt.posterior_cov_sqrt_tt_.ranks) <= 3  # L = L₀ − C: the exact prior root adds one
    P = tt.posterior_cov_tt(tol=0.0).to_dense()
    assert float(torch.linalg.eigvalsh(0.5 * (P + P.T)).min()) >= -1e-12 * float(P.diagonal().max())
    post = tt.posterior(np.random.default_rng(2).uniform(-1, 1, (200, 3)), observation_noise=False)
    assert bool((post.variance >= 0).all())


def test_rank_capped_filter_approaches_the_dense_posterior():
    """Rank-capped filtering (randomized rounding of C) on D = 4, M = 4 against the dense posterior: the
    error shrinks with the rank cap (measured: max mean error 0.18 at rank 4, 0.046 at rank 24; variance
    ratio 0.88–4.2 at rank 4, 0.81–1.26 at rank 24)."""
    X, y = _data(200, 4)
    Xq = np.random.default_rng(4).uniform(-1, 1, (100, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        exact = tnbayes.HilbertGP(structure="product", **_fixed(4, 4)).fit(X, y).posterior(Xq, observation_noise=False)
        errors, ratios = {}, {}
        for rank in (4, 24):
            capped = tnbayes.TTKalmanGP(max_rank=rank, tol=1e-8, **_fixed(4, 4)).fit(X, y)
            assert max(r for _, r in capped.rank_history_) <= rank
            post = capped.posterior(Xq, observation_noise=False)
            errors[rank] = float((post.mean - exact.mean).abs().max())
            ratios[rank] = post.variance / exact.variance
    assert errors[24] < 0.5 * errors[4]
    assert errors[24] < 0.1 * float(exact.mean.std())
    assert 0.75 < float(ratios[24].min()) and float(ratios[24].max()) < 1.5
    worst = {rank: float(ratios[rank].log().abs().max()) for rank in ratios}
    assert worst[24] < worst[4]


def test_defaults_are_calibrated_next_to_exact_gp():
    X, y = _data(300, 2)
    Xq, yq = _data(300, 2, seed=5)
    tt = tnbayes.TTKalmanGP().fit(X, y)
    report = tnbayes.metrics.evaluate(tt.posterior(Xq), yq)
    exact = tnbayes.metrics.evaluate(tnbayes.ExactGP().fit(X, y).posterior(Xq), yq)
    assert report["rmse"] < 1.1 * exact["rmse"]
    assert 0.90 <= report["coverage_95"] <= 0.99
    assert report["nlpd"] < exact["nlpd"] + 0.1


def test_forgetting_and_early_stopping():
    X, y = _data(300, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        base = tnbayes.TTKalmanGP(**_fixed(2, 6)).fit(X, y)
        forgetful = tnbayes.TTKalmanGP(forgetting=0.9, **_fixed(2, 6)).fit(X, y)
        early = tnbayes.TTKalmanGP(early_stopping_tol=0.05, patience=2, **_fixed(2, 6)).fit(X, y)
    Xq = np.random.default_rng(3).uniform(-1, 1, (20, 2))
    assert bool((forgetful.posterior(Xq).variance > base.posterior(Xq).variance).all())
    assert early.rows_used_ < 300 and base.rows_used_ == 300
    assert len(early.trace_history_) == -(-early.rows_used_ // 8)
    assert all(b <= a * (1 + 1e-9) for a, b in zip(base.trace_history_, base.trace_history_[1:]))


@pytest.mark.parametrize("kwargs, match", [
    ({"forgetting": 0.0}, "forgetting"), ({"batch_size": 0}, "batch_size"), ({"tol": -1.0}, "tol"),
    ({"max_rank": 0}, "max_rank"), ({"kernel": "periodic"}, "kernel"),
])
def test_bad_parameters(kwargs, match):
    X, y = _data(30, 2)
    with pytest.raises(ValueError, match=match):
        tnbayes.TTKalmanGP(**kwargs).fit(X, y)


def test_queries_outside_the_box_raise():
    X, y = _data(60, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        tt = tnbayes.TTKalmanGP(out_of_box="raise", **_fixed(2, 6)).fit(X, y)
    with pytest.raises(ValueError, match="outside"):
        tt.posterior(np.array([[50.0, 0.0]]))


@pytest.mark.parametrize("batch_size", [4, 16])
def test_conditioning_on_new_rows_equals_the_dense_posterior_on_the_union(batch_size, tmp_path):
    """Fitted on rows A, conditioned on rows B (the filter goes on from its state) = the dense Hilbert-GP
    posterior on A ∪ B with the same basis and hyper-parameters (untruncated ranks)."""
    X, y = _data(40, 2)
    X_new, y_new = _data(11, 2, seed=3)
    X_new = 0.9 * X_new  # inside the training box
    Xq = np.random.default_rng(1).uniform(-0.9, 0.9, (15, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        dense = tnbayes.HilbertGP(structure="product", **_fixed(2, 5)).fit(X, y)
        tt = tnbayes.TTKalmanGP(tol=0.0, max_rank=None, batch_size=batch_size, **_fixed(2, 5)).fit(X, y)
    before = tt.posterior(Xq)
    conditioned = tt.condition_on_observations(X_new, y_new)
    expected, got = dense.condition_on_observations(X_new, y_new).posterior(Xq), conditioned.posterior(Xq)
    torch.testing.assert_close(got.mean, expected.mean, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(got.variance, expected.variance, rtol=1e-6, atol=1e-10)
    assert conditioned.n_iter_ == tt.n_iter_ + -(-11 // batch_size) and conditioned.n_conditioned_rows_ == 11
    torch.testing.assert_close(tt.posterior(Xq).mean, before.mean)  # the fitted model is unchanged
    # twice in a row, and after a save/load round trip, the filter goes on from the stored state
    tt.save(tmp_path / "tt.tnb")
    loaded = tnbayes.TTKalmanGP.load(tmp_path / "tt.tnb")
    twice = tt.condition_on_observations(X_new[:5], y_new[:5]).condition_on_observations(X_new[5:], y_new[5:])
    for model in (twice, loaded.condition_on_observations(X_new, y_new)):
        torch.testing.assert_close(model.posterior(Xq).mean, expected.mean, rtol=1e-6, atol=1e-8)


def test_conditioning_a_truncated_filter_keeps_its_rank_cap_and_accuracy():
    """With a rank cap the conditioned filter stays within it, and close to the filter fitted on all rows."""
    X, y = _data(60, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        model = tnbayes.TTKalmanGP(max_rank=3, batch_size=8, time_budget=None, noise_estimate="training",
                                   **_fixed(3, 4))
        full = model.fit(X, y)
        part = tnbayes.TTKalmanGP(**model.get_params()).fit(X[:40], y[:40])
    conditioned = part.condition_on_observations(X[40:], y[40:])
    Xq = np.random.default_rng(2).uniform(-0.9, 0.9, (10, 3))
    # not the same as the full fit (other row order and box), but close to it, finite and with positive variances
    got, ref = conditioned.posterior(Xq), full.posterior(Xq)
    assert torch.isfinite(got.mean).all() and (got.variance > 0).all()
    assert float((got.mean - ref.mean).abs().max()) < 0.2
    assert max(r for _, r in conditioned.rank_history_) <= 3
