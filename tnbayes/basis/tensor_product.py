"""Tensor-product feature maps: the 1-D bases of one model, one *mode* each, as the inference engines see them.

A :class:`TensorProductFeatures` describes ``x ↦ Σ_p c_p φ^p_1(x) ⊗ … ⊗ φ^p_K(x)``: K *modes* (one per
input dimension, or several per dimension for quantized bases), each with its own feature matrix, and
optionally P *components* (a mixture of feature maps sharing one weight tensor, as in the FL model).
The engine only ever asks for one mode's features on one chunk of rows, so the M^K-sized Kronecker
product is never formed and memory stays independent of N.
"""

from __future__ import annotations

from collections.abc import Sequence

import math

import torch

from .hilbert import HilbertBasis
from .fourier import check_in_period, fourier_features
from .polynomial import polynomial_features
from .quantized import FEATURE_KINDS, quantized_factor, quantized_factor_sizes

__all__ = ["TensorProductFeatures", "BasisFeatures", "FourierPolynomialFeatures", "PeriodMixtureFeatures"]

#: above this many unquantized Fourier features per input, ``FourierPolynomialFeatures.kernel`` sums them in closed
#: form (a Dirichlet kernel, O(1) per entry) instead of through the (n, M) features
CLOSED_FORM_MIN_BASIS = 4096


class TensorProductFeatures:
    """Interface: per-mode feature matrices of a tensor-product feature map.

    Subclasses set ``mode_sizes`` (list of K ints), ``num_components`` (P) and ``is_complex`` and
    implement :meth:`mode_features`.
    """

    mode_sizes: list[int]
    num_components: int = 1
    is_complex: bool = False

    @property
    def num_modes(self) -> int:
        """K, the number of modes of the weight tensor."""
        return len(self.mode_sizes)

    def mode_features(self, X: torch.Tensor, mode: int) -> torch.Tensor:
        """Feature matrix of one mode on a chunk of inputs.

        Parameters
        ----------
        X : torch.Tensor of shape (n, D)
            A chunk of (scaled) inputs.
        mode : int
            Which mode, 0 ≤ mode < K.

        Returns
        -------
        torch.Tensor of shape (P, n, M_mode)
            Real or complex (see ``is_complex``).
        """
        raise NotImplementedError

    def check_inputs(self, X: torch.Tensor) -> None:
        """Raise ``ValueError`` for inputs the feature map cannot represent (default: accept all)."""

    def mode_inputs(self) -> list[int] | None:
        """The input column each mode's features depend on, or ``None`` when some mode reads several columns.

        The ALS engine uses this to accumulate normal equations per distinct input value (exact, and much
        cheaper when columns take few values, as in airline's months, weekdays or minutes).

        Returns
        -------
        list of K ints, or None
        """
        return None


class BasisFeatures(TensorProductFeatures):
    """One mode per input dimension from a 1-D basis with kernel weights (T-KRR's features).

    Parameters
    ----------
    basis : HilbertBasis
        The per-dimension basis (box per input dimension).
    lengthscale : sequence of float or torch.Tensor of shape (D,) or (1,)
        Kernel lengthscale(s) in the basis's input space.
    kernel : str
        Kernel whose spectral density weights the eigenfunctions (``"se"``, ``"matern32"``, …).
    nu : float, optional
        Matérn smoothness for ``kernel="matern"``.

    Notes
    -----
    The features are ``z_j(x_d) = √S(√λ_j) φ_j(x_d)``, so a unit-variance Gaussian prior on the weights
    gives the unit-variance product kernel (the square root is folded in as in T-KRR's code).
    """

    def __init__(self, basis: HilbertBasis, lengthscale: Sequence[float] | torch.Tensor, kernel: str = "se",
                 nu: float | None = None) -> None:
        self.basis = basis
        self.kernel = kernel
        self.nu = nu
        ls = torch.as_tensor(lengthscale, dtype=torch.float64).reshape(-1)
        self.lengthscale = ls.expand(basis.num_dims).clone() if ls.numel() == 1 else ls
        if self.lengthscale.numel() != basis.num_dims:
            raise ValueError(f"lengthscale has {ls.numel()} values; the basis has {basis.num_dims} dimensions.")
        self.mode_sizes = [basis.num_basis] * basis.num_dims
        self.num_components = 1
        self.is_complex = False
        self._weights: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}

    def _spectral_weights(self, like: torch.Tensor) -> torch.Tensor:
        key = (like.dtype, like.device)
        if key not in self._weights:
            self._weights[key] = self.basis.spectral_weights(
                self.lengthscale.to(dtype=like.dtype, device=like.device), self.kernel, self.nu)
        return self._weights[key]

    def mode_features(self, X: torch.Tensor, mode: int) -> torch.Tensor:
        center = self.basis.center[mode].to(X)
        half_width = self.basis.L[mode].to(X)
        column = X[:, mode]
        frequencies = torch.arange(1, self.basis.num_basis + 1, dtype=X.dtype, device=X.device) * (
            torch.pi / (2 * half_width))
        phi = torch.sin((column - center + half_width).unsqueeze(-1) * frequencies) / torch.sqrt(half_width)
        return (phi * self._spectral_weights(X)[mode]).unsqueeze(0)

    def check_inputs(self, X: torch.Tensor) -> None:
        self.basis.check_domain(X)

    def mode_inputs(self) -> list[int]:
        return list(range(self.basis.num_dims))


