"""Laplace-type predictive variances for CPD weights fitted by ALS.

Given every core but d, the CPD model is linear-Gaussian in core d: with S_d = A_dᴴA_d + λ I⊗H_d (the matrix
ALS factorises), the exact conditional posterior is ``vec(W_d) ~ N(MAP, σ² S_d⁻¹)`` and the latent
predictive variance at x is ``σ² a_d(x)ᴴ S_d⁻¹ a_d(x)``. That is exact for a full-rank CPD (the model is
then a reparametrised dense Gaussian model) and an approximation that ignores the uncertainty of the other
cores otherwise. Summing the conditional variances of several cores is a block-diagonal
(Gauss–Newton) Laplace approximation: it adds the uncertainty of every core, but counts twice the
directions two cores share (e.g. moving scale from one core to another).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tnbayes.inference.als import design_matrix
from tnbayes.inference.features import TensorProductFeatures

__all__ = ["conditional_core_variance"]


def conditional_core_variance(features: TensorProductFeatures, factors: Sequence[torch.Tensor], mode: int,
                              cholesky: torch.Tensor, X: torch.Tensor, *,
                              component_weights: torch.Tensor | None = None,
                              chunk_size: int = 4096) -> torch.Tensor:
    """``a_d(x)ᴴ S_d⁻¹ a_d(x)`` for every row of X (multiply by σ² for the latent variance).

    Parameters
    ----------
    features : TensorProductFeatures
    factors : sequence of K tensors of shape (M_k, R)
        The fitted cores (the others define a_d).
    mode : int
        The core d whose conditional posterior is used.
    cholesky : torch.Tensor of shape (M_d R, M_d R)
        Lower Cholesky factor of S_d.
    X : torch.Tensor of shape (n, D)
    component_weights : torch.Tensor of shape (P,), optional
    chunk_size : int

    Returns
    -------
    torch.Tensor of shape (n,)
        Real, non-negative. For complex features the objective ‖y − f‖² + λ‖W‖² read as exp(−J/2σ²) gives a
        circular complex posterior with covariance 2σ²S⁻¹, so ``σ² aᴴS⁻¹a`` is the variance of the real part.
    """
    out = []
    for start in range(0, X.shape[0], int(chunk_size)):
        design = design_matrix(features, factors, X[start:start + int(chunk_size)], mode, component_weights,
                               dtype=cholesky.dtype)
        whitened = torch.linalg.solve_triangular(cholesky, design.mH, upper=False)  # (M R, n)
        out.append(whitened.abs().square().sum(0))
    return torch.cat(out)
