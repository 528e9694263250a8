"""The stream deadline of the Kalman filters: the rows it affords against a scripted clock, the thinning of a stream,
the hold-out that follows, and TNKF and TTKalmanGP held to it."""

import math

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.inference.budget import MIN_ROWS, BudgetWarning
from tnbayes.inference.stream_deadline import DEADLINE_CHECK_ROWS, EvenThinning, StreamDeadline
from tnbayes.models.tnkf import DEFAULT_TRUNCATION
from tnbayes.selection.calibration import HELD_OUT_FRACTION, PrequentialResiduals


class ScriptedClock:
    """Seconds that advance as the test says rows were processed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(deadline: StreamDeadline, clock: ScriptedClock, seconds_per_row) -> int:
    """Process rows one at a time (row k costs ``seconds_per_row(k)``) while the deadline affords more."""
    processed = 0
    while processed < deadline.rows_after(processed):
        clock.now += seconds_per_row(processed)
        processed += 1
    return processed


def test_deadline_affords_the_rows_that_end_by_it_at_the_measured_pace():
    clock = ScriptedClock()
    deadline = StreamDeadline(500, 100.0, min_rows=50, clock=clock)
    processed = _run(deadline, clock, lambda k: 1.0)  # one second per row: 100 rows fit
    assert processed == deadline.rows == 100 and deadline.lowered and deadline.planned_rows == 500
    assert clock.now == pytest.approx(100.0) and deadline.seconds_per_row == pytest.approx(1.0)


def test_deadline_follows_the_recent_pace_and_recovers_after_a_slow_spell():
    clock = ScriptedClock()
    deadline = StreamDeadline(2000, 300.0, clock=clock)
    # the first 200 rows are cheap (the ranks grow), then every row costs 1 s: the whole stream's mean pace would
    # over-estimate the rows left; the recent pace does not
    processed = _run(deadline, clock, lambda k: 0.05 if k < 200 else 1.0)
    assert 300.0 - 2 * DEADLINE_CHECK_ROWS < clock.now <= 300.0 + 1 and processed < 2000
    clock = ScriptedClock()
    deadline = StreamDeadline(1000, 200.0, clock=clock)
    # slow at first (rows 0-199 at 1 s would take the whole time), then fast: the rows come back to the plan
    rows_seen = []

    def cost(k):
        rows_seen.append(deadline.rows)
        return 1.0 if k < 160 else 0.01

    assert _run(deadline, clock, cost) == 1000 and clock.now < 200.0
    assert min(rows_seen) < 1000 and deadline.lowered and deadline.rows == 1000


def test_one_slow_interval_does_not_lower_the_rows():
    """A one-off cost (TNKF computes a chunk of kernel rows at once, here 100 s before the first row) is not the
    stream's pace: the planned rows end by the deadline at the steady pace."""
    clock = ScriptedClock()
    deadline = StreamDeadline(500, 650.0, clock=clock)
    assert _run(deadline, clock, lambda k: 101.0 if k == 0 else 1.0) == 500 and not deadline.lowered
    assert clock.now == pytest.approx(600.0) and deadline.seconds_per_row == pytest.approx(1.0)
    clock = ScriptedClock()
    late = StreamDeadline(500, 500.0, clock=clock)  # the same stream, a deadline the steady pace cannot meet
    assert _run(late, clock, lambda k: 101.0 if k == 0 else 1.0) < 500 and late.lowered
    assert clock.now == pytest.approx(500.0)


def test_deadline_keeps_the_floor_and_none_keeps_the_plan():
    clock = ScriptedClock()
    late = StreamDeadline(400, -1.0, min_rows=MIN_ROWS, clock=clock)  # already past
    assert _run(late, clock, lambda k: 1.0) == MIN_ROWS and late.lowered
    clock = ScriptedClock()
    small = StreamDeadline(100, -1.0, min_rows=MIN_ROWS, clock=clock)  # fewer rows planned than the floor
    assert _run(small, clock, lambda k: 1.0) == 100 and not small.lowered
    clock = ScriptedClock()
    none = StreamDeadline(300, None, clock=clock)
    assert _run(none, clock, lambda k: 1e6) == 300 and not none.lowered and none.seconds_per_row is None
    clock = ScriptedClock()
    infinite = StreamDeadline(300, math.inf, clock=clock)
    assert _run(infinite, clock, lambda k: 1.0) == 300 and not infinite.lowered


def test_even_thinning_keeps_its_share_spread_to_the_end():
    thinning = EvenThinning()
    assert all(thinning.keeps_next() for _ in range(10))  # share 1: every row
    assert thinning.keep_share(30, 100) == pytest.approx(0.3)
    kept = [k for k in range(100) if thinning.keeps_next()]
    assert len(kept) == 30 and kept[-1] >= 96 and max(np.diff(kept)) <= 4  # spread over the 100 rows
    assert thinning.skipped == 70
    assert thinning.keep_share(50, 40) == 1.0 and thinning.keep_share(-3, 40) == 0.0
    assert not any(thinning.keeps_next() for _ in range(10))


