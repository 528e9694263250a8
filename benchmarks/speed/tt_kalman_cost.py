"""Cost per data point of the primal TT Kalman filter against the correction rank and the input dimension D.

Synthetic inputs uniform in [−1, 1]^D, y = sin(2x₁)·cos(x_D) + 0.1 ε; SE kernel with fixed hyper-parameters
(ℓ = 1.4, σ_f² = 1.3, σ² = 0.05), M basis functions per input, batches of 8 rows; each configuration filters
``--rows`` rows after one warm-up batch and reports seconds per row (median of the batches) and the largest
rank of the correction C. Next to it, where the M^D × M^D covariance fits (M^D ≤ 4096), a dense square-root
Kalman filter over the same weights (the same batch update, dense matrices), timed in the same process.

    python -m benchmarks tt_kalman_cost                          # D ∈ {2, 4, 6, 8}, ranks 5, 10, 20
    python -m benchmarks tt_kalman_cost --dims 2 4 --ranks 5 --rows 32
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from benchmarks._common import header, output_path
from tnbayes.basis import HilbertBasis
from tnbayes.inference.kalman import kalman_batch_update
from tnbayes.tensors.tt import TTVector

LENGTHSCALE, OUTPUTSCALE, NOISE, BATCH = 1.4, 1.3, 0.05, 8


def _problem(D: int, M: int, rows: int):
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.uniform(-1, 1, (rows + BATCH, D)))
    y = torch.sin(2 * X[:, 0]) * torch.cos(X[:, -1]) + 0.1 * torch.as_tensor(rng.standard_normal(rows + BATCH))
    basis = HilbertBasis(M, L=[2.0] * D, center=[0.0] * D, num_dims=D)
    weights = basis.spectral_weights(torch.full((D,), LENGTHSCALE, dtype=torch.float64), "se", None)
    prior_root = (OUTPUTSCALE ** (0.5 / D)) * weights.to(torch.float64)
    return X, y, basis, prior_root


def _tt_seconds_per_row(D: int, M: int, rank: int, rows: int) -> tuple[float, int]:
    X, y, basis, prior_root = _problem(D, M, rows)
    mean = TTVector([torch.zeros(1, M, 1, dtype=torch.float64) for _ in range(D)])
    correction, times = None, []
    generator = torch.Generator().manual_seed(0)
    for first in range(0, rows + BATCH, BATCH):
        phi = basis.eigenfunctions(X[first:first + BATCH])
        start = time.perf_counter()
        mean, correction = kalman_batch_update(mean, prior_root, correction, phi, y[first:first + BATCH], NOISE,
                                               tol=1e-8, max_rank=rank, generator=generator)
        if first > 0:  # the first batch is the warm-up
            times.append((time.perf_counter() - start) / BATCH)
    return statistics.median(times), max(correction.ranks)


def _dense_seconds_per_row(D: int, M: int, rows: int) -> float:
    X, y, basis, prior_root = _problem(D, M, rows)
    diag = prior_root[0]
    for d in range(1, D):
        diag = torch.kron(diag, prior_root[d])
    L, m, times = torch.diag(diag), torch.zeros(diag.numel(), dtype=torch.float64), []
    for first in range(0, rows + BATCH, BATCH):
        phi = basis.eigenfunctions(X[first:first + BATCH])  # (D, B, M)
        start = time.perf_counter()
        H = phi[0]
        for d in range(1, D):
            H = torch.einsum("bi,bj->bij", H, phi[d]).reshape(H.shape[0], -1)
        A = L.T @ H.T                                      # (K, B)
        S = A.T @ A + NOISE * torch.eye(A.shape[1], dtype=torch.float64)
        U = L @ A
        m = m + U @ torch.linalg.solve(S, y[first:first + BATCH] - H @ m)
        g, V = torch.linalg.eigh(A.T @ A)
        root_g = torch.sqrt(g.clamp_min(0) + NOISE)
        W = (V / (root_g * (root_g + NOISE ** 0.5))) @ V.T
        L = L - U @ (W @ A.T)
        if first > 0:
            times.append((time.perf_counter() - start) / BATCH)
    return statistics.median(times)


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks tt_kalman_cost")
    parser.add_argument("--dims", nargs="+", type=int, default=[2, 4, 6, 8])
    parser.add_argument("--ranks", nargs="+", type=int, default=[5, 10, 20])
    parser.add_argument("--num-basis", type=int, default=8)
    parser.add_argument("--rows", type=int, default=64)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    M = args.num_basis
    lines = ["| D | M^D weights | rank cap | largest rank of C | TT s / row | dense s / row | TT / dense |",
             "|---|---|---|---|---|---|---|"]
    protocol = (f"synthetic, M = {M}, batches of {BATCH}, {args.rows} rows after a warm-up batch, median seconds per "
                "row; dense = square-root Kalman filter over the M^D weights (only where M^D ≤ 4096); one torch thread")
    for D in args.dims:
        dense = _dense_seconds_per_row(D, M, args.rows) if M ** D <= 4096 else None
        for rank in args.ranks:
            seconds, largest = _tt_seconds_per_row(D, M, rank, args.rows)
            ratio = f"{seconds / dense:.2f}" if dense else "—"
            lines.append(f"| {D} | {M ** D:,} | {rank} | {largest} | {seconds:.4f} | "
                         f"{f'{dense:.4f}' if dense else '— (does not fit)'} | {ratio} |")
            print(lines[-1], flush=True)
            text = header("Primal TT Kalman filter: cost per data point", protocol) + "\n".join(lines) + "\n"
            output_path("tt_kalman_cost", ".md").write_text(text)
    print(text)
    return 0
