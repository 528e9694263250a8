"""Calibration of a posterior model on the fixed 20 UCI splits, next to ExactGP (default: CPDKernelMachine).

``--model rffnet`` runs RFFNet with its defaults (Bayesian last layer) instead, into ``cpd_uci_calibration_rffnet``.

Protocol: the same fixed ``uci_gal`` splits as ``exact_gp_uci``; ``CPDKernelMachine()`` with its defaults
(automatic rank 10/20/40, ℓ/σ_f²/σ² from an exact-GP marginal-likelihood fit on ≤ 1000 training points,
λ = σ²/σ_f², automatic M ≤ 40, full ‖W‖² penalty, ≤ 10 ALS sweeps, block-diagonal Laplace variance
"all_cores"), except ``out_of_box="clip"``: a few wine-red test rows lie far outside the training range
(up to 2.6 half-ranges from the centre), where the default raises;
metrics in original units. The ExactGP numbers are read from ``results/exact_gp_uci/exact_gp_uci_runs.csv`` (same splits),
and the NLPD difference is taken split by split.

    python -m benchmarks cpd_uci_calibration                       # 5 sets × 20 splits
    python -m benchmarks cpd_uci_calibration --splits 0:3 --datasets yacht --uncertainty last_core
    python -m benchmarks cpd_uci_calibration --model rffnet       # → results/cpd_uci_calibration/cpd_uci_calibration_rffnet.md
"""

from __future__ import annotations

import argparse
import csv
import math

import numpy as np

from benchmarks._common import header, output_path, write_comparison
from tnbayes import CPDKernelMachine, RFFNet
from tnbayes.compare import compare

DATASETS = ["yacht", "boston", "concrete", "energy", "wine-red"]


def _exact_gp_runs() -> dict[tuple[str, int], dict[str, float]]:
    path = output_path("exact_gp_uci", "_runs.csv", committed=True)
    with open(path) as fh:
        return {(row["dataset"], int(row["split"])): {k: float(row[k]) for k in ("rmse", "nlpd", "coverage_95")}
                for row in csv.DictReader(fh)}


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks cpd_uci_calibration")
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--splits", default="all")
    parser.add_argument("--uncertainty", default="all_cores")
    parser.add_argument("--model", default="cpd", choices=["cpd", "rffnet"])
    parser.add_argument("--variant", default=None, help="names the result (default: none for cpd, the model otherwise)")
    args = parser.parse_args(argv)
    args.variant = ("" if args.model == "cpd" else args.model) if args.variant is None else args.variant
    exact = _exact_gp_runs()
    result = None
    for dataset in args.datasets:
        if args.model == "cpd":
            model = CPDKernelMachine(uncertainty=args.uncertainty, out_of_box="clip")
        else:
            model = RFFNet()
        part = compare({args.model: model}, [dataset], args.splits, figures=False, progress=True)
        if result is None:
            result = part
        else:
            result.rows.extend(part.rows)
            result.calibration.update(part.calibration)
        _write(result, exact, args)
    return 0


def _write(result, exact, args) -> None:
    label = {"cpd": "CPD", "rffnet": "RFFNet"}[args.model]
    lines = [f"| dataset | splits | RMSE {label} | RMSE ExactGP | NLPD {label} | NLPD ExactGP | ΔNLPD ({label} − GP) | "
             f"95% cov. {label} | 95% cov. GP | CRPS {label} | fit s {label} |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    deltas, covs = [], []
    for entry in result.summary():
        rows = [r for r in result.rows if r["dataset"] == entry["dataset"]]
        paired = [(r["nlpd"], exact[(r["dataset"], int(r["split"]))]) for r in rows
                  if (r["dataset"], int(r["split"])) in exact]
        delta = np.array([a - b["nlpd"] for a, b in paired])
        gp_rmse = np.mean([b["rmse"] for _, b in paired]) if paired else math.nan
        gp_nlpd = np.mean([b["nlpd"] for _, b in paired]) if paired else math.nan
        gp_cov = np.mean([b["coverage_95"] for _, b in paired]) if paired else math.nan
        d_mean = delta.mean() if delta.size else math.nan
        d_se = delta.std(ddof=1) / math.sqrt(delta.size) if delta.size > 1 else math.nan
        deltas.append(d_mean)
        covs.append(entry["coverage_95_mean"])
        lines.append(
            f"| {entry['dataset']} | {entry['n_splits']} | {entry['rmse_mean']:.3f} ± {entry['rmse_se']:.3f} | "
            f"{gp_rmse:.3f} | {entry['nlpd_mean']:.3f} ± {entry['nlpd_se']:.3f} | {gp_nlpd:.3f} | "
            f"{d_mean:+.3f} ± {d_se:.3f} | {entry['coverage_95_mean']:.3f} ± {entry['coverage_95_se']:.3f} | "
            f"{gp_cov:.3f} | {entry['crps_mean']:.3f} | {entry['fit_seconds_mean']:.1f} |")
    summary = (f"\nAverage over datasets: ΔNLPD = {np.mean(deltas):+.3f} nats (target: within ±0.1), "
               f"95% coverage = {np.mean(covs):.3f} (target: each in [0.90, 0.98]; "
               f"{sum(0.90 <= c <= 0.98 for c in covs)}/{len(covs)} sets inside).\n")
    if args.model == "cpd":
        what = (f"CPDKernelMachine(uncertainty={args.uncertainty!r}, out_of_box='clip'), otherwise defaults (automatic "
                "rank, GP-fitted ℓ and λ = σ²/σ_f² on ≤ 1000 points, auto M ≤ 40, full ‖W‖² penalty, ≤ 10 sweeps)")
    else:
        what = ("RFFNet() defaults (s = ⌊√n ln n⌋ ARD random features, block proximal Adam lr 1e-2, μ = 1e-4, early "
                "stopping on 10% of the training rows; Bayesian last layer with prior and noise by marginal likelihood)")
    protocol = (f"fixed uci_gal splits; {what}; ExactGP from results/exact_gp_uci/exact_gp_uci_runs.csv on the same splits; "
                "mean ± standard error over splits; original units")
    title = {"cpd": "CPDKernelMachine", "rffnet": "RFFNet (Bayesian last layer)"}[args.model]
    text = header(f"{title} calibration on the UCI benchmark", protocol) + "\n".join(lines) + "\n" + summary
    output_path("cpd_uci_calibration", ".md", args.variant).write_text(text)
    write_comparison(result, "cpd_uci_calibration", args.variant)
    print(text, flush=True)