class FourierPolynomialFeatures(TensorProductFeatures):
    """Tensor-product Fourier or polynomial features, quantized (K modes per input) or not (one mode per input).

    Parameters
    ----------
    num_dims : int
        D.
    num_basis : int
        M per input dimension.
    kind : {"fourier", "polynomial"}
    period : float, optional
        P (Fourier only).
    quantized : bool
        ``True``: modes ``(d, m)`` of size q_m, ordered d-major (all factors of input 0, then input 1, …);
        ``False``: one mode of size M per input.
    normalize : bool
        Fourier only: divide every mode's features by the square root of its size, so that the features of one
        input are ``ψ(x)/√M`` and the kernel has ``k(x, x) = 1`` for any D (default). Without it
        ``k(x, x) = M^D``, and a penalty grid fit for one D is meaningless for another. Polynomial features
        are never rescaled (their size depends on x).

    Notes
    -----
    The weight tensor of the quantized map has D·K modes; its CPD has D·K cores of shape (q_m, R), so each
    ALS sub-problem has q_m·R unknowns (2R for M = 2^K) whatever M is.
    """

    def __init__(self, num_dims: int, num_basis: int, kind: str = "fourier", period: float | None = None,
                 quantized: bool = True, normalize: bool = True) -> None:
        if kind not in FEATURE_KINDS:
            raise ValueError(f"kind must be one of {FEATURE_KINDS}; got {kind!r}.")
        if kind == "fourier":
            if period is None:
                raise ValueError("Fourier features need a period P.")
            period = float(period)
            if not math.isfinite(period) or period <= 0:
                raise ValueError(f"period P must be a finite number > 0; got {period!r}.")
        self.num_dims = int(num_dims)
        self.factor_sizes = quantized_factor_sizes(num_basis)  # validates M
        self.num_basis = int(num_basis)
        self.kind = kind
        self.period = period
        self.quantized = bool(quantized)
        self.normalize = bool(normalize) and kind == "fourier"
        if not self.quantized:
            self.factor_sizes = [self.num_basis]
        self.mode_sizes = self.factor_sizes * self.num_dims
        self.num_components = 1
        self.is_complex = kind == "fourier"

    def mode_features(self, X: torch.Tensor, mode: int) -> torch.Tensor:
        dim, factor = divmod(mode, len(self.factor_sizes))
        column = X[:, dim]
        if not self.quantized:
            values = (fourier_features(column, self.num_basis, self.period) if self.kind == "fourier"
                      else polynomial_features(column, self.num_basis))
        else:
            values = quantized_factor(column, self.num_basis, factor, self.kind, self.period)
        if self.normalize:
            values = values / math.sqrt(values.shape[-1])
        return values.unsqueeze(0)

    def check_inputs(self, X: torch.Tensor) -> None:
        if self.kind == "fourier":
            check_in_period(X, self.period)

    def mode_inputs(self) -> list[int]:
        return [mode // len(self.factor_sizes) for mode in range(self.num_modes)]

    def kernel(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        """The kernel ``k(x, x') = Π_d ψ(x_d)ᵀ conj(ψ(x'_d))`` these features span (the exact-KRR kernel;
        divided by M^D when ``normalize``), as the product of the per-mode kernels.

        Parameters
        ----------
        X1 : torch.Tensor of shape (n1, D)
        X2 : torch.Tensor of shape (n2, D)

        Returns
        -------
        torch.Tensor of shape (n1, n2)
            Complex Hermitian (for X1 = X2) for Fourier features; real for polynomials.
        """
        # the kernel of a Kronecker-factored feature map is the product of its factors' kernels
        closed_form = self.kind == "fourier" and not self.quantized and self.num_basis > CLOSED_FORM_MIN_BASIS
        result = None
        for mode in range(self.num_modes):
            if closed_form:  # the same sum without the (n, M) features: huge M costs no memory or time
                factor = self._dirichlet_kernel(X1[:, mode], X2[:, mode])
            else:
                factor = self.mode_features(X1, mode)[0] @ self.mode_features(X2, mode)[0].conj().T
            result = factor if result is None else result * factor
        return result


    def _dirichlet_kernel(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        """``Σ_k exp(i k θ)`` over the M frequencies k = a … a + M − 1 (a = −⌊M/2⌋), θ = 2π (x − x')/P, in closed
        form ``exp(i (2a + M − 1) θ/2) sin(Mθ/2) / sin(θ/2)`` (divided by M when ``normalize``).

        Parameters
        ----------
        x1 : torch.Tensor of shape (n1,)
        x2 : torch.Tensor of shape (n2,)

        Returns
        -------
        torch.Tensor of shape (n1, n2), complex
        """
        M, a = self.num_basis, -(self.num_basis // 2)
        half = (math.pi / float(self.period)) * (x1.unsqueeze(-1) - x2.unsqueeze(0))
        s = torch.sin(half)
        near = s.abs() < 1e-6  # θ ≈ 0 (mod 2π): the ratio's limit, by l'Hôpital
        ratio = torch.where(near, M * torch.cos(M * half) / torch.cos(half), torch.sin(M * half) / torch.where(
            near, torch.ones_like(s), s))
        if self.normalize:
            ratio = ratio / M
        return torch.polar(ratio.abs(), (2 * a + M - 1) * half + torch.where(ratio < 0, math.pi, 0.0))


class PeriodMixtureFeatures(TensorProductFeatures):
    """P families of (quantized) Fourier features with periods θ_1 … θ_P: FL's feature map ``Σ_p λ_p Φ_θp(x)``.

    Every family has the same modes as :class:`FourierPolynomialFeatures` (``kind="fourier"``); the engine
    combines them with the mixture weights λ (its ``component_weights``).

    Parameters
    ----------
    num_dims : int
        D.
    num_basis : int
        M per input dimension (quantized into its prime factors when ``quantized``).
    periods : sequence of float
        θ_p, one per family (P ≥ 1).
    quantized : bool
    normalize : bool
        Divide each mode's features by the square root of its size (k(x, x) = 1 per family). FL's paper uses
        the raw features (default ``False``).
    center : float
        Centre of the window of inputs accepted without wrapping around the shortest period:
        |x − center| ≤ θ_min/2 (FL's inputs lie in [0, 1], so it uses 0.5). The features themselves are
        ``exp(i2πkx/θ)`` of the inputs as given.

    Attributes
    ----------
    families : list of FourierPolynomialFeatures
        One feature map per period.
    """

    def __init__(self, num_dims: int, num_basis: int, periods: Sequence[float], quantized: bool = True,
                 normalize: bool = False, center: float = 0.0) -> None:
        periods = [float(p) for p in periods]
        self.center = float(center)
        if not periods:
            raise ValueError("periods must hold at least one period.")
        self.periods = periods
        self.num_dims, self.num_basis = int(num_dims), int(num_basis)
        self.quantized, self.normalize = bool(quantized), bool(normalize)
        self.families = [FourierPolynomialFeatures(num_dims, num_basis, "fourier", p, quantized=quantized,
                                                   normalize=normalize) for p in periods]
        self.mode_sizes = list(self.families[0].mode_sizes)
        self.num_components = len(periods)
        self.is_complex = True

    def mode_features(self, X: torch.Tensor, mode: int) -> torch.Tensor:
        return torch.cat([family.mode_features(X, mode) for family in self.families])

    def check_inputs(self, X: torch.Tensor) -> None:
        check_in_period(X, min(self.periods), self.center)

    def mode_inputs(self) -> list[int]:
        return self.families[0].mode_inputs()

    def components(self, indices: Sequence[int]) -> "PeriodMixtureFeatures":
        """The mixture restricted to some families (the engine skips families whose weight is zero).

        Parameters
        ----------
        indices : sequence of int
            Which families to keep, in order.

        Returns
        -------
        PeriodMixtureFeatures
        """
        return PeriodMixtureFeatures(self.num_dims, self.num_basis, [self.periods[i] for i in indices],
                                     quantized=self.quantized, normalize=self.normalize, center=self.center)
