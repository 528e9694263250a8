"""QTKM against TKM at equal parameter counts on UCI regression (Wesel & Batselier 2024, the learning curves).

Protocol (the paper's): 10 random 90/10 splits of all rows (``numpy.random.default_rng(k)``, k = 0..9);
inputs min–max scaled to [−0.5, 0.5] with training statistics, two-valued columns too
(``binary_width_grid=(1.0,)``; the default narrows them when the CV prefers it); M = 16 Fourier
features per input; λ and P by 3-fold cross-validation of exact kernel ridge regression on the whole
training set over P ∈ {1.25, 1.5, 2, 3, 5, 9, 17, 33, 65} and λ (per-sample, penalty N·λ‖W‖²) — one deviation:
our features are normalised (ψ/√M per input, k(x, x) = 1), so the λ grid is 10^{−14..2} instead of the
paper's 10^{−5..5} for raw features (k(x, x) = M^D; on wine-red, D = 11, the raw-feature CV picked the grid's
upper edge and both models overfit),
chosen once per split and shared by both models; equal parameter budgets R_QTKM = R_TKM · M / (2 log2 M)
= 2 R_TKM; ALS until a sweep changes the objective by < 1e-7 (at most 50 sweeps; the paper runs "a very
large number of iterations", its count lost in conversion). Test MSE on y standardised with training statistics; also NLPD and 95%
coverage of the Laplace predictive (``uncertainty="all_cores"``). The fits run through :func:`tnbayes.compare`
(these random splits as its ``load``; the later models of a split take λ and P from its first fit).

    python -m benchmarks qtkm_uci                      # all five sets (about 40 minutes on 2 cores)
    python -m benchmarks qtkm_uci --only yacht --splits 2
    python -m benchmarks qtkm_uci --resume benchmarks/results/qtkm_uci/qtkm_uci_runs.csv   # continue a stopped run
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np

from benchmarks._common import header, output_path, random_split, read_rows, write_rows
from tnbayes import QTKM, TKM
from tnbayes.compare import RunContext, compare

DATASETS = ("yacht", "airfoil", "concrete", "energy", "wine-red")
TKM_RANKS = (2, 4, 8, 16)
NUM_BASIS = 16
#: the paper runs ALS "for a very large number of iterations" so both models converge (its count was lost)
MAX_SWEEPS = 50


def _model(cls: type, rank: int, first: str | None, run: RunContext):
    """One model of a split; the first one chooses λ and P by cross-validation, the others reuse its choice."""
    # binary_width_grid=(1.0,): every input min–max scaled alike, as in the paper (and λ, P shared with the later fits)
    kwargs = dict(rank=rank, num_basis=NUM_BASIS, max_sweeps=MAX_SWEEPS, tol=1e-7, seed=run.split,
                  binary_width_grid=(1.0,))
    if first is None:
        kwargs["hyper_max_points"] = len(run.data.y_train)
    else:
        kwargs.update(penalty=run.fitted[first].penalty_, period=run.fitted[first].period_)
    return cls(**kwargs)


def _models(tkm_ranks: tuple[int, ...] = TKM_RANKS) -> dict:
    """Label -> factory: TKM and QTKM at each equal parameter budget, TKM first (R_QTKM = 2 R_TKM)."""
    models, first = {}, None
    for tkm_rank in tkm_ranks:
        for cls, rank in ((TKM, tkm_rank), (QTKM, 2 * tkm_rank)):
            label = f"{cls.__name__} R={rank}"
            models[label] = partial(_model, cls, rank, first)
            first = first or label
    return models


def _columns(run: RunContext, model, post) -> dict:
    return {"rank": model.rank, "parameters": model.num_parameters, "penalty": model.penalty_,
            "period": model.period_, "y_std": float(np.std(run.data.y_train))}


def _paper_row(row: dict) -> dict:
    """A compare row → this table's row: MSE and NLPD on y standardised with the training statistics."""
    scale = row["y_std"]
    return {"dataset": row["dataset"], "split": row["split"], "model": row["model"].split()[0], "rank": row["rank"],
            "parameters": row["parameters"], "mse": row["rmse"] ** 2 / scale**2, "nlpd": row["nlpd"] - np.log(scale),
            "coverage_95": row["coverage_95"], "penalty": row["penalty"], "period": row["period"],
            "seconds": row["fit_seconds"]}


