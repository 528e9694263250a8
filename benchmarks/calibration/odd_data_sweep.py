"""Every regressor with no arguments on small synthetic sets that are ordinary but were not tuned for.

What a new user meets first: integer-coded inputs with duplicated rows, a constant column, inputs and targets in
very large or very small units, float32 pandas input, one-hot columns next to numeric ones, noiseless targets,
heavy-tailed inputs, 40 and 100 inputs, and a tiny 1-D set. Each set is made by :func:`make_case` (fixed seeds),
split 75/25 at random (seed 2), and every model is fitted with no arguments (``tnbayes.<Model>()``); metrics in the
units of y.
Reported: test RMSE over the test targets' standard deviation (1 ≈ predicting the mean), 95% coverage, NLPD, fit
and predict seconds, and the warnings the fit and the prediction raised. A fit that raises is reported with its
error. ExactGP is the reference on every set. ``--dtype float32`` passes ``dtype=torch.float32`` to every model
instead (the one argument; a GPU user's usual choice).

    python -m benchmarks odd_data_sweep
    python -m benchmarks odd_data_sweep --cases noiseless integer_lookup --models ExactGP TNKF
    python -m benchmarks odd_data_sweep --cases inputs_40 --models CPDKernelMachine QTKM TKM FLModel --dtype float32
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings

import numpy as np

from benchmarks._common import header, output_path

#: the sets, in the order of the tables
CASES = ("tiny_1d", "constant_column", "integer_lookup", "units_large", "units_small", "float32_dataframe",
         "one_hot_mix", "noiseless", "heavy_tailed_inputs", "inputs_40", "inputs_100")
#: every regressor of the package
MODELS = ("ExactGP", "CPDKernelMachine", "HilbertGP", "SVGP", "QTKM", "TKM", "FLModel", "RFFNet", "TNKF",
          "TTKalmanGP")


def _smooth(X: np.ndarray) -> np.ndarray:
    return np.sin(3 * X[:, 0]) + 0.5 * X[:, 1 % X.shape[1]] ** 2


def make_case(name: str) -> tuple[object, object]:
    """One set: inputs (n, D) and targets (n,), numpy arrays (pandas for ``float32_dataframe``)."""
    rng = np.random.default_rng(1)
    if name == "tiny_1d":
        X = rng.uniform(-2, 2, (40, 1))
        return X, np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(40)
    if name == "constant_column":
        X = rng.uniform(-1, 1, (300, 3))
        X[:, 1] = 5.0
        return X, _smooth(X[:, [0, 2]]) + 0.1 * rng.standard_normal(300)
    if name == "integer_lookup":  # integer codes, many repeated rows, the target a function of two of them
        X = rng.integers(0, 5, (300, 4)).astype(float)
        return X, np.round(3 * _smooth(X / 4))
    if name == "units_large":
        X = rng.uniform(0, 1e5, (300, 2))
        return X, 1e9 + 1e6 * _smooth(X / 1e5) + 1e4 * rng.standard_normal(300)
    if name == "units_small":
        X = rng.uniform(0, 1e-6, (300, 2))
        return X, 1e-7 * _smooth(X / 1e-6) + 1e-9 * rng.standard_normal(300)
    if name == "float32_dataframe":
        import pandas as pd

        X = rng.uniform(-1, 1, (300, 3)).astype(np.float32)
        y = (_smooth(X) + 0.1 * rng.standard_normal(300)).astype(np.float32)
        return pd.DataFrame(X, columns=["a", "b", "c"]), pd.Series(y)
    if name == "one_hot_mix":
        numeric, category = rng.standard_normal((400, 2)), rng.integers(0, 4, 400)
        X = np.hstack([numeric, np.eye(4)[category]])
        return X, _smooth(numeric) + 0.5 * category + 0.1 * rng.standard_normal(400)
    if name == "noiseless":
        X = rng.uniform(-1, 1, (200, 2))
        return X, _smooth(X)
    if name == "heavy_tailed_inputs":
        X = np.exp(2 * rng.standard_normal((300, 2)))
        return X, np.log(X[:, 0]) + 0.1 * rng.standard_normal(300)
    if name == "inputs_40":
        X = rng.standard_normal((500, 40))
        return X, X[:, 0] + np.sin(X[:, 1]) + 0.1 * X[:, 2:].sum(1) + 0.1 * rng.standard_normal(500)
    if name == "inputs_100":  # make_friedman1's function of five inputs, 95 that do not matter
        X = rng.uniform(0, 1, (600, 100))
        y = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
        return X, y + 0.5 * rng.standard_normal(600)
    raise ValueError(f"unknown case {name!r}; known: {CASES}")


def _split(X, y):
    n = len(y)
    order = np.random.default_rng(2).permutation(n)
    train, test = order[: int(0.75 * n)], order[int(0.75 * n):]
    if hasattr(X, "iloc"):
        return X.iloc[train], y.iloc[train], X.iloc[test], y.iloc[test]
    return X[train], y[train], X[test], y[test]


def run_one(case: str, model_name: str, dtype: str | None = None) -> dict:
    """Fit ``tnbayes.<model_name>()`` (with ``dtype`` when given) on the training part of ``case``; metrics on its
    test part."""
    import torch

    import tnbayes

    X_train, y_train, X_test, y_test = _split(*make_case(case))
    y_test = np.asarray(y_test, dtype=np.float64)
    row: dict = {"case": case, "model": model_name}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            start = time.perf_counter()
            arguments = {} if dtype is None else {"dtype": getattr(torch, dtype)}
            model = getattr(tnbayes, model_name)(**arguments).fit(X_train, y_train)
            row["fit_seconds"] = time.perf_counter() - start
            start = time.perf_counter()
            post = model.posterior(X_test)
            row["predict_seconds"] = time.perf_counter() - start
            report = tnbayes.metrics.evaluate(post, y_test, y_train=np.asarray(y_train, dtype=np.float64))
            row.update(rmse_over_sd=report["rmse"] / float(np.std(y_test)), coverage_95=report["coverage_95"],
                       nlpd=report["nlpd"])
        except Exception as error:  # reported, not hidden: the table shows what a user would have seen
            row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    row["warnings"] = "; ".join(sorted({w.category.__name__ for w in caught}))
    return row


def _cell(row: dict, key: str, fmt: str) -> str:
    return "error" if "error" in row else format(row[key], fmt)


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks odd_data_sweep")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--dtype", choices=["float32", "float64"], default=None,
                        help="pass this dtype to every model (default: no arguments at all)")
    parser.add_argument("--variant", default="", help="names the result files (odd_data_sweep_<variant>.md)")
    args = parser.parse_args(argv)
    rows = []
    for case in args.cases:
        for model_name in args.models:
            rows.append(run_one(case, model_name, args.dtype))
            print(rows[-1], flush=True)
    by = {(r["case"], r["model"]): r for r in rows}
    given = "" if args.dtype is None else f"; every model with dtype=torch.{args.dtype}"
    lines = [header("Every regressor with no arguments on odd but ordinary data",
                    "module docstring of benchmarks/calibration/odd_data_sweep.py; one run per cell, 75/25 split"
                    + given)]
    for title, key, fmt in (("test RMSE / standard deviation of the test targets", "rmse_over_sd", ".3f"),
                            ("95% coverage", "coverage_95", ".2f"), ("NLPD (units of y)", "nlpd", ".3f"),
                            ("fit seconds", "fit_seconds", ".1f")):
        lines += [f"## {title}", "", "| set | " + " | ".join(args.models) + " |",
                  "|---" * (len(args.models) + 1) + "|"]
        lines += [f"| {case} | " + " | ".join(_cell(by[case, m], key, fmt) for m in args.models) + " |"
                  for case in args.cases]
        lines.append("")
    lines += ["## Errors and warnings", "", "| set | model | error | warning categories |", "|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['model']} | {r.get('error', '')} | {r['warnings']} |" for r in rows
              if r.get("error") or r["warnings"]]
    variant = args.variant or (args.dtype or "")  # a --dtype run never overwrites the no-argument sweep
    output_path("odd_data_sweep", ".md", variant).write_text("\n".join(lines) + "\n")
    with output_path("odd_data_sweep", "_runs.csv", variant).open("w", newline="") as handle:
        fields = ["case", "model", "rmse_over_sd", "coverage_95", "nlpd", "fit_seconds", "predict_seconds", "error",
                  "warnings"]
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return 0
