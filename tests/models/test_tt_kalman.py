"""Primal TT Kalman filter: exact against the dense HilbertGP posterior (and, with other bases, the dense Bayesian
linear regression), square-root PSD, options, renamed parameters."""

import json
import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes._model_file import payload_checksum
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
            capped = tnbayes.TTKalmanGP(max_rank=rank, tol=1e-8, smoothing="none", **_fixed(4, 4)).fit(X, y)
            assert max(r for _, r in capped.rank_history_) <= rank
            post = capped.posterior(Xq, observation_noise=False)
            errors[rank] = float((post.mean - exact.mean).abs().max())
            ratios[rank] = post.variance / exact.variance
    assert errors[24] < 0.5 * errors[4]
    assert errors[24] < 0.1 * float(exact.mean.std())
    assert 0.75 < float(ratios[24].min()) and float(ratios[24].max()) < 1.5
    worst = {rank: float(ratios[rank].log().abs().max()) for rank in ratios}
    assert worst[24] < worst[4]


def test_smoothing_moves_a_capped_filter_to_the_dense_posterior():
    """Rank caps 4 and 8 on D = 4, M = 4 (full rank 16): ALS smoothing brings the mean closer to the dense posterior
    mean than the filter ends (measured RMS error: 0.065 → 0.039 at rank 4, 0.038 → 0.0071 at rank 8), and at rank 8
    the Laplace variance is closer to the dense variance than the capped filter's (mean |log ratio| 0.22 → 0.16;
    at rank 4 it is too small in places: ratios 0.18–1.2, the filter's 0.88–4.2)."""
    X, y = _data(200, 4)
    Xq = np.random.default_rng(4).uniform(-1, 1, (100, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        exact = tnbayes.HilbertGP(structure="product", **_fixed(4, 4)).fit(X, y).posterior(Xq, observation_noise=False)
        fits = {(rank, smoothing): tnbayes.TTKalmanGP(max_rank=rank, smoothing=smoothing, **_fixed(4, 4)).fit(X, y)
                for rank in (4, 8) for smoothing in ("none", "als")}
    errors, log_ratios = {}, {}
    for (rank, smoothing), fit in fits.items():
        if smoothing == "none":
            assert fit.smoothing_sweeps_ == 0 and fit.smoothing_laplace_ is None
        else:
            assert fit.smoothing_sweeps_ >= 1 and fit.smoothing_laplace_ is not None
            history = fit.smoothing_history_
            assert all(b <= a * (1 + 1e-10) for a, b in zip(history, history[1:]))
            assert max(fit.posterior_mean_tt_.ranks) <= rank
        post = fit.posterior(Xq, observation_noise=False)
        errors[rank, smoothing] = float((post.mean - exact.mean).square().mean().sqrt())
        log_ratios[rank, smoothing] = float((post.variance / exact.variance).log().abs().mean())
    assert errors[4, "als"] < 0.8 * errors[4, "none"]
    assert errors[8, "als"] < 0.5 * errors[8, "none"]
    assert log_ratios[8, "als"] < log_ratios[8, "none"]


@pytest.mark.parametrize("kwargs", [dict(tol=0.0, max_rank=None), dict(max_rank=10), dict(forgetting_factor=0.99)])
def test_smoothing_is_skipped_where_it_does_not_apply(kwargs):
    """Without a cap below the full TT rank (D = 3, M = 5: full rank 5) the filter is exact; with forgetting it
    tracks a drifting state: no smoothing, the filter's posterior."""
    X, y = _data(80, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        model = tnbayes.TTKalmanGP(**{**_fixed(3, 5), **kwargs}).fit(X, y)
    assert model.smoothing_sweeps_ == 0 and model.smoothing_laplace_ is None and model.smoothing_history_ == []


def test_smoothed_model_saves_loads_and_conditions(tmp_path):
    X, y = _data(120, 3)
    Xq = np.random.default_rng(6).uniform(-0.9, 0.9, (25, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        model = tnbayes.TTKalmanGP(max_rank=2, **_fixed(3, 4)).fit(X, y)
    assert model.smoothing_laplace_ is not None
    model.save(tmp_path / "smoothed.tnb")
    loaded = tnbayes.TTKalmanGP.load(tmp_path / "smoothed.tnb")
    a, b = model.posterior(Xq), loaded.posterior(Xq)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)
    for mine, theirs in zip(model.smoothing_laplace_.factors, loaded.smoothing_laplace_.factors):
        assert torch.equal(mine, theirs)
    full = model.posterior(Xq[:6], full_covariance=True)
    torch.testing.assert_close(full.covariance.diagonal(), a.variance[:6], rtol=1e-10, atol=1e-12)
    # conditioning goes on from the smoothed mean with the filter's covariance
    conditioned = model.condition_on_observations(X[:10], y[:10])
    assert conditioned.smoothing_laplace_ is None and model.smoothing_laplace_ is not None
    post = conditioned.posterior(Xq)
    assert torch.isfinite(post.mean).all() and (post.variance > 0).all()


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
        forgetful = tnbayes.TTKalmanGP(forgetting_factor=0.9, **_fixed(2, 6)).fit(X, y)
        early = tnbayes.TTKalmanGP(early_stopping_tol=0.05, patience=2, **_fixed(2, 6)).fit(X, y)
    Xq = np.random.default_rng(3).uniform(-1, 1, (20, 2))
    assert bool((forgetful.posterior(Xq).variance > base.posterior(Xq).variance).all())
    assert early.rows_used_ < 300 and base.rows_used_ == 300
    assert len(early.trace_history_) == -(-early.rows_used_ // 8)
    assert all(b <= a * (1 + 1e-9) for a, b in zip(base.trace_history_, base.trace_history_[1:]))


@pytest.mark.parametrize("kwargs, match", [
    ({"forgetting_factor": 0.0}, "forgetting_factor"), ({"batch_size": 0}, "batch_size"), ({"tol": -1.0}, "tol"),
    ({"max_rank": 0}, "max_rank"), ({"kernel": "periodic"}, "kernel"), ({"smoothing": "kalman"}, "smoothing"),
    ({"max_sweeps": 0}, "max_sweeps"), ({"sweep_tol": -1.0}, "sweep_tol"),
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


# ---------------------------------------------------------------------------------------------- renamed names
def test_forgetting_is_a_deprecated_alias_of_forgetting_factor():
    X, y = _data(120, 2)
    Xq = np.random.default_rng(3).uniform(-1, 1, (10, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        new = tnbayes.TTKalmanGP(forgetting_factor=0.9, **_fixed(2, 5)).fit(X, y)
        with pytest.warns(FutureWarning, match="forgetting_factor"):
            old = tnbayes.TTKalmanGP(forgetting=0.9, **_fixed(2, 5)).fit(X, y)
    assert old.forgetting_factor == 0.9 and old.trace_history_ == new.trace_history_
    a, b = new.posterior(Xq), old.posterior(Xq)
    torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=0)
    torch.testing.assert_close(a.variance, b.variance, rtol=0, atol=0)


def _rewrite_model_file(path, edit):
    """Store the model file's payload changed by ``edit`` (payload → payload), with a valid checksum again."""
    payload = edit(torch.load(path, map_location="cpu", weights_only=True))
    torch.save({**payload, "checksum": payload_checksum(payload)}, path)


def test_files_saved_before_the_renames_still_load(tmp_path):
    """A file written by tnbayes 0.1 (parameter ``forgetting``, no ``basis``) loads and goes on filtering with it."""
    X, y = _data(60, 2)
    X_new, y_new = _data(9, 2, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        model = tnbayes.TTKalmanGP(forgetting_factor=0.9, tol=0.0, max_rank=None, **_fixed(2, 4)).fit(X, y)
    path = tmp_path / "old.tnb"
    model.save(path)

    def to_old(payload):
        params = json.loads(payload["params_json"])
        params["forgetting"] = params.pop("forgetting_factor")
        params.pop("basis")
        payload["params_json"] = json.dumps(params)
        return payload

    _rewrite_model_file(path, to_old)
    back = tnbayes.TTKalmanGP.load(path)
    assert back.forgetting_factor == 0.9
    Xq = 0.9 * X_new
    for a, b in [(model.posterior(Xq), back.posterior(Xq)),
                 (model.condition_on_observations(Xq, y_new).posterior(Xq),
                  back.condition_on_observations(Xq, y_new).posterior(Xq))]:
        torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=0)
        torch.testing.assert_close(a.variance, b.variance, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------- other bases
def _polynomial_rows(Xs, M):
    """Dense rows of the tensor-product polynomial features ⊗_d [1, x_d, …, x_d^{M−1}] (TT index order)."""
    rows = torch.ones(Xs.shape[0], 1, dtype=torch.float64)
    for d in range(Xs.shape[1]):
        powers = Xs[:, d:d + 1] ** torch.arange(M, dtype=torch.float64)
        rows = torch.einsum("na,nb->nab", rows, powers).reshape(Xs.shape[0], -1)
    return rows


def _dense_blr(model, X, y, Xq, M, prior_variance, noise):
    """The dense Bayesian linear regression on the same features: y − c = Φ v + ε, v ~ N(0, σ_f² I)."""
    Phi = _polynomial_rows(model.x_scaler_.transform(torch.as_tensor(X)), M)
    Phi_q = _polynomial_rows(model.x_scaler_.transform(torch.as_tensor(Xq)), M)
    targets = torch.as_tensor(y, dtype=torch.float64)
    precision = Phi.T @ Phi / noise + torch.eye(Phi.shape[1], dtype=torch.float64) / prior_variance
    cov = torch.linalg.inv(precision)
    mean = cov @ Phi.T @ targets / noise
    return Phi_q @ mean, torch.einsum("ij,jk,ik->i", Phi_q, cov, Phi_q) + noise, mean, cov


@pytest.mark.parametrize("basis, M", [("polynomial", 3), ("quantized", 4)])
def test_untruncated_polynomial_basis_equals_dense_bayesian_linear_regression(basis, M):
    """``basis="polynomial"`` (one mode of M powers per input) and a quantized polynomial feature map (modes of
    size 2) filter exactly the dense Bayesian linear regression over the same M^D features."""
    from tnbayes.basis import FourierPolynomialFeatures

    X, y = _data(80, 2)
    Xq = np.random.default_rng(6).uniform(-1.5, 1.5, (12, 2))  # polynomials predict anywhere: no clipping
    feature_map = "polynomial" if basis == "polynomial" else FourierPolynomialFeatures(2, M, "polynomial")
    prior_variance, noise = 0.7, 0.05
    model = tnbayes.TTKalmanGP(basis=feature_map, num_basis=M if basis == "polynomial" else None,
                               outputscale=prior_variance, noise_variance=noise, tol=0.0, max_rank=None,
                               batch_size=6, normalize_y=False, time_budget=None).fit(X, y)
    assert model.lengthscale_ is None and model.num_basis_ == (M if basis == "polynomial" else 2)
    assert model.input_box() is None
    mean, variance, weights, cov = _dense_blr(model, X, y, Xq, M, prior_variance, noise)
    post = model.posterior(Xq)
    torch.testing.assert_close(post.mean, mean, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(post.variance, variance, rtol=1e-7, atol=1e-9)
    if basis == "quantized":  # the weights in the TT's index order: the kron of the map's modes (2 per input)
        Xs = model.x_scaler_.transform(torch.as_tensor(X))
        Phi = torch.ones(Xs.shape[0], 1, dtype=torch.float64)
        for mode in range(feature_map.num_modes):
            Phi = torch.einsum("na,nb->nab", Phi, feature_map.mode_features(Xs, mode)[0]).reshape(Xs.shape[0], -1)
        cov = torch.linalg.inv(Phi.T @ Phi / noise + torch.eye(Phi.shape[1], dtype=torch.float64) / prior_variance)
        weights = cov @ Phi.T @ torch.as_tensor(y, dtype=torch.float64) / noise
    torch.testing.assert_close(model.posterior_mean_tt_.to_dense(), weights, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(model.posterior_cov_tt(tol=0.0).to_dense(), cov, rtol=1e-7, atol=1e-10)
    full = model.posterior(Xq[:5], full_covariance=True)
    torch.testing.assert_close(full.variance, post.variance[:5], rtol=1e-8, atol=1e-12)


def test_polynomial_basis_defaults_fit_and_estimate_the_noise(tmp_path):
    """With nothing given, σ_f² and σ² maximise the evidence of the polynomial regression; a cubic with noise 0.1
    is fitted to about its noise, σ² is found, and the model saves and loads."""
    rng = np.random.default_rng(7)
    X = rng.uniform(-1, 1, (300, 2))
    y = X[:, 0] ** 3 - X[:, 0] * X[:, 1] + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(300)
    model = tnbayes.TTKalmanGP(basis="polynomial", noise_estimate="training").fit(X, y)
    assert model.num_basis_ == 4 and "marginal likelihood" in model.hyperparameter_source_
    noise = model.noise_variance_ * float(model.y_scaler_.scale_) ** 2
    assert 0.5 * 0.01 < noise < 2 * 0.01
    Xq = rng.uniform(-1, 1, (200, 2))
    truth = Xq[:, 0] ** 3 - Xq[:, 0] * Xq[:, 1] + 0.5 * Xq[:, 1] ** 2
    assert float(np.sqrt(np.mean((model.predict(Xq) - truth) ** 2))) < 0.05
    model.save(tmp_path / "poly.tnb")
    back = tnbayes.load_model(tmp_path / "poly.tnb")
    torch.testing.assert_close(back.posterior(Xq).mean, model.posterior(Xq).mean, rtol=0, atol=0)


def test_bases_the_real_filter_cannot_take_are_refused(tmp_path):
    from tnbayes.basis import FourierPolynomialFeatures, PeriodMixtureFeatures

    X, y = _data(40, 2)
    refused = [(FourierPolynomialFeatures(2, 4, "fourier", period=8.0), "complex"),
               (PeriodMixtureFeatures(2, 4, [4.0, 8.0]), "complex"),
               (FourierPolynomialFeatures(2, 12, "polynomial"), "one size"),
               ("fourier", "basis must be")]
    for basis, match in refused:
        with pytest.raises(ValueError, match=match):
            tnbayes.TTKalmanGP(basis=basis).fit(X, y)
    with pytest.raises(ValueError, match="lengthscale and c"):
        tnbayes.TTKalmanGP(basis="polynomial", lengthscale=1.0).fit(X, y)
    model = tnbayes.TTKalmanGP(basis=FourierPolynomialFeatures(2, 2, "polynomial", quantized=False),
                               outputscale=1.0, noise_variance=0.1, time_budget=None).fit(X, y)
    with pytest.raises(TypeError, match="cannot be saved"):
        model.save(tmp_path / "instance.tnb")
