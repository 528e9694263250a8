"""Time budgets: cost models and the choice of settings for the Kalman-filter regressors and the CPD rank search.

:class:`~tnbayes.TNKF` and :class:`~tnbayes.TTKalmanGP` stream training rows through a filter whose cost per row
is set by a few settings — TT rank caps, the basis size M, the batch size — and whose fit time is that cost times
the rows streamed. Given a ``time_budget``, the settings the user did not pass are chosen here: the first
candidate of a ladder (most accurate first) whose predicted filter time fits the budget with every row streamed;
when even the last candidate cannot stream every row, that candidate streams as many rows as fit, but never fewer
than :data:`MIN_ROWS`; a plan still over the budget then warns (:class:`BudgetWarning`) with the settings to pass.
The order — first smaller rank caps, rows last — follows fits against an exact GP on the same rows (UCI sets,
D = 8 to 21, n ≤ 2000): every row at moderate caps was mostly as accurate as a subset at the default caps or
more, whereas caps below the floors of :data:`TNKF_RANK_LADDER` and :data:`TT_KALMAN_RANK_LADDER` lost more
than streaming fewer rows did. TTKalmanGP first keeps the lengthscale rule's M (up to
:data:`TT_KALMAN_MAX_NUM_BASIS`, which was more accurate than M = 8 where the rule asked for more), then tries
M = 8.

**Cost models.** The seconds per row are linear in a few features of the settings, with non-negative constants
(``TNKF_COST``, ``TT_KALMAN_COST``) fitted to the relative error of seconds per row measured on the development
machine (2 shared cores, one torch thread, float64) and scaled by the median speed of that machine during the
measurements; under a heavier load a fit takes longer than predicted, on a faster machine shorter.

* TNKF: a row of the state α (N = ∏ n_k entries, TT modes n_k) costs the contractions ``Lᵀc``, ``L w`` and
  ``g wᵀ`` plus the TT-roundings of their results (``round`` of TT-vectors and of the TT-matrix ``L − β g wᵀ``, whose
  formal ranks are ``r_L + r_g r_w``); the features are their flop counts, simulated core by core with ranks
  bounded by the unfolding sizes (:func:`tnkf_row_features`).
* TTKalmanGP: a batch of B rows costs a fixed overhead per core and per batch and contractions that grow with
  the TT ranks r_k and the basis size M (:func:`tt_kalman_row_features`).

**CPD rank search.** :class:`~tnbayes.CPDKernelMachine`, :class:`~tnbayes.QTKM` and :class:`~tnbayes.TKM` with
``rank=None`` fit R = 10, 20, 40, … in turn. The normal equations of a core cost O(N (M_k R)²), so the next rank
is predicted from the seconds the last one took, scaled by (R_next / R)² (:func:`als_rank_seconds`); a rank whose
fit — and the refit on 80% of the rows that estimates the noise on held-out rows (:data:`HELD_OUT_REFIT_SHARE`
of it) — would end the fit past ``time_budget`` is not tried (:func:`next_rank_fits_budget`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "BudgetWarning",
    "BudgetPlan",
    "HELD_OUT_REFIT_SHARE",
    "als_rank_seconds",
    "next_rank_fits_budget",
    "BATCH_SIZE_SAVING",
    "HYPERPARAMETER_SHARE",
    "MIN_ROWS",
    "TNKF_BLOCK_COST_FACTOR",
    "TNKF_COST",
    "TNKF_RANK_LADDER",
    "TT_KALMAN_COST",
    "TT_KALMAN_MAX_NUM_BASIS",
    "TT_KALMAN_RANK_LADDER",
    "TT_KALMAN_BATCH_SIZES",
    "check_time_budget",
    "describe_plan",
    "filter_budget",
    "format_seconds",
    "given_max_rows",
    "plan_within_budget",
    "record_measured_seconds",
    "single_torch_thread",
    "tnkf_row_features",
    "tnkf_block_cost_factor",
    "tnkf_seconds_per_row",
    "tt_kalman_row_features",
    "tt_kalman_seconds_per_row",
    "tt_smoothing_seconds_per_row",
    "TT_SMOOTHING_COST",
    "TT_SMOOTHING_PLANNED_SWEEPS",
    "SMOOTHING_BUDGET_SHARE",
]


class BudgetWarning(UserWarning):
    """A model's cheapest settings are predicted to exceed its ``time_budget``, or estimating its hyper-parameters
    took more than half of the budget."""


#: share of ``time_budget`` set aside for estimating missing hyper-parameters (a marginal-likelihood fit whose
#: cost the filter settings do not change); the filter plans with the rest
HYPERPARAMETER_SHARE = 0.25
#: fewest rows a budget streams on its own (a plan that needs fewer warns instead)
MIN_ROWS = 256
#: TNKF (covariance, gain = innovation) TT rank caps tried in turn, the defaults first
TNKF_RANK_LADDER: tuple[tuple[int, int], ...] = ((32, 24), (24, 16), (16, 12), (16, 8), (12, 6), (8, 4))
#: TTKalmanGP rank caps tried in turn, the default first
TT_KALMAN_RANK_LADDER: tuple[int, ...] = (10, 8, 6)
#: batch sizes the TTKalmanGP budget chooses from: the first, unless another one is predicted to cost at least
#: ``BATCH_SIZE_SAVING`` less per row (the cost model's batch-size dependence is weaker than its error)
TT_KALMAN_BATCH_SIZES: tuple[int, ...] = (8, 4, 16)
#: predicted saving per row (a fraction) that another batch size needs to replace the first
BATCH_SIZE_SAVING = 0.25
#: largest basis size M a TTKalmanGP budget raises the lengthscale rule's M to (8 without a budget)
TT_KALMAN_MAX_NUM_BASIS = 12

#: seconds per row and per squared core-system size of TTKalmanGP's ALS smoothing, one AᵀA update (measured on
#: concrete, M = 8, rank 10: 158 core systems of 927 rows in 6.4 s)
TT_SMOOTHING_COST = 7e-11
#: largest share of the filter's budget kept for TTKalmanGP's smoothing (beyond it the smoothing sweeps fewer rows)
SMOOTHING_BUDGET_SHARE = 0.5
#: sweeps the budget plans the smoothing for (the smoothing runs at least these, more while the budget lasts)
TT_SMOOTHING_PLANNED_SWEEPS = 3

#: seconds per unit of each TNKF feature (:func:`tnkf_row_features`)
TNKF_COST: dict[str, float] = {
    "row": 6.42e-3,
    "contraction_flop": 7.08e-10,
    "vector_rounding_flop": 4.73e-11,
    "matrix_rounding_flop": 9.81e-11,
}
#: seconds per row of TNKF's block update (16 rows or more) relative to the row update (see tnkf_block_cost_factor)
TNKF_BLOCK_COST_FACTOR = 0.35
#: seconds per unit of each TTKalmanGP feature (:func:`tt_kalman_row_features`)
TT_KALMAN_COST: dict[str, float] = {
    "core": 4.14e-4,
    "core_per_batch": 2.85e-3,
    "batch_contraction": 3.90e-8,
    "rank_product": 3.21e-5,
    "matrix_core_entry": 1.10e-7,
}


# ---------------------------------------------------------------------------------------------- TNKF
def _bond_bounds(modes: Sequence[int]) -> list[int]:
    """Largest rank of each of the d − 1 bonds of a TT-vector with these modes (the unfolding sizes)."""
    total, left, bounds = math.prod(modes), 1, []
    for n in modes[:-1]:
        left *= n
        bounds.append(min(left, total // left))
    return bounds


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


def tnkf_row_features(shape: Sequence[int], covariance_rank: int | None, gain_rank: int | None,
                      innovation_rank: int | None, row_ranks: Sequence[int] | None = None,
                      mean_rank: int | None = None) -> dict[str, float]:
    """Cost features of one TNKF row (one square-root Kalman update of the TT state).

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
        Rank cap of the mean (default: uncapped).

    Returns
    -------
    dict
        ``row`` (1: the kernel row, its compression and the fixed overhead), ``contraction_flop``,
        ``vector_rounding_flop`` and ``matrix_rounding_flop``: the units of :data:`TNKF_COST`.
    """
    modes = [int(n) for n in shape]
    bounds = _bond_bounds(modes)

    def capped(cap: int | None, limits: Sequence[int]) -> list[float]:
        return [float(b if cap is None else min(int(cap), b)) for b in limits]

    L = capped(covariance_rank, [b * b for b in bounds])
    row = [float(min(r, b)) for r, b in zip(row_ranks, bounds)] if row_ranks is not None else capped(None, bounds)
    w, g, m = capped(innovation_rank, bounds), capped(gain_rank, bounds), capped(mean_rank, bounds)
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
    """Seconds per row of TNKF's block update of ``block_size`` rows relative to the row-by-row update.

    Measured on a 4096-point sinc (one thread, 512–2048 rows): 0.35, 0.22 and 0.18 at caps 32/24, 16/12 and 8/4
    with blocks of 16 (0.07 with the paper's settings on 2¹⁴ points); :data:`TNKF_BLOCK_COST_FACTOR` is the
    largest of them, reached at 16 rows and interpolated in log B below.
    """
    B = max(int(block_size), 1)
    return float(TNKF_BLOCK_COST_FACTOR ** min(math.log(B) / math.log(16.0), 1.0))


def tnkf_seconds_per_row(shape: Sequence[int], covariance_rank: int | None, gain_rank: int | None,
                         innovation_rank: int | None, row_ranks: Sequence[int] | None = None,
                         mean_rank: int | None = None, block_size: int = 1) -> float:
    """Predicted seconds of one TNKF row: :data:`TNKF_COST` · :func:`tnkf_row_features` (same arguments), times
    :func:`tnkf_block_cost_factor` for block updates of ``block_size`` rows."""
    features = tnkf_row_features(shape, covariance_rank, gain_rank, innovation_rank, row_ranks, mean_rank)
    return sum(TNKF_COST[name] * value for name, value in features.items()) * tnkf_block_cost_factor(block_size)


# ---------------------------------------------------------------------------------------------- TTKalmanGP
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
    ranks = [1] + [min(max_rank, M ** min(k, D - k)) if max_rank is not None else M ** min(k, D - k)
                   for k in range(1, D)] + [1]
    products = [float(ranks[k] * ranks[k + 1]) for k in range(D)]
    largest = float(max(ranks))
    return {"core": float(D), "core_per_batch": D / B, "batch_contraction": B * largest * M * sum(products),
            "rank_product": sum(products), "matrix_core_entry": M * M * sum(products)}


def tt_smoothing_seconds_per_row(num_dims: int, num_basis: int, max_rank: int | None,
                                 sweeps: int = TT_SMOOTHING_PLANNED_SWEEPS) -> float:
    """Predicted seconds per row of TTKalmanGP's ALS smoothing (:mod:`tnbayes.inference.tt_als`): ``sweeps``
    sweeps of 2D − 1 core systems and the Laplace pass of D, each costing one row's AᵀA update, s_k² with
    s_k = r_{k−1} M r_k, times :data:`TT_SMOOTHING_COST`.

    Parameters
    ----------
    num_dims, num_basis, max_rank
        D, M and the rank cap (None: the largest rank the modes allow), as in :func:`tt_kalman_row_features`.
    sweeps : int
        Sweeps planned for.

    Returns
    -------
    float
    """
    D, M = int(num_dims), int(num_basis)
    ranks = [1] + [min(max_rank, M ** min(k, D - k)) if max_rank is not None else M ** min(k, D - k)
                   for k in range(1, D)] + [1]
    sizes_squared = [float(ranks[k] * M * ranks[k + 1]) ** 2 for k in range(D)]
    systems = sum(sizes_squared) * (2 * int(sweeps) + 1)  # a sweep solves D cores each way (one shared), Laplace D
    return TT_SMOOTHING_COST * systems


def tt_kalman_seconds_per_row(num_dims: int, num_basis: int, max_rank: int | None, batch_size: int) -> float:
    """Predicted seconds of one TTKalmanGP row: :data:`TT_KALMAN_COST` · :func:`tt_kalman_row_features`."""
    features = tt_kalman_row_features(num_dims, num_basis, max_rank, batch_size)
    return sum(TT_KALMAN_COST[name] * value for name, value in features.items())


# ---------------------------------------------------------------------------------------------- planning
@dataclass
class BudgetPlan:
    """The settings chosen for one filter pass and the cost model's prediction.

    Attributes
    ----------
    settings : dict
        Every budgeted setting (given or chosen), e.g. ``{"max_rank": 6, "num_basis": 8, "batch_size": 8}``.
    chosen : list of str
        The names in ``settings`` (and ``"max_rows"``) that the budget filled in.
    rows : int
        Rows to stream.
    num_rows : int
        Rows available.
    seconds_per_row : float
        Predicted seconds per row with ``settings``.
    predicted_seconds : float
        ``rows · seconds_per_row``.
    budget_seconds : float or None
        The seconds the filter was given (None: no budget).
    within_budget : bool
    first_settings : dict
        The first candidate (the defaults, with the given settings).
    first_seconds : float
        Its predicted seconds over all rows (or the given ``max_rows``).
    candidates_tried : int
        How many candidates were predicted before one fitted (all of them when none did).
    ladder : list of (dict, float)
        Every candidate with its predicted seconds per row, in the order tried.
    """

    settings: dict[str, Any]
    chosen: list[str]
    rows: int
    num_rows: int
    seconds_per_row: float
    predicted_seconds: float
    budget_seconds: float | None
    within_budget: bool
    first_settings: dict[str, Any]
    first_seconds: float
    candidates_tried: int = 1
    ladder: list[tuple[dict[str, Any], float]] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able copy (what the models store in ``budget_``)."""
        return {"settings": dict(self.settings), "chosen": list(self.chosen), "rows": int(self.rows),
                "num_rows": int(self.num_rows), "predicted_seconds_per_row": float(self.seconds_per_row),
                "predicted_seconds": float(self.predicted_seconds),
                "filter_budget": None if self.budget_seconds is None else float(self.budget_seconds),
                "within_budget": bool(self.within_budget), "default_settings": dict(self.first_settings),
                "default_seconds": float(self.first_seconds),
                "ladder": [[dict(settings), float(seconds)] for settings, seconds in self.ladder or []]}


def plan_within_budget(candidates: Sequence[Mapping[str, Any]], seconds_per_row: Callable[[Mapping[str, Any]], float],
                       num_rows: int, budget_seconds: float | None, *, max_rows: int | None = None,
                       chosen: Sequence[str] = (), min_rows: int = MIN_ROWS) -> BudgetPlan:
    """The first candidate whose predicted time fits the budget, else the last one on fewer rows.

    Parameters
    ----------
    candidates : sequence of dict
        Settings in order of preference (most accurate first); the given settings are the same in all.
    seconds_per_row : callable
        Candidate → predicted seconds per row.
    num_rows : int
        Rows available, n.
    budget_seconds : float or None
        Seconds for the filter; None: the first candidate over all rows (or ``max_rows``).
    max_rows : int, optional
        Rows given by the user (kept whatever the budget); None: the budget may stream fewer than n.
    chosen : sequence of str
        Names of the settings in the candidates that the budget fills in.
    min_rows : int
        Fewest rows the budget streams on its own.

    Returns
    -------
    BudgetPlan
    """
    if not candidates:
        raise ValueError("plan_within_budget needs at least one candidate.")
    n = int(num_rows)
    rows = n if max_rows is None else min(n, int(max_rows))
    costs = [float(seconds_per_row(candidate)) for candidate in candidates]
    ladder = [(dict(candidate), cost) for candidate, cost in zip(candidates, costs)]
    for tried, (candidate, cost) in enumerate(zip(candidates, costs), start=1):
        if budget_seconds is None or rows * cost <= budget_seconds:
            return BudgetPlan(dict(candidate), list(chosen), rows, n, cost, rows * cost, budget_seconds, True,
                              dict(candidates[0]), rows * costs[0], tried, ladder)
    cheapest, cost = dict(candidates[-1]), costs[-1]
    names = list(chosen)
    if max_rows is None:  # stream fewer rows, but not fewer than min_rows
        rows = max(min(n, int(min_rows)), min(n, int(budget_seconds // cost)))
        names.append("max_rows")
    first_rows = n if max_rows is None else rows
    return BudgetPlan(cheapest, names, rows, n, cost, rows * cost, budget_seconds, rows * cost <= budget_seconds,
                      dict(candidates[0]), first_rows * costs[0], len(candidates), ladder)


def given_max_rows(max_rows: int | str | None, num_rows: int) -> int | None:
    """The rows a user's ``max_rows`` fixes for :func:`plan_within_budget`: None for ``"auto"`` (the budget decides),
    all ``num_rows`` for None, else the number given."""
    return None if max_rows == "auto" else int(num_rows) if max_rows is None else int(max_rows)


def describe_plan(plan: BudgetPlan, *, model: str, time_budget: float | None,
                  settings_text: Callable[[Mapping[str, Any]], str], default_text: Callable[[Mapping[str, Any]], str],
                  first_fits: str, pass_text: Callable[[Mapping[str, Any]], str]) -> tuple[str, str | None]:
    """What a budget chose and why, as one fit-report line, and the warning to raise when even its cheapest
    settings are predicted to exceed the budget.

    Parameters
    ----------
    plan : BudgetPlan
    model : str
        The model's name, for the warning.
    time_budget : float or None
        The model's ``time_budget``.
    settings_text : callable
        Settings → how the report names them (e.g. ``"M = 8, TT rank cap 6, batches of 8"``).
    default_text : callable
        The first candidate's settings → how the report names them as the default.
    first_fits : str
        The remark when the first candidate fits, e.g. ``"the first choice fits"``.
    pass_text : callable
        Settings → the parameters to pass for them (e.g. ``"max_rank=6, batch_size=8"``), named by the warning.

    Returns
    -------
    line : str
        For ``fit_report_``.
    warning : str or None
        The text of a :class:`BudgetWarning` when the plan is over the budget.
    """
    chosen = settings_text(plan.settings)
    rows = f"all {plan.rows} rows" if plan.rows == plan.num_rows else f"{plan.rows} of {plan.num_rows} rows"
    predicted = format_seconds(plan.predicted_seconds)
    if time_budget is None:
        return f"no time budget: {chosen} on {rows}, predicted {predicted}.", None
    head = (f"time budget {format_seconds(float(time_budget))} ({format_seconds(plan.budget_seconds)} for "
            f"the filter): {chosen} on {rows}, predicted {predicted}")
    if plan.within_budget and plan.candidates_tried == 1:
        return f"{head} ({first_fits}).", None
    default = f"{default_text(plan.first_settings)} would take {format_seconds(plan.first_seconds)}"
    if plan.within_budget:
        return f"{head}; {default}.", None
    fitting_rows = max(1, int(plan.budget_seconds // plan.seconds_per_row))
    larger = math.ceil(float(time_budget) * plan.predicted_seconds / plan.budget_seconds)
    warning = (f"{model}: even {chosen} on {rows} are predicted to take {predicted}, over the "
               f"{format_seconds(plan.budget_seconds)} that time_budget={float(time_budget):g} leaves the filter. "
               f"Pass max_rows={fitting_rows} (predicted {format_seconds(fitting_rows * plan.seconds_per_row)}) with "
               f"{pass_text(plan.settings)}, or a larger budget such as time_budget={larger}, or time_budget=None for "
               f"the default settings on every row.")
    return f"{head}, over the budget; {default}.", warning


def filter_budget(time_budget: float | None, estimated_hyperparameters: bool) -> float | None:
    """Seconds the filter may take: ``time_budget``, less :data:`HYPERPARAMETER_SHARE` of it when hyper-parameters
    are estimated (None: no budget)."""
    if time_budget is None:
        return None
    return float(time_budget) * ((1.0 - HYPERPARAMETER_SHARE) if estimated_hyperparameters else 1.0)


def format_seconds(seconds: float) -> str:
    """``"45 s"``, ``"0.75 s"``: whole seconds from 10 s up, two significant digits below."""
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.2g} s"


def record_measured_seconds(budget: dict[str, Any], *, model: str, hyperparameter_seconds: float,
                            filter_seconds: float, rows: int, fit_seconds: float, time_budget: float | None,
                            estimated: bool, hyper_max_points: int, given_instead: str) -> str:
    """Add the measured seconds of a filter's fit to its ``budget_`` dict; warn when estimating hyper-parameters
    alone took more than half the budget (which no filter setting can save).

    Parameters
    ----------
    budget : dict
        The model's ``budget_`` (updated in place with ``hyperparameter_seconds``, ``filter_seconds``,
        ``seconds_per_row`` and ``fit_seconds``; it must hold ``predicted_seconds``).
    model : str
        The model's name, for the warning.
    hyperparameter_seconds, filter_seconds, fit_seconds : float
        Measured wall-clock seconds.
    rows : int
        Rows the filter processed.
    time_budget : float or None
        The model's ``time_budget``.
    estimated : bool
        Whether hyper-parameters were estimated.
    hyper_max_points : int
        The model's ``hyper_max_points`` (named in the warning).
    given_instead : str
        The parameters that, given, skip the estimate (named in the warning).

    Returns
    -------
    str
        One line for the fit report.
    """
    budget.update(hyperparameter_seconds=float(hyperparameter_seconds), filter_seconds=float(filter_seconds),
                  seconds_per_row=float(filter_seconds / max(rows, 1)), fit_seconds=float(fit_seconds))
    if time_budget is not None and estimated and hyperparameter_seconds > 0.5 * float(time_budget):
        warnings.warn(
            f"{model}: estimating the hyper-parameters took {hyperparameter_seconds:.0f} s of the "
            f"time_budget={float(time_budget):g} s; pass a smaller hyper_max_points (now {int(hyper_max_points)}) "
            f"or {given_instead}.", BudgetWarning, stacklevel=5)
    return (f"filter: {rows} rows in {format_seconds(filter_seconds)} (predicted "
            f"{format_seconds(budget['predicted_seconds'])}); fit {format_seconds(fit_seconds)}, of which "
            f"{format_seconds(hyperparameter_seconds)} estimating hyper-parameters.")


#: the refit on 80% of the rows that estimates a CPD model's noise on held-out rows costs about this share of the
#: fit of the same rank on all rows
HELD_OUT_REFIT_SHARE = 0.8


def als_rank_seconds(measured_seconds: float, measured_rank: int, rank: int) -> float:
    """Predicted seconds of an ALS fit at ``rank`` from one measured at ``measured_rank`` (same data, same sweeps).

    The normal equations of a core cost O(N (M_k R)²) and dominate at the ranks the search tries, so the
    prediction scales the measurement by (rank / measured_rank)²; at small ranks fixed costs dominate and the
    prediction errs on the long side.

    Parameters
    ----------
    measured_seconds : float
    measured_rank, rank : int

    Returns
    -------
    float
    """
    return float(measured_seconds) * (float(rank) / float(measured_rank)) ** 2


def next_rank_fits_budget(time_budget: float | None, elapsed_seconds: float, measured_seconds: float,
                          measured_rank: int, next_rank: int, held_out_refit: bool) -> tuple[bool, float]:
    """Whether the rank search may try ``next_rank`` within ``time_budget``.

    Parameters
    ----------
    time_budget : float or None
        Seconds the whole fit should take (None: no budget, always True).
    elapsed_seconds : float
        Seconds the fit has taken so far.
    measured_seconds : float
        Seconds the ALS fit of ``measured_rank`` took.
    measured_rank, next_rank : int
    held_out_refit : bool
        Whether the kept rank is refitted on 80% of the rows for the held-out noise estimate.

    Returns
    -------
    fits : bool
    predicted_seconds : float
        Predicted seconds of the next rank's fit, its held-out refit included.
    """
    predicted = als_rank_seconds(measured_seconds, measured_rank, next_rank)
    predicted *= 1.0 + (HELD_OUT_REFIT_SHARE if held_out_refit else 0.0)
    if time_budget is None:
        return True, predicted
    return float(elapsed_seconds) + predicted <= float(time_budget), predicted


def check_time_budget(time_budget: float | None) -> None:
    """Raise ``ValueError`` unless ``time_budget`` is None or a positive finite number of seconds."""
    if time_budget is None:
        return
    if isinstance(time_budget, bool) or not isinstance(time_budget, (int, float)) or not (
            math.isfinite(float(time_budget)) and float(time_budget) > 0):
        raise ValueError(f"time_budget must be a positive number of seconds or None; got {time_budget!r}.")


@contextmanager
def single_torch_thread() -> Iterator[None]:
    """Run the block with one torch intra-op thread and restore the previous number afterwards.

    The filters make many small linear-algebra calls (QR and SVD of cores, small contractions) that gain little
    from threads, while on a machine whose cores are busy with other processes every multi-threaded call waits
    for its threads; the cost models are calibrated at one thread.
    """
    previous = torch.get_num_threads()
    if previous != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if previous != 1:
            torch.set_num_threads(previous)
