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

import numpy as np
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
    weight_optimizer = _Adam(weight, learning_rate)
    relevance_optimizer = _Adam(relevances, learning_rate)
    shrink = 1.0 + 2.0 * penalty * learning_rate
    squared = loss == "squared_error"
    log = TrainingLog()

    def angles(x: torch.Tensor) -> torch.Tensor:
        return (x * relevances) @ frequencies + phases  # (B, s)

    def weight_step(z: torch.Tensor, target: torch.Tensor) -> None:
        output = z @ weight.T
        if squared:
            gradient = (output - target).mul_(2.0 / output.numel())
        else:
            gradient = loss_and_output_gradient(output, target, loss)[1]
        weight_optimizer.step(gradient.T @ z)
        weight.div_(shrink)

    def relevance_step(u: torch.Tensor, z: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Adam step on λ; returns the batch's summed loss (a tensor: no conversion per step)."""
        output = z @ weight.T
        if squared:
            residual = output - target
            value = residual.square().sum() / output.shape[1]
            gradient = residual.mul_(2.0 / output.numel())
        else:
            value, gradient = loss_and_output_gradient(output, target, loss)
            value = value * output.shape[0]
        d_angles = (gradient @ weight).mul_(_sin(u).mul_(-scale))  # ∂L/∂u, (B, s)
        relevance_optimizer.step((x * (d_angles @ frequencies.T)).sum(0))
        return value

    n = X.shape[0]
    batch_size = int(batch_size)
    # the weight pass of schedule="epoch" sees a fixed λ: its features are computed for this many rows at once
    block = max(batch_size, (_FEATURE_BLOCK_ELEMENTS // max(1, module.num_features)) // batch_size * batch_size)
    best_loss, best_state, since_best = math.inf, None, 0
    with _single_cpu_thread(X.device), torch.no_grad():
        for epoch in range(int(max_epochs)):
            order = torch.randperm(n, generator=generator).to(X.device)
            X_epoch, y_epoch = X[order], y[order]  # one gather; the mini-batches are then views
            batches = [(X_epoch[i:i + batch_size], y_epoch[i:i + batch_size]) for i in range(0, n, batch_size)]
            total = torch.zeros((), dtype=X.dtype, device=X.device)
            if schedule == "batch":
                for x, target in batches:
                    u = angles(x)
                    z = scale * _cos(u)
                    weight_step(z, target)
                    total += relevance_step(u, z, x, target)
            else:
                for first in range(0, n, block):
                    z_block = scale * _cos(angles(X_epoch[first:first + block]))
                    for i in range(0, z_block.shape[0], batch_size):
                        weight_step(z_block[i:i + batch_size], y_epoch[first + i:first + i + batch_size])
                for x, target in batches:
                    u = angles(x)
                    total += relevance_step(u, scale * _cos(u), x, target)
            log.training_losses.append(float(total) / n)
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


def _cos(angles: torch.Tensor) -> torch.Tensor:
    """cos of float32 CPU angles by numpy's SIMD kernels (2.3× torch's on this machine, to 1 ulp), else torch's."""
    if angles.device.type == "cpu" and angles.dtype == torch.float32:
        return torch.from_numpy(np.cos(angles.numpy()))
    return torch.cos(angles)


def _sin(angles: torch.Tensor) -> torch.Tensor:
    """sin, as :func:`_cos`."""
    if angles.device.type == "cpu" and angles.dtype == torch.float32:
        return torch.from_numpy(np.sin(angles.numpy()))
    return torch.sin(angles)


#: features (rows × s) computed at once in the weight pass of ``schedule="epoch"`` (8 MiB in float64)
_FEATURE_BLOCK_ELEMENTS = 2**20


class _Adam:
    """Adam on one tensor with torch's default β₁ = 0.9, β₂ = 0.999, ε = 1e-8: the arithmetic of
    ``torch.optim.Adam`` (its single-tensor path, op for op) without its per-call bookkeeping, which costs more
    than the step itself on RFFNet's small tensors (thousands of steps per epoch)."""

    def __init__(self, parameter: torch.Tensor, learning_rate: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.parameter, self.learning_rate, self.eps = parameter, float(learning_rate), float(eps)
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.exp_avg = torch.zeros_like(parameter)
        self.exp_avg_sq = torch.zeros_like(parameter)
        self.steps = 0

    def step(self, gradient: torch.Tensor) -> None:
        """One Adam step of the parameter (in place) with ``gradient`` (its shape)."""
        self.steps += 1
        self.exp_avg.lerp_(gradient, 1 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(gradient, gradient, value=1 - self.beta2)
        step_size = self.learning_rate / (1 - self.beta1 ** self.steps)
        denominator = (self.exp_avg_sq.sqrt() / (1 - self.beta2 ** self.steps) ** 0.5).add_(self.eps)
        self.parameter.addcdiv_(self.exp_avg, denominator, value=-step_size)


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
