"""Where the package's warnings point: at the line of the caller's code that called into tnbayes.

A warning is raised deep inside a fit (a selection layer, a cost model, a chunked pass over the rows), and the call
path from the user's ``fit`` or ``posterior`` to it differs between models and between in-memory and chunked fits,
so no fixed ``stacklevel`` is right everywhere. :func:`warn_user` counts it at run time instead: it points at the
first frame outside the package (the user's line; scikit-learn's, when a Pipeline or a search made the call), so the
printed location is the caller's code. ``warnings.filterwarnings(module=...)`` therefore matches the caller's module;
filter tnbayes's warnings by category or message. It belongs to no axis.
"""

from __future__ import annotations

import sys
import warnings
from types import FrameType

__all__ = ["warn_user"]


def warn_user(message: str, category: type[Warning]) -> None:
    """:func:`warnings.warn` with the ``stacklevel`` of the first frame outside tnbayes.

    Parameters
    ----------
    message : str
        The warning's text.
    category : type of Warning
        Its class (e.g. ``sklearn.exceptions.ConvergenceWarning``).

    Notes
    -----
    Frames belong to tnbayes by their module's name. Frames of importlib's bootstrap are passed over without being
    counted, as :func:`warnings.warn` passes over them. When no frame outside tnbayes called (a module of the
    package run as a script), the warning points at the outermost tnbayes frame.
    """
    frame: FrameType | None = sys._getframe(1)
    level = 2  # stacklevel 2: the caller of this function
    while frame is not None:
        if _is_import_machinery(frame):
            frame = frame.f_back
            continue
        if not _in_package(frame):
            break
        if frame.f_back is None:  # nothing outside the package called: the outermost package frame
            break
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def _in_package(frame: FrameType) -> bool:
    """Whether ``frame`` runs code of a tnbayes module."""
    name = frame.f_globals.get("__name__", "")
    return name == "tnbayes" or name.startswith("tnbayes.")


def _is_import_machinery(frame: FrameType) -> bool:
    """Whether ``frame`` runs importlib's bootstrap code, which :func:`warnings.warn` skips when it counts."""
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename
