"""Shared helpers of the benchmark scripts: result headers and output paths."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from pathlib import Path

import torch

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def default_data_dir() -> None:
    """Point TNBAYES_DATA_DIR at ../shared/data beside the repository unless already set."""
    if "TNBAYES_DATA_DIR" not in os.environ:
        candidate = Path(__file__).resolve().parents[2] / "shared" / "data"
        if candidate.is_dir():
            os.environ["TNBAYES_DATA_DIR"] = str(candidate)


def machine_description() -> str:
    """One line naming the CPU/GPU, core count, Python and torch versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gpu = f", GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return (f"{cpu}, {os.cpu_count()} cores{gpu}; Python {platform.python_version()}, "
            f"torch {torch.__version__}, {torch.get_num_threads()} torch threads")


def header(title: str, protocol: str) -> str:
    """Markdown header recording what produced a result file."""
    import tnbayes

    command = "python -m benchmarks " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    return (f"# {title}\n\n"
            f"- command: `{command}`\n"
            f"- date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}\n"
            f"- tnbayes {tnbayes.__version__}; machine: {machine_description()}\n"
            f"- protocol: {protocol}\n\n")


def output_path(name: str, suffix: str) -> Path:
    """``benchmarks/results/<name><suffix>``, creating the folder."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    return RESULTS_DIR / f"{name}{suffix}"


def previous_rows(name: str, exclude_datasets: list[str]) -> list[dict]:
    """Rows of ``results/<name>/runs.csv`` from an earlier run, minus the datasets being re-run.

    Numeric fields are converted back to numbers. Returns [] when there is no earlier run.
    """
    import csv

    path = RESULTS_DIR / name / "runs.csv"
    if not path.exists():
        return []
    rows = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["dataset"] in exclude_datasets:
                continue
            converted: dict = {}
            for key, value in row.items():
                try:
                    converted[key] = int(value) if key in ("split", "n_train", "n_test", "n") else float(value)
                except ValueError:
                    converted[key] = value
            rows.append(converted)
    return rows


def tt_rank_cell(model) -> str:
    """``row / mean / cov. root`` largest TT ranks of a fitted TNKF, for a Markdown table cell."""
    ranks = model.max_ranks_
    return f"{ranks['row']} / {ranks['mean']} / {ranks['covariance']}"
