"""TNKF: the LS-SVM dual solved by a tensor-network Kalman filter (Lucassen, Suykens & Batselier 2021).

The estimator composes the row-by-row TT Kalman filter of :mod:`tnbayes.inference.kalman` (inference) with
tensorized kernel rows (:mod:`tnbayes.tensors`) and the time budget of :mod:`tnbayes.inference.budget`; the
two-class variant is in :mod:`tnbayes.models.tnkf_classifier`.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from typing import Any

import gpytorch
import torch

from tnbayes._deprecation import (
    DEPRECATED,
    REMOVED_IN,
    RENAMED_IN,
    is_deprecated_default,
    moved_names_getattr,
    renamed_attribute,
)
from tnbayes._sizes import check_fits_in_memory
from tnbayes._warnings import warn_user
from tnbayes.inference.budget import check_time_budget
from tnbayes.inference.kalman import TRUNCATED_QUANTITIES, TTKalmanFilter, Truncation, filter_stream
from tnbayes.models._kalman_common import KalmanModelMixin
from tnbayes.models._tnkf_budget import TNKFBudgetMixin
from tnbayes.models._tnkf_rows import ROW_ORDERS, STREAM_ORDERS, KernelRowsMixin
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model
from tnbayes.selection.calibration import PrequentialResiduals, check_noise_estimate
from tnbayes.selection.cross_validation import lssvm_cross_validation_score
from tnbayes.selection.input_box import OutOfBoxWarning
from tnbayes.tensors import (TTMatrix, TTVector, cores_to_dense, has_tt_state, matvec_to_dense, tt_from_state, tt_gram,
                             tt_state, tt_svd_batched)
from tnbayes.tensors.shapes import tensorize_shape

__all__ = ["TNKF", "TNKFClassifier", "DEFAULT_BLOCK_SIZE", "DEFAULT_TRUNCATION", "KERNELS", "ROW_ORDERS",
           "STREAM_ORDERS",
           "lssvm_cross_validation_score"]

#: the kernels that build the rows ("rbf" is an alias of "se", the squared exponential)
KERNELS = ("se", "rbf", "matern")
#: default rounding of each filter quantity: (relative tolerance, maximum TT rank)
DEFAULT_TRUNCATION: dict[str, tuple[float, int | None]] = {
    "row": (1e-4, None),
    "innovation": (1e-4, 24),
    "gain": (1e-5, 24),
    "mean": (1e-5, None),
    "covariance": (1e-4, 32),
}
#: rows per filter update of ``block_size="auto"`` (measured on a 2¹⁴-point sinc, one thread: see ``block_size``)
DEFAULT_BLOCK_SIZE = 16
#: an input whose kernel values to every training input are below this share of the prior variance is beyond the
#: data's reach: its latent variance is the prior's (the dual weights say nothing about it) and a warning is shown
FAR_FROM_DATA_KERNEL_RATIO = 1e-3
#: test rows compressed in one batched TT-SVD at prediction: at most this many kernel entries (32 MiB in float64; their
#: products with the covariance root go in chunks of KernelRowsMixin._rows_per_root_product)
_PREDICTION_BATCH_ENTRIES = 2**22


class TNKF(KernelRowsMixin, TNKFBudgetMixin, KalmanModelMixin, BaseModel):
    """LS-SVM regression whose dual weights are estimated by a tensor-network Kalman filter.

    The LS-SVM dual with centred targets is the linear system ``(K + I/γ) α = y − b``. Its rows
    ``c_k = K[k] + e_k/γ`` are streamed one at a time as scalar measurements
    ``y_k − b = c_kᵀ α + e_k``, ``e_k ~ N(0, R)``, into a Kalman filter over ``α`` with prior
    ``N(0, p_0 I)``. Vectors of length N are tensor trains over the sorted prime factors of N (padded
    when N has a prime factor above ``max_factor``); each kernel row is computed and compressed by
    TT-SVD; the covariance is kept as a TT square root ``P = L Lᵀ`` (Potter's update), so it stays
    positive semi-definite after every rounding. Predictions: mean ``k*ᵀ α + b``, variance
    ``k*ᵀ P k* + R``.

    Parameters
    ----------
    kernel : {"se", "matern"}
        GPyTorch ARD kernel (wrapped in a ``ScaleKernel``) that builds the kernel rows: the squared exponential
        (``"se"``, default; ``"rbf"`` is accepted as an alias; :class:`~tnbayes.kernels.UnderflowSafeRBFKernel`,
        exactly 0 where the value would be below the smallest normal number) or Matérn-ν.
    nu : float
        Matérn smoothness (0.5, 1.5, 2.5).
    lengthscale : float or sequence of float, optional
        Of the kernel that builds the rows, in standardised input units. Default: ℓ_GP/√2 (see Notes).
    outputscale : float, optional
        σ_f² of that kernel. Default 1 (only the product p_0·σ_f⁴ matters when ``gamma`` is None).
    gamma : float, optional
        The LS-SVM regularisation γ (rows ``K + I/γ``). Default None: γ = ∞, rows of ``K`` alone, the
        regularisation then comes from the prior and R (see Notes).
    measurement_noise : float, optional
        R, the variance of each row measurement, also added to the predictive variance. Default: the
        GP's noise variance σ² (the paper's choice for noisy sinc: R = the noise variance).
    prior_variance : float, optional
        p_0 of the prior ``α ~ N(0, p_0 I)``. Default: the value that gives f = Kα the GP's prior
        variance, ``p_0 = σ_f,GP² / mean_i Σ_j c_ij²`` (see Notes).
    forgetting_factor : float
        λ_f ∈ (0, 1]: ``P⁻ = P / λ_f`` before each row (the paper's definition; 1 = no forgetting).
    bias : "mean" or float
        The fixed offset b of ``f(x) = k(x)ᵀα + b``: the mean of the (scaled) training targets (default, the
        paper's choice for regression) or a given value (the paper's Adult experiment uses b = 0 on ±1 labels).
    constraint_row : bool
        Stream the first row of the paper's system, ``1ᵀα = 0`` (target 0, noise R), before the kernel rows.
        Off by default: with b fixed rather than solved for, the constraint is an extra soft measurement,
        not part of the LS-SVM's own optimality conditions (the paper's code streams it).
    truncation : dict, optional
        Quantity → ``tol`` or ``(tol, max_rank)`` for ``"row"`` (each compressed kernel row),
        ``"innovation"`` (``Lᵀc``), ``"gain"`` (``P c``), ``"mean"`` (α) and ``"covariance"`` (L).
        Missing keys take :data:`DEFAULT_TRUNCATION`, except that with ``time_budget`` the maximum ranks of
        missing ``"covariance"``, ``"gain"`` and ``"innovation"`` keys come from the budget; ``{q: 0 for q in …}``
        runs the exact filter. A ``tol`` alone sets no rank cap: the ranks follow the tolerance, which on data of
        several inputs can let them grow row after row. Before a product of such ranks would take more than
        :data:`~tnbayes.inference.kalman.tt_rows.FORMED_MEMORY_SHARE` of the free memory, the fit stops with a
        ``MemoryError`` that names the truncations without a cap.
    round_relative_to : {"update", "state"}
        Tolerances of the mean and the covariance root are relative to the change each row makes
        (default) or, as in the paper, to the whole updated quantity — which at large N rounds most
        updates away (see :class:`~tnbayes.inference.TTKalmanFilter`). Row by row and relative to the change, α is
        held densely while the rows stream and rounded once at the end, relative to its whole change.
    early_stopping_tol : float, optional
        Stop when ``trace(P)`` has fallen by less than this fraction over the last ``patience`` rows (None, the
        default: never stop early). The rows not streamed are simply not measured (α's entries all move,
        because every kernel row touches every entry).
    patience : int
        Rows over which the fall of ``trace(P)`` is measured.
    block_size : int or "auto"
        Rows per filter update. B > 1: each block of B rows is compressed as one block TT and conditioned on in
        one block square-root update (:meth:`~tnbayes.inference.kalman.TTKalmanFilter.update_block`: a B × B
        innovation covariance, one rounding of the mean and the covariance root per block instead of per row),
        exact like the row update when nothing is truncated, cheaper per row at small caps (the cost model of
        :mod:`tnbayes.inference.tnkf_cost` predicts both). 1: Potter's row-by-row update, as in the paper.
        ``"auto"`` (default): row by row when the time budget lets every row through at the default caps (blocks
        were slightly less accurate where both fit: the defaults study, 16 sets of 400 rows, median NLPD +0.04),
        else :data:`DEFAULT_BLOCK_SIZE` rows where the budget predicts them higher caps or more rows than row by
        row (always 1 with a ``forgetting_factor``
        below 1 — a block divides P by λ_f^B once, before its B rows — and for :class:`~tnbayes.TNKFClassifier`).
        Early stopping is checked after each block.
    max_rows : int, "auto" or None
        Process at most this many rows; None: all. ``"auto"`` (default): all, or with ``time_budget`` as many as the
        budget allows (at least :data:`~tnbayes.inference.budget.MIN_ROWS`, in a random order when
        ``stream_order="auto"``) or, on many rows, a fit on a random subset of them (see ``time_budget``). An int
        streams that many rows through a state of every training row.
    time_budget : float or None
        Seconds the fit should take (default 60). The settings not given — the covariance, gain and innovation
        rank caps and ``max_rows`` — are chosen by a cost model of the seconds per row
        (:mod:`tnbayes.inference.budget`): on few enough rows, caps at the largest ranks the state's TT modes allow
        (only the tolerances truncate: the exact filter up to them), where every row streams one at a time within
        the budget with :data:`~tnbayes.inference.budget.TNKF_LIFTED_CAPS_MARGIN` to spare; otherwise the largest
        caps of :data:`~tnbayes.inference.budget.TNKF_RANK_LADDER` that stream every row within the budget (a
        quarter of it is kept for estimating missing hyper-parameters, all the seconds the estimate took when it
        took more), else the smallest caps on fewer rows. On more than
        :data:`~tnbayes.inference.budget.TNKF_SUBSET_MIN_ROWS` rows with ``max_rows="auto"``, where
        :data:`~tnbayes.inference.budget.TNKF_SUBSET_CAPS` cannot stream every row but can stream a random subset of
        at least ``TNKF_SUBSET_MIN_ROWS`` rows whole, the fit is on such a subset instead, as large as a bisection
        over the cost model finds (``subset_``; α has one entry per training row, so a smaller state also costs less
        per row), at those caps or higher. A budget that even the smallest settings exceed raises a
        :class:`~tnbayes.inference.budget.BudgetWarning` naming the settings to pass. A ``truncation`` that leaves a
        covariance, gain or innovation rank without a cap (a tolerance alone) is beyond the cost model, which takes
        such ranks at the largest the modes allow: then its figure lowers no cap (the others keep their defaults),
        cuts neither the rows nor the state to a subset and warns of nothing, and the deadline below keeps the fit
        within the budget (``budget_["cost_unknown"]``). None: no
        budget (the :data:`DEFAULT_TRUNCATION` caps and all rows). With ``max_rows="auto"`` the budget also holds on
        a machine slower than the cost model's: every :data:`~tnbayes.inference.stream_deadline.DEADLINE_CHECK_ROWS`
        rows the filter measures its seconds per row and, where the rows left would end the fit more than
        :data:`~tnbayes.inference.stream_deadline.DEADLINE_GRACE` of ``time_budget`` past it, processes only the
        share of them the time left affords, spread evenly over them
        (:class:`~tnbayes.inference.stream_deadline.StreamDeadline`; at least
        :data:`~tnbayes.inference.budget.MIN_ROWS` rows in all; a :class:`~tnbayes.inference.budget.BudgetWarning`
        says so). With or without a budget the filter runs on one torch thread, in torch's inference mode
        (:func:`~tnbayes.inference.kalman.filter_stream`).
    noise_estimate : {"held_out", "training"}
        ``"held_out"`` (default): the last 20% of the rows the filter processes are first predicted from the
        state before them as new inputs at their x would be (their kernel rows without their own entry, the state
        conditioned on that entry being 0: a prequential hold-out, no refit, no row lost), and the predictive
        noise is R plus the extra variance their errors call for
        (:func:`~tnbayes.selection.calibration.additive_variance_estimate`): the filter's variance ``k(x)ᵀ P k(x)``
        is not a GP posterior variance, and a truncated filter predicts worse than the exact GP whose σ² it borrowed;
        when the filter's own predictions of those rows (its innovations, from their measurement rows as given) are
        worse than the prior's (``LOST_DATA_ERROR_RATIO``), the fit warns. ``"training"``: R.
    order : {"auto", "given", "sorted", "pca", "tree"}
        Order of α's entries, i.e. of the columns of every kernel row before it is tensorised.
        ``"sorted"`` sorts 1-D inputs; ``"pca"`` sorts by the first principal component; ``"tree"``
        makes the TT index digits a recursive principal-axis partition aligned with the TT modes
        (:func:`~tnbayes.tensors.hierarchical_order`), which keeps kernel rows of low TT rank in any
        dimension; ``"auto"`` (default) is ``"sorted"`` for 1-D inputs and ``"tree"`` otherwise. The
        order changes TT ranks, not the exact solution.
    stream_order : {"auto", "given", "index", "random"}
        Order in which the rows are streamed: as the training inputs are given, in the order of α's
        entries, or a seeded random permutation. ``"auto"`` (default) is ``"index"`` for 1-D inputs
        (left to right, as the paper streams its sinc) and ``"given"`` otherwise, or ``"random"`` where the budget
        plans to stream fewer rows than the state holds (where its deadline leaves rows out, the rows it keeps are
        spread evenly over the stream, in any order). With ``max_rows`` or
        early stopping the stream decides *which* rows are used, so it should then be a representative
        sample: use ``"random"`` (or shuffled data with ``"given"``) — an ``"index"`` stream visits the
        inputs from left to right, or in ``"tree"`` order one cluster after the other.
    max_factor : int
        Largest prime factor; N is padded with zero rows/columns to the next length whose prime
        factors are all ≤ ``max_factor`` (see :func:`tnbayes.tensors.tensorize_shape`).
    mode_size : int
        Neighbouring prime factors are merged into TT modes of size ≤ ``mode_size`` (default 8: 2¹⁴ →
        modes (2, 8, 8, 8, 8)). The paper's one mode per prime factor is ``mode_size=1``; merging cuts
        the number of small linear-algebra calls per update (on a 1024-point sinc at equal truncation:
        34 ms per row with ten modes of 2, 10 ms with (2, 8, 8, 8)).
    hyper_max_points : int
        Subsample size of the marginal-likelihood fit of the missing hyper-parameters.
    seed : int
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.
    early_stopping : bool
        Deprecated alias: ``early_stopping=True`` is ``early_stopping_tol=stop_tol`` (1e-4 when ``stop_tol`` is not
        given); ``False`` is ``early_stopping_tol=None``.
    stop_tol : float
        Deprecated alias of ``early_stopping_tol`` (with ``early_stopping=True``).

    Attributes
    ----------
    posterior_mean_tt_ : TTVector
        α's posterior mean, modes ``tt_shape_`` (entries in training-row order ``row_order_``,
        zero-padded to ``n_padded_``).
    posterior_cov_sqrt_tt_ : TTMatrix
        ``L`` with ``P = L Lᵀ``.
    posterior_cov_tt_ : TTMatrix
        Deprecated: ``P`` rounded with the covariance truncation; use :meth:`posterior_cov_tt`.
    subset_ : torch.Tensor of shape (N,) or None
        The training rows (indices into ``X`` as given, ascending) the time budget fitted on; None: every row
        (see ``time_budget``). N below is their number, else the number of training rows.
    dual_weights_ : torch.Tensor of shape (N,)
        The dense posterior mean of α, in the order of the training inputs as given (of ``subset_``).
    bias_ : float
        b (``bias``; by default the mean of the scaled training targets).
    lengthscale_ : torch.Tensor of shape (D,)
    outputscale_, measurement_noise_, prior_variance_ : float
    noise_variance_ : float
        What ``posterior`` adds as observation noise: R, plus with ``noise_estimate="held_out"`` the extra
        variance the held-out rows call for.
    held_out_noise_variance_ : float or None
        R + that extra variance (None: not estimated — ``"training"``, or too few rows processed).
    penalty_ : float
        1/γ on the diagonal of the rows ``K + I/γ`` (0 when ``gamma`` is None); ``regularization_`` is its
        deprecated name.
    row_order_ : torch.Tensor of shape (N,)
        α's entry order (``order``): entry i belongs to training input ``row_order_[i]`` (of ``X[subset_]`` when
        the budget fitted on a subset, as ``stream_order_``).
    stream_order_ : torch.Tensor of shape (N,)
        Training-input indices in the order their rows were (or would have been) streamed: those streamed
        first (the rows a deadline left out follow them).
    rows_processed_ : int
    covariance_trace_history_ : list of float
        tr(P) after every row update.
    n_iter_ : int
        Row updates of the filter (``rows_processed_``; the filter's iterations).
    history_ : list of float of length n_iter_
        tr(P) after every row update (``covariance_trace_history_``): the quantity early stopping watches.
    converged_ : bool
        Whether early stopping ended the filter before the last row (``stopped_early_``).
    max_ranks_ : dict
        Largest TT rank of each quantity seen during the fit (of the mean: the fitted mean's, since the row updates
        round it once, at the end).
    fit_seconds_per_row_ : float
    block_size_ : int
        Rows per filter update (``block_size``; 1: row by row).
    block_fallback_row_ : int or None
        The streamed row from which the filter went row by row because a block update failed its consistency check
        (:meth:`~tnbayes.inference.kalman.TTKalmanFilter.update_block`); None: no block was rejected.
    block_misses_ : list of float
        The filter's ``block_misses``: per block update, by what share of its residual it missed the exact one.
    budget_ : dict
        What the time budget chose and why: ``time_budget``, ``filter_budget`` (the seconds the filter planned
        with), ``settings`` (``covariance_rank``, ``gain_rank``, ``innovation_rank``, ``max_rows``), ``chosen``
        (those the budget filled in), ``rows``, ``num_rows``, ``predicted_seconds_per_row``,
        ``predicted_seconds``, ``within_budget``, ``default_settings`` and ``default_seconds`` (the first
        candidate over every row: where the budget lifted the caps, the state's full ranks), ``ladder`` (every
        candidate with its predicted seconds per row), ``training_rows`` (only when the budget fitted on
        ``subset_``: the rows given; ``num_rows`` is the subset's), and after the
        fit ``hyperparameter_seconds``, ``filter_seconds``, ``seconds_per_row`` and ``fit_seconds`` (measured),
        ``planned_rows`` (= ``rows``) and ``stopped_at_deadline`` (whether the budget's deadline left out rows, see
        ``time_budget``).
    truncation_ : dict
        Quantity → ``(tol, max_rank)`` the filter used (``truncation``, the defaults and the budget's caps).

    Notes
    -----
    **The model the filter computes.** Without truncation the filter returns the exact Gaussian
    posterior of α in ``y − b = C α + e``, ``α ~ N(0, p_0 I)``, ``e ~ N(0, R I)``, ``C = K + I/γ``: mean
    ``(CᵀC/R + I/p_0)⁻¹ Cᵀ(y − b)/R``, covariance ``P = (CᵀC/R + I/p_0)⁻¹``. As R/p_0 → 0 the mean is the
    LS-SVM solution ``C⁻¹(y − b)`` (tested). A test point's kernel row ``k*`` is compressed with the
    ``"row"`` truncation like every training row, and both the mean ``k̃*ᵀα + b`` and the variance
    ``k̃*ᵀ P k̃* + R`` use that compressed row: the filter fitted α to the compressed rows, so that is its
    measurement model. (With the exact row instead, α's components along what the compression drops —
    never constrained by the data — enter the prediction: in a dense check on Adult, 1000 rows capped at
    TT rank 10, the exact rows gave 0.47 test accuracy and the compressed rows 0.82.) Without
    truncation the prediction ``f(x) = c(x)ᵀα`` is Bayesian regression with the data-dependent kernel
    ``p_0 Σ_j c(x, x_j) c(x', x_j)``, and ``k*ᵀ P k* + R`` is its exact predictive variance — an honest error bar for *that* model.

    **Defaults.** When ℓ, p_0 or R are missing, an exact ARD GP (GPyTorch) is fitted by marginal
    likelihood on at most ``hyper_max_points`` standardised training points (duplicates dropped) and the
    filter is set up to approximate that GP: γ = ∞ (rows of K), R = σ², ℓ = ℓ_GP/√2 (for the SE kernel
    ``Σ_j k_ℓ(x, x_j) k_ℓ(x_j, x')`` is, in data-dense regions, a multiple of ``k_{√2ℓ}(x, x')``), and p_0
    matching the prior variance of f to σ_f,GP². This choice also keeps TT ranks low: P differs from
    ``p_0 I`` only on the few directions the data determine (the effective degrees of freedom), which for
    smooth kernel rows are smooth vectors of low TT rank, whereas the GP-equivalent LS-SVM (γ = 1/σ²,
    R → 0) makes P ≈ R C⁻² full rank. The paper's own settings (small γ, a short kernel, R = noise) are
    available through the parameters; ``benchmarks/papers/tnkf_*`` use them where they reproduce a table.
    """

    _transient_attributes = ("posterior_mean_tt_", "posterior_cov_sqrt_tt_", "kernel_module_")

    def __init__(self, kernel: str = "se", nu: float = 2.5, *, lengthscale: float | list[float] | None = None,
                 outputscale: float | None = None, gamma: float | None = None,
                 measurement_noise: float | None = None, prior_variance: float | None = None,
                 forgetting_factor: float = 1.0, bias: float | str = "mean", constraint_row: bool = False,
                 truncation: Mapping[str, Any] | None = None, round_relative_to: str = "update",
                 early_stopping_tol: float | None = None, patience: int = 200, block_size: int | str = "auto",
                 max_rows: int | str | None = "auto", time_budget: float | None = 60.0,
                 noise_estimate: str = "held_out", order: str = "auto",
                 stream_order: str = "auto",
                 max_factor: int = 16, mode_size: int = 8,
                 hyper_max_points: int = 1000, seed: int = 0, normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False, early_stopping: bool | str = DEPRECATED,
                 stop_tol: float | str = DEPRECATED) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self._keep_parameters(locals())

    # ------------------------------------------------------------------ checks
    def _apply_early_stopping_aliases(self) -> None:
        """Map the deprecated ``early_stopping`` + ``stop_tol`` to ``early_stopping_tol`` (with a FutureWarning)."""
        flag, tol = self.early_stopping, self.stop_tol
        if is_deprecated_default(flag) and is_deprecated_default(tol):
            return
        name = type(self).__name__
        warn_user(f"{name}: the parameters 'early_stopping' and 'stop_tol' were replaced by 'early_stopping_tol' "
                  f"in tnbayes {RENAMED_IN} (None: no early stopping); pass early_stopping_tol=<tol> instead (the "
                  f"old names will be removed in {REMOVED_IN}).", FutureWarning)
        if not is_deprecated_default(flag) and bool(flag):
            value = 1e-4 if is_deprecated_default(tol) else float(tol)
            if self.early_stopping_tol is not None and float(self.early_stopping_tol) != value:
                raise TypeError(f"{name} got both early_stopping=True with stop_tol={value!r} (the old names) and "
                                f"early_stopping_tol={self.early_stopping_tol!r}; pass only early_stopping_tol.")
            self.early_stopping_tol = value
        self.early_stopping, self.stop_tol = DEPRECATED, DEPRECATED

    def _truncation_rules(self) -> dict[str, Truncation]:
        given = dict(self.truncation or {})
        unknown = set(given) - set(TRUNCATED_QUANTITIES)
        if unknown:
            raise ValueError(f"Unknown truncation quantities {sorted(unknown)}; use {TRUNCATED_QUANTITIES}.")
        return {q: Truncation.parse(given.get(q, DEFAULT_TRUNCATION[q])) for q in TRUNCATED_QUANTITIES}

    def _validate_params(self) -> None:
        if self.kernel not in KERNELS or (self.kernel == "matern" and float(self.nu) not in (0.5, 1.5, 2.5)):
            raise ValueError(f"kernel must be 'se' (alias 'rbf') or 'matern' with nu in (0.5, 1.5, 2.5) (GPyTorch's "
                             f"Matérn kernel); got kernel={self.kernel!r}, nu={self.nu!r}.")
        if self.round_relative_to not in ("update", "state"):
            raise ValueError(f"round_relative_to must be 'update' or 'state'; got {self.round_relative_to!r}.")
        if self.order not in ROW_ORDERS:
            raise ValueError(f"order must be one of {ROW_ORDERS}; got {self.order!r}.")
        if self.stream_order not in STREAM_ORDERS:
            raise ValueError(f"stream_order must be one of {STREAM_ORDERS}; got {self.stream_order!r}.")
        if not (self.bias == "mean" or (isinstance(self.bias, (int, float)) and not isinstance(self.bias, bool)
                                        and math.isfinite(float(self.bias)))):
            raise ValueError(f"bias must be 'mean' or a finite number (in the units of the scaled targets); "
                             f"got {self.bias!r}.")
        if not (0.0 < float(self.forgetting_factor) <= 1.0):
            raise ValueError(f"forgetting_factor must be in (0, 1]; got {self.forgetting_factor}.")
        for name in ("outputscale", "gamma", "measurement_noise", "prior_variance"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(float(value)) and float(value) > 0):
                raise ValueError(f"{name} must be a positive number; got {value!r}.")
        if int(self.patience) < 1 or not (self.early_stopping_tol is None or float(self.early_stopping_tol) >= 0):
            raise ValueError(f"patience must be >= 1 and early_stopping_tol >= 0 or None; got {self.patience!r} and "
                             f"{self.early_stopping_tol!r}.")
        if int(self.mode_size) < 1 or int(self.max_factor) < 2:
            raise ValueError(f"mode_size must be >= 1 and max_factor >= 2; got {self.mode_size}, {self.max_factor}.")
        if self.max_rows is not None and self.max_rows != "auto" and (
                isinstance(self.max_rows, (bool, str)) or int(self.max_rows) != self.max_rows or self.max_rows < 1):
            raise ValueError(f"max_rows must be a positive integer, 'auto' or None; got {self.max_rows!r}.")
        check_time_budget(self.time_budget)
        check_noise_estimate(self.noise_estimate)
        self._resolve_block_size()
        self._truncation_rules()

    #: rows per update of ``block_size="auto"`` (without forgetting)
    _auto_block_size = DEFAULT_BLOCK_SIZE

    def _resolve_block_size(self) -> int:
        """``block_size`` as an int (``"auto"``: 1, which the time budget raises to :attr:`_auto_block_size` when row by
        row does not fit, see ``block_size``); a ValueError names bad values."""
        if isinstance(self.block_size, str) and self.block_size == "auto":
            return 1
        if isinstance(self.block_size, (bool, str)) or not isinstance(self.block_size, (int, float)) or \
                int(self.block_size) != self.block_size or self.block_size < 1:
            raise ValueError(f"block_size must be a positive integer (rows per filter update; 1: row by row) or "
                             f"'auto'; got {self.block_size!r}.")
        return int(self.block_size)

    # ------------------------------------------------------------------ kernel
    def kernel_matrix(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        """Dense kernel block ``k(X1, X2)`` on scaled inputs → shape (n1, n2)."""
        with torch.no_grad(), gpytorch.settings.lazily_evaluate_kernels(False):
            return self.kernel_module_(X1, X2).to_dense()

    # ------------------------------------------------------------------ fitting
    #: share of the free memory that the covariance root at its rank cap may take (:meth:`_root_bytes`)
    _ROOT_MEMORY_SHARE = 0.5

    def _root_bytes(self, rank: int) -> int:
        """Estimated bytes of the filter's covariance root at TT rank ``rank`` over the state's modes, with the
        work of its update."""
        return 4 * len(self.tt_shape_) * rank * rank * max(self.tt_shape_) ** 2 * (torch.finfo(self.dtype_).bits // 8)

    def _check_memory(self, rules: dict[str, Truncation]) -> None:
        rank = rules["covariance"].max_rank
        if rank is None:
            return  # rank-adaptive; no a-priori bound
        check_fits_in_memory(self._root_bytes(rank),
                             f"A covariance square root of TT rank {rank} over modes {self.tt_shape_}",
                             "lower truncation['covariance'] max_rank", self.device_, fraction=self._ROOT_MEMORY_SHARE)

    # ------------------------------------------------------------------ time budget
    _budget_given_instead = "lengthscale, measurement_noise and prior_variance"
    _deadline_left_out = "The rows left out are spread evenly over the stream"
    _lost_data_advice = "stream fewer rows (max_rows, or the default time_budget), or raise truncation's rank caps."
    _budget_first_fits = "the default caps fit"

    def _caps_text(self, settings: Mapping[str, Any]) -> str:
        """``"16/8/8"``: the covariance/gain/innovation rank caps of ``settings`` (∞: none)."""
        return "/".join("∞" if settings[f"{q}_rank"] is None else str(settings[f"{q}_rank"]) for q in self._BUDGETED)

    def _budget_settings_text(self, settings: Mapping[str, Any]) -> str:
        return f"covariance/gain/innovation TT rank caps {self._caps_text(settings)}"

    def _budget_default_text(self, settings: Mapping[str, Any]) -> str:
        return f"the default caps {self._caps_text(settings)}"

    def _budget_pass_text(self, settings: Mapping[str, Any]) -> str:
        rules = self._truncation_rules()  # the tolerances given, else the defaults
        truncation = {q: (rules[q].tol, settings[f"{q}_rank"]) for q in self._BUDGETED}
        return f"truncation={truncation}"

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:
        fit_start = time.perf_counter()
        self._apply_early_stopping_aliases()
        self._validate_params()
        given_rules = self._truncation_rules()
        self.tt_shape_ = list(tensorize_shape(X.shape[0], int(self.max_factor), merge_to=int(self.mode_size))[0])
        self._check_memory(given_rules)  # a given covariance rank that cannot fit is refused before any work
        self._resolve_hyperparameters(X, y)
        hyperparameter_seconds = time.perf_counter() - fit_start
        self.kernel_module_ = self._make_kernel_module(X.shape[1])
        self.subset_ = None
        order, position = self._lay_out_state(X)
        rules, limit, subset_size = self._plan_budget(X, self.train_inputs_, position, given_rules,
                                                      time.perf_counter() - fit_start)
        if subset_size is not None:  # the budget's random subset of the training rows
            generator, training_rows = torch.Generator().manual_seed(int(self.seed)), X.shape[0]
            self.subset_ = torch.randperm(training_rows, generator=generator)[:subset_size].sort().values.to(X.device)
            X, y = X[self.subset_], y[self.subset_]
            order, position = self._lay_out_state(X)
            rules, limit, _ = self._plan_budget(X, self.train_inputs_, position, given_rules,
                                                time.perf_counter() - fit_start, on_subset=True)
            self.budget_["training_rows"] = training_rows
        n, shape, X_ordered = X.shape[0], self.tt_shape_, self.train_inputs_
        self.prior_variance_ = (float(self.prior_variance) if self.prior_variance is not None
                                else self._default_prior_variance(X))
        self.truncation_ = {q: (rule.tol, rule.max_rank) for q, rule in rules.items()}
        stream = self._stream(n, order, X.shape[1], subsample=limit < n and self.max_rows == "auto")
        self.bias_ = float(y.mean()) if self.bias == "mean" else float(self.bias)
        targets = (y[stream] - self.bias_).to(torch.float64).cpu()
        self._check_memory(rules)
        kalman = TTKalmanFilter(shape, self.prior_variance_, truncation=rules,
                                forgetting_factor=float(self.forgetting_factor),
                                round_relative_to=self.round_relative_to, dtype=self.dtype_,
                                device=self.device_)
        held_out = PrequentialResiduals(limit) if self.noise_estimate == "held_out" else None
        with filter_stream():  # one thread, inference mode: see tnbayes.inference.kalman.streaming
            start = time.perf_counter()
            deadline = self._stream_deadline(limit, fit_start)
            max_ranks, stopped, left_out = self._stream_rows(kalman, X, X_ordered, position, stream, targets, limit,
                                                             rules["row"], held_out, self.block_size_, deadline)
        filter_seconds = time.perf_counter() - start
        self._record_deadline(deadline, kalman.num_updates - int(bool(self.constraint_row)), left_out)
        self.fit_seconds_per_row_ = filter_seconds / max(kalman.num_updates, 1)
        self._record_budget(hyperparameter_seconds, filter_seconds, kalman.num_updates,
                            time.perf_counter() - fit_start)
        self.rows_processed_ = int(kalman.num_updates)
        self.stopped_early_ = bool(stopped)
        self.covariance_trace_history_ = list(kalman.covariance_trace_history)
        self.history_ = list(self.covariance_trace_history_)
        self.n_iter_ = int(kalman.num_updates)
        self.converged_ = bool(stopped)
        self.max_ranks_ = max_ranks
        self.block_misses_ = list(kalman.block_misses)
        self._store_filter(kalman.mean, kalman.covariance_sqrt)
        self._store_noise(held_out)
        self._release_stream_state()

    def _lay_out_state(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Set ``tt_shape_``, ``n_padded_``, ``row_order_``, ``train_inputs_`` and ``block_size_`` for a state of one
        entry per row of X (n, D); returns α's order and each input's entry of α, both of shape (n,)."""
        shape, n_padded = tensorize_shape(X.shape[0], int(self.max_factor), merge_to=int(self.mode_size))
        self.tt_shape_, self.n_padded_ = list(shape), int(n_padded)
        order = self._row_order(X, self.tt_shape_)
        self.row_order_, self.train_inputs_ = order, X[order]
        position = torch.empty_like(order)  # entry of α that belongs to training input i
        position[order] = torch.arange(X.shape[0], device=order.device)
        self.block_size_ = self._resolve_block_size()
        return order, position

    def _store_filter(self, mean: TTVector, covariance_sqrt: TTMatrix) -> None:
        self.posterior_mean_tt_ = mean
        self.posterior_cov_sqrt_tt_ = covariance_sqrt
        alpha = mean.to_dense()[: self.train_inputs_.shape[0]]
        weights = torch.empty_like(alpha)
        weights[self.row_order_] = alpha
        self.dual_weights_ = weights

    @property
    def posterior_cov_tt_(self) -> TTMatrix:
        """Deprecated: P = L Lᵀ rounded with the covariance truncation; use :meth:`posterior_cov_tt`."""
        warn_user(f"{type(self).__name__}.posterior_cov_tt_ is deprecated since tnbayes {RENAMED_IN}; call "
                  f"posterior_cov_tt(tol, max_rank) (it will be removed in {REMOVED_IN}).", FutureWarning)
        self._check_fitted("posterior_cov_tt_")
        rule = Truncation.parse(self.truncation_["covariance"]) if hasattr(self, "truncation_") \
            else self._truncation_rules()["covariance"]
        return self.posterior_cov_tt(rule.tol, rule.max_rank)

    regularization_ = renamed_attribute("regularization_", "penalty_")

    # ------------------------------------------------------------------ prediction
    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.train_inputs_.shape[0]
        alpha = self.posterior_mean_tt_
        rule = self._truncation_rules()["row"]
        L = self.posterior_cov_sqrt_tt_
        means, variances, projections, reach = [], [], [], []
        alpha_dense = alpha.to_dense()
        block = max(1, min(self._block_rows(n), _PREDICTION_BATCH_ENTRIES // self.n_padded_))
        for first in range(0, X.shape[0], block):
            k = torch.zeros(min(block, X.shape[0] - first), self.n_padded_, dtype=self.dtype_, device=self.device_)
            k[:, :n] = self.kernel_matrix(X[first:first + block], self.train_inputs_)
            reach.append(k[:, :n].abs().amax(dim=1) / float(self.outputscale_))
            # each row compressed as the training rows were (the filter's own measurement model), in one batch
            rows = tt_svd_batched(k, self.tt_shape_, tol=rule.tol, max_rank=rule.max_rank)
            means.append(cores_to_dense(rows) @ alpha_dense + self.bias_)
            if full_covariance:
                projections.extend(L.T.matvec(TTVector([core[i] for core in rows])) for i in range(k.shape[0]))
            else:  # ‖Lᵀk‖² from the dense products, O(N r_L r_k): far cheaper than contracting the TTs
                chunk = self._rows_per_root_product(rows, L)
                variances.extend(matvec_to_dense(L.cores, [core[start:start + chunk] for core in rows],
                                                 transpose=True).square().sum(dim=1)
                                 for start in range(0, k.shape[0], chunk))
        mean = torch.cat(means)
        # beyond the kernel's reach the rows vanish, so k*ᵀ P k* does too: there the model knows nothing but the
        # prior, whose variance (outputscale) the latent gets instead of the in-sample one
        unreached = torch.cat(reach) < FAR_FROM_DATA_KERNEL_RATIO
        if bool(unreached.any()):
            warn_user(f"{type(self).__name__}: {int(unreached.sum())} of {X.shape[0]} inputs are beyond the "
                      f"kernel's reach of every training input (all kernel values below "
                      f"{FAR_FROM_DATA_KERNEL_RATIO:g} of the prior variance); there the prediction is the bias "
                      f"with the prior's variance.", OutOfBoxWarning)
        prior = torch.where(unreached, float(self.outputscale_), 0.0).to(mean.dtype)
        if not full_covariance:
            return mean, torch.maximum(torch.cat(variances).to(mean.dtype).clamp_min(0.0), prior)
        return mean, tt_gram(projections) + torch.diag(prior)

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, torch.Tensor]:
        return {**tt_state(self.posterior_mean_tt_, "mean"), **tt_state(self.posterior_cov_sqrt_tt_, "root")}

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        with warnings.catch_warnings():  # a file saved before 0.2 stores early_stopping/stop_tol: move them over
            warnings.simplefilter("ignore", FutureWarning)
            self._apply_early_stopping_aliases()
        if not has_tt_state(extra, "mean"):  # a file saved before tnbayes 0.2: "mean_core_k", "cov_sqrt_core_k"
            extra = {key.replace("mean_core_", "mean.").replace("cov_sqrt_core_", "root."): value
                     for key, value in extra.items()}
        self.subset_ = getattr(self, "subset_", None)  # a file saved before the budget's subset: every row
        self.posterior_mean_tt_ = tt_from_state(extra, "mean", "vector")
        self.posterior_cov_sqrt_tt_ = tt_from_state(extra, "root", "matrix")
        self.kernel_module_ = self._make_kernel_module(self.train_inputs_.shape[1])


register_model("tnkf", TNKF)


#: TNKFClassifier moved to tnbayes.models.tnkf_classifier (which imports this module)
__getattr__ = moved_names_getattr(__name__, {"TNKFClassifier": ("tnbayes.models.tnkf_classifier", "TNKFClassifier")})
