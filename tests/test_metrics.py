"""Tests for tnbayes.metrics against independent oracles (scipy.stats, properscoring, numpy)."""

from __future__ import annotations

import numpy as np
import properscoring
import pytest
import torch
from scipy import stats

from tnbayes import metrics
from tnbayes.metrics import (
    accuracy,
    calibration_curve,
    coverage,
    crps,
    evaluate,
    interval_width,
    mae,
    mse,
    msll,
    nlpd,
    pit,
    rmse,
)

RTOL = 1e-10
LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99)


class FakePosterior:
    """Minimal duck-typed posterior: torch tensors in ``mean`` and ``stddev``."""

    def __init__(self, mean, stddev, observation_noise: bool | None = None) -> None:
        self.mean = torch.as_tensor(mean, dtype=torch.float64)
        self.stddev = torch.as_tensor(stddev, dtype=torch.float64)
        if observation_noise is not None:
            self.observation_noise = observation_noise

    @property
    def variance(self) -> torch.Tensor:
        return self.stddev**2


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(20240521)
    n = 257
    mu = rng.normal(3.0, 2.0, n)
    sd = rng.lognormal(-0.5, 0.8, n)
    y = mu + sd * rng.standard_t(4, n) * 1.3  # deliberately not exactly the predicted Gaussian
    y_train = rng.normal(2.5, 3.0, 100)
    return y, mu, sd, y_train


# --------------------------------------------------------------------------- oracles
def test_point_metrics_match_numpy(data):
    y, mu, _, _ = data
    err = y - mu
    assert mse(y, mu) == pytest.approx(np.sum(err**2) / err.size, rel=RTOL)
    assert rmse(y, mu) == pytest.approx(np.sqrt(np.sum(err**2) / err.size), rel=RTOL)
    assert mae(y, mu) == pytest.approx(np.sum(np.abs(err)) / err.size, rel=RTOL)
    assert all(type(f(y, mu)) is float for f in (mse, rmse, mae))


def test_nlpd_matches_scipy_logpdf(data):
    y, mu, sd, _ = data
    expected = -np.mean(stats.norm.logpdf(y, loc=mu, scale=sd))
    got = nlpd(y, mu, sd)
    assert type(got) is float
    assert got == pytest.approx(expected, rel=RTOL)


def test_nlpd_is_per_point_mean_not_joint_over_n():
    # Single point: N(0 | 0, 1) -> 0.5 log(2π); two points differ only through the average.
    assert nlpd([0.0], [0.0], [1.0]) == pytest.approx(0.5 * np.log(2 * np.pi), rel=RTOL)
    assert nlpd([0.0, 2.0], [0.0, 0.0], [1.0, 1.0]) == pytest.approx(
        0.5 * np.log(2 * np.pi) + 0.5 * (0 + 4) / 2, rel=RTOL
    )


def test_nlpd_extreme_values_stay_finite():
    # exp(-z²/2) underflows to 0 for the first two points; the log form does not.
    y = np.array([50.0, 1e-80, 3.0])
    mu = np.zeros(3)
    sd = np.array([1e-3, 1e-100, 1e200])
    expected = -np.mean(stats.norm.logpdf(y, loc=mu, scale=sd))
    got = nlpd(y, mu, sd)
    assert np.isfinite(got) and got == pytest.approx(expected, rel=RTOL)


def test_crps_matches_properscoring(data):
    y, mu, sd, _ = data
    expected = np.mean(properscoring.crps_gaussian(y, mu=mu, sig=sd))
    assert crps(y, mu, sd) == pytest.approx(expected, rel=RTOL)


def test_crps_far_tail_and_small_sigma_limit():
    # |z| large: CRPS -> |y - μ| - σ/√π; properscoring uses the same formula, compare absolutely.
    y, mu, sd = np.array([40.0, -55.0]), np.zeros(2), np.array([1.0, 1.0])
    expected = np.mean(properscoring.crps_gaussian(y, mu=mu, sig=sd))
    assert crps(y, mu, sd) == pytest.approx(expected, abs=1e-10)
    assert crps(y, mu, sd) == pytest.approx(np.mean(np.abs(y) - 1 / np.sqrt(np.pi)), abs=1e-10)
    # σ -> 0 recovers the absolute error.
    assert crps([1.5], [1.0], [1e-12]) == pytest.approx(0.5, abs=1e-10)


def test_pit_matches_scipy_cdf(data):
    y, mu, sd, _ = data
    u = pit(y, mu, sd)
    assert isinstance(u, np.ndarray) and u.shape == y.shape and u.dtype == np.float64
    np.testing.assert_allclose(u, stats.norm.cdf(y, loc=mu, scale=sd), rtol=RTOL, atol=1e-15)


