"""SVGP: the variational GP against a dense exact GP, chunked fits, the time budget, and bad settings."""

import math
import re
import warnings

import gpytorch
import numpy as np
import pytest
import scipy.stats
import torch

import tnbayes
from tnbayes.data import ChunkedData
from tnbayes.inference.budget import BudgetWarning
from tnbayes.models.registry import make_model
from tnbayes.models.svgp import FULL_BATCH_ROWS
from tnbayes.selection import estimate_kernel_hyperparameters
from tnbayes.selection.marginal_likelihood import NOISE_PRIOR_LOCATION, NOISE_PRIOR_SCALE


def _data(n, d=2, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, d))
    return X, np.sin(X[:, 0]) + 0.3 * X[:, 1] + noise * rng.standard_normal(n)


def _dense_gp(model, X, y, X_new):
    """The exact GP posterior of the latent f (dense linear algebra, user units) at SVGP's fitted hyper-parameters."""
    A = model.x_scaler_.transform(torch.as_tensor(X))
    B = model.x_scaler_.transform(torch.as_tensor(X_new))
    t = model.y_scaler_.transform(torch.as_tensor(y)) - model.mean_constant_
    ell, sf2, s2 = model.lengthscale_, model.outputscale_, model.noise_variance_

    def k(a, b):
        return sf2 * torch.exp(-0.5 * (((a[:, None, :] - b[None, :, :]) / ell) ** 2).sum(-1))

    K = k(A, A) + s2 * torch.eye(A.shape[0], dtype=torch.float64)
    cross = k(A, B)
    mean = model.mean_constant_ + cross.T @ torch.linalg.solve(K, t)
    variance = sf2 - (cross * torch.linalg.solve(K, cross)).sum(0)
    scale, shift = model.y_scaler_.scale_, model.y_scaler_.shift_
    return mean * scale + shift, variance * scale**2


def test_inducing_points_at_every_input_reproduce_the_exact_gp():
    """With Z = X (every distinct input, the automatic choice for small data) and q at its optimum (one natural
    gradient step of size 1 is exact for a Gaussian likelihood), the SVGP posterior is the exact GP posterior at
    the same hyper-parameters (Titsias 2009), up to the Cholesky jitter; the hyper-parameters are held still by a
    vanishing learning rate."""
    X, y = _data(60, seed=1)
    X_new = np.random.default_rng(2).uniform(-3, 3, size=(25, 2))
    model = tnbayes.SVGP(learning_rate=1e-12, natural_learning_rate=1.0, max_iter=5).fit(X, y)
    assert model.num_inducing_ == 60
    post = model.posterior(X_new, observation_noise=False)
    mean, variance = _dense_gp(model, X, y, X_new)
    torch.testing.assert_close(post.mean, mean, rtol=1e-4, atol=1e-4 * float(mean.abs().max()))
    prior_variance = model.outputscale_ * float(model.y_scaler_.scale_) ** 2
    torch.testing.assert_close(post.variance, variance, rtol=0, atol=1e-3 * prior_variance)
    # the observation noise is added on the user's scale
    noisy = model.posterior(X_new)
    torch.testing.assert_close(noisy.variance - post.variance,
                               torch.full_like(post.variance, model.noise_std**2), rtol=1e-10, atol=1e-12)


