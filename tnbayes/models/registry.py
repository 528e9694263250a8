"""The one model registry: models by the name users type, and model classes by their class name.

Two lookups of the same registry, both :class:`tnbayes._registry.Registry` maps:

* by name (``"cpd"``, ``"exact_gp_matern"``): a factory, so ``tnbayes compare``, the CLI and the benchmarks build
  models from strings (:func:`register_model`, :func:`make_model`, :func:`list_models`);
* by class name (``"CPDKernelMachine"``): every :class:`~tnbayes.models.base.BaseModel` subclass, entered when the
  class is defined, so :meth:`~tnbayes.models.base.BaseModel.load` rebuilds the class a file names and ``fit``
  can say which models take chunked data (:func:`register_model_class`, :func:`model_class`,
  :func:`chunked_fit_models`).
"""

from __future__ import annotations

from typing import Any, Callable

from tnbayes._registry import Registry

__all__ = ["register_model", "make_model", "list_models", "register_model_class", "model_class",
           "chunked_fit_models"]

#: lower-case name → factory returning an unfitted estimator
_FACTORIES: Registry[Callable[..., Any]] = Registry("model")
#: class name → BaseModel subclass (case-sensitive: the name stored in model files)
_CLASSES: Registry[type] = Registry("model class", case_sensitive=True)


def register_model(name: str, factory: Callable[..., Any], *, overwrite: bool = False) -> None:
    """Make a model available by name.

    Parameters
    ----------
    name : str
        Lower-case name used on the command line (e.g. ``"exact_gp"``).
    factory : callable
        ``factory(**kwargs)`` returns an unfitted estimator (a class works).
    overwrite : bool
        Replace an existing entry instead of raising.

    Raises
    ------
    ValueError
        If ``name`` is taken by another factory and ``overwrite`` is False.
    TypeError
        If ``factory`` is not callable.
    """
    if not callable(factory):
        raise TypeError(f"factory must be a model class or a callable returning a model; got {factory!r}.")
    _FACTORIES.register(name, factory, overwrite=overwrite)


def list_models() -> list[str]:
    """Names accepted by :func:`make_model`.

    Returns
    -------
    list of str
        Sorted.
    """
    return _FACTORIES.names()


def make_model(name: str, **kwargs: Any) -> Any:
    """Build an unfitted model by name; unknown names raise ``ValueError`` with suggestions.

    Parameters
    ----------
    name : str
        A name from :func:`list_models` (case-insensitive).
    **kwargs
        Constructor arguments.

    Returns
    -------
    BaseModel
        An unfitted estimator.
    """
    return _FACTORIES.lookup(name)(**kwargs)


def register_model_class(cls: type) -> None:
    """Enter a model class under its class name (``BaseModel.__init_subclass__`` calls it for every subclass).

    A later class of the same name replaces the earlier one, as redefining a class does.

    Parameters
    ----------
    cls : type
        A :class:`~tnbayes.models.base.BaseModel` subclass.
    """
    _CLASSES.register(cls.__name__, cls, overwrite=True)


def model_class(class_name: str) -> type | None:
    """The model class of that name, or ``None`` when this tnbayes has none (e.g. a file from another version).

    Parameters
    ----------
    class_name : str
        A class name as stored in a model file.

    Returns
    -------
    type or None
    """
    return _CLASSES.get(class_name) if isinstance(class_name, str) else None


def chunked_fit_models() -> list[str]:
    """Names of the model classes whose ``fit`` accepts chunk sources and ``distributed=True``.

    Returns
    -------
    list of str
        Sorted class names.
    """
    return sorted(name for name, klass in _CLASSES.items() if getattr(klass, "supports_chunked_fit", False))
