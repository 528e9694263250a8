"""BoTorch adapter: condition_on_observations (HilbertGP's rank-k weight update, TTKalmanGP's filter) and
(b, q, d) posteriors of every regressor."""

import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("botorch")

import tnbayes  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::tnbayes.basis.ApproximationWarning",
                                        "ignore::sklearn.exceptions.ConvergenceWarning")


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.standard_normal(n)


def test_hilbert_gp_conditioning_equals_the_dense_posterior_on_the_union():
    X_old, y_old = _data(30, 0)
    X_new, y_new = _data(7, 1)
    X_new = 0.9 * X_new  # inside the training box
    model = tnbayes.HilbertGP(structure="product", num_basis=6, c=2.0, max_iter=20).fit(X_old, y_old)
    adapter = model.to_botorch()
    conditioned = adapter.condition_on_observations(torch.as_tensor(X_new), torch.as_tensor(y_new).unsqueeze(-1))
    # dense Bayesian linear regression on the union of rows, with the fitted scalers and hyper-parameters
    X_all, y_all = np.vstack([X_old, X_new]), np.concatenate([y_old, y_new])
    Z = model._unweighted_features(model.x_scaler_.transform(torch.as_tensor(X_all))) * model.feature_weights_
    r = (torch.as_tensor(y_all) - model.y_scaler_.shift_) / model.y_scaler_.scale_ - model.mean_constant_
    precision = Z.T @ Z + model.noise_variance_ / model.outputscale_ * torch.eye(Z.shape[1], dtype=Z.dtype)
    weight_mean = torch.linalg.solve(precision, Z.T @ r)
    X_test = torch.as_tensor(_data(5, 2)[0] * 0.8)
    Z_test = model._unweighted_features(model.x_scaler_.transform(X_test)) * model.feature_weights_
    scale, shift = model.y_scaler_.scale_, model.y_scaler_.shift_
    dense_mean = shift + scale * (model.mean_constant_ + Z_test @ weight_mean)
    dense_cov = scale**2 * model.noise_variance_ * Z_test @ torch.linalg.solve(precision, Z_test.T)
    posterior = conditioned.posterior(X_test.unsqueeze(0))
    torch.testing.assert_close(posterior.mean.reshape(-1), dense_mean, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(posterior.covariance_matrix.reshape(5, 5), dense_cov, rtol=1e-7, atol=1e-12)
    # the original adapter and model are unchanged
    before = adapter.posterior(X_test.unsqueeze(0)).mean
    assert not torch.allclose(before, posterior.mean)
    torch.testing.assert_close(before.reshape(-1), torch.as_tensor(model.predict(X_test.numpy())))


def test_conditioning_without_a_cheap_update_names_the_alternative():
    X, y = _data(30, 0)
    model = tnbayes.CPDKernelMachine(rank=2, num_basis=4, max_sweeps=2, lengthscale=0.5, penalty=1e-2,
                                     noise_variance=0.01).fit(X, y)
    with pytest.raises(NotImplementedError, match="refit .*to_botorch"):
        model.to_botorch().condition_on_observations(torch.zeros(2, 2, dtype=torch.float64),
                                                     torch.zeros(2, 1, dtype=torch.float64))


def test_tt_kalman_conditioning_goes_through_the_adapter():
    X_old, y_old = _data(30, 0)
    X_new, y_new = _data(6, 1)
    X_new = 0.9 * X_new
    fixed = dict(lengthscale=[0.8, 0.8], outputscale=1.0, noise_variance=0.01, num_basis=5, c=2.0)
    model = tnbayes.TTKalmanGP(tol=0.0, max_rank=None, **fixed).fit(X_old, y_old)
    conditioned = model.to_botorch().condition_on_observations(torch.as_tensor(X_new),
                                                               torch.as_tensor(y_new).unsqueeze(-1))
    X_test = torch.as_tensor(_data(4, 2)[0] * 0.8)
    expected = model.condition_on_observations(X_new, y_new).predict(X_test.numpy())
    torch.testing.assert_close(conditioned.posterior(X_test.unsqueeze(0)).mean.reshape(-1),
                               torch.as_tensor(expected), rtol=1e-10, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tnkf = tnbayes.TNKF(hyper_max_points=30).fit(X_old, y_old)
    with pytest.raises(NotImplementedError, match="refit the TNKF .*TTKalmanGP"):
        tnkf.to_botorch().condition_on_observations(torch.as_tensor(X_new), torch.as_tensor(y_new).unsqueeze(-1))


def test_batched_conditioning_is_refused():
    X, y = _data(30, 0)
    adapter = tnbayes.HilbertGP(structure="product", num_basis=6, c=2.0, max_iter=20).fit(X, y).to_botorch()
    with pytest.raises(NotImplementedError, match="batched"):
        adapter.condition_on_observations(torch.zeros(3, 2, 2, dtype=torch.float64),
                                          torch.zeros(3, 2, 1, dtype=torch.float64))


REGRESSORS = {
    "ExactGP": lambda: tnbayes.ExactGP(num_restarts=0, max_iter=20),
    "QTKM": lambda: tnbayes.QTKM(rank=2, max_sweeps=3, hyper_max_points=30),
    "TKM": lambda: tnbayes.TKM(rank=2, max_sweeps=3, hyper_max_points=30),
    "TNKF": lambda: tnbayes.TNKF(hyper_max_points=30),
    "TTKalmanGP": lambda: tnbayes.TTKalmanGP(hyper_max_points=30, max_num_basis=6),
    "RFFNet": lambda: tnbayes.RFFNet(max_epochs=15, initial_relevance=0.5),
    "FeatureLearningKM": lambda: tnbayes.FeatureLearningKM(rank=2, num_basis=4, max_sweeps=3),
}


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_posterior_of_a_batch_has_botorch_shapes(name):
    X, y = _data(30, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = REGRESSORS[name]().fit(X, y)
    adapter = model.to_botorch()
    candidates = torch.as_tensor(_data(6, 3)[0] * 0.8).reshape(2, 3, 2)
    posterior = adapter.posterior(candidates)
    assert posterior.mean.shape == (2, 3, 1) and posterior.variance.shape == (2, 3, 1)
    assert posterior.mvn.covariance_matrix.shape == (2, 3, 3)
    assert torch.isfinite(posterior.mean).all() and torch.isfinite(posterior.mvn.covariance_matrix).all()
    assert (posterior.variance >= 0).all()
    single = adapter.posterior(candidates[:, :1])  # q = 1 path
    torch.testing.assert_close(single.mean, posterior.mean[:, :1], rtol=1e-6, atol=1e-8)
