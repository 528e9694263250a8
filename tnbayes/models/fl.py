"""FL: the feature-learning tensor kernel machine (Saiapin & Batselier), and its cross-validation baseline.

``f(x) = Re[(Σ_p λ_p Φ_θp(x))ᵀ w]``: P quantized Fourier feature maps with periods θ_p, one quantized CPD weight
tensor w shared by all of them, and learned mixture weights λ (feature importances). Trained by ALS on ::

    ½‖y − Σ_p λ_p Φ_p w‖² + (α/2)‖w‖² + β·Reg(λ)

with α the ``penalty``, Reg the ``mixture_penalty`` and β the ``mixture_penalty_strength`` — the CPD cores by the
package's one engine (:class:`~tnbayes.inference.CPDALS` with λ as its component weights: penalty α, families with
λ_p = 0 skipped), λ by :func:`~tnbayes.inference.mixture_weights.solve_mixture_weights` between sweeps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tnbayes._deprecation import DEPRECATED, moved_names_getattr, renamed_attribute
from tnbayes._validation import ArrayLike, check_X_y
from tnbayes.basis import PeriodMixtureFeatures
from tnbayes.basis._checks import check_num_basis
from tnbayes.inference.als import CPDALS, largest_rank_with_partial_products
from tnbayes.inference.als_start import aligned_cores
from tnbayes.inference.budget import ALS_PROBE_ROWS, check_time_budget, format_seconds, rank_within_budget
from tnbayes.inference.mixture_weights import MIXTURE_PENALTIES, mixture_weight_objective, solve_mixture_weights
from tnbayes.models._cpd_base import CPDModelBase
from tnbayes.models.registry import register_model

__all__ = ["FeatureLearningKM", "FLModel", "DEFAULT_FL_PERIODS", "DEFAULT_PENALTY", "cross_validate_period"]

#: the paper's θ set (inputs in [0, 1])
DEFAULT_FL_PERIODS = (10.0, 2.0, 128.0, 25.0, 64.0, 600.0, 2000.0, 1024.0)
#: learn λ with these penalties; "none" keeps λ at its initial value (the single-period CV baseline)
FL_MIXTURE_PENALTIES = MIXTURE_PENALTIES + ("none",)
#: α (``penalty``) of the normalised features (k(x, x) = 1 per family): a weak ridge, inside the range of the paper's
#: α = 0.01 on raw features (k(x, x) = M^D) divided by M^D on its data sets (from 10⁻⁴ for yacht to 10⁻⁹ for concrete)
DEFAULT_PENALTY = 1e-6
#: share of :func:`~tnbayes.inference.als.largest_rank_with_partial_products` that the time budget's rank cap keeps
PARTIAL_PRODUCTS_MARGIN = 0.8
#: the paper's α, for its raw features (``normalize_features=False``)
PAPER_PENALTY = 0.01
#: FISTA budget per λ update where FISTA is used (the fixed norm with λ ≥ 0, and L1 when the exact homotopy fails its
#: optimality check; warm-started; a step that would raise the objective is refused)
FISTA_MAX_ITER = 2000


class FeatureLearningKM(CPDModelBase):
    """Feature-learning tensor kernel machine: a learned mixture of P periodic feature maps, quantized CPD weights.

    Parameters
    ----------
    rank : int, optional
        CP rank R. Default: chosen so the model has about N/2 parameters (2 ≤ R ≤ 50), the under-parameterised
        regime the paper works in, lowered where its fit would end past ``time_budget``.
    num_basis : int
        Fourier features per input M (quantized into its prime factors: K = log2 M cores of size 2 for M = 2^K).
    periods : sequence of float
        θ_1 … θ_P in the paper's units (inputs in [0, 1]). Default: the paper's eight.
    penalty : float, optional
        α, the ridge penalty (α/2)‖w‖² of the CPD weights (not scaled by N; the paper's convention). Default:
        ``DEFAULT_PENALTY`` (10⁻⁶) with normalised features, the paper's 0.01 with raw ones.
    mixture_penalty_strength : float
        β, the weight of Reg(λ) (ignored by ``"fixed_norm"`` and ``"none"``).
    mixture_penalty : {"l1", "l2", "fixed_norm", "none"}
        Reg(λ): ‖λ‖₁ (exact, by the LARS-lasso homotopy), ½‖λ‖² (closed form), the constraint ‖λ‖₂ ≤ 1
        (secular equation), or no λ update (λ stays at ``initial_weights``; with one period this is the plain
        quantized CPD model).
    nonnegative : bool
        Constrain λ ≥ 0.
    max_sweeps : int
        ALS sweeps (the paper's epochs); each is one sweep over the cores (forward and back) followed by the λ
        update. With ``tol=0`` every sweep runs, as in the paper.
    initial_weights : {"uniform", "ones"} or sequence of float
        λ at the start: U(0, 1) draws (the paper's, seeded), all ones, or given values.
    quantized : bool
        Quantize features and weights (the paper does).
    normalize_features : bool
        Divide every family's features by √M per input (k(x, x) = 1 per family whatever D is; default), so that
        ``penalty`` means the same for every number of inputs. ``False``: the paper's raw features (k(x, x) = M^D). See Notes.
    noise_variance : float, optional
        σ² on the standardised target scale for the predictive variance (default: the residual estimate).
    tol : float
        Stop early when a sweep changes the ALS objective by less than this relative amount (default 0: run
        all ``max_sweeps``, as the paper).
    uncertainty : {"all_cores", "last_core", "none"}
        Laplace variant for ``posterior`` (see :class:`~tnbayes.CPDKernelMachine`), at the learned λ.
    time_budget : float or None
        Seconds the fit should take (default 60; None: no budget). With ``rank=None`` and more than
        :data:`~tnbayes.inference.budget.ALS_PROBE_ROWS` rows, the automatic rank is first capped at
        ``PARTIAL_PRODUCTS_MARGIN`` of the largest at which ALS keeps its products over the other cores in memory
        (:func:`~tnbayes.inference.als.largest_rank_with_partial_products`; above it a sweep costs O(K) times more),
        then ALS's set-up and one sweep (with its λ update) at that rank are
        timed on that many seeded rows; when that time, scaled by N / rows and by ``max_sweeps``, would end the fit past
        the budget, the rank is lowered by the (R'/R)² scaling of :func:`~tnbayes.inference.budget.als_rank_seconds` (at
        least 2; reported in ``fit_report_``). In every fit, a given rank too, ALS stops before a sweep that would end
        past the budget, and a fit cut short, or one that still took more than 1.5 times the budget, warns
        (:class:`~tnbayes.inference.budget.BudgetWarning`).
    out_of_box : {"clip", "raise"}
        Queries beyond the prediction box — the training range [0, 1] extended by half the way to θ_min/2 from its
        centre, where the shortest period would wrap around (see :meth:`input_box`) — are clipped to its edge with
        one :class:`~tnbayes.selection.OutOfBoxWarning` (default), or refused with a ``ValueError``.
    chunk_size : int, optional
    seed : int
        Seed of the initial cores and λ.
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.
    alpha, beta, regularization, epochs
        Deprecated aliases of ``penalty``, ``mixture_penalty_strength``, ``mixture_penalty`` and ``max_sweeps``
        (FutureWarning).

    Attributes
    ----------
    factors_ : torch.Tensor of shape (Σ_k M_k, R)
        The quantized CPD cores stacked row-wise (complex).
    penalty_ : float
        α used (``penalty`` or its default for the feature scaling).
    feature_weights_ : torch.Tensor of shape (P,)
        The learned λ (feature importances, aligned with ``periods_``).
    periods_ : list of float
    feature_weight_history_ : list of list of float
        λ after each epoch (the first entry is the initial λ).
    objective_history_ : list of float
        The FL objective ½‖y − f‖² + (α/2)‖w‖² + β·Reg(λ) after each core sweep and after each λ update
        (alternating; non-increasing, every step being an exact or safeguarded block minimisation).
    active_families_ : list of int
        Families with λ_p ≠ 0 at the end.
    rank_, n_iter_, history_, converged_, sweep_objectives_, update_objectives_, noise_variance_,
    residual_noise_variance_, effective_dof_, laplace_modes_, core_choleskys_
        As in :class:`~tnbayes.CPDKernelMachine`.

    Notes
    -----
    **Inputs** are min–max scaled with the training range to [0, 1], as in the paper. The origin matters here:
    shifting x multiplies the features of period θ_p by phases that depend on θ_p, which one weight tensor w
    shared by all families cannot absorb. Queries may lie up to θ_min/2 from 0.5 before the shortest period
    wraps around (``ValueError`` beyond that).

    **Complex residual.** The cores are fitted to real y by complex least squares, as in QTKM, so the objective
    penalises the imaginary part of Σ_p λ_p Φ_p w as well. The λ update uses the same residual: F stacks the real
    and imaginary parts of the per-family predictions (2N × P), so every block update minimises one objective
    and it never increases. (The reference code uses Re F only, which ignores the imaginary residual the core
    updates penalise.)

    **Uncertainty** is the CPD model's Laplace approximation of the cores at the learned λ (λ's own uncertainty
    is ignored).

    **Normalised features and many inputs.** With the raw features the weight penalty acts on a kernel with
    k(x, x) = M^D: relative to the data term it shrinks like M^{−D}, so with many inputs it no longer restrains
    the D-fold products of per-input factors, which fit the training rows and swing far off between them. The
    normalised features keep k(x, x) = 1, bound |f(x)| by the norm of the weights, and give α one meaning for
    every D. Random initial cores then start near W = 0: each of the D·K factor projections of a random core has
    mean square 1/q_k of the core's squared norm, so a core update sees a data term about N/M^D times ‖W‖², and
    when N < α·M^D the penalty wins and ALS stays at W = 0 (the prediction collapses to the mean). In that case
    the cores start instead from the mean training feature of the longest-period family (nearly the same vector
    for every training row, so the initial fit is of the size of the weights) plus a random part of relative size
    :data:`~tnbayes.inference.als_start.INITIAL_PERTURBATION` per column
    (:func:`~tnbayes.inference.als_start.aligned_cores`); otherwise from the engine's start (the random draw, or
    where its products vanish the mean features of all families, see :mod:`tnbayes.inference.als_start`).
    """

    input_scaling = "minmax"
    _sweep_budget_parameter = "max_sweeps"
    _transient_attributes = ("features_",)
    _renamed_parameters = {"alpha": "penalty", "beta": "mixture_penalty_strength", "regularization": "mixture_penalty",
                           "epochs": "max_sweeps"}

    def __init__(self, rank: int | None = None, *, num_basis: int = 8,
                 periods: Sequence[float] = DEFAULT_FL_PERIODS, penalty: float | None = None,
                 mixture_penalty_strength: float = 0.1, mixture_penalty: str = "l1", nonnegative: bool = False,
                 max_sweeps: int = 10,
                 initial_weights: str | Sequence[float] = "uniform", quantized: bool = True,
                 normalize_features: bool = True,
                 noise_variance: float | None = None, tol: float = 0.0, uncertainty: str = "all_cores",
                 time_budget: float | None = 60.0,
                 out_of_box: str = "clip", chunk_size: int | None = None, seed: int = 0, normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False, alpha: float | str | None = DEPRECATED, beta: float | str = DEPRECATED,
                 regularization: str = DEPRECATED, epochs: int | str = DEPRECATED) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self._keep_parameters(locals())

    # ------------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        if self.mixture_penalty not in FL_MIXTURE_PENALTIES:
            raise ValueError(f"mixture_penalty must be one of {FL_MIXTURE_PENALTIES}; got {self.mixture_penalty!r}.")
        check_num_basis(self.num_basis)
        check_time_budget(self.time_budget)
        self._check_shared_parameters()
        periods = list(self.periods) if self.periods is not None else []
        if not periods or any(not math.isfinite(float(p)) or float(p) < 1.0 for p in periods):
            raise ValueError(f"periods must be a non-empty sequence of numbers >= 1 (inputs span a unit range); "
                             f"got {self.periods!r}.")
        for name in ("penalty", "mixture_penalty_strength"):
            if name == "penalty" and self.penalty is None:  # the default for the feature scaling
                continue
            value = float(getattr(self, name))
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0; got {getattr(self, name)!r}.")
        if self.noise_variance is not None and (not math.isfinite(float(self.noise_variance))
                                                or float(self.noise_variance) <= 0):
            raise ValueError(f"noise_variance must be a finite number > 0; got {self.noise_variance!r}.")
        if isinstance(self.max_sweeps, bool) or int(self.max_sweeps) != self.max_sweeps or int(self.max_sweeps) < 1:
            raise ValueError(f"max_sweeps must be a positive integer; got {self.max_sweeps!r}.")
        if isinstance(self.initial_weights, str):
            if self.initial_weights not in ("uniform", "ones"):
                raise ValueError(f"initial_weights must be 'uniform', 'ones' or P numbers; got {self.initial_weights!r}.")
        elif len(list(self.initial_weights)) != len(periods) or not all(
                math.isfinite(float(v)) for v in self.initial_weights):
            raise ValueError(f"initial_weights needs one finite number per period ({len(periods)}); "
                             f"got {self.initial_weights!r}.")

    # ------------------------------------------------------------------ fitting
    def _features(self) -> PeriodMixtureFeatures:
        return PeriodMixtureFeatures(int(self.n_dims_), int(self.num_basis), self.periods_,
                                     quantized=bool(self.quantized), normalize=bool(self.normalize_features),
                                     center=0.5)

    def _initial_feature_weights(self, num: int) -> torch.Tensor:
        if isinstance(self.initial_weights, str) and self.initial_weights == "uniform":
            generator = torch.Generator().manual_seed(int(self.seed) + 7919)
            weights = torch.rand(num, generator=generator, dtype=torch.float64)
        elif isinstance(self.initial_weights, str):
            weights = torch.ones(num, dtype=torch.float64)
        else:
            weights = torch.as_tensor([float(v) for v in self.initial_weights], dtype=torch.float64)
        if self.nonnegative:
            weights = weights.clamp_min(0.0)
        if self.mixture_penalty == "fixed_norm" and float(weights.norm()) > 1.0:
            weights = weights / weights.norm()  # start feasible
        return weights

    def _auto_rank(self, n: int, features: PeriodMixtureFeatures) -> int:
        per_rank = sum(features.mode_sizes)
        return int(min(50, max(2, n // (2 * per_rank))))

    def _budget_rank(self, X: torch.Tensor, y: torch.Tensor, features: PeriodMixtureFeatures, rank: int,
                     penalty: float, weights: torch.Tensor, between_sweeps) -> int:
        """The automatic ``rank``, lowered when its fit is predicted to end past ``time_budget`` (see the parameter).

        Parameters
        ----------
        X : torch.Tensor of shape (N, D)
            Scaled training inputs.
        y : torch.Tensor of shape (N,)
        features : PeriodMixtureFeatures
        rank : int
            The automatic rank.
        penalty : float
            α.
        weights : torch.Tensor of shape (P,)
            The initial λ.
        between_sweeps : callable or None
            The λ update the fit runs after each sweep (timed with the probe's sweep; what it records is dropped).

        Returns
        -------
        int
        """
        n = X.shape[0]
        if self.time_budget is None or n <= ALS_PROBE_ROWS:
            return rank
        # above it ALS rebuilds its products over the other cores, O(K) times slower a sweep; the fit's engine reads
        # the free memory again, hence the margin
        cached = max(2, int(PARTIAL_PRODUCTS_MARGIN * largest_rank_with_partial_products(features, n, X.dtype,
                                                                                          device=X.device)))
        if cached < rank:
            self._report(f"time budget: rank at most {cached} instead of {rank}, where ALS keeps the products over "
                         f"the other cores of its {n} rows in a quarter of the free memory (with a 20% margin).")
            rank = cached
        rows = torch.randperm(n, generator=torch.Generator().manual_seed(int(self.seed)))[:ALS_PROBE_ROWS]
        rows = rows.to(X.device)
        synchronize = torch.cuda.synchronize if X.is_cuda else (lambda: None)  # the clock reads finished work
        synchronize()
        started = time.perf_counter()
        probe = CPDALS(features, X[rows], y[rows], rank, penalty, chunk_size=self.chunk_size, seed=int(self.seed),
                       component_weights=weights)
        synchronize()
        set_up = time.perf_counter() - started
        recorded = len(self.objective_history_), len(self.feature_weight_history_)
        probe.run(1, 0.0, between_sweeps=between_sweeps)
        synchronize()
        sweep = time.perf_counter() - started - set_up
        del self.objective_history_[recorded[0]:], self.feature_weight_history_[recorded[1]:]
        predicted = (set_up + int(self.max_sweeps) * sweep) * n / ALS_PROBE_ROWS
        available = float(self.time_budget) - (time.perf_counter() - self._fit_started)
        chosen = rank_within_budget(rank, predicted, available)
        if chosen < rank:
            self._report(f"time budget: rank {chosen} instead of {rank}: at rank {rank} the fit was predicted to "
                         f"take {format_seconds(predicted)} (ALS's set-up and one sweep timed on {ALS_PROBE_ROWS} "
                         f"of the {n} rows, times N / {ALS_PROBE_ROWS} and max_sweeps={int(self.max_sweeps)}), "
                         f"past the {format_seconds(available)} left of time_budget={float(self.time_budget):g} s; "
                         f"pass time_budget=None to fit rank {rank} with every sweep.")
        return chosen

    def _initial_cores(self, X: torch.Tensor, features: PeriodMixtureFeatures, rank: int,
                       penalty: float) -> list[torch.Tensor] | None:
        """Initial cores for normalised features when random ones would start at W = 0 (see Notes), else None.

        Parameters
        ----------
        X : torch.Tensor of shape (N, D)
            Scaled training inputs.
        features : PeriodMixtureFeatures
        rank : int
        penalty : float
            α.

        Returns
        -------
        list of torch.Tensor of shape (M_k, R), or None for the engine's random draw
        """
        sizes = features.mode_sizes
        if not self.normalize_features or math.log(X.shape[0]) >= math.log(max(penalty, 1e-300)) + sum(
                math.log(q) for q in sizes):
            return None
        dtype = torch.complex128 if X.dtype == torch.float64 else torch.complex64
        family = features.families[max(range(len(features.periods)), key=lambda p: features.periods[p])]
        directions = []
        for mode in range(len(sizes)):
            phi = family.mode_features(X, mode)[0].to(dtype)  # (N, q): rows of norm ≤ 1
            directions.append(phi.mean(dim=0).conj() / phi.abs().pow(2).sum(dim=1).mean().sqrt())
        return aligned_cores(directions, rank, seed=int(self.seed), dtype=dtype, device=X.device)

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self._validate_params()
        self.n_dims_ = int(X.shape[1])
        self.periods_ = [float(p) for p in self.periods]
        self.features_ = self._features()
        self.features_.check_inputs(X)
        default_penalty = DEFAULT_PENALTY if self.normalize_features else PAPER_PENALTY
        self.penalty_ = float(default_penalty if self.penalty is None else self.penalty)
        alpha, beta = self.penalty_, float(self.mixture_penalty_strength)
        weights = self._initial_feature_weights(len(self.periods_)).to(dtype=X.dtype, device=X.device)
        self.feature_weight_history_ = [weights.tolist()]
        self.objective_history_: list[float] = []
        learn = self.mixture_penalty != "none"
        mixture_penalty = self.mixture_penalty

        def reg_value(lam: torch.Tensor) -> float:
            if mixture_penalty == "l1":
                return beta * float(lam.abs().sum())
            if mixture_penalty == "l2":
                return 0.5 * beta * float(lam @ lam)
            return 0.0

        def update_feature_weights(engine) -> None:
            lam = engine.component_weights
            # the objective after the core sweep (the engine's J = ‖y − f‖² + α‖w‖² is twice FL's data + w terms)
            self.objective_history_.append(0.5 * engine.history[-1] + reg_value(lam))
            if not learn:
                return
            per_family = engine.component_predictions(engine.X)  # (N, P) complex
            # (2N, P): the complex residual's real form, in float64 also for float32 fits (N·P numbers): a float32
            # Gram of nearly collinear families is indefinite at its round-off, and the λ problem then has no
            # minimiser
            stacked = torch.cat([per_family.real, per_family.imag]).double()
            gram, rhs = stacked.T @ stacked, stacked[: engine.X.shape[0]].T @ engine.y.double()
            yy = float(engine.y @ engine.y)
            solution = solve_mixture_weights(None, None, mixture_penalty, beta,
                                             nonnegative=bool(self.nonnegative), start=lam, gram=gram, rhs=rhs, yy=yy,
                                             max_iter=FISTA_MAX_ITER, tol=1e-10)
            current = mixture_weight_objective(gram, rhs, yy, lam.double(), mixture_penalty, beta)
            new = solution.weights.to(lam) if solution.objective <= current else lam  # safeguard an inexact FISTA
            engine.set_component_weights(new)
            w_term = 0.5 * alpha * engine.penalty_value()
            self.objective_history_.append(min(solution.objective, current) + w_term)
            self.feature_weight_history_.append(new.tolist())

        features = self.features_
        rank = int(self.rank) if self.rank is not None else self._budget_rank(
            X, y, features, self._auto_rank(X.shape[0], features), alpha, weights,
            update_feature_weights if learn else None)
        engine = self._fit_cpd(features, X, y, [rank], alpha, None, component_weights=weights,
                               between_sweeps=update_feature_weights if learn else None,
                               max_sweeps=int(self.max_sweeps),
                               initial_factors=self._initial_cores(X, features, rank, alpha),
                               sweeps_within_budget=True)
        self.feature_weights_ = engine.component_weights.clone()
        self.active_families_ = [int(i) for i in torch.nonzero(self.feature_weights_).reshape(-1)]
        budget_text = ", within the time budget" if self.time_budget is not None else ""
        self._report(f"rank R = {rank} ("
                     + ("given" if self.rank is not None else f"about N/2 = {X.shape[0] // 2} parameters, 2 ≤ R ≤ 50"
                                                              f"{budget_text}")
                     + f"); {len(self.periods_)} period families {self.periods_}, α = {self.penalty_:.3g}; "
                     f"active families after {self.mixture_penalty} learning: "
                     f"{[self.periods_[i] for i in self.active_families_]}.")

    def _component_weights(self) -> torch.Tensor:
        return self.feature_weights_

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        self._adopt_stored_names()
        if "penalty_" not in vars(self):  # saved before normalised features existed: the paper's raw features
            self.normalize_features = False
            self.penalty_ = float(PAPER_PENALTY if self.penalty is None else self.penalty)
        super()._after_load(extra)

    alpha_ = renamed_attribute("alpha_", "penalty_")

    def feature_importances(self) -> dict[float, float]:
        """λ per period θ.

        Returns
        -------
        dict
            ``{θ_p: λ_p}`` in the order of ``periods``.
        """
        self._check_fitted("feature_importances")
        return {theta: float(lam) for theta, lam in zip(self.periods_, self.feature_weights_.tolist())}

    def plot_feature_weights(self, ax: Any = None) -> Any:
        """Bar chart of the learned λ per period (feature importance).

        Parameters
        ----------
        ax : matplotlib Axes, optional

        Returns
        -------
        matplotlib Axes
        """
        from tnbayes.plotting import _axes

        self._check_fitted("plot_feature_weights")
        ax = _axes(ax, figsize=(6.0, 3.2))
        labels = [f"{p:g}" for p in self.periods_]
        values = self.feature_weights_.cpu().numpy()
        ax.bar(range(len(values)), values, color=["C3" if v != 0 else "0.7" for v in values])
        ax.axhline(0.0, color="k", lw=0.6)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(labels)
        ax.set_xlabel("period θ")
        ax.set_ylabel("λ (feature weight)")
        ax.set_title(f"FL feature weights ({self.mixture_penalty}{', λ ≥ 0' if self.nonnegative else ''})")
        return ax

    _out_of_box_remedy = "refit with longer periods"

    def _representable_box(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The window [0.5 − θ_min/2, 0.5 + θ_min/2] of the shortest period around the centre of the [0, 1] scale."""
        half = 0.5 * min(self.periods_)
        ones = torch.ones(int(self.n_dims_), dtype=self.dtype_, device=self.device_)
        return (0.5 - half) * ones, (0.5 + half) * ones


FLModel = FeatureLearningKM


#: module constants renamed in 0.2 (with ``alpha`` → ``penalty``); the old names warn
__getattr__ = moved_names_getattr(__name__, {"DEFAULT_ALPHA": (__name__, "DEFAULT_PENALTY"),
                                             "PAPER_ALPHA": (__name__, "PAPER_PENALTY")})

def cross_validate_period(X: ArrayLike, y: ArrayLike, periods: Sequence[float] = DEFAULT_FL_PERIODS, *,
                          folds: int = 3, repeats: int = 2, seed: int = 0,
                          **model_kwargs: Any) -> tuple[float, dict[float, float], float]:
    """FL's baseline: the single-period quantized CPD model with θ chosen by repeated k-fold cross-validation.

    Every candidate θ is fitted ``folds × repeats`` times with ``FeatureLearningKM(periods=[θ],
    mixture_penalty="none", initial_weights="ones", **model_kwargs)`` — the same engine and cores as FL, one
    family, no λ — and scored by validation MSE (standardised y).

    Parameters
    ----------
    X : array-like of shape (N, D)
    y : array-like of shape (N,)
    periods : sequence of float
    folds, repeats : int
        The paper: 3 folds × 2 repeats.
    seed : int
        Seed of the fold assignment and of every fit.
    **model_kwargs
        Passed to every fit (``rank``, ``num_basis``, ``penalty``, ``max_sweeps``, …).

    Returns
    -------
    best_period : float
    cv_mse : dict
        Mean validation MSE per θ.
    seconds : float
        Wall time of all the CV fits.
    """
    Xt, yt = check_X_y(X, y)
    X_np, y_np = Xt.cpu().numpy(), yt.cpu().numpy()
    if int(folds) < 2 or int(repeats) < 1:
        raise ValueError(f"folds must be >= 2 and repeats >= 1; got {folds!r} and {repeats!r}.")
    if len(y_np) < int(folds):
        raise ValueError(f"cross-validation with {folds} folds needs at least {folds} rows; got {len(y_np)}.")
    start = time.perf_counter()
    rng = np.random.default_rng(int(seed))
    splits = []
    for _ in range(int(repeats)):
        assignment = rng.permutation(len(y_np)) % int(folds)
        splits.extend((assignment != k, assignment == k) for k in range(int(folds)))
    scale = float(np.var(y_np)) or 1.0
    cv_mse = {}
    for theta in periods:
        errors = []
        for train, valid in splits:
            model = FeatureLearningKM(periods=[float(theta)], mixture_penalty="none", initial_weights="ones",
                                      uncertainty="none", seed=int(seed), **model_kwargs).fit(X_np[train], y_np[train])
            errors.append(float(np.mean((model.predict(X_np[valid]) - y_np[valid]) ** 2)) / scale)
        cv_mse[float(theta)] = float(np.mean(errors))
    best = min(cv_mse, key=cv_mse.get)
    return best, cv_mse, time.perf_counter() - start


register_model("fl", FeatureLearningKM)
