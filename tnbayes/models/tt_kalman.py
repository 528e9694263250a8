"""Primal tensor-train Kalman filter: Bayesian regression over all M^D Hilbert-GP weights.

Model (standardised inputs and targets), the product Hilbert-GP of :class:`~tnbayes.HilbertGP`::

    y = c + φ(x)ᵀ v + ε,   φ(x) = φ_1(x_1) ⊗ … ⊗ φ_D(x_D)  (Laplace eigenfunctions, M per input),
    v ~ N(0, P₀),  P₀ = σ_f² ⊗_d diag(S_d(√λ_{d,j})),   ε ~ N(0, σ²)

with S_d the 1-D spectral density of the kernel for input d (a product kernel: for SE this *is* the ARD SE
kernel; for Matérn it is the product of 1-D Matérn kernels, as in ``HilbertGP(structure="product")``).

The posterior over the M^D weights is computed by a Kalman filter over mini-batches of rows, in square-root
form: P = L Lᵀ with L a TT-matrix (prior: rank 1), the mean m a TT-vector (prior: 0). For a batch with rows
φ_i (exact rank-1 TT-vectors) let a_i = Lᵀφ_i, G = AᵀA = U diag(g) Uᵀ and S = G + σ²I. Then::

    m ← m + Σ_i (L a_i) [S⁻¹ (y − c − H m)]_i
    L ← L − Σ_i (L a_i) (Σ_j W_ij a_j)ᵀ,   W = U diag(1 / (√(g + σ²) (√(g + σ²) + σ))) Uᵀ

which is exact: L(I − A W Aᵀ) squared is L(I − A S⁻¹ Aᵀ)Lᵀ, the Kalman covariance (with Q = A U g^{-½}
orthonormal, I − A S⁻¹Aᵀ = (I − Q diag(γ) Qᵀ)² for γ = 1 − σ/√(g + σ²), and γ/g is the stable form above).
The root is held as L = L₀ − C with L₀ = σ_f ⊗_d diag(√S_d) the exact rank-1 prior root and C a TT-matrix;
after each batch the mean and C are rounded (relative tolerance, optional maximum rank; with a maximum rank
the sum C + Σ_i u_i c_iᵀ is rounded by a randomized sketch without forming the outer products). The prior is
never truncated, and any C keeps P = L Lᵀ positive semi-definite. Predictions contract φ(x) with the TT
objects: mean c + φᵀm, variance ‖Lᵀφ‖² — never an M^D dense matrix.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Mapping
from typing import Any
import torch

from tnbayes._sizes import check_fits_in_memory
from tnbayes._validation import ArrayLike, check_positive
from tnbayes.basis import (
    HilbertBasis,
    hilbert_box,
    resolvable_lengthscale,
    check_hilbert_approximation,
    data_center_and_half_range,
    resolve_kernel,
)
from tnbayes.basis.spectral import kernel_name
from tnbayes.inference.als import StreamedRows
from tnbayes.inference.budget import (
    BATCH_SIZE_SAVING,
    TT_KALMAN_BATCH_SIZES,
    TT_KALMAN_MAX_NUM_BASIS,
    TT_KALMAN_RANK_LADDER,
    BudgetPlan,
    BudgetWarning,
    check_time_budget,
    filter_budget,
    format_seconds,
    record_measured_seconds,
    plan_within_budget,
    single_torch_thread,
    tt_kalman_seconds_per_row,
)
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model
from tnbayes.selection.calibration import PrequentialResiduals, check_noise_estimate
from tnbayes.selection.hyperparameters import estimate_kernel_hyperparameters
from tnbayes.selection.input_box import check_out_of_box_policy
from tnbayes.tensors import TTMatrix, TTVector, randomized_round_sum
from tnbayes.tensors import block_sum as _block_sum, round_cores as _round_cores

__all__ = ["TTKalmanGP", "kalman_batch_update"]


def _contract_rows(cores: list[torch.Tensor], phi: torch.Tensor) -> torch.Tensor:
    """``φ(x_i)ᵀ m`` for a TT-vector with ``cores`` and rows phi of shape (D, n, M) → (n,)."""
    env = torch.ones(phi.shape[1], 1, dtype=phi.dtype, device=phi.device)
    for d, core in enumerate(cores):
        env = torch.einsum("na,amb,nm->nb", env, core, phi[d])
    return env[:, 0]


def _transpose_rows(cores: list[torch.Tensor], phi: torch.Tensor) -> list[torch.Tensor]:
    """Cores of ``Lᵀφ(x_i)`` for every row, stacked on a leading batch axis → D tensors (n, r, k, r')."""
    return [torch.einsum("amkb,nm->nakb", core, phi[d]) for d, core in enumerate(cores)]


def _row_variances(cores: list[torch.Tensor], phi: torch.Tensor) -> torch.Tensor:
    """``‖Lᵀφ(x_i)‖²`` for every row → (n,) by one batched left-to-right contraction."""
    n = phi.shape[1]
    env = torch.ones(n, 1, 1, dtype=phi.dtype, device=phi.device)
    for projected in _transpose_rows(cores, phi):
        env = torch.einsum("nab,nakc,nbkd->ncd", env, projected, projected)
    return env[:, 0, 0]


def _weighted_sum(vectors: list[TTVector], weights: torch.Tensor, tol: float, max_rank: int | None,
                  generator: torch.Generator | None = None) -> TTVector:
    """Σ_i w_i x_i, rounded (in one randomized rounding when ``max_rank`` is given)."""
    if max_rank is not None and len(vectors) > 1:
        return randomized_round_sum(vectors, weights.tolist(), max_rank=int(max_rank), tol=tol, generator=generator)
    total = vectors[0] * weights[0]
    for x, w in zip(vectors[1:], weights[1:]):
        total = (total + x * w).round(tol, max_rank)
    return total


def _diagonal_root(prior_root: torch.Tensor) -> TTMatrix:
    """The rank-1 TT-matrix ``L₀ = ⊗_d diag(prior_root[d])``."""
    return TTMatrix([torch.diag(w).reshape(1, w.numel(), w.numel(), 1) for w in prior_root])


def _scaled(x: TTVector, prior_root: torch.Tensor) -> TTVector:
    """``L₀ x`` (a mode-wise scaling: ranks unchanged)."""
    return TTVector([core * w.reshape(1, -1, 1) for core, w in zip(x.cores, prior_root)])


def _combinations(vectors: list[TTVector], weights: torch.Tensor, tol: float,
                  max_rank: int | None) -> list[TTVector]:
    """``[Σ_j W_ij x_j for i]`` by one rounding of a block TT (the batch index rides on the last core).

    The B vectors are stacked block-diagonally (ranks Σ_j r_j), the last core gets the batch index and is
    multiplied by Wᵀ, and the block TT (last mode M·B) is rounded once; the B results share their first D − 1
    cores. One rounding instead of B sums of B terms each (the filter's overhead was in those calls).
    """
    D, B = len(vectors[0].cores), len(vectors)
    if D == 1:
        dense = torch.stack([x.cores[0][0, :, 0] for x in vectors])  # (B, M)
        return [TTVector([(weights[i] @ dense).reshape(1, -1, 1)]) for i in range(B)]
    stacked = list(vectors[0].cores)
    for x in vectors[1:]:
        stacked = _block_sum(stacked, x.cores)  # block-diagonal ranks; last cores stacked on the left rank
    cores, stacked_last = stacked[:-1], stacked[-1][:, :, 0]  # (Σ_j r_j, M)
    M = stacked_last.shape[1]
    last = stacked_last.new_zeros(stacked_last.shape[0], M, B)
    r0 = 0
    for j, x in enumerate(vectors):  # give the batch index to each vector's rows of the last core
        r = x.cores[-1].shape[0]
        last[r0:r0 + r, :, j] = stacked_last[r0:r0 + r]
        r0 += r
    last = torch.einsum("rmj,ij->rmi", last, weights)
    cores.append(last.reshape(last.shape[0], M * B, 1))
    rounded = _round_cores(cores, tol, max_rank)
    final = rounded[-1].reshape(rounded[-1].shape[0], M, B)
    return [TTVector(rounded[:-1] + [final[:, :, i:i + 1]]) for i in range(B)]


def kalman_batch_update(mean: TTVector, prior_root: torch.Tensor, correction: TTMatrix | None, phi: torch.Tensor,
                        targets: torch.Tensor, noise_variance: float, *, tol: float = 0.0,
                        max_rank: int | None = None,
                        generator: torch.Generator | None = None) -> tuple[TTVector, TTMatrix]:
    """One square-root Kalman update of a TT posterior with a batch of rank-1 measurements.

    The covariance square root is held as ``L = L₀ − C``: L₀ = ⊗_d diag(prior_root[d]) the exact (rank-1)
    prior root and C a TT-matrix correction. Only C (and the mean) is ever rounded, so the prior is never
    truncated, whatever the ranks: this matters because L₀ has a huge dynamic range (products of D spectral
    densities) and dominates ‖L‖, so rounding L itself would spend the whole error budget on the prior. Any C
    gives P = L Lᵀ ⪰ 0.

    Parameters
    ----------
    mean : TTVector with modes (M, …, M)
        m, the current mean.
    prior_root : torch.Tensor of shape (D, M)
        Diagonals of the factors of L₀.
    correction : TTMatrix with modes (M, …, M) × (M, …, M), or None
        C (None: zero, the prior).
    phi : torch.Tensor of shape (D, B, M)
        Per-input features of the batch (row i is φ_1(x_i1) ⊗ … ⊗ φ_D(x_iD)).
    targets : torch.Tensor of shape (B,)
        y_i − c.
    noise_variance : float
        σ².
    tol : float
        Relative rounding tolerance of the updated mean and correction (0: exact up to round-off).
    max_rank : int, optional
        Cap of the ranks. When given, the update ``C + Σ_i u_i c_iᵀ`` is rounded by
        :func:`~tnbayes.tensors.tt.randomized_round_sum` (the outer products, of rank r_u·r_c each, are never
        formed), which is what makes large D affordable; without it the sum is formed and rounded exactly.
    generator : torch.Generator, optional
        Source of the randomized rounding's sketch.

    Returns
    -------
    mean, correction : TTVector, TTMatrix
        The posterior given the batch (see the module docstring for the formulas; L_new = L₀ − C_new).
    """
    B = phi.shape[1]
    projected = []  # a_i = Lᵀφ_i = L₀φ_i − Cᵀφ_i (rank r_C + 1, exact)
    for i in range(B):
        base = TTVector([(prior_root[d] * phi[d, i]).reshape(1, -1, 1) for d in range(phi.shape[0])])
        if correction is not None:
            base = base - TTVector([torch.einsum("amkb,m->akb", core, phi[d, i])
                                    for d, core in enumerate(correction.cores)])
        projected.append(base.round(tol))
    gram = torch.empty(B, B, dtype=phi.dtype, device=phi.device)
    for i in range(B):
        for j in range(i, B):
            gram[i, j] = gram[j, i] = projected[i].dot(projected[j])
    residual = targets - _contract_rows(mean.cores, phi)
    system = gram + noise_variance * torch.eye(B, dtype=phi.dtype, device=phi.device)
    gains = torch.linalg.solve(system, residual)  # S⁻¹ r
    updates = []  # u_i = L a_i = P φ_i
    for a in projected:
        u = _scaled(a, prior_root)
        if correction is not None:
            # L₀a and Ca nearly cancel where the data are informative: round their exact difference, never
            # the two parts separately (that error would be relative to ‖Ca‖ ≫ ‖u‖ and the mean diverges)
            if max_rank is not None:
                u = randomized_round_sum([u, correction.matvec(a)], [1.0, -1.0], max_rank=int(max_rank), tol=tol,
                                         generator=generator)
            else:
                u = (u - correction.matvec(a)).round(tol)
        updates.append(u)
    mean = (mean + _weighted_sum(updates, gains, tol, max_rank, generator)).round(tol, max_rank)
    g, U = torch.linalg.eigh(gram)
    g = g.clamp_min(0.0)
    root_g = torch.sqrt(g + noise_variance)
    W = (U / (root_g * (root_g + math.sqrt(noise_variance)))) @ U.T
    combined = _combinations(projected, W, tol, max_rank)
    # L_new = L − Σ_i u_i c_iᵀ  ⇔  C_new = C + Σ_i u_i c_iᵀ
    if max_rank is not None:
        terms = ([correction] if correction is not None else []) + list(zip(updates, combined))
        return mean, randomized_round_sum(terms, max_rank=int(max_rank), tol=tol, generator=generator)
    total = correction
    for u, c in zip(updates, combined):
        total = u.outer(c) if total is None else (total + u.outer(c)).round(tol)
    return mean, total


class TTKalmanGP(BaseModel):
    """Hilbert-GP regression over all M^D product-basis weights, by a square-root tensor-train Kalman filter.

    ``TTKalmanGP().fit(X, y)`` standardises X and y, estimates the kernel hyper-parameters (ARD lengthscales,
    σ_f², σ²) by exact-GP marginal likelihood on a subsample of at most ``hyper_max_points`` rows, chooses the
    Hilbert box and M from the lengthscales (the tightened Riutort-Mayol rule of :class:`~tnbayes.HilbertGP`,
    M capped at ``max_num_basis``), and filters the rows in mini-batches.

    Parameters
    ----------
    kernel : {"se", "matern12", "matern32", "matern52", "matern"}
        1-D kernel per input; the model's kernel is their product (for SE: the ARD SE kernel).
    nu : float, optional
        Matérn smoothness for ``kernel="matern"``.
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
        the full ones).
    max_rank : int, "auto" or None
        Cap of the TT ranks of the mean and of the covariance correction C after rounding (the root
        L = L₀ − C then has rank ≤ max_rank + 1). ``"auto"`` (default): 10, or with ``time_budget`` the largest
        cap of :data:`~tnbayes.inference.budget.TT_KALMAN_RANK_LADDER` that fits. ``None``: only ``tol``
        truncates (exact when 0; ranks then grow with the data and the cost with their cube). Truncation
        error shrinks with the cap — see ``benchmarks/results/tt_kalman_cost.md`` for the cost and the tests for
        the accuracy.
    forgetting : float
        λ ∈ (0, 1]: the covariance is divided by λ before each batch (1: no forgetting, the exact posterior).
    early_stopping_tol : float, optional
        Stop filtering once a batch lowers tr(P) by less than this fraction of the reduction achieved by all
        batches so far, ``patience`` batches in a row (the posterior then conditions on the rows seen so far;
        ``rows_used_`` says how many).
    patience : int
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
        hyper-parameters), else M = 8 and the largest cap that does, else fewer rows at rank 6 and M = 8. A
        budget that even those settings exceed raises a :class:`~tnbayes.inference.budget.BudgetWarning` naming
        the settings to pass. None: no budget (rank cap 10, M ≤ 8, batches of 8, every row). With or without
        a budget the filter runs on one torch thread (:func:`~tnbayes.inference.budget.single_torch_thread`).
    noise_estimate : {"held_out", "training"}
        ``"held_out"`` (default): the last 20% of the rows the filter processes are first predicted from the
        state before them (a prequential hold-out that costs no refit and loses no row), and the predictive
        noise is the marginal-likelihood σ² plus the extra variance their errors call for
        (:func:`~tnbayes.selection.calibration.additive_variance_estimate`): a truncated filter or a small M
        predicts worse than the exact GP whose σ² it borrowed. ``"training"``: the predictive noise is that σ².
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

    Attributes
    ----------
    posterior_mean_tt_ : TTVector with modes (M, …, M)
        Posterior mean of the weights v.
    posterior_cov_sqrt_tt_ : TTMatrix
        L with P = L Lᵀ (the posterior covariance of v).
    prior_root_ : torch.Tensor of shape (D, M)
        Diagonals of the factors of L₀ (the prior root, scaled by any forgetting).
    posterior_cov_correction_tt_ : TTMatrix or None
        C with L = L₀ − C (None: no row filtered); with ``prior_root_`` the state
        :meth:`condition_on_observations` goes on from.
    basis_ : HilbertBasis
    lengthscale_ : torch.Tensor of shape (D,)
    outputscale_, mean_constant_ : float
    hyperparameter_source_ : str
        Where ℓ, σ_f², σ² come from (``"given"`` or the marginal-likelihood fit's description).
    measurement_noise_ : float
        σ² of the filter's measurement model (given ``noise_variance``, else the marginal-likelihood estimate).
    noise_variance_ : float
        σ² of the predictive distribution: ``measurement_noise_``, plus with ``noise_estimate="held_out"`` the extra
        variance the filter's errors on its last rows call for.
    held_out_noise_variance_ : float or None
        ``measurement_noise_`` + that extra variance (None: not estimated).
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
        with), ``settings`` (``max_rank``, ``num_basis``, ``batch_size``, ``max_rows``), ``chosen`` (those the
        budget filled in), ``rule_num_basis`` (the lengthscale rule's M), ``rows``, ``num_rows``,
        ``predicted_seconds_per_row``, ``predicted_seconds``, ``within_budget``, ``default_settings`` and
        ``default_seconds`` (the first candidate over every row), ``ladder`` (every candidate with its predicted
        seconds per row), and after the fit ``hyperparameter_seconds``, ``filter_seconds``, ``seconds_per_row``
        and ``fit_seconds`` (measured).
    """

    input_scaling = "standard"
    _transient_attributes = ("basis_", "posterior_mean_tt_", "posterior_cov_sqrt_tt_",
                             "posterior_cov_correction_tt_")
    supports_chunked_fit = True  # one pass over the chunks (rows shuffled within each chunk); not distributed

    def __init__(self, kernel: str = "se", nu: float | None = None, *, num_basis: int | None = None,
                 c: float | list[float] | None = None, lengthscale: float | list[float] | None = None,
                 outputscale: float | None = None, noise_variance: float | None = None, mean_constant: float = 0.0,
                 batch_size: int | str = "auto", tol: float = 1e-8, max_rank: int | str | None = "auto",
                 forgetting: float = 1.0, early_stopping_tol: float | None = None, patience: int = 5,
                 max_num_basis: int | str = "auto", max_rows: int | str | None = "auto",
                 time_budget: float | None = 60.0, noise_estimate: str = "held_out",
                 hyper_max_points: int = 1000, seed: int = 0, out_of_box: str = "clip", normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self.out_of_box = out_of_box
        self.kernel = kernel
        self.nu = nu
        self.num_basis = num_basis
        self.c = c
        self.lengthscale = lengthscale
        self.outputscale = outputscale
        self.noise_variance = noise_variance
        self.mean_constant = mean_constant
        self.batch_size = batch_size
        self.tol = tol
        self.max_rank = max_rank
        self.forgetting = forgetting
        self.early_stopping_tol = early_stopping_tol
        self.patience = patience
        self.max_num_basis = max_num_basis
        self.max_rows = max_rows
        self.time_budget = time_budget
        self.noise_estimate = noise_estimate
        self.hyper_max_points = hyper_max_points
        self.seed = seed

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        resolve_kernel(self.kernel, self.nu)
        check_out_of_box_policy(self.out_of_box)
        for name in ("batch_size", "patience", "max_num_basis", "hyper_max_points", "max_rows"):
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
        if not 0.0 < float(self.forgetting) <= 1.0:
            raise ValueError(f"forgetting must be in (0, 1]; got {self.forgetting!r}.")
        if self.early_stopping_tol is not None and not float(self.early_stopping_tol) >= 0:
            raise ValueError(f"early_stopping_tol must be >= 0 or None; got {self.early_stopping_tol!r}.")
        if not math.isfinite(float(self.mean_constant)):
            raise ValueError(f"mean_constant must be finite; got {self.mean_constant!r}.")
        for name in ("outputscale", "noise_variance"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)

    # ------------------------------------------------------------------ fitting
    def _hyperparameters(self, X: torch.Tensor, y: torch.Tensor,
                         extremes: torch.Tensor) -> tuple[torch.Tensor, float, float]:
        """ℓ (D,), σ_f², σ²: given, or by ML-II on (a subsample of) X (n, D), y (n,), bounded below by the shortest
        lengthscale the largest automatic M resolves over the training range ``extremes`` (≥ 1, D) (see
        :func:`~tnbayes.basis.resolvable_lengthscale`)."""
        D = X.shape[1]
        estimated = None
        if self.lengthscale is None or self.outputscale is None or self.noise_variance is None:
            _, half_range = data_center_and_half_range(extremes.cpu(), allow_constant=True)
            half_range = torch.where(half_range > 0, half_range, torch.ones_like(half_range))
            num_basis = int(self.num_basis) if self.num_basis is not None else self._num_basis_cap()
            estimated = estimate_kernel_hyperparameters(
                X, y, kernel=self.kernel, nu=self.nu, max_points=int(self.hyper_max_points), seed=int(self.seed),
                lengthscale_lower_bound=resolvable_lengthscale(half_range, num_basis, self.c))
        self.hyperparameter_source_ = "given" if estimated is None else estimated.describe()
        self._report(f"kernel hyper-parameters: {self.hyperparameter_source_} (an exact GP's ML-II, lengthscales at "
                     f"least what M ≤ {int(self.num_basis) if self.num_basis is not None else self._num_basis_cap()} "
                     f"functions resolve; given values are kept).")
        if self.lengthscale is not None:
            ls = torch.as_tensor(self.lengthscale, dtype=torch.float64).reshape(-1)
            if ls.numel() not in (1, D) or bool((ls <= 0).any()):
                raise ValueError(f"lengthscale must be one positive number or one per input ({D}); "
                                 f"got {self.lengthscale!r}.")
            ls = ls.expand(D).clone()
        else:
            ls = estimated.lengthscale.to(torch.float64).reshape(-1).expand(D).clone()
        outputscale = float(self.outputscale) if self.outputscale is not None else float(estimated.outputscale)
        noise = float(self.noise_variance) if self.noise_variance is not None else float(estimated.noise_variance)
        return ls, outputscale, noise

    def _make_basis(self, X: torch.Tensor, lengthscale: torch.Tensor, num_rows: int) -> HilbertBasis:
        D = X.shape[1]
        center, half_range = data_center_and_half_range(X, allow_constant=True)
        half_range = torch.where(half_range > 0, half_range, torch.ones_like(half_range))
        name = kernel_name(self.kernel, self.nu)
        if self.c is not None:
            given = torch.as_tensor(self.c, dtype=torch.float64).reshape(-1)
            if given.numel() not in (1, D) or bool((given < 1).any()):
                raise ValueError(f"c must be one number >= 1 or one per input ({D}); got {self.c!r}.")
        c, m_rule = hilbert_box(lengthscale, half_range.to(torch.float64), name, c=self.c)
        M = self._plan_budget(int(m_rule), D, num_rows)
        basis = HilbertBasis(M, L=(c * half_range.to(torch.float64).cpu()).tolist(), center=center.tolist(),
                             num_dims=D)
        if name in ("se", "matern32", "matern52"):
            check_hilbert_approximation(lengthscale.tolist(), basis.L.tolist(), M, name,
                                        half_range=half_range.tolist(), stacklevel=5)
        return basis

    # ------------------------------------------------------------------ time budget
    def _num_basis_cap(self) -> int:
        """Largest automatic M: ``max_num_basis``; for ``"auto"`` 8, or with a time budget
        :data:`~tnbayes.inference.budget.TT_KALMAN_MAX_NUM_BASIS`."""
        if self.max_num_basis != "auto":
            return int(self.max_num_basis)
        return TT_KALMAN_MAX_NUM_BASIS if self.time_budget is not None else 8

    def _plan_budget(self, rule_num_basis: int, num_dims: int, num_rows: int) -> int:
        """M, rank cap, batch size and rows within ``time_budget``; sets ``budget_``, ``max_rank_`` and
        ``batch_size_``, reports the choice and warns when over the budget.

        Parameters
        ----------
        rule_num_basis : int
            M asked for by the lengthscale rule.
        num_dims : int
            D.
        num_rows : int
            Training rows n.

        Returns
        -------
        int
            M.
        """
        budgeted = self.time_budget is not None
        chosen = [name for name in ("max_rank", "batch_size") if getattr(self, name) == "auto"] if budgeted else []
        if self.num_basis is not None:
            sizes = [int(self.num_basis)]
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

        estimated = self.lengthscale is None or self.outputscale is None or self.noise_variance is None
        budget = filter_budget(self.time_budget, estimated)
        max_rows = None if self.max_rows == "auto" else num_rows if self.max_rows is None else int(self.max_rows)
        plan = plan_within_budget(candidates, seconds_per_row, num_rows, budget, max_rows=max_rows, chosen=chosen)
        self.max_rank_, self.batch_size_ = plan.settings["max_rank"], int(plan.settings["batch_size"])
        self.budget_ = {"time_budget": None if self.time_budget is None else float(self.time_budget),
                        "rule_num_basis": int(rule_num_basis), **plan.as_dict()}
        self.budget_["settings"]["max_rows"] = plan.rows
        self._report_plan(plan)
        return int(plan.settings["num_basis"])

    @staticmethod
    def _settings_text(settings: Mapping[str, Any]) -> str:
        return (f"M = {settings['num_basis']}, TT rank cap {settings['max_rank']}, "
                f"batches of {settings['batch_size']}")

    def _report_plan(self, plan: BudgetPlan) -> None:
        """Say what the budget chose and why (``fit_report_``, printed with ``verbose``); warn when over it."""
        chosen = self._settings_text(plan.settings)
        rows = f"all {plan.rows} rows" if plan.rows == plan.num_rows else f"{plan.rows} of {plan.num_rows} rows"
        predicted = format_seconds(plan.predicted_seconds)
        if self.time_budget is None:
            self._report(f"no time budget: {chosen} on {rows}, predicted {predicted}.")
            return
        head = (f"time budget {format_seconds(float(self.time_budget))} ({format_seconds(plan.budget_seconds)} for "
                f"the filter): {chosen} on {rows}, predicted {predicted}")
        if plan.within_budget and plan.candidates_tried == 1:
            self._report(head + " (the first choice fits).")
            return
        default = f"{self._settings_text(plan.first_settings)} would take {format_seconds(plan.first_seconds)}"
        if plan.within_budget:
            self._report(f"{head}; {default}.")
            return
        self._report(f"{head}, over the budget; {default}.")
        fitting_rows = max(1, int(plan.budget_seconds // plan.seconds_per_row))
        settings = plan.settings
        larger = math.ceil(float(self.time_budget) * plan.predicted_seconds / plan.budget_seconds)
        warnings.warn(
            f"TTKalmanGP: even {chosen} on {rows} are predicted to take {predicted}, over the "
            f"{format_seconds(plan.budget_seconds)} that time_budget={float(self.time_budget):g} leaves the filter. "
            f"Pass max_rows={fitting_rows} (predicted {format_seconds(fitting_rows * plan.seconds_per_row)}) with "
            f"max_rank={settings['max_rank']}, max_num_basis={settings['num_basis']}, "
            f"batch_size={settings['batch_size']}, or a larger budget such as time_budget={larger}, or "
            f"time_budget=None for the default settings on every row.", BudgetWarning, stacklevel=6)

    def _record_budget(self, hyperparameter_seconds: float, filter_seconds: float, rows: int,
                       fit_seconds: float) -> None:
        """Add the measured seconds to ``budget_`` and report them (see
        :func:`~tnbayes.inference.budget.record_measured_seconds`)."""
        self._report(record_measured_seconds(
            self.budget_, model="TTKalmanGP", hyperparameter_seconds=hyperparameter_seconds,
            filter_seconds=filter_seconds, rows=rows, fit_seconds=fit_seconds, time_budget=self.time_budget,
            estimated=self.lengthscale is None or self.outputscale is None or self.noise_variance is None, hyper_max_points=int(self.hyper_max_points),
            given_instead="lengthscale, outputscale and noise_variance"))

    def _prior(self, D: int) -> tuple[TTVector, torch.Tensor]:
        """Zero mean and the diagonals (D, M) of the prior root L₀ = σ_f ⊗_d diag(√S_d)."""
        weights = self.basis_.spectral_weights(self.lengthscale_, self.kernel, self.nu)  # (D, M) = √S_d
        prior_root = (self.outputscale_ ** (0.5 / D)) * weights.to(torch.float64)
        mean = TTVector([torch.zeros(1, self.num_basis_, 1, dtype=torch.float64) for _ in range(D)])
        return mean, prior_root

    def _fit(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, *,
             sample: tuple[torch.Tensor, torch.Tensor] | None = None, extremes: torch.Tensor | None = None) -> None:
        fit_start = time.perf_counter()
        self._check_params()
        sample = (X, y) if sample is None else sample
        extremes = (X if extremes is None else extremes).to(torch.float64)
        D = extremes.shape[1]
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
        self.basis_ = self._make_basis(extremes, self.lengthscale_, num_rows)
        self.num_basis_ = self.basis_.num_basis
        mean, prior_root = self._prior(D)
        tol, max_rank = float(self.tol), self.max_rank_
        sketch_generator = torch.Generator().manual_seed(int(self.seed))
        correction: TTMatrix | None = None
        self.rank_history_, self.trace_history_ = [], []
        initial_trace = previous_trace = float((prior_root ** 2).sum(dim=1).prod())
        quiet, used = 0, 0
        stopped = False
        rows_to_use = num_rows if self.budget_["rows"] is None else min(num_rows, int(self.budget_["rows"]))
        held_out = PrequentialResiduals(rows_to_use) if (self.noise_estimate == "held_out"
                                                         and self.noise_variance is None) else None
        with single_torch_thread():  # see tnbayes.inference.budget.single_torch_thread
            start = time.perf_counter()
            for batch_X, batch_y in self._batches(X, y, limit=self.budget_["rows"]):
                prior_root, correction = self._forget(prior_root, correction)
                phi = self.basis_.eigenfunctions(batch_X)  # (D, B, M)
                wanted = held_out.wanted(used, batch_y.shape[0]) if held_out is not None else slice(0, 0)
                if wanted.stop > wanted.start:  # predict the last rows before the filter sees them
                    root = _diagonal_root(prior_root) - correction if correction is not None else \
                        _diagonal_root(prior_root)
                    held_phi = phi[:, wanted]
                    held_out.add(batch_y[wanted] - self.mean_constant_ - _contract_rows(mean.cores, held_phi),
                                 _row_variances(root.cores, held_phi) + self.measurement_noise_)
                mean, correction = kalman_batch_update(mean, prior_root, correction, phi,
                                                       batch_y - self.mean_constant_, self.measurement_noise_, tol=tol,
                                                       max_rank=max_rank, generator=sketch_generator)
                used += batch_y.shape[0]
                trace = float((_diagonal_root(prior_root) - correction).norm()) ** 2
                self.rank_history_.append((max(mean.ranks), max(correction.ranks)))
                self.trace_history_.append(trace)
                if self.early_stopping_tol is not None:
                    gained = initial_trace - trace
                    small = previous_trace - trace < float(self.early_stopping_tol) * max(gained, 0.0)
                    quiet = quiet + 1 if small else 0
                    if quiet >= int(self.patience):
                        stopped = True
                        break
                previous_trace = trace
        filter_seconds = time.perf_counter() - start
        self.seconds_per_row_ = filter_seconds / max(used, 1)
        self.rows_used_ = used
        self.history_ = list(self.trace_history_)
        self.n_iter_ = len(self.history_)
        self.converged_ = bool(stopped)
        self._record_budget(hyperparameter_seconds, filter_seconds, used, time.perf_counter() - fit_start)
        self._set_posterior(mean, prior_root, correction)
        self.held_out_noise_variance_ = (None if held_out is None
                                         else held_out.noise_variance(self.measurement_noise_))
        self.noise_variance_ = (self.measurement_noise_ if self.held_out_noise_variance_ is None
                                else self.held_out_noise_variance_)
        if self.held_out_noise_variance_ is not None:
            self._report(held_out.describe(self.measurement_noise_))

    def _forget(self, prior_root: torch.Tensor, correction: TTMatrix | None) -> tuple[torch.Tensor, TTMatrix | None]:
        """The root before a batch, ``(L₀ − C) / √λ`` for ``forgetting`` λ (P / λ): prior_root (D, M) and C
        scaled."""
        if self.forgetting >= 1.0:
            return prior_root, correction
        factor = 1.0 / math.sqrt(float(self.forgetting))
        prior_root = prior_root * factor ** (1.0 / prior_root.shape[0])
        return prior_root, (correction * factor if correction is not None else None)

    def _set_posterior(self, mean: TTVector, prior_root: torch.Tensor, correction: TTMatrix | None) -> None:
        """Store the filter's state: m, L₀'s diagonals (D, M), C, and the root L = L₀ − C."""
        self.posterior_mean_tt_ = mean
        self.prior_root_ = prior_root
        self.posterior_cov_correction_tt_ = correction
        root = _diagonal_root(prior_root)
        self.posterior_cov_sqrt_tt_ = root - correction if correction is not None else root

    def condition_on_observations(self, X: ArrayLike, y: ArrayLike) -> "TTKalmanGP":
        """A copy whose posterior also conditions on new rows: the filter goes on from the fitted state.

        The new rows are filtered in their order, in batches of ``batch_size_``, with the fitted basis, scalers,
        lengthscales, σ_f², measurement noise σ², mean constant, rounding (``tol``, ``max_rank_``) and
        ``forgetting``; no hyper-parameter is re-estimated and the predictive ``noise_variance_`` is kept. Without
        truncation (``tol=0``, ``max_rank=None``) the result is the exact Hilbert-GP posterior on the old and new
        rows together; with truncation it is what streaming the new rows after the old ones gives.

        Parameters
        ----------
        X : array-like of shape (k, n_features)
            New inputs in the user's units (outside the prediction box they follow ``out_of_box``).
        y : array-like of shape (k,)
            Their observed targets in the user's units.

        Returns
        -------
        TTKalmanGP
            A new fitted model; this one is unchanged.
        """
        self._check_fitted("condition_on_observations")
        Xs, ys = self._scaled_new_rows(X, y)
        mean, prior_root = self.posterior_mean_tt_, self.prior_root_
        correction = self.posterior_cov_correction_tt_
        generator = torch.Generator().manual_seed(int(self.seed) + int(self.n_iter_))
        history = list(self.trace_history_)
        ranks = list(self.rank_history_)
        with single_torch_thread():
            for first in range(0, Xs.shape[0], int(self.batch_size_)):
                batch = slice(first, first + int(self.batch_size_))
                prior_root, correction = self._forget(prior_root, correction)
                mean, correction = kalman_batch_update(
                    mean, prior_root, correction, self.basis_.eigenfunctions(Xs[batch]),
                    ys[batch] - self.mean_constant_, self.measurement_noise_, tol=float(self.tol),
                    max_rank=self.max_rank_, generator=generator)
                history.append(float((_diagonal_root(prior_root) - correction).norm()) ** 2)
                ranks.append((max(mean.ranks), max(correction.ranks)))
        conditioned = copy.deepcopy(self)
        conditioned._set_posterior(mean, prior_root, correction)
        conditioned.trace_history_, conditioned.rank_history_ = history, ranks
        conditioned.history_ = list(history)
        conditioned.n_iter_ = len(history)
        conditioned.n_conditioned_rows_ = int(getattr(self, "n_conditioned_rows_", 0)) + int(Xs.shape[0])
        return conditioned

    def _batches(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, limit: int | None = None):
        """Mini-batches ``(X_b (B, D), y_b (B,))`` in float64, in a random order: a permutation of all rows for
        tensors, of the rows of each chunk (chunk after chunk, one pass) for a streamed source; at most ``limit``
        rows in all."""
        generator = torch.Generator().manual_seed(int(self.seed))
        B = int(self.batch_size_)
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

    # ------------------------------------------------------------------ the TT posterior
    def posterior_cov_tt(self, tol: float = 1e-12, max_rank: int | None = None) -> TTMatrix:
        """The posterior covariance of the weights P = L Lᵀ as a rounded TT-matrix (standardised scale)."""
        self._check_fitted("posterior_cov_tt")
        L = self.posterior_cov_sqrt_tt_
        return L.matmul(L.T).round(tol, max_rank)

    def _representable_box(self) -> tuple[torch.Tensor, torch.Tensor]:
        center, half_width = self.basis_.center, self.basis_.L
        return center - half_width, center + half_width

    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        out_dtype = X.dtype
        X = X.to(torch.float64)
        means, variances, transposed = [], [], []
        for chunk in torch.split(X, 4096):
            phi = self.basis_.eigenfunctions(chunk)
            means.append(self.mean_constant_ + _contract_rows(self.posterior_mean_tt_.cores, phi))
            if full_covariance:
                transposed.append(phi)
            else:
                variances.append(_row_variances(self.posterior_cov_sqrt_tt_.cores, phi))
        mean = torch.cat(means).to(out_dtype)
        if not full_covariance:
            return mean, torch.cat(variances).to(out_dtype)
        phi = torch.cat(transposed, dim=1)
        vectors = [TTVector([torch.einsum("amkb,m->akb", core, phi[d, i])
                             for d, core in enumerate(self.posterior_cov_sqrt_tt_.cores)]) for i in range(phi.shape[1])]
        n = len(vectors)
        cov = torch.empty(n, n, dtype=torch.float64)
        for i in range(n):
            for j in range(i, n):
                cov[i, j] = cov[j, i] = vectors[i].dot(vectors[j])
        return mean, cov.to(out_dtype)

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, torch.Tensor]:
        state = {"basis.L": self.basis_.L, "basis.center": self.basis_.center}
        for k, core in enumerate(self.posterior_mean_tt_.cores):
            state[f"mean.{k}"] = core
        for k, core in enumerate(self.posterior_cov_sqrt_tt_.cores):
            state[f"root.{k}"] = core
        if self.posterior_cov_correction_tt_ is not None:
            for k, core in enumerate(self.posterior_cov_correction_tt_.cores):
                state[f"correction.{k}"] = core
        return state

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        D = int(extra["basis.L"].numel())
        self.basis_ = HilbertBasis(int(self.num_basis_), L=extra["basis.L"].tolist(),
                                   center=extra["basis.center"].tolist(), num_dims=D)
        self.posterior_mean_tt_ = TTVector([extra[f"mean.{k}"] for k in range(D)])
        self.posterior_cov_sqrt_tt_ = TTMatrix([extra[f"root.{k}"] for k in range(D)])
        self.posterior_cov_correction_tt_ = (TTMatrix([extra[f"correction.{k}"] for k in range(D)])
                                             if "correction.0" in extra else None)


register_model("tt_kalman_gp", TTKalmanGP)
