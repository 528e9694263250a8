"""HilbertGP against GPyTorch's exact GP (tnbayes.ExactGP) and dense computations."""

import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.basis import ApproximationWarning


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, d))
    y = np.sin(2 * X[:, 0]) * (np.cos(X[:, 1]) if d > 1 else 1.0) + 0.1 * rng.standard_normal(n)
    return X, y


def _hilbert_with_hyperparameters_of(exact, **kwargs):
    return tnbayes.HilbertGP(lengthscale=exact.lengthscale_.tolist(), outputscale=exact.outputscale_,
                             noise_variance=exact.noise_variance_, mean_constant=exact.mean_constant_, **kwargs)


@pytest.mark.parametrize("d, num_basis, c", [(1, 128, 3.0), (2, 40, 3.0)])
def test_posterior_equals_exact_gp_with_identical_hyperparameters(d, num_basis, c):
    X, y = _data(150 * d, d)
    exact = tnbayes.ExactGP(num_restarts=0, prior=None).fit(X, y)
    hilbert = _hilbert_with_hyperparameters_of(exact, num_basis=num_basis, c=c, structure="product").fit(X, y)
    Xt = np.random.default_rng(9).uniform(-3, 3, size=(60, d))
    for noise in (True, False):
        pe, ph = exact.posterior(Xt, observation_noise=noise), hilbert.posterior(Xt, observation_noise=noise)
        scale = float(np.std(y))
        assert float((pe.mean - ph.mean).abs().max()) / scale < 1e-5
        np.testing.assert_allclose(ph.variance.numpy(), pe.variance.numpy(), rtol=1e-5, atol=1e-10 * scale**2)
    full = hilbert.posterior(Xt[:10], full_covariance=True)
    exact_full = exact.posterior(Xt[:10], full_covariance=True)
    np.testing.assert_allclose(full.covariance.numpy(), exact_full.covariance.numpy(), atol=1e-5 * float(np.var(y)))
    assert hilbert.neg_mll_ == pytest.approx(exact.neg_mll_, abs=1e-6)


@pytest.mark.parametrize("name", ["snelson", "mcycle", "co2-monthly"])
def test_marginal_likelihood_fit_matches_exact_gp(name):
    data = tnbayes.datasets.load(name)
    X, y = data.X_train, data.y_train
    if data.y_test is not None:
        X, y = np.vstack([X, data.X_test]), np.concatenate([y, data.y_test])
    exact = tnbayes.ExactGP(num_restarts=1, prior=None).fit(X, y)
    hilbert = tnbayes.HilbertGP().fit(X, y)
    np.testing.assert_allclose(hilbert.lengthscale_.numpy(), exact.lengthscale_.numpy(), rtol=0.02)
    assert hilbert.outputscale_ == pytest.approx(exact.outputscale_, rel=0.02)
    assert hilbert.noise_variance_ == pytest.approx(exact.noise_variance_, rel=0.02)
    assert hilbert.mean_constant_ == pytest.approx(exact.mean_constant_, abs=0.02)


def test_chunk_size_does_not_change_the_result():
    X, y = _data(300, 2)
    a = tnbayes.HilbertGP(num_basis=16, c=2.5, lengthscale=[0.6, 1.0], outputscale=1.0, noise_variance=0.05).fit(X, y)
    b = tnbayes.HilbertGP(num_basis=16, c=2.5, lengthscale=[0.6, 1.0], outputscale=1.0, noise_variance=0.05,
                          chunk_size=7).fit(X, y)
    Xt = X[:20]
    assert torch.allclose(a.posterior(Xt).mean, b.posterior(Xt).mean, rtol=0, atol=1e-12)
    assert torch.allclose(a.posterior(Xt).variance, b.posterior(Xt).variance, rtol=1e-10)


