"""Shared helpers of the benchmark entries: where results go, their headers, splits and CSV rows.

Every result file of an entry lies in ``<results>/<entry>/`` and is named after the entry:
``<entry>[_<variant>]<suffix>`` (see :func:`output_path`, the one place that decides it).
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any, NamedTuple

import torch

#: the committed results (read by entries that reuse earlier runs, e.g. the ExactGP rows of the UCI splits)
RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: environment variable that redirects what entries *write* (the suite's small runs, the smoke tests)
RESULTS_ENV = "TNBAYES_BENCH_RESULTS"


def results_dir() -> Path:
    """Where entries write: ``$TNBAYES_BENCH_RESULTS`` when set, else ``benchmarks/results``."""
    return Path(os.environ[RESULTS_ENV]) if os.environ.get(RESULTS_ENV) else RESULTS_DIR


def output_path(entry: str, suffix: str, variant: str = "", *, committed: bool = False) -> Path:
    """The path of one result file of an entry: ``<root>/<entry>/<entry>[_<variant>]<suffix>``.

    Parameters
    ----------
    entry : str
        The entry's name (its module and its name in ``benchmarks.__main__.ENTRIES``).
    suffix : str
        What follows the stem: ``".md"`` (the table), ``".png"``, ``".csv"``, ``"_runs.csv"`` (one row per
        fit), ``"_sizes.png"`` …
    variant : str
        Names a configuration other than the entry's full default (``"quick"``, ``"50000"``, ``"partial"``,
        ``"isotropic"``); "" for the default.
    committed : bool
        Read a committed result (root ``benchmarks/results``, e.g. another entry's runs) instead of the
        folder this run writes to (root :func:`results_dir`, whose entry folder is created).

    Returns
    -------
    pathlib.Path
    """
    root = RESULTS_DIR if committed else results_dir()
    folder = root / entry
    if not committed:
        folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{entry}{'_' + variant if variant else ''}{suffix}"


def variant_of(entry: str, name: str | None) -> str:
    """The variant named by an old-style output name (``--name``/``--out`` of results written before the
    entry folders): ``"scale_out_airline"`` → ``"airline"``, ``"scale_out"`` → ``""``; a name that does not
    start with the entry's is the variant itself."""
    if not name or name == entry:
        return ""
    return name[len(entry) + 1:] if name.startswith(entry + "_") else name


def default_data_dir() -> None:
    """Point TNBAYES_DATA_DIR at ../shared/data beside the repository unless already set."""
    if "TNBAYES_DATA_DIR" not in os.environ:
        candidate = Path(__file__).resolve().parents[2] / "shared" / "data"
        if candidate.is_dir():
            os.environ["TNBAYES_DATA_DIR"] = str(candidate)


def machine_description(fit_threads: int | None = None) -> str:
    """One line naming the CPU/GPU, core count, Python and torch versions, and the torch threads.

    Parameters
    ----------
    fit_threads : int, optional
        The torch threads of each fit where every fit runs in a subprocess of its own (this process's count says
        nothing of those); None: this process's count.

    Returns
    -------
    str
    """
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
            f"torch {torch.__version__}, " + (f"{torch.get_num_threads()} torch threads" if fit_threads is None else
                                              f"{fit_threads} torch thread{'s' * (fit_threads != 1)} per fit "
                                              "(each fit in a subprocess)"))


def header(title: str, protocol: str, fit_threads: int | None = None) -> str:
    """Markdown header recording what produced a result file (``fit_threads``: as :func:`machine_description`)."""
    import tnbayes

    command = "python -m benchmarks " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    return (f"# {title}\n\n"
            f"- command: `{command}`\n"
            f"- date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}\n"
            f"- tnbayes {tnbayes.__version__}; machine: {machine_description(fit_threads)}\n"
            f"- protocol: {protocol}\n\n")


