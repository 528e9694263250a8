"""Leave-one-out predictions of an exact GP in closed form, and the hyper-parameter objective built on them.

For a GP with kernel matrix plus noise ``K`` and prior mean ``m``, the prediction of target ``i`` from the other
N − 1 targets is Gaussian with (Rasmussen & Williams 2006, eqs. 5.10–5.12; Sundararajan & Keerthi 2001)

    μ_{−i} = y_i − [K⁻¹(y − m)]_i / [K⁻¹]_ii,        σ²_{−i} = 1 / [K⁻¹]_ii,

so one O(N³) inverse gives all N of them. Their mean log density is a held-out log predictive density without
held-out rows. Maximising it over the hyper-parameters (leave-one-out cross-validation, R&W §5.4.2) judges them
by how well they predict points they were not fitted to, which is more robust than the marginal likelihood when
the kernel is misspecified (Bachoc 2013): ML-II can then shrink the noise until the intervals are too narrow.

:func:`~tnbayes.selection.fit_marginal_likelihood` with ``objective="leave_one_out"`` uses it for the scales
only: the lengthscales stay at the ML-II optimum, and the outputscale, the noise variance and the constant mean
maximise the leave-one-out density. Three parameters keep the criterion's own variance small; over every ARD
lengthscale as well, the leave-one-out density of a few hundred points has optima that predict new points worse
than ML-II's. The objective is the negative mean leave-one-out log density minus the log hyper-prior density
divided by N (the prior enters as in GPyTorch's ``ExactMarginalLogLikelihood``).
"""

from __future__ import annotations

import math

import gpytorch
import torch
from linear_operator.utils.errors import NotPSDError

__all__ = ["leave_one_out_loss", "leave_one_out_predictions", "leave_one_out_r2", "leave_one_out_scores"]


def leave_one_out_predictions(model: gpytorch.models.ExactGP) -> tuple[torch.Tensor, torch.Tensor]:
    """Means and variances of the N leave-one-out predictive distributions of the training targets.

    Differentiable in the hyper-parameters (call under ``torch.no_grad()`` when no gradient is wanted).

    Parameters
    ----------
    model : gpytorch.models.ExactGP
        A model built by :func:`~tnbayes.selection.build_exact_gp` (``covar_module``, ``mean_module`` with a
        ``constant``, a Gaussian likelihood).

    Returns
    -------
    mean : torch.Tensor of shape (N,)
        μ_{−i}, the prediction of target i from the others.
    variance : torch.Tensor of shape (N,)
        σ²_{−i}, its variance (noise included: it predicts an observation).

    Raises
    ------
    linear_operator.utils.errors.NotPSDError
        If the kernel matrix plus noise is not numerically positive definite.
    """
    X, y = model.train_inputs[0], model.train_targets
    K = model.covar_module(X).to_dense()
    K = K + model.likelihood.noise.reshape(()) * torch.eye(K.shape[0], dtype=K.dtype, device=K.device)
    factor, info = torch.linalg.cholesky_ex(K)
    if int(info) != 0:
        raise NotPSDError("the kernel matrix plus noise is not positive definite")
    inverse = torch.cholesky_inverse(factor)
    precision = inverse.diagonal()
    residual = (inverse @ (y - model.mean_module.constant)) / precision
    return y - residual, 1.0 / precision


def _mean_log_density(y: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    return (-0.5 * torch.log(2 * math.pi * variance) - 0.5 * (y - mean) ** 2 / variance).mean()


def leave_one_out_scores(model: gpytorch.models.ExactGP) -> tuple[float, float]:
    """Leave-one-out R² and mean log predictive density of an exact GP on its training targets (one inverse).

    Parameters
    ----------
    model : gpytorch.models.ExactGP
        A model built by :func:`~tnbayes.selection.build_exact_gp`.

    Returns
    -------
    r2 : float
        ``1 − Σ (y_i − μ_{−i})² / Σ (y_i − ȳ)²``: 1 for perfect leave-one-out predictions, about 0 for predicting
        the mean, negative for worse.
    log_density : float
        Mean over the targets of log N(y_i | μ_{−i}, σ²_{−i}) (nats per point; larger is better).
    Both are NaN when the kernel matrix is singular.
    """
    y = model.train_targets
    try:
        with torch.no_grad():
            mean, variance = leave_one_out_predictions(model)
    except NotPSDError:
        return math.nan, math.nan
    spread = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - mean) ** 2).sum()) / spread if spread > 0 else 0.0
    return r2, float(_mean_log_density(y, mean, variance))


def leave_one_out_r2(model: gpytorch.models.ExactGP) -> float:
    """Leave-one-out R² of :func:`leave_one_out_scores` alone.

    Parameters
    ----------
    model : gpytorch.models.ExactGP

    Returns
    -------
    float
    """
    return leave_one_out_scores(model)[0]


def leave_one_out_loss(model: gpytorch.models.ExactGP) -> torch.Tensor:
    """The objective minimised by leave-one-out hyper-parameter fits: −mean leave-one-out log density − log
    hyper-prior density / N.

    Parameters
    ----------
    model : gpytorch.models.ExactGP

    Returns
    -------
    torch.Tensor of shape ()
        Differentiable in the model's parameters.
    """
    loss = -_mean_log_density(model.train_targets, *leave_one_out_predictions(model))
    for _, module, prior, closure, _ in model.named_priors():
        loss = loss - prior.log_prob(closure(module)).sum() / model.train_targets.shape[0]
    return loss
