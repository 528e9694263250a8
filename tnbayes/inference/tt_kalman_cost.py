"""The cost model of TTKalmanGP: predicted seconds of its filter per streamed row and of its ALS smoothing, for the
time budget (:mod:`.budget`).

Both are linear in a few features of the settings, with non-negative constants fitted to the relative error of
seconds measured on the development machine (2 cores, one torch thread, float64) by ``python -m benchmarks
tt_kalman_cost --fit`` (the filter) and ``python -m benchmarks tt_kalman_cost --fit-smoothing`` (the smoothing):

* **Filter** (:func:`tt_kalman_row_features`, :data:`TT_KALMAN_COST`): a batch of B rows costs a fixed overhead
  per core and per batch and contractions that grow with the TT ranks r_k and the basis size M.
* **Smoothing** (:func:`tt_smoothing_features`, :data:`TT_SMOOTHING_COST`): the ALS sweeps and the Laplace pass of
  :mod:`tnbayes.inference.tt_als` solve one core system at a time, of size s_k = r_{k−1} M r_k; each accumulates
  the normal equations over the rows (s_k² per row, and the interfaces of the other cores) and solves them (s_k³).
  The model counts the systems of the smoothing the budget plans: :data:`TT_SMOOTHING_PLANNED_SWEEPS` sweeps and
  the Laplace pass, or, when the noise is estimated on held-out rows, those on the other rows and then one sweep and
  the Laplace pass over all (the smoothing goes on while the budget lasts, and ``sweep_tol`` can stop it sooner).
"""

from __future__ import annotations

__all__ = ["TT_KALMAN_COST", "TT_SMOOTHING_COST", "TT_SMOOTHING_PLANNED_SWEEPS", "tt_kalman_row_features",
           "tt_kalman_seconds_per_row", "tt_smoothing_features", "tt_smoothing_seconds"]

#: seconds per unit of each TTKalmanGP filter feature (:func:`tt_kalman_row_features`)
TT_KALMAN_COST: dict[str, float] = {
    "core": 3.76e-4,
    "core_per_batch": 9.86e-4,
    "batch_contraction": 6.71e-9,
    "rank_product": 4.9e-6,
    "matrix_core_entry": 2.16e-7,
}
#: seconds per unit of each smoothing feature (:func:`tt_smoothing_features`)
TT_SMOOTHING_COST: dict[str, float] = {
    "gram_entry": 2.99e-11,
    "row_interface": 4.31e-10,
    "solve_flop": 1.71e-11,
    "system": 0.00113,
}
#: sweeps the budget plans the smoothing for (on the rows not held out when it holds rows out, then one over all;
#: more run while the budget lasts)
TT_SMOOTHING_PLANNED_SWEEPS = 3


def _tt_ranks(num_dims: int, num_basis: int, max_rank: int | None) -> list[int]:
    """r_0 … r_D of a TT of D modes of size M at the cap (or at the bound the modes allow)."""
    D, M = int(num_dims), int(num_basis)
    return [1] + [min(int(max_rank), M ** min(k, D - k)) if max_rank is not None else M ** min(k, D - k)
                  for k in range(1, D)] + [1]


def tt_kalman_row_features(num_dims: int, num_basis: int, max_rank: int | None, batch_size: int) -> dict[str, float]:
    """Cost features of one TTKalmanGP row (a B-th of one batch update).

    Parameters
    ----------
    num_dims : int
        D, the TT cores.
    num_basis : int
        M, the mode size of every core.
    max_rank : int or None
        Rank cap of the mean and of the covariance correction (None: the largest rank the modes allow).
    batch_size : int
        B.

    Returns
    -------
    dict
        ``core`` (D), ``core_per_batch`` (D/B), ``batch_contraction`` (B · r · Σ_k M r_k r_k+1),
        ``rank_product`` (Σ_k r_k r_k+1) and ``matrix_core_entry`` (Σ_k M² r_k r_k+1, the entries of the
        correction's cores): the units of :data:`TT_KALMAN_COST`.
    """
    D, M, B = int(num_dims), int(num_basis), int(batch_size)
    ranks = _tt_ranks(D, M, max_rank)
    products = [float(ranks[k] * ranks[k + 1]) for k in range(D)]
    largest = float(max(ranks))
    return {"core": float(D), "core_per_batch": D / B, "batch_contraction": B * largest * M * sum(products),
            "rank_product": sum(products), "matrix_core_entry": M * M * sum(products)}


