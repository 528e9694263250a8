"""The primal TT Kalman filter (``TTKalmanGP``) on D = 8 UCI sets next to ExactGP, HilbertGP and the CPD model.

Protocol: the fixed ``uci_gal`` splits of concrete and energy (D = 8; 20 splits each); ``TTKalmanGP()`` with
its defaults (SE kernel, hyper-parameters by exact-GP marginal likelihood on ≤ 1000 training points, M from
the lengthscales capped at 8, batches of 8 rows, correction rank ≤ 10 with randomized rounding, relative
tolerance 1e-8) and ``HilbertGP(structure="additive")`` fitted here, split by split; the ExactGP and
CPDKernelMachine rows are read from ``results/exact_gp_uci/exact_gp_uci_runs.csv`` and
``results/cpd_uci_calibration/cpd_uci_calibration_runs.csv``
(the same splits, defaults, measured in earlier runs — their fit times are from those runs). Metrics in
original units; mean ± standard error over splits.

    python -m benchmarks tt_kalman_uci                          # concrete and energy, 20 splits
    python -m benchmarks tt_kalman_uci --datasets energy --splits 0:2
    python -m benchmarks tt_kalman_uci --resume                 # keep the stored splits, fit the missing ones
    python -m benchmarks tt_kalman_uci --datasets concrete --splits 0:2 --tt-settings 10,8 20,8 10,12 \
        --variant rank_vs_basis_concrete                        # the rank cap against the basis size
    python -m benchmarks tt_kalman_uci --models tt --variant smoothing   # TTKalmanGP() only (ALS smoothing)
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from benchmarks._common import header, output_path, read_rows, write_rows
from tnbayes import HilbertGP, TTKalmanGP, datasets
from tnbayes.compare import compare, parse_splits

DATASETS = ["concrete", "energy"]
#: table label -> (entry whose committed runs hold it, its model label there)
STORED = {"ExactGP": ("exact_gp_uci", "exact_gp"), "CPD (Laplace)": ("cpd_uci_calibration", "cpd")}


def _stored_rows() -> list[dict]:
    """The ExactGP and CPD rows of earlier runs, labelled as in the table."""
    return [dict(row, model=label) for label, (entry, model) in STORED.items()
            for row in read_rows(output_path(entry, "_runs.csv", committed=True)) if row["model"] == model]


def _cell(values: list[float], digits: int = 3) -> str:
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return "—"
    se = values.std(ddof=1) / math.sqrt(values.size) if values.size > 1 else 0.0
    return f"{values.mean():.{digits}f} ± {se:.{digits}f}"


def _write(rows: list[dict], stored: list[dict], args: argparse.Namespace) -> None:
    """Markdown table (with the stored ExactGP / CPD rows of the same splits) and runs.csv of ``rows``."""
    splits = {(r["dataset"], int(r["split"])) for r in rows}
    stored = [r for r in stored if (r["dataset"], int(r["split"])) in splits]
    lines = ["| dataset | model | splits | RMSE | NLPD | 95% coverage | 95% width | fit s |",
             "|---|---|---|---|---|---|---|---|"]
    for name in args.datasets:
        fitted = list(dict.fromkeys(r["model"] for r in rows))  # TTKalmanGP (or its settings), HilbertGP
        for label in ["ExactGP", *fitted, "CPD (Laplace)"]:
            sel = [r for r in rows + stored if r["dataset"] == name and r["model"] == label]
            if not sel:
                continue
            col = lambda key: [float(r[key]) for r in sel]  # noqa: E731
            lines.append(f"| {name} | {label} | {len(sel)} | {_cell(col('rmse'))} | {_cell(col('nlpd'))} | "
                         f"{_cell(col('coverage_95'))} | {_cell(col('interval_width_95'))} | "
                         f"{np.mean(col('fit_seconds')):.1f} |")
    protocol = ("see the module docstring of benchmarks/calibration/tt_kalman_uci.py (TTKalmanGP and additive HilbertGP "
                "fitted in this run; ExactGP and CPD rows from earlier runs on the same splits)")
    text = header("Primal TT Kalman filter on D = 8 UCI sets", protocol) + "\n".join(lines) + "\n"
    output_path("tt_kalman_uci", ".md", args.variant).write_text(text)
    write_rows(rows, output_path("tt_kalman_uci", "_runs.csv", args.variant))


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks tt_kalman_uci")
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--splits", default="all")
    parser.add_argument("--variant", default="", help="names the result: tt_kalman_uci_<variant>.md")
    parser.add_argument("--resume", action="store_true",
                        help="keep the splits already in results/tt_kalman_uci/tt_kalman_uci[_<variant>]_runs.csv and "
                             "fit only the missing ones")
    parser.add_argument("--models", nargs="+", choices=["tt", "hilbert"], default=["tt", "hilbert"],
                        help="fit TTKalmanGP() ('tt') and/or additive HilbertGP ('hilbert'); default both")
    parser.add_argument("--tt-settings", nargs="+", default=None, metavar="RANK,M",
                        help="instead of TTKalmanGP() and HilbertGP: one TTKalmanGP(max_rank=RANK, max_num_basis=M, "
                             "time_budget=None) per pair (how much of the gap is the rank cap, how much M)")
    args = parser.parse_args(argv)
    models = {}
    if "tt" in args.models:
        models["TTKalmanGP"] = TTKalmanGP()
    if "hilbert" in args.models:
        models["HilbertGP (additive)"] = HilbertGP(structure="additive")
    if args.tt_settings:
        pairs = [tuple(int(v) for v in pair.split(",")) for pair in args.tt_settings]
        models = {f"TTKalmanGP (rank ≤ {rank}, M ≤ {M})": TTKalmanGP(max_rank=rank, max_num_basis=M, time_budget=None)
                  for rank, M in pairs}
    runs = output_path("tt_kalman_uci", "_runs.csv", args.variant)
    rows: list[dict] = read_rows(runs) if args.resume and runs.exists() else []
    done = {(r["dataset"], int(r["split"])) for r in rows}
    stored = _stored_rows()
    for dataset in args.datasets:
        for k in parse_splits(args.splits, datasets.load(dataset, split=0).n_splits):
            if (dataset, k) in done:
                continue
            part = compare(models, [dataset], [k], figures=False, progress=False)
            rows.extend(part.rows)
            _write(rows, stored, args)
            print(f"{dataset} split {k} done", flush=True)
    return 0
