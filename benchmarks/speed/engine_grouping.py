"""ALS normal equations per row against per distinct input value (exact) on airline: seconds for one pass over all cores.

Protocol: a seeded random subset of ``--n`` rows of the fixed airline training split, inputs min–max scaled to
[−0.5, 0.5], y standardised; raw Fourier features with M = 64, P = 10 (the QTKM airline set-up); random cores;
``CPDALS.normal_equations`` for every core, once with ``group_inputs=False`` (per-row accumulation) and once with
``"auto"`` (per distinct value of the core's input column; airline's columns take 4 … 1439 values), in the same
process, one after the other; the ratio is the speed-up, the relative difference of the last Gram the exactness.

    python -m benchmarks engine_grouping                 # 50k rows
    python -m benchmarks engine_grouping --n 200000
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks._common import header, output_path
from tnbayes import datasets
from tnbayes.basis import FourierPolynomialFeatures
from tnbayes.inference import CPDALS


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks engine_grouping")
    parser.add_argument("--n", type=int, default=50000)
    args = parser.parse_args(argv)
    split = datasets.load("airline")
    index = torch.randperm(len(split.y_train), generator=torch.Generator().manual_seed(0))[: args.n]
    X, y = torch.tensor(split.X_train)[index], torch.tensor(split.y_train)[index]
    y = (y - y.mean()) / y.std()
    low, high = X.min(0).values, X.max(0).values
    X = (X - low) / (high - low).clamp_min(1e-12) - 0.5
    lines = ["| model | R | cores | unknowns per core | per row, s | per distinct value, s | speed-up | max rel. difference |",
             "|---|---|---|---|---|---|---|---|"]
    for quantized, rank in ((False, 4), (False, 8), (True, 20), (True, 40)):
        features = FourierPolynomialFeatures(8, 64, period=10.0, quantized=quantized, normalize=False)
        seconds, grams = {}, {}
        for grouping in (False, "auto"):
            engine = CPDALS(features, X, y, rank, 1e-10 * len(y), group_inputs=grouping, seed=0)
            start = time.perf_counter()
            for mode in range(features.num_modes):
                grams[grouping] = engine.normal_equations(mode).gram
            seconds[grouping] = time.perf_counter() - start
        difference = float((grams[False] - grams["auto"]).abs().max() / grams[False].abs().max())
        lines.append(f"| {'QTKM' if quantized else 'TKM'} | {rank} | {features.num_modes} | "
                     f"{features.mode_sizes[0] * rank} | {seconds[False]:.2f} | {seconds['auto']:.2f} | "
                     f"{seconds[False] / seconds['auto']:.1f}× | {difference:.1e} |")
        print(lines[-1], flush=True)
    protocol = (f"airline, {len(y)} random training rows; M = 64, P = 10, raw Fourier features; normal equations of "
                "every core once; both paths in the same process")
    text = header("ALS normal equations: per row vs per distinct input value", protocol) + "\n".join(lines) + "\n"
    output_path("engine_grouping", ".md").write_text(text)
    print(text)
    return 0
