"""Defaults study: every tnbayes regressor with a posterior, built with **no arguments**, next to ExactGP and
scikit-learn's ``GaussianProcessRegressor`` on the same rows of public sets spanning D = 1 … 40.

Acceptance protocol (from the issue tracker): on at least 15 public sets, n_train ≤ 2000, 3 splits, report
RMSE, NLPD, 95% coverage, fit seconds and failures per model and set. The table must have no failure cells
(an exception, NaN/inf in the posterior, a fit over 2 minutes); ExactGP must lie within 0.05 nats of
scikit-learn's GPR on every set; per model the median ΔNLPD to ExactGP must be ≤ 0.1 and the worst ≤ 0.5, and
the 95% coverage must lie in [0.90, 0.98] on ≥ 80% of the sets. A model that misses is listed with its measured
numbers and the reason, not dropped. For SVGP (its own issue): ``SVGP()`` with no arguments reaches the quality
of a hand-written GPyTorch SVGP (500 inducing points, 2000 Adam steps) on these sets, in no more time.

Protocol of this script:

* **Data**: ``tnbayes.datasets.load(name, split=k)`` for k in ``--splits`` (the fixed splits of the Wilson sets;
  a random 90/10 split drawn with ``numpy.random.default_rng(k)`` for sets without fixed splits: co2, lidar,
  comp-activ, ailerons; scikit-learn's ``make_friedman1`` with ``random_state=k`` for ``sklearn/friedman1``,
  :data:`GENERATED`). From the split's training part ``min(--max-train, available)`` rows are drawn
  uniformly without replacement with ``numpy.random.default_rng(k)``, and from its test part
  ``min(--max-test, available)`` rows with ``numpy.random.default_rng(10_000 + k)``
  (:func:`benchmarks._common.subset_indices`, as in the calibration study). Every model sees the same rows.
  Raw values: each model scales internally; the scikit-learn reference standardises inputs with the training
  mean/std (``StandardScaler`` in a ``Pipeline``) and targets with ``normalize_y=True``; the GPyTorch SVGP
  reference standardises both with the training mean/std.
* **Models**: ``ExactGP()``, ``HilbertGP()``, ``CPDKernelMachine()``, ``QTKM()``, ``TKM()``,
  ``FeatureLearningKM()``, ``TNKF()``, ``TTKalmanGP()``, ``RFFNet()``, ``SVGP()`` — no arguments at all (so e.g.
  ``out_of_box="raise"``: a test input outside a model's box is a failure) — and the reference
  ``GaussianProcessRegressor(ConstantKernel() * RBF(np.ones(D), length_scale_bounds=(1e-3, 1e5)) +
  WhiteKernel(), n_restarts_optimizer=5, normalize_y=True, random_state=0)``.
  Beside them, not assessed, ``ExactGP(prior=None)``: plain ML-II with ExactGP's optimiser and starts, which
  tells whether a difference between ExactGP and scikit-learn comes from the hyper-priors or from the optimiser;
  and ``gpytorch_svgp``, the SVGP a GPyTorch user writes from the tutorial
  (:class:`benchmarks._gpytorch_svgp.HandWrittenSVGP`: 500 inducing points drawn from the training inputs and
  learnt, whitened Cholesky variational distribution, scaled ARD RBF kernel, ``VariationalELBO``, one Adam at
  learning rate 0.01 for 2000 steps of min(n, 1024) shuffled rows, float64, seed 0), the reference of ``SVGP()``.
  Predictions: ``model.posterior(X_test)`` (predictive distribution of new observations, noise included);
  for the references ``predict(X_test, return_std=True)`` (scikit-learn's std includes the WhiteKernel noise,
  the GPyTorch SVGP's the likelihood's noise).
* **Isolation**: every fit runs in a fresh child process (``multiprocessing`` forkserver context with torch and
  tnbayes preloaded, spawn where there is no forkserver; torch threads = the cores available) with a hard
  wall-clock limit (``--timeout``, default 300 s, for the tnbayes models; ``--reference-timeout``, default
  3600 s, for the references: scikit-learn, whose 5 restarts of an O(n³)-per-step ARD optimisation take many
  minutes at n = 2000, and the GPyTorch SVGP, whose 2000 steps take minutes on one core); a child that does not answer in time is killed and recorded as ``timeout``. Fits run one at a
  time. The torch threads of each fit are recorded (column ``threads``); to run beside other work, pin the study
  to some cores (``taskset -c 0 python -m benchmarks defaults_study …``) and it uses only those.
* **Failures** (per fit): ``error`` (an exception; its type and the first line of its message are recorded),
  ``nan`` (NaN/inf in the posterior mean or standard deviation), ``timeout``, ``crash`` (the child died), and
  ``slow`` (the fit succeeded but ``fit`` took over 120 s; its metrics are kept). A failure of a reference (or of
  ``ExactGP(prior=None)``) is reported but is no failure cell of the study.
* **Metrics**: ``tnbayes.metrics.evaluate(posterior, y_test)`` in the original units (RMSE, NLPD, 95% coverage);
  ``fit_seconds`` times ``model.fit`` alone. ΔNLPD = NLPD(model) − NLPD(ExactGP) on the same split, averaged over
  the splits where both have a result. The choices a model made (its scalar fitted attributes such as
  ``num_basis_``, ``rank_``, ``num_inducing_``, ``noise_variance_``; the fitted kernel for scikit-learn) are kept in the CSV.
* **Acceptance** (per model, over the sets on which ExactGP has a result): median and worst per-set ΔNLPD (a set
  on which the model failed on every split counts as ΔNLPD = ∞), the fraction of sets whose mean coverage lies in
  [0.90, 0.98] (a set without a result counts as outside), and the number of failure fits.
* **SVGP against its reference** (when both ran): per set, over the splits where both have a result, the mean
  NLPD, RMSE and fit seconds of ``SVGP()`` and of the GPyTorch SVGP; "not worse" when
  NLPD(SVGP) − NLPD(GPyTorch SVGP) ≤ 0.05, "no more time" when SVGP's mean fit seconds are at most the reference's.

Output, in ``results/defaults_study/`` with stem ``defaults_study[_<variant>]``: ``<stem>_runs.csv`` (one row per
fit, rewritten after every fit; ``--resume`` keeps its rows and runs only what is missing), ``<stem>.md`` (summary,
rewritten after every fit) and ``<stem>.png`` (heatmap of ΔNLPD per model and set, failure cells marked).

    python -m benchmarks defaults_study                       # full: 16 sets, 3 splits, n_train ≤ 2000 (many hours)
    python -m benchmarks defaults_study --resume              # continue a stopped full run
    python -m benchmarks defaults_study --datasets wilson/yacht --models exact_gp hilbert_gp sklearn_gpr \\
        --splits 0:1 --max-train 100                          # the smoke configuration
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
import traceback
import warnings
from typing import Any

import numpy as np

from benchmarks._common import header, output_path, read_rows, subset_indices, variant_of, write_rows
from tnbayes import datasets
from tnbayes.compare import parse_splits

#: the full configuration: 16 public sets, D = 1 … 40 (D in the comments)
DATASETS = [
    "co2",                  # 1  Mauna Loa CO2 (weekly), random 90/10 splits
    "lidar",                # 1  LIDAR, random 90/10 splits
    "wilson/tamielectric",  # 3
    "wilson/airfoil",       # 5
    "wilson/yacht",         # 6
    "wilson/concrete",      # 8
    "wilson/energy",        # 8
    "wilson/kin40k",        # 8
    "wilson/pendulum",      # 9
    "wilson/protein",       # 9
    "wilson/bike",          # 17
    "wilson/elevators",     # 18
    "wilson/keggdirected",  # 20
    "wilson/parkinsons",    # 20
    "comp-activ",           # 21 random 90/10 splits
    "ailerons",             # 40 random 90/10 splits
]
#: sets generated here (only with ``--datasets``; not in DATASETS): name -> (rows, test rows); ``sklearn/friedman1``
#: is scikit-learn's Friedman #1 (D = 10, noise sd 1) drawn with ``random_state`` = the split, the last rows for testing
GENERATED = {"sklearn/friedman1": (22_000, 2_000)}
#: key -> display name; the tnbayes models are the classes of that name in ``tnbayes``, built with no arguments
MODELS = {
    "exact_gp": "ExactGP",
    "hilbert_gp": "HilbertGP",
    "cpd": "CPDKernelMachine",
    "qtkm": "QTKM",
    "tkm": "TKM",
    "fl": "FeatureLearningKM",
    "tnkf": "TNKF",
    "tt_kalman_gp": "TTKalmanGP",
    "rffnet": "RFFNet",
    "svgp": "SVGP",
    "exact_gp_ml": "ExactGP (prior=None)",
    "sklearn_gpr": "sklearn GPR",
    "gpytorch_svgp": "GPyTorch SVGP (500, 2000 Adam)",
}
#: the scikit-learn reference (not assessed; ExactGP is checked against it)
REFERENCE = "sklearn_gpr"
#: the hand-written GPyTorch SVGP of the tutorial (benchmarks/_gpytorch_svgp.py; not assessed; SVGP() is set beside it)
SVGP_REFERENCE = "gpytorch_svgp"
#: the references: no tnbayes models, scored through ``predict(X, return_std=True)``, with the reference time limit
REFERENCES = (REFERENCE, SVGP_REFERENCE)
#: ExactGP with plain ML-II (no hyper-priors): a diagnostic beside the reference that separates the optimiser from
#: the priors when ExactGP and scikit-learn disagree; like the reference it is not assessed
PLAIN_ML = "exact_gp_ml"
NOT_ASSESSED = (PLAIN_ML, *REFERENCES)
#: a successful fit longer than this is a failure cell ("slow")
SLOW_SECONDS = 120.0
#: acceptance thresholds of the issue
MEDIAN_DELTA_MAX, WORST_DELTA_MAX = 0.1, 0.5
COVERAGE_RANGE, COVERAGE_FRACTION = (0.90, 0.98), 0.8
REFERENCE_TOLERANCE = 0.05
METRICS = ("rmse", "nlpd", "coverage_95", "interval_width_95", "crps")
#: columns of runs.csv, in order
COLUMNS = ("dataset", "D", "split", "model", "n_train", "n_test", "max_train", "max_test", "threads", "status",
           "fit_seconds", "wall_seconds", *METRICS, "error", "choices")


# ---------------------------------------------------------------------------------------------- models
def make_regressor(key: str, n_features: int) -> Any:
    """The unfitted estimator of ``key``: a tnbayes model built with no arguments, or the scikit-learn reference.

    Parameters
    ----------
    key : str
        A key of :data:`MODELS`.
    n_features : int
        Number of inputs D (the reference's ARD kernel starts from D unit length scales).

    Returns
    -------
    estimator
        Has ``fit(X, y)``; tnbayes models have ``posterior(X)``, the references (:data:`REFERENCES`)
        ``predict(X, return_std=True)``.
    """
    if key == SVGP_REFERENCE:
        from benchmarks._gpytorch_svgp import HandWrittenSVGP

        return HandWrittenSVGP()
    if key == REFERENCE:
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        kernel = ConstantKernel() * RBF(length_scale=np.ones(n_features), length_scale_bounds=(1e-3, 1e5)) \
            + WhiteKernel()
        gpr = GaussianProcessRegressor(kernel=kernel, n_restarts_optimizer=5, normalize_y=True, random_state=0)
        return make_pipeline(StandardScaler(), gpr)
    import tnbayes

    if key == PLAIN_ML:
        return tnbayes.ExactGP(prior=None)
    return getattr(tnbayes, MODELS[key])()


def _to_numpy(values: Any) -> np.ndarray:
    """A tensor or array as a float64 numpy array."""
    if hasattr(values, "detach"):
        values = values.detach().to("cpu").double().numpy()
    return np.asarray(values, dtype=np.float64)


def _choices(model: Any) -> str:
    """What a fitted model chose, as compact JSON: its public scalar fitted attributes (and short vectors, ≤ 8
    entries); the fitted kernel for the scikit-learn reference."""
    if hasattr(model, "steps"):  # the scikit-learn pipeline
        return json.dumps({"kernel": str(model.steps[-1][1].kernel_)[:400]})
    chosen: dict[str, Any] = {}
    for name, value in vars(model).items():
        if not name.endswith("_") or name.startswith("_") or name in ("n_features_in_", "n_train_"):
            continue
        if hasattr(value, "detach"):
            if value.numel() > 8 or value.is_complex():  # complex: fitted weights, not a choice
                continue
            value = value.detach().to("cpu").double()
            value = value.tolist()
        if isinstance(value, (bool, int, str)):
            chosen[name] = value
        elif isinstance(value, float):
            chosen[name] = float(f"{value:.4g}")
        elif isinstance(value, (list, tuple)) and 0 < len(value) <= 8 \
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            chosen[name] = [v if isinstance(v, int) else float(f"{v:.4g}") for v in value]
    return json.dumps(chosen)


def _error_text(err: BaseException) -> str:
    """``Type: first line of the message [at the innermost tnbayes frame]``."""
    lines = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {lines[0][:200] if lines else ''}"
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f"{os.sep}tnbayes{os.sep}" in f.filename]
    if frames:
        where = frames[-1].filename.split(f"{os.sep}tnbayes{os.sep}", 1)[1]
        text += f" [at tnbayes/{where}:{frames[-1].lineno}]"
    return text


def fit_and_score(key: str, Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray, yte: np.ndarray) -> dict:
    """Fit one model and score its predictive distribution on the test rows (runs in the child process).

    Returns
    -------
    dict
        ``status`` ("ok", "error" or "nan"), ``fit_seconds``, the :data:`METRICS` (when ok), ``error`` and
        ``choices``.
    """
    import torch

    from tnbayes import metrics
    from tnbayes.posterior import GaussianPosterior

    out: dict[str, Any] = {"status": "ok", "fit_seconds": math.nan, "error": "", "choices": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make_regressor(key, Xtr.shape[1])
            start = time.perf_counter()
            model.fit(Xtr, ytr)
            out["fit_seconds"] = time.perf_counter() - start
            if key in REFERENCES:
                mean, std = model.predict(Xte, return_std=True)
                post = GaussianPosterior(torch.as_tensor(mean, dtype=torch.float64),
                                         variance=torch.as_tensor(std, dtype=torch.float64) ** 2)
            else:
                post = model.posterior(Xte)
        out["choices"] = _choices(model)
        mean, std = _to_numpy(post.mean), _to_numpy(post.stddev)
        bad = int((~np.isfinite(mean)).sum() + (~np.isfinite(std)).sum())
        if bad:
            out.update(status="nan", error=f"{bad} non-finite value(s) in the posterior mean/std")
            return out
        scores = metrics.evaluate(post, yte)
        out.update({name: float(scores[name]) for name in METRICS})
    except Exception as err:  # recorded as a failure cell, never fatal
        out.update(status="error", error=_error_text(err))
    return out


def _child(connection: Any, threads: int, limit: float, key: str, arrays: tuple[np.ndarray, ...]) -> None:
    """Entry point of the child process: set the torch threads, fit, send the result back. The child also ends
    itself ``limit`` seconds after it started, should the parent that would kill it be gone."""
    import threading

    import torch

    watchdog = threading.Timer(limit, os._exit, args=(124,))
    watchdog.daemon = True
    watchdog.start()
    torch.set_num_threads(threads)
    connection.send(fit_and_score(key, *arrays))
    connection.close()


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _process_context() -> Any:
    """A ``forkserver`` context whose server has torch, tnbayes and this module imported (children start in a
    fraction of a second and never inherit thread pools from this process); ``spawn`` where there is none."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "tnbayes", "benchmarks.calibration.defaults_study"])
    return context


def run_isolated(key: str, arrays: tuple[np.ndarray, ...], timeout: float) -> dict:
    """:func:`fit_and_score` in a fresh child process, killed after ``timeout`` seconds.

    Parameters
    ----------
    key : str
        A key of :data:`MODELS`.
    arrays : tuple of ndarray
        ``(X_train, y_train, X_test, y_test)``.
    timeout : float
        Wall-clock limit of the child (start-up, fit and prediction) in seconds.

    Returns
    -------
    dict
        The child's result plus ``wall_seconds``; status ``timeout`` or ``crash`` when it sent none.
    """
    context = _process_context()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, available_cores(), timeout + 60.0, key, arrays))
    start = time.perf_counter()
    process.start()
    sender.close()  # the child holds the only write end: its exit makes recv() raise EOFError
    grace = 0.0  # seconds the child gets to exit before it is killed: none unless it has answered
    try:
        if receiver.poll(timeout):
            result, grace = receiver.recv(), 30.0
        else:
            result = {"status": "timeout", "error": f"no result within {timeout:g} s (child killed)"}
    except EOFError:
        process.join(30.0)
        result = {"status": "crash", "error": f"the child process died (exit code {process.exitcode})"}
    finally:  # also on KeyboardInterrupt: never leave a fit running
        wall_seconds = time.perf_counter() - start
        process.join(grace)
        if process.is_alive():
            process.kill()
            process.join()
        receiver.close()
    result["wall_seconds"] = wall_seconds
    return result


