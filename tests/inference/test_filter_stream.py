"""The filters' streams run in torch's inference mode (tnbayes.inference.kalman.streaming); nothing a fitted model
keeps is an inference tensor, so its state can be updated in place and differentiated through later."""

import collections
import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.inference.kalman import filter_stream, released
from tnbayes.tensors import TTMatrix, TTVector


Pair = collections.namedtuple("Pair", ["first", "second"])


def _inference_tensors(value, path="model", seen=None):
    """Paths of the inference tensors reachable from ``value`` (attributes, TT cores, lists, tuples, dicts)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [path] if value.is_inference() else []
    if isinstance(value, (TTVector, TTMatrix)):
        return [f"{path}.cores[{k}]" for k, core in enumerate(value.cores) if core.is_inference()]
    if isinstance(value, (list, tuple)):
        return [p for k, item in enumerate(value) for p in _inference_tensors(item, f"{path}[{k}]", seen)]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _inference_tensors(item, f"{path}[{key!r}]", seen)]
    if hasattr(value, "__dict__") and type(value).__module__.startswith("tnbayes"):
        return [p for name, item in vars(value).items() for p in _inference_tensors(item, f"{path}.{name}", seen)]
    return []


def test_filter_stream_is_inference_mode_on_one_thread_and_restores_both():
    threads = torch.get_num_threads()
    with filter_stream():
        assert torch.is_inference_mode_enabled() and torch.get_num_threads() == 1
        made = torch.ones(3)
    assert not torch.is_inference_mode_enabled() and torch.get_num_threads() == threads
    assert made.is_inference()


def test_released_copies_inference_tensors_only_and_keeps_the_values():
    normal = torch.arange(3.0)
    with torch.inference_mode():
        tensor = torch.arange(4.0)
        tt = TTVector.from_dense(torch.arange(8.0), (2, 2, 2))
        matrix = TTMatrix.identity((2, 2))
    out = released({"tensor": tensor, "nested": [tt, (matrix, normal)], "number": 3, "normal": normal})
    assert _inference_tensors(out) == []
    torch.testing.assert_close(out["tensor"], tensor.clone())
    torch.testing.assert_close(out["nested"][0].to_dense(), torch.arange(8.0))
    torch.testing.assert_close(out["nested"][1][0].to_dense(), torch.eye(4, dtype=torch.float64))
    assert out["normal"] is normal and out["number"] == 3
    with torch.inference_mode():
        pair = Pair(torch.ones(2), normal)
        factory = collections.defaultdict(list, {"a": torch.ones(1)})
    pair_out, factory_out = released(pair), released(factory)
    assert isinstance(pair_out, Pair) and _inference_tensors(pair_out) == [] and pair_out.second is normal
    assert isinstance(factory_out, collections.defaultdict) and factory_out.default_factory is list
    assert _inference_tensors(dict(factory_out)) == []
    kept = [normal, {"a": normal}]
    assert released(kept) is kept  # nothing to replace: the same object
    out["tensor"].add_(1.0)  # a normal tensor: in place is allowed outside inference mode
    with pytest.raises(RuntimeError):
        tensor.add_(1.0)  # what the copy avoids


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.sin(3 * X[:, 0]) + X[:, 1] + 0.05 * rng.standard_normal(n)


@pytest.mark.parametrize("make", [
    lambda: tnbayes.TNKF(max_rows=40),
    lambda: tnbayes.TNKF(max_rows=40, block_size=4),
    lambda: tnbayes.TTKalmanGP(num_basis=4, max_rank=4),
], ids=["TNKF", "TNKF-blocks", "TTKalmanGP"])
def test_fitted_kalman_models_keep_no_inference_tensor(make, tmp_path):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make().fit(X, y)
    assert _inference_tensors(model) == []
    before = model.posterior(X[:5]).mean
    path = tmp_path / "model.tnb"
    model.save(path)
    torch.testing.assert_close(type(model).load(path).posterior(X[:5]).mean, before, rtol=0, atol=0)
    if hasattr(model, "condition_on_observations"):
        X_new, y_new = _data(8, seed=1)
        conditioned = model.condition_on_observations(X_new, y_new)
        assert _inference_tensors(conditioned) == []
        assert _inference_tensors(model) == []


def test_fitted_tnkf_classifier_keeps_no_inference_tensor():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    labels = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = tnbayes.TNKFClassifier(max_rows=30).fit(X, labels)
    assert _inference_tensors(model) == []


def test_module_caches_filled_inside_a_stream_hold_normal_tensors():
    """The subspace iteration's cached start blocks outlive the stream that first asks for one."""
    from tnbayes.tensors.tt_update_rounding import _start_block

    with filter_stream():
        block = _start_block(1237, 5, torch.float64, torch.device("cpu"))  # a size no other test asks for
    assert not block.is_inference()
    assert _start_block(1237, 5, torch.float64, torch.device("cpu")) is block
