"""The regularised normal equations of one CPD core and their solve (the *inference* axis, ALS and Laplace).

:class:`CoreSystem` holds what one ALS core update accumulates (AᴴA, Aᴴy, the penalty matrix) and, once solved,
the Cholesky factor that the Laplace variances (:mod:`tnbayes.inference.laplace`) reuse; :func:`solve_spd` is the
Cholesky solve with a growing diagonal jitter for numerically singular systems.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["CoreSystem", "solve_spd"]


@dataclass
class CoreSystem:
    """The regularised normal equations of one core, given all the others.

    Attributes
    ----------
    mode : int
        The core d.
    gram : torch.Tensor of shape (M_d R, M_d R)
        AᴴA.
    rhs : torch.Tensor of shape (M_d R,)
        Aᴴy.
    penalty : torch.Tensor of shape (M_d R, M_d R)
        I ⊗ H_d (or its diagonal), *without* λ.
    cholesky : torch.Tensor of shape (M_d R, M_d R), optional
        Lower Cholesky factor of AᴴA + λ·penalty (+ jitter, see ``jitter``), once solved.
    jitter : float
        Diagonal added to make the system factorisable (0 when it was positive definite).
    """

    mode: int
    gram: torch.Tensor
    rhs: torch.Tensor
    penalty: torch.Tensor
    cholesky: torch.Tensor | None = None
    jitter: float = 0.0


def solve_spd(matrix: torch.Tensor, rhs: torch.Tensor, *,
              eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Solve a Hermitian positive (semi-)definite system by Cholesky, with a safe fallback.

    Tries the plain Cholesky factorisation, then adds a growing diagonal jitter (10 … 10⁴ machine epsilons of
    the mean diagonal). If even that fails the matrix is not numerically PSD and ``ValueError`` is raised.

    Parameters
    ----------
    matrix : torch.Tensor of shape (n, n)
    rhs : torch.Tensor of shape (n,) or (n, k)
    eps : float, optional
        Machine epsilon of the precision the matrix was accumulated in (default: that of its dtype). A float32
        sum solved in float64 carries float32 rounding errors, which a float64-sized jitter cannot cover.

    Returns
    -------
    solution : torch.Tensor, same shape as ``rhs``
    cholesky : torch.Tensor of shape (n, n)
        Lower factor of ``matrix + jitter·I``.
    jitter : float
    """
    scale = float(matrix.diagonal().real.abs().mean()) or 1.0
    eye = torch.eye(matrix.shape[0], dtype=matrix.dtype, device=matrix.device)
    eps = torch.finfo(matrix.dtype).eps if eps is None else float(eps)
    for jitter in (0.0, 10 * eps, 1e2 * eps, 1e3 * eps, 1e4 * eps):
        factor, info = torch.linalg.cholesky_ex(matrix + (jitter * scale) * eye if jitter else matrix)
        if int(info) == 0:
            column = rhs.unsqueeze(-1) if rhs.ndim == 1 else rhs
            solution = torch.cholesky_solve(column, factor)
            return (solution.squeeze(-1) if rhs.ndim == 1 else solution), factor, jitter * scale
    raise ValueError(
        "The core's normal equations are not positive definite even with jitter (NaN/inf in the features or "
        "weights, or a zero penalty with too few data). Increase the penalty λ or lower the rank."
    )
