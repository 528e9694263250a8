"""FL against its cross-validation baseline (Saiapin & Batselier, Table 2) and the regularisation table (Table 1).

Protocol (the paper's): 10 random 80/20 splits of all rows (``numpy.random.default_rng(k)``, k = 0..9); inputs
min–max scaled to [0, 1] with the training range (test rows beyond it clipped to it, ``out_of_box="clip"``: a
few wine test rows lie up to 1.2 ranges outside, where θ = 2 would wrap around); y standardised with training statistics and test MSE on that scale; quantized Fourier
features (raw, ``normalize_features=False``), M / R per set as in the paper (airfoil 4/51, energy 4/15, yacht 2/6, concrete 8/10, wine 16/25, wine =
red + white, 6497 rows); P = 8 periods θ ∈ {10, 2, 128, 25, 64, 600, 2000, 1024}; α = 0.01, β = 0.1, 10 epochs,
λ ~ U(0, 1) and standard-normal cores (seeded by the split).

- FL: ``FeatureLearningKM(mixture_penalty="l1")``; time = the fit.
- CV: the same model with one period and no λ (``mixture_penalty="none"``), θ chosen by 3 folds × 2 repeats over
  the same θ set (:func:`tnbayes.models.fl.cross_validate_period`), then refitted on the whole training set; time
  = all 48 CV fits + the refit.
- Regularisation table (``--regularization``): FL with L1, L2 and the fixed norm, each with and without λ ≥ 0.

Both models run in the same process, one after the other, so the time ratio is measured under the same load.
Every split runs through :func:`tnbayes.compare` (these random splits as its ``load``; no posterior; the MSE on
standardised y, the families kept and the chosen θ as columns).

    python -m benchmarks fl_table2                       # Table 2, all five sets (add --regularization for Table 1)
    python -m benchmarks fl_table2 --only yacht --splits 2
    python -m benchmarks fl_table2 --no-baseline         # the regularisation table only
    python -m benchmarks fl_table2 --summarize benchmarks/results/fl_table2/fl_table2_runs.csv   # tables from saved rows
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks._common import header, output_path, random_split, read_rows, write_rows
from tnbayes import FeatureLearningKM, datasets
from tnbayes.compare import RunContext, compare
from tnbayes.models.fl import DEFAULT_FL_PERIODS, cross_validate_period

#: name -> (tnbayes dataset, M, R)
SETS = {"airfoil": ("airfoil", 4, 51), "energy": ("energy", 4, 15), "yacht": ("yacht", 2, 6),
        "concrete": ("concrete", 8, 10), "wine": ("wine", 16, 25)}
#: the paper's Table 2: (FL MSE, std, CV MSE, std, FL s, CV s)
PUBLISHED = {"airfoil": (0.184, 0.02, 0.223, 0.02, 3.0, 23), "energy": (0.003, 0.0, 0.003, 0.0, 0.91, 5.5),
             "yacht": (0.112, 0.02, 0.358, 0.06, 0.149, 0.615), "concrete": (0.139, 0.03, 0.118, 0.02, 1.2, 8.8),
             "wine": (0.692, 0.07, 0.652, 0.04, 33, 152)}
#: the paper's Table 1 (MSE): regularisation -> per set
PUBLISHED_REG = {("fixed_norm", False): (0.19, 0.154, 0.003, 0.68, 0.11), ("fixed_norm", True): (0.187, 0.14, 0.009, 0.932, 0.366),
                 ("l1", False): (0.184, 0.139, 0.003, 0.692, 0.112), ("l1", True): (0.182, 0.176, 0.003, 0.705, 0.115),
                 ("l2", False): (0.189, 0.15, 0.003, 0.776, 0.1), ("l2", True): (0.188, 0.146, 0.007, 0.672, 0.327)}
PAPER_ORDER = ("airfoil", "concrete", "energy", "wine", "yacht")
ALPHA, BETA, EPOCHS = 0.01, 0.1, 10


def _mse(model, X, y, mean: float, std: float) -> float:
    return float(np.mean(((model.predict(X) - y) / std) ** 2))


def _split(name: str, k: int):
    return random_split(SETS[name][0], k, 0.2)


class _CrossValidatedPeriod:
    """The baseline: θ by 3 folds × 2 repeats over the FL θ set, then the single-period model (no λ) refitted on
    the whole training set; ``fit`` is the whole procedure, so its time includes every CV fit."""

    def __init__(self, seed: int, **common) -> None:
        self.seed, self.common = seed, common

    def fit(self, X, y) -> "_CrossValidatedPeriod":
        self.period_, _, _ = cross_validate_period(X, y, DEFAULT_FL_PERIODS, folds=3, repeats=2, seed=self.seed,
                                                   **self.common)
        self.model_ = FeatureLearningKM(periods=[self.period_], mixture_penalty="none", initial_weights="ones",
                                        uncertainty="none", seed=self.seed, **self.common).fit(X, y)
        return self

    def predict(self, X):
        return self.model_.predict(X)


def _models(name: str, regularization_table: bool, baseline: bool, epochs: int) -> dict:
    """Label -> (model, regularization, nonnegative, factory), in the order they run on each split."""
    _, M, R = SETS[name]
    # a few test rows lie far beyond the training range (wine: up to 1.2 ranges); they are clipped to it
    common = dict(rank=R, num_basis=M, penalty=ALPHA, max_sweeps=epochs, out_of_box="clip", normalize_features=False)

    def fl(regularization: str, nonnegative: bool):
        def factory(run: RunContext) -> FeatureLearningKM:
            return FeatureLearningKM(mixture_penalty_strength=BETA, mixture_penalty=regularization, nonnegative=nonnegative,
                                     uncertainty="none", seed=run.split, **common)
        return factory

    models = {"FL": ("FL", "l1", False, fl("l1", False))}
    if baseline:
        models["CV"] = ("CV", "none", False, lambda run: _CrossValidatedPeriod(run.split, **common))
    if regularization_table:
        for regularization in ("l1", "l2", "fixed_norm"):
            for nonnegative in (False, True):
                if regularization == "l1" and not nonnegative:
                    continue  # the FL row above
                label = f"FL {regularization}" + (" (P)" if nonnegative else "")
                models[label] = ("FL", regularization, nonnegative, fl(regularization, nonnegative))
    return models


def _run(name: str, splits: list[int], regularization_table: bool, baseline: bool, epochs: int, on_split) -> None:
    """Fit every model on each split through :func:`tnbayes.compare`; ``on_split(k, rows)`` gets the table rows
    (dataset, split, model, regularization, nonnegative, mse, seconds, active, period) of each split."""
    models = _models(name, regularization_table, baseline, epochs)

    def columns(run: RunContext, model, post) -> dict:
        ytr = run.data.y_train
        mse = _mse(model, run.data.X_test, run.data.y_test, float(np.mean(ytr)), float(np.std(ytr)))
        if isinstance(model, _CrossValidatedPeriod):
            return {"mse": mse, "active": 1, "period": model.period_}
        return {"mse": mse, "active": len(model.active_families_), "period": ""}

    def split_done(dataset: str, k: int, split_rows: list[dict]) -> None:
        rows = []
        for row in split_rows:
            model, regularization, nonnegative, _ = models[row["model"]]
            rows.append({"dataset": name, "split": k, "model": model, "regularization": regularization,
                         "nonnegative": nonnegative, "mse": row["mse"], "seconds": row["fit_seconds"],
                         "active": row["active"], "period": row["period"]})
        if baseline:
            fl, cv = rows[0], rows[1]
            print(f"{name} split {k}: FL {fl['mse']:.4f} ({fl['seconds']:.1f} s, {fl['active']} families) "
                  f"CV {cv['mse']:.4f} ({cv['seconds']:.1f} s, θ = {cv['period']:g})", flush=True)
        on_split(k, rows)

    compare({label: spec[3] for label, spec in models.items()}, [name], splits, load=_split, predictive=False,
            columns=columns, progress=False, on_split=split_done)


def _table2(rows: list[dict]) -> list[str]:
    lines = ["| data | N | D | M | R | FL test MSE | paper FL | within 2 paper std | CV test MSE | paper CV | "
             "FL s | CV s | CV / FL time | paper CV / FL | families kept (FL) | θ chosen (CV) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in [n for n in SETS if any(r["dataset"] == n for r in rows)]:
        fl = [r for r in rows if r["dataset"] == name and r["model"] == "FL" and r["regularization"] == "l1"
              and not r["nonnegative"]]
        cv = [r for r in rows if r["dataset"] == name and r["model"] == "CV"]
        a, b = np.array([r["mse"] for r in fl]), np.array([r["mse"] for r in cv])
        ta, tb = np.mean([r["seconds"] for r in fl]), np.mean([r["seconds"] for r in cv])
        p = PUBLISHED[name]
        first = datasets.load(SETS[name][0], split=0)
        n_rows = len(first.y_train) + len(first.y_test)
        within = abs(a.mean() - p[0]) <= 2 * max(p[1], 0.0005)
        thetas = ", ".join(f"{t:g}" for t in sorted({float(r['period']) for r in cv}))
        lines.append(f"| {name} | {n_rows} | {first.X_train.shape[1]} | {SETS[name][1]} | {SETS[name][2]} | "
                     f"{a.mean():.4f} ± {a.std(ddof=1) if len(a) > 1 else 0:.4f} | {p[0]} ± {p[1]} | "
                     f"{'yes' if within else 'no'} | {b.mean():.4f} ± {b.std(ddof=1) if len(b) > 1 else 0:.4f} | "
                     f"{p[2]} ± {p[3]} | {ta:.1f} | {tb:.1f} | {tb / ta:.1f}× | {p[5] / p[4]:.1f}× | "
                     f"{np.mean([r['active'] for r in fl]):.1f} of 8 | {thetas} |")
    return lines


def _table1(rows: list[dict]) -> list[str]:
    names = [n for n in PAPER_ORDER if any(r["dataset"] == n for r in rows)]
    lines = ["| regularisation | " + " | ".join(f"{n} (ours / paper)" for n in names) + " | mean s per fit |",
             "|---|" + "---|" * (len(names) + 1)]
    for (regularization, nonnegative), published in PUBLISHED_REG.items():
        cells, seconds = [], []
        for name in names:
            sel = [r for r in rows if r["dataset"] == name and r["model"] == "FL"
                   and r["regularization"] == regularization and bool(r["nonnegative"]) == nonnegative]
            if not sel:
                cells.append("—")
                continue
            seconds += [r["seconds"] for r in sel]
            cells.append(f"{np.mean([r['mse'] for r in sel]):.3f} / {published[PAPER_ORDER.index(name)]}")
        label = {"l1": "L1", "l2": "L2", "fixed_norm": "FN"}[regularization] + ("(P)" if nonnegative else "")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {np.mean(seconds) if seconds else float('nan'):.2f} |")
    return lines


def _tables(rows: list[dict], source: str) -> str:
    """Markdown of the tables these rows support (Table 2 when they hold the baseline, Table 1 when they hold
    the other regularisers), with which splits of which sets they cover."""
    counts = {n: len({r["split"] for r in rows if r["dataset"] == n}) for n in SETS if any(r["dataset"] == n for r in rows)}
    coverage = ", ".join(f"{n} {c} splits" for n, c in counts.items())
    protocol = f"see the module docstring of benchmarks/papers/fl_table2.py; rows in {source} ({coverage})"
    has_baseline = any(r["model"] == "CV" for r in rows)
    parts = []
    if has_baseline:
        parts.append(header("FL vs cross-validated single-period model (FL paper, Table 2)", protocol) +
                     "\n".join(_table2(rows)))
    if any(r["regularization"] != "l1" and r["model"] == "FL" for r in rows):
        title = "Regularisation of λ (FL paper, Table 1; mean test MSE, ours / paper)"
        parts.append((header(title, protocol) if not has_baseline else f"## {title}\n\n") + "\n".join(_table1(rows)))
    return "\n\n".join(parts) + "\n"


def _variant(*parts: str) -> str:
    """The result's variant: its non-empty parts joined by "_" ("regularization_partial" …)."""
    return "_".join(part for part in parts if part)


