"""The primal TT Kalman filter on a 100k airline subset, next to HilbertGP (additive), the CPD model and an
exact GP on a subsample.

Protocol: the first ``--n-train`` rows (default 100 000) of the fixed airline training set, the first
``--n-test`` rows (default 10 000) of its test set; every model with its defaults except the stated ones:

- ``TTKalmanGP(max_num_basis=M, max_rank=R)`` (default M = 4, R = 5: 4⁸ = 65 536 weights; the per-row cost
  grows about as M² R³ and the defaults 8 / 10 would take hours here — see tt_kalman_cost.md); with its default
  ``time_budget`` the filter streams as many rows as the budget allows and the ALS smoothing sweeps every row;
- ``tt_filter_only``: the same with ``smoothing="none", time_budget=None`` (the filter streams every row, or a random
  ``--filter-rows`` of them, and predicts with its own mean and covariance, as before the smoothing existed; a
  warning that the filter has lost the data is quoted in its row);
- ``tt_no_budget``: the same with ``time_budget=None`` alone (the filter streams every row, then the default ALS
  smoothing sweeps every row from the filter's mean);
- ``HilbertGP(structure="additive", out_of_box="clip")`` (test inputs beyond the training range clipped to it, as for the CPD model);
- ``CPDKernelMachine(out_of_box="clip")`` (automatic rank, M ≤ 40, Laplace variances);
- ``ExactGP`` on the first ``--exact-points`` training rows (default 5000; the whole subset does not fit).

Hyper-parameters of the first three by exact-GP marginal likelihood on ≤ 1000 training rows. Test MSE on y
standardised with training statistics; NLPD and interval width in minutes of delay.

    python -m benchmarks tt_kalman_airline
    python -m benchmarks tt_kalman_airline --models hilbert cpd exact --append   # continue a stopped run
    python -m benchmarks tt_kalman_airline --n-train 5000 --n-test 1000 --exact-points 1000   # smoke
    python -m benchmarks tt_kalman_airline --models tt tt_filter_only --variant smoothing   # with and without smoothing
    python -m benchmarks tt_kalman_airline --models tt_filter_only --filter-rows 20000 --variant lost_data_check
    python -m benchmarks tt_kalman_airline --models tt_no_budget --variant no_budget   # every row, then smoothing
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from benchmarks._common import airline_split, header, output_path, table_rows
from tnbayes import CPDKernelMachine, ExactGP, HilbertGP, TTKalmanGP, metrics


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks tt_kalman_airline")
    parser.add_argument("--n-train", type=int, default=100_000)
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--exact-points", type=int, default=5000)
    parser.add_argument("--num-basis", type=int, default=4)
    parser.add_argument("--rank", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=["tt", "hilbert", "cpd", "exact"],
                        choices=["tt", "tt_filter_only", "tt_no_budget", "hilbert", "cpd", "exact"],
                        help="tt_filter_only: the same TTKalmanGP with smoothing='none' and time_budget=None (the "
                             "filter streams every row, as before the smoothing existed); tt_no_budget: with "
                             "time_budget=None alone (every row, then the default smoothing)")
    parser.add_argument("--filter-rows", type=int, default=None,
                        help="rows tt_filter_only streams (its max_rows: a random subset of the training rows; "
                             "default all)")
    parser.add_argument("--variant", default=None, help="names the result (default: the training rows unless 100000)")
    parser.add_argument("--append", action="store_true", help="keep the model rows of the existing table")
    args = parser.parse_args(argv)
    Xtr, ytr, Xte, yte = airline_split(args.n_train)
    Xte, yte = Xte[: args.n_test], yte[: args.n_test]
    var = float(np.var(ytr))
    variant = args.variant if args.variant is not None else "" if args.n_train == 100_000 else str(args.n_train)
    keys = ["tt", "tt_filter_only", "tt_no_budget", "hilbert", "cpd", "exact"]
    models = {
        f"TTKalmanGP (M ≤ {args.num_basis}, rank ≤ {args.rank})": (TTKalmanGP(max_num_basis=args.num_basis,
                                                                               max_rank=args.rank), None),
        f"TTKalmanGP (M ≤ {args.num_basis}, rank ≤ {args.rank}, smoothing='none', time_budget=None)": (
            TTKalmanGP(max_num_basis=args.num_basis, max_rank=args.rank, smoothing="none", time_budget=None,
                       max_rows=args.filter_rows), None),
        f"TTKalmanGP (M ≤ {args.num_basis}, rank ≤ {args.rank}, time_budget=None)": (
            TTKalmanGP(max_num_basis=args.num_basis, max_rank=args.rank, time_budget=None), None),
        "HilbertGP (additive)": (HilbertGP(structure="additive", out_of_box="clip"), None),
        "CPDKernelMachine": (CPDKernelMachine(out_of_box="clip"), None),
        f"ExactGP ({args.exact_points} rows)": (ExactGP(), args.exact_points),
    }
    models = {label: spec for key, (label, spec) in zip(keys, models.items()) if key in args.models}
    lines = ["| model | N train | test MSE (std. y) | NLPD | 95% coverage | 95% width | fit s |",
             "|---|---|---|---|---|---|---|"]
    if args.append:
        lines += table_rows("tt_kalman_airline", variant)
    protocol = (f"first {len(ytr)} rows of the fixed airline training set, first {len(yte)} test rows; "
                "see the module docstring of benchmarks/speed/tt_kalman_airline.py")
    for label, (model, rows) in models.items():
        X, y = (Xtr, ytr) if rows is None else (Xtr[:rows], ytr[:rows])
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X, y)
        seconds = time.perf_counter() - start
        post = model.posterior(Xte)
        report = metrics.evaluate(post, yte)
        mse = float(np.mean((post.mean.numpy() - yte) ** 2)) / var
        extra = ""
        if isinstance(model, TTKalmanGP):
            extra = (f" (M = {model.num_basis_}; filter: {model.rows_used_} rows, {model.seconds_per_row_ * 1e3:.1f} "
                     f"ms/row; smoothing: {model.smoothing_sweeps_} sweeps over "
                     f"{model.budget_['smoothing_rows'] if model.smoothing_sweeps_ else 0} rows; fit "
                     f"{seconds / len(y) * 1e3:.2f} ms per training row)")
        lost = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning) and "lost the data" in
                str(w.message)]
        extra += f"; **warned**: “{lost[0].split(': ', 1)[1].split(': its state')[0]}”" if lost else ""
        lines.append(f"| {label}{extra} | {len(y)} | {mse:.4f} | {report['nlpd']:.4f} | {report['coverage_95']:.3f} | "
                     f"{report['interval_width_95']:.1f} | {seconds:.0f} |")
        print(lines[-1], flush=True)
        text = header("Primal TT Kalman filter on airline", protocol) + "\n".join(lines) + "\n"
        output_path("tt_kalman_airline", ".md", variant).write_text(text)
    print(text)
    return 0
