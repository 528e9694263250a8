"""GPyTorch kernel of variational Fourier features (Hensman, Durrande & Solin 2017)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..basis.combine import DEFAULT_MAX_PRODUCT_FEATURES
from ..basis.hilbert import per_dimension_tensor
from ..basis.vff import VFF_SUPPORTED_NU, VFFBasis
from .base import FeatureKernel

__all__ = ["VFFKernel"]


class VFFKernel(FeatureKernel):
    r"""Matérn-ν kernel approximated by variational Fourier features on ``[a, b]``, as a GPyTorch kernel.

    ``k(x, x') ≈ Q(x, x') = k_u(x)ᵀ K_uu⁻¹ k_u(x')`` per dimension, with ``2M + 1`` Fourier inducing
    features (cos for k = 0..M, sin for k = 1..M) and the closed-form diagonal-plus-low-rank ``K_uu``
    (see :mod:`tnbayes.basis.vff`); dimensions are combined as a product or ``(1/D)``-scaled sum.
    Unit variance — wrap in ``ScaleKernel`` for an output scale.

    ``Q`` converges to the Matérn kernel as M grows only away from the interval ends: the Fourier basis
    spans the periodic part of the Matérn RKHS, so within a few lengthscales of ``a`` or ``b`` the prior
    variance drops (to about ½ at the ends). Choose ``[a, b]`` wider than the data by several
    lengthscales (e.g. twice the data range).

    Parameters
    ----------
    nu : {0.5, 1.5, 2.5}
        Matérn smoothness.
    num_frequencies : int
        M; each dimension has ``2M + 1`` features.
    a, b : float or sequence of float (one per dimension)
        Interval ends in the kernel's input space. Inputs outside raise ``ValueError``.
    structure : {"product", "additive"}
    max_product_features : int
        Refuse ``structure="product"`` when ``(2M+1)^D`` exceeds this (default 20 000).
    **kwargs
        Passed to :class:`gpytorch.kernels.Kernel` (``ard_num_dims``, priors, constraints, ...).

    Examples
    --------
    >>> import gpytorch
    >>> k = gpytorch.kernels.ScaleKernel(VFFKernel(nu=1.5, num_frequencies=64, a=-2.0, b=2.0))
    """

    def __init__(
        self,
        nu: float = 2.5,
        num_frequencies: int = 32,
        a: float | Sequence[float] = -1.0,
        b: float | Sequence[float] = 1.0,
        structure: str = "product",
        max_product_features: int = DEFAULT_MAX_PRODUCT_FEATURES,
        **kwargs,
    ) -> None:
        if float(nu) not in VFF_SUPPORTED_NU:
            raise ValueError(f"VFFKernel supports nu in {VFF_SUPPORTED_NU}; got {nu!r}. Use HilbertKernel for other kernels.")
        if isinstance(num_frequencies, bool) or not isinstance(num_frequencies, (int, np.integer)) or num_frequencies < 0:
            raise ValueError(f"num_frequencies must be a non-negative integer; got {num_frequencies!r}.")
        super().__init__(structure=structure, max_product_features=max_product_features, **kwargs)
        self.nu = float(nu)
        self.num_frequencies = int(num_frequencies)
        a_t, b_t = per_dimension_tensor(a, "a"), per_dimension_tensor(b, "b")
        VFFBasis(0, a_t, b_t)  # validates a < b and matching lengths
        self.register_buffer("interval_lower", a_t)
        self.register_buffer("interval_upper", b_t)
        known = {n for n in (a_t.numel(), b_t.numel(), self.ard_num_dims or 1) if n > 1}
        if len(known) > 1:
            raise ValueError(f"a, b and ard_num_dims disagree on the number of input dimensions ({sorted(known)}).")
        if known:
            self._check_product_size(known.pop())

    def num_features_per_dim(self) -> int:
        return 2 * self.num_frequencies + 1

    def basis(self, num_dims: int | None = None) -> VFFBasis:
        """The :class:`~tnbayes.basis.VFFBasis` this kernel evaluates."""
        return VFFBasis(self.num_frequencies, self.interval_lower, self.interval_upper, num_dims=num_dims)

    def per_dimension_features(self, x: torch.Tensor) -> torch.Tensor:
        """VFF features ``Z`` with ``Z Zᵀ = Q`` per dimension → shape (..., D, N, 2M + 1) from ``x`` of shape
        (..., N, D)."""
        D = x.shape[-1]
        a = self._per_dimension_values(self.interval_lower, D, "a")
        b = self._per_dimension_values(self.interval_upper, D, "b")
        basis = VFFBasis(self.num_frequencies, a, b)
        return basis.features(x, self._lengthscale_per_dim(D).to(x), self.nu)

    def extra_repr(self) -> str:
        return (
            f"nu={self.nu}, num_frequencies={self.num_frequencies}, a={self.interval_lower.tolist()}, "
            f"b={self.interval_upper.tolist()}, structure={self.structure!r}"
        )
