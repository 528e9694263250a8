"""Airline side by side, one run, one command: the tensor models against SVGP on the fixed 700k/100k split.

Protocol:

* **Data**: ``datasets.load("airline")`` (Jan–Apr 2008, Hensman et al. 2013 preprocessing, 8 inputs, fixed
  700k/100k split; :func:`benchmarks._common.airline_split`); ``--n-train`` / ``--n-test`` use the first rows of
  each part. Every model sees the same rows, raw (each scales internally).
* **Models** (``--models`` selects; table order as listed, SVGP rows run first):

  - ``cpd10``, ``cpd20`` (``cpd<R>``): ``CPDKernelMachine(rank=R, num_basis=40, max_sweeps=S, out_of_box="clip",
    time_budget=None, hyper_max_points=H)``, S = ``--sweeps`` (default 3), hyper-parameters by its exact-GP fit on
    H = ``--hyper-max-points`` (default 1000, the model's default) training rows, as in ``cpd_airline``;
  - ``qtkm``: ``QTKM(rank=--qtkm-rank (20), num_basis=64, period=10, penalty=1e-10, normalize_features=False,
    max_sweeps=--qtkm-sweeps (10), tol=1e-8, time_budget=None, out_of_box="clip")``: the settings of
    ``qtkm_airline`` (the QTKM paper's airline experiment) with fewer sweeps;
  - ``hilbert_additive``: ``HilbertGP(structure="additive", out_of_box="clip")``;
  - ``svgp500``, ``svgp1000`` (``svgp<m>``): ``SVGP(num_inducing=m, time_budget=--svgp-seconds (None),
    max_iter=--svgp-steps (6000), batch_size=1024)``, its early stopping on the held-out ELBO left on; ``--svgp-inducing M …``
    replaces the SVGP rows by one per M.
* **Metrics**: test MSE of the posterior mean divided by the variance of the training targets (the MSE on y
  standardised with training statistics, the papers' unit); NLPD (minutes of delay) and 95% coverage of
  ``model.posterior(X_test)`` (new observations, noise included) by ``tnbayes.metrics.evaluate``; fit seconds
  time ``model.fit`` alone (``time.perf_counter``), one process, torch threads = ``--threads`` (default 1).
* **Time to reach SVGP's test MSE**: the target is the lowest final test MSE of the SVGP rows. An SVGP row
  reaches it with its fit seconds when its final MSE is at most the target. A tensor model whose final MSE is
  above the target does not reach it. One that reaches it with S sweeps is refitted with max_sweeps = 1, 2, 4, …
  (below the sweeps its full fit ran) and reports the fit seconds of the first refit whose test MSE is at most
  the target, else those of its full fit; HilbertGP (no sweeps) reports its fit seconds.
* **Verdict**: for each tensor model, whether its test MSE and its NLPD are lower than the best SVGP row's
  (the lowest MSE, the lowest NLPD), said plainly either way.

Output, in ``results/airline_peers/`` with stem ``airline_peers[_<variant>]`` (``--variant``; default the training
rows when ``--n-train`` is given): ``<stem>.md`` (the table and the verdict, rewritten after every row) and
``<stem>.csv`` (the rows, and every refit with ``role = refit``).

    python -m benchmarks airline_peers                          # full: 700k/100k, all six models (hours)
    python -m benchmarks airline_peers --n-train 100000 --n-test 20000 --sweeps 2 --qtkm-sweeps 3 \\
        --svgp-steps 1500                                       # the suite's small configuration
    python -m benchmarks airline_peers --models svgp500 cpd10   # a subset
"""

from __future__ import annotations

import argparse
import math
import re
import time
import warnings
from typing import Any

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from benchmarks._common import airline_split, header, output_path, write_rows
import tnbayes
from tnbayes import metrics

ENTRY = "airline_peers"
DEFAULT_MODELS = ["cpd10", "cpd20", "qtkm", "hilbert_additive", "svgp500", "svgp1000"]
#: QTKM at the settings of benchmarks/papers/qtkm_airline.py (the QTKM paper's airline experiment)
QTKM_NUM_BASIS, QTKM_PERIOD, QTKM_PENALTY = 64, 10.0, 1e-10
CPD_NUM_BASIS, SVGP_BATCH = 40, 1024
CSV_COLUMNS = ("role", "key", "model", "settings", "n_train", "n_test", "test_mse", "nlpd", "coverage_95",
               "fit_seconds", "iterations", "seconds_to_svgp_mse", "reached_with")


