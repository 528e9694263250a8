"""The batch square-root Kalman filter over the weights of a tensor-product basis, in TT form (TTKalmanGP's engine;
the *inference* axis).

Model: ``y = φ(x)ᵀ v + ε`` with ``φ(x) = φ_1(x_1) ⊗ … ⊗ φ_D(x_D)`` (M functions per mode), ``v ~ N(0, P₀)``,
``P₀ = L₀ L₀ᵀ``, ``L₀ = ⊗_d diag(p_d)`` (a diagonal prior: any basis whose weights have independent Gaussian priors)
and ``ε ~ N(0, σ²)``. The posterior is computed over mini-batches of rows, in square-root form: P = L Lᵀ with L a
TT-matrix, the mean m a TT-vector (prior: 0). For a batch with rows φ_i (exact rank-1 TT-vectors) let a_i = Lᵀφ_i,
G = AᵀA = U diag(g) Uᵀ and S = G + σ²I. Then::

    m ← m + Σ_i (L a_i) [S⁻¹ (y − H m)]_i
    L ← L − Σ_i (L a_i) (Σ_j W_ij a_j)ᵀ,   W = U diag(1 / (√(g + σ²) (√(g + σ²) + σ))) Uᵀ

which is exact: L(I − A W Aᵀ) squared is L(I − A S⁻¹ Aᵀ)Lᵀ, the Kalman covariance (with Q = A U g^{-½}
orthonormal, I − A S⁻¹Aᵀ = (I − Q diag(γ) Qᵀ)² for γ = 1 − σ/√(g + σ²), and γ/g is the stable form above).
The root is held as L = L₀ − C with L₀ the exact rank-1 prior root and C a TT-matrix; after each batch the mean
and C are rounded (relative tolerance, optional maximum rank; with a maximum rank the sum C + Σ_i u_i c_iᵀ is
rounded by a randomized sketch without forming the outer products). The prior is never truncated, and any C keeps
P = L Lᵀ positive semi-definite.

The mean is rounded in the prior's coordinates ``z = L₀⁻¹ m`` (a mode-wise scaling, ranks unchanged; the norm of z
is the fitted function's norm in the RKHS of the basis's reduced-rank kernel, and these are the coordinates of the
ALS smoothing): the rounding error then falls on the weights in proportion to their prior standard deviations.
Rounded in m's own coordinates, an error of ``tol·‖m‖`` (or what a rank cap discards) spreads over every weight
alike, and the weights of small prior variance — the high frequencies, whose basis functions are as large as the
others' — cannot take it back: the filter's gain there is as small as their prior variance, so later rows correct
almost none of it, and over many rows the errors add up until the mean no longer fits the data. (The update vectors
``u_i = L a_i`` that the mean adds are rounded in the weights' own coordinates, as before.)

:func:`kalman_batch_update` is one such update; :class:`TTBatchKalmanFilter` holds the state (m, L₀'s diagonals,
C) across batches, with forgetting and the predictive mean and variance of rank-one rows.
"""

from __future__ import annotations

import math

import torch

from tnbayes.tensors import TTMatrix, TTVector, block_sum, randomized_round_sum, round_cores, tt_gram

__all__ = ["TTBatchKalmanFilter", "kalman_batch_update", "prior_root_matrix", "root_factors"]


def prior_root_matrix(prior_root: torch.Tensor) -> TTMatrix:
    """The rank-1 TT-matrix ``L₀ = ⊗_d diag(prior_root[d])``.

    Parameters
    ----------
    prior_root : torch.Tensor of shape (D, M)
        The diagonals of the factors.

    Returns
    -------
    TTMatrix with modes (M, …, M) × (M, …, M), ranks 1
    """
    return TTMatrix([torch.diag(w).reshape(1, w.numel(), w.numel(), 1) for w in prior_root])


