"""tnbayes.inference.proximal_adam: RFFNet's training (closed-form gradients, Algorithm 1, early stopping)."""

import copy

import numpy as np
import pytest
import torch

from tnbayes.basis.random_fourier import RFFNetModule
from tnbayes.inference.proximal_adam import loss_and_output_gradient, train_block_proximal_adam


def _module(p=5, s=40, outputs=1, seed=0, relevance=0.3):
    generator = torch.Generator().manual_seed(seed)
    module = RFFNetModule(p, s, outputs, initial_relevance=relevance, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        module.relevances.add_(0.2 * torch.randn(p, generator=generator, dtype=torch.float64))
    return module


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
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 5))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(300)
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
