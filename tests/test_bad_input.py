"""Bad input, huge sizes and damaged files (#26): every public estimator × every case, one battery.

Like scikit-learn's ``check_estimator``: each case is asserted for every estimator, on the exception type and on a
message that names the problem in the user's terms. Fits are tiny (n = 30, small ranks and bases) and each estimator
is fitted once per session; the corrupt-file fuzz loads damaged copies of one saved model of each class and requires
that each load either gives identical predictions or raises :class:`tnbayes.ModelFileError`, and never runs code.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

import tnbayes
from tnbayes._model_file import payload_checksum
from tnbayes.models.base import FORMAT_VERSION

REGRESSORS = {
    "CPDKernelMachine": lambda: tnbayes.CPDKernelMachine(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=30),
    "ExactGP": lambda: tnbayes.ExactGP(num_restarts=0, max_iter=20),
    "FeatureLearningKM": lambda: tnbayes.FeatureLearningKM(rank=2, num_basis=4, max_sweeps=2),
    "HilbertGP": lambda: tnbayes.HilbertGP(num_basis=6, max_iter=20),
    "QTKM": lambda: tnbayes.QTKM(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=30),
    "RFFNet": lambda: tnbayes.RFFNet(num_features=16, max_epochs=10, initial_relevance=0.5),
    "SVGP": lambda: tnbayes.SVGP(num_inducing=10, max_iter=20),
    "TKM": lambda: tnbayes.TKM(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=30),
    "TNKF": lambda: tnbayes.TNKF(hyper_max_points=30),
    "TTKalmanGP": lambda: tnbayes.TTKalmanGP(num_basis=6, hyper_max_points=30),
}
CLASSIFIERS = {
    "CPDKernelClassifier": lambda: tnbayes.CPDKernelClassifier(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=30),
    "RFFNetClassifier": lambda: tnbayes.RFFNetClassifier(num_features=16, max_epochs=10, initial_relevance=0.5),
    "TNKFClassifier": lambda: tnbayes.TNKFClassifier(hyper_max_points=30),
}
ESTIMATORS = {**REGRESSORS, **CLASSIFIERS}
NOT_VALID = "not a valid tnbayes model file: "


def _data(n: int = 30, classify: bool = False):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 2))
    y = np.cos(2 * X[:, 0]) + 0.05 * rng.standard_normal(n)
    return (X, np.where(y > np.median(y), "high", "low")) if classify else (X, y)


_FITTED: dict[str, object] = {}


def fitted(name: str):
    """One fitted model per estimator and session (the battery only reads it)."""
    if name not in _FITTED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _FITTED[name] = ESTIMATORS[name]().fit(*_data(classify=name in CLASSIFIERS))
    return _FITTED[name]


def _outputs(model, X) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hasattr(model, "predict_proba"):
            return np.asarray(model.predict_proba(X))
        mean, std = model.predict(X, return_std=True)
        return np.stack([mean, std])


def test_registry_is_covered():
    """Every public estimator is in the battery (a new one must be added here)."""
    public = {getattr(tnbayes, name).__name__ for name in tnbayes.__all__  # FLModel is FeatureLearningKM
              if isinstance(getattr(tnbayes, name), type) and issubclass(getattr(tnbayes, name), tnbayes.BaseModel)
              and name != "BaseModel"}
    assert public == set(ESTIMATORS)


# ---------------------------------------------------------------------------------------------- training input
BAD_TRAINING = {
    "nan_X": (np.full((6, 2), np.nan), None, "NaN"),
    "inf_y": (np.ones((6, 2)), np.array([0, 1, np.inf, 0, 1, 0.0]), "inf"),
    "lengths": (np.ones((6, 2)), np.zeros(5), "inconsistent|5"),
    "empty": (np.ones((0, 2)), np.zeros(0), "empty|has 0"),
    "one_d_X": (np.ones(6), None, "reshape\\(-1, 1\\)"),
    "strings_X": (np.array([["a", "b"]] * 6), None, "numeric"),
    "complex_X": (np.ones((6, 2)) * 1j, None, "complex|real"),
    "one_row": (np.ones((1, 2)), None, "At least|samples|two"),
    # pandas' nullable columns hold pd.NA, which float() refuses: reported as the missing value it is
    "pandas_na_X": (pd.DataFrame({"a": pd.array([1, None, 2, 3, 4, 5], dtype="Int64"), "b": np.ones(6)}), None,
                    "NaN.*missing"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRAINING))
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_bad_training_input(name, case):
    X, y, match = BAD_TRAINING[case]
    if y is None:
        y = np.arange(X.shape[0]) % 2 if X.ndim and X.shape[0] else np.zeros(0)
    if name in CLASSIFIERS and case != "one_row" and np.isfinite(y).all():  # two classes, so the case is the fault
        y = np.where(np.arange(len(y)) % 2 > 0, "a", "b")
    with pytest.raises(ValueError, match=match):
        ESTIMATORS[name]().fit(X, y)


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifier_needs_two_classes(name):
    X, _ = _data()
    with pytest.raises(ValueError, match="two classes|classes"):
        ESTIMATORS[name]().fit(X, np.zeros(len(X)))


# ---------------------------------------------------------------------------------------------- use before fit
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_use_before_fit_names_the_method(name, tmp_path):
    model = ESTIMATORS[name]()
    methods = ["predict"] + (["predict_proba"] if name in CLASSIFIERS else ["posterior"])
    for method in methods:
        with pytest.raises(tnbayes.NotFittedError, match=f"before {method}\\("):
            getattr(model, method)(np.zeros((2, 2)))
    with pytest.raises(tnbayes.NotFittedError, match="before save\\("):
        model.save(tmp_path / "m.tnb")


# ---------------------------------------------------------------------------------------------- test input
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_bad_test_input(name):
    model = fitted(name)
    with pytest.raises(ValueError, match="fitted with 2"):
        model.predict(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="NaN") as err:
        model.predict(np.array([[0.0, np.nan]]))
    assert "before fitting" not in str(err.value)
    with pytest.raises(ValueError, match="reshape"):
        model.predict(np.zeros(2))


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_read_only_arrays_give_no_torch_warning(name):
    """pandas 3 hands out read-only views; torch.from_numpy would warn 'not writable' on every fit."""
    X, y = _data(classify=name in CLASSIFIERS)
    X = X.copy()
    X.setflags(write=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted(name).predict(X)
    assert not [w for w in caught if "not writable" in str(w.message)]


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_log_prob_length_message(name):
    post = fitted(name).posterior(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="4 entries but this posterior is over 3 points"):
        post.log_prob(np.zeros(4))


# ---------------------------------------------------------------------------------------------- constant target
@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_constant_target_keeps_a_positive_variance(name):
    X, _ = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = REGRESSORS[name]().fit(X, np.full(len(X), 3.0))
        post = model.posterior(X[:5])
    assert bool((post.variance > 0).all()) and float(post.variance.min()) >= 1e-12
    log_p = post.log_prob(np.full(5, 3.0))
    assert bool(torch.isfinite(log_p).all()) and float(log_p.max()) < 50


# ---------------------------------------------------------------------------------------------- far from the data
@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_far_out_inputs_are_not_silently_overconfident(name):
    """At 100× the training range the predictive std is at least the in-sample one, or a warning says why not."""
    model = fitted(name)
    X, _ = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, std_in = model.predict(X[:5], return_std=True)
        _, std_far = model.predict(100 * X[:5], return_std=True)
    assert caught or float(np.min(std_far)) >= 0.99 * float(np.median(std_in))


def test_tnkf_far_out_gets_the_prior_variance():
    model = fitted("TNKF")
    X, _ = _data()
    _, std_in = model.predict(X[:5], return_std=True)
    with pytest.warns(tnbayes.selection.OutOfBoxWarning, match="beyond the kernel's reach"):
        _, std_far = model.predict(100 * X[:5], return_std=True)
    assert float(np.min(std_far)) > 3 * float(np.max(std_in))
    with pytest.warns(tnbayes.selection.OutOfBoxWarning):
        proba = fitted("TNKFClassifier").predict_proba(100 * X[:5])
    assert float(np.max(proba)) < 0.9  # the prior's variance: no confident label far from the data


# ---------------------------------------------------------------------------------------------- huge sizes
def _forbid(monkeypatch, target: str, attribute: str) -> None:
    """Replace ``target.attribute`` (``"module"`` or ``"module:Class"``) by a function that fails the test."""
    import importlib

    module, _, klass = target.partition(":")
    owner = importlib.import_module(module)
    owner = getattr(owner, klass) if klass else owner
    assert hasattr(owner, attribute), f"{target} has no {attribute}: update the battery"

    def reached(*args, **kwargs):
        raise AssertionError(f"{target}.{attribute} was called before the size was refused")

    monkeypatch.setattr(owner, attribute, reached)


HUGE = {  # estimator, the expensive function that must not be reached (module[:class], attribute)
    "HilbertGP": (lambda: tnbayes.HilbertGP(num_basis=10**6), "tnbayes.models.hilbert_gp:HilbertGP",
                  "_accumulate_statistics"),
    "TTKalmanGP": (lambda: tnbayes.TTKalmanGP(num_basis=10**6), "tnbayes.models.tt_kalman:TTKalmanGP",
                   "_hyperparameters"),
    # a huge cap of the automatic M (1-D: no feature limit bounds M below max_num_basis)
    "HilbertGP-max_num_basis": (lambda: tnbayes.HilbertGP(max_num_basis=10**6), "tnbayes.models.hilbert_gp:HilbertGP",
                                "_accumulate_statistics"),
    "TTKalmanGP-max_num_basis": (lambda: tnbayes.TTKalmanGP(max_num_basis=10**6),
                                 "tnbayes.models.tt_kalman:TTKalmanGP", "_hyperparameters"),
    "TKM": (lambda: tnbayes.TKM(num_basis=10**6), "tnbayes.models.qtkm", "select_krr_hyperparameters"),
    "QTKM": (lambda: tnbayes.QTKM(rank=10**6), "tnbayes.models.qtkm", "select_krr_hyperparameters"),
    "RFFNet": (lambda: tnbayes.RFFNet(num_features=10**6), "tnbayes.models.rffnet", "RFFNetModule"),
    "CPDKernelMachine": (lambda: tnbayes.CPDKernelMachine(num_basis=10**6, rank=2), "tnbayes.models.cpd:CPDKernelMachine",
                         "_resolve_hyperparameters"),
    "CPDKernelMachine-rank": (lambda: tnbayes.CPDKernelMachine(rank=10**6), "tnbayes.models.cpd:CPDKernelMachine",
                              "_resolve_hyperparameters"),
    "TNKF": (lambda: tnbayes.TNKF(truncation={"covariance": {"max_rank": 10**6}}), "tnbayes.models.tnkf:TNKF",
             "kernel_matrix"),
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_huge_sizes_are_refused_before_any_work(name, monkeypatch):
    make, target, attribute = HUGE[name]
    _forbid(monkeypatch, target, attribute)
    X, y = _data()
    with pytest.raises(MemoryError, match="GiB"):
        make().fit(X[:, :1] if name.endswith("max_num_basis") else X, y)


def test_qtkm_with_a_million_features_fits_at_once(monkeypatch):
    """QTKM's cores stay small for any M, and the CV sums huge Fourier kernels in closed form (no (n, M) features)."""
    from tnbayes.basis import tensor_product as module

    unquantized = module.fourier_features

    def refuse_huge(x, num_basis, period):  # the (n, M) feature matrix that used to hang the CV
        assert num_basis <= module.CLOSED_FORM_MIN_BASIS, f"built an (n, {num_basis}) Fourier feature matrix"
        return unquantized(x, num_basis, period)

    monkeypatch.setattr(module, "fourier_features", refuse_huge)
    model = tnbayes.QTKM(num_basis=10**6, rank=2, max_sweeps=2, hyper_max_points=30).fit(*_data())
    assert np.isfinite(model.predict(_data()[0][:3])).all()


