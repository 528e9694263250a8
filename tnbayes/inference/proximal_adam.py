"""Block proximal Adam (Otto & Izbicki's Algorithm 1): the training of RFFNet (the *inference* axis).

(β, λ) of an :class:`~tnbayes.basis.random_fourier.RFFNetModule` minimise ``(1/n) Σ ℓ(y_i, g(x_i)) + μ‖β‖²``
(ℓ squared error or cross-entropy, g(x) = βᵀ z(λ∘x)): an Adam step on β followed by the prox of μ‖·‖²
(β ← β / (1 + 2μ·lr)), then an Adam step on λ at the new β. The paper alternates the two blocks per mini-batch,
the authors' code per epoch (a full pass on β, then a full pass on λ); both are available (``schedule``). Training
stops early on a validation split and restores a deep copy of the best state (the authors' code restores the
*last* state: ``state_dict()`` returns live references).
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass, field

import torch

from tnbayes.basis.random_fourier import RFFNetModule

__all__ = ["LOSSES", "SCHEDULES", "TrainingLog", "loss_and_output_gradient", "train_block_proximal_adam"]

#: ``"batch"``: alternate the β and λ steps per mini-batch (the paper); ``"epoch"``: per epoch (the authors' code)
SCHEDULES = ("batch", "epoch")


@dataclass
class TrainingLog:
    """What :func:`train_block_proximal_adam` did.

    Attributes
    ----------
    validation_losses : list of float
        Mean validation loss after every epoch (empty without a validation split).
    training_losses : list of float
        Mean mini-batch loss of every epoch's λ pass (the data term, without μ‖β‖²).
    best_epoch : int
        Epoch (0-based) whose state was restored; the last epoch without a validation split.
    epochs : int
        Epochs run.
    seconds : float
    """

    validation_losses: list[float] = field(default_factory=list)
    training_losses: list[float] = field(default_factory=list)
    best_epoch: int = -1
    epochs: int = 0
    seconds: float = 0.0


LOSSES = ("squared_error", "cross_entropy")


def loss_and_output_gradient(output: torch.Tensor, target: torch.Tensor, loss: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean loss over the batch and its gradient with respect to the network output.

    Parameters
    ----------
    output : torch.Tensor of shape (B, C)
    target : torch.Tensor of shape (B, C) (squared error) or (B,) class indices (cross-entropy)
    loss : {"squared_error", "cross_entropy"}
        ``mean((output − target)²)`` over all B·C entries (torch's ``mse_loss``) or the mean softmax
        cross-entropy (torch's ``cross_entropy``).

    Returns
    -------
    value : torch.Tensor, scalar
    gradient : torch.Tensor of shape (B, C)
    """
    if loss == "squared_error":
        residual = output - target
        return residual.square().mean(), (2.0 / residual.numel()) * residual
    log_probabilities = torch.log_softmax(output, dim=-1)
    value = -log_probabilities.gather(1, target.unsqueeze(1)).mean()
    gradient = log_probabilities.exp()
    gradient[torch.arange(output.shape[0], device=output.device), target] -= 1.0
    return value, gradient / output.shape[0]


