"""Dataset registry: every loadable name mapped to its files, reader and metadata.

The catalogue itself is data, ``catalogue.json`` beside this module (shipped as package data); this module
turns it into :class:`DatasetSpec` objects and resolves names. Apart from reading that one file nothing here
touches the file system; :mod:`tnbayes.datasets._load` resolves the dataset files and
:mod:`tnbayes.datasets._readers` parses them. Datasets belong to no axis.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

__all__ = ["DatasetSpec", "REGISTRY", "ALIASES", "resolve_name"]


@dataclass(frozen=True)
class DatasetSpec:
    """Static description of one named dataset.

    Attributes
    ----------
    name : str
        Canonical name accepted by :func:`tnbayes.datasets.load`.
    reader : str
        Key of the parsing function in :data:`tnbayes.datasets._readers.READERS`.
    files : tuple of str
        Paths of the needed files relative to the data directory (POSIX separators).
    task : {"regression", "classification"}
    n : int
        Number of rows after the documented preprocessing.
    d : int
        Number of input columns after the documented preprocessing.
    n_splits : int or None
        Number of fixed train/test splits, or ``None`` when splits are drawn at random.
    target_name : str
        Name of the target column.
    feature_names : tuple of str or None
        Names of the input columns (``None`` when the source does not name them).
    source : str
        Where the bytes come from (repository, commit), one line.
    licence : str
        Licence of the data (and of the copy).
    description : str
        What the data are and how they are turned into ``(X, y)``.
    origin : str
        How to obtain the files (repository and path per file); used in error messages.
    options : dict
        Reader-specific keyword arguments.
    """

    name: str
    reader: str
    files: tuple[str, ...]
    task: str
    n: int
    d: int
    n_splits: int | None
    target_name: str
    feature_names: tuple[str, ...] | None
    source: str
    licence: str
    description: str
    origin: str
    options: dict[str, Any] = field(default_factory=dict)


_CATALOGUE = "catalogue.json"
_SPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(DatasetSpec))


def _fill(value: Any, fields: dict[str, Any]) -> Any:
    """A catalogue value with its string templates filled from ``fields``; lists become tuples."""
    if isinstance(value, str):
        return value.format_map(fields)
    if isinstance(value, list):
        return tuple(_fill(v, fields) for v in value)
    if isinstance(value, dict):
        return {k: _fill(v, fields) for k, v in value.items()}
    return value


def _read_catalogue(
    raw: dict[str, Any],
) -> tuple[dict[str, DatasetSpec], dict[str, str], dict[str, tuple[str, ...]], dict[str, dict[str, Any]]]:
    """The catalogue's datasets, aliases, column lists and raw families (see the file's "about" entry).

    Parameters
    ----------
    raw : dict
        The decoded ``catalogue.json``.

    Returns
    -------
    registry : dict of str to DatasetSpec
        Every loadable name, families in file order, then the plain names of families with ``plain_aliases``.
    aliases : dict of str to str
    columns : dict of str to tuple of str
    families : dict of str to dict
        Each family's members as written (``_WILSON_SETS`` reads its sizes from there).
    """
    text: dict[str, str] = {}
    for key, value in raw["text"].items():  # an entry may use the entries before it
        text[key] = value.format_map(text)
    columns = {name: tuple(names) for name, names in raw["columns"].items()}
    registry: dict[str, DatasetSpec] = {}
    plain: list[tuple[str, str]] = []
    for family in raw["families"].values():
        for key, member in family["members"].items():
            entry = {**family["defaults"], **member}
            fields = _fill({k: v for k, v in entry.items() if k in _SPEC_FIELDS}, {**text, **entry, "key": key})
            names = fields["feature_names"]
            if isinstance(names, str) and names.startswith("columns:"):
                fields["feature_names"] = columns[names.removeprefix("columns:")]
            spec = DatasetSpec(**fields)
            registry[spec.name] = spec
            if family.get("plain_aliases"):
                plain.append((key, spec.name))
    for key, name in plain:  # a family member's plain name, where no other dataset takes it
        registry.setdefault(key, dataclasses.replace(registry[name], name=key))
    return registry, dict(raw["aliases"]), columns, raw["families"]


REGISTRY, ALIASES, _COLUMNS, _FAMILIES = _read_catalogue(
    json.loads(resources.files(__package__).joinpath(_CATALOGUE).read_text(encoding="utf-8")))
#: Wilson folder -> (N, D)
_WILSON_SETS: dict[str, tuple[int, int]] = {
    folder: (member["n"], member["d"]) for folder, member in _FAMILIES["uci_wilson"]["members"].items()}
#: column names the readers need (spambase's features, adult's raw columns, the airline inputs)
SPAMBASE_FEATURES = _COLUMNS["spambase"]
ADULT_COLUMNS = _COLUMNS["adult"]
ADULT_CATEGORICAL = _COLUMNS["adult_categorical"]
AIRLINE_FEATURES = _COLUMNS["airline"]


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace("\\", "/")


def resolve_name(name: str) -> DatasetSpec:
    """Return the spec for ``name`` (case-insensitive, ``_`` == ``-``) or raise ``ValueError``."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}.")
    key = _normalise(name)
    if key.startswith("uci-wilson/"):
        key = "wilson/" + key[len("uci-wilson/"):]
    key = ALIASES.get(key, key)
    if key in REGISTRY:
        return REGISTRY[key]
    candidates = sorted(REGISTRY) + sorted(ALIASES)
    close = difflib.get_close_matches(key, candidates, n=5, cutoff=0.6)
    close = list(dict.fromkeys(ALIASES.get(c, c) for c in close))
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"Unknown dataset {name!r}.{hint} Call tnbayes.datasets.list_datasets() for all "
        f"names (the 1-D toys 'toy-sin', 'toy-step', 'toy-heteroscedastic' included); other "
        f"synthetic data come from make_sinc, make_two_spirals, "
        f"make_se1, make_se2 and make_toy_1d."
    )