# ---------------------------------------------------------------------------------------------- data
def study_rows(dataset: str, split: int, max_train: int | None, max_test: int | None) -> tuple[np.ndarray, ...]:
    """The rows every model sees on one split: ``(X_train, y_train, X_test, y_test)`` (see the module docstring)."""
    data = load_split(dataset, split)
    train = subset_indices(data.X_train.shape[0], max_train, split)
    test = subset_indices(data.X_test.shape[0], max_test, 10_000 + split)
    return data.X_train[train], data.y_train[train], data.X_test[test], data.y_test[test]


def load_split(dataset: str, split: int) -> Any:
    """One split of a public set (:func:`tnbayes.datasets.load`) or of a set of :data:`GENERATED`: an object with
    ``X_train``, ``y_train``, ``X_test``, ``y_test`` and ``n_splits``."""
    if dataset not in GENERATED:
        return datasets.load(dataset, split=split)
    from sklearn.datasets import make_friedman1
    rows, test_rows = GENERATED[dataset]
    X, y = make_friedman1(rows, n_features=10, noise=1.0, random_state=split)
    train = rows - test_rows
    return argparse.Namespace(X_train=X[:train], y_train=y[:train], X_test=X[train:], y_test=y[train:], n_splits=10)


def failure_label(row: dict) -> str:
    """The failure of one fit ("" when none): its status, or ``slow`` for a successful fit over 120 s."""
    if row["status"] != "ok":
        return str(row["status"])
    return "slow" if float(row["fit_seconds"]) > SLOW_SECONDS else ""


