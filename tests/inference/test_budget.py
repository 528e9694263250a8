"""Time budgets of TNKF and TTKalmanGP: the cost model's choices, given settings kept, warnings, persistence."""

import math
import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis import ApproximationWarning
from tnbayes.tensors import tensorize_shape
from tnbayes.inference.budget import (
    MIN_ROWS,
    TNKF_LIFTED_CAPS_MARGIN,
    TNKF_RANK_LADDER,
    TNKF_SUBSET_CAPS,
    TNKF_SUBSET_MIN_ROWS,
    SMOOTHING_BUDGET_SHARE,
    TT_SMOOTHING_COST,
    BudgetWarning,
    describe_plan,
    largest_rows_within_budget,
    plan_within_budget,
    tnkf_seconds_per_row,
    tt_kalman_seconds_per_row,
    tt_smoothing_features,
    tt_smoothing_seconds,
)
from tnbayes.inference.tt_als import TTALS
from tnbayes.selection.calibration import held_out_count, held_out_rows

#: hyper-parameters given, so that no marginal-likelihood fit runs and the whole budget goes to the filter
TNKF_FIXED = dict(lengthscale=0.8, outputscale=1.0, measurement_noise=0.01, prior_variance=1.0)
TT_FIXED = dict(lengthscale=2.0, outputscale=1.0, noise_variance=0.05, c=2.0)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One torch thread, as the cost models were calibrated: the filters' many small linear-algebra calls gain
    nothing from more, and lose much to a busy machine's other processes."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _data(n, D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, D))
    return X, np.sin(2 * X[:, 0]) * np.cos(X[:, -1]) + 0.1 * rng.standard_normal(n)


