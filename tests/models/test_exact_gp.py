"""ExactGP against a dense numpy/scipy Gaussian-process computation."""

import warnings

import gpytorch
import numpy as np
import pytest
import scipy.optimize
import torch
from packaging.version import Version

import tnbayes
from tnbayes import metrics


def _toy(n=120, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d)) * np.arange(1, d + 1)
    y = 3.0 + 2.0 * np.sin(X[:, 0]) + 0.3 * X[:, -1] + 0.1 * rng.standard_normal(n)
    return X, y


def _dense_neg_mll(log_params, Xs, ys):
    """Negative log marginal likelihood per point of the ScaleKernel(RBF-ARD) + noise GP, numpy."""
    d = Xs.shape[1]
    ls, outputscale, noise, const = np.exp(log_params[:d]), np.exp(log_params[d]), np.exp(log_params[d + 1]), log_params[d + 2]
    diff = (Xs[:, None, :] - Xs[None, :, :]) / ls
    K = outputscale * np.exp(-0.5 * (diff**2).sum(-1)) + noise * np.eye(len(ys))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L, ys - const)
    return (0.5 * alpha @ alpha + np.log(np.diag(L)).sum() + 0.5 * len(ys) * np.log(2 * np.pi)) / len(ys)


def test_posterior_equals_dense_gp_formula():
    X, y = _toy()
    model = tnbayes.ExactGP(num_restarts=1).fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    ls = model.lengthscale_.numpy()
    sf2, sn2, c = model.outputscale_, model.noise_variance_, model.mean_constant_
    Xt = np.random.default_rng(5).uniform(-3, 3, size=(30, 2))
    Xts = (Xt - X.mean(0)) / X.std(0)

    def k(A, B):
        return sf2 * np.exp(-0.5 * (((A[:, None] - B[None]) / ls) ** 2).sum(-1))

    K = k(Xs, Xs) + sn2 * np.eye(len(y))
    Ks = k(Xts, Xs)
    mean = c + Ks @ np.linalg.solve(K, ys - c)
    var = sf2 - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T)) + sn2
    post = model.posterior(Xt)
    np.testing.assert_allclose(post.mean.numpy(), y.mean() + y.std() * mean, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(post.variance.numpy(), y.var() * var, rtol=1e-7)
    latent = model.posterior(Xt, observation_noise=False)
    np.testing.assert_allclose(latent.variance.numpy(), y.var() * (var - sn2), rtol=1e-6, atol=1e-12)
    assert model.noise_std**2 == pytest.approx(sn2 * y.var())


def test_marginal_likelihood_is_at_a_local_optimum():
    X, y = _toy(seed=1)
    model = tnbayes.ExactGP(prior=None).fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    theta = np.concatenate([np.log(model.lengthscale_.numpy()),
                            [np.log(model.outputscale_), np.log(model.noise_variance_), model.mean_constant_]])
    ours = _dense_neg_mll(theta, Xs, ys)
    assert ours == pytest.approx(model.neg_mll_, abs=1e-8)
    polished = scipy.optimize.minimize(_dense_neg_mll, theta, args=(Xs, ys), method="L-BFGS-B")
    assert ours - polished.fun < 1e-5
    assert model.log_marginal_likelihood() == pytest.approx(-ours * len(y), rel=1e-8)


def _lognormal_log_density(log_value, loc, scale):
    return -log_value - np.log(scale * np.sqrt(2 * np.pi)) - (log_value - loc) ** 2 / (2 * scale**2)


def _dense_neg_log_prior(log_lengthscale, log_noise, Xs):
    """−log p(ℓ, σ²) / N: the dimension-scaled log-normal lengthscale prior (Hvarfner et al. 2024) and the
    log-normal noise prior N(−4, 1) of BoTorch, written out in numpy."""
    d = Xs.shape[1]
    loc = np.sqrt(2.0) + 0.5 * np.log(d) + np.log(Xs.max(0) - Xs.min(0))
    log_density = _lognormal_log_density(log_lengthscale, loc, np.sqrt(3.0)).sum()
    log_density += _lognormal_log_density(log_noise, -4.0, 1.0)
    return -log_density / len(Xs)


def test_map_objective_with_the_dimension_scaled_priors_is_at_a_local_optimum():
    X, y = _toy(seed=1)
    model = tnbayes.ExactGP().fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    d = X.shape[1]

    def objective(theta):
        return _dense_neg_mll(theta, Xs, ys) + _dense_neg_log_prior(theta[:d], theta[d + 1], Xs)

    theta = np.concatenate([np.log(model.lengthscale_.numpy()),
                            [np.log(model.outputscale_), np.log(model.noise_variance_), model.mean_constant_]])
    assert objective(theta) == pytest.approx(model.neg_mll_, abs=1e-8)
    polished = scipy.optimize.minimize(objective, theta, method="L-BFGS-B")
    assert objective(theta) - polished.fun < 1e-5
    # the reported log marginal likelihood has no prior term
    assert model.log_marginal_likelihood() == pytest.approx(-_dense_neg_mll(theta, Xs, ys) * len(y), rel=1e-8)


def test_many_inputs_two_relevant_are_found():
    """32 inputs, 2 of which matter: the fit must not collapse to the constant (RMSE = std(y))."""
    rng = np.random.default_rng(7)
    n, d = 300, 32
    X = rng.uniform(-1, 1, size=(n + 200, d))
    y = np.sin(3 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.standard_normal(n + 200)
    model = tnbayes.ExactGP(num_restarts=1).fit(X[:n], y[:n])
    rmse = metrics.rmse(y[n:], model.posterior(X[n:]))
    assert not model.collapsed_
    assert rmse < 0.3 * y[n:].std()
    # the two relevant inputs get the two shortest lengthscales
    assert set(np.argsort(model.lengthscale_.numpy())[:2]) == {0, 1}


def test_collapse_is_flagged_on_pure_noise():
    rng = np.random.default_rng(9)
    X = rng.uniform(-1, 1, size=(300, 2))
    y = rng.standard_normal(300)
    model = tnbayes.ExactGP(num_restarts=0).fit(X, y)
    assert model.collapsed_
    assert "collapse check" in model.ml_starts_
    assert model.loo_r2_ < 0.05
    # a test point is predicted as the mean with about the whole variance
    post = model.posterior(np.array([[0.123, -0.456]]))
    assert abs(float(post.mean[0]) - y.mean()) < 0.3 and float(post.variance[0]) == pytest.approx(y.var(), rel=0.3)


def test_restarts_are_screened_on_a_subsample_then_polished_on_all_records():
    X, y = _toy(n=90, seed=4)
    model = tnbayes.ExactGP(num_restarts=2, screen_size=40, prior=None).fit(X, y)
    assert model.ml_starts_[:3] == ["prior mode (screened on 40 records)"] + ["random (screened on 40 records)"] * 2
    assert model.ml_starts_[3] == "best screened start, on all records"
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    theta = np.concatenate([np.log(model.lengthscale_.numpy()),
                            [np.log(model.outputscale_), np.log(model.noise_variance_), model.mean_constant_]])
    assert _dense_neg_mll(theta, Xs, ys) == pytest.approx(model.neg_mll_, abs=1e-8)


def test_repeated_records_are_left_out_of_ml2_but_conditioned_on():
    """ML-II sees each distinct (x, y) record once; the posterior is the dense GP on all N rows."""
    X, y = _toy(n=80, seed=2)
    X = np.concatenate([X, X[:30]])  # 30 repeated records
    y = np.concatenate([y, y[:30]])
    X[-1, 0] += 0.5  # ... but a repeated input with a different target is kept
    y[-2] += 0.3
    model = tnbayes.ExactGP(num_restarts=0, prior=None).fit(X, y)
    assert model.num_duplicates_ == 28
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    unique = np.r_[0:80, 80 + np.arange(28, 30)]
    theta = np.concatenate([np.log(model.lengthscale_.numpy()),
                            [np.log(model.outputscale_), np.log(model.noise_variance_), model.mean_constant_]])
    ours = _dense_neg_mll(theta, Xs[unique], ys[unique])
    assert ours == pytest.approx(model.neg_mll_, abs=1e-8)
    polished = scipy.optimize.minimize(_dense_neg_mll, theta, args=(Xs[unique], ys[unique]), method="L-BFGS-B")
    assert ours - polished.fun < 1e-5
    # the posterior conditions on all 110 rows
    assert model.log_marginal_likelihood() == pytest.approx(-_dense_neg_mll(theta, Xs, ys) * len(y), rel=1e-8)
    kept = tnbayes.ExactGP(num_restarts=0, prior=None, drop_duplicates=False).fit(X, y)
    assert kept.num_duplicates_ == 0
    assert kept.neg_mll_ != pytest.approx(model.neg_mll_, abs=1e-6)


def lookup_table_split() -> tuple[np.ndarray, ...]:
    """Targets that are a lookup table of two integer-coded inputs (of four), split as odd_data_sweep's
    ``integer_lookup``: X_train (225, 4), y_train (225,), X_test (75, 4), y_test (75,) and the indices of the test
    inputs that equal a training input."""
    X = np.random.default_rng(1).integers(0, 5, size=(300, 4)).astype(float)
    y = np.round(3 * (np.sin(0.75 * X[:, 0]) + 0.5 * (X[:, 1] / 4) ** 2))
    order = np.random.default_rng(2).permutation(300)
    X_train, y_train, X_test, y_test = X[order[:225]], y[order[:225]], X[order[225:]], y[order[225:]]
    return X_train, y_train, X_test, y_test, np.flatnonzero([(X_train == x).all(1).any() for x in X_test])


def test_lookup_table_targets_on_integer_inputs_predict_their_records(monkeypatch):
    """Targets that are a function of two integer-coded inputs: ML-II's optimum drives their lengthscales to 0 (a
    lookup table). A test input equal to a training input must get that record's target, whatever else is predicted
    with it. The control, with the numerical floor switched off, shows the failure it prevents: GPyTorch's squared
    distances lose eps·‖x/ℓ‖² to cancellation, and the prediction then changes with the batch."""
    from tnbayes.selection import marginal_likelihood

    X_train, y_train, X_test, y_test, seen = lookup_table_split()
    assert seen.size >= 10

    def batch_and_alone(model):
        batch = model.posterior(X_test)
        alone = np.array([float(model.posterior(X_test[i:i + 1]).mean[0]) for i in seen[:10]])
        return batch, alone

    post, alone = batch_and_alone(tnbayes.ExactGP().fit(X_train, y_train))
    np.testing.assert_allclose(post.mean.numpy()[seen], y_test[seen], atol=1e-3)
    np.testing.assert_allclose(alone, post.mean.numpy()[seen[:10]], atol=1e-6)
    assert metrics.evaluate(post, y_test)["nlpd"] < 0
    monkeypatch.setattr(marginal_likelihood, "NUMERICAL_LENGTHSCALE_FLOOR", 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GPyTorch's negative-variance warning is part of the failure
        unfloored = tnbayes.ExactGP().fit(X_train, y_train)
        control, _ = batch_and_alone(unfloored)
    assert float(unfloored.lengthscale_.min()) < 1e-6  # the collapse the floor stops
    if Version(gpytorch.__version__) < Version("1.15"):
        # reproduced with GPyTorch 1.15; with GPyTorch 1.11 (linear_operator 0.5.1, numpy 1.24, scipy 1.10) these
        # records are predicted right at the same collapse; 1.12-1.14 not checked
        pytest.skip(f"GPyTorch {gpytorch.__version__}: the control's failure was reproduced with 1.15 only (the "
                    f"floored fit passed)")
    error = float(np.abs(control.mean.numpy()[seen] - y_test[seen]).max())
    if error <= 0.1:
        # the cancellation depends on the CPU's arithmetic: reproduced on the AMD EPYC of the earlier runs, not on
        # the Intel Xeon of 2026-11-28, where the collapsed fit still predicted these records right
        pytest.skip(f"the unfloored control predicted its records within {error:.2g} on this CPU; the floored fit "
                    f"passed")


def test_state_saved_before_the_lengthscale_floor_loads_with_its_own_bound():
    """A model file written before ``NUMERICAL_LENGTHSCALE_FLOOR`` holds GPyTorch's default lengthscale constraint (a
    0-d lower bound of 0); loading it keeps that bound, so its raw lengthscale means what it meant when fitted."""
    X, y = _toy(n=60)
    model = tnbayes.ExactGP(num_restarts=0).fit(X, y)
    key = "covar_module.base_kernel.raw_lengthscale_constraint.lower_bound"
    state = model._extra_state()
    assert state[key].shape == ()
    state[key] = torch.tensor(0.0, dtype=state[key].dtype)
    model._after_load(state)
    raw = state["covar_module.base_kernel.raw_lengthscale"]
    torch.testing.assert_close(model.gp_.covar_module.base_kernel.lengthscale, torch.nn.functional.softplus(raw))


def test_lengthscale_lower_bound_is_respected_in_user_units():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 5, size=(100, 2)) * np.array([1.0, 100.0])
    y = np.sin(2 * X[:, 0]) + np.sin(0.02 * X[:, 1]) + 0.05 * rng.standard_normal(100)
    free = tnbayes.ExactGP(num_restarts=0).fit(X, y)
    free_ls = free.lengthscale_.numpy() * X.std(0)
    bound = np.array([3.0, 300.0])
    assert np.all(free_ls < bound)  # the bound is active
    model = tnbayes.ExactGP(num_restarts=0, lengthscale_lower_bound=bound).fit(X, y)
    ls = model.lengthscale_.numpy() * X.std(0)
    assert np.all(ls >= bound * (1 - 1e-6))
    assert model.noise_variance_ > 10 * free.noise_variance_  # unresolved structure becomes noise
    iso = tnbayes.ExactGP(num_restarts=0, ard=False, lengthscale_lower_bound=bound).fit(X, y)
    assert float(iso.lengthscale_) >= (bound / X.std(0)).max() * (1 - 1e-6)
    with pytest.raises(ValueError, match="lengthscale_lower_bound"):
        tnbayes.ExactGP(lengthscale_lower_bound=[1.0, 2.0, 3.0]).fit(X, y)


def test_full_covariance_and_samples_are_consistent():
    X, y = _toy(n=60)
    model = tnbayes.ExactGP(num_restarts=0).fit(X, y)
    Xt = X[:10] + 0.05
    full = model.posterior(Xt, full_covariance=True)
    diag = model.posterior(Xt)
    np.testing.assert_allclose(full.variance.numpy(), diag.variance.numpy(), rtol=1e-8)
    assert full.rsample(torch.Size([4])).shape == (4, 10)


def test_matern_and_float32_run():
    X, y = _toy(n=80)
    m = tnbayes.ExactGP(kernel="matern", nu=1.5, num_restarts=0, dtype="float32").fit(X, y)
    post = m.posterior(X)
    assert post.mean.dtype == torch.float32
    assert metrics.rmse(y, post) < 0.3


def test_refuses_sizes_that_do_not_fit():
    X, y = _toy(n=50)
    with pytest.raises(MemoryError, match="HilbertGP"):
        tnbayes.ExactGP(max_train_size=40).fit(X, y)


def test_uci_yacht_split0_close_to_reference():
    """One fixed split of yacht: a cheap version of the 20-split benchmark in benchmarks/."""
    data = tnbayes.datasets.load("yacht", split=0)
    model = tnbayes.ExactGP().fit(data.X_train, data.y_train)
    ev = metrics.evaluate(model.posterior(data.X_test), data.y_test)
    assert ev["rmse"] < 1.0 and ev["nlpd"] < 1.0


def test_lr_is_the_old_name_of_learning_rate(tmp_path):
    import warnings

    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (40, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(40)
    new = tnbayes.ExactGP(optimizer="adam", learning_rate=0.1, max_iter=20, num_restarts=0).fit(X, y)
    with pytest.warns(FutureWarning, match="'lr' was renamed 'learning_rate'"):
        old = tnbayes.ExactGP(optimizer="adam", lr=0.1, max_iter=20, num_restarts=0).fit(X, y)
    assert old.learning_rate == 0.1
    np.testing.assert_array_equal(old.predict(X), new.predict(X))
    # a file written before the rename stores "lr": it loads silently, with the value under the new name
    from tests.cpd_problems import rewrite_as_before_renames

    old.save(tmp_path / "gp.pt")
    rewrite_as_before_renames(tmp_path / "gp.pt", {"lr": "learning_rate"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        loaded = tnbayes.load_model(tmp_path / "gp.pt")
    assert loaded.learning_rate == 0.1
    np.testing.assert_array_equal(loaded.predict(X), old.predict(X))
