"""File readers: turn the files of one dataset into full ``(X, y)`` arrays plus fixed splits.

Each reader takes the resolved file paths (in the order of ``DatasetSpec.files``) and the spec,
and returns a :class:`RawData`. Only numpy and the standard library are needed; pandas is used
for the large airline file when it is installed (it is much faster), with a numpy fallback.

Datasets belong to no axis.
"""

from __future__ import annotations

import csv
import datetime as _dt
import gzip
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._registry import ADULT_CATEGORICAL, ADULT_COLUMNS, AIRLINE_FEATURES, DatasetSpec

__all__ = ["RawData", "READERS"]


@dataclass
class RawData:
    """Parsed dataset before splitting.

    Attributes
    ----------
    X : ndarray of shape (n, d), float64
    y : ndarray of shape (n,), float64
    splits : list of (ndarray, ndarray) or None
        Fixed ``(train_idx, test_idx)`` pairs of 0-based row indices, or ``None``.
    train_order : list of ndarray or None
        Per fixed split, the training indices in the order used by ``n_train`` (a prefix is
        taken); ``None`` means "draw a random subset".
    X_test : ndarray of shape (m, d) or None
        Separate test inputs without targets (snelson only).
    feature_names : list of str or None
        Overrides the registry's names when the reader builds them (adult).
    """

    X: np.ndarray
    y: np.ndarray
    splits: list[tuple[np.ndarray, np.ndarray]] | None = None
    train_order: list[np.ndarray] | None = None
    X_test: np.ndarray | None = None
    feature_names: list[str] | None = None


