"""``model.to_botorch()``: a BoTorch model with joint (b, q, d) posteriors and gradients in X."""

import warnings

import numpy as np
import pytest
import torch

import tnbayes

botorch = pytest.importorskip("botorch")
from botorch.acquisition import LogExpectedImprovement, qLogNoisyExpectedImprovement  # noqa: E402
from botorch.models.model import Model  # noqa: E402
from botorch.optim import optimize_acqf  # noqa: E402
from botorch.posteriors import GPyTorchPosterior  # noqa: E402

FACTORIES = {
    "HilbertGP": lambda: tnbayes.HilbertGP(max_iter=20, num_basis=6),
    "CPDKernelMachine": lambda: tnbayes.CPDKernelMachine(rank=2, num_basis=6, max_sweeps=3, hyper_max_points=40),
    "ExactGP": lambda: tnbayes.ExactGP(max_iter=20),  # GPyTorch's posterior; was computed under no_grad
    "TTKalmanGP": lambda: tnbayes.TTKalmanGP(num_basis=6, max_rank=4),
}
BOUNDS = torch.tensor([[0.1, 0.1], [0.9, 0.9]], dtype=torch.float64)


def _data(n=40):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(n, 2))
    return X, np.sin(6 * X[:, 0]) + X[:, 1] ** 2 + 0.01 * rng.standard_normal(n)


@pytest.fixture(scope="module", params=sorted(FACTORIES))
def fitted(request):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return FACTORIES[request.param]().fit(X, y), X, y


def test_posterior_is_joint_over_q_and_matches_the_model(fitted):
    model, X, _ = fitted
    surrogate = model.to_botorch()
    assert isinstance(surrogate, Model) and surrogate.num_outputs == 1
    Xq = torch.rand(3, 4, 2, dtype=torch.float64) * 0.8 + 0.1
    post = surrogate.posterior(Xq)
    assert isinstance(post, GPyTorchPosterior)
    assert post.mean.shape == (3, 4, 1) and post.mvn.covariance_matrix.shape == (3, 4, 4)
    own = model.posterior(Xq[1].numpy(), observation_noise=False, full_covariance=True)
    torch.testing.assert_close(post.mean[1, :, 0], own.mean)
    torch.testing.assert_close(post.mvn.covariance_matrix[1], own.covariance)
    noisy = surrogate.posterior(Xq, observation_noise=True)
    torch.testing.assert_close(noisy.variance - post.variance,
                               torch.full_like(post.variance, model.noise_std**2))
    single = surrogate.posterior(Xq[:, :1])  # q = 1 takes the marginal path
    torch.testing.assert_close(single.variance, post.variance[:, :1])


def _assert_gradient_matches_finite_differences(model) -> None:
    surrogate = model.to_botorch()
    Xq = (torch.rand(2, 3, 2, dtype=torch.float64) * 0.8 + 0.1).requires_grad_(True)

    def value(Z):
        post = surrogate.posterior(Z)
        return post.mean.sum() + post.mvn.covariance_matrix.sum()

    value(Xq).backward()
    numeric = torch.zeros_like(Xq)
    eps = 1e-6
    with torch.no_grad():
        for index in np.ndindex(*Xq.shape):
            step = torch.zeros_like(Xq)
            step[index] = eps
            numeric[index] = (value(Xq + step) - value(Xq - step)) / (2 * eps)
    torch.testing.assert_close(Xq.grad, numeric, rtol=1e-5, atol=1e-6)


def test_gradient_in_x_matches_finite_differences(fitted):
    _assert_gradient_matches_finite_differences(fitted[0])


#: the other regressors, whose posteriors the tutorial on Bayesian optimisation also calls differentiable in X
GRADIENT_ONLY = {
    "QTKM": lambda: tnbayes.QTKM(rank=2, max_sweeps=3, hyper_max_points=40),
    "TKM": lambda: tnbayes.TKM(rank=2, max_sweeps=3, hyper_max_points=40),
    "FLModel": lambda: tnbayes.FLModel(rank=2, max_sweeps=3),
    "RFFNet": lambda: tnbayes.RFFNet(max_epochs=20),
    "SVGP": lambda: tnbayes.SVGP(max_iter=20),
}


