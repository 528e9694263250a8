"""``Split``, ``load``, ``info``, ``list_datasets`` and ``data_dir``.

Datasets belong to no axis.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._readers import READERS, RawData
from ._registry import _WILSON_SETS, REGISTRY, DatasetSpec, resolve_name

# plain spellings of Wilson folders ('servo' for 'wilson/servo'): same files, listed once
_WILSON_ALIASES = frozenset(f for f in _WILSON_SETS if REGISTRY.get(f) is not None
                            and REGISTRY[f].reader == "uci_wilson")

__all__ = ["Split", "load", "info", "list_datasets", "data_dir", "DATA_DIR_ENV", "availability",
           "bundled_datasets"]

#: Environment variable naming the data directory.
DATA_DIR_ENV = "TNBAYES_DATA_DIR"

_BUNDLED_DIR = Path(__file__).resolve().parent / "data"
_DEFAULT_TEST_FRACTION = 0.1


@dataclass(frozen=True, eq=False)
class Split:
    """One train/test split of a dataset.

    Attributes
    ----------
    X_train : ndarray of shape (n_train, n_features), float64
    y_train : ndarray of shape (n_train,), float64
    X_test : ndarray of shape (n_test, n_features), float64
    y_test : ndarray of shape (n_test,), float64, or None
        ``None`` when the dataset has test inputs without targets (``"snelson"``).
    name : str
        Canonical dataset name.
    split : int
        Index of the split (for random splits: the split index used as the seed unless a
        ``seed`` was given).
    n_splits : int or None
        Number of fixed splits, ``None`` for random splits and synthetic data.
    feature_names : list of str or None
        Names of the ``n_features`` input columns, ``None`` when the source has none.
    target_name : str
        Name of the target.
    task : {"regression", "classification"}
    description : str
        What the data are and how they were turned into arrays.
    source : str
        Where the data come from (repository and commit, or "synthetic").
    X_val : ndarray of shape (n_val, n_features) or None
        Validation inputs (only the SE1/SE2 generators fill this).
    y_val : ndarray of shape (n_val,) or None
        Validation targets.

    Notes
    -----
    Tabular data are returned raw (no normalisation); tnbayes models scale inputs and targets
    internally from the training data. The dataclass is frozen (attributes cannot be rebound)
    but the arrays themselves are ordinary writable numpy arrays owned by this object.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray | None
    name: str
    split: int = 0
    n_splits: int | None = None
    feature_names: list[str] | None = None
    target_name: str = "y"
    task: str = "regression"
    description: str = ""
    source: str = ""
    X_val: np.ndarray | None = field(default=None)
    y_val: np.ndarray | None = field(default=None)

    @property
    def n_train(self) -> int:
        """Number of training rows."""
        return int(self.X_train.shape[0])

    @property
    def n_test(self) -> int:
        """Number of test rows."""
        return int(self.X_test.shape[0])

    @property
    def n_features(self) -> int:
        """Number of input columns."""
        return int(self.X_train.shape[1])

    def __repr__(self) -> str:
        val = f", n_val={self.X_val.shape[0]}" if self.X_val is not None else ""
        yt = "" if self.y_test is not None else ", y_test=None"
        ns = f"/{self.n_splits}" if self.n_splits is not None else ""
        return (
            f"Split(name={self.name!r}, split={self.split}{ns}, task={self.task!r}, "
            f"n_train={self.n_train}, n_test={self.n_test}{val}, n_features={self.n_features}"
            f"{yt})"
        )


# ----------------------------------------------------------------------------------------------
# Data directory and file lookup
# ----------------------------------------------------------------------------------------------