def _quiet(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        warnings.simplefilter("ignore", ApproximationWarning)
        return model.fit(X, y)


def test_cost_models_grow_with_ranks_basis_size_inputs_and_state():
    shape = [2, 5, 5, 5, 8]
    costs = [tnkf_seconds_per_row(shape, cov, gain, gain) for cov, gain in TNKF_RANK_LADDER]
    assert all(a > b for a, b in zip(costs, costs[1:]))  # the ladder gets cheaper at every step
    assert tnkf_seconds_per_row([4, 5, 5, 5, 8], 16, 8, 8) > tnkf_seconds_per_row(shape, 16, 8, 8)
    assert tnkf_seconds_per_row(shape, None, 8, 8) > tnkf_seconds_per_row(shape, 32, 8, 8)  # uncapped: the bounds
    base = tt_kalman_seconds_per_row(8, 8, 6, 8)
    assert tt_kalman_seconds_per_row(8, 8, 10, 8) > base
    assert tt_kalman_seconds_per_row(8, 12, 6, 8) > base
    assert tt_kalman_seconds_per_row(16, 8, 6, 8) > base
    assert tt_kalman_seconds_per_row(8, 8, None, 8) > tt_kalman_seconds_per_row(8, 8, 10, 8)


def test_plan_lowers_settings_before_rows_and_keeps_given_rows():
    candidates = [{"rank": 3}, {"rank": 2}, {"rank": 1}]

    def cost(candidate):
        return float(candidate["rank"])

    n = 1000
    roomy = plan_within_budget(candidates, cost, n, 5000.0, chosen=["rank"])
    assert roomy.settings == {"rank": 3} and roomy.rows == n and roomy.within_budget and roomy.chosen == ["rank"]
    middle = plan_within_budget(candidates, cost, n, 2500.0, chosen=["rank"])
    assert middle.settings == {"rank": 2} and middle.rows == n and middle.predicted_seconds == 2000.0
    rows = plan_within_budget(candidates, cost, n, 500.0, chosen=["rank"])
    assert rows.settings == {"rank": 1} and rows.rows == 500 and rows.within_budget and "max_rows" in rows.chosen
    floor = plan_within_budget(candidates, cost, n, 10.0, chosen=["rank"])
    assert floor.rows == MIN_ROWS and not floor.within_budget and floor.first_seconds == 3000.0
    given = plan_within_budget(candidates, cost, n, 10.0, max_rows=5, chosen=["rank"])
    assert given.rows == 5 and given.settings == {"rank": 2} and "max_rows" not in given.chosen
    unbudgeted = plan_within_budget(candidates, cost, n, None)
    assert unbudgeted.settings == {"rank": 3} and unbudgeted.rows == n and unbudgeted.within_budget


def test_plan_keeps_the_first_candidate_on_every_row_when_the_cost_model_cannot_predict_it():
    candidates = [{"rank": 3}, {"rank": 1}]

    def cost(candidate):
        return float(candidate["rank"])

    plan = plan_within_budget(candidates, cost, 1000, 10.0, chosen=["rank"], cost_unknown=True)
    assert plan.rows == 1000 and plan.settings == {"rank": 3} and plan.predicted_seconds == 3000.0
    assert not plan.within_budget and plan.cost_unknown and plan.chosen == ["rank"]
    assert plan.as_dict()["cost_unknown"] is True
    assert plan_within_budget(candidates, cost, 1000, 1e4, cost_unknown=True).within_budget
    candidates = [{"rank": None}]
    line, warning = describe_plan(plan, model="M", time_budget=10.0, settings_text=str, default_text=str,
                                  first_fits="", pass_text=str)
    assert warning is None and "cannot vouch for" in line and "deadline" in line
    assert plan_within_budget(candidates, lambda candidate: 1.0, 1000, 10.0, max_rows=5, cost_unknown=True).rows == 5
    predicted = plan_within_budget(candidates, lambda candidate: 1.0, 1000, 10.0)  # a prediction: fewer rows, warned
    assert predicted.rows == MIN_ROWS and not predicted.cost_unknown
    assert describe_plan(predicted, model="M", time_budget=10.0, settings_text=str, default_text=str, first_fits="",
                         pass_text=str)[1] is not None


def test_tnkf_with_tolerances_and_no_caps_streams_every_row_its_cost_model_cannot_predict():
    """The TNKF paper's sinc settings, tolerances without rank caps: the cost model takes every rank at the largest
    its modes allow, a figure far over the budget for a fit that takes a small part of it. Every row is streamed and
    nothing is warned (the figure once cut the stream to MIN_ROWS rows, with a warning to pass max_rows=1)."""
    data = tnbayes.datasets.make_sinc(n_train=1024, n_test=8, seed=0)
    x_std = float(np.asarray(data.X_train).std())
    truncation = {"mean": 0.0, "covariance": 0.015, "row": 0.003, "innovation": 0.1, "gain": 0.0075}
    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        model = tnbayes.TNKF(lengthscale=0.05 / x_std, outputscale=1.0, gamma=0.005, measurement_noise=0.01,
                             prior_variance=1.0, truncation=truncation, normalize_y=False, mode_size=1,
                             round_relative_to="state", time_budget=20).fit(data.X_train, data.y_train)
    budget = model.budget_
    assert budget["cost_unknown"] and budget["predicted_seconds"] > 20 and not budget["within_budget"]
    assert model.rows_processed_ == budget["rows"] == 1024 > MIN_ROWS and not budget["stopped_at_deadline"]
    assert any("cannot vouch for" in line for line in model.fit_report_)
    # the exact filter (tolerance 0, no cap) is predicted: its ranks are the largest the modes allow
    with pytest.warns(BudgetWarning, match="predicted to take"):
        exact = tnbayes.TNKF(truncation={q: 0.0 for q in ("row", "mean", "covariance", "gain", "innovation")},
                             time_budget=1e-6, **TNKF_FIXED).fit(*_data(64, 2))
    assert not exact.budget_["cost_unknown"]


def test_tnkf_smaller_budget_smaller_caps_and_given_settings_kept():
    X, y = _data(256, 2)  # TT modes (4, 8, 8): the caps bind (on 64 points every cap exceeds the modes' bounds)
    # given: 8 rows whatever the budget (keeps the test fast); row by row, the update whose ladder is walked here
    kwargs = dict(TNKF_FIXED, max_rows=8, block_size=1)
    unbudgeted = tnbayes.TNKF(time_budget=None, **kwargs).fit(X, y)
    assert unbudgeted.budget_["settings"] == {"covariance_rank": 32, "gain_rank": 24, "innovation_rank": 24,
                                              "max_rows": 8}
    assert unbudgeted.budget_["chosen"] == [] and unbudgeted.rows_processed_ == 8
    ladder = unbudgeted.budget_["ladder"]
    assert [settings for settings, _ in ladder] == [{"covariance_rank": 32, "gain_rank": 24, "innovation_rank": 24}]
    budgeted = tnbayes.TNKF(time_budget=1e9, **kwargs).fit(X, y)
    # the rung above the ladder, L's full rank 8² = 64 (a vector's full rank 8 is below the gain's cap), fits: taken;
    # the ladder lists it, then every candidate of TNKF_RANK_LADDER, each with its predicted seconds per row
    ladder = budgeted.budget_["ladder"]
    assert ladder[0][0] == {"covariance_rank": 64, "gain_rank": 24, "innovation_rank": 24}
    assert len(ladder) == len(TNKF_RANK_LADDER) + 1 and budgeted.budget_["settings"]["covariance_rank"] == 64
    lifted_cost, ladder = ladder[0][1], ladder[1:]
    assert lifted_cost > ladder[0][1]
    # with a budget that fits it, but not with TNKF_LIFTED_CAPS_MARGIN to spare: the ladder's first rung
    model = _quiet(tnbayes.TNKF(time_budget=8 * lifted_cost * TNKF_LIFTED_CAPS_MARGIN * 0.99, **kwargs), X, y)
    assert model.budget_["settings"]["covariance_rank"] == 32 and len(model.budget_["ladder"]) == len(TNKF_RANK_LADDER)
    assert any("(the state's full ranks)" in line and "the ladder instead" in line for line in model.fit_report_)
    model = _quiet(tnbayes.TNKF(time_budget=8 * lifted_cost * TNKF_LIFTED_CAPS_MARGIN * 1.01, **kwargs), X, y)
    assert model.budget_["settings"]["covariance_rank"] == 64
    seconds = [cost for _, cost in ladder]
    assert seconds == sorted(seconds, reverse=True) and len(set(seconds)) >= 3
    caps = []
    for cost in sorted(set(seconds), reverse=True):  # a budget for each distinct cost: the first candidate at it
        model = _quiet(tnbayes.TNKF(time_budget=8 * cost * 1.001, **kwargs), X, y)
        settings = model.budget_["settings"]
        assert model.rows_processed_ == 8 and settings["max_rows"] == 8 and model.budget_["within_budget"]
        assert model.budget_["predicted_seconds_per_row"] == pytest.approx(cost, rel=1e-6)
        assert model.truncation_["covariance"][1] == settings["covariance_rank"]
        caps.append((settings["covariance_rank"], settings["gain_rank"]))
        assert model.budget_["filter_budget"] == pytest.approx(8 * cost * 1.001)  # nothing estimated
    assert caps[0] == (32, 24) and caps[-1] == TNKF_RANK_LADDER[-1] and caps == sorted(caps, reverse=True)
    # a given truncation keeps its cap; the others are budgeted
    given = _quiet(tnbayes.TNKF(time_budget=1e-6, truncation={"covariance": (1e-4, 20), "innovation": (1e-3, 10)},
                                **kwargs), X, y)
    assert given.truncation_["covariance"] == (1e-4, 20) and given.truncation_["innovation"] == (1e-3, 10)
    assert given.truncation_["gain"][1] == TNKF_RANK_LADDER[-1][1]
    assert given.budget_["chosen"] == ["gain_rank"] and given.rows_processed_ == 8
    # a given plain tolerance keeps its "no cap", which the cost model cannot predict: the others keep their defaults
    given = _quiet(tnbayes.TNKF(time_budget=1e-6, truncation={"covariance": (1e-4, 20), "innovation": 1e-3},
                                **kwargs), X, y)
    assert given.truncation_["innovation"] == (1e-3, None) and given.budget_["cost_unknown"]
    assert given.truncation_["gain"][1] == TNKF_RANK_LADDER[0][1] and given.rows_processed_ == 8


def test_tnkf_unreachable_budget_warns_with_settings_and_streams_a_random_subset():
    X, y = _data(300, 2)  # at most TNKF_SUBSET_MIN_ROWS rows: the state keeps every row, the budget streams fewer
    with pytest.warns(BudgetWarning, match=r"predicted to take .* Pass max_rows=\d+ .*truncation=\{'covariance': "
                                           r"\(0\.0001, 8\).*time_budget=\d+"):
        model = tnbayes.TNKF(time_budget=1e-3, **TNKF_FIXED).fit(X, y)
    budget = model.budget_
    assert model.rows_processed_ == MIN_ROWS == budget["rows"] and not budget["within_budget"]
    assert budget["chosen"] == ["covariance_rank", "gain_rank", "innovation_rank", "max_rows"]
    assert model.subset_ is None and model.dual_weights_.shape == (300,) and 300 <= TNKF_SUBSET_MIN_ROWS
    assert not torch.equal(model.stream_order_, torch.arange(300))  # the budget's subset is a random one
    assert budget["filter_seconds"] > 0 and budget["fit_seconds"] >= budget["filter_seconds"]
    assert any(line.startswith("time budget") and "over the budget" for line in model.fit_report_)


def test_tnkf_budget_warning_names_the_given_tolerances():
    X, y = _data(300, 2)
    with pytest.warns(BudgetWarning, match=r"truncation=\{'covariance': \(0\.02, 8\), 'gain': \(1e-05, 4\)"):
        tnbayes.TNKF(time_budget=1e-3, truncation={"covariance": (0.02, 8)}, **TNKF_FIXED).fit(X, y)


def test_tnkf_budget_keeps_every_row_when_no_subset_of_the_fewest_rows_fits(monkeypatch):
    """Above TNKF_SUBSET_MIN_ROWS rows, but with a budget that not even a subset of that many streams whole at the
    subset caps: every row stays in the state, and the budget streams fewer at the lowest caps (as on few rows)."""
    monkeypatch.setattr("tnbayes.models._tnkf_budget.TNKF_SUBSET_MIN_ROWS", MIN_ROWS + 44)
    X, y = _data(700, 2)
    with pytest.warns(BudgetWarning, match=r"Pass max_rows=\d+"):
        model = tnbayes.TNKF(time_budget=1e-3, **TNKF_FIXED).fit(X, y)
    assert model.subset_ is None and model.rows_processed_ == MIN_ROWS and model.dual_weights_.shape == (700,)
    assert model.truncation_["covariance"][1] == TNKF_RANK_LADDER[-1][0] and "training_rows" not in model.budget_


@pytest.mark.parametrize("budget", [0.5, 3.0, 40.0, 1e3, 1e9])
def test_largest_rows_within_budget_matches_a_search_of_every_count(budget):
    """Against trying every row count, on a cost that grows faster than the rows (as TNKF's roughly does)."""
    def seconds(rows):
        return 1e-3 * rows * (1 + rows / 100)
    fitting = [m for m in range(MIN_ROWS, 901) if seconds(m) <= budget]
    assert largest_rows_within_budget(seconds, 900, budget) == (max(fitting) if fitting else None)
    assert largest_rows_within_budget(seconds, 100, budget) == (100 if seconds(100) <= budget else None)


@pytest.mark.parametrize("budget", [10.0, 30.0, 60.0])
def test_largest_rows_within_budget_on_tnkf_modes_fits_the_budget(budget):
    """On TNKF's cost at caps 16/8/8 over each row count's padded TT modes, which does not grow smoothly with the
    rows: the count returned fits the budget, and one row more would not (a local maximum, not always the largest)."""
    def seconds(rows):
        shape = tensorize_shape(rows, 16, merge_to=8)[0]
        return rows * tnkf_seconds_per_row(shape, 16, 8, 8, [16] * (len(shape) - 1), None)
    assert any(seconds(m) > seconds(m + 1) for m in range(2000, 9000)), "the test needs a cost that does not grow"
    rows = largest_rows_within_budget(seconds, 20_000, budget, min_rows=2000)
    if seconds(2000) > budget:
        assert rows is None
    else:
        assert seconds(rows) <= budget and (rows == 20_000 or seconds(rows + 1) > budget)


def test_tnkf_budget_fits_a_random_subset_below_the_subset_caps(tmp_path, monkeypatch):
    """Where every row would need caps below TNKF_SUBSET_CAPS, the budget fits on a subset those caps stream whole;
    the fit is then TNKF on exactly those rows (a model given them, the same caps and no budget), and it keeps them
    through save and load; max_rows=None keeps every row at lower caps instead. (The rule's fewest rows,
    TNKF_SUBSET_MIN_ROWS, is lowered here to keep the fits small; the stream's deadline is set aside, because the
    plan spends the whole budget, whose rows the load of a parallel test run could otherwise cut.)"""
    monkeypatch.setattr("tnbayes.models._tnkf_budget.TNKF_SUBSET_MIN_ROWS", MIN_ROWS + 44)
    monkeypatch.setattr("tnbayes.models._kalman_common.DEADLINE_GRACE", math.inf)
    n = 700
    X, y = _data(n, 2)
    Xq, _ = _data(30, 2, seed=5)
    fixed = dict(TNKF_FIXED, normalize_y=False, block_size=1)
    probe = _quiet(tnbayes.TNKF(time_budget=1e9, max_rows=8, **fixed), X, y)  # the ladder's seconds per row at n
    floor = dict(zip(("covariance_rank", "gain_rank", "innovation_rank"), (*TNKF_SUBSET_CAPS, TNKF_SUBSET_CAPS[1])))
    floor_cost = dict((tuple(c.items()), cost) for c, cost in probe.budget_["ladder"])[tuple(floor.items())]
    budget = 0.6 * n * floor_cost  # every row at the subset caps is predicted 1.7× over the budget
    model = tnbayes.TNKF(time_budget=budget, **fixed)
    model.input_scaling = "none"  # the reference below sees the same inputs whatever rows it is given
    _quiet(model, X, y)
    subset, m = model.subset_, model.subset_.numel()
    assert MIN_ROWS + 44 < m < n and torch.equal(subset, torch.unique(subset))
    assert model.rows_processed_ == m == model.budget_["num_rows"] and model.budget_["within_budget"]
    assert model.budget_["training_rows"] == n and "training_rows" not in probe.budget_
    caps = (model.truncation_["covariance"][1], model.truncation_["gain"][1])
    assert caps >= TNKF_SUBSET_CAPS and caps in TNKF_RANK_LADDER
    assert any("random subset of" in line for line in model.fit_report_)
    reference = tnbayes.TNKF(time_budget=None, max_rows=None, truncation={
        q: model.truncation_[q] for q in ("covariance", "gain", "innovation")}, **fixed)
    reference.input_scaling = "none"
    _quiet(reference, X[subset.numpy()], y[subset.numpy()])
    a, b = model.posterior(Xq), reference.posterior(Xq)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-10, atol=1e-10)
    model.save(tmp_path / "subset.pt")
    back = tnbayes.load_model(tmp_path / "subset.pt")
    assert torch.equal(back.subset_, subset)
    torch.testing.assert_close(back.posterior(Xq).mean, a.mean, rtol=0, atol=0)
    every = _quiet(tnbayes.TNKF(time_budget=budget, max_rows=None, **fixed), X, y)
    assert every.subset_ is None and every.rows_processed_ == n
    assert every.truncation_["covariance"][1] < TNKF_SUBSET_CAPS[0]
    given_rows = _quiet(tnbayes.TNKF(time_budget=budget, max_rows=40, **fixed), X, y)  # an int: every row in the state
    assert given_rows.subset_ is None and given_rows.rows_processed_ == 40 and given_rows.dual_weights_.shape == (n,)
    labels = np.where(y > np.median(y), "high", "low")
    classifier = _quiet(tnbayes.TNKFClassifier(time_budget=budget, **TNKF_FIXED), X, labels)
    assert classifier.subset_ is not None and classifier.subset_.numel() < n
    assert list(classifier.classes_) == ["high", "low"] and np.mean(classifier.predict(X) == labels) > 0.8


