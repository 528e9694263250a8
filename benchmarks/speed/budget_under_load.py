"""The Kalman filters' time budget on a busier machine than the one their cost models were fitted on, before and after
the stream deadline (:mod:`tnbayes.inference.stream_deadline`), measured in the same run.

Protocol: ``TNKF()`` and ``TTKalmanGP()`` with no arguments (``time_budget=60``) on the first ``--rows`` training rows
of ``--dataset``'s split 0, predicted on its first ``--test-rows`` test rows. Each fit runs in a fresh subprocess with
one torch thread, pinned to one core, once alone and once with ``--load`` busy processes pinned to the same core
(each a Python loop: the fit gets about 1 / (load + 1) of the core, as on a machine that much slower), and once with
the ``tnbayes`` of ``--before`` (a git worktree; default 09d2f71, the last commit without the deadline) and once with
this tree. Reported: the whole fit's seconds (hyper-parameters included) against the budget, the rows the filter
streamed of those the budget planned, and RMSE, NLPD and 95% coverage on the test rows (prediction not timed).

    python -m benchmarks budget_under_load                        # eight fits of about a minute or two
    python -m benchmarks budget_under_load --models TNKF --rows 2000 --variant quick
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._common import header, output_path

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("TNKF", "TTKalmanGP")


def _worker(model_name: str, dataset: str, rows: int, test_rows: int, core: int) -> dict:
    """Fit one model with no arguments with the ``tnbayes`` on the path, pinned to ``core``."""
    import time
    import warnings

    import numpy as np

    import tnbayes
    from tnbayes import datasets, metrics

    os.sched_setaffinity(0, {core})
    warnings.simplefilter("ignore")
    data = datasets.load(dataset, split=0)
    X, y = np.asarray(data.X_train)[:rows], np.asarray(data.y_train)[:rows]
    model = getattr(tnbayes, model_name)()
    started = time.perf_counter()
    model.fit(X, y)
    fit_seconds = time.perf_counter() - started
    scores = metrics.evaluate(model.posterior(np.asarray(data.X_test)[:test_rows]),
                              np.asarray(data.y_test)[:test_rows])
    streamed = getattr(model, "rows_processed_", getattr(model, "rows_used_", None))
    return {"fit_seconds": fit_seconds, "streamed": int(streamed), "planned": int(model.budget_["rows"]),
            "cut": bool(model.budget_.get("stopped_at_deadline", False)), "rmse": scores["rmse"],
            "nlpd": scores["nlpd"], "coverage_95": scores["coverage_95"]}


def _run(tree: Path, model_name: str, dataset: str, rows: int, test_rows: int, core: int, load: int) -> dict:
    """One fit in a subprocess with ``tree`` first on the path, beside ``load`` busy processes on the same core."""
    spin = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(load)]
    try:
        # tnbayes (and benchmarks._common) from ``tree``; this file's worker by its path (the before tree lacks it)
        code = (f"import importlib.util, json, sys; sys.path.insert(0, {str(tree)!r}); "
                f"spec = importlib.util.spec_from_file_location('budget_worker', {__file__!r}); "
                f"module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
                f"print('RESULT', json.dumps(module._worker({model_name!r}, {dataset!r}, {rows}, {test_rows}, "
                f"{core})))")
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tree))
    finally:
        for process in busy:
            process.kill()
            process.wait()
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"fit failed in {tree}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(line[len("RESULT "):])


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks budget_under_load")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--dataset", default="wilson/kin40k")
    parser.add_argument("--rows", type=int, default=8000)
    parser.add_argument("--test-rows", type=int, default=2000)
    parser.add_argument("--load", type=int, default=1,
                        help="busy processes beside the loaded fit, on its core (0: the fits alone only)")
    parser.add_argument("--core", type=int, default=min(os.sched_getaffinity(0)))
    parser.add_argument("--before", default="09d2f71", help="git commit without the stream deadline")
    parser.add_argument("--variant", default=None, help="write results/budget_under_load/budget_under_load_<v>.md")
    args = parser.parse_args(argv)
    lines = ["| model | machine | tnbayes | fit s (budget 60) | rows streamed / planned | cut by the deadline | RMSE | "
             "NLPD | 95% cov. |", "|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "before"
        added = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.before],
                               capture_output=True, text=True)
        if added.returncode != 0:
            print(f"no before run: git worktree add {args.before} failed: {added.stderr.strip()}", flush=True)
        trees = ([("before", tree)] if added.returncode == 0 else []) + [("after", ROOT)]
        try:
            for model_name in args.models:
                for load in sorted({0, args.load}):
                    machine = "alone" if load == 0 else f"{load} busy process{'es' if load > 1 else ''} on its core"
                    for label, path in trees:
                        r = _run(path, model_name, args.dataset, args.rows, args.test_rows, args.core, load)
                        lines.append(f"| {model_name}() | {machine} | {label} | {r['fit_seconds']:.1f} | "
                                     f"{r['streamed']} / {r['planned']} | {'yes' if r['cut'] else 'no'} | "
                                     f"{r['rmse']:.3f} | {r['nlpd']:.3f} | {r['coverage_95']:.3f} |")
                        print(lines[-1], flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    text = header("Kalman filters' time budget on a busier machine",
                  f"{args.dataset}, first {args.rows} training rows of split 0, first {args.test_rows} test rows; "
                  f"before = {args.before}; each fit in its own subprocess on core {args.core} with one torch thread; "
                  f"'busy' processes are Python loops pinned to the same core", fit_threads=1)
    path = output_path("budget_under_load", ".md", args.variant or "")
    path.write_text(text + "\n".join(lines) + "\n")
    print(f"wrote {path}")
    return 0
