"""Every tutorial runs end to end and writes its figures."""

import runpy
from pathlib import Path

import pytest

TUTORIALS = sorted((Path(__file__).resolve().parents[1] / "tutorials").glob("*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("TNBAYES_TUTORIAL_OUT", str(tmp_path))
    monkeypatch.setenv("TNBAYES_TUTORIAL_SMALL", "1")
    runpy.run_path(str(path), run_name="__main__")
    assert list(tmp_path.glob("*.png")), f"{path.name} wrote no figure"
