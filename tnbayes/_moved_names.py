"""Public module-level names that moved to another module or were renamed: the old spelling keeps working for two
releases, with a ``FutureWarning`` (constructor parameters are :mod:`tnbayes._deprecation`'s business).

A module lists its old names and hands Python a module ``__getattr__`` (PEP 562) built here::

    __getattr__ = moved_names_getattr(__name__, {"REGULARIZERS": ("tnbayes.inference.als", "PENALTY_FORMS")})
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from tnbayes._deprecation import REMOVED_IN, RENAMED_IN

__all__ = ["moved_names_getattr"]


def moved_names_getattr(module_name: str, moved: Mapping[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that serves old names from their new home, warning once per access.

    Parameters
    ----------
    module_name : str
        The module that used to hold the names (its ``__name__``).
    moved : mapping of str to (str, str)
        ``{old_name: (new_module, new_name)}``; the new module may be ``module_name`` itself (a renamed constant).

    Returns
    -------
    callable
        ``__getattr__(name)``: the object now at ``new_module.new_name`` for an old name (with a ``FutureWarning``),
        ``AttributeError`` for any other name.
    """

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        home, new = moved[name]
        if new == name:
            change = f"moved to {home}.{new} in tnbayes {RENAMED_IN}; import it from there (the old path"
        else:
            change = f"was renamed {new} ({home}.{new}) in tnbayes {RENAMED_IN}; use the new name (the old one"
        warnings.warn(f"{module_name}.{name} {change} will be removed in {REMOVED_IN}).", FutureWarning, stacklevel=2)
        return getattr(importlib.import_module(home), new)

    return __getattr__