# ---------------------------------------------------------------------------------------------- models
def parse_key(key: str) -> tuple[str, int | None]:
    """``"cpd10"`` → ``("cpd", 10)``, ``"svgp500"`` → ``("svgp", 500)``, ``"qtkm"`` → ``("qtkm", None)``,
    ``"hilbert_additive"`` → ``("hilbert_additive", None)``; raises ``argparse.ArgumentTypeError`` otherwise."""
    if key in ("qtkm", "hilbert_additive"):
        return key, None
    match = re.fullmatch(r"(cpd|svgp)([1-9][0-9]*)", key)
    if not match:
        raise argparse.ArgumentTypeError(f"unknown model {key!r}: use cpd<R>, qtkm, hilbert_additive or svgp<m> "
                                         f"(e.g. {' '.join(DEFAULT_MODELS)})")
    return match.group(1), int(match.group(2))


def _model_key(key: str) -> str:
    parse_key(key)
    return key


def build_model(key: str, args: argparse.Namespace, sweeps: int | None = None) -> Any:
    """The unfitted model of ``key`` at this entry's settings (see the module docstring); ``sweeps`` overrides
    the sweep count of the CPD and QTKM models (the refits of the time-to-target column)."""
    kind, size = parse_key(key)
    if kind == "cpd":
        return tnbayes.CPDKernelMachine(rank=size, num_basis=CPD_NUM_BASIS, max_sweeps=sweeps or args.sweeps,
                                        out_of_box="clip", time_budget=None, hyper_max_points=args.hyper_max_points)
    if kind == "qtkm":
        return tnbayes.QTKM(rank=args.qtkm_rank, num_basis=QTKM_NUM_BASIS, period=QTKM_PERIOD, penalty=QTKM_PENALTY,
                            normalize_features=False, max_sweeps=sweeps or args.qtkm_sweeps, tol=1e-8,
                            time_budget=None, out_of_box="clip")
    if kind == "hilbert_additive":
        return tnbayes.HilbertGP(structure="additive", out_of_box="clip")
    return tnbayes.SVGP(num_inducing=size, time_budget=args.svgp_seconds, max_iter=args.svgp_steps,
                        batch_size=SVGP_BATCH)


def model_label(key: str) -> str:
    """The class name shown in the table."""
    kind, _ = parse_key(key)
    return {"cpd": "CPDKernelMachine", "qtkm": "QTKM", "hilbert_additive": "HilbertGP (additive)",
            "svgp": "SVGP"}[kind]


def _iterations(key: str, model: Any) -> int:
    """ALS sweeps run (CPD, QTKM), optimiser steps taken (SVGP); 0 for HilbertGP."""
    kind, _ = parse_key(key)
    if kind in ("cpd", "qtkm"):
        return len(model.sweep_objectives_)
    return int(model.n_iter_) if kind == "svgp" else 0


def settings_text(key: str, model: Any, args: argparse.Namespace) -> str:
    """The settings cell: what was asked for and what the fit ran."""
    kind, size = parse_key(key)
    runs = _iterations(key, model)
    if kind == "cpd":
        return f"R = {size}, M = {CPD_NUM_BASIS}, ≤ {model.max_sweeps} sweeps ({runs} run)"
    if kind == "qtkm":
        return (f"R = {args.qtkm_rank}, M = {QTKM_NUM_BASIS} quantized, P = {QTKM_PERIOD:g}, λ = {QTKM_PENALTY:g}, "
                f"≤ {model.max_sweeps} sweeps ({runs} run)")
    if kind == "hilbert_additive":
        return f"additive, M = {model.num_basis_}"
    stopped = "converged" if getattr(model, "converged_", False) else "not converged"
    return f"m = {model.num_inducing_}, batch {model.batch_size_}, ≤ {args.svgp_steps} steps ({runs} run, {stopped})"


def fit_and_score(key: str, data: tuple[np.ndarray, ...], args: argparse.Namespace,
                  sweeps: int | None = None) -> tuple[Any, dict]:
    """Fit one model (timing ``fit`` alone) and score it on the test rows.

    Returns
    -------
    model
        The fitted model.
    dict
        ``test_mse`` (standardised y), ``nlpd``, ``coverage_95``, ``fit_seconds``, ``iterations``.
    """
    Xtr, ytr, Xte, yte = data
    model = build_model(key, args, sweeps)
    start = time.perf_counter()
    model.fit(Xtr, ytr)
    seconds = time.perf_counter() - start
    post = model.posterior(Xte)
    scores = metrics.evaluate(post, yte)
    mean = post.mean.detach().to("cpu").double().numpy()
    return model, {"test_mse": float(np.mean((mean - yte) ** 2) / np.var(ytr)), "nlpd": float(scores["nlpd"]),
                   "coverage_95": float(scores["coverage_95"]), "fit_seconds": seconds,
                   "iterations": _iterations(key, model)}


