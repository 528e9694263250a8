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
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from tnbayes.inference.kalman.truncation import TRUNCATED_QUANTITIES, Truncation
from tnbayes.tensors import TTMatrix, TTVector

__all__ = ["TTKalmanFilter", "covariance_from_root"]


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
        rounded away (measured on a 2¹⁴-point sinc).
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
        self.num_updates = 0
        self.covariance_trace_history: list[float] = []

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
        """``cᵀ P c`` (≥ 0 in square-root mode)."""
        if self.square_root:
            projected = self.covariance_sqrt.T.matvec(row)
            return float(projected.dot(projected))
        return float(self._covariance.quadratic_form(row))

    def _update_reference(self, gain: TTVector) -> float:
        """‖g‖, which scales every update's norm; only needed when rounding relative to updates."""
        return float(gain.norm()) if self.round_relative_to == "update" else math.nan

    def _round(self, tt, quantity: str, update_norm: float | None = None):
        rule = self.truncation[quantity]
        reference = update_norm if self.round_relative_to == "update" else None
        return tt.round(rule.tol, rule.max_rank, reference_norm=reference)

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
        """
        if row.shape != self.shape:
            raise ValueError(f"Measurement row has TT modes {row.shape}; the state has {self.shape}.")
        noise = float(measurement_noise)
        if self.square_root:
            if self.forgetting_factor != 1.0:
                self.covariance_sqrt = self.covariance_sqrt / math.sqrt(self.forgetting_factor)
            projected = self._round(self.covariance_sqrt.T.matvec(row), "innovation")  # w = Lᵀ c
            innovation_variance = float(projected.dot(projected)) + noise
            gain = self._round(self.covariance_sqrt.matvec(projected), "gain")  # g = L w = P c
            beta = 1.0 / (innovation_variance + math.sqrt(noise * innovation_variance))
            gain_norm = self._update_reference(gain)
            self.covariance_sqrt = self._round(self.covariance_sqrt - gain.outer(projected) * beta, "covariance",
                                               update_norm=beta * gain_norm * math.sqrt(innovation_variance - noise))
        else:
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
        self.num_updates += 1
        if self.square_root:  # rounding leaves cores 0..d-2 left-orthonormal: ‖L‖_F = ‖last core‖
            self.covariance_trace_history.append(float(torch.linalg.vector_norm(self.covariance_sqrt.cores[-1])) ** 2)
        else:
            self.covariance_trace_history.append(self.covariance_trace())
        return innovation_variance
