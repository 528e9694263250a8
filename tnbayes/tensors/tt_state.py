"""Saving and loading tensor trains: one key scheme for the cores of TT-vectors and TT-matrices (the *format* axis).

A TT stored under a prefix is the cores ``{"<prefix>.0": G_1, "<prefix>.1": G_2, …}``; the models that keep TT
state (:class:`~tnbayes.TNKF`, :class:`~tnbayes.TTKalmanGP`) write their mean and covariance root this way into the
``extra`` tensors of their model file.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from tnbayes.tensors.tt import TTMatrix, TTVector

__all__ = ["TT_KINDS", "has_tt_state", "tt_from_state", "tt_state"]

#: what :func:`tt_from_state` rebuilds: a TT-vector (3-way cores) or a TT-matrix (4-way cores)
TT_KINDS = ("vector", "matrix")


def tt_state(tt: TTVector | TTMatrix, prefix: str) -> dict[str, torch.Tensor]:
    """The cores of a TT under ``prefix``: ``{"<prefix>.k": core_k}``.

    Parameters
    ----------
    tt : TTVector or TTMatrix
        d cores of shape (r_{k-1}, n_k, r_k) or (r_{k-1}, m_k, n_k, r_k).
    prefix : str
        Name of the TT in the state (no dot at the end).

    Returns
    -------
    dict of str to torch.Tensor
        d entries, the cores themselves (not copied).
    """
    return {f"{prefix}.{k}": core for k, core in enumerate(tt.cores)}


def has_tt_state(state: Mapping[str, torch.Tensor], prefix: str) -> bool:
    """Whether ``state`` holds a TT under ``prefix`` (its first core ``"<prefix>.0"``)."""
    return f"{prefix}.0" in state


def tt_from_state(state: Mapping[str, torch.Tensor], prefix: str, kind: str) -> TTVector | TTMatrix:
    """The TT stored under ``prefix`` by :func:`tt_state`.

    Parameters
    ----------
    state : mapping of str to torch.Tensor
        Holds ``"<prefix>.0"``, ``"<prefix>.1"``, … (consecutive; other keys are ignored).
    prefix : str
    kind : {"vector", "matrix"}
        Rebuild a :class:`TTVector` or a :class:`TTMatrix`.

    Returns
    -------
    TTVector or TTMatrix

    Raises
    ------
    KeyError
        When ``state`` holds no core under ``prefix``.
    """
    if kind not in TT_KINDS:
        raise ValueError(f"kind must be one of {TT_KINDS}; got {kind!r}.")
    cores = []
    while f"{prefix}.{len(cores)}" in state:
        cores.append(state[f"{prefix}.{len(cores)}"])
    if not cores:
        raise KeyError(f"The state holds no tensor train under {prefix!r} (no key {prefix + '.0'!r}).")
    return TTVector(cores) if kind == "vector" else TTMatrix(cores)
