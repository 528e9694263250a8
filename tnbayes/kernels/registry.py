"""Name registry for kernels: ``get_kernel("hilbert", num_basis=64, L=2.0)``.

Registered by default: ``"hilbert"`` (:class:`HilbertKernel`), ``"vff"`` (:class:`VFFKernel`) and the
exact GPyTorch baselines ``"rbf"`` (``RBFKernel``), ``"matern"`` (``MaternKernel``) and ``"rff"``
(``RFFKernel``). Names are case-insensitive.
"""

from __future__ import annotations

from collections.abc import Callable

from gpytorch.kernels import Kernel, MaternKernel, RBFKernel, RFFKernel

from tnbayes._registry import Registry

from .hilbert import HilbertKernel
from .vff import VFFKernel

__all__ = ["register_kernel", "get_kernel", "available_kernels"]

_REGISTRY: Registry[Callable[..., Kernel]] = Registry(
    "kernel", listing="Registered kernels", advice="Add one with register_kernel(name, cls).")


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
        If ``name`` is empty, or taken by another factory and ``overwrite`` is False.
    TypeError
        If ``factory`` is not callable.
    """
    if not callable(factory):
        raise TypeError(f"factory must be a Kernel class or a callable returning one; got {factory!r}.")
    _REGISTRY.register(name, factory, overwrite=overwrite)


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
    kernel = _REGISTRY.lookup(name)(**kwargs)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"The factory registered as {name!r} returned {type(kernel).__name__}, not a gpytorch Kernel.")
    return kernel


def available_kernels() -> list[str]:
    """Sorted list of registered kernel names."""
    return _REGISTRY.names()


for _name, _cls in (("hilbert", HilbertKernel), ("vff", VFFKernel), ("rbf", RBFKernel), ("matern", MaternKernel), ("rff", RFFKernel)):
    register_kernel(_name, _cls)
