"""One optimisation run of :class:`~tnbayes.SVGP`: a variational GP, its likelihood, ELBO and optimisers, with the
bookkeeping of its plateau and of its best state on the held-out rows.

SVGP may start two runs from different hyper-parameters and keep the one whose held-out rows are predicted best
(see the SVGP docstring), and restores a run's best state at the end, so a run carries its own step count, plateau
counter and best held-out log predictive density.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gpytorch
import torch
from linear_operator.utils.errors import NotPSDError

from tnbayes.inference.budget import format_seconds
from tnbayes.metrics import nlpd
from tnbayes.models._svgp_data import place_inducing
from tnbayes.selection.collapsed_bound import fit_collapsed_bound
from tnbayes.selection.marginal_likelihood import MarginalLikelihoodSettings, build_kernel_and_likelihood

#: a lengthscale below its floor (:func:`lengthscale_floor`) is raised to it, which changes the kernel between the
#: distinct training inputs by at most this share of the outputscale
FLOOR_CORRELATION = 1e-4

#: log 2 = softplus(0): GPyTorch's initial lengthscale, outputscale and noise (standardised units), the values a
#: hand-written GPyTorch SVGP starts from
STANDARD_START_VALUE = math.log(2.0)


def standard_start(num_lengthscales: int, mean: float) -> tuple[dict[str, Any], str]:
    """GPyTorch's default start of (ℓ, σ_f², σ²) on standardised data, with the constant mean at ``mean``.

    Parameters
    ----------
    num_lengthscales : int
        D with ARD, else 1.
    mean : float
        Start of the constant mean (the standardised targets' mean).

    Returns
    -------
    start : dict
        ``lengthscale`` (num_lengthscales,), ``outputscale``, ``noise``, ``mean``, ``saw_every_row`` (False).
    text : str
        A phrase for the fit report.
    """
    start = {"lengthscale": torch.full((num_lengthscales,), STANDARD_START_VALUE, dtype=torch.float64),
             "outputscale": STANDARD_START_VALUE, "noise": STANDARD_START_VALUE, "mean": float(mean),
             "saw_every_row": False}
    return start, (f"GPyTorch's defaults (log 2 = {STANDARD_START_VALUE:.3f} for every lengthscale, the outputscale "
                   "and the noise)")


def correlation(distance: float, family: str, nu: float | None) -> float:
    """The SE (``family="se"``) or Matérn-ν correlation at ``distance`` lengthscales."""
    if family == "se":
        return math.exp(-0.5 * distance ** 2)
    scaled = math.sqrt(2.0 * nu) * distance
    polynomial = {0.5: 1.0, 1.5: 1.0 + scaled, 2.5: 1.0 + scaled + scaled ** 2 / 3.0}[float(nu)]
    return polynomial * math.exp(-scaled)


def lengthscale_floor(distinct: torch.Tensor, family: str, nu: float | None, ard: bool) -> torch.Tensor:
    """Per input, the lengthscale at which the kernel between the two closest distinct values of that input is
    :data:`FLOOR_CORRELATION`: ``gap_d / r`` with ``gap_d`` the smallest positive gap between the input's values and
    ``correlation(r) = FLOOR_CORRELATION``.

    Any pair of training inputs that differ in input d are at least ``gap_d`` apart in it, so their correlation is
    below :data:`FLOOR_CORRELATION` whether ``ℓ_d`` is at the floor or below it: the data cannot tell a lengthscale
    below the floor from the floor (ML-II's optimum can land anywhere there on an input with few values, such as an
    identifier or an age), while the steps can (an inducing input that moves a little off a value loses its
    correlation with the rows there).

    Parameters
    ----------
    distinct : torch.Tensor of shape (N, D)
        Distinct standardised training inputs.
    family : {"se", "matern"}
    nu : float or None
        Matérn smoothness (0.5, 1.5 or 2.5); None for SE.
    ard : bool
        One floor per input, or the smallest positive one for a shared lengthscale.

    Returns
    -------
    torch.Tensor of shape (D,) with ``ard``, else (1,)
        0 for an input with a single value.
    """
    low, high = 0.0, 100.0
    for _ in range(80):  # correlation falls with the distance: bisection for correlation(r) = FLOOR_CORRELATION
        middle = 0.5 * (low + high)
        low, high = (middle, high) if correlation(middle, family, nu) > FLOOR_CORRELATION else (low, middle)
    gaps = []
    for column in distinct.T:
        steps = torch.diff(torch.unique(column))
        gaps.append(float(steps.min()) if steps.numel() else 0.0)
    floor = torch.tensor(gaps, dtype=torch.float64) / high
    varying = floor[floor > 0]  # a shared lengthscale: inputs with a single value add nothing to any distance
    return floor if ard else (varying.min() if varying.numel() else torch.zeros(())).reshape(1)


def raise_to_floor(start: dict[str, Any], distinct: torch.Tensor, family: str, nu: float | None,
                   ard: bool) -> tuple[dict[str, Any], str]:
    """The start with every lengthscale at least its floor (:func:`lengthscale_floor` of the other arguments), and a
    phrase for the fit report ("" when none was below)."""
    lengthscale = start["lengthscale"].to(torch.float64)
    floor = lengthscale_floor(distinct, family, nu, ard).to(lengthscale.device)
    below = torch.nonzero(lengthscale < floor).reshape(-1).tolist()
    if not below:
        return start, ""
    text = (f"lengthscale of input{'s' if len(below) > 1 else ''} {', '.join(str(d) for d in below)} raised from "
            f"{float(lengthscale[below].min()):.3g}–{float(lengthscale[below].max()):.3g} to the floor where the "
            f"kernel between its two closest training values is {FLOOR_CORRELATION:g} (the data cannot tell smaller "
            f"ones apart; moving inducing inputs can)")
    return {**start, "lengthscale": torch.maximum(lengthscale, floor)}, text


def start_modules(prior_inputs: torch.Tensor, start: dict[str, Any],
                  settings: MarginalLikelihoodSettings) -> tuple[gpytorch.kernels.ScaleKernel, Any]:
    """The kernel and Gaussian likelihood of ``settings`` (:func:`~tnbayes.selection.build_kernel_and_likelihood`,
    hyper-priors scaled to ``prior_inputs`` of shape (N, D), whose dtype and device they take) at the values of
    ``start`` (a dict as :func:`standard_start` returns)."""
    kernel, likelihood = build_kernel_and_likelihood(prior_inputs, settings)
    with torch.no_grad():
        # inside the constraint: a pilot on other rows standardises differently, so its floor can land just below
        bound = kernel.base_kernel.raw_lengthscale_constraint.lower_bound.to(prior_inputs)
        kernel.base_kernel.lengthscale = torch.maximum(start["lengthscale"].to(prior_inputs).reshape(
            kernel.base_kernel.lengthscale.shape), bound * (1 + 1e-3))
        kernel.outputscale = torch.as_tensor(start["outputscale"]).to(prior_inputs)
        likelihood.noise = torch.as_tensor(start["noise"]).to(prior_inputs)
    return kernel, likelihood


def stop_sentence(model: Any, steps: int, max_steps: int, num_fit_rows: int, interval: int) -> str:
    """The report line of an SVGP ``model`` on why its steps stopped (its ``stop_reason_``, ``tol``, ``patience``,
    ``time_budget``), with its training ELBO per row (``history_``) averaged over the last ``interval`` steps and its
    last held-out ELBO (``validation_elbo_``)."""
    held_out, patience = model.validation_elbo_, int(model.patience)
    why = {"plateau": f"the {'held-out' if held_out else 'training'} ELBO improved by less than "
                      f"tol={float(model.tol):g} per row in {patience} evaluations ({patience * interval} steps)",
           "max_iter": f"max_iter={max_steps} steps were taken",
           "time_budget": f"time_budget={float(model.time_budget or 0):g} s was spent",
           "numerical": "the inducing inputs' kernel matrix stopped being positive definite"}[model.stop_reason_]
    last = model.history_[-interval:]
    return (f"stopped after {steps} steps ({steps * model.batch_size_ / max(num_fit_rows, 1):.3g} epochs): {why}; "
            f"training ELBO {sum(last) / max(len(last), 1):.4f} per row over the last {len(last)} steps"
            + (f", held-out ELBO {held_out[-1]:.4f}." if held_out else "."))


def latent_moments(model: gpytorch.models.ApproximateGP, X: torch.Tensor, full_covariance: bool,
                   chunk_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The variational GP's latent mean (n,) and variance (n,) at ``X`` (n, D), ``chunk_rows`` rows at a time, or its
    mean and covariance (n, n) with ``full_covariance``; differentiable in ``X`` when it requires gradients
    (BoTorch's acquisition optimisers)."""
    model.eval()
    with torch.set_grad_enabled(torch.is_grad_enabled() and X.requires_grad):
        if full_covariance:
            f = model(X)
            return f.mean, f.covariance_matrix
        means, variances = [], []
        for chunk in torch.split(X, chunk_rows):
            f = model(chunk)
            means.append(f.mean)
            variances.append(f.variance)
        return torch.cat(means), torch.cat(variances).clamp_min(0.0)


def collapsed_start(X: torch.Tensor, y: torch.Tensor, settings: MarginalLikelihoodSettings, seed: int, *,
                    max_points: int, num_inducing: int, steps: int, learning_rate: float) -> tuple[dict[str, Any], str]:
    """Start of (ℓ, σ_f², σ², c) from the collapsed bound (:func:`~tnbayes.selection.fit_collapsed_bound`) on at
    most ``max_points`` random rows with ``num_inducing`` k-means centres, and a phrase for the fit report.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
        Standardised training inputs.
    y : torch.Tensor of shape (N,)
        Standardised training targets.
    settings : MarginalLikelihoodSettings
    seed : int
    max_points, num_inducing, steps : int
    learning_rate : float

    Returns
    -------
    start : dict
        ``{"lengthscale", "outputscale", "noise", "mean", "saw_every_row": False}``.
    text : str
    """
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randperm(X.shape[0], generator=generator)[:max_points].to(X.device)
    distinct = torch.unique(X[rows], dim=0)
    inducing = distinct if distinct.shape[0] <= num_inducing else place_inducing(
        distinct, num_inducing, "kmeans", seed, generator, "")[0]
    fit = fit_collapsed_bound(X[rows], y[rows], inducing, settings, steps=steps, learning_rate=learning_rate)
    start = {"lengthscale": fit.lengthscale.to(torch.float64), "outputscale": fit.outputscale,
             "noise": max(fit.noise_variance, 2.0 * float(settings.noise_lower_bound)), "mean": fit.mean,
             "saw_every_row": False}
    text = (f"{steps} Adam steps of the collapsed bound (SGPR) on {fit.num_points} rows with {inducing.shape[0]} "
            f"inducing inputs, from GPyTorch's defaults (bound {fit.bound:.4f} per row)")
    return start, text


def held_out_log_density(model: gpytorch.models.ApproximateGP, likelihood: gpytorch.likelihoods.GaussianLikelihood,
                         X: torch.Tensor, y: torch.Tensor) -> float:
    """Mean log predictive density per row, ``mean_i log N(y_i | μ_i, v_i + σ²)`` (the quantity whose negative the
    package reports as NLPD), in eval mode; the modules are put back in train mode.

    Parameters
    ----------
    model, likelihood
        The variational GP and its Gaussian likelihood.
    X : torch.Tensor of shape (n, D)
    y : torch.Tensor of shape (n,)

    Returns
    -------
    float
    """
    model.eval()
    likelihood.eval()
    try:
        with torch.no_grad():
            f = model(X)
            std = torch.sqrt(f.variance.clamp_min(0.0) + likelihood.noise.reshape(()))
            return -nlpd(y.detach().cpu().numpy(), f.mean.cpu().numpy(), std.cpu().numpy())
    finally:
        model.train()
        likelihood.train()


class VariationalGP(gpytorch.models.ApproximateGP):
    """Constant mean, the given ``ScaleKernel``, a whitened ``VariationalStrategy`` over ``inducing_points``.

    Parameters
    ----------
    inducing_points : torch.Tensor of shape (m, D)
    kernel : gpytorch.kernels.ScaleKernel
    natural : bool
        Natural parameters for q (``NaturalVariationalDistribution``, for the NGD optimiser) or a Cholesky factor.
    learn_inducing : bool
    """

    def __init__(self, inducing_points: torch.Tensor, kernel: gpytorch.kernels.ScaleKernel, natural: bool,
                 learn_inducing: bool) -> None:
        num_inducing = inducing_points.shape[0]
        if natural:
            distribution = gpytorch.variational.NaturalVariationalDistribution(num_inducing)
        else:
            distribution = gpytorch.variational.CholeskyVariationalDistribution(num_inducing)
        strategy = gpytorch.variational.VariationalStrategy(self, inducing_points, distribution,
                                                            learn_inducing_locations=learn_inducing)
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = kernel

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


@dataclass
class OptimisationRun:
    """One start of the ELBO optimisation.

    Attributes
    ----------
    label : str
        Which start (e.g. ``"pilot"``).
    model, likelihood
        The variational GP and its likelihood (train mode).
    elbo : gpytorch.mlls.VariationalELBO
    optimisers : list of torch.optim.Optimizer
    steps : int
        Steps this run has taken.
    best_elbo : float
        Best plateau value (held-out or training ELBO per row) so far; ``stale`` counts evaluations since.
    best_log_density : float
        Best held-out log predictive density per row so far, reached after ``best_step`` of this run's steps;
        ``best_state`` holds the model's and likelihood's state then.
    failed : bool
        The kernel matrix of the inducing inputs stopped being positive definite: the run can take no more steps.
    """

    label: str
    model: gpytorch.models.ApproximateGP
    likelihood: gpytorch.likelihoods.GaussianLikelihood
    elbo: gpytorch.mlls.VariationalELBO
    optimisers: list
    steps: int = 0
    best_elbo: float = -math.inf
    stale: int = 0
    best_log_density: float = -math.inf
    best_step: int = 0
    best_state: tuple[dict, dict] | None = field(default=None, repr=False)
    failed: bool = False

    @classmethod
    def start(cls, label: str, model: gpytorch.models.ApproximateGP,
              likelihood: gpytorch.likelihoods.GaussianLikelihood, num_fit_rows: int,
              optimisers: Callable[[Any, Any, int], list]) -> "OptimisationRun":
        """A run in train mode with the ELBO of ``num_fit_rows`` rows and ``optimisers(model, likelihood, n)``."""
        model.train()
        likelihood.train()
        elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=num_fit_rows)
        return cls(label, model, likelihood, elbo, optimisers(model, likelihood, num_fit_rows))

    def step(self, X: torch.Tensor, y: torch.Tensor) -> float:
        """One optimiser step on the minibatch ``(X (B, D), y (B,))``; returns its ELBO per row before the step, or
        NaN without a step (and ``failed`` set) when the kernel matrix of the inducing inputs is not positive
        definite even with GPyTorch's jitter."""
        for optimiser in self.optimisers:
            optimiser.zero_grad()
        try:
            loss = -self.elbo(self.model(X), y)
        except NotPSDError:
            self.failed = True
            return math.nan
        loss.backward()
        for optimiser in self.optimisers:
            optimiser.step()
        self.steps += 1
        return -float(loss.detach())

    def evaluate_held_out(self, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """The held-out ELBO per row and log predictive density per row of ``(X (n, D), y (n,))``; the state is kept
        when the density is the best so far (:meth:`record_log_density`)."""
        try:
            with torch.no_grad():
                value = float(self.elbo(self.model(X), y))
            density = held_out_log_density(self.model, self.likelihood, X, y)
        except NotPSDError:  # as in step
            self.failed = True
            return -math.inf, -math.inf
        self.record_log_density(density)
        return value, density

    def record_log_density(self, value: float) -> None:
        """Keep a copy of the current state when ``value`` (held-out log density per row) is the best so far."""
        if value > self.best_log_density:
            self.best_log_density, self.best_step = value, self.steps
            self.best_state = (copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.likelihood.state_dict()))

    def restore_best(self) -> bool:
        """Load the best state kept (True), or leave the current one when it is the best or none was kept."""
        if self.best_state is None or self.best_step == self.steps:
            return False
        self.model.load_state_dict(self.best_state[0])
        self.likelihood.load_state_dict(self.best_state[1])
        return True


