"""Scale-out: an out-of-core CPD fit on all of airline read chunk by chunk from parquet (peak memory and fit
time), and data-parallel throughput with 1 and 2 processes on torch.distributed (gloo, torchrun).

Protocol.

* *Airline from disk.* The 2,055,733 Jan–Apr 2008 flights minus the fixed split's 100,000 test rows
  (1,955,733 training rows) are written to parquet (row groups of 65,536 rows) in a work folder; a fresh
  Python process fits ``CPDKernelMachine(rank=R, num_basis=40, max_sweeps=S)`` (default hyper-parameters:
  exact-GP marginal likelihood on 1000 of the 4000 rows sampled in the first pass) on
  ``ChunkedData.from_parquet(...)`` and is then scored on the fixed 100,000 test rows. Reported: fit time,
  the process's resident memory before the fit (Python, torch, tnbayes imported), its peak during the fit
  (``ru_maxrss``) and the difference, next to the size of the raw training data as float64.
* *Throughput.* The first ``--throughput-rows`` training rows as ``.npy`` (memory-mapped);
  ``torchrun --nproc_per_node=P examples/distributed_fit.py`` with fixed hyper-parameters (so no GP fit is
  timed), rank 10, M = 40, one sweep; every process runs one torch thread (P = 1, 2), plus one process with
  two threads for comparison. Rows per second = rows / fit seconds (the fit is a first pass plus 24 passes
  for core updates, objectives and the Laplace factors); speed-up against the 1-process run of the same run.
* GPU rows are added when ``torch.cuda.is_available()`` (device named in the header).

    python -m benchmarks scale_out                        # airline R = 10, 3 sweeps + throughput on 200k rows
    python -m benchmarks scale_out --skip-airline --throughput-rows 50000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks._common import header, output_path, variant_of

REPO = Path(__file__).resolve().parents[2]  # benchmarks/speed/scale_out.py -> the repository
EXAMPLE = REPO / "examples" / "distributed_fit.py"


def _rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def prepare(workdir: Path, throughput_rows: int, max_rows: int | None = None) -> dict:
    """Write train.parquet (all rows but the fixed test rows, or the first ``max_rows`` of them), test.npz and
    the throughput .npy files (once per work folder)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tnbayes import datasets

    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / "prepared.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("throughput_rows") == throughput_rows and info.get("max_rows") == max_rows:
            return info
    import pandas as pd

    from tnbayes.datasets._readers import AIRLINE_FEATURES, _hhmm_to_minutes

    source = Path(os.environ["TNBAYES_DATA_DIR"]) / "airline"
    df = pd.read_csv(source / "airline_2008_jan_apr.csv.gz", usecols=[*AIRLINE_FEATURES, "ArrDelay"],
                     dtype=np.int64, engine="c")
    for c in ("ArrTime", "DepTime"):
        df[c] = _hhmm_to_minutes(df[c].to_numpy())
    X = df[list(AIRLINE_FEATURES)].to_numpy(dtype=np.float64)
    y = df["ArrDelay"].to_numpy(dtype=np.float64)
    with np.load(source / "split_800k_seed0.npz") as z:
        test = np.asarray(z["test"], dtype=np.intp)
    train = np.setdiff1d(np.arange(len(y)), test)[:max_rows]
    reference = datasets.load("airline")  # check that the test rows are the loader's
    assert np.array_equal(np.sort(X[test], axis=0), np.sort(reference.X_test, axis=0))
    table = pa.table({**{name: X[train, j] for j, name in enumerate(AIRLINE_FEATURES)}, "ArrDelay": y[train]})
    pq.write_table(table, workdir / "train.parquet", row_group_size=65536)
    np.savez(workdir / "test.npz", X=X[test], y=y[test])
    np.save(workdir / "throughput_X.npy", X[train[:throughput_rows]])
    np.save(workdir / "throughput_y.npy", y[train[:throughput_rows]])
    info = {"train_rows": int(len(train)), "test_rows": int(len(test)), "features": list(AIRLINE_FEATURES),
            "throughput_rows": throughput_rows, "max_rows": max_rows}
    marker.write_text(json.dumps(info))
    return info


def fit_worker(workdir: Path, rank: int, sweeps: int, num_basis: int) -> None:
    """Runs in its own process: fit from parquet, print one JSON line with time, memory and test metrics."""
    import torch

    from tnbayes import CPDKernelMachine, metrics
    from tnbayes.data import ChunkedData
    from tnbayes.datasets._readers import AIRLINE_FEATURES

    data = ChunkedData.from_parquet(workdir / "train.parquet", list(AIRLINE_FEATURES), "ArrDelay", batch_size=65536)
    model = CPDKernelMachine(rank=rank, num_basis=num_basis, max_sweeps=sweeps, out_of_box="clip")
    before = _rss_bytes()
    start = time.perf_counter()
    model.fit(data)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with np.load(workdir / "test.npz") as z:
        Xte, yte = z["X"], z["y"]
    post = model.posterior(Xte)
    scores = metrics.evaluate(post, yte)
    scale = float(model.y_scaler_.scale_)
    mse_std = float(((post.mean.numpy() - yte) ** 2).mean()) / scale ** 2
    print(json.dumps({"rows": model.n_train_, "fit_seconds": seconds, "rss_before": before, "rss_peak": peak,
                      "mse_std": mse_std, "nlpd": scores["nlpd"], "coverage_95": scores["coverage_95"],
                      "sweeps": len(model.sweep_objectives_), "objectives": model.sweep_objectives_,
                      "threads": torch.get_num_threads(),
                      "hyperparameters": model.hyperparameter_source_}), flush=True)


