"""Kalman filtering of a static weight vector, dense and in tensor-train form: one package for the *inference*
axis of :class:`~tnbayes.TNKF` and :class:`~tnbayes.TTKalmanGP`.

- :mod:`~tnbayes.inference.kalman.truncation` — :class:`Truncation`, how a TT quantity is rounded.
- :mod:`~tnbayes.inference.kalman.dense` — :class:`DenseKalmanFilter`, the O(N²) reference.
- :mod:`~tnbayes.inference.kalman.tt_rows` — :class:`TTKalmanFilter`, one measurement row at a time with a TT
  square root (Potter's update; TNKF streams its kernel rows through it).
- :mod:`~tnbayes.inference.kalman.tt_batch` — :func:`kalman_batch_update` and :class:`TTBatchKalmanFilter`,
  a batch of rank-one feature rows at a time with the root held as prior − correction (TTKalmanGP).
- :mod:`~tnbayes.inference.kalman.streaming` — :func:`filter_stream`, how the filters' streams run (one thread,
  inference mode), and :func:`released`, their state handed back as normal tensors.
"""

from .dense import DenseKalmanFilter
from .truncation import TRUNCATED_QUANTITIES, Truncation
from .streaming import filter_stream, released
from .tt_batch import TTBatchKalmanFilter, kalman_batch_update, prior_root_matrix
from .tt_rows import BlockUpdateError, TTKalmanFilter, covariance_from_root

__all__ = [
    "TRUNCATED_QUANTITIES",
    "BlockUpdateError",
    "DenseKalmanFilter",
    "TTBatchKalmanFilter",
    "TTKalmanFilter",
    "Truncation",
    "covariance_from_root",
    "filter_stream",
    "kalman_batch_update",
    "prior_root_matrix",
    "released",
]
