"""Name registry for kernels: ``get_kernel("hilbert", num_basis=64, L=2.0)``.

Registered by default: ``"hilbert"`` (:class:`HilbertKernel`), ``"vff"`` (:class:`VFFKernel`) and the
exact GPyTorch baselines ``"rbf"`` (``RBFKernel``), ``"matern"`` (``MaternKernel``) and ``"rff"``
(``RFFKernel``). Names are case-insensitive.
"""

from __future__ import annotations

from collections.abc import Callable

from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, RFFKernel

from .hilbert import HilbertKernel
from .vff import VFFKernel

__all__ = ["register_kernel", "get_kernel", "available_kernels"]

_REGISTRY: dict[str, Callable[..., Kernel]] = {}


def register_kernel(name: str, factory: Callable[..., Kernel], *, overwrite: bool = False) -> None:
    """Register a kernel class (or factory) under ``name``.

    Parameters
    ----------
    name : str
        Lookup name (case-insensitive).
    factory : callable returning a ``gpytorch.kernels.Kernel``
        Usually the class itself.
    overwrite : bool
        Replace an existing registration instead of raising.

    Raises
    ------
    ValueError
        If ``name`` is taken and ``overwrite`` is False.
    TypeError
        If ``factory`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"Kernel name must be a non-empty string; got {name!r}.")
    if not callable(factory):
        raise TypeError(f"factory must be a Kernel class or a callable returning one; got {factory!r}.")
    key = name.lower()
    if key in _REGISTRY and not overwrite:
        raise ValueError(f"A kernel named {name!r} is already registered ({_REGISTRY[key]!r}); pass overwrite=True to replace it.")
    _REGISTRY[key] = factory


def get_kernel(name: str, **kwargs) -> Kernel:
    """Build a registered kernel: ``get_kernel(name, **kwargs)`` calls ``factory(**kwargs)``.

    Parameters
    ----------
    name : str
        A registered name (see :func:`available_kernels`).
    **kwargs
        Constructor arguments.

    Returns
    -------
    gpytorch.kernels.Kernel
    """
    key = name.lower() if isinstance(name, str) else name
    if key not in _REGISTRY:
        raise ValueError(f"Unknown kernel {name!r}. Registered kernels: {available_kernels()}. Add one with register_kernel(name, cls).")
    kernel = _REGISTRY[key](**kwargs)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"The factory registered as {name!r} returned {type(kernel).__name__}, not a gpytorch Kernel.")
    return kernel


def available_kernels() -> list[str]:
    """Sorted list of registered kernel names."""
    return sorted(_REGISTRY)


for _name, _cls in (("hilbert", HilbertKernel), ("vff", VFFKernel), ("rbf", RBFKernel), ("matern", MaternKernel), ("rff", RFFKernel)):
    register_kernel(_name, _cls)
