"""The selection layer is the one every model calls: ML-II (tnbayes.selection.marginal_likelihood), the input-box
rule (tnbayes.selection.input_box) and the fit report."""

import numpy as np
import pytest
import torch

import tnbayes
import tnbayes.models.base
import tnbayes.selection.marginal_likelihood as marginal_likelihood
from tnbayes.selection import estimate_kernel_hyperparameters, initial_lengthscale, lengthscale_prior_location


def _data(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    return X, np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(n)


# models whose kernel hyper-parameters come from an exact GP's ML-II, with settings that keep the fit small
ML2_MODELS = {
    "ExactGP": lambda: tnbayes.ExactGP(num_restarts=0, max_iter=20),
    "CPDKernelMachine": lambda: tnbayes.CPDKernelMachine(rank=2, num_basis=6, max_sweeps=2),
    "CPDKernelClassifier": lambda: tnbayes.CPDKernelClassifier(rank=2, num_basis=6, max_sweeps=2),
    "TNKF": lambda: tnbayes.TNKF(),
    "TTKalmanGP": lambda: tnbayes.TTKalmanGP(num_basis=4),
}


@pytest.mark.parametrize("name", sorted(ML2_MODELS))
def test_every_model_with_gp_hyperparameters_runs_the_one_ml2(name, monkeypatch):
    calls = []
    original = marginal_likelihood._optimise

    def spy(model, settings):
        calls.append(settings)
        return original(model, settings)

    monkeypatch.setattr(marginal_likelihood, "_optimise", spy)
    X, y = _data(40)
    if name == "CPDKernelClassifier":
        y = np.where(y > 0, 1, -1)
    ML2_MODELS[name]().fit(X, y)
    assert calls and all(s.prior == "dimension_scaled" for s in calls)


BOXED = {
    "CPDKernelMachine": lambda: tnbayes.CPDKernelMachine(rank=2, num_basis=6, lengthscale=0.5, outputscale=1.0,
                                                         noise_variance=0.01),
    "HilbertGP": lambda: tnbayes.HilbertGP(num_basis=6, lengthscale=0.5, outputscale=1.0, noise_variance=0.01),
    "TTKalmanGP": lambda: tnbayes.TTKalmanGP(num_basis=4, lengthscale=0.5, outputscale=1.0, noise_variance=0.01),
    "QTKM": lambda: tnbayes.QTKM(rank=2, num_basis=4, penalty=1e-3, period=2.0, max_sweeps=1),
    "TKM": lambda: tnbayes.TKM(rank=2, num_basis=4, penalty=1e-3, period=2.0, max_sweeps=1),
    "FeatureLearningKM": lambda: tnbayes.FeatureLearningKM(rank=2, num_basis=2, periods=[2.0], max_sweeps=1),
}


@pytest.mark.parametrize("name", sorted(BOXED))
def test_every_boxed_model_applies_the_one_input_box_rule(name, monkeypatch):
    calls = []
    original = tnbayes.models.base.apply_input_box

    def spy(X, box, policy, **kwargs):
        calls.append(policy)
        return original(X, box, policy, **kwargs)

    monkeypatch.setattr(tnbayes.models.base, "apply_input_box", spy)
    X, y = _data()
    model = BOXED[name]().fit(X, y)
    model.predict(X[:3])
    assert calls == ["clip"]


def test_prior_location_grows_with_the_dimension_and_the_column_range():
    X = torch.tensor(np.random.default_rng(0).uniform(0, 1, size=(50, 4)))
    X[:, 1] *= 10.0
    loc = lengthscale_prior_location(X)
    ranges = (X.max(0).values - X.min(0).values).double()
    torch.testing.assert_close(loc, np.sqrt(2.0) + 0.5 * np.log(4) + ranges.log())
    # the mode exp(μ − σ²) is the first start, and it grows like √D
    torch.testing.assert_close(initial_lengthscale(X), torch.exp(loc - 3.0))
    X16 = torch.cat([X] * 4, dim=1)
    torch.testing.assert_close(initial_lengthscale(X16)[:4] / initial_lengthscale(X), torch.full((4,), 2.0,
                                                                                                  dtype=torch.float64))


def test_estimate_is_in_the_units_of_the_data_and_matches_exact_gp():
    X, y = _data(80, 2, seed=3)
    X = X * np.array([1.0, 100.0]) + 5.0
    y = 10.0 * y + 3.0
    estimate = estimate_kernel_hyperparameters(torch.tensor(X), torch.tensor(y), num_restarts=0)
    exact = tnbayes.ExactGP(num_restarts=0).fit(X, y)
    np.testing.assert_allclose(estimate.lengthscale.numpy(), exact.lengthscale_.numpy() * X.std(0), rtol=1e-6)
    assert estimate.noise_variance == pytest.approx(exact.noise_variance_ * y.var(), rel=1e-6)
    assert estimate.outputscale == pytest.approx(exact.outputscale_ * y.var(), rel=1e-6)


def test_fit_report_says_what_was_chosen(capsys):
    X, y = _data(80)
    model = tnbayes.CPDKernelMachine(verbose=True, max_sweeps=2).fit(X, y)
    printed = capsys.readouterr().out
    assert any(line.startswith("kernel hyper-parameters: marginal likelihood") for line in model.fit_report_)
    assert any(line.startswith("M = ") for line in model.fit_report_)
    assert any(line.startswith("rank R = ") for line in model.fit_report_)
    for line in model.fit_report_:
        assert f"CPDKernelMachine: {line}" in printed
    assert any(line.startswith("fit ") and "time_budget=60 s" in line for line in model.fit_report_)
    quiet = tnbayes.CPDKernelMachine(max_sweeps=2).fit(X, y)

    def choices(report):  # the measured seconds differ between two fits; every choice is the same
        return [line for line in report if not line.startswith("fit ")]

    assert choices(quiet.fit_report_) == choices(model.fit_report_)
    assert capsys.readouterr().out == ""


# models whose predictive noise comes from held-out rows (tnbayes.selection.calibration), settings kept small
HELD_OUT_MODELS = {
    "CPDKernelMachine": (lambda: tnbayes.CPDKernelMachine(rank=2, num_basis=6, max_sweeps=2), "proportional"),
    "QTKM": (lambda: tnbayes.QTKM(rank=2, num_basis=4, max_sweeps=2), "proportional"),
    "TKM": (lambda: tnbayes.TKM(rank=2, num_basis=4, max_sweeps=2), "proportional"),
    "TNKF": (lambda: tnbayes.TNKF(time_budget=None), "additive"),
    "TTKalmanGP": (lambda: tnbayes.TTKalmanGP(num_basis=4, time_budget=None), "additive"),
}


@pytest.mark.parametrize("name", sorted(HELD_OUT_MODELS))
def test_every_held_out_noise_comes_from_the_one_calibration_layer(name, monkeypatch):
    import tnbayes.selection.calibration as calibration

    calls = []
    for function in ("proportional_noise_estimate", "additive_variance_estimate"):
        original = getattr(calibration, function)

        def spy(*args, _original=original, _name=function, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(calibration, function, spy)
        for module in ("tnbayes.models._cpd_base",):  # imported by name there
            monkeypatch.setattr(module + "." + function, spy, raising=False)
    make, form = HELD_OUT_MODELS[name]
    X, y = _data(400)
    model = make().fit(X, y)
    assert calls == [f"{form}_noise_estimate" if form == "proportional" else "additive_variance_estimate"]
    assert model.noise_variance_ == model.held_out_noise_variance_


# what each regressor's fit report must name when built with no arguments (issue: "verbose=True says what was
# chosen and why")
REPORTED_CHOICES = {
    "ExactGP": ("ML-II on", "Lengthscales"),
    "HilbertGP": ("structure_ = ",),
    "CPDKernelMachine": ("kernel hyper-parameters", "M = ", "rank R = ", "noise variance"),
    "QTKM": ("λ = ", "rank R = ", "noise variance"),
    "TKM": ("λ = ", "rank R = ", "noise variance"),
    "FeatureLearningKM": ("rank R = ", "period families"),
    "TNKF": ("kernel hyper-parameters", "time budget", "filter:", "predictive noise variance"),
    "TTKalmanGP": ("kernel hyper-parameters", "time budget", "filter:", "predictive noise variance"),
    "RFFNet": ("random Fourier features", "marginal likelihood"),
}


@pytest.mark.parametrize("name", sorted(REPORTED_CHOICES))
def test_every_regressor_reports_its_choices(name):
    X, y = _data(200, d=3)
    model = getattr(tnbayes, name)().fit(X, y)
    report = " | ".join(model.fit_report_)
    for phrase in REPORTED_CHOICES[name]:
        assert phrase in report, f"{name}'s fit report does not mention {phrase!r}: {report}"
