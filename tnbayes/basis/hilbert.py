"""Hilbert-space GP basis (Solin & Särkkä 2020): Laplace eigenfunctions on a box, weighted by √S.

On the box ``[center_d - L_d, center_d + L_d]`` of each input dimension d, the Dirichlet eigenfunctions of
the Laplacian are::

    φ_j(x) = L^{-1/2} sin(π j (x - center + L) / (2L)),     √λ_j = π j / (2L),      j = 1..M

and a stationary kernel with spectral density S is approximated by
``k(x, x') ≈ Σ_j S(√λ_j) φ_j(x) φ_j(x')``. Folding √S into the features,
``z_j(x) = √S(√λ_j) φ_j(x)``, gives features whose weights have a *unit-variance* prior: ``f = z(x)ᵀ w``
with ``w ~ N(0, σ_f² I)`` is (approximately) a GP with kernel ``σ_f² k``.

The eigenfunctions do not depend on any hyper-parameter, so they can be computed once per data set;
lengthscales and smoothness only change the per-column weights ``√S(√λ_j)``.

Everything is *per dimension*: evaluation returns a ``(D, N, M)`` tensor of feature matrices, never their
Kronecker product (see :mod:`tnbayes.basis.combine` for the product/additive feature maps used by the
GPyTorch kernels when ``M^D`` is small).

Inputs outside the box raise :class:`ValueError` — the eigenfunctions vanish at the box edge, so values
there would be silently wrong.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from .._validation import ArrayLike, check_inputs
from .spectral import resolve_kernel, sqrt_spectral_density

__all__ = [
    "HilbertBasis",
    "laplace_sqrt_eigenvalues",
    "laplace_eigenfunctions",
    "check_in_box",
    "data_center_and_half_range",
]


def laplace_sqrt_eigenvalues(L: torch.Tensor, num_basis: int) -> torch.Tensor:
    """Square roots of the Dirichlet Laplace eigenvalues on ``[-L, L]``.

    Parameters
    ----------
    L : torch.Tensor of shape (D,)
        Box half-widths.
    num_basis : int
        Number of eigenfunctions M per dimension.

    Returns
    -------
    torch.Tensor of shape (D, M)
        ``π j / (2 L_d)`` for ``j = 1..M``; these are the angular frequencies ω_j at which the spectral
        density is evaluated.
    """
    j = torch.arange(1, num_basis + 1, dtype=L.dtype, device=L.device)
    return math.pi * j / (2.0 * L.unsqueeze(-1))


def check_in_box(X: torch.Tensor, center: torch.Tensor, L: torch.Tensor, *, what: str = "Hilbert basis") -> None:
    """Raise ``ValueError`` if any ``|X[..., d] - center_d| > L_d`` (up to a 1e-10 relative rounding slack).

    Parameters
    ----------
    X : torch.Tensor of shape (..., N, D)
    center, L : torch.Tensor of shape (D,)
    what : str
        Name used in the message.

    Raises
    ------
    ValueError
        Names the first offending column, row and value, the box, and how to fix it.
    """
    with torch.no_grad():
        offset = (X.detach() - center).abs()
        # The slack accepts points that sit on the edge up to floating-point rounding (e.g. linspace ends).
        outside = offset > L * (1.0 + 1e-10)
        if not bool(outside.any()):
            return
        flat = X.detach().reshape(-1, X.shape[-1])
        bad = outside.reshape(-1, X.shape[-1])
        n_bad = int(bad.sum())
        row, col = (int(i) for i in torch.nonzero(bad)[0].tolist())
        value = float(flat[row, col])
        c, half = float(center[col]), float(L[col])
        need = float((flat[:, col] - c).abs().max())
    raise ValueError(
        f"{n_bad} input value(s) lie outside the {what} box; first: column {col}, row {row}, value "
        f"{value:.6g}, but the box for column {col} is [{c - half:.6g}, {c + half:.6g}] "
        f"(center {c:.6g}, half-width L = {half:.6g}). The basis functions vanish at the box edge, so "
        f"predictions there would be silently wrong. Fix: use a larger box — L >= {need:.6g} for this "
        f"column, i.e. a larger L or a larger boundary factor c (L = c * half-range of the training "
        f"inputs; c = 1.5-2 is typical) — or keep queries inside the training range."
    )


def laplace_eigenfunctions(
    X: torch.Tensor, center: torch.Tensor, L: torch.Tensor, num_basis: int, *, check_domain: bool = True
) -> torch.Tensor:
    """Dirichlet Laplace eigenfunctions of every input dimension.

    Parameters
    ----------
    X : torch.Tensor of shape (..., N, D)
    center, L : torch.Tensor of shape (D,)
        Box centres and half-widths (same dtype/device as ``X``).
    num_basis : int
        M.
    check_domain : bool
        Raise ``ValueError`` for inputs outside the box (default). Only switch off when the caller has
        already checked.

    Returns
    -------
    torch.Tensor of shape (..., D, N, M)
        ``out[..., d, n, j-1] = L_d^{-1/2} sin(π j (X[..., n, d] - center_d + L_d) / (2 L_d))``.
    """
    if check_domain:
        check_in_box(X, center, L)
    omega = laplace_sqrt_eigenvalues(L, num_basis)  # (D, M)
    shifted = (X + (L - center)).transpose(-1, -2).unsqueeze(-1)  # (..., D, N, 1)
    return torch.sin(shifted * omega.unsqueeze(-2)) / torch.sqrt(L).unsqueeze(-1).unsqueeze(-1)


def lengthscale_tensor(lengthscale: float | Sequence[float] | torch.Tensor, num_dims: int, *,
                       dtype: torch.dtype | None = None, device: torch.device | str | None = None,
                       what: str = "the basis") -> torch.Tensor:
    """Lengthscales as a floating tensor of shape (..., D) or (..., 1), checked against the D input dimensions.

    Parameters
    ----------
    lengthscale : float, sequence of length D, or torch.Tensor of shape (..., D) or (..., 1)
        A tensor is kept as it is (and stays differentiable) unless it has integer values (then float64).
    num_dims : int
        D.
    dtype, device
        Of the result when ``lengthscale`` is not a tensor (default float64, CPU).
    what : str
        The basis, named in the error.

    Returns
    -------
    torch.Tensor of shape (..., D) or (..., 1)
    """
    if isinstance(lengthscale, torch.Tensor):
        ls = lengthscale
    else:
        ls = torch.as_tensor(lengthscale, dtype=dtype or torch.float64, device=device)
    if not ls.dtype.is_floating_point:
        ls = ls.to(torch.float64)
    if ls.ndim == 0:
        ls = ls.reshape(1)
    if ls.shape[-1] not in (1, num_dims):
        raise ValueError(
            f"lengthscale has {ls.shape[-1]} values in its last dimension but {what} has "
            f"{num_dims} input dimensions; pass one lengthscale or one per dimension."
        )
    return ls


def per_dimension_tensor(value: float | Sequence[float] | np.ndarray | torch.Tensor, name: str) -> torch.Tensor:
    """A scalar or one value per input dimension as a float64 tensor of shape (D,) or (1,).

    Parameters
    ----------
    value : float, sequence of float, numpy.ndarray or torch.Tensor (0-D or 1-D, not empty, finite)
        A tensor keeps its device (no host round trip for GPU kernels) and is detached.
    name : str
        Named in the error.

    Returns
    -------
    torch.Tensor of shape (D,) or (1,), float64
    """
    if isinstance(value, torch.Tensor):
        t = value.detach()
    else:
        t = torch.as_tensor(np.asarray(value, dtype=float))
    if t.ndim > 1 or t.numel() == 0:
        raise ValueError(f"{name} must be a scalar or a 1-D sequence with one value per input dimension; got shape "
                         f"{tuple(t.shape)}.")
    t = t.reshape(-1).to(torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite; got {value!r}.")
    return t


class HilbertBasis:
    """Hilbert-space (Laplace-eigenfunction) basis on a per-dimension box, Solin & Särkkä (2020).

    Parameters
    ----------
    num_basis : int
        Number of eigenfunctions M per input dimension.
    L : float or sequence of float of length D
        Box half-widths: dimension d lives on ``[center_d - L_d, center_d + L_d]``.
    center : float or sequence of float of length D
        Box centres (default 0 — e.g. standardized inputs).
    num_dims : int, optional
        Number of input dimensions D when both ``L`` and ``center`` are scalars (default 1).

    Attributes
    ----------
    num_basis : int
        M.
    num_dims : int
        D.
    L : torch.Tensor of shape (D,)
        Half-widths (float64, CPU; cast to the inputs' dtype/device on use).
    center : torch.Tensor of shape (D,)

    Notes
    -----
    With the data half-range S_d (after centring), ``c_d = L_d / S_d`` is the boundary factor of
    Riutort-Mayol et al. (2022); see :func:`tnbayes.basis.choose_hilbert_parameters` for choosing
    (M, c) and :func:`tnbayes.basis.check_hilbert_approximation` for checking a fitted lengthscale.

    Examples
    --------
    >>> import torch
    >>> basis = HilbertBasis(num_basis=32, L=2.0)               # 1-D, box [-2, 2]
    >>> Z = basis.features(torch.linspace(-1, 1, 5)[:, None], lengthscale=0.3, kernel="se")
    >>> Z.shape                                                  # (D, N, M)
    torch.Size([1, 5, 32])
    >>> K = Z[0] @ Z[0].T                                        # ≈ exp(-(x-x')²/(2·0.3²))
    """

    def __init__(
        self,
        num_basis: int,
        L: float | Sequence[float] | np.ndarray | torch.Tensor,
        center: float | Sequence[float] | np.ndarray | torch.Tensor = 0.0,
        *,
        num_dims: int | None = None,
    ) -> None:
        if isinstance(num_basis, bool) or not isinstance(num_basis, (int, np.integer)) or num_basis < 1:
            raise ValueError(f"num_basis must be a positive integer (M basis functions per dimension); got {num_basis!r}.")
        L_t = per_dimension_tensor(L, "L")
        center_t = per_dimension_tensor(center, "center")
        lengths = {n for n in (L_t.numel(), center_t.numel()) if n != 1}
        if num_dims is not None:
            lengths.add(int(num_dims))
        if len(lengths) > 1:
            raise ValueError(
                f"L has {L_t.numel()} value(s), center {center_t.numel()}"
                + (f" and num_dims={num_dims}" if num_dims is not None else "")
                + "; give one value per input dimension (or a scalar for all)."
            )
        D = lengths.pop() if lengths else 1
        if bool((L_t <= 0).any()):
            raise ValueError(f"Box half-widths L must be positive; got {L_t.tolist()}.")
        self.num_basis = int(num_basis)
        self.num_dims = int(D)
        self.L = L_t.expand(D).clone()
        self.center = center_t.expand(D).clone()

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_data(
        cls,
        X: ArrayLike,
        num_basis: int,
        *,
        c: float | Sequence[float] = 1.5,
    ) -> HilbertBasis:
        """Build the box around training inputs: centre = mid-range, ``L = c · half-range`` per column.

        Parameters
        ----------
        X : array-like of shape (N, D)
            Training inputs (in the space the basis will be evaluated in).
        num_basis : int
            M.
        c : float or sequence of float of length D
            Boundary factor(s), ``c >= 1`` (1.2 is the smallest value the published rule allows;
            1.5–2 is a safe default for moderate lengthscales).

        Returns
        -------
        HilbertBasis
        """
        Xt = check_inputs(X, name="X")
        center, half_range = data_center_and_half_range(Xt)
        c_t = per_dimension_tensor(c, "c")
        if bool((c_t < 1).any()):
            raise ValueError(
                f"Boundary factor c must be >= 1 (the box must contain the data); got {c_t.tolist()}. "
                f"Use c >= 1.2 (Riutort-Mayol et al. 2022)."
            )
        return cls(num_basis, L=(c_t * half_range).tolist(), center=center.tolist(), num_dims=Xt.shape[1])

    # ------------------------------------------------------------------ evaluation
    def sqrt_eigenvalues(self, *, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu") -> torch.Tensor:
        """Frequencies ``√λ_j = π j / (2 L_d)``.

        Returns
        -------
        torch.Tensor of shape (D, M)
        """
        return laplace_sqrt_eigenvalues(self.L.to(dtype=dtype, device=device), self.num_basis)

    def check_domain(self, X: torch.Tensor) -> None:
        """Raise ``ValueError`` (column, row, value, box and the fix) if any input is outside the box.

        Parameters
        ----------
        X : torch.Tensor of shape (..., N, D)
        """
        X = self._as_input(X)
        check_in_box(X, self.center.to(X), self.L.to(X))

    def eigenfunctions(self, X: ArrayLike | torch.Tensor, *, check_domain: bool = True) -> torch.Tensor:
        """Unweighted eigenfunctions ``φ_j(x_d)`` for every dimension.

        Parameters
        ----------
        X : torch.Tensor (or array-like) of shape (..., N, D)
            Inputs in the same space as ``center``/``L``. Batch dimensions are allowed for tensors.
        check_domain : bool
            Raise for inputs outside the box (default True).

        Returns
        -------
        torch.Tensor of shape (..., D, N, M)
        """
        X = self._as_input(X)
        return laplace_eigenfunctions(X, self.center.to(X), self.L.to(X), self.num_basis, check_domain=check_domain)

    def spectral_weights(
        self,
        lengthscale: float | Sequence[float] | torch.Tensor,
        kernel: str = "se",
        nu: float | None = None,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """Per-column weights ``√S_d(√λ_j)`` of a unit-variance kernel (differentiable in ``lengthscale``).

        Parameters
        ----------
        lengthscale : float, sequence of length D, or torch.Tensor of shape (..., D) or (..., 1)
            Lengthscale(s) in the input space; one per dimension for ARD, batch dims allowed.
        kernel, nu
            Kernel family (see :func:`tnbayes.basis.resolve_kernel`).
        dtype, device
            Of the result when ``lengthscale`` is not a tensor (default float64, CPU).

        Returns
        -------
        torch.Tensor of shape (..., D, M)
        """
        resolve_kernel(kernel, nu)
        ls = lengthscale_tensor(lengthscale, self.num_dims, dtype=dtype, device=device)
        omega = self.sqrt_eigenvalues(dtype=ls.dtype, device=ls.device)  # (D, M)
        return sqrt_spectral_density(omega, ls.unsqueeze(-1), kernel, nu)

    def features(
        self,
        X: ArrayLike | torch.Tensor,
        lengthscale: float | Sequence[float] | torch.Tensor,
        kernel: str = "se",
        nu: float | None = None,
        *,
        check_domain: bool = True,
    ) -> torch.Tensor:
        """Weighted features ``z_j(x_d) = √S_d(√λ_j) φ_j(x_d)`` whose weights have a unit-variance prior.

        Parameters
        ----------
        X : torch.Tensor (or array-like) of shape (..., N, D)
        lengthscale : float, sequence of length D, or torch.Tensor of shape (..., D) or (..., 1)
        kernel, nu
            Kernel family (``"se"``, ``"matern12"``, ``"matern32"``, ``"matern52"``, ``"matern"`` + nu).
        check_domain : bool
            Raise for inputs outside the box (default True).

        Returns
        -------
        torch.Tensor of shape (..., D, N, M)
            For one dimension d, ``Z[d] @ Z[d].T`` approximates the unit-variance 1-D kernel; the
            product kernel is the element-wise product of these D Gram matrices.
        """
        phi = self.eigenfunctions(X, check_domain=check_domain)
        if isinstance(lengthscale, torch.Tensor):
            lengthscale = lengthscale.to(dtype=phi.dtype, device=phi.device)
        weights = self.spectral_weights(lengthscale, kernel, nu, dtype=phi.dtype, device=phi.device)
        return phi * weights.unsqueeze(-2)

    def kernel_matrix(
        self,
        X1: ArrayLike | torch.Tensor,
        X2: ArrayLike | torch.Tensor | None,
        lengthscale: float | Sequence[float] | torch.Tensor,
        kernel: str = "se",
        nu: float | None = None,
        *,
        structure: str = "product",
    ) -> torch.Tensor:
        """Dense approximate kernel matrix (for diagnostics and tests; O(N1·N2·D·M)).

        Parameters
        ----------
        X1 : (N1, D); X2 : (N2, D) or None (= X1)
        structure : {"product", "additive"}
            ``"product"``: ``Π_d K_d``; ``"additive"``: ``(1/D) Σ_d K_d`` (unit variance, as in
            :class:`tnbayes.kernels.HilbertKernel`).

        Returns
        -------
        torch.Tensor of shape (N1, N2)
        """
        Z1 = self.features(X1, lengthscale, kernel, nu)
        Z2 = Z1 if X2 is None else self.features(X2, lengthscale, kernel, nu)
        grams = Z1 @ Z2.transpose(-1, -2)  # (D, N1, N2)
        if structure == "product":
            return grams.prod(dim=-3)
        if structure == "additive":
            return grams.mean(dim=-3)
        raise ValueError(f"structure must be 'product' or 'additive'; got {structure!r}.")

    # ------------------------------------------------------------------ misc
    def _as_input(self, X: ArrayLike | torch.Tensor) -> torch.Tensor:
        if isinstance(X, torch.Tensor):
            if not X.is_floating_point():
                X = X.to(torch.float64)
            if X.ndim < 2:
                raise ValueError(
                    f"X must have shape (..., N, D) with D = {self.num_dims}; got shape {tuple(X.shape)}. "
                    f"For 1-D inputs use X.reshape(-1, 1)."
                )
        else:
            X = check_inputs(X, name="X")
        if X.shape[-1] != self.num_dims:
            raise ValueError(
                f"X has {X.shape[-1]} columns but the Hilbert basis was built for {self.num_dims} input "
                f"dimension(s); pass inputs with the same columns."
            )
        return X

    def __repr__(self) -> str:
        def fmt(t: torch.Tensor) -> str:
            vals = t.tolist()
            return f"{vals[0]:.4g}" if len(set(vals)) == 1 else "[" + ", ".join(f"{v:.4g}" for v in vals) + "]"

        return f"HilbertBasis(num_basis={self.num_basis}, num_dims={self.num_dims}, L={fmt(self.L)}, center={fmt(self.center)})"


def data_center_and_half_range(X: torch.Tensor, *, allow_constant: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Mid-range centre and half-range ``S_d = (max - min) / 2`` of every column.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
    allow_constant : bool
        Return a zero half-range for constant columns instead of raising (the caller then decides
        the box for them).

    Returns
    -------
    center, half_range : torch.Tensor of shape (D,) each (float64)

    Raises
    ------
    ValueError
        If a column is constant (zero half-range: no box can be scaled from it) and not ``allow_constant``.
    """
    X = X.detach().to(torch.float64)
    lo, hi = X.min(dim=0).values, X.max(dim=0).values
    half_range = (hi - lo) / 2.0
    if not allow_constant and bool((half_range <= 0).any()):
        col = int(torch.nonzero(half_range <= 0)[0])
        raise ValueError(
            f"Column {col} of X is constant (value {float(lo[col]):.6g}), so its half-range is 0 and no "
            f"box can be scaled from it. Drop constant columns, or pass L explicitly."
        )
    return (hi + lo) / 2.0, half_range
