"""Laplace-type predictive variances for CPD weights fitted by ALS.

Given every core but d, the CPD model is linear-Gaussian in core d: with S_d = A_dᴴA_d + λ I⊗H_d (the matrix
ALS factorises), the exact conditional posterior is ``vec(W_d) ~ N(MAP, σ² S_d⁻¹)`` and the latent
predictive variance at x is ``σ² a_d(x)ᴴ S_d⁻¹ a_d(x)``. That is exact for a full-rank CPD (the model is
then a reparametrised dense Gaussian model) and an approximation that ignores the uncertainty of the other
cores otherwise. Summing the conditional variances of several cores is a block-diagonal
(Gauss–Newton) Laplace approximation: it adds the uncertainty of every core, but counts twice the
directions two cores share (e.g. moving scale from one core to another).

The design rows a_d(x) are CPD contractions (:mod:`tnbayes.tensors.cpd_contractions`); this module only adds the
triangular solves against the Cholesky factors ALS leaves behind.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tnbayes.basis.tensor_product import TensorProductFeatures
from tnbayes.tensors.cpd_contractions import PartialProducts, design_matrix, mode_projections

__all__ = ["conditional_core_variance", "summed_core_variances"]


def conditional_core_variance(features: TensorProductFeatures, factors: Sequence[torch.Tensor], mode: int,
                              cholesky: torch.Tensor, X: torch.Tensor, *,
                              component_weights: torch.Tensor | None = None,
                              chunk_size: int = 4096) -> torch.Tensor:
    """``a_d(x)ᴴ S_d⁻¹ a_d(x)`` for every row of X (multiply by σ² for the latent variance).

    Parameters
    ----------
    mode : int
        The core d whose conditional posterior is used (the other cores define a_d).
    cholesky : torch.Tensor of shape (M_d R, M_d R)
        Lower Cholesky factor of S_d.
    features, factors, X, component_weights, chunk_size
        As in :func:`summed_core_variances`.

    Returns
    -------
    torch.Tensor of shape (n,)
        Real, non-negative. For complex features the objective ‖y − f‖² + λ‖W‖² read as exp(−J/2σ²) gives a
        circular complex posterior with covariance 2σ²S⁻¹, so ``σ² aᴴS⁻¹a`` is the variance of the real part.
    """
    return summed_core_variances(features, factors, [mode], [cholesky], X, component_weights=component_weights,
                                 chunk_size=chunk_size)


def summed_core_variances(features: TensorProductFeatures, factors: Sequence[torch.Tensor], modes: Sequence[int],
                          choleskys: Sequence[torch.Tensor], X: torch.Tensor, *,
                          component_weights: torch.Tensor | None = None, chunk_size: int = 2048) -> torch.Tensor:
    """``Σ_d a_d(x)ᴴ S_d⁻¹ a_d(x)`` over several cores, the projections computed once per chunk.

    The design rows a_d(x) of every core come from one set of per-mode projections and their prefix and suffix
    products (O(K) products per chunk instead of O(K²), no division).

    Parameters
    ----------
    features : TensorProductFeatures
    factors : sequence of K tensors of shape (M_k, R)
        The fitted cores.
    modes : sequence of int
        The cores d whose conditional posteriors are summed.
    choleskys : sequence of torch.Tensor of shape (M_d R, M_d R)
        Lower Cholesky factor of S_d for each entry of ``modes``.
    X : torch.Tensor of shape (n, D)
    component_weights : torch.Tensor of shape (P,), optional
        Mixture coefficients c_p (default ones).
    chunk_size : int
        Rows per chunk.

    Returns
    -------
    torch.Tensor of shape (n,)
        Real, non-negative.
    """
    if len(modes) != len(choleskys):
        raise ValueError(f"got {len(modes)} modes but {len(choleskys)} Cholesky factors.")
    dtype = choleskys[0].dtype if len(choleskys) else factors[0].dtype
    out = []
    for start in range(0, X.shape[0], int(chunk_size)):
        chunk = X[start:start + int(chunk_size)]
        projections = mode_projections(features, factors, chunk, dtype=dtype)  # (K, P, n, R)
        partial = PartialProducts(projections.shape[0])
        weights = (torch.ones(projections.shape[1], dtype=dtype, device=X.device) if component_weights is None
                   else component_weights.to(dtype))
        total = torch.zeros(chunk.shape[0], dtype=X.dtype if not X.is_complex() else X.real.dtype, device=X.device)
        for mode, cholesky in zip(modes, choleskys):
            design = design_matrix(features, factors, chunk, mode, weights, dtype=dtype,
                                   others=partial.except_mode(projections, mode))  # (n, M_d R)
            whitened = torch.linalg.solve_triangular(cholesky, design.mH, upper=False)  # (M R, n)
            total = total + whitened.abs().square().sum(0).to(total.dtype)
        out.append(total)
    return torch.cat(out)
