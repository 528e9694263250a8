"""A deadline for a filter's stream of rows, beside the cost models of :mod:`tnbayes.inference.budget` (the
*inference* axis).

The time budget plans how many rows a Kalman filter streams from a cost model fitted on one machine; on a slower or
busier machine the same rows take longer, and the fit ends past its budget by the same factor. :class:`StreamDeadline`
holds the plan to the clock: every :data:`DEADLINE_CHECK_ROWS` rows it measures the seconds per row of the recent
rows and, where the rows still planned would end past the deadline, lowers the rows to stream to those that fit
(never below a floor, and never raised again). The pace is the fastest of the last :data:`DEADLINE_PACE_INTERVALS`
intervals, so that one slow interval — a new chunk's kernel rows computed at once, a moment's load — does not cut
rows: only a pace that holds does. :func:`evenly_spaced_rest` picks which of the remaining rows those
are: spread evenly over the rest of the stream, so that a stream in a meaningful order (sorted inputs, a time
series) still reaches its end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

__all__ = ["DEADLINE_CHECK_ROWS", "DEADLINE_GRACE", "DEADLINE_PACE_INTERVALS", "StreamDeadline", "evenly_spaced_rest"]

#: rows between two measurements of the stream's seconds per row
DEADLINE_CHECK_ROWS = 32
#: intervals of :data:`DEADLINE_CHECK_ROWS` rows whose fastest sets the pace (at least two are measured before a cut)
DEADLINE_PACE_INTERVALS = 4
#: share of the time budget a stream may run past it before its deadline cuts rows: the cost models' own error on the
#: machine they were fitted on (docs/benchmarks.md), which the budget's plan already spends, is not cut
DEADLINE_GRACE = 0.1


class StreamDeadline:
    """The rows a stream may process to end by a deadline, from the measured seconds per row.

    Parameters
    ----------
    rows : int
        Rows the budget planned to stream.
    deadline : float or None
        A ``clock()`` value (default :func:`time.perf_counter`) by which the stream should end; None: no deadline (the
        planned rows are kept).
    min_rows : int
        The fewest rows a cut keeps (at most ``rows``), e.g. :data:`~tnbayes.inference.budget.MIN_ROWS`.
    clock : callable
        Seconds, as :func:`time.perf_counter`. Read when the object is made (the stream's start) and at each check.

    Attributes
    ----------
    planned_rows : int
    rows : int
        The rows to stream now (``planned_rows``, or fewer after a cut).
    seconds_per_row : float or None
        The last measured seconds per row (None before the first check).
    """

    def __init__(self, rows: int, deadline: float | None, *, min_rows: int = 0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.planned_rows = self.rows = int(rows)
        self.deadline = None if deadline is None else float(deadline)
        self.min_rows = min(int(min_rows), self.rows)
        self.seconds_per_row: float | None = None
        self._clock = clock
        self._checks: list[tuple[int, float]] = [(0, float(clock()))]  # (rows processed, clock)

    @property
    def cut(self) -> bool:
        """Whether the deadline lowered the rows below the plan."""
        return self.rows < self.planned_rows

    def rows_after(self, processed: int) -> int:
        """The rows to stream in all, after ``processed`` of them: :attr:`rows`, lowered where the rest would end past
        the deadline at the measured pace — the seconds per row of the fastest of the last
        :data:`DEADLINE_PACE_INTERVALS` intervals between checks (one every :data:`DEADLINE_CHECK_ROWS` rows; the cost
        per row grows with the filter's ranks, so recent intervals predict the next rows better than the whole stream
        does, and the fastest ignores one-off costs). No cut before two intervals are measured; a cut keeps at least
        ``processed`` and ``min_rows``.

        Parameters
        ----------
        processed : int
            Rows processed so far.

        Returns
        -------
        int
        """
        processed = int(processed)
        if self.deadline is None or processed >= self.rows or processed - self._checks[-1][0] < DEADLINE_CHECK_ROWS:
            return self.rows
        now = float(self._clock())
        self._checks.append((processed, now))
        recent = self._checks[-DEADLINE_PACE_INTERVALS - 1:]
        self.seconds_per_row = min((t1 - t0) / (r1 - r0) for (r0, t0), (r1, t1) in zip(recent, recent[1:]))
        if len(recent) < 3 or self.seconds_per_row <= 0:
            return self.rows
        affordable = max(self.deadline - now, 0.0) / self.seconds_per_row  # rows left before the deadline
        if affordable < self.rows - processed:
            self.rows = max(processed + math.floor(affordable), self.min_rows)
        return self.rows


def evenly_spaced_rest(total: int, processed: int, rows: int) -> torch.Tensor:
    """Positions in a stream of ``total`` rows that keep its first ``processed`` and ``rows − processed`` of the rest,
    spread evenly over it (the first of the rest included).

    Parameters
    ----------
    total, processed, rows : int
        ``processed ≤ rows ≤ total``.

    Returns
    -------
    torch.Tensor of shape (rows,), int64
        Increasing positions.
    """
    total, processed, rows = int(total), int(processed), int(rows)
    if not 0 <= processed <= rows <= total:
        raise ValueError(f"Need 0 ≤ processed ≤ rows ≤ total; got {processed}, {rows}, {total}.")
    kept, rest = rows - processed, total - processed
    return torch.cat([torch.arange(processed), processed + torch.arange(kept) * rest // max(kept, 1)])