def test_tt_kalman_smaller_budget_smaller_rank_and_given_settings_kept(capsys):
    X, y = _data(300, 3)
    kwargs = dict(TT_FIXED, max_rows=16)
    unbudgeted = _quiet(tnbayes.TTKalmanGP(time_budget=None, **kwargs), X, y)
    assert (unbudgeted.max_rank_, unbudgeted.batch_size_, unbudgeted.rows_used_) == (10, 8, 16)
    assert unbudgeted.num_basis_ == min(8, unbudgeted.budget_["rule_num_basis"])
    default_seconds = unbudgeted.budget_["predicted_seconds"]
    roomy = _quiet(tnbayes.TTKalmanGP(time_budget=100 * default_seconds, verbose=True, **kwargs), X, y)
    assert roomy.max_rank_ == 10 and roomy.num_basis_ >= unbudgeted.num_basis_
    assert "time budget" in capsys.readouterr().out  # verbose prints the choice
    tight = _quiet(tnbayes.TTKalmanGP(time_budget=0.5 * default_seconds, **kwargs), X, y)
    assert tight.max_rank_ < 10 and tight.rows_used_ == 16
    assert tight.budget_["predicted_seconds"] < default_seconds
    with pytest.warns(BudgetWarning, match=r"Pass max_rows=\d+ .* with max_rank=9, max_num_basis=5, batch_size=5"):
        given = tnbayes.TTKalmanGP(time_budget=1e-6, max_rank=9, batch_size=5, num_basis=5, **kwargs).fit(X, y)
    assert (given.max_rank_, given.batch_size_, given.num_basis_, given.rows_used_) == (9, 5, 5, 16)
    assert given.budget_["chosen"] == [] and len(given.trace_history_) == 4  # 16 rows in batches of 5


