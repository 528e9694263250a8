"""The model file's JSON codec and its write/read round trip (tnbayes/_model_file.py); damaged files are the
business of tests/test_bad_input.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes import _model_file
from tnbayes._model_file import FORMAT_NAME, FORMAT_VERSION, from_jsonable, read_model_file, to_jsonable


def test_codec_round_trips_parameters_exactly():
    value = {"dtype": torch.float32, "shape": (2, 3), "nested": [(1, 2.5), {"a": None}], "flag": True,
             "device": torch.device("cpu"), "count": np.int64(4), "scale": np.float64(0.5),
             "array": np.arange(3), "tensor": torch.tensor([1.0, 2.0])}
    back = from_jsonable(json.loads(json.dumps(to_jsonable(value))))
    assert back == {"dtype": torch.float32, "shape": (2, 3), "nested": [(1, 2.5), {"a": None}], "flag": True,
                    "device": "cpu", "count": 4, "scale": 0.5, "array": [0, 1, 2], "tensor": [1.0, 2.0]}
    assert type(back["count"]) is int and type(back["shape"]) is tuple


def test_codec_refuses_what_it_cannot_store_or_name():
    with pytest.raises(TypeError, match="cannot store object"):
        to_jsonable(object())
    with pytest.raises(ValueError, match="unknown dtype 'load'"):
        from_jsonable({"__dtype__": "load"})


def test_written_file_has_the_documented_payload(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(20, 1))
    model = tnbayes.ExactGP(num_restarts=0, max_iter=5).fit(X, np.sin(3 * X[:, 0]))
    path = tmp_path / "m.tnb"
    model.save(path)
    payload = read_model_file(path)
    assert (payload["format"], payload["format_version"], payload["class"]) == (FORMAT_NAME, FORMAT_VERSION, "ExactGP")
    assert payload["checksum"] == _model_file.payload_checksum(payload)
    assert from_jsonable(payload["params"]) == model.get_params()
    assert {"x_scaler_.shift", "x_scaler_.scale"} <= set(payload["tensors"])
    loaded = _model_file.restore_model(path, payload, tnbayes.ExactGP)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