def data_dir() -> Path:
    """Return the directory searched first for dataset files.

    The value of the environment variable ``TNBAYES_DATA_DIR`` if set, else
    ``$XDG_CACHE_HOME/tnbayes`` if ``XDG_CACHE_HOME`` is set, else ``~/.cache/tnbayes``.
    The directory need not exist. Its layout is that of the tnbayes data bundle: one folder
    per source (``uci_gal/yacht/data.txt.gz``, ``uci_wilson/elevators/data.csv.gz``,
    ``airline/airline_2008_jan_apr.csv.gz``, ...).

    Returns
    -------
    pathlib.Path
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tnbayes"


def _bundled(rel: str) -> Path:
    return _BUNDLED_DIR.joinpath(*rel.split("/"))


def _root(root: str | os.PathLike[str] | None) -> Path:
    return data_dir() if root is None else Path(root).expanduser()


def _resolve_files(spec: DatasetSpec, root: Path | None) -> list[Path]:
    """Data directory first (all files of the dataset from there), then the bundled copy."""
    base = _root(root)
    in_dir = [base.joinpath(*rel.split("/")) for rel in spec.files]
    if all(p.is_file() for p in in_dir):
        return in_dir
    bundled = [_bundled(rel) for rel in spec.files]
    if all(p.is_file() for p in bundled):
        return bundled
    raise FileNotFoundError(_missing_message(spec, base, root is not None))


def _missing_message(spec: DatasetSpec, base: Path, explicit: bool) -> str:
    from ._fetch import download_size, recipes_for

    where = (f"the folder {base} (data_dir argument)" if explicit else
             f"the data directory {base} (set by {DATA_DIR_ENV})" if os.environ.get(DATA_DIR_ENV)
             else f"the data directory {base} (default; set {DATA_DIR_ENV} to use another)")
    offline = ", ".join(bundled_datasets())
    head = (f"Dataset {spec.name!r} is not bundled with tnbayes and not in {where}.")
    if recipes_for(spec) is not None:
        kb = max(1, download_size(spec.name) // 1000)
        dir_opt = f" --data-dir {base}" if explicit else ""
        return (f"{head} Download it once (about {kb:,} kB from {spec.source.split(' ')[0]}, "
                f"checked against a pinned SHA-256) with\n\n    tnbayes fetch {spec.name}{dir_opt}\n\n"
                f"or tnbayes.datasets.fetch({spec.name!r}) in Python; later loads read the copy "
                f"in {base}. Bundled sets that work offline: {offline} (and the synthetic "
                f"'toy-sin', 'toy-step', 'toy-heteroscedastic').")
    return (f"{head} It cannot be downloaded automatically: {spec.origin}. Put the files "
            f"{', '.join(spec.files)} into {base}. Bundled sets that work offline: {offline}.")


def bundled_datasets() -> list[str]:
    """Return the canonical names of the real datasets that ship with tnbayes (work offline).

    Returns
    -------
    list of str
        Sorted names whose files are all in the package's bundle (aliases of the same
        files are left out).
    """
    return sorted(name for name, spec in REGISTRY.items()
                  if name == spec.name and not (name in _WILSON_ALIASES)
                  and all(_bundled(rel).is_file() for rel in spec.files))


def availability(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> str:
    """Say where a dataset would be read from, without reading it.

    Parameters
    ----------
    name : str
        A name from :func:`list_datasets`.
    data_dir : path, optional
        Data directory to look in; default :func:`data_dir`.

    Returns
    -------
    {"synthetic", "bundled", "cached", "fetchable", "manual"}
        ``"synthetic"``/``"bundled"``: works offline with no data directory; ``"cached"``: all
        files are in the data directory; ``"fetchable"``: :func:`fetch` (``tnbayes fetch NAME``)
        downloads it; ``"manual"``: the files must be built and placed by hand (``airline``).
    """
    from ._fetch import recipes_for

    if _normalise_synthetic(name) in SYNTHETIC:
        return "synthetic"
    spec = resolve_name(name)
    if all(_bundled(rel).is_file() for rel in spec.files):
        return "bundled"
    base = _root(data_dir)
    if all(base.joinpath(*rel.split("/")).is_file() for rel in spec.files):
        return "cached"
    return "fetchable" if recipes_for(spec) is not None else "manual"


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------

def list_datasets() -> list[str]:
    """Return the sorted names accepted by :func:`load`.

    Returns
    -------
    list of str
        Includes ``"wilson/<folder>"`` for all 25 sets of the Wilson bundle and plain aliases
        (e.g. ``"elevators"``) where the name is not taken by another dataset.
    """
    return sorted([*REGISTRY, *SYNTHETIC])


def info(name: str) -> dict[str, Any]:
    """Return metadata of a named dataset without reading it.

    Parameters
    ----------
    name : str
        A name from :func:`list_datasets` (case-insensitive).

    Returns
    -------
    dict
        Keys ``name``, ``N`` (rows after preprocessing, whole file), ``D`` (inputs), ``task``,
        ``n_splits`` (int, or ``None`` for random splits), ``target_name``, ``feature_names``,
        ``source``, ``licence``, ``description``, ``files`` (paths relative to the data
        directory), ``origin`` (where to get the files) and ``bundled`` (whether a copy ships
        with tnbayes).
    """
    if _normalise_synthetic(name) in SYNTHETIC:
        key = _normalise_synthetic(name)
        return {"name": key, "task": "regression", "n_splits": None, "synthetic": True,
                "description": SYNTHETIC[key][1], "bundled": True}
    spec = resolve_name(name)
    return {
        "name": spec.name,
        "N": spec.n,
        "D": spec.d,
        "task": spec.task,
        "n_splits": spec.n_splits,
        "target_name": spec.target_name,
        "feature_names": list(spec.feature_names) if spec.feature_names else None,
        "source": spec.source,
        "licence": spec.licence,
        "description": spec.description,
        "files": list(spec.files),
        "origin": spec.origin,
        "bundled": all(_bundled(rel).is_file() for rel in spec.files),
    }


#: synthetic sets usable by name (e.g. in ``tnbayes compare``): name -> (generator kwargs, description).
#: The split index is the generator's seed.
SYNTHETIC: dict[str, tuple[dict[str, Any], str]] = {
    "toy-sin": ({"kind": "sin"}, "1-D toy: sin(2x) + 0.3 cos(5x) + N(0, 0.1^2), 200 train / 500 grid test points"),
    "toy-step": ({"kind": "step"}, "1-D toy: unit step at 0 + N(0, 0.1^2), 200 train / 500 grid test points"),
    "toy-heteroscedastic": ({"kind": "heteroscedastic"},
                            "1-D toy: sin mean with noise growing across the range, 200 train / 500 test"),
}


def _normalise_synthetic(name: str) -> str:
    return str(name).strip().lower().replace("_", "-")


def _load_synthetic(name: str, split: int) -> Split:
    from .synthetic import make_toy_1d

    kwargs, _ = SYNTHETIC[name]
    return make_toy_1d(seed=split, **kwargs)


def _check_index(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {type(value).__name__} ({value!r}).")
    if int(value) < 0:
        raise ValueError(f"{what} must be >= 0, got {value}.")
    return int(value)


def load(
    name: str,
    split: int = 0,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    test_fraction: float | None = None,
    seed: int | None = None,
    n_train: int | None = None,
) -> Split:
    """Load one train/test split of a named dataset.

    Parameters
    ----------
    name : str
        Dataset name, see :func:`list_datasets` (case-insensitive; ``_`` and ``-`` are the
        same).
    split : int, default 0
        For datasets with fixed splits (uci_gal sets: 20, ``"protein"``: 5; Wilson sets: 10;
        ``"airline"`` and ``"snelson"``: 1) the index of the split. For the others, the seed of
        a random split drawn with ``numpy.random.default_rng(split)`` (unless ``seed`` is given).
    data_dir : path, optional
        Directory searched first for the files; default :func:`data_dir`
        (``$TNBAYES_DATA_DIR`` or a user cache directory). A copy bundled with tnbayes
        (see :func:`bundled_datasets`: ``airfoil``, ``co2``, ``wilson/yacht``,
        ``wilson/energy``, ``wilson/concrete``, ``wilson/servo``) is used when the directory
        lacks the files; other sets are downloaded once with :func:`fetch`.
    test_fraction : float in (0, 1), optional
        Test fraction of a random split (default 0.1). Not allowed for fixed splits.
    seed : int, optional
        Seed of a random split (overrides ``split`` as the seed), and of the ``n_train``
        subsample. Not allowed for fixed splits unless ``n_train`` is given.
    n_train : int, optional
        Keep only ``n_train`` training rows, chosen uniformly at random without replacement
        (returned in file order). For ``"airline"`` this is the first ``n_train`` rows of the
        permutation that defines the fixed split, so smaller subsets are nested in larger ones.

    Returns
    -------
    Split
        ``X_train`` (n_train, D), ``y_train`` (n_train,), ``X_test`` (n_test, D),
        ``y_test`` (n_test,) as float64 arrays, plus metadata. Values are raw (no
        normalisation); rows of both parts are in file order.

    Raises
    ------
    ValueError
        Unknown name (with close matches), split out of range, or bad keyword values.
    FileNotFoundError
        When neither the data directory nor the bundled copy has the files; the message gives
        the one command that downloads them (``tnbayes fetch NAME``), or where to obtain them.

    Examples
    --------
    >>> from tnbayes import datasets
    >>> s = datasets.load("wilson/yacht", split=3)     # bundled, works offline
    >>> s.X_train.shape, s.X_test.shape
    ((277, 6), (31, 6))
    """
    if _normalise_synthetic(name) in SYNTHETIC:
        return _load_synthetic(_normalise_synthetic(name), _check_index(split, "split"))
    spec = resolve_name(name)
    split = _check_index(split, "split")
    fixed = spec.n_splits is not None
    if n_train is not None:
        n_train = _check_index(n_train, "n_train")
        if n_train == 0:
            raise ValueError("n_train must be >= 1.")
    if fixed:
        if split >= spec.n_splits:  # type: ignore[operator]
            raise ValueError(
                f"{spec.name} has {spec.n_splits} fixed split{'s' if spec.n_splits != 1 else ''} "
                f"(0..{spec.n_splits - 1}); got split={split}."  # type: ignore[operator]
            )
        if test_fraction is not None:
            raise ValueError(
                f"{spec.name} has fixed splits; test_fraction cannot be changed (got "
                f"{test_fraction})."
            )
        if seed is not None and n_train is None:
            raise ValueError(
                f"{spec.name} has fixed splits; seed only applies to the n_train subsample. "
                f"Choose a split with split=0..{spec.n_splits - 1}."  # type: ignore[operator]
            )
        if seed is not None and spec.name == "airline":
            raise ValueError(
                "airline's n_train subset is a prefix of the fixed permutation; seed is not "
                "supported."
            )
    else:
        if test_fraction is None:
            test_fraction = _DEFAULT_TEST_FRACTION
        test_fraction = float(test_fraction)
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}.")
        if seed is not None:
            seed = _check_index(seed, "seed")

    paths = _resolve_files(spec, data_dir)
    raw: RawData = READERS[spec.reader](paths, spec)
    n = raw.X.shape[0]

    rng = np.random.default_rng(seed if seed is not None else split)
    if fixed:
        assert raw.splits is not None
        train_idx, test_idx = raw.splits[split]
    else:
        n_test = min(max(1, int(round(test_fraction * n))), n - 1)
        perm = rng.permutation(n)
        test_idx, train_idx = np.sort(perm[:n_test]), np.sort(perm[n_test:])

    if n_train is not None:
        if n_train > len(train_idx):
            raise ValueError(
                f"n_train={n_train} exceeds the {len(train_idx)} training rows of "
                f"{spec.name} split {split}."
            )
        if raw.train_order is not None:
            train_idx = np.sort(raw.train_order[split][:n_train])
        else:
            train_idx = np.sort(rng.choice(train_idx, size=n_train, replace=False))

    if raw.X_test is not None:  # test inputs without targets (snelson)
        X_test, y_test = raw.X_test.copy(), None
    else:
        X_test, y_test = raw.X[test_idx], raw.y[test_idx]

    names = raw.feature_names if raw.feature_names is not None else (
        list(spec.feature_names) if spec.feature_names is not None else None)
    return Split(
        X_train=np.ascontiguousarray(raw.X[train_idx], dtype=np.float64),
        y_train=np.ascontiguousarray(raw.y[train_idx], dtype=np.float64),
        X_test=np.ascontiguousarray(X_test, dtype=np.float64),
        y_test=None if y_test is None else np.ascontiguousarray(y_test, dtype=np.float64),
        name=spec.name,
        split=split,
        n_splits=spec.n_splits,
        feature_names=names,
        target_name=spec.target_name,
        task=spec.task,
        description=spec.description,
        source=spec.source,
    )