def test_tt_kalman_budget_streams_fewer_rows_at_the_floor():
    X, y = _data(600, 3)
    with pytest.warns(BudgetWarning, match="max_rows="):
        model = tnbayes.TTKalmanGP(time_budget=1e-3, num_basis=4, **TT_FIXED).fit(X, y)
    assert model.rows_used_ == MIN_ROWS and model.max_rank_ == 6 and "max_rows" in model.budget_["chosen"]


def test_budget_survives_save_and_load(tmp_path):
    X, y = _data(200, 2)
    Xq, _ = _data(9, 2, seed=3)
    models = [tnbayes.TNKF(max_rows=20, **TNKF_FIXED), tnbayes.TTKalmanGP(max_rows=40, **TT_FIXED)]
    for k, model in enumerate(models):
        _quiet(model, X, y)
        path = tmp_path / f"model{k}.pt"
        model.save(path)
        back = tnbayes.load_model(path)
        assert back.budget_ == model.budget_ and back.budget_["settings"]["max_rows"] in (20, 40)
        a, b = model.posterior(Xq), back.posterior(Xq)
        torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=0)
        torch.testing.assert_close(a.variance, b.variance, rtol=0, atol=0)


@pytest.mark.parametrize("model, kwargs, match", [
    (tnbayes.TNKF, {"time_budget": 0.0}, "time_budget"),
    (tnbayes.TNKF, {"max_rows": "all"}, "max_rows"),
    (tnbayes.TTKalmanGP, {"time_budget": -1.0}, "time_budget"),
    (tnbayes.TTKalmanGP, {"max_rows": 0}, "max_rows"),
    (tnbayes.TTKalmanGP, {"max_rank": "big"}, "max_rank"),
])
def test_bad_budget_parameters(model, kwargs, match):
    X, y = _data(30, 2)
    with pytest.raises(ValueError, match=match):
        model(**kwargs).fit(X, y)


