"""RFFNet against the RFFNet paper's Table 2 (SE1, SE2, ailerons, comp-activ) and its sample-size study.

Protocol (the authors' experiment scripts, ``mpotto/pyselect``): SE1/SE2 from ``tnbayes.datasets.synthetic``
(X ~ N(0, I), n = 5·10⁴ train, 2·10³ validation, 2·10³ test, seed 0); ailerons (11·10³ train, 10³ validation,
10³ test) and comp-activ (6·10³ / 10³ / 10³) drawn at random from all rows (``numpy.random.default_rng(k)``);
inputs standardised with training statistics (what the model does); y in its own units (the model
standardises y internally and answers in y's units). ``RFFNet()`` with the package defaults — the paper's
(s = ⌊√n ln n⌋, λ init 0, batch 32, ≤ 200 epochs, patience 20, μ = 1e-4, 10% of the training rows for early
stopping, per-mini-batch alternation) except the learning rate, 1e-2 instead of 5e-4 (see the RFFNet
docstring); optionally (``--tune``) μ and the learning rate by the validation set's MSE over a grid, as the paper
does (its grid: lr ∈ {1e-5 … 1e-2} × μ ∈ {1e-7 … 1e-1}; ``--tune`` uses lr ∈ {1e-3, 1e-2} × μ ∈ {1e-6, 1e-4, 1e-2}).
Test MSE of the trained network (the paper's predictor) and of the Bayesian last layer's mean, both with the
authors' band 2·SE of the squared errors; the paper's band is the same statistic on its single split. Each
(set, kind, size) runs through :func:`tnbayes.compare` (these splits as its ``load``, the paper's metrics as
columns).

    python -m benchmarks rffnet_table2                        # the four sets + the sample-size figure
    python -m benchmarks rffnet_table2 --only comp-activ --splits 3
    python -m benchmarks rffnet_table2 --only se1 --sizes 1000 5000   # sample-size study only
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any, NamedTuple

import numpy as np

from benchmarks._common import header, output_path, read_rows, write_rows
from tnbayes import RFFNet, datasets
from tnbayes.compare import RunContext, compare
from tnbayes.datasets.synthetic import make_se1, make_se2

#: the paper's Table 2: (MSE, band = 2·SE of the squared errors), train rows, relevant inputs (0-based)
PAPER = {
    "se1": (0.071, 0.007),
    "se2": (1.2, 0.2),
    "ailerons": (2.7e-8, 0.3e-8),
    "comp-activ": (10.0, 4.0),
}
SIZES = {"ailerons": (11_000, 1_000, 1_000), "comp-activ": (6_000, 1_000, 1_000)}
RELEVANT = {"se1": [0, 2, 6, 7, 8], "se2": [10, 11, 12, 13, 14]}
GRID = [(lr, mu) for lr in (1e-3, 1e-2) for mu in (1e-6, 1e-4, 1e-2)]
#: the columns of runs.csv, in order
COLUMNS = ("dataset", "kind", "split", "n_train", "p", "mse_network", "band_network", "mse_bayes", "band_bayes",
           "coverage_95", "nlpd", "validation_mse", "learning_rate", "penalty", "seconds", "epochs", "best_epoch",
           "top5_exact", "scaled_relevances")


class _Split(NamedTuple):
    """Training, validation and test rows of one split."""

    X_train: Any
    y_train: Any
    X_val: Any
    y_val: Any
    X_test: Any
    y_test: Any


def _split(name: str, k: int, n_train: int | None = None) -> _Split:
    if name in ("se1", "se2"):
        maker = make_se1 if name == "se1" else make_se2
        s = maker(n_train=n_train or 50_000, n_val=2_000, n_test=2_000, seed=k)
        return _Split(s.X_train, s.y_train, s.X_val, s.y_val, s.X_test, s.y_test)
    first = datasets.load(name, split=0)
    X = np.vstack([first.X_train, first.X_test])
    y = np.concatenate([first.y_train, first.y_test])
    n_tr, n_val, n_te = SIZES[name]
    perm = np.random.default_rng(k).permutation(len(y))
    test, val, train = perm[:n_te], perm[n_te:n_te + n_val], perm[n_te + n_val:n_te + n_val + n_tr]
    return _Split(X[train], y[train], X[val], y[val], X[test], y[test])


class _ValidationTuned:
    """RFFNet with the defaults, or (``tune``) the best of GRID by the validation MSE of the trained network;
    keeps the chosen network (``model_``), its validation MSE and its own fit time (``seconds_``)."""

    def __init__(self, X_val, y_val, tune: bool, seed: int) -> None:
        self.X_val, self.y_val, self.tune, self.seed = X_val, y_val, tune, seed

    def fit(self, X, y) -> "_ValidationTuned":
        best = None
        for lr, mu in GRID if self.tune else [(None, None)]:
            kwargs = {"seed": self.seed}
            if lr is not None:
                kwargs.update(learning_rate=lr, penalty=mu)
            start = time.perf_counter()
            model = RFFNet(**kwargs).fit(X, y)
            seconds = time.perf_counter() - start
            val_mse = float(np.mean((model.predict_network(self.X_val) - self.y_val) ** 2))
            if best is None or val_mse < best[1]:
                best = (model, val_mse, seconds)
        self.model_, self.validation_mse_, self.seconds_ = best
        return self

    def posterior(self, X):
        return self.model_.posterior(X)


def _columns(kind: str, run: RunContext, tuned: _ValidationTuned, post) -> dict:
    """The paper's metrics of one run: MSE of the network and of the Bayesian last layer's mean with the
    authors' band, the relevances and what the fit chose."""
    model, Xte, yte = tuned.model_, run.data.X_test, run.data.y_test
    err_net = (model.predict_network(Xte) - yte) ** 2
    err_bayes = (post.mean.numpy() - yte) ** 2
    top5 = sorted(np.argsort(-model.scaled_relevances_)[:5].tolist())
    return {
        "kind": kind, "p": run.data.X_train.shape[1],
        "mse_network": float(err_net.mean()), "band_network": _band(err_net),
        "mse_bayes": float(err_bayes.mean()), "band_bayes": _band(err_bayes), "validation_mse": tuned.validation_mse_,
        "learning_rate": model.learning_rate, "penalty": model.penalty, "seconds": tuned.seconds_,
        "epochs": model.epochs_, "best_epoch": model.best_epoch_,
        "top5_exact": run.dataset in RELEVANT and top5 == RELEVANT[run.dataset],
        "scaled_relevances": " ".join(f"{v:.4f}" for v in model.scaled_relevances_),
        "top5": [j + 1 for j in top5],  # printed, not stored
    }


