"""Benchmark datasets with their published train/test splits, and synthetic generators.

A few small, permissively licensed real sets ship with the package and work offline
(:func:`bundled_datasets`: ``airfoil``, ``co2``, ``wilson/yacht``, ``wilson/energy``,
``wilson/concrete``, ``wilson/servo``). The others are downloaded once from their original public
source with :func:`fetch` (``tnbayes fetch NAME``), checked against a pinned SHA-256, and cached
in the data directory (``$TNBAYES_DATA_DIR``, default ``$XDG_CACHE_HOME/tnbayes`` or
``~/.cache/tnbayes``); :func:`availability` says which is which.

Tabular data are returned raw (float64, no normalisation); tnbayes models scale internally. The catalogue of
named sets is data (``catalogue.json`` in this package). Datasets belong to no axis.

Examples
--------
>>> from tnbayes import datasets
>>> datasets.list_datasets()[:3]
['adult', 'ailerons', 'airfoil']
>>> s = datasets.load("wilson/yacht", split=3)
>>> s.X_train.shape, s.y_test.shape
((277, 6), (31,))
>>> datasets.make_sinc(n_train=1024, n_test=512).X_train.shape
(1024, 1)
"""

from ._fetch import MIRROR_ENV, FetchError, fetch
from ._load import (
    DATA_DIR_ENV,
    Split,
    availability,
    bundled_datasets,
    data_dir,
    info,
    list_datasets,
    load,
)
from .synthetic import (
    make_se1,
    make_se2,
    make_sinc,
    make_toy_1d,
    make_two_spirals,
    se1_function,
    se2_function,
    toy_1d_function,
)

__all__ = [
    "DATA_DIR_ENV",
    "MIRROR_ENV",
    "FetchError",
    "Split",
    "availability",
    "bundled_datasets",
    "data_dir",
    "fetch",
    "info",
    "list_datasets",
    "load",
    "make_se1",
    "make_se2",
    "make_sinc",
    "make_toy_1d",
    "make_two_spirals",
    "se1_function",
    "se2_function",
    "toy_1d_function",
]
