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
from typing import Any

import gpytorch
import numpy as np
import torch
from tqdm.auto import tqdm

from tnbayes._validation import check_positive
from tnbayes._warnings import warn_user
from tnbayes.data import StreamedRows
from tnbayes.inference.budget import BudgetWarning, check_time_budget, format_seconds
from tnbayes.models._svgp_data import (describe_batches, memory_batches, place_inducing, split_validation,
                                       streamed_batches, streamed_validation)
from tnbayes.models._svgp_steps import (OptimisationRun, VariationalGP, collapsed_start, fewer_inducing, race_winner,
                                       latent_moments, raise_to_floor, set_exact_optimum, standard_start,
                                       start_modules, stop_sentence)
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
#: up to this many training rows and ``batch_size="auto"``, every step sees every row (an exact ELBO; none held out)
FULL_BATCH_ROWS = 2048
#: rows per minibatch with ``batch_size="auto"`` above :data:`FULL_BATCH_ROWS`
DEFAULT_BATCH_SIZE = 1024
#: optimiser steps with ``max_iter="auto"`` (the early stop and the time budget usually end the fit sooner)
DEFAULT_MAX_STEPS = 2000
#: natural-gradient step size with minibatches and ``natural_learning_rate="auto"``
MINIBATCH_NATURAL_LEARNING_RATE = 0.1
#: steps between two evaluations of the plateau criterion
EVALUATION_INTERVAL = 50
#: how the inducing inputs are placed (see the ``inducing_init`` parameter)
INDUCING_INITS = ("greedy_variance", "kmeans", "subsample")
#: where the kernel hyper-parameters start (see the ``hyperparameter_start`` parameter)
HYPERPARAMETER_STARTS = ("auto", "pilot", "collapsed", "standard")
#: what the kernel hyper-parameters maximise when the fit is the exact GP's (see ``hyperparameter_objective``)
HYPERPARAMETER_OBJECTIVES = ("leave_one_out", "marginal_likelihood")
#: steps each start takes in the start race of ``hyperparameter_start="auto"``
RACE_STEPS = 2 * EVALUATION_INTERVAL
#: at most this many held-out rows (the held-out ELBO is evaluated on all of them)
MAX_VALIDATION_ROWS = 2000
#: rows of the exact-GP pilot whose ML-II estimate starts the kernel hyper-parameters
PILOT_POINTS = 500
#: the collapsed-bound start: at most this many rows and inducing inputs, Adam steps and their learning rate
COLLAPSED_START = {"max_points": 2000, "num_inducing": 256, "steps": 100, "learning_rate": 0.05}
#: share of the time budget after which the pilot's leave-one-out run stops (the exact GP's q costs about as much)
PILOT_BUDGET_SHARE = 0.5
#: with ``num_inducing="auto"``, full batches and at most this many distinct training inputs, every distinct input
#: is an inducing point and the pilot's ML-II sees every row: the fit is then the exact GP's (see Notes)
EXACT_INDUCING_ROWS = FULL_BATCH_ROWS
#: the time budget must leave room for this many steps at the chosen number of inducing points, or it is reduced
MIN_BUDGET_STEPS = 300
#: steps timed (after :data:`WARM_UP_STEPS` untimed ones) before the budget decides the number of inducing points
TIMED_STEPS = 5
WARM_UP_STEPS = 2
#: test rows per prediction chunk
PREDICTION_CHUNK = 4096


