"""CPU against GPU: the same fits with ``device="cpu"`` and ``device="cuda"``, one process, one run.

Protocol: every workload is fitted once per device in ``--devices`` (default: ``cpu``, ``cpu@1`` and, where one is
visible, ``cuda``), in the order given, on the same rows with the same arguments, float64; ``cpu@N`` is the CPU
with N torch threads, plain ``cpu`` has ``--threads`` (default: every core of the machine). Before the timed fits an untimed
warm-up fit of each model class runs on a tiny problem on every device (CUDA context, cuBLAS/cuSOLVER handles and
the first-kernel compilations are not a fit's cost). The time is the model's own: the filter's seconds per row for the Kalman filters
(``fit_seconds_per_row_`` / ``seconds_per_row_``, hyper-parameter estimation excluded), the whole ``fit`` call for
the others (``time.perf_counter`` after ``torch.cuda.synchronize``). Accuracy is read on each device's own fit, so
a row also shows that the devices give the same model. GPU speed-up = the fastest CPU row's seconds per row / the
GPU's.

Workloads (``--workloads``):

* ``sinc``: ``TNKF`` with the TNKF paper's settings (``benchmarks/papers/tnkf_sinc.py``) on the noisy sinc with
  2¹⁴ training rows, the first ``--sinc-rows`` (1024) streamed; test RMSE.
* ``adult``: ``TNKFClassifier`` with the ``cv`` configuration of ``benchmarks/papers/tnkf_classification.py`` on 3⁹
  Adult training rows, the first ``--adult-rows`` (200) streamed; test accuracy on the first 2000 test rows.
* ``airline_tt``: ``TTKalmanGP(max_num_basis=4, max_rank=5, smoothing="none")`` (the filter alone) on the first
  100 000 airline training rows, the first ``--tt-rows`` (2048) streamed; test MSE (standardised y) on the first
  10 000 test rows.
* ``airline_tt_smoothing``: ``TTKalmanGP(max_num_basis=4, max_rank=5, time_budget=None)`` on the first
  ``--n-train`` (100 000) airline training rows: the filter streams the first ``--tt-rows`` rows, then the ALS
  smoothing (the default) sweeps every row and refits without a held-out fifth for the predictive noise; the whole
  ``fit`` call is timed and divided by the training rows; test MSE on 10 000 test rows.
* ``airline_cpd``: ``CPDKernelMachine(rank=10, num_basis=40, max_sweeps=3, time_budget=None, out_of_box="clip")``
  on the first ``--n-train`` (100 000) airline rows; test MSE on 10 000 test rows.
* ``airline_hilbert``: ``HilbertGP(structure="additive", out_of_box="clip")``, same rows.
* ``airline_svgp``: ``SVGP(num_inducing=500, max_iter=--svgp-steps (500), batch_size=1024, time_budget=None,
  tol=0)``, same rows (no early stop: every device runs the same steps).
* ``airline_exact``: ``ExactGP(num_restarts=0, max_iter=50)`` on the first ``--exact-rows`` (4096) rows.

    python -m benchmarks device_speed                     # on a GPU machine: every workload, CPU and CUDA
    python -m benchmarks device_speed --devices cpu --quick
"""

from __future__ import annotations

import argparse
import os
import time
import traceback
import warnings
from typing import Any, Callable

import numpy as np
import torch

from benchmarks._common import airline_split, header, output_path

ENTRY = "device_speed"
WORKLOADS = ("sinc", "adult", "airline_tt", "airline_tt_smoothing", "airline_cpd", "airline_hilbert", "airline_svgp",
             "airline_exact")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed_fit(model: Any, X: Any, y: Any, device: str) -> float:
    _sync(device)
    start = time.perf_counter()
    model.fit(X, y)
    _sync(device)
    return time.perf_counter() - start


#: the airline rows of the workloads, loaded once per (training rows, test rows)
_AIRLINE: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}


def _airline(rows: int, test_rows: int) -> tuple[np.ndarray, ...]:
    key = (rows, test_rows)
    if key not in _AIRLINE:
        Xtr, ytr, Xte, yte = airline_split(rows)
        _AIRLINE[key] = (Xtr, ytr, Xte[:test_rows], yte[:test_rows])
    return _AIRLINE[key]


def _standardised_mse(model: Any, X_test: np.ndarray, y_test: np.ndarray, y_train: np.ndarray) -> float:
    mean = model.posterior(X_test).mean.detach().cpu().double().numpy()
    return float(np.mean((mean - y_test) ** 2) / np.var(y_train))


def run_workload(name: str, device_spec: str, args: argparse.Namespace) -> dict:
    """One fit of workload ``name`` on ``device_spec`` (``cpu``, ``cpu@N`` or a CUDA device); seconds, rows, what
    the seconds count, and the accuracy."""
    device, _, threads = device_spec.partition("@")
    torch.set_num_threads(int(threads) if threads else (args.threads or os.cpu_count() or 1))
    return _run_workload(name, device, args)


