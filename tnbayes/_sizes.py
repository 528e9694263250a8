"""Refuse sizes that cannot fit before any work is done.

Every estimator estimates the bytes of its largest object from its parameters and the data's shape and calls
:func:`check_fits_in_memory` at the start of ``fit``, before any hyper-parameter search or allocation, so a huge
``num_basis`` or rank fails at once with the GiB it would need instead of after minutes of work or with the
allocator's message.

It belongs to no axis: every estimator calls it, whatever its basis, format and inference.
"""

from __future__ import annotations

import torch

from tnbayes._memory import available_memory_bytes

__all__ = ["check_fits_in_memory"]


def check_fits_in_memory(needed_bytes: int | float, what: str, remedy: str,
                         device: torch.device | str | None = None, *, fraction: float = 0.8) -> None:
    """Raise ``MemoryError`` when ``needed_bytes`` exceed ``fraction`` of the memory free on ``device``.

    Parameters
    ----------
    needed_bytes : int or float
        Estimated bytes of the largest object the fit will allocate (Python ints do not overflow).
    what : str
        What needs the memory, in the user's terms (e.g. ``"num_basis = 1000000 Hilbert basis functions"``).
    remedy : str
        How to fix it (e.g. ``"lower num_basis"``).
    device : torch.device or str, optional
        Where the object would live (CPU by default).
    fraction : float
        Share of the free memory that may be used.

    Raises
    ------
    MemoryError
        "<what> needs about X GiB but only Y GiB are free; <remedy>."
    """
    available = available_memory_bytes(device)
    if float(needed_bytes) > fraction * available:
        raise MemoryError(f"{what} needs about {float(needed_bytes) / 2**30:.3g} GiB but only "
                          f"{available / 2**30:.1f} GiB are free; {remedy}.")