def set_exact_optimum(model: gpytorch.models.ApproximateGP, likelihood: gpytorch.likelihoods.GaussianLikelihood,
                      X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Set q to its optimum in one natural-gradient step of size 1 on all rows (hyper-parameters and inducing
    inputs kept).

    For a Gaussian likelihood and full batches the step of size 1 reaches the optimum over q exactly; when the
    inducing inputs are every distinct training input the ELBO is then tight (Titsias 2009) and q is the exact
    GP's posterior at the model's hyper-parameters.

    Parameters
    ----------
    model : gpytorch.models.ApproximateGP
    likelihood : gpytorch.likelihoods.GaussianLikelihood
    X : torch.Tensor of shape (N, D)
    y : torch.Tensor of shape (N,)

    Returns
    -------
    before, after : float
        The ELBO per row before and after the step.
    """
    elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=X.shape[0])
    step = gpytorch.optim.NGD(model.variational_parameters(), num_data=X.shape[0], lr=1.0)
    model.train()
    likelihood.train()
    step.zero_grad()
    loss = -elbo(model(X), y)
    loss.backward()
    step.step()
    with torch.no_grad():
        return -float(loss.detach()), float(elbo(model(X), y))


def race_winner(runs: list[OptimisationRun]) -> tuple[OptimisationRun, str]:
    """The run whose held-out rows were predicted best (highest best log predictive density), and a sentence for
    the fit report."""
    winner = max(runs, key=lambda r: r.best_log_density)
    text = ("start race on the held-out rows (best log predictive density per row): " + ", ".join(
        f"{r.label} start {r.best_log_density:.4f} after {r.steps} steps" for r in runs)
        + f"; the {winner.label} start goes on.")
    return winner, text


def fewer_inducing(inducing: torch.Tensor, per_step: float, seconds_left: float, steps_wanted: int,
                   min_inducing: int, seed: int, ordered: bool = False) -> tuple[torch.Tensor | None, str]:
    """The first (``ordered``: in order of choice, as greedy conditional variance leaves them) or a random subsample
    of the inducing inputs (m, D) small enough for ``steps_wanted`` steps in ``seconds_left`` (a minibatch step's
    cost grows like m²), or None when the current m fits or is at most ``min_inducing``; with a sentence for the
    fit report ("" with None).

    Parameters
    ----------
    inducing : torch.Tensor of shape (m, D)
    per_step : float
        Measured seconds of one step at m.
    seconds_left : float
    steps_wanted : int
    min_inducing : int
        Never fewer.
    seed : int
        Of the subsample.
    ordered : bool
        Keep the first m' rather than a random m'.

    Returns
    -------
    smaller : torch.Tensor of shape (m', D) with m' < m, or None
    text : str
    """
    m = inducing.shape[0]
    if per_step * steps_wanted <= seconds_left or m <= min_inducing:
        return None, ""
    affordable = max(seconds_left, 0.0) / steps_wanted
    smaller = max(min_inducing, int(m * math.sqrt(max(affordable / per_step, 1e-6))))
    if smaller >= m:
        return None, ""
    rows = (torch.arange(smaller) if ordered else
            torch.randperm(m, generator=torch.Generator().manual_seed(seed))[:smaller]).to(inducing.device)
    return inducing[rows].clone(), (f"the time budget lowers the inducing points from {m} to {smaller}: a step took "
                                    f"{format_seconds(per_step)}, and {steps_wanted} steps must fit in the "
                                    f"{format_seconds(seconds_left)} left")