@pytest.mark.parametrize("name", sorted(GRADIENT_ONLY))
def test_every_other_regressor_but_tnkf_is_differentiable_in_x(name):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GRADIENT_ONLY[name]().fit(X, y)
    _assert_gradient_matches_finite_differences(model)


def test_log_ei_with_optimize_acqf_returns_candidates_in_the_box(fitted):
    model, _, y = fitted
    acquisition = LogExpectedImprovement(model.to_botorch(), best_f=float(y.max()))
    candidate, value = optimize_acqf(acquisition, bounds=BOUNDS, q=1, num_restarts=2, raw_samples=32,
                                     options={"maxiter": 30})
    assert candidate.shape == (1, 2) and torch.isfinite(value)
    assert bool(((candidate >= BOUNDS[0]) & (candidate <= BOUNDS[1])).all())


def test_joint_samples_where_the_posterior_covariance_is_singular(fitted):
    """A joint latent posterior over more points than the model has features, or over a repeated point, is singular
    (rank at most the number of features; ExactGP's up to rounding): qNEI draws from such joints over its baseline and
    candidates. The adapter's covariance is lazy, so GPyTorch factorises it with jitter instead of failing."""
    model, X, _ = fitted
    rng = np.random.default_rng(1)
    Xq = torch.tensor(np.vstack([X[:10], X[:2], rng.uniform(0.1, 0.9, size=(60, 2))]))
    covariance = model.posterior(Xq.numpy(), observation_noise=False, full_covariance=True).covariance
    with pytest.raises(torch.linalg.LinAlgError):  # the dense factorisation the adapter used to do eagerly
        torch.linalg.cholesky(covariance)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # linear_operator's NumericalWarning about the jitter it added
        samples = model.to_botorch().posterior(Xq).rsample(torch.Size([2000]))
    assert samples.shape == (2000, 72, 1) and bool(torch.isfinite(samples).all())
    # X[0] repeated: the same draw, up to the jitter (at most 1e-6 after linear_operator's three tries in float64,
    # so the two draws differ by a normal of standard deviation at most √(2·1e-6) ≈ 1.4e-3)
    torch.testing.assert_close(samples[:, 10], samples[:, 0], rtol=0, atol=1e-2)
    sd = covariance.diagonal().clamp_min(0).sqrt()
    torch.testing.assert_close(samples[..., 0].std(0), sd, rtol=0.1, atol=1e-3)


def test_q_log_noisy_ei_batch_of_two(fitted):
    model, X, _ = fitted
    acquisition = qLogNoisyExpectedImprovement(model.to_botorch(), X_baseline=torch.tensor(X[:10]),
                                               cache_root=False, prune_baseline=False)
    candidates, _ = optimize_acqf(acquisition, bounds=BOUNDS, q=2, num_restarts=2, raw_samples=16,
                                  options={"maxiter": 20})
    assert candidates.shape == (2, 2)
    assert bool(((candidates >= BOUNDS[0]) & (candidates <= BOUNDS[1])).all())


def test_tnkf_asks_for_a_gradient_free_optimizer_and_works_with_one():
    """TNKF predicts outside autograd: a gradient-based acquisition optimisation gets an UnsupportedError that names
    the way out, and ``options={"with_grad": False}`` (finite differences) then finds a candidate in the box."""
    from botorch.exceptions.errors import UnsupportedError

    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = tnbayes.TNKF(max_rows=40).fit(X, y)
    acquisition = LogExpectedImprovement(model.to_botorch(), best_f=float(y.max()))
    Xq = (torch.rand(2, 1, 2, dtype=torch.float64) * 0.8 + 0.1).requires_grad_(True)
    with pytest.raises(UnsupportedError, match="with_grad"):
        acquisition(Xq)
    with torch.no_grad():
        assert torch.isfinite(acquisition(Xq)).all()  # without gradients it evaluates
    candidate, value = optimize_acqf(acquisition, bounds=BOUNDS, q=1, num_restarts=2, raw_samples=32,
                                     options={"maxiter": 10, "with_grad": False})
    assert candidate.shape == (1, 2) and torch.isfinite(value)
    assert bool(((candidate >= BOUNDS[0]) & (candidate <= BOUNDS[1])).all())


def test_classifier_has_no_botorch_model():
    X, y = _data(30)
    model = tnbayes.CPDKernelClassifier(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y > np.median(y))
    with pytest.raises(TypeError, match="regressor"):
        model.to_botorch()
