"""CPD-constrained kernel machines (T-KRR, Wesel & Batselier 2021) with Laplace-type uncertainty.

Hilbert basis + CPD weights + ALS (see :mod:`tnbayes.inference.als`)::

    f(x) = ⟨W, z_1(x_1) ⊗ … ⊗ z_D(x_D)⟩,   W = Σ_r w_r^(1) ⊗ … ⊗ w_r^(D),
    min_W ‖y − f(X)‖² + λ ‖W‖²

With unit-variance kernel features z and λ = σ²/σ_f² the objective is the negative log posterior of the
Gaussian weight prior W ~ N(0, σ_f² I), so ALS returns a MAP estimate. The predictive uncertainty is a
Laplace-type approximation around it (:mod:`tnbayes.inference.laplace`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tnbayes._deprecation import DEPRECATED
from tnbayes._sizes import check_fits_in_memory
from tnbayes._validation import ArrayLike, check_inputs, check_positive
from tnbayes._warnings import warn_user
from tnbayes.basis import (
    ApproximationWarning,
    RULE_RELATIVE_SLACK,
    HilbertBasis,
    data_center_and_half_range,
    hilbert_box,
    resolvable_lengthscale,
    resolve_kernel,
)
from tnbayes.basis.spectral import kernel_name
from tnbayes.basis import BasisFeatures
from tnbayes.data import StreamedRows
from tnbayes.inference import PENALTY_FORMS
from tnbayes.models._classifier import BinaryClassifierMixin
from tnbayes.inference.budget import check_time_budget
from tnbayes.models._cpd_base import AUTO_RANK_TOLERANCE, UNCERTAINTY_METHODS, CPDModelBase
from tnbayes.models.registry import register_model
from tnbayes.selection.calibration import check_noise_estimate
from tnbayes.selection.hyperparameters import estimate_kernel_hyperparameters

__all__ = ["CPDKernelMachine", "CPDKernelClassifier", "UNCERTAINTY_METHODS"]

#: ranks tried in turn by rank=None (see CPDKernelMachine's Notes)
AUTO_RANKS = (10, 20, 40)
#: largest M·R that rank=None will try (normal equations of 1600² numbers)
AUTO_RANK_MAX_WIDTH = 1600


class CPDKernelMachine(CPDModelBase):
    """Tensor kernel ridge regression with CPD weights (T-KRR) and Laplace predictive uncertainty.

    Parameters
    ----------
    rank : int, optional
        CP rank R of the weight tensor. Default: chosen from the data (see Notes).
    num_basis : int, optional
        Hilbert basis functions per input dimension M. Default: the accurate-approximation rule for the
        fitted lengthscales (:func:`tnbayes.basis.accurate_hilbert_parameters`), capped at ``max_num_basis``.
    kernel : {"se", "matern12", "matern32", "matern52", "matern"}
        Kernel whose spectral density weights the basis.
    nu : float, optional
        Matérn smoothness for ``kernel="matern"``.
    lengthscale : float or sequence of float (one per input), optional
        Kernel lengthscale(s) on the standardised inputs. Default: estimated (see Notes).
    penalty : float, optional
        λ of the objective. Default: σ²/σ_f² from the given or estimated noise and output variances.
    outputscale, noise_variance : float, optional
        σ_f² and σ² on the standardised target scale. Default: estimated (see Notes).
    c : float or sequence of float, optional
        Boundary factor of the Hilbert box per input (box = centre ± c·half-range). Default: the rule.
    penalty_form : {"full", "diagonal"}
        ``"full"``: λ‖W‖² (the Gaussian-prior reading; default). ``"diagonal"``: λ Σ_r Π_d ‖w_r^(d)‖², the
        variant behind the T-KRR paper's tables.
    max_sweeps : int
        ALS sweep budget (the paper uses 10).
    tol : float
        Stop when a sweep changes the objective by less than this relative amount.
    uncertainty : {"all_cores", "last_core", "none"}
        Laplace variant for ``posterior`` (see Notes).
    noise_estimate : {"held_out", "training"}
        Where σ² comes from when ``noise_variance`` is not given (see Notes, **Uncertainty**): ``"held_out"``
        (default) refits the chosen rank on 80% of the rows and takes the σ² its errors on the other 20% call for;
        ``"training"`` takes the larger of the marginal-likelihood σ² and the training-residual estimate.
    hyper_max_points : int
        Subsample size of the marginal-likelihood fit that estimates missing hyper-parameters.
    max_num_basis : int
        Cap of the automatically chosen M.
    time_budget : float or None
        Seconds the fit should take (default 60). With ``rank=None`` a larger rank is tried only while its
        predicted fit time — the last rank's seconds scaled by (R'/R)², plus the refit of ``noise_estimate=
        "held_out"`` — ends within the budget (:func:`~tnbayes.inference.budget.next_rank_fits_budget`);
        ``verbose=True`` and ``fit_report_`` say when the budget stopped the search. The first rank, which no
        measured rank predicts, stops its sweeps where another would leave the held-out refit too little of the
        budget (without a refit: at the budget; with a ``BudgetWarning``), and the refit's sweeps end at the
        budget. A fit that ends past 1.5
        times the budget warns (:class:`~tnbayes.inference.budget.BudgetWarning`) with the settings to pass.
        None: no budget.
    ard : bool
        Estimate one lengthscale per input (default) or one shared lengthscale.
    out_of_box : {"clip", "raise"}
        Test inputs beyond the prediction box (the training range plus half the Hilbert box's margin, see
        :meth:`input_box`) are clipped to its edge with one :class:`~tnbayes.selection.OutOfBoxWarning` that
        counts them (default), or refused with a ``ValueError``.
    chunk_size : int, optional
        Rows per chunk of the normal-equation accumulation (default ~32 MiB of design matrix).
    seed : int
        Seed of the subsample, the GP restarts and the initial cores.
    distributed : bool
        Data-parallel fit: every process of the default ``torch.distributed`` group calls ``fit`` with its own
        shard; scaling statistics, the hyper-parameter subsample and every core's normal equations are summed
        over the processes, so all of them end with the same model (see ``docs/scale-out.md``).
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.
    regularizer : {"full", "diagonal"}
        Deprecated alias of ``penalty_form`` (FutureWarning).

    Attributes
    ----------
    factors_ : torch.Tensor of shape (D·M, R)
        The CPD cores W^(d) stacked row-wise (rows d·M … (d+1)·M − 1 hold W^(d)), the layout of every CPD model;
        :meth:`cores` splits them. Files saved before tnbayes 0.2 with (D, M, R) cores still load.
    rank_ : int
        The rank used.
    rank_search_ : list of dict
        Ranks tried (``rank=None``) with their residual noise variance and final objective.
    lengthscale_ : torch.Tensor of shape (D,)
    outputscale_, noise_variance_, penalty_ : float
        σ_f², σ² (standardised scale) and λ used. ``noise_variance_`` scales the predictive variance.
    num_basis_ : int
    box_center_, box_half_width_ : torch.Tensor of shape (D,)
        The Hilbert box per standardised input.
    data_half_range_ : torch.Tensor of shape (D,)
        Half-range of the standardised training inputs.
    hyperparameter_source_ : str
        ``"given"`` or ``"marginal likelihood on n points"``.
    n_iter_ : int
        ALS sweeps run (for the kept rank).
    history_ : list of float of length n_iter_
        ALS objective after every sweep (the package-wide meaning, see :class:`~tnbayes.models.base.BaseModel`).
    converged_ : bool
        Whether ``tol`` stopped the sweeps before ``max_sweeps`` (a fit far from converged warns with
        :class:`sklearn.exceptions.ConvergenceWarning`).
    update_objectives_ : list of float
        ALS objective after every core update (first entry: at the initial cores).
    sweep_objectives_ : list of float
        Objective after every sweep.
    laplace_modes_ : list of int
        Cores whose conditional posteriors make up the predictive variance.
    core_choleskys_ : torch.Tensor of shape (len(laplace_modes_), M R, M R)
        Cholesky factors of their regularised normal equations.
    residual_noise_variance_ : float
        RSS / (N − effective_dof_) — a check on ``noise_variance_``.
    effective_dof_ : float
        tr((A_dᵀA_d + λ I⊗H_d)⁻¹ A_dᵀA_d) of the last-updated core only (a lower bound on the model's).

    Notes
    -----
    **Hyper-parameters.** Missing values of ℓ, σ_f², σ² are estimated the paper's way: an exact ARD GP
    (:class:`~tnbayes.ExactGP`, GPyTorch, float64) maximises the marginal likelihood on a random subsample of
    at most ``hyper_max_points`` standardised training points, after exact duplicate (x, y) records are
    dropped (repeated records look like noise-free replicates to ML-II); λ = σ²/σ_f². The fit is bounded below by
    the shortest lengthscale the basis resolves, 3.4·c·S/M (c = the given ``c`` or 1.5, M = ``num_basis``
    or ``max_num_basis``, S the data half-range): ML-II otherwise sometimes sends ℓ → 0 on discrete or
    duplicated inputs and σ² to its floor (wine), a model the basis cannot represent. If the final M or c
    makes the bound larger, ℓ is raised to it with an ``ApproximationWarning``.

    **Rank.** ``rank=None`` tries R = 10, 20, 40 (while M·R ≤ 1600) and keeps the first whose residual noise
    estimate RSS/(N − dof) is within 10% of the GP's σ², i.e. the first rank that explains the data as well
    as the exact GP's model does (a rank-limited fit otherwise leaves systematic misfit in the residuals), or
    the last rank the ``time_budget`` allows.

    **Uncertainty.** Given all cores but d the model is linear-Gaussian in core d, so
    ``vec(W_d) | rest ~ N(MAP, σ² (A_dᵀA_d + λ I⊗H_d)⁻¹)`` exactly. ``"all_cores"`` (default) sums the
    predictive variances of these conditional posteriors over every core — a block-diagonal
    (Gauss–Newton) Laplace approximation around the MAP. ``"last_core"`` keeps only the last-updated core
    (core 0): exact when the rank is full (for D = 2 and R = M it is the dense Hilbert-GP posterior), but
    it treats the other cores as known and under-covers at low rank (measured: 95% coverage 0.86–0.90 on
    boston/yacht against 0.93 for ``"all_cores"``; ``benchmarks/results/cpd_uci_calibration/cpd_uci_calibration.md``).
    The block-diagonal sum can double-count directions that two cores share (moving scale between
    cores), so it leans conservative. The noise variance σ² scales the whole predictive variance
    ``σ²(1 + aᵀS⁻¹a)``. With ``noise_estimate="held_out"`` (default) it is the maximum-likelihood σ² of the
    residuals on 20% of the training rows held out from a refit of the chosen rank (same basis, same λ;
    :mod:`tnbayes.selection.calibration`): a CPD of limited rank can interpolate its training rows yet predict
    new ones worse than the exact GP whose σ² it borrowed, and its intervals then under-cover badly; below
    30 held-out rows, or for streamed and distributed fits, the ``"training"`` rule applies: the larger of the
    marginal-likelihood σ² and the residual estimate (a fit that leaves more residual than the GP's noise
    carries that misfit as noise). A given ``noise_variance`` is used as is. When no GP is fitted (``lengthscale`` and ``penalty``
    given, no σ²) the residual estimate is used. A GP is fitted whenever ℓ or λ is missing, with ℓ free, so
    with a given ℓ and no λ, σ² and σ_f² come from the GP's own ℓ. ``"none"`` returns
    the noise variance only. None of these is a posterior over the CP rank or the hyper-parameters.

    **Out-of-core and data-parallel fits.** ``fit(data)`` with a :class:`tnbayes.data.ChunkedData` (or any
    re-iterable of ``(X, y)`` chunks) makes one pass for the scaling statistics and a uniform subsample of
    ``max(2000, 2·hyper_max_points)`` rows (the hyper-parameters are estimated on it as above), then one pass per
    core update; only one chunk of feature and design matrices is in memory. Without the per-row projection
    cache and the per-value grouping each core update recomputes the other cores' projections (O(N·D·M·R)
    more work per update than an in-memory fit). ``distributed=True`` fits take the same first pass over every
    process's shard (the subsample therefore differs from a single-process fit's; give the hyper-parameters to
    get identical models).
    """

    input_scaling = "standard"
    supports_chunked_fit = True
    _transient_attributes = ("features_",)
    _renamed_parameters = {"regularizer": "penalty_form"}

    def __init__(self, rank: int | None = None, *, num_basis: int | None = None, kernel: str = "se", nu: float | None = None,
                 lengthscale: float | list[float] | None = None, penalty: float | None = None,
                 outputscale: float | None = None, noise_variance: float | None = None,
                 c: float | list[float] | None = None, penalty_form: str = "full", max_sweeps: int = 10,
                 tol: float = 1e-6, uncertainty: str = "all_cores", noise_estimate: str = "held_out",
                 hyper_max_points: int = 1000, time_budget: float | None = 60.0,
                 max_num_basis: int = 40, ard: bool = True, out_of_box: str = "clip",
                 chunk_size: int | None = None, seed: int = 0, distributed: bool = False, normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False, regularizer: str = DEPRECATED) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self._keep_parameters(locals())

    # ------------------------------------------------------------------ validation
    def _validate_params(self, num_dims: int) -> None:
        self._check_shared_parameters()
        resolve_kernel(self.kernel, self.nu)
        if self.penalty_form not in PENALTY_FORMS:
            raise ValueError(f"penalty_form must be one of {PENALTY_FORMS}; got {self.penalty_form!r}.")
        check_time_budget(self.time_budget)
        check_noise_estimate(self.noise_estimate)
        if self.num_basis is not None and (int(self.num_basis) != self.num_basis or int(self.num_basis) < 1):
            raise ValueError(f"num_basis must be a positive integer; got {self.num_basis!r}.")
        if int(self.max_sweeps) < 1 or int(self.hyper_max_points) < 2 or int(self.max_num_basis) < 1:
            raise ValueError("max_sweeps and max_num_basis must be >= 1 and hyper_max_points >= 2.")
        if self.lengthscale is not None:
            ls = np.asarray(self.lengthscale, dtype=float).reshape(-1)
            if ls.size not in (1, num_dims):
                raise ValueError(f"lengthscale has {ls.size} values; give 1 or one per input ({num_dims}).")
            for value in ls:
                check_positive(float(value), "lengthscale")
        for name in ("outputscale", "noise_variance"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)
        if self.penalty is not None:
            check_positive(self.penalty, "penalty", allow_zero=True)
        if self.c is not None:
            c = np.asarray(self.c, dtype=float).reshape(-1)
            if c.size not in (1, num_dims) or np.any(c < 1.0) or not np.all(np.isfinite(c)):
                raise ValueError(f"c must be one number >= 1 or one per input ({num_dims}); got {self.c!r}.")

    def _min_samples(self) -> int:
        return 2

    # ------------------------------------------------------------------ fitting
    def _resolve_hyperparameters(self, X: torch.Tensor, y: torch.Tensor, extremes: torch.Tensor) -> None:
        """ℓ, σ_f², σ², λ: given, or by marginal likelihood on (a subsample of) X (n, D), y (n,); ``extremes``
        (≥ 1, D) spans the training range (its min and max per column are those of all training inputs)."""
        num_dims = X.shape[1]
        need_penalty = self.penalty is None and (self.outputscale is None or self.noise_variance is None)
        estimate = None
        if self.lengthscale is None or need_penalty:
            estimate = estimate_kernel_hyperparameters(X, y, kernel=self.kernel, nu=self.nu,
                                                       max_points=int(self.hyper_max_points), seed=int(self.seed),
                                                       ard=bool(self.ard),
                                                       lengthscale_lower_bound=self._resolvable_lengthscale(extremes))
            self.hyperparameter_source_ = estimate.describe()
        else:
            self.hyperparameter_source_ = "given"
        self._report(f"kernel hyper-parameters: {self.hyperparameter_source_} (an exact GP's ML-II; given values "
                     f"are kept).")
        if self.lengthscale is not None:
            ls = torch.as_tensor(self.lengthscale, dtype=torch.float64).reshape(-1).expand(num_dims).clone()
        else:
            ls = estimate.lengthscale
        self.lengthscale_ = ls
        self.outputscale_ = float(self.outputscale if self.outputscale is not None else
                                  (estimate.outputscale if estimate is not None else 1.0))
        noise = self.noise_variance if self.noise_variance is not None else (
            estimate.noise_variance if estimate is not None else None)
        if self.penalty is not None:
            self.penalty_ = float(self.penalty)
        else:
            self.penalty_ = float(noise) / self.outputscale_
        # With a given penalty and no noise value, the noise is estimated from the residuals after the fit.
        self._given_or_estimated_noise = None if noise is None else float(noise)

    def _resolvable_lengthscale(self, X: torch.Tensor) -> torch.Tensor:
        """Shortest lengthscale per input that the basis can represent: 3.4·c·S/M, shape (D,).

        Uses the given ``c`` (else the smallest default, 1.5) and the given ``num_basis`` (else
        ``max_num_basis``). The marginal-likelihood fit is bounded below by it, so structure the basis
        cannot resolve is explained as noise rather than interpolated by a lengthscale the CPD model
        could not use (on data with duplicated rows such as wine, unbounded ML-II drives σ² to its floor).
        """
        _, half_range = data_center_and_half_range(X.cpu(), allow_constant=True)
        half_range = torch.where(half_range > 0, half_range, torch.ones_like(half_range)).to(torch.float64)
        num_basis = int(self.num_basis) if self.num_basis is not None else int(self.max_num_basis)
        return resolvable_lengthscale(half_range, num_basis, self.c)

    def _build_features(self, X: torch.Tensor) -> BasisFeatures:
        num_dims = X.shape[1]
        center, half_range = data_center_and_half_range(X.cpu(), allow_constant=True)
        half_range = torch.where(half_range > 0, half_range, torch.ones_like(half_range))
        c, need_m = hilbert_box(self.lengthscale_, half_range, kernel_name(self.kernel, self.nu), c=self.c)
        if self.num_basis is not None:
            num_basis = int(self.num_basis)
        else:
            num_basis = min(need_m, int(self.max_num_basis))
            if need_m > num_basis:
                warn_user(
                    f"The fitted lengthscales need M = {need_m} basis functions per input for an accurate "
                    f"kernel approximation; using max_num_basis = {num_basis}. Short lengthscales are smoothed; "
                    f"raise max_num_basis (cost grows as M²) if the fit is poor.", ApproximationWarning)
        if self.lengthscale is None:
            # An estimated ℓ below what M functions resolve would shrink the approximate kernel's variance
            # (every represented frequency gets ~0 weight); raise it to the shortest representable ℓ.
            shortest = resolvable_lengthscale(half_range, num_basis, c).to(self.lengthscale_)
            clamped = self.lengthscale_ < shortest * (1 - RULE_RELATIVE_SLACK)  # on it within round-off: kept
            if bool(clamped.any()):
                warn_user(
                    f"Estimated lengthscales {self.lengthscale_[clamped].cpu().numpy().round(4).tolist()} of inputs "
                    f"{torch.nonzero(clamped).flatten().tolist()} are shorter than M = {num_basis} basis functions "
                    f"resolve; raised to {shortest[clamped].cpu().numpy().round(4).tolist()}.", ApproximationWarning)
                self.lengthscale_ = torch.maximum(self.lengthscale_, shortest)
        self.num_basis_ = num_basis
        self._report(
            f"M = {num_basis} basis functions per input " + (
                "(given)" if self.num_basis is not None else
                f"(the lengthscales need {need_m} for an accurate kernel; capped at max_num_basis={self.max_num_basis})"
                if need_m > num_basis else f"(what the shortest lengthscale needs for an accurate kernel)")
            + f"; boundary factor c = {float(c.min()):.3g}–{float(c.max()):.3g} "
            + ("(given)." if self.c is not None else "(room for the longest lengthscale beyond the training range)."))
        self.box_center_ = center
        self.box_half_width_ = (c * half_range).to(torch.float64)
        self.data_half_range_ = half_range.to(torch.float64)
        return self._features()

    def _features(self) -> BasisFeatures:
        basis = HilbertBasis(self.num_basis_, L=self.box_half_width_.tolist(), center=self.box_center_.tolist(),
                             num_dims=len(self.box_center_))
        return BasisFeatures(basis, self.lengthscale_, self.kernel, self.nu)

    def _fit(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, *,
             sample: tuple[torch.Tensor, torch.Tensor] | None = None, extremes: torch.Tensor | None = None) -> None:
        sample = (X, y) if sample is None else sample
        extremes = X if extremes is None else extremes
        self._validate_params(extremes.shape[1])
        if self.num_basis is not None or self.rank is not None:  # refuse a core that cannot fit before any work
            m = int(self.num_basis) if self.num_basis is not None else 1
            r = int(self.rank) if self.rank is not None else min(AUTO_RANKS)
            check_fits_in_memory(4 * (m * r) ** 2 * 8, f"num_basis = {m}, rank = {r} (a core with M·R = {m * r} "
                                 f"unknowns)", "lower the rank or num_basis", self.device_)
        self._resolve_hyperparameters(*sample, extremes)
        self.features_ = self._build_features(extremes)
        if self.rank is not None:
            ranks = [int(self.rank)]
        else:
            ranks = [r for r in AUTO_RANKS if self.num_basis_ * r <= AUTO_RANK_MAX_WIDTH] or [AUTO_RANKS[0]]
        self._fit_cpd(self.features_, X, y, ranks, self.penalty_, self._given_or_estimated_noise,
                      penalty_form=self.penalty_form)

    # ------------------------------------------------------------------ prediction
    def _representable_box(self) -> tuple[torch.Tensor, torch.Tensor]:
        center, half_width = self.box_center_, self.box_half_width_
        return center - half_width, center + half_width


class CPDKernelClassifier(BinaryClassifierMixin, CPDKernelMachine):
    """Two-class CPD kernel machine: least squares on ±1 labels (LS-SVM style), sign for labels.

    Parameters are those of :class:`CPDKernelMachine` (targets are not standardised: ``normalize_y=False``).
    Missing hyper-parameters are estimated by the same marginal-likelihood fit on the ±1 labels; the
    T-KRR paper instead used ℓ = mean per-column standard deviation of the [0, 1]-scaled inputs and
    λ = 1e-5, which :meth:`paper_hyperparameters` computes.

    Attributes
    ----------
    classes_ : numpy.ndarray of shape (2,)
        The labels; ``classes_[1]`` is the positive class (+1).

    Notes
    -----
    ``predict_proba`` is ``P(y = +1) = Φ(μ(x) / √(σ_f²(x) + σ²))`` from the Gaussian predictive of the
    regression on the labels — a probit read-out of the LS-SVM, not a likelihood-based classifier.
    """

    def __init__(self, rank: int | None = None, *, normalize_y: bool = False, **kwargs: Any) -> None:
        # the same parameters as CPDKernelMachine (get_params collects them from both signatures);
        # only the default of normalize_y differs: LS-SVM regresses on the raw ±1 labels
        super().__init__(rank, normalize_y=normalize_y, **kwargs)

    @staticmethod
    def paper_hyperparameters(X: ArrayLike) -> dict[str, Any]:
        """T-KRR's classification heuristic, in the standardised input units this model uses.

        ℓ₀ = mean over columns of the standard deviation of the [0, 1]-scaled inputs; per standardised
        column that is ℓ_d = ℓ₀ · range_d / std_d. λ = 1e-5.

        Parameters
        ----------
        X : array-like of shape (N, D)
            Training inputs.

        Returns
        -------
        dict
            ``{"lengthscale": list of D floats, "penalty": 1e-5}`` to pass to the constructor.
        """
        Xt = check_inputs(X)
        std = Xt.std(0, unbiased=False)
        span = Xt.max(0).values - Xt.min(0).values
        span = torch.where(span > 0, span, torch.ones_like(span))
        std = torch.where(std > 0, std, torch.ones_like(std))
        ell0 = float((std / span).mean())
        return {"lengthscale": (ell0 * span / std).tolist(), "penalty": 1e-5}


register_model("cpd", CPDKernelMachine)
register_model("cpd_diag", lambda **kw: CPDKernelMachine(penalty_form="diagonal", **kw))
