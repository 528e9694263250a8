"""Held-out noise estimates (tnbayes.selection.calibration) and the models that use them."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes import metrics
from tnbayes.data import ChunkedData
from tnbayes.selection.calibration import (
    HELD_OUT_FRACTION,
    MIN_HELD_OUT_ROWS,
    PrequentialResiduals,
    additive_variance_estimate,
    check_noise_estimate,
    held_out_rows,
    proportional_noise_estimate,
)


def _gaussian_log_likelihood(r2: np.ndarray, v: np.ndarray, s: float) -> float:
    return float(np.sum(-0.5 * np.log(v + s) - 0.5 * r2 / (v + s)))


def test_additive_estimate_is_the_likelihood_maximum_of_a_dense_grid():
    rng = np.random.default_rng(0)
    v = rng.uniform(0.01, 0.5, 400)
    r = rng.standard_normal(400) * np.sqrt(v + 0.3)
    s = additive_variance_estimate(torch.as_tensor(r), torch.as_tensor(v))
    grid = np.exp(np.linspace(np.log(1e-4), np.log(10.0), 20001))
    scores = np.array([_gaussian_log_likelihood(r ** 2, v, g) for g in grid])
    best = grid[int(np.argmax(scores))]
    assert s == pytest.approx(best, rel=1e-3)
    assert 0.2 < s < 0.45  # and near the truth, 0.3


def test_additive_estimate_is_zero_when_the_model_variance_explains_the_residuals():
    rng = np.random.default_rng(1)
    v = rng.uniform(0.5, 1.0, 300)
    r = rng.standard_normal(300) * np.sqrt(0.5 * v)  # over-dispersed variances: nothing to add
    assert additive_variance_estimate(torch.as_tensor(r), torch.as_tensor(v)) == 0.0


def test_proportional_estimate_recovers_sigma2():
    rng = np.random.default_rng(2)
    q = rng.uniform(0.0, 3.0, 20000)
    r = rng.standard_normal(20000) * np.sqrt(0.7 * (1.0 + q))
    estimate = proportional_noise_estimate(torch.as_tensor(r), torch.as_tensor(q))
    assert estimate == pytest.approx(0.7, rel=0.03)
    # the closed form is the maximiser of the Gaussian likelihood in σ²
    grid = np.linspace(0.5, 0.9, 4001)
    scores = [_gaussian_log_likelihood(r ** 2, g * (1 + q), 0.0) for g in grid]
    assert estimate == pytest.approx(grid[int(np.argmax(scores))], abs=1e-4)


def test_estimates_reject_mismatched_inputs():
    with pytest.raises(ValueError, match="matching"):
        additive_variance_estimate(torch.zeros(3), torch.ones(4))
    with pytest.raises(ValueError, match="matching"):
        proportional_noise_estimate(torch.zeros(0), torch.zeros(0))
    with pytest.raises(ValueError, match="noise_estimate must be one of"):
        check_noise_estimate("cv")


def test_held_out_rows_split_and_minimum():
    fitted, held = held_out_rows(1000, seed=3)
    assert held.numel() == round(HELD_OUT_FRACTION * 1000)
    assert torch.equal(torch.sort(torch.cat([fitted, held])).values, torch.arange(1000))
    assert held_out_rows(int(MIN_HELD_OUT_ROWS / HELD_OUT_FRACTION) - 10, seed=0) is None
    again = held_out_rows(1000, seed=3)
    assert torch.equal(again[1], held)


def test_prequential_residuals_collect_exactly_the_last_rows():
    collector = PrequentialResiduals(500)
    first = 500 - round(HELD_OUT_FRACTION * 500)
    taken = []
    for processed in range(0, 500, 32):
        rows = min(32, 500 - processed)
        wanted = collector.wanted(processed, rows)
        taken.extend(range(processed + wanted.start, processed + wanted.stop))
        count = wanted.stop - wanted.start
        collector.add(torch.zeros(count), torch.ones(count), torch.zeros(count))
    assert taken == list(range(first, 500))
    assert collector.num_collected == 500 - first
    assert collector.noise_variance(0.1) == pytest.approx(0.1)  # zero residuals: nothing added
    assert PrequentialResiduals(100).noise_variance(0.1) is None  # 20 rows: too few
    assert collector.error_ratio() is None  # every target 0: the prior is exact, nothing to compare with


def test_error_ratio_is_the_mean_squared_residual_over_the_priors():
    rng = np.random.default_rng(5)
    residuals, targets = rng.standard_normal(100), 3.0 + 2.0 * rng.standard_normal(100)
    collector = PrequentialResiduals(500)
    for part in (slice(0, 40), slice(40, 100)):
        collector.add(torch.from_numpy(residuals[part]), torch.ones(part.stop - part.start),
                      torch.from_numpy(targets[part]))
    assert collector.error_ratio() == pytest.approx(np.mean(residuals**2) / np.mean(targets**2), rel=1e-12)
    collector.add(torch.tensor([math.nan]), torch.ones(1), torch.ones(1))
    assert math.isnan(collector.error_ratio())  # a mean that overflowed: not ≤ any bound
    few = PrequentialResiduals(500)
    few.add(torch.ones(MIN_HELD_OUT_ROWS - 1), torch.ones(MIN_HELD_OUT_ROWS - 1), torch.randn(MIN_HELD_OUT_ROWS - 1))
    assert few.error_ratio() is None


def test_error_ratio_checks_the_innovations_and_the_noise_estimate_the_residuals():
    rng = np.random.default_rng(7)
    residuals, innovations, targets = 3.0 * rng.standard_normal(60), 0.1 * rng.standard_normal(60), \
        rng.standard_normal(60)
    collector = PrequentialResiduals(300)
    collector.add(torch.from_numpy(residuals), torch.full((60,), 0.5), torch.from_numpy(targets),
                  torch.from_numpy(innovations))
    assert collector.error_ratio() == pytest.approx(np.mean(innovations**2) / np.mean(targets**2), rel=1e-12)
    without = PrequentialResiduals(300)
    without.add(torch.from_numpy(residuals), torch.full((60,), 0.5), torch.from_numpy(targets))
    assert collector.noise_variance(0.1) == pytest.approx(without.noise_variance(0.1), rel=1e-12)
    assert collector.noise_variance(0.1) > 1.0  # the residuals' 9, not the innovations' 0.01


def test_tnkf_does_not_say_it_lost_noise_free_data_it_predicts():
    """Noise-free smooth data: the exact GP's noise is at its floor, α's posterior mean has large entries that cancel,
    and a held-out row's prediction without its own entry is far from the data (its squared error was 10⁴ times the
    prior's, and the check warned). The filter's own innovations are small: it predicts the test rows well."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (200, 2))
    y = np.sin(3 * X[:, 0]) + 0.5 * X[:, 1] ** 2
    untruncated = {q: (0.0, None) for q in ("covariance", "gain", "innovation", "row")}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = tnbayes.TNKF(time_budget=None, truncation={**untruncated, "mean": 0.0}).fit(X[:150], y[:150])
    assert model.measurement_noise_ < 1e-4
    assert np.sqrt(np.mean((model.predict(X[150:]) - y[150:]) ** 2)) < 0.1 * np.std(y[150:])


