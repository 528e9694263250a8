"""HilbertGP against ExactGP on 1-D data as N grows: time per marginal-likelihood step, fit time, NLPD.

Data: the ``toy-sin`` function sin(2x) + 0.3 cos(5x) on x ~ U(-3, 3) with noise std 0.1, 10⁴ test
points. HilbertGP runs with its defaults (M and c chosen from the data). A "marginal-likelihood step"
is one evaluation of the negative log marginal likelihood and its gradient at the fitted
hyper-parameters (the unit of work of the optimiser): for HilbertGP it works on the precomputed
ΦᵀΦ, so it should not grow with N; for ExactGP it is a GPyTorch Cholesky of the N×N kernel matrix.
ExactGP is fitted in full only where that takes minutes on this machine; at larger N only its
step time is measured (a few steps) and the fit time is left blank.

    python -m benchmarks hilbert_gp_scaling            # N = 1e4, 1e5, 1e6
    python -m benchmarks hilbert_gp_scaling --quick    # N = 2e3, 1e4 (smoke run)
"""

from __future__ import annotations

import argparse
import csv
import time

import gpytorch
import numpy as np
import torch

import tnbayes
from benchmarks._common import header, output_path
from tnbayes.datasets import toy_1d_function
from tnbayes.inference import neg_log_marginal_likelihood
from tnbayes.selection import MarginalLikelihoodSettings, build_exact_gp, exact_gpytorch_settings


def _make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, size=(n, 1))
    return x, toy_1d_function("sin", x[:, 0]) + 0.1 * rng.standard_normal(n)


def _hilbert_step_seconds(model: tnbayes.HilbertGP, X: np.ndarray, y: np.ndarray, reps: int = 100) -> float:
    Xs = model.x_scaler_.transform(torch.as_tensor(X))
    ys = model.y_scaler_.transform(torch.as_tensor(y))
    stats = model._accumulate_statistics(Xs, ys)
    raw = model.lengthscale_.clone().log().requires_grad_(True)
    like = {"dtype": torch.float64}
    t0 = time.perf_counter()
    for _ in range(reps):
        loss = neg_log_marginal_likelihood(model._feature_weights(raw.exp()), torch.tensor(model.outputscale_, **like),
                                           torch.tensor(model.noise_variance_, **like),
                                           torch.tensor(model.mean_constant_, **like), stats)
        loss.backward()
    return (time.perf_counter() - t0) / reps


def _exact_step_seconds(X: np.ndarray, y: np.ndarray, reps: int) -> float:
    """One GPyTorch exact negative-MLL evaluation + gradient on standardised data (default hyper-parameters)."""
    Xs = torch.as_tensor((X - X.mean(0)) / X.std(0))
    ys = torch.as_tensor((y - y.mean()) / y.std())
    gp = build_exact_gp(Xs, ys, MarginalLikelihoodSettings())
    gp.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(gp.likelihood, gp)
    X, y = gp.train_inputs[0], gp.train_targets
    with exact_gpytorch_settings():
        t0 = time.perf_counter()
        for _ in range(reps):
            gp.zero_grad()
            (-mll(gp(X), y)).backward()
        seconds = (time.perf_counter() - t0) / reps
    return seconds


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks hilbert_gp_scaling")
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    parser.add_argument("--exact-fit-max", type=float, default=2e3, help="largest N for a full ExactGP fit")
    parser.add_argument("--exact-step-max", type=float, default=1e4, help="largest N for ExactGP step timing")
    parser.add_argument("--quick", action="store_true", help="N = 2000 and 10000 only")
    args = parser.parse_args(argv)
    sizes = [2000, 10000] if args.quick else sorted({int(2000), *(int(s) for s in args.sizes)})
    X_test, y_test = _make_data(10_000, seed=123)
    tnbayes.HilbertGP().fit(*_make_data(100, seed=0))  # warm-up: first optimiser use imports torch._dynamo (~1-2 s)
    rows = []
    for n in sizes:
        X, y = _make_data(n, seed=n)
        t0 = time.perf_counter()
        hilbert = tnbayes.HilbertGP().fit(X, y)
        hilbert_fit = time.perf_counter() - t0
        hilbert_nlpd = tnbayes.metrics.nlpd(y_test, hilbert.posterior(X_test))
        hilbert_step = _hilbert_step_seconds(hilbert, X, y)
        row = {"n": n, "hilbert_fit_s": hilbert_fit, "hilbert_step_s": hilbert_step, "hilbert_nlpd": hilbert_nlpd,
               "hilbert_M": hilbert.num_basis_, "hilbert_c": hilbert.c_[0],
               "exact_fit_s": None, "exact_step_s": None, "exact_nlpd": None}
        if n <= args.exact_fit_max:
            t0 = time.perf_counter()
            exact = tnbayes.ExactGP().fit(X, y)
            row["exact_fit_s"] = time.perf_counter() - t0
            row["exact_nlpd"] = tnbayes.metrics.nlpd(y_test, exact.posterior(X_test))
        if n <= args.exact_step_max:
            row["exact_step_s"] = _exact_step_seconds(X, y, reps=3)
        rows.append(row)
        print(row, flush=True)

    def fmt(v, spec):
        return "–" if v is None else format(v, spec)

    lines = ["| N | HilbertGP M / c | HilbertGP step s | ExactGP step s | step ratio (Exact/Hilbert) | HilbertGP fit s | "
             "ExactGP fit s | fit ratio | HilbertGP test NLPD | ExactGP test NLPD |", "|" + "---|" * 10]
    for r in rows:
        step_ratio = None if r["exact_step_s"] is None else r["exact_step_s"] / r["hilbert_step_s"]
        fit_ratio = None if r["exact_fit_s"] is None else r["exact_fit_s"] / r["hilbert_fit_s"]
        lines.append(f"| {r['n']:.0e} | {r['hilbert_M']} / {r['hilbert_c']:.2f} | {r['hilbert_step_s']:.2e} | "
                     f"{fmt(r['exact_step_s'], '.2e')} | {fmt(step_ratio, '.0f')} | {r['hilbert_fit_s']:.2f} | "
                     f"{fmt(r['exact_fit_s'], '.1f')} | {fmt(fit_ratio, '.0f')} | {r['hilbert_nlpd']:.4f} | "
                     f"{fmt(r['exact_nlpd'], '.4f')} |")
    protocol = ("1-D toy-sin data, noise std 0.1, 10^4 test points; HilbertGP() and ExactGP() defaults; "
                "step = one negative-MLL evaluation + gradient at the fitted hyper-parameters; ratios from the same run")
    text = header("HilbertGP vs ExactGP: cost against N (1-D)", protocol) + "\n".join(lines) + "\n"
    variant = "quick" if args.quick else ""
    output_path("hilbert_gp_scaling", ".md", variant).write_text(text)
    with open(output_path("hilbert_gp_scaling", ".csv", variant), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(text)
    return 0