def test_weight_posterior_is_the_dense_bayesian_linear_regression():
    X, y = _data(80, 1)
    model = tnbayes.HilbertGP(num_basis=20, c=2.0).fit(X, y)
    Xs = model.x_scaler_.transform(torch.tensor(X))
    ys = model.y_scaler_.transform(torch.tensor(y)) - model.mean_constant_
    Z = model.basis_.features(Xs, model.lengthscale_)[0]  # (N, M)
    prior_prec = torch.eye(20, dtype=torch.float64) / model.outputscale_
    cov = torch.linalg.inv(Z.T @ Z / model.noise_variance_ + prior_prec)
    mean = cov @ Z.T @ ys / model.noise_variance_
    torch.testing.assert_close(model.weight_mean_, mean, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(model.weight_covariance(), cov, rtol=1e-8, atol=1e-12)


def test_inputs_outside_the_box_raise():
    X, y = _data(100, 1)
    model = tnbayes.HilbertGP(num_basis=32, c=1.2, out_of_box="raise").fit(X, y)
    model.predict(np.array([[3.2]]))  # inside the prediction box (c = 1.2: up to 1.1 S), outside the data
    with pytest.raises(ValueError, match="outside"):
        model.predict(np.array([[10.0]]))


def test_defaults_pick_structure_and_warn_when_basis_too_small():
    X, y = _data(200, 4)  # sin(2 x0) cos(x1): no additive main effect
    model = tnbayes.HilbertGP().fit(X, y)
    assert model.structure_ == "hybrid" and model.product_inputs_ == [0, 1]
    assert tnbayes.metrics.rmse(y, model.predict(X)) < 0.15
    X1, y1 = _data(100, 1)
    with pytest.warns(ApproximationWarning):
        tnbayes.HilbertGP(num_basis=6, c=2.0, lengthscale=0.05).fit(X1, y1)


def test_matern_kernel_fits():
    X, y = _data(150, 1)
    model = tnbayes.HilbertGP(kernel="matern52").fit(X, y)
    assert tnbayes.metrics.rmse(y, model.predict(X)) < 0.15
    with warnings.catch_warnings():
        warnings.simplefilter("error", ApproximationWarning)
        tnbayes.HilbertGP(kernel="matern12", num_basis=64).fit(X, y)


def test_bad_fixed_hyperparameters_and_constant_columns():
    X, y = _data(60, 2)
    with pytest.raises(ValueError, match="lengthscale has 3 values"):
        tnbayes.HilbertGP(lengthscale=[0.5, 0.6, 0.7]).fit(X, y)
    with pytest.raises(ValueError, match="ard=False takes one"):
        tnbayes.HilbertGP(lengthscale=[0.5, 0.6], ard=False).fit(X, y)
    with pytest.raises(ValueError, match="noise_variance must be a finite positive"):
        tnbayes.HilbertGP(noise_variance=0.0).fit(X, y)
    with pytest.raises(ValueError, match="c must be"):
        tnbayes.HilbertGP(c=0.5).fit(X, y)
    for rounds in (0, -1, 1.5, True):  # 0 rounds used to end in AttributeError: no product_inputs_
        with pytest.raises(ValueError, match="max_adapt_rounds must be an integer >= 1"):
            tnbayes.HilbertGP(max_adapt_rounds=rounds).fit(X, y)
    assert tnbayes.HilbertGP(max_adapt_rounds=1, max_iter=5).fit(X, y).n_iter_ == 1
    X[:, 1] = 0.3
    y = np.sin(2 * X[:, 0]) + 0.1 * np.random.default_rng(1).standard_normal(len(y))
    model = tnbayes.HilbertGP().fit(X, y)
    assert tnbayes.metrics.rmse(y, model.predict(X)) < 0.2
    hybrid = [entry for entry in model.structure_search_ if entry["candidate"] == "hybrid"]
    assert hybrid[0]["product_inputs"] == [0]  # the constant column stays out of the product block


def test_reported_basis_matches_the_one_used(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(300, 2))
    y = np.sin(45 * X[:, 0]) + np.sin(3 * X[:, 1]) + 0.05 * rng.standard_normal(300)
    with pytest.warns(ApproximationWarning):
        model = tnbayes.HilbertGP(structure="additive", max_adapt_rounds=1).fit(X, y)
    assert model.num_basis_ == model.basis_.num_basis
    model.save(tmp_path / "m.tnb")
    loaded = tnbayes.load_model(tmp_path / "m.tnb")
    np.testing.assert_array_equal(loaded.predict(X[:5]), model.predict(X[:5]))


def test_float32_model_keeps_float64_accuracy():
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, size=(4000, 1))
    y = np.sin(2 * X[:, 0]) + 0.001 * rng.standard_normal(4000)
    m64 = tnbayes.HilbertGP().fit(X, y)
    m32 = tnbayes.HilbertGP(dtype="float32").fit(X, y)
    assert m32.posterior(X[:3]).mean.dtype == torch.float32
    assert m32.noise_std == pytest.approx(m64.noise_std, rel=1e-2)  # float32 inputs, float64 internals


