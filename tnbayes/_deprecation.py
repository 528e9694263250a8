"""Renamed or moved public names: the old spelling keeps working for two releases, with a ``FutureWarning``.

Two kinds of names change:

- **constructor parameters** (below);
- **module-level names** that moved to another module or were renamed: the old module gets a PEP 562 module
  ``__getattr__`` built by :func:`moved_names_getattr`, e.g.
  ``__getattr__ = moved_names_getattr(__name__, {"REGULARIZERS": ("tnbayes.inference.als", "PENALTY_FORMS")})``.

Constructor parameters:

A model lists its renames in ``_renamed_parameters = {"old_name": "new_name"}`` and keeps the old name in its
``__init__`` signature with the default :data:`DEPRECATED` (so ``get_params``, ``set_params`` and ``clone`` see
both, as scikit-learn's own deprecations do). :meth:`tnbayes.models.base.BaseModel.fit` calls
:func:`apply_renamed_parameters` first: a value passed under the old name moves to the new one, and the rest of
the code reads only the new names.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from tnbayes._warnings import warn_user

__all__ = ["DEPRECATED", "apply_renamed_parameters", "is_deprecated_default", "moved_names_getattr", "renamed_attribute"]

#: the default of a renamed parameter's old name: "not passed"
DEPRECATED = "deprecated"
#: the release that renamed them, and the one that will drop the old names
RENAMED_IN, REMOVED_IN = "0.2", "0.4"


def is_deprecated_default(value: Any) -> bool:
    """Whether ``value`` is the :data:`DEPRECATED` placeholder (the old name was not passed)."""
    return isinstance(value, str) and value == DEPRECATED


def apply_renamed_parameters(estimator: Any) -> None:
    """Move values passed under renamed parameters' old names to their new names, warning once per name.

    Parameters
    ----------
    estimator : object
        An estimator with a ``_renamed_parameters`` mapping ``{old_name: new_name}`` (possibly empty).

    Raises
    ------
    TypeError
        When both the old and the new name were set to different values.
    """
    for old, new in getattr(type(estimator), "_renamed_parameters", {}).items():
        value = getattr(estimator, old, DEPRECATED)
        if is_deprecated_default(value):
            continue
        name = type(estimator).__name__
        default = _signature_default(type(estimator), new)
        current = getattr(estimator, new)
        if current is not default and current != default and current != value:
            raise TypeError(f"{name} got both {old}={value!r} (its old name) and {new}={current!r}; pass only "
                            f"{new}={value!r}.")
        warn_user(f"{name}: the parameter {old!r} was renamed {new!r} in tnbayes {RENAMED_IN}; pass "
                  f"{new}={value!r} instead ({old!r} will be removed in {REMOVED_IN}).", FutureWarning)
        setattr(estimator, new, value)
        setattr(estimator, old, DEPRECATED)


def _signature_default(klass: type, name: str) -> Any:
    for base in klass.__mro__:
        if "__init__" in vars(base):
            parameter = inspect.signature(base.__init__).parameters.get(name)
            if parameter is not None:
                return parameter.default
    return None


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
        warn_user(f"{module_name}.{name} {change} will be removed in {REMOVED_IN}).", FutureWarning)
        return getattr(importlib.import_module(home), new)

    return __getattr__


def renamed_attribute(old: str, new: str) -> property:
    """A class attribute that keeps a renamed attribute's old name working: reading it warns (``FutureWarning``)
    and returns ``new``; setting it (a model file saved before the rename restores the old name) sets ``new``.

    Parameters
    ----------
    old, new : str
        The attribute's old and new names.

    Returns
    -------
    property
        To assign in the class body: ``alpha_ = renamed_attribute("alpha_", "penalty_")``.
    """

    def get(self: Any) -> Any:
        warn_user(f"{type(self).__name__}.{old} was renamed {new} in tnbayes {RENAMED_IN} (the old name will be "
                  f"removed in {REMOVED_IN}).", FutureWarning)
        return getattr(self, new)

    def set_(self: Any, value: Any) -> None:
        setattr(self, new, value)

    return property(get, set_, doc=f"Deprecated alias of ``{new}`` (FutureWarning).")
