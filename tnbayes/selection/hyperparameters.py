"""Kernel hyper-parameters for models that borrow them from an exact GP (CPD, TNKF, TT Kalman).

The estimate is the ML-II of :mod:`tnbayes.selection.marginal_likelihood` on a random subsample (optionally
followed by leave-one-out cross-validation, :mod:`tnbayes.selection.leave_one_out`), returned in
the units of the data it was given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tnbayes._validation import unique_record_indices
from tnbayes.basis import resolve_kernel
from tnbayes.preprocessing import make_input_scaler, make_target_scaler
from tnbayes.selection.marginal_likelihood import MarginalLikelihoodSettings, fit_marginal_likelihood

__all__ = ["KernelHyperparameters", "estimate_kernel_hyperparameters"]


@dataclass
class KernelHyperparameters:
    """ARD kernel hyper-parameters in the units of the data they were estimated on.

    Attributes
    ----------
    lengthscale : torch.Tensor of shape (D,)
    outputscale : float
        σ_f², the kernel variance.
    noise_variance : float
        σ², the observation-noise variance.
    num_points : int
        Size of the subsample the marginal likelihood was maximised on.
    num_duplicates : int
        Exact duplicate (x, y) records dropped before subsampling.
    collapsed : bool
        The fitted GP predicts the subsample no better than its mean, even after the collapse check (see
        :func:`~tnbayes.selection.fit_marginal_likelihood`).
    objective : {"marginal_likelihood", "leave_one_out"}
        What the values maximise (see :class:`~tnbayes.selection.MarginalLikelihoodSettings`): ``"leave_one_out"``
        only when that run took place.
    skipped : str
        Why a leave-one-out run that was asked for did not take place ("" when it did or was not asked for).
    leave_one_out_log_density : float
        Mean leave-one-out log predictive density on the subsample (standardised targets, nats per point).
    marginal_likelihood_optimum_log_density : float
        The same at the ML-II optimum (equal to the above with ``objective="marginal_likelihood"``).
    """

    lengthscale: torch.Tensor
    outputscale: float
    noise_variance: float
    num_points: int
    num_duplicates: int = 0
    collapsed: bool = False
    objective: str = "marginal_likelihood"
    leave_one_out_log_density: float = math.nan
    marginal_likelihood_optimum_log_density: float = math.nan
    skipped: str = ""

    @property
    def penalty(self) -> float:
        """λ = σ²/σ_f², the ridge penalty that makes the ALS objective a negative log posterior."""
        return self.noise_variance / self.outputscale

    def describe(self) -> str:
        """One line for ``verbose`` output: where the values come from."""
        text = f"marginal likelihood on {self.num_points} points"
        if self.objective == "leave_one_out":
            text = (f"marginal likelihood on {self.num_points} points, then the outputscale, noise and mean by "
                    f"their leave-one-out log predictive density ({self.marginal_likelihood_optimum_log_density:.3f} "
                    f"→ {self.leave_one_out_log_density:.3f} nats per point, standardised targets)")
        if self.num_duplicates:
            text += f" ({self.num_duplicates} duplicate records dropped)"
        if self.skipped:
            text += f" ({self.skipped})"
        if self.collapsed:
            text += " (collapsed: the fit predicts no better than the mean)"
        return text


def estimate_kernel_hyperparameters(X: torch.Tensor, y: torch.Tensor, *, kernel: str = "se", nu: float | None = None,
                                    max_points: int = 1000, seed: int = 0, num_restarts: int = 1,
                                    ard: bool = True, prior: str | None = "dimension_scaled",
                                    lengthscale_lower_bound: float | torch.Tensor | None = None,
                                    drop_duplicates: bool = True, objective: str = "marginal_likelihood",
                                    time_limit: float | None = None) -> KernelHyperparameters:
    """Maximise the exact GP marginal likelihood (ARD kernel, GPyTorch) on a random subsample.

    Exact duplicate records (same x *and* same y) are dropped first: to ML-II, a repeated record is a
    noise-free replicate, and a few hundred of them (wine-red has 172 in 1439 training rows) drive σ²
    to its lower bound and the lengthscales to 0 — an interpolating fit. Replicates whose targets
    differ carry information about the noise and are kept.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
    y : torch.Tensor of shape (N,)
    kernel : str
        ``"se"`` or a Matérn kernel (``"matern12"``, ``"matern32"``, ``"matern52"``, ``"matern"`` + ``nu``).
    nu : float, optional
    max_points : int
        Subsample size (the exact GP costs O(n³) per step).
    seed : int
        Seed of the subsample and of the optimiser restarts.
    num_restarts : int
        Extra optimiser runs from random starting values.
    ard : bool
        One lengthscale per input (default) or one shared lengthscale (returned repeated D times).
    prior : {"dimension_scaled", None}
        The hyper-priors of :class:`~tnbayes.selection.MarginalLikelihoodSettings`, or none.
    lengthscale_lower_bound : float or torch.Tensor of shape (D,), optional
        Lower bound of the lengthscales in the units of ``X``.
    drop_duplicates : bool
        Drop exact duplicate (x, y) records before subsampling (default).
    objective : {"marginal_likelihood", "leave_one_out"}
        ML-II, or ML-II followed by a run that maximises the leave-one-out log predictive density (see
        :class:`~tnbayes.selection.MarginalLikelihoodSettings`).
    time_limit : float, optional
        Seconds the fit may take before the leave-one-out run stops (ML-II always finishes); None: no limit.

    Returns
    -------
    KernelHyperparameters
        In the units of ``X`` and ``y``.
    """
    family, smoothness = resolve_kernel(kernel, nu)
    num_duplicates = 0
    if drop_duplicates:
        keep = unique_record_indices(X, y)
        num_duplicates = X.shape[0] - keep.numel()
        X, y = X[keep], y[keep]
    n, num_dims = X.shape
    if n > max_points:
        generator = torch.Generator().manual_seed(int(seed))
        rows = torch.randperm(n, generator=generator)[: int(max_points)].to(X.device)
        X, y = X[rows], y[rows]
    X, y = X.double(), y.double()  # GP-grade hyper-parameters even for float32 models
    x_scaler, y_scaler = make_input_scaler("standard").fit(X), make_target_scaler(True).fit(y)
    x_scale, y_scale = x_scaler.scale_.reshape(-1), y_scaler.scale_
    bound = None
    if lengthscale_lower_bound is not None:
        bound = (torch.as_tensor(lengthscale_lower_bound, dtype=torch.float64, device=X.device).reshape(-1)
                 .expand(num_dims) / x_scale).reshape(1, -1)
        bound = bound if ard else bound.max().reshape(1, 1)
    gp_kernel = family
    settings = MarginalLikelihoodSettings(kernel=gp_kernel, nu=smoothness if smoothness is not None else 2.5,
                                          ard=ard, prior=prior, num_restarts=num_restarts, seed=seed,
                                          lengthscale_lower_bound=bound, objective=objective, time_limit=time_limit)
    fit = fit_marginal_likelihood(x_scaler.transform(X), y_scaler.transform(y), settings)
    with torch.no_grad():
        kernel_module = fit.model.covar_module
        lengthscale = kernel_module.base_kernel.lengthscale.detach().reshape(-1).cpu().expand(num_dims) * x_scale.cpu()
        outputscale = float(kernel_module.outputscale) * float(y_scale) ** 2
        noise = float(fit.model.likelihood.noise) * float(y_scale) ** 2
    return KernelHyperparameters(lengthscale=lengthscale.to(torch.float64), outputscale=outputscale,
                                 noise_variance=noise, num_points=int(X.shape[0]),
                                 num_duplicates=int(num_duplicates), collapsed=fit.collapsed,
                                 objective="leave_one_out" if fit.leave_one_out_run else "marginal_likelihood",
                                 skipped=("" if fit.leave_one_out_run or objective != "leave_one_out" else
                                          "no leave-one-out run: ML-II spent the time limit"),
                                 leave_one_out_log_density=fit.leave_one_out_log_density,
                                 marginal_likelihood_optimum_log_density=fit.marginal_likelihood_optimum_log_density)
