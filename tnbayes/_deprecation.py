"""Renamed constructor parameters: the old name keeps working for two releases, with a ``FutureWarning``.

A model lists its renames in ``_renamed_parameters = {"old_name": "new_name"}`` and keeps the old name in its
``__init__`` signature with the default :data:`DEPRECATED` (so ``get_params``, ``set_params`` and ``clone`` see
both, as scikit-learn's own deprecations do). :meth:`tnbayes.models.base.BaseModel.fit` calls
:func:`apply_renamed_parameters` first: a value passed under the old name moves to the new one, and the rest of
the code reads only the new names.
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["DEPRECATED", "apply_renamed_parameters", "is_deprecated_default"]

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
        warnings.warn(f"{name}: the parameter {old!r} was renamed {new!r} in tnbayes {RENAMED_IN}; pass "
                      f"{new}={value!r} instead ({old!r} will be removed in {REMOVED_IN}).", FutureWarning,
                      stacklevel=3)
        setattr(estimator, new, value)
        setattr(estimator, old, DEPRECATED)


def _signature_default(klass: type, name: str) -> Any:
    import inspect

    for base in klass.__mro__:
        if "__init__" in vars(base):
            parameter = inspect.signature(base.__init__).parameters.get(name)
            if parameter is not None:
                return parameter.default
    return None