@pytest.mark.parametrize("level", LEVELS)
def test_coverage_and_width_match_scipy_interval(data, level):
    y, mu, sd, _ = data
    lo, hi = stats.norm.interval(level, loc=mu, scale=sd)
    assert coverage(y, mu, sd, level=level) == np.mean((y >= lo) & (y <= hi))
    assert interval_width(mu, sd, level=level) == pytest.approx(np.mean(hi - lo), rel=RTOL)


def test_coverage_default_level_is_95(data):
    y, mu, sd, _ = data
    assert coverage(y, mu, sd) == coverage(y, mu, sd, level=0.95)
    assert interval_width(mu, sd) == interval_width(mu, sd, level=0.95)


def test_msll_matches_scipy_logpdf(data):
    y, mu, sd, y_train = data
    model = -stats.norm.logpdf(y, loc=mu, scale=sd)
    trivial = -stats.norm.logpdf(y, loc=np.mean(y_train), scale=np.std(y_train))
    assert msll(y, mu, sd, y_train=y_train) == pytest.approx(np.mean(model - trivial), rel=RTOL)


def test_msll_of_trivial_model_is_zero(data):
    y, _, _, y_train = data
    m, s = np.mean(y_train), np.std(y_train)
    assert msll(y, np.full_like(y, m), s, y_train=y_train) == pytest.approx(0.0, abs=1e-12)


def test_calibration_curve_agrees_with_coverage(data):
    y, mu, sd, _ = data
    lv, obs = calibration_curve(y, mu, sd)
    np.testing.assert_array_equal(lv, np.linspace(0.05, 0.95, 19))
    assert obs.shape == (19,)
    for p, o in zip(lv, obs):
        assert o == coverage(y, mu, sd, level=p)
    lv2, obs2 = calibration_curve(y, mu, sd, levels=[0.2, 0.99])
    np.testing.assert_array_equal(lv2, [0.2, 0.99])
    assert obs2[1] == coverage(y, mu, sd, level=0.99)


def test_calibration_curve_of_well_specified_gaussian_is_diagonal():
    rng = np.random.default_rng(0)
    n = 20_000
    mu = rng.normal(size=n)
    sd = rng.lognormal(0.0, 0.5, n)
    y = rng.normal(mu, sd)
    lv, obs = calibration_curve(y, mu, sd)
    assert np.max(np.abs(obs - lv)) < 0.02
    # Overconfident predictions (σ halved) fall clearly below the diagonal.
    _, obs_over = calibration_curve(y, mu, sd / 2)
    assert np.all(obs_over[2:] < lv[2:] - 0.02)


def test_accuracy():
    assert accuracy([1, -1, 1, 1], [1, 1, 1, -1]) == 0.5
    assert accuracy(np.array(["a", "b"]), ["a", "b"]) == 1.0
    assert accuracy(torch.tensor([0, 1, 2]), np.array([0, 1, 1])) == pytest.approx(2 / 3, rel=RTOL)
    assert type(accuracy([1], [1])) is float


# --------------------------------------------------------------------------- input types
def _all_scalar_metrics(y, pred, std=None, y_train=None):
    out = {
        "nlpd": nlpd(y, pred, std),
        "crps": crps(y, pred, std),
        "msll": msll(y, pred, std, y_train=y_train),
        "width": interval_width(pred, std, level=0.9),
    }
    out.update({f"cov{p}": coverage(y, pred, std, level=p) for p in LEVELS})
    return out


def test_posterior_gives_same_numbers_as_arrays(data):
    y, mu, sd, y_train = data
    post = FakePosterior(mu, sd)
    assert _all_scalar_metrics(y, post, y_train=y_train) == _all_scalar_metrics(
        y, mu, sd, y_train=y_train
    )
    np.testing.assert_array_equal(pit(y, post), pit(y, mu, sd))
    np.testing.assert_array_equal(calibration_curve(y, post)[1], calibration_curve(y, mu, sd)[1])
    for f in (rmse, mae, mse):
        assert f(y, post) == f(y, mu)


def test_torch_distribution_counts_as_posterior(data):
    y, mu, sd, _ = data
    dist = torch.distributions.Normal(torch.tensor(mu), torch.tensor(sd))
    assert nlpd(y, dist) == pytest.approx(-dist.log_prob(torch.tensor(y)).mean().item(), rel=RTOL)