def _has_result(row: dict) -> bool:
    return row["status"] == "ok" and math.isfinite(float(row["nlpd"]))


# ---------------------------------------------------------------------------------------------- summary
def summarize(rows: list[dict]) -> tuple[list[str], list[str], dict[tuple[str, str], dict]]:
    """Per (model, set) aggregates.

    Returns
    -------
    sets : list of str
        Datasets present, ordered by D then name.
    models : list of str
        Model keys present, in :data:`MODELS` order.
    cells : dict
        ``(model, dataset) -> {"runs", "ok", "failures", "rmse", "nlpd", "delta", "coverage", "fit_seconds", "D",
        "n_train"}`` with means over the splits that have a result (``delta`` over the splits where ExactGP has
        one too; NaN when none).
    """
    dims = {r["dataset"]: int(r["D"]) for r in rows}
    sets = sorted(dims, key=lambda s: (dims[s], s))
    models = [m for m in MODELS if any(r["model"] == m for r in rows)]
    exact = {(r["dataset"], int(r["split"])): float(r["nlpd"]) for r in rows
             if r["model"] == "exact_gp" and _has_result(r)}
    cells: dict[tuple[str, str], dict] = {}
    for dataset in sets:
        for model in models:
            sel = [r for r in rows if r["dataset"] == dataset and r["model"] == model]
            if not sel:
                continue
            ok = [r for r in sel if _has_result(r)]
            deltas = [float(r["nlpd"]) - exact[(dataset, int(r["split"]))] for r in ok
                      if (dataset, int(r["split"])) in exact]
            mean = lambda key: float(np.mean([float(r[key]) for r in ok])) if ok else math.nan  # noqa: E731
            cells[(model, dataset)] = {
                "runs": len(sel), "ok": len(ok), "D": int(sel[0]["D"]), "n_train": int(sel[0]["n_train"]),
                "failures": [(int(r["split"]), failure_label(r), str(r["error"])) for r in sel if failure_label(r)],
                "rmse": mean("rmse"), "nlpd": mean("nlpd"), "coverage": mean("coverage_95"),
                "fit_seconds": mean("fit_seconds"), "delta": float(np.mean(deltas)) if deltas else math.nan,
            }
    return sets, models, cells