# ---------------------------------------------------------------------------------------------- time to target
def time_to_target(key: str, row: dict, target: float | None, data: tuple[np.ndarray, ...],
                   args: argparse.Namespace, refits: list[dict]) -> tuple[float, str]:
    """Seconds the model of ``row`` needed to reach the test MSE ``target`` and how (see the module docstring);
    NaN and the reason when it did not. Refits of the CPD and QTKM models are appended to ``refits``."""
    kind, _ = parse_key(key)
    if target is None:
        return math.nan, "— (no SVGP row)"
    if row["test_mse"] > target:
        return math.nan, "not reached"
    if kind in ("svgp", "hilbert_additive"):
        return row["fit_seconds"], "the full fit"
    sweeps = 1
    while sweeps < row["iterations"]:
        with warnings.catch_warnings():  # the refits stop early on purpose: their ConvergenceWarning is no news
            warnings.simplefilter("ignore", ConvergenceWarning)
            _, refit = fit_and_score(key, data, args, sweeps=sweeps)
        refits.append({**row, **refit, "role": "refit", "settings": f"max_sweeps = {sweeps}",
                       "seconds_to_svgp_mse": "", "reached_with": ""})
        print(f"  refit {key} max_sweeps={sweeps}: test MSE {refit['test_mse']:.4f} fit {refit['fit_seconds']:.1f} s",
              flush=True)
        if refit["test_mse"] <= target:
            return refit["fit_seconds"], _sweeps_text(sweeps)
        sweeps *= 2
    return row["fit_seconds"], f"{_sweeps_text(row['iterations'])}: the full fit"


def _sweeps_text(sweeps: int) -> str:
    return f"{sweeps} sweep{'s' if sweeps != 1 else ''}"


def _seconds(value: float) -> str:
    """Seconds for a table cell: one decimal below 10 s, whole seconds above."""
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def _reach_cell(row: dict) -> str:
    seconds, how = row["seconds_to_svgp_mse"], row["reached_with"]
    return f"{_seconds(seconds)} ({how})" if math.isfinite(seconds) else how


# ---------------------------------------------------------------------------------------------- output
def _name(row: dict) -> str:
    return f"{row['model']} ({row['settings'].split(',')[0]})" if row["key"].startswith(("cpd", "svgp")) \
        else row["model"]


def verdict_lines(rows: list[dict]) -> list[str]:
    """For every tensor row: does it beat the best SVGP row in test MSE, in NLPD? Said plainly either way."""
    svgp = [r for r in rows if r["key"].startswith("svgp")]
    tensor = [r for r in rows if not r["key"].startswith("svgp")]
    if not svgp or not tensor:
        return ["## Verdict", "", "Needs at least one SVGP row and one tensor-model row: no comparison."]
    best_mse = min(svgp, key=lambda r: r["test_mse"])
    best_nlpd = min(svgp, key=lambda r: r["nlpd"])
    lines = ["## Verdict", "",
             f"Best SVGP: test MSE {best_mse['test_mse']:.4f} ({_name(best_mse)}), NLPD {best_nlpd['nlpd']:.4f} "
             f"({_name(best_nlpd)}). \"Beats\" = strictly lower.", ""]
    both = []
    for r in tensor:
        mse, nlpd = r["test_mse"] < best_mse["test_mse"], r["nlpd"] < best_nlpd["nlpd"]
        if mse and nlpd:
            both.append(_name(r))
        lines.append(f"- {_name(r)}: test MSE {r['test_mse']:.4f} — "
                     f"{'beats' if mse else '**does not beat**'} SVGP in MSE; NLPD {r['nlpd']:.4f} — "
                     f"{'beats' if nlpd else '**does not beat**'} SVGP in NLPD.")
    lines += ["", (f"Tensor models that beat SVGP on airline in both MSE and NLPD: {', '.join(both)}." if both else
                   "**No tensor model beats SVGP on airline in both MSE and NLPD.**")]
    return lines


def table_lines(rows: list[dict]) -> list[str]:
    """The table, one line per model."""
    lines = ["| model | settings | N train | N test | test MSE (std. y) | NLPD | 95% coverage | fit s | "
             "s to reach SVGP's MSE |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['settings']} | {r['n_train']} | {r['n_test']} | {r['test_mse']:.4f} | "
                     f"{r['nlpd']:.4f} | {r['coverage_95']:.3f} | {_seconds(r['fit_seconds'])} | {_reach_cell(r)} |")
    return lines