def _as_2d_float(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(-1, 1) if a.ndim == 1 else a


def _check_shape(spec: DatasetSpec, X: np.ndarray, y: np.ndarray, path: Path) -> None:
    if X.shape[1] != spec.d or len(y) != X.shape[0]:
        raise ValueError(
            f"{path} does not have the expected layout for dataset {spec.name!r}: got "
            f"{X.shape[0]} rows x {X.shape[1]} inputs, expected {spec.d} inputs. Is it the "
            f"file described in the tnbayes data README?"
        )


# ----------------------------------------------------------------------------------------------
# Readers
# ----------------------------------------------------------------------------------------------

def read_uci_gal(paths: Sequence[Path], spec: DatasetSpec) -> RawData:
    """``data.txt.gz`` (whitespace separated) + ``splits.npz`` (PBP / MC-dropout splits)."""
    data = np.loadtxt(paths[0], dtype=np.float64, ndmin=2)
    with np.load(paths[1]) as z:
        feats = np.asarray(z["index_features"], dtype=np.intp)
        target = int(np.asarray(z["index_target"]).ravel()[0])
        idx_train, idx_test = z["index_train"], z["index_test"]
        n_train, n_test = z["n_train"], z["n_test"]
        n_splits = int(z["n_splits"])
    splits = [
        (idx_train[k, : n_train[k]].astype(np.intp), idx_test[k, : n_test[k]].astype(np.intp))
        for k in range(n_splits)
    ]
    X, y = data[:, feats], data[:, target]
    _check_shape(spec, X, y, paths[0])
    return RawData(X=X, y=y, splits=splits)


def read_uci_wilson(paths: Sequence[Path], spec: DatasetSpec) -> RawData:
    """``data.csv.gz`` (no header, last column = target) + ``test_mask.csv.gz`` (N x 10, 0/1)."""
    data = np.loadtxt(paths[0], delimiter=",", dtype=np.float64, ndmin=2)
    mask = np.loadtxt(paths[1], delimiter=",", dtype=np.int8, ndmin=2).astype(bool)
    if mask.shape[0] != data.shape[0]:
        raise ValueError(
            f"{paths[1]} has {mask.shape[0]} rows but {paths[0]} has {data.shape[0]}."
        )
    rows = np.arange(data.shape[0])
    splits = [(rows[~mask[:, k]], rows[mask[:, k]]) for k in range(mask.shape[1])]
    X, y = data[:, :-1], data[:, -1]
    _check_shape(spec, X, y, paths[0])
    return RawData(X=X, y=y, splits=splits)


def read_table(paths: Sequence[Path], spec: DatasetSpec) -> RawData:
    """Numeric delimited text; options ``delimiter``, ``skiprows``, ``target_col``,
    optional ``feature_cols`` (default: all other columns)."""
    opt = spec.options
    data = np.loadtxt(paths[0], delimiter=opt["delimiter"], skiprows=opt["skiprows"],
                      dtype=np.float64, ndmin=2)
    t = opt["target_col"]
    cols = opt.get("feature_cols")
    if cols is None:
        cols = [c for c in range(data.shape[1]) if c != t]
    X, y = data[:, list(cols)], data[:, t]
    _check_shape(spec, X, y, paths[0])
    return RawData(X=X, y=y)


def read_rdata_csv(paths: Sequence[Path], spec: DatasetSpec) -> RawData:
    """Two-column numeric csv with a quoted header (R exports); options ``x_col``, ``y_col``."""
    opt = spec.options
    # encoding given: numpy < 2 passes bytes to converters by default (encoding="bytes"), numpy ≥ 2 str
    data = np.loadtxt(paths[0], delimiter=",", skiprows=1, dtype=np.float64, ndmin=2, encoding="utf-8",
                      converters=lambda s: float(s.strip().strip('"')))
    X, y = _as_2d_float(data[:, opt["x_col"]]), data[:, opt["y_col"]]
    _check_shape(spec, X, y, paths[0])
    return RawData(X=X, y=y)


def _decimal_year(yyyymmdd: int) -> float:
    d = _dt.date(yyyymmdd // 10000, (yyyymmdd // 100) % 100, yyyymmdd % 100)
    start = _dt.date(d.year, 1, 1)
    days = (_dt.date(d.year + 1, 1, 1) - start).days
    return d.year + (d - start).days / days


def read_co2_weekly(paths: Sequence[Path], spec: DatasetSpec) -> RawData:
    """statsmodels ``co2.csv``: ``date`` (yyyymmdd), ``co2`` (empty when missing)."""
    xs, ys = [], []
    with gzip.open(paths[0], "rt", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        if [h.strip() for h in header] != ["date", "co2"]:
            raise ValueError(f"{paths[0]}: expected header 'date,co2', got {header!r}.")
        for row in reader:
            if len(row) < 2 or not row[1].strip():
                continue  # missing week
            xs.append(_decimal_year(int(row[0])))
            ys.append(float(row[1]))
    X, y = _as_2d_float(np.array(xs)), np.array(ys, dtype=np.float64)
    _check_shape(spec, X, y, paths[0])
    return RawData(X=X, y=y)


def read_adult(paths: Sequence[Path], spec: DatasetSpec) -> RawData:
    """UCI ``adult.data``: one-hot encode the categorical columns (see the registry text)."""
    rows: list[list[str]] = []
    with gzip.open(paths[0], "rt", newline="") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            fields = [f.strip() for f in line.split(",")]
            if len(fields) != len(ADULT_COLUMNS) + 1:
                raise ValueError(f"{paths[0]}: expected 15 fields per row, got {len(fields)}.")
            rows.append(fields)
    cols = list(zip(*rows))
    labels = cols[-1]
    y = np.array([1.0 if lab.rstrip(".") == ">50K" else 0.0 for lab in labels])
    blocks: list[np.ndarray] = []
    names: list[str] = []
    for j, col_name in enumerate(ADULT_COLUMNS):
        values = cols[j]
        if col_name in ADULT_CATEGORICAL:
            cats = sorted(set(values))
            lookup = {c: i for i, c in enumerate(cats)}
            codes = np.fromiter((lookup[v] for v in values), dtype=np.intp, count=len(values))
            onehot = np.zeros((len(values), len(cats)))
            onehot[np.arange(len(values)), codes] = 1.0
            blocks.append(onehot)
            names.extend(f"{col_name}={c}" for c in cats)
        else:
            blocks.append(np.array(values, dtype=np.float64).reshape(-1, 1))
            names.append(col_name)
    X = np.hstack(blocks)
    _check_shape(spec, X, y, paths[0])
    return RawData(X=X, y=y, feature_names=names)


def read_snelson(paths: Sequence[Path], spec: DatasetSpec) -> RawData:
    """``snelson.npz``: ``x_train``, ``y_train`` (200) and ``x_test`` (301 grid inputs)."""
    with np.load(paths[0]) as z:
        X = _as_2d_float(z["x_train"])
        y = np.asarray(z["y_train"], dtype=np.float64).ravel()
        X_test = _as_2d_float(z["x_test"])
    _check_shape(spec, X, y, paths[0])
    rows = np.arange(len(y))
    return RawData(X=X, y=y, splits=[(rows, np.empty(0, dtype=np.intp))], X_test=X_test)


def _hhmm_to_minutes(t: np.ndarray) -> np.ndarray:
    return 60 * (t // 100) + t % 100


_AIRLINE_COLUMNS = ("Year", "Month", "DayofMonth", "DayOfWeek", "DepTime", "ArrTime",
                    "ArrDelay", "AirTime", "Distance", "plane_age")
AIRLINE_N_ROWS = 2_055_733


def read_airline(paths: Sequence[Path], spec: DatasetSpec) -> RawData:
    """Jan-Apr 2008 flights csv + fixed 700k/100k split (see the registry text)."""
    with open(paths[0], "rb") as fh:
        header = gzip.GzipFile(fileobj=fh).readline().decode().strip().split(",")
    if tuple(header) != _AIRLINE_COLUMNS:
        raise ValueError(f"{paths[0]}: unexpected header {header!r}; expected {_AIRLINE_COLUMNS}.")
    wanted = list(AIRLINE_FEATURES) + ["ArrDelay"]
    usecols = sorted(_AIRLINE_COLUMNS.index(c) for c in wanted)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a test dependency
        arr = np.loadtxt(paths[0], delimiter=",", skiprows=1, usecols=usecols, dtype=np.int64)
        cols = {_AIRLINE_COLUMNS[c]: arr[:, i] for i, c in enumerate(usecols)}
    else:
        df = pd.read_csv(paths[0], usecols=[_AIRLINE_COLUMNS[c] for c in usecols],
                         dtype=np.int64, engine="c")
        cols = {c: df[c].to_numpy() for c in df.columns}
    n = len(cols["Month"])
    if n != AIRLINE_N_ROWS:
        raise ValueError(f"{paths[0]} has {n} rows; expected {AIRLINE_N_ROWS}.")
    with np.load(paths[1]) as z:
        train = np.asarray(z["train"], dtype=np.intp)
        test = np.asarray(z["test"], dtype=np.intp)
    # The stored indices are sorted; recover the permutation order for nested n_train subsets.
    perm = np.random.default_rng(0).permutation(n)
    order = perm[: len(train)]
    if not np.array_equal(np.sort(order), train):
        order = train  # file not made by the documented recipe: fall back to file order
    keep = np.concatenate([train, test])
    for c in ("ArrTime", "DepTime"):
        cols[c] = _hhmm_to_minutes(cols[c])
    X_keep = np.column_stack([cols[c][keep] for c in AIRLINE_FEATURES]).astype(np.float64)
    y_keep = cols["ArrDelay"][keep].astype(np.float64)
    # Re-index so that rows 0..699999 are train and the rest test (saves memory downstream).
    n_tr = len(train)
    pos = np.empty(n, dtype=np.intp)
    pos[train] = np.arange(n_tr)
    rows = np.arange(len(keep))
    return RawData(
        X=X_keep, y=y_keep,
        splits=[(rows[:n_tr], rows[n_tr:])],
        train_order=[pos[order]],
    )


READERS: dict[str, Callable[[Sequence[Path], DatasetSpec], RawData]] = {
    "uci_gal": read_uci_gal,
    "uci_wilson": read_uci_wilson,
    "table": read_table,
    "rdata_csv": read_rdata_csv,
    "co2_weekly": read_co2_weekly,
    "adult": read_adult,
    "snelson": read_snelson,
    "airline": read_airline,
}
