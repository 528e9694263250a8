"""How the filters' streams run: one torch thread, in torch's inference mode, and their state handed back as normal
tensors.

A row update of the TT filters makes hundreds of small torch calls (reshapes, permutes, matrix products of a few
dozen rows, factorisations of matrices of size 16–72), so the per-call overhead counts as much as the arithmetic.
No filter update is differentiated, and inference mode drops autograd's bookkeeping (version counters, view
tracking) from every call; the saving is measured in docs/benchmarks.md. Tensors made in inference mode cannot take
part in autograd afterwards (a BoTorch acquisition differentiates the posterior mean with respect to the test
inputs), so what a model keeps from the stream goes through :func:`released` first.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from tnbayes.inference.budget import single_torch_thread
from tnbayes.tensors import TTMatrix, TTVector

__all__ = ["filter_stream", "released"]


@contextmanager
def filter_stream() -> Iterator[None]:
    """Run a filter's stream with one torch intra-op thread
    (:func:`~tnbayes.inference.budget.single_torch_thread`) in ``torch.inference_mode()``.

    Tensors made inside are inference tensors; pass what outlives the block through :func:`released`.
    """
    with single_torch_thread(), torch.inference_mode():
        yield


def released(value: Any) -> Any:
    """``value`` with every inference tensor replaced by a normal copy, also inside TT-vectors and TT-matrices, lists,
    tuples and dicts; everything else is returned as it is (the same object where nothing was replaced).

    Call it outside :func:`filter_stream` (inside, a copy is an inference tensor again).

    Parameters
    ----------
    value : object
        What to release: a tensor, TTVector, TTMatrix, list, tuple (named or a torch return type) or dict (or a
        subclass), looked into recursively; other objects are returned as they are.

    Returns
    -------
    same type as value
        ``value`` itself where it holds no inference tensor, otherwise a copy with each replaced.
    """
    if isinstance(value, torch.Tensor):
        return value.clone() if value.is_inference() else value
    if isinstance(value, (TTVector, TTMatrix)):
        return value.copy() if any(core.is_inference() for core in value.cores) else value
    if isinstance(value, (list, tuple)):
        items = [released(item) for item in value]
        if all(new is old for new, old in zip(items, value)):
            return value
        return type(value)(*items) if hasattr(type(value), "_fields") else type(value)(items)  # namedtuple: fields
    if isinstance(value, dict):
        items = {key: released(item) for key, item in value.items()}
        if all(items[key] is value[key] for key in value):
            return value
        copied = copy.copy(value)  # keeps a subclass's own state (a defaultdict's factory)
        copied.update(items)
        return copied
    return value
