"""Spectral densities of stationary 1-D kernels, as differentiable torch functions.

Convention (the one the Hilbert-space basis needs, and the one every test checks by quadrature)::

    k(r) = (1 / 2π) ∫ S(ω) exp(i ω r) dω ,        S(ω) = ∫ k(r) exp(-i ω r) dr

so that a unit-variance kernel has ``(1/2π) ∫ S(ω) dω = 1``. With this convention

- squared exponential (SE / RBF), lengthscale ℓ::

      S(ω) = σ² √(2π) ℓ exp(-ω² ℓ² / 2)

- Matérn-ν, lengthscale ℓ (``k(r) = σ² 2^{1-ν}/Γ(ν) (√(2ν) r/ℓ)^ν K_ν(√(2ν) r/ℓ)``, as in GPyTorch)::

      S(ω) = σ² 2 √π Γ(ν+½) (2ν)^ν / (Γ(ν) ℓ^{2ν}) · (2ν/ℓ² + ω²)^{-(ν+½)}

All functions work in log space (``lgamma``) so that general ν and extreme frequencies neither overflow
nor produce NaN gradients, broadcast ``omega`` against ``lengthscale``, and are differentiable in
``lengthscale`` (and ``outputscale``).

A D-dimensional *product* kernel has the product of the 1-D densities; the Hilbert basis handles that by
keeping per-dimension features, so only 1-D densities are needed here.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "KERNEL_ALIASES",
    "resolve_kernel",
    "kernel_name",
    "se_log_spectral_density",
    "matern_log_spectral_density",
    "log_spectral_density",
    "spectral_density",
    "sqrt_spectral_density",
    "stationary_kernel",
]

#: Accepted spellings of kernel names, mapped to ``(family, nu)``; ``nu`` is ``None`` for SE.
KERNEL_ALIASES: dict[str, tuple[str, float | None]] = {
    "se": ("se", None),
    "rbf": ("se", None),
    "expquad": ("se", None),
    "squared_exponential": ("se", None),
    "gaussian": ("se", None),
    "matern12": ("matern", 0.5),
    "exponential": ("matern", 0.5),
    "matern32": ("matern", 1.5),
    "matern52": ("matern", 2.5),
    "matern": ("matern", None),  # needs an explicit nu
}


def resolve_kernel(kernel: str = "se", nu: float | None = None) -> tuple[str, float | None]:
    """Normalise a kernel name (and optional smoothness) to ``(family, nu)``.

    Parameters
    ----------
    kernel : str
        One of ``"se"`` (aliases ``"rbf"``, ``"expquad"``, ``"squared_exponential"``, ``"gaussian"``),
        ``"matern12"`` (alias ``"exponential"``), ``"matern32"``, ``"matern52"`` or ``"matern"``
        (then ``nu`` is required). Case-insensitive; ``-`` and ``/`` are ignored (``"Matern-5/2"`` works).
    nu : float, optional
        Matérn smoothness ν > 0. Required for ``kernel="matern"``; for the named Matérn variants it
        must agree with the name if given. Must be ``None`` for SE.

    Returns
    -------
    family : {"se", "matern"}
    nu : float or None
        ``None`` for SE, the smoothness for Matérn.

    Raises
    ------
    ValueError
        Unknown name, missing/invalid ``nu``, or a ``nu`` that contradicts the name.
    """
    if not isinstance(kernel, str):
        raise TypeError(f"kernel must be a string such as 'se' or 'matern52'; got {type(kernel).__name__}.")
    key = kernel.lower().replace("-", "").replace("/", "").replace(" ", "")
    if key not in KERNEL_ALIASES:
        raise ValueError(
            f"Unknown kernel {kernel!r}. Use one of {sorted(KERNEL_ALIASES)} "
            f"(for a general Matérn smoothness use kernel='matern', nu=<value>)."
        )
    family, named_nu = KERNEL_ALIASES[key]
    if family == "se":
        if nu is not None:
            raise ValueError(
                f"nu={nu!r} was given for the squared-exponential kernel {kernel!r}, which has no "
                f"smoothness parameter. Drop nu, or use kernel='matern'."
            )
        return "se", None
    if named_nu is None:
        if nu is None:
            raise ValueError(
                "kernel='matern' needs a smoothness: pass nu=0.5, 1.5, 2.5 or any positive value."
            )
        nu_f = float(nu)
        if not (math.isfinite(nu_f) and nu_f > 0):
            raise ValueError(f"Matérn smoothness nu must be a finite positive number; got {nu!r}.")
        return "matern", nu_f
    if nu is not None and float(nu) != named_nu:
        raise ValueError(
            f"kernel={kernel!r} means nu={named_nu}, but nu={nu!r} was also given. Pass only one, "
            f"or use kernel='matern', nu={nu!r}."
        )
    return "matern", named_nu


def kernel_name(kernel: str = "se", nu: float | None = None) -> str:
    """Canonical short name: ``"se"``, ``"matern12"``, ``"matern32"``, ``"matern52"`` or ``"matern(ν)"``."""
    family, nu_f = resolve_kernel(kernel, nu)
    if family == "se":
        return "se"
    named = {0.5: "matern12", 1.5: "matern32", 2.5: "matern52"}
    return named.get(nu_f, f"matern({nu_f:g})")


def _as_tensor(value: float | torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if like is not None:
        return torch.as_tensor(value, dtype=like.dtype, device=like.device)
    return torch.as_tensor(value, dtype=torch.get_default_dtype())


def _common(omega: float | torch.Tensor, lengthscale: float | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ref = omega if isinstance(omega, torch.Tensor) else (lengthscale if isinstance(lengthscale, torch.Tensor) else None)
    omega_t = _as_tensor(omega, ref)
    ls_t = _as_tensor(lengthscale, omega_t)
    dtype = torch.promote_types(omega_t.dtype, ls_t.dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    return omega_t.to(dtype), ls_t.to(dtype)


def se_log_spectral_density(omega: float | torch.Tensor, lengthscale: float | torch.Tensor) -> torch.Tensor:
    """Log spectral density of the unit-variance 1-D squared-exponential kernel,
    ``log S(ω) = ½ log(2π) + log ℓ - ω² ℓ² / 2``, of the broadcast shape of ``omega`` (...) and ``lengthscale``
    (see :func:`spectral_density` for the arguments)."""
    omega_t, ls = _common(omega, lengthscale)
    return 0.5 * math.log(2.0 * math.pi) + torch.log(ls) - 0.5 * (omega_t * ls) ** 2


def matern_log_spectral_density(omega: float | torch.Tensor, lengthscale: float | torch.Tensor,
                                nu: float) -> torch.Tensor:
    """Log spectral density of the unit-variance 1-D Matérn-ν kernel (any ν > 0), of the broadcast shape of
    ``omega`` (...) and ``lengthscale`` (see :func:`spectral_density` for the arguments)::

        log S(ω) = log 2 + ½ log π + lgamma(ν+½) + ν log(2ν) - lgamma(ν) - 2ν log ℓ - (ν+½) log(2ν/ℓ² + ω²)

    ``nu``, the smoothness ν > 0: 0.5, 1.5, 2.5 are the usual choices; any positive value works.
    """
    nu_f = float(nu)
    if not (math.isfinite(nu_f) and nu_f > 0):
        raise ValueError(f"Matérn smoothness nu must be a finite positive number; got {nu!r}.")
    omega_t, ls = _common(omega, lengthscale)
    log_const = (
        math.log(2.0)
        + 0.5 * math.log(math.pi)
        + math.lgamma(nu_f + 0.5)
        + nu_f * math.log(2.0 * nu_f)
        - math.lgamma(nu_f)
    )
    log_ls = torch.log(ls)
    # log(2ν/ℓ² + ω²) = log(2ν + ω²ℓ²) - 2 log ℓ: stays finite for tiny ℓ and huge ω.
    log_bracket = torch.log(2.0 * nu_f + (omega_t * ls) ** 2) - 2.0 * log_ls
    return log_const - 2.0 * nu_f * log_ls - (nu_f + 0.5) * log_bracket


def log_spectral_density(omega: float | torch.Tensor, lengthscale: float | torch.Tensor, kernel: str = "se",
                         nu: float | None = None, outputscale: float | torch.Tensor = 1.0) -> torch.Tensor:
    """Log spectral density ``log S(ω)`` of a named 1-D kernel; see :func:`spectral_density`."""
    family, nu_f = resolve_kernel(kernel, nu)
    if family == "se":
        log_s = se_log_spectral_density(omega, lengthscale)
    else:
        log_s = matern_log_spectral_density(omega, lengthscale, nu_f)
    if isinstance(outputscale, torch.Tensor) or float(outputscale) != 1.0:
        log_s = log_s + torch.log(_as_tensor(outputscale, log_s))
    return log_s


def spectral_density(omega: float | torch.Tensor, lengthscale: float | torch.Tensor, kernel: str = "se",
                     nu: float | None = None, outputscale: float | torch.Tensor = 1.0) -> torch.Tensor:
    """Spectral density ``S(ω)`` of a 1-D stationary kernel (convention in the module docstring).

    Parameters
    ----------
    omega : float or torch.Tensor of shape (...)
        Angular frequencies ω.
    lengthscale : float or torch.Tensor broadcastable with ``omega``
        Lengthscale ℓ > 0 (differentiable).
    kernel : str
        ``"se"``/``"rbf"``, ``"matern12"``, ``"matern32"``, ``"matern52"`` or ``"matern"`` with ``nu``.
    nu : float, optional
        Matérn smoothness for ``kernel="matern"``.
    outputscale : float or torch.Tensor
        Kernel variance σ² (multiplies S). Default 1.

    Returns
    -------
    torch.Tensor of the broadcast shape

    Examples
    --------
    >>> import torch
    >>> s = spectral_density(torch.tensor([0.0, 1.0]), 0.5, kernel="matern52")
    """
    return torch.exp(log_spectral_density(omega, lengthscale, kernel, nu, outputscale))


def sqrt_spectral_density(omega: float | torch.Tensor, lengthscale: float | torch.Tensor, kernel: str = "se",
                          nu: float | None = None, outputscale: float | torch.Tensor = 1.0) -> torch.Tensor:
    """``√S(ω)``, computed as ``exp(½ log S)`` so that underflow gives 0 with a zero (not NaN) gradient.

    Shapes and arguments as in :func:`spectral_density`.
    """
    return torch.exp(0.5 * log_spectral_density(omega, lengthscale, kernel, nu, outputscale))


def stationary_kernel(
    r: float | torch.Tensor,
    lengthscale: float | torch.Tensor,
    kernel: str = "se",
    nu: float | None = None,
) -> torch.Tensor:
    """Exact unit-variance 1-D kernel ``k(r)`` for the half-integer Matérn and SE cases.

    A small dense reference used by diagnostics, benchmarks and tests (general ν needs the modified
    Bessel function; use ``scipy.special.kv`` for that).

    Parameters
    ----------
    r : float or torch.Tensor of shape (...)
        Distances ``x - x'`` (sign is ignored).
    lengthscale : float or torch.Tensor broadcastable with ``r``
    kernel, nu
        As in :func:`resolve_kernel`; ν must be 0.5, 1.5 or 2.5 for Matérn.

    Returns
    -------
    torch.Tensor of the broadcast shape
    """
    family, nu_f = resolve_kernel(kernel, nu)
    r_t, ls = _common(r, lengthscale)
    d = r_t.abs() / ls
    if family == "se":
        return torch.exp(-0.5 * d**2)
    if nu_f == 0.5:
        return torch.exp(-d)
    if nu_f == 1.5:
        s = math.sqrt(3.0) * d
        return (1.0 + s) * torch.exp(-s)
    if nu_f == 2.5:
        s = math.sqrt(5.0) * d
        return (1.0 + s + s**2 / 3.0) * torch.exp(-s)
    raise ValueError(
        f"stationary_kernel supports SE and Matérn nu in {{0.5, 1.5, 2.5}}; got nu={nu_f}. "
        f"For general nu evaluate 2^(1-nu)/Gamma(nu) (sqrt(2 nu) r/l)^nu K_nu(sqrt(2 nu) r/l) with scipy."
    )
