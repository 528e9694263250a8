"""Benchmark datasets with their published train/test splits, and synthetic generators.

Real data are read from a data directory (``$TNBAYES_DATA_DIR``, default
``$XDG_CACHE_HOME/tnbayes`` or ``~/.cache/tnbayes``) laid out like the tnbayes data bundle;
a few small MIT/CC-BY sets (``wilson/yacht``, ``wilson/energy``, ``wilson/concrete``,
``wilson/servo``, ``airfoil``) ship with the package so demos run offline.

Tabular data are returned raw (float64, no normalisation); tnbayes models scale internally.

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

from ._load import DATA_DIR_ENV, Split, data_dir, info, list_datasets, load
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
    "Split",
    "data_dir",
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