def _weighted_sum(vectors: list[TTVector], weights: torch.Tensor, tol: float, max_rank: int | None,
                  generator: torch.Generator | None = None) -> TTVector:
    """Σ_i w_i x_i, rounded (in one randomized rounding when ``max_rank`` is given)."""
    if max_rank is not None and len(vectors) > 1:
        return randomized_round_sum(vectors, weights.tolist(), max_rank=int(max_rank), tol=tol, generator=generator)
    total = vectors[0] * weights[0]
    for x, w in zip(vectors[1:], weights[1:]):
        total = (total + x * w).round(tol, max_rank)
    return total


def _scaled(x: TTVector, prior_root: torch.Tensor) -> TTVector:
    """``L₀ x`` (a mode-wise scaling: ranks unchanged)."""
    return TTVector([core * w.reshape(1, -1, 1) for core, w in zip(x.cores, prior_root)])


def _whitening_scale(prior_root: torch.Tensor) -> torch.Tensor:
    """``|prior_root|`` (D, M) floored at eps times each factor's largest entry: the diagonals of the map
    ``z ↦ L₀ z`` in which the mean is rounded, up to signs (a weight whose prior standard deviation is below that
    floor is rounded as if it had the floor's, never divided by zero)."""
    magnitude = prior_root.abs()
    floor = magnitude.amax(dim=1, keepdim=True) * torch.finfo(prior_root.dtype).eps
    return magnitude.clamp_min(floor).clamp_min(torch.finfo(prior_root.dtype).tiny)


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
        stacked = block_sum(stacked, x.cores)  # block-diagonal ranks; last cores stacked on the left rank
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
    rounded = round_cores(cores, tol, max_rank)
    final = rounded[-1].reshape(rounded[-1].shape[0], M, B)
    return [TTVector(rounded[:-1] + [final[:, :, i:i + 1]]) for i in range(B)]


