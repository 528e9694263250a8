"""A deadline for a filter's stream of rows, beside the cost models of :mod:`tnbayes.inference.budget` (the
*inference* axis).

The time budget plans how many rows a Kalman filter streams from a cost model fitted on one machine; on a slower or
busier machine the same rows take longer, and the fit ends past its budget by the same factor. :class:`StreamDeadline`
holds the plan to the clock: every :data:`DEADLINE_CHECK_ROWS` rows it measures the seconds per row and says how many
rows the stream can still afford in all, the planned ones or fewer. It is asked again at every check, so a slow
moment lowers the rows only while it lasts. The pace is the fastest of the last :data:`DEADLINE_PACE_INTERVALS`
intervals, so that one slow interval (a new chunk's kernel rows computed at once) does not lower them at all.

:class:`EvenThinning` turns "this many of the rows left" into which rows: a stream in a meaningful order (sorted
inputs, a time series) keeps that share of its rows evenly all the way to its end instead of stopping early.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["DEADLINE_CHECK_ROWS", "DEADLINE_GRACE", "DEADLINE_PACE_INTERVALS", "EvenThinning", "StreamDeadline"]

#: rows between two measurements of the stream's seconds per row
DEADLINE_CHECK_ROWS = 32
#: intervals of :data:`DEADLINE_CHECK_ROWS` rows whose fastest sets the pace (two are measured before rows are lowered)
DEADLINE_PACE_INTERVALS = 4
#: share of the time budget a stream may run past it before its deadline lowers the rows: the cost models' own error on
#: the machine they were fitted on (docs/benchmarks.md), which the budget's plan already spends, is not cut
DEADLINE_GRACE = 0.1


class StreamDeadline:
    """The rows a stream can afford to process by a deadline, from its measured seconds per row.

    Parameters
    ----------
    rows : int
        Rows the budget planned to stream.
    deadline : float or None
        A ``clock()`` value (default :func:`time.perf_counter`) by which the stream should end; None: no deadline (the
        planned rows are kept).
    min_rows : int
        The fewest rows it ever asks for (at most ``rows``), e.g. :data:`~tnbayes.inference.budget.MIN_ROWS`.
    clock : callable
        Seconds, as :func:`time.perf_counter`. Read when the object is made (the stream's start) and at each check.

    Attributes
    ----------
    deadline : float or None
    min_rows : int
    planned_rows : int
    rows : int
        The rows affordable in all at the last check (``planned_rows`` before the first).
    seconds_per_row : float or None
        The last measured pace (None before the first check).
    lowered : bool
        Whether any check found fewer rows affordable than planned.
    """

    def __init__(self, rows: int, deadline: float | None, *, min_rows: int = 0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.planned_rows = self.rows = int(rows)
        self.deadline = None if deadline is None else float(deadline)
        self.min_rows = min(int(min_rows), self.rows)
        self.seconds_per_row: float | None = None
        self.lowered = False
        self._clock = clock
        self._checks: list[tuple[int, float]] = [(0, float(clock()))]  # (rows processed, clock)

    def rows_after(self, processed: int) -> int:
        """The rows affordable in all after ``processed`` of them: ``processed`` plus the rows the time left until the
        deadline pays for at the measured pace — the seconds per row of the fastest of the last
        :data:`DEADLINE_PACE_INTERVALS` intervals between checks (one every :data:`DEADLINE_CHECK_ROWS` rows; the cost
        per row grows with the filter's ranks, so recent intervals predict the next rows better than the whole stream
        does, and the fastest ignores one-off costs) — between ``min_rows`` and the planned rows. Between checks, and
        before two intervals are measured, the last answer.

        Parameters
        ----------
        processed : int
            Rows processed so far.

        Returns
        -------
        int
        """
        processed = int(processed)
        if self.deadline is None or processed - self._checks[-1][0] < DEADLINE_CHECK_ROWS:
            return self.rows
        now = float(self._clock())
        self._checks.append((processed, now))
        recent = self._checks[-DEADLINE_PACE_INTERVALS - 1:]
        self.seconds_per_row = min((t1 - t0) / (r1 - r0) for (r0, t0), (r1, t1) in zip(recent, recent[1:]))
        if len(recent) < 3 or self.seconds_per_row <= 0:
            return self.rows
        affordable = max(self.deadline - now, 0.0) / self.seconds_per_row  # rows the time left pays for
        self.rows = self.planned_rows if affordable >= self.planned_rows - processed else \
            max(processed + math.floor(affordable), self.min_rows)
        self.lowered = self.lowered or self.rows < self.planned_rows
        return self.rows


class EvenThinning:
    """Which rows of a stream to process when only a share of those left can be: every row while the share is 1, else
    rows spread evenly at that share (an accumulator of the share, as a line is drawn on a pixel grid), which
    :meth:`keep_share` may change at any row.

    Attributes
    ----------
    share : float
        The share of the rows kept now, in [0, 1].
    skipped : int
        Rows left out so far.
    """

    def __init__(self) -> None:
        self.share = 1.0
        self.skipped = 0
        self._credit = 0.0

    def keep_share(self, rows: int, rows_left: int) -> float:
        """Process ``rows`` of the next ``rows_left`` rows from now on.

        Parameters
        ----------
        rows : int
            Rows to process (≤ 0: none).
        rows_left : int
            Rows of the stream still to come; where they are no more than ``rows``, every one is processed.

        Returns
        -------
        float
            The share, in [0, 1].
        """
        self.share = 1.0 if rows >= rows_left else max(float(rows), 0.0) / float(rows_left)
        return self.share

    def keeps_next(self) -> bool:
        """Whether the next row of the stream is processed (counted in :attr:`skipped` when not).

        Returns
        -------
        bool
        """
        self._credit += self.share
        if self._credit >= 1.0 - 1e-9:
            self._credit -= 1.0
            return True
        self.skipped += 1
        return False