def _summarize(path: str) -> int:
    """Write the tables from saved runs.csv files (comma-separated; e.g. a stopped run plus a later one)."""
    rows = [row for one in str(path).split(",") for row in read_rows(one)]
    complete = {n for n in SETS if len({r["split"] for r in rows if r["dataset"] == n}) == 10} == set(SETS)
    variant = _variant("" if any(r["model"] == "CV" for r in rows) else "regularization", "" if complete else "partial")
    text = _tables(rows, path)
    output_path("fl_table2", ".md", variant).write_text(text)
    print(text)
    return 0


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks fl_table2")
    parser.add_argument("--only", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--first-split", type=int, default=0, help="start at this split (continue a stopped run "
                        "under another --tag, then --summarize both runs.csv)")
    parser.add_argument("--regularization", action="store_true", help="also the regularisation table (Table 1)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the CV baseline (Table 1 only)")
    parser.add_argument("--epochs", type=int, default=EPOCHS, help=f"FL epochs (paper and default: {EPOCHS})")
    parser.add_argument("--tag", default="", help="suffix of the output name (keeps parallel runs apart)")
    parser.add_argument("--summarize", default=None,
                        help="write the tables from runs.csv files of this script, comma-separated (no fitting)")
    args = parser.parse_args(argv)
    if args.summarize:
        return _summarize(args.summarize)
    complete = args.splits == 10 and set(args.only) == set(SETS) and args.epochs == EPOCHS
    if args.no_baseline:
        args.regularization = True
        variant = _variant("regularization", "" if complete else "partial", args.tag)
    else:
        variant = _variant("" if complete else "partial", "with_regularization" if args.regularization else "", args.tag)
    runs = output_path("fl_table2", "_runs.csv", variant)
    rows: list[dict] = []

    def split_done(k: int, split_rows: list[dict]) -> None:
        rows.extend(split_rows)
        write_rows(rows, runs)
        output_path("fl_table2", ".md", variant).write_text(_tables(rows, f"results/fl_table2/{runs.name}"))
        print(f"{split_rows[0]['dataset']} split {k} done", flush=True)  # tables rewritten after every split

    splits = list(range(args.first_split, args.splits))
    for dataset in args.only:
        if splits:
            _run(dataset, splits, args.regularization, not args.no_baseline, args.epochs, split_done)
    print(_tables(rows, f"results/fl_table2/{runs.name}"), flush=True)
    return 0
