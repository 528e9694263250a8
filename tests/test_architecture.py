"""The three axes stay separated in the code (docs/architecture.md): the import layering, file sizes, where the
engines live. These tests read the source with :mod:`ast`; they fail when a change puts an axis back into another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tnbayes"
MAX_MODULE_LINES = 600

#: the sub-packages below a given layer may import; runtime imports only (``if TYPE_CHECKING:`` blocks are skipped)
ALLOWED_IMPORTS = {
    # the format axis: tensor algebra, no knowledge of bases, engines or estimators
    "tensors": {"tensors", "_deprecation"},
    # the basis axis: 1-D feature maps; tensors only for index shapes
    "basis": {"basis", "tensors", "_validation", "_deprecation", "_warnings"},
    # inference engines: bases and formats in, weights out; never a model or a selection rule
    "inference": {"inference", "basis", "tensors", "data", "distributed", "_validation", "_memory", "_deprecation",
                  "_warnings"},
    # selection rules: bases and exact-GP ML-II; never a model
    "selection": {"selection", "basis", "tensors", "inference", "preprocessing", "_validation", "_deprecation",
                  "_warnings"},
    "kernels": {"kernels", "basis", "_registry", "_validation"},
    "data": {"data", "_validation", "distributed"},
    "posterior": {"posterior", "_validation"},
    "metrics": {"metrics", "_validation"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> set[str]:
    """The tnbayes modules ``path`` imports when it runs (not under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("tnbayes.")}


def _layer(path: Path) -> str:
    """The sub-package (or top-level module) a file belongs to: ``basis``, ``inference``, ``metrics`` …"""
    return path.stem if path.parent == PACKAGE else path.relative_to(PACKAGE).parts[0]


def _top(name: str) -> str:
    return name.split(".")[1]


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(ALLOWED_IMPORTS))
def test_layers_import_only_what_is_below_them(layer):
    offending = []
    for path in _modules():
        if _layer(path) != layer:
            continue
        for name in sorted(_runtime_imports(path)):
            if _top(name) not in ALLOWED_IMPORTS[layer]:
                offending.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offending, "\n".join(offending)


def test_no_module_over_the_size_limit():
    too_long = {str(p.relative_to(PACKAGE)): n for p in _modules()
                if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines: {too_long}"


def test_engines_live_in_inference_not_in_models():
    """Kalman updates and ALS sweeps are defined in tnbayes.inference; models only call them."""
    engine_words = ("kalman_update", "kalman_batch_update", "als_sweep", "normal_equations")
    defined = []
    for path in (PACKAGE / "models").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and any(w in node.name.lower() for w in engine_words):
                defined.append(f"models/{path.name}: {node.name}")
    assert not defined, defined
    assert not (PACKAGE / "inference" / "features.py").exists()


def test_cpd_contractions_live_in_tensors():
    """The CPD algebra (projections, design rows, predictions) is defined once, in tnbayes.tensors."""
    names = {"mode_projections", "product_except", "design_matrix", "cpd_predict"}
    homes = {}
    for path in _modules():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                homes.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    assert homes == {name: ["tensors/cpd_contractions.py"] for name in names}


def test_the_add_a_basis_example_runs():
    """docs/architecture.md's "Adding a basis" example works as written: the new basis goes through the ALS engine
    and the TT Kalman filter, and both fit the data (a cosine product the basis can represent)."""
    import re

    import numpy as np

    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    (code,) = re.findall(r"## Adding a basis.*?```python\n(.*?)```", text, flags=re.S)
    namespace: dict = {}
    exec(compile(code, "docs/architecture.md", "exec"), namespace)
    X, y, engine, model = (namespace[k] for k in ("X", "y", "engine", "model"))
    torch_X = namespace["torch"].as_tensor(X)
    cpd_rmse = float((engine.predict(torch_X).numpy() - y).std())
    tt_rmse = float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))
    assert cpd_rmse < 0.2 * y.std() and tt_rmse < 0.5 * y.std(), (cpd_rmse, tt_rmse, y.std())
