"""Where the package's warnings point: at the line of the caller's code that called into tnbayes.

A warning is raised deep inside a fit (a selection layer, a cost model, a chunked pass over the rows), and the call
path from the user's ``fit`` or ``posterior`` to it differs between models and between in-memory and chunked fits,
so no fixed ``stacklevel`` is right everywhere. :func:`warn_user` counts it at run time instead: it points at the
first frame outside the package (the user's line; scikit-learn's, when a Pipeline or a search made the call), so the
printed location and ``warnings.filterwarnings(module=...)`` refer to the caller's code. It belongs to no axis.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_user"]

_PACKAGE_PREFIX = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning]) -> None:
    """:func:`warnings.warn` with the ``stacklevel`` of the first frame outside tnbayes.

    Parameters
    ----------
    message : str
    category : type of Warning
    """
    frame, level = sys._getframe(1), 2  # stacklevel 2: the caller of this function
    while frame is not None and (_is_import_machinery(frame) or
                                 os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_PREFIX)):
        if not _is_import_machinery(frame):  # warnings.warn does not count those frames either
            level += 1
        frame = frame.f_back
    warnings.warn(message, category, stacklevel=level)


def _is_import_machinery(frame: object) -> bool:
    """Whether ``frame`` runs importlib's bootstrap code, which :func:`warnings.warn` skips when it counts."""
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename
