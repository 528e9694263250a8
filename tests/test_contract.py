"""The estimator contract: validation errors, fitted checks, save/load, array types."""

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.models.registry import make_model

MODEL_FACTORIES = {
    "exact_gp": lambda: tnbayes.ExactGP(num_restarts=0, max_iter=30),
    "hilbert_gp": lambda: tnbayes.HilbertGP(max_iter=30),
    "cpd": lambda: tnbayes.CPDKernelMachine(rank=3, max_sweeps=3, hyper_max_points=40),
    "qtkm": lambda: tnbayes.QTKM(rank=3, max_sweeps=3, hyper_max_points=40),
    "tkm": lambda: tnbayes.TKM(rank=2, max_sweeps=3, hyper_max_points=40),
    "tnkf": lambda: tnbayes.TNKF(hyper_max_points=40),
    "fl": lambda: tnbayes.FeatureLearningKM(rank=3, num_basis=4, max_sweeps=3),
    "tt_kalman_gp": lambda: tnbayes.TTKalmanGP(hyper_max_points=40, max_num_basis=6),
    "rffnet": lambda: tnbayes.RFFNet(max_epochs=30, initial_relevance=0.5),  # λ = 0 is a stationary point for cos(2x)
    "svgp": lambda: tnbayes.SVGP(num_inducing=16, max_iter=30),
}


def _data(n=40):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.cos(2 * X[:, 0]) + 0.05 * rng.standard_normal(n)


@pytest.fixture(params=sorted(MODEL_FACTORIES))
def factory(request):
    return MODEL_FACTORIES[request.param]


@pytest.mark.parametrize(
    "X, y, match",
    [
        (np.full((5, 2), np.nan), np.zeros(5), "NaN"),
        (np.ones((5, 2)), np.array([0, 1, np.inf, 0, 0.0]), "inf"),
        (np.ones((5, 2)), np.zeros(4), "inconsistent"),
        (np.ones((0, 2)), np.zeros(0), "empty"),
        (np.ones(5), np.zeros(5), "reshape\\(-1, 1\\)"),
        (np.ones((5, 2)), np.zeros((5, 2)), "Multi-output"),
        (np.array([["a", "b"]] * 5), np.zeros(5), "numeric"),
    ],
)
def test_bad_training_input_raises_clear_error(factory, X, y, match):
    with pytest.raises(ValueError, match=match):
        factory().fit(X, y)


def test_non_numbers_in_object_array_raise_type_error():
    X = np.array([[object(), 1]] * 5, dtype=object)
    with pytest.raises(TypeError, match="numeric"):
        tnbayes.HilbertGP().fit(X, np.zeros(5))


def test_column_vector_y_warns_as_in_sklearn():
    from sklearn.exceptions import DataConversionWarning

    X, y = _data()
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        model = tnbayes.ExactGP(num_restarts=0, max_iter=10).fit(X, y[:, None])
    assert model.predict(X).shape == y.shape


def test_use_before_fit(factory):
    with pytest.raises(tnbayes.NotFittedError, match="fit\\(X, y\\) before posterior"):
        factory().posterior(np.zeros((2, 2)))
    with pytest.raises(RuntimeError, match="before"):
        factory().predict(np.zeros((2, 2)))


def test_wrong_number_of_features_at_predict(factory):
    X, y = _data()
    model = factory().fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features, but .* is expecting 2 features as input"):
        model.predict(np.zeros((3, 3)))


def test_save_load_round_trip_is_exact(factory, tmp_path):
    X, y = _data()
    model = factory().fit(X, y)
    path = tmp_path / "model.tnb"
    model.save(path)
    loaded = tnbayes.load_model(path)
    assert type(loaded) is type(model)
    assert loaded.get_params() == model.get_params()
    Xt = np.random.default_rng(3).uniform(-1, 1, (11, 2))
    a, b = model.posterior(Xt), loaded.posterior(Xt)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)
    # the file is readable with weights_only=True, i.e. it contains no pickled code
    payload = torch.load(path, weights_only=True)
    assert payload["format_version"] == tnbayes.models.base.FORMAT_VERSION


def test_load_rejects_other_files(tmp_path):
    path = tmp_path / "x.pt"
    torch.save({"a": torch.zeros(2)}, path)
    with pytest.raises(ValueError, match="not a tnbayes model"):
        tnbayes.load_model(path)


def test_torch_in_torch_out_numpy_in_numpy_out(factory):
    X, y = _data()
    model = factory().fit(torch.tensor(X), torch.tensor(y))
    assert isinstance(model.predict(X), np.ndarray)
    mean, std = model.predict(torch.tensor(X), return_std=True)
    assert isinstance(mean, torch.Tensor) and isinstance(std, torch.Tensor)
    assert model.predict(X.tolist()).shape == (len(y),)


def test_unknown_model_name():
    with pytest.raises(ValueError, match="Unknown model 'exact_gq'.*exact_gp"):
        make_model("exact_gq")


def test_bad_dtype_and_device():
    X, y = _data()
    with pytest.raises(ValueError, match="dtype"):
        tnbayes.ExactGP(dtype="int8").fit(X, y)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            tnbayes.ExactGP(device="cuda").fit(X, y)


def test_sklearn_style_params_and_score(factory):
    model = factory()
    params = model.get_params(deep=True)
    clone = type(model)(**params)
    assert clone.get_params() == params
    X, y = _data()
    assert clone.fit(X, y).score(X, y) > 0.5
    with pytest.raises(tnbayes.NotFittedError):
        factory().save("/tmp/never-written.tnb")
