"""Command-line entry points: ``tnbayes compare``, ``tnbayes datasets``, ``tnbayes fetch``, ``tnbayes models``.

The command-line front end; outside the three axes (basis, format, inference).
"""

from __future__ import annotations

import argparse
import ast
import os
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

    ds = sub.add_parser("datasets", help="list the dataset names and whether each works offline")
    ds.add_argument("--offline", action="store_true",
                    help="list only what loads with no download (bundled, cached, synthetic)")

    fe = sub.add_parser("fetch", help="download datasets from their public sources into the data directory",
                        description="Download datasets from their original public sources, check each file "
                                    "against its pinned SHA-256 and store them in the data directory "
                                    "($TNBAYES_DATA_DIR, default ~/.cache/tnbayes).")
    fe.add_argument("names", nargs="*", metavar="NAME", help="dataset names (see `tnbayes datasets`)")
    fe.add_argument("--all", action="store_true", help="every dataset that is not bundled and can be fetched")
    fe.add_argument("--data-dir", default=None, help="where to store the files (default: the data directory)")
    fe.add_argument("--mirror", default=None,
                    help="base URL replacing https:// in the source URLs (file:// allowed; "
                         "default $TNBAYES_DATA_MIRROR)")
    fe.add_argument("--force", action="store_true", help="download again even if the files are there")
    sub.add_parser("models", help="list the registered model names")
    sub.add_parser("demo", help="ExactGP vs CPDKernelMachine vs HilbertGP on bundled data (as `make demo`)",
                   add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tnbayes`` command line; returns the exit status.

    A reader that closes the pipe early (``tnbayes datasets | head``) ends the command quietly, as Unix tools do.
    """
    try:
        return _run(argv)
    except BrokenPipeError:
        # Python's recipe: point stdout at devnull so the interpreter's final flush does not raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _run(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        from tnbayes.demo import main as demo_main

        return demo_main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "datasets":
        return _datasets(offline_only=args.offline)
    if args.command == "fetch":
        return _fetch(args)
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


_LEGEND = {
    "bundled": "ships with tnbayes: works offline",
    "synthetic": "generated: works offline",
    "cached": "already downloaded into the data directory: works offline",
    "fetchable": "`tnbayes fetch NAME` downloads it once (size given)",
    "manual": "no single public file: build it by hand, see tnbayes.datasets.info(NAME)['origin']",
}


def _datasets(offline_only: bool) -> int:
    from tnbayes.datasets import DATA_DIR_ENV, availability, data_dir, info, list_datasets
    from tnbayes.datasets._fetch import download_size

    root = data_dir()
    how = f"{DATA_DIR_ENV}" if os.environ.get(DATA_DIR_ENV) else f"default; set {DATA_DIR_ENV} to change"
    print(f"Data directory: {root} ({how})")
    for status, meaning in _LEGEND.items():
        print(f"  {status:10s} {meaning}")
    print()
    print(f"{'name':22s} {'status':10s} {'rows':>9s} {'inputs':>6s}  {'splits':8s} note")
    print("-" * 78)
    for name in list_datasets():
        status = availability(name)
        if offline_only and status not in ("bundled", "synthetic", "cached"):
            continue
        meta = info(name)
        if status == "synthetic":
            print(f"{name:22s} {status:10s} {'':>9s} {'1':>6s}  {'seeded':8s} {meta['description']}")
            continue
        splits = "random" if meta["n_splits"] is None else f"{meta['n_splits']} fixed"
        note = f"download {max(1, download_size(name) // 1000):,} kB" if status == "fetchable" else ""
        print(f"{name:22s} {status:10s} {meta['N']:>9,d} {meta['D']:>6d}  {splits:8s} {note}")
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from tnbayes.datasets import FetchError, availability, fetch, list_datasets

    if args.all:
        names = [n for n in list_datasets() if availability(n) in ("fetchable", "cached")]
    else:
        names = list(args.names)
    if not names:
        print("tnbayes fetch: error: give one or more dataset NAMEs (see `tnbayes datasets`) or --all.",
              file=sys.stderr)
        return 2
    try:
        written = fetch(names, data_dir=args.data_dir, mirror=args.mirror, force=args.force,
                        progress=sys.stderr.isatty())
    except (ValueError, FetchError) as err:
        print(f"tnbayes fetch: error: {err}", file=sys.stderr)
        return 2
    from tnbayes.datasets import data_dir

    root = args.data_dir or data_dir()
    if written:
        print(f"Wrote {len(written)} file(s) into {root}:")
        for path in written:
            print(f"  {path}")
    else:
        print(f"Nothing to do: {', '.join(names)} already in {root}.")
    print(f"Ready to use offline: {', '.join(names)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
