"""The cost model of TNKF's filter: predicted seconds per streamed row, for the time budget (:mod:`.budget`).

Two updates, two models, each linear in a few features of the settings with non-negative constants fitted to the
relative error of seconds per row measured on the development machine (2 cores, one torch thread, float64):

* **Row by row** (:func:`tnkf_row_features`, :data:`TNKF_COST`): the state-sized vectors ``Lᵀc`` and ``L w`` are
  contracted to dense vectors and compressed by TT-SVDs from Gram matrices (the mean is updated densely and compressed
  once, when its TT is read; ``round_relative_to="state"`` rounds it after every row, which the model does not
  count), and ``L − β g wᵀ`` is rounded from Gram matrices bond by bond
  (:func:`~tnbayes.tensors.round_rank_one_update`). The features are the flops of those steps, simulated core by core
  with every rank at its cap (or at the bound its modes allow), plus a fixed cost per row and per core (the calls).
  Constants from ``python -m benchmarks tnkf_cost --fit``.
* **Blocks of B rows** (:func:`tnkf_block_features`, :data:`TNKF_BLOCK_COST`): the products of TTs and the
  TT-roundings of their results (the block update forms and rounds them once per block), times
  :func:`tnkf_block_cost_factor`; constants from the same run's blocks of 16.

Measured against the committed run (``benchmarks/results/tnkf_cost/``): neither update is the cheaper one
everywhere, so the budget predicts both before it chooses blocks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tnbayes.tensors.shapes import tt_bond_bounds
from tnbayes.tensors.tt_rounding import middle_bond
from tnbayes.tensors.tt_update_rounding import bond_basis_plan

__all__ = ["TNKF_BLOCK_COST", "TNKF_BLOCK_COST_FACTOR", "TNKF_COST", "tnkf_block_cost_factor", "tnkf_block_features",
           "tnkf_row_features", "tnkf_seconds_per_row"]

#: seconds per unit of each feature of the row update (:func:`tnkf_row_features`)
TNKF_COST: dict[str, float] = {
    "row": 1.34e-4,
    "core": 4.15e-4,
    "contraction_flop": 2.62e-11,
    "dense_flop": 4.85e-12,
    "root_rounding_flop": 2.78e-11,
}
#: seconds per unit of each feature of the block update (:func:`tnkf_block_features`), before the block factor
TNKF_BLOCK_COST: dict[str, float] = {
    "row": 9.31e-4,
    "contraction_flop": 3.11e-10,
    "vector_rounding_flop": 1.35e-10,
    "matrix_rounding_flop": 3.2e-12,
}
#: the block factor from 16 rows on (see :func:`tnkf_block_cost_factor`); the block-update sinc measurements it came
#: from are in docs/benchmarks.md ("The cost models re-fitted")
TNKF_BLOCK_COST_FACTOR = 0.35


def _rounding_flops(modes: Sequence[int], formal: Sequence[float], kept: Sequence[float]) -> float:
    """Flops of one TT-rounding (right-to-left QR, left-to-right truncated SVD) of a TT with these modes.

    Parameters
    ----------
    modes : sequence of int
        Mode sizes (d), the products of row and column modes for a TT-matrix.
    formal : sequence of float
        Bond ranks before the rounding (d − 1).
    kept : sequence of float
        Bond ranks after it (d − 1).
    """
    d = len(modes)
    ranks = [1.0, *[float(r) for r in formal], 1.0]
    flops = 0.0
    for k in range(d - 1, 0, -1):  # QR of the (n_k r_k+1) × r_k unfolding; the rank shrinks to its smaller side
        rows, cols = modes[k] * ranks[k + 1], ranks[k]
        flops += 2.0 * max(rows, cols) * min(rows, cols) ** 2  # the QR
        flops += 2.0 * ranks[k - 1] * modes[k - 1] * cols * min(rows, cols)  # R into the core on the left
        ranks[k] = min(rows, cols)
    left = 1.0
    for k in range(d - 1):
        rows, cols = left * modes[k], ranks[k + 1]
        flops += 4.0 * max(rows, cols) * min(rows, cols) ** 2
        new = max(1.0, min(float(kept[k]), rows, cols))
        flops += 2.0 * new * cols * modes[k + 1] * ranks[k + 2]
        left, ranks[k + 1] = new, new
    return flops


def _contraction_flops(modes: Sequence[int], a: Sequence[float], b: Sequence[float]) -> float:
    """Flops of the core-wise product of two TTs with bond ranks a and b (a matvec or an outer product)."""
    ra, rb = [1.0, *a, 1.0], [1.0, *b, 1.0]
    return sum(2.0 * n * ra[k] * ra[k + 1] * rb[k] * rb[k + 1] for k, n in enumerate(modes))


def _dense_matvec_flops(modes: Sequence[int], a: Sequence[float], x: Sequence[float]) -> float:
    """Flops of :func:`~tnbayes.tensors.matvec_to_dense` of a TT-matrix with bond ranks a (square modes) and a
    TT-vector with bond ranks x: both ends contracted core by core towards the middle bond, then joined there."""
    ra, rx, d = [1.0, *a, 1.0], [1.0, *x, 1.0], len(modes)
    split = middle_bond(modes)
    flops = 0.0
    for k in range(d):  # the output modes already contracted: left of k (left half), right of k (right half)
        n = float(modes[k])
        outer = float(math.prod(modes[:k])) if k < split else float(math.prod(modes[k + 1:]))
        flops += 2.0 * outer * n * rx[k] * rx[k + 1] * (ra[k] if k < split else ra[k + 1])  # the vector's core
        flops += 2.0 * outer * n * n * ra[k] * ra[k + 1] * (rx[k + 1] if k < split else rx[k])  # the matrix's core
    return flops + 2.0 * math.prod(modes[:split]) * ra[split] * rx[split] * math.prod(modes[split:])


def _capped(cap: int | None, limits: Sequence[int]) -> list[float]:
    return [float(b if cap is None else min(int(cap), b)) for b in limits]


def _ranks_at_caps(shape: Sequence[int], covariance_rank: int | None, gain_rank: int | None,
                   innovation_rank: int | None, row_ranks: Sequence[int] | None,
                   mean_rank: int | None) -> tuple[list[int], ...]:
    """The modes and the bond ranks (d − 1 each) of L, the kernel row, w, g and the mean at their caps, or at the
    bounds of the modes (L: of the squared modes) where uncapped."""
    modes = [int(n) for n in shape]
    bounds = tt_bond_bounds(modes)
    row = [float(min(r, b)) for r, b in zip(row_ranks, bounds)] if row_ranks is not None else _capped(None, bounds)
    return (modes, _capped(covariance_rank, [b * b for b in bounds]), row, _capped(innovation_rank, bounds),
            _capped(gain_rank, bounds), _capped(mean_rank, bounds))


def _gram_tt_svd_flops(modes: Sequence[int], kept: Sequence[float]) -> float:
    """Flops of a TT-SVD of a dense vector from Gram matrices, counted bond by bond from the left (Gram matrix of the
    rank × mode side, its eigendecomposition, the projection of the rest); w and g are truncated from the right
    (``norm_core=0``), which the same count stands for."""
    rest, left, flops = float(math.prod(modes)), 1.0, 0.0
    for k, n in enumerate(modes[:-1]):
        rows = left * n
        columns = rest / rows
        new = max(1.0, min(float(kept[k]), rows, columns))
        flops += 2.0 * rows * rows * columns + rows ** 3 + 2.0 * new * rows * columns
        rest, left = new * columns, new
    return flops


def _root_rounding_flops(modes: Sequence[int], L: Sequence[float], g: Sequence[float], w: Sequence[float],
                         cap: int | None) -> float:
    """Flops of rounding ``L − β g wᵀ`` from Gram matrices (:func:`~tnbayes.tensors.round_rank_one_update` with
    right-orthonormal g and w): the right Gram recursions of L and of its cross term with g ⊗ w, then per bond the
    cores Z after the left bases, the joint block ``Z_uv + Z_L X``, the leading eigenvectors of the (r·n²) × (r·n²)
    matrix ``Z G Zᵀ`` (formed or not as :func:`~tnbayes.tensors.tt_update_rounding.bond_basis_plan` decides;
    subspace iteration: three products with cap + 8 columns, two QRs; or a full eigendecomposition), and the
    carried left bases."""
    d = len(modes)
    ranks_l, ranks_g, ranks_w = ([1.0, *[float(r) for r in ranks], 1.0] for ranks in (L, g, w))
    flops = 0.0
    for k in range(d - 1, 0, -1):  # right Grams of L (G_L) and of L against g ⊗ w (X)
        n, ra, ra1, rb, rb1, rc, rc1 = (float(modes[k]), ranks_l[k], ranks_l[k + 1], ranks_g[k], ranks_g[k + 1],
                                        ranks_w[k], ranks_w[k + 1])
        flops += 2.0 * n * n * ra * ra1 * (ra + ra1)
        flops += 2.0 * n * ra1 * rc * (rb1 * rc1 + n * rb * rb1) + 2.0 * n * n * ra * ra1 * rb * rc
    carried = 1.0
    for k in range(d):
        n, ra, ra1, rb, rb1, rc, rc1 = (float(modes[k]), ranks_l[k], ranks_l[k + 1], ranks_g[k], ranks_g[k + 1],
                                        ranks_w[k], ranks_w[k + 1])
        rows, pair = carried * n * n, rb1 * rc1
        flops += 2.0 * rows * ra * ra1 + 2.0 * carried * n * rb * rc1 * (rc + n * rb1)  # Z_L and Z_uv
        if k == d - 1:
            break
        columns = ra1 + pair
        flops += 2.0 * rows * ra1 * pair + 2.0 * ra1 * ra1 * pair  # the joint block and the Schur complement
        width, formed = bond_basis_plan(int(rows), int(columns), cap)
        if formed:
            flops += 2.0 * rows * rows * columns
        if width is None:
            flops += rows ** 3
        else:  # three products with M (formed, or through Z), two QRs, Rayleigh–Ritz
            flops += 3.0 * (2.0 * rows * rows * width if formed else 4.0 * rows * columns * width) \
                + 2.0 * 4.0 * rows * width ** 2 + width ** 3
        carried = max(1.0, min(ra1, rows))  # the rounded root's rank (L's, at its cap)
        flops += 2.0 * carried * rows * (ra1 + pair)  # the carried left bases
    return flops


def tnkf_row_features(shape: Sequence[int], covariance_rank: int | None, gain_rank: int | None,
                      innovation_rank: int | None, row_ranks: Sequence[int] | None = None,
                      mean_rank: int | None = None) -> dict[str, float]:
    """Cost features of one TNKF row update (one square-root Kalman update of the TT state).

    Every TT quantity is assumed at its cap (or, without a cap, at the largest rank its modes allow): the
    covariance root L reaches its cap after a few rows.

    Parameters
    ----------
    shape : sequence of int
        TT modes of the state α (d modes, product N).
    covariance_rank, gain_rank, innovation_rank : int or None
        Rank caps of L, of the gain ``g = L w`` and of the innovation ``w = Lᵀc`` (None: uncapped).
    row_ranks : sequence of int, optional
        Bond ranks of the compressed kernel rows (d − 1; default: the largest the modes allow).
    mean_rank : int, optional
        Rank cap of the mean (default: uncapped). Unused here: with tolerances relative to the update (TNKF's
        default), the row update keeps the mean dense and compresses it once, when the fit reads it; with
        ``round_relative_to="state"`` it is rounded after every row, which these features do not count.

    Returns
    -------
    dict
        ``row`` (1), ``core`` (d: the calls per core), ``contraction_flop`` (``Lᵀc`` and ``L w`` contracted to
        dense vectors, :func:`~tnbayes.tensors.matvec_to_dense`), ``dense_flop`` (the TT-SVDs of the row, ``w``
        and ``g``, and the dense mean's step; the mean's TT-SVD happens once, when the fit reads it) and
        ``root_rounding_flop``: the units of :data:`TNKF_COST`.
    """
    modes, L, row, w, g, _ = _ranks_at_caps(shape, covariance_rank, gain_rank, innovation_rank, row_ranks, mean_rank)
    size = float(math.prod(modes))
    squared = [n * n for n in modes]
    contraction = _dense_matvec_flops(modes, L, row) + _dense_matvec_flops(modes, L, w)
    dense = 2.0 * size + sum(_gram_tt_svd_flops(modes, kept) for kept in (row, w, g))  # the mean: when read
    return {"row": 1.0, "core": float(len(modes)), "contraction_flop": contraction, "dense_flop": dense,
            "root_rounding_flop": _root_rounding_flops(modes, L, g, w, covariance_rank)}


def tnkf_block_features(shape: Sequence[int], covariance_rank: int | None, gain_rank: int | None,
                        innovation_rank: int | None, row_ranks: Sequence[int] | None = None,
                        mean_rank: int | None = None) -> dict[str, float]:
    """Cost features per row of TNKF's block update: the products of TTs and the TT-roundings of their results.

    Parameters
    ----------
    shape, covariance_rank, gain_rank, innovation_rank, row_ranks, mean_rank
        As for :func:`tnkf_row_features` (every TT quantity at its cap or at the bound of its modes).

    Returns
    -------
    dict
        ``row`` (1: the kernel row, its compression and the fixed overhead), ``contraction_flop``,
        ``vector_rounding_flop`` and ``matrix_rounding_flop``: the units of :data:`TNKF_BLOCK_COST`.
    """
    modes, L, row, w, g, m = _ranks_at_caps(shape, covariance_rank, gain_rank, innovation_rank, row_ranks, mean_rank)
    squared = [n * n for n in modes]
    contraction = (_contraction_flops(squared, L, row) + _contraction_flops(squared, L, w)
                   + _contraction_flops(squared, g, w))
    vector_rounding = (_rounding_flops(modes, [a * b for a, b in zip(L, row)], w)
                       + _rounding_flops(modes, [a * b for a, b in zip(L, w)], g)
                       + _rounding_flops(modes, [a + b for a, b in zip(m, g)], m))
    matrix_rounding = _rounding_flops(squared, [a + b * c for a, b, c in zip(L, g, w)], L)
    return {"row": 1.0, "contraction_flop": contraction, "vector_rounding_flop": vector_rounding,
            "matrix_rounding_flop": matrix_rounding}


def tnkf_block_cost_factor(block_size: int) -> float:
    """The factor on :data:`TNKF_BLOCK_COST` for blocks of ``block_size`` rows: :data:`TNKF_BLOCK_COST_FACTOR` from
    16 rows on (the constants are fitted to blocks of 16 with it), interpolated in log B towards 1 below (a block
    shares its roundings among fewer rows)."""
    B = max(int(block_size), 1)
    return float(TNKF_BLOCK_COST_FACTOR ** min(math.log(B) / math.log(16.0), 1.0))


def tnkf_seconds_per_row(shape: Sequence[int], covariance_rank: int | None, gain_rank: int | None,
                         innovation_rank: int | None, row_ranks: Sequence[int] | None = None,
                         mean_rank: int | None = None, block_size: int = 1) -> float:
    """Predicted seconds per TNKF row: :data:`TNKF_COST` · :func:`tnkf_row_features` row by row (``block_size``
    1), :data:`TNKF_BLOCK_COST` · :func:`tnkf_block_features` times :func:`tnkf_block_cost_factor` in blocks of
    ``block_size`` rows (same other arguments)."""
    arguments = (shape, covariance_rank, gain_rank, innovation_rank, row_ranks, mean_rank)
    if int(block_size) <= 1:
        return sum(TNKF_COST[name] * value for name, value in tnkf_row_features(*arguments).items())
    features = tnkf_block_features(*arguments)
    return sum(TNKF_BLOCK_COST[name] * value for name, value in features.items()) * tnkf_block_cost_factor(block_size)
