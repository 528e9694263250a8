"""Write the tutorial pages of the docs from the Jupytext percent-format scripts in ``tutorials/``.

Markdown cells become text, code cells fenced Python, and every figure a cell saves (``OUT / "name.png"``) is
embedded after that cell from ``docs/tutorials/figures/`` (produced by running the tutorials; the tests run
them at reduced size before ``mkdocs build --strict``). Figures of a tutorial that no cell names literally are
appended at the end. Also writes ``docs/tutorials/index.md``.

    python docs/gen_tutorial_pages.py [--root REPO]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

FIGURE = re.compile(r"""["']([\w\-.]+\.png)["']""")


def cells(source: str) -> list[tuple[str, str]]:
    """``(kind, text)`` for every ``# %%`` cell of a percent-format script (kind "markdown" or "code")."""
    out: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("# %%"):
            out.append(("markdown" if "[markdown]" in line else "code", []))
        elif out:
            out[-1][1].append(line)
        elif line.strip():  # text before the first cell marker: treat as code
            out.append(("code", [line]))
    result = []
    for kind, lines in out:
        if kind == "markdown":
            text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines)
        else:
            text = "\n".join(lines)
        if text.strip():
            result.append((kind, text.strip("\n")))
    return result


def page(script: Path, figures: Path) -> tuple[str, str]:
    """Markdown of one tutorial page and its title."""
    parts, shown = [], set()
    title = script.stem
    for kind, text in cells(script.read_text()):
        if kind == "markdown":
            if title == script.stem and text.lstrip().startswith("# "):
                title = text.lstrip().splitlines()[0][2:].strip()
            parts.append(text)
            continue
        parts.append(f"```python\n{text}\n```")
        for name in FIGURE.findall(text):
            if (figures / name).exists() and name not in shown:
                parts.append(f"![{name}](figures/{name})")
                shown.add(name)
    rest = sorted(p.name for p in figures.glob(f"{script.stem}_*.png") if p.name not in shown)
    if rest:
        parts.append("## Figures\n\n" + "\n\n".join(f"![{name}](figures/{name})" for name in rest))
    source = f"*Source: `tutorials/{script.name}` — run it with `python tutorials/{script.name}` " \
             f"(`TNBAYES_TUTORIAL_SMALL=1` for the reduced size the tests use).*"
    body = "\n\n".join(parts)
    if not body.lstrip().startswith("# "):
        body = f"# {title}\n\n{body}"
    first_break = body.find("\n")
    return body[:first_break] + "\n\n" + source + "\n" + body[first_break:] + "\n", title


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args()
    root = Path(args.root)
    scripts = sorted((root / "tutorials").glob("[0-9][0-9]_*.py"))
    target = root / "docs" / "tutorials"
    figures = target / "figures"
    target.mkdir(parents=True, exist_ok=True)
    rows = []
    for script in scripts:
        text, title = page(script, figures)
        (target / f"{script.stem}.md").write_text(text)
        rows.append(f"| [{title}]({script.stem}.md) | `tutorials/{script.name}` |")
    (target / "index.md").write_text(
        "# Tutorials\n\nRunnable scripts (Jupytext percent format: open them as notebooks with `jupytext`, or run "
        "them with `python`). Each writes its figures to `docs/tutorials/figures/` (or `$TNBAYES_TUTORIAL_OUT`); "
        "`TNBAYES_TUTORIAL_SMALL=1` runs them at the reduced size the test suite uses.\n\n"
        "| tutorial | script |\n|---|---|\n" + "\n".join(rows) + "\n")
    print(f"wrote {len(scripts)} tutorial pages to {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
