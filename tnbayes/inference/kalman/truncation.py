"""How the TT Kalman filters round: a relative tolerance and a rank cap per filtered quantity (the *inference* axis).

:class:`Truncation` parses the forms users pass (a tolerance, a ``(tol, max_rank)`` pair, a dict);
:data:`TRUNCATED_QUANTITIES` names what the row-by-row filter (:class:`~tnbayes.inference.kalman.TTKalmanFilter`)
rounds after every update.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["TRUNCATED_QUANTITIES", "Truncation"]

#: quantities of the TT filter that are rounded after every update (see ``Truncation``)
TRUNCATED_QUANTITIES = ("mean", "row", "covariance", "gain", "innovation")


@dataclass(frozen=True)
class Truncation:
    """Relative tolerance and maximum TT rank of one rounded quantity.

    Attributes
    ----------
    tol : float
        Relative rounding accuracy (0: exact up to round-off).
    max_rank : int or None
        Cap on every TT rank (None: no cap).
    """

    tol: float = 0.0
    max_rank: int | None = None

    @classmethod
    def parse(cls, spec: "Truncation | float | tuple | Mapping | None") -> "Truncation":
        """From a ``Truncation``, a tolerance, a ``(tol, max_rank)`` pair or a dict with those keys."""
        if spec is None:
            return cls()
        if isinstance(spec, Truncation):
            return spec
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            out = cls(float(spec), None)
        elif isinstance(spec, (tuple, list)) and len(spec) == 2:
            out = cls(float(spec[0]), None if spec[1] is None else int(spec[1]))
        elif isinstance(spec, Mapping):
            out = cls(float(spec.get("tol", 0.0)), None if spec.get("max_rank") is None else int(spec["max_rank"]))
        else:
            raise ValueError(f"A truncation is a tolerance, (tol, max_rank) or {{'tol':…, 'max_rank':…}}; got {spec!r}.")
        if not (0.0 <= out.tol < 1.0) or (out.max_rank is not None and out.max_rank < 1):
            raise ValueError(f"Truncation tolerance must be in [0, 1) and max_rank >= 1; got {spec!r}.")
        return out

    def for_block(self, batch: int) -> "Truncation":
        """The rule for a block of ``batch`` columns (block TTs of :mod:`tnbayes.tensors.tt_block`): the same
        tolerance, the rank cap raised by ``batch`` (the last bond of a block carries its columns)."""
        return Truncation(self.tol, None if self.max_rank is None else self.max_rank + int(batch))
