"""TNKF's block update with and without its consistency check, against row by row, on fixed splits.

Protocol: split ``--split`` of each data set (the defaults study's rows: at most ``--max-train`` training and
``--max-test`` test rows, drawn as :func:`benchmarks.calibration.defaults_study.study_rows` draws them; ``synthetic``:
y = sin(3x₁)·cos(2x₂) + 0.02 ε on [−1, 1]², the case of the test suite); ``TNKF(time_budget=None)`` with its
hyper-parameters estimated as by default and the covariance/gain caps of ``--caps`` (the innovation cap equals the
gain cap), fitted three times in one process, one torch thread: row by row (``block_size=1``), in blocks of
``--block-size`` with the check of :meth:`~tnbayes.inference.kalman.TTKalmanFilter.update_block` (a rejected block
and every row after it go row by row: ``block_fallback_row_``), and in blocks with the check switched off
(``tnbayes.inference.kalman.tt_rows.BLOCK_CONSISTENCY`` set to infinity for that fit). Test RMSE, NLPD and 95%
coverage in the units of y, the fit's seconds, the row from which the checked fit went row by row, and the largest
share of ``‖r‖`` by which an accepted block missed its rows' exact posterior residual (``block_misses_``).

    python -m benchmarks tnkf_block_check                         # bike, elevators, keggdirected: ~15 minutes
    python -m benchmarks tnkf_block_check --datasets synthetic --max-train 256
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from benchmarks._common import header, output_path

ENTRY = "tnkf_block_check"


def _rows(dataset: str, split: int, max_train: int, max_test: int) -> tuple[np.ndarray, ...]:
    if dataset == "synthetic":
        rng = np.random.default_rng(split)
        X = rng.uniform(-1, 1, (max_train + max_test, 2))
        y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.02 * rng.standard_normal(X.shape[0])
        return X[:max_train], y[:max_train], X[max_train:], y[max_train:]
    from benchmarks.calibration.defaults_study import study_rows

    return study_rows(dataset, split, max_train, max_test)[:4]


def _fit(data: tuple[np.ndarray, ...], block_size: int, caps: tuple[int, int], checked: bool) -> dict:
    """One TNKF fit; returns its metrics, seconds and block diagnostics."""
    import tnbayes
    from tnbayes.inference.kalman import tt_rows

    X_train, y_train, X_test, y_test = data
    truncation = {"covariance": (1e-4, caps[0]), "gain": (1e-5, caps[1]), "innovation": (1e-4, caps[1])}
    saved = tt_rows.BLOCK_CONSISTENCY
    tt_rows.BLOCK_CONSISTENCY = saved if checked else math.inf
    try:
        start = time.perf_counter()
        model = tnbayes.TNKF(time_budget=None, block_size=block_size, truncation=truncation).fit(X_train, y_train)
        seconds = time.perf_counter() - start
    finally:
        tt_rows.BLOCK_CONSISTENCY = saved
    report = tnbayes.metrics.evaluate(model.posterior(X_test), y_test)
    misses = [m for m in model.block_misses_ if m <= saved or not checked]
    return {**report, "seconds": seconds, "fallback": model.block_fallback_row_,
            "largest_miss": max(misses) if misses else math.nan, "noise": model.measurement_noise_,
            "prior_variance": model.prior_variance_}


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {ENTRY}")
    parser.add_argument("--datasets", nargs="+", default=["wilson/bike", "wilson/elevators", "wilson/keggdirected"])
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--max-train", type=int, default=2000)
    parser.add_argument("--max-test", type=int, default=1000)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--caps", default="16:12", help="covariance:gain rank caps (the innovation's = the gain's)")
    parser.add_argument("--variant", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    caps = tuple(int(v) for v in args.caps.split(":"))
    lines = ["| data set (n, D) | R / prior variance | update | test RMSE | NLPD | 95% coverage | fit s | "
             "rows one at a time from | largest miss of an accepted block |",
             "|---|---|---|---|---|---|---|---|---|"]
    for dataset in args.datasets:
        data = _rows(dataset, args.split, args.max_train, args.max_test)
        n, D = data[0].shape
        for name, block_size, checked in (("row by row", 1, True), (f"blocks of {args.block_size}, checked",
                                                                     args.block_size, True),
                                          (f"blocks of {args.block_size}, unchecked", args.block_size, False)):
            result = _fit(data, block_size, caps, checked)
            fallback = "—" if result["fallback"] is None else str(result["fallback"])
            miss = "—" if math.isnan(result["largest_miss"]) else f"{result['largest_miss']:.2f}"
            lines.append(f"| {dataset} ({n}, {D}) | {result['noise'] / result['prior_variance']:.2g} | {name} | "
                         f"{result['rmse']:.4g} | {result['nlpd']:.3f} | {result['coverage_95']:.3f} | "
                         f"{result['seconds']:.1f} | {fallback} | {miss} |")
            print(lines[-1], flush=True)
    protocol = (f"see the module docstring of benchmarks/calibration/{ENTRY}.py; split {args.split}, at most "
                f"{args.max_train} training and {args.max_test} test rows, caps {caps[0]}/{caps[1]}, one torch thread")
    text = header("TNKF's block update with and without its consistency check", protocol) + "\n".join(lines) + "\n"
    output_path(ENTRY, ".md", args.variant or "").write_text(text)
    print(text)
    return 0