def train_block_proximal_adam(module: RFFNetModule, X: torch.Tensor, y: torch.Tensor, loss: str = "squared_error",
                              *, learning_rate: float = 1e-2, penalty: float = 1e-4, batch_size: int = 32,
                              max_epochs: int = 200, patience: int = 20, schedule: str = "batch",
                              X_val: torch.Tensor | None = None, y_val: torch.Tensor | None = None,
                              generator: torch.Generator | None = None, progress: bool = False) -> TrainingLog:
    """Train RFFNet by block proximal Adam with early stopping (the paper's Algorithm 1).

    Each block step: Adam on β with the gradient of the mean mini-batch loss, then β ← β / (1 + 2μ·lr) (the
    prox of μ‖β‖² with step lr); Adam on λ with the gradient at the new β and the old λ. ``schedule="batch"``
    alternates the two blocks on every mini-batch (the paper), ``"epoch"`` runs a full pass of β steps and
    then a full pass of λ steps over the same shuffled batches (the authors' code). After every epoch the
    validation loss is computed; the best state is deep-copied and restored at the end; training stops after
    ``patience`` epochs without improvement.

    The gradients are computed in closed form (the network has two layers), which lets the β and λ steps of a
    mini-batch share one evaluation of cos and sin; ``tests/inference/test_proximal_adam.py`` checks them
    against autograd.

    Parameters
    ----------
    module : RFFNetModule
        Trained in place.
    X : torch.Tensor of shape (n, p)
    y : torch.Tensor of shape (n, num_outputs) (squared error) or (n,) class indices (cross-entropy)
    loss : {"squared_error", "cross_entropy"}
    learning_rate, penalty, batch_size, max_epochs, patience : see :class:`~tnbayes.RFFNet`
    schedule : {"batch", "epoch"}
    X_val, y_val : torch.Tensor, optional
        Validation split for early stopping (none: run ``max_epochs`` and keep the last state).
    generator : torch.Generator, optional
        Shuffling.
    progress : bool
        Print the losses every 10 epochs.

    Returns
    -------
    TrainingLog
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}; got {schedule!r}.")
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}; got {loss!r}.")
    start = time.perf_counter()
    weight, relevances = module.output.weight, module.relevances
    frequencies, phases = module.frequencies, module.phases
    scale = math.sqrt(2.0 / module.num_features)
    weight_optimizer = torch.optim.Adam([weight], lr=learning_rate)
    relevance_optimizer = torch.optim.Adam([relevances], lr=learning_rate)
    shrink = 1.0 + 2.0 * penalty * learning_rate
    log = TrainingLog()

    def angles(rows: torch.Tensor) -> torch.Tensor:
        return (X[rows] * relevances) @ frequencies + phases  # (B, s)

    def weight_step(z: torch.Tensor, rows: torch.Tensor) -> None:
        _, gradient = loss_and_output_gradient(z @ weight.T, y[rows], loss)
        weight.grad = gradient.T @ z
        weight_optimizer.step()
        weight.div_(shrink)

    def relevance_step(u: torch.Tensor, z: torch.Tensor, rows: torch.Tensor) -> float:
        value, gradient = loss_and_output_gradient(z @ weight.T, y[rows], loss)
        d_angles = (gradient @ weight) * (-scale * torch.sin(u))  # ∂L/∂u, (B, s)
        relevances.grad = (X[rows] * (d_angles @ frequencies.T)).sum(0)
        relevance_optimizer.step()
        return float(value)

    n = X.shape[0]
    best_loss, best_state, since_best = math.inf, None, 0
    with _single_cpu_thread(X.device), torch.no_grad():
        for epoch in range(int(max_epochs)):
            order = torch.randperm(n, generator=generator).to(X.device)
            batches = list(order.split(int(batch_size)))
            total = 0.0
            if schedule == "batch":
                for rows in batches:
                    u = angles(rows)
                    z = scale * torch.cos(u)
                    weight_step(z, rows)
                    total += relevance_step(u, z, rows) * len(rows)
            else:
                for rows in batches:
                    weight_step(scale * torch.cos(angles(rows)), rows)
                for rows in batches:
                    u = angles(rows)
                    total += relevance_step(u, scale * torch.cos(u), rows) * len(rows)
            log.training_losses.append(total / n)
            log.epochs = epoch + 1
            if not math.isfinite(log.training_losses[-1]):
                raise FloatingPointError(
                    f"RFFNet training diverged in epoch {epoch} (loss {log.training_losses[-1]}); lower "
                    f"learning_rate (now {learning_rate:g}).")
            if X_val is None:
                log.best_epoch = epoch
                continue
            validation = float(loss_and_output_gradient(module(X_val), y_val, loss)[0])
            log.validation_losses.append(validation)
            if progress and epoch % 10 == 0:
                print(f"epoch {epoch}: training loss {log.training_losses[-1]:.4g}, validation loss {validation:.4g}")
            if validation < best_loss:
                best_loss, since_best, log.best_epoch = validation, 0, epoch
                best_state = copy.deepcopy(module.state_dict())  # a copy: state_dict() holds live references
            else:
                since_best += 1
                if since_best >= int(patience):
                    break
    if best_state is not None:
        module.load_state_dict(best_state)
    log.seconds = time.perf_counter() - start
    return log


@contextlib.contextmanager
def _single_cpu_thread(device: torch.device):
    """Mini-batch steps are tiny (B × s): on CPU, extra threads only add synchronisation (10× slower on a busy
    machine), so training runs on one thread and the caller's setting is restored afterwards."""
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
