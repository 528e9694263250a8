"""Time budget of the CPD rank search (CPDKernelMachine, QTKM, TKM) and of FL's rank and sweeps: the cost model, the
stop, the report, the warning.

Not a timed test: a budget far below any fit (1 ns) or none at all makes the outcome independent of the machine.
"""

import warnings

import numpy as np
import pytest

import tnbayes
import tnbayes.models._cpd_base as cpd_base
from tnbayes.inference.budget import (HELD_OUT_REFIT_SHARE, BudgetWarning, als_rank_seconds, first_rank_deadline,
                                     next_rank_fits_budget)

MODELS = [tnbayes.CPDKernelMachine, tnbayes.QTKM, tnbayes.TKM]


def _data(n=80, D=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, D))
    return X, np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.05 * rng.standard_normal(n)


def test_next_rank_is_predicted_by_the_square_of_the_rank_ratio_plus_the_held_out_refit():
    assert als_rank_seconds(7.0, 10, 20) == pytest.approx(28.0)
    fits, predicted = next_rank_fits_budget(60.0, 20.0, 7.0, 10, 20, held_out_refit=True)
    assert predicted == pytest.approx(28.0 * (1 + HELD_OUT_REFIT_SHARE))
    assert not fits  # 20 s + 50.4 s > 60 s
    fits, predicted = next_rank_fits_budget(60.0, 20.0, 7.0, 10, 20, held_out_refit=False)
    assert predicted == pytest.approx(28.0) and fits  # 48 s ≤ 60 s
    assert next_rank_fits_budget(None, 1e9, 1e9, 10, 80, held_out_refit=True)[0]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_budget_stops_the_rank_search_says_so_and_warns(model, monkeypatch):
    # every rank misses the reference noise, so only the budget (or the end of the ladder) stops the search
    monkeypatch.setattr(cpd_base, "AUTO_RANK_TOLERANCE", 0.0)
    X, y = _data()
    with pytest.warns(BudgetWarning, match="time_budget"):
        tight = model(time_budget=1e-9, max_sweeps=2).fit(X, y)
    assert [entry["rank"] for entry in tight.rank_search_] == [tight.rank_]
    assert tight.rank_search_[0]["seconds"] > 0
    stop = [line for line in tight.fit_report_ if line.startswith("rank R =")]
    assert len(stop) == 1 and "time budget" in stop[0] and "pass rank=" in stop[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)  # no budget, no warning
        free = model(time_budget=None, max_sweeps=2).fit(X, y)
    assert len(free.rank_search_) > 1
    assert "largest rank tried" in next(line for line in free.fit_report_ if line.startswith("rank R ="))


def test_first_rank_deadline_leaves_the_held_out_refit_its_share_of_the_time_left():
    # the rank's seconds s and the refit's HELD_OUT_REFIT_SHARE·s fill the 90 s left from 10 s to 100 s
    end = first_rank_deadline(10.0, 100.0, held_out_refit=True)
    assert (end - 10.0) * (1 + HELD_OUT_REFIT_SHARE) == pytest.approx(90.0)
    assert first_rank_deadline(10.0, 100.0, held_out_refit=False) == 100.0


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_budget_ends_the_first_ranks_sweeps_and_the_held_out_refits(model):
    """No measured rank predicts the first rank of the search: its sweeps end where another would leave the held-out
    refit too little of the budget, and the refit's sweeps end at the budget (far below any fit: one sweep each);
    without a budget every sweep runs."""
    X, y = _data(300)
    with pytest.warns(BudgetWarning, match=r"ended ALS after 1 of 4 sweeps \(another would have left the held-out "
                                           r"refit too little of time_budget=1e-09 s\)"):
        tight = model(time_budget=1e-9, max_sweeps=4, tol=0.0).fit(X, y)
    assert tight.n_iter_ == 1 and len(tight.rank_search_) == 1
    assert any(line.startswith("the held-out refit stopped after 1 sweep at the time budget")
               for line in tight.fit_report_)
    assert tight.held_out_noise_variance_ is not None and tight.held_out_noise_variance_ > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        free = model(time_budget=None, max_sweeps=4, tol=0.0).fit(X, y)
    assert free.n_iter_ == 4 and not any("held-out refit stopped" in line for line in free.fit_report_)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_given_rank_is_never_searched(model):
    X, y = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = model(rank=3, time_budget=1e-9, max_sweeps=2, tol=0.0).fit(X, y)
    assert fitted.rank_ == 3 and len(fitted.rank_search_) == 1
    # nor are its sweeps or its held-out refit's stopped: only the fit's seconds are reported past the budget
    assert fitted.n_iter_ == 2 and not any("ended ALS" in str(w.message) for w in caught)
    assert not any("held-out refit stopped" in line for line in fitted.fit_report_)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("budget", [0.0, -5.0, float("nan"), "60"])