def test_held_out_rows_follow_a_shortened_stream():
    planned, kept = 1000, 400
    held = PrequentialResiduals(planned)
    assert held.first == planned - round(HELD_OUT_FRACTION * planned)
    held.shorten(kept)  # before any row was collected: the last rows of the shorter stream
    assert held.first == kept - round(HELD_OUT_FRACTION * kept)
    assert held.wanted(held.first - 2, 5) == slice(2, 5)
    held.shorten(planned)  # the rows came back (a slow spell ended): the window of the plan again
    assert held.first == planned - round(HELD_OUT_FRACTION * planned)
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


def test_tnkf_held_to_its_deadline_streams_rows_spread_over_the_given_order(monkeypatch):
    """A deadline already past at the stream's start (a grace of −1: fit start + 0 · time_budget) affords MIN_ROWS of
    the planned rows, taken from the whole stream; the report, budget_ and the warning say so, the hold-out collects
    the last rows streamed, and the fit predicts about as well as every row streamed in the same order, far better
    than the stream's first MIN_ROWS rows (sorted inputs: a prefix covers the left of the data only)."""
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", -1.0)
    n = 600
    X, y = _rows(n)
    order = np.argsort(X[:, 0])  # sorted inputs: a prefix of the stream would see only the left of the data
    X, y = X[order], y[order]
    # the default covariance cap given: a huge budget would otherwise lift it to the state's full rank (slow at 600
    # rows; the vectors' full ranks are below their caps)
    fixed = dict(lengthscale=0.5, measurement_noise=0.01, prior_variance=1.0, block_size=1, time_budget=1e9,
                 stream_order="given", truncation={"covariance": DEFAULT_TRUNCATION["covariance"]})
    with pytest.warns(BudgetWarning, match=f"left the filter {MIN_ROWS} of the {n} planned rows"):
        model = tnbayes.TNKF(**fixed).fit(X, y)
    assert model.rows_processed_ == MIN_ROWS and model.budget_["stopped_at_deadline"]
    assert model.budget_["planned_rows"] == n == model.budget_["rows"]
    streamed = model.stream_order_[:MIN_ROWS]
    assert torch.equal(streamed[:2 * DEADLINE_CHECK_ROWS], torch.arange(2 * DEADLINE_CHECK_ROWS))  # before a pace
    assert int(streamed.max()) >= n - n // MIN_ROWS - 1 and bool((streamed.diff() > 0).all())
    assert torch.equal(model.stream_order_.sort().values, torch.arange(n))
    assert model.held_out_noise_variance_ is not None
    assert any("left the filter" in line for line in model.fit_report_)
    X_test, y_test = _rows(300, seed=1)

    def rmse(fitted):
        return float(np.sqrt(np.mean((fitted.predict(X_test) - y_test) ** 2)))

    unbudgeted = dict(fixed, time_budget=None)
    every_row = tnbayes.TNKF(max_rows=None, **unbudgeted).fit(X, y)
    prefix = tnbayes.TNKF(max_rows=MIN_ROWS, **unbudgeted).fit(X, y)
    assert rmse(model) < 1.25 * rmse(every_row) and rmse(model) < 0.5 * rmse(prefix)
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", 0.1)
    planned = tnbayes.TNKF(**fixed).fit(X, y)  # the default grace and a huge budget: every row
    assert planned.rows_processed_ == n and not planned.budget_["stopped_at_deadline"]


def test_tnkf_and_tt_kalman_given_rows_are_never_cut(monkeypatch):
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", -1.0)
    X, y = _rows(400)
    tnkf = tnbayes.TNKF(lengthscale=0.5, measurement_noise=0.01, prior_variance=1.0, max_rows=None,
                        time_budget=1e9, truncation={"covariance": DEFAULT_TRUNCATION["covariance"]}).fit(X, y)
    assert tnkf.rows_processed_ == 400 and not tnkf.budget_["stopped_at_deadline"]
    tt = tnbayes.TTKalmanGP(lengthscale=0.5, outputscale=1.0, noise_variance=0.01, max_rows=400,
                            time_budget=1e9).fit(X, y)
    assert tt.rows_used_ == 400 and not tt.budget_["stopped_at_deadline"]


def test_tt_kalman_held_to_its_deadline_stops_at_the_floor(monkeypatch):
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", -1.0)
    X, y = _rows(800)
    with pytest.warns(BudgetWarning, match="of the 800 planned rows"):
        model = tnbayes.TTKalmanGP(smoothing="none", time_budget=1e9).fit(X, y)  # σ² estimated: a hold-out
    batch = model.batch_size_
    assert MIN_ROWS <= model.rows_used_ < MIN_ROWS + batch and model.budget_["stopped_at_deadline"]
    assert model.held_out_noise_variance_ is not None
    X_test, y_test = _rows(300, seed=1)
    assert float(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2))) < 0.5 * float(np.std(y_test))
