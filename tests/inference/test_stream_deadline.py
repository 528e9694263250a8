"""The stream deadline of the Kalman filters: the rows it keeps against a scripted clock, the thinned rest of a stream,
the hold-out that follows a cut, and TNKF and TTKalmanGP cut by it."""

import math

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.inference.budget import MIN_ROWS, BudgetWarning
from tnbayes.inference.stream_deadline import DEADLINE_CHECK_ROWS, StreamDeadline, evenly_spaced_rest
from tnbayes.selection.calibration import HELD_OUT_FRACTION, PrequentialResiduals


class ScriptedClock:
    """Seconds that advance by a given cost per row as the test says rows were processed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(deadline: StreamDeadline, clock: ScriptedClock, seconds_per_row, planned: int) -> int:
    """Process rows one at a time (row k costs ``seconds_per_row(k)``) until the deadline's rows are done."""
    processed = 0
    while processed < deadline.rows_after(processed):
        clock.now += seconds_per_row(processed)
        processed += 1
    assert processed <= planned
    return processed


def test_deadline_keeps_the_rows_that_end_by_it_at_the_measured_pace():
    clock = ScriptedClock()
    deadline = StreamDeadline(500, 100.0, min_rows=50, clock=clock)
    processed = _run(deadline, clock, lambda k: 1.0, 500)  # one second per row: 100 rows fit
    assert processed == deadline.rows == 100 and deadline.cut and deadline.planned_rows == 500
    assert clock.now == pytest.approx(100.0) and deadline.seconds_per_row == pytest.approx(1.0)


def test_deadline_follows_the_recent_pace_and_never_raises_the_rows():
    clock = ScriptedClock()
    deadline = StreamDeadline(2000, 300.0, clock=clock)
    # the first 200 rows are cheap (the ranks grow), then every row costs 1 s: the whole stream's mean pace would
    # over-estimate the rows left; the pace since a quarter of the stream back does not
    processed = _run(deadline, clock, lambda k: 0.05 if k < 200 else 1.0, 2000)
    assert clock.now <= 300.0 + DEADLINE_CHECK_ROWS and processed == deadline.rows < 2000
    assert clock.now > 300.0 - 2 * DEADLINE_CHECK_ROWS  # the time is used, not cut short
    clock = ScriptedClock()
    deadline = StreamDeadline(1000, 200.0, clock=clock)
    # slow first, then fast: the cut made while slow stays
    processed = _run(deadline, clock, lambda k: 1.0 if k < 64 else 0.01, 1000)
    assert processed == deadline.rows < 1000 and clock.now < 200.0


def test_one_slow_interval_does_not_cut():
    """A one-off cost (TNKF computes a chunk of kernel rows at once, here 100 s before the first row) is not the
    stream's pace: the planned rows end by the deadline at the steady pace, and none is cut."""
    clock = ScriptedClock()
    deadline = StreamDeadline(500, 650.0, clock=clock)
    assert _run(deadline, clock, lambda k: 101.0 if k == 0 else 1.0, 500) == 500 and not deadline.cut
    assert clock.now == pytest.approx(600.0) and deadline.seconds_per_row == pytest.approx(1.0)
    clock = ScriptedClock()
    late = StreamDeadline(500, 500.0, clock=clock)  # the same stream, a deadline the steady pace cannot meet
    assert _run(late, clock, lambda k: 101.0 if k == 0 else 1.0, 500) < 500 and late.cut
    assert clock.now == pytest.approx(500.0)


def test_deadline_keeps_the_floor_and_none_keeps_the_plan():
    clock = ScriptedClock()
    late = StreamDeadline(400, -1.0, min_rows=MIN_ROWS, clock=clock)  # already past
    assert _run(late, clock, lambda k: 1.0, 400) == MIN_ROWS and late.cut
    clock = ScriptedClock()
    small = StreamDeadline(100, -1.0, min_rows=MIN_ROWS, clock=clock)  # fewer rows planned than the floor
    assert _run(small, clock, lambda k: 1.0, 100) == 100 and not small.cut
    clock = ScriptedClock()
    none = StreamDeadline(300, None, clock=clock)
    assert _run(none, clock, lambda k: 1e6, 300) == 300 and not none.cut and none.seconds_per_row is None
    clock = ScriptedClock()
    infinite = StreamDeadline(300, math.inf, clock=clock)
    assert _run(infinite, clock, lambda k: 1.0, 300) == 300 and not infinite.cut


def test_evenly_spaced_rest_keeps_the_start_and_reaches_the_end():
    positions = evenly_spaced_rest(10, 3, 6)
    assert positions.tolist() == [0, 1, 2, 3, 5, 7]
    every = evenly_spaced_rest(1000, 100, 300)
    assert torch.equal(every[:100], torch.arange(100)) and bool((every.diff() > 0).all())
    assert every[-1] >= 1000 - 1000 // 200 and every.numel() == 300  # the rest's last rows are reached
    assert torch.equal(evenly_spaced_rest(8, 8, 8), torch.arange(8))
    assert torch.equal(evenly_spaced_rest(8, 2, 8), torch.arange(8))
    with pytest.raises(ValueError, match="processed ≤ rows ≤ total"):
        evenly_spaced_rest(8, 5, 4)


