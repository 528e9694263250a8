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
``[[Re Ψ, −Im Ψ], [Im Ψ, Re Ψ]]`` with targets ``[y; 0]`` (``tests/test_qtkm.py`` checks the equivalence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from tnbayes.basis.quantized import FEATURE_KINDS, kron_rows
from tnbayes.inference import FourierPolynomialFeatures
from tnbayes.inference.als import StreamedRows
from tnbayes.models._cpd_base import UNCERTAINTY_METHODS, CPDModelBase
from tnbayes.models.registry import register_model
from tnbayes.selection.input_box import check_out_of_box_policy

__all__ = ["QTKM", "TKM", "KRRSelection", "select_krr_hyperparameters", "DEFAULT_PENALTY_GRID", "PAPER_PENALTY_GRID",
           "DEFAULT_PERIOD_GRID"]

#: λ grid of the paper's cross-validation, for its raw features (per-sample convention: penalty N·λ‖W‖²)
PAPER_PENALTY_GRID = tuple(10.0 ** k for k in range(-5, 6))
#: default λ grid for the normalised features (k(x, x) = 1): the paper's grid divided by M^D ranges from
#: 10⁻¹² (yacht, D = 6) to 10⁻⁸ (wine, D = 11) at its lower end, so the default reaches 10⁻¹⁴ … 10²
DEFAULT_PENALTY_GRID = tuple(10.0 ** k for k in range(-14, 3))
#: period grid of the paper's cross-validation (inputs scaled to [−0.5, 0.5])
DEFAULT_PERIOD_GRID = (1.25, 1.5, 2.0, 3.0, 5.0, 9.0, 17.0, 33.0, 65.0)


@dataclass
class KRRSelection:
    """Result of :func:`select_krr_hyperparameters`.

    Attributes
    ----------
    penalty : float
        The chosen λ (per-sample convention).
    period : float or None
        The chosen period (None for polynomial features).
    cv_mse : float
        Its mean cross-validated mean squared error.
    noise_variance : float
        RSS/(n − dof) of exact KRR with the chosen values on the whole subsample (dof = tr S, S = K(K + nλI)⁻¹);
        RSS/‖I − Re S‖_F² when the fit interpolates (n − dof < 1), where the first is round-off over round-off.
    num_points : int
        Size of the subsample.
    table : list of dict
        Every (period, penalty, cv_mse) tried.
    """

    penalty: float
    period: float | None
    cv_mse: float
    noise_variance: float
    num_points: int
    table: list[dict[str, float]] = field(default_factory=list)


def _krr_spectral(kernel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    kernel = 0.5 * (kernel + kernel.mH)
    eigenvalues, eigenvectors = torch.linalg.eigh(kernel)
    return eigenvalues.clamp_min(0.0), eigenvectors


def select_krr_hyperparameters(X: torch.Tensor, y: torch.Tensor, *, num_basis: int, feature_map: str = "fourier",
                               penalties: Sequence[float] = DEFAULT_PENALTY_GRID,
                               periods: Sequence[float] = DEFAULT_PERIOD_GRID, folds: int = 3,
                               max_points: int = 1000, seed: int = 0, normalize: bool = True) -> KRRSelection:
    """λ (and P) by k-fold cross-validation of *exact* kernel ridge regression (the QTKM paper's protocol).

    The kernel is the one the (unconstrained) features span, ``k(x, x') = Π_d ψ(x_d)ᵀ conj(ψ(x'_d))``, so
    exact KRR is the full-rank limit of the CPD models. Objective ``‖y − f‖² + n·λ‖w‖²`` per fold
    (n = the fold's training size); each (P, fold) needs one eigendecomposition, after which every λ is
    cheap. λ (and P) minimise the CV MSE, unless exact KRR with them interpolates the subsample
    (n − tr S < 1): the CV MSE is then flat in λ (many inputs make the product kernel nearly diagonal), and the
    one-standard-error rule picks the largest λ within one standard error of the minimum.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
        Scaled inputs (in [−0.5, 0.5] for the default period grid).
    y : torch.Tensor of shape (N,)
    num_basis : int
        M.
    feature_map : {"fourier", "polynomial"}
    penalties, periods : sequence of float
        Grids (``periods`` is ignored for polynomials).
    folds : int
    max_points : int
        Random subsample size (the cost is O(max_points³) per period and fold).
    seed : int
    normalize : bool
        Use the normalised features ψ/√M (k(x, x) = 1), as the models do by default.

    Returns
    -------
    KRRSelection
    """
    if int(folds) < 2:
        raise ValueError(f"folds must be >= 2; got {folds!r}.")
    if len(penalties) == 0 or any(not math.isfinite(float(p)) or float(p) <= 0 for p in penalties):
        raise ValueError(f"penalties must be a non-empty grid of positive numbers; got {list(penalties)!r}.")
    generator = torch.Generator().manual_seed(int(seed))
    n_total = X.shape[0]
    if n_total < 2 * int(folds):
        raise ValueError(f"cross-validation with {folds} folds needs at least {2 * int(folds)} points; got {n_total}. "
                         f"Give penalty (and period) explicitly for tiny data sets.")
    order = torch.randperm(n_total, generator=generator)[: int(max_points)].to(X.device)
    Xs, ys = X[order], y[order]
    n = Xs.shape[0]
    fold_of = torch.arange(n, device=X.device) % int(folds)
    period_grid: list[float | None] = [float(p) for p in periods] if feature_map == "fourier" else [None]
    table: list[dict[str, float]] = []
    candidates: list[tuple[float, float, float, float | None]] = []  # (cv_mse, its standard error, λ, P)
    for period in period_grid:
        features = FourierPolynomialFeatures(X.shape[1], num_basis, feature_map, period, quantized=False,
                                             normalize=normalize)
        kernel = features.kernel(Xs, Xs)
        squared = torch.zeros(len(penalties), n, dtype=torch.float64)  # per-point squared CV errors
        for fold in range(int(folds)):
            train, valid = fold_of != fold, fold_of == fold
            eigenvalues, eigenvectors = _krr_spectral(kernel[train][:, train])
            projected = eigenvectors.mH @ ys[train].to(kernel.dtype)
            cross = kernel[valid][:, train] @ eigenvectors
            n_train = int(train.sum())
            for i, penalty in enumerate(penalties):
                prediction = (cross @ (projected / (eigenvalues + n_train * float(penalty)))).real
                squared[i, valid.cpu()] = ((prediction - ys[valid]) ** 2).to(torch.float64).cpu()
        errors, standard_errors = squared.mean(dim=1), squared.std(dim=1) / math.sqrt(n)
        for i, penalty in enumerate(penalties):
            table.append({"period": float("nan") if period is None else period, "penalty": float(penalty),
                          "cv_mse": float(errors[i])})
            candidates.append((float(errors[i]), float(standard_errors[i]), float(penalty), period))
    best = min(candidates, key=lambda c: c[0])  # the first of equal minima

    def residual(penalty: float, period: float | None) -> tuple[torch.Tensor, torch.Tensor, float, float]:
        """The smoother's spectrum, 1 − s = nλ/(e + nλ) (no cancellation at s ≈ 1), RSS and n − tr S."""
        features = FourierPolynomialFeatures(X.shape[1], num_basis, feature_map, period, quantized=False,
                                             normalize=normalize)
        eigenvalues, eigenvectors = _krr_spectral(features.kernel(Xs, Xs))
        complement = (n * penalty / (eigenvalues + n * penalty)).to(eigenvectors.dtype)
        rss = float(((eigenvectors @ (complement * (eigenvectors.mH @ ys.to(eigenvectors.dtype)))).real ** 2).sum())
        return eigenvectors, complement, rss, float(complement.real.sum())

    eigenvectors, complement, rss, residual_dof = residual(best[2], best[3])
    if residual_dof < 1.0:
        # The fit interpolates the subsample. With many inputs the isotropic product kernel is nearly diagonal:
        # no λ then predicts measurably better than another, the CV MSE is flat in λ, and its minimum falls on
        # the smallest λ — a choice the data do not support, under which a CPD fit with more weights than rows
        # interpolates too. Resolve the plateau by the one-standard-error rule (Hastie, Tibshirani & Friedman,
        # The Elements of Statistical Learning, §7.10): the largest λ whose CV MSE is within one standard error
        # of the minimum (at its best period). A fit that does not interpolate keeps the minimum.
        within = [c for c in candidates if c[0] <= best[0] + best[1]]
        largest = max(c[2] for c in within)
        best = min((c for c in within if c[2] == largest), key=lambda c: c[0])
        eigenvectors, complement, rss, residual_dof = residual(best[2], best[3])
    cv_mse, _, penalty, period = best
    if residual_dof < 1.0:
        # still interpolating: RSS/(n − tr S) would be round-off over round-off. For white noise
        # E‖(I − Re S)ε‖² = σ² ‖I − Re S‖_F², a denominator that stays positive
        residual_operator = ((eigenvectors * complement) @ eigenvectors.mH).real
        residual_dof = float((residual_operator ** 2).sum())
    noise = rss / residual_dof if residual_dof > 0 else cv_mse
    return KRRSelection(penalty, period, cv_mse, noise, n, table)


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
    hyper_max_points : int
        Subsample size of the cross-validation.
    cv_folds : int
        Folds of the cross-validation (the paper uses 3).
    penalty_grid, period_grid : sequence of float, optional
        Cross-validation grids (default: the paper's, ``DEFAULT_PENALTY_GRID`` and ``DEFAULT_PERIOD_GRID``).
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
        The cross-validation result (chosen values, CV MSE, KRR noise estimate, subsample size).
    rank_, rank_search_, history_, sweep_objectives_, noise_variance_, residual_noise_variance_,
    effective_dof_, laplace_modes_, core_choleskys_
        As in :class:`~tnbayes.CPDKernelMachine`.

    Notes
    -----
    **Inputs** are min–max scaled to [−0.5, 0.5] with the training range (the paper's protocol). Fourier
    features are periodic: queries that fall farther than P/2 from the centre raise ``ValueError``.

    **Hyper-parameters.** Missing λ (and P) are chosen as in the paper: 3-fold cross-validation of exact
    kernel ridge regression with the kernel the features span, on a subsample of ``hyper_max_points``,
    over P ∈ {1.25, 1.5, 2, 3, 5, 9, 17, 33, 65} and λ ∈ 10⁻¹⁴ … 10² (:func:`select_krr_hyperparameters`). The
    paper's grid, λ ∈ 10⁻⁵ … 10⁵ (``PAPER_PENALTY_GRID``), was for raw features with k(x, x) = M^D; for the
    normalised ones it would be divided by M^D, which moves with D.

    **Rank.** ``rank=None`` tries R = 10, 20, 40, 80 (QTKM) or 5, 10, 20, 40 (TKM; the same parameter
    budgets for M = 16) and keeps the first whose residual noise RSS/(N − dof) is within 10% of the exact
    KRR's on the CV subsample.

    **Uncertainty.** With λ read as σ²/σ_w², the objective is a Gaussian-prior negative log posterior and the
    same Laplace-type conditional-core posteriors as T-KRR give the predictive variance (for complex
    weights the real part's variance, see :func:`~tnbayes.inference.conditional_core_variance`). The noise
    variance is the larger of the exact KRR's and the CPD fit's residual estimate, and at least
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
                 tol: float = 1e-6, uncertainty: str = "all_cores", hyper_max_points: int = 1000, cv_folds: int = 3,
                 penalty_grid: Sequence[float] | None = None, period_grid: Sequence[float] | None = None,
                 out_of_box: str = "clip", chunk_size: int | None = None, seed: int = 0, distributed: bool = False,
                 normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self.rank = rank
        self.num_basis = num_basis
        self.feature_map = feature_map
        self.period = period
        self.penalty = penalty
        self.penalty_per_sample = penalty_per_sample
        self.quantized = quantized
        self.normalize_features = normalize_features
        self.noise_variance = noise_variance
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.uncertainty = uncertainty
        self.hyper_max_points = hyper_max_points
        self.cv_folds = cv_folds
        self.penalty_grid = penalty_grid
        self.period_grid = period_grid
        self.out_of_box = out_of_box
        self.chunk_size = chunk_size
        self.seed = seed
        self.distributed = distributed

    # ------------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        if self.feature_map not in FEATURE_KINDS:
            raise ValueError(f"feature_map must be one of {FEATURE_KINDS}; got {self.feature_map!r}.")
        if isinstance(self.num_basis, bool) or int(self.num_basis) != self.num_basis or int(self.num_basis) < 2:
            raise ValueError(f"num_basis must be an integer >= 2; got {self.num_basis!r}.")
        if self.rank is not None and (isinstance(self.rank, bool) or not isinstance(self.rank, (int, np.integer))
                                      or int(self.rank) < 1):
            raise ValueError(f"rank must be a positive integer (or None to choose it from the data); got {self.rank!r}.")
        if self.uncertainty not in UNCERTAINTY_METHODS:
            raise ValueError(f"uncertainty must be one of {UNCERTAINTY_METHODS}; got {self.uncertainty!r}.")
        check_out_of_box_policy(self.out_of_box)
        if self.period is not None and (not math.isfinite(float(self.period)) or float(self.period) < 1.0):
            raise ValueError(f"period must be a number >= 1 (inputs are scaled to [-0.5, 0.5], so P < 1 would wrap "
                             f"the training data around; P = 1 identifies the two ends); got {self.period!r}.")
        for name in ("penalty", "noise_variance"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(float(value)) or float(value) <= 0):
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}.")
        if int(self.max_sweeps) < 1 or int(self.hyper_max_points) < 6 or int(self.cv_folds) < 2:
            raise ValueError("max_sweeps must be >= 1, hyper_max_points >= 6 and cv_folds >= 2.")
        if not math.isfinite(float(self.tol)) or float(self.tol) < 0:
            raise ValueError(f"tol must be a finite number >= 0; got {self.tol!r}.")
        if self.period_grid is not None and any(float(p) < 1.0 for p in self.period_grid):
            raise ValueError(f"every period in period_grid must be >= 1; got {list(self.period_grid)!r}.")

    # ------------------------------------------------------------------ fitting
    def _resolve_hyperparameters(self, X: torch.Tensor, y: torch.Tensor) -> None:
        need_period = self.feature_map == "fourier" and self.period is None
        self.krr_selection_ = None
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
            self.krr_selection_ = {"penalty": selection.penalty, "period": selection.period,
                                   "cv_mse": selection.cv_mse, "noise_variance": selection.noise_variance,
                                   "num_points": selection.num_points}
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
        self.penalty_ = float(penalty)
        self.period_ = None if self.feature_map == "polynomial" else float(period)
        self._given_or_estimated_noise = reference

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
        self._resolve_hyperparameters(*sample)
        self.n_dims_ = int(extremes.shape[1])
        self.features_ = self._features()
        self.features_.check_inputs(extremes)
        engine_penalty = self.penalty_ * self.n_train_ if self.penalty_per_sample else self.penalty_
        ranks = [int(self.rank)] if self.rank is not None else list(self._auto_ranks)
        self._fit_cpd(self.features_, X, y, ranks, engine_penalty, self._given_or_estimated_noise)

    def weight_tensor(self, dim: int = 0) -> torch.Tensor:
        """The dense coefficient vector of one input's features for D = 1 models (the recovered spectrum).

        Contracts the K quantized cores into the length-M vector ``w`` with ``f(x) = Re(ψ(x)ᵀ w)/√M`` (``Re(ψ(x)ᵀ w)``
        with ``normalize_features=False``) in the
        order of :func:`~tnbayes.basis.fourier_frequencies` (only defined for one input: for D > 1 the weights
        are a D-way tensor).

        Returns
        -------
        torch.Tensor of shape (M,)
        """
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