def test_bad_time_budget(model, budget):
    X, y = _data(30)
    with pytest.raises(ValueError, match="time_budget"):
        model(time_budget=budget).fit(X, y)


def test_rank_within_budget_scales_by_the_square_of_the_rank_ratio():
    from tnbayes.inference.budget import rank_within_budget

    assert rank_within_budget(40, 30.0, 60.0) == 40  # fits: kept
    assert rank_within_budget(40, 240.0, 60.0) == 20  # (20/40)² · 240 = 60
    assert rank_within_budget(40, 240.0, -5.0) == 2  # the budget is spent: the floor
    assert rank_within_budget(1, 240.0, 0.0) == 1  # never above the rank asked for


def test_fl_lowers_its_rank_and_its_sweeps_to_the_budget_and_says_so(monkeypatch):
    """FL has no rank search: above ALS_PROBE_ROWS rows it times a probe, lowers its automatic rank, and stops ALS
    before a sweep past the budget. A budget far below any fit (1 ns), and the memory cap lifted (it depends on
    the free memory), make the outcome independent of the machine: the floor rank 2, one sweep, a BudgetWarning."""
    import tnbayes.models.fl as fl_module
    from tnbayes.inference.budget import ALS_PROBE_ROWS

    monkeypatch.setattr(fl_module, "largest_rank_with_partial_products", lambda *args, **kwargs: 10**6)
    X, y = _data(ALS_PROBE_ROWS + 200)
    with pytest.warns(BudgetWarning, match="ended ALS after 1 of 3 sweeps"):
        tight = tnbayes.FLModel(time_budget=1e-9, max_sweeps=3).fit(X, y)
    automatic = tight._auto_rank(X.shape[0], tight.features_)
    assert automatic > 2 and tight.rank_ == 2 and tight.n_iter_ == 1
    assert any(line.startswith(f"time budget: rank 2 instead of {automatic}") and f"fit rank {automatic}" in line
               for line in tight.fit_report_)
    # the probe's sweep and λ update left no record: two objectives and one λ per sweep of the fit
    assert len(tight.objective_history_) == 2 * tight.n_iter_
    assert len(tight.feature_weight_history_) == 1 + tight.n_iter_

    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)  # no budget: the automatic rank, every sweep, no warning
        free = tnbayes.FLModel(time_budget=None, max_sweeps=1).fit(X, y)
    assert free.rank_ == automatic and not any(line.startswith("time budget") for line in free.fit_report_)


def test_the_budget_stops_fl_sweeps_at_a_given_rank_and_below_the_probe_size():
    """The stop at the budget holds for every FL fit, a given rank on a few rows too (no probe there)."""
    X, y = _data(200)
    with pytest.warns(BudgetWarning, match="ended ALS after 1 of 4 sweeps"):
        fitted = tnbayes.FLModel(rank=3, time_budget=1e-9, max_sweeps=4).fit(X, y)
    assert fitted.rank_ == 3 and fitted.n_iter_ == 1
    assert not any(line.startswith("time budget: rank") for line in fitted.fit_report_)