def acceptance(model: str, sets: list[str], cells: dict[tuple[str, str], dict]) -> dict:
    """The acceptance checks of one model (see the module docstring); ``reasons`` lists every miss."""
    reference_sets = [s for s in sets if ("exact_gp", s) in cells and cells[("exact_gp", s)]["ok"]]
    run_sets = [s for s in sets if (model, s) in cells]
    deltas = {s: (cells[(model, s)]["delta"] if (model, s) in cells and math.isfinite(cells[(model, s)]["delta"])
                  else math.inf) for s in reference_sets if (model, s) in cells}
    coverage = {s: cells[(model, s)]["coverage"] for s in run_sets}
    in_range = [s for s, c in coverage.items() if COVERAGE_RANGE[0] <= c <= COVERAGE_RANGE[1]]
    failures = [(s, split, label, error) for s in run_sets for split, label, error in cells[(model, s)]["failures"]]
    result: dict[str, Any] = {
        "sets": len(run_sets), "failures": failures,
        "median": float(np.median(list(deltas.values()))) if deltas else math.nan,
        "worst": max(deltas.values()) if deltas else math.nan,
        "worst_set": max(deltas, key=deltas.get) if deltas else "",
        "coverage_in_range": len(in_range), "coverage_fraction": len(in_range) / len(run_sets) if run_sets else 0.0,
    }
    result["pass_failures"] = not failures and bool(run_sets)
    result["pass_median"] = bool(deltas) and result["median"] <= MEDIAN_DELTA_MAX
    result["pass_worst"] = bool(deltas) and result["worst"] <= WORST_DELTA_MAX
    result["pass_coverage"] = bool(run_sets) and result["coverage_fraction"] >= COVERAGE_FRACTION
    reasons = []
    if failures:
        kinds: dict[str, int] = {}
        for _, _, label, _ in failures:
            kinds[label] = kinds.get(label, 0) + 1
        reasons.append(f"{len(failures)} failed fit(s) (" + ", ".join(f"{v} {k}" for k, v in kinds.items())
                       + "; see Failures)")
    if not deltas:
        reasons.append("no ΔNLPD: no set with both this model and ExactGP")
    else:
        if not result["pass_median"]:
            reasons.append(f"median ΔNLPD {_num(result['median'])} > {MEDIAN_DELTA_MAX}")
        if not result["pass_worst"]:
            above = sorted((s for s, d in deltas.items() if d > WORST_DELTA_MAX), key=lambda s: -deltas[s])
            reasons.append("ΔNLPD > 0.5 on " + ", ".join(f"{s} ({_num(deltas[s])})" for s in above))
    if not result["pass_coverage"]:
        outside = [f"{s} ({_num(c, 2)})" for s, c in coverage.items() if s not in in_range]
        reasons.append(f"coverage outside [0.90, 0.98] on {len(outside)} of {len(run_sets)} sets: "
                       + ", ".join(outside))
    result["reasons"] = reasons
    return result


