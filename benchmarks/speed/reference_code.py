"""Our RFFNet and FL beside the seed papers' own code: fit time and accuracy on the same data, threads and updates.

The reference implementations are run from checkouts outside this repository, never copied into it:

* RFFNet — ``mpotto/pyselect`` (torch; ``pyselect.estimators.RFFNetRegressor``, whose ``palm_solver`` is the
  authors' block proximal Adam), ``--pyselect PATH`` (default ``$TNBAYES_PYSELECT`` or ``/work/refcode/pyselect``);
* FL — ``OrProjtor/TN-FL-Model`` (numpy; ``source.models.QCPRf.QCPRf``, the model of its ``experiments.ipynb``),
  ``--tn-fl PATH`` (default ``$TNBAYES_TN_FL`` or ``/work/refcode/TN-FL-Model``).

A pair whose checkout is missing is reported as skipped (its own rows still run), so the entry also runs where
the reference code is absent (CI).

Protocol. Every fit runs in its own fresh subprocess with one thread (``torch.set_num_threads(1)``,
``OMP_NUM_THREADS=MKL_NUM_THREADS=OPENBLAS_NUM_THREADS=1``), after a tiny untimed warm-up fit with the same code
(one-time lazy initialisation — the first ``torch.optim`` optimizer of a process imports for about a second —
is counted for neither side), ours and theirs alternating, ``--repeats`` times
(default 3); the table gives the median fit seconds and the ratio theirs / ours (> 1: ours is faster). Repeat k
uses model seed k in both codes (random features / initial cores and λ; the data and splits stay fixed), so the
MSE column is the mean over the repeats' seeds ± its standard error.

* ``rffnet``: SE1 (``tnbayes.datasets.make_se1``, seed 0) with ``--rffnet-n`` training rows (default 5000) and
  2000 test rows. Both get the same problem: X standardised with the training statistics, y standardised with
  the training mean and standard deviation (pyselect gets them so; ``RFFNet`` does it itself), MSE on the test
  rows in y's own units. Matched settings: s = ⌊√n ln n⌋ random features, λ init 0, 10% of the training rows held
  out for validation (a different random 10% in each code), batch size, learning rate and μ as given
  (``--rffnet-configs``, default batch 32 — both packages' default — and 250, the authors' SE1 script; lr 1e-2,
  μ = 1e-4), the authors' per-epoch alternation of the β and λ blocks (``schedule="epoch"``), ``--rffnet-epochs``
  epochs (default 50) with no early stopping (pyselect ``early_stopping=False``; ours ``patience`` = the epochs),
  float32 training. Updates = β steps + λ steps: pyselect drops the last partial mini-batch of an epoch, we do
  not (at n_train = 4500 and batch 32: 140 against 141 steps per block and epoch; equal at batch 250). Our MSE
  is the trained network's (``predict_network``, the paper's predictor, as pyselect's ``predict``) and, in
  brackets, the Bayesian last layer's; our fit time includes the last layer (one pass over the rows and an s×s
  eigendecomposition).
* ``fl``: airfoil (``../shared/data``, the fixed random 80/20 split k of ``benchmarks/papers/fl_table2.py``,
  ``--fl-splits``), the notebook's settings: M = 4 (quantized, K = 2 cores per input: 10 cores), R = 51, P = 8
  periods θ ∈ {10, 2, 128, 25, 64, 600, 2000, 1024}, α = 0.01, β = 0.1, L1 on λ, raw (not normalised) features,
  inputs min–max scaled with the training range, y standardised with the training statistics, test MSE on that
  scale. The reference does one forward pass over the 10 cores per epoch (``n_epoch``) with a λ update before
  each and one at the end; ours does a forward-and-back sweep (18 core updates) then the λ update, plus a closing
  update of core 0. Rows: the notebook's 10 epochs (100 core updates) against our 10 sweeps (181), and the
  reference at 18 epochs (180 core updates) against our 10 sweeps (equal updates). Fit time: the reference's
  MinMaxScaler + ``QCPRf.fit`` (the notebook's pipeline), our ``FeatureLearningKM.fit`` (it scales itself).
  Differences that remain: the initial cores and λ are drawn by each code's own generator (seeded); test rows
  beyond the training range are clipped by ours (``out_of_box="clip"``), evaluated as they are by the reference.
  A second row per setting gives our FL with ``dtype="float32"`` (complex64 cores and accumulation, each core's
  system solved in float64) against the same reference runs (``--no-fl-float32`` leaves it out).

    python -m benchmarks reference_code                       # both pairs, 3 interleaved repeats (≈ 10 minutes)
    python -m benchmarks reference_code --pairs fl --repeats 5
    python -m benchmarks reference_code --pyselect ~/src/pyselect --tn-fl ~/src/TN-FL-Model
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks._common import header, output_path

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ("rffnet", "fl")
PYSELECT_ENV, TN_FL_ENV = "TNBAYES_PYSELECT", "TNBAYES_TN_FL"
DEFAULT_PYSELECT, DEFAULT_TN_FL = "/work/refcode/pyselect", "/work/refcode/TN-FL-Model"
#: the FL notebook's settings for airfoil (``source/experiment_functions.py``: data2model_params)
FL_PERIODS = (10.0, 2.0, 128.0, 25.0, 64.0, 600.0, 2000.0, 1024.0)
FL_RANK, FL_M, FL_ALPHA, FL_BETA, FL_FISTA_STEPS, FL_SEED = 51, 4, 1e-2, 1e-1, 500, 13


# ---------------------------------------------------------------------- workers (run in a subprocess)
def _rffnet_worker(impl: str, path: str, n: int, epochs: int, batch: int, lr: float, penalty: float,
                   seed: int) -> dict:
    """One RFFNet fit on SE1 by ``impl`` ("ours" or "pyselect") with model seed ``seed``; seconds, test MSE and
    updates."""
    import time

    import numpy as np

    from tnbayes.datasets.synthetic import make_se1

    data = make_se1(n_train=n, n_val=2_000, n_test=2_000, seed=0)
    Xtr, ytr, Xte, yte = (np.asarray(a, dtype=np.float64) for a in (data.X_train, data.y_train, data.X_test,
                                                                     data.y_test))
    n_val = int(round(0.1 * n))
    if impl == "ours":
        from tnbayes import RFFNet

        model = RFFNet(learning_rate=lr, penalty=penalty, batch_size=batch, max_epochs=epochs, patience=epochs,
                       schedule="epoch", seed=seed)
        start = time.perf_counter()
        model.fit(Xtr, ytr)
        seconds = time.perf_counter() - start
        steps = model.epochs_ * math.ceil((n - n_val) / batch)
        return {"seconds": seconds, "training_seconds": model.training_seconds_,
                "mse": float(np.mean((model.predict_network(Xte) - yte) ** 2)),
                "mse_bayes": float(np.mean((model.predict(Xte) - yte) ** 2)),
                "updates": 2 * steps, "epochs": model.epochs_}
    sys.path.insert(0, str(Path(path) / "src"))
    import torch
    from pyselect.estimators import RFFNetRegressor

    mean, std = Xtr.mean(0), Xtr.std(0)
    y_mean, y_std = ytr.mean(), ytr.std()
    start = time.perf_counter()
    Xs, ys = (Xtr - mean) / std, ((ytr - y_mean) / y_std).reshape(-1, 1)  # their script's StandardScaler
    model = RFFNetRegressor(lr=lr, alpha=penalty, batch_size=batch, max_iter=epochs, early_stopping=False,
                            validation_fraction=0.1, torch_seed=seed, random_state=seed)
    model.fit(Xs, ys)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        pred = model.predict((Xte - mean) / std).reshape(-1) * y_std + y_mean
    n_train = n - math.ceil(0.1 * n)  # sklearn's train_test_split rounds the held-out share up
    return {"seconds": seconds, "training_seconds": seconds, "mse": float(np.mean((pred - yte) ** 2)),
            "mse_bayes": float("nan"), "updates": 2 * epochs * (n_train // batch), "epochs": epochs}


def _fl_worker(impl: str, path: str, split: int, epochs: int, seed: int) -> dict:
    """One FL fit on airfoil split ``split`` by ``impl`` ("ours", "ours-float32" or "reference") with model seed
    ``seed`` (the reference: 13 + seed, 13 being the notebook's); seconds, test MSE, updates."""
    import time
    import warnings

    import numpy as np

    from benchmarks._common import random_split

    Xtr, ytr, Xte, yte = random_split("airfoil", split, 0.2)
    y_mean, y_std = float(np.mean(ytr)), float(np.std(ytr))
    ys, yte_s = (ytr - y_mean) / y_std, (yte - y_mean) / y_std
    num_cores = Xtr.shape[1] * int(math.log2(FL_M))
    if impl.startswith("ours"):
        from tnbayes import FeatureLearningKM

        warnings.simplefilter("ignore")
        model = FeatureLearningKM(rank=FL_RANK, num_basis=FL_M, periods=FL_PERIODS, penalty=FL_ALPHA,
                                  mixture_penalty_strength=FL_BETA, mixture_penalty="l1", max_sweeps=epochs,
                                  normalize_features=False, uncertainty="none", out_of_box="clip", seed=seed,
                                  dtype="float32" if impl == "ours-float32" else "float64")
        start = time.perf_counter()
        model.fit(Xtr, ys)
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "mse": float(np.mean((model.predict(Xte) - yte_s) ** 2)),
                "updates": epochs * (2 * num_cores - 2) + 1, "lambda_updates": epochs,
                "families": len(model.active_families_)}
    sys.path.insert(0, str(path))
    from sklearn.preprocessing import MinMaxScaler
    from source.features import FFeature
    from source.models.QCPRf import QCPRf

    start = time.perf_counter()
    scaler = MinMaxScaler().fit(Xtr)
    model = QCPRf(rank=FL_RANK, m_order=FL_M, n_epoch=epochs, alpha=FL_ALPHA, beta=FL_BETA, lambda_reg_type="l1",
                  positive_lambda=False, n_steps_l1=FL_FISTA_STEPS, update_order_t="lw", random_state=FL_SEED + seed,
                  fmaps_list=[FFeature(p) for p in FL_PERIODS])
    model.fit(scaler.transform(Xtr), ys)
    seconds = time.perf_counter() - start
    pred = model.predict(scaler.transform(Xte))
    return {"seconds": seconds, "mse": float(np.mean((pred - yte_s) ** 2)), "updates": epochs * num_cores,
            "lambda_updates": epochs + 1, "families": int(np.count_nonzero(model.lambdas_))}