def tt_kalman_seconds_per_row(num_dims: int, num_basis: int, max_rank: int | None, batch_size: int) -> float:
    """Predicted seconds of one TTKalmanGP row: :data:`TT_KALMAN_COST` · :func:`tt_kalman_row_features`."""
    features = tt_kalman_row_features(num_dims, num_basis, max_rank, batch_size)
    return sum(TT_KALMAN_COST[name] * value for name, value in features.items())


def _sweep_systems_per_core(num_dims: int, sweeps: int) -> list[int]:
    """Core systems solved per core by ``sweeps`` ALS sweeps (:meth:`~tnbayes.inference.tt_als.TTALS.run`: the first
    sweep solves every core going right and all but the last going left, each later sweep all but the first going
    right)."""
    D, S = int(num_dims), int(sweeps)
    return [S + 1] + [2 * S] * (D - 2) + [S]


def _laplace_system_sizes(ranks: list[int], num_basis: int) -> list[int]:
    """Sizes of the systems of the Laplace pass (:meth:`~tnbayes.inference.tt_als.TTALS.laplace`): core k < D − 1 in
    the complement of its left-orthonormal core, (r_{k−1} M − r_k) r_k (none when that is 0), the last core whole."""
    D, M = len(ranks) - 1, int(num_basis)
    sizes = [(ranks[k] * M - ranks[k + 1]) * ranks[k + 1] for k in range(D - 1)] + [ranks[D - 1] * M]
    return [size for size in sizes if size > 0]


def tt_smoothing_features(num_dims: int, num_basis: int, max_rank: int | None, rows: int, *,
                          sweeps: int = TT_SMOOTHING_PLANNED_SWEEPS,
                          held_out_rows: int = 0) -> dict[str, float]:
    """Cost features of TTKalmanGP's ALS smoothing over ``rows`` rows.

    Parameters
    ----------
    num_dims, num_basis, max_rank
        D (≥ 2), M and the rank cap (None: the largest rank the modes allow), as in :func:`tt_kalman_row_features`.
    rows : int
        Rows the smoothing sweeps.
    sweeps : int
        Sweeps of the smoothing (of the refit, with ``held_out_rows``).
    held_out_rows : int
        Rows held out to estimate the noise (0: none): ``sweeps`` sweeps and a Laplace pass over the other rows
        first, then one sweep and a Laplace pass over all ``rows``.

    Returns
    -------
    dict
        Over every core system solved (of size s_k = r_{k−1} M r_k for core k in the sweeps, as
        :func:`_laplace_system_sizes` in the Laplace pass): ``gram_entry`` (rows · s², the normal equations),
        ``row_interface`` (rows · Σ_j r_{j−1} M r_j, the other cores' interfaces and the design), ``solve_flop``
        (s³) and ``system`` (1): the units of :data:`TT_SMOOTHING_COST`.

    Raises
    ------
    ValueError
        For D < 2 (a single core has no rank to cap, and the model does not smooth it).
    """
    D, M = int(num_dims), int(num_basis)
    if D < 2:
        raise ValueError(f"The smoothing's cost model needs num_dims >= 2; got {num_dims}.")
    ranks = _tt_ranks(D, M, max_rank)
    sizes = [float(ranks[k] * M * ranks[k + 1]) for k in range(D)]
    entries = sum(sizes)
    passes = [(int(rows), int(sweeps))] if not held_out_rows else \
        [(int(rows) - int(held_out_rows), int(sweeps)), (int(rows), 1)]
    features = dict.fromkeys(TT_SMOOTHING_COST, 0.0)
    laplace = [(float(size), 1) for size in _laplace_system_sizes(ranks, M)]
    for streamed, count in passes:
        for size, solves in list(zip(sizes, _sweep_systems_per_core(D, count))) + laplace:
            features["gram_entry"] += solves * streamed * size * size
            features["row_interface"] += solves * streamed * entries
            features["solve_flop"] += solves * size ** 3
            features["system"] += solves
    return features


def tt_smoothing_seconds(num_dims: int, num_basis: int, max_rank: int | None, rows: int, *,
                         sweeps: int = TT_SMOOTHING_PLANNED_SWEEPS, held_out_rows: int = 0) -> float:
    """Predicted seconds of TTKalmanGP's smoothing: :data:`TT_SMOOTHING_COST` · :func:`tt_smoothing_features`
    (same parameters)."""
    features = tt_smoothing_features(num_dims, num_basis, max_rank, rows, sweeps=sweeps, held_out_rows=held_out_rows)
    return sum(TT_SMOOTHING_COST[name] * value for name, value in features.items())