class SVGP(BaseModel):
    """Stochastic variational GP regression (GPyTorch ``ApproximateGP``) with an ARD SE or Matérn kernel.

    With no arguments the fit chooses, from the data and ``time_budget``: up to :data:`EXACT_INDUCING_ROWS` rows
    (full batches), every distinct training input as an inducing point, ML-II's lengthscales of an exact GP on every
    row and the scales (outputscale, noise, mean) that predict each row best from the others (leave-one-out): the
    exact GP's fit at those values (see Notes); above, the kernel hyper-parameters' start (a race on the held-out
    rows between ML-II of an exact GP on :data:`PILOT_POINTS` rows and the collapsed bound on more rows),
    :data:`DEFAULT_MAX_INDUCING` inducing points (fewer when the budget cannot pay :data:`MIN_BUDGET_STEPS` steps
    at that size), their places (greedy conditional variance under the start's kernel), minibatches, when to stop
    (a plateau of the held-out ELBO, or the budget) and which state to keep (the best on the held-out rows).
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
        Largest number of inducing points m (at most the number of distinct training inputs; greedy placement stops
        sooner when the rest add no prior variance at the start values). ``"auto"``: see above.
    inducing_init : {"greedy_variance", "kmeans", "subsample"}
        Initial inducing inputs among (a subsample of) the training inputs: by greedy conditional variance under the
        kernel at the start values (Burt et al. 2020; each start of the race places its own), k-means centres, or a
        random subsample.
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
    hyperparameter_start : {"auto", "pilot", "collapsed", "standard"}
        Where the kernel hyper-parameters start when the fit takes steps: ``"pilot"``, ML-II of an exact GP on
        :data:`PILOT_POINTS` rows; ``"collapsed"``, Adam steps of the collapsed bound (SGPR,
        :mod:`tnbayes.selection.collapsed_bound`) on more rows (:data:`COLLAPSED_START`); ``"standard"``, GPyTorch's
        defaults on standardised data (log 2 everywhere), a hand-written GPyTorch SVGP's start; ``"auto"``
        (default), with held-out rows the pilot and the collapsed start take :data:`RACE_STEPS` steps each and the
        one whose held-out rows are predicted better goes on (the pilot without). Ignored when the fit is the exact
        GP's (see Notes).
    hyperparameter_objective : {"leave_one_out", "marginal_likelihood"}
        What the kernel hyper-parameters maximise when the fit is the exact GP's (see Notes):
        ``"leave_one_out"`` (default), ML-II's lengthscales with the outputscale, noise and mean that maximise the
        mean leave-one-out log predictive density of the training rows (:mod:`tnbayes.selection.leave_one_out`; the
        counterpart without held-out rows of the held-out density that picks the final state of fits with steps);
        ``"marginal_likelihood"``, ML-II alone (the fit is then :class:`~tnbayes.ExactGP`'s). Fits with steps
        maximise the ELBO either way.
    validation_fraction : float
        Share of the training rows held out (at most :data:`MAX_VALIDATION_ROWS`) to judge the plateau when steps
        use minibatches; 0 judges it on the training ELBO of the minibatches instead. Held-out rows are not
        conditioned on. With held-out rows the fit ends in its state of the evaluation whose held-out log
        predictive density was best (the ELBO can go on rising while the held-out predictions get worse).
    patience : int
        Evaluations (every :data:`EVALUATION_INTERVAL` steps) without an improvement larger than ``tol`` that end
        the fit.
    tol : float
        Smallest improvement of the ELBO per row (nats) that counts.
    time_budget : float or None
        Seconds the whole fit may take (pilot, inducing inputs, steps); the steps stop when it is spent. None: no limit.
    prior : {"dimension_scaled", None}
        The weak log-normal hyper-priors of :class:`~tnbayes.ExactGP` (in the pilot and in the steps), or none.
    noise_lower_bound : float
        Lower bound of the noise variance on the standardised scale.
    seed : int
        Seed of every random choice (pilot rows, inducing inputs, held-out rows, minibatch order, q's first draw).
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.

    Attributes
    ----------
    gp_ : gpytorch.models.ApproximateGP
        The fitted variational GP (standardised inputs and targets).
    likelihood_ : gpytorch.likelihoods.GaussianLikelihood
    num_inducing_ : int
        Inducing points fitted (can be fewer than ``num_inducing``: see there and the time budget's check).
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
        Optimiser steps taken (both starts' with a start race).
    history_ : list of float of length n_iter_
        ELBO per row of every step's minibatch (before the step's update).
    validation_elbo_ : list of float
        Held-out ELBO per row at every evaluation (empty when no rows are held out).
    held_out_log_density_ : list of float
        Held-out log predictive density per row at every evaluation (empty when no rows are held out).
    hyperparameter_start_ : str
        The start the fitted state comes from (``"pilot"``, ``"collapsed"`` or ``"standard"``).
    evaluation_seconds_ : list of float
        Seconds since ``fit`` started at every evaluation (every :data:`EVALUATION_INTERVAL` steps and the last).
    num_validation_ : int
        Rows held out.
    stop_reason_ : str
        ``"plateau"``, ``"max_iter"``, ``"time_budget"``, ``"exact_optimum"`` (see Notes) or ``"numerical"`` (the
        kernel matrix of the inducing inputs stopped being positive definite; the best held-out state is kept).
    converged_ : bool
        The plateau criterion ended the steps (or the exact optimum was set).

    Notes
    -----
    When the inducing inputs are every distinct training input (with ``num_inducing="auto"``: at most
    :data:`EXACT_INDUCING_ROWS` of them, with full batches), the pilot saw every row, steps take full batches,
    ``max_iter="auto"`` and ``natural_gradient=True``, the ELBO is tight (Titsias 2009) and its optimum over q is
    the exact GP's posterior at the pilot's hyper-parameters: the fit then sets q there with one natural-gradient
    step of size 1 and takes no further steps (``stop_reason_ == "exact_optimum"``). Its hyper-parameters are those
    of ``hyperparameter_objective``, by default with the scales at their leave-one-out optimum, which ELBO steps would
    leave for ML-II's (whose noise can shrink until the intervals are too narrow when the kernel is misspecified);
    that run stops at :data:`PILOT_BUDGET_SHARE` of ``time_budget``. Pass ``max_iter`` to optimise by steps anyway.

    Whenever steps follow, each start's lengthscales are raised to at least
    :func:`~tnbayes.models._svgp_steps.lengthscale_floor`, below which the training rows cannot tell them apart (the
    kernel between training rows, or a chunked fit's subsample rows, moves by at most 1e-4 of the outputscale) while
    an inducing input that moves off a value of an input with few values (an identifier) loses every row there.
    """

    _transient_attributes = ("gp_", "likelihood_")
    supports_chunked_fit = True

    def __init__(self, kernel: str = "se", nu: float = 2.5, *, ard: bool = True, num_inducing: int | str = "auto",
                 inducing_init: str = "greedy_variance", learn_inducing: bool = True, batch_size: int | str = "auto",
                 max_iter: int | str = "auto", learning_rate: float = 0.01, natural_gradient: bool = True,
                 natural_learning_rate: float | str = "auto", hyperparameter_start: str = "auto",
                 hyperparameter_objective: str = "leave_one_out", validation_fraction: float = 0.1, patience: int = 5,
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
        for name, allowed in (("hyperparameter_start", HYPERPARAMETER_STARTS), ("inducing_init", INDUCING_INITS),
                              ("hyperparameter_objective", HYPERPARAMETER_OBJECTIVES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}; got {getattr(self, name)!r}.")
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
        """Rows a chunked fit keeps from its first pass: the pilot, the inducing inputs, (``"auto"``) m's ceiling."""
        self._check_parameters()  # before the first pass over the chunks, and before int() of num_inducing
        return max(2000, 10 * self._inducing_ceiling())

    def _inducing_ceiling(self) -> int:
        """Largest number of inducing points: :data:`DEFAULT_MAX_INDUCING` or ``num_inducing``."""
        return DEFAULT_MAX_INDUCING if self.num_inducing == "auto" else int(self.num_inducing)

    # ------------------------------------------------------------------ fitting
    def _fit(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, *,
             sample: tuple[torch.Tensor, torch.Tensor] | None = None, extremes: torch.Tensor | None = None) -> None:
        self._check_parameters()
        streamed = isinstance(X, StreamedRows)
        num_rows = X.num_rows if streamed else int(X.shape[0])
        generator = torch.Generator().manual_seed(int(self.seed))
        batch_size = (int(self.batch_size) if self.batch_size != "auto" else
                      num_rows if num_rows <= FULL_BATCH_ROWS and not streamed else DEFAULT_BATCH_SIZE)
        full_batch = not streamed and batch_size >= num_rows
        num_validation = min(int(round(float(self.validation_fraction) * num_rows)), MAX_VALIDATION_ROWS)
        if streamed:
            pool_X, pool_y = sample
            train_rows = validation = None
            # each row is held out with this probability, so about num_validation rows are, spread over the chunks
            self._held_out_share = num_validation / max(num_rows, 1)
        else:
            train_rows, validation = split_validation(X, y, 0 if full_batch else num_validation, generator)
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
            if self.hyperparameter_start in ("collapsed", "standard") and not exact_plan:
                start = self._unpiloted_start(self.hyperparameter_start, pool_X, pool_y)
            else:
                start = self._pilot(pool_X, pool_y, generator, every_row=exact_plan)
            self._inducing_cap = self._inducing_ceiling()  # the m in force, until _budget_inducing lowers it
            exact = (full_batch and start["saw_every_row"] and (exact_plan or distinct.shape[0] <= self._inducing_cap)
                     and self.max_iter == "auto" and bool(self.natural_gradient))
            start = start if exact else self._floored(start, distinct)
            inducing, how = self._initial_inducing(distinct, generator, start, every_input=exact_plan)
            self._report(f"{inducing.shape[0]} inducing points, {how}.")
            model, likelihood = self._build(inducing, pool_X, start)
            if streamed:
                batches = streamed_batches(X, generator, self.batch_size_, self._held_out_share, int(self.seed),
                                           hold_out=num_validation > 0)
                validation = streamed_validation(X, num_validation, self._held_out_share, int(self.seed))
                self.num_validation_ = 0 if validation is None else int(validation[0].shape[0])
            else:
                batches = memory_batches(X[train_rows], y[train_rows], self.batch_size_, generator)
            self._report(describe_batches(num_rows, num_fit_rows, self.batch_size_, self.num_validation_, streamed,
                                          full_batch, FULL_BATCH_ROWS))
            if exact:
                self._exact_optimum(model, likelihood, pool_X, pool_y)
            else:
                model, likelihood = self._train(model, likelihood, batches, validation, num_fit_rows,
                                                (pool_X, pool_y), start)
        self.gp_, self.likelihood_ = model.eval(), likelihood.eval()
        self._read_fitted_values()

    def _pilot(self, X: torch.Tensor, y: torch.Tensor, generator: torch.Generator, *,
               every_row: bool = False) -> dict[str, Any]:
        """Start values of (ℓ, σ_f², σ², c): ML-II of an exact GP on at most :data:`PILOT_POINTS` of the rows (on
        every row with ``every_row``)."""
        started = time.perf_counter()
        family, nu = gp_kernel_family(self.kernel, float(self.nu))
        points = X.shape[0] if every_row else PILOT_POINTS
        objective = self.hyperparameter_objective if every_row else "marginal_likelihood"
        left = None if self.time_budget is None else max(self.time_budget - (started - self._fit_started), 0.0)
        estimate = estimate_kernel_hyperparameters(X, y, kernel=family, nu=nu, max_points=points, seed=int(self.seed),
                                                   num_restarts=1, ard=bool(self.ard), prior=self.prior,
                                                   objective=objective,
                                                   time_limit=None if left is None else PILOT_BUDGET_SHARE * left)
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

    def _unpiloted_start(self, label: str, X: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        """The ``"standard"`` or the ``"collapsed"`` start of the kernel hyper-parameters (``hyperparameter_start``)."""
        started = time.perf_counter()
        start, text = (standard_start(X.shape[1] if self.ard else 1, float(y.mean())) if label == "standard" else
                       collapsed_start(X, y, self._settings(), int(self.seed) + 2, **COLLAPSED_START))
        self._report(f"kernel hyper-parameters start from {text} ({format_seconds(time.perf_counter() - started)}).")
        return start

    def _floored(self, start: dict[str, Any], distinct: torch.Tensor, label: str = "") -> dict[str, Any]:
        """The start with its lengthscales raised to their floor (``raise_to_floor``; report prefixed by ``label``)."""
        start, text = raise_to_floor(start, distinct, *gp_kernel_family(self.kernel, float(self.nu)), bool(self.ard))
        if text:
            self._report(f"{label}{text}.")
        return start

    def _initial_inducing(self, distinct: torch.Tensor, generator: torch.Generator, start: dict[str, Any], *,
                          every_input: bool = False) -> tuple[torch.Tensor, str]:
        """Inducing inputs of shape (m, D), chosen among the ``distinct`` training inputs (all of them with
        ``every_input``; else at most the m in force, by ``inducing_init`` under the kernel at ``start``), and a
        phrase saying how they were chosen; records whether they are in greedy order (for the budget's cut)."""
        self._inducing_ordered = False
        if every_input:
            return distinct, (f"all {distinct.shape[0]} distinct training inputs (at most {EXACT_INDUCING_ROWS} with "
                              "full batches: the variational posterior is then the exact GP's)")
        wanted = self._inducing_cap
        if self.num_inducing == "auto" and distinct.shape[0] <= wanted:
            return distinct, f"all {distinct.shape[0]} distinct training inputs (at most {DEFAULT_MAX_INDUCING})"
        if distinct.shape[0] <= wanted:
            return distinct, (f"all {distinct.shape[0]} distinct training inputs (num_inducing={wanted} asked for "
                              f"more than there are)")
        reason = ("the time budget's m" if wanted < self._inducing_ceiling() else
                  "the automatic ceiling" if self.num_inducing == "auto" else "num_inducing")
        self._inducing_ordered = greedy = self.inducing_init == "greedy_variance"
        kernel = start_modules(distinct, start, self._settings())[0] if greedy else None
        return place_inducing(distinct, wanted, self.inducing_init, int(self.seed), generator, reason, kernel)

    def _build(self, inducing: torch.Tensor, prior_inputs: torch.Tensor,
               start: dict[str, Any]) -> tuple[VariationalGP, gpytorch.likelihoods.GaussianLikelihood]:
        """The variational GP and likelihood at the start values (q at its default initialisation)."""
        kernel, likelihood = start_modules(prior_inputs, start, self._settings())
        model = VariationalGP(inducing, kernel, bool(self.natural_gradient), bool(self.learn_inducing))
        model = model.to(dtype=inducing.dtype, device=inducing.device)
        with torch.no_grad():
            model.mean_module.constant.fill_(start["mean"])
        return model, likelihood

    # ------------------------------------------------------------------ the steps
    def _exact_optimum(self, model: VariationalGP, likelihood: gpytorch.likelihoods.GaussianLikelihood,
                       X: torch.Tensor, y: torch.Tensor) -> None:
        """Set q to its optimum given the pilot's hyper-parameters and inducing inputs (see Notes)."""
        before, after = set_exact_optimum(model, likelihood, X, y)
        self.history_ = [before]
        self.validation_elbo_, self.evaluation_seconds_ = [], [time.perf_counter() - self._fit_started]
        self.held_out_log_density_, self.hyperparameter_start_ = [], "pilot"
        self.n_iter_, self.stop_reason_, self.converged_ = 1, "exact_optimum", True
        self._report(f"the inducing points are every distinct training input and the pilot saw every row, so the "
                     f"ELBO is tight and its optimum over q is the exact GP's posterior: one natural-gradient step of "
                     f"size 1 set q to it (ELBO {after:.4f} per row); no further steps.")

    def _optimisers(self, model: VariationalGP, likelihood: gpytorch.likelihoods.GaussianLikelihood,
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

    def _train(self, model: VariationalGP, likelihood: gpytorch.likelihoods.GaussianLikelihood, batches,
               validation: tuple[torch.Tensor, torch.Tensor] | None, num_fit_rows: int,
               pool: tuple[torch.Tensor, torch.Tensor], start: dict[str, Any]) -> tuple[VariationalGP, Any]:
        """Optimise the ELBO until the plateau, ``max_iter`` or the time budget; reduces an automatic m first when
        the timed steps show the budget cannot pay :data:`MIN_BUDGET_STEPS` of them. With held-out rows and
        ``hyperparameter_start="auto"``, the pilot's start and the collapsed start race for :data:`RACE_STEPS` steps
        each (the second sooner if the first breaks down) and the better on the held-out rows goes on; its best state
        on them is restored at the end."""
        max_steps = DEFAULT_MAX_STEPS if self.max_iter == "auto" else int(self.max_iter)
        budget = None if self.time_budget is None else float(self.time_budget)
        racing = self.hyperparameter_start == "auto" and validation is not None and max_steps >= 4 * RACE_STEPS
        initial_inducing = model.variational_strategy.inducing_points.detach().clone()

        def second_start() -> OptimisationRun:  # the race's second start, with at most the m in force
            distinct = torch.unique(pool[0], dim=0)
            second = self._floored(self._unpiloted_start("collapsed", *pool), distinct, "collapsed start: ")
            inducing = initial_inducing.clone()
            if self.inducing_init == "greedy_variance":  # placed anew under the second start's kernel
                inducing, how = self._initial_inducing(distinct, torch.Generator().manual_seed(int(self.seed) + 3),
                                                       second)
                self._report(f"collapsed start: {inducing.shape[0]} inducing points, {how}.")
            return OptimisationRun.start("collapsed", *self._build(inducing, pool[0], second), num_fit_rows,
                                         self._optimisers)
        label = "pilot" if self.hyperparameter_start == "auto" else self.hyperparameter_start
        runs = [run := OptimisationRun.start(label, model, likelihood, num_fit_rows, self._optimisers)]
        self.history_, self.validation_elbo_, self.evaluation_seconds_, self.held_out_log_density_ = [], [], [], []
        since, steps, self.stop_reason_ = [], 0, "max_iter"
        bar = tqdm(total=max_steps, desc="SVGP steps", disable=not self.verbose)  # the ELBO in its postfix
        timed_from = time.perf_counter()
        while steps < max_steps:
            if run.failed:  # the kernel matrix broke down (OptimisationRun.step): the race's second start, or the end
                if not (racing and len(runs) == 1):
                    break
                runs.append(run := second_start())
            if steps == WARM_UP_STEPS:
                timed_from = time.perf_counter()
            since.append(run.step(*next(batches)))
            steps += 1
            self.history_.append(since[-1])
            bar.update(1)
            if steps == WARM_UP_STEPS + TIMED_STEPS and self.num_inducing == "auto" and budget is not None:
                per_step = (time.perf_counter() - timed_from) / TIMED_STEPS
                steps_wanted = min(max_steps, MIN_BUDGET_STEPS + (RACE_STEPS if racing else 0))
                smaller = self._budget_inducing(run.model, per_step, budget, steps_wanted)
                if smaller is not None:  # start again at the smaller m, from the same start values
                    bar.close()
                    model, likelihood = self._build(smaller, pool[0], start)
                    return self._train(model, likelihood, batches, validation, num_fit_rows, pool, start)
            elapsed = time.perf_counter() - self._fit_started
            out_of_time = budget is not None and elapsed > budget
            if run.steps % EVALUATION_INTERVAL == 0 or steps == max_steps or out_of_time:
                value = self._evaluate(run, validation, since)
                self.evaluation_seconds_.append(elapsed)
                bar.set_postfix(elbo=f"{float(np.mean(since)):.4f}",
                                **({"held_out": f"{value:.4f}"} if validation is not None else {}))
                if value > run.best_elbo + float(self.tol):
                    run.best_elbo, run.stale = value, 0
                else:
                    run.stale += 1
                since = []
                if racing and run.steps >= RACE_STEPS and not out_of_time:
                    if len(runs) == 1:  # the pilot's start had its race steps: the collapsed start's turn
                        runs.append(run := second_start())
                        continue
                    racing = False
                    run, text = race_winner(runs)
                    self._report(text)
                    continue
                if run.stale >= int(self.patience):
                    self.stop_reason_ = "plateau"
                    break
            if out_of_time:
                self.stop_reason_ = "time_budget"
                break
        bar.close()
        self.stop_reason_ = "numerical" if run.failed else self.stop_reason_
        if racing and len(runs) == 2:  # the budget, max_iter or a failed run ended the race
            run, text = race_winner(runs)
            self._report(text)
        restored = validation is not None and run.restore_best()
        if run.failed and run.best_state is None:
            raise RuntimeError("SVGP: the kernel matrix of the inducing inputs is not positive definite and no earlier "
                               "state was kept; pass fewer num_inducing, a larger noise_lower_bound or float64.")
        self.n_iter_, self.hyperparameter_start_ = steps, run.label
        self.converged_ = self.stop_reason_ == "plateau"
        self._report_stop(steps, max_steps, num_fit_rows)
        if restored:
            self._report(f"restored the state after step {run.best_step} of the {run.label} start's {run.steps}: the "
                         f"best held-out log predictive density, {run.best_log_density:.4f} per row (the last was "
                         f"{self.held_out_log_density_[-1]:.4f}).")
        return run.model, run.likelihood

    def _budget_inducing(self, model: VariationalGP, per_step: float, budget: float,
                         steps_wanted: int) -> torch.Tensor | None:
        """Fewer inducing inputs when ``steps_wanted`` steps do not fit in what is left of the budget (see
        :func:`~tnbayes.models._svgp_steps.fewer_inducing`), or None."""
        left = max(budget - (time.perf_counter() - self._fit_started), 0.0)
        smaller, text = fewer_inducing(model.variational_strategy.inducing_points.detach(), per_step, left,
                                       steps_wanted, MIN_INDUCING, int(self.seed) + 1, ordered=self._inducing_ordered)
        if smaller is not None:
            self._inducing_cap = smaller.shape[0]
            self._report(f"{text} of time_budget={budget:g} s (pass num_inducing or a larger time_budget for more).")
        return smaller

    def _evaluate(self, run: OptimisationRun, validation: tuple[torch.Tensor, torch.Tensor] | None,
                  since: list[float]) -> float:
        """The value the plateau is judged on: the held-out ELBO per row, or the training ELBO since the last
        evaluation. With held-out rows their log predictive density is recorded too (for the race and the best
        state)."""
        if validation is None:
            return float(np.mean(since))
        value, density = run.evaluate_held_out(*validation)
        self.validation_elbo_.append(value)
        self.held_out_log_density_.append(density)
        return value

    def _report_stop(self, steps: int, max_steps: int, num_fit_rows: int) -> None:
        self._report(stop_sentence(self, steps, max_steps, num_fit_rows, EVALUATION_INTERVAL))
        if self.stop_reason_ == "time_budget" and steps < MIN_BUDGET_STEPS:
            warn_user(f"SVGP: the time budget ended the fit after {steps} optimiser steps, too few for a converged "
                      f"fit; pass a larger time_budget, fewer num_inducing or a smaller batch_size.",
                      BudgetWarning)

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
        return latent_moments(self.gp_, X, full_covariance, PREDICTION_CHUNK)

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
        model = VariationalGP(inducing.clone(), kernel, bool(self.natural_gradient), bool(self.learn_inducing))
        model = model.to(dtype=inducing.dtype, device=inducing.device)
        model.load_state_dict(model_state)
        likelihood.load_state_dict(likelihood_state)
        self.gp_, self.likelihood_ = model.eval(), likelihood.eval()


register_model("svgp", SVGP)
register_model("svgp_matern", lambda **kw: SVGP(kernel="matern", nu=2.5, **kw))
