"""Variational Fourier features (Hensman, Durrande & Solin 2017, JMLR) for Matérn-1/2, 3/2, 5/2.

On an interval ``[a, b]`` the inducing variables are RKHS projections of the process onto
``cos(ω_k (x - a))`` (k = 0..M) and ``sin(ω_k (x - a))`` (k = 1..M) with ``ω_k = 2πk / (b - a)``.
Inside ``[a, b]`` the cross-covariance ``k_u(x)`` *is* that Fourier basis, and ``K_uu`` is block diagonal
(cos block, sin block), each block diagonal plus low rank::

    K_uu = diag(d) + V Vᵀ          rank of V: 1 (ν=1/2: cos only), 2 (ν=3/2: 1 cos + 1 sin),
                                    3 (ν=5/2: 2 cos + 1 sin)

with, for variance σ² and λ = √(2ν)/ℓ (the closed forms of the paper / the authors' code
``VFF/spectral_covariance.py``; every one is checked numerically in ``tests/basis/test_vff.py`` by the
convergence of ``Q`` to the exact Matérn kernel):

=====  =====================================================  ==========================================
ν      cos block (k = 0..M; the k = 0 entry of d uses half    sin block (k = 1..M)
       the divisor)
=====  =====================================================  ==========================================
1/2    d = (b-a)(λ²+ω²)/(4λσ²) [k=0: /(2λσ²)],  v = 1/σ        d = (b-a)(λ²+ω²)/(4λσ²)
3/2    d = (b-a)(λ²+ω²)²/(8λ³σ²) [k=0: /(4λ³σ²)], v = 1/σ      d = (b-a)(λ²+ω²)²/(8λ³σ²), v = ω/(λσ)
5/2    d = 3(b-a)(λ²+ω²)³/(32λ⁵σ²) [k=0: /(16..)],            d = 3(b-a)(λ²+ω²)³/(32λ⁵σ²), v = √3 ω/(λσ)
       v1 = (3ω²/λ² - 1)/√(8σ²), v2 = 1/σ
=====  =====================================================  ==========================================

The feature kernel ``Q(x, x') = k_u(x)ᵀ K_uu⁻¹ k_u(x')`` converges to the exact Matérn kernel inside
``[a, b]`` as M grows. :meth:`VFFBasis.features` returns ``Z`` with ``Z Zᵀ = Q`` per dimension; the
weights of ``Z`` have a unit-variance prior, exactly as for the Hilbert basis.

Outside ``[a, b]`` the cross-covariance is no longer the Fourier basis; this implementation raises
``ValueError`` there rather than returning a silently wrong value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from .._validation import ArrayLike, check_inputs
from .hilbert import check_in_box, lengthscale_tensor, per_dimension_tensor

__all__ = ["VFF_SUPPORTED_NU", "VFFBasis", "vff_frequencies"]

#: Matérn smoothness values with closed-form VFF K_uu.
VFF_SUPPORTED_NU: tuple[float, ...] = (0.5, 1.5, 2.5)


def vff_frequencies(a: torch.Tensor, b: torch.Tensor, num_frequencies: int) -> torch.Tensor:
    """Angular frequencies ``ω_k = 2πk / (b - a)``, k = 0..M.

    Parameters
    ----------
    a, b : torch.Tensor of shape (D,)
    num_frequencies : int
        M.

    Returns
    -------
    torch.Tensor of shape (D, M + 1)
    """
    k = torch.arange(0, num_frequencies + 1, dtype=a.dtype, device=a.device)
    return 2.0 * math.pi * k / (b - a).unsqueeze(-1)


def _check_nu(nu: float) -> float:
    nu_f = float(nu)
    if nu_f not in VFF_SUPPORTED_NU:
        raise ValueError(
            f"VFF has closed forms only for Matérn nu in {VFF_SUPPORTED_NU}; got nu={nu!r}. Use the Hilbert "
            f"basis (tnbayes.basis.HilbertBasis / HilbertKernel) for SE or other nu."
        )
    return nu_f


class VFFBasis:
    """Variational Fourier features of Matérn-ν kernels on per-dimension intervals ``[a_d, b_d]``.

    Parameters
    ----------
    num_frequencies : int
        M: frequencies ``k = 0..M`` for cosines and ``k = 1..M`` for sines, so ``2M + 1`` features per
        dimension.
    a, b : float or sequence of float of length D
        Interval ends, ``a < b``. The data (training *and* test inputs) must lie inside; a margin
        beyond the data reduces the edge effects, as for the Hilbert box.
    num_dims : int, optional
        D when ``a`` and ``b`` are both scalars (default 1).

    Attributes
    ----------
    num_frequencies : int
    num_features_per_dim : int
        ``2M + 1``.
    num_dims : int
    a, b : torch.Tensor of shape (D,)

    Examples
    --------
    >>> import torch
    >>> basis = VFFBasis(num_frequencies=50, a=-1.0, b=1.0)
    >>> Z = basis.features(torch.linspace(-0.5, 0.5, 4)[:, None], lengthscale=0.3, nu=1.5)
    >>> Z.shape                     # (D, N, 2M+1); Z[0] @ Z[0].T ≈ Matérn-3/2 Gram matrix
    torch.Size([1, 4, 101])
    """

    def __init__(
        self,
        num_frequencies: int,
        a: float | Sequence[float] | np.ndarray | torch.Tensor,
        b: float | Sequence[float] | np.ndarray | torch.Tensor,
        *,
        num_dims: int | None = None,
    ) -> None:
        if isinstance(num_frequencies, bool) or not isinstance(num_frequencies, (int, np.integer)) or num_frequencies < 0:
            raise ValueError(f"num_frequencies must be a non-negative integer; got {num_frequencies!r}.")
        a_t, b_t = per_dimension_tensor(a, "a"), per_dimension_tensor(b, "b")
        lengths = {n for n in (a_t.numel(), b_t.numel()) if n != 1}
        if num_dims is not None:
            lengths.add(int(num_dims))
        if len(lengths) > 1:
            raise ValueError(f"a has {a_t.numel()} value(s) and b {b_t.numel()}; give one per input dimension or scalars.")
        D = lengths.pop() if lengths else 1
        a_t, b_t = a_t.expand(D).clone(), b_t.expand(D).clone()
        if bool((b_t <= a_t).any()):
            raise ValueError(f"Each interval needs a < b; got a={a_t.tolist()}, b={b_t.tolist()}.")
        self.num_frequencies = int(num_frequencies)
        self.num_features_per_dim = 2 * self.num_frequencies + 1
        self.num_dims = int(D)
        self.a, self.b = a_t, b_t

    def frequencies(self, *, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu") -> torch.Tensor:
        """``ω_k = 2πk/(b_d - a_d)``, k = 0..M.

        Returns
        -------
        torch.Tensor of shape (D, M + 1)
        """
        return vff_frequencies(self.a.to(dtype=dtype, device=device), self.b.to(dtype=dtype, device=device), self.num_frequencies)

    def check_domain(self, X: torch.Tensor) -> None:
        """Raise ``ValueError`` if any ``X[..., d]`` is outside ``[a_d, b_d]``.

        Parameters
        ----------
        X : torch.Tensor of shape (..., N, D)
        """
        X = self._as_input(X)
        a, b = self.a.to(X), self.b.to(X)
        check_in_box(X, (a + b) / 2, (b - a) / 2, what="VFF interval")

    def cross_covariance(self, X: ArrayLike | torch.Tensor, *, check_domain: bool = True) -> torch.Tensor:
        """``k_u(x)`` inside ``[a, b]``: ``[cos(ω_k (x-a))]_{k=0..M}`` then ``[sin(ω_k (x-a))]_{k=1..M}``.

        Parameters
        ----------
        X : torch.Tensor (or array-like) of shape (..., N, D)
        check_domain : bool
            Raise for inputs outside the interval (default True).

        Returns
        -------
        torch.Tensor of shape (..., D, N, 2M + 1)
            ``K_uf`` transposed, per dimension.
        """
        X = self._as_input(X)
        if check_domain:
            self.check_domain(X)
        omega = self.frequencies(dtype=X.dtype, device=X.device)  # (D, M+1)
        phase = (X - self.a.to(X)).transpose(-1, -2).unsqueeze(-1) * omega.unsqueeze(-2)  # (..., D, N, M+1)
        return torch.cat([torch.cos(phase), torch.sin(phase[..., 1:])], dim=-1)

    def kuu_parts(
        self,
        lengthscale: float | Sequence[float] | torch.Tensor,
        nu: float,
        variance: float | torch.Tensor = 1.0,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Diagonal and low-rank factor of ``K_uu = diag(d) + V Vᵀ`` per dimension.

        Parameters
        ----------
        lengthscale : float, sequence of length D, or torch.Tensor of shape (..., D) or (..., 1)
        nu : {0.5, 1.5, 2.5}
        variance : float or torch.Tensor
            σ² of the Matérn kernel (1 for the unit-variance features).
        dtype, device
            Of the result when ``lengthscale`` is not a tensor (default float64, CPU).

        Returns
        -------
        d : torch.Tensor of shape (..., D, 2M + 1)
            Positive diagonal, cos entries first.
        V : torch.Tensor of shape (..., D, 2M + 1, r)
            Low-rank factor; r = 1, 2, 3 for ν = 1/2, 3/2, 5/2. Columns are supported on either the cos
            or the sin block, so ``K_uu`` is block diagonal.
        """
        nu_f = _check_nu(nu)
        ls = self._lengthscale(lengthscale, dtype, device)  # (..., D)
        omega = self.frequencies(dtype=ls.dtype, device=ls.device)  # (D, M+1)
        var = torch.as_tensor(variance, dtype=ls.dtype, device=ls.device)
        width = (self.b - self.a).to(ls).unsqueeze(-1)  # (D, 1)
        lam = (math.sqrt(2.0 * nu_f) / ls).unsqueeze(-1)  # (..., D, 1)
        omega = omega.expand(*lam.shape[:-1], omega.shape[-1])  # (..., D, M+1)
        omega_sin = omega[..., 1:]
        # The k = 0 cosine entry of d has half the divisor of the others (twice the value).
        is_zero = torch.zeros(omega.shape[-1], dtype=torch.bool, device=ls.device)
        is_zero[0] = True
        sd = torch.sqrt(var)
        ones_cos = torch.ones_like(omega) / sd
        zeros_cos = torch.zeros_like(omega)
        zeros_sin = torch.zeros_like(omega_sin)

        if nu_f == 0.5:
            base_cos = width * (lam**2 + omega**2) / (4.0 * lam * var)
            d_cos = torch.where(is_zero, 2.0 * base_cos, base_cos)
            d_sin = width * (lam**2 + omega_sin**2) / (4.0 * lam * var)
            columns = [torch.cat([ones_cos, zeros_sin], dim=-1)]
        elif nu_f == 1.5:
            base_cos = width * (lam**2 + omega**2) ** 2 / (8.0 * lam**3 * var)
            d_cos = torch.where(is_zero, 2.0 * base_cos, base_cos)
            d_sin = width * (lam**2 + omega_sin**2) ** 2 / (8.0 * lam**3 * var)
            v_sin = omega_sin / (lam * sd)
            columns = [torch.cat([ones_cos, zeros_sin], dim=-1), torch.cat([zeros_cos, v_sin], dim=-1)]
        else:  # 2.5
            base_cos = 3.0 * width * (lam**2 + omega**2) ** 3 / (32.0 * lam**5 * var)
            d_cos = torch.where(is_zero, 2.0 * base_cos, base_cos)
            d_sin = 3.0 * width * (lam**2 + omega_sin**2) ** 3 / (32.0 * lam**5 * var)
            v1 = (3.0 * (omega / lam) ** 2 - 1.0) / torch.sqrt(8.0 * var)
            v_sin = math.sqrt(3.0) * omega_sin / (lam * sd)
            columns = [
                torch.cat([v1, zeros_sin], dim=-1),
                torch.cat([ones_cos, zeros_sin], dim=-1),
                torch.cat([zeros_cos, v_sin], dim=-1),
            ]
        d = torch.cat([d_cos, d_sin], dim=-1)
        V = torch.stack(columns, dim=-1)
        return d, V

    def kuu(
        self,
        lengthscale: float | Sequence[float] | torch.Tensor,
        nu: float,
        variance: float | torch.Tensor = 1.0,
    ) -> torch.Tensor:
        """Dense ``K_uu = diag(d) + V Vᵀ`` (for tests and small problems).

        Returns
        -------
        torch.Tensor of shape (..., D, 2M + 1, 2M + 1)
        """
        d, V = self.kuu_parts(lengthscale, nu, variance)
        return torch.diag_embed(d) + V @ V.transpose(-1, -2)

    def features(
        self,
        X: ArrayLike | torch.Tensor,
        lengthscale: float | Sequence[float] | torch.Tensor,
        nu: float,
        *,
        check_domain: bool = True,
    ) -> torch.Tensor:
        """Features ``Z`` with ``Z Zᵀ = Q = K_fu K_uu⁻¹ K_uf`` (unit variance) per dimension.

        Uses ``K_uu = D^{1/2} (I + U Uᵀ) D^{1/2}`` with ``U = D^{-1/2} V``, so only the well-conditioned
        ``I + U Uᵀ`` is factorised: ``Z = (chol(I + U Uᵀ)⁻¹ D^{-1/2} K_uf)ᵀ``.

        Parameters
        ----------
        X : torch.Tensor (or array-like) of shape (..., N, D)
        lengthscale : float, sequence of length D, or torch.Tensor of shape (..., D) or (..., 1)
        nu : {0.5, 1.5, 2.5}
        check_domain : bool
            Raise for inputs outside ``[a, b]`` (default True).

        Returns
        -------
        torch.Tensor of shape (..., D, N, 2M + 1)
        """
        kuf_t = self.cross_covariance(X, check_domain=check_domain)  # (..., D, N, K)
        if isinstance(lengthscale, torch.Tensor):
            lengthscale = lengthscale.to(dtype=kuf_t.dtype, device=kuf_t.device)
        d, V = self.kuu_parts(lengthscale, nu, dtype=kuf_t.dtype, device=kuf_t.device)
        inv_sqrt_d = torch.rsqrt(d)  # (..., D, K)
        U = V * inv_sqrt_d.unsqueeze(-1)
        eye = torch.eye(d.shape[-1], dtype=d.dtype, device=d.device)
        chol = torch.linalg.cholesky(eye + U @ U.transpose(-1, -2))  # (..., D, K, K)
        scaled = (kuf_t * inv_sqrt_d.unsqueeze(-2)).transpose(-1, -2)  # (..., D, K, N)
        chol = chol.expand(*scaled.shape[:-2], *chol.shape[-2:])
        return torch.linalg.solve_triangular(chol, scaled, upper=False).transpose(-1, -2)

    # ------------------------------------------------------------------ helpers
    def _lengthscale(self, lengthscale, dtype, device) -> torch.Tensor:
        ls = lengthscale_tensor(lengthscale, self.num_dims, dtype=dtype, device=device, what="the VFF basis")
        return ls.expand(*ls.shape[:-1], self.num_dims)

    def _as_input(self, X: ArrayLike | torch.Tensor) -> torch.Tensor:
        if isinstance(X, torch.Tensor):
            if not X.is_floating_point():
                X = X.to(torch.float64)
            if X.ndim < 2:
                raise ValueError(f"X must have shape (..., N, D); got {tuple(X.shape)}. For 1-D inputs use X.reshape(-1, 1).")
        else:
            X = check_inputs(X, name="X")
        if X.shape[-1] != self.num_dims:
            raise ValueError(f"X has {X.shape[-1]} columns but the VFF basis has {self.num_dims} dimension(s).")
        return X

    def __repr__(self) -> str:
        return f"VFFBasis(num_frequencies={self.num_frequencies}, num_dims={self.num_dims}, a={self.a.tolist()}, b={self.b.tolist()})"
