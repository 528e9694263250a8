"""The one model registry (tnbayes/models/registry.py): models by name for make_model, classes by class name for
load and the chunked-fit message."""

from __future__ import annotations

import numpy as np
import pytest

import tnbayes
from tnbayes.models import registry


def test_every_public_estimator_class_is_found_by_its_class_name():
    for name in tnbayes.__all__:
        obj = getattr(tnbayes, name)
        if isinstance(obj, type) and issubclass(obj, tnbayes.BaseModel) and obj is not tnbayes.BaseModel:
            assert registry.model_class(obj.__name__) is obj
    assert registry.model_class("os.system") is None and registry.model_class(None) is None  # type: ignore[arg-type]


def test_chunked_fit_models_are_named_in_the_error_of_the_others():
    supported = registry.chunked_fit_models()
    assert {"CPDKernelMachine", "QTKM", "TTKalmanGP"} <= set(supported)
    assert all(registry.model_class(name).supports_chunked_fit for name in supported)
    X = np.zeros((4, 1))
    chunks = [(X, np.zeros(4))]
    with pytest.raises(TypeError, match="supported by .*CPDKernelMachine"):
        tnbayes.ExactGP().fit(chunks)


def test_a_subclass_is_registered_when_it_is_defined():
    class MyRegisteredModel(tnbayes.ExactGP):
        pass

    try:
        assert registry.model_class("MyRegisteredModel") is MyRegisteredModel
    finally:
        registry._CLASSES.pop("MyRegisteredModel", None)


def test_register_and_make_model_by_name():
    def factory(**kwargs):
        return tnbayes.ExactGP(**kwargs)

    try:
        registry.register_model("my_exact_gp", factory)
        registry.register_model("my_exact_gp", factory)  # the same factory again: no error
        assert "my_exact_gp" in tnbayes.list_models()
        assert tnbayes.make_model("My_Exact_GP", max_iter=3).max_iter == 3
        with pytest.raises(ValueError, match="already registered.*overwrite=True"):
            registry.register_model("my_exact_gp", tnbayes.ExactGP)
        with pytest.raises(TypeError, match="factory must be a model class or a callable"):
            registry.register_model("not_callable", 3)  # type: ignore[arg-type]
    finally:
        registry._FACTORIES.pop("my_exact_gp", None)
    with pytest.raises(ValueError, match=r"Unknown model 'my_exact_gp'.*Known models: cpd"):
        tnbayes.make_model("my_exact_gp")
