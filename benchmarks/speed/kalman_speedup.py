"""Rows per second of the two TT Kalman filters before and after the block updates, measured in the same run.

Protocol: each workload is fitted in a fresh subprocess (one torch thread) twice — once with the ``tnbayes`` of
a *before* commit (a git worktree of ``--before``, default 00b465b, the last commit with the row-by-row filters)
and once with this tree — on the same data with the same arguments; the filter's own seconds per row
(``fit_seconds_per_row_`` / ``seconds_per_row_``, hyper-parameter estimation excluded) are compared. The *before*
filter streams only the first ``--before-rows`` rows of each workload (the full runs took 10–40 minutes each; a TT
filter's cost per row grows with the ranks the rows build up, so a prefix *under*-states the before cost); the
*after* filter is timed on the same prefix and, for the ``--full`` workloads, on every row, with the accuracy of the
full fit. The two TNKF workloads also time the posterior of the test set (milliseconds per test point). With
``--repeats k`` each workload's before and after fits are run as k pairs, the after fit first in the odd pairs and
second in the even ones (an even k balances a drifting pace), and the table gives the medians and the median and
range of the pairs' ratios (a shared machine's pace can drift within minutes, so one pair can mislead).

Workloads (the acceptance set of the Kalman-filter issue):

* ``sinc``: ``TNKF`` with the TNKF paper's settings of ``benchmarks/papers/tnkf_sinc.py`` (``paper``) on the noisy
  sinc with 2¹⁴ training points; test RMSE on 2¹³ noisy targets (target ≤ 0.105).
* ``adult``: ``TNKFClassifier`` with the ``cv`` configuration of ``benchmarks/papers/tnkf_classification.py``
  (σ² = 20, γ = 1, b = mean: the committed 5-fold CV choice) on 3⁹ training rows, 2000 rows streamed; test
  accuracy (target ≥ 0.82).
* ``airline``: ``TTKalmanGP(max_num_basis=4, max_rank=5)`` on the first 100 000 rows of the fixed airline split
  (``benchmarks/speed/tt_kalman_airline.py``); test MSE of standardised y on the first 10 000 test rows.

A second table fits ``TNKF()``, ``TTKalmanGP()`` and ``ExactGP()`` with no arguments on the same ``--defaults-rows``
rows (default 4096) of the airline training split (D = 8), each in its own subprocess with one torch thread, and
reports the whole fit's seconds (hyper-parameters included) with the RMSE and the 95% coverage on the first 2000
test rows (target: both filters faster than ExactGP, coverage in [0.90, 0.98]).

    python -m benchmarks kalman_speedup                              # all three, about 30 minutes
    python -m benchmarks kalman_speedup --workloads sinc --before-rows 256 --quick
    python -m benchmarks kalman_speedup --workloads --defaults-models TTKalmanGP ExactGP --variant smoothing
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._common import header, output_path

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ("sinc", "adult", "airline")


def _worker(workload: str, rows: int | None, quick: bool) -> dict:
    """Fit one workload with the ``tnbayes`` on the path; returns seconds per row, rows and the accuracy (and, for
    the TNKF workloads, the posterior's milliseconds per test point)."""
    import time
    import warnings

    import numpy as np

    from tnbayes import TNKF, TNKFClassifier, TTKalmanGP, datasets, metrics

    warnings.simplefilter("ignore")
    if workload == "sinc":
        from benchmarks.papers.tnkf_sinc import PAPER_TRUNCATION

        n = 2**12 if quick else 2**14
        data = datasets.make_sinc(n_train=n, n_test=n // 2, seed=0)
        x_std = float(np.asarray(data.X_train).std())
        model = TNKF(lengthscale=0.05 / x_std, outputscale=1.0, gamma=0.005, measurement_noise=0.01,
                     prior_variance=1.0, truncation=PAPER_TRUNCATION, normalize_y=False, mode_size=1,
                     round_relative_to="state", max_rows=rows)
        model.fit(data.X_train, data.y_train)
        start = time.perf_counter()
        posterior = model.posterior(data.X_test)
        predict_ms = 1e3 * (time.perf_counter() - start) / len(data.y_test)
        accuracy = {"test RMSE": metrics.evaluate(posterior, data.y_test)["rmse"]}
        return {"seconds_per_row": model.fit_seconds_per_row_, "rows": model.rows_processed_, **accuracy,
                "rows per update": getattr(model, "block_size_", 1), "prediction ms per test point": predict_ms}
    if workload == "adult":
        from benchmarks.papers.tnkf_classification import _adult_lengthscales

        data = datasets.load("adult", n_train=3**9)
        truncation = {"row": (0.0, 10), "innovation": (1e-3, 12), "gain": (1e-3, 12), "mean": 1e-4,
                      "covariance": (1e-3, 8)}
        model = TNKFClassifier(lengthscale=_adult_lengthscales(np.asarray(data.X_train), 20.0), outputscale=1.0,
                               gamma=1.0, measurement_noise=1e-4, prior_variance=1.0, bias="mean", order="tree",
                               stream_order="given", max_rows=min(rows or 2000, 500 if quick else 2000),
                               truncation=truncation, mode_size=1)
        model.fit(data.X_train, data.y_train)
        X_test, y_test = (data.X_test[:500], data.y_test[:500]) if quick else (data.X_test, data.y_test)
        start = time.perf_counter()
        mean = model.posterior(X_test).mean.numpy()
        predict_ms = 1e3 * (time.perf_counter() - start) / len(y_test)
        accuracy = float(np.mean(model.classes_[(mean > 0).astype(int)] == np.asarray(y_test)))
        return {"seconds_per_row": model.fit_seconds_per_row_, "rows": model.rows_processed_,
                "test accuracy": accuracy, "rows per update": getattr(model, "block_size_", 1),
                "prediction ms per test point": predict_ms}
    from benchmarks._common import airline_split

    Xtr, ytr, Xte, yte = airline_split(10_000 if quick else 100_000)
    Xte, yte = Xte[:2000 if quick else 10_000], yte[:2000 if quick else 10_000]
    model = TTKalmanGP(max_num_basis=4, max_rank=5, max_rows=rows)
    model.fit(Xtr, ytr)
    mse = float(np.mean((model.posterior(Xte).mean.numpy() - yte) ** 2)) / float(np.var(ytr))
    return {"seconds_per_row": model.seconds_per_row_, "rows": model.rows_used_, "test MSE (std. y)": mse,
            "rows per update": model.batch_size_}


def _default_fit(model_name: str, rows: int) -> dict:
    """Fit ``model_name()`` with no arguments on the first ``rows`` airline training rows; seconds and metrics."""
    import time
    import warnings

    import tnbayes
    from benchmarks._common import airline_split

    warnings.simplefilter("ignore")
    Xtr, ytr, Xte, yte = airline_split(rows)
    start = time.perf_counter()
    model = getattr(tnbayes, model_name)().fit(Xtr, ytr)
    seconds = time.perf_counter() - start
    report = tnbayes.metrics.evaluate(model.posterior(Xte[:2000]), yte[:2000])
    return {"fit_seconds": seconds, "rmse": report["rmse"], "coverage_95": report["coverage_95"],
            "nlpd": report["nlpd"]}


def _run(tree: Path, workload: str, rows: int | None, quick: bool) -> dict:
    """One workload in a subprocess whose ``tnbayes`` (and ``benchmarks``) come from ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    code = ("import sys, json, torch; torch.set_num_threads(1); sys.path.insert(0, sys.argv[1]); "
            f"sys.path.append({str(ROOT)!r}); "
            "from benchmarks._common import default_data_dir; default_data_dir(); "
            f"sys.path.insert(0, {str(Path(__file__).parent)!r}); import kalman_speedup as k; "
            "result = k._default_fit(sys.argv[2][len('default:'):], int(sys.argv[3])) "
            "if sys.argv[2].startswith('default:') else "
            "k._worker(sys.argv[2], None if sys.argv[3] == 'all' else int(sys.argv[3]), sys.argv[4] == '1'); "
            "print('RESULT ' + json.dumps(result))")
    out = subprocess.run([sys.executable, "-c", code, str(tree), workload, "all" if rows is None else str(rows),
                          "1" if quick else "0"], env=env, capture_output=True, text=True, check=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def _positive(text: str) -> int:
    """``--repeats``: a whole number ≥ 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"needs at least 1; got {value}")
    return value


def _pairs(tree: Path, workload: str, rows: int, quick: bool, repeats: int) -> tuple[dict, dict, str]:
    """``repeats`` before/after pairs of one workload, the after fit first in the odd pairs and second in the even
    ones (with an even number of pairs a machine whose pace drifts favours neither side); the before and after
    results with the median of each measured number, and the speed-up: one ratio, or the median of the pairs' ratios
    with their range."""
    befores, afters = [], []
    for pair in range(repeats):
        if pair % 2 == 0:
            afters.append(_run(ROOT, workload, rows, quick))
            befores.append(_run(tree, workload, rows, quick))
        else:
            befores.append(_run(tree, workload, rows, quick))
            afters.append(_run(ROOT, workload, rows, quick))
    ratios = sorted(b["seconds_per_row"] / a["seconds_per_row"] for b, a in zip(befores, afters))
    before, after = dict(befores[0]), dict(afters[0])
    for result, runs in ((before, befores), (after, afters)):  # the median of every measured number
        result.update({key: float(np.median([run[key] for run in runs])) for key, value in result.items()
                       if isinstance(value, float)})
    if repeats == 1:
        return before, after, f"{ratios[0]:.1f}×"
    spread = f"{ratios[0]:.1f}–{ratios[-1]:.1f}×"
    return before, after, f"{np.median(ratios):.1f}× (median of {repeats} pairs, {spread}; s per row: medians)"


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks kalman_speedup")
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=WORKLOADS,
                        help="before/after workloads (none: only the no-argument comparison)")
    parser.add_argument("--before", default="00b465b", help="git commit of the row-by-row filters")
    parser.add_argument("--before-rows", type=int, nargs="+", default=[512, 512, 4096],
                        help="rows the before filter streams, per workload (in the order of --workloads)")
    parser.add_argument("--full", nargs="*", default=["sinc", "adult"], choices=WORKLOADS,
                        help="workloads whose after filter also streams every row (airline's 10⁵ rows at the after "
                             "filter's speed take about 40 minutes: left out by default)")
    parser.add_argument("--quick", action="store_true", help="small data (smoke test)")
    parser.add_argument("--repeats", type=_positive, default=1,
                        help="before/after pairs per workload, in alternating order (after first in the odd pairs): "
                             "the table gives the medians and the ratios' median and range")
    parser.add_argument("--variant", default=None, help="write results/kalman_speedup/kalman_speedup_<variant>.md")
    parser.add_argument("--defaults-rows", type=int, default=4096,
                        help="rows of the no-argument comparison with ExactGP (0: skip it)")
    parser.add_argument("--defaults-models", nargs="+", default=["TNKF", "TTKalmanGP", "ExactGP"],
                        choices=["TNKF", "TTKalmanGP", "ExactGP"], help="models of the no-argument comparison")
    args = parser.parse_args(argv)
    before_rows = dict(zip(args.workloads, args.before_rows + args.before_rows[-1:] * len(args.workloads)))
    lines = ["| workload | filter | rows timed | s per row | rows per s | speed-up vs before (same rows) | accuracy |",
             "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "before"
        added = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.before],
                               capture_output=True, text=True)
        if added.returncode != 0:  # e.g. a shallow clone without the before commit: the after rows only
            print(f"no before run: git worktree add {args.before} failed: {added.stderr.strip()}", flush=True)
        try:
            for workload in args.workloads:
                rows = before_rows[workload]
                if added.returncode == 0:
                    before, same, ratio = _pairs(tree, workload, rows, args.quick, args.repeats)
                    runs = [("before", before, "1"), ("after, same rows", same, ratio)]
                else:
                    same = _run(ROOT, workload, rows, args.quick)
                    before = {"seconds_per_row": float("nan")}
                    runs = [("after, same rows", same, "— (no before commit)")]
                if workload in args.full:
                    full = _run(ROOT, workload, None, args.quick)
                    against = "rows differ" if args.repeats == 1 else "rows differ; before: the median"
                    runs.append(("after, every row", full,
                                 f"{before['seconds_per_row'] / full['seconds_per_row']:.1f}× ({against})"))
                for label, result, speedup in runs:
                    metric = ", ".join(f"{k} {v}" if isinstance(v, int) else f"{k} {v:.4f}" for k, v in result.items()
                                       if k not in ("seconds_per_row", "rows"))
                    lines.append(f"| {workload} | {label} | {result['rows']} | {result['seconds_per_row']:.5f} | "
                                 f"{1 / result['seconds_per_row']:.1f} | {speedup} | {metric} |")
                    print(lines[-1], flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    defaults = ["| model (no arguments) | rows | fit s (all of it) | RMSE | 95% coverage | NLPD |", "|---|---|---|---|---|---|"]
    for name in args.defaults_models if args.defaults_rows else ():
        result = _run(ROOT, f"default:{name}", args.defaults_rows, args.quick)
        defaults.append(f"| {name}() | {args.defaults_rows} | {result['fit_seconds']:.1f} | {result['rmse']:.2f} | "
                        f"{result['coverage_95']:.3f} | {result['nlpd']:.3f} |")
        print(defaults[-1], flush=True)
    described = " (row-by-row filters)" if args.before == parser.get_default("before") else ""
    protocol = (f"before = tnbayes at {args.before}{described}, after = this tree; one torch thread, one subprocess "
                "per fit; see the module docstring of benchmarks/speed/kalman_speedup.py")
    text = (header("TT Kalman filters before and after the block updates", protocol, fit_threads=1)
            + "\n".join(lines) + "\n")
    if args.defaults_rows:
        text += (f"\nWith no arguments on the first {args.defaults_rows} airline training rows (D = 8), test on the first "
                 "2000 test rows (minutes of delay):\n\n" + "\n".join(defaults) + "\n")
    output_path("kalman_speedup", ".md", args.variant or ("quick" if args.quick else "")).write_text(text)
    print(text)
    return 0
