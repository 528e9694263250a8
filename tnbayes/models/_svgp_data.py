"""The rows of :class:`~tnbayes.SVGP`'s optimiser steps: endless minibatches of in-memory rows or of a chunk source,
and the held-out rows of a chunk source (drawn per chunk with a fixed seed, so the same in every pass)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator

import gpytorch
import torch

from tnbayes.data import StreamedRows

Batch = tuple[torch.Tensor, torch.Tensor]
#: training inputs the placement of the inducing points chooses among (a random subsample beyond this)
PLACEMENT_POINTS = 20_000
#: greedy conditional variance stops early when no candidate's conditional variance exceeds this share of its
#: prior variance (every further inducing input would be redundant), or 100 machine epsilons of the dtype if larger
GREEDY_VARIANCE_TOLERANCE = 1e-8


def describe_batches(num_rows: int, num_fit_rows: int, batch_size: int, num_validation: int, streamed: bool,
                     full_batch: bool, full_batch_rows: int) -> str:
    """One ``verbose`` line on the rows of the steps: full batches, or minibatches and the held-out rows."""
    if full_batch:
        return (f"every step sees all {num_rows} rows (at most {full_batch_rows} rows take full batches): the "
                f"ELBO is exact and its plateau is judged on the training rows.")
    held = (f"{num_validation} rows held out to judge the plateau of the held-out ELBO"
            if num_validation else "the plateau judged on the minibatch ELBO (no rows held out)")
    source = "read chunk by chunk" if streamed else "in random order"
    return f"minibatches of {batch_size} of {num_fit_rows} rows ({source}); {held}."


def place_inducing(distinct: torch.Tensor, wanted: int, how: str, seed: int, generator: torch.Generator,
                   reason: str, kernel: gpytorch.kernels.Kernel | None = None) -> tuple[torch.Tensor, str]:
    """At most ``wanted`` inducing inputs (m, D) placed among more ``distinct`` training inputs (N, D), or among
    :data:`PLACEMENT_POINTS` random ones of them: by greedy conditional variance under ``kernel``
    (``how="greedy_variance"``, see :func:`greedy_variance_inducing`; fewer when the rest add no prior variance),
    k-means centres (``"kmeans"``) or a random subsample (``"subsample"``); with a phrase saying how (``reason``:
    why m)."""
    if distinct.shape[0] > PLACEMENT_POINTS:
        rows = torch.randperm(distinct.shape[0], generator=generator)[:PLACEMENT_POINTS].to(distinct.device)
        distinct = distinct[rows]
    if how == "greedy_variance":
        chosen = greedy_variance_inducing(distinct, kernel, wanted)
        note = (f"; the other {distinct.shape[0] - chosen.shape[0]} add no prior variance"
                if chosen.shape[0] < wanted else "")
        return chosen, (f"greedy conditional variance among {distinct.shape[0]} training inputs under the start's "
                        f"kernel (Burt et al. 2020; {reason}{note})")
    if how == "subsample":
        rows = torch.randperm(distinct.shape[0], generator=generator)[:wanted].to(distinct.device)
        return distinct[rows], f"a random subsample of the training inputs ({reason})"
    from sklearn.cluster import KMeans

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer distinct clusters than asked: the duplicates are dropped below
        centres = KMeans(n_clusters=wanted, n_init=1, max_iter=100, random_state=seed).fit(
            distinct.detach().cpu().double().numpy()).cluster_centers_
    centres = torch.unique(torch.as_tensor(centres, dtype=distinct.dtype, device=distinct.device), dim=0)
    return centres, f"k-means centres of {distinct.shape[0]} training inputs ({reason})"


def split_validation(X: torch.Tensor, y: torch.Tensor, count: int,
                     generator: torch.Generator) -> tuple[torch.Tensor, Batch | None]:
    """Indices of the rows of ``X`` (N, D) the steps see, and ``count`` random held-out rows ``(X_val, y_val)``
    (None when ``count`` < 1 or fewer than 2 rows would be left)."""
    num_rows = X.shape[0]
    order = torch.randperm(num_rows, generator=generator).to(X.device)
    if count < 1 or num_rows - count < 2:
        return torch.arange(num_rows, device=X.device), None
    held = order[:count]
    return order[count:], (X[held], y[held])


def greedy_variance_inducing(candidates: torch.Tensor, kernel: gpytorch.kernels.Kernel, wanted: int) -> torch.Tensor:
    """Inducing inputs by greedy conditional variance (Burt, Rasmussen and van der Wilk 2020, the pivoted Cholesky
    decomposition of the kernel matrix): each next one is the candidate whose prior variance given those chosen is
    largest. O(N m²) time, O(N m) memory.

    Parameters
    ----------
    candidates : torch.Tensor of shape (N, D)
        Distinct inputs (standardised).
    kernel : gpytorch.kernels.Kernel
        The kernel at the hyper-parameters the inducing inputs are for (a float64 copy does the arithmetic).
    wanted : int
        At most this many are chosen; fewer when every candidate's conditional variance falls below
        :data:`GREEDY_VARIANCE_TOLERANCE` (in float32: 100 machine epsilons) times its prior variance first.

    Returns
    -------
    torch.Tensor of shape (m, D), m ≤ wanted
        The chosen candidates in the order of choice, so that the first m' of them are the greedy choice of m'.
    """
    tolerance = max(GREEDY_VARIANCE_TOLERANCE, 100 * torch.finfo(candidates.dtype).eps)
    inputs = candidates.double()  # float64 downdates: float32 ones carry round-off near the float32 tolerance
    kernel = kernel if candidates.dtype == torch.float64 else copy.deepcopy(kernel).double()
    with torch.no_grad():
        prior = kernel(inputs, diag=True).to_dense().clamp_min(torch.finfo(torch.float64).tiny)
        residual = prior.clone()
        factor = torch.zeros(min(wanted, inputs.shape[0]), inputs.shape[0], dtype=torch.float64, device=inputs.device)
        chosen: list[int] = []
        for step in range(factor.shape[0]):
            index = int(torch.argmax(residual / prior))
            if residual[index] <= tolerance * prior[index]:
                break
            column = kernel(inputs, inputs[index:index + 1]).to_dense().reshape(-1)
            factor[step] = (column - factor[:step].T @ factor[:step, index]) / residual[index].sqrt()
            residual = (residual - factor[step] ** 2).clamp_min(0.0)
            residual[index] = 0.0
            chosen.append(index)
    return candidates[torch.tensor(chosen, dtype=torch.long, device=candidates.device)].clone()


def memory_batches(X: torch.Tensor, y: torch.Tensor, batch_size: int, generator: torch.Generator) -> Iterator[Batch]:
    """Endless minibatches ``(X_b (B, D), y_b (B,))`` of in-memory rows: a fresh random order every epoch (all rows,
    unshuffled, when one batch holds them)."""
    num_rows = X.shape[0]
    while True:
        if batch_size >= num_rows:
            yield X, y
            continue
        order = torch.randperm(num_rows, generator=generator).to(X.device)
        for first in range(0, num_rows - batch_size + 1, batch_size):
            rows = order[first:first + batch_size]
            yield X[rows], y[rows]


def held_out_mask(num_rows: int, chunk_index: int, share: float, seed: int, device: torch.device) -> torch.Tensor:
    """Boolean mask of shape (num_rows,): the rows of chunk ``chunk_index`` a streamed fit holds out, each with
    probability ``share`` (the same in every pass)."""
    generator = torch.Generator().manual_seed(int(seed) * 1_000_003 + chunk_index)
    return (torch.rand(num_rows, generator=generator) < share).to(device)


def streamed_validation(rows: StreamedRows, count: int, share: float, seed: int) -> Batch | None:
    """The first ``count`` held-out rows ``(X (≤ count, D), y)`` of a chunk source (one pass); None if there are
    none."""
    if count < 1:
        return None
    kept_X, kept_y, total = [], [], 0
    for index, (X, y) in enumerate(rows):
        mask = held_out_mask(X.shape[0], index, share, seed, X.device)
        kept_X.append(X[mask])
        kept_y.append(y[mask])
        total += int(mask.sum())
        if total >= count:
            break
    X_val, y_val = torch.cat(kept_X)[:count], torch.cat(kept_y)[:count]
    return (X_val, y_val) if X_val.shape[0] else None


def streamed_batches(rows: StreamedRows, generator: torch.Generator, batch_size: int, share: float, seed: int,
                     hold_out: bool) -> Iterator[Batch]:
    """Endless minibatches of a chunk source: each pass reads the chunks in order and shuffles within a chunk; with
    ``hold_out`` the rows :func:`held_out_mask` holds out are skipped (remainders are carried to the next chunk)."""
    while True:
        carry_X, carry_y = None, None
        for index, (X, y) in enumerate(rows):
            if hold_out:
                keep = ~held_out_mask(X.shape[0], index, share, seed, X.device)
                X, y = X[keep], y[keep]
            if carry_X is not None:
                X, y = torch.cat([carry_X, X]), torch.cat([carry_y, y])
            order = torch.randperm(X.shape[0], generator=generator).to(X.device)
            X, y = X[order], y[order]
            full = (X.shape[0] // batch_size) * batch_size
            for first in range(0, full, batch_size):
                yield X[first:first + batch_size], y[first:first + batch_size]
            carry_X, carry_y = X[full:], y[full:]
        if carry_X is not None and carry_X.shape[0]:
            yield carry_X, carry_y
