"""Out-of-core training data: re-iterable sources of (X, y) row chunks.

Models whose fit is a sum over rows (the ALS normal equations of the CPD models, the Kalman filters) can be
fitted from data that never sits in memory at once::

    data = tnbayes.data.ChunkedData.from_npy("X.npy", "y.npy", chunk_size=100_000)   # memory-mapped
    data = tnbayes.data.ChunkedData.from_parquet("flights/*.parquet", features=[...], target="ArrDelay")
    data = tnbayes.data.ChunkedData.from_dataloader(torch.utils.data.DataLoader(dataset, batch_size=65536))
    model = tnbayes.CPDKernelMachine(rank=10).fit(data)

A fit reads the source several times (one pass for the scaling statistics and a hyper-parameter subsample,
then one pass per ALS core update), so a source must be *re-iterable*: every ``iter(data)`` starts again from
the first chunk. A plain generator can be read once only and is refused with an error that says so.

Every chunk is validated as it is read (finite numbers, matching shapes, the same number of columns in every
chunk), so a bad row far into a file gets the same clear error as bad in-memory data.
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tnbayes._validation import ArrayLike, check_X_y
from tnbayes.distributed import all_gather_rows, process_rank

__all__ = ["ChunkedData", "DataSummary", "StreamedRows", "as_chunked", "is_chunked", "summarize"]

Chunk = tuple[ArrayLike, ArrayLike]


class ChunkedData:
    """A re-iterable source of training chunks ``(X_chunk, y_chunk)``.

    Parameters
    ----------
    make_iterator : callable
        Called with no arguments at the start of every pass; returns an iterator of ``(X, y)`` pairs, X of
        shape (n_i, D) and y of shape (n_i,) (numpy arrays, torch tensors or anything array-like).
    description : str
        Shown in error messages and reprs.
    num_rows : int, optional
        Total rows when known up front (memmaps, parquet metadata); otherwise counted in the first pass.

    Notes
    -----
    Iterating yields validated float64 CPU tensors ``(X, y)`` of shapes (n_i, D) and (n_i,); models convert
    each chunk to their own dtype and device. Empty chunks are skipped.
    """

    def __init__(self, make_iterator: Callable[[], Iterator[Chunk]], *, description: str = "chunks",
                 num_rows: int | None = None) -> None:
        if not callable(make_iterator):
            raise TypeError("make_iterator must be a callable returning an iterator of (X, y) pairs.")
        self._make_iterator = make_iterator
        self.description = description
        self.num_rows = None if num_rows is None else int(num_rows)

    def __repr__(self) -> str:
        rows = "" if self.num_rows is None else f", {self.num_rows} rows"
        return f"ChunkedData({self.description}{rows})"

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        num_features = None
        for index, chunk in enumerate(self._make_iterator()):
            if not isinstance(chunk, (tuple, list)) or len(chunk) != 2:
                raise ValueError(f"chunk {index} of {self.description} is not an (X, y) pair; got "
                                 f"{type(chunk).__name__}. Yield (X, y) with X (n, D) and y (n,).")
            if len(chunk[0]) == 0 and len(chunk[1]) == 0:
                continue
            X, y = check_X_y(chunk[0], chunk[1], dtype=torch.float64, device="cpu")
            if num_features is None:
                num_features = X.shape[1]
            elif X.shape[1] != num_features:
                raise ValueError(f"chunk {index} of {self.description} has {X.shape[1]} columns but the first "
                                 f"chunk had {num_features}; every chunk must have the same columns.")
            yield X, y

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_arrays(cls, X: ArrayLike, y: ArrayLike, chunk_size: int = 65536) -> "ChunkedData":
        """Chunks of in-memory or memory-mapped arrays (``np.memmap`` / ``np.load(..., mmap_mode="r")``:
        only the chunk being read is paged in).

        Parameters
        ----------
        X : array-like of shape (N, D)
        y : array-like of shape (N,)
        chunk_size : int
            Rows per chunk.
        """
        chunk_size = _positive_int(chunk_size, "chunk_size")
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} rows but y has {len(y)}; they must match.")
        n = len(X)

        def rows(a: ArrayLike, start: int) -> ArrayLike:
            part = a[start:start + chunk_size]
            return part if isinstance(part, torch.Tensor) else np.array(part)  # a copy: memmaps are read-only

        def chunks() -> Iterator[Chunk]:
            for start in range(0, n, chunk_size):
                yield rows(X, start), rows(y, start)

        return cls(chunks, description=f"arrays of {n} rows", num_rows=n)

    @classmethod
    def from_npy(cls, x_path: str | os.PathLike, y_path: str | os.PathLike, chunk_size: int = 65536) -> "ChunkedData":
        """Chunks of two ``.npy`` files read memory-mapped (X: (N, D), y: (N,))."""
        X = np.load(os.fspath(x_path), mmap_mode="r")
        y = np.load(os.fspath(y_path), mmap_mode="r")
        data = cls.from_arrays(X, y, chunk_size)
        data.description = f"{os.fspath(x_path)} / {os.fspath(y_path)}"
        return data

    @classmethod
    def from_parquet(cls, paths: str | os.PathLike | Sequence[str | os.PathLike], features: Sequence[str],
                     target: str, batch_size: int = 65536) -> "ChunkedData":
        """Chunks of parquet files read in record batches with pyarrow (never a whole file in memory).

        Parameters
        ----------
        paths : str, path or sequence of them
            Files or glob patterns (``"flights/*.parquet"``), read in sorted order.
        features : sequence of str
            The D input columns, in this order.
        target : str
            The target column.
        batch_size : int
            Rows per chunk (pyarrow's ``iter_batches`` batch size).
        """
        try:
            import pyarrow.parquet as pq
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("Reading parquet needs pyarrow: pip install pyarrow "
                              "(or pip install 'tnbayes[parquet]').") from err
        batch_size = _positive_int(batch_size, "batch_size")
        patterns = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        files: list[str] = []
        for pattern in patterns:
            matched = sorted(glob.glob(os.fspath(pattern)))
            if not matched:
                raise FileNotFoundError(f"no parquet file matches {os.fspath(pattern)!r}.")
            files.extend(matched)
        features = [str(c) for c in features]
        if not features:
            raise ValueError("features must name at least one input column.")
        num_rows = 0
        for path in files:
            meta = pq.ParquetFile(path)
            missing = [c for c in [*features, target] if c not in meta.schema_arrow.names]
            if missing:
                raise ValueError(f"{path} has no column(s) {missing}; its columns are {meta.schema_arrow.names}.")
            num_rows += meta.metadata.num_rows

        def chunks() -> Iterator[Chunk]:
            for path in files:
                for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=[*features, target]):
                    X = np.column_stack([batch.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
                                         for c in features])
                    y = batch.column(target).to_numpy(zero_copy_only=False).astype(np.float64)
                    yield X, y

        return cls(chunks, description=f"{len(files)} parquet file(s)", num_rows=num_rows)

    @classmethod
    def from_dataloader(cls, loader: Iterable[Any]) -> "ChunkedData":
        """Chunks of a ``torch.utils.data.DataLoader`` (or any re-iterable of batches) yielding ``(X, y)``."""
        _require_reiterable(loader)
        return cls(lambda: iter(loader), description=type(loader).__name__)

    # ------------------------------------------------------------------ views
    def shard(self, rank: int, world_size: int) -> "ChunkedData":
        """The chunks of one process in a data-parallel fit: chunk i belongs to process ``i % world_size``.

        Parameters
        ----------
        rank, world_size : int
            This process's rank and the number of processes (``torch.distributed.get_rank()`` /
            ``get_world_size()``).
        """
        rank, world_size = int(rank), _positive_int(world_size, "world_size")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}); got {rank}.")

        def chunks() -> Iterator[Chunk]:
            for index, chunk in enumerate(self._make_iterator()):
                if index % world_size == rank:
                    yield chunk

        return ChunkedData(chunks, description=f"{self.description} [shard {rank}/{world_size}]")


class StreamedRows:
    """Training rows read from a chunk source pass by pass, scaled as they are read.

    Parameters
    ----------
    source : iterable of (torch.Tensor, torch.Tensor)
        Re-iterable of raw ``(X, y)`` chunks of shapes (n_i, D) and (n_i,) (e.g. a
        :class:`tnbayes.data.ChunkedData`).
    num_rows : int
        Rows in this process's part of the source.
    num_features : int
        D.
    transform_X, transform_y : callable, optional
        Applied to every chunk after it is moved to ``dtype`` and ``device`` (the model's scalers).
    dtype : torch.dtype
    device : torch.device or str
    """

    def __init__(self, source, num_rows: int, num_features: int, *, transform_X=None, transform_y=None,
                 dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu") -> None:
        self.source = source
        self.num_rows = int(num_rows)
        self.num_features = int(num_features)
        self.transform_X = transform_X
        self.transform_y = transform_y
        self.dtype = dtype
        self.device = torch.device(device)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Scaled chunks ``(X, y)`` on ``device``: shapes (n_i, D) and (n_i,)."""
        for X, y in self.source:
            X = X.to(dtype=self.dtype, device=self.device)
            y = y.to(dtype=self.dtype, device=self.device)
            yield (X if self.transform_X is None else self.transform_X(X),
                   y if self.transform_y is None else self.transform_y(y))


def is_chunked(X: Any, y: Any = None) -> bool:
    """Whether ``fit(X, y)`` was given a chunk source rather than arrays: a :class:`ChunkedData`, or ``y`` is
    None and ``X`` is an iterable that is not an array (a DataLoader, a list of (X, y) pairs)."""
    if isinstance(X, ChunkedData):
        return True
    if y is not None or isinstance(X, (np.ndarray, torch.Tensor)) or hasattr(X, "to_numpy"):
        return False
    return isinstance(X, Iterable) and not isinstance(X, (str, bytes))


def as_chunked(X: Any, y: Any = None) -> ChunkedData:
    """``X`` as a :class:`ChunkedData` (see :func:`is_chunked`); raises for one-shot iterators."""
    if isinstance(X, ChunkedData):
        if y is not None:
            raise ValueError("y must be None when X is a ChunkedData (the targets come with the chunks).")
        return X
    if not is_chunked(X, y):
        raise TypeError(f"expected a ChunkedData or a re-iterable of (X, y) chunks; got {type(X).__name__}.")
    return ChunkedData.from_dataloader(X)


@dataclass
class DataSummary:
    """What one pass over the training chunks yields (summed over all processes in a data-parallel fit).

    Attributes
    ----------
    num_rows : int
        Rows over all processes.
    local_rows : int
        Rows of this process's shard.
    x_mean, x_variance, x_min, x_max : torch.Tensor of shape (D,)
        Column statistics of X (population variance).
    y_mean, y_variance, y_min, y_max : torch.Tensor of shape ()
    sample_X : torch.Tensor of shape (n_s, D)
    sample_y : torch.Tensor of shape (n_s,)
        A uniform random subsample of at most ``sample_size`` rows (for hyper-parameter estimation), the same
        in every process.
    """

    num_rows: int
    local_rows: int
    x_mean: torch.Tensor
    x_variance: torch.Tensor
    x_min: torch.Tensor
    x_max: torch.Tensor
    y_mean: torch.Tensor
    y_variance: torch.Tensor
    y_min: torch.Tensor
    y_max: torch.Tensor
    sample_X: torch.Tensor
    sample_y: torch.Tensor

    @property
    def num_features(self) -> int:
        """D."""
        return int(self.x_mean.shape[0])


def summarize(data: ChunkedData, *, sample_size: int = 2000, seed: int = 0, distributed: bool = False) -> DataSummary:
    """One pass over ``data``: row count, column moments and extremes, and a uniform row subsample.

    Moments are merged chunk by chunk with Chan et al.'s pairwise update (no catastrophic cancellation); the
    subsample keeps the rows with the ``sample_size`` smallest uniform random keys (bottom-k sampling, which
    merges across chunks and processes exactly). In a data-parallel fit every process contributes its shard
    and receives the same summary.

    Parameters
    ----------
    data : ChunkedData
    sample_size : int
    seed : int
        Seed of the sampling keys (offset by the process rank).
    distributed : bool
        Combine the shards of all processes of the default process group.

    Returns
    -------
    DataSummary

    Raises
    ------
    ValueError
        If the source yields no rows.
    """
    generator = torch.Generator().manual_seed(int(seed) + 1_000_003 * process_rank(distributed))
    stats: torch.Tensor | None = None  # [n, mean (D+1), m2 (D+1), min (D+1), max (D+1)] with y as column D
    keys = torch.empty(0, dtype=torch.float64)
    sample = torch.empty(0, 0, dtype=torch.float64)
    for X, y in data:
        rows = torch.cat([X, y.unsqueeze(1)], dim=1)
        part = _chunk_statistics(rows)
        stats = part if stats is None else _merge_statistics(stats, part)
        chunk_keys = torch.rand(rows.shape[0], generator=generator, dtype=torch.float64)
        keys, sample = _smallest_keys(torch.cat([keys, chunk_keys]),
                                      rows if sample.numel() == 0 else torch.cat([sample, rows]), sample_size)
    local_rows = 0 if stats is None else int(stats[0])
    width = -1 if stats is None else stats.numel()
    if distributed:
        width = int(all_gather_rows(torch.tensor([width], dtype=torch.long), True).max())
        if stats is None and width > 0:  # an empty shard: neutral statistics of the right width
            columns = (width - 1) // 4
            stats = torch.cat([torch.zeros(1 + 2 * columns, dtype=torch.float64),
                               torch.full((columns,), math.inf, dtype=torch.float64),
                               torch.full((columns,), -math.inf, dtype=torch.float64)])
            sample = torch.empty(0, columns, dtype=torch.float64)
        if width > 0:
            gathered = all_gather_rows(stats.unsqueeze(0), True)
            stats = gathered[0]
            for other in gathered[1:]:
                stats = _merge_statistics(stats, other)
            keys, sample = _smallest_keys(all_gather_rows(keys, True), all_gather_rows(sample, True), sample_size)
    if stats is None or width <= 0 or stats[0] == 0:
        raise ValueError(f"{data!r} yielded no rows; at least one (X, y) chunk with rows is required.")
    columns = (stats.numel() - 1) // 4
    n = int(stats[0])
    mean, m2 = stats[1:1 + columns], stats[1 + columns:1 + 2 * columns]
    low, high = stats[1 + 2 * columns:1 + 3 * columns], stats[1 + 3 * columns:]
    variance = m2 / n
    order = torch.argsort(keys)  # the sample in key order: independent of how the rows were chunked
    sample = sample[order]
    return DataSummary(n, local_rows, mean[:-1], variance[:-1], low[:-1], high[:-1], mean[-1], variance[-1], low[-1],
                       high[-1], sample[:, :-1].contiguous(), sample[:, -1].contiguous())


def _chunk_statistics(rows: torch.Tensor) -> torch.Tensor:
    mean = rows.mean(dim=0)
    m2 = ((rows - mean) ** 2).sum(dim=0)
    n = torch.tensor([float(rows.shape[0])], dtype=torch.float64)
    return torch.cat([n, mean, m2, rows.amin(dim=0), rows.amax(dim=0)])


def _merge_statistics(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Chan et al.'s pairwise merge of two [n, mean, m2, min, max] vectors."""
    columns = (a.numel() - 1) // 4
    na, nb = float(a[0]), float(b[0])
    if nb == 0:
        return a
    if na == 0:
        return b
    n = na + nb
    mean_a, mean_b = a[1:1 + columns], b[1:1 + columns]
    delta = mean_b - mean_a
    mean = mean_a + delta * (nb / n)
    m2 = a[1 + columns:1 + 2 * columns] + b[1 + columns:1 + 2 * columns] + delta ** 2 * (na * nb / n)
    low = torch.minimum(a[1 + 2 * columns:1 + 3 * columns], b[1 + 2 * columns:1 + 3 * columns])
    high = torch.maximum(a[1 + 3 * columns:], b[1 + 3 * columns:])
    return torch.cat([torch.tensor([n], dtype=torch.float64), mean, m2, low, high])


def _smallest_keys(keys: torch.Tensor, rows: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    if keys.numel() <= size:
        return keys, rows
    kept = torch.topk(keys, size, largest=False).indices
    return keys[kept], rows[kept]


def _require_reiterable(source: Any) -> None:
    if iter(source) is source:
        raise TypeError(
            f"{type(source).__name__} is a one-shot iterator (a generator?), but fitting reads the data several "
            f"times (scaling statistics, then once per ALS core update). Pass something whose iter() restarts: "
            f"a DataLoader, a list of (X, y) pairs, or tnbayes.data.ChunkedData(lambda: my_generator())."
        )


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)
