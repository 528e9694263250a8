"""GPyTorch kernel of the Hilbert-space GP approximation (Solin & Särkkä 2020)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ..basis.combine import DEFAULT_MAX_PRODUCT_FEATURES
from ..basis.hilbert import (
    HilbertBasis,
    check_in_box,
    laplace_eigenfunctions,
    laplace_sqrt_eigenvalues,
    per_dimension_tensor,
)
from ..basis.rules import check_hilbert_approximation
from ..basis.spectral import kernel_name, resolve_kernel, sqrt_spectral_density
from .base import FeatureKernel

__all__ = ["HilbertKernel"]


class HilbertKernel(FeatureKernel):
    r"""Reduced-rank Hilbert-space approximation of an SE or Matérn kernel, as a GPyTorch kernel.

    ``k(x, x') ≈ Σ_j S(√λ_j) φ_j(x) φ_j(x')`` per dimension, with Laplace eigenfunctions φ_j on the box
    ``[center - L, center + L]`` (Dirichlet boundary) and the spectral density S of the base kernel;
    dimensions are combined as a product or (scaled) sum. The kernel is unit-variance — wrap it in
    ``gpytorch.kernels.ScaleKernel`` for an output scale. The lengthscale is an ordinary GPyTorch
    hyper-parameter (``ard_num_dims``, priors, constraints) and is the lengthscale of the approximated
    kernel in the kernel's input space.

    Parameters
    ----------
    base : {"rbf", "matern"}
        Kernel to approximate (``"se"``, ``"matern12"``, ``"matern32"``, ``"matern52"`` also accepted).
    nu : float, optional
        Matérn smoothness (any ν > 0; default 2.5 for ``base="matern"``). Not allowed for ``"rbf"``.
    num_basis : int
        M, basis functions per input dimension.
    L : float or sequence of float (one per dimension), optional
        Box half-width around ``center``, in the kernel's input space. Give ``L`` **or** ``c``.
    c : float, optional
        Boundary factor: ``L = c · half_range``. If ``half_range`` is not given, it is set from the first
        inputs the kernel sees (normally the training inputs) as ``max |x_d - center_d|`` per dimension
        and then frozen (stored in the ``box_half_width`` buffer). Prefer an explicit ``L`` when later
        inputs may go beyond the training data (e.g. Bayesian optimisation on the unit cube:
        ``center=0.5, L=c*0.5``).
    center : float or sequence of float
        Box centre(s) (default 0, e.g. standardized inputs).
    half_range : float or sequence of float, optional
        Data half-range S used with ``c``.
    structure : {"product", "additive"}
        See :class:`~tnbayes.kernels.FeatureKernel`; additive means ``(1/D) Σ_d k_d``.
    max_product_features : int
        Refuse ``structure="product"`` when ``M^D`` exceeds this (default 20 000).
    **kwargs
        Passed to :class:`gpytorch.kernels.Kernel` (``ard_num_dims``, ``batch_shape``, ``active_dims``,
        ``lengthscale_prior``, ``lengthscale_constraint``, ...).

    Raises
    ------
    ValueError
        On forward, for inputs outside the box (message names the column, value, box and the fix).

    Examples
    --------
    >>> import gpytorch, torch
    >>> k = gpytorch.kernels.ScaleKernel(HilbertKernel(base="matern", nu=2.5, num_basis=64, L=2.0))
    >>> x = torch.linspace(-1, 1, 100, dtype=torch.float64)[:, None]
    >>> K = k.double()(x)          # a low-rank LinearOperator (64 feature columns)
    """

    def __init__(
        self,
        base: str = "rbf",
        nu: float | None = None,
        num_basis: int = 32,
        L: float | Sequence[float] | None = None,
        c: float | None = None,
        center: float | Sequence[float] = 0.0,
        half_range: float | Sequence[float] | None = None,
        structure: str = "product",
        max_product_features: int = DEFAULT_MAX_PRODUCT_FEATURES,
        **kwargs,
    ) -> None:
        if isinstance(base, str) and base.lower() == "matern" and nu is None:
            nu = 2.5  # GPyTorch's MaternKernel default
        family, nu_f = resolve_kernel(base, nu)
        if isinstance(num_basis, bool) or not isinstance(num_basis, (int, np.integer)) or num_basis < 1:
            raise ValueError(f"num_basis must be a positive integer; got {num_basis!r}.")
        if (L is None) == (c is None):
            raise ValueError(
                "Give exactly one of L (box half-width around center, in the kernel's input space) or c "
                "(boundary factor, L = c * half-range of the data). E.g. standardized inputs: L=2*max|x|; "
                "unit-cube inputs: center=0.5, L=0.75."
            )
        if half_range is not None and c is None:
            raise ValueError("half_range is only used together with c (L = c * half_range); drop it or pass c.")
        super().__init__(structure=structure, max_product_features=max_product_features, **kwargs)
        self.base = family
        self.nu = nu_f
        self.num_basis = int(num_basis)
        self.boundary_factor = None if c is None else float(c)
        if c is not None and not (np.isfinite(c) and c >= 1.0):
            raise ValueError(f"c must be >= 1 (the box must contain the data); got {c!r}. Use c >= 1.2.")
        center_t = per_dimension_tensor(center, "center")
        if L is not None:
            half_width = per_dimension_tensor(L, "L")
            if bool((half_width <= 0).any()):
                raise ValueError(f"L must be positive; got {half_width.tolist()}.")
        elif half_range is not None:
            S = per_dimension_tensor(half_range, "half_range")
            if bool((S <= 0).any()):
                raise ValueError(f"half_range must be positive; got {S.tolist()}.")
            half_width = self.boundary_factor * S
        else:
            half_width = torch.empty(0, dtype=torch.float64)  # set from the first inputs
        self.register_buffer("box_center", center_t)
        self.register_buffer("box_half_width", half_width)
        known_dims = {n for n in (center_t.numel(), half_width.numel(), self.ard_num_dims or 1) if n > 1}
        if len(known_dims) > 1:
            raise ValueError(
                f"center has {center_t.numel()} values, L {half_width.numel()} and ard_num_dims="
                f"{self.ard_num_dims}; these must agree (or be scalars)."
            )
        if known_dims:
            self._check_product_size(known_dims.pop())

    # ------------------------------------------------------------------ public helpers
    @property
    def kernel_name(self) -> str:
        """Canonical name of the approximated kernel (``"se"``, ``"matern52"``, ``"matern(0.8)"``...)."""
        return kernel_name(self.base, self.nu)

    @property
    def L(self) -> torch.Tensor:
        """Box half-widths, shape (D,) or (1,) (broadcast); empty until set from data when built with ``c``."""
        return self.box_half_width

    @property
    def center(self) -> torch.Tensor:
        """Box centres, shape (D,) or (1,)."""
        return self.box_center

    def num_features_per_dim(self) -> int:
        return self.num_basis

    def basis(self, num_dims: int | None = None) -> HilbertBasis:
        """The :class:`~tnbayes.basis.HilbertBasis` this kernel evaluates (box must be known).

        Parameters
        ----------
        num_dims : int, optional
            D, needed when ``L`` and ``center`` are scalars.
        """
        if self.box_half_width.numel() == 0:
            raise RuntimeError("The box is set from the first inputs the kernel sees; call the kernel on data first, or pass L.")
        return HilbertBasis(self.num_basis, L=self.box_half_width, center=self.box_center, num_dims=num_dims)

    def check_approximation(self, half_range: float | Sequence[float] | None = None, *,
                             stacklevel: int | None = None) -> bool:
        """Warn (``ApproximationWarning``) if the current lengthscale is outside what (M, L) represents.

        Uses the Riutort-Mayol et al. (2022) rule (SE, Matérn-3/2, Matérn-5/2 only); see
        :func:`tnbayes.basis.check_hilbert_approximation`. Call it after fitting the hyper-parameters.

        Parameters
        ----------
        half_range : float or sequence of length D, optional
            Half-range S of the training data, to check the box covers it with margin.
        stacklevel : int, optional
            Passed to :func:`warnings.warn`; None (default): the warning points at the first frame outside tnbayes.

        Returns
        -------
        bool
            True if no warning was issued.
        """
        if self.box_half_width.numel() == 0:
            raise RuntimeError("The box is not set yet (built with c and never called); call the kernel on data first.")
        ls = self.lengthscale.detach().reshape(-1, self.lengthscale.shape[-1])
        ok = True
        for row in ls:  # one check per batch member
            ok &= check_hilbert_approximation(
                row.cpu(), self.box_half_width.cpu(), self.num_basis, self.base, self.nu,
                half_range=half_range, stacklevel=None if stacklevel is None else stacklevel + 1,
            )
        return ok

    def per_dimension_features(self, x: torch.Tensor) -> torch.Tensor:
        """√S-weighted Laplace eigenfunctions → shape (..., D, N, M) from ``x`` of shape (..., N, D); differentiable
        in the lengthscale and in ``x``."""
        D = x.shape[-1]
        if self.box_half_width.numel() == 0:
            self._set_box_from_data(x)
        center = self._per_dimension_values(self.box_center, D, "center").to(x)
        half_width = self._per_dimension_values(self.box_half_width, D, "L").to(x)
        check_in_box(x, center, half_width, what="HilbertKernel")
        phi = laplace_eigenfunctions(x, center, half_width, self.num_basis, check_domain=False)  # (..., D, N, M)
        omega = laplace_sqrt_eigenvalues(half_width, self.num_basis)  # (D, M)
        lengthscale = self._lengthscale_per_dim(D).to(x).unsqueeze(-1)  # (*batch, D or 1, 1)
        weights = sqrt_spectral_density(omega, lengthscale, self.base, self.nu)  # (*batch, D, M)
        return phi * weights.unsqueeze(-2)

    # ------------------------------------------------------------------ internals
    @torch.no_grad()
    def _set_box_from_data(self, x: torch.Tensor) -> None:
        D = x.shape[-1]
        center = self._per_dimension_values(self.box_center, D, "center").to(x)
        S = (x.detach().reshape(-1, D) - center).abs().max(dim=0).values
        if bool((S <= 0).any()):
            raise ValueError(
                "Cannot set the Hilbert box from the data: some input column equals the centre everywhere "
                "(half-range 0). Pass L explicitly."
            )
        self.box_half_width = (self.boundary_factor * S).to(self.box_center)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key = prefix + "box_half_width"
        if key in state_dict and state_dict[key].shape != self.box_half_width.shape:
            self.box_half_width = torch.empty_like(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        box = "from data" if self.box_half_width.numel() == 0 else [round(v, 6) for v in self.box_half_width.tolist()]
        return (
            f"base={self.kernel_name!r}, num_basis={self.num_basis}, L={box}, "
            f"center={[round(v, 6) for v in self.box_center.tolist()]}, structure={self.structure!r}"
        )