def test_tnkf_held_out_rows_of_blocks_are_predicted_one_by_one_as_rows_are():
    """Untruncated, the block and row filters are both exact. In blocks of 4 each held-out row is predicted from the
    state before its block (up to 3 rows earlier than row by row), each conditioned on its own entry as one row: the
    two noise estimates agree closely (measured: 8.5e-4 relative), not exactly."""
    X, y = _flipped_stream(flip=False)
    fits = {size: tnbayes.TNKF(time_budget=None, stream_order="given", block_size=size,
                               truncation={q: (0.0, None) for q in ("covariance", "gain", "innovation", "row")})
            for size in (1, 4)}
    for model in fits.values():
        model.fit(X, y)
        assert math.isfinite(model.held_out_noise_variance_) and model.noise_variance_ >= model.measurement_noise_
    assert fits[4].held_out_noise_variance_ == pytest.approx(fits[1].held_out_noise_variance_, rel=1e-2)


def _overfitting_problem(seed: int = 0):
    """9 inputs, 300 nearly noise-free rows of a smooth non-additive function: the exact GP's σ² is tiny, and a CPD
    of high rank interpolates its training rows but predicts new rows much worse than that σ² says."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (500, 9))
    f = np.sin(2 * X[:, 0] * X[:, 1]) + np.cos(X[:, 2] + X[:, 3] * X[:, 4]) + 0.5 * X[:, 5] * X[:, 6] * X[:, 7]
    y = f + 1e-3 * rng.standard_normal(500)
    return X[:300], y[:300], X[300:], y[300:]


def test_cpd_held_out_noise_restores_coverage_where_the_training_rule_under_covers():
    Xtr, ytr, Xte, yte = _overfitting_problem()
    held = tnbayes.CPDKernelMachine(rank=40, max_num_basis=12).fit(Xtr, ytr)
    training = tnbayes.CPDKernelMachine(rank=40, max_num_basis=12, noise_estimate="training").fit(Xtr, ytr)
    assert held.held_out_noise_variance_ is not None and training.held_out_noise_variance_ is None
    assert held.noise_variance_ == held.held_out_noise_variance_
    # the same cores: only σ² differs
    np.testing.assert_allclose(held.predict(Xte), training.predict(Xte))
    scores_held = metrics.evaluate(held.posterior(Xte), yte)
    scores_training = metrics.evaluate(training.posterior(Xte), yte)
    assert scores_training["coverage_95"] < 0.85
    assert 0.9 <= scores_held["coverage_95"] <= 1.0
    assert scores_held["nlpd"] < scores_training["nlpd"]


def test_cpd_held_out_noise_matches_the_true_noise_on_a_well_specified_problem():
    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, (600, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(600)
    model = tnbayes.CPDKernelMachine().fit(X, y)
    sigma2 = model.noise_variance_ * float(model.y_scaler_.scale_) ** 2  # back in the units of y
    assert 0.5 * 0.01 < sigma2 < 2.0 * 0.01


@pytest.mark.parametrize("model_class", [tnbayes.TTKalmanGP, tnbayes.TNKF])
def test_kalman_filters_add_the_variance_their_last_rows_call_for(model_class):
    Xtr, ytr, Xte, yte = _overfitting_problem(1)
    Xtr, Xte = Xtr[:, :3], Xte[:, :3]
    # the filter's own posterior (TTKalmanGP's smoothing has its own held-out refit: tests/test_scale_out.py)
    fast = {"time_budget": None, "max_rank": 4, "smoothing": "none"} if model_class is tnbayes.TTKalmanGP else \
        {"time_budget": None}
    held = model_class(**fast).fit(Xtr, ytr)
    training = model_class(noise_estimate="training", **fast).fit(Xtr, ytr)
    assert training.held_out_noise_variance_ is None
    assert training.noise_variance_ == training.measurement_noise_
    assert held.held_out_noise_variance_ is not None
    assert held.noise_variance_ == held.held_out_noise_variance_ >= held.measurement_noise_
    np.testing.assert_allclose(held.predict(Xte), training.predict(Xte))
    nlpd_held = metrics.evaluate(held.posterior(Xte), yte)["nlpd"]
    nlpd_training = metrics.evaluate(training.posterior(Xte), yte)["nlpd"]
    assert math.isfinite(nlpd_held) and nlpd_held <= nlpd_training + 1e-9


def _flipped_stream(n: int = 300, flip: bool = True):
    """A smooth 2-input function of mean about 0 whose last 20% of rows (in the given order) have y replaced by −y/2
    (``flip``): a filter that learnt the first rows predicts y where −y/2 comes, with up to nine times its prior's mean
    squared error (1.5² / 0.5²), as a filter whose state lost the data predicts worse than its prior (the case
    measured in docs/benchmarks.md, TTKalmanGP at rank 5 over 20 000 airline rows, is too slow for a test)."""
    rng = np.random.default_rng(6)
    X = rng.uniform(-1, 1, (n, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    if flip:
        y[int(0.8 * n):] *= -0.5
    return X, y


@pytest.mark.parametrize("model_class", [tnbayes.TTKalmanGP, tnbayes.TNKF])
def test_kalman_filters_warn_when_their_last_rows_are_predicted_worse_than_by_their_prior(model_class):
    settings = ({"time_budget": None, "max_rank": 4, "smoothing": "none", "max_num_basis": 8}
                if model_class is tnbayes.TTKalmanGP else {"time_budget": None, "stream_order": "given"})
    # TNKF streams the rows in the given order; TTKalmanGP shuffles within a chunk and filters the chunks in order
    data = (lambda X, y: (X, y)) if model_class is tnbayes.TNKF else \
        (lambda X, y: (ChunkedData.from_arrays(X, y, 60),))
    with pytest.warns(RuntimeWarning, match="has lost the data") as caught:
        model = model_class(**settings).fit(*data(*_flipped_stream()))
    lost = [w for w in caught if "lost the data" in str(w.message)]
    assert len(lost) == 1 and f"last {round(HELD_OUT_FRACTION * 300)} rows" in str(lost[0].message)
    assert lost[0].filename == __file__  # the caller's line, not the filter's
    assert any("lost the data" in line for line in model.fit_report_)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model_class(**settings).fit(*data(*_flipped_stream(flip=False)))