def _run_workload(name: str, device: str, args: argparse.Namespace) -> dict:
    import tnbayes
    from tnbayes import datasets, metrics

    quick = args.quick
    if name == "sinc":
        from benchmarks.papers.tnkf_sinc import PAPER_TRUNCATION

        n = 2**10 if quick else 2**14
        data = datasets.make_sinc(n_train=n, n_test=n // 2, seed=0)
        x_std = float(np.asarray(data.X_train).std())
        model = tnbayes.TNKF(lengthscale=0.05 / x_std, outputscale=1.0, gamma=0.005, measurement_noise=0.01,
                             prior_variance=1.0, truncation=PAPER_TRUNCATION, normalize_y=False, mode_size=1,
                             round_relative_to="state", max_rows=args.sinc_rows, device=device)
        seconds = _timed_fit(model, data.X_train, data.y_train, device)
        rmse = metrics.evaluate(model.posterior(data.X_test[:args.test_rows]), data.y_test[:args.test_rows])["rmse"]
        return {"rows": model.rows_processed_, "seconds": seconds, "per_row": model.fit_seconds_per_row_,
                "timed": "filter", "accuracy": f"test RMSE {rmse:.4f}"}
    if name == "adult":
        from benchmarks.papers.tnkf_classification import _adult_lengthscales

        data = datasets.load("adult", n_train=3**9)
        truncation = {"row": (0.0, 10), "innovation": (1e-3, 12), "gain": (1e-3, 12), "mean": 1e-4,
                      "covariance": (1e-3, 8)}
        model = tnbayes.TNKFClassifier(
            lengthscale=_adult_lengthscales(np.asarray(data.X_train), 20.0), outputscale=1.0, gamma=1.0,
            measurement_noise=1e-4, prior_variance=1.0, bias="mean", order="tree", stream_order="given",
            max_rows=args.adult_rows, truncation=truncation, mode_size=1, device=device)
        seconds = _timed_fit(model, data.X_train, data.y_train, device)
        X_test, y_test = data.X_test[:args.test_rows], np.asarray(data.y_test[:args.test_rows])
        accuracy = float(np.mean(model.predict(X_test) == y_test))
        return {"rows": model.rows_processed_, "seconds": seconds, "per_row": model.fit_seconds_per_row_,
                "timed": "filter", "accuracy": f"test accuracy {accuracy:.4f}"}
    n_train = 10_000 if quick else args.n_train
    if name == "airline_tt":
        Xtr, ytr, Xte, yte = _airline(n_train, args.test_rows)
        model = tnbayes.TTKalmanGP(max_num_basis=4, max_rank=5, max_rows=args.tt_rows, smoothing="none",
                                   device=device)
        seconds = _timed_fit(model, Xtr, ytr, device)
        return {"rows": model.rows_used_, "seconds": seconds, "per_row": model.seconds_per_row_, "timed": "filter",
                "accuracy": f"test MSE (std. y) {_standardised_mse(model, Xte, yte, ytr):.4f}"}
    if name == "airline_tt_smoothing":
        Xtr, ytr, Xte, yte = _airline(n_train, args.test_rows)
        model = tnbayes.TTKalmanGP(max_num_basis=4, max_rank=5, max_rows=args.tt_rows, time_budget=None, device=device)
        seconds = _timed_fit(model, Xtr, ytr, device)
        spent = model.budget_
        smoothing = spent["fit_seconds"] - spent["hyperparameter_seconds"] - spent["filter_seconds"]
        return {"rows": n_train, "seconds": seconds, "per_row": seconds / n_train, "timed": "whole fit",
                "accuracy": f"test MSE (std. y) {_standardised_mse(model, Xte, yte, ytr):.4f}; hyper-parameters "
                            f"{spent['hyperparameter_seconds']:.1f} s, filter {spent['filter_seconds']:.1f} s over "
                            f"{model.rows_used_} rows, smoothing with its noise refit {smoothing:.1f} s over "
                            f"{n_train} rows ({model.smoothing_sweeps_} sweeps)"}
    builders: dict[str, tuple[Callable[[], Any], int]] = {
        "airline_cpd": (lambda: tnbayes.CPDKernelMachine(rank=10, num_basis=40, max_sweeps=3, time_budget=None,
                                                         out_of_box="clip", device=device), n_train),
        "airline_hilbert": (lambda: tnbayes.HilbertGP(structure="additive", out_of_box="clip", device=device), n_train),
        "airline_svgp": (lambda: tnbayes.SVGP(num_inducing=100 if quick else 500, max_iter=args.svgp_steps,
                                              batch_size=1024, time_budget=None, tol=0.0, device=device), n_train),
        "airline_exact": (lambda: tnbayes.ExactGP(num_restarts=0, max_iter=50, device=device),
                          1024 if quick else args.exact_rows),
    }
    build, rows = builders[name]
    Xtr, ytr, Xte, yte = _airline(rows, args.test_rows)
    model = build()
    seconds = _timed_fit(model, Xtr, ytr, device)
    return {"rows": rows, "seconds": seconds, "per_row": seconds / rows, "timed": "whole fit",
            "accuracy": f"test MSE (std. y) {_standardised_mse(model, Xte, yte, ytr):.4f}"}


def warm_up(devices: list[str]) -> None:
    """An untimed tiny fit of every model class the workloads use, on every device."""
    import tnbayes

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (64, 3))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(64)
    labels = np.where(y > 0, "a", "b")
    models = [lambda d: tnbayes.TNKF(hyper_max_points=32, max_rows=16, device=d).fit(X, y),
              lambda d: tnbayes.TNKFClassifier(hyper_max_points=32, max_rows=16, device=d).fit(X, labels),
              lambda d: tnbayes.TTKalmanGP(hyper_max_points=32, max_num_basis=4, device=d).fit(X, y),
              lambda d: tnbayes.CPDKernelMachine(rank=2, num_basis=4, max_sweeps=1, hyper_max_points=32,
                                                 device=d).fit(X, y),
              lambda d: tnbayes.HilbertGP(num_basis=4, max_iter=5, device=d).fit(X, y),
              lambda d: tnbayes.SVGP(num_inducing=8, max_iter=5, device=d).fit(X, y),
              lambda d: tnbayes.ExactGP(num_restarts=0, max_iter=5, device=d).fit(X, y)]
    for device in dict.fromkeys(d.partition("@")[0] for d in devices):
        for fit in models:
            try:
                fit(device)
            except Exception as error:  # noqa: BLE001 - the timed fit of the workload reports it
                print(f"warm-up on {device} failed: {type(error).__name__}: {error}", flush=True)