def root_factors(gram: torch.Tensor, noise_variance: float) -> torch.Tensor:
    """``W = U diag(1 / (√(g + σ²) (√(g + σ²) + σ))) Uᵀ`` for ``gram = AᵀA = U diag(g) Uᵀ`` (B × B): the block
    square-root update ``L ← L − (L A) W Aᵀ`` then gives ``L Lᵀ = P − (L A) S⁻¹ (L A)ᵀ``, ``S = AᵀA + σ² I`` (see the
    module docstring).

    Parameters
    ----------
    gram : torch.Tensor of shape (B, B)
    noise_variance : float
        σ² > 0.

    Returns
    -------
    torch.Tensor of shape (B, B)
    """
    g, U = torch.linalg.eigh(gram)
    root_g = torch.sqrt(g.clamp_min(0.0) + noise_variance)
    return (U / (root_g * (root_g + math.sqrt(noise_variance)))) @ U.T


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
        Relative rounding tolerance of the updated mean (of its prior coordinates ``L₀⁻¹m``, see the module
        docstring) and of the correction (0: exact up to round-off).
    max_rank : int, optional
        Cap of the ranks. When given, the update ``C + Σ_i u_i c_iᵀ`` is rounded by
        :func:`~tnbayes.tensors.randomized_round_sum` (the outer products, of rank r_u·r_c each, are never
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
            base = base - correction.transpose_matvec_rank_one(phi[:, i])
        projected.append(base.round(tol))
    gram = tt_gram(projected)
    residual = targets - mean.dot_rank_one(phi)
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
    # the mean is rounded in the prior's coordinates z = L₀⁻¹m (see the module docstring)
    scale = _whitening_scale(prior_root)
    inverse = 1.0 / scale
    step = _weighted_sum([_scaled(u, inverse) for u in updates], gains, tol, max_rank, generator)
    mean = _scaled((_scaled(mean, inverse) + step).round(tol, max_rank), scale)
    W = root_factors(gram, noise_variance)
    combined = _combinations(projected, W, tol, max_rank)
    # L_new = L − Σ_i u_i c_iᵀ  ⇔  C_new = C + Σ_i u_i c_iᵀ
    if max_rank is not None:
        terms = ([correction] if correction is not None else []) + list(zip(updates, combined))
        return mean, randomized_round_sum(terms, max_rank=int(max_rank), tol=tol, generator=generator)
    total = correction
    for u, c in zip(updates, combined):
        total = u.outer(c) if total is None else (total + u.outer(c)).round(tol)
    return mean, total


class TTBatchKalmanFilter:
    """The state of the batch filter across batches: the mean m, the prior root's diagonals and the correction C.

    Parameters
    ----------
    prior_root : torch.Tensor of shape (D, M)
        Diagonals of the factors of L₀ (the prior covariance is ``P₀ = L₀ L₀ᵀ``).
    mean : TTVector with modes (M, …, M), optional
        The mean to start from (default: the prior's, zero).
    correction : TTMatrix, optional
        C to start from (default None: the prior, L = L₀).
    tol : float
        Relative rounding tolerance after every update (see :func:`kalman_batch_update`).
    max_rank : int, optional
        Rank cap of the mean and of C (randomized rounding when given).
    generator : torch.Generator, optional
        Source of the randomized rounding's sketches.

    Attributes
    ----------
    mean : TTVector
    prior_root : torch.Tensor of shape (D, M)
        Scaled by any forgetting.
    correction : TTMatrix or None
    """

    def __init__(self, prior_root: torch.Tensor, *, mean: TTVector | None = None, correction: TTMatrix | None = None,
                 tol: float = 0.0, max_rank: int | None = None, generator: torch.Generator | None = None) -> None:
        self.prior_root = prior_root
        self.mean = mean if mean is not None else TTVector(
            [torch.zeros(1, prior_root.shape[1], 1, dtype=prior_root.dtype, device=prior_root.device)
             for _ in range(prior_root.shape[0])])
        self.correction = correction
        self.tol = float(tol)
        self.max_rank = max_rank
        self.generator = generator

    @property
    def covariance_sqrt(self) -> TTMatrix:
        """``L = L₀ − C`` (``L₀`` before the first update), with ``P = L Lᵀ``."""
        root = prior_root_matrix(self.prior_root)
        return root - self.correction if self.correction is not None else root

    def covariance_trace(self) -> float:
        """``tr(P) = ‖L‖_F²``."""
        return float(self.covariance_sqrt.norm()) ** 2

    def prior_covariance_trace(self) -> float:
        """``tr(P₀) = Π_d Σ_m prior_root[d, m]²``."""
        return float((self.prior_root ** 2).sum(dim=1).prod())

    def forget(self, forgetting_factor: float) -> None:
        """Divide the covariance by λ = ``forgetting_factor`` ∈ (0, 1] before a batch: ``L ← (L₀ − C) / √λ``."""
        if forgetting_factor >= 1.0:
            return
        factor = 1.0 / math.sqrt(float(forgetting_factor))
        self.prior_root = self.prior_root * factor ** (1.0 / self.prior_root.shape[0])
        self.correction = self.correction * factor if self.correction is not None else None

    def update(self, phi: torch.Tensor, targets: torch.Tensor, noise_variance: float) -> None:
        """Condition on a batch (see :func:`kalman_batch_update`).

        Parameters
        ----------
        phi : torch.Tensor of shape (D, B, M)
            Per-mode features of the batch's rows.
        targets : torch.Tensor of shape (B,)
        noise_variance : float
            σ².
        """
        self.mean, self.correction = kalman_batch_update(
            self.mean, self.prior_root, self.correction, phi, targets, noise_variance, tol=self.tol,
            max_rank=self.max_rank, generator=self.generator)

    def predict_mean(self, phi: torch.Tensor) -> torch.Tensor:
        """``φ_iᵀ m`` for rank-one rows with factors phi (D, n, M) → (n,)."""
        return self.mean.dot_rank_one(phi)

    def predict_variance(self, phi: torch.Tensor) -> torch.Tensor:
        """``φ_iᵀ P φ_i = ‖Lᵀφ_i‖²`` (≥ 0) for rank-one rows with factors phi (D, n, M) → (n,)."""
        return self.covariance_sqrt.transpose_matvec_norms_squared_rank_one(phi)
