"""ALS smoothing of a tensor-train weight vector and the Laplace variance around it (TT format + ALS + Laplace).

The Gaussian linear model of the TT Kalman filter, in whitened weights u (v = L₀u, L₀ = ⊗_k diag(l_k) the prior
root)::

    y = ψ(x)ᵀu + ε,   ψ(x) = ψ_1(x) ⊗ … ⊗ ψ_K(x),   ψ_k = l_k ⊙ φ_k,   u ~ N(0, I),   ε ~ N(0, σ²)

restricted to u a tensor train of fixed ranks. Its MAP minimises ``J(u) = ‖y − Ψu‖² + σ²‖u‖²``. With the cores
left of k left-orthogonal and those right of k right-orthogonal (k the *centre*), ‖u‖ = ‖G_k‖ and the model is
linear in G_k: the design row of x is ``a_k(x) = ℓ_k(x) ⊗ ψ_k(x) ⊗ ρ_k(x)`` (ℓ_k, ρ_k the contractions of ψ with
the cores left and right of k) and the centre update solves ``(A_kᵀA_k + σ²I) g = A_kᵀy`` exactly
(:func:`~tnbayes.inference.spd.solve_spd`). A sweep moves the centre 0 → K−1 → 0 by QR steps, each core solved
once per direction, so J never increases. The normal equations are accumulated over row chunks from a callable that
yields them afresh for every centre (rows in memory or a chunk source alike): the memory is O(s²) plus one chunk,
s = r_{k−1}·M·r_k. The interfaces ℓ, ρ are recomputed per chunk (K·r²·M flops per row, against s² for AᵀA).

Laplace variance. The tangent space of the fixed-rank TT manifold at u is the direct sum over k of
``{ℓ_k ⊗ δG_k ⊗ ρ_k}``, with δG_k orthogonal to the left-orthogonal core U_k for k < K−1 (the gauge condition; the
last core is free). The Gauss–Newton precision ``ΨᵀΨ/σ² + I`` restricted to each block, cross terms between blocks
left out, gives the latent variance::

    σ² Σ_k ã_k(x)ᵀ (Ã_kᵀÃ_k + σ²I)⁻¹ ã_k(x),    ã_k = (Q_kᵀ ⊗ I_{r_k}) a_k

with Q_k an orthonormal basis of the complement of U_k's columns. Unlike a sum of every core's full conditional
variance (:mod:`tnbayes.inference.laplace`, the CPD models' Laplace), it counts no direction twice: the gauge
directions that neighbouring cores share are left out. It stores one factor F_k = (Q_k ⊗ I) C_k⁻ᵀ per core (C_k the
Cholesky factor of the block's precision times σ²), so the variance is ``σ² Σ_k ‖F_kᵀ a_k(x)‖²``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch

from tnbayes.inference.spd import solve_spd

__all__ = ["RowChunks", "TTALS", "TTLaplace", "tt_centre_design"]

#: a callable that yields the rows afresh on every call: ``(phi (K, n, M), y (n,))`` per chunk, φ unwhitened
RowChunks = Callable[[], Iterable[tuple[torch.Tensor, torch.Tensor]]]


def _left_interface(psi: torch.Tensor, cores: Sequence[torch.Tensor], stop: int) -> torch.Tensor:
    """ℓ (n, r_stop): ψ contracted with cores 0 … stop−1."""
    left = torch.ones(psi.shape[1], 1, dtype=psi.dtype, device=psi.device)
    for k in range(stop):
        left = torch.einsum("na,nm,amb->nb", left, psi[k], cores[k])
    return left


def _right_interface(psi: torch.Tensor, cores: Sequence[torch.Tensor], start: int) -> torch.Tensor:
    """ρ (n, r_{start−1}): ψ contracted with cores start … K−1."""
    right = torch.ones(psi.shape[1], 1, dtype=psi.dtype, device=psi.device)
    for k in range(len(cores) - 1, start - 1, -1):
        right = torch.einsum("amb,nm,nb->na", cores[k], psi[k], right)
    return right


def tt_centre_design(psi: torch.Tensor, left_cores: Sequence[torch.Tensor], right_cores: Sequence[torch.Tensor],
                     centre: int) -> torch.Tensor:
    """Design rows a_k(x) = ℓ_k(x) ⊗ ψ_k(x) ⊗ ρ_k(x) of the centre core k.

    Parameters
    ----------
    psi : torch.Tensor of shape (K, n, M)
        Whitened per-mode features.
    left_cores, right_cores : sequences of K tensors of shape (r_{k−1}, M, r_k)
        The cores ℓ_k is built from (those left of ``centre``) and ρ_k from (those right of it).
    centre : int
        k.

    Returns
    -------
    torch.Tensor of shape (n, r_{k−1} · M · r_k)
        Row-major in (left rank, mode, right rank), the order of ``core.reshape(-1)``.
    """
    left = _left_interface(psi, left_cores, centre)
    right = _right_interface(psi, right_cores, centre + 1)
    return torch.einsum("na,nm,nb->namb", left, psi[centre], right).reshape(psi.shape[1], -1)


def _move_right(cores: list[torch.Tensor], k: int) -> None:
    """Make core k left-orthogonal (QR), its R factor going into core k+1."""
    r0, m, r1 = cores[k].shape
    q, r = torch.linalg.qr(cores[k].reshape(r0 * m, r1))
    cores[k] = q.reshape(r0, m, -1)
    cores[k + 1] = torch.einsum("ab,bmc->amc", r, cores[k + 1])


def _move_left(cores: list[torch.Tensor], k: int) -> None:
    """Make core k right-orthogonal (QR of its transpose), its factor going into core k−1."""
    r0, m, r1 = cores[k].shape
    q, r = torch.linalg.qr(cores[k].reshape(r0, m * r1).T)
    cores[k] = q.T.reshape(-1, m, r1)
    cores[k - 1] = torch.einsum("amb,cb->amc", cores[k - 1], r)


@dataclass
class TTLaplace:
    """The smoothed TT and its Laplace variance factors (see the module docstring).

    Attributes
    ----------
    left_cores : list of K tensors of shape (r_{k−1}, M, r_k)
        Whitened mean, cores 0 … K−2 left-orthogonal.
    right_cores : list of K tensors of shape (r_{k−1}, M, r_k)
        The same whitened mean, cores 1 … K−1 right-orthogonal (core 0 carries the norm).
    factors : list of K tensors of shape (r_{k−1} M r_k, d_k)
        F_k, with d_k the dimension of core k's tangent block.
    """

    left_cores: list[torch.Tensor]
    right_cores: list[torch.Tensor]
    factors: list[torch.Tensor] = field(default_factory=list)

    def variance(self, psi: torch.Tensor, noise_variance: float) -> torch.Tensor:
        """Latent variances ``σ² Σ_k ‖F_kᵀ a_k(x)‖²`` (n,) of whitened features ψ (K, n, M)."""
        total = torch.zeros(psi.shape[1], dtype=psi.dtype, device=psi.device)
        for k, factor in enumerate(self.factors):
            total = total + (tt_centre_design(psi, self.left_cores, self.right_cores, k) @ factor).square().sum(1)
        return float(noise_variance) * total

    def covariance(self, psi: torch.Tensor, noise_variance: float) -> torch.Tensor:
        """Latent covariance (n, n) of whitened features ψ (K, n, M): ``σ² Σ_k (A_k F_k)(A_k F_k)ᵀ``."""
        total = torch.zeros(psi.shape[1], psi.shape[1], dtype=psi.dtype, device=psi.device)
        for k, factor in enumerate(self.factors):
            projected = tt_centre_design(psi, self.left_cores, self.right_cores, k) @ factor
            total = total + projected @ projected.T
        return float(noise_variance) * total


class TTALS:
    """ALS sweeps for the MAP of a fixed-rank TT in whitened weights, and its Laplace variance.

    Parameters
    ----------
    cores : sequence of K tensors of shape (r_{k−1}, M, r_k)
        The starting TT, in whitened weights u (e.g. a Kalman filter's mean with each core divided by l_k).
    prior_root : torch.Tensor of shape (K, M)
        l_k, the diagonals of L₀ (ψ_k = l_k ⊙ φ_k).
    noise_variance : float
        σ².
    rows : RowChunks
        Yields ``(phi (K, n, M), y (n,))`` chunks, targets minus any mean constant, afresh on every call.

    Attributes
    ----------
    cores : list of torch.Tensor
        The current TT (whitened).
    objective_history : list of float
        J after every centre update.
    sweeps : int
        Sweeps run (one sweep: every core solved left to right, then right to left).
    converged : bool
        Whether ``tol`` ended the sweeps.
    """

    def __init__(self, cores: Sequence[torch.Tensor], prior_root: torch.Tensor, noise_variance: float,
                 rows: RowChunks) -> None:
        if not float(noise_variance) > 0:
            raise ValueError(f"noise_variance must be > 0; got {noise_variance!r}.")
        self.cores = [core.clone() for core in cores]
        self.prior_root = prior_root
        self.noise_variance = float(noise_variance)
        self.rows = rows
        self.objective_history: list[float] = []
        self.sweeps = 0
        self.converged = False

    def _whitened(self, phi: torch.Tensor) -> torch.Tensor:
        return phi.to(self.prior_root.dtype) * self.prior_root[:, None, :].to(phi.device)

    def _system(self, k: int, left_cores: Sequence[torch.Tensor], right_cores: Sequence[torch.Tensor],
                complement: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, float]:
        """AᵀA (s, s), Aᵀy (s,) and yᵀy of centre k, the design projected onto ``complement`` ⊗ I when given."""
        gram = rhs = None
        targets_squared = 0.0
        for phi, y in self.rows():
            design = tt_centre_design(self._whitened(phi), left_cores, right_cores, k)
            if complement is not None:
                r1 = self.cores[k].shape[2]
                design = torch.einsum("nib,ij->njb", design.reshape(design.shape[0], -1, r1),
                                      complement).reshape(design.shape[0], -1)
            y = y.to(design.dtype)
            gram = design.T @ design if gram is None else gram + design.T @ design
            rhs = design.T @ y if rhs is None else rhs + design.T @ y
            targets_squared += float(y @ y)
        if gram is None:
            raise ValueError("ALS smoothing got no rows.")
        return gram, rhs, targets_squared

    def _update(self, k: int) -> None:
        """Solve the centre core k exactly (every other core orthogonal around it) and record J."""
        gram, rhs, targets_squared = self._system(k, self.cores, self.cores)
        eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
        solution, _, _ = solve_spd(gram + self.noise_variance * eye, rhs)
        fit = float(targets_squared - 2 * rhs @ solution + solution @ gram @ solution)
        self.objective_history.append(fit + self.noise_variance * float(solution @ solution))
        self.cores[k] = solution.reshape(self.cores[k].shape)

    def run(self, max_sweeps: int, tol: float, *, deadline: float | None = None, min_sweeps: int = 1) -> "TTALS":
        """Sweep until J changes by less than ``tol`` (relative) in a sweep, ``max_sweeps`` sweeps, or, after
        ``min_sweeps``, the next sweep would end after ``deadline`` (a :func:`time.perf_counter` value).

        Returns
        -------
        TTALS
            ``self``.
        """
        K = len(self.cores)
        for k in range(K - 1, 0, -1):  # right-orthogonal: the centre is core 0
            _move_left(self.cores, k)
        before = None
        while self.sweeps < int(max_sweeps):
            started = time.perf_counter()
            for k in range(K):
                if k > 0 or self.sweeps == 0:  # core 0 ended the last sweep
                    self._update(k)
                if k < K - 1:
                    _move_right(self.cores, k)
            for k in range(K - 1, -1, -1):
                if k < K - 1:
                    self._update(k)
                if k > 0:
                    _move_left(self.cores, k)
            self.sweeps += 1
            after = self.objective_history[-1]
            if before is not None and abs(before - after) <= float(tol) * abs(after):
                self.converged = True
                break
            before = after
            seconds = time.perf_counter() - started
            if deadline is not None and self.sweeps >= int(min_sweeps) and time.perf_counter() + seconds > deadline:
                break
        return self

    def laplace(self) -> TTLaplace:
        """The Laplace variance factors of the current TT (one pass of normal equations per core)."""
        K = len(self.cores)
        left = [core.clone() for core in self.cores]
        for k in range(K - 1):
            _move_right(left, k)
        moving = [core.clone() for core in left]  # the centre travels K−1 → 0; cores right of it right-orthogonal
        factors: list[torch.Tensor] = [torch.empty(0)] * K
        for k in range(K - 1, -1, -1):
            r0, m, r1 = left[k].shape
            complement = None
            if k < K - 1:
                complement = torch.linalg.qr(left[k].reshape(r0 * m, r1), mode="complete").Q[:, r1:].contiguous()
            if complement is not None and complement.shape[1] == 0:  # U_k square: the gauge leaves no direction
                factors[k] = left[k].new_zeros(r0 * m * r1, 0)
            else:
                factors[k] = self._factor(k, left, moving, complement)
            if k > 0:
                _move_left(moving, k)
        return TTLaplace(left, moving, factors)

    def _factor(self, k: int, left: Sequence[torch.Tensor], right: Sequence[torch.Tensor],
                complement: torch.Tensor | None) -> torch.Tensor:
        """F_k = (Q_k ⊗ I) C_k⁻ᵀ of centre k (Q_k = ``complement``; None: the identity)."""
        gram, _, _ = self._system(k, left, right, complement)
        eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
        _, cholesky, _ = solve_spd(gram + self.noise_variance * eye, torch.zeros_like(gram[:, 0]))
        inverse_transpose = torch.linalg.solve_triangular(cholesky, eye, upper=False).T  # C⁻ᵀ
        if complement is None:
            return inverse_transpose
        # (Q ⊗ I) C⁻ᵀ, rows in the (left rank · mode, right rank) order of the design
        r1 = self.cores[k].shape[2]
        blocks = inverse_transpose.reshape(complement.shape[1], r1, -1)
        return torch.einsum("ij,jbs->ibs", complement, blocks).reshape(complement.shape[0] * r1, -1)
