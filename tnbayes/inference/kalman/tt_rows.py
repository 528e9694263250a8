"""The row-by-row square-root Kalman filter in TT form (TNKF's engine; the *inference* axis).

The state is a weight vector ``w ∈ R^N`` with Gaussian prior ``N(m_0, P_0)`` that does not evolve
except through an optional forgetting factor; each measurement is ``t_k = c_kᵀ w + e_k``,
``e_k ~ N(0, R)``. After all rows the filter holds the exact Gaussian posterior of ``w``.

``TTKalmanFilter`` keeps the mean as a TT-vector and the covariance through a *square root*
``P = L Lᵀ`` (``L`` a TT-matrix), updated with Potter's rank-one formula::

    w_k = Lᵀ c_k,  S = w_kᵀ w_k + R,  g = L w_k (= P c_k),  m ← m + (t_k − c_kᵀ m) g / S,
    L ← L − β g w_kᵀ,  β = 1 / (S + √(R S))

so that ``L Lᵀ = P − g gᵀ / S`` exactly, and — whatever TT-rounding does to ``L`` — the covariance
``L Lᵀ`` stays positive semi-definite and every predictive variance ``xᵀ L Lᵀ x = ‖Lᵀ x‖²`` is ≥ 0. The
covariance-form update ``P ← P − g gᵀ/S`` followed by rounding does not have this property
(``TTKalmanFilter(square_root=False)`` runs it, for comparison).

The forgetting factor follows the TNKF paper's definition, ``P⁻ = P / λ_f`` (``λ_f ≤ 1``) before each
update (the authors' code multiplies instead).

:meth:`TTKalmanFilter.update_block` conditions on B rows at once (``C`` of B rows, a *block TT* of
:mod:`tnbayes.tensors.tt_block`), the block form of Potter's update (Andrews)::

    A = Lᵀ Cᵀ,  S = AᵀA + R I,  G = L A (= P Cᵀ),  m ← m + G S⁻¹ (t − C m),
    L ← L − G W Aᵀ,  W = U diag(1 / (√(g + R) (√(g + R) + √R))) Uᵀ  for AᵀA = U diag(g) Uᵀ

(exact: ``L_new L_newᵀ = P − G S⁻¹ Gᵀ``), with one rounding of A, G, m and L per block instead of per row;
the small einsum/QR/SVD calls per row that dominate the row update are shared by the B rows.

Both updates round ``L`` in :meth:`TTKalmanFilter._round_root`: without a rank cap by forming ``L − G W Aᵀ``
(B = 1: ``L − β g wᵀ``) and rounding it deterministically; with one, a block by a randomized sketch that never
forms the outer products (their TT ranks are the product of the factors'), a row by
:func:`~tnbayes.tensors.round_rank_one_update` (Oseledets' rounding of ``L − β g wᵀ`` from Gram matrices,
never formed either).

The row update holds the state-sized vectors densely while it runs (N numbers each: for TNKF, the size of the data):
``Lᵀc`` and ``L w`` are contracted to dense vectors and compressed by :func:`~tnbayes.tensors.tt_svd` with the
``"innovation"`` and ``"gain"`` rules (a TT-SVD of the full vector meets the same error bound as rounding the exact
product's TT, whose ranks r_L·r_c make that rounding the row's most expensive step), right-orthonormal with the norm
in the first core as the root's rounding takes them. The mean is updated densely and compressed with the ``"mean"``
rule when its TT is read (:attr:`TTKalmanFilter.mean`), not after every row: the dense vector is what the rows use,
and a TT of a vector at full rank holds more numbers than the vector (rounding relative to the state, and in
covariance mode, the mean is rounded after every row, as before).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch

from tnbayes._memory import available_memory_bytes
from tnbayes.inference.kalman.truncation import TRUNCATED_QUANTITIES, Truncation
from tnbayes.inference.kalman.tt_batch import root_factors
from tnbayes.tensors import TTMatrix, TTVector, randomized_round_sum, round_rank_one_update, tt_bond_bounds
from tnbayes.tensors.tt_block import (
    block_columns,
    block_dot,
    block_from_dense,
    block_gram,
    block_matvec,
    block_matvec_rounded,
    block_mix,
    block_outer,
    block_weighted_sum,
)
from tnbayes.tensors.tt_rounding import cores_to_dense, matvec_to_dense, tt_svd

__all__ = ["BlockUpdateError", "TTKalmanFilter", "covariance_from_root"]

#: sketch ranks beyond the cap of the randomized rounding of the root in the block update
BLOCK_SKETCH_OVERSAMPLING = 10
#: largest share of the free memory that a TT the filter forms before rounding it (an exact product or outer product,
#: whose ranks multiply) may take: forming and rounding it take a few copies of it (see
#: :meth:`TTKalmanFilter._refuse_unaffordable`)
FORMED_MEMORY_SHARE = 0.1
#: largest share of a block's prior residual ``‖r‖`` by which the rounded update may miss the exact posterior residual
#: of its own rows, ``R S⁻¹ r`` (see :meth:`TTKalmanFilter.update_block`)
BLOCK_CONSISTENCY = 0.5


class BlockUpdateError(ArithmeticError):
    """A block update whose rounded quantities miss the exact Kalman update of its own rows by more than
    :data:`BLOCK_CONSISTENCY` of their residual (:meth:`TTKalmanFilter.update_block`); the filter's state is
    unchanged, so the caller can condition on the rows one at a time instead."""


def covariance_from_root(root: TTMatrix, tol: float = 0.0, max_rank: int | None = None) -> TTMatrix:
    """The covariance ``P = L Lᵀ`` of a square root ``L``, as a rounded TT-matrix.

    Parameters
    ----------
    root : TTMatrix with modes (n_1, …, n_d) × (m_1, …, m_d)
        L.
    tol : float
        Relative rounding accuracy of P.
    max_rank : int, optional
        Rank cap of P.

    Returns
    -------
    TTMatrix with modes (n_1, …, n_d) × (n_1, …, n_d)
    """
    return root.matmul(root.T).round(tol, max_rank)


class TTKalmanFilter:
    """Square-root Kalman filter with the mean and the covariance square root in tensor-train format.

    Parameters
    ----------
    shape : sequence of int
        TT mode sizes of the state (product N).
    prior_variance : float
        ``P_0 = prior_variance · I`` (rank 1); the prior mean is 0.
    truncation : dict, optional
        Quantity → truncation (see :class:`Truncation`), for ``"mean"`` (m), ``"covariance"`` (L),
        ``"gain"`` (g = P c), ``"innovation"`` (w = Lᵀc, whose squared norm is the innovation variance
        minus R) and ``"row"`` (used by callers that compress measurement rows, e.g. ``TNKF``).
        Missing quantities are not truncated.
    forgetting_factor : float
        ``λ_f ∈ (0, 1]``; ``P⁻ = P / λ_f`` before each update.
    square_root : bool
        Potter's square-root update (default). ``False`` stores ``P`` itself and applies
        ``P ← P − g gᵀ/S`` then rounds it, which can lose positive semi-definiteness.
    round_relative_to : {"update", "state"}
        What the tolerances of ``"mean"`` and ``"covariance"`` are relative to after an update.
        ``"update"`` (default): the norm of the change the row made (``‖Δm‖``, ``β‖g‖‖w‖``), so the
        rounding error of each step is a fraction of that step; ``"state"``: the norm of the whole
        updated quantity (the paper). With ``"state"`` the allowed error ``tol·‖L‖_F ~ tol·√(p₀N)``
        stays fixed while the change one row makes shrinks like 1/N, so at large N most updates are
        rounded away (measured on a 2¹⁴-point sinc). With ``"update"``, square-root row updates carry the mean
        densely and round it when :attr:`mean` is read, relative to its whole change (see :attr:`mean`).
    dtype, device
        Of the cores.

    Attributes
    ----------
    mean : TTVector
    covariance_sqrt : TTMatrix or None
        ``L`` with ``P = L Lᵀ`` (square-root mode).
    num_updates : int
    covariance_trace_history : list of float
        ``trace(P)`` after each update (``‖L‖_F²``), the early-stopping signal.
    block_misses : list of float
        For each block update tried, the share of its rows' residual ``‖r‖`` by which the rounded update missed the
        exact posterior residual (see :meth:`update_block`; above :data:`BLOCK_CONSISTENCY` it was rejected).
    """

    def __init__(self, shape: tuple[int, ...], prior_variance: float, *,
                 truncation: Mapping[str, object] | None = None, forgetting_factor: float = 1.0,
                 square_root: bool = True, round_relative_to: str = "update", dtype: torch.dtype = torch.float64,
                 device: torch.device | str = "cpu") -> None:
        if not (0.0 < float(forgetting_factor) <= 1.0):
            raise ValueError(f"forgetting_factor must be in (0, 1]; got {forgetting_factor}.")
        if not float(prior_variance) > 0:
            raise ValueError(f"prior_variance must be positive; got {prior_variance}.")
        unknown = set(truncation or {}) - set(TRUNCATED_QUANTITIES)
        if unknown:
            raise ValueError(f"Unknown truncated quantities {sorted(unknown)}; use {TRUNCATED_QUANTITIES}.")
        self.shape = tuple(int(s) for s in shape)
        self.truncation = {q: Truncation.parse((truncation or {}).get(q)) for q in TRUNCATED_QUANTITIES}
        self.forgetting_factor = float(forgetting_factor)
        self.square_root = bool(square_root)
        if round_relative_to not in ("update", "state"):
            raise ValueError(f"round_relative_to must be 'update' or 'state'; got {round_relative_to!r}.")
        self.round_relative_to = round_relative_to
        self.mean = TTVector.zeros(self.shape, dtype=dtype, device=device)
        identity = TTMatrix.identity(self.shape, dtype=dtype, device=device)
        if self.square_root:
            self.covariance_sqrt: TTMatrix | None = identity * math.sqrt(float(prior_variance))
            self._covariance: TTMatrix | None = None
        else:
            self.covariance_sqrt = None
            self._covariance = identity * float(prior_variance)
        self._full_ranks = (1, *tt_bond_bounds(self.shape), 1)  # a TT-vector's largest ranks, as TTVector.ranks
        self.num_updates = 0
        self.covariance_trace_history: list[float] = []
        self.block_misses: list[float] = []
        # randomized rounding of block updates: a CPU generator, so a CUDA filter draws the same sketches as a CPU one
        self._generator = torch.Generator().manual_seed(0)
        self._free_memory = (-1, 0)  # (num_updates, bytes): read once per update, for every product it forms

    # ------------------------------------------------------------------ state
    @property
    def covariance(self) -> TTMatrix:
        """``P`` as a TT-matrix (``L Lᵀ`` rounded with the covariance truncation in square-root mode)."""
        if not self.square_root:
            return self._covariance
        rule = self.truncation["covariance"]
        return covariance_from_root(self.covariance_sqrt, rule.tol, rule.max_rank)

    def covariance_trace(self) -> float:
        """``trace(P)``."""
        if self.square_root:
            return float(self.covariance_sqrt.norm()) ** 2
        return float(self._covariance.trace())

    def variance(self, row: TTVector) -> float:
        """``cᵀ P c`` (≥ 0 in square-root mode: ``‖Lᵀc‖²``, from the dense product)."""
        if self.square_root:
            projected = matvec_to_dense(self.covariance_sqrt.cores, row.cores, transpose=True)  # Lᵀc
            return float(torch.linalg.vector_norm(projected)) ** 2
        return float(self._covariance.quadratic_form(row))

    def predict(self, row: TTVector) -> tuple[float, float]:
        """The predictive mean ``cᵀ m`` and variance ``cᵀ P c`` of a measurement row (without the noise).

        Parameters
        ----------
        row : TTVector
            ``c``, modes ``shape``.

        Returns
        -------
        mean, variance : float
        """
        mean = row.to_dense() @ self._dense_mean()
        return float(mean), self.variance(row)

    def predict_given_zero_entry(self, row: TTVector, entry: int) -> tuple[float, float]:
        """The predictive mean and variance (floats) of ``cᵀw`` (without the noise) given the state and
        ``w_entry = 0``: :meth:`predict_given_zero_entries` of one row ``c`` (a TTVector of modes ``shape``)."""
        means, variances = self.predict_given_zero_entries([core[None] for core in row.cores], [int(entry)])
        return float(means[0]), float(variances[0])

    def predict_given_zero_entries(self, rows: list[torch.Tensor],
                                   entries: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The predictive means and variances of ``c_bᵀw`` (without the noise) given the state and ``w_{e_b} = 0``,
        for B rows at once.

        With ``p = P e`` the conditional mean is ``cᵀ(m − p m_e / p_e)`` and the conditional variance
        ``cᵀPc − (cᵀp)² / p_e`` (a Schur complement, ≥ 0): the posterior of a model without that entry of the
        state, given the same rows. In square-root mode ``cᵀp = (Lᵀc)ᵀ(Lᵀe)``, all as dense vectors for the whole
        batch: ``Lᵀc`` by :func:`~tnbayes.tensors.tt_rounding.matvec_to_dense`, ``Lᵀe`` (row e of L) from L's cores
        sliced at the entry's mode indices. Where no variance is left in the entry (or, in covariance mode, P lost
        definiteness there) the state's own prediction.

        Parameters
        ----------
        rows : list of torch.Tensor of shape (B, r_{k-1}, n_k, r_k)
            The B rows ``c_b`` as batched TT cores of modes ``shape`` (e.g. from
            :func:`~tnbayes.tensors.tt_svd_batched`).
        entries : list of int
            B indices of the state entry held at zero (n_1 slowest, as dense vectors are laid out).

        Returns
        -------
        means, variances : torch.Tensor of shape (B,)
        """
        if len(rows) != len(self.shape) or any(core.ndim != 4 for core in rows) or rows[0].shape[0] != len(entries):
            raise ValueError(f"predict_given_zero_entries needs {len(self.shape)} batched cores (B, r, n, r') and one "
                             f"entry per row; got {[tuple(core.shape) for core in rows]} and {len(entries)} entries.")
        digits = np.unravel_index(np.asarray(entries, dtype=np.int64), self.shape)  # d arrays of B mode indices
        mean = self._dense_mean()
        means, own_means = cores_to_dense(rows) @ mean, mean[torch.as_tensor(entries, device=mean.device)]
        if self.square_root:
            cores = self.covariance_sqrt.cores
            projected = matvec_to_dense(cores, rows, transpose=True)  # (B, N): Lᵀc_b
            own = cores_to_dense([core[:, torch.as_tensor(index, device=core.device)].movedim(1, 0)
                                  for core, index in zip(cores, digits)])  # (B, N): Lᵀe_b
            variances, cross, own_variances = ((a * b).sum(1) for a, b in
                                               ((projected, projected), (projected, own), (own, own)))
        else:
            variances, cross, own_variances = (mean.new_empty(len(entries)) for _ in range(3))
            for b, index in enumerate(zip(*digits)):
                row = TTVector([core[b] for core in rows])
                unit = TTVector([torch.eye(n, dtype=mean.dtype, device=mean.device)[int(i)].reshape(1, -1, 1)
                                 for i, n in zip(index, self.shape)])
                column = self._covariance.matvec(unit)  # P e
                variances[b], cross[b], own_variances[b] = (float(self._covariance.quadratic_form(row)),
                                                            float(row.dot(column)), float(unit.dot(column)))
        conditioned = own_variances > 0  # else nothing to condition on: the state's own prediction, as it is
        ratio = cross / torch.where(conditioned, own_variances, 1.0)
        return (torch.where(conditioned, means - ratio * own_means, means),
                torch.where(conditioned, variances - ratio * cross, variances).clamp_min(0.0))

    def dense_means(self, rows: torch.Tensor) -> torch.Tensor:
        """The predicted measurements ``C m`` of dense rows (from the dense mean the row updates keep).

        Parameters
        ----------
        rows : torch.Tensor of shape (B, N)
            The rows ``c_k`` as dense vectors (N the product of ``shape``).

        Returns
        -------
        torch.Tensor of shape (B,)
        """
        mean = self._dense_mean()
        return rows.to(mean) @ mean

    def _update_reference(self, gain: TTVector) -> float:
        """‖g‖, which scales every update's norm; only needed when rounding relative to updates."""
        return float(gain.norm()) if self.round_relative_to == "update" else math.nan

    def _round(self, tt, quantity: str, update_norm: float | None = None):
        rule = self.truncation[quantity]
        reference = update_norm if self.round_relative_to == "update" else None
        return tt.round(rule.tol, rule.max_rank, reference_norm=reference)

    def _compress(self, dense: torch.Tensor, quantity: str, update_norm: float | None = None,
                  norm_core: int | None = None) -> TTVector:
        """TT-SVD of a dense state-sized vector with the rule of ``quantity`` (relative to ``update_norm`` when
        rounding relative to updates; ``norm_core`` as :func:`~tnbayes.tensors.tt_svd`). The error bound is that of
        rounding an exact TT of the vector; the ranks can differ where singular values sit near the tolerance, and
        without a tolerance or cap round-off makes the vector numerically full rank (an untruncated filter)."""
        rule = self.truncation[quantity]
        reference = update_norm if self.round_relative_to == "update" else None
        return TTVector(tt_svd(dense.reshape(self.shape), tol=rule.tol, max_rank=rule.max_rank,
                               reference_norm=reference, norm_core=norm_core))

    @property
    def mean(self) -> TTVector:
        """The posterior mean of ``w`` as a TT-vector. After row updates (square-root mode, rounding relative to
        updates) the filter carries the mean densely, and this is its rounding with the ``"mean"`` rule relative to
        the change since the filter last took a TT mean (at its start, set, or after a block update): at most the
        sum of the rows' steps. Reading it changes nothing the filter does next, except that a block update goes on
        from it."""
        if self._mean is None:
            change = None if self.round_relative_to != "update" else \
                float(torch.linalg.vector_norm(self._mean_full - self._mean_start))
            self._mean = self._compress(self._mean_full, "mean", update_norm=change)
        return self._mean

    @mean.setter
    def mean(self, value: TTVector) -> None:
        self._mean, self._mean_full, self._mean_start = value, None, None

    def _dense_mean(self) -> torch.Tensor:
        """The mean the filter carries, as a dense vector of shape (N,) (the TT mean's, until row updates)."""
        if self._mean_full is None:
            self._mean_full = self._mean.to_dense()
        return self._mean_full

    def _set_dense_mean(self, dense: torch.Tensor) -> None:
        """Carry on from ``dense`` (N,), a row update's mean: unrounded, its TT computed when read (see :attr:`mean`);
        rounding relative to the state, rounded now (the paper's rounding of every row).

        With tolerances relative to the update the dense vector is what the rows use (a TT of a vector at full rank
        holds more numbers than the vector), and one rounding relative to the whole change meets the bound of
        rounding every row relative to its own step, since the change's norm is at most the sum of the steps'."""
        if self._mean_start is None and self.round_relative_to == "update":
            self._mean_start = self._dense_mean()
        self._mean, self._mean_full = None, dense
        if self.round_relative_to == "state":
            rounded = self._compress(dense, "mean")
            self.mean = rounded
            # a TT that kept every bond at its full rank is the vector re-expressed in orthonormal bases: keep it
            self._mean_full = dense if rounded.ranks == self._full_ranks else rounded.to_dense()

    # ------------------------------------------------------------------ update
    def update(self, row: TTVector, target: float, measurement_noise: float) -> float:
        """Condition on ``target = rowᵀ w + e``, ``e ~ N(0, measurement_noise)``.

        Parameters
        ----------
        row : TTVector
            The measurement row ``c_k`` (already compressed by the caller), modes ``shape``.
        target : float
        measurement_noise : float
            ``R > 0``.

        Returns
        -------
        float
            The innovation variance ``S = c_kᵀ P⁻ c_k + R``.

        Notes
        -----
        ``w`` and ``g`` are contracted densely and compressed by a TT-SVD, the mean is updated densely and compressed
        (see the module docstring); ``L − β g wᵀ`` is rounded by :meth:`_round_root`: formed and rounded
        deterministically without a cap in the ``"covariance"`` rule, with one by
        :func:`~tnbayes.tensors.round_rank_one_update`, against the update's norm when rounding relative to
        updates.
        """
        if row.shape != self.shape:
            raise ValueError(f"Measurement row has TT modes {row.shape}; the state has {self.shape}.")
        noise = float(measurement_noise)
        if not self.square_root:
            if self.forgetting_factor != 1.0:
                self._covariance = self._covariance / self.forgetting_factor
            gain = self._round(self._covariance.matvec(row), "gain")
            innovation_variance = float(row.dot(gain)) + noise
            gain_norm = self._update_reference(gain)
            self._covariance = self._round(self._covariance - gain.outer(gain) / innovation_variance, "covariance",
                                           update_norm=gain_norm**2 / innovation_variance)
            residual = float(target) - float(row.dot(self.mean))
            step = residual / innovation_variance
            self.mean = self._round(self.mean + gain * step, "mean", update_norm=abs(step) * gain_norm)
        else:
            root = self.covariance_sqrt
            if self.forgetting_factor != 1.0:  # stored with the update: a refused update leaves the state as it was
                root = root / math.sqrt(self.forgetting_factor)
            # w = Lᵀc and g = L w = P c, right-orthonormal as the root's rounding takes them
            projected = self._compress(matvec_to_dense(root.cores, row.cores, transpose=True), "innovation",
                                       norm_core=0)
            innovation_variance = float(torch.linalg.vector_norm(projected.cores[0])) ** 2 + noise
            gain = self._compress(matvec_to_dense(root.cores, projected.cores), "gain", norm_core=0)
            gain_dense = gain.to_dense()
            beta = 1.0 / (innovation_variance + math.sqrt(noise * innovation_variance))
            gain_norm = float(torch.linalg.vector_norm(gain_dense))
            update_norm = None if self.round_relative_to != "update" else \
                beta * gain_norm * math.sqrt(innovation_variance - noise)  # ‖β g wᵀ‖_F
            self.covariance_sqrt = self._round_root(root, gain, projected * beta, 1, update_norm,
                                                    right_orthonormal=True)  # β scales core 0
            residual = float(target) - float(row.to_dense() @ self._dense_mean())
            step = residual / innovation_variance
            self._set_dense_mean(self._dense_mean() + step * gain_dense)
        self.num_updates += 1
        if self.square_root:  # rounding leaves cores 0..d-2 left-orthonormal: ‖L‖_F = ‖last core‖
            self.covariance_trace_history.append(float(torch.linalg.vector_norm(self.covariance_sqrt.cores[-1])) ** 2)
        else:
            self.covariance_trace_history.append(self.covariance_trace())
        return innovation_variance

    # ------------------------------------------------------------------ block update
    def update_block(self, rows: TTVector | torch.Tensor, targets: torch.Tensor,
                     measurement_noise: float) -> torch.Tensor:
        """Condition on B measurements ``targets = C w + e``, ``e ~ N(0, R I)``, in one block square-root update.

        With ``A = Lᵀ Cᵀ`` (N × B), ``S = AᵀA + R I = C P Cᵀ + R I``, ``G = L A = P Cᵀ`` and
        ``AᵀA = U diag(g) Uᵀ``::

            m ← m + G S⁻¹ (t − C m),   L ← L − G W Aᵀ,   W = U diag(1 / (√(g + R) (√(g + R) + √R))) Uᵀ

        which is exact (``L_new L_newᵀ = P − G S⁻¹ Gᵀ``, the Kalman covariance of the B rows at once; the
        block form of Potter's update, see :mod:`tnbayes.inference.kalman.tt_batch`), and keeps ``L Lᵀ ⪰ 0``
        whatever the rounding. The rows are one block TT (the row index on the last core, see
        :mod:`tnbayes.tensors.tt_block`): A and G are each computed and rounded once per block (the
        ``"innovation"`` and ``"gain"`` caps + B, because their last bond carries B columns), and L is rounded
        once per block, by :func:`~tnbayes.tensors.randomized_round_sum` of ``[L, (G, A Wᵀ, B)]`` when the
        ``"covariance"`` rule has a rank cap. For B = 1 this is :meth:`update` (up to where rounding happens).

        Forgetting: ``P⁻ = P / λ_f^B`` once before the block (the B row updates' forgetting, applied first).
        ``covariance_trace_history`` gets B copies of ``trace(P)`` after the block, so it keeps one entry per row.
        In covariance mode (``square_root=False``) the rows are processed one at a time with :meth:`update`.

        Consistency check: the exact update leaves its own rows the posterior residual ``t − C m_new = R S⁻¹ r``
        (``r = t − C m``), because ``C G = AᵀA``. With the rounded A and G the mean's step leaves them
        ``r − C G S⁻¹ r``, which misses ``R S⁻¹ r`` by ``(AᵀA − C G) S⁻¹ r``; before anything is stored, when that
        is longer than :data:`BLOCK_CONSISTENCY` ``· ‖r‖`` the roundings of A and G (whose errors ``S⁻¹`` amplifies
        by up to 1/R) lost the block, and :class:`BlockUpdateError` is raised with the state unchanged (its sketches'
        generator too; only ``block_misses`` records the try). A small R
        with rank caps that bind does this; row updates, whose innovation is a scalar, do not have the
        amplification.

        Parameters
        ----------
        rows : TTVector of modes (n_1, …, n_{d−1}, n_d·B) or torch.Tensor of shape (B, N)
            The measurement rows ``c_k``: a block TT (already compressed by the caller), or dense rows, then
            compressed here as one block with the ``"row"`` truncation.
        targets : torch.Tensor of shape (B,)
        measurement_noise : float
            ``R > 0``.

        Returns
        -------
        torch.Tensor of shape (B, B)
            The innovation covariance ``S = C P⁻ Cᵀ + R I`` (its diagonal: the rows' innovation variances).

        Raises
        ------
        BlockUpdateError
            When the rounded update fails the consistency check (the state is left as it was).
        """
        targets = torch.as_tensor(targets, dtype=torch.float64).reshape(-1)
        B = targets.numel()
        if isinstance(rows, torch.Tensor):
            if rows.shape != (B, math.prod(self.shape)):
                raise ValueError(f"Dense rows must have shape ({B}, {math.prod(self.shape)}); got {tuple(rows.shape)}.")
            rule = self.truncation["row"].for_block(B)
            rows = block_from_dense(rows.to(self.mean.dtype), self.shape, tol=rule.tol, max_rank=rule.max_rank)
        if rows.shape != self.shape[:-1] + (self.shape[-1] * B,):
            raise ValueError(f"A block of {B} rows needs TT modes {self.shape[:-1] + (self.shape[-1] * B,)}; got "
                             f"{rows.shape}.")
        noise = float(measurement_noise)
        if not self.square_root:
            return torch.diag(torch.tensor([self.update(row, float(t), noise) for row, t in
                                            zip(block_columns(rows, B), targets)], dtype=torch.float64))
        root = self.covariance_sqrt
        if self.forgetting_factor != 1.0:
            root = root / math.sqrt(self.forgetting_factor ** B)
        # restored if the block is rejected (BlockUpdateError) or refused (MemoryError): the state is left as it was
        sketches, misses = self._generator.get_state(), len(self.block_misses)
        try:
            projected = self._block_product(root.T, rows, B, "innovation")  # A = Lᵀ Cᵀ
            gram = block_gram(projected, B)  # AᵀA = C P Cᵀ
            eye = torch.eye(B, dtype=gram.dtype, device=gram.device)
            innovation = gram + noise * eye  # S
            gain = self._block_product(root, projected, B, "gain")  # G = L A = P Cᵀ
            residual = targets.to(gram) - block_dot(rows, self.mean, B)
            step = torch.linalg.solve(innovation, residual)  # S⁻¹ r
            gain_gram = block_gram(gain, B) if self.round_relative_to == "update" else None
            # ‖G S⁻¹r‖, the norm of the mean's step
            mean_norm = None if gain_gram is None else math.sqrt(max(float(step @ gain_gram @ step), 0.0))
            # the step's residual at its own rows, t − C(m + G s) = r − C G s, against the exact one R s = r − AᵀA s
            missed = float(torch.linalg.vector_norm((gram - block_gram(rows, B, gain)) @ step))
            residual_norm = float(torch.linalg.vector_norm(residual))
            self.block_misses.append(missed / residual_norm if residual_norm > 0 else 0.0)
            if not self.block_misses[-1] <= BLOCK_CONSISTENCY:  # NaN too
                self._generator.set_state(sketches)
                raise BlockUpdateError(
                    f"The block update of {B} rows missed its rows' exact posterior residual by {missed:.3g}, more "
                    f"than {BLOCK_CONSISTENCY:g} of their residual {residual_norm:.3g}: the innovation and gain ranks "
                    f"(caps + {B}) lose more than the measurement noise {noise:.3g} absorbs. "
                    f"The state is unchanged; update with these rows one at a time, or raise the 'innovation' and "
                    f"'gain' rank caps.")
            mean = self._round(self.mean + block_weighted_sum(gain, step, B), "mean", update_norm=mean_norm)
            weights = root_factors(gram, noise)  # W
            mixed = block_mix(projected, weights, B)  # A Wᵀ (W is symmetric)
            update_norm = None if gain_gram is None else \
                math.sqrt(max(float(torch.trace(gain_gram @ weights @ gram @ weights)), 0.0))  # ‖G W Aᵀ‖_F
            new_root = self._round_root(root, gain, mixed, B, update_norm)
        except MemoryError:
            self._generator.set_state(sketches)
            del self.block_misses[misses:]
            raise
        self.covariance_sqrt = new_root
        self.mean = mean
        self.num_updates += B
        trace = float(torch.linalg.vector_norm(self.covariance_sqrt.cores[-1])) ** 2  # cores 0..d-2 orthonormal
        self.covariance_trace_history.extend([trace] * B)
        return innovation

    def _block_product(self, matrix: TTMatrix, block: TTVector, batch: int, quantity: str) -> TTVector:
        """``matrix`` times each column of ``block``, rounded with the rule of ``quantity`` (cap + B): by a zip-up
        without a cap, by a randomized sketch of the exact product with one."""
        rule = self.truncation[quantity].for_block(batch)
        sizes = [*matrix.row_shape[:-1], matrix.row_shape[-1] * batch]
        product = [a * b for a, b in zip(matrix.ranks, block.ranks)]
        # the zip-up holds one of the product's cores at a time, the sketch all of them
        self._refuse_unaffordable([product], sizes, f"the {quantity} product of {batch} rows",
                                  ("covariance", "row" if quantity == "innovation" else "innovation"),
                                  one_core_at_a_time=rule.max_rank is None)
        if rule.max_rank is None:
            return block_matvec_rounded(matrix, block, batch, rule.tol)
        # with a cap the zip-up's greedy truncations bind and lose accuracy (a 4096-point sinc with TNKF()'s caps:
        # test RMSE 0.134 against 0.103 row by row); a randomized sketch of the exact product is near the best
        return randomized_round_sum([block_matvec(matrix, block, batch)], max_rank=rule.max_rank, tol=rule.tol,
                                    generator=self._generator)

    def _refuse_unaffordable(self, formed: list[list[int]], core_sizes: list[int], what: str,
                             quantities: tuple[str, ...], *, one_core_at_a_time: bool = False) -> None:
        """Raise ``MemoryError`` before forming TTs of the ranks in ``formed`` (d + 1 each) over cores of
        ``core_sizes`` entries (d) when together they would take more than :data:`FORMED_MEMORY_SHARE` of the free
        memory (``one_core_at_a_time``: their largest core, as a zip-up holds them); nothing of the filter's state has
        been changed by then. Without a rank cap a quantity's ranks follow its tolerance, which on data of many
        inputs can let them grow until its products no longer fit: the message names those of ``quantities`` (the
        ones whose ranks make the TTs') that have no cap."""
        like = (self.covariance_sqrt if self.square_root else self._covariance).cores[0]
        needed = 0
        for ranks in formed:
            cores = [r0 * size * r1 for r0, size, r1 in zip(ranks, core_sizes, ranks[1:])]
            needed += (max(cores) if one_core_at_a_time else sum(cores)) * like.element_size()
        ranks = [rank for ranks in formed for rank in ranks]
        device = like.device
        if self._free_memory[0] != self.num_updates:  # the probe reads files (cgroups): not once per product
            self._free_memory = (self.num_updates, available_memory_bytes(device))
        available = self._free_memory[1]
        if needed <= FORMED_MEMORY_SHARE * available:
            return
        uncapped = [repr(q) for q in quantities if self.truncation[q].max_rank is None]
        named = " and ".join(uncapped)
        remedy = ((f"The truncation of {named} has no rank cap (a tolerance alone), so its ranks grow with the rows: "
                   f"give it one, as (tol, max_rank)." if len(uncapped) == 1 else
                   f"The truncations of {named} have no rank cap (a tolerance alone), so their ranks grow with the "
                   f"rows: give them one, as (tol, max_rank).") if uncapped else
                  f"Lower the rank caps of {' and '.join(repr(q) for q in quantities)} in the truncation.")
        raise MemoryError(f"After {self.num_updates} rows, {what} would take about {needed / 2**30:.3g} GiB (TT ranks "
                          f"up to {max(ranks)}), more than {FORMED_MEMORY_SHARE:g} of the {available / 2**30:.1f} GiB "
                          f"free on {device}. {remedy}")

    def _round_root(self, root: TTMatrix, gain: TTVector, mixed: TTVector, batch: int,
                    update_norm: float | None, right_orthonormal: bool = False) -> TTMatrix:
        """``round(L − G (A Wᵀ)ᵀ)`` with the covariance rule. Without a rank cap: formed and rounded
        deterministically. With one, a row update (``batch`` = 1) by :func:`~tnbayes.tensors.round_rank_one_update`
        (the same deterministic rounding, from Gram matrices, without forming the rank r_L + r_g·r_w sum), a block
        update by a randomized sketch that never forms the sum (:func:`~tnbayes.tensors.randomized_round_sum`).
        ``right_orthonormal``: the row update's ``g`` and ``β w`` have right-orthonormal cores 1..d-1 already."""
        rule = self.truncation["covariance"]
        if rule.max_rank is None:
            outer = [a * b for a, b in zip(gain.ranks, mixed.ranks)]  # formed, then added to the root: ranks add
            self._refuse_unaffordable([outer, [a + b for a, b in zip(root.ranks, outer)]],
                                      [m * n for m, n in zip(root.row_shape, root.col_shape)],
                                      "the covariance root's update", ("covariance", "gain", "innovation"))
            return self._round(root - block_outer(gain, mixed, batch), "covariance", update_norm=update_norm)
        if batch == 1:
            return round_rank_one_update(root, gain, mixed, -1.0, tol=rule.tol, max_rank=rule.max_rank,
                                         reference_norm=update_norm, right_orthonormal=right_orthonormal)
        # relative to the update: sketch exactly, then round against the update's norm
        sketched = randomized_round_sum([root, (gain, mixed, batch)], [1.0, -1.0], max_rank=rule.max_rank,
                                        tol=rule.tol if update_norm is None else 0.0,
                                        oversampling=BLOCK_SKETCH_OVERSAMPLING, generator=self._generator)
        return sketched if update_norm is None else sketched.round(rule.tol, rule.max_rank,
                                                                   reference_norm=update_norm)