def test_held_out_rows_follow_a_shortened_stream():
    planned, kept = 1000, 400
    held = PrequentialResiduals(planned)
    assert held.first == planned - round(HELD_OUT_FRACTION * planned)
    held.shorten(kept)  # before any row was collected: the last rows of the shorter stream
    assert held.first == kept - round(HELD_OUT_FRACTION * kept)
    assert held.wanted(held.first - 2, 5) == slice(2, 5)
    late = PrequentialResiduals(planned)
    late.shorten(100)  # too few rows for a hold-out
    assert late.wanted(0, 100) == slice(100, 100)
    started = PrequentialResiduals(planned)
    started.add(torch.ones(3), torch.ones(3), torch.ones(3))
    first = started.first
    started.shorten(kept)  # rows were collected: the collection goes on to the last row
    assert started.first == first


def _rows(n: int, d: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


def test_tnkf_cut_by_its_deadline_streams_rows_spread_over_the_given_order(monkeypatch):
    """A deadline already past at the stream's start (a grace of −1: fit start + 0 · time_budget) cuts the planned
    rows to MIN_ROWS, taken from the whole stream; the report, budget_ and the warning say so, the hold-out collects
    the last rows streamed, and the fit predicts about as well as every row streamed in the same order, far better
    than the stream's first MIN_ROWS rows (sorted inputs: a prefix covers the left of the data only)."""
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", -1.0)
    n = 600
    X, y = _rows(n)
    order = np.argsort(X[:, 0])  # sorted inputs: a prefix of the stream would see only the left of the data
    X, y = X[order], y[order]
    fixed = dict(lengthscale=0.5, measurement_noise=0.01, prior_variance=1.0, block_size=1, time_budget=1e9,
                 stream_order="given")
    with pytest.warns(BudgetWarning, match=f"after {MIN_ROWS} of the {n} planned rows"):
        model = tnbayes.TNKF(**fixed).fit(X, y)
    assert model.rows_processed_ == MIN_ROWS and model.budget_["stopped_at_deadline"]
    assert model.budget_["planned_rows"] == n == model.budget_["rows"]
    streamed = model.stream_order_[:MIN_ROWS]
    assert torch.equal(streamed[:DEADLINE_CHECK_ROWS], torch.arange(DEADLINE_CHECK_ROWS))  # before the first check
    assert int(streamed.max()) >= n - n // MIN_ROWS - 1 and bool((streamed.diff() > 0).all())
    assert torch.equal(model.stream_order_.sort().values, torch.arange(n))
    assert model.held_out_noise_variance_ is not None
    assert any("ended the filter after" in line for line in model.fit_report_)
    X_test, y_test = _rows(300, seed=1)

    def rmse(fitted):
        return float(np.sqrt(np.mean((fitted.predict(X_test) - y_test) ** 2)))

    unbudgeted = dict(fixed, time_budget=None)
    every_row = tnbayes.TNKF(max_rows=None, **unbudgeted).fit(X, y)
    prefix = tnbayes.TNKF(max_rows=MIN_ROWS, **unbudgeted).fit(X, y)
    assert rmse(model) < 1.25 * rmse(every_row) and rmse(model) < 0.5 * rmse(prefix)
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", 0.1)
    planned = tnbayes.TNKF(**fixed).fit(X, y)  # the default grace and a huge budget: nothing is cut
    assert planned.rows_processed_ == n and not planned.budget_["stopped_at_deadline"]


def test_tnkf_and_tt_kalman_given_rows_are_never_cut(monkeypatch):
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", -1.0)
    X, y = _rows(400)
    tnkf = tnbayes.TNKF(lengthscale=0.5, measurement_noise=0.01, prior_variance=1.0, max_rows=None,
                        time_budget=1e9).fit(X, y)
    assert tnkf.rows_processed_ == 400 and not tnkf.budget_["stopped_at_deadline"]
    tt = tnbayes.TTKalmanGP(lengthscale=0.5, outputscale=1.0, noise_variance=0.01, max_rows=400,
                            time_budget=1e9).fit(X, y)
    assert tt.rows_used_ == 400 and not tt.budget_["stopped_at_deadline"]


def test_tt_kalman_cut_by_its_deadline_stops_at_the_floor(monkeypatch):
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", -1.0)
    X, y = _rows(800)
    with pytest.warns(BudgetWarning, match="of the 800 planned rows"):
        model = tnbayes.TTKalmanGP(smoothing="none", time_budget=1e9).fit(X, y)  # σ² estimated: a hold-out
    batch = model.batch_size_
    assert MIN_ROWS <= model.rows_used_ < MIN_ROWS + batch and model.budget_["stopped_at_deadline"]
    assert model.held_out_noise_variance_ is not None
    X_test, y_test = _rows(300, seed=1)
    assert float(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))) < 0.5 * float(np.std(y_test))
