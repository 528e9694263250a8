"""SVGP: the stochastic variational GP (Hensman, Fusi & Lawrence 2013) on GPyTorch, the scalable GP baseline.

Past a few thousand rows a GP user reaches for a sparse variational GP rather than an exact one. This module gives
it the package contract (``fit`` / ``posterior`` / ``predict`` / ``save`` / ``load``, ``fit(ChunkedData)``, the
``compare`` name ``"svgp"``) and defaults chosen from the data and a time budget, so the tensor models can be
compared with what such a user would run.

Model (standardised inputs and targets)::

    y = c + f(x) + ε,   f ~ GP(0, σ_f² k_ℓ),   ε ~ N(0, σ²),
    q(u) = N(m, S) over f at m inducing inputs Z (whitened: u = L_Z v, q(v) = N(m̃, S̃)),

fitted by maximising the evidence lower bound ``Σ_i E_q[log p(y_i | f_i)] − KL(q(v) ‖ N(0, I))`` (plus the log
hyper-priors of :mod:`tnbayes.selection.marginal_likelihood`) over q, Z and (ℓ, σ_f², σ², c) with minibatches.

The three axes: the basis is the kernel itself (no finite feature map); the "weights" are the m inducing values
with a dense Gaussian q; inference is variational, by GPyTorch's ``VariationalStrategy``. The kernel, likelihood
and hyper-priors are those of :class:`~tnbayes.ExactGP` (:func:`~tnbayes.selection.build_kernel_and_likelihood`).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import gpytorch
import numpy as np
import torch
from tqdm.auto import tqdm

from tnbayes._validation import check_positive
from tnbayes.data import StreamedRows
from tnbayes.inference.budget import BudgetWarning, check_time_budget, format_seconds
from tnbayes.models._svgp_data import memory_batches, streamed_batches, streamed_validation
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model
from tnbayes.selection.hyperparameters import estimate_kernel_hyperparameters
from tnbayes.selection.marginal_likelihood import (
    MarginalLikelihoodSettings,
    build_kernel_and_likelihood,
    gp_kernel_family,
)

__all__ = ["SVGP"]

#: largest number of inducing points chosen automatically (the issue's hand-written baseline uses 500)
DEFAULT_MAX_INDUCING = 512
#: fewest inducing points the time budget may reduce the automatic choice to
MIN_INDUCING = 32
#: with at most this many training rows and ``batch_size="auto"``, every step sees every row (the ELBO and its
#: gradient are then exact, and the plateau is judged on the training ELBO: no rows are held out)
FULL_BATCH_ROWS = 2048
#: rows per minibatch with ``batch_size="auto"`` above :data:`FULL_BATCH_ROWS`
DEFAULT_BATCH_SIZE = 1024
#: optimiser steps with ``max_iter="auto"`` (the early stop and the time budget usually end the fit sooner)
DEFAULT_MAX_STEPS = 2000
#: natural-gradient step size with minibatches and ``natural_learning_rate="auto"``
MINIBATCH_NATURAL_LEARNING_RATE = 0.1
#: steps between two evaluations of the plateau criterion
EVALUATION_INTERVAL = 50
#: at most this many held-out rows (the held-out ELBO is evaluated on all of them)
MAX_VALIDATION_ROWS = 2000
#: rows of the exact-GP pilot whose ML-II estimate starts the kernel hyper-parameters
PILOT_POINTS = 500
#: with ``num_inducing="auto"``, full batches and at most this many distinct training inputs, every distinct input
#: is an inducing point and the pilot's ML-II sees every row: the fit is then the exact GP's (see Notes)
EXACT_INDUCING_ROWS = FULL_BATCH_ROWS
#: the time budget must leave room for this many steps at the chosen number of inducing points, or it is reduced
MIN_BUDGET_STEPS = 300
#: steps timed (after :data:`WARM_UP_STEPS` untimed ones) before the budget decides the number of inducing points
TIMED_STEPS = 5
WARM_UP_STEPS = 2
#: rows k-means sees when it places the inducing points (a random subsample beyond this)
KMEANS_POINTS = 20_000
#: test rows per prediction chunk
PREDICTION_CHUNK = 4096


class _VariationalGP(gpytorch.models.ApproximateGP):
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


class SVGP(BaseModel):
    """Stochastic variational GP regression (GPyTorch ``ApproximateGP``) with an ARD SE or Matérn kernel.

    With no arguments the fit chooses, from the data and ``time_budget``: up to :data:`EXACT_INDUCING_ROWS` rows
    (full batches), every distinct training input as an inducing point and ML-II of an exact GP on every row, which
    makes the fit the exact GP's (see Notes); above, the kernel hyper-parameters' start (ML-II of an exact GP on a
    subsample of :data:`PILOT_POINTS` rows), :data:`DEFAULT_MAX_INDUCING` inducing points (fewer when the budget
    cannot pay :data:`MIN_BUDGET_STEPS` steps at that size), their places (k-means), minibatches, and when to stop
    (a plateau of the held-out ELBO, or the budget).
    ``fit_report_`` (printed with ``verbose=True``) says what it chose and why.

    Parameters
    ----------
    kernel : {"se", "matern"}, or another SE / Matérn name of :func:`tnbayes.basis.resolve_kernel`
        Base kernel (wrapped in a ``ScaleKernel``); ``"rbf"`` is an alias of ``"se"``.
    nu : {0.5, 1.5, 2.5}
        Matérn smoothness (ignored for SE).
    ard : bool
        One lengthscale per input (True) or a shared one.
    num_inducing : int or "auto"
        Number of inducing points m (at most the number of distinct training inputs). ``"auto"``: see above.
    inducing_init : {"kmeans", "subsample"}
        Initial inducing inputs: k-means centres of (a subsample of) the training inputs, or a random subsample.
    learn_inducing : bool
        Optimise the inducing inputs with the hyper-parameters (True) or keep them where they started.
    batch_size : int or "auto"
        Rows per optimiser step. ``"auto"``: all rows up to :data:`FULL_BATCH_ROWS`, else
        :data:`DEFAULT_BATCH_SIZE`.
    max_iter : int or "auto"
        Largest number of optimiser steps (``"auto"``: :data:`DEFAULT_MAX_STEPS`).
    learning_rate : float
        Adam learning rate of the hyper-parameters and inducing inputs (and of q without natural gradients).
    natural_gradient : bool
        Update q by natural-gradient descent (``gpytorch.optim.NGD``, Salimbeni et al. 2018) and the rest by Adam
        (default), or everything by Adam.
    natural_learning_rate : float or "auto"
        Step size of the natural-gradient updates. 1 is a full step to q's optimum given the rest (exact for a
        Gaussian likelihood with full batches); ``"auto"``: 1 with full batches, 0.1 with minibatches (whose
        gradients are noisy; GPyTorch's recommended value).
    validation_fraction : float
        Share of the training rows held out (at most :data:`MAX_VALIDATION_ROWS`) to judge the plateau when steps
        use minibatches; 0 judges it on the training ELBO of the minibatches instead. Held-out rows are not
        conditioned on.
    patience : int
        Evaluations (every :data:`EVALUATION_INTERVAL` steps) without an improvement larger than ``tol`` that end
        the fit.
    tol : float
        Smallest improvement of the ELBO per row (nats) that counts.
    time_budget : float or None
        Seconds the whole fit may take (pilot, k-means, steps); the steps stop when it is spent. None: no limit.
    prior : {"dimension_scaled", None}
        The weak log-normal hyper-priors of :class:`~tnbayes.ExactGP`, or none.
    noise_lower_bound : float
        Lower bound of the noise variance on the standardised scale.
    seed : int
        Seed of the pilot subsample, k-means, the held-out rows, the minibatch order and q's initial draw.
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.

    Attributes
    ----------
    gp_ : gpytorch.models.ApproximateGP
        The fitted variational GP (standardised inputs and targets).
    likelihood_ : gpytorch.likelihoods.GaussianLikelihood
    num_inducing_ : int
    inducing_points_ : torch.Tensor of shape (num_inducing_, D)
        Fitted inducing inputs in the units of ``X``.
    batch_size_ : int
    lengthscale_ : torch.Tensor of shape (D,) or (1,)
        Lengthscales in standardised input units.
    outputscale_ : float
    noise_variance_ : float
        Noise variance on the standardised target scale (``noise_std`` gives it in the units of ``y``).
    mean_constant_ : float
    n_iter_ : int
        Optimiser steps taken.
    history_ : list of float of length n_iter_
        ELBO per row of every step's minibatch (before the step's update).
    validation_elbo_ : list of float
        Held-out ELBO per row at every evaluation (empty when no rows are held out).
    evaluation_seconds_ : list of float
        Seconds since ``fit`` started at every evaluation (every :data:`EVALUATION_INTERVAL` steps and the last).
    num_validation_ : int
        Rows held out.
    stop_reason_ : str
        ``"plateau"``, ``"max_iter"``, ``"time_budget"``, or ``"exact_optimum"`` (see Notes).
    converged_ : bool
        The plateau criterion ended the steps (or the exact optimum was set).

    Notes
    -----
    When the inducing inputs are every distinct training input (with ``num_inducing="auto"``: at most
    :data:`EXACT_INDUCING_ROWS` of them, with full batches), the pilot's ML-II saw every row, steps take full
    batches, ``max_iter="auto"`` and ``natural_gradient=True``, the ELBO is tight (Titsias 2009) and its optimum is the exact GP's at the pilot's
    hyper-parameters: the fit then sets q there with one natural-gradient step of size 1 and takes no further steps
    (``stop_reason_ == "exact_optimum"``). Pass ``max_iter`` to optimise by steps anyway.
    """

    _transient_attributes = ("gp_", "likelihood_")
    supports_chunked_fit = True

    def __init__(self, kernel: str = "se", nu: float = 2.5, *, ard: bool = True, num_inducing: int | str = "auto",
                 inducing_init: str = "kmeans", learn_inducing: bool = True, batch_size: int | str = "auto",
                 max_iter: int | str = "auto", learning_rate: float = 0.01, natural_gradient: bool = True,
                 natural_learning_rate: float | str = "auto", validation_fraction: float = 0.1, patience: int = 5,
                 tol: float = 1e-4, time_budget: float | None = 60.0, prior: str | None = "dimension_scaled",
                 noise_lower_bound: float = 1e-6, seed: int = 0, normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self._keep_parameters(locals())

    # ------------------------------------------------------------------ settings
    def _settings(self) -> MarginalLikelihoodSettings:
        return MarginalLikelihoodSettings(kernel=self.kernel, nu=float(self.nu), ard=bool(self.ard), prior=self.prior,
                                          noise_lower_bound=float(self.noise_lower_bound), seed=int(self.seed))

    def _check_parameters(self) -> None:
        """Raise ``ValueError`` for constructor arguments the fit cannot use, saying which values work."""
        self._settings().validate()

        def auto_or_positive_int(value: Any, name: str) -> None:
            if isinstance(value, str) and value == "auto":
                return
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
                raise ValueError(f"{name} must be 'auto' or a positive integer; got {value!r}.")

        auto_or_positive_int(self.num_inducing, "num_inducing")
        auto_or_positive_int(self.batch_size, "batch_size")
        auto_or_positive_int(self.max_iter, "max_iter")
        if self.inducing_init not in ("kmeans", "subsample"):
            raise ValueError(f"inducing_init must be 'kmeans' or 'subsample'; got {self.inducing_init!r}.")
        check_positive(self.learning_rate, "learning_rate")
        rate = self.natural_learning_rate
        if not (isinstance(rate, str) and rate == "auto") and (
                isinstance(rate, (bool, str)) or not isinstance(rate, (int, float, np.number))
                or not (math.isfinite(float(rate)) and float(rate) > 0)):
            raise ValueError(f"natural_learning_rate must be 'auto' or a finite positive number; got {rate!r}.")
        check_positive(self.tol, "tol", allow_zero=True)
        fraction = float(self.validation_fraction)
        if not 0.0 <= fraction < 0.5:
            raise ValueError(f"validation_fraction must be in [0, 0.5); got {self.validation_fraction!r}.")
        if isinstance(self.patience, bool) or not isinstance(self.patience, (int, np.integer)) or self.patience < 1:
            raise ValueError(f"patience must be a positive integer; got {self.patience!r}.")
        check_time_budget(self.time_budget)

    def _hyperparameter_sample_size(self) -> int:
        """Rows a chunked fit keeps from its first pass: the pilot, k-means and (for ``"auto"``) m's ceiling."""
        self._check_parameters()  # before the first pass over the chunks, and before int() of num_inducing
        m = DEFAULT_MAX_INDUCING if self.num_inducing == "auto" else int(self.num_inducing)
        return max(2000, 10 * m)

    # ------------------------------------------------------------------ fitting
    def _fit(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, *,
             sample: tuple[torch.Tensor, torch.Tensor] | None = None, extremes: torch.Tensor | None = None) -> None:
        self._check_parameters()
        streamed = isinstance(X, StreamedRows)
        num_rows = X.num_rows if streamed else int(X.shape[0])
        generator = torch.Generator().manual_seed(int(self.seed))
        batch_size = self._choose_batch_size(num_rows, streamed)
        full_batch = not streamed and batch_size >= num_rows
        if streamed:
            pool_X, pool_y = sample
            train_rows = validation = None
            num_validation = min(int(round(float(self.validation_fraction) * num_rows)), MAX_VALIDATION_ROWS)
            # each row is held out with this probability, so about num_validation rows are, spread over the chunks
            self._held_out_share = num_validation / max(num_rows, 1)
        else:
            train_rows, validation = self._split_validation(X, y, num_rows, full_batch, generator)
            pool_X, pool_y = X[train_rows], y[train_rows]
            num_validation = 0 if validation is None else int(validation[0].shape[0])
        num_fit_rows = num_rows - num_validation
        self.num_validation_ = num_validation
        self.batch_size_ = min(batch_size, num_fit_rows)

        # the seed is set for this fit alone: the global CPU (and, on CUDA, the device's) generator is restored after
        with torch.random.fork_rng(devices=[self.device_] if self.device_.type == "cuda" else []):
            torch.manual_seed(int(self.seed))
            distinct = torch.unique(pool_X, dim=0)
            exact_plan = full_batch and self.num_inducing == "auto" and distinct.shape[0] <= EXACT_INDUCING_ROWS
            start = self._pilot(pool_X, pool_y, generator, every_row=exact_plan)
            inducing, how = self._initial_inducing(distinct, generator, every_input=exact_plan)
            exact = (full_batch and start["saw_every_row"] and how.startswith("all") and self.max_iter == "auto"
                     and bool(self.natural_gradient))
            self._report(f"{inducing.shape[0]} inducing points, {how}.")
            model, likelihood = self._build(inducing, pool_X, start)
            if streamed:
                batches = streamed_batches(X, generator, self.batch_size_, self._held_out_share, int(self.seed),
                                           hold_out=num_validation > 0)
                validation = streamed_validation(X, num_validation, self._held_out_share, int(self.seed))
                self.num_validation_ = 0 if validation is None else int(validation[0].shape[0])
            else:
                batches = memory_batches(X[train_rows], y[train_rows], self.batch_size_, generator)
            self._report(self._batch_text(num_rows, num_fit_rows, streamed, full_batch))
            if exact:
                self._exact_optimum(model, likelihood, pool_X, pool_y)
            else:
                model, likelihood = self._train(model, likelihood, batches, validation, num_fit_rows, pool_X, start)
        self.gp_, self.likelihood_ = model.eval(), likelihood.eval()
        self._read_fitted_values()

    def _choose_batch_size(self, num_rows: int, streamed: bool) -> int:
        if self.batch_size != "auto":
            return int(self.batch_size)
        return num_rows if (num_rows <= FULL_BATCH_ROWS and not streamed) else DEFAULT_BATCH_SIZE

    def _split_validation(self, X: torch.Tensor, y: torch.Tensor, num_rows: int, full_batch: bool,
                          generator: torch.Generator) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """Indices of the rows the steps see, and the held-out rows (None with full batches or no fraction)."""
        order = torch.randperm(num_rows, generator=generator).to(X.device)
        count = 0 if full_batch else min(int(round(float(self.validation_fraction) * num_rows)), MAX_VALIDATION_ROWS)
        if count < 1 or num_rows - count < 2:
            return torch.arange(num_rows, device=X.device), None
        held = order[:count]
        return order[count:], (X[held], y[held])

    def _pilot(self, X: torch.Tensor, y: torch.Tensor, generator: torch.Generator, *,
               every_row: bool = False) -> dict[str, Any]:
        """Start values of (ℓ, σ_f², σ², c): ML-II of an exact GP on at most :data:`PILOT_POINTS` of the rows (on
        every row with ``every_row``)."""
        started = time.perf_counter()
        family, nu = gp_kernel_family(self.kernel, float(self.nu))
        points = X.shape[0] if every_row else PILOT_POINTS
        estimate = estimate_kernel_hyperparameters(X, y, kernel=family, nu=nu, max_points=points,
                                                   seed=int(self.seed), num_restarts=1, ard=bool(self.ard))
        lengthscale = estimate.lengthscale.to(torch.float64)
        if not self.ard:
            lengthscale = lengthscale[:1]
        self._report(f"kernel hyper-parameters start from the {estimate.describe()} "
                     f"({format_seconds(time.perf_counter() - started)}): lengthscales {float(lengthscale.min()):.3g}–"
                     f"{float(lengthscale.max()):.3g} (standardised units), noise fraction "
                     f"{estimate.noise_variance / (estimate.noise_variance + estimate.outputscale):.3f}.")
        return {"lengthscale": lengthscale, "outputscale": estimate.outputscale,
                "noise": max(estimate.noise_variance, 2.0 * float(self.noise_lower_bound)),
                "mean": float(y.mean()),
                "saw_every_row": estimate.num_points + estimate.num_duplicates == X.shape[0]}

    def _initial_inducing(self, distinct: torch.Tensor, generator: torch.Generator, *,
                          every_input: bool = False) -> tuple[torch.Tensor, str]:
        """Inducing inputs of shape (m, D), chosen among the ``distinct`` training inputs (all of them with
        ``every_input``), and a phrase saying how they were chosen."""
        if every_input:
            return distinct, (f"all {distinct.shape[0]} distinct training inputs (at most {EXACT_INDUCING_ROWS} with "
                              "full batches: the variational posterior is then the exact GP's)")
        wanted = DEFAULT_MAX_INDUCING if self.num_inducing == "auto" else int(self.num_inducing)
        if self.num_inducing == "auto" and distinct.shape[0] <= wanted:
            return distinct, f"all {distinct.shape[0]} distinct training inputs (at most {DEFAULT_MAX_INDUCING})"
        if distinct.shape[0] <= wanted:
            return distinct, (f"all {distinct.shape[0]} distinct training inputs (num_inducing={wanted} asked for "
                              f"more than there are)")
        reason = ("the automatic ceiling" if self.num_inducing == "auto" else "num_inducing")
        if distinct.shape[0] > KMEANS_POINTS:
            distinct = distinct[torch.randperm(distinct.shape[0], generator=generator)[:KMEANS_POINTS].to(distinct.device)]
        if self.inducing_init == "subsample":
            rows = torch.randperm(distinct.shape[0], generator=generator)[:wanted].to(distinct.device)
            return distinct[rows], f"a random subsample of the training inputs ({reason})"
        from sklearn.cluster import KMeans

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fewer distinct clusters than asked: the duplicates are dropped below
            centres = KMeans(n_clusters=wanted, n_init=1, max_iter=100, random_state=int(self.seed)).fit(
                distinct.detach().cpu().double().numpy()).cluster_centers_
        centres = torch.unique(torch.as_tensor(centres, dtype=distinct.dtype, device=distinct.device), dim=0)
        return centres, f"k-means centres of {distinct.shape[0]} training inputs ({reason})"

    def _build(self, inducing: torch.Tensor, prior_inputs: torch.Tensor,
               start: dict[str, Any]) -> tuple[_VariationalGP, gpytorch.likelihoods.GaussianLikelihood]:
        """The variational GP and likelihood at the start values (q at its default initialisation)."""
        kernel, likelihood = build_kernel_and_likelihood(prior_inputs, self._settings())
        model = _VariationalGP(inducing, kernel, bool(self.natural_gradient), bool(self.learn_inducing))
        model = model.to(dtype=inducing.dtype, device=inducing.device)
        with torch.no_grad():
            kernel.base_kernel.lengthscale = start["lengthscale"].to(inducing).reshape(
                kernel.base_kernel.lengthscale.shape)
            kernel.outputscale = torch.as_tensor(start["outputscale"], dtype=inducing.dtype, device=inducing.device)
            likelihood.noise = torch.as_tensor(start["noise"], dtype=inducing.dtype, device=inducing.device)
            model.mean_module.constant.fill_(start["mean"])
        return model, likelihood

    # ------------------------------------------------------------------ data for the steps
    def _batch_text(self, num_rows: int, num_fit_rows: int, streamed: bool, full_batch: bool) -> str:
        if full_batch:
            return (f"every step sees all {num_rows} rows (at most {FULL_BATCH_ROWS} rows take full batches): the "
                    f"ELBO is exact and its plateau is judged on the training rows.")
        held = (f"{self.num_validation_} rows held out to judge the plateau of the held-out ELBO"
                if self.num_validation_ else "the plateau judged on the minibatch ELBO (no rows held out)")
        source = "read chunk by chunk" if streamed else "in random order"
        return f"minibatches of {self.batch_size_} of {num_fit_rows} rows ({source}); {held}."

    # ------------------------------------------------------------------ the steps
    def _exact_optimum(self, model: _VariationalGP, likelihood: gpytorch.likelihoods.GaussianLikelihood,
                       X: torch.Tensor, y: torch.Tensor) -> None:
        """Set q to its optimum in one natural-gradient step of size 1 (hyper-parameters and inducing inputs kept).

        Used when the inducing inputs are every distinct training input and the pilot's ML-II saw every row: the
        ELBO is then tight (Titsias 2009), its optimum over (q, hyper-parameters) is the exact GP's ML-II optimum
        the pilot found, and optimiser steps could only approach it.
        """
        elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=X.shape[0])
        step = gpytorch.optim.NGD(model.variational_parameters(), num_data=X.shape[0], lr=1.0)
        model.train()
        likelihood.train()
        step.zero_grad()
        loss = -elbo(model(X), y)
        loss.backward()
        step.step()
        self.history_ = [-float(loss.detach())]
        with torch.no_grad():
            final = float(elbo(model(X), y))
        self.validation_elbo_, self.evaluation_seconds_ = [], [time.perf_counter() - self._fit_started]
        self.n_iter_, self.stop_reason_, self.converged_ = 1, "exact_optimum", True
        self._report(f"the inducing points are every distinct training input and the pilot's ML-II saw every row, so "
                     f"the ELBO is tight and its optimum is the exact GP's: one natural-gradient step of size 1 set q "
                     f"to it (ELBO {final:.4f} per row); no further steps.")

    def _optimisers(self, model: _VariationalGP, likelihood: gpytorch.likelihoods.GaussianLikelihood,
                    num_fit_rows: int) -> list[torch.optim.Optimizer]:
        if self.natural_gradient:
            rate = self.natural_learning_rate
            if rate == "auto":
                rate = 1.0 if self.batch_size_ >= num_fit_rows else MINIBATCH_NATURAL_LEARNING_RATE
            return [gpytorch.optim.NGD(model.variational_parameters(), num_data=num_fit_rows, lr=float(rate)),
                    torch.optim.Adam([{"params": model.hyperparameters()}, {"params": likelihood.parameters()}],
                                     lr=float(self.learning_rate))]
        return [torch.optim.Adam([{"params": model.parameters()}, {"params": likelihood.parameters()}],
                                 lr=float(self.learning_rate))]

    def _train(self, model: _VariationalGP, likelihood: gpytorch.likelihoods.GaussianLikelihood, batches,
               validation: tuple[torch.Tensor, torch.Tensor] | None, num_fit_rows: int, pool_X: torch.Tensor,
               start: dict[str, Any]) -> tuple[_VariationalGP, gpytorch.likelihoods.GaussianLikelihood]:
        """Optimise the ELBO until the plateau, ``max_iter`` or the time budget; reduces an automatic m first when
        the timed steps show the budget cannot pay :data:`MIN_BUDGET_STEPS` of them."""
        max_steps = DEFAULT_MAX_STEPS if self.max_iter == "auto" else int(self.max_iter)
        budget = None if self.time_budget is None else float(self.time_budget)
        elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=num_fit_rows)
        optimisers = self._optimisers(model, likelihood, num_fit_rows)
        model.train()
        likelihood.train()
        self.history_, self.validation_elbo_, self.evaluation_seconds_ = [], [], []
        best, stale, since, steps = -math.inf, 0, [], 0
        self.stop_reason_ = "max_iter"
        bar = tqdm(total=max_steps, desc="SVGP steps", disable=not self.verbose)  # the ELBO in its postfix
        timed_from = time.perf_counter()
        while steps < max_steps:
            if steps == WARM_UP_STEPS:
                timed_from = time.perf_counter()
            X_batch, y_batch = next(batches)
            for optimiser in optimisers:
                optimiser.zero_grad()
            loss = -elbo(model(X_batch), y_batch)
            loss.backward()
            for optimiser in optimisers:
                optimiser.step()
            steps += 1
            since.append(-float(loss.detach()))
            self.history_.append(since[-1])
            bar.update(1)
            if steps == WARM_UP_STEPS + TIMED_STEPS and self.num_inducing == "auto" and budget is not None:
                per_step = (time.perf_counter() - timed_from) / TIMED_STEPS
                smaller = self._budget_inducing(model, per_step, budget, min(max_steps, MIN_BUDGET_STEPS))
                if smaller is not None:  # start again at the smaller m, from the same start values
                    bar.close()
                    model, likelihood = self._build(smaller, pool_X, start)
                    return self._train(model, likelihood, batches, validation, num_fit_rows, pool_X, start)
            elapsed = time.perf_counter() - self._fit_started
            out_of_time = budget is not None and elapsed > budget
            if steps % EVALUATION_INTERVAL == 0 or steps == max_steps or out_of_time:
                value = self._evaluate(elbo, model, validation, since)
                self.evaluation_seconds_.append(elapsed)
                bar.set_postfix(elbo=f"{float(np.mean(since)):.4f}",
                                **({"held_out": f"{value:.4f}"} if validation is not None else {}))
                if value > best + float(self.tol):
                    best, stale = value, 0
                else:
                    stale += 1
                since = []
                if stale >= int(self.patience):
                    self.stop_reason_ = "plateau"
                    break
            if out_of_time:
                self.stop_reason_ = "time_budget"
                break
        bar.close()
        self.n_iter_ = steps
        self.converged_ = self.stop_reason_ == "plateau"
        self._report_stop(steps, max_steps, num_fit_rows)
        return model, likelihood

    def _budget_inducing(self, model: _VariationalGP, per_step: float, budget: float,
                         steps_wanted: int) -> torch.Tensor | None:
        """A subsample of the inducing inputs small enough for ``steps_wanted`` steps in what is left of the budget
        (a step's cost grows like m² with minibatches), or None when the current m fits (or is already small)."""
        inducing = model.variational_strategy.inducing_points.detach()
        m = inducing.shape[0]
        left = budget - (time.perf_counter() - self._fit_started)
        if per_step * steps_wanted <= left or m <= MIN_INDUCING:
            return None
        affordable = max(left, 0.0) / steps_wanted
        smaller = max(MIN_INDUCING, int(m * math.sqrt(max(affordable / per_step, 1e-6))))
        if smaller >= m:
            return None
        generator = torch.Generator().manual_seed(int(self.seed) + 1)
        rows = torch.randperm(m, generator=generator)[:smaller].to(inducing.device)
        self._report(f"the time budget lowers the inducing points from {m} to {smaller}: a step took "
                     f"{format_seconds(per_step)}, and {steps_wanted} steps must fit in the "
                     f"{format_seconds(max(left, 0.0))} left of time_budget={budget:g} s (pass num_inducing or a "
                     f"larger time_budget to keep more).")
        return inducing[rows].clone()

    def _evaluate(self, elbo: gpytorch.mlls.VariationalELBO, model: _VariationalGP,
                  validation: tuple[torch.Tensor, torch.Tensor] | None, since: list[float]) -> float:
        """The value the plateau is judged on: the held-out ELBO per row, or the training ELBO since the last
        evaluation."""
        if validation is None:
            return float(np.mean(since))
        with torch.no_grad():
            value = float(elbo(model(validation[0]), validation[1]))
        self.validation_elbo_.append(value)
        return value

    def _report_stop(self, steps: int, max_steps: int, num_fit_rows: int) -> None:
        epochs = steps * self.batch_size_ / max(num_fit_rows, 1)
        reason = {"plateau": f"the {'held-out' if self.validation_elbo_ else 'training'} ELBO improved by less than "
                             f"tol={float(self.tol):g} per row in {int(self.patience)} evaluations "
                             f"({int(self.patience) * EVALUATION_INTERVAL} steps)",
                  "max_iter": f"max_iter={max_steps} steps were taken",
                  "time_budget": f"time_budget={float(self.time_budget or 0):g} s was spent"}[self.stop_reason_]
        last = self.history_[-EVALUATION_INTERVAL:]
        self._report(f"stopped after {steps} steps ({epochs:.3g} epochs): {reason}; training ELBO "
                     f"{float(np.mean(last)):.4f} per row over the last {len(last)} steps"
                     + (f", held-out ELBO {self.validation_elbo_[-1]:.4f}." if self.validation_elbo_ else "."))
        if self.stop_reason_ == "time_budget" and steps < MIN_BUDGET_STEPS:
            warnings.warn(f"SVGP: the time budget ended the fit after {steps} optimiser steps, too few for a converged "
                          f"fit; pass a larger time_budget, fewer num_inducing or a smaller batch_size.",
                          BudgetWarning, stacklevel=4)

    def _read_fitted_values(self) -> None:
        with torch.no_grad():
            kernel = self.gp_.covar_module
            self.lengthscale_ = kernel.base_kernel.lengthscale.detach().reshape(-1).clone()
            self.outputscale_ = float(kernel.outputscale)
            self.noise_variance_ = float(self.likelihood_.noise)
            self.mean_constant_ = float(self.gp_.mean_module.constant)
            inducing = self.gp_.variational_strategy.inducing_points.detach()
            self.num_inducing_ = int(inducing.shape[0])
            self.inducing_points_ = self.x_scaler_.inverse_transform(inducing).clone()

    # ------------------------------------------------------------------ prediction
    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent mean (n,) and variance (n,) or covariance (n, n); differentiable in ``X`` when it requires
        gradients (BoTorch's acquisition optimisers)."""
        self.gp_.eval()
        with torch.set_grad_enabled(X.requires_grad):
            if full_covariance:
                f = self.gp_(X)
                return f.mean, f.covariance_matrix
            means, variances = [], []
            for chunk in torch.split(X, PREDICTION_CHUNK):
                f = self.gp_(chunk)
                means.append(f.mean)
                variances.append(f.variance)
            return torch.cat(means), torch.cat(variances).clamp_min(0.0)

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, torch.Tensor]:
        state = {f"model.{key}": value for key, value in self.gp_.state_dict().items()}
        state.update({f"likelihood.{key}": value for key, value in self.likelihood_.state_dict().items()})
        return state

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        model_state = {key[len("model."):]: value for key, value in extra.items() if key.startswith("model.")}
        likelihood_state = {key[len("likelihood."):]: value for key, value in extra.items()
                            if key.startswith("likelihood.")}
        inducing = model_state["variational_strategy.inducing_points"]
        kernel, likelihood = build_kernel_and_likelihood(inducing, self._settings())
        model = _VariationalGP(inducing.clone(), kernel, bool(self.natural_gradient), bool(self.learn_inducing))
        model = model.to(dtype=inducing.dtype, device=inducing.device)
        model.load_state_dict(model_state)
        likelihood.load_state_dict(likelihood_state)
        self.gp_, self.likelihood_ = model.eval(), likelihood.eval()


register_model("svgp", SVGP)
register_model("svgp_matern", lambda **kw: SVGP(kernel="matern", nu=2.5, **kw))
