"""Models by name, so ``tnbayes compare`` and the benchmarks can build them from strings."""

from __future__ import annotations

import difflib
from typing import Any, Callable

__all__ = ["register_model", "make_model", "list_models"]

_FACTORIES: dict[str, Callable[..., Any]] = {}


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
    """
    key = name.lower()
    if key in _FACTORIES and not overwrite and _FACTORIES[key] is not factory:
        raise ValueError(f"A model named {name!r} is already registered; pass overwrite=True to replace it.")
    _FACTORIES[key] = factory


def list_models() -> list[str]:
    """Names accepted by :func:`make_model`."""
    return sorted(_FACTORIES)


def make_model(name: str, **kwargs: Any) -> Any:
    """Build an unfitted model by name; unknown names raise ``ValueError`` with suggestions."""
    key = name.lower()
    if key not in _FACTORIES:
        close = difflib.get_close_matches(key, list(_FACTORIES), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"Unknown model {name!r}.{hint} Known models: {', '.join(list_models())}.")
    return _FACTORIES[key](**kwargs)
