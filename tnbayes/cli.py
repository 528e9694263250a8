"""Command-line entry points: ``tnbayes compare``, ``tnbayes datasets``, ``tnbayes models``."""

from __future__ import annotations

import argparse
import ast
import sys
from typing import Any, Sequence

__all__ = ["main", "build_parser"]


def _parse_model_kwargs(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Parse ``MODEL:KEY=VALUE`` items (values as Python literals, else strings)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        try:
            model, assignment = item.split(":", 1)
            key, raw = assignment.split("=", 1)
        except ValueError:
            raise SystemExit(f"--set expects MODEL:KEY=VALUE (e.g. exact_gp:num_restarts=1); got {item!r}.")
        try:
            value: Any = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        out.setdefault(model, {})[key] = value
    return out


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tnbayes`` command."""
    parser = argparse.ArgumentParser(prog="tnbayes", description="Tensor-network Bayesian regression tools.")
    sub = parser.add_subparsers(dest="command", required=True)

    cmp = sub.add_parser("compare", help="models × datasets × splits → RMSE, NLPD, coverage, CRPS, time")
    cmp.add_argument("--models", nargs="+", required=True, help="registered model names (see `tnbayes models`)")
    cmp.add_argument("--datasets", nargs="+", required=True, help="dataset names (see `tnbayes datasets`)")
    cmp.add_argument("--splits", default="all", help="'all' (default), a range '0:5' or a list '0,3,7'")
    cmp.add_argument("--set", dest="model_kwargs", action="append", default=[], metavar="MODEL:KEY=VALUE",
                     help="constructor argument for one model, repeatable (e.g. exact_gp:num_restarts=1)")
    cmp.add_argument("--out", default=None, help="directory for CSV/JSON/Markdown tables and figures")
    cmp.add_argument("--no-figures", action="store_true", help="do not write figures")
    cmp.add_argument("--no-progress", action="store_true", help="hide the progress bar")

    sub.add_parser("datasets", help="list the dataset names")
    sub.add_parser("models", help="list the registered model names")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tnbayes`` command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "datasets":
        from tnbayes.datasets import list_datasets

        print("\n".join(list_datasets()))
        return 0
    if args.command == "models":
        from tnbayes.models.registry import list_models

        print("\n".join(list_models()))
        return 0
    from tnbayes.compare import compare

    try:
        result = compare(args.models, args.datasets, args.splits,
                         model_kwargs=_parse_model_kwargs(args.model_kwargs), out_dir=args.out,
                         figures=not args.no_figures, progress=not args.no_progress)
    except (ValueError, TypeError, FileNotFoundError, MemoryError) as err:
        print(f"tnbayes compare: error: {err}", file=sys.stderr)
        return 2
    print(result.to_markdown())
    if args.out:
        print(f"\nTables and figures written to {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
