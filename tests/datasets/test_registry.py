"""The dataset catalogue (tnbayes/datasets/catalogue.json) and its reader (tnbayes/datasets/_registry.py)."""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from pathlib import Path

import pytest

from tnbayes.datasets import _registry
from tnbayes.datasets._readers import READERS

ROOT = Path(__file__).resolve().parents[2]


def test_the_catalogue_ships_as_package_data():
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["tnbayes.datasets"]
    assert any(fnmatch.fnmatch(_registry._CATALOGUE, pattern) for pattern in globs)
    assert (Path(_registry.__file__).parent / _registry._CATALOGUE).is_file()


def test_every_entry_is_complete_and_its_templates_filled():
    placeholder = re.compile(r"\{[A-Za-z_]+(:[^}]*)?\}")
    for name, spec in _registry.REGISTRY.items():
        assert spec.name == name and spec.reader in READERS, name
        assert spec.task in ("regression", "classification") and spec.n > 0 and spec.d > 0, name
        assert spec.feature_names is None or len(spec.feature_names) == spec.d or spec.reader == "adult", name
        assert isinstance(spec.files, tuple) and all(isinstance(f, str) for f in spec.files), name
        for text in (spec.source, spec.licence, spec.description, spec.origin, *spec.files):
            assert not placeholder.search(text), (name, text)
    assert all(target in _registry.REGISTRY for target in _registry.ALIASES.values())


def test_wilson_members_have_plain_names_unless_taken():
    for folder, (n, d) in _registry._WILSON_SETS.items():
        spec = _registry.REGISTRY[f"wilson/{folder}"]
        assert (spec.n, spec.d) == (n, d)
        plain = _registry.REGISTRY[folder]
        assert plain.reader != "uci_wilson" or plain == dataclasses.replace(spec, name=folder)
    assert _registry.REGISTRY["yacht"].reader == "uci_gal"  # taken by the fixed PBP splits
    assert _registry.REGISTRY["elevators"].reader == "uci_wilson"
