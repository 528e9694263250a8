"""Speed of the CPD ALS engine: Gram-assembly throughput against a plain GEMM, and seconds per sweep vs N and D.

1. Throughput: one core's normal equations (features of the chunk, product of the other cores' cached
   projections, row-wise Khatri–Rao design rows, AᵀA and Aᵀy accumulated over chunks) against a single
   plain GEMM AᵀA of the same (N × MR) shape on a pre-formed matrix, timed in the same run (best of 3).
   The ratio t_GEMM / t_assembly is the fraction of GEMM throughput reached (goal ≥ 0.6).
2. Seconds per sweep (2D − 2 core updates) on synthetic uniform data for N = 10⁴ … 10⁶ (D = 8) and
   D = 2 … 16 (N = 10⁵), M = 20, R = 10, float64.

    python -m benchmarks cpd_speed            # about 5 minutes on 2 cores
    python -m benchmarks cpd_speed --quick
    python -m benchmarks cpd_speed --tiny             # smoke-test sizes
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks._common import header, output_path
from tnbayes.basis import HilbertBasis
from tnbayes.basis import BasisFeatures
from tnbayes.inference import CPDALS


def _engine(n: int, d: int, m: int, r: int, seed: int = 0) -> CPDALS:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 2 - 1
    y = torch.sin(3 * X[:, 0]) * torch.cos(2 * X[:, 1 % d]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    features = BasisFeatures(HilbertBasis(m, L=[1.5] * d), [0.5] * d)
    return CPDALS(features, X, y, r, 0.1, seed=seed)


def _best_of(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def throughput(n: int, d: int, m: int, r: int) -> dict:
    engine = _engine(n, d, m, r)
    design = torch.cat([engine.design_rows(engine.X, 1, rows) for rows in engine._chunks()])
    t_gemm = _best_of(lambda: design.mT @ design)
    t_assembly = _best_of(lambda: engine.normal_equations(1))
    flops = 2.0 * n * (m * r) ** 2
    return {"N": n, "D": d, "M": m, "R": r, "gemm_s": t_gemm, "assembly_s": t_assembly,
            "gemm_gflops": flops / t_gemm / 1e9, "fraction": t_gemm / t_assembly, "chunk": engine.chunk_size}


def sweep_seconds(n: int, d: int, m: int, r: int) -> float:
    engine = _engine(n, d, m, r)
    order = engine.sweep_order()
    t0 = time.perf_counter()
    for i, mode in enumerate(order):
        engine.update_core(mode, order[(i + 1) % len(order)])
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks cpd_speed")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="smoke-test sizes")
    args = parser.parse_args(argv)
    args.quick = args.quick or args.tiny
    m, r = 20, 10
    configs = [(100_000, 8, 20, 10), (100_000, 8, 40, 10), (50_000, 8, 40, 20)]
    ns = [10_000, 100_000, 1_000_000]
    ds = [2, 4, 8, 16]
    if args.quick:
        configs, ns, ds = [(20_000, 4, 20, 10)], [10_000, 30_000], [2, 4]
    if args.tiny:
        configs, ns, ds = [(2_000, 4, 8, 4)], [1_000], [2]
    lines = ["## Gram-assembly throughput (fraction of a plain GEMM of the same shape, same run)", "",
             "| N | D | M | R | chunk rows | GEMM AᵀA s | GEMM GFLOP/s | assembly s | fraction |", "|---|---|---|---|---|---|---|---|---|"]
    for cfg in configs:
        res = throughput(*cfg)
        lines.append(f"| {res['N']} | {res['D']} | {res['M']} | {res['R']} | {res['chunk']} | {res['gemm_s']:.3f} | "
                     f"{res['gemm_gflops']:.1f} | {res['assembly_s']:.3f} | {res['fraction']:.2f} |")
        print(lines[-1], flush=True)
    lines += ["", f"## Seconds per ALS sweep (M = {m}, R = {r}, float64; a sweep = 2D − 2 core updates)", "",
              "| N | D | core updates | seconds per sweep | seconds per update / N (µs) |", "|---|---|---|---|---|"]
    for n in ns:
        s = sweep_seconds(n, 8 if not args.quick else 4, m, r)
        updates = 2 * (8 if not args.quick else 4) - 2
        lines.append(f"| {n} | {8 if not args.quick else 4} | {updates} | {s:.2f} | {1e6 * s / updates / n:.3f} |")
        print(lines[-1], flush=True)
    for d in ds:
        n = 100_000 if not args.quick else (1_000 if args.tiny else 10_000)
        s = sweep_seconds(n, d, m, r)
        updates = max(1, 2 * d - 2)
        lines.append(f"| {n} | {d} | {updates} | {s:.2f} | {1e6 * s / updates / n:.3f} |")
        print(lines[-1], flush=True)
    lines += ["", "Linear growth shows as a constant last column: time per core update per data point."]
    variant = "quick" if args.quick else ""
    text = header("CPD ALS engine speed", "synthetic uniform inputs in [-1, 1]^D, Hilbert SE features ℓ = 0.5, "
                  "λ = 0.1, default chunking and projection cache; best of 3 for throughput") + "\n".join(lines) + "\n"
    output_path("cpd_speed", ".md", variant).write_text(text)
    print(text, flush=True)
    return 0
