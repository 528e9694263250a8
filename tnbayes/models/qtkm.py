"""Quantized tensor kernel machines (QTKM, Wesel & Batselier 2024) and their unquantized twin (TKM).

Fourier (or pure-power polynomial) features per input, CPD weights, ALS — the same engine as T-KRR
(:class:`~tnbayes.inference.CPDALS`) on a different feature map::

    f(x) = Re ⟨W, ψ(x_1) ⊗ … ⊗ ψ(x_D)⟩,     min_W ‖y − ⟨W, Ψ(X)⟩‖² + N·λ ‖W‖²

QTKM factors every ψ(x_d) exactly into K = log2 M length-2 Kronecker factors
(:mod:`tnbayes.basis.quantized`), so its CPD has D·K cores of shape (2, R) instead of D cores of shape
(M, R): each ALS sub-problem has 2R unknowns whatever M is. TKM is the same model with one mode per input.

**Complex arithmetic.** The weights are complex and fitted to the real targets by complex least squares;
the prediction is the real part. Written in real and imaginary parts, the complex residual norm is
``‖y − Re(Ψw)‖² + ‖Im(Ψw)‖²`` — an ordinary real ridge regression on the stacked design
``[[Re Ψ, −Im Ψ], [Im Ψ, Re Ψ]]`` with targets ``[y; 0]`` (``tests/models/test_qtkm.py`` checks the equivalence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from tnbayes._deprecation import DEPRECATED, REMOVED_IN, is_deprecated_default
from tnbayes._sizes import check_fits_in_memory
from tnbayes._warnings import warn_user
from tnbayes.basis._checks import check_num_basis
from tnbayes.basis.quantized import FEATURE_KINDS, kron_rows, quantized_factor_sizes
from tnbayes.basis.tensor_product import CLOSED_FORM_MIN_BASIS, FourierPolynomialFeatures
from tnbayes.data import StreamedRows
from tnbayes.inference.budget import check_time_budget
from tnbayes.models._cpd_base import CPDModelBase
from tnbayes.models.registry import register_model
from tnbayes.selection.calibration import check_noise_estimate
from tnbayes.selection.cross_validation import (  # noqa: F401 - the grids and KRR names public here since 0.1
    DEFAULT_BINARY_WIDTH_GRID,
    DEFAULT_PENALTY_GRID,
    DEFAULT_PERIOD_GRID,
    PAPER_PENALTY_GRID,
    KRRSelection,
    select_binary_column_width,
    select_krr_hyperparameters,
    two_valued_columns,
)

__all__ = ["QTKM", "TKM", "KRRSelection", "select_krr_hyperparameters", "DEFAULT_PENALTY_GRID", "PAPER_PENALTY_GRID",
           "DEFAULT_PERIOD_GRID"]


class QTKM(CPDModelBase):
    """Quantized tensor kernel machine: quantized Fourier/polynomial features, quantized CPD weights, ALS.

    Parameters
    ----------
    rank : int, optional
        CP rank R. Default: chosen from the data (see Notes).
    num_basis : int
        M features per input (the paper uses 16 on UCI data, 64 on airline). Any integer ≥ 2; the quantized
        cores have the sizes of its prime factors.
    feature_map : {"fourier", "polynomial"}
        Fourier features ``exp(i2πkx/P)``, k = −M/2 … M/2 − 1 (complex weights, real part predicted), or
        pure powers ``x^k``, k = 0 … M − 1 (real).
    period : float, optional
        P of the Fourier features, in the scaled input units (inputs are mapped to [−0.5, 0.5]; P must exceed
        the width of the region you will predict on). Default: cross-validated (see Notes).
    penalty : float, optional
        λ. Default: cross-validated.
    penalty_per_sample : bool
        ``True`` (the paper's convention): the objective is ``‖y − f‖² + N·λ‖W‖²``; ``False``: ``+ λ‖W‖²``.
    quantized : bool
        Quantize features and weights (QTKM) or not (TKM; :class:`TKM` sets this).
    normalize_features : bool
        Fourier features: use ψ(x_d)/√M per input (default), so the spanned kernel has k(x, x) = 1 whatever D
        is and one λ grid fits every data set; ``False`` gives the raw features (k(x, x) = M^D). Polynomial
        features are not rescaled.
    noise_variance : float, optional
        σ² on the standardised target scale for the predictive variance. Default: estimated (see Notes).
    max_sweeps : int
        ALS sweep budget.
    tol : float
        Stop when a sweep changes the objective by less than this relative amount.
    uncertainty : {"all_cores", "last_core", "none"}
        Laplace variant for ``posterior`` (see :class:`~tnbayes.CPDKernelMachine`).
    noise_estimate : {"held_out", "training"}
        Where σ² comes from when ``noise_variance`` is not given, as in :class:`~tnbayes.CPDKernelMachine`:
        the errors of a refit on 80% of the rows on the other 20% (default), or the training rule (see Notes).
    hyper_max_points : int
        Subsample size of the cross-validation.
    time_budget : float or None
        Seconds the fit should take (default 60; None: no budget): with ``rank=None`` a larger rank is tried only
        while its predicted fit ends within the budget, and the first rank's sweeps and the held-out refit's stop
        at it, as in :class:`~tnbayes.CPDKernelMachine`.
    cv_folds : int
        Folds of the cross-validation (the paper uses 3).
    penalty_grid, period_grid : sequence of float, optional
        Cross-validation grids (default: the paper's, ``DEFAULT_PENALTY_GRID`` and ``DEFAULT_PERIOD_GRID``).
    binary_width_grid : sequence of float
        Widths tried, besides 1, by the cross-validation for the columns with exactly two distinct values (0/1 and
        one-hot indicators), relative to the scaled [−0.5, 0.5] of the other inputs (default 1, 1/8, 1/32:
        ``tnbayes.selection.cross_validation.DEFAULT_BINARY_WIDTH_GRID``; a period 1, 8 or 32 times longer for
        them). After λ and P are chosen, each width is scored by the same CV at that P (λ re-chosen) and the best
        kept; ``(1.0,)`` scales every column alike (the paper). With λ and P both given there is no CV: a grid of
        one width is applied as it is (``binary_width_grid=(model.binary_width_,)`` with ``penalty=model.penalty_``
        and ``period=model.period_`` refits a fitted model's choice), a longer grid leaves the width at 1. Not used
        when every input is two-valued, or for polynomial features.
    out_of_box : {"clip", "raise"}
        Fourier features: queries beyond the prediction box — the training range [−0.5, 0.5] extended by half the
        way to ±P/2, where the period would wrap around (see :meth:`input_box`) — are clipped to its edge with one
        :class:`~tnbayes.selection.OutOfBoxWarning` (default), or refused with a ``ValueError``. Polynomial
        features predict anywhere.
    chunk_size : int, optional
        Rows per chunk of the normal-equation accumulation.
    seed : int
        Seed of the subsample, the folds and the initial cores.
    distributed : bool
        Data-parallel fit over the default ``torch.distributed`` group, as in :class:`~tnbayes.CPDKernelMachine`.
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.

    Attributes
    ----------
    factors_ : torch.Tensor of shape (Σ_k M_k, R)
        The CPD cores stacked row-wise (mode order: all factors of input 0, then input 1, …); complex for
        Fourier features. :meth:`cores` splits them.
    period_, penalty_ : float
        P (None for polynomials) and λ used (per-sample when ``penalty_per_sample``).
    hyperparameter_source_ : str
    krr_selection_ : dict or None
        The cross-validation result (chosen values, CV MSE, KRR noise estimate, subsample size, two-valued columns'
        width).
    binary_columns_ : list of int
        The columns with exactly two distinct values (found when a CV runs or a one-width grid is applied).
    binary_width_ : float
        Their width relative to the other inputs' (1: not narrowed); the input scaler carries it.
    rank_, rank_search_, n_iter_, history_, converged_, sweep_objectives_, update_objectives_, noise_variance_,
    residual_noise_variance_, effective_dof_, laplace_modes_, core_choleskys_
        As in :class:`~tnbayes.CPDKernelMachine`.

    Notes
    -----
    **Inputs** are min–max scaled to [−0.5, 0.5] with the training range (the paper's protocol), two-valued columns
    to a narrower width when the CV prefers it (``binary_width_grid``). Fourier features are periodic: queries beyond
    the prediction box are clipped or refused (``out_of_box``).

    **Hyper-parameters.** Missing λ (and P) are chosen as in the paper: 3-fold cross-validation of exact
    kernel ridge regression with the kernel the features span, on a subsample of ``hyper_max_points``,
    over P ∈ {1.25, 1.5, 2, 3, 5, 9, 17, 33, 65} and λ ∈ 10⁻¹⁴ … 10² (:func:`select_krr_hyperparameters`). The
    paper's grid, λ ∈ 10⁻⁵ … 10⁵ (``PAPER_PENALTY_GRID``), was for raw features with k(x, x) = M^D; for the
    normalised ones it would be divided by M^D, which moves with D.

    **Rank.** ``rank=None`` tries R = 10, 20, 40, 80 (QTKM) or 5, 10, 20, 40 (TKM; the same parameter
    budgets for M = 16) and keeps the first whose residual noise RSS/(N − dof) is within 10% of the exact
    KRR's on the CV subsample, or the last one the ``time_budget`` allows.

    **Uncertainty.** With λ read as σ²/σ_w², the objective is a Gaussian-prior negative log posterior and the
    same Laplace-type conditional-core posteriors as T-KRR give the predictive variance (for complex
    weights the real part's variance, see :func:`~tnbayes.inference.conditional_core_variance`). The noise
    variance is by default the one the model's errors on held-out rows call for (``noise_estimate``); with
    ``"training"`` (and below 30 held-out rows, or for streamed fits) it is the larger of the exact KRR's and the
    CPD fit's residual estimate; always at least
    ``tnbayes.models._cpd_base.NOISE_LOWER_BOUND`` (a constant target leaves no residual).

    **Out-of-core and data-parallel fits** work as for :class:`~tnbayes.CPDKernelMachine` (the CV runs on the
    first pass's subsample).
    """

    input_scaling = "minmax-half"
    supports_chunked_fit = True
    _transient_attributes = ("features_",)
    _auto_ranks: tuple[int, ...] = (10, 20, 40, 80)

    def __init__(self, rank: int | None = None, *, num_basis: int = 16, feature_map: str = "fourier",
                 period: float | None = None, penalty: float | None = None, penalty_per_sample: bool = True,
                 quantized: bool = True, normalize_features: bool = True, noise_variance: float | None = None,
                 max_sweeps: int = 20,
                 tol: float = 1e-6, uncertainty: str = "all_cores", noise_estimate: str = "held_out",
                 hyper_max_points: int = 1000, cv_folds: int = 3, time_budget: float | None = 60.0,
                 penalty_grid: Sequence[float] | None = None, period_grid: Sequence[float] | None = None,
                 binary_width_grid: Sequence[float] = DEFAULT_BINARY_WIDTH_GRID, out_of_box: str = "clip",
                 chunk_size: int | None = None, seed: int = 0, distributed: bool = False, normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self._keep_parameters(locals())

    # ------------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        if self.feature_map not in FEATURE_KINDS:
            raise ValueError(f"feature_map must be one of {FEATURE_KINDS}; got {self.feature_map!r}.")
        check_num_basis(self.num_basis)
        self._check_shared_parameters()
        check_time_budget(self.time_budget)
        check_noise_estimate(self.noise_estimate)
        if self.period is not None and (not math.isfinite(float(self.period)) or float(self.period) < 1.0):
            raise ValueError(f"period must be a number >= 1 (inputs are scaled to [-0.5, 0.5], so P < 1 would wrap "
                             f"the training data around; P = 1 identifies the two ends); got {self.period!r}.")
        for name in ("penalty", "noise_variance"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(float(value)) or float(value) <= 0):
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}.")
        if int(self.max_sweeps) < 1 or int(self.hyper_max_points) < 6 or int(self.cv_folds) < 2:
            raise ValueError("max_sweeps must be >= 1, hyper_max_points >= 6 and cv_folds >= 2.")
        grid = list(self.binary_width_grid)
        if not grid or any(not math.isfinite(float(c)) or not 0.0 < float(c) <= 1.0 for c in grid):
            raise ValueError(f"binary_width_grid must be a non-empty sequence of widths in (0, 1]; got "
                             f"{self.binary_width_grid!r}.")
        if self.period_grid is not None and any(float(p) < 1.0 for p in self.period_grid):
            raise ValueError(f"every period in period_grid must be >= 1; got {list(self.period_grid)!r}.")

    # ------------------------------------------------------------------ fitting
    def _resolve_hyperparameters(self, X: torch.Tensor, y: torch.Tensor, extremes: torch.Tensor) -> None:
        """λ, P and the two-valued columns' width: given, or by the CV on ``X`` (n, D), ``y`` (n,); ``extremes``
        (2, D) holds every column's minimum and maximum over all training rows."""
        need_period = self.feature_map == "fourier" and self.period is None
        self.krr_selection_ = None
        self.binary_columns_: list[int] = []
        self.binary_width_ = 1.0
        reference = None
        if self.penalty is None or need_period:
            periods = [float(self.period)] if self.period is not None else list(self.period_grid or DEFAULT_PERIOD_GRID)
            if self.penalty is not None:  # the CV works per sample
                penalties = [float(self.penalty) / (1 if self.penalty_per_sample else self.n_train_)]
            else:
                penalties = list(self.penalty_grid or DEFAULT_PENALTY_GRID)
            selection = select_krr_hyperparameters(X, y, num_basis=int(self.num_basis), feature_map=self.feature_map,
                                                   penalties=penalties, periods=periods, folds=int(self.cv_folds),
                                                   max_points=int(self.hyper_max_points), seed=int(self.seed),
                                                   normalize=bool(self.normalize_features))
            selection = self._choose_binary_width(X, y, extremes, selection, penalties)
            self.krr_selection_ = {"penalty": selection.penalty, "period": selection.period,
                                   "cv_mse": selection.cv_mse, "noise_variance": selection.noise_variance,
                                   "num_points": selection.num_points, "binary_width": self.binary_width_}
            self.hyperparameter_source_ = f"{int(self.cv_folds)}-fold CV of exact KRR on {selection.num_points} points"
            period = selection.period
            reference = selection.noise_variance
            if self.penalty is not None:
                penalty = float(self.penalty)
            else:  # the CV works per sample; report λ in the user's convention
                penalty = selection.penalty * (1 if self.penalty_per_sample else self.n_train_)
        else:
            self.hyperparameter_source_ = "given"
            penalty, period = float(self.penalty), (None if self.period is None else float(self.period))
            widths = [float(w) for w in self.binary_width_grid]
            if self.feature_map == "fourier" and len(widths) == 1:  # a given width, as the given λ and P
                columns = two_valued_columns(X, extremes)
                if columns and len(columns) < X.shape[1]:
                    self.binary_columns_, self.binary_width_ = columns, widths[0]
        self.penalty_ = float(penalty)
        self.period_ = None if self.feature_map == "polynomial" else float(period)
        self._given_or_estimated_noise = reference
        period_text = "" if self.period_ is None else f", period P = {self.period_:.3g}"
        self._report(f"λ = {self.penalty_:.3g}{period_text} ({self.hyperparameter_source_}); M = {int(self.num_basis)} "
                     f"{self.feature_map} features per input.")

    def _choose_binary_width(self, X: torch.Tensor, y: torch.Tensor, extremes: torch.Tensor,
                             selection: KRRSelection, penalties: list[float]) -> KRRSelection:
        """``binary_columns_`` and ``binary_width_`` from the CV's rows ``X`` (n, D), ``y`` (n,) — all training rows
        in memory, a sample of them in chunked fits, checked against the data's ``extremes`` (2, D) — by
        :func:`~tnbayes.selection.cross_validation.select_binary_column_width`; returns the CV's selection there."""
        if self.feature_map != "fourier":
            return selection
        self.binary_columns_ = two_valued_columns(X, extremes)
        self.binary_width_, best = select_binary_column_width(
            X, y, selection, self.binary_columns_, num_basis=int(self.num_basis), widths=list(self.binary_width_grid),
            penalties=penalties, folds=int(self.cv_folds), max_points=int(self.hyper_max_points), seed=int(self.seed),
            normalize=bool(self.normalize_features))
        if self.binary_columns_ and len(self.binary_columns_) < X.shape[1] and set(self.binary_width_grid) - {1.0}:
            self._report(f"two-valued columns {self.binary_columns_}: width {self.binary_width_:g} of the others' by "
                         f"the same CV at P = {selection.period:.3g} (CV MSE {best.cv_mse:.4g}; at full width "
                         f"{selection.cv_mse:.4g}).")
        return best

    def _check_sizes(self, num_dims: int, num_points: int) -> None:
        """Refuse a ``num_basis``/``rank`` whose objects cannot fit, before the hyper-parameter CV: the CV's
        unquantized features (n_cv, M) of one input (complex; none above ``CLOSED_FORM_MIN_BASIS`` Fourier
        features) and the normal equations of the largest core, (q·R)² for QTKM and (M·R)² for TKM."""
        M = int(self.num_basis)
        remedy = "lower the rank" + ("" if self.quantized else " or num_basis (or use QTKM, whose cores have q·R unknowns)")
        closed_form = self.feature_map == "fourier" and M > CLOSED_FORM_MIN_BASIS  # the CV's kernel needs no features
        if not closed_form and (self.penalty is None or (self.feature_map == "fourier" and self.period is None)):
            n_cv = min(num_points, int(self.hyper_max_points))
            check_fits_in_memory(2 * 16 * n_cv * M, f"num_basis = {M} (the hyper-parameter "
                                 f"cross-validation's {n_cv}×{M} features per input)", remedy, self.device_)
        mode = max(quantized_factor_sizes(M)) if self.quantized else M
        rank = int(self.rank) if self.rank is not None else min(self._auto_ranks)
        width = mode * rank
        check_fits_in_memory(4 * width * width * 8, f"num_basis = {M}, rank = {rank} (a core with "
                             f"{mode}·{rank} = {width} unknowns)", remedy, self.device_)

    _out_of_box_remedy = "refit with a longer period"

    def _representable_box(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Fourier features: one period [−P/2, P/2] around the centre of the [−0.5, 0.5] scale; polynomials: None."""
        if self.period_ is None:
            return None
        half = 0.5 * float(self.period_) * torch.ones(int(self.n_dims_), dtype=self.dtype_, device=self.device_)
        return -half, half

    def _features(self) -> FourierPolynomialFeatures:
        return FourierPolynomialFeatures(int(self.n_dims_), int(self.num_basis), self.feature_map, self.period_,
                                         quantized=bool(self.quantized), normalize=bool(self.normalize_features))

    def _fit(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, *,
             sample: tuple[torch.Tensor, torch.Tensor] | None = None, extremes: torch.Tensor | None = None) -> None:
        sample = (X, y) if sample is None else sample
        extremes = X if extremes is None else extremes
        self._validate_params()
        self._check_sizes(int(extremes.shape[1]), int(sample[0].shape[0]))
        # every column's minimum and maximum over all the training rows (extremes is X itself in memory)
        self._resolve_hyperparameters(*sample, torch.stack([extremes.amin(dim=0), extremes.amax(dim=0)]))
        if self.binary_width_ != 1.0:  # narrow the two-valued columns: in the data, and in the scaler for predictions
            column_widths = torch.ones(int(extremes.shape[1]), dtype=extremes.dtype, device=extremes.device)
            column_widths[self.binary_columns_] = self.binary_width_
            self.x_scaler_.scale_ = self.x_scaler_.scale_ / column_widths.to(self.x_scaler_.scale_)
            self.training_range_ = self.training_range_ * column_widths
            extremes = extremes * column_widths
            if not isinstance(X, StreamedRows):  # streamed rows are scaled as they are read, by x_scaler_
                X = X * column_widths
        self.n_dims_ = int(extremes.shape[1])
        self.features_ = self._features()
        self.features_.check_inputs(extremes)
        engine_penalty = self.penalty_ * self.n_train_ if self.penalty_per_sample else self.penalty_
        ranks = [int(self.rank)] if self.rank is not None else list(self._auto_ranks)
        self._fit_cpd(self.features_, X, y, ranks, engine_penalty, self._given_or_estimated_noise)

    def weight_tensor(self, dim: int | str = DEPRECATED) -> torch.Tensor:
        """The dense coefficient vector of one input's features for D = 1 models (the recovered spectrum).

        Contracts the K quantized cores into the length-M vector ``w`` with ``f(x) = Re(ψ(x)ᵀ w)/√M`` (``Re(ψ(x)ᵀ w)``
        with ``normalize_features=False``) in the
        order of :func:`~tnbayes.basis.fourier_frequencies` (only defined for one input: for D > 1 the weights
        are a D-way tensor).

        Parameters
        ----------
        dim : int
            Deprecated and ignored (a one-input model has one coefficient vector); passing it warns (FutureWarning).

        Returns
        -------
        torch.Tensor of shape (M,)
        """
        if not is_deprecated_default(dim):
            warn_user(f"QTKM.weight_tensor: the argument dim is ignored and will be removed in tnbayes {REMOVED_IN}; "
                      f"call weight_tensor() without it.", FutureWarning)
        self._check_fitted("weight_tensor")
        if int(self.n_dims_) != 1:
            raise ValueError(f"weight_tensor needs a model with one input; this one has {self.n_dims_}.")
        # Σ_r Π_m core_m[b_m, r] with digit 1 (core 0) varying fastest: kron_rows over the R columns
        return kron_rows([core.T for core in self._factor_list()]).sum(0)


class TKM(QTKM):
    """Tensor kernel machine with the *unquantized* Fourier/polynomial features: one (M, R) core per input.

    The same estimator as :class:`QTKM` with ``quantized=False`` (the paper's comparison model). With
    ``rank=None`` it tries R = 5, 10, 20, 40, the parameter budgets of QTKM's 10 … 80 at M = 16.
    """

    _auto_ranks = (5, 10, 20, 40)

    def __init__(self, rank: int | None = None, *, quantized: bool = False, **kwargs: Any) -> None:
        super().__init__(rank, quantized=quantized, **kwargs)


register_model("qtkm", QTKM)
register_model("tkm", TKM)