def test_torch_numpy_and_list_inputs_agree(data):
    y, mu, sd, y_train = data
    ref = _all_scalar_metrics(y, mu, sd, y_train=y_train)
    as_torch = _all_scalar_metrics(
        torch.tensor(y), torch.tensor(mu), torch.tensor(sd), y_train=torch.tensor(y_train)
    )
    as_list = _all_scalar_metrics(y.tolist(), mu.tolist(), sd.tolist(), y_train=y_train.tolist())
    assert as_torch == ref and as_list == ref
    assert rmse(torch.tensor(y), torch.tensor(mu)) == rmse(y, mu)
    # float32 tensors (possibly requiring grad) are upcast to float64 and detached.
    mu32 = torch.tensor(mu, dtype=torch.float32, requires_grad=True)
    expected = nlpd(y, mu32.detach().double().numpy(), sd)
    assert nlpd(y, mu32, sd) == expected


def test_scalar_std_broadcasts(data):
    y, mu, _, _ = data
    assert nlpd(y, mu, 0.7) == nlpd(y, mu, np.full_like(mu, 0.7))
    assert interval_width(mu, 0.7) == pytest.approx(2 * stats.norm.ppf(0.975) * 0.7, rel=RTOL)


# --------------------------------------------------------------------------- evaluate
def test_evaluate_keys_and_values(data):
    y, mu, sd, y_train = data
    post = FakePosterior(mu, sd)
    res = evaluate(post, y)
    assert set(res) == {"rmse", "mae", "nlpd", "crps", "coverage_95", "interval_width_95", "n"}
    assert res["n"] == y.size and type(res["n"]) is int
    assert res["rmse"] == rmse(y, mu) and res["mae"] == mae(y, mu)
    assert res["nlpd"] == nlpd(y, mu, sd) and res["crps"] == crps(y, mu, sd)
    assert res["coverage_95"] == coverage(y, mu, sd, level=0.95)
    assert res["interval_width_95"] == interval_width(mu, sd, level=0.95)
    assert all(type(v) is float for k, v in res.items() if k != "n")

    res = evaluate(post, torch.tensor(y), levels=(0.5, 0.9, 0.995), y_train=y_train)
    assert {"coverage_50", "coverage_90", "coverage_99.5", "coverage_95", "msll"} <= set(res)
    assert {"interval_width_50", "interval_width_90", "interval_width_99.5"} <= set(res)
    assert res["coverage_90"] == coverage(y, mu, sd, level=0.9)
    assert res["interval_width_99.5"] == interval_width(mu, sd, level=0.995)
    assert res["msll"] == msll(y, mu, sd, y_train=y_train)


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "call",
    [
        lambda: rmse(np.zeros(5), np.zeros(4)),
        lambda: mae(np.zeros(5), FakePosterior(np.zeros(4), np.ones(4))),
        lambda: nlpd(np.zeros(5), np.zeros(4), np.ones(4)),
        lambda: crps(np.zeros(5), FakePosterior(np.zeros(4), np.ones(4))),
    ],
)
def test_shape_mismatch_names_both_shapes(call):
    with pytest.raises(ValueError, match=r"shape \(5,\).*shape \(4,\)"):
        call()


def test_column_vector_gets_ravel_hint():
    with pytest.raises(ValueError, match=r"\(3, 1\).*\(3,\).*ravel"):
        nlpd(np.zeros((3, 1)), np.zeros(3), np.ones(3))