def test_a_quarter_of_the_budget_is_kept_for_estimated_hyperparameters():
    X, y = _data(60, 2)
    estimated = _quiet(tnbayes.TTKalmanGP(hyper_max_points=30, max_rows=16, time_budget=100.0), X, y)
    # the filter plans with the rest after the smoothing's predicted seconds (kept first)
    assert estimated.budget_["smoothing_reserve"] > 0
    assert estimated.budget_["filter_budget"] + estimated.budget_["smoothing_reserve"] == pytest.approx(75.0)
    assert 0 < estimated.budget_["hyperparameter_seconds"] <= estimated.budget_["fit_seconds"]
    given = _quiet(tnbayes.TTKalmanGP(max_rows=16, time_budget=100.0, **TT_FIXED), X, y)
    assert given.budget_["filter_budget"] + given.budget_["smoothing_reserve"] == pytest.approx(100.0)


@pytest.mark.parametrize("model", [tnbayes.TNKF, tnbayes.TTKalmanGP])
def test_hyperparameters_over_their_share_cut_the_filter_budget(model):
    """When estimating the hyper-parameters takes longer than their quarter of the budget, the filter plans with what
    is left of the budget (here nothing: a budget of a millisecond), not with three quarters of it."""
    X, y = _data(60, 2)
    with pytest.warns(BudgetWarning, match="hyper-parameters took all of time_budget=0.001"):
        fitted = model(max_rows=16, time_budget=1e-3).fit(X, y)
    assert fitted.budget_["hyperparameter_seconds"] > 1e-3
    assert fitted.budget_["filter_budget"] + fitted.budget_.get("smoothing_reserve", 0.0) == 0.0
    assert np.isfinite(fitted.predict(X[:5])).all()


