"""Choosing and checking the Hilbert-basis size (M) and box (L = c·S).

Rule of thumb of Riutort-Mayol, Bürkner, Andersen, Solin & Vehtari (2022), "Practical Hilbert space
approximate Bayesian Gaussian processes for probabilistic programming" (the rule PyMC's
``approx_hsgp_hyperparams`` implements). With S the half-range of the centred data and ℓ a lengthscale
in the same units::

    c = max(a1 · ℓ_max / S, 1.2)           boundary factor, L = c · S
    M = ⌈a2 · c / (ℓ_min / S)⌉             basis functions per dimension

    (a1, a2) = (3.2, 1.75) SE,  (4.1, 2.65) Matérn-5/2,  (4.5, 3.42) Matérn-3/2

Solving the same inequalities for ℓ gives the range of lengthscales a given (M, L) represents::

    ℓ ≥ a2 · L / M          (enough basis functions for the wiggles)
    ℓ ≤ L / a1              (box large enough that the Dirichlet boundary does not bite)

— the data half-range S cancels in both. :func:`check_hilbert_approximation` warns with
:class:`ApproximationWarning` when a (fitted) lengthscale leaves that range, or the box is smaller than
1.2 × the data half-range.

The rule aims at a *useful* approximation, not a GP-grade one: at its smallest box (c = 1.2) the kernel
error at the data edges is about 0.14 for ℓ/S = 0.2, because the eigenfunctions vanish at the box edge
(see ``benchmarks/results/hilbert_kernel_error/hilbert_kernel_error.md``). For SE the error is roughly the larger of the
boundary-image term ``exp(-(2(c-1)S/ℓ)²/2)`` and the spectral tail ``exp(-(πMℓ/(2L))²/2)``, so a
near-exact kernel (max error ≲ 1e-6) needs ``c ≳ 1 + 2.6 ℓ/S`` and ``M ≳ 3.4 L/ℓ``; e.g. ℓ = 0.2, S = 1:
c = 2, M = 32 gives 5e-7 and M = 64 gives 3e-15.

The paper gives no constants for Matérn-1/2 or other ν; both functions refuse those instead of guessing.
Note: PyMC truncates M with ``int()``; we round up (``ceil``) as the rule is a lower bound.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from .._validation import ArrayLike, check_inputs
from .._warnings import warn_user
from .hilbert import data_center_and_half_range
from .spectral import kernel_name

__all__ = [
    "ApproximationWarning",
    "HILBERT_RULE_CONSTANTS",
    "MIN_BOUNDARY_FACTOR",
    "MIN_DEFAULT_BOUNDARY_FACTOR",
    "NO_RULE_BOUNDARY_FACTOR",
    "LENGTHSCALE_RESOLUTION",
    "RULE_RELATIVE_SLACK",
    "hilbert_box",
    "resolvable_lengthscale",
    "HilbertParameters",
    "HilbertLengthscaleRange",
    "choose_hilbert_parameters",
    "hilbert_lengthscale_range",
    "check_hilbert_approximation",
]


class ApproximationWarning(UserWarning):
    """A low-rank kernel approximation (basis size, box) is likely inaccurate for the hyper-parameters used."""


#: ``kernel -> (a1, a2)`` of Riutort-Mayol et al. (2022).
HILBERT_RULE_CONSTANTS: dict[str, tuple[float, float]] = {
    "se": (3.2, 1.75),
    "matern52": (4.1, 2.65),
    "matern32": (4.5, 3.42),
}

#: Smallest boundary factor c = L / S the rule allows.
MIN_BOUNDARY_FACTOR = 1.2
#: Smallest boundary factor every model chooses by default (:func:`hilbert_box`): the rule allows 1.2, but test
#: inputs often lie a little beyond the training range, and the Dirichlet boundary pulls the function to zero
MIN_DEFAULT_BOUNDARY_FACTOR = 1.5
#: Default boundary factor for kernels without a published (M, c) rule (Matérn-1/2)
NO_RULE_BOUNDARY_FACTOR = 2.0
#: The tightened accuracy rule M ≥ LENGTHSCALE_RESOLUTION · c S / ℓ (see :func:`accurate_hilbert_parameters`)
LENGTHSCALE_RESOLUTION = 3.4
#: relative slack of the lengthscale range checks (:func:`check_hilbert_approximation`, CPDKernelMachine's raise to
#: the shortest resolvable lengthscale): a lengthscale fitted up to a bound of the range, computed elsewhere, lands on
#: it within round-off and satisfies the rule, so it is neither reported nor raised
RULE_RELATIVE_SLACK = 1e-6


class HilbertParameters(NamedTuple):
    """Result of :func:`choose_hilbert_parameters`; unpacks as ``num_basis, c, L = ...``.

    Attributes
    ----------
    num_basis : int
        M, the largest per-dimension requirement (one M serves all dimensions of a
        :class:`~tnbayes.basis.HilbertBasis`).
    c : numpy.ndarray of shape (D,)
        Boundary factor per dimension.
    L : numpy.ndarray of shape (D,)
        Box half-width per dimension, ``c * S`` (data units, around the data mid-range).
    """

    num_basis: int
    c: np.ndarray
    L: np.ndarray


class HilbertLengthscaleRange(NamedTuple):
    """Lengthscales a (M, L) pair represents well, per dimension (arrays of shape (D,))."""

    lengthscale_min: np.ndarray
    lengthscale_max: np.ndarray


def _rule_constants(kernel: str, nu: float | None) -> tuple[str, float, float]:
    name = kernel_name(kernel, nu)
    if name not in HILBERT_RULE_CONSTANTS:
        raise ValueError(
            f"The Riutort-Mayol et al. (2022) rule of thumb has constants only for 'se', 'matern52' and "
            f"'matern32'; got {name!r}. Choose M by checking convergence of the kernel matrix instead "
            f"(see benchmarks/papers/hilbert_kernel_error.py), or use the rule of the next-smoother kernel as a "
            f"starting point and increase M."
        )
    a1, a2 = HILBERT_RULE_CONSTANTS[name]
    return name, a1, a2


def _positive_array(value: float | Sequence[float] | np.ndarray | torch.Tensor, name: str) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value, dtype=float)).reshape(-1)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and positive; got {value!r}.")
    return arr


def choose_hilbert_parameters(
    X: ArrayLike | None = None,
    *,
    half_range: float | Sequence[float] | None = None,
    lengthscale_min: float | Sequence[float],
    lengthscale_max: float | Sequence[float] | None = None,
    kernel: str = "se",
    nu: float | None = None,
) -> HilbertParameters:
    """Choose (M, c, L) with the rule of thumb of Riutort-Mayol et al. (2022).

    Parameters
    ----------
    X : array-like of shape (N, D), optional
        Data (in the units the lengthscales are given in); its half-range per column is used as S.
        Give either ``X`` or ``half_range``.
    half_range : float or sequence of length D, optional
        S, the half-range of the centred data per dimension.
    lengthscale_min : float or sequence of length D
        Smallest lengthscale to represent accurately (drives M).
    lengthscale_max : float or sequence of length D, optional
        Largest lengthscale to represent (drives c). Defaults to ``lengthscale_min``.
    kernel : {"se", "matern52", "matern32"} (aliases such as "rbf" accepted)
    nu : float, optional
        Alternative spelling: ``kernel="matern", nu=2.5``.

    Returns
    -------
    HilbertParameters
        ``(num_basis, c, L)`` with ``c = max(a1 ℓ_max/S, 1.2)``, ``L = c·S``, ``M = max_d ⌈a2 c_d / (ℓ_min,d / S_d)⌉``.

    Examples
    --------
    >>> choose_hilbert_parameters(half_range=1.0, lengthscale_min=0.2)   # SE
    HilbertParameters(num_basis=11, c=array([1.2]), L=array([1.2]))
    """
    _, a1, a2 = _rule_constants(kernel, nu)
    if (X is None) == (half_range is None):
        raise ValueError("Give exactly one of X (data) or half_range (S per dimension).")
    if X is not None:
        _, S_t = data_center_and_half_range(check_inputs(X, name="X"))
        S = S_t.numpy()
    else:
        S = _positive_array(half_range, "half_range")
    ell_min = _positive_array(lengthscale_min, "lengthscale_min")
    ell_max = ell_min if lengthscale_max is None else _positive_array(lengthscale_max, "lengthscale_max")
    if np.any(ell_max < ell_min):
        raise ValueError(f"lengthscale_max ({ell_max.tolist()}) must be >= lengthscale_min ({ell_min.tolist()}).")
    S, ell_min, ell_max = np.broadcast_arrays(S, ell_min, ell_max)
    c = np.maximum(a1 * ell_max / S, MIN_BOUNDARY_FACTOR)
    # A tiny relative slack keeps exact products such as 1.75*1.2/0.2 = 10.5000000001 from rounding up.
    m_needed = np.ceil(a2 * c / (ell_min / S) * (1.0 - 1e-12))
    return HilbertParameters(num_basis=int(m_needed.max()), c=c.astype(float), L=(c * S).astype(float))


def hilbert_lengthscale_range(
    L: float | Sequence[float] | torch.Tensor,
    num_basis: int,
    kernel: str = "se",
    nu: float | None = None,
) -> HilbertLengthscaleRange:
    """Range of lengthscales that (M, L) represents according to the published rule.

    Parameters
    ----------
    L : float or sequence of length D
        Box half-widths (same units as the lengthscales).
    num_basis : int
        M.
    kernel, nu
        ``"se"``, ``"matern52"`` or ``"matern32"``.

    Returns
    -------
    HilbertLengthscaleRange
        ``lengthscale_min = a2 L / M`` and ``lengthscale_max = L / a1``, arrays of shape (D,).
    """
    _, a1, a2 = _rule_constants(kernel, nu)
    L_arr = _positive_array(L, "L")
    if int(num_basis) < 1:
        raise ValueError(f"num_basis must be a positive integer; got {num_basis!r}.")
    return HilbertLengthscaleRange(lengthscale_min=a2 * L_arr / int(num_basis), lengthscale_max=L_arr / a1)


def check_hilbert_approximation(
    lengthscale: float | Sequence[float] | torch.Tensor,
    L: float | Sequence[float] | torch.Tensor,
    num_basis: int,
    kernel: str = "se",
    nu: float | None = None,
    *,
    half_range: float | Sequence[float] | torch.Tensor | None = None,
    stacklevel: int | None = None,
) -> bool:
    """Warn (:class:`ApproximationWarning`) if the Hilbert approximation is likely inaccurate.

    Checks, per dimension, that ``a2·L/M <= ℓ <= L/a1`` (up to a relative :data:`RULE_RELATIVE_SLACK`) and — when
    ``half_range`` is given — that ``L >= 1.2 · half_range``.

    Parameters
    ----------
    lengthscale : float or sequence of length D (or a tensor with D values)
        The (fitted) lengthscale(s), in the units of ``L``.
    L : float or sequence of length D
        Box half-widths.
    num_basis : int
        M.
    kernel, nu
        ``"se"``, ``"matern52"`` or ``"matern32"``.
    half_range : float or sequence of length D, optional
        Half-range S of the training data, to check the box covers it with margin.
    stacklevel : int, optional
        Passed to :func:`warnings.warn`; None (default): the warning points at the first frame outside tnbayes.

    Returns
    -------
    bool
        True if every check passed (no warning issued).
    """
    name, _, _ = _rule_constants(kernel, nu)
    ell = _positive_array(lengthscale, "lengthscale")
    rng = hilbert_lengthscale_range(L, num_basis, kernel, nu)
    L_arr = _positive_array(L, "L")
    ell, lo, hi, L_arr = np.broadcast_arrays(ell, rng.lengthscale_min, rng.lengthscale_max, L_arr)
    problems: list[str] = []
    for d in np.flatnonzero(ell < lo * (1 - RULE_RELATIVE_SLACK)):
        need_m = math.ceil(HILBERT_RULE_CONSTANTS[name][1] * L_arr[d] / ell[d])
        problems.append(
            f"dimension {d}: lengthscale {ell[d]:.4g} is below the smallest lengthscale {lo[d]:.4g} that "
            f"num_basis={num_basis} basis functions on a box of half-width L={L_arr[d]:.4g} can represent; "
            f"use num_basis >= {need_m} (or a lower bound / prior on the lengthscale)"
        )
    for d in np.flatnonzero(ell > hi * (1 + RULE_RELATIVE_SLACK)):
        problems.append(
            f"dimension {d}: lengthscale {ell[d]:.4g} is above {hi[d]:.4g} = L/{HILBERT_RULE_CONSTANTS[name][0]}, "
            f"so the box (L={L_arr[d]:.4g}) is too small and the boundary distorts the kernel; use "
            f"L >= {HILBERT_RULE_CONSTANTS[name][0] * ell[d]:.4g} (a larger c), raising num_basis in proportion"
        )
    if half_range is not None:
        S = np.broadcast_to(_positive_array(half_range, "half_range"), L_arr.shape)
        for d in np.flatnonzero(L_arr < MIN_BOUNDARY_FACTOR * S):
            problems.append(
                f"dimension {d}: box half-width L={L_arr[d]:.4g} is less than {MIN_BOUNDARY_FACTOR} x the data "
                f"half-range {S[d]:.4g}; use c = L/S >= {MIN_BOUNDARY_FACTOR}"
            )
    if problems:
        message = f"Hilbert-space approximation of the {name} kernel is likely inaccurate: " + "; ".join(problems) + "."
        if stacklevel is None:
            warn_user(message, ApproximationWarning)
        else:
            warnings.warn(message, ApproximationWarning, stacklevel=stacklevel)
        return False
    return True


def accurate_hilbert_parameters(lengthscale: torch.Tensor, half_range: torch.Tensor,
                                kernel: str = "se") -> tuple[torch.Tensor, int]:
    """Per-dimension c (D,) and one M that represent ``lengthscale`` (D,) accurately: the published rule, tightened.

    The rule of Riutort-Mayol et al. (2022) targets a few per cent of kernel error; marginal-likelihood
    estimates of the output scale and mean then still drift (the Dirichlet boundary pulls the function
    to zero near the box). We also require c ≥ 1 + 2.6 ℓ/S and M ≥ 3.4 L/ℓ, which give near-exact SE
    kernels (see ``benchmarks/results/hilbert_kernel_error/hilbert_kernel_error.md``).

    Parameters
    ----------
    lengthscale : torch.Tensor of shape (D,)
    half_range : torch.Tensor of shape (D,)
        Half-range S of the data per dimension (positive).
    kernel : str
        A kernel with a published rule (SE, Matérn-3/2, Matérn-5/2).

    Returns
    -------
    c : torch.Tensor of shape (D,)
    num_basis : int
    """
    rule = choose_hilbert_parameters(half_range=half_range.tolist(), lengthscale_min=lengthscale.tolist(), kernel=kernel)
    ratio = (lengthscale / half_range).to(torch.float64)
    c = torch.maximum(torch.as_tensor(rule.c, dtype=torch.float64), 1.0 + 2.6 * ratio)
    m = max(rule.num_basis, int(math.ceil(float((LENGTHSCALE_RESOLUTION * c / ratio).max()))))
    return c, m


def hilbert_box(lengthscale: torch.Tensor, half_range: torch.Tensor, kernel: str = "se", *,
                c: float | Sequence[float] | torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
    """The box and basis size every Hilbert-basis model uses by default: c per input and the M it needs.

    ``c`` given: kept. Otherwise the tightened rule's c (:func:`accurate_hilbert_parameters`), at least
    :data:`MIN_DEFAULT_BOUNDARY_FACTOR`; for kernels without a published rule :data:`NO_RULE_BOUNDARY_FACTOR`.
    M is then what the shortest lengthscale needs in that box, ``max(rule M, ⌈3.4 c S/ℓ⌉)`` (for kernels without a
    rule, the SE rule's M). Models cap M by their own budget.

    Parameters
    ----------
    lengthscale : torch.Tensor of shape (D,) or (1,)
        Lengthscales in the units of ``half_range``.
    half_range : torch.Tensor of shape (D,)
        Half-range S of the training inputs per input (positive).
    kernel : str
        Kernel name (``"se"``, ``"matern32"``, ``"matern52"`` have rules).
    c : float, sequence of D floats or torch.Tensor, optional
        A given boundary factor (≥ 1).

    Returns
    -------
    c : torch.Tensor of shape (D,)
        Box half-width L = c·S per input (float64, on the CPU).
    num_basis : int
        M per input.
    """
    # a box is a handful of numbers: computed on the CPU whatever device the data live on
    half_range = torch.as_tensor(half_range, dtype=torch.float64, device="cpu").reshape(-1)
    num_dims = half_range.numel()
    lengthscale = torch.as_tensor(lengthscale, dtype=torch.float64, device="cpu").reshape(-1).expand(num_dims)
    rule = kernel if kernel in HILBERT_RULE_CONSTANTS else "se"
    rule_c, _ = accurate_hilbert_parameters(lengthscale, half_range, rule)
    if c is not None:
        box = torch.as_tensor(c, dtype=torch.float64).reshape(-1).expand(num_dims).clone()
    elif kernel in HILBERT_RULE_CONSTANTS:
        box = rule_c.clamp_min(MIN_DEFAULT_BOUNDARY_FACTOR)
    else:
        box = torch.full((num_dims,), NO_RULE_BOUNDARY_FACTOR, dtype=torch.float64)
    published = choose_hilbert_parameters(half_range=half_range.tolist(), lengthscale_min=lengthscale.tolist(),
                                          kernel=rule)
    ratio = lengthscale / half_range
    num_basis = max(published.num_basis, int(math.ceil(float((LENGTHSCALE_RESOLUTION * box / ratio).max()))))
    return box, num_basis


def resolvable_lengthscale(half_range: torch.Tensor, num_basis: int,
                           c: float | Sequence[float] | torch.Tensor | None = None) -> torch.Tensor:
    """Shortest lengthscale per input that M basis functions in the box c·S resolve: ``3.4 c S / M``.

    The models that borrow an exact GP's lengthscales bound its marginal-likelihood fit below by this, so that
    structure their basis cannot represent is explained as noise instead of by a lengthscale the basis would
    smooth away (the approximate kernel then loses its variance and the predictions shrink to the mean).

    Parameters
    ----------
    half_range : torch.Tensor of shape (D,)
        Half-range S of the training inputs (positive).
    num_basis : int
        The largest M the model will use.
    c : float, sequence of D floats or torch.Tensor, optional
        A given boundary factor; default :data:`MIN_DEFAULT_BOUNDARY_FACTOR` (the smallest default box).

    Returns
    -------
    torch.Tensor of shape (D,)
        float64, in the units of ``half_range``.
    """
    half_range = torch.as_tensor(half_range, dtype=torch.float64).reshape(-1)
    box = torch.as_tensor(MIN_DEFAULT_BOUNDARY_FACTOR if c is None else c, dtype=torch.float64).reshape(-1)
    return LENGTHSCALE_RESOLUTION * box * half_range / int(num_basis)