def main(argv: list[str]) -> int:
    """Run the comparison; returns 0."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {ENTRY}")
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--devices", nargs="+", default=None,
                        help="cpu, cpu@N (N threads), cuda (default: cpu cpu@1, and cuda when visible)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads of the CPU fits (default: all cores)")
    parser.add_argument("--sinc-rows", type=int, default=1024)
    parser.add_argument("--adult-rows", type=int, default=200)
    parser.add_argument("--tt-rows", type=int, default=2048)
    parser.add_argument("--n-train", type=int, default=100_000, help="airline rows of cpd, hilbert and svgp")
    parser.add_argument("--exact-rows", type=int, default=4096)
    parser.add_argument("--svgp-steps", type=int, default=500)
    parser.add_argument("--test-rows", type=int, default=2000,
                        help="test rows scored (the TT filters' posterior costs about as much per row as an update)")
    parser.add_argument("--quick", action="store_true", help="small data (smoke test)")
    parser.add_argument("--variant", default=None)
    args = parser.parse_args(argv)
    devices = args.devices or (["cpu", "cpu@1"] + (["cuda"] if torch.cuda.is_available() else []))
    if any(d.startswith("cuda") for d in devices) and not torch.cuda.is_available():
        raise SystemExit("--devices names cuda, but torch sees no CUDA device")
    warnings.simplefilter("ignore")
    warm_up(devices)
    lines = ["| workload | device | rows | seconds | timed | s per row | rows per s | GPU speed-up | accuracy |",
             "|---|---|---|---|---|---|---|---|---|"]
    failures: list[str] = []
    protocol = (f"see the module docstring of benchmarks/speed/{ENTRY}.py; devices {', '.join(devices)} (plain cpu: "
                f"{args.threads or os.cpu_count()} torch threads); float64; GPU speed-up = the fastest CPU row's s per "
                f"row / the GPU's; test rows scored ≤ {args.test_rows}")

    def write() -> str:
        text = header("CPU against GPU, same fits, one run", protocol) + "\n".join(lines) + "\n"
        if failures:
            text += "\n## Failed fits\n\n" + "\n".join(failures) + "\n"
        output_path(ENTRY, ".md", args.variant or ("quick" if args.quick else "")).write_text(text)
        return text

    for workload in args.workloads:
        results: dict[str, dict] = {}
        for device in devices:
            try:
                results[device] = run_workload(workload, device, args)
            except Exception as error:  # noqa: BLE001 - a device's failure is a result of this benchmark
                failures.append(f"- {workload} on {device}: {type(error).__name__}: {error}")
                traceback.print_exc()
                continue
            r = results[device]
            speedup = ""
            cpu_rows = [v["per_row"] for k, v in results.items() if k.startswith("cpu")]
            if not device.startswith("cpu") and cpu_rows:
                speedup = f"{min(cpu_rows) / r['per_row']:.2f}×"
            lines.append(f"| {workload} | {device} | {r['rows']} | {r['seconds']:.2f} | {r['timed']} | "
                         f"{r['per_row']:.3e} | {1 / r['per_row']:.1f} | {speedup} | {r['accuracy']} |")
            print(lines[-1], flush=True)
            write()
    print(write(), flush=True)
    return 0