def test_closed_form_fourier_kernel_matches_the_features():
    from tnbayes.basis import FourierPolynomialFeatures
    from tnbayes.basis import tensor_product as module

    X = torch.rand(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) - 0.5
    X[3] = X[2]
    features = FourierPolynomialFeatures(2, module.CLOSED_FORM_MIN_BASIS + 3, "fourier", 1.0, quantized=False)
    closed = features.kernel(X, X)
    direct = None
    for mode in range(features.num_modes):
        phi = features.mode_features(X, mode)[0]
        direct = phi @ phi.conj().T if direct is None else direct * (phi @ phi.conj().T)
    assert torch.allclose(closed, direct, atol=1e-10)


# ---------------------------------------------------------------------------------------------- GaussianPosterior
def test_gaussian_posterior_refuses_bad_moments():
    mean = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="variance must be >= 0"):
        tnbayes.GaussianPosterior(mean, variance=torch.tensor([1.0, -0.5, 1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="mean contains 1 non-finite"):
        tnbayes.GaussianPosterior(torch.tensor([0.0, float("nan"), 0.0]), variance=torch.ones(3))
    with pytest.raises(ValueError, match="variance contains 1 non-finite"):
        tnbayes.GaussianPosterior(mean, variance=torch.tensor([1.0, float("nan"), 1.0]))
    with pytest.raises(ValueError, match="not positive semi-definite"):
        tnbayes.GaussianPosterior(mean, covariance=torch.tensor([[1.0, 2.0, 0], [2.0, 1.0, 0], [0, 0, 1.0]]))
    with pytest.raises(ValueError, match="not symmetric"):
        tnbayes.GaussianPosterior(mean, covariance=torch.tensor([[1.0, 0.5, 0], [0.0, 1.0, 0], [0, 0, 1.0]]))
    post = tnbayes.GaussianPosterior(np.zeros(3), variance=np.ones(3))  # numpy arrays are accepted
    assert post.variance.dtype == torch.float64 and post.log_prob(np.zeros(3)).shape == (3,)
    tiny = tnbayes.GaussianPosterior(mean, variance=torch.tensor([1.0, -1e-17, 1.0], dtype=torch.float64))
    assert float(tiny.variance.min()) == 0.0  # round-off below zero is clamped
    with pytest.raises(ValueError, match="already includes the observation noise"):
        tnbayes.GaussianPosterior(mean, variance=torch.zeros(3, dtype=torch.float64)).log_prob(np.zeros(3))


# ---------------------------------------------------------------------------------------------- model files
class _RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _payload(path) -> dict:
    return torch.load(path, weights_only=True)


def _save_payload(payload: dict, path, *, rechecksum: bool = True) -> None:
    if rechecksum and "checksum" in payload:
        payload["checksum"] = payload_checksum(payload)
    torch.save(payload, path)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> (path of a saved fitted model, its outputs on a few points)."""
    root = tmp_path_factory.mktemp("models")
    X = _data()[0][:4]
    out = {}
    for name in sorted(ESTIMATORS):
        path = root / f"{name}.tnb"
        fitted(name).save(path)
        out[name] = (path, _outputs(fitted(name), X), X)
    return out


def _damaged_files(path, tmp_path, marker):
    """(label, damaged file) pairs every estimator must refuse with ModelFileError."""
    data = path.read_bytes()
    files = {
        "empty": b"",
        "half": data[: len(data) // 2],
        "text": b"estimator = 'ExactGP'\nweights = [1, 2, 3]\n",
        "random": np.random.default_rng(0).bytes(2048),
        "pickle_reduce": pickle.dumps({"format": "tnbayes-model", "x": _RunsCode(marker)}),
    }
    buffer = io.BytesIO()
    torch.save({"format": "tnbayes-model", "payload": _RunsCode(marker)}, buffer)
    files["torch_reduce"] = buffer.getvalue()
    out = []
    for label, content in files.items():
        target = tmp_path / label
        target.write_bytes(content)
        out.append((label, target))

    def edited(label, edit, rechecksum=True):
        payload = _payload(path)
        edit(payload)
        target = tmp_path / label
        _save_payload(payload, target, rechecksum=rechecksum)
        out.append((label, target))

    edited("no_tensors", lambda p: p.pop("tensors"), rechecksum=False)
    edited("unknown_dtype", lambda p: p.update(params_json=json.dumps(
        {**json.loads(p["params_json"]), "dtype": {"__dtype__": "float128"}})))
    edited("dtype_load", lambda p: p.update(params_json=json.dumps(
        {**json.loads(p["params_json"]), "dtype": {"__dtype__": "load"}})))
    edited("wrong_shape", lambda p: p["tensors"].update({"x_scaler_.shift": torch.zeros(5, dtype=torch.float64)}))
    edited("edited_no_checksum", lambda p: p["tensors"].update(
        {"x_scaler_.shift": p["tensors"]["x_scaler_.shift"] + 1}), rechecksum=False)
    edited("future_version", lambda p: p.update(format_version=FORMAT_VERSION + 1))
    edited("bad_json", lambda p: p.update(scalars_json="{not json"))
    edited("unknown_class", lambda p: p.update({"class": "os.system"}))
    edited("private_attribute", lambda p: p.update(scalars_json=json.dumps(
        {**json.loads(p["scalars_json"]), "__class__": 1})))
    return out


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_save_load_is_exact(name, saved):
    path, expected, X = saved[name]
    loaded = tnbayes.load_model(path)
    assert type(loaded) is type(fitted(name))
    np.testing.assert_array_equal(_outputs(loaded, X), expected)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_damaged_files_raise_model_file_error(name, saved, tmp_path):
    path, _, _ = saved[name]
    marker = str(tmp_path / "code_ran")
    for label, damaged in _damaged_files(path, tmp_path, marker):
        with pytest.raises(tnbayes.ModelFileError, match=NOT_VALID) as err:
            tnbayes.load_model(damaged)
        assert "weights_only=False" not in str(err.value), label
        assert not os.path.exists(marker), f"{label}: loading ran code from the file"
    with pytest.raises(FileNotFoundError):
        tnbayes.load_model(tmp_path / "missing.tnb")


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_corrupt_file_fuzz(name, saved, tmp_path):
    """Truncations, flipped bytes and edited JSON fields: identical predictions or ModelFileError, nothing else."""
    path, expected, X = saved[name]
    data = path.read_bytes()
    rng = np.random.default_rng(sum(map(ord, name)))
    variants = [data[:cut] for cut in (1, 64, len(data) // 3, len(data) - 200, len(data) - 1)]
    for position in rng.integers(0, len(data), size=12):
        flipped = bytearray(data)
        flipped[int(position)] ^= 0xFF
        variants.append(bytes(flipped))
    payload = _payload(path)
    for key in ("params_json", "scalars_json", "scalers_json"):
        fields = json.loads(payload[key])
        for field in list(fields)[:4]:
            for value in (None, -1, "x", [1e308], {"__dtype__": "load"}, {"__tuple__": 3}):
                edited = dict(payload, **{key: json.dumps({**fields, field: value})})
                for rechecksum in (False, True):
                    buffer = io.BytesIO()
                    if rechecksum:
                        edited["checksum"] = payload_checksum(edited)
                    torch.save(edited, buffer)
                    variants.append(buffer.getvalue())
    target = tmp_path / "variant.tnb"
    for index, content in enumerate(variants):
        target.write_bytes(content)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loaded = tnbayes.load_model(target)
        except tnbayes.ModelFileError as err:
            assert str(err).startswith(NOT_VALID)
            continue
        np.testing.assert_array_equal(_outputs(loaded, X), expected, err_msg=f"variant {index} loaded differently")


def test_format_version_1_files_still_load(saved, tmp_path):
    """Files written before the checksum (format version 1) load as before."""
    path, expected, X = saved["CPDKernelMachine"]
    payload = _payload(path)
    payload.pop("checksum")
    payload["format_version"] = 1
    torch.save(payload, tmp_path / "v1.tnb")
    np.testing.assert_array_equal(_outputs(tnbayes.load_model(tmp_path / "v1.tnb"), X), expected)
