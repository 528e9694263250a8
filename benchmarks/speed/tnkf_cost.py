"""TNKF's seconds per row against the cost model of the time budget, and the fit of its constants.

Protocol: synthetic inputs uniform in [−1, 1]^D (``--dims``, default 8), y = sin(2x₁)·cos(x_D) + 0.1 ε, N training
rows (``--sizes``); ``TNKF`` with fixed hyper-parameters (ℓ = 0.8 on the scaled inputs, σ_f² = 1, noise 0.01),
``time_budget=None``, the default truncation tolerances with each covariance/gain/innovation cap pair of
``--caps`` (default: the budget's ladder, ``TNKF_RANK_LADDER``), row by row (``block_size=1``) and in blocks of 16
(``--blocks``); ``--rows`` rows streamed (the first ``--warm-rows`` of them, while L's ranks grow to their caps, not
timed: seconds per row = the filter's time over the later rows). One torch thread. Each row of the table gives the
measured seconds per row, the prediction of :func:`tnbayes.inference.tnkf_seconds_per_row` (with the kernel rows'
ranks the budget samples) and their ratio. ``--fit`` also fits the constants (non-negative least squares on the
relative error): ``TNKF_COST`` to the row-by-row rows, ``TNKF_BLOCK_COST`` to the rows of blocks (of one size; with
the block factor of :func:`~tnbayes.inference.tnkf_cost.tnkf_block_cost_factor`), and prints them with the
predictions they give; the committed constants are those of the committed run.

    python -m benchmarks tnkf_cost --fit                     # about 10 minutes on one core
    python -m benchmarks tnkf_cost --sizes 512 --caps 8:4 --rows 40
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from benchmarks._common import fit_cost_constants, header, output_path
from tnbayes import TNKF
from tnbayes.inference.budget import TNKF_RANK_LADDER
from tnbayes.inference.kalman import Truncation
from tnbayes.inference.tnkf_cost import (TNKF_BLOCK_COST, TNKF_COST, tnkf_block_cost_factor, tnkf_block_features,
                                         tnkf_row_features, tnkf_seconds_per_row)
from tnbayes.models.tnkf import DEFAULT_TRUNCATION

ENTRY = "tnkf_cost"


def _problem(n: int, D: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (n, D))
    return X, np.sin(2 * X[:, 0]) * np.cos(X[:, -1]) + 0.1 * rng.standard_normal(n)


def _measure(X: np.ndarray, y: np.ndarray, caps: tuple[int, int], block_size: int, rows: int,
             warm_rows: int) -> dict:
    truncation = {q: (DEFAULT_TRUNCATION[q][0], cap) for q, cap in
                  (("covariance", caps[0]), ("gain", caps[1]), ("innovation", caps[1]))}
    kwargs = dict(lengthscale=0.8, outputscale=1.0, measurement_noise=0.01, prior_variance=1.0, time_budget=None,
                  truncation=truncation, block_size=block_size)
    seconds = []
    for streamed in (warm_rows, rows):
        model = TNKF(max_rows=streamed, **kwargs).fit(X, y)
        seconds.append(model.fit_seconds_per_row_ * model.rows_processed_)
    ordered, position = model.train_inputs_, torch.argsort(model.row_order_)  # the budget's sample of row ranks
    row_rule = Truncation.parse(model.truncation_["row"])
    row_ranks = model._sample_row_ranks(ordered[position], ordered, position, row_rule)
    shape = list(model.tt_shape_)
    return {"shape": shape, "row_ranks": row_ranks, "measured": (seconds[1] - seconds[0]) / (rows - warm_rows),
            "predicted": tnkf_seconds_per_row(shape, caps[0], caps[1], caps[1], row_ranks, None, block_size)}


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {ENTRY}", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 2000, 4096, 8192, 16384])
    parser.add_argument("--dims", type=int, default=8)
    parser.add_argument("--caps", nargs="+", default=[f"{c}:{g}" for c, g in TNKF_RANK_LADDER],
                        help="covariance:gain cap pairs (the innovation takes the gain's cap)")
    parser.add_argument("--blocks", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--warm-rows", type=int, default=24)
    parser.add_argument("--fit", action="store_true", help="fit TNKF_COST to the row-by-row measurements")
    parser.add_argument("--variant", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    pairs = [tuple(int(v) for v in text.split(":")) for text in args.caps]
    cases = []
    for n in args.sizes:
        X, y = _problem(n, args.dims)
        for caps in pairs:
            for block_size in args.blocks:
                start = time.perf_counter()
                case = {"n": n, "caps": caps, "block_size": block_size,
                        **_measure(X, y, caps, block_size, args.rows, args.warm_rows)}
                features = tnkf_row_features if block_size == 1 else tnkf_block_features
                case["features"] = features(case["shape"], caps[0], caps[1], caps[1], case["row_ranks"])
                cases.append(case)
                print(f"N={n} caps {caps[0]}/{caps[1]} B={block_size}: {case['measured'] * 1e3:.2f} ms/row, "
                      f"predicted {case['predicted'] * 1e3:.2f} ({time.perf_counter() - start:.0f} s)", flush=True)
    fitted = {}
    if args.fit:
        for block_size in sorted({c["block_size"] for c in cases}):
            group = [c for c in cases if c["block_size"] == block_size]
            names = list(TNKF_COST if block_size == 1 else TNKF_BLOCK_COST)
            fitted[block_size] = fit_cost_constants(group, names, tnkf_block_cost_factor(block_size))
    lines = ["| N | TT modes | caps (covariance/gain) | rows per update | measured ms/row | predicted ms/row | "
             "predicted / measured |" + (" refitted ms/row | refitted / measured |" if fitted else ""),
             "|---|---|---|---|---|---|---|" + ("---|---|" if fitted else "")]
    for c in cases:
        line = (f"| {c['n']} | {tuple(c['shape'])} | {c['caps'][0]}/{c['caps'][1]} | {c['block_size']} | "
                f"{c['measured'] * 1e3:.2f} | {c['predicted'] * 1e3:.2f} | {c['predicted'] / c['measured']:.2f} |")
        if fitted:
            c["refit"] = sum(fitted[c["block_size"]][k] * v for k, v in c["features"].items()) * \
                tnkf_block_cost_factor(c["block_size"])
            line += f" {c['refit'] * 1e3:.2f} | {c['refit'] / c['measured']:.2f} |"
        lines.append(line)
    protocol = (f"see the module docstring of benchmarks/speed/{ENTRY}.py; D = {args.dims}, {args.rows} rows streamed "
                f"of which the first {args.warm_rows} are not timed; one torch thread; float64")
    text = header("TNKF seconds per row against the budget's cost model", protocol) + "\n".join(lines) + "\n"
    for block_size, constants in fitted.items():
        name = "TNKF_COST (row by row)" if block_size == 1 else f"TNKF_BLOCK_COST (blocks of {block_size})"
        ratios = [c["refit"] / c["measured"] for c in cases if c["block_size"] == block_size]
        text += f"\n## {name}, fitted to these rows\n\n```python\n" + \
            "\n".join(f'"{k}": {v:.3g},' for k, v in constants.items()) + "\n```\n\n" + \
            f"Refitted / measured: median {np.median(ratios):.2f}, range {min(ratios):.2f}–{max(ratios):.2f}.\n"
    path = output_path(ENTRY, ".md", args.variant or "")
    path.write_text(text)
    print(text)
    return 0