def _band(errors: np.ndarray) -> float:
    return 2.0 * math.sqrt(errors.var() / errors.size)


def _table(rows: list[dict]) -> list[str]:
    lines = ["| set | n train | p | splits | MSE network (ours) | MSE Bayes last layer | paper MSE | \\|ours − paper\\| / "
             "paper band | top-5 relevances = true set | 95% coverage | NLPD | fit s | epochs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["dataset"] for r in rows if r["kind"] == "table"):
        sel = [r for r in rows if r["dataset"] == name and r["kind"] == "table"]
        net = np.array([r["mse_network"] for r in sel])
        bayes = np.array([r["mse_bayes"] for r in sel])
        band = np.mean([r["band_network"] for r in sel])
        paper, paper_band = PAPER[name]
        f = (lambda v: f"{v / 1e-8:.2f}e-8") if name == "ailerons" else (lambda v: f"{v:.3g}")
        recovered = ("—" if name not in RELEVANT else
                     f"{sum(bool(r['top5_exact']) for r in sel)}/{len(sel)}")
        lines.append(
            f"| {name} | {sel[0]['n_train']} | {sel[0]['p']} | {len(sel)} | {f(net.mean())} ± {f(band)} | "
            f"{f(bayes.mean())} ± {f(np.mean([r['band_bayes'] for r in sel]))} | {f(paper)} ± {f(paper_band)} | "
            f"{abs(net.mean() - paper) / (paper_band / 2):.1f} SE | {recovered} | "
            f"{np.mean([r['coverage_95'] for r in sel]):.3f} | {np.mean([r['nlpd'] for r in sel]):.3f} | "
            f"{np.mean([r['seconds'] for r in sel]):.0f} | {np.mean([r['epochs'] for r in sel]):.0f} |")
    return lines


def _figure(rows: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in ("se1", "se2") if any(r["dataset"] == n and r["kind"] == "size" for r in rows)]
    if not names:
        return
    fig, axes = plt.subplots(len(names), 1, figsize=(9.0, 2.8 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        sel = sorted((r for r in rows if r["dataset"] == name and r["kind"] == "size"), key=lambda r: r["n_train"])
        p = sel[0]["p"]
        width = 0.8 / len(sel)
        for i, r in enumerate(sel):
            values = np.array([float(v) for v in str(r["scaled_relevances"]).split()])
            ax.bar(np.arange(1, p + 1) + (i - (len(sel) - 1) / 2) * width, values, width=width,
                   label=f"n = {r['n_train']}")
        for j in RELEVANT[name]:
            ax.axvspan(j + 0.55, j + 1.45, color="0.9", zorder=0)
        ax.set_xlim(0.4, p + 0.6)
        if p > 30:
            ax.set_xlim(0.4, 30.6)
            ax.set_title(f"{name.upper()}: scaled relevances (inputs 1–30 of {p}; shaded: the true inputs)")
        else:
            ax.set_title(f"{name.upper()}: scaled relevances (shaded: the true inputs)")
        ax.set_ylabel("|λ| scaled to [0, 1]")
        ax.legend(fontsize=7, ncol=len(sel))
    axes[-1, 0].set_xlabel("input")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks rffnet_table2")
    parser.add_argument("--only", nargs="+", default=list(PAPER), choices=list(PAPER))
    parser.add_argument("--splits", type=int, default=1, help="random splits of ailerons/comp-activ (paper: 1)")
    parser.add_argument("--sizes", nargs="*", type=int, default=[1_000, 5_000, 10_000],
                        help="extra SE1/SE2 training sizes for the sample-size figure (5·10⁴ comes from the table)")
    parser.add_argument("--table-n", type=int, default=50_000,
                        help="SE1/SE2 training rows of the table row (paper and default: 5·10⁴)")
    parser.add_argument("--tune", action="store_true", help="choose (lr, μ) on the validation set over a grid")
    parser.add_argument("--resume", default=None, help="runs.csv of an interrupted run; its rows are reused")
    args = parser.parse_args(argv)
    runs = output_path("rffnet_table2", "_runs.csv")
    done = read_rows(args.resume) if args.resume else []
    rows: list[dict] = [r for r in done if r["dataset"] not in args.only]  # other sets' rows stay in the table

    def split_done(dataset: str, k: int, split_rows: list[dict]) -> None:
        row = {key: split_rows[0][key] for key in COLUMNS}
        rows.append(row)
        print(f"{dataset} {row['kind']} split {k} n {row['n_train']}: network MSE {row['mse_network']:.4g}, "
              f"Bayes {row['mse_bayes']:.4g}, coverage {row['coverage_95']:.3f}, top-5 {split_rows[0]['top5']}, "
              f"{row['seconds']:.0f} s, {row['epochs']} epochs", flush=True)
        write_rows(rows, runs)

    def run(name: str, splits: range, kind: str, n_train: int | None = None) -> None:
        """The splits of one (set, kind, size) through :func:`tnbayes.compare`; those in ``--resume`` are reused."""
        todo = []
        for k in splits:
            previous = [r for r in done if r["dataset"] == name and r["kind"] == kind and int(r["split"]) == k
                        and (n_train is None or int(r["n_train"]) == n_train)]
            rows.extend(previous)
            todo += [] if previous else [k]
        if todo:
            def tuned(run: RunContext) -> _ValidationTuned:
                return _ValidationTuned(run.data.X_val, run.data.y_val, args.tune, seed=run.split)

            compare({"RFFNet": tuned}, [name], todo, load=lambda dataset, k: _split(dataset, k, n_train),
                    columns=lambda run, model, post: _columns(kind, run, model, post), progress=False,
                    on_split=split_done)

    for name in args.only:
        run(name, range(1 if name in RELEVANT else args.splits), "table", args.table_n if name in RELEVANT else None)
        if name in RELEVANT:
            for n_train in args.sizes:
                run(name, range(1), "size", n_train)
            table_row = [r for r in rows if r["dataset"] == name and r["kind"] == "table" and int(r["split"]) == 0]
            rows.extend({**r, "kind": "size"} for r in table_row)
    write_rows(rows, runs)
    protocol = ("see the module docstring of benchmarks/papers/rffnet_table2.py; "
                f"{'(lr, μ) tuned on the validation set' if args.tune else 'package defaults'}; per-run rows in "
                "results/rffnet_table2/rffnet_table2_runs.csv; ± is the authors' band 2·SE of the test squared errors")
    text = (header("RFFNet: the paper's Table 2", protocol) + "\n".join(_table(rows)) +
            "\n\nSample-size study (scaled relevances per input for n = "
            + ", ".join(str(n) for n in sorted(set(args.sizes) | {args.table_n})) + "): rffnet_table2_sizes.png\n")
    output_path("rffnet_table2", ".md").write_text(text)
    _figure(rows, output_path("rffnet_table2", "_sizes.png"))
    print(text)
    return 0
