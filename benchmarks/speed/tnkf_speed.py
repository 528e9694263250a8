"""TNKF cost per processed row against N and the TT ranks, next to a dense Kalman filter.

Protocol: noisy sinc (``datasets.make_sinc``) with N = 2¹⁰ … 2¹⁶ training points. The hyper-parameters
of ``TNKF()`` are fitted once per N (GP marginal likelihood on 1000 points, not timed); then the filter
processes the first ``--rows`` rows (each row: one kernel row O(N), its TT-SVD, the square-root update and
the roundings) and the wall time per row is reported, with the memory of the filter state (TT cores of
the mean and of the covariance square root) and the largest TT ranks. A second table varies the
covariance rank cap at one N. The dense Kalman filter (mean (N,), covariance (N, N), float64) runs the
same rows for N up to ``--dense-max`` (default 2¹⁵: 8 GiB of covariance, updated in place; 2¹⁶ would need
32 GiB, more than this 24 GB machine has).

    python -m benchmarks tnkf_speed                # about 20 minutes on 2 cores
    python -m benchmarks tnkf_speed --quick        # N ≤ 2¹², 50 rows
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks._common import header, output_path, tt_rank_cell
from tnbayes import TNKF, datasets
from tnbayes.inference import DenseKalmanFilter
from tnbayes.models.tnkf import DEFAULT_TRUNCATION


def _state_bytes(model: TNKF) -> int:
    cores = model.posterior_mean_tt_.cores + model.posterior_cov_sqrt_tt_.cores
    return sum(c.numel() * c.element_size() for c in cores)


def _timed_tnkf(data, reference: TNKF, rows: int, covariance_rank: int | None) -> tuple[float, int, str]:
    truncation = dict(DEFAULT_TRUNCATION)
    if covariance_rank is not None:
        truncation["covariance"] = (DEFAULT_TRUNCATION["covariance"][0], covariance_rank)
    model = TNKF(lengthscale=reference.lengthscale_.tolist(), outputscale=reference.outputscale_,
                 measurement_noise=reference.measurement_noise_, prior_variance=reference.prior_variance_,
                 truncation=truncation, max_rows=rows)
    model.fit(data.X_train, data.y_train)
    return model.fit_seconds_per_row_, _state_bytes(model), tt_rank_cell(model)


def _timed_dense(data, reference: TNKF, rows: int) -> float:
    Xs = reference.x_scaler_.transform(torch.as_tensor(data.X_train, dtype=torch.float64))
    ys = reference.y_scaler_.transform(torch.as_tensor(data.y_train, dtype=torch.float64))
    n = Xs.shape[0]
    order = torch.argsort(Xs[:, 0])
    Xs, ys = Xs[order], ys[order] - ys.mean()
    kf = DenseKalmanFilter.isotropic(n, reference.prior_variance_)
    start = time.perf_counter()
    for k in range(rows):
        row = reference.kernel_matrix(Xs[k:k + 1], Xs)[0]
        kf.update(row, float(ys[k]), reference.measurement_noise_)
    return (time.perf_counter() - start) / rows


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks tnkf_speed")
    parser.add_argument("--sizes", nargs="+", type=int, default=[2**10, 2**12, 2**14, 2**15, 2**16])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--ranks", nargs="+", type=int, default=[8, 16, 24, 48])
    parser.add_argument("--rank-size", type=int, default=2**14)
    parser.add_argument("--dense-max", type=int, default=2**15)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.rows, args.ranks, args.rank_size, args.dense_max = [2**10, 2**12], 50, [8, 24], 2**12, 2**12
    torch.manual_seed(0)
    by_size = ["| N | TT modes | TNKF ms/row | TNKF state KiB | max rank row / mean / cov. root | "
               "dense KF ms/row | dense KF state MiB | dense / TNKF time |", "|---|---|---|---|---|---|---|---|"]
    references = {}
    for n in args.sizes:
        data = datasets.make_sinc(n_train=n, n_test=16)
        reference = TNKF(max_rows=1).fit(data.X_train, data.y_train)
        references[n] = (data, reference)
        seconds, state, ranks = _timed_tnkf(data, reference, args.rows, None)
        if n <= args.dense_max:
            dense = _timed_dense(data, reference, min(args.rows, 50))
            dense_cells = f"{1e3 * dense:.1f} | {8 * n * n / 2**20:.0f} | {dense / seconds:.2f}"
        else:
            dense_cells = f"— | {8 * n * n / 2**20:.0f} (not run) | —"
        by_size.append(f"| {n} | {'·'.join(map(str, reference.tt_shape_))} | {1e3 * seconds:.1f} | {state / 1024:.0f} | "
                       f"{ranks} | {dense_cells} |")
        print(by_size[-1], flush=True)
    by_rank = ["| covariance rank cap | TNKF ms/row | TNKF state KiB | max rank row / mean / cov. root |",
               "|---|---|---|---|"]
    n = args.rank_size
    data, reference = references.get(n) or (None, None)
    if data is None:
        data = datasets.make_sinc(n_train=n, n_test=16)
        reference = TNKF(max_rows=1).fit(data.X_train, data.y_train)
    for rank in args.ranks:
        seconds, state, ranks = _timed_tnkf(data, reference, args.rows, rank)
        by_rank.append(f"| {rank} | {1e3 * seconds:.1f} | {state / 1024:.0f} | {ranks} |")
        print(by_rank[-1], flush=True)
    protocol = (f"noisy sinc; TNKF() hyper-parameters fitted once per N (not timed); first {args.rows} rows; "
                f"default truncation {DEFAULT_TRUNCATION}; dense Kalman filter on min(rows, 50) rows, float64")
    variant = "quick" if args.quick else ""
    text = (header("TNKF cost per row", protocol) + "\n".join(by_size)
            + f"\n\nCovariance rank cap at N = {n}:\n\n" + "\n".join(by_rank) + "\n")
    output_path("tnkf_speed", ".md", variant).write_text(text)
    print(text)
    return 0
