"""TNKF and the TT Kalman filter against a dense Kalman filter, the closed-form posterior and a direct solve."""

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.inference import DenseKalmanFilter, TTKalmanFilter
from tnbayes.tensors import TTVector

EXACT = {q: 0.0 for q in ("row", "mean", "covariance", "gain", "innovation")}


def _data(n=64, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 4 - 2
    y = torch.sin(X[:, 0]) + 0.3 * X[:, -1] + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def _dual_system(model, X):
    Xs = model.x_scaler_.transform(torch.as_tensor(X, dtype=torch.float64))
    order = model.row_order_
    A = model.kernel_matrix(Xs[order], Xs[order]) + model.regularization_ * torch.eye(len(order), dtype=torch.float64)
    return Xs, A


@pytest.mark.parametrize("n, forgetting", [(32, 1.0), (30, 1.0), (17, 1.0), (24, 0.97)])
def test_exact_filter_equals_dense_kalman_filter_and_closed_form(n, forgetting):
    X, y = _data(n)
    R, p0 = 1e-3, 2.0
    model = tnbayes.TNKF(lengthscale=[0.7, 0.9], outputscale=1.3, gamma=20.0, measurement_noise=R,
                         prior_variance=p0, truncation=EXACT, forgetting_factor=forgetting,
                         normalize_y=False).fit(X, y)
    assert model.n_padded_ == (18 if n == 17 else n) and model.rows_processed_ == n
    Xs, A = _dual_system(model, X)
    targets = (y - y.mean())[model.row_order_]
    dense = DenseKalmanFilter(torch.zeros(n, dtype=torch.float64), p0 * torch.eye(n, dtype=torch.float64),
                              forgetting_factor=forgetting)
    isotropic = DenseKalmanFilter.isotropic(n, p0, forgetting_factor=forgetting)
    for k in range(n):
        dense.update(A[k], float(targets[k]), R)
        isotropic.update(A[k], float(targets[k]), R)
    assert torch.equal(isotropic.mean, dense.mean) and torch.equal(isotropic.covariance, dense.covariance)
    alpha_tt = model.posterior_mean_tt_.to_dense()[:n]
    cov_tt = model.posterior_cov_tt_.to_dense()[:n, :n]
    torch.testing.assert_close(alpha_tt, dense.mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(cov_tt, dense.covariance, rtol=1e-8, atol=1e-10)
    if forgetting == 1.0:  # the recursion is the Bayesian posterior N((AᵀA/R + I/p0)⁻¹ Aᵀt/R, ·)
        precision = A.T @ A / R + torch.eye(n, dtype=torch.float64) / p0
        cov = torch.linalg.inv(precision)
        torch.testing.assert_close(dense.mean, cov @ A.T @ targets / R, rtol=1e-7, atol=1e-8)
        torch.testing.assert_close(dense.covariance, cov, rtol=1e-7, atol=1e-10)
    # predictions: mean k*ᵀα + b, variance k*ᵀPk* + R
    Xt, _ = _data(9, seed=5)
    post = model.posterior(Xt)
    ks = model.kernel_matrix(model.x_scaler_.transform(Xt), Xs[model.row_order_])
    torch.testing.assert_close(post.mean, ks @ dense.mean + y.mean(), rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(post.variance, torch.einsum("ij,jk,ik->i", ks, dense.covariance, ks) + R,
                               rtol=1e-7, atol=1e-10)
    full = model.posterior(Xt, full_covariance=True)
    torch.testing.assert_close(full.variance, post.variance, rtol=1e-8, atol=1e-12)


def test_small_measurement_noise_gives_the_direct_dual_solution():
    """R → 0 with a unit prior: the filter's mean solves (K + I/γ) α = y − b (N = 2⁵)."""
    X, y = _data(32, seed=1)
    model = tnbayes.TNKF(lengthscale=1.0, outputscale=1.0, gamma=10.0, measurement_noise=1e-12,
                         prior_variance=1.0, truncation=EXACT, normalize_y=False).fit(X, y)
    Xs = model.x_scaler_.transform(X)
    A = model.kernel_matrix(Xs, Xs) + 0.1 * torch.eye(32, dtype=torch.float64)
    direct = torch.linalg.solve(A, y - y.mean())
    torch.testing.assert_close(model.dual_weights_, direct, rtol=1e-8, atol=1e-8)


def test_square_root_update_stays_psd_where_the_covariance_form_does_not():
    X, _ = _data(32, seed=2)
    model = tnbayes.TNKF(lengthscale=0.5, outputscale=1.0, gamma=100.0, max_rows=1,
                         normalize_y=False).fit(X, X[:, 0])
    Xs = model.x_scaler_.transform(X)
    A = model.kernel_matrix(Xs, Xs) + 0.01 * torch.eye(32, dtype=torch.float64)
    shape = tuple(model.tt_shape_)
    rough = {"covariance": (0.05, None), "gain": 1e-10, "innovation": 1e-10, "mean": 1e-10}
    filters = {mode: TTKalmanFilter(shape, 1.0, truncation=rough, square_root=mode) for mode in (True, False)}
    worst = {True: np.inf, False: np.inf}
    for k in range(32):
        row = TTVector.from_dense(A[k], shape)
        for mode, kf in filters.items():
            kf.update(row, float(X[k, 0]), 1e-4)
            if mode:  # the filter's own state: P = L Lᵀ (the rounded `covariance` property is for inspection)
                L = kf.covariance_sqrt.to_dense()
                P = L @ L.T
            else:
                P = kf.covariance.to_dense()
            worst[mode] = min(worst[mode], float(torch.linalg.eigvalsh(P).min()))
    plain_P = filters[False].covariance.to_dense()
    assert worst[False] < -1e-3 * float(torch.linalg.eigvalsh(plain_P).max())  # lost definiteness
    assert worst[True] > -1e-10  # L Lᵀ: PSD after every rounding


def test_defaults_fit_a_smooth_function_and_estimate_hyperparameters():
    from tnbayes.datasets import make_sinc

    data = make_sinc(n_train=256, n_test=128, seed=3)
    model = tnbayes.TNKF().fit(data.X_train, data.y_train)
    assert model.hyperparameter_source_.startswith("marginal likelihood")
    post = model.posterior(data.X_test)
    ev = tnbayes.metrics.evaluate(post, data.y_test)
    assert ev["rmse"] < 0.13  # noise std 0.1
    assert 0.85 <= ev["coverage_95"] <= 1.0
    assert max(model.max_ranks_.values()) <= 64


def test_early_stopping_and_max_rows():
    X, y = _data(128, seed=4)
    full = tnbayes.TNKF(lengthscale=1.0, outputscale=1.0, gamma=10.0).fit(X, y)
    capped = tnbayes.TNKF(lengthscale=1.0, outputscale=1.0, gamma=10.0, max_rows=40).fit(X, y)
    assert capped.rows_processed_ == 40 and full.rows_processed_ == 128
    stopped = tnbayes.TNKF(lengthscale=1.0, outputscale=1.0, gamma=10.0, early_stopping=True,
                           patience=10, stop_tol=0.5).fit(X, y)
    assert stopped.stopped_early_ and stopped.rows_processed_ < 128
    history = stopped.covariance_trace_history_
    assert (history[-11] - history[-1]) / history[-11] < 0.5
    assert all(b <= a * (1 + 1e-9) for a, b in zip(history, history[1:]))  # trace(P) never grows (λ_f = 1)
    L = stopped.posterior_cov_sqrt_tt_.to_dense()
    assert history[-1] == pytest.approx(float((L * L).sum()), rel=1e-10)


def test_classifier_two_labels_and_probabilities():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(128, 2, generator=g, dtype=torch.float64) * 4 - 2
    labels = np.where((X[:, 0] * X[:, 1] > 0).numpy(), "same", "diff")
    clf = tnbayes.TNKFClassifier(lengthscale=0.6, outputscale=1.0, gamma=20.0).fit(X, labels)
    assert set(clf.classes_) == {"same", "diff"}
    assert clf.score(X, labels) > 0.9
    proba = clf.predict_proba(X[:10])
    assert proba.shape == (10, 2) and np.allclose(proba.sum(1), 1.0)
    assert set(clf.predict(X[:10])) <= {"same", "diff"}


def test_save_load_round_trip(tmp_path):
    X, y = _data(60)
    model = tnbayes.TNKF(lengthscale=[0.7, 0.9], outputscale=1.3, gamma=20.0).fit(X, y)
    path = tmp_path / "tnkf.pt"
    model.save(path)
    back = tnbayes.load_model(path)
    Xt, _ = _data(7, seed=9)
    a, b = model.posterior(Xt), back.posterior(Xt)
    torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=0)
    torch.testing.assert_close(a.variance, b.variance, rtol=0, atol=0)
    assert back.posterior_mean_tt_.ranks == model.posterior_mean_tt_.ranks


def test_bad_input_is_refused():
    X, y = _data(32)
    with pytest.raises(ValueError, match="forgetting_factor"):
        tnbayes.TNKF(forgetting_factor=1.5).fit(X, y)
    with pytest.raises(ValueError, match="Unknown truncation"):
        tnbayes.TNKF(truncation={"covariances": 0.1}).fit(X, y)
    with pytest.raises(ValueError, match="round_relative_to"):
        tnbayes.TNKF(round_relative_to="norm").fit(X, y)
    with pytest.raises(ValueError, match="order"):
        tnbayes.TNKF(order="random").fit(X, y)
    with pytest.raises(ValueError, match="gamma"):
        tnbayes.TNKF(gamma=-1.0).fit(X, y)
    with pytest.raises(tnbayes.NotFittedError):
        tnbayes.TNKF().posterior(X)
    X_bad = X.clone()
    X_bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        tnbayes.TNKF().fit(X_bad, y)


@pytest.mark.parametrize("n", [16, 17])
def test_constraint_row_and_fixed_bias_match_dense_filter(n):
    """``constraint_row=True`` streams the paper's first row 1ᵀα = 0 before the kernel rows; ``bias`` fixes b."""
    X, y = _data(n)
    R, p0, b = 1e-2, 1.5, 0.25
    model = tnbayes.TNKF(lengthscale=[0.8, 0.8], outputscale=1.0, gamma=10.0, measurement_noise=R, prior_variance=p0,
                         truncation=EXACT, constraint_row=True, bias=b, normalize_y=False).fit(X, y)
    assert model.bias_ == b and model.rows_processed_ == n + 1
    _, A = _dual_system(model, X)
    dense = DenseKalmanFilter.isotropic(n, p0)
    dense.update(torch.ones(n, dtype=torch.float64), 0.0, R)
    for k, target in enumerate((y - b)[model.row_order_]):
        dense.update(A[k], float(target), R)
    torch.testing.assert_close(model.posterior_mean_tt_.to_dense()[:n], dense.mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(model.posterior_cov_tt_.to_dense()[:n, :n], dense.covariance, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="bias"):
        tnbayes.TNKF(bias="median").fit(X, y)