@pytest.mark.parametrize("modes, matrix_ranks, vector_ranks", [((4,) * 6, [4, 16, 16, 16, 4], [4, 10, 10, 10, 4]),
                                                                 ((2, 5, 5, 5, 8), [4, 16, 16, 16], [2, 10, 10, 8]),
                                                                 ((7,), [], [])])
def test_row_cost_feature_counts_the_flops_of_the_dense_products(modes, matrix_ranks, vector_ranks):
    """The row model's contraction feature is the flop count of ``matvec_to_dense``, as torch's flop counter
    measures it."""
    from torch.utils.flop_counter import FlopCounterMode

    from tnbayes.inference.tnkf_cost import _dense_matvec_flops
    from tnbayes.tensors import TTMatrix, TTVector, matvec_to_dense
    g = torch.Generator().manual_seed(0)
    ra, rx = [1, *matrix_ranks, 1], [1, *vector_ranks, 1]
    matrix = TTMatrix([torch.randn(ra[k], n, n, ra[k + 1], generator=g, dtype=torch.float64)
                       for k, n in enumerate(modes)])
    vector = TTVector([torch.randn(rx[k], n, rx[k + 1], generator=g, dtype=torch.float64) for k, n in enumerate(modes)])
    with FlopCounterMode(display=False) as counter:
        matvec_to_dense(matrix.cores, vector.cores)
    assert _dense_matvec_flops(modes, matrix_ranks, vector_ranks) == counter.get_total_flops()