def _product_data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.1 * rng.standard_normal(n)


def test_auto_structure_finds_a_product_and_matches_exact_gp():
    X, y = _product_data(500)
    auto = tnbayes.HilbertGP(num_basis=16).fit(X[:300], y[:300])
    assert auto.structure_ in ("product", "hybrid") and auto.product_inputs_ == [0, 1]
    exact = tnbayes.ExactGP(num_restarts=0).fit(X[:300], y[:300])
    with warnings.catch_warnings():  # the additive fit pushes a lengthscale beyond its box: no main effect
        warnings.simplefilter("ignore", ApproximationWarning)
        additive = tnbayes.HilbertGP(num_basis=16, structure="additive").fit(X[:300], y[:300])
    rmse = {name: tnbayes.metrics.rmse(y[300:], m.predict(X[300:]))
            for name, m in (("auto", auto), ("exact", exact), ("additive", additive))}
    assert rmse["auto"] < 1.1 * rmse["exact"]
    assert rmse["additive"] > 3 * rmse["exact"]  # the additive structure cannot represent sin·cos


def test_auto_structure_on_an_additive_function_is_as_good_as_additive():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(600, 6))
    y = np.sin(2 * X).sum(1) + X[:, 0] ** 2 + 0.1 * rng.standard_normal(600)
    auto = tnbayes.HilbertGP(num_basis=16).fit(X[:300], y[:300])
    additive = tnbayes.HilbertGP(num_basis=16, structure="additive").fit(X[:300], y[:300])
    rmse_auto = tnbayes.metrics.rmse(y[300:], auto.predict(X[300:]))
    rmse_additive = tnbayes.metrics.rmse(y[300:], additive.predict(X[300:]))
    assert auto.structure_ == "additive" or rmse_auto <= 1.05 * rmse_additive
    assert rmse_additive < 0.15


def test_structure_search_lists_every_candidate_and_keeps_the_best(capsys):
    X, y = _product_data(200, seed=2)
    model = tnbayes.HilbertGP(num_basis=12, verbose=True).fit(X, y)
    search = model.structure_search_
    assert [entry["candidate"] for entry in search] == ["additive", "product", "hybrid"]
    assert all(np.isfinite([entry["neg_mll"] for entry in search]))
    for entry in search:  # −log p(y)/N plus ½ log N per maximised hyper-parameter
        assert entry["score"] == pytest.approx(entry["neg_mll"] + entry["num_hyperparameters"] * np.log(200) / 400)
    assert [entry["num_hyperparameters"] for entry in search] == [5, 5, 5 + 3]
    best = int(np.argmin([entry["score"] for entry in search]))
    assert [entry["chosen"] for entry in search] == [i == best for i in range(3)]
    assert model.structure_ == search[best]["candidate"] and model.neg_mll_ == search[best]["neg_mll"]
    assert search[0]["product_inputs"] == [] and search[1]["product_inputs"] == [0, 1]
    assert search[0]["num_features"] == 2 * 12 and search[1]["num_features"] == 12**2
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("HilbertGP: ")]
    assert len(printed) == 4 and f"structure_ = {model.structure_!r}" in printed[-1]
    one_d = tnbayes.HilbertGP(num_basis=16).fit(X[:, :1], y)  # 1-D: the product is the only candidate
    assert [entry["candidate"] for entry in one_d.structure_search_] == ["product"]


def test_hybrid_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(200, 3))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.3 * X[:, 2] + 0.05 * rng.standard_normal(200)
    model = tnbayes.HilbertGP(structure="hybrid", num_basis=10).fit(X, y)
    assert model.structure_ == "hybrid" and model.product_indices_.shape[1] == len(model.product_inputs_)
    assert 0 < model.product_share_ < 1
    model.save(tmp_path / "hybrid.tnb")
    loaded = tnbayes.load_model(tmp_path / "hybrid.tnb")
    assert loaded.structure_ == "hybrid" and loaded.structure_search_ == model.structure_search_
    torch.testing.assert_close(loaded.product_indices_, model.product_indices_, rtol=0, atol=0)
    Xt = rng.uniform(-1, 1, size=(20, 3))
    mean, std = model.predict(Xt, return_std=True)
    mean_loaded, std_loaded = loaded.predict(Xt, return_std=True)
    np.testing.assert_array_equal(mean_loaded, mean)
    np.testing.assert_array_equal(std_loaded, std)
