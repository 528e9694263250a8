"""What every model with CPD weights fitted by ALS shares: the rank search, the noise estimate, the Laplace-type
predictive uncertainty and the one layout of the fitted cores (T-KRR's :class:`~tnbayes.CPDKernelMachine`,
:class:`~tnbayes.QTKM`, :class:`~tnbayes.TKM`, :class:`~tnbayes.FeatureLearningKM`; the *models* layer).

A subclass builds its :class:`~tnbayes.basis.TensorProductFeatures` and its penalty λ, then calls
:meth:`CPDModelBase._fit_cpd`; ``posterior`` then works unchanged. Subclasses set ``uncertainty``,
``noise_variance``, ``max_sweeps``, ``tol``, ``chunk_size``, ``seed``, ``verbose`` as constructor
parameters and implement :meth:`_features` (the fitted feature map, rebuilt from fitted attributes). The cores are
kept as ``factors_`` of shape (Σ_k M_k, R), stacked row-wise in mode order.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from tnbayes._warnings import warn_user
from tnbayes.basis import TensorProductFeatures
from tnbayes.inference import CPDALS, summed_core_variances
from tnbayes.inference.budget import BudgetWarning, first_rank_deadline, format_seconds, next_rank_fits_budget
from tnbayes.models.base import MEAN_ONLY_EXPLAINED, BaseModel
from tnbayes.selection.calibration import (HELD_OUT_FRACTION, NOISE_ESTIMATES, held_out_rows,
                                          proportional_noise_estimate)
from tnbayes.selection.input_box import check_out_of_box_policy
from tnbayes.tensors import cpd_predict, design_matrix

__all__ = ["CPDModelBase", "UNCERTAINTY_METHODS", "NOISE_ESTIMATES", "AUTO_RANK_TOLERANCE", "NOISE_LOWER_BOUND",
           "ALS_UNCONVERGED_CHANGE"]


#: how the Laplace-type predictive variance is built (see CPDKernelMachine's Notes)
UNCERTAINTY_METHODS = ("all_cores", "last_core", "none")
#: rank=None stops at the first rank whose residual noise is within this factor of the reference noise
AUTO_RANK_TOLERANCE = 1.1
#: lower bound of an estimated noise variance on the standardised target scale (ExactGP's and HilbertGP's
#: default ``noise_lower_bound``): a constant or interpolated target leaves no residual, but the predictive
#: variance must stay positive and the rank search cannot chase a reference noise of round-off size
NOISE_LOWER_BOUND = 1e-6
#: an ALS fit that used up its sweep budget warns (ConvergenceWarning) when its last sweep still changed the
#: objective by more than max(10·tol, this) relative: ALS approaches its fixed point slowly, and default fits on
#: ordinary data (airfoil, yacht; 300 rows) end their budget still moving by 0.007 %–0.8 % a sweep with good
#: predictions, so only a sweep that still moves the objective by more than 2 % signals an unfinished fit
ALS_UNCONVERGED_CHANGE = 0.02


class CPDModelBase(BaseModel):
    """Base of the CPD models: ALS fit with an optional rank search, Laplace variance, residual noise.

    Attributes set by :meth:`_fit_cpd`
    ----------------------------------
    rank_ : int
    rank_search_ : list of dict
        Ranks tried with their residual noise variance, final objective and fit seconds.
    n_iter_ : int
        ALS sweeps of the kept rank.
    history_ : list of float of length n_iter_
        ALS objective after every sweep of the kept rank (the same as ``sweep_objectives_``).
    converged_ : bool
        Whether a sweep changed the objective by less than ``tol`` (relative) before the sweep budget ran out
        (never with ``tol=0``). A fit that ran out of sweeps while its last sweep still changed the objective by
        more than ``max(10·tol, ALS_UNCONVERGED_CHANGE)`` warns with :class:`sklearn.exceptions.ConvergenceWarning`.
    last_relative_change_ : float
        ``|J_prev − J| / |J_prev|`` of the last sweep.
    update_objectives_ : list of float
        ALS objective after every core update (finer than ``history_``; the first entry is at the initial cores).
    sweep_objectives_ : list of float
        ALS objective after every sweep.
    residual_noise_variance_ : float
        RSS / (N − effective_dof_).
    effective_dof_ : float
        tr((A_dᴴA_d + λP_d)⁻¹ A_dᴴA_d) of the last-updated core (a lower bound on the model's).
    noise_variance_ : float
        The given ``noise_variance``, else the estimate, at least ``NOISE_LOWER_BOUND``.
    held_out_noise_variance_ : float or None
        σ² the model earned on held-out rows (``noise_estimate="held_out"``), None when not estimated.
    laplace_modes_ : list of int
    core_choleskys_ : torch.Tensor of shape (len(laplace_modes_), W, W)
        Cholesky factors of the regularised normal equations of those cores; W = the largest M_d·R
        (smaller cores are zero-padded).
    """

    _given_or_estimated_noise: float | None = None
    #: the constructor parameter that sets the sweep budget (named by the ConvergenceWarning)
    _sweep_budget_parameter: str = "max_sweeps"

    def _check_shared_parameters(self) -> None:
        """The checks of the parameters every CPD model has: ``rank``, ``uncertainty``, ``out_of_box``, ``tol`` and
        ``chunk_size`` (errors that say what is allowed)."""
        if self.rank is not None and (isinstance(self.rank, bool) or not isinstance(self.rank, (int, np.integer))
                                      or int(self.rank) < 1):
            raise ValueError(f"rank must be a positive integer (or None to choose it from the data); got {self.rank!r}.")
        if self.uncertainty not in UNCERTAINTY_METHODS:
            raise ValueError(f"uncertainty must be one of {UNCERTAINTY_METHODS}; got {self.uncertainty!r}.")
        check_out_of_box_policy(self.out_of_box)
        if not math.isfinite(float(self.tol)) or float(self.tol) < 0:
            raise ValueError(f"tol must be a finite number >= 0; got {self.tol!r}.")
        if self.chunk_size is not None and (isinstance(self.chunk_size, bool) or int(self.chunk_size) != self.chunk_size
                                            or int(self.chunk_size) < 1):
            raise ValueError(f"chunk_size must be a positive integer (rows per chunk); got {self.chunk_size!r}.")

    def _features(self) -> TensorProductFeatures:  # pragma: no cover - abstract
        """The fitted feature map, rebuilt from the fitted attributes (``features_`` is not saved)."""
        raise NotImplementedError

    def _store_factors(self, factors: Sequence[torch.Tensor]) -> None:
        """Keep the cores as ``factors_``: stacked row-wise, shape (Σ_k M_k, R) (cores may differ in size) — the one
        layout of every CPD model."""
        self.factors_ = torch.cat(list(factors), dim=0)

    def _factor_list(self) -> list[torch.Tensor]:
        return list(torch.split(self.factors_, self.features_.mode_sizes, dim=0))

    def cores(self) -> list[torch.Tensor]:
        """The fitted CPD cores, one per mode.

        Returns
        -------
        list of torch.Tensor of shape (M_k, R)
            In the feature map's mode order (quantized maps: all factors of input 0, then input 1, …).
        """
        self._check_fitted("cores")
        return [core.clone() for core in self._factor_list()]

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        self._adopt_stored_names()
        self.features_ = self._features()

    def _adopt_stored_names(self) -> None:
        """Bring a file saved before tnbayes 0.2 to the current layout (idempotent): CPDKernelMachine's (D, M, R)
        cores become the (Σ_k M_k, R) layout (renamed parameters were moved by the model-file reader)."""
        if self.factors_.ndim == 3:
            self.factors_ = self.factors_.reshape(-1, self.factors_.shape[-1])

    # ------------------------------------------------------------------ fitting
    def _component_weights(self) -> torch.Tensor | None:
        """Mixture weights of the fitted feature map (None: one component, or all ones)."""
        return None

    def _fit_cpd(self, features: TensorProductFeatures, X: torch.Tensor, y: torch.Tensor, ranks: Sequence[int],
                 penalty: float, reference_noise: float | None, *, penalty_form: str = "full",
                 component_weights: torch.Tensor | None = None, between_sweeps=None,
                 max_sweeps: int | None = None, initial_factors: Sequence[torch.Tensor] | None = None,
                 sweeps_within_budget: bool = False) -> CPDALS:
        """Run ALS for each rank in turn; keep the first whose residual noise is within 10% of the reference.

        Parameters
        ----------
        features : TensorProductFeatures
        X : torch.Tensor of shape (N, D) or StreamedRows
            Scaled training inputs (this process's shard in a distributed fit), or a streamed source.
        y : torch.Tensor of shape (N,), or None for a streamed source
        ranks : sequence of int
            Ranks to try in order (one entry: no search).
        penalty : float
            λ of the engine's objective ``‖y − f‖² + λ·pen(W)``.
        reference_noise : float, optional
            The noise variance the model should explain the data down to (None: keep the first rank).
        penalty_form : {"full", "diagonal"}
        component_weights : torch.Tensor of shape (P,), optional
            Initial mixture weights of a P-component feature map.
        between_sweeps : callable, optional
            Passed to :meth:`CPDALS.run` (FL updates its mixture weights there).
        max_sweeps : int, optional
            Sweep budget (default ``self.max_sweeps``).
        initial_factors : sequence of torch.Tensor of shape (M_k, R), optional
            Initial cores (one rank only; default: the engine's seeded random draw).
        sweeps_within_budget : bool
            End ALS when another sweep would end past ``time_budget`` (counted from the start of ``fit``), as a
            model without a rank search needs (FL); reported in ``fit_report_`` with a
            :class:`~tnbayes.inference.budget.BudgetWarning`. Without it, with a ``time_budget`` and ``rank=None``
            (on one process), the first rank's sweeps (which no measurement predicts) end where another would leave
            the held-out refit too little of the budget (:func:`~tnbayes.inference.budget.first_rank_deadline`), or
            at the budget without a refit; later ranks run only when the previous one predicts that they fit. The
            held-out refit's sweeps then end at the budget. A given ``rank`` is not stopped.

        Returns
        -------
        CPDALS
            The engine of the kept rank.
        """
        ranks = list(ranks) if reference_noise is not None else list(ranks)[:1]
        if reference_noise is not None:  # no rank can be told apart from another below the noise floor
            reference_noise = max(float(reference_noise), NOISE_LOWER_BOUND)
        time_budget = getattr(self, "time_budget", None)
        sweep_budget = int(self.max_sweeps if max_sweeps is None else max_sweeps)
        budget_end = None if time_budget is None else self._fit_started + float(time_budget)
        deadline = budget_end if sweeps_within_budget else None
        held_out_refit = self._estimates_noise_on_held_out_rows(X, between_sweeps)
        # an automatic rank on one process (each process of a distributed fit would judge its own clock)
        searched_within_budget = (budget_end is not None and getattr(self, "rank", None) is None
                                  and not bool(getattr(self, "distributed", False)))
        self.rank_search_ = []
        over_budget = None  # (next rank, its predicted seconds, the fit's predicted end) when the budget stopped it
        for index, rank in enumerate(ranks):
            started = time.perf_counter()
            engine = CPDALS(features, X, y, int(rank), penalty, penalty_form=penalty_form, chunk_size=self.chunk_size,
                            seed=int(self.seed), component_weights=component_weights, factors=initial_factors,
                            distributed=bool(getattr(self, "distributed", False)))
            rank_deadline = deadline
            if rank_deadline is None and searched_within_budget and index == 0:  # no measured rank predicts it
                rank_deadline = first_rank_deadline(started, budget_end, held_out_refit)
            engine.run(sweep_budget, float(self.tol), progress=bool(self.verbose), between_sweeps=between_sweeps,
                       deadline=rank_deadline)
            if engine.stopped_at_deadline:
                why = ("left the held-out refit too little of" if deadline is None and held_out_refit else
                       "ended past")
                message = (f"{type(self).__name__}: the time budget ended ALS after {len(engine.sweep_objectives)} "
                           f"of {sweep_budget} sweeps (another would have {why} time_budget={float(time_budget):g} s); "
                           f"pass a larger time_budget, a smaller rank (now {int(rank)}) or fewer max_sweeps.")
                self._report(message)
                warn_user(message, BudgetWarning)
            seconds = time.perf_counter() - started
            residual = self._residual_noise(engine, engine.num_rows, penalty)
            self.rank_search_.append({"rank": int(rank), "residual_noise_variance": residual,
                                      "objective": engine.history[-1], "seconds": seconds})
            if reference_noise is None or residual <= AUTO_RANK_TOLERANCE * reference_noise:
                break
            if index + 1 < len(ranks):
                elapsed = time.perf_counter() - self._fit_started
                fits, predicted = next_rank_fits_budget(time_budget, elapsed, seconds, int(rank), int(ranks[index + 1]),
                                                        held_out_refit)
                if not fits:
                    over_budget = (int(ranks[index + 1]), predicted, elapsed + predicted)
                    break
        self.rank_ = engine.rank
        if len(ranks) > 1:
            if residual <= AUTO_RANK_TOLERANCE * reference_noise:
                reason = "its residual noise is within {:.0%} of the reference noise".format(AUTO_RANK_TOLERANCE - 1)
            elif over_budget is not None:
                reason = (f"the time budget: rank {over_budget[0]} was predicted to take "
                          f"{format_seconds(over_budget[1])} (the (R'/R)² scaling of rank {engine.rank}'s "
                          f"{format_seconds(seconds)}{', with the held-out refit' if held_out_refit else ''}), which "
                          f"would end the fit after {format_seconds(over_budget[2])}, past time_budget={time_budget:g} s;"
                          f" pass rank={over_budget[0]} or a larger time_budget to fit it")
            else:
                reason = "it is the largest rank tried"
            self._report(f"rank R = {engine.rank} of {[int(r) for r in ranks]}: {reason} "
                         f"(residual noise {residual:.3g}, reference {reference_noise:.3g}, standardised scale).")
        if engine.start.kind == "mean feature":
            self._report(engine.start.describe(engine.real_dtype) + ".")
        self._store_factors(engine.factors)
        self.update_objectives_ = list(engine.history)
        self.sweep_objectives_ = list(engine.sweep_objectives)
        self.history_ = list(engine.sweep_objectives)
        self.n_iter_ = len(self.history_)
        self.converged_ = bool(engine.converged)
        self.last_relative_change_ = float(engine.last_relative_change)
        if not engine.stopped_at_deadline:  # a deadline's stop has warned already
            self._warn_if_unconverged(sweep_budget)
        self._warn_if_mean_only(engine, features.num_modes, residual, reference_noise)
        held_out = None
        if held_out_refit:
            held_out = self._held_out_noise(features, X, y, engine.rank, penalty, penalty_form, component_weights,
                                            max_sweeps, initial_factors, budget_end if searched_within_budget else None)
        self._store_laplace(engine, residual, penalty, held_out)
        self._check_fit_seconds(time_budget, held_out_refit)
        return engine

    def _warn_if_unconverged(self, sweep_budget: int) -> None:
        """Warn (``ConvergenceWarning``) when the sweep budget ended ALS while the last sweep still changed the
        objective by more than ``max(10·tol, ALS_UNCONVERGED_CHANGE)`` (relative); ``tol=0`` asks for the full
        budget and never warns."""
        tol = float(self.tol)
        change = self.last_relative_change_
        if self.converged_ or tol <= 0 or not change > max(10.0 * tol, ALS_UNCONVERGED_CHANGE):
            return
        budget = self._sweep_budget_parameter
        warn_user(f"{type(self).__name__}: ALS stopped at {budget}={sweep_budget} with the objective still "
                  f"changing by {change:.3g} (relative) in its last sweep, far above tol={tol:g}; pass a larger "
                  f"{budget} (or a larger tol) for a converged fit.", ConvergenceWarning)

    def _warn_if_mean_only(self, engine: CPDALS, modes: int, residual: float,
                           reference_noise: float | None) -> None:
        """Warn (``ConvergenceWarning``) when the reference noise (given, or from the hyper-parameter fit) is below
        half the fit's residual noise and the fit explains under :data:`MEAN_ONLY_EXPLAINED` of yᵀy: it predicts about
        the mean of the standardised targets (about 0 without ``normalize_y``). Where every core is exactly zero the
        likely cause is named: with many modes, or in float32, the products of the starting cores underflow (they
        shrink geometrically with the number of modes; where the random draw's do, ALS starts from the mean features,
        see :mod:`tnbayes.inference.als_start`, and this is where even theirs do), the core updates see no data and
        ALS stays at W = 0."""
        if reference_noise is None or not reference_noise < 0.5 * residual or not engine.yy > 0:
            return
        rss = residual * max(engine.num_rows - self.effective_dof_, 1.0)  # _residual_noise's RSS, no second pass
        explained = 1.0 - rss / engine.yy
        if explained >= MEAN_ONLY_EXPLAINED:
            return
        message = (f"{type(self).__name__}: ALS explains {max(explained, 0.0):.1%} of the variation of y while the "
                   f"reference noise ({reference_noise:.3g}, against a residual noise of {residual:.3g}) says most "
                   f"of it can be explained: the model predicts about the mean of y. ")
        if all(not bool(factor.any()) for factor in engine.factors):
            dtype = str(engine.real_dtype).replace("torch.", "")
            message += (f"Every core is zero: the products of the starting cores ({engine.start.kind}) over its "
                        f"{modes} modes likely underflowed in {dtype}, so ALS never left W = 0; "
                        + ("pass dtype=torch.float64." if engine.real_dtype != torch.float64 else
                           "use fewer modes (fewer inputs or basis functions; QTKM: quantized=False)."))
        else:
            message += "Check a given penalty (a smaller one) or noise_variance (a larger one)."
        self._report(message)
        warn_user(message, ConvergenceWarning)

    def _check_fit_seconds(self, time_budget: float | None, held_out_refit: bool) -> None:
        """Report the fit's seconds; warn (:class:`~tnbayes.inference.budget.BudgetWarning`) with the settings to
        pass when the fit took more than 1.5 times ``time_budget`` (the rank search predicts only the ranks after
        the first)."""
        seconds = time.perf_counter() - self._fit_started
        if time_budget is None:
            return
        self._report(f"fit {format_seconds(seconds)} of time_budget={float(time_budget):g} s "
                     f"(ranks tried: {[entry['rank'] for entry in self.rank_search_]}).")
        if seconds > 1.5 * float(time_budget):
            cheaper = [f"a smaller rank (now {self.rank_})"]
            if held_out_refit:
                cheaper.append("noise_estimate='training' (skips the refit on held-out rows)")
            cheaper.append("fewer max_sweeps")
            warn_user(f"{type(self).__name__}: the fit took {format_seconds(seconds)}, past "
                      f"time_budget={float(time_budget):g} s (ranks tried: "
                      f"{[entry['rank'] for entry in self.rank_search_]}); for a faster fit "
                      f"pass {', '.join(cheaper)}, or time_budget=None to silence this warning.",
                      BudgetWarning)

    def _estimates_noise_on_held_out_rows(self, X, between_sweeps) -> bool:
        """Whether σ² comes from held-out rows: ``noise_estimate="held_out"``, no given ``noise_variance``, rows in
        memory on one process, and no mixture weights learned between sweeps."""
        return (getattr(self, "noise_estimate", "training") == "held_out" and self.noise_variance is None
                and isinstance(X, torch.Tensor) and not bool(getattr(self, "distributed", False))
                and between_sweeps is None)

    def _held_out_noise(self, features: TensorProductFeatures, X: torch.Tensor, y: torch.Tensor, rank: int,
                        penalty: float, penalty_form: str, component_weights: torch.Tensor | None,
                        max_sweeps: int | None, initial_factors, deadline: float | None = None) -> float | None:
        """σ² the model earns on held-out rows: refit the kept rank on the other rows (same features and λ; its
        sweeps end before one that would end past ``deadline``, a ``time.perf_counter()`` value), then
        :func:`~tnbayes.selection.calibration.proportional_noise_estimate` of the held-out residuals under the
        Laplace variance ``σ²(1 + q)``. None when too few rows (see ``held_out_rows``)."""
        split = held_out_rows(X.shape[0], int(self.seed), device=X.device)
        if split is None:
            return None
        fitted, held = split
        engine = CPDALS(features, X[fitted], y[fitted], int(rank), penalty, penalty_form=penalty_form,
                        chunk_size=self.chunk_size, seed=int(self.seed), component_weights=component_weights,
                        factors=initial_factors)
        engine.run(int(self.max_sweeps if max_sweeps is None else max_sweeps), float(self.tol), progress=False,
                   deadline=deadline)
        if engine.stopped_at_deadline:
            sweeps = len(engine.sweep_objectives)
            self._report(f"the held-out refit stopped after {sweeps} sweep{'s' * (sweeps != 1)} at the time budget "
                         f"(unconverged: its held-out σ² may be too large).")
        modes, choleskys = self._laplace_systems(engine)
        mean = cpd_predict(features, engine.factors, X[held], component_weights).real
        relative = summed_core_variances(features, engine.factors, modes, choleskys, X[held],
                                         component_weights=component_weights) if modes else torch.zeros_like(mean)
        return proportional_noise_estimate(y[held] - mean, relative)

    def _residual_noise(self, engine: CPDALS, n: int, penalty: float) -> float:
        """RSS / (N − tr((G + λP)⁻¹G)) with the effective degrees of freedom of the last core."""
        last = engine.last_system
        # a direct pass (the normal-equation form yᵀy − 2bᵀv + vᵀGv cancels badly in float32); the real part only:
        # complex features are fitted by complex least squares, but y is observed through Re f, and the
        # imaginary residual the fit also penalises is not noise in y
        rss = engine.residual_sum_of_squares()
        self.effective_dof_ = float(torch.cholesky_solve(last.gram, last.cholesky).diagonal().real.sum())
        return rss / max(n - self.effective_dof_, 1.0)

    def _laplace_systems(self, engine: CPDALS) -> tuple[list[int], list[torch.Tensor]]:
        """The cores whose conditional posteriors make the Laplace variance (``uncertainty``) and the Cholesky
        factors of their regularised normal equations, in mode order."""
        last = engine.last_system
        systems = {} if self.uncertainty == "none" else {last.mode: last.cholesky}
        if self.uncertainty == "all_cores":
            for mode in range(engine.features.num_modes):
                if mode not in systems:
                    system = engine.normal_equations(mode)
                    engine.solve_core(system)
                    systems[mode] = system.cholesky
        modes = sorted(systems)
        return modes, [systems[mode] for mode in modes]

    def _store_laplace(self, engine: CPDALS, residual_noise_variance: float, penalty: float,
                       held_out_noise_variance: float | None = None) -> None:
        self.residual_noise_variance_ = residual_noise_variance
        self.held_out_noise_variance_ = held_out_noise_variance
        if self.noise_variance is not None:
            self.noise_variance_ = float(self.noise_variance)
        elif held_out_noise_variance is not None:
            # what the model's own errors on rows it did not see call for (tnbayes.selection.calibration)
            self.noise_variance_ = float(held_out_noise_variance)
            self._report(f"noise variance {self.noise_variance_:.3g} (standardised scale) from the errors on "
                         f"{HELD_OUT_FRACTION:.0%} held-out rows of a refit on the others (marginal-likelihood or "
                         f"reference noise {self._given_or_estimated_noise or float('nan'):.3g}, training residual "
                         f"{residual_noise_variance:.3g}).")
        elif self._given_or_estimated_noise is not None:
            # a rank-limited fit that leaves more residual than the reference noise carries that misfit as noise
            self.noise_variance_ = max(self._given_or_estimated_noise, self.residual_noise_variance_)
        else:
            self.noise_variance_ = self.residual_noise_variance_
        if self.noise_variance is None:  # an exact fit (a constant target) leaves no residual: keep σ² positive
            self.noise_variance_ = max(self.noise_variance_, NOISE_LOWER_BOUND)
        last = engine.last_system
        self.laplace_modes_, choleskys = self._laplace_systems(engine)
        width = max([chol.shape[0] for chol in choleskys], default=last.gram.shape[0])
        # cores of different sizes (a quantized M = 12 has factors 2, 2, 3) are zero-padded to one width;
        # _cholesky(i) cuts them back
        padded = torch.zeros(len(choleskys), width, width, dtype=last.gram.dtype, device=last.gram.device)
        for i, cholesky in enumerate(choleskys):
            size = cholesky.shape[0]
            padded[i, :size, :size] = cholesky
        self.core_choleskys_ = padded

    def _cholesky(self, index: int, mode: int) -> torch.Tensor:
        size = self._factor_list()[mode].numel()
        return self.core_choleskys_[index, :size, :size]

    # ------------------------------------------------------------------ prediction
    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        factors = self._factor_list()
        weights = self._component_weights()
        mean = cpd_predict(self.features_, factors, X, weights).real
        noise = float(self.noise_variance_)
        if full_covariance:
            cov = torch.zeros(X.shape[0], X.shape[0], dtype=mean.dtype, device=mean.device)
            for index, mode in enumerate(self.laplace_modes_):
                design = design_matrix(self.features_, factors, X, mode, weights)
                whitened = torch.linalg.solve_triangular(self._cholesky(index, mode), design.mH, upper=False)
                cov = cov + noise * (whitened.mH @ whitened).real
            return mean, cov
        choleskys = [self._cholesky(index, mode) for index, mode in enumerate(self.laplace_modes_)]
        variance = noise * summed_core_variances(self.features_, factors, self.laplace_modes_, choleskys, X,
                                                 component_weights=weights)
        return mean, variance.to(mean.dtype)

    @property
    def num_parameters(self) -> int:
        """Number of weights Σ_k M_k·R of the fitted CPD (complex weights count once)."""
        self._check_fitted("num_parameters")
        return int(sum(f.numel() for f in self._factor_list()))
