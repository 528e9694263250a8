"""TNKF on the noisy sinc of the TNKF paper: 2¹⁴ training / 2¹³ test points, noise std 0.1.

Protocol: ``datasets.make_sinc()`` (equally spaced grids over [−2.2, 2.2], as the authors' code),
training targets centred, test RMSE against the noisy test targets (so ≈ 0.1 is the floor), the
share of test targets inside the ±3σ predictive bounds the paper plots, NLPD, fit time.
Two configurations:

* ``paper``: the authors' settings from ``Noisy Sinc/NoisySinc_LSSVM_TTKF.m`` — RBF kernel
  ``exp(−‖x−x'‖²/sig2)`` with sig2 = 0.005 (ℓ = 0.05 in x units), γ = 0.005, R = 0.01, P_0 = I,
  relative truncations m 0, P 0.015, kernel row 0.003, innovation 0.1, gain 0.0075; y not standardised;
  one TT mode per prime factor (``mode_size=1``) as in the paper — the truncations were tuned for it.
* ``default``: ``TNKF()`` with no arguments (hyper-parameters from a GP marginal likelihood on 1000 points).

    python -m benchmarks tnkf_sinc                 # both, full size (about 15 minutes on 2 cores)
    python -m benchmarks tnkf_sinc --n-train 4096 --configs default
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._common import header, output_path, tt_rank_cell
from tnbayes import TNKF, datasets, metrics

PAPER_TRUNCATION = {"mean": 0.0, "covariance": 0.015, "row": 0.003, "innovation": 0.1, "gain": 0.0075}


def _model(config: str, x_std: float) -> TNKF:
    if config == "paper":
        return TNKF(lengthscale=0.05 / x_std, outputscale=1.0, gamma=0.005, measurement_noise=0.01,
                    prior_variance=1.0, truncation=PAPER_TRUNCATION, normalize_y=False, mode_size=1,
                    round_relative_to="state")
    return TNKF()


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks tnkf_sinc")
    parser.add_argument("--n-train", type=int, default=2**14)
    parser.add_argument("--n-test", type=int, default=2**13)
    parser.add_argument("--configs", nargs="+", default=["paper", "default"], choices=["paper", "default"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = datasets.make_sinc(n_train=args.n_train, n_test=args.n_test, seed=args.seed)
    x_std = float(np.asarray(data.X_train).std())
    lines = ["| configuration | N train | N test | test RMSE | inside ±3σ | 95% coverage | NLPD | fit s | ms per row | "
             "max TT rank (row / mean / cov. root) |", "|---|---|---|---|---|---|---|---|---|---|"]
    posteriors = {}
    for config in args.configs:
        model = _model(config, x_std)
        start = time.perf_counter()
        model.fit(data.X_train, data.y_train)
        fit_seconds = time.perf_counter() - start
        post = model.posterior(data.X_test)
        posteriors[config] = post
        ev = metrics.evaluate(post, data.y_test)
        z = np.abs((np.asarray(data.y_test) - post.mean.numpy()) / post.stddev.numpy())
        lines.append(f"| {config} | {args.n_train} | {args.n_test} | {ev['rmse']:.4f} | {np.mean(z <= 3):.3f} | "
                     f"{ev['coverage_95']:.3f} | {ev['nlpd']:.3f} | {fit_seconds:.0f} | "
                     f"{1e3 * model.fit_seconds_per_row_:.1f} | {tt_rank_cell(model)} |")
        print(lines[-1], flush=True)
    protocol = ("noisy sinc, equally spaced grids over [-2.2, 2.2], noise std 0.1 on training and test targets; "
                "configurations as in the module docstring; RMSE against noisy test targets")
    variant = "" if args.n_train == 2**14 else str(args.n_train)
    text = header("TNKF on the noisy sinc", protocol) + "\n".join(lines) + "\n\nFigure: " + output_path("tnkf_sinc", ".png", variant).name + "\n"
    output_path("tnkf_sinc", ".md", variant).write_text(text)
    _figure(data, posteriors, output_path("tnkf_sinc", ".png", variant))
    print(text)
    return 0


def _figure(data, posteriors, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(posteriors), figsize=(6 * len(posteriors), 4), squeeze=False)
    x = np.asarray(data.X_test).reshape(-1)
    step = max(1, x.size // 400)
    for ax, (config, post) in zip(axes[0], posteriors.items()):
        mean, std = post.mean.numpy(), post.stddev.numpy()
        ax.plot(x[::step], np.asarray(data.y_test)[::step], ".", color="0.6", ms=3, label="test data")
        ax.plot(x, mean, color="C3", label="TNKF mean")
        ax.fill_between(x, mean - 3 * std, mean + 3 * std, color="C0", alpha=0.3, label="±3σ")
        ax.set_title(f"TNKF ({config})")
        ax.set_xlabel("x")
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
