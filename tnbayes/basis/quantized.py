"""Fourier and pure-power polynomial features, and their exact quantization (Wesel & Batselier 2024).

Unquantized features of one input dimension::

    Fourier (period P):   ψ(x) = [exp(i 2π k x / P)]_{k = −⌊M/2⌋ … M − 1 − ⌊M/2⌋}        (complex, length M)
    polynomial:           ψ(x) = [1, x, x², …, x^{M−1}]                                     (real, length M)

Both are Vandermonde vectors, so they factor *exactly* into a Kronecker product of short factors. Write
M = q_1 q_2 ⋯ q_K (the sorted prime factorisation; q_m = 2 for M = 2^K) and the index ``j = k + ⌊M/2⌋``
in mixed radix, ``j = Σ_m b_m s_m`` with ``s_m = q_1 ⋯ q_{m−1}`` (digit 1 varies fastest). Then::

    Fourier:     ψ(x) = ⊗_{m = K … 1}  e^{−i 2π ⌊M/2⌋ x / (K P)} · [e^{i 2π b s_m x / P}]_{b = 0 … q_m − 1}
    polynomial:  ψ(x) = ⊗_{m = K … 1}  [x^{b s_m}]_{b = 0 … q_m − 1}

(the K scalar prefactors multiply to ``e^{−i 2π ⌊M/2⌋ x / P}``; for M = 2^K this is the paper's
``e^{−iπxM/(KP)}`` per factor). In the Kronecker product ``⊗_{m = K … 1}`` the *last* factor (m = 1)
varies fastest, which is the order of the mixed-radix index. :func:`quantized_factors` returns the factors
in the order m = 1 … K; :func:`kron_rows` forms their product back in that convention.

A model with quantized features has K modes of size q_m per input dimension instead of one mode of size M;
as far as the ALS engine is concerned it is an ordinary tensor-product feature map with more, smaller modes
(:class:`tnbayes.inference.FourierPolynomialFeatures`).

Fourier features are periodic with period P: an input farther than P/2 from the origin would be read as
one wrapped around the period, so such inputs raise ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from tnbayes.tensors.shapes import prime_factors

__all__ = [
    "FEATURE_KINDS",
    "quantized_factor",
    "fourier_frequencies",
    "fourier_features",
    "polynomial_features",
    "quantized_factor_sizes",
    "quantized_factors",
    "kron_rows",
    "check_in_period",
]

#: the feature families of :class:`FourierPolynomialFeatures`
FEATURE_KINDS = ("fourier", "polynomial")


def _check_num_basis(num_basis: int) -> int:
    if isinstance(num_basis, bool) or int(num_basis) != num_basis or int(num_basis) < 2:
        raise ValueError(f"num_basis (M) must be an integer >= 2; got {num_basis!r}.")
    return int(num_basis)


def _check_period(period: float) -> float:
    period = float(period)
    if not math.isfinite(period) or period <= 0:
        raise ValueError(f"period P must be a finite number > 0; got {period!r}.")
    return period


def fourier_frequencies(num_basis: int) -> torch.Tensor:
    """Integer frequencies ``k = −⌊M/2⌋ … M − 1 − ⌊M/2⌋`` of the Fourier features (−M/2 … M/2 − 1 for even M).

    Returns
    -------
    torch.Tensor of shape (M,), int64
    """
    num_basis = _check_num_basis(num_basis)
    return torch.arange(num_basis) - num_basis // 2


def check_in_period(x: torch.Tensor, period: float, center: float = 0.0) -> None:
    """Raise ``ValueError`` if any input lies farther than P/2 from ``center`` (Fourier features would wrap around).

    Parameters
    ----------
    x : torch.Tensor of any shape
        Scaled inputs.
    period : float
    center : float
        Centre of the accepted window [center − P/2, center + P/2].
    """
    half = 0.5 * float(period)
    offset = (x.detach() - float(center)).abs()
    outside = offset > half * (1.0 + 1e-10)
    if bool(outside.any()):
        worst = float(offset.max())
        raise ValueError(
            f"{int(outside.sum())} input value(s) lie outside the Fourier period interval "
            f"[{center - half:.6g}, {center + half:.6g}] (farthest {worst:.6g} from {center:g} in the model's scaled "
            f"units). Fourier features with period P = {float(period):.6g} are periodic, so these inputs would be "
            f"read as points wrapped around the period — silently wrong predictions. Fix: refit with a larger period "
            f"(P > 2·{worst:.6g}), or keep queries closer to the training range."
        )


def fourier_features(x: torch.Tensor, num_basis: int, period: float) -> torch.Tensor:
    """Unquantized Fourier features ``exp(i 2π k x / P)`` of a 1-D input.

    Parameters
    ----------
    x : torch.Tensor of shape (n,)
    num_basis : int
        M.
    period : float
        P.

    Returns
    -------
    torch.Tensor of shape (n, M), complex (complex128 for float64 inputs)
    """
    period = _check_period(period)
    k = fourier_frequencies(num_basis).to(device=x.device, dtype=x.dtype)
    return torch.polar(torch.ones((), dtype=x.dtype, device=x.device), (2 * math.pi / period) * x.unsqueeze(-1) * k)


def polynomial_features(x: torch.Tensor, num_basis: int) -> torch.Tensor:
    """Pure powers ``[1, x, …, x^{M−1}]`` of a 1-D input.

    Parameters
    ----------
    x : torch.Tensor of shape (n,)
    num_basis : int

    Returns
    -------
    torch.Tensor of shape (n, M)
    """
    powers = torch.arange(_check_num_basis(num_basis), dtype=x.dtype, device=x.device)
    return x.unsqueeze(-1) ** powers


def quantized_factor_sizes(num_basis: int) -> list[int]:
    """Factor sizes ``q_1 ≤ … ≤ q_K`` with ``Π q_m = M`` (the sorted prime factorisation; all 2 for M = 2^K)."""
    return prime_factors(_check_num_basis(num_basis))


def quantized_factors(x: torch.Tensor, num_basis: int, kind: str = "fourier", period: float | None = None
                      ) -> list[torch.Tensor]:
    """The K factors of the quantized Fourier or polynomial features, digit 1 (fastest) first.

    Parameters
    ----------
    x : torch.Tensor of shape (n,)
    num_basis : int
        M (any integer ≥ 2; its prime factorisation sets the factor sizes).
    kind : {"fourier", "polynomial"}
    period : float
        P, required for ``kind="fourier"``.

    Returns
    -------
    list of K torch.Tensor of shape (n, q_m)
        ``kron_rows(factors)`` equals :func:`fourier_features` / :func:`polynomial_features` exactly (up to
        rounding).
    """
    return [quantized_factor(x, num_basis, index, kind, period)
            for index in range(len(quantized_factor_sizes(num_basis)))]


def quantized_factor(x: torch.Tensor, num_basis: int, index: int, kind: str = "fourier",
                     period: float | None = None) -> torch.Tensor:
    """Factor ``index`` (0 = digit 1, the fastest) of :func:`quantized_factors`, computed alone.

    Parameters
    ----------
    x : torch.Tensor of shape (n,)
    num_basis : int
    index : int
        0 ≤ index < K.
    kind : {"fourier", "polynomial"}
    period : float
        P, required for ``kind="fourier"``.

    Returns
    -------
    torch.Tensor of shape (n, q_index)
    """
    if kind not in FEATURE_KINDS:
        raise ValueError(f"kind must be one of {FEATURE_KINDS}; got {kind!r}.")
    sizes = quantized_factor_sizes(num_basis)
    size, stride = sizes[index], math.prod(sizes[:index])
    digits = torch.arange(size, dtype=x.dtype, device=x.device) * stride
    if kind == "polynomial":
        return x.unsqueeze(-1) ** digits
    if period is None:
        raise ValueError("Fourier features need a period P.")
    period = _check_period(period)
    phases = (2 * math.pi / period) * x.unsqueeze(-1) * (digits - (num_basis // 2) / len(sizes))
    return torch.polar(torch.ones((), dtype=x.dtype, device=x.device), phases)


def kron_rows(factors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Row-wise Kronecker product with the *first* factor varying fastest.

    Parameters
    ----------
    factors : sequence of torch.Tensor of shape (n, q_m)

    Returns
    -------
    torch.Tensor of shape (n, Π q_m)
        Column ``Σ_m b_m s_m`` (``s_m = q_1 ⋯ q_{m−1}``) holds ``Π_m factors[m][:, b_m]``.
    """
    result = factors[0]
    for factor in factors[1:]:
        result = (factor.unsqueeze(-1) * result.unsqueeze(-2)).reshape(result.shape[0], -1)
    return result