def write_outputs(rows: list[dict], refits: list[dict], order: list[str], protocol: str, variant: str) -> None:
    """The Markdown table with its verdict and the CSV (rows in table order, then the refits)."""
    rows = sorted(rows, key=lambda r: order.index(r["key"]))
    text = (header("Airline side by side: tensor models against SVGP", protocol) + "\n".join(table_lines(rows))
            + "\n\n" + "\n".join(verdict_lines(rows)) + "\n")
    output_path(ENTRY, ".md", variant).write_text(text)
    write_rows([{column: r.get(column, "") for column in CSV_COLUMNS} for r in rows + refits],
               output_path(ENTRY, ".csv", variant))


# ---------------------------------------------------------------------------------------------- main
def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {ENTRY}",
                                     description="CPD, QTKM, additive HilbertGP and SVGP on airline, one run.")
    parser.add_argument("--models", nargs="+", type=_model_key, default=DEFAULT_MODELS,
                        help="cpd<R>, qtkm, hilbert_additive, svgp<m> (default: %(default)s)")
    parser.add_argument("--svgp-inducing", nargs="+", type=int, default=None,
                        help="replace the SVGP rows of --models by one per inducing count")
    parser.add_argument("--n-train", type=int, default=None, help="use only the first n training rows")
    parser.add_argument("--n-test", type=int, default=None, help="score only the first n test rows")
    parser.add_argument("--sweeps", type=int, default=3, help="ALS sweeps of the CPD models")
    parser.add_argument("--hyper-max-points", type=int, default=1000,
                        help="rows of the CPD models' exact-GP hyper-parameter fit")
    parser.add_argument("--qtkm-sweeps", type=int, default=10, help="ALS sweeps of QTKM")
    parser.add_argument("--qtkm-rank", type=int, default=20)
    parser.add_argument("--svgp-steps", type=int, default=6000, help="SVGP optimiser steps (max_iter)")
    parser.add_argument("--svgp-seconds", type=float, default=None,
                        help="SVGP time_budget in seconds (default: none; the steps and the early stop end the fit)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--variant", default=None, help="names the outputs (default: the training rows, if given)")
    args = parser.parse_args(argv)
    if args.svgp_inducing:
        args.models = [k for k in args.models if not k.startswith("svgp")] + [f"svgp{m}" for m in args.svgp_inducing]
    args.models = list(dict.fromkeys(args.models))
    return args


def main(argv: list[str]) -> int:
    """Run the comparison; returns 0."""
    args = _parse(argv)
    variant = args.variant if args.variant is not None else (str(args.n_train) if args.n_train else "")
    Xtr, ytr, Xte, yte = airline_split(args.n_train)
    data = (Xtr, ytr, Xte[:args.n_test], yte[:args.n_test])
    order = sorted(args.models, key=lambda k: (parse_key(k)[0] == "svgp", args.models.index(k)))
    protocol = (f"see the module docstring of benchmarks/calibration/{ENTRY}.py; fixed airline split, the first "
                f"{len(data[1])} training and {len(data[3])} test rows; test MSE = MSE of the posterior mean / "
                "var(y_train); NLPD in minutes of delay; fit s = `model.fit` alone, one process, "
                f"{args.threads} torch thread(s); s to reach SVGP's MSE: refits with max_sweeps = 1, 2, 4, … for the "
                "sweep-based models, the full fit otherwise")
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    rows: list[dict] = []
    refits: list[dict] = []

    def run_row(key: str) -> dict:
        model, scores = fit_and_score(key, data, args)
        return {"role": "final", "key": key, "model": model_label(key), "settings": settings_text(key, model, args),
                "n_train": len(data[1]), "n_test": len(data[3]), **scores,
                "seconds_to_svgp_mse": math.nan, "reached_with": "(pending)"}

    try:
        svgp_keys = [k for k in order if parse_key(k)[0] == "svgp"]
        for key in svgp_keys:  # first: they set the target of the time-to-target column
            rows.append(run_row(key))
            print(table_lines(rows[-1:])[-1], flush=True)
            write_outputs(rows, refits, order, protocol, variant)
        target = min((r["test_mse"] for r in rows), default=None)
        for row in rows:
            row["seconds_to_svgp_mse"], row["reached_with"] = time_to_target(row["key"], row, target, data, args,
                                                                             refits)
        for key in (k for k in order if k not in svgp_keys):
            row = run_row(key)
            row["seconds_to_svgp_mse"], row["reached_with"] = time_to_target(key, row, target, data, args, refits)
            rows.append(row)
            print(table_lines(rows[-1:])[-1], flush=True)
            write_outputs(rows, refits, order, protocol, variant)
        write_outputs(rows, refits, order, protocol, variant)
    finally:
        torch.set_num_threads(previous_threads)
    print("\n".join(table_lines(sorted(rows, key=lambda r: order.index(r["key"])))), flush=True)
    return 0
