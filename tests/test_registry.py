"""The one registry class (tnbayes/_registry.py) that the kernel and model registries are built on."""

from __future__ import annotations

import pytest

from tnbayes._registry import Registry


def test_names_are_case_insensitive_and_sorted():
    reg = Registry("colour")
    reg.register("Red", 1)
    reg.register("blue", 2)
    assert reg.lookup("RED") == 1 and "red" in reg and "Red" in reg and 3 not in reg
    assert reg.names() == ["blue", "red"] and len(reg) == 2


def test_case_sensitive_registry_keeps_names_as_given():
    reg = Registry("class", case_sensitive=True)
    reg.register("TKM", 1)
    assert "TKM" in reg and "tkm" not in reg and reg.get("tkm") is None


def test_unknown_name_suggests_close_matches_and_lists_all():
    reg = Registry("kernel", listing="Registered kernels", advice="Add one with register_kernel(name, cls).")
    for name in ("hilbert", "matern", "vff"):
        reg.register(name, object())
    with pytest.raises(ValueError, match=r"Unknown kernel 'hilbrt'\. Did you mean 'hilbert'\? Registered kernels: "
                                         r"hilbert, matern, vff\. Add one with register_kernel\(name, cls\)\."):
        reg.lookup("hilbrt")
    with pytest.raises(ValueError, match=r"^Unknown kernel 'zzz'\. Registered kernels"):
        reg.lookup("zzz")
    with pytest.raises(ValueError, match="Unknown kernel 5"):
        reg.lookup(5)  # type: ignore[arg-type]


def test_taken_names_need_overwrite_but_the_same_object_may_register_again():
    reg = Registry("model")
    first, second = object(), object()
    reg.register("m", first)
    reg.register("M", first)
    with pytest.raises(ValueError, match="A model named 'M' is already registered.*overwrite=True"):
        reg.register("M", second)
    reg.register("M", second, overwrite=True)
    assert reg.lookup("m") is second
    assert reg.pop("m") is second and "m" not in reg


@pytest.mark.parametrize("name", ["", None, 3])
def test_names_must_be_non_empty_strings(name):
    with pytest.raises(ValueError, match="Model name must be a non-empty string"):
        Registry("model").register(name, object())  # type: ignore[arg-type]