def test_tnkf_block_cost_factor_falls_from_one_to_the_measured_factor():
    from tnbayes.inference.budget import TNKF_BLOCK_COST_FACTOR, tnkf_block_cost_factor, tnkf_seconds_per_row
    factors = [tnkf_block_cost_factor(b) for b in (1, 2, 4, 8, 16, 64)]
    assert factors[0] == 1.0 and factors[-2] == factors[-1] == pytest.approx(TNKF_BLOCK_COST_FACTOR)
    assert all(a > b for a, b in zip(factors[:-2], factors[1:-1]))
    from tnbayes.inference.tnkf_cost import TNKF_BLOCK_COST, tnkf_block_features
    blocks = [tnkf_seconds_per_row([8, 8, 8, 8], 16, 8, 8, block_size=b) for b in (2, 4, 8, 16, 64)]
    features = tnkf_block_features([8, 8, 8, 8], 16, 8, 8)
    per_block_row = sum(TNKF_BLOCK_COST[name] * value for name, value in features.items())
    assert blocks[-2] == blocks[-1] == pytest.approx(TNKF_BLOCK_COST_FACTOR * per_block_row)
    assert all(a > b for a, b in zip(blocks[:-2], blocks[1:-1]))


@pytest.mark.parametrize("held_out", [False, True])
def test_smoothing_features_count_the_systems_the_smoothing_solves(monkeypatch, held_out):
    """The smoothing's cost features count the core systems TTKalmanGP's smoothing solves, the rows each one
    accumulates and their sizes, as a wrapper of ``TTALS._system`` records them (the sizes of the systems it returns):
    two sweeps and the Laplace pass with the noise given; with it estimated on held-out rows, two sweeps and the
    Laplace pass without them, then two over every row (no budget stops them) and the Laplace pass. With D = 4, M = 3
    and rank 4 the first core is square (r_0 M = r_1), so the Laplace pass skips it."""
    solved = []
    system = TTALS._system

    def counted(engine, k, *args, **kwargs):
        gram, rhs, targets_squared = system(engine, k, *args, **kwargs)
        solved.append((sum(int(chunk_y.shape[0]) for _, chunk_y in engine.rows()), gram.shape[0]))
        return gram, rhs, targets_squared

    monkeypatch.setattr(TTALS, "_system", counted)
    X, y = _data(300, 4)
    D, M, rank = 4, 3, 4
    fixed = {name: value for name, value in TT_FIXED.items() if not (held_out and name == "noise_variance")}
    model = _quiet(tnbayes.TTKalmanGP(num_basis=M, max_rank=rank, time_budget=None, max_sweeps=2, sweep_tol=0.0,
                                      **fixed), X, y)
    assert model.posterior_mean_tt_.ranks == (1, 3, 4, 3, 1)  # the ranks the features assume: at the cap
    assert model.smoothing_sweeps_ == 2 and model.smoothing_seconds_ > 0
    held = held_out_count(300) if held_out else 0
    passes = [tt_smoothing_features(D, M, rank, rows, sweeps=2) for rows in ((240, 300) if held_out else (300,))]
    features = {name: sum(p[name] for p in passes) for name in TT_SMOOTHING_COST}
    assert held == (60 if held_out else 0)
    assert features["system"] == len(solved) == len(passes) * (3 + 4 + 4 + 2 + 3)  # sweeps 3 + 4 + 4 + 2, Laplace 3
    assert features["gram_entry"] == sum(rows * size * size for rows, size in solved)
    assert features["solve_flop"] == sum(size ** 3 for _, size in solved)
    if held_out:  # the budget plans one sweep over all rows after the refit
        planned = tt_smoothing_features(D, M, rank, 300, sweeps=2, held_out_rows=held)
        final = tt_smoothing_features(D, M, rank, 300, sweeps=1)
        assert planned == {name: passes[0][name] + final[name] for name in planned}
    assert model.budget_["smoothing_predicted_seconds"] == pytest.approx(
        tt_smoothing_seconds(D, M, rank, 300, sweeps=2, held_out_rows=held), rel=1e-12)


