"""The exact quantization of Fourier and pure-power polynomial features (Wesel & Batselier 2024; the *basis* axis).

The unquantized features of one input dimension (:mod:`tnbayes.basis.fourier`, :mod:`tnbayes.basis.polynomial`)::

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
(:class:`tnbayes.basis.FourierPolynomialFeatures`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from tnbayes.tensors.shapes import prime_factors

from ._checks import check_num_basis, check_period
from .fourier import check_in_period, fourier_features, fourier_frequencies  # noqa: F401 - their old home
from .polynomial import polynomial_features  # noqa: F401 - its old home

__all__ = [
    "FEATURE_KINDS",
    "quantized_factor",
    "quantized_factor_sizes",
    "quantized_factors",
    "kron_rows",
]

#: the feature families of :class:`FourierPolynomialFeatures`
FEATURE_KINDS = ("fourier", "polynomial")


def quantized_factor_sizes(num_basis: int) -> list[int]:
    """Factor sizes ``q_1 ≤ … ≤ q_K`` with ``Π q_m = M`` (the sorted prime factorisation; all 2 for M = 2^K)."""
    return prime_factors(check_num_basis(num_basis))


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
    period = check_period(period)
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
