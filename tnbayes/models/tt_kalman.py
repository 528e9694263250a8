"""TTKalmanGP: Bayesian regression over all M^D weights of a tensor-product basis, by a tensor-train Kalman filter.

Model (standardised inputs and targets), by default the product Hilbert-GP of :class:`~tnbayes.HilbertGP`::

    y = c + φ(x)ᵀ v + ε,   φ(x) = φ_1(x_1) ⊗ … ⊗ φ_D(x_D)  (Laplace eigenfunctions, M per input),
    v ~ N(0, P₀),  P₀ = σ_f² ⊗_d diag(S_d(√λ_{d,j})),   ε ~ N(0, σ²)

with S_d the 1-D spectral density of the kernel for input d (a product kernel: for SE this *is* the ARD SE
kernel; for Matérn it is the product of 1-D Matérn kernels, as in ``HilbertGP(structure="product")``). Any other
basis with a diagonal Gaussian prior on the weights works the same way (``basis=``, see
:mod:`tnbayes.models._tt_kalman_basis`): the TT Kalman filter is any basis + TT + Kalman.

The posterior over the M^D weights is computed by the batch square-root Kalman filter of
:mod:`tnbayes.inference.kalman.tt_batch` (the formulas are in its module docstring): the mean m a TT-vector, the
covariance root L = L₀ − C with L₀ the exact rank-1 prior root and C a rounded TT-matrix. Predictions contract φ(x)
with the TT objects: mean c + φᵀm, variance ‖Lᵀφ‖² — never an M^D dense matrix.

A rank cap loses what each rounding drops, in the order the rows came; ``smoothing="als"`` (default) then sweeps the
mean to the MAP among TTs of its ranks (:mod:`tnbayes.inference.tt_als`) and predicts with the Laplace variance
around it (the capped filter's covariance is wider than the posterior's: what it cannot represent stays prior).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from typing import Any

import torch

from tnbayes._deprecation import DEPRECATED
from tnbayes._sizes import check_fits_in_memory
from tnbayes._validation import ArrayLike, check_positive
from tnbayes.basis import HilbertBasis, TensorProductFeatures, resolve_kernel
from tnbayes.data import StreamedRows
from tnbayes.inference.budget import (
    BATCH_SIZE_SAVING,
    TT_KALMAN_BATCH_SIZES,
    TT_KALMAN_RANK_LADDER,
    check_time_budget,
    filter_budget,
    given_max_rows,
    plan_within_budget,
    SMOOTHING_BUDGET_SHARE,
    tt_kalman_seconds_per_row,
)
from tnbayes.inference.kalman import TTBatchKalmanFilter, filter_stream, kalman_batch_update
from tnbayes.models._kalman_common import KalmanModelMixin
from tnbayes.models._tt_kalman_basis import TTKalmanBasisMixin, check_basis, make_feature_map
from tnbayes.models._tt_smoothing import TTSmoothingMixin
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model
from tnbayes.selection.calibration import PrequentialResiduals, check_noise_estimate
from tnbayes.selection.input_box import check_out_of_box_policy
from tnbayes.tensors import has_tt_state, tt_from_state, tt_gram, tt_state

#: ``kalman_batch_update`` moved to :mod:`tnbayes.inference.kalman`; importing it from here keeps working
__all__ = ["SMOOTHING_METHODS", "TTKalmanGP", "kalman_batch_update"]

#: the values of ``smoothing``: ALS to the MAP among TTs of the filter's ranks with a Laplace variance, or none
SMOOTHING_METHODS = ("als", "none")




class TTKalmanGP(TTSmoothingMixin, TTKalmanBasisMixin, KalmanModelMixin, BaseModel):
    """Bayesian regression over all M^D tensor-product basis weights, by a square-root tensor-train Kalman filter.

    ``TTKalmanGP().fit(X, y)`` standardises X and y, estimates the kernel hyper-parameters (ARD lengthscales,
    σ_f², σ²) by exact-GP marginal likelihood on a subsample of at most ``hyper_max_points`` rows, chooses the
    Hilbert box and M from the lengthscales (the tightened Riutort-Mayol rule of :class:`~tnbayes.HilbertGP`,
    M capped at ``max_num_basis``), and filters the rows in mini-batches. With another ``basis`` the same filter
    runs over that basis's weights.

    Parameters
    ----------
    kernel : {"se", "matern12", "matern32", "matern52", "matern"}
        1-D kernel per input; the model's kernel is their product (for SE: the ARD SE kernel).
    nu : float, optional
        Matérn smoothness for ``kernel="matern"``.
    basis : {"hilbert", "polynomial"} or TensorProductFeatures
        The weights the filter runs over, each with an independent Gaussian prior. ``"hilbert"`` (default): the
        Laplace eigenfunctions of a box weighted by √S of ``kernel`` — a Hilbert-space GP with that kernel,
        hyper-parameters from an exact GP's marginal likelihood. ``"polynomial"``: the powers 1, x, …, x^{M−1} of
        every standardised input (M = ``num_basis``, default 4) and all their products, weights ~ N(0, σ_f²) —
        Bayesian polynomial regression, predicting anywhere. A :class:`~tnbayes.basis.TensorProductFeatures`
        instance (built for the standardised inputs): its features with weights ~ N(0, σ_f²); it must be real
        (the filter is real: complex Fourier features are refused), have one component and modes of one size
        (e.g. ``FourierPolynomialFeatures(D, 8, "polynomial", quantized=True)``: 3D modes of size 2, or
        ``BasisFeatures`` of a fixed Hilbert basis). For any basis but ``"hilbert"``, missing ``outputscale`` and
        ``noise_variance`` maximise the marginal likelihood of that Bayesian linear regression on at most
        ``hyper_max_points`` rows, ``kernel``, ``nu``, ``lengthscale``, ``c`` and ``max_num_basis`` do not apply,
        and a model with an instance cannot be saved (a string basis can).
    num_basis : int, optional
        M per input (default from the lengthscales, at most ``max_num_basis``).
    c : float or list of float, optional
        Box half-width factor per input (default from the lengthscales).
    lengthscale, outputscale, noise_variance : optional
        Fix a hyper-parameter (standardised scale) instead of estimating it. A given ``noise_variance`` is also the
        predictive noise (no held-out estimate).
    mean_constant : float
        c, the constant mean on the standardised scale (default 0: y is centred).
    batch_size : int or "auto"
        Rows per Kalman update (a rank-B measurement block). ``"auto"`` (default): 8, or with ``time_budget`` the
        size in :data:`~tnbayes.inference.budget.TT_KALMAN_BATCH_SIZES` with the lowest predicted cost per row
        when it is predicted to save at least :data:`~tnbayes.inference.budget.BATCH_SIZE_SAVING` of it.
    tol : float
        Relative TT-rounding tolerance after every update (0: exact up to round-off; ranks then grow to
        the full ones). The mean is rounded in the prior's coordinates ``L₀⁻¹m`` (each weight over its prior
        standard deviation, see :mod:`tnbayes.inference.kalman.tt_batch`).
    max_rank : int, "auto" or None
        Cap of the TT ranks of the mean and of the covariance correction C after rounding (the root
        L = L₀ − C then has rank ≤ max_rank + 1). ``"auto"`` (default): 10, or with ``time_budget`` the largest
        cap of :data:`~tnbayes.inference.budget.TT_KALMAN_RANK_LADDER` that fits. ``None``: only ``tol``
        truncates (exact when 0; ranks then grow with the data and the cost with their cube). Truncation
        error shrinks with the cap — see ``benchmarks/results/tt_kalman_cost/tt_kalman_cost.md`` for the cost and the tests for
        the accuracy.
    forgetting_factor : float
        λ ∈ (0, 1]: the covariance is divided by λ before each batch (1: no forgetting, the exact posterior).
    smoothing : {"als", "none"}
        ``"als"`` (default): after the filter, ALS sweeps move its mean to the MAP of the same Gaussian model among
        TTs of the mean's ranks, over every training row (a fraction of the filter's cost per row: where a budget
        limits the rows, the filter streams fewer and the smoothing sweeps all, or as many as
        :data:`~tnbayes.inference.budget.SMOOTHING_BUDGET_SHARE` of the budget allows), and the predictive
        variance is the Laplace variance around it (see :mod:`tnbayes.inference.tt_als`; the filter's covariance root stays in
        ``posterior_cov_sqrt_tt_``). Skipped with a ``forgetting_factor`` below 1 (the filter then tracks a
        drifting state that a static MAP does not describe) and without a rank cap below the largest TT rank (the
        filter is then exact up to ``tol``). ``"none"``: the filter's mean and covariance.
    max_sweeps : int
        Most ALS sweeps of the smoothing (a sweep solves every core left to right, then right to left).
    sweep_tol : float
        The smoothing stops when a sweep changes its objective by less than this fraction. With ``time_budget``
        it also stops before a sweep that would end past the budget, after the sweeps the budget's plan includes
        (:data:`~tnbayes.inference.budget.TT_SMOOTHING_PLANNED_SWEEPS`; with the noise estimated on held-out
        rows, those on the other rows, then one over all).
    early_stopping_tol : float, optional
        Stop filtering once a batch lowers tr(P) by less than this fraction of the reduction achieved by all
        batches so far, ``patience`` batches in a row (the posterior then conditions on the rows seen so far;
        ``rows_used_`` says how many).
    patience : int
        Batches in a row that must lower tr(P) too little before the filter stops.
    max_num_basis : int or "auto"
        Upper limit of the automatic M (when the lengthscale rule asks for more than the limit, an
        ``ApproximationWarning`` says so). ``"auto"`` (default): 8, or with ``time_budget`` the largest M up to
        :data:`~tnbayes.inference.budget.TT_KALMAN_MAX_NUM_BASIS` that fits (never below 8 or above the rule's M).
    max_rows : int, "auto" or None
        Filter at most this many rows (the first of the random row order; for a chunk source, of the chunks in
        their order); None: all. ``"auto"`` (default): all, or with ``time_budget`` as many as the budget allows
        (at least :data:`~tnbayes.inference.budget.MIN_ROWS`).
    time_budget : float or None
        Seconds the fit should take (default 60). The settings not given — ``max_rank``, ``max_num_basis``,
        ``batch_size``, ``max_rows`` — are chosen by a cost model of the seconds per row
        (:mod:`tnbayes.inference.budget`): the rule's M (up to the ceiling) and the largest rank cap of the
        ladder that filter every row within the budget (a quarter of it is kept for estimating missing
        hyper-parameters, all the seconds the estimate took when it took more), else M = 8 and the largest cap
        that does, else fewer rows at rank 6 and M = 8. A
        budget that even those settings exceed raises a :class:`~tnbayes.inference.budget.BudgetWarning` naming
        the settings to pass. None: no budget (rank cap 10, M ≤ 8, batches of 8, every row). With
        ``max_rows="auto"`` the budget also holds on a machine slower than the cost model's: every
        :data:`~tnbayes.inference.stream_deadline.DEADLINE_CHECK_ROWS` rows the filter measures its seconds per row
        and stops where the time left affords no more rows before
        :data:`~tnbayes.inference.stream_deadline.DEADLINE_GRACE` of ``time_budget`` past it, less the smoothing's
        predicted seconds (in memory a random sample of the rows, which stream in a random order; a chunk source is
        shuffled within each chunk only; at least
        :data:`~tnbayes.inference.budget.MIN_ROWS`; a :class:`~tnbayes.inference.budget.BudgetWarning` says
        so). With or without a budget the filter runs on one torch thread, in torch's inference mode
        (:func:`~tnbayes.inference.kalman.filter_stream`).
    noise_estimate : {"held_out", "training"}
        With smoothing, ``"held_out"`` (default; rows in memory) refits the smoothing without a seeded 20% of its
        rows and sets the predictive σ² — the scale of the noise and of the Laplace variance, σ²(1 + q) — from
        their errors (as the CPD models do), never below the marginal-likelihood σ²; ``"training"`` or a chunk source keeps the marginal-likelihood σ².
        Without smoothing, ``"held_out"``: the last 20% of the rows the filter processes are first predicted from the
        state before them (a prequential hold-out that costs no refit and loses no row), and the predictive
        noise is the marginal-likelihood σ² plus the extra variance their errors call for
        (:func:`~tnbayes.selection.calibration.additive_variance_estimate`): a truncated filter or a small M
        predicts worse than the exact GP whose σ² it borrowed; when those rows are predicted worse than by the prior
        (:data:`~tnbayes.selection.calibration.LOST_DATA_ERROR_RATIO`), the fit warns that the filter has lost the
        data. ``"training"``: the predictive noise is that σ².
    hyper_max_points : int
        Subsample size of the marginal-likelihood fit.
    seed : int
        Seed of the subsample and of the row order (rows are filtered in a random order; for a chunk source,
        ``fit(tnbayes.data.ChunkedData)``, the chunks are filtered in their order, each one shuffled: a
        single pass, one chunk in memory).
    out_of_box : {"clip", "raise"}
        Test inputs beyond the prediction box (the training range plus half the Hilbert box's margin, see
        :meth:`input_box`) are clipped to its edge with one :class:`~tnbayes.selection.OutOfBoxWarning` that
        counts them (default), or refused with a ``ValueError``.
    normalize_y, dtype, device, verbose : see :class:`~tnbayes.models.base.BaseModel`
    forgetting : float
        Deprecated alias of ``forgetting_factor``.

    Attributes
    ----------
    posterior_mean_tt_ : TTVector with modes (M, …, M)
        Posterior mean of the weights v.
    posterior_cov_sqrt_tt_ : TTMatrix
        The filter's L with P = L Lᵀ (its posterior covariance of v; with smoothing the predictions use
        ``smoothing_laplace_`` instead).
    smoothing_laplace_ : TTLaplace or None
        The smoothed mean's TT in whitened weights (both gauges) and its Laplace variance factors (None: no
        smoothing).
    smoothing_history_ : list of float
        The smoothing's objective ‖y − Φv‖² + σ² vᵀP₀⁻¹v (standardised scale) after every core update; empty
        without smoothing.
    smoothing_sweeps_ : int
        ALS sweeps the smoothing ran (0: none).
    smoothing_converged_ : bool
        Whether ``sweep_tol`` ended the smoothing.
    smoothing_seconds_ : float
        Seconds the smoothing took (its held-out refit included; 0: none).
    prior_root_ : torch.Tensor of shape (D, M)
        Diagonals of the factors of L₀ (the prior root, scaled by any forgetting).
    posterior_cov_correction_tt_ : TTMatrix or None
        C with L = L₀ − C (None: no row filtered); with ``prior_root_`` the state
        :meth:`condition_on_observations` goes on from.
    basis_ : HilbertBasis or TensorProductFeatures
        The fitted basis (``basis="hilbert"``) or feature map.
    lengthscale_ : torch.Tensor of shape (D,) or None
        None for a basis other than ``"hilbert"``.
    outputscale_, mean_constant_ : float
    hyperparameter_source_ : str
        Where ℓ, σ_f², σ² come from (``"given"`` or the marginal-likelihood fit's description).
    measurement_noise_ : float
        σ² of the filter's measurement model (given ``noise_variance``, else the marginal-likelihood estimate).
    noise_variance_ : float
        σ² of the predictive distribution: ``measurement_noise_``, or with ``noise_estimate="held_out"`` the
        held-out estimate (smoothing: the σ² of the refit's held-out rows, which also scales the Laplace variance;
        no smoothing: ``measurement_noise_`` plus the extra variance the filter's errors on its last rows call for).
    held_out_noise_variance_ : float or None
        That held-out estimate (None: not estimated).
    num_basis_ : int
    rank_history_ : list of tuple
        Largest TT rank of (mean, correction C) after every batch (the root is L₀ − C, rank + 1).
    trace_history_ : list of float
        tr(P) after every batch.
    n_iter_ : int
        Batches the filter processed (its iterations).
    history_ : list of float of length n_iter_
        tr(P) after every batch (``trace_history_``): the quantity early stopping watches.
    converged_ : bool
        Whether early stopping (``early_stopping_tol``) ended the filter before its last batch.
    rows_used_ : int
    seconds_per_row_ : float
    max_rank_, batch_size_ : int or None
        The rank cap and batch size the filter used (given or chosen by the budget).
    budget_ : dict
        What the time budget chose and why: ``time_budget``, ``filter_budget`` (the seconds the filter planned
        with, after ``smoothing_reserve``, the seconds kept for the smoothing), ``smoothing_rows``,
        ``smoothing_predicted_seconds``, ``settings`` (``max_rank``, ``num_basis``, ``batch_size``,
        ``max_rows``), ``chosen`` (those the budget filled in), ``rule_num_basis`` (the lengthscale rule's M), ``rows``, ``num_rows``,
        ``predicted_seconds_per_row``, ``predicted_seconds``, ``within_budget``, ``default_settings`` and
        ``default_seconds`` (the first candidate over every row), ``ladder`` (every candidate with its predicted
        seconds per row), and after the fit ``hyperparameter_seconds``, ``filter_seconds``, ``seconds_per_row``
        and ``fit_seconds`` (measured), ``planned_rows`` (= ``rows``) and ``stopped_at_deadline`` (whether the
        budget's deadline stopped the filter early, see ``time_budget``).
    """

    input_scaling = "standard"
    _transient_attributes = ("basis_", "posterior_mean_tt_", "posterior_cov_sqrt_tt_",
                             "posterior_cov_correction_tt_", "smoothing_laplace_")
    supports_chunked_fit = True  # one pass over the chunks (rows shuffled within each chunk); not distributed
    _renamed_parameters = {"forgetting": "forgetting_factor"}
    _budget_given_instead = "lengthscale, outputscale and noise_variance"
    _deadline_left_out = ("The filter stopped before the rest (in memory its rows stream in a random order; a chunk "
                          "source is shuffled within each chunk only)")
    _lost_data_advice = ("keep the default time_budget and smoothing='als' (the filter streams fewer rows, the "
                         "smoothing sweeps them all), stream fewer rows (max_rows), or raise max_rank.")

    def __init__(self, kernel: str = "se", nu: float | None = None, *,
                 basis: str | TensorProductFeatures = "hilbert", num_basis: int | None = None,
                 c: float | list[float] | None = None, lengthscale: float | list[float] | None = None,
                 outputscale: float | None = None, noise_variance: float | None = None, mean_constant: float = 0.0,
                 batch_size: int | str = "auto", tol: float = 1e-8, max_rank: int | str | None = "auto",
                 forgetting_factor: float = 1.0, smoothing: str = "als", max_sweeps: int = 10,
                 sweep_tol: float = 1e-4, early_stopping_tol: float | None = None, patience: int = 5,
                 max_num_basis: int | str = "auto", max_rows: int | str | None = "auto",
                 time_budget: float | None = 60.0, noise_estimate: str = "held_out",
                 hyper_max_points: int = 1000, seed: int = 0, out_of_box: str = "clip", normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False, forgetting: float | str = DEPRECATED) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self._keep_parameters(locals())

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        resolve_kernel(self.kernel, self.nu)
        check_basis(self.basis)
        if not self._hilbert and (self.lengthscale is not None or self.c is not None):
            raise ValueError("lengthscale and c set the Hilbert basis; they do not apply to basis="
                             f"{self.basis!r} (its features have no lengthscale or box).")
        check_out_of_box_policy(self.out_of_box)
        if self.smoothing not in SMOOTHING_METHODS:
            raise ValueError(f"smoothing must be one of {SMOOTHING_METHODS}; got {self.smoothing!r}.")
        if not math.isfinite(float(self.sweep_tol)) or self.sweep_tol < 0:
            raise ValueError(f"sweep_tol must be a finite number >= 0; got {self.sweep_tol!r}.")
        for name in ("batch_size", "patience", "max_num_basis", "hyper_max_points", "max_rows", "max_sweeps"):
            value = getattr(self, name)
            if (value == "auto" and name in ("batch_size", "max_num_basis", "max_rows")) or (
                    value is None and name == "max_rows"):
                continue
            if isinstance(value, (bool, str)) or int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")
        if self.num_basis is not None and (int(self.num_basis) != self.num_basis or self.num_basis < 1):
            raise ValueError(f"num_basis must be a positive integer; got {self.num_basis!r}.")
        if self.max_rank is not None and self.max_rank != "auto" and (
                isinstance(self.max_rank, (bool, str)) or int(self.max_rank) != self.max_rank or self.max_rank < 1):
            raise ValueError(f"max_rank must be a positive integer, 'auto' or None; got {self.max_rank!r}.")
        check_time_budget(self.time_budget)
        check_noise_estimate(self.noise_estimate)
        if not math.isfinite(float(self.tol)) or self.tol < 0:
            raise ValueError(f"tol must be a finite number >= 0; got {self.tol!r}.")
        if not 0.0 < float(self.forgetting_factor) <= 1.0:
            raise ValueError(f"forgetting_factor must be in (0, 1]; got {self.forgetting_factor!r}.")
        if self.early_stopping_tol is not None and not float(self.early_stopping_tol) >= 0:
            raise ValueError(f"early_stopping_tol must be >= 0 or None; got {self.early_stopping_tol!r}.")
        if not math.isfinite(float(self.mean_constant)):
            raise ValueError(f"mean_constant must be finite; got {self.mean_constant!r}.")
        for name in ("outputscale", "noise_variance"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)

    # ------------------------------------------------------------------ time budget
    def _plan_budget(self, rule_num_basis: int, num_dims: int, num_rows: int, fixed_num_basis: bool = False,
                     elapsed_seconds: float = 0.0, rows_in_memory: bool = True) -> int:
        """M (returned), rank cap, batch size and rows within ``time_budget`` (filter and smoothing) for D =
        ``num_dims`` and ``num_rows`` rows, M from the lengthscale rule (``rule_num_basis``; a feature map's mode size
        when ``fixed_num_basis``); sets ``budget_``, ``max_rank_`` and ``batch_size_``, reports the choice and warns
        when over the budget. ``elapsed_seconds``: the fit's seconds so far (see
        :func:`~tnbayes.inference.budget.filter_budget`); ``rows_in_memory``: the rows are a tensor, not streamed
        (only then does the smoothing hold rows out)."""
        budgeted = self.time_budget is not None
        chosen = [name for name in ("max_rank", "batch_size") if getattr(self, name) == "auto"] if budgeted else []
        if fixed_num_basis or self.num_basis is not None:
            sizes = [int(rule_num_basis) if fixed_num_basis else int(self.num_basis)]
        else:
            top = min(int(rule_num_basis), self._num_basis_cap())
            sizes = [top]
            if budgeted and self.max_num_basis == "auto":
                sizes += [8] if top > 8 else []
                chosen.append("num_basis")
        ranks = [self.max_rank] if self.max_rank != "auto" else list(TT_KALMAN_RANK_LADDER) if budgeted else [10]
        batches = [int(self.batch_size)] if self.batch_size != "auto" else \
            list(TT_KALMAN_BATCH_SIZES) if budgeted else [8]
        candidates: list[dict[str, Any]] = []
        for M in sizes:
            for rank in ranks:
                cost = {b: tt_kalman_seconds_per_row(num_dims, M, rank, b) for b in batches}
                cheapest = min(batches, key=cost.get)  # the first size unless another is clearly cheaper
                B = cheapest if cost[cheapest] < (1.0 - BATCH_SIZE_SAVING) * cost[batches[0]] else batches[0]
                candidates.append({"max_rank": rank, "num_basis": M, "batch_size": B})

        def seconds_per_row(candidate: Mapping[str, Any]) -> float:
            return tt_kalman_seconds_per_row(num_dims, candidate["num_basis"], candidate["max_rank"],
                                             candidate["batch_size"])

        # the smoothing sweeps every row at a fraction of the filter's cost per row: its seconds (for the first,
        # largest candidate; at most a share of the budget, then over fewer rows) are kept from the filter's budget
        budget = filter_budget(self.time_budget, self.hyperparameter_source_ != "given", elapsed_seconds)
        smooths = self._smooths(num_dims, sizes[0], ranks[0])
        everything = self._planned_smoothing_seconds(num_dims, sizes[0], ranks[0], num_rows, rows_in_memory) \
            if smooths else 0.0
        reserve = everything if budget is None else min(everything, SMOOTHING_BUDGET_SHARE * budget)
        plan = plan_within_budget(candidates, seconds_per_row, num_rows, None if budget is None else budget - reserve,
                                  max_rows=given_max_rows(self.max_rows, num_rows), chosen=chosen)
        self.max_rank_, self.batch_size_ = plan.settings["max_rank"], int(plan.settings["batch_size"])
        smoothing_rows, predicted = num_rows, everything
        if smooths:
            smoothing_rows, predicted = self._plan_smoothing(num_dims, sizes[0], ranks[0], num_rows, plan.rows,
                                                             reserve, rows_in_memory)
        self._store_plan(plan, rule_num_basis=int(rule_num_basis), smoothing_rows=smoothing_rows,
                         smoothing_reserve=reserve if budget is not None else 0.0,
                         smoothing_predicted_seconds=predicted)
        return int(plan.settings["num_basis"])

    def _budget_settings_text(self, settings: Mapping[str, Any]) -> str:
        return (f"M = {settings['num_basis']}, TT rank cap {settings['max_rank']}, "
                f"batches of {settings['batch_size']}")

    def _budget_pass_text(self, settings: Mapping[str, Any]) -> str:
        size = "max_num_basis" if self._hilbert else "num_basis"
        return (f"max_rank={settings['max_rank']}, {size}={settings['num_basis']}, "
                f"batch_size={settings['batch_size']}")

    def _fit(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, *,
             sample: tuple[torch.Tensor, torch.Tensor] | None = None, extremes: torch.Tensor | None = None) -> None:
        fit_start = time.perf_counter()
        self._check_params()
        sample = (X, y) if sample is None else sample
        extremes = (X if extremes is None else extremes).to(torch.float64)
        # a covariance core holds at least M×M float64 entries (times TT ranks); the automatic M reaches the cap
        M, name = (int(self.num_basis), "num_basis") if self.num_basis is not None else \
            (self._num_basis_cap(), "max_num_basis")
        check_fits_in_memory(8 * M ** 2, f"{name} = {M} (a covariance core of {M}×{M} entries per input)",
                             "lower num_basis (or leave it None to choose it from the data)" if name == "num_basis"
                             else "lower max_num_basis", self.device_)
        self.lengthscale_, self.outputscale_, self.measurement_noise_ = self._hyperparameters(
            sample[0].to(torch.float64), sample[1].to(torch.float64), extremes)
        hyperparameter_seconds = time.perf_counter() - fit_start
        self.mean_constant_ = float(self.mean_constant)
        num_rows = X.num_rows if isinstance(X, StreamedRows) else int(X.shape[0])
        self.basis_ = self._make_basis(extremes, self.lengthscale_, num_rows, time.perf_counter() - fit_start,
                                       rows_in_memory=isinstance(X, torch.Tensor))
        self.num_basis_ = self.basis_.num_basis if self._hilbert else int(self.basis_.mode_sizes[0])
        kalman = TTBatchKalmanFilter(self._prior_root(), tol=float(self.tol), max_rank=self.max_rank_,
                                     generator=torch.Generator().manual_seed(int(self.seed)))
        self.rank_history_, self.trace_history_ = [], []
        initial_trace = previous_trace = kalman.prior_covariance_trace()
        quiet, used = 0, 0
        stopped = left_out = False
        rows_to_use = num_rows if self.budget_["rows"] is None else min(num_rows, int(self.budget_["rows"]))
        smooths = self._smooths(*kalman.prior_root.shape, self.max_rank_)
        held_out = PrequentialResiduals(rows_to_use) if (self.noise_estimate == "held_out" and not smooths
                                                         and self.noise_variance is None) else None
        with filter_stream():  # one thread, inference mode: see tnbayes.inference.kalman.streaming
            start = time.perf_counter()
            # the smoothing's predicted seconds are kept from the deadline
            deadline = self._stream_deadline(rows_to_use, fit_start,
                                             self.budget_.get("smoothing_predicted_seconds", 0.0) if smooths else 0.0)
            for batch_X, batch_y in self._batches(X, y, limit=self.budget_["rows"]):
                kalman.forget(float(self.forgetting_factor))
                phi = self._features(batch_X)  # (K, B, M)
                centred = batch_y - self.mean_constant_
                wanted = held_out.wanted(used, batch_y.shape[0]) if held_out is not None else slice(0, 0)
                if wanted.stop > wanted.start:  # predict the last rows before the filter sees them
                    held_phi = phi[:, wanted]
                    held_out.add(centred[wanted] - kalman.predict_mean(held_phi),
                                 kalman.predict_variance(held_phi) + self.measurement_noise_, centred[wanted])
                kalman.update(phi, centred, self.measurement_noise_)
                used += batch_y.shape[0]
                trace = kalman.covariance_trace()
                self.rank_history_.append((max(kalman.mean.ranks), max(kalman.correction.ranks)))
                self.trace_history_.append(trace)
                if self.early_stopping_tol is not None:
                    gained = initial_trace - trace
                    small = previous_trace - trace < float(self.early_stopping_tol) * max(gained, 0.0)
                    quiet = quiet + 1 if small else 0
                    if quiet >= int(self.patience):
                        stopped = True
                        break
                previous_trace = trace
                affordable = deadline.rows_after(used)
                if held_out is not None:  # the last rows of those the filter will now process
                    held_out.shorten(affordable)
                if used >= affordable:
                    left_out = used < rows_to_use
                    break
        filter_seconds = time.perf_counter() - start
        self._record_deadline(deadline, used, left_out)
        self.seconds_per_row_ = filter_seconds / max(used, 1)
        self.rows_used_ = used
        self.history_ = list(self.trace_history_)
        self.n_iter_ = len(self.history_)
        self.converged_ = bool(stopped)
        self._set_posterior(kalman)
        self._release_stream_state()
        smoothed_noise = self._smooth(X, y, int(self.budget_["smoothing_rows"]), fit_start, smooths)
        self._record_budget(hyperparameter_seconds, filter_seconds, used, time.perf_counter() - fit_start)
        self._store_noise(held_out)
        if smoothed_noise is not None:
            self.held_out_noise_variance_ = self.noise_variance_ = smoothed_noise

    def _set_posterior(self, kalman: TTBatchKalmanFilter) -> None:
        """Store the filter's state: m, L₀'s diagonals (K, M), C, and the root L = L₀ − C."""
        self.posterior_mean_tt_ = kalman.mean
        self.prior_root_ = kalman.prior_root
        self.posterior_cov_correction_tt_ = kalman.correction
        self.posterior_cov_sqrt_tt_ = kalman.covariance_sqrt

    def condition_on_observations(self, X: ArrayLike, y: ArrayLike) -> "TTKalmanGP":
        """A copy whose posterior also conditions on new rows: the filter goes on from the fitted state.

        The new rows are filtered in their order, in batches of ``batch_size_``, with the fitted basis, scalers,
        lengthscales, σ_f², measurement noise σ², mean constant, rounding (``tol``, ``max_rank_``) and
        ``forgetting_factor``; no hyper-parameter is re-estimated and the predictive ``noise_variance_`` is kept.
        Without truncation (``tol=0``, ``max_rank=None``) the result is the exact posterior of the basis on the old
        and new rows together; with truncation it is what streaming the new rows after the old ones gives. A
        smoothed fit goes on from its smoothed mean and the filter's covariance, and the copy predicts with the
        filter's covariance (the Laplace variance belongs to the old rows; refit to smooth over all rows).

        Parameters
        ----------
        X : array-like of shape (k, n_features)
            The new rows' inputs, in the units of the training inputs (beyond the prediction box: ``out_of_box``).
        y : array-like of shape (k,)
            The new rows' targets, in the units of the training targets.

        Returns
        -------
        TTKalmanGP
            The conditioned copy (``self`` is left as it was).
        """
        self._check_fitted("condition_on_observations")
        Xs, ys = self._scaled_new_rows(X, y)
        kalman = TTBatchKalmanFilter(self.prior_root_, mean=self.posterior_mean_tt_,
                                     correction=self.posterior_cov_correction_tt_, tol=float(self.tol),
                                     max_rank=self.max_rank_,
                                     generator=torch.Generator().manual_seed(int(self.seed) + int(self.n_iter_)))
        history = list(self.trace_history_)
        ranks = list(self.rank_history_)
        with filter_stream():
            for first in range(0, Xs.shape[0], int(self.batch_size_)):
                batch = slice(first, first + int(self.batch_size_))
                kalman.forget(float(self.forgetting_factor))
                kalman.update(self._features(Xs[batch]), ys[batch] - self.mean_constant_, self.measurement_noise_)
                history.append(kalman.covariance_trace())
                ranks.append((max(kalman.mean.ranks), max(kalman.correction.ranks)))
        conditioned = copy.deepcopy(self)
        conditioned._set_posterior(kalman)
        conditioned._release_stream_state()
        conditioned.smoothing_laplace_ = None  # the Laplace factors describe the old rows: filter covariance
        conditioned.trace_history_, conditioned.rank_history_ = history, ranks
        conditioned.history_ = list(history)
        conditioned.n_iter_ = len(history)
        conditioned.n_conditioned_rows_ = int(getattr(self, "n_conditioned_rows_", 0)) + int(Xs.shape[0])
        return conditioned

    def _batches(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, limit: int | None = None,
                 batch_rows: int | None = None):
        """Mini-batches ``(X_b (B, D), y_b (B,))`` in float64, in a random order: a permutation of all rows for
        tensors, of the rows of each chunk (chunk after chunk, one pass) for a streamed source; at most ``limit``
        rows in all; B = ``batch_rows`` (default ``batch_size_``). The same rows, in the same order, every call."""
        generator = torch.Generator().manual_seed(int(self.seed))
        B = int(self.batch_size_ if batch_rows is None else batch_rows)
        left = math.inf if limit is None else int(limit)
        chunks = X if isinstance(X, StreamedRows) else [(X, y)]
        for chunk_X, chunk_y in chunks:
            order = torch.randperm(chunk_X.shape[0], generator=generator).to(chunk_X.device)
            chunk_X, chunk_y = chunk_X.to(torch.float64)[order], chunk_y.to(torch.float64)[order]
            for first in range(0, chunk_X.shape[0], B):
                if left <= 0:
                    return
                last = min(first + int(min(B, left)), chunk_X.shape[0])
                left -= last - first
                yield chunk_X[first:last], chunk_y[first:last]

    # ------------------------------------------------------------------ prediction
    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        out_dtype = X.dtype
        X = X.to(torch.float64)
        laplace = getattr(self, "smoothing_laplace_", None)
        means, variances, transposed = [], [], []
        for chunk in torch.split(X, 4096):
            phi = self._features(chunk)
            means.append(self.mean_constant_ + self.posterior_mean_tt_.dot_rank_one(phi))
            if full_covariance:
                transposed.append(phi)
            elif laplace is not None:
                variances.append(laplace.variance(phi * self.prior_root_[:, None, :], self.noise_variance_))
            else:
                variances.append(self.posterior_cov_sqrt_tt_.transpose_matvec_norms_squared_rank_one(phi))
        mean = torch.cat(means).to(out_dtype)
        if not full_covariance:
            return mean, torch.cat(variances).to(out_dtype)
        phi = torch.cat(transposed, dim=1)
        if laplace is not None:
            return mean, laplace.covariance(phi * self.prior_root_[:, None, :], self.noise_variance_).to(out_dtype)
        vectors = [self.posterior_cov_sqrt_tt_.transpose_matvec_rank_one(phi[:, i]) for i in range(phi.shape[1])]
        return mean, tt_gram(vectors).to(out_dtype)

    # ------------------------------------------------------------------ persistence
    def save(self, path: Any) -> None:
        """Write the model to ``path`` (see :meth:`~tnbayes.models.base.BaseModel.save`); a model whose ``basis`` is
        a feature-map instance cannot be saved (pass ``basis="hilbert"`` or ``"polynomial"``)."""
        if not isinstance(self.basis, str):
            raise TypeError(f"{type(self).__name__} with basis={type(self.basis).__name__}(...) cannot be saved: a "
                            "model file stores its parameters as JSON; use basis='hilbert' or basis='polynomial'.")
        super().save(path)

    def _extra_state(self) -> dict[str, torch.Tensor]:
        state = {"basis.L": self.basis_.L, "basis.center": self.basis_.center} if self._hilbert else {}
        state.update(tt_state(self.posterior_mean_tt_, "mean"))
        state.update(tt_state(self.posterior_cov_sqrt_tt_, "root"))
        if self.posterior_cov_correction_tt_ is not None:
            state.update(tt_state(self.posterior_cov_correction_tt_, "correction"))
        state.update(self._smoothing_state())
        return state

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        if self._hilbert:
            D = int(extra["basis.L"].numel())
            self.basis_ = HilbertBasis(int(self.num_basis_), L=extra["basis.L"].tolist(),
                                       center=extra["basis.center"].tolist(), num_dims=D)
        else:
            self.basis_ = make_feature_map(self.basis, int(self.n_features_in_), int(self.num_basis_))
        self.posterior_mean_tt_ = tt_from_state(extra, "mean", "vector")
        self.posterior_cov_sqrt_tt_ = tt_from_state(extra, "root", "matrix")
        self.posterior_cov_correction_tt_ = (tt_from_state(extra, "correction", "matrix")
                                             if has_tt_state(extra, "correction") else None)
        self._load_smoothing(extra)


register_model("tt_kalman_gp", TTKalmanGP)