def _num(value: float, digits: int = 3) -> str:
    if math.isinf(value):
        return "∞ (no result)"
    return "—" if not math.isfinite(value) else f"{value:.{digits}f}"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def reference_check(sets: list[str], rows: list[dict]) -> list[dict]:
    """ExactGP against the scikit-learn reference per set: mean over the splits where both have a result of
    NLPD(ExactGP) − NLPD(sklearn). ``pass``: |Δ| ≤ 0.05 (the issue's "within 0.05 nats"); ``not_worse``:
    Δ ≤ 0.05 (ExactGP better than the reference by any margin). ``plain_delta``: the same difference for
    ExactGP(prior=None), when it ran."""
    results = []
    for dataset in sets:
        by_split: dict[int, dict[str, dict]] = {}
        for r in rows:
            if r["dataset"] == dataset and r["model"] in ("exact_gp", REFERENCE, PLAIN_ML):
                by_split.setdefault(int(r["split"]), {})[r["model"]] = r
        if not by_split:
            continue
        pairs = [(float(v["exact_gp"]["nlpd"]), float(v[REFERENCE]["nlpd"])) for v in by_split.values()
                 if "exact_gp" in v and REFERENCE in v and _has_result(v["exact_gp"]) and _has_result(v[REFERENCE])]
        plain = [float(v[PLAIN_ML]["nlpd"]) - float(v[REFERENCE]["nlpd"]) for v in by_split.values()
                 if PLAIN_ML in v and REFERENCE in v and _has_result(v[PLAIN_ML]) and _has_result(v[REFERENCE])]
        missing = sorted({f"{MODELS[m]} {failure_label(r)}" for v in by_split.values() for m, r in v.items()
                          if not _has_result(r)})
        delta = float(np.mean([a - b for a, b in pairs])) if pairs else math.nan
        results.append({"dataset": dataset, "splits": len(pairs), "delta": delta,
                        "exact": float(np.mean([a for a, _ in pairs])) if pairs else math.nan,
                        "reference": float(np.mean([b for _, b in pairs])) if pairs else math.nan,
                        "pass": bool(pairs) and abs(delta) <= REFERENCE_TOLERANCE,
                        "not_worse": bool(pairs) and delta <= REFERENCE_TOLERANCE,
                        "plain_delta": float(np.mean(plain)) if plain else math.nan,
                        "missing": ", ".join(missing)})
    return results


def svgp_reference_check(sets: list[str], rows: list[dict]) -> list[dict]:
    """SVGP() against the hand-written GPyTorch SVGP per set, over the splits where both have a result: mean NLPD,
    RMSE and fit seconds of each, ``delta`` = NLPD(SVGP) − NLPD(GPyTorch SVGP). ``not_worse``: Δ ≤ 0.05 (the
    tolerance of the ExactGP/scikit-learn check); ``not_slower``: SVGP's mean fit seconds ≤ the reference's."""
    results = []
    for dataset in sets:
        by_split: dict[int, dict[str, dict]] = {}
        for r in rows:
            if r["dataset"] == dataset and r["model"] in ("svgp", SVGP_REFERENCE):
                by_split.setdefault(int(r["split"]), {})[r["model"]] = r
        if not by_split:
            continue
        both = [v for v in by_split.values() if "svgp" in v and SVGP_REFERENCE in v
                and _has_result(v["svgp"]) and _has_result(v[SVGP_REFERENCE])]
        mean = lambda model, key: (float(np.mean([float(v[model][key]) for v in both]))  # noqa: E731
                                   if both else math.nan)
        missing = sorted({f"{MODELS[m]} {failure_label(r)}" for v in by_split.values() for m, r in v.items()
                          if not _has_result(r)})
        result = {"dataset": dataset, "splits": len(both), "missing": ", ".join(missing),
                  **{f"{key}_{side}": mean(model, key) for key in ("nlpd", "rmse", "fit_seconds")
                     for side, model in (("svgp", "svgp"), ("reference", SVGP_REFERENCE))}}
        result["delta"] = result["nlpd_svgp"] - result["nlpd_reference"]
        result["not_worse"] = bool(both) and result["delta"] <= REFERENCE_TOLERANCE
        result["not_slower"] = bool(both) and result["fit_seconds_svgp"] <= result["fit_seconds_reference"]
        results.append(result)
    return results


