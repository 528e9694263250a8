"""Cost per data point of the primal TT Kalman filter against the correction rank and the input dimension D.

Synthetic inputs uniform in [−1, 1]^D, y = sin(2x₁)·cos(x_D) + 0.1 ε; SE kernel with fixed hyper-parameters
(ℓ = 1.4, σ_f² = 1.3, σ² = 0.05), M basis functions per input, batches of 8 rows; each configuration filters
``--rows`` rows after one warm-up batch and reports seconds per row (median of the batches) and the largest
rank of the correction C. Next to it, where the M^D × M^D covariance fits (M^D ≤ 4096), a dense square-root
Kalman filter over the same weights (the same batch update, dense matrices), timed in the same process.

``--fit`` measures the model instead, for the time budget's cost model: ``TTKalmanGP`` with those hyper-parameters
given, ``time_budget=None``, ``smoothing="none"`` and each combination of ``--dims`` × ``--num-basis`` ×
``--ranks`` × ``--batches`` (defaults: D ∈ {4, 8, 16, 32}, M ∈ {8, 12}, ranks 10 and 6, batches of 4, 8 and 16),
fitted twice, over ``--warm-rows`` and over ``--rows`` rows (multiples of every batch size); seconds per row = the
difference of the two filters' seconds over the difference of the rows (the first rows, while the ranks grow to their
caps, are not counted; the table gives the ranks they reached). With the noise variance given, the fits make no
held-out predictions, which a default fit makes on its last rows (where it does not smooth). It prints the
prediction of :func:`tnbayes.inference.budget.tt_kalman_seconds_per_row`, the non-negative least-squares fit of
``TT_KALMAN_COST`` to the relative error, and the predictions the fitted constants give; the committed constants are
those of the committed run.

    python -m benchmarks tt_kalman_cost                          # D ∈ {2, 4, 6, 8}, ranks 5, 10, 20
    python -m benchmarks tt_kalman_cost --dims 2 4 --ranks 5 --rows 32
    python -m benchmarks tt_kalman_cost --fit                    # the cost model's constants → tt_kalman_cost_fit.md
    python -m benchmarks tt_kalman_cost --fit-smoothing          # the smoothing's → tt_kalman_cost_smoothing.md

``--fit-smoothing`` measures the ALS smoothing the same way (``smoothing_seconds_`` of ``TTKalmanGP`` fits over each
combination of ``--dims`` × ``--num-basis`` × ``--ranks`` (defaults as ``--fit``) × ``--smoothing-rows`` (default
600 and 2000 rows), every row filtered, then smoothed with ``max_sweeps=3`` and ``sweep_tol=0``, so three sweeps
and the Laplace pass; with the noise variance given, nothing held out), and, for each D of ``--held-out-dims``
(default 8 and 16) at the first M and rank cap over the most rows, the default noise estimate too (the noise
variance estimated, ``noise_estimate="held_out"``: three sweeps without the held-out rows, then three over all,
which the features count as they ran). It fits ``TT_SMOOTHING_COST``
(:func:`tnbayes.inference.budget.tt_smoothing_features`) to the relative error of the measured seconds and prints what
the constants in use and the fitted ones predict.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from benchmarks._common import fit_cost_constants, header, output_path
from tnbayes import TTKalmanGP
from tnbayes.basis import HilbertBasis
from tnbayes.inference.budget import (TT_KALMAN_COST, TT_SMOOTHING_COST, TT_SMOOTHING_PLANNED_SWEEPS,
                                     tt_kalman_row_features, tt_kalman_seconds_per_row, tt_smoothing_features)
from tnbayes.inference.kalman import kalman_batch_update
from tnbayes.selection.calibration import held_out_count
from tnbayes.tensors.tt import TTVector

LENGTHSCALE, OUTPUTSCALE, NOISE, BATCH = 1.4, 1.3, 0.05, 8
#: ``max_sweeps`` of the ``--fit-smoothing`` fits
SMOOTHING_SWEEPS = 3


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


def _model_seconds_per_row(D: int, M: int, rank: int, batch: int, rows: int,
                           warm_rows: int) -> tuple[float, tuple[int, int]]:
    """TTKalmanGP's filter seconds per row over rows ``warm_rows`` to ``rows`` (two fits of the same stream: the same
    rows in the same order, the same seeds), and the largest ranks of the mean and of the correction after the
    ``warm_rows`` rows."""
    X, y, _, _ = _problem(D, M, rows)
    seconds, ranks = [], (0, 0)
    for streamed in (warm_rows, rows):
        model = TTKalmanGP(num_basis=M, max_rank=rank, batch_size=batch, lengthscale=LENGTHSCALE,
                           outputscale=OUTPUTSCALE, noise_variance=NOISE, time_budget=None, smoothing="none",
                           max_rows=streamed, normalize_y=False).fit(X.numpy(), y.numpy())
        if model.rows_used_ != streamed:
            raise RuntimeError(f"TTKalmanGP filtered {model.rows_used_} rows, not {streamed}.")
        seconds.append(model.seconds_per_row_ * model.rows_used_)  # the filter's seconds (not ML-II, basis, …)
        ranks = model.rank_history_[-1] if streamed == warm_rows else ranks
    measured = (seconds[1] - seconds[0]) / (rows - warm_rows)
    if not measured > 0:
        raise RuntimeError(f"D={D} M={M} rank {rank} B={batch}: the longer fit was not slower ({seconds}); "
                           "stream more --rows.")
    return measured, ranks


def _fit_cost_model(args: argparse.Namespace) -> str:
    """The ``--fit`` run: measured against predicted seconds per row, the fitted constants; returns the markdown."""
    _model_seconds_per_row(2, 4, 2, 4, 16, 8)  # first calls (imports, allocations) outside every measured case
    cases = []
    for D in args.dims:
        for M in args.num_basis:
            for rank in args.ranks:
                for batch in args.batches:
                    start = time.perf_counter()
                    measured, ranks = _model_seconds_per_row(D, M, rank, batch, args.rows, args.warm_rows)
                    cases.append({"D": D, "M": M, "rank": rank, "batch": batch, "measured": measured, "ranks": ranks,
                                  "predicted": tt_kalman_seconds_per_row(D, M, rank, batch),
                                  "features": tt_kalman_row_features(D, M, rank, batch)})
                    print(f"D={D} M={M} rank {rank} B={batch}: {measured * 1e3:.2f} ms/row, predicted "
                          f"{cases[-1]['predicted'] * 1e3:.2f} ({time.perf_counter() - start:.0f} s)", flush=True)
    fitted = fit_cost_constants(cases, list(TT_KALMAN_COST))
    lines = ["| D | M | rank cap | rows per update | largest ranks after the uncounted rows (mean, correction) | "
             "measured ms/row | predicted ms/row | predicted / measured | refitted ms/row | refitted / measured |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        c["refit"] = sum(fitted[name] * value for name, value in c["features"].items())
        lines.append(f"| {c['D']} | {c['M']} | {c['rank']} | {c['batch']} | {c['ranks'][0]}, {c['ranks'][1]} | "
                     f"{c['measured'] * 1e3:.2f} | "
                     f"{c['predicted'] * 1e3:.2f} | {c['predicted'] / c['measured']:.2f} | {c['refit'] * 1e3:.2f} | "
                     f"{c['refit'] / c['measured']:.2f} |")
    protocol = (f"see the module docstring of benchmarks/speed/tt_kalman_cost.py (--fit); TTKalmanGP with given "
                f"hyper-parameters, no budget, no smoothing; seconds per row over rows {args.warm_rows}–{args.rows}; "
                "one torch thread; float64")
    ratios = [c["refit"] / c["measured"] for c in cases]
    predicted = [c["predicted"] / c["measured"] for c in cases]
    return (header("TTKalmanGP seconds per row against the budget's cost model", protocol) + "\n".join(lines) +
            f"\n\nPredicted / measured (the constants in use): median {np.median(predicted):.2f}, range "
            f"{min(predicted):.2f}–{max(predicted):.2f}.\n\n## TT_KALMAN_COST, fitted to these rows\n\n```python\n" +
            "\n".join(f'"{k}": {v:.3g},' for k, v in fitted.items()) + "\n```\n\n" +
            f"Refitted / measured: median {np.median(ratios):.2f}, range {min(ratios):.2f}–{max(ratios):.2f}.\n")


def _smoothing_case(D: int, M: int, rank: int, rows: int, held_out: bool) -> dict:
    """One ``--fit-smoothing`` fit: the smoothing's measured seconds and its features, counted as it ran."""
    X, y, _, _ = _problem(D, M, rows)
    model = TTKalmanGP(num_basis=M, max_rank=rank, lengthscale=LENGTHSCALE, outputscale=OUTPUTSCALE,
                       noise_variance=None if held_out else NOISE, time_budget=None, max_sweeps=SMOOTHING_SWEEPS,
                       sweep_tol=0.0, normalize_y=False).fit(X[:rows].numpy(), y[:rows].numpy())
    capped = tuple([1] + [min(rank, M ** min(k, D - k)) for k in range(1, D)] + [1])  # the ranks the features assume
    if model.rows_used_ != rows or model.smoothing_sweeps_ == 0 or model.posterior_mean_tt_.ranks != capped:
        raise RuntimeError(f"D={D} M={M} rank {rank}: {model.rows_used_} rows filtered, {model.smoothing_sweeps_} "
                           f"sweeps, ranks {model.posterior_mean_tt_.ranks}; expected {rows} rows, smoothed, ranks "
                           f"{capped}.")
    held = held_out_count(rows) if held_out else 0
    refit_sweeps = min(TT_SMOOTHING_PLANNED_SWEEPS, SMOOTHING_SWEEPS)  # as the model's held-out refit runs
    passes = [(rows - held, refit_sweeps), (rows, model.smoothing_sweeps_)] if held else \
        [(rows, model.smoothing_sweeps_)]
    features = dict.fromkeys(TT_SMOOTHING_COST, 0.0)
    for streamed, sweeps in passes:
        for name, value in tt_smoothing_features(D, M, rank, streamed, sweeps=sweeps).items():
            features[name] += value
    predicted = sum(TT_SMOOTHING_COST[name] * value for name, value in features.items())
    return {"D": D, "M": M, "rank": rank, "rows": rows, "held": held, "sweeps": model.smoothing_sweeps_,
            "measured": model.smoothing_seconds_, "features": features, "predicted": predicted}


