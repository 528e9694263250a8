"""Calibration study: every model with a posterior, with its defaults, on the fixed splits of six UCI sets and
four of Wilson's large sets — RMSE, NLPD, 95% coverage, 95% interval width, CRPS, fit time — and a reliability
diagram (observed against nominal coverage of central intervals, pooled over splits) per model.

Protocol: ``datasets.load(name, split=k)`` (uci_gal: yacht, boston, concrete, energy, wine-red 20 splits,
protein 5; Wilson: elevators, bike, kin40k, keggdirected 10 splits); every model built by
``tnbayes.make_model(name)`` with its defaults (hyper-parameters from the data as each model documents),
except ``out_of_box="clip"`` where a model has it (HilbertGP, CPD, FL: test inputs outside the training box
are clipped to the training range instead of raising);
metrics in the original units on the split's test rows. ``--max-train n`` fits on a uniform random subset of n
training rows (``numpy.random.default_rng(k)``) and ``--max-test`` scores on a subset of the test rows — the
small configuration of the benchmark suite; the full configuration (the default) uses every row. ExactGP is
fitted only where the training set has at most ``--exact-max`` rows ("where it fits"). A model that fails is
recorded with its error and left out of the means.

    python -m benchmarks calibration_study                                   # full: all rows, all splits (days)
    python -m benchmarks calibration_study --splits 0:1 --max-train 300 --max-test 1000   # the suite's small run
    python -m benchmarks calibration_study --datasets yacht --models exact_gp cpd --splits 0:3
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import numpy as np

from benchmarks._common import header, output_path, read_rows, subset_indices, write_rows
from tnbayes import datasets, make_model, metrics
from tnbayes.compare import parse_splits

DATASETS = ["yacht", "boston", "concrete", "energy", "wine-red", "protein",
            "wilson/elevators", "wilson/bike", "wilson/kin40k", "wilson/keggdirected"]
MODELS = {"exact_gp": "ExactGP", "hilbert_gp": "HilbertGP", "cpd": "CPD (Laplace)", "qtkm": "QTKM",
          "fl": "FL", "tt_kalman_gp": "TTKalmanGP", "rffnet": "RFFNet (Bayesian last layer)"}
LEVELS = np.round(np.linspace(0.05, 0.95, 19), 2)
METRICS = ("rmse", "nlpd", "coverage_95", "interval_width_95", "crps")


def run_one(dataset: str, split: int, model_name: str, max_train: int | None, max_test: int | None) -> dict:
    """Fit one model on one split; returns a row with the metrics and the calibration curve (JSON)."""
    data = datasets.load(dataset, split=split)
    train = subset_indices(data.X_train.shape[0], max_train, split)
    test = subset_indices(data.X_test.shape[0], max_test, 10_000 + split)
    Xtr, ytr, Xte, yte = data.X_train[train], data.y_train[train], data.X_test[test], data.y_test[test]
    row = {"dataset": dataset, "split": split, "model": MODELS[model_name], "n_train": len(train),
           "n_test": len(test), "error": ""}
    try:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make_model(model_name)
            if "out_of_box" in model.get_params():  # test inputs beyond the training box: constant extrapolation
                model.set_params(out_of_box="clip")
            model.fit(Xtr, ytr)
            row["fit_seconds"] = time.perf_counter() - start
            post = model.posterior(Xte)
        scores = metrics.evaluate(post, yte)
        row.update({key: float(scores[key]) for key in METRICS})
        _, observed = metrics.calibration_curve(yte, post, levels=LEVELS)
        row["calibration"] = json.dumps([round(float(v), 4) for v in observed])
    except Exception as err:  # recorded, not fatal: one failing model must not stop the study
        row.update({key: math.nan for key in (*METRICS, "fit_seconds")}, calibration="[]",
                   error=f"{type(err).__name__}: {str(err)[:200]}")
    return row


def _cell(values: list[float], digits: int = 3) -> str:
    values = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if values.size == 0:
        return "—"
    se = values.std(ddof=1) / math.sqrt(values.size) if values.size > 1 else 0.0
    return f"{values.mean():.{digits}g} ± {se:.2g}"


def _table(rows: list[dict], dataset_names: list[str], model_names: list[str]) -> list[str]:
    lines = ["| dataset | model | splits | n train | RMSE | NLPD | 95% coverage | 95% width | CRPS | fit s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for dataset in dataset_names:
        for name in model_names:
            sel = [r for r in rows if r["dataset"] == dataset and r["model"] == MODELS[name]]
            ok = [r for r in sel if not r["error"]]
            if not sel:
                continue
            if not ok:
                lines.append(f"| {dataset} | {MODELS[name]} | 0 of {len(sel)} | {sel[0]['n_train']} | failed: "
                             f"{sel[0]['error'][:80]} | | | | | |")
                continue
            col = lambda key: [float(r[key]) for r in ok]  # noqa: E731
            lines.append(f"| {dataset} | {MODELS[name]} | {len(ok)} | {ok[0]['n_train']} | {_cell(col('rmse'))} | "
                         f"{_cell(col('nlpd'))} | {_cell(col('coverage_95'))} | {_cell(col('interval_width_95'))} | "
                         f"{_cell(col('crps'))} | {np.mean(col('fit_seconds')):.1f} |")
    return lines


def _figures(rows: list[dict], dataset_names: list[str], model_names: list[str], variant: str) -> list[str]:
    """One reliability diagram per model: a curve per dataset (mean over its splits)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tnbayes.plotting import plot_calibration

    written = []
    for name in model_names:
        curves = {}
        for dataset in dataset_names:
            observed = [json.loads(r["calibration"]) for r in rows
                        if r["dataset"] == dataset and r["model"] == MODELS[name] and not r["error"]]
            if observed:
                curves[dataset] = (LEVELS, np.mean(observed, axis=0))
        if not curves:
            continue
        fig, ax = plt.subplots(figsize=(4.8, 4.8))
        plot_calibration(curves, title=MODELS[name], ax=ax)
        fig.tight_layout()
        path = output_path("calibration_study", f"_reliability_{name}.png", variant)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path.name)
    return written


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks calibration_study")
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--splits", default="all")
    parser.add_argument("--max-train", type=int, default=None)
    parser.add_argument("--max-test", type=int, default=None)
    parser.add_argument("--exact-max", type=int, default=5000, help="largest training set ExactGP is fitted on")
    parser.add_argument("--resume", action="store_true", help="keep the runs already in results/calibration_study/calibration_study[_<variant>]_runs.csv")
    parser.add_argument("--variant", default="", help="names the result: calibration_study_<variant>.md")
    args = parser.parse_args(argv)
    runs = output_path("calibration_study", "_runs.csv", args.variant)
    rows: list[dict] = read_rows(runs) if args.resume and runs.exists() else []
    done = {(r["dataset"], int(r["split"]), r["model"]) for r in rows}
    for dataset in args.datasets:
        n_splits = datasets.load(dataset, split=0).n_splits
        for k in parse_splits(args.splits, n_splits):
            for name in args.models:
                if (dataset, k, MODELS[name]) in done:
                    continue
                n_train = min(datasets.load(dataset, split=k).X_train.shape[0], args.max_train or math.inf)
                if name == "exact_gp" and n_train > args.exact_max:
                    continue
                rows.append(run_one(dataset, k, name, args.max_train, args.max_test))
                for row in rows:
                    row["error"] = row["error"] or ""
                write_rows(rows, runs)
                print(f"{dataset} split {k} {name}: {rows[-1].get('rmse')} {rows[-1]['error']}", flush=True)
    figures = _figures(rows, args.datasets, args.models, args.variant)
    protocol = ("see the module docstring of benchmarks/calibration/calibration_study.py; "
                + (f"training rows capped at {args.max_train}, " if args.max_train else "all training rows, ")
                + (f"test rows capped at {args.max_test}; " if args.max_test else "all test rows; ")
                + f"ExactGP only where n_train ≤ {args.exact_max}; mean ± standard error over splits")
    figure_lines = ["", "Reliability diagrams (observed against nominal coverage of central intervals, mean over "
                    "splits, one curve per dataset): " + ", ".join(f"[{f}]({f})" for f in figures)]
    text = (header("Calibration study: every model with a posterior on UCI and Wilson sets", protocol)
            + "\n".join(_table(rows, args.datasets, args.models) + figure_lines) + "\n")
    output_path("calibration_study", ".md", args.variant).write_text(text)
    return 0