def _failure_cell(failures: list[tuple[int, str, str]]) -> str:
    if not failures:
        return "0"
    return f"{len(failures)}: " + "; ".join(f"s{split} {label}" for split, label, _ in failures)


_CRITERIA = ("pass_failures", "pass_median", "pass_worst", "pass_coverage")


def _verdict_lines(sets: list[str], dims: dict[str, int], cells: dict, checks: dict, ref: list[dict],
                   svgp_ref: list[dict]) -> list[str]:
    failed_fits = sum(len(c["failures"]) for (m, _), c in cells.items() if m not in NOT_ASSESSED)
    not_counted = "the scikit-learn reference" + (", of the hand-written GPyTorch SVGP"
                                                  if any(m == SVGP_REFERENCE for m, _ in cells) else "")
    passing = [m for m in checks if all(checks[m][k] for k in _CRITERIA)]
    if ref:
        ref_line = (f"- ExactGP within {REFERENCE_TOLERANCE} nats of scikit-learn GPR (\\|Δ\\| ≤ {REFERENCE_TOLERANCE}) on "
                    f"every set: **{_verdict(all(r['pass'] for r in ref))}** ({sum(r['pass'] for r in ref)} of "
                    f"{len(ref)} sets); not worse than it by more than {REFERENCE_TOLERANCE}: "
                    f"{sum(r['not_worse'] for r in ref)} of {len(ref)} sets")
    else:
        ref_line = "- ExactGP against scikit-learn GPR: not run (needs both exact_gp and sklearn_gpr)"
    svgp_line = []
    if svgp_ref:
        svgp_line = [f"- SVGP() against the hand-written GPyTorch SVGP (500 inducing points, 2000 Adam steps): "
                     f"NLPD not worse by more than {REFERENCE_TOLERANCE} on {sum(r['not_worse'] for r in svgp_ref)} of "
                     f"{len(svgp_ref)} sets, fit in no more time on {sum(r['not_slower'] for r in svgp_ref)} of "
                     f"{len(svgp_ref)} sets (both: {sum(r['not_worse'] and r['not_slower'] for r in svgp_ref)})"]
    return ["## Verdict", "",
            f"- sets: {len(sets)} (" + ", ".join(f"{s} (D={dims[s]})" for s in sets) + ")",
            f"- no failure cells: **{_verdict(failed_fits == 0)}** ({failed_fits} failed fit(s) of the tnbayes "
            f"models; failures of {not_counted} and of ExactGP(prior=None) are listed but not counted)",
            ref_line, *svgp_line,
            f"- models meeting every per-model criterion: {', '.join(MODELS[m] for m in passing) or 'none'}; "
            f"missing one or more: {', '.join(MODELS[m] for m in checks if m not in passing) or 'none'}"]