def _run_json(command: list[str], env: dict) -> dict:
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-4000:]}")
    return json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])


def throughput(workdir: Path, device: str = "cpu") -> list[dict]:
    """torchrun runs of examples/distributed_fit.py with 1 and 2 processes (1 thread each) and 1 × 2 threads."""
    rows = []
    fixed = ["--rank", "10", "--num-basis", "40", "--lengthscale", "1.0", "--penalty", "1.0",
             "--noise-variance", "0.8", "--max-sweeps", "1", "--device", device]
    for processes, threads in ((1, 1), (2, 1), (1, 2)):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
                   "--master_port=29533", str(EXAMPLE), "--x", str(workdir / "throughput_X.npy"),
                   "--y", str(workdir / "throughput_y.npy"), "--out", str(workdir / "throughput_model.pt"),
                   "--chunk-size", "65536", *fixed]
        report = _run_json(command, env)
        rows.append({"device": device, "processes": processes, "threads": threads, **report})
    return rows


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks scale_out")
    parser.add_argument("--workdir", default=os.environ.get("TNBAYES_SCALE_OUT_DIR", "/tmp/tnbayes_scale_out"))
    parser.add_argument("--rank", type=int, default=10)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--num-basis", type=int, default=40)
    parser.add_argument("--throughput-rows", type=int, default=200_000)
    parser.add_argument("--max-rows", type=int, default=None,
                        help="write only the first n training rows to parquet (the suite's small runs)")
    parser.add_argument("--skip-airline", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="", help="names the result (e.g. airline → results/scale_out/scale_out_airline.md)")
    parser.add_argument("--name", default=None, help=argparse.SUPPRESS)  # the variant's old spelling: scale_out_<variant>
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    if args.worker:
        fit_worker(workdir, args.rank, args.sweeps, args.num_basis)
        return 0
    if args.max_rows and args.workdir == parser.get_default("workdir"):
        workdir = workdir.with_name(f"{workdir.name}_{args.max_rows}")  # keep the full preparation intact
    info = prepare(workdir, args.throughput_rows, args.max_rows)
    lines = []
    if not args.skip_airline:
        env = dict(os.environ)
        command = [sys.executable, "-m", "benchmarks", "scale_out", "--worker", "--workdir", str(workdir),
                   "--rank", str(args.rank), "--sweeps", str(args.sweeps), "--num-basis", str(args.num_basis)]
        report = _run_json(command, env)
        raw_gb = info["train_rows"] * (len(info["features"]) + 1) * 8 / 2**30
        gb = lambda b: b / 2**30  # noqa: E731
        lines += ["## Airline, all rows, chunked from parquet", "",
                  "| rows | R | M | sweeps | fit s | RSS before fit GB | peak RSS GB | peak − before GB | "
                  "raw data (float64) GB | test MSE (std. y) | NLPD | 95% coverage |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|",
                  f"| {report['rows']} | {args.rank} | {args.num_basis} | {report['sweeps']} | "
                  f"{report['fit_seconds']:.0f} | {gb(report['rss_before']):.2f} | {gb(report['rss_peak']):.2f} | "
                  f"{gb(report['rss_peak'] - report['rss_before']):.2f} | {raw_gb:.2f} | {report['mse_std']:.4f} | "
                  f"{report['nlpd']:.4f} | {report['coverage_95']:.3f} |", "",
                  f"Objective per sweep: {', '.join(f'{v:.6g}' for v in report['objectives'])}; "
                  f"hyper-parameters: {report['hyperparameters']}; {report['threads']} torch threads.", ""]
    if not args.skip_throughput:
        runs = throughput(workdir)
        import torch

        if torch.cuda.is_available():  # pragma: no cover - GPU machines only
            runs += [r for r in throughput(workdir, "cuda") if r["threads"] == 1 and r["processes"] == 1]
        base = next(r for r in runs if r["processes"] == 1 and r["threads"] == 1 and r["device"] == "cpu")
        lines += [f"## Data-parallel throughput ({info['throughput_rows']} airline rows, R = 10, M = 40, 1 sweep)", "",
                  "| device | processes | threads per process | fit s | rows/s | speed-up vs 1 process |",
                  "|---|---|---|---|---|---|"]
        for r in runs:
            lines.append(f"| {r['device']} | {r['processes']} | {r['threads']} | {r['fit_seconds']:.1f} | "
                         f"{r['rows'] / r['fit_seconds']:.0f} | {base['fit_seconds'] / r['fit_seconds']:.2f} |")
        lines.append("")
    protocol = "see the module docstring of benchmarks/speed/scale_out.py"
    text = header("Scale-out: out-of-core airline and data-parallel throughput", protocol) + "\n".join(lines)
    output_path("scale_out", ".md", args.variant or variant_of("scale_out", args.name)).write_text(text)
    print(text)
    return 0
