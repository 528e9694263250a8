"""The plots take what the package returns: a GaussianPosterior for calibration, axis labels for bands."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tnbayes import metrics  # noqa: E402
from tnbayes.plotting import plot_calibration, plot_predictive_band, plot_relevances  # noqa: E402
from tnbayes.posterior import GaussianPosterior  # noqa: E402


def _posterior_and_targets(n=50):
    rng = np.random.default_rng(0)
    mean = torch.as_tensor(rng.standard_normal(n))
    variance = torch.full((n,), 0.25, dtype=torch.float64)
    y_true = mean.numpy() + 0.5 * rng.standard_normal(n)
    return GaussianPosterior(mean, variance), y_true


def test_calibration_from_a_posterior_matches_the_curve():
    posterior, y_true = _posterior_and_targets()
    ax = plot_calibration(posterior, y_true, label="model", title="calibration")
    nominal, observed = metrics.calibration_curve(y_true, posterior)
    line = [ln for ln in ax.get_lines() if ln.get_label() == "model"][0]
    np.testing.assert_allclose(line.get_xdata(), nominal)
    np.testing.assert_allclose(line.get_ydata(), observed)
    assert ax.get_title() == "calibration"
    plt.close(ax.figure)


def test_calibration_mixes_posteriors_and_curves_by_name():
    posterior, y_true = _posterior_and_targets()
    curve = metrics.calibration_curve(y_true, posterior)
    ax = plot_calibration({"posterior": posterior, "curve": curve}, y_true)
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert {"posterior", "curve", "ideal"} <= set(labels)
    plt.close(ax.figure)


def test_calibration_of_a_posterior_needs_y_true():
    posterior, _ = _posterior_and_targets()
    with pytest.raises(ValueError, match="y_true"):
        plot_calibration(posterior)
    with pytest.raises(TypeError, match="GaussianPosterior"):
        plot_calibration([1, 2])


def test_predictive_band_takes_axis_labels():
    posterior, _ = _posterior_and_targets(20)
    ax = plot_predictive_band(np.linspace(0, 1, 20), posterior, xlabel="time [s]", ylabel="y [m]", title="band")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("time [s]", "y [m]", "band")
    plt.close(ax.figure)


def test_relevances_stem_plot_labels_every_input_or_a_subset():
    ax = plot_relevances(torch.tensor([0.1, 1.0, 0.0]), feature_names=["a", "b", "c"], title="ARD")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("input", "scaled |λ|", "ARD")
    plt.close(ax.figure)
    ax = plot_relevances(np.linspace(0, 1, 60), ylabel="λ")
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(j + 1) for j in range(0, 60, 2)]
    assert ax.get_ylabel() == "λ"
    plt.close(ax.figure)
