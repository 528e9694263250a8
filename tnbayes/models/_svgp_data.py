"""The rows of :class:`~tnbayes.SVGP`'s optimiser steps: endless minibatches of in-memory rows or of a chunk source,
and the held-out rows of a chunk source (drawn per chunk with a fixed seed, so the same in every pass)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import torch

from tnbayes.data import StreamedRows

Batch = tuple[torch.Tensor, torch.Tensor]
#: rows k-means sees when it places the inducing points (a random subsample beyond this)
KMEANS_POINTS = 20_000


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
                   reason: str) -> tuple[torch.Tensor, str]:
    """``wanted`` inducing inputs among more ``distinct`` training inputs (m, D): k-means centres (``how="kmeans"``)
    of at most :data:`KMEANS_POINTS` of them, or a random subsample; with a phrase saying how (``reason``: why m)."""
    if distinct.shape[0] > KMEANS_POINTS:
        distinct = distinct[torch.randperm(distinct.shape[0], generator=generator)[:KMEANS_POINTS].to(distinct.device)]
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
