"""TNKF against a dense Kalman filter, the closed-form posterior and a direct solve; its renamed parameters."""

import json
import warnings

import numpy as np
import pytest
import torch

import tnbayes
import tnbayes.models.tnkf as tnkf_module
from tnbayes._model_file import payload_checksum
from tnbayes.inference import DenseKalmanFilter
from tnbayes.inference.budget import TNKF_RANK_LADDER
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
    A = model.kernel_matrix(Xs[order], Xs[order]) + model.penalty_ * torch.eye(len(order), dtype=torch.float64)
    return Xs, A


def _streamed_rows(model, A):
    """The dual system's rows (columns in α's order) in the order the model streamed them, and their inputs."""
    position = torch.argsort(model.row_order_)
    return A[position[model.stream_order_]], model.stream_order_


@pytest.mark.parametrize("n, forgetting", [(32, 1.0), (30, 1.0), (17, 1.0), (24, 0.97)])
def test_exact_filter_equals_dense_kalman_filter_and_closed_form(n, forgetting):
    X, y = _data(n)
    R, p0 = 1e-3, 2.0
    model = tnbayes.TNKF(lengthscale=[0.7, 0.9], outputscale=1.3, gamma=20.0, measurement_noise=R,
                         prior_variance=p0, truncation=EXACT, forgetting_factor=forgetting,
                         normalize_y=False).fit(X, y)
    assert model.n_padded_ == (18 if n == 17 else n) and model.rows_processed_ == n
    Xs, A = _dual_system(model, X)
    rows, streamed = _streamed_rows(model, A)
    targets = (y - y.mean())[streamed]
    dense = DenseKalmanFilter(torch.zeros(n, dtype=torch.float64), p0 * torch.eye(n, dtype=torch.float64),
                              forgetting_factor=forgetting)
    isotropic = DenseKalmanFilter.isotropic(n, p0, forgetting_factor=forgetting)
    for k in range(n):
        dense.update(rows[k], float(targets[k]), R)
        isotropic.update(rows[k], float(targets[k]), R)
    assert torch.equal(isotropic.mean, dense.mean) and torch.equal(isotropic.covariance, dense.covariance)
    alpha_tt = model.posterior_mean_tt_.to_dense()[:n]
    cov_tt = model.posterior_cov_tt(tol=0.0).to_dense()[:n, :n]
    torch.testing.assert_close(alpha_tt, dense.mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(cov_tt, dense.covariance, rtol=1e-8, atol=1e-10)
    if forgetting == 1.0:  # the recursion is the Bayesian posterior N((AᵀA/R + I/p0)⁻¹ Aᵀt/R, ·)
        precision = rows.T @ rows / R + torch.eye(n, dtype=torch.float64) / p0
        cov = torch.linalg.inv(precision)
        torch.testing.assert_close(dense.mean, cov @ rows.T @ targets / R, rtol=1e-7, atol=1e-8)
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


def test_default_budget_lifts_the_caps_to_the_full_ranks_and_follows_the_closed_form():
    """On 120 rows (TT modes 3·5·8, L's largest bond rank 8² = 64) the default budget streams every row with the caps
    at the state's full ranks, so only the tolerances truncate: α within 1e-4 of the closed-form posterior mean, where
    the default caps (time_budget=None: 32/24/24) miss it by most of its norm."""
    from tnbayes.tensors import tt_bond_bounds

    X, y = _data(120)
    R, settings = 1e-2, dict(lengthscale=[0.7, 0.9], outputscale=1.0, gamma=20.0, prior_variance=1.0,
                             normalize_y=False)
    lifted = tnbayes.TNKF(measurement_noise=R, **settings).fit(X, y)
    capped = tnbayes.TNKF(measurement_noise=R, time_budget=None, **settings).fit(X, y)
    full = max(b * b for b in tt_bond_bounds(lifted.tt_shape_))
    assert full == 64 and lifted.truncation_["covariance"] == (1e-4, full) and capped.truncation_["covariance"][1] == 32
    assert lifted.budget_["settings"]["covariance_rank"] == full and lifted.rows_processed_ == 120
    assert lifted.block_size == "auto" and lifted.block_size_ == 1  # the rung is row by row
    assert any("the state's full ranks fit" in line for line in lifted.fit_report_)
    _, A = _dual_system(lifted, X)
    targets = (y - y.mean())[lifted.row_order_]  # α's order, as A's rows and columns
    alpha = torch.linalg.solve(A.T @ A / R + torch.eye(120, dtype=torch.float64), A.T @ targets / R)

    def error(model):
        return float(torch.linalg.vector_norm(model.posterior_mean_tt_.to_dense()[:120] - alpha)
                     / torch.linalg.vector_norm(alpha))

    assert error(lifted) < 1e-4 and error(capped) > 0.1


def test_lifted_caps_follow_max_rows_a_given_cap_and_the_free_memory(monkeypatch):
    """120 rows (L's full rank 64): lifted with max_rows above n; not where a given covariance cap leaves nothing to
    lift (the vectors' full rank 8 is below their caps), nor where the root at rank 64 would not fit in memory."""
    X, y = _data(120)
    settings = dict(lengthscale=[0.7, 0.9], outputscale=1.0, gamma=20.0, measurement_noise=1e-2, prior_variance=1.0)
    assert tnbayes.TNKF(max_rows=10**6, **settings).fit(X, y).truncation_["covariance"][1] == 64  # 120 rows, not 10⁶
    # blocks, and a tolerance without a cap (beyond the cost model), keep the ladder whatever the budget
    assert tnbayes.TNKF(block_size=16, time_budget=1e9, **settings).fit(X, y).truncation_["covariance"][1] == 32
    unknown = tnbayes.TNKF(truncation={"gain": 1e-3}, time_budget=1e9, **settings).fit(X, y)
    assert unknown.truncation_["covariance"][1] == 32 and unknown.budget_["cost_unknown"]
    given = tnbayes.TNKF(truncation={"covariance": (1e-4, 16)}, **settings).fit(X, y)
    assert given.truncation_["covariance"] == (1e-4, 16) and len(given.budget_["ladder"]) == len(TNKF_RANK_LADDER)
    assert not any("full ranks" in line for line in given.fit_report_)
    monkeypatch.setattr("tnbayes.models._tnkf_budget.available_memory_bytes", lambda device=None: 2**20)
    short = tnbayes.TNKF(**settings).fit(X, y)  # a root of rank 64 over modes 3·5·8 needs about 25 MB
    assert short.truncation_["covariance"][1] == 32 and short.rows_processed_ == 120
    assert any("would need about" in line and "the ladder instead" in line for line in short.fit_report_)


@pytest.mark.parametrize("n", [7, 30])
def test_default_budget_keeps_the_default_caps_where_they_cannot_bind(n):
    """7 rows: a state of one core (no bond); 30 rows: modes 5·6, L's largest bond rank 25 < 32."""
    X, y = _data(n)
    model = tnbayes.TNKF(lengthscale=1.0, outputscale=1.0, gamma=10.0, measurement_noise=1e-2,
                         prior_variance=1.0).fit(X, y)
    assert model.truncation_["covariance"] == (1e-4, 32) and len(model.budget_["ladder"]) == len(TNKF_RANK_LADDER)
    assert any("the default caps fit" in line for line in model.fit_report_)


def test_small_measurement_noise_gives_the_direct_dual_solution():
    """R → 0 with a unit prior: the filter's mean solves (K + I/γ) α = y − b (N = 2⁵)."""
    X, y = _data(32, seed=1)
    model = tnbayes.TNKF(lengthscale=1.0, outputscale=1.0, gamma=10.0, measurement_noise=1e-12,
                         prior_variance=1.0, truncation=EXACT, normalize_y=False).fit(X, y)
    Xs = model.x_scaler_.transform(X)
    A = model.kernel_matrix(Xs, Xs) + 0.1 * torch.eye(32, dtype=torch.float64)
    direct = torch.linalg.solve(A, y - y.mean())
    torch.testing.assert_close(model.dual_weights_, direct, rtol=1e-8, atol=1e-8)


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
    stopped = tnbayes.TNKF(lengthscale=1.0, outputscale=1.0, gamma=10.0, early_stopping_tol=0.5,
                           patience=10).fit(X, y)
    assert stopped.stopped_early_ and stopped.rows_processed_ < 128
    history = stopped.covariance_trace_history_
    assert (history[-11] - history[-1]) / history[-11] < 0.5
    assert all(b <= a * (1 + 1e-9) for a, b in zip(history, history[1:]))  # trace(P) never grows (λ_f = 1)
    L = stopped.posterior_cov_sqrt_tt_.to_dense()
    assert history[-1] == pytest.approx(float((L * L).sum()), rel=1e-10)


def test_orders_change_ranks_not_the_exact_solution_and_streams_pick_the_rows():
    """α's entry order (given / tree / pca) leaves the untruncated posterior unchanged; with ``max_rows`` the
    stream order decides which rows are used: the given order's first rows, α's order, or a random sample."""
    X, y = _data(48, d=3, seed=6)
    kwargs = dict(lengthscale=0.9, outputscale=1.0, gamma=10.0, measurement_noise=1e-3, prior_variance=1.0,
                  truncation=EXACT, normalize_y=False)
    given = tnbayes.TNKF(order="given", **kwargs).fit(X, y)
    for order in ("tree", "pca", "auto"):
        other = tnbayes.TNKF(order=order, **kwargs).fit(X, y)
        assert not torch.equal(other.row_order_, given.row_order_)
        torch.testing.assert_close(other.dual_weights_, given.dual_weights_, rtol=1e-8, atol=1e-9)
    for stream, expected in [("auto", torch.arange(10)), ("given", torch.arange(10)), ("index", None),
                             ("random", None)]:
        model = tnbayes.TNKF(order="tree", stream_order=stream, max_rows=10, **kwargs).fit(X, y)
        used = model.stream_order_[:10]
        if stream in ("given", "auto"):  # auto: the given order for D > 1
            assert torch.equal(used, expected)
        elif stream == "index":
            assert torch.equal(used, model.row_order_[:10])
        else:
            assert not torch.equal(used.sort().values, torch.arange(10))
        # the posterior is the closed form of exactly those rows: α = C ᵀ(C Cᵀ + R I)⁻¹ t (p_0 = 1)
        Xs = model.x_scaler_.transform(X)
        C = (model.kernel_matrix(Xs, Xs) + 0.1 * torch.eye(48, dtype=torch.float64))[used]
        expected_alpha = C.T @ torch.linalg.solve(C @ C.T + 1e-3 * torch.eye(10, dtype=torch.float64),
                                                  (y - y.mean())[used])
        torch.testing.assert_close(model.dual_weights_, expected_alpha, rtol=1e-7, atol=1e-9)
    one_d = tnbayes.TNKF(stream_order="auto", max_rows=5, **kwargs).fit(X[:, :1], y)  # 1-D: left to right
    assert torch.equal(one_d.stream_order_, one_d.row_order_) and torch.equal(
        one_d.row_order_, torch.argsort(X[:, 0], stable=True))
    with pytest.raises(ValueError, match="stream_order"):
        tnbayes.TNKF(stream_order="sorted").fit(X, y)


def test_prediction_uses_the_compressed_row_of_the_measurement_model():
    """With capped row ranks the filter fits α to compressed rows; mean and variance use the test point's row
    compressed the same way (mean k̃ᵀα + b, variance ‖Lᵀk̃‖² + R)."""
    X, y = _data(64, d=3, seed=7)
    model = tnbayes.TNKF(lengthscale=0.8, outputscale=1.0, gamma=10.0, measurement_noise=1e-2,
                         prior_variance=1.0, truncation={"row": (0.0, 2)}, normalize_y=False).fit(X, y)
    Xt, _ = _data(5, d=3, seed=8)
    post = model.posterior(Xt)
    k = torch.zeros(5, model.n_padded_, dtype=torch.float64)
    k[:, :64] = model.kernel_matrix(model.x_scaler_.transform(Xt), model.train_inputs_)
    compressed = torch.stack([TTVector.from_dense(r, tuple(model.tt_shape_), max_rank=2).to_dense() for r in k])
    assert float((compressed - k).norm()) > 1e-3 * float(k.norm())  # the cap does bite
    alpha = model.posterior_mean_tt_.to_dense()
    L = model.posterior_cov_sqrt_tt_.to_dense()
    torch.testing.assert_close(post.mean, compressed @ alpha + y.mean(), rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(post.variance, ((compressed @ L) ** 2).sum(1) + 1e-2, rtol=1e-8, atol=1e-10)


def test_prediction_batches_give_each_point_its_own_compressed_row(monkeypatch):
    """Test rows are compressed in batches (tt_svd_batched); with a tolerance their ranks differ, and each row still
    meets the row rule's bound; the result does not depend on the batch size, nor does the full covariance's diagonal
    differ from the variances."""
    X, y = _data(64, d=3, seed=7)
    model = tnbayes.TNKF(lengthscale=0.8, outputscale=1.0, gamma=10.0, measurement_noise=1e-2,
                         prior_variance=1.0, truncation={"row": 1e-3}, normalize_y=False).fit(X, y)
    Xt, _ = _data(7, d=3, seed=8)
    post = model.posterior(Xt)
    k = torch.zeros(7, model.n_padded_, dtype=torch.float64)
    k[:, :64] = model.kernel_matrix(model.x_scaler_.transform(Xt), model.train_inputs_)
    ranks = {TTVector.from_dense(r, tuple(model.tt_shape_), tol=1e-3).ranks for r in k}
    assert len(ranks) > 1  # the rows need different ranks
    alpha, L = model.posterior_mean_tt_.to_dense(), model.posterior_cov_sqrt_tt_.to_dense()
    dense_mean, dense_variance = k @ alpha + y.mean(), ((k @ L) ** 2).sum(1) + 1e-2
    # within the row rule's error: |k̃ᵀα − kᵀα| ≤ 1e-3 ‖k‖ ‖α‖, and ‖Lᵀk̃‖ within 1e-3 ‖k‖ ‖L‖₂ of ‖Lᵀk‖
    bound = 1e-3 * k.norm(dim=1) * 1.000001
    assert bool(((post.mean - dense_mean).abs() <= bound * alpha.norm()).all())
    spectral = float(torch.linalg.matrix_norm(L, ord=2))
    assert bool(((post.variance - 1e-2).sqrt() - (dense_variance - 1e-2).sqrt()).abs().le(bound * spectral).all())
    monkeypatch.setattr(tnkf_module, "_PREDICTION_BATCH_ENTRIES", 2 * model.n_padded_)  # two rows per batch
    small = model.posterior(Xt)
    torch.testing.assert_close(small.mean, post.mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(small.variance, post.variance, rtol=1e-12, atol=1e-12)
    joint = model.posterior(Xt, full_covariance=True)
    torch.testing.assert_close(joint.mean, post.mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.diagonal(joint.covariance), post.variance, rtol=1e-10, atol=1e-12)


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


def test_classifier_cross_validated_hyperparameters(tmp_path):
    """``hyperparameter_search="cv"``: ℓ and γ maximise the k-fold accuracy of the dense LS-SVM on the subsample
    (recomputed here for the chosen and every other grid point), then R → 0 and p_0 = 1."""
    g = torch.Generator().manual_seed(1)
    X = torch.rand(80, 2, generator=g, dtype=torch.float64) * 4 - 2
    labels = np.where((X[:, 0] * X[:, 1] > 0).numpy(), 1, -1)
    clf = tnbayes.TNKFClassifier(hyperparameter_search="cv", hyper_max_points=60, cv_folds=4,
                                 truncation={"covariance": (1e-4, 8)}).fit(X, labels)
    assert clf.hyperparameter_source_.startswith("4-fold LS-SVM cross-validation on 60 points")
    assert len(clf.cv_results_) == 6 * 4 and clf.prior_variance_ == 1.0
    best = max(clf.cv_results_, key=lambda r: (r["accuracy"], -r["mse"]))
    assert float(clf.lengthscale_[0]) == pytest.approx(best["lengthscale"]) and clf.cv_gamma_ == best["gamma"]
    assert best["accuracy"] > 0.8 and clf.score(X, labels) > 0.9
    # R → 0 relative to the rows (1e-6 of their mean squared norm): the filter computes the cross-validated LS-SVM
    rows_squared = (clf.kernel_matrix(clf.x_scaler_.transform(X), clf.x_scaler_.transform(X))
                    + torch.eye(80, dtype=torch.float64) / clf.cv_gamma_).pow(2).sum(1).mean()
    assert clf.noise_variance_ == pytest.approx(1e-6 * float(rows_squared))
    # one grid point by hand: the fold accuracy of (K + I/γ) α = y − b on the same subsample and folds
    rows = torch.randperm(80, generator=torch.Generator().manual_seed(0))[:60]
    Xs = clf.x_scaler_.transform(X)[rows]
    ys = torch.as_tensor(labels, dtype=torch.float64)[rows]
    K = torch.exp(-0.5 * torch.cdist(Xs, Xs).pow(2) / best["lengthscale"] ** 2)
    folds = torch.arange(60) % 4
    correct = 0
    for k in range(4):
        train, test = folds != k, folds == k
        b = float(ys[train].mean())
        alpha = torch.linalg.solve(K[train][:, train] + torch.eye(45, dtype=torch.float64) / best["gamma"],
                                   ys[train] - b)
        correct += int((torch.sign(K[test][:, train] @ alpha + b) == ys[test]).sum())
    assert correct / 60 == pytest.approx(best["accuracy"])
    with pytest.raises(ValueError, match="hyperparameter_search"):
        tnbayes.TNKFClassifier(hyperparameter_search="grid").fit(X, labels)
    path = tmp_path / "clf.pt"
    clf.save(path)
    loaded = tnbayes.TNKFClassifier.load(path)
    assert loaded.cv_results_ == clf.cv_results_ and np.array_equal(loaded.predict(X[:7]), clf.predict(X[:7]))


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
    rows, streamed = _streamed_rows(model, A)
    for k, target in enumerate((y - b)[streamed]):
        dense.update(rows[k], float(target), R)
    torch.testing.assert_close(model.posterior_mean_tt_.to_dense()[:n], dense.mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(model.posterior_cov_tt(tol=0.0).to_dense()[:n, :n], dense.covariance, rtol=1e-8,
                               atol=1e-10)
    with pytest.raises(ValueError, match="bias"):
        tnbayes.TNKF(bias="median").fit(X, y)


# ---------------------------------------------------------------------------------------------- renamed names
def _posterior(model, X):
    post = model.posterior(X)
    return post.mean, post.variance


def test_kernel_rbf_is_an_alias_of_the_default_se():
    X, y = _data(40, seed=11)
    kwargs = dict(lengthscale=[0.7, 0.9], outputscale=1.3, gamma=20.0, time_budget=None)
    default = tnbayes.TNKF(**kwargs).fit(X, y)
    assert default.kernel == "se"
    rbf = tnbayes.TNKF(kernel="rbf", **kwargs).fit(X, y)
    for a, b in zip(_posterior(default, X[:9]), _posterior(rbf, X[:9])):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(ValueError, match="kernel"):
        tnbayes.TNKF(kernel="periodic").fit(X, y)


@pytest.mark.parametrize("klass", [tnbayes.TNKF, tnbayes.TNKFClassifier])
def test_early_stopping_and_stop_tol_are_deprecated_aliases_of_early_stopping_tol(klass):
    X, y = _data(128, seed=4)
    target = np.sign(y) if klass is tnbayes.TNKFClassifier else y
    kwargs = dict(lengthscale=1.0, outputscale=1.0, gamma=10.0, patience=10, time_budget=None)
    new = klass(early_stopping_tol=0.5, **kwargs).fit(X, target)
    with pytest.warns(FutureWarning, match="early_stopping_tol"):
        old = klass(early_stopping=True, stop_tol=0.5, **kwargs).fit(X, target)
    assert old.early_stopping_tol == 0.5 and new.stopped_early_ and old.rows_processed_ == new.rows_processed_ < 128
    assert old.covariance_trace_history_ == new.covariance_trace_history_
    for a, b in zip(_posterior(new, X[:9]), _posterior(old, X[:9])):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.warns(FutureWarning):  # the old default tolerance, 1e-4
        assert klass(early_stopping=True, **kwargs).fit(X, target).early_stopping_tol == 1e-4
    with pytest.warns(FutureWarning):  # early_stopping=False: no early stopping whatever stop_tol says
        off = klass(early_stopping=False, stop_tol=0.5, **kwargs).fit(X, target)
    assert off.early_stopping_tol is None and off.rows_processed_ == 128
    with pytest.raises(TypeError, match="early_stopping_tol"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        klass(early_stopping=True, stop_tol=0.5, early_stopping_tol=0.1, **kwargs).fit(X, target)


def test_posterior_cov_tt_and_regularization_are_deprecated_attribute_names():
    X, y = _data(32, seed=12)
    rule = (1e-3, 6)
    model = tnbayes.TNKF(lengthscale=[0.7, 0.9], outputscale=1.3, gamma=20.0, truncation={"covariance": rule},
                         time_budget=None).fit(X, y)
    assert model.penalty_ == pytest.approx(1 / 20.0)
    with pytest.warns(FutureWarning, match="penalty_"):
        assert model.regularization_ == model.penalty_
    with pytest.warns(FutureWarning, match="posterior_cov_tt"):
        old = model.posterior_cov_tt_
    new = model.posterior_cov_tt(*rule)
    assert old.ranks == new.ranks and max(new.ranks) <= 6
    torch.testing.assert_close(old.to_dense(), new.to_dense(), rtol=0, atol=0)
    L = model.posterior_cov_sqrt_tt_.to_dense()
    torch.testing.assert_close(model.posterior_cov_tt(tol=0.0).to_dense(), L @ L.T, rtol=1e-10, atol=1e-12)


def _rewrite_model_file(path, edit):
    """Store the model file's payload changed by ``edit`` (payload → payload), with a valid checksum again."""
    payload = edit(torch.load(path, map_location="cpu", weights_only=True))
    torch.save({**payload, "checksum": payload_checksum(payload)}, path)


def test_files_saved_before_the_renames_still_load(tmp_path):
    """A file written by tnbayes 0.1: TT cores under "mean_core_k"/"cov_sqrt_core_k", ``regularization_`` stored,
    ``kernel="rbf"``, ``early_stopping``/``stop_tol`` parameters."""
    X, y = _data(60)
    model = tnbayes.TNKF(lengthscale=[0.7, 0.9], outputscale=1.3, gamma=20.0, time_budget=None).fit(X, y)
    path = tmp_path / "old.pt"
    model.save(path)

    def to_old(payload):
        payload["extra"] = {key.replace("mean.", "mean_core_").replace("root.", "cov_sqrt_core_"): value
                            for key, value in payload["extra"].items()}
        scalars = json.loads(payload["scalars_json"])
        scalars["regularization_"] = scalars.pop("penalty_")
        payload["scalars_json"] = json.dumps(scalars)
        params = json.loads(payload["params_json"])
        for name in ("early_stopping_tol", "early_stopping", "stop_tol"):
            params.pop(name)
        params.update(kernel="rbf", early_stopping=True, stop_tol=0.25)
        payload["params_json"] = json.dumps(params)
        return payload

    _rewrite_model_file(path, to_old)
    assert "mean_core_0" in torch.load(path, weights_only=True)["extra"]
    back = tnbayes.load_model(path)
    assert back.penalty_ == model.penalty_ and back.early_stopping_tol == 0.25 and back.kernel == "rbf"
    Xt, _ = _data(7, seed=9)
    for a, b in zip(_posterior(model, Xt), _posterior(back, Xt)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert back.posterior_cov_sqrt_tt_.ranks == model.posterior_cov_sqrt_tt_.ranks