def _warm_up(worker: str, impl: str, path: str) -> None:
    """A tiny fit with the same code before the timed one, so that one-time lazy initialisation (the first
    ``torch.optim`` optimizer of a process imports for about a second) is counted for neither side."""
    if worker == "_rffnet_worker":
        _rffnet_worker(impl, path, 200, 1, 32, 1e-2, 1e-4, 0)
    else:
        _fl_worker(impl, path, 0, 1, 0)


def _run(worker: str, *args) -> dict:
    """``worker(*args)`` in a fresh subprocess with one thread; its result dict."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    code = ("import sys, json, torch; torch.set_num_threads(1); "
            "from benchmarks._common import default_data_dir; default_data_dir(); "
            "from benchmarks.speed import reference_code as r; "
            "args = json.loads(sys.argv[2]); r._warm_up(sys.argv[1], args[0], args[1]); "
            "print('RESULT ' + json.dumps(getattr(r, sys.argv[1])(*args)))")
    out = subprocess.run([sys.executable, "-c", code, worker, json.dumps(list(args))], env=env, cwd=str(ROOT),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{worker}{args} failed:\n{out.stderr[-3000:]}")
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


# ---------------------------------------------------------------------- the pairs
def _checkout(path: str, marker: str, name: str) -> str | None:
    """``path`` when it holds ``marker`` (a file of the reference code), else None with a message."""
    if (Path(path) / marker).is_file():
        return path
    print(f"{name}: no checkout at {path} (no {marker}); its rows are skipped. Clone it and pass its path "
          f"(see the module docstring).", flush=True)
    return None


def _interleaved(repeats: int, runs: dict[str, tuple]) -> dict[str, list[dict]]:
    """Each run of ``runs`` (label → (worker, args…)) ``repeats`` times, one of each in turn; repeat k passes
    model seed k (the data stay the same)."""
    results: dict[str, list[dict]] = {label: [] for label in runs}
    for repeat in range(repeats):
        for label, (worker, *args) in runs.items():
            results[label].append(_run(worker, *args, repeat))
            r = results[label][-1]
            print(f"  repeat {repeat}: {label}: {r['seconds']:.2f} s, MSE {r['mse']:.4f}, {r['updates']} updates",
                  flush=True)
    return results


def _median(runs: list[dict], key: str = "seconds") -> float:
    return statistics.median(r[key] for r in runs)


def _mse(runs: list[dict], key: str = "mse") -> str:
    """Mean test MSE over the repeats (seeds) ± its standard error."""
    values = [r[key] for r in runs]
    spread = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} ± {spread:.4f}"


def _row(pair: str, setting: str, ours: list[dict], theirs: list[dict] | None) -> str:
    o = _median(ours)
    mse_ours = _mse(ours) + (f" ({_mse(ours, 'mse_bayes')})" if "mse_bayes" in ours[0] else "")
    if theirs is None:
        return (f"| {pair} | {setting} | {o:.2f} | — | — | {mse_ours} | — | {ours[0]['updates']} | — |")
    t = _median(theirs)
    return (f"| {pair} | {setting} | {o:.2f} | {t:.2f} | {t / o:.2f}× | {mse_ours} | {_mse(theirs)} | "
            f"{ours[0]['updates']} | {theirs[0]['updates']} |")


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0 (also when a reference checkout is missing: its rows are skipped)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks reference_code")
    parser.add_argument("--pyselect", default=os.environ.get(PYSELECT_ENV, DEFAULT_PYSELECT),
                        help=f"checkout of mpotto/pyselect (default ${PYSELECT_ENV} or {DEFAULT_PYSELECT})")
    parser.add_argument("--tn-fl", default=os.environ.get(TN_FL_ENV, DEFAULT_TN_FL),
                        help=f"checkout of OrProjtor/TN-FL-Model (default ${TN_FL_ENV} or {DEFAULT_TN_FL})")
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=PAIRS)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats per row (median reported)")
    parser.add_argument("--rffnet-n", type=int, default=5000, help="SE1 training rows (validation share included)")
    parser.add_argument("--rffnet-epochs", type=int, default=50)
    parser.add_argument("--rffnet-configs", nargs="+", default=["32:1e-2:1e-4", "250:1e-2:1e-4"],
                        help="batch:learning rate:μ per row")
    parser.add_argument("--fl-splits", type=int, nargs="+", default=[0], help="airfoil splits (fl_table2's)")
    parser.add_argument("--fl-epochs", nargs="+", default=["10:10", "10:18"],
                        help="ours sweeps:reference epochs per row (10:10 the notebook's, 10:18 equal core updates)")
    parser.add_argument("--no-fl-float32", dest="fl_float32", action="store_false",
                        help="skip our FL with dtype='float32' (complex64 cores, solves in float64)")
    parser.add_argument("--variant", default="", help="write results/reference_code/reference_code_<variant>.md")
    args = parser.parse_args(argv)
    pyselect = _checkout(args.pyselect, "src/pyselect/solvers/palm_solver.py", "pyselect") \
        if "rffnet" in args.pairs else None
    tn_fl = _checkout(args.tn_fl, "source/models/QCPRf.py", "TN-FL-Model") if "fl" in args.pairs else None

    lines = ["| pair | setting | ours s | theirs s | theirs / ours | MSE ours | MSE theirs | updates ours | "
             "updates theirs |", "|---|---|---|---|---|---|---|---|---|"]
    if "rffnet" in args.pairs:
        for config in args.rffnet_configs:
            batch, lr, penalty = config.split(":")
            common = (args.rffnet_n, args.rffnet_epochs, int(batch), float(lr), float(penalty))
            runs = {"ours": ("_rffnet_worker", "ours", "", *common)}
            if pyselect:
                runs["pyselect"] = ("_rffnet_worker", "pyselect", pyselect, *common)
            print(f"RFFNet SE1 n = {args.rffnet_n}, {args.rffnet_epochs} epochs, batch {batch}, lr {lr}, μ {penalty}",
                  flush=True)
            res = _interleaved(args.repeats, runs)
            lines.append(_row("RFFNet / pyselect", f"SE1 n = {args.rffnet_n}, {args.rffnet_epochs} epochs, "
                              f"batch {batch}, lr {lr}, μ {penalty}", res["ours"], res.get("pyselect")))
            print(lines[-1], flush=True)
    if "fl" in args.pairs:
        for split in args.fl_splits:
            for config in args.fl_epochs:
                sweeps, epochs = (int(v) for v in config.split(":"))
                runs = {"ours": ("_fl_worker", "ours", "", split, sweeps)}
                if args.fl_float32:
                    runs["ours-float32"] = ("_fl_worker", "ours-float32", "", split, sweeps)
                if tn_fl:
                    runs["reference"] = ("_fl_worker", "reference", tn_fl, split, epochs)
                print(f"FL airfoil split {split}: our {sweeps} sweeps, reference {epochs} epochs", flush=True)
                res = _interleaved(args.repeats, runs)
                setting = f"airfoil split {split}, ours {sweeps} sweeps / theirs {epochs} epochs"
                lines.append(_row("FL / TN-FL-Model", setting, res["ours"], res.get("reference")))
                print(lines[-1], flush=True)
                if args.fl_float32:
                    lines.append(_row("FL (ours dtype=float32) / TN-FL-Model", setting, res["ours-float32"],
                                      res.get("reference")))
                    print(lines[-1], flush=True)
    missing = [name for name, present, pair in (("pyselect", pyselect, "rffnet"), ("TN-FL-Model", tn_fl, "fl"))
               if pair in args.pairs and not present]
    protocol = (f"see the module docstring of benchmarks/speed/reference_code.py; median of {args.repeats} "
                "interleaved repeats (seed k in repeat k), one subprocess per fit, one thread; MSE: mean ± SE over the "
                "repeats' seeds, ours the trained network's "
                "(RFFNet: the Bayesian last layer's in brackets); updates: core updates (FL), β + λ steps (RFFNet)"
                + (f"; reference code missing, rows without it: {', '.join(missing)}" if missing else ""))
    text = header("Our RFFNet and FL beside the seed papers' code", protocol, fit_threads=1) + "\n".join(lines) + "\n"
    output_path("reference_code", ".md", args.variant).write_text(text)
    print(text)
    return 0