def _run(name: str, splits: int, done: list[dict], rows: list[dict], on_split,
         tkm_ranks: tuple[int, ...] = TKM_RANKS) -> None:
    """Append the rows of every split of ``name`` to ``rows`` (those in ``done`` are reused); ``on_split()``
    after each split. The fits run through :func:`tnbayes.compare` on the paper's random splits."""
    reused = [r for r in done if r["dataset"] == name and int(r["split"]) < splits]  # an earlier (stopped) run
    todo = [k for k in range(splits) if not any(int(r["split"]) == k for r in reused)]
    rows.extend(reused)

    def split_done(dataset: str, k: int, split_rows: list[dict]) -> None:
        new = [_paper_row(r) for r in split_rows]
        rows.extend(new)
        for tkm, qtkm in zip(new[::2], new[1::2]):
            print(f"{name} split {k} R_TKM {tkm['rank']}: TKM {tkm['mse']:.4f} QTKM {qtkm['mse']:.4f} "
                  f"(λ {tkm['penalty']:g}, P {tkm['period']:g})", flush=True)
        on_split()

    if todo:
        # test inputs outside the training range are allowed up to P/2 (checked by the model)
        compare(_models(tkm_ranks), [name], todo, load=lambda dataset, k: random_split(dataset, k, 0.1),
                columns=_columns, progress=False, on_split=split_done)
    mine = [r for r in rows if r["dataset"] == name]
    rows[len(rows) - len(mine):] = sorted(mine, key=lambda r: int(r["split"]))  # split order, as run in one go


def _summary(rows: list[dict]) -> list[str]:
    lines = ["| dataset | parameters | TKM R | TKM test MSE | QTKM R | QTKM test MSE | QTKM ≤ TKM (splits) | "
             "TKM / QTKM NLPD | TKM / QTKM 95% coverage |", "|---|---|---|---|---|---|---|---|---|"]
    wins = {}
    for name in dict.fromkeys(r["dataset"] for r in rows):
        for tkm_rank in sorted({r["rank"] for r in rows if r["dataset"] == name and r["model"] == "TKM"}):
            tkm = [r for r in rows if r["dataset"] == name and r["model"] == "TKM" and r["rank"] == tkm_rank]
            qtkm = [r for r in rows if r["dataset"] == name and r["model"] == "QTKM" and r["rank"] == 2 * tkm_rank]
            a, b = np.array([r["mse"] for r in tkm]), np.array([r["mse"] for r in qtkm])
            n = len(a)
            better = int(np.sum(b <= a))
            wins.setdefault(name, []).append(b.mean() <= a.mean())
            lines.append(
                f"| {name} | {tkm[0]['parameters']} | {tkm_rank} | {a.mean():.4f} ± {a.std(ddof=1) / np.sqrt(n) if n > 1 else 0:.4f} | "
                f"{2 * tkm_rank} | {b.mean():.4f} ± {b.std(ddof=1) / np.sqrt(n) if n > 1 else 0:.4f} | {better}/{n} | "
                f"{np.mean([r['nlpd'] for r in tkm]):.3f} / {np.mean([r['nlpd'] for r in qtkm]):.3f} | "
                f"{np.mean([r['coverage_95'] for r in tkm]):.3f} / {np.mean([r['coverage_95'] for r in qtkm]):.3f} |")
    lines.append("")
    lines.append("Mean QTKM test MSE ≤ mean TKM test MSE at equal parameters: " + ", ".join(
        f"{name} {sum(w)}/{len(w)} budgets" for name, w in wins.items()))
    return lines


def _figure(rows: list[dict], path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        for model, color in (("TKM", "C0"), ("QTKM", "C3")):
            sel = [r for r in rows if r["dataset"] == name and r["model"] == model]
            params = sorted({r["parameters"] for r in sel})
            mean = [np.mean([r["mse"] for r in sel if r["parameters"] == p]) for p in params]
            se = [np.std([r["mse"] for r in sel if r["parameters"] == p]) /
                  np.sqrt(max(1, sum(r["parameters"] == p for r in sel))) for p in params]
            ax.errorbar(params, mean, yerr=se, marker="o", color=color, label=model, capsize=2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("number of parameters")
    axes[0][0].set_ylabel("test MSE (standardised y)")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks qtkm_uci")
    parser.add_argument("--only", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--tkm-ranks", type=int, nargs="+", default=list(TKM_RANKS),
                        help="TKM ranks of the equal parameter budgets (QTKM's are twice these)")
    parser.add_argument("--resume", default=None,
                        help="runs.csv of an interrupted run of this script (same code); its splits are not re-fitted")
    args = parser.parse_args(argv)
    full = args.splits == 10 and list(args.only) == list(DATASETS) and tuple(args.tkm_ranks) == TKM_RANKS
    variant = "" if full else "partial"
    runs = output_path("qtkm_uci", "_runs.csv", variant)
    figure = output_path("qtkm_uci", ".png", variant)
    done = read_rows(args.resume) if args.resume else []
    rows: list[dict] = []
    for dataset in args.only:
        _run(dataset, args.splits, done, rows, lambda: write_rows(rows, runs), tuple(args.tkm_ranks))
    protocol = f"see the module docstring of benchmarks/papers/qtkm_uci.py; per-split rows in results/qtkm_uci/{runs.name}"
    text = header("QTKM vs TKM at equal parameter counts (UCI)", protocol) + "\n".join(_summary(rows)) + \
        f"\n\nFigure (test MSE against the number of parameters): {figure.name}\n"
    output_path("qtkm_uci", ".md", variant).write_text(text)
    _figure(rows, figure)
    print(text)
    return 0