def test_smoothing_cost_model_needs_two_inputs():
    with pytest.raises(ValueError, match="num_dims >= 2"):
        tt_smoothing_features(1, 8, 4, 100)


@pytest.mark.parametrize("rows, held", [(0, 0), (10, 0), (147, 0), (148, 30), (150, 30), (152, 30), (300, 60),
                                        (1001, 200)])
def test_held_out_count_is_the_size_of_the_held_out_split(rows, held):
    """A fifth of the rows, rounded, when at least 30 are held out and 30 left."""
    split = held_out_rows(rows, seed=3)
    assert held_out_count(rows) == held == (0 if split is None else int(split[1].numel()))


def test_budget_keeps_the_smoothing_planned_with_its_held_out_refit():
    """With the noise estimated on held-out rows the smoothing first refits without them, and the budget keeps its
    predicted seconds for that too: more than with the noise given, on the same rows and settings."""
    X, y = _data(400, 3)
    kwargs = dict(num_basis=4, max_rank=3, batch_size=8, time_budget=1000.0)
    given = _quiet(tnbayes.TTKalmanGP(**kwargs, **TT_FIXED), X, y)
    fixed = {name: value for name, value in TT_FIXED.items() if name != "noise_variance"}
    estimated = _quiet(tnbayes.TTKalmanGP(**kwargs, **fixed), X, y)
    assert given.budget_["smoothing_rows"] == estimated.budget_["smoothing_rows"] == 400
    assert estimated.budget_["smoothing_predicted_seconds"] > given.budget_["smoothing_predicted_seconds"] > 0


def test_budget_smooths_the_most_rows_its_share_affords():
    """When the smoothing over every row would take more than its share of the budget, the plan smooths the most
    rows whose predicted seconds fit the share (and at least the rows the filter streams)."""
    X, y = _data(3000, 3)
    D, M, rank = 3, 8, 7  # systems large enough that the rows, not the fixed costs, dominate the smoothing's seconds
    everything = tt_smoothing_seconds(D, M, rank, 3000)
    model = _quiet(tnbayes.TTKalmanGP(num_basis=M, max_rank=rank, batch_size=8, time_budget=everything, **TT_FIXED),
                   X, y)
    rows, reserve = model.budget_["smoothing_rows"], model.budget_["smoothing_reserve"]
    assert reserve == pytest.approx(SMOOTHING_BUDGET_SHARE * everything)
    assert model.budget_["rows"] <= rows < 3000
    assert tt_smoothing_seconds(D, M, rank, rows) <= reserve < tt_smoothing_seconds(D, M, rank, rows + 1)
    assert model.budget_["smoothing_predicted_seconds"] == pytest.approx(tt_smoothing_seconds(D, M, rank, rows))
