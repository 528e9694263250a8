"""RFFNet: closed-form gradients, the block proximal Adam step, early stopping, the Bayesian last layer."""

import copy
import math

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.models.rffnet import (
    RFFNetModule,
    default_num_features,
    loss_and_output_gradient,
    train_block_proximal_adam,
)


def _module(p=5, s=40, outputs=1, seed=0, relevance=0.3):
    generator = torch.Generator().manual_seed(seed)
    module = RFFNetModule(p, s, outputs, initial_relevance=relevance, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        module.relevances.add_(0.2 * torch.randn(p, generator=generator, dtype=torch.float64))
    return module


def _regression_data(n=400, p=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    return X, y


def test_default_number_of_features_is_the_papers():
    assert default_num_features(50_000) == int(math.sqrt(50_000) * math.log(50_000)) == 2419
    assert default_num_features(10) == 16  # the floor for tiny n


@pytest.mark.parametrize("loss", ["squared_error", "cross_entropy"])
def test_output_gradient_equals_autograd(loss):
    generator = torch.Generator().manual_seed(1)
    output = torch.randn(7, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    if loss == "squared_error":
        target = torch.randn(7, 3, dtype=torch.float64, generator=generator)
        reference = torch.nn.functional.mse_loss(output, target)
    else:
        target = torch.randint(0, 3, (7,), generator=generator)
        reference = torch.nn.functional.cross_entropy(output, target)
    value, gradient = loss_and_output_gradient(output.detach(), target, loss)
    reference.backward()
    assert float(value) == pytest.approx(float(reference.detach()), rel=1e-12)
    torch.testing.assert_close(gradient, output.grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("schedule", ["batch", "epoch"])
def test_training_step_is_algorithm_1_with_autograd(schedule):
    """One epoch of the closed-form trainer = Adam on β, prox β/(1 + 2μ·lr), Adam on λ at the new β (autograd)."""
    X = torch.randn(24, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    y = torch.randn(24, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    lr, mu = 1e-2, 0.05
    ours = _module()
    reference = copy.deepcopy(ours)
    train_block_proximal_adam(ours, X, y, "squared_error", learning_rate=lr, penalty=mu, batch_size=8,
                              max_epochs=1, schedule=schedule, generator=torch.Generator().manual_seed(4))
    order = torch.randperm(24, generator=torch.Generator().manual_seed(4))
    batches = list(order.split(8))
    weight_opt = torch.optim.Adam([reference.output.weight], lr=lr)
    relevance_opt = torch.optim.Adam([reference.relevances], lr=lr)

    def weight_step(rows):
        weight_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(X[rows]), y[rows]).backward()
        weight_opt.step()
        with torch.no_grad():
            reference.output.weight /= 1 + 2 * mu * lr

    def relevance_step(rows):
        relevance_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(X[rows]), y[rows]).backward()
        relevance_opt.step()

    if schedule == "batch":
        for rows in batches:
            weight_step(rows)
            relevance_step(rows)
    else:
        for rows in batches:
            weight_step(rows)
        for rows in batches:
            relevance_step(rows)
    torch.testing.assert_close(ours.output.weight, reference.output.weight, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ours.relevances, reference.relevances, rtol=1e-10, atol=1e-12)


def test_early_stopping_restores_a_copy_of_the_best_state():
    X, y = _regression_data(300)
    Xt, yt = torch.tensor(X), torch.tensor(y).unsqueeze(-1)
    module = _module(relevance=0.0)
    # a large step size makes the validation loss noisy, so the best epoch is not the last
    log = train_block_proximal_adam(module, Xt[:250], yt[:250], learning_rate=0.2, max_epochs=25, patience=25,
                                    X_val=Xt[250:], y_val=yt[250:], generator=torch.Generator().manual_seed(0))
    assert log.epochs == 25 and log.best_epoch < 24
    with torch.no_grad():
        restored = float(torch.nn.functional.mse_loss(module(Xt[250:]), yt[250:]))
    assert restored == pytest.approx(min(log.validation_losses), rel=1e-12)
    assert restored < log.validation_losses[-1]


def test_posterior_is_the_last_layers_gaussian():
    X, y = _regression_data(200)
    model = tnbayes.RFFNet(num_features=50, max_epochs=5).fit(X, y)
    Xs = model.x_scaler_.transform(torch.tensor(X[:9]))
    z = model._features(Xs)
    covariance = (model.weight_eigenvectors_ @ torch.diag(model.weight_covariance_eigenvalues_)
                  @ model.weight_eigenvectors_.T)
    post = model.posterior(X[:9])
    scale = float(model.y_scaler_.scale_)
    torch.testing.assert_close(post.mean, model.y_scaler_.inverse_transform(z @ model.weight_mean_))
    expected = (torch.einsum("ns,st,nt->n", z, covariance, z) + model.noise_variance_) * scale**2
    torch.testing.assert_close(post.variance, expected, rtol=1e-10, atol=1e-14)
    full = model.posterior(X[:9], full_covariance=True)
    torch.testing.assert_close(full.covariance.diagonal(), post.variance, rtol=1e-10, atol=1e-14)


def test_fit_recovers_relevant_inputs_and_is_calibrated():
    X, y = _regression_data(3000, p=8)
    Xte, yte = _regression_data(1000, p=8, seed=1)
    model = tnbayes.RFFNet().fit(X, y)
    assert set(np.argsort(-model.scaled_relevances_)[:2]) == {0, 1}
    assert model.scaled_relevances_.max() == 1.0 and model.scaled_relevances_.min() == 0.0
    report = tnbayes.metrics.evaluate(model.posterior(Xte), yte)
    assert report["rmse"] < 0.2  # noise std 0.1, var(y) ≈ 0.8
    assert 0.9 <= report["coverage_95"] <= 0.99
    network = np.sqrt(np.mean((model.predict_network(Xte) - yte) ** 2))
    assert network < 0.3
    assert model.best_epoch_ < model.epochs_ and len(model.validation_losses_) == model.epochs_


def test_classifier_on_rings_finds_the_two_relevant_inputs():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 4))
    radius = np.hypot(X[:, 0], X[:, 1])
    labels = np.digitize(radius, [0.8, 1.5])  # three classes by radius in the first two inputs
    model = tnbayes.RFFNetClassifier(num_features=200).fit(X[:1500], labels[:1500])
    assert model.score(X[1500:], labels[1500:]) > 0.9
    assert set(np.argsort(-model.scaled_relevances_)[:2]) == {0, 1}
    proba = model.predict_proba(X[1500:])
    assert proba.shape == (500, 3)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="predict_proba"):
        model.posterior(X[:3])


def test_classifier_save_load(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 3))
    labels = np.array(["a", "b", "c"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 1).astype(int)]
    model = tnbayes.RFFNetClassifier(max_epochs=5).fit(X, labels)
    model.save(tmp_path / "c.tnb")
    loaded = tnbayes.load_model(tmp_path / "c.tnb")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    with torch.no_grad():
        Xs = model.x_scaler_.transform(torch.tensor(X)).to(torch.float32)
        torch.testing.assert_close(loaded.module_(Xs), model.module_(Xs))


@pytest.mark.parametrize("kwargs, match", [
    ({"learning_rate": 0}, "learning_rate"), ({"penalty": -1.0}, "penalty"), ({"batch_size": 0}, "batch_size"),
    ({"schedule": "sweep"}, "schedule"), ({"validation_fraction": 1.0}, "validation_fraction"),
    ({"num_features": 2.5}, "num_features"), ({"last_layer_mean": "map"}, "last_layer_mean"),
    ({"training_dtype": "float16"}, "training_dtype"),
])
def test_bad_parameters_raise(kwargs, match):
    X, y = _regression_data(50)
    with pytest.raises(ValueError, match=match):
        tnbayes.RFFNet(**kwargs).fit(X, y)


def test_too_many_features_for_memory():
    X, y = _regression_data(50)
    with pytest.raises(MemoryError, match="num_features"):
        tnbayes.RFFNet(num_features=10**7).fit(X, y)