def _acceptance_lines(checks: dict) -> list[str]:
    lines = ["## Acceptance per model", "",
             f"Criteria: no failed fit; median ΔNLPD to ExactGP ≤ {MEDIAN_DELTA_MAX}; worst ΔNLPD ≤ "
             f"{WORST_DELTA_MAX} (over the sets where ExactGP has a result; a set the model failed on every split "
             f"counts as ∞); mean 95% coverage in [{COVERAGE_RANGE[0]:.2f}, {COVERAGE_RANGE[1]:.2f}] on ≥ "
             f"{COVERAGE_FRACTION:.0%} of sets. Models that miss are listed with their numbers and the reasons.", "",
             "| model | sets | failed fits | median ΔNLPD | worst ΔNLPD (set) | coverage in range | failures | "
             "median | worst | coverage | reasons |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m, c in checks.items():
        worst = _num(c["worst"]) + (f" ({c['worst_set']})" if c["worst_set"] else "")
        coverage = f"{c['coverage_in_range']}/{c['sets']} ({c['coverage_fraction']:.0%})"
        verdicts = " | ".join(_verdict(c[k]) for k in _CRITERIA)
        lines.append(f"| {MODELS[m]} | {c['sets']} | {len(c['failures'])} | {_num(c['median'])} | {worst} | "
                     f"{coverage} | {verdicts} | {'; '.join(c['reasons']) or '—'} |")
    return lines


def _reference_lines(ref: list[dict]) -> list[str]:
    lines = ["## ExactGP against scikit-learn GPR", "",
             f"Mean over the splits where both have a result. Δ = NLPD(ExactGP) − NLPD(sklearn); PASS when "
             f"\\|Δ\\| ≤ {REFERENCE_TOLERANCE}; \"not worse\" when Δ ≤ {REFERENCE_TOLERANCE} (ExactGP better by any margin). "
             "The last but one column is the same difference for ExactGP(prior=None), plain ML-II with the same "
             "optimiser and starts: it tells a difference the hyper-priors make from one of the optimiser.", "",
             "| set | splits | NLPD ExactGP | NLPD sklearn | Δ | \\|Δ\\| ≤ 0.05 | not worse | "
             "Δ of ExactGP(prior=None) | not compared |", "|---|---|---|---|---|---|---|---|---|"]
    for r in ref:
        lines.append(f"| {r['dataset']} | {r['splits']} | {_num(r['exact'])} | {_num(r['reference'])} | "
                     f"{_num(r['delta'])} | {_verdict(r['pass'])} | {'yes' if r['not_worse'] else 'no'} | "
                     f"{_num(r['plain_delta'])} | {r['missing'] or '—'} |")
    return lines


def _svgp_reference_lines(svgp_ref: list[dict]) -> list[str]:
    lines = ["## SVGP() against the hand-written GPyTorch SVGP", "",
             "Means over the splits where both have a result. Δ = NLPD(SVGP) − NLPD(GPyTorch SVGP); \"not worse\" "
             f"when Δ ≤ {REFERENCE_TOLERANCE}; \"no more time\" when SVGP's mean fit seconds are at most the "
             "reference's (benchmarks/_gpytorch_svgp.py: the GPyTorch tutorial's SVGP, 500 inducing points, 2000 Adam "
             "steps of 1024 rows).", "",
             "| set | splits | NLPD SVGP | NLPD GPyTorch SVGP | Δ | not worse | RMSE SVGP | RMSE GPyTorch SVGP | "
             "fit s SVGP | fit s GPyTorch SVGP | no more time | not compared |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in svgp_ref:
        lines.append(f"| {r['dataset']} | {r['splits']} | {_num(r['nlpd_svgp'])} | {_num(r['nlpd_reference'])} | "
                     f"{_num(r['delta'])} | {'yes' if r['not_worse'] else 'no'} | {_num(r['rmse_svgp'], 4)} | "
                     f"{_num(r['rmse_reference'], 4)} | {_num(r['fit_seconds_svgp'], 1)} | "
                     f"{_num(r['fit_seconds_reference'], 1)} | {'yes' if r['not_slower'] else 'no'} | "
                     f"{r['missing'] or '—'} |")
    return lines


def _cell_lines(sets: list[str], models: list[str], cells: dict) -> list[str]:
    lines = ["## Per model and set", "",
             "Means over the splits with a result; ΔNLPD = NLPD − NLPD(ExactGP) on the same split; fit s = seconds "
             f"of `fit` alone; failures: split and kind (slow = fit over {SLOW_SECONDS:.0f} s, metrics kept).", "",
             "| set | D | model | splits ok | n train | RMSE | NLPD | ΔNLPD | 95% coverage | fit s | failures |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in sets:
        for m in models:
            if (m, s) in cells:
                c = cells[(m, s)]
                lines.append(f"| {s} | {c['D']} | {MODELS[m]} | {c['ok']}/{c['runs']} | {c['n_train']} | "
                             f"{_num(c['rmse'], 4)} | {_num(c['nlpd'])} | {_num(c['delta'])} | "
                             f"{_num(c['coverage'])} | {_num(c['fit_seconds'], 1)} | {_failure_cell(c['failures'])} |")
    return lines


def _failure_lines(rows: list[dict], sets: list[str]) -> list[str]:
    order = {m: i for i, m in enumerate(MODELS)}
    failed = sorted((r for r in rows if failure_label(r)),
                    key=lambda r: (sets.index(r["dataset"]), order[r["model"]], int(r["split"])))
    if not failed:
        return ["## Failures", "", "None."]
    lines = ["## Failures", "", "| set | split | model | kind | fit s | message |", "|---|---|---|---|---|---|"]
    for r in failed:
        message = str(r["error"]).replace("|", "\\|") or "—"
        lines.append(f"| {r['dataset']} | {r['split']} | {MODELS[r['model']]} | {failure_label(r)} | "
                     f"{_num(float(r['fit_seconds']), 1)} | {message} |")
    return lines


def summary_markdown(rows: list[dict], protocol: str, figure_name: str) -> str:
    """The Markdown summary of the fits in ``rows``: overall verdict, per-model acceptance, ExactGP against
    scikit-learn, the per model × set table and every failure, under :func:`benchmarks._common.header`."""
    sets, models, cells = summarize(rows)
    dims = {r["dataset"]: int(r["D"]) for r in rows}
    checks = {m: acceptance(m, sets, cells) for m in models if m not in NOT_ASSESSED}
    ref = reference_check(sets, rows) if "exact_gp" in models and REFERENCE in models else []
    svgp_ref = svgp_reference_check(sets, rows) if "svgp" in models and SVGP_REFERENCE in models else []
    sections = [_verdict_lines(sets, dims, cells, checks, ref, svgp_ref), _acceptance_lines(checks),
                _reference_lines(ref) if ref else [], _svgp_reference_lines(svgp_ref) if svgp_ref else [],
                _cell_lines(sets, models, cells), _failure_lines(rows, sets),
                [f"Figure: [{figure_name}]({figure_name}) — ΔNLPD per model and set (failure cells marked)."]]
    body = "\n\n".join("\n".join(section) for section in sections if section)
    return header("Defaults study: every regressor with no arguments, against ExactGP and scikit-learn GPR",
                  protocol) + body + "\n"


def delta_figure(rows: list[dict], path: Any) -> None:
    """Heatmap of the mean ΔNLPD to ExactGP per model (rows) and set (columns); a cell with a failed fit is
    hatched and labelled with the failure kinds, a cell without any result is grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    sets, models, cells = summarize(rows)
    dims = {r["dataset"]: int(r["D"]) for r in rows}
    values = np.full((len(models), len(sets)), np.nan)
    for i, m in enumerate(models):
        for j, s in enumerate(sets):
            if (m, s) in cells:
                values[i, j] = cells[(m, s)]["delta"]
    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="lightgrey")
    fig, ax = plt.subplots(figsize=(max(6.0, 2.5 + 0.8 * len(sets)), 2.0 + 0.5 * len(models)))
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=Normalize(-1.0, 1.0), aspect="auto")
    for i, m in enumerate(models):
        for j, s in enumerate(sets):
            cell = cells.get((m, s))
            text = "" if not math.isfinite(values[i, j]) else f"{values[i, j]:.2f}"
            if cell and cell["failures"]:
                kinds = sorted({label for _, label, _ in cell["failures"]})
                text = (text + "\n" if text else "") + "✗ " + ",".join(kinds)
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="black", lw=0.8))
            box = {"facecolor": "white", "alpha": 0.8, "linewidth": 0, "pad": 1} if cell and cell["failures"] else None
            colour = "white" if box is None and abs(np.nan_to_num(values[i, j])) > 0.6 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=6, color=colour, bbox=box)
    ax.set_xticks(range(len(sets)), [f"{s.split('/')[-1]} (D={dims[s]})" for s in sets], rotation=60, ha="right",
                  fontsize=7)
    ax.set_yticks(range(len(models)), [MODELS[m] for m in models], fontsize=8)
    ax.set_title("ΔNLPD to ExactGP (same rows, mean over splits)\nhatched ✗ = failed fit(s), grey = no ΔNLPD",
                 fontsize=9)
    fig.colorbar(image, ax=ax, label="ΔNLPD (nats; colour clipped at ±1)", fraction=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- main
def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks defaults_study",
                                     description="Every regressor with no arguments against ExactGP and sklearn GPR.")
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--splits", default="0:3", help='e.g. "0:3" or "0,4"')
    parser.add_argument("--max-train", type=int, default=2000, help="training rows drawn per split")
    parser.add_argument("--max-test", type=int, default=2000, help="test rows drawn per split")
    parser.add_argument("--timeout", type=float, default=300.0, help="hard limit of one tnbayes fit (s)")
    parser.add_argument("--reference-timeout", type=float, default=3600.0,
                        help="hard limit of one fit of a reference: scikit-learn, the hand-written GPyTorch SVGP (s)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the fits in results/defaults_study/defaults_study[_<variant>]_runs.csv and run only "
                             "the missing ones (needs the same --max-train/--max-test)")
    parser.add_argument("--variant", default="", help="names the outputs (e.g. n2000 → defaults_study_n2000.md)")
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)  # the variant's old spelling: defaults_study_<variant>
    return parser.parse_args(argv)


def _threads_text(rows: list[dict], current: int) -> str:
    """``"2 for 412 fit(s), 1 for 68 fit(s); this run 1"``: the torch threads of the stored fits and of this run."""
    counts: dict[str, int] = {}
    for r in rows:
        key = str(r.get("threads") or "?")
        counts[key] = counts.get(key, 0) + 1
    parts = [f"{k} for {v} fit(s)" for k, v in sorted(counts.items())]
    return (", ".join(parts) + f"; this run {current}") if parts else f"this run {current}"


def main(argv: list[str]) -> int:
    """Run the study; returns 0 (failed fits are results, not errors), 2 when ``--resume`` finds fits of other
    sizes."""
    args = _parse(argv)
    variant = args.variant or variant_of("defaults_study", args.out)
    runs, summary, figure = (output_path("defaults_study", suffix, variant) for suffix in ("_runs.csv", ".md", ".png"))
    rows: list[dict] = read_rows(runs) if args.resume and runs.exists() else []
    other = {(r["max_train"], r["max_test"]) for r in rows} - {(args.max_train, args.max_test)}
    if other:
        print(f"--resume: {runs} holds fits made with --max-train/--max-test {sorted(other)}, not "
              f"{args.max_train}/{args.max_test}; use the same sizes or another --variant", file=sys.stderr)
        return 2
    done = {(r["dataset"], int(r["split"]), r["model"]) for r in rows}
    references_text = " and the hand-written GPyTorch SVGP" if SVGP_REFERENCE in args.models else ""
    protocol = ("see the module docstring of benchmarks/calibration/defaults_study.py; every model built with no arguments; "
                f"training rows ≤ {args.max_train} and test rows ≤ {args.max_test} per split drawn with "
                "numpy.random.default_rng(split) / default_rng(10000 + split), the same for every model; "
                f"each fit in a child process killed after {args.timeout:g} s ({args.reference_timeout:g} s for "
                f"scikit-learn{references_text}); torch threads = the cores the run may use, per fit in the runs.csv column "
                f"`threads` ({_threads_text(rows, available_cores())}); failure = exception, NaN/inf, timeout or fit > "
                f"{SLOW_SECONDS:.0f} s")

    def write_outputs() -> None:
        write_rows([{key: r.get(key, "") for key in COLUMNS} for r in rows], runs)
        summary.write_text(summary_markdown(rows, protocol, figure.name))
        delta_figure(rows, figure)

    for dataset in args.datasets:
        n_splits = load_split(dataset, 0).n_splits
        for split in parse_splits(args.splits, n_splits):
            todo = [m for m in args.models if (dataset, split, m) not in done]
            if not todo:
                continue
            arrays = study_rows(dataset, split, args.max_train, args.max_test)
            for model in todo:
                timeout = args.reference_timeout if model in REFERENCES else args.timeout
                result = run_isolated(model, arrays, timeout)
                row = {"dataset": dataset, "D": arrays[0].shape[1], "split": split, "model": model,
                       "n_train": arrays[0].shape[0], "n_test": arrays[2].shape[0], "max_train": args.max_train,
                       "max_test": args.max_test, "threads": available_cores(), "fit_seconds": math.nan,
                       "choices": "",
                       **{key: math.nan for key in METRICS}, **result}
                rows.append(row)
                write_outputs()
                print(f"{dataset} split {split} {MODELS[model]}: {row['status']} fit {row['fit_seconds']:.1f} s "
                      f"NLPD {row['nlpd']:.3f} {row['error']}", flush=True)
    if rows:
        write_outputs()
    return 0