def fit_cost_constants(cases: list[dict], names: list[str], factor: float = 1.0) -> dict[str, float]:
    """Non-negative constants of a linear cost model that minimise the relative error of measured seconds per row
    (scipy's nnls).

    Parameters
    ----------
    cases : list of dict
        Each with ``"features"`` (a dict over ``names``: the feature values) and ``"measured"`` (seconds, > 0).
    names : list of str
        The features to fit, in order.
    factor : float
        Multiplies every feature (e.g. a block factor the model applies).

    Returns
    -------
    dict
        Name → constant (≥ 0, three significant digits).
    """
    import numpy as np
    from scipy.optimize import nnls

    features = np.array([[c["features"][name] * factor for name in names] for c in cases])
    measured = np.array([c["measured"] for c in cases])
    scale = np.maximum(features.max(axis=0), 1e-300)
    solution, _ = nnls(features / scale / measured[:, None], np.ones(len(cases)))
    return {name: float(f"{value / s:.3g}") for name, value, s in zip(names, solution, scale)}


def write_comparison(result, entry: str, variant: str = "") -> dict[str, str]:
    """Write a :class:`tnbayes.compare.ComparisonResult` beside the entry's table: ``<stem>_runs.csv`` and
    ``<stem>_summary.{csv,json,md}`` (stem = ``<entry>[_<variant>]``); returns kind -> path."""
    stem = output_path(entry, "", variant)
    return result.write(stem.parent, prefix=stem.name + "_")


def _from_csv(value: str):
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(value, value)


def read_rows(path) -> list[dict]:
    """Rows of a benchmark's ``runs.csv`` with numbers and booleans converted back (other cells stay strings)."""
    import csv

    with open(path, newline="") as fh:
        return [{key: _from_csv(value) for key, value in row.items()} for row in csv.DictReader(fh)]


def write_rows(rows: list[dict], path) -> None:
    """Write rows (dicts with the same keys) as a CSV with a header."""
    import csv

    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def table_rows(entry: str, variant: str = "") -> list[str]:
    """Body rows (``| … |`` lines minus header and separator) of the Markdown table of an entry's earlier run
    (:func:`output_path` ``.md``); [] when it does not exist. Lets a stopped run continue with ``--append``."""
    path = output_path(entry, ".md", variant)
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
    return [line for line in lines[1:] if not line.startswith("|---")]


def previous_rows(entry: str, exclude_datasets: list[str], variant: str = "") -> list[dict]:
    """Rows of an entry's earlier run (``<entry>[_<variant>]_runs.csv``), minus the datasets being re-run.

    Numeric fields are converted back to numbers. Returns [] when there is no earlier run.
    """
    path = output_path(entry, "_runs.csv", variant)
    if not path.exists():
        return []
    return [row for row in read_rows(path) if row["dataset"] not in exclude_datasets]


def subset_indices(n: int, size: int | None, seed: int):
    """Sorted indices of a uniform random subset of ``size`` of ``range(n)`` without replacement, drawn with
    ``numpy.random.default_rng(seed)``; all of ``range(n)`` when ``size`` is None or at least n."""
    import numpy as np

    if size is None or size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size, replace=False))


class Split(NamedTuple):
    """One train/test split; unpacks as ``Xtr, ytr, Xte, yte`` and is what :func:`tnbayes.compare` loads."""

    X_train: Any
    y_train: Any
    X_test: Any
    y_test: Any


def random_split(name: str, k: int, test_fraction: float) -> Split:
    """All rows of a tnbayes dataset split at random (``numpy.random.default_rng(k)``) → Xtr, ytr, Xte, yte."""
    import numpy as np

    from tnbayes import datasets

    first = datasets.load(name, split=0)
    X = np.vstack([first.X_train, first.X_test])
    y = np.concatenate([first.y_train, first.y_test])
    perm = np.random.default_rng(k).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = perm[:n_test], perm[n_test:]
    return Split(X[train], y[train], X[test], y[test])


def airline_split(n_train: int | None = None):
    """The fixed airline split (optionally only the first ``n_train`` training rows) → Xtr, ytr, Xte, yte."""
    from tnbayes import datasets

    split = datasets.load("airline")
    Xtr, ytr = split.X_train, split.y_train
    if n_train:
        Xtr, ytr = Xtr[:n_train], ytr[:n_train]
    return Xtr, ytr, split.X_test, split.y_test


def tt_rank_cell(model) -> str:
    """``row / mean / cov. root`` largest TT ranks of a fitted TNKF, for a Markdown table cell."""
    ranks = model.max_ranks_
    return f"{ranks['row']} / {ranks['mean']} / {ranks['covariance']}"
