"""Argument checks shared by the Fourier, polynomial and quantized feature families (the *basis* axis)."""

from __future__ import annotations

import math


def check_num_basis(num_basis: int) -> int:
    """``int(num_basis)`` when it is an integer M ≥ 2 (every Fourier/polynomial family needs two features), else raise."""
    if isinstance(num_basis, bool) or int(num_basis) != num_basis or int(num_basis) < 2:
        raise ValueError(f"num_basis (M) must be an integer >= 2; got {num_basis!r}.")
    return int(num_basis)


def check_period(period: float) -> float:
    """``float(period)`` when it is a finite P > 0, else raise."""
    period = float(period)
    if not math.isfinite(period) or period <= 0:
        raise ValueError(f"period P must be a finite number > 0; got {period!r}.")
    return period
