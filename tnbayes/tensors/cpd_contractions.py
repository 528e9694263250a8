"""Contractions of CPD weights with a tensor-product feature map (the *format* axis, CPD).

For a K-mode feature map (:class:`~tnbayes.basis.TensorProductFeatures`, P components) and CPD factors
``W_k`` of shape (M_k, R), everything the ALS engine, the Laplace variances and the models' predictions need is
built from the per-mode *projections* ``φ^p_k(X) W_k`` (shape (K, P, n, R)) and their Hadamard products::

    f(x)  = Σ_p c_p Σ_r Π_k (φ^p_k(x) W_k)[r]                            (cpd_predict)
    a_d(x) = Σ_p c_p φ^p_d(x) ⊗ ⊙_{k≠d} φ^p_k(x) W_k                      (design_matrix: the row of core d)

``⊙_{k≠d}`` is taken without division (entries near zero make dividing a full product out unstable), either
directly (:func:`product_except`, O(K) products per core) or from prefix and suffix products
(:class:`PartialProducts`, O(K) products for *all* cores of a sweep).

The feature map is only called through ``mode_features(X, k)`` (shape (P, n, M_k)); nothing here imports the
basis or inference packages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # the basis package imports tnbayes.tensors: a runtime import would be circular
    from tnbayes.basis.tensor_product import TensorProductFeatures

__all__ = ["PartialProducts", "cpd_predict", "design_matrix", "mode_projections", "product_except", "project_onto"]


def mode_projections(features: TensorProductFeatures, factors: Sequence[torch.Tensor], X: torch.Tensor, *,
                     dtype: torch.dtype | None = None) -> torch.Tensor:
    """Per-mode projections ``φ^p_k(X) W_k``.

    Parameters
    ----------
    features : TensorProductFeatures
    factors : sequence of K tensors of shape (M_k, R)
    X : torch.Tensor of shape (n, D)
    dtype : torch.dtype, optional
        Computation dtype (default: the factors' dtype).

    Returns
    -------
    torch.Tensor of shape (K, P, n, R)
    """
    dtype = factors[0].dtype if dtype is None else dtype
    return torch.stack([features.mode_features(X, k).to(dtype) @ factors[k] for k in range(features.num_modes)])


#: up to this many basis functions per mode, :func:`project_onto` sums M broadcast products instead of calling a
#: matrix product (whose inner dimension of 2 for quantized features wastes most of a GEMM kernel)
_BROADCAST_MAX_M = 4


def project_onto(features: torch.Tensor, factor: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    """``features @ factor`` written into ``out``: the projection ``φ_k(X) W_k`` of one mode.

    Parameters
    ----------
    features : torch.Tensor of shape (P, n, M)
    factor : torch.Tensor of shape (M, R)
    out : torch.Tensor of shape (P, n, R)
        Written in place (may be a view, e.g. one mode of a projection cache).

    Returns
    -------
    torch.Tensor
        ``out``.
    """
    M = features.shape[-1]
    if M > _BROADCAST_MAX_M:
        out.copy_(features @ factor)
        return out
    torch.mul(features[..., 0:1], factor[0], out=out)
    for m in range(1, M):
        out.addcmul_(features[..., m:m + 1], factor[m])
    return out


def product_except(projections: torch.Tensor, mode: int) -> torch.Tensor:
    """``⊙_{k≠mode} projections[k]`` (no division).

    Parameters
    ----------
    projections : torch.Tensor of shape (K, P, n, R)
    mode : int

    Returns
    -------
    torch.Tensor of shape (P, n, R)
    """
    result = torch.ones_like(projections[0])
    for k in range(projections.shape[0]):
        if k != mode:
            result = result * projections[k]
    return result


class PartialProducts:
    """Prefix products ``⊙_{k<j}`` and suffix products ``⊙_{k>j}`` of per-mode projections, built lazily.

    ``except_mode(projections, d)`` returns ``⊙_{k≠d} projections[k]`` as prefix[d] ⊙ suffix[d] and keeps every
    prefix and suffix it builds, so asking for every core of a sweep 0 … K−1 … 1 costs O(K) Hadamard products
    instead of O(K²). The cache belongs to one projections tensor: after changing the projections of some modes
    (in place or by passing a new tensor) call :meth:`invalidate` with those modes.

    Parameters
    ----------
    num_modes : int
        K.
    """

    def __init__(self, num_modes: int) -> None:
        self.num_modes = int(num_modes)
        # prefix[j] = ⊙_{k<j} and suffix[j] = ⊙_{k>j} (None: to be rebuilt); index 0 of prefix and K−1 of suffix
        # are the empty product and never stored
        self._prefix: list[torch.Tensor | None] = [None] * self.num_modes
        self._suffix: list[torch.Tensor | None] = [None] * self.num_modes

    def except_mode(self, projections: torch.Tensor, mode: int) -> torch.Tensor:
        """``⊙_{k≠mode} projections[k]``, from the kept prefix and suffix products.

        Parameters
        ----------
        projections : torch.Tensor of shape (K, P, n, R)
            The projections the cache was built from (or is to be built from).
        mode : int

        Returns
        -------
        torch.Tensor of shape (P, n, R)
            A kept tensor (mode 0 or K−1) or a new one; do not modify it in place.
        """
        K = self.num_modes
        if K == 1:
            return torch.ones_like(projections[0])
        prefix, suffix = self._prefix, self._suffix
        start = mode
        while start > 0 and prefix[start] is None:
            start -= 1
        for j in range(start + 1, mode + 1):  # prefix[j] = prefix[j−1] ⊙ projection[j−1]
            prefix[j] = projections[0] if j == 1 else prefix[j - 1] * projections[j - 1]
        end = mode
        while end < K - 1 and suffix[end] is None:
            end += 1
        for j in range(end - 1, mode - 1, -1):  # suffix[j] = projection[j+1] ⊙ suffix[j+1]
            suffix[j] = projections[K - 1] if j == K - 2 else projections[j + 1] * suffix[j + 1]
        if mode == 0:
            return suffix[0]
        if mode == K - 1:
            return prefix[K - 1]
        return prefix[mode] * suffix[mode]

    def invalidate(self, *modes: int) -> None:
        """Forget the prefix and suffix products that depend on the projections of ``modes``."""
        for j in range(min(modes) + 1, self.num_modes):
            self._prefix[j] = None
        for j in range(0, max(modes)):
            self._suffix[j] = None


def design_matrix(features: TensorProductFeatures, factors: Sequence[torch.Tensor], X: torch.Tensor, mode: int,
                  component_weights: torch.Tensor | None = None, *, projections: torch.Tensor | None = None,
                  others: torch.Tensor | None = None, dtype: torch.dtype | None = None,
                  phi: torch.Tensor | None = None) -> torch.Tensor:
    """Design matrix of core ``mode``: row n is ``Σ_p c_p φ^p_d(x_n) ⊗ ⊙_{k≠d} φ^p_k(x_n) W_k``.

    Parameters
    ----------
    features : TensorProductFeatures
    factors : sequence of K tensors of shape (M_k, R)
    X : torch.Tensor of shape (n, D)
    mode : int
    component_weights : torch.Tensor of shape (P,), optional
        Mixture coefficients (default ones).
    projections : torch.Tensor of shape (K, P, n, R), optional
        Precomputed :func:`mode_projections` of ``X``.
    others : torch.Tensor of shape (P, n, R), optional
        Precomputed ``⊙_{k≠mode}`` of the projections (e.g. from :class:`PartialProducts`).
    dtype : torch.dtype, optional
    phi : torch.Tensor of shape (P, n, M_d), optional
        Precomputed ``features.mode_features(X, mode)`` in ``dtype``.

    Returns
    -------
    torch.Tensor of shape (n, M_d R)
        Column index m·R + r (row-major ``vec`` of the core).
    """
    dtype = factors[0].dtype if dtype is None else dtype
    if others is None:
        if projections is None:
            projections = mode_projections(features, factors, X, dtype=dtype)
        others = product_except(projections, mode)  # (P, n, R)
    if phi is None:
        phi = features.mode_features(X, mode).to(dtype)  # (P, n, M)
    if component_weights is None:
        component_weights = torch.ones(phi.shape[0], dtype=dtype, device=phi.device)
    weighted = phi * component_weights.to(dtype).view(-1, 1, 1)
    if weighted.shape[0] == 1:
        design = weighted[0].unsqueeze(-1) * others[0].unsqueeze(-2)
    else:
        design = torch.einsum("pnm,pnr->nmr", weighted, others)
    return design.reshape(design.shape[0], -1)


def cpd_predict(features: TensorProductFeatures, factors: Sequence[torch.Tensor], X: torch.Tensor,
                component_weights: torch.Tensor | None = None, *, chunk_size: int = 65536) -> torch.Tensor:
    """``f(X) = Σ_p c_p ⟨W, Φ^p(X)⟩`` for CPD weights, in row chunks.

    Parameters
    ----------
    features : TensorProductFeatures
    factors : sequence of K tensors of shape (M_k, R)
    X : torch.Tensor of shape (n, D)
    component_weights : torch.Tensor of shape (P,), optional
        Mixture coefficients (default ones).
    chunk_size : int
        Rows per chunk.

    Returns
    -------
    torch.Tensor of shape (n,)
        Complex for complex features (models usually keep the real part).
    """
    out = []
    for start in range(0, X.shape[0], int(chunk_size)):
        per_component = mode_projections(features, factors, X[start:start + int(chunk_size)]).prod(0).sum(-1)  # (P, n)
        weights = (torch.ones(per_component.shape[0], dtype=per_component.dtype, device=per_component.device)
                   if component_weights is None else component_weights.to(per_component.dtype))
        out.append(weights @ per_component)
    return torch.cat(out)