def test_mean_std_shape_mismatch():
    with pytest.raises(ValueError, match=r"pred \(mean\) has shape \(3,\) but std has shape \(2,\)"):
        nlpd(np.zeros(3), np.zeros(3), np.ones(2))
    with pytest.raises(ValueError, match=r"posterior mean has shape \(3,\).*posterior stddev"):
        nlpd(np.zeros(3), FakePosterior(np.zeros(3), np.ones(2)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["y_true", "pred", "std"])
def test_non_finite_rejected(bad, where):
    arrs = {"y_true": np.zeros(4), "pred": np.zeros(4), "std": np.ones(4)}
    arrs[where][2] = bad
    with pytest.raises(ValueError, match=rf"{where} contains 1 non-finite value.*index \(2,\)"):
        nlpd(arrs["y_true"], arrs["pred"], arrs["std"])


def test_non_finite_in_posterior_and_point_metrics():
    with pytest.raises(ValueError, match="posterior stddev contains 1 non-finite value"):
        crps(np.zeros(2), FakePosterior([0.0, 0.0], [1.0, np.nan]))
    with pytest.raises(ValueError, match="y_pred contains 1 non-finite"):
        rmse([1.0, 2.0], [np.nan, 2.0])
    with pytest.raises(ValueError, match="y_train contains 1 non-finite"):
        msll([1.0], [1.0], [1.0], y_train=[1.0, np.inf, 2.0])


def test_pandas_missing_values_are_reported_as_missing():
    """A nullable pandas column's pd.NA is a missing value (float() refuses it in an object array)."""
    import pandas as pd

    y_true = pd.Series(pd.array([1.0, None, 2.0], dtype="Float64"))
    with pytest.raises(ValueError, match=r"y_true contains 1 non-finite value.*index \(1,\).*impute"):
        rmse(y_true, np.zeros(3))
    assert rmse(pd.Series(pd.array([1, 2, 2], dtype="Int64")), np.zeros(3)) == pytest.approx(np.sqrt(3.0))
    pyarrow = pytest.importorskip("pyarrow")  # other objects with to_numpy() keep their own conversion
    assert rmse(pyarrow.array([1.0, 2.0, 2.0]), np.zeros(3)) == pytest.approx(np.sqrt(3.0))


@pytest.mark.parametrize("sd", [0.0, -1.0])
def test_nonpositive_std_rejected_with_observation_noise_hint(sd):
    with pytest.raises(ValueError, match=r"std must be strictly positive.*observation_noise=True"):
        nlpd(np.zeros(3), np.zeros(3), np.array([1.0, sd, 1.0]))
    post = FakePosterior(np.zeros(3), [1.0, sd, 1.0], observation_noise=False)
    with pytest.raises(ValueError, match=r"has observation_noise=False.*observation_noise=True"):
        coverage(np.zeros(3), post)


def test_zero_std_is_fine_for_point_metrics():
    post = FakePosterior([1.0, 2.0], [0.0, 0.0])
    assert rmse([1.0, 4.0], post) == pytest.approx(np.sqrt(2.0), rel=RTOL)


def test_std_required_for_arrays():
    with pytest.raises(ValueError, match="std is required when pred is an array"):
        nlpd([1.0], [1.0])
    with pytest.raises(ValueError, match="std is required"):
        interval_width(np.ones(3))


def test_std_forbidden_for_posteriors():
    post = FakePosterior([0.0], [1.0])
    with pytest.raises(ValueError, match="std must be None when pred is a posterior"):
        crps([0.0], post, np.ones(1))


@pytest.mark.parametrize("level", [0.0, 1.0, -0.1, 95, float("nan"), "high"])
def test_invalid_level_rejected(level):
    with pytest.raises(ValueError, match="level must"):
        coverage([0.0], [0.0], [1.0], level=level)
    with pytest.raises(ValueError, match="level must"):
        interval_width([0.0], [1.0], level=level)


def test_percent_level_gets_hint():
    with pytest.raises(ValueError, match="Did you mean 0.95"):
        coverage([0.0], [0.0], [1.0], level=95)


def test_invalid_calibration_levels_and_evaluate_levels():
    with pytest.raises(ValueError, match="every entry of levels must lie strictly between 0 and 1"):
        calibration_curve([0.0], [0.0], [1.0], levels=[0.5, 1.0])
    with pytest.raises(ValueError, match="levels is empty"):
        calibration_curve([0.0], [0.0], [1.0], levels=[])
    with pytest.raises(ValueError, match="every entry of levels must"):
        evaluate(FakePosterior([0.0], [1.0]), [0.0], levels=(0.9, 2.0))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: rmse([], []), "y_pred"),
        (lambda: nlpd(np.array([]), np.array([]), np.array([])), "pred"),
        (lambda: coverage([], FakePosterior([], [])), "posterior mean"),
        (lambda: accuracy([], []), "y_true"),
    ],
)
def test_empty_rejected(call, name):
    with pytest.raises(ValueError, match=rf"{name} is empty"):
        call()


def test_non_numeric_rejected():
    with pytest.raises(ValueError, match="y_true has dtype <U1; real numeric data are required"):
        nlpd(["a", "b"], [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="pred has complex"):
        nlpd([0.0], np.array([1j]), [1.0])


def test_msll_degenerate_training_targets():
    with pytest.raises(ValueError, match="y_train is constant"):
        msll([0.0], [0.0], [1.0], y_train=[2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="y_train needs at least 2 values"):
        msll([0.0], [0.0], [1.0], y_train=[2.0])


def test_evaluate_requires_posterior():
    with pytest.raises(ValueError, match=r"evaluate expects a posterior.*evaluate\(posterior, y_true\)"):
        evaluate(np.zeros(3), np.zeros(3))


def test_accuracy_errors():
    with pytest.raises(ValueError, match="accuracy expects predicted labels, not a posterior"):
        accuracy([1.0], FakePosterior([1.0], [1.0]))
    with pytest.raises(ValueError, match=r"y_true has shape \(2,\) but y_pred has shape \(3,\)"):
        accuracy([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="y_pred contains NaN labels"):
        accuracy([1.0, 2.0], [1.0, np.nan])


def test_public_names():
    expected = {
        "accuracy", "calibration_curve", "coverage", "crps", "evaluate", "interval_width",
        "mae", "mse", "msll", "nlpd", "pit", "rmse",
    }
    assert set(metrics.__all__) == expected
    for name in expected:
        assert getattr(metrics, name).__doc__