def _fit_smoothing_cost(args: argparse.Namespace) -> str:
    """The ``--fit-smoothing`` run: measured against predicted seconds, the fitted constants; returns the markdown."""
    _smoothing_case(2, 4, 2, 64, False)  # first calls (imports, allocations) outside every measured case
    plan = [(D, M, rank, rows, False) for D in args.dims for M in args.num_basis for rank in args.ranks
            for rows in args.smoothing_rows]
    plan += [(D, args.num_basis[0], args.ranks[0], max(args.smoothing_rows), True) for D in args.held_out_dims]
    cases = []
    for D, M, rank, rows, held_out in plan:
        cases.append(_smoothing_case(D, M, rank, rows, held_out))
        c = cases[-1]
        print(f"D={D} M={M} rank {rank} rows {rows} held out {c['held']}: {c['measured']:.2f} s, predicted "
              f"{c['predicted']:.2f}", flush=True)
    fitted = fit_cost_constants(cases, list(TT_SMOOTHING_COST))
    lines = ["| D | M | rank cap | rows | held out | sweeps over all rows | measured s | predicted s | "
             "predicted / measured | refitted s | refitted / measured |", "|---" * 11 + "|"]
    for c in cases:
        c["refit"] = sum(fitted[name] * value for name, value in c["features"].items())
        lines.append(f"| {c['D']} | {c['M']} | {c['rank']} | {c['rows']} | {c['held']} | {c['sweeps']} | "
                     f"{c['measured']:.2f} | {c['predicted']:.2f} | {c['predicted'] / c['measured']:.2f} | "
                     f"{c['refit']:.2f} | {c['refit'] / c['measured']:.2f} |")
    protocol = ("see the module docstring of benchmarks/speed/tt_kalman_cost.py (--fit-smoothing); TTKalmanGP with "
                "given lengthscale and outputscale, no budget, every row filtered, smoothing_seconds_; one torch "
                "thread; float64")
    ratios = [c["refit"] / c["measured"] for c in cases]
    predicted = [c["predicted"] / c["measured"] for c in cases]
    return (header("TTKalmanGP smoothing seconds against the budget's cost model", protocol) + "\n".join(lines) +
            f"\n\nPredicted / measured (the constants in use): median {np.median(predicted):.2f}, range "
            f"{min(predicted):.2f}–{max(predicted):.2f}.\n\n## TT_SMOOTHING_COST, fitted to these rows\n\n"
            "```python\n" + "\n".join(f'"{k}": {v:.3g},' for k, v in fitted.items()) + "\n```\n\n" +
            f"Refitted / measured: median {np.median(ratios):.2f}, range {min(ratios):.2f}–{max(ratios):.2f}.\n")


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks tt_kalman_cost")
    parser.add_argument("--dims", nargs="+", type=int, default=None,
                        help="default 2 4 6 8 (with --fit: 4 8 16 32)")
    parser.add_argument("--ranks", nargs="+", type=int, default=None, help="default 5 10 20 (with --fit: 10 6)")
    parser.add_argument("--num-basis", nargs="+", type=int, default=None,
                        help="M; default 8 (with --fit: 8 12); without --fit only the first is used")
    parser.add_argument("--batches", nargs="+", type=int, default=[4, 8, 16], help="rows per update (--fit only)")
    parser.add_argument("--rows", type=int, default=None, help="default 64 (with --fit: 160)")
    parser.add_argument("--warm-rows", type=int, default=64, help="rows not counted (--fit only)")
    parser.add_argument("--fit", action="store_true", help="measure TTKalmanGP and fit TT_KALMAN_COST")
    parser.add_argument("--fit-smoothing", action="store_true",
                        help="measure TTKalmanGP's smoothing and fit TT_SMOOTHING_COST")
    parser.add_argument("--smoothing-rows", nargs="+", type=int, default=[600, 2000],
                        help="rows smoothed (--fit-smoothing only)")
    parser.add_argument("--held-out-dims", nargs="*", type=int, default=[8, 16],
                        help="D of the cases with the noise estimated on held-out rows (--fit-smoothing only)")
    parser.add_argument("--variant", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.fit_smoothing:
        args.dims, args.ranks = args.dims or [4, 8, 16, 32], args.ranks or [10, 6]
        args.num_basis = args.num_basis or [8, 12]
        text = _fit_smoothing_cost(args)
        output_path("tt_kalman_cost", ".md", args.variant or "smoothing").write_text(text)
        print(text)
        return 0
    if args.fit:
        args.dims, args.ranks = args.dims or [4, 8, 16, 32], args.ranks or [10, 6]
        args.num_basis, args.rows = args.num_basis or [8, 12], args.rows or 160
        if args.rows <= args.warm_rows or any(args.rows % b or args.warm_rows % b for b in args.batches):
            parser.error(f"--rows ({args.rows}) must exceed --warm-rows ({args.warm_rows}), and both must be "
                         f"multiples of every batch size {args.batches} (the two fits then share their batches).")
        text = _fit_cost_model(args)
        output_path("tt_kalman_cost", ".md", args.variant or "fit").write_text(text)
        print(text)
        return 0
    args.dims, args.ranks, args.rows = args.dims or [2, 4, 6, 8], args.ranks or [5, 10, 20], args.rows or 64
    M = (args.num_basis or [8])[0]
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
            output_path("tt_kalman_cost", ".md", args.variant or "").write_text(text)
    print(text)
    return 0
