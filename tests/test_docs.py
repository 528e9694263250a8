"""The documentation builds with ``mkdocs build --strict`` after every tutorial ran at reduced size, and every
tutorial's figures are in the built site; every public name has a docstring."""

from __future__ import annotations

import inspect
import os
import runpy
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import tnbayes
import tnbayes.compare
import tnbayes.plotting
import tnbayes.posterior
import tnbayes.preprocessing

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory):
    """A copy of docs/, mkdocs.yml and tutorials/ in which every tutorial ran (TNBAYES_TUTORIAL_SMALL=1) into
    docs/tutorials/figures, the tutorial pages were generated and the site was built strictly."""
    root = tmp_path_factory.mktemp("docs_build")
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copytree(ROOT / "tutorials", root / "tutorials")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    figures = root / "docs" / "tutorials" / "figures"
    shutil.rmtree(figures, ignore_errors=True)  # only what the tutorials write in this run counts
    figures.mkdir(parents=True)
    failures: dict[str, str] = {}
    saved = dict(os.environ)
    os.environ.update(TNBAYES_TUTORIAL_OUT=str(figures), TNBAYES_TUTORIAL_SMALL="1")
    try:
        for script in TUTORIALS:
            try:
                runpy.run_path(str(script), run_name="__main__")
            except Exception:  # reported by the per-tutorial test
                failures[script.stem] = traceback.format_exc()[-3000:]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    subprocess.run([sys.executable, str(ROOT / "docs" / "gen_tutorial_pages.py"), "--root", str(root)], check=True)
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=root, capture_output=True,
                           text=True, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    return root, failures, build


def test_there_are_tutorials():
    assert len(TUTORIALS) >= 9


@pytest.mark.slow
@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_and_its_figures_are_in_the_site(built_docs, script):
    root, failures, build = built_docs
    assert script.stem not in failures, failures.get(script.stem)
    written = sorted((root / "docs" / "tutorials" / "figures").glob(f"{script.stem}_*.png"))
    assert written, f"{script.name} wrote no figure named {script.stem}_*.png"
    for figure in written:
        assert (root / "site" / "tutorials" / "figures" / figure.name).exists(), figure.name
    page = (root / "site" / "tutorials" / script.stem / "index.html").read_text()
    assert all(figure.name in page for figure in written)


@pytest.mark.slow
def test_mkdocs_build_strict(built_docs):
    _, _, build = built_docs
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]


def _public_objects():
    modules = [tnbayes, tnbayes.basis, tnbayes.kernels, tnbayes.inference, tnbayes.tensors, tnbayes.metrics,
               tnbayes.datasets, tnbayes.data, tnbayes.distributed, tnbayes.plotting, tnbayes.posterior,
               sys.modules["tnbayes.compare"], tnbayes.preprocessing]
    seen = set()
    for module in modules:
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.ismodule(obj) or not (inspect.isclass(obj) or inspect.isfunction(obj)) or id(obj) in seen:
                continue
            seen.add(id(obj))
            yield f"{module.__name__}.{name}", obj
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                        continue
                    yield f"{module.__name__}.{name}.{attr}", member


def test_every_public_name_has_a_docstring():
    missing = [name for name, obj in _public_objects() if not (inspect.getdoc(obj) or "").strip()]
    assert not missing, f"public names without a docstring: {missing}"