def test_default_fit_is_as_accurate_as_gpytorch_exact_gp():
    """No arguments on 200 noisy rows: test RMSE within 5% of ExactGP's (GPyTorch, ML-II) and calibrated."""
    X, y = _data(200)
    X_test, y_test = _data(1000, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        svgp = tnbayes.SVGP().fit(X, y)
    exact = tnbayes.ExactGP(num_restarts=0).fit(X, y)
    ours, reference = (tnbayes.metrics.evaluate(m.posterior(X_test), y_test) for m in (svgp, exact))
    assert ours["rmse"] <= 1.05 * reference["rmse"]
    assert ours["nlpd"] <= reference["nlpd"] + 0.05
    assert 0.9 <= ours["coverage_95"] <= 0.98
    # 200 distinct inputs, all of them inducing points, all seen by the pilot: q is set at the exact optimum
    assert svgp.stop_reason_ == "exact_optimum" and svgp.n_iter_ == len(svgp.history_) == 1
    assert any("inducing points" in line for line in svgp.fit_report_)


def test_exact_fit_takes_the_scales_that_predict_each_row_best_from_the_others():
    """Full batches, every input an inducing point: the default keeps ML-II's lengthscales and moves the outputscale,
    noise and mean to a larger leave-one-out density (recomputed here by N dense refits without each row);
    ``hyperparameter_objective="marginal_likelihood"`` keeps ML-II's values."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 3, size=(80, 2))
    y = np.exp(1.2 * X[:, 0]) + 0.05 * rng.standard_normal(80)  # no single lengthscale fits: a misspecified kernel

    def dense_leave_one_out_density(model):
        A = model.x_scaler_.transform(torch.as_tensor(X)).numpy()
        t = model.y_scaler_.transform(torch.as_tensor(y)).numpy()
        ell, sf2, s2, c = model.lengthscale_.numpy(), model.outputscale_, model.noise_variance_, model.mean_constant_
        K = sf2 * np.exp(-0.5 * (((A[:, None] - A[None]) / ell) ** 2).sum(-1))
        total = 0.0
        for i in range(len(t)):
            rest = np.arange(len(t)) != i
            k = K[rest, i]
            solve = np.linalg.solve(K[np.ix_(rest, rest)] + s2 * np.eye(len(t) - 1), np.stack([t[rest] - c, k], 1))
            mean, var = c + k @ solve[:, 0], sf2 + s2 - k @ solve[:, 1]
            total += -0.5 * math.log(2 * math.pi * var) - 0.5 * (t[i] - mean) ** 2 / var
        return total / len(t)

    def objective(model):  # the maximised value: the density plus the noise's log-normal hyper-prior over N
        return dense_leave_one_out_density(model) + scipy.stats.lognorm.logpdf(
            model.noise_variance_, s=NOISE_PRIOR_SCALE, scale=math.exp(NOISE_PRIOR_LOCATION)) / len(y)

    default = tnbayes.SVGP().fit(X, y)
    marginal = tnbayes.SVGP(hyperparameter_objective="marginal_likelihood").fit(X, y)
    assert default.stop_reason_ == marginal.stop_reason_ == "exact_optimum"
    torch.testing.assert_close(default.lengthscale_, marginal.lengthscale_, rtol=0, atol=0)
    assert default.noise_variance_ != marginal.noise_variance_
    assert objective(default) > objective(marginal) + 0.005
    assert any("leave-one-out" in line for line in default.fit_report_)
    assert not any("leave-one-out" in line for line in marginal.fit_report_)


def test_prior_none_applies_to_the_pilot_too():
    """SVGP(prior=None) takes its start from ML-II without hyper-priors (the selection layer's, checked here), not from
    the prior'd fit of SVGP()."""
    X, y = _data(60)
    plain = tnbayes.SVGP(prior=None, hyperparameter_objective="marginal_likelihood").fit(X, y)
    with_prior = tnbayes.SVGP(hyperparameter_objective="marginal_likelihood").fit(X, y)
    estimate = estimate_kernel_hyperparameters(torch.as_tensor(X), torch.as_tensor(y), max_points=60, seed=0,
                                               num_restarts=1, prior=None)
    in_standard_units = estimate.lengthscale / plain.x_scaler_.scale_.reshape(-1)
    torch.testing.assert_close(plain.lengthscale_, in_standard_units, rtol=1e-10, atol=0)
    assert not torch.allclose(plain.lengthscale_, with_prior.lengthscale_, rtol=1e-3)


def test_minibatches_hold_out_rows_and_stop_on_the_held_out_elbo():
    X, y = _data(FULL_BATCH_ROWS + 952, seed=3)  # 3000 rows: minibatches of 1024, 300 rows held out
    model = tnbayes.SVGP(num_inducing=64, max_iter=400, patience=2, tol=1e-3, time_budget=None).fit(X, y)
    assert model.batch_size_ == 1024 and model.num_validation_ == 300
    assert len(model.validation_elbo_) == len(model.evaluation_seconds_) >= 1
    assert model.stop_reason_ in ("plateau", "max_iter")
    assert model.converged_ == (model.stop_reason_ == "plateau")
    X_test, y_test = _data(500, seed=4)
    assert tnbayes.metrics.evaluate(model.posterior(X_test), y_test)["rmse"] < 0.13


def test_held_out_log_density_is_the_mean_gaussian_log_density_of_the_predictive():
    """Against scipy: log N(y_i | μ_i, v_i + σ²) from GPyTorch's predictive mean and latent variance."""
    from scipy.stats import norm

    from tnbayes.models._svgp_steps import held_out_log_density

    X, y = _data(3000, seed=9)
    model = tnbayes.SVGP(num_inducing=32, max_iter=60, time_budget=None).fit(X, y)
    Xs = model.x_scaler_.transform(torch.as_tensor(X[:200]))
    ys = model.y_scaler_.transform(torch.as_tensor(y[:200]))
    model.gp_.train()
    model.likelihood_.train()
    value = held_out_log_density(model.gp_, model.likelihood_, Xs, ys)
    assert model.gp_.training and model.likelihood_.training  # put back in train mode
    model.gp_.eval()
    with torch.no_grad():
        f = model.gp_(Xs)
        scale = torch.sqrt(f.variance + model.likelihood_.noise)
    reference = norm.logpdf(ys.numpy(), f.mean.numpy(), scale.numpy()).mean()
    assert abs(value - reference) < 1e-10


def test_a_run_restores_its_best_state_exactly():
    """OptimisationRun keeps a copy of the state at its best held-out density and loads it back bit for bit."""
    from tnbayes.models._svgp_steps import OptimisationRun, held_out_log_density

    X, y = _data(3000, seed=10)
    model = tnbayes.SVGP(num_inducing=32, max_iter=2, time_budget=None).fit(X, y)
    Xs = model.x_scaler_.transform(torch.as_tensor(X))
    ys = model.y_scaler_.transform(torch.as_tensor(y))
    run = OptimisationRun.start("pilot", model.gp_, model.likelihood_, 3000, model._optimisers)
    run.step(Xs[:500], ys[:500])
    run.record_log_density(held_out_log_density(run.model, run.likelihood, Xs[-300:], ys[-300:]))
    kept = {k: v.clone() for k, v in run.model.state_dict().items()}
    for _ in range(3):
        run.step(Xs[:500], ys[:500])
    run.record_log_density(-math.inf)  # worse: nothing kept
    assert run.best_step == 1 and run.steps == 4
    assert run.restore_best()
    for key, value in run.model.state_dict().items():
        assert torch.equal(value, kept[key]), key


def test_start_race_keeps_the_start_that_predicts_the_held_out_rows_better():
    """Two inputs, one of which a 500-row pilot can switch off: the race's report names both starts with their best
    held-out log predictive densities and the winner is the larger; the fit's state is the winner's best."""
    X, y = _data(3000, seed=11)
    model = tnbayes.SVGP(num_inducing=64, max_iter=400, time_budget=None).fit(X, y)
    race = [line for line in model.fit_report_ if line.startswith("start race")]
    assert len(race) == 1
    densities = {label: float(value) for label, value in re.findall(r"(\w+) start (-?[\d.]+) after", race[0])}
    assert set(densities) == {"pilot", "collapsed"}
    assert model.hyperparameter_start_ == max(densities, key=densities.get)
    # each start places its own inducing inputs under its kernel, at most the m in force (not the pilot's count)
    placements = [re.match(r"(collapsed start: )?(\d+) inducing points, greedy conditional variance .*2020; (\w+)", line)
                  for line in model.fit_report_]
    placements = [(bool(match[1]), int(match[2]), match[3]) for match in placements if match]
    assert [first for first, _, _ in placements] == [False, True]
    assert all(count <= 64 and reason == "num_inducing" for _, count, reason in placements)
    assert len(model.held_out_log_density_) == len(model.validation_elbo_) >= 4
    # the winner's best is the best of all evaluations (it beat the loser's best), and the fit ends in that state:
    # restored when a later evaluation was worse, else the last evaluation is the best
    best = max(model.held_out_log_density_)
    restored = [line for line in model.fit_report_ if line.startswith("restored the state")]
    if restored:
        assert f"{best:.4f} per row" in restored[0]
    else:
        assert model.held_out_log_density_[-1] == best
    # one start only: no race
    for start in ("pilot", "collapsed", "standard"):
        single = tnbayes.SVGP(num_inducing=64, max_iter=120, time_budget=None, hyperparameter_start=start).fit(X, y)
        assert single.hyperparameter_start_ == start
        assert not any(line.startswith("start race") for line in single.fit_report_)
        assert start != "collapsed" or any("collapsed bound (SGPR)" in line for line in single.fit_report_)


def test_chunked_fit_matches_the_in_memory_fit():
    """A ChunkedData source: same scaling statistics as the arrays, held-out rows drawn per chunk, and an accuracy
    that matches the in-memory fit's (the minibatch order differs, so the numbers are close, not equal)."""
    X, y = _data(3000, seed=6)
    settings = dict(num_inducing=64, max_iter=300, time_budget=None, batch_size=500)
    in_memory = tnbayes.SVGP(**settings).fit(X, y)
    chunked = tnbayes.SVGP(**settings).fit(ChunkedData.from_arrays(X, y, chunk_size=700))
    assert chunked.n_train_ == 3000 and chunked.n_features_in_ == 2
    torch.testing.assert_close(chunked.x_scaler_.shift_, in_memory.x_scaler_.shift_)
    assert 0 < chunked.num_validation_ <= 300
    X_test, y_test = _data(1000, seed=7)
    rmse = [tnbayes.metrics.evaluate(m.posterior(X_test), y_test)["rmse"] for m in (in_memory, chunked)]
    assert abs(rmse[0] - rmse[1]) < 0.01 and max(rmse) < 0.13


def test_a_small_time_budget_lowers_the_inducing_points_and_warns_when_it_ends_the_fit_early():
    # a short lengthscale, so that greedy conditional variance places all 512 inducing points (a smooth function
    # leaves it at a few dozen, whose steps the budget pays)
    rng = np.random.default_rng(8)
    X = rng.uniform(-3, 3, size=(3000, 2))
    y = np.sin(4 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.1 * rng.standard_normal(3000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = tnbayes.SVGP(time_budget=15.0).fit(X, y)
    assert any("time budget lowers the inducing points" in line for line in model.fit_report_)
    assert model.num_inducing_ < 512
    budget_warnings = [w for w in caught if issubclass(w.category, BudgetWarning)]
    ended_early = model.stop_reason_ == "time_budget" and model.n_iter_ < 300
    assert len(budget_warnings) == int(ended_early)
    with pytest.warns(BudgetWarning, match="time budget ended the fit after") as ended:
        tnbayes.SVGP(time_budget=1.0).fit(X, y)  # the pilot alone takes longer
    assert {w.filename for w in ended if issubclass(w.category, BudgetWarning)} == {__file__}  # the caller's line


@pytest.mark.parametrize("settings, chunked", [({"natural_gradient": False}, False),
                                               ({"learn_inducing": False, "inducing_init": "subsample"}, True)])
def test_save_load_round_trip_is_exact_for_every_variational_form(settings, chunked, tmp_path):
    X, y = _data(300)
    data = (ChunkedData.from_arrays(X, y, 128),) if chunked else (X, y)
    model = tnbayes.SVGP(num_inducing=24, max_iter=40, batch_size=64, **settings).fit(*data)
    path = tmp_path / "svgp.tnb"
    model.save(path)
    loaded = tnbayes.load_model(path)
    assert loaded.get_params() == model.get_params()
    for name, tensor in model.gp_.state_dict().items():
        assert torch.equal(loaded.gp_.state_dict()[name], tensor), name
    for name, tensor in model.likelihood_.state_dict().items():
        assert torch.equal(loaded.likelihood_.state_dict()[name], tensor), name
    X_new = np.random.default_rng(4).uniform(-3, 3, size=(17, 2))
    a, b = model.posterior(X_new), loaded.posterior(X_new)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)


def test_bad_chunks_get_clear_errors():
    X, y = _data(200)
    bad = X.copy()
    bad[150, 1] = np.nan  # in the second chunk
    with pytest.raises(ValueError, match="non-finite"):
        tnbayes.SVGP(num_inducing=10, max_iter=5).fit(ChunkedData.from_arrays(bad, y, 100))
    with pytest.raises(ValueError, match="num_inducing must be 'auto' or a positive integer"):
        tnbayes.SVGP(num_inducing="many").fit(ChunkedData.from_arrays(X, y, 100))
    with pytest.raises(ValueError, match="num_inducing must be 'auto' or a positive integer"):
        tnbayes.SVGP(num_inducing=2.5).fit(ChunkedData.from_arrays(X, y, 100))


def test_save_load_round_trip_and_botorch_gradients(tmp_path):
    X, y = _data(80)
    model = tnbayes.SVGP(num_inducing=20, max_iter=60, kernel="matern", nu=1.5).fit(X, y)
    path = tmp_path / "svgp.pt"
    model.save(path)
    loaded = tnbayes.load_model(path)
    X_new = np.random.default_rng(9).uniform(-3, 3, size=(30, 2))
    a, b = model.posterior(X_new), loaded.posterior(X_new)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)
    assert isinstance(loaded.gp_.covar_module.base_kernel, gpytorch.kernels.MaternKernel)
    torch.testing.assert_close(loaded.inducing_points_, model.inducing_points_, rtol=0, atol=0)
    # the BoTorch adapter differentiates the posterior mean in X
    botorch_model = model.to_botorch()
    Xq = torch.tensor([[[0.3, -0.2]]], dtype=torch.float64, requires_grad=True)
    botorch_model.posterior(Xq).mean.sum().backward()
    step = 1e-6
    with torch.no_grad():
        numeric = [(botorch_model.posterior(Xq + step * e).mean.sum() - botorch_model.posterior(Xq - step * e).mean.sum())
                   / (2 * step) for e in torch.eye(2, dtype=torch.float64).reshape(2, 1, 1, 2)]
    torch.testing.assert_close(Xq.grad.reshape(-1), torch.stack(numeric), rtol=1e-5, atol=1e-7)


def test_fits_are_reproducible_for_a_seed():
    X, y = _data(200)
    a, b = (tnbayes.SVGP(num_inducing=30, max_iter=40).fit(X, y) for _ in range(2))
    assert torch.equal(a.posterior(X).mean, b.posterior(X).mean)


def test_compare_name():
    assert isinstance(make_model("svgp"), tnbayes.SVGP)
    assert make_model("svgp_matern").kernel == "matern"


@pytest.mark.parametrize("settings, match", [
    (dict(num_inducing=0), "num_inducing must be 'auto' or a positive integer"),
    (dict(num_inducing="many"), "num_inducing must be 'auto' or a positive integer"),
    (dict(batch_size=2.5), "batch_size must be 'auto' or a positive integer"),
    (dict(max_iter=-1), "max_iter must be 'auto' or a positive integer"),
    (dict(inducing_init="grid"), "inducing_init must be one of \\('greedy_variance'"),
    (dict(validation_fraction=0.6), r"validation_fraction must be in \[0, 0.5\)"),
    (dict(learning_rate=0.0), "learning_rate must be a finite positive number"),
    (dict(natural_learning_rate="fast"), "natural_learning_rate must be 'auto' or a finite positive number"),
    (dict(patience=0), "patience must be a positive integer"),
    (dict(time_budget=-1), "time_budget must be a positive number of seconds or None"),
    (dict(kernel="matern", nu=3.5), "nu in \\(0.5, 1.5, 2.5\\)"),
    (dict(prior="flat"), "prior must be 'dimension_scaled' or None"),
    (dict(hyperparameter_start="ml2"), "hyperparameter_start must be one of"),
    (dict(hyperparameter_objective="loo"), "hyperparameter_objective must be one of"),
])
def test_bad_settings_raise_clear_errors(settings, match):
    X, y = _data(20)
    with pytest.raises(ValueError, match=match):
        tnbayes.SVGP(**settings).fit(X, y)


def test_a_broken_inducing_kernel_ends_the_run_instead_of_the_fit():
    """Nearly coincident inducing inputs, a huge lengthscale and outputscale: the kernel matrix of the inducing
    inputs is not positive definite even with GPyTorch's jitter; a step then returns NaN without a step and marks
    the run failed, and the held-out evaluation returns -inf (SVGP's loop then ends with stop_reason_ 'numerical' in
    its best held-out state)."""
    from tnbayes.models._svgp_steps import OptimisationRun, VariationalGP
    from tnbayes.selection import MarginalLikelihoodSettings, build_kernel_and_likelihood

    X = torch.as_tensor(_data(200)[0])
    y = torch.as_tensor(_data(200)[1])
    kernel, likelihood = build_kernel_and_likelihood(X, MarginalLikelihoodSettings())
    inducing = X[:1].repeat(40, 1) + 1e-9 * torch.randn(40, 2, dtype=torch.float64)
    model = VariationalGP(inducing, kernel, True, True).double()
    with torch.no_grad():
        kernel.base_kernel.lengthscale = torch.full((1, 2), 1e6, dtype=torch.float64)
        kernel.outputscale = torch.tensor(1e14, dtype=torch.float64)
    run = OptimisationRun.start("pilot", model, likelihood, 200,
                                lambda m, lik, n: [torch.optim.Adam(list(m.parameters()) + list(lik.parameters()))])
    assert math.isnan(run.step(X, y)) and run.failed and run.steps == 0
    assert run.evaluate_held_out(X, y) == (-math.inf, -math.inf)
