"""Alternating least squares for CPD-format weights: the one engine behind T-KRR, QTKM and FL.

Model and objective (all on scaled data)::

    f(x) = Σ_p c_p ⟨W, φ^p_1(x) ⊗ … ⊗ φ^p_K(x)⟩,     W = Σ_r w_r^(1) ⊗ … ⊗ w_r^(K)   (factors W_k: M_k × R)

    J(W) = ‖y − f(X)‖² + λ · pen(W),     pen = ‖W‖_F² ("full")  or  Σ_r Π_k ‖w_r^(k)‖² ("diagonal")

With every core but d fixed, f is linear in v = vec(W_d) (row-major, index m·R + r): the design row of
sample n is ``a_n = Σ_p c_p φ^p_d(x_n) ⊗ g^p_n`` with ``g^p_n = ⊙_{k≠d} (φ^p_k(x_n) W_k)``, and the
penalty is ``vᴴ (I_M ⊗ H_d) v`` with ``H_d = ⊙_{k≠d} W_kᴴ W_k`` (only its diagonal for "diagonal").
Each core update solves ``(AᴴA + λ I⊗H_d) v = Aᴴy`` exactly (:func:`~tnbayes.inference.spd.solve_spd`: Cholesky,
retried with a growing diagonal jitter for numerically singular systems; an error that says what to change when
even that fails). AᴴA and Aᴴy are accumulated over row chunks, so the memory is O((M R)²) plus one chunk; the
per-mode projections ``φ_k W_k`` (K·P·N·R numbers) are cached when they fit in ``memory_budget`` and recomputed
per chunk otherwise. Nothing is ever divided out of a cached product (T-KRR's code does that; entries near zero
make it unstable). The contractions themselves (projections, design rows, prefix/suffix products, predictions)
are CPD algebra and live in :mod:`tnbayes.tensors.cpd_contractions`; this module holds the sweeps.

When a mode's features read a single input column that takes few distinct values, its normal equations are
accumulated per distinct value instead of per row (exact; :mod:`tnbayes.inference.als_grouping`).

The objective is evaluated from the normal equations, ``yᴴy − 2 Re(bᴴv) + vᴴGv + λ vᴴPv``, so tracking it
costs no extra pass over the data.

Scale-out. Every quantity the engine accumulates over rows (AᴴA, Aᴴy, yᴴy, the objective) is a sum, so

* the rows may come from a :class:`~tnbayes.data.StreamedRows` source (out-of-core chunks, e.g. memory-mapped or
  parquet files) instead of tensors: each core update is then one pass over the source, with only one chunk's
  feature and design matrices in memory (no projection cache and no per-value grouping, which need all rows);
* with ``distributed=True`` each process holds its own shard and the sums are combined by
  ``torch.distributed.all_reduce`` before the core solve, which is identical in every process — the cores
  equal a single-process fit up to the summation order.

Low-precision (float32) fits accumulate the normal equations in float32 and solve them in float64.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence

import torch
from tqdm.auto import tqdm

from tnbayes._deprecation import (
    DEPRECATED,
    REMOVED_IN,
    RENAMED_IN,
    is_deprecated_default,
    moved_names_getattr,
    renamed_attribute,
)
from tnbayes._memory import available_memory_bytes
from tnbayes._warnings import warn_user
from tnbayes.basis.tensor_product import TensorProductFeatures
from tnbayes.data import StreamedRows
from tnbayes.distributed import all_reduce_sum, check_distributed
from tnbayes.inference.als_grouping import GROUPING_MODES, InputGroupingMixin
from tnbayes.inference.als_start import CoreStart, initial_cores
from tnbayes.inference.spd import CoreSystem, solve_spd
from tnbayes.tensors import cpd_factor_grams, cpd_hadamard_gram, cpd_norm_squared
from tnbayes.tensors.cpd_contractions import PartialProducts, design_matrix, mode_projections, project_onto

__all__ = ["CPDALS", "PARTIAL_PRODUCT_COPIES", "PENALTY_FORMS", "largest_rank_with_partial_products"]

#: the values of ``penalty_form``: λ‖W‖² exactly, or only the diagonal of each core's penalty matrix
PENALTY_FORMS = ("full", "diagonal")

__getattr__ = moved_names_getattr(__name__, {"REGULARIZERS": (__name__, "PENALTY_FORMS")})  # renamed in 0.2

#: the projection cache and its prefix and suffix products: this many copies of K·P·N·R numbers
PARTIAL_PRODUCT_COPIES = 3


def largest_rank_with_partial_products(features: TensorProductFeatures, num_rows: int, dtype: torch.dtype, *,
                                       memory_budget: int | None = None,
                                       device: torch.device | str | None = None) -> int:
    """The largest rank at which :class:`CPDALS` keeps the prefix and suffix products of its projection cache
    (:attr:`CPDALS.keeps_partial_products`): above it each core's product over the other modes is rebuilt from
    the K projections, O(K²) Hadamard products per sweep instead of O(K).

    Parameters
    ----------
    features : TensorProductFeatures
        The engine's features (K modes, P components).
    num_rows : int
        In-memory training rows N.
    dtype : torch.dtype
        The real dtype of the fit (complex features double the bytes).
    memory_budget : int, optional
        Bytes (default: a quarter of the memory available on ``device``, as the engine's).
    device : torch.device or str, optional
        Whose free memory sets the default budget (default: the CPU).

    Returns
    -------
    int
        ≥ 0.
    """
    complex_dtype = torch.complex128 if dtype == torch.float64 else torch.complex64
    itemsize = torch.empty((), dtype=complex_dtype if features.is_complex else dtype).element_size()
    if memory_budget is None:
        memory_budget = available_memory_bytes(device if device is not None else "cpu") // 4
    per_rank = features.num_modes * features.num_components * int(num_rows) * itemsize
    return int(memory_budget) // (PARTIAL_PRODUCT_COPIES * per_rank)


class CPDALS(InputGroupingMixin):
    """ALS for a CPD weight tensor on a tensor-product feature map (see the module docstring).

    Parameters
    ----------
    features : TensorProductFeatures
        The K-mode feature map (possibly complex, possibly a mixture of P components).
    X : torch.Tensor of shape (N, D)
        Training inputs in the space ``features`` expects.
    y : torch.Tensor of shape (N,)
        Real training targets.
    rank : int
        CP rank R.
    penalty : float
        λ ≥ 0 (the objective is ``‖y − f‖² + λ·pen(W)``; not scaled by N).
    penalty_form : {"full", "diagonal"}
        ``"full"`` penalises ‖W‖_F² exactly (default; a Gaussian prior on W); ``"diagonal"`` keeps only the
        diagonal of H_d, i.e. λ Σ_r Π_k ‖w_r^(k)‖², as in T-KRR's published experiments.
    component_weights : sequence of float of length P, optional
        Mixture coefficients c_p (default all ones). Change later with :meth:`set_component_weights`.
    normalize_cores : bool
        After each core update, move the column norms of the new core into the next core to be updated.
        This leaves W (hence f and the objective) unchanged and keeps the cached projections well scaled.
    chunk_size : int, optional
        Rows per chunk (default: about 32 MiB of design matrix per chunk).
    memory_budget : int, optional
        Bytes allowed for the projection cache (default: a quarter of the available memory).
    factors : sequence of torch.Tensor of shape (M_k, R), optional
        Initial cores (default: seeded standard-normal cores scaled to unit norm, or where their products would
        vanish the mean features: :func:`~tnbayes.inference.als_start.initial_cores`).
    seed : int
        Seed of the initial cores.
    group_inputs : {"auto", True, False}
        Accumulate the normal equations of a core per distinct value of its input column (exact; see the
        module docstring). ``"auto"`` (default) does so for columns with few distinct values where it is
        cheaper, ``True`` wherever the memory allows, ``False`` never. Not available for streamed rows.
    distributed : bool
        This process holds one shard of the rows; sums over rows are combined over the default
        ``torch.distributed`` process group (see the module docstring).
    regularizer : {"full", "diagonal"}
        Deprecated alias of ``penalty_form`` (FutureWarning).

    Notes
    -----
    ``X`` may be a :class:`StreamedRows` (then ``y`` is None): out-of-core fitting, one pass per core update.

    Attributes
    ----------
    factors : list of torch.Tensor of shape (M_k, R)
    start : CoreStart
        How the cores started (random, from the mean features, or given).
    history : list of float
        Objective after every core update (the first entry is the objective at the initial cores; with
        ``between_sweeps`` also after each of those calls).
    sweep_objectives : list of float
        Objective at the end of every sweep.
    converged : bool
        Whether the last :meth:`run` stopped because a sweep changed the objective by less than ``tol``
        (relative), rather than by using up ``max_sweeps``.
    stopped_at_deadline : bool
        Whether the last :meth:`run` stopped before ``max_sweeps`` because its ``deadline`` left no room for
        another sweep.
    last_relative_change : float
        ``|J_prev − J| / |J_prev|`` of the last sweep run (NaN before any sweep).
    last_system : CoreSystem or None
        Normal equations of the most recently updated core (what a Laplace approximation needs).
    caches_projections : bool
        Whether the per-row projections φ^p_k(x_n) W_k of every core are kept (K·P·N·R numbers; only when
        some core is accumulated per row and they fit in ``memory_budget``).
    keeps_partial_products : bool
        Whether prefix and suffix products of those projections are kept as well (3× the cache), which
        makes a sweep O(K) instead of O(K²) Hadamard products over the data.
    """

    def __init__(self, features: TensorProductFeatures, X: torch.Tensor | StreamedRows, y: torch.Tensor | None,
                 rank: int, penalty: float, *, penalty_form: str = "full",
                 component_weights: Sequence[float] | None = None, normalize_cores: bool = True,
                 chunk_size: int | None = None, memory_budget: int | None = None,
                 factors: Sequence[torch.Tensor] | None = None, seed: int = 0,
                 group_inputs: bool | str = "auto", distributed: bool = False,
                 regularizer: str = DEPRECATED) -> None:
        if not is_deprecated_default(regularizer):
            warn_user(f"CPDALS: the parameter 'regularizer' was renamed 'penalty_form' in tnbayes {RENAMED_IN}; pass "
                      f"penalty_form={regularizer!r} instead ('regularizer' will be removed in {REMOVED_IN}).",
                      FutureWarning)
            penalty_form = regularizer
        if not any(group_inputs is m or (isinstance(m, str) and group_inputs == m) for m in GROUPING_MODES):
            raise ValueError(f"group_inputs must be 'auto', True or False; got {group_inputs!r}.")
        if penalty_form not in PENALTY_FORMS:
            raise ValueError(f"penalty_form must be one of {PENALTY_FORMS}; got {penalty_form!r}.")
        if isinstance(rank, bool) or int(rank) != rank or rank < 1:
            raise ValueError(f"rank must be a positive integer; got {rank!r}.")
        if not math.isfinite(float(penalty)) or penalty < 0:
            raise ValueError(f"penalty λ must be a finite number >= 0; got {penalty!r}.")
        self.distributed = check_distributed(distributed)
        self._stream: StreamedRows | None = X if isinstance(X, StreamedRows) else None
        if self._stream is not None:
            if y is not None:
                raise ValueError("y must be None when X is a StreamedRows source (the targets come with the chunks).")
            local_rows, real_dtype, device = self._stream.num_rows, self._stream.dtype, self._stream.device
            X = None
        else:
            if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
                raise ValueError(f"X must be (N, D) and y (N,) with N > 0; got {tuple(X.shape)} and {tuple(y.shape)}.")
            if y.is_complex() or not y.is_floating_point() or y.device != X.device:
                raise ValueError(f"y must be a real floating tensor on X's device ({X.device}); got {y.dtype} on {y.device}.")
            local_rows, real_dtype, device = X.shape[0], X.dtype, X.device
        if chunk_size is not None and (isinstance(chunk_size, bool) or int(chunk_size) != chunk_size or chunk_size < 1):
            raise ValueError(f"chunk_size must be a positive integer (rows per chunk); got {chunk_size!r}.")
        self.features = features
        self.X, self.y = X, y
        self.rank = int(rank)
        self.penalty = float(penalty)
        self.penalty_form = penalty_form
        self.normalize_cores = bool(normalize_cores)
        self.real_dtype = real_dtype
        self.dtype = (torch.complex128 if real_dtype == torch.float64 else torch.complex64) if features.is_complex else real_dtype
        self.device = device
        #: rows summed over all processes
        self.num_rows = int(all_reduce_sum(torch.tensor([local_rows], dtype=torch.float64, device=device),
                                           self.distributed).item())
        num_components = features.num_components
        weights = torch.ones(num_components) if component_weights is None else torch.as_tensor(component_weights)
        self.set_component_weights(weights)

        itemsize = torch.empty((), dtype=self.dtype).element_size()
        max_width = max(features.mode_sizes) * self.rank
        self._check_memory(max_width, itemsize)
        if chunk_size is None:
            chunk_size = max(256, min(local_rows, (32 * 2**20) // (itemsize * max_width * max(1, num_components))))
        self.chunk_size = int(chunk_size)
        if memory_budget is None:
            memory_budget = available_memory_bytes(self.device) // 4
        self._groups = {} if self._stream is not None else self._input_groups(group_inputs, itemsize, memory_budget)
        self._group_of_mode = {k: group for group in self._groups.values() for k in group.modes}
        # C and t of the last column: ((column, active components), the other cores they were built from, C, t)
        self._cross: tuple[tuple, tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor] | None = None
        # per grouped column: (key, its cores, ⊙ of their projections at the column's distinct values)
        self._tables: dict[int, tuple[tuple, tuple[torch.Tensor, ...], torch.Tensor]] = {}
        cache_bytes = features.num_modes * num_components * local_rows * self.rank * itemsize
        # the projection cache only serves the per-row accumulation of in-memory rows
        self.caches_projections = (self._stream is None and cache_bytes <= memory_budget
                                   and len(self._group_of_mode) < features.num_modes)

        if factors is None:  # seeded random cores, unless their products vanish (see tnbayes.inference.als_start)
            factors, self.start = initial_cores(self.active_features, self.active_weights,
                                                lambda: (source[rows] for source, rows, _ in self._data_chunks()),
                                                self.rank, seed=int(seed), dtype=self.dtype, device=self.device,
                                                distributed=self.distributed)
        else:
            self.start = CoreStart("given")
            factors = [f.to(dtype=self.dtype, device=self.device).clone() for f in factors]
            sizes = [tuple(f.shape) for f in factors]
            expected = [(m, self.rank) for m in features.mode_sizes]
            if sizes != expected:
                raise ValueError(f"initial factors have shapes {sizes}; expected {expected}.")
        self.factors: list[torch.Tensor] = list(factors)
        self.history: list[float] = []
        self.sweep_objectives: list[float] = []
        self.converged = False
        self.stopped_at_deadline = False
        self.last_relative_change = math.nan
        self.last_system: CoreSystem | None = None
        # φ_k of the training rows per mode (see _training_features); emptied when the active components change
        self._feature_cache: dict[int, torch.Tensor] = {}
        self._projections = self._all_projections() if self.caches_projections else None
        self.keeps_partial_products = self.caches_projections and self.rank <= largest_rank_with_partial_products(
            features, local_rows, real_dtype, memory_budget=memory_budget)
        # prefix and suffix products of the cached projections (see _product_except)
        self._partial = PartialProducts(features.num_modes)
        residual, self.yy = self._residual_sums(real_part=False)  # one pass (a streamed source: one more read)
        self.history.append(residual + self.penalty * self.penalty_value())

    # ------------------------------------------------------------------ set-up helpers
    def _check_memory(self, width: int, itemsize: int) -> None:
        needed = 4 * width * width * itemsize  # gram, penalty, system and its Cholesky factor
        available = available_memory_bytes(self.device)
        if needed > 0.8 * available:
            raise MemoryError(
                f"A core with M·R = {width} unknowns needs about {needed / 2**30:.1f} GiB for its normal "
                f"equations but only {available / 2**30:.1f} GiB are free. Lower the rank or the number of "
                f"basis functions per dimension (or use a quantized model, whose cores have 2·R unknowns)."
            )

    regularizer = renamed_attribute("regularizer", "penalty_form")

    def set_component_weights(self, weights: Sequence[float] | torch.Tensor) -> None:
        """Set the mixture coefficients c (P,) — FL updates these between sweeps.

        Components whose coefficient is exactly zero are skipped in every core update when the feature map can
        be restricted (it has a ``components(indices)`` method), as FL's paper does for λ_p = 0.
        """
        weights = torch.as_tensor(weights, dtype=self.real_dtype, device=self.device).reshape(-1)
        if weights.numel() != self.features.num_components:
            raise ValueError(f"expected {self.features.num_components} component weights; got {weights.numel()}.")
        if not bool(torch.isfinite(weights).all()):
            raise ValueError("component weights must be finite.")
        self.component_weights = weights
        support = tuple(int(i) for i in torch.nonzero(weights).reshape(-1))
        full = tuple(range(weights.numel()))
        if len(support) in (0, len(full)) or not hasattr(self.features, "components"):
            support = full
        previous = getattr(self, "active_components", None)
        self.active_components = support
        self.active_features = self.features if support == full else self.features.components(support)
        self.active_weights = weights[list(support)]
        if previous is not None and previous != support:
            self._cross = None
            self._feature_cache = {}
            if getattr(self, "_projections", None) is not None:
                self._projections = self._all_projections()
                self._projections_changed(0, self.features.num_modes - 1)

    def _data_chunks(self) -> Iterator[tuple[torch.Tensor, slice, torch.Tensor]]:
        """``(source, rows, y[rows])`` for every chunk of this process's training rows: ``source[rows]`` are the
        inputs — ``self.X`` itself for in-memory rows (so the projection cache applies), a streamed chunk
        otherwise (cut to ``chunk_size`` rows, whatever the source's chunk size)."""
        if self._stream is None:
            for rows in self._chunks():
                yield self.X, rows, self.y[rows]
            return
        for X, y in self._stream:
            for start in range(0, X.shape[0], self.chunk_size):
                rows = slice(start, min(X.shape[0], start + self.chunk_size))
                yield X, rows, y[rows]

    def _chunks(self, n: int | None = None) -> Iterator[slice]:
        n = self.X.shape[0] if n is None else n
        for start in range(0, n, self.chunk_size):
            yield slice(start, min(n, start + self.chunk_size))

    def _projections_for(self, rows: slice, X: torch.Tensor) -> torch.Tensor:
        if self._projections is not None and X is self.X:
            return self._projections[:, :, rows]
        return mode_projections(self.active_features, self.factors, X[rows], dtype=self.dtype)

    def _all_projections(self) -> torch.Tensor:
        return torch.cat([mode_projections(self.active_features, self.factors, self.X[rows], dtype=self.dtype)
                          for rows in self._chunks()], dim=2)

    # ------------------------------------------------------------------ the pieces of one core update
    def design_rows(self, X: torch.Tensor, mode: int, rows: slice | None = None) -> torch.Tensor:
        """Rows of the design matrix A_d of core ``mode`` (the other cores fixed) → shape (n, M_d R).

        ``rows`` selects rows of ``X`` (default all — mind the memory for large inputs).
        """
        rows = slice(0, X.shape[0]) if rows is None else rows
        if self._projections is not None and X is self.X and self.keeps_partial_products:
            return design_matrix(self.active_features, self.factors, X[rows], mode, self.active_weights,
                                 others=self._product_except(mode)[:, rows], dtype=self.dtype,
                                 phi=self._training_features(mode, rows))
        return design_matrix(self.active_features, self.factors, X[rows], mode, self.active_weights,
                             projections=self._projections_for(rows, X), dtype=self.dtype)

    def _product_except(self, mode: int) -> torch.Tensor:
        """``⊙_{k≠mode}`` of the cached projections of all training rows → (P, N, R), as prefix ⊙ suffix.

        Prefix products Π_{k<j} and suffix products Π_{k>j} are kept and only the ones a changed core
        invalidates are rebuilt, so a sweep 0 … K−1 … 1 costs O(K) Hadamard products instead of O(K²).
        """
        return self._partial.except_mode(self._projections, mode)

    def _projections_changed(self, *modes: int) -> None:
        """Invalidate the prefix/suffix products that depend on the projections of ``modes``."""
        self._partial.invalidate(*modes)

    def normal_equations(self, mode: int) -> CoreSystem:
        """AᴴA, Aᴴy and the penalty matrix of core ``mode``, accumulated over row chunks (or distinct input
        values, see the module docstring)."""
        if mode in self._group_of_mode:
            return self._grouped_normal_equations(mode)
        width = self.features.mode_sizes[mode] * self.rank
        gram = torch.zeros(width, width, dtype=self.dtype, device=self.device)
        rhs = torch.zeros(width, dtype=self.dtype, device=self.device)
        for source, rows, targets in self._data_chunks():
            design = self.design_rows(source, mode, rows)
            gram.addmm_(design.mH, design)
            rhs.addmv_(design.mH, targets.to(self.dtype))
        return self._combined_system(mode, gram, rhs)

    def _combined_system(self, mode: int, gram: torch.Tensor, rhs: torch.Tensor) -> CoreSystem:
        """Sum a process's AᴴA and Aᴴy over all processes and symmetrise AᴴA exactly (for Cholesky)."""
        all_reduce_sum(gram, self.distributed)
        all_reduce_sum(rhs, self.distributed)
        gram = 0.5 * (gram + gram.mH)
        return CoreSystem(mode, gram, rhs, self.penalty_matrix(mode))

    def penalty_matrix(self, mode: int) -> torch.Tensor:
        """I_M ⊗ H_d (full) or I_M ⊗ diag(H_d) (diagonal), without λ — shape (M_d R, M_d R)."""
        hadamard = cpd_hadamard_gram(cpd_factor_grams(self.factors), skip=mode)
        if self.penalty_form == "diagonal":
            hadamard = torch.diag(hadamard.diagonal())
        eye = torch.eye(self.features.mode_sizes[mode], dtype=self.dtype, device=self.device)
        return torch.kron(eye, hadamard)

    def system_objective(self, system: CoreSystem, vector: torch.Tensor) -> float:
        """J at core ``system.mode`` = ``vector`` (the other cores as they are), from the normal equations."""
        fit = self.yy - 2.0 * float(torch.vdot(system.rhs, vector).real) + float(torch.vdot(vector, system.gram @ vector).real)
        return max(fit, 0.0) + self.penalty * float(torch.vdot(vector, system.penalty @ vector).real)

    def solve_core(self, system: CoreSystem) -> torch.Tensor:
        """Solve the regularised normal equations (in float64 for float32 fits); stores the Cholesky factor on
        ``system`` (in the engine's dtype)."""
        matrix = system.gram + self.penalty * system.penalty
        wide = torch.complex128 if matrix.is_complex() else torch.float64
        vector, factor, jitter = solve_spd(matrix.to(wide), system.rhs.to(wide), eps=torch.finfo(matrix.dtype).eps)
        system.cholesky, system.jitter = factor.to(self.dtype), jitter
        return vector.to(self.dtype)

    def update_core(self, mode: int, next_mode: int | None = None) -> float:
        """Exact update of core ``mode``; returns the objective afterwards.

        ``next_mode`` is the core to be updated next: with ``normalize_cores`` the new core's column
        norms are moved into it.
        """
        system = self.normal_equations(mode)
        vector = self.solve_core(system)
        objective = self.system_objective(system, vector)
        self.factors[mode] = vector.reshape(self.features.mode_sizes[mode], self.rank)
        self._refresh_projection(mode)
        self.last_system = system
        if self.normalize_cores and next_mode is not None and next_mode != mode:
            self._move_column_norms(mode, next_mode)
        self.history.append(objective)
        return objective

    def _training_features(self, mode: int, rows: slice) -> torch.Tensor | None:
        """``φ_mode`` of the training rows (P_active, n, M) in the engine dtype, kept between core updates when
        the projections are cached and the features are no larger than them (M ≤ R); None when not kept."""
        if not self.keeps_partial_products or self.features.mode_sizes[mode] > self.rank:
            return None
        features = self._feature_cache.get(mode)
        if features is None:
            features = torch.cat([self.active_features.mode_features(self.X[chunk], mode).to(self.dtype)
                                  for chunk in self._chunks()], dim=1)
            self._feature_cache[mode] = features
        return features[:, rows]

    def _refresh_projection(self, mode: int) -> None:
        if self._projections is None:
            return
        for rows in self._chunks():
            features = self._training_features(mode, rows)
            if features is None:
                features = self.active_features.mode_features(self.X[rows], mode).to(self.dtype)
            project_onto(features, self.factors[mode], out=self._projections[mode, :, rows])
        self._projections_changed(mode)

    def _move_column_norms(self, source: int, target: int) -> None:
        norms = torch.linalg.vector_norm(self.factors[source], dim=0)
        norms = torch.where(norms > 0, norms, torch.ones_like(norms))
        self.factors[source] = self.factors[source] / norms
        self.factors[target] = self.factors[target] * norms
        if self._projections is not None:
            # by a tensor of the projections' dtype: a complex tensor times a real one (or divided by it) takes
            # torch's slow mixed path, several times the cost of this product
            scale = norms.to(self._projections.dtype)
            self._projections[source].mul_(scale.reciprocal())
            self._projections[target].mul_(scale)
            self._projections_changed(source, target)
        self.last_system = None  # the stored system refers to the unnormalised core

    # ------------------------------------------------------------------ sweeps
    def sweep_order(self) -> list[int]:
        """Cores updated in one sweep: 0, 1, …, K−1, then back K−2, …, 1 (T-KRR's order)."""
        K = self.features.num_modes
        return list(range(K)) + list(range(K - 2, 0, -1))

    def run(self, max_sweeps: int = 10, tol: float = 1e-6, *, progress: bool = False,
            between_sweeps=None, deadline: float | None = None) -> list[float]:
        """Sweep until the relative objective change of a sweep is below ``tol`` or ``max_sweeps`` is reached.

        A final update of core 0 closes the last sweep (as in T-KRR's code), so :attr:`last_system` holds
        the exact conditional normal equations of core 0 given the final other cores.

        Parameters
        ----------
        max_sweeps : int
        tol : float
            Relative change ``|J_prev − J| / J_prev`` below which the sweeps stop.
        progress : bool
            Show a tqdm progress bar.
        between_sweeps : callable, optional
            Called as ``between_sweeps(self)`` after every sweep (FL updates its mixture weights there).
        deadline : float, optional
            A ``time.perf_counter()`` value: after each sweep, no further sweep starts when another of the last
            one's length would end past it (:attr:`stopped_at_deadline`; at least one sweep runs).

        Returns
        -------
        list of float
            :attr:`sweep_objectives`.

        Notes
        -----
        Sets :attr:`converged` (the tolerance ended the sweeps), :attr:`stopped_at_deadline` and
        :attr:`last_relative_change`.
        """
        if not math.isfinite(float(tol)) or tol < 0:
            raise ValueError(f"tol must be a finite number >= 0; got {tol!r}.")
        order = self.sweep_order()
        previous = self.history[-1]
        bar = tqdm(range(int(max_sweeps)), desc="ALS sweeps", disable=not progress, leave=False)
        self.converged = self.stopped_at_deadline = False
        for sweep in bar:
            sweep_started = time.perf_counter()
            for position, mode in enumerate(order):
                following = order[position + 1] if position + 1 < len(order) else order[0]
                self.update_core(mode, following)
            if between_sweeps is not None:
                between_sweeps(self)
                self.history.append(self.objective())
            current = self.history[-1]
            self.sweep_objectives.append(current)
            bar.set_postfix(objective=f"{current:.6g}")
            self.last_relative_change = abs(previous - current) / max(abs(previous), 1e-300)
            if abs(previous - current) <= tol * max(abs(previous), 1e-300):
                self.converged = True
                break
            previous = current
            now = time.perf_counter()
            if deadline is not None and sweep + 1 < int(max_sweeps) and now + (now - sweep_started) > deadline:
                self.stopped_at_deadline = True
                break
        bar.close()
        if self.features.num_modes > 1 or self.last_system is None or between_sweeps is not None:
            self.update_core(order[0], None)
        return self.sweep_objectives

    # ------------------------------------------------------------------ evaluation
    def objective(self) -> float:
        """J(W) by a pass over the data (used at initialisation and after non-ALS changes)."""
        return self._residual_sums(real_part=False)[0] + self.penalty * self.penalty_value()

    def residual_sum_of_squares(self) -> float:
        """Σ_n (y_n − Re f(x_n))² over all training rows (all processes) — the residual of the real part only:
        complex features are fitted by complex least squares, but y is observed through Re f."""
        return self._residual_sums(real_part=True)[0]

    def _residual_sums(self, real_part: bool) -> tuple[float, float]:
        """``(Σ |y − f|², Σ y²)`` over all training rows and processes, in one pass (``f`` → ``Re f`` with
        ``real_part``)."""
        sums = torch.zeros(2, dtype=self.real_dtype, device=self.device)
        for source, rows, targets in self._data_chunks():
            fitted = self.predict_rows(source, rows)
            fitted = fitted.real if real_part else fitted
            sums[0] += (targets - fitted).abs().square().sum()
            sums[1] += targets.square().sum()
        residual, squares = all_reduce_sum(sums, self.distributed).tolist()
        return residual, squares

    def penalty_value(self) -> float:
        """pen(W): ‖W‖² (full) or Σ_r Π_k ‖w_r^(k)‖² (diagonal)."""
        if self.penalty_form == "full":
            return float(cpd_norm_squared(self.factors))
        return float(cpd_hadamard_gram(cpd_factor_grams(self.factors)).diagonal().real.sum())

    def predict_rows(self, X: torch.Tensor, rows: slice) -> torch.Tensor:
        """f(X[rows]) (complex for complex features) → shape (n,)."""
        if X is self.X and self._groups and self._projections is None:
            active = self._row_product(rows).sum(-1).transpose(0, 1)  # (n, P_active)
        else:
            active = self._projections_for(rows, X).prod(0).sum(-1).transpose(0, 1)
        return active @ self.active_weights.to(self.dtype)

    def component_predictions(self, X: torch.Tensor, rows: slice | None = None) -> torch.Tensor:
        """Per-component predictions ⟨W, Φ^p(x)⟩ (without c_p) of *every* component, skipped ones included
        → shape (n, P)."""
        rows = slice(0, X.shape[0]) if rows is None else rows
        if len(self.active_components) == self.features.num_components:
            return self._projections_for(rows, X).prod(0).sum(-1).transpose(0, 1)
        # the active components' projections come from the cache when it is kept; the skipped ones' are computed,
        # for those components only
        active = list(self.active_components)
        skipped = sorted(set(range(self.features.num_components)) - set(active))
        skipped_features = self.features.components(skipped)
        first = rows.start or 0
        out = torch.empty(rows.stop - first, self.features.num_components, dtype=self.dtype, device=self.device)
        for start in range(first, rows.stop, self.chunk_size):
            chunk = slice(start, min(rows.stop, start + self.chunk_size))
            out[chunk.start - first:chunk.stop - first, active] = \
                self._projections_for(chunk, X).prod(0).sum(-1).transpose(0, 1)
            out[chunk.start - first:chunk.stop - first, skipped] = mode_projections(
                skipped_features, self.factors, X[chunk], dtype=self.dtype).prod(0).sum(-1).transpose(0, 1)
        return out

    def predict(self, X: torch.Tensor) -> torch.Tensor:
        """f(X) in chunks → shape (N',), complex for complex features."""
        return torch.cat([self.predict_rows(X, rows) for rows in self._chunks(X.shape[0])])
