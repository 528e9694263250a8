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

Above its ladder, TNKF first tries caps at the largest ranks its state's TT modes allow (then only the tolerances
truncate), on few rows where the cost model predicts them well within the budget (:data:`TNKF_LIFTED_CAPS_MARGIN`):
with the budget's time to spare, the default caps were needlessly inexact there.

TNKF's state holds one entry per training row, so its cost per row grows with the rows. On more than
:data:`TNKF_SUBSET_MIN_ROWS` rows its budget does not lower the caps below :data:`TNKF_SUBSET_CAPS` to keep every
row where a random subset of at least ``TNKF_SUBSET_MIN_ROWS`` rows streams whole at those caps: it fits on such
a subset, as large as :func:`largest_rows_within_budget` finds. At 8000 and 20 000 rows the lower caps could lose the
data where the subset did not; at 2000 rows, and where the filter's budget was too small for a subset of 2000,
every row in the state at the lower caps was the better trade (docs/benchmarks.md has the measurements).

**Cost models.** The seconds per row are linear in a few features of the settings, with non-negative constants
(``TNKF_COST``, ``TT_KALMAN_COST``) fitted to the relative error of seconds per row measured on the development
machine (2 shared cores, one torch thread, float64; ``python -m benchmarks tnkf_cost --fit`` and ``python -m
benchmarks tt_kalman_cost --fit``); on a slower or busier machine a fit takes longer than predicted, on a faster one
shorter. The filters' streams are held to the budget by a deadline
(:mod:`tnbayes.inference.stream_deadline`).

* TNKF: the row update's dense contractions, TT-SVDs and Gram rounding of the root, and the block update's
  products and roundings of TTs; see :mod:`tnbayes.inference.tnkf_cost`.
* TTKalmanGP: a batch of B rows costs a fixed overhead per core and per batch and contractions that grow with
  the TT ranks r_k and the basis size M; its ALS smoothing costs the core systems it accumulates and solves
  (``TT_SMOOTHING_COST``, ``python -m benchmarks tt_kalman_cost --fit-smoothing``); see
  :mod:`tnbayes.inference.tt_kalman_cost`.

**CPD rank search.** :class:`~tnbayes.CPDKernelMachine`, :class:`~tnbayes.QTKM` and :class:`~tnbayes.TKM` with
``rank=None`` fit R = 10, 20, 40, … in turn. The normal equations of a core cost O(N (M_k R)²), so the next rank
is predicted from the seconds the last one took, scaled by (R_next / R)² (:func:`als_rank_seconds`); a rank whose
fit — and the refit on 80% of the rows that estimates the noise on held-out rows (:data:`HELD_OUT_REFIT_SHARE`
of it) — would end the fit past ``time_budget`` is not tried (:func:`next_rank_fits_budget`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from tnbayes._warnings import warn_user

from .tnkf_cost import (TNKF_BLOCK_COST, TNKF_BLOCK_COST_FACTOR, TNKF_COST, tnkf_block_cost_factor,
                        tnkf_block_features, tnkf_row_features, tnkf_seconds_per_row)
from .tt_kalman_cost import (TT_KALMAN_COST, TT_SMOOTHING_COST, TT_SMOOTHING_PLANNED_SWEEPS, tt_kalman_row_features,
                             tt_kalman_seconds_per_row, tt_smoothing_features, tt_smoothing_seconds)

__all__ = [
    "BudgetWarning",
    "BudgetPlan",
    "ALS_PROBE_ROWS",
    "HELD_OUT_REFIT_SHARE",
    "als_rank_seconds",
    "next_rank_fits_budget",
    "first_rank_deadline",
    "rank_within_budget",
    "BATCH_SIZE_SAVING",
    "HYPERPARAMETER_SHARE",
    "MIN_ROWS",
    "TNKF_SUBSET_CAPS",
    "TNKF_SUBSET_MIN_ROWS",
    "largest_rows_within_budget",
    "TNKF_BLOCK_COST",
    "TNKF_BLOCK_COST_FACTOR",
    "TNKF_COST",
    "TNKF_LIFTED_CAPS_MARGIN",
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
    "tnkf_block_features",
    "tnkf_seconds_per_row",
    "tt_kalman_row_features",
    "tt_kalman_seconds_per_row",
    "tt_smoothing_features",
    "tt_smoothing_seconds",
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
#: TNKF's rung above :data:`TNKF_RANK_LADDER` — every budgeted cap at the largest rank the state's TT modes allow, so
#: that only the tolerances truncate — is taken where every row streams one at a time within the filter's budget with
#: this margin: the cost model's constants come from caps up to the ladder's first rung, and above it the fits took
#: longer than it predicted (docs/benchmarks.md)
TNKF_LIFTED_CAPS_MARGIN = 3.0
#: the lowest TNKF caps of :data:`TNKF_RANK_LADDER` the budget keeps every training row at; where they do not fit it,
#: it fits on a random subset of the rows that streams whole at them, if one of TNKF_SUBSET_MIN_ROWS rows or more does
TNKF_SUBSET_CAPS: tuple[int, int] = (16, 8)
#: the fewest rows of a TNKF subset: up to these the budget keeps every row and lowers the caps (at 2000 rows every
#: row at the lower caps was the better trade, at 8000 and 20 000 the subset)
TNKF_SUBSET_MIN_ROWS = 2000
#: TTKalmanGP rank caps tried in turn, the default first
TT_KALMAN_RANK_LADDER: tuple[int, ...] = (10, 8, 6)
#: batch sizes the TTKalmanGP budget chooses from: the first, unless another one is predicted to cost at least
#: ``BATCH_SIZE_SAVING`` less per row (the cost model's batch-size dependence is weaker than its error)
TT_KALMAN_BATCH_SIZES: tuple[int, ...] = (8, 4, 16)
#: predicted saving per row (a fraction) that another batch size needs to replace the first
BATCH_SIZE_SAVING = 0.25
#: largest basis size M a TTKalmanGP budget raises the lengthscale rule's M to (8 without a budget)
TT_KALMAN_MAX_NUM_BASIS = 12
#: largest share of the filter's budget kept for TTKalmanGP's smoothing (beyond it the smoothing sweeps fewer rows)
SMOOTHING_BUDGET_SHARE = 0.5

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
    cost_unknown : bool
        The cost model could not predict these settings, and so its figures chose neither them nor the rows (see
        :func:`plan_within_budget`).
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
    cost_unknown: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-able copy (what the models store in ``budget_``)."""
        return {"settings": dict(self.settings), "chosen": list(self.chosen), "rows": int(self.rows),
                "num_rows": int(self.num_rows), "predicted_seconds_per_row": float(self.seconds_per_row),
                "predicted_seconds": float(self.predicted_seconds),
                "filter_budget": None if self.budget_seconds is None else float(self.budget_seconds),
                "within_budget": bool(self.within_budget), "default_settings": dict(self.first_settings),
                "default_seconds": float(self.first_seconds),
                "ladder": [[dict(settings), float(seconds)] for settings, seconds in self.ladder or []],
                "cost_unknown": bool(self.cost_unknown)}


def plan_within_budget(candidates: Sequence[Mapping[str, Any]], seconds_per_row: Callable[[Mapping[str, Any]], float],
                       num_rows: int, budget_seconds: float | None, *, max_rows: int | None = None,
                       chosen: Sequence[str] = (), min_rows: int = MIN_ROWS, cost_unknown: bool = False) -> BudgetPlan:
    """The first candidate whose predicted time fits the budget, else the last one on fewer rows; when the cost model
    cannot predict the candidates, the first one on every row.

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
    cost_unknown : bool
        ``seconds_per_row`` cannot predict the candidates: e.g. TNKF's cost model for ranks that only a tolerance
        limits, which it takes at the largest their modes allow (the tolerance can keep them far lower) with the
        constants of capped ranks (their rounding is another algorithm). Its figures then choose nothing: the first
        candidate streams every row (or ``max_rows``), and the model's stream deadline, which measures the pace,
        ends the stream early if the budget runs out.

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
    if cost_unknown:
        within = budget_seconds is None or rows * costs[0] <= budget_seconds
        return BudgetPlan(dict(candidates[0]), list(chosen), rows, n, costs[0], rows * costs[0], budget_seconds, within,
                          dict(candidates[0]), rows * costs[0], 1, ladder, True)
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


def largest_rows_within_budget(seconds_for_rows: Callable[[int], float], num_rows: int, budget_seconds: float, *,
                               min_rows: int = MIN_ROWS) -> int | None:
    """A large row count m ≤ n whose fit is predicted within the budget, for a model whose cost per row grows with the
    rows it is fitted on (TNKF's state has one entry per row): a bisection, which takes the predicted seconds to grow
    with m.

    Parameters
    ----------
    seconds_for_rows : callable
        m → predicted seconds of a fit on m rows.
    num_rows : int
        Rows available, n.
    budget_seconds : float
    min_rows : int
        Fewest rows to return.

    Returns
    -------
    int or None
        Between ``min(min_rows, n)`` and n; None when ``min_rows`` rows do not fit. Where the seconds do not grow
        with m (TNKF's TT modes change with m), a row count that fits, though not always the largest.
    """
    low, high = min(int(min_rows), int(num_rows)), int(num_rows)
    if seconds_for_rows(low) > budget_seconds:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if seconds_for_rows(middle) <= budget_seconds else (low, middle - 1)
    return low


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
        The text of a :class:`BudgetWarning` when the plan is predicted over the budget (not when the cost model
        cannot predict it, :attr:`BudgetPlan.cost_unknown`: the stream's deadline warns if it ends the stream early).
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
    if plan.budget_seconds <= 0:  # the hyper-parameter estimate took the whole budget (see filter_budget)
        warning = (f"{model}: estimating the hyper-parameters took all of time_budget={float(time_budget):g}, which "
                   f"leaves the filter nothing; {chosen} on {rows} are predicted to take {predicted}. Pass a budget "
                   f"of at least the estimate's seconds (budget_['hyperparameter_seconds']) plus {predicted}, and "
                   f"at least {format_seconds(plan.predicted_seconds / (1.0 - HYPERPARAMETER_SHARE))}; or "
                   f"hyper-parameters of your own (the filter then has the whole budget); or time_budget=None for "
                   f"the default settings on every row.")
        return f"{head}, over the budget; {default}.", warning
    if plan.cost_unknown:  # no prediction to act on: the stream's deadline measures the pace instead
        return (f"{head}, over the budget by a figure the cost model cannot vouch for (ranks without a cap follow "
                f"the tolerances, which it does not see: it takes them at the largest their modes allow); every "
                f"planned row is kept, and the stream's deadline ends it early if the budget runs out.", None)
    fitting_rows = max(1, int(plan.budget_seconds // plan.seconds_per_row))
    larger = math.ceil(float(time_budget) * plan.predicted_seconds / plan.budget_seconds)
    warning = (f"{model}: even {chosen} on {rows} are predicted to take {predicted}, over the "
               f"{format_seconds(plan.budget_seconds)} that time_budget={float(time_budget):g} leaves the filter. "
               f"Pass max_rows={fitting_rows} (predicted {format_seconds(fitting_rows * plan.seconds_per_row)}) with "
               f"{pass_text(plan.settings)}, or a larger budget such as time_budget={larger}, or time_budget=None for "
               f"the default settings on every row.")
    return f"{head}, over the budget; {default}.", warning


def filter_budget(time_budget: float | None, estimated_hyperparameters: bool,
                  elapsed_seconds: float = 0.0) -> float | None:
    """Seconds the filter may take: ``time_budget``; when hyper-parameters are estimated, less
    :data:`HYPERPARAMETER_SHARE` of it, and never more than what ``elapsed_seconds`` (the estimate's seconds, when
    it took longer than its share) leaves of it (None: no budget)."""
    if time_budget is None:
        return None
    if not estimated_hyperparameters:
        return float(time_budget)
    share = float(time_budget) * (1.0 - HYPERPARAMETER_SHARE)
    return max(min(share, float(time_budget) - float(elapsed_seconds)), 0.0)


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
        warn_user(
            f"{model}: estimating the hyper-parameters took {hyperparameter_seconds:.0f} s of the "
            f"time_budget={float(time_budget):g} s; pass a smaller hyper_max_points (now {int(hyper_max_points)}) "
            f"or {given_instead}.", BudgetWarning)
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


#: rows of the seeded subsample on which a model without a rank search (FL) times ALS's set-up and one sweep at its
#: automatic rank before the fit: both grow with N, and the probe's seconds times N / rows predict the fit's. At
#: large N they under-predict (the full data's products no longer stay in the cache; docs/benchmarks.md has the
#: measurement), so the model also stops ALS at the budget
ALS_PROBE_ROWS = 4000


def rank_within_budget(rank: int, predicted_seconds: float, available_seconds: float, *, min_rank: int = 2) -> int:
    """The largest rank ≤ ``rank`` whose ALS fit ends within ``available_seconds``, by :func:`als_rank_seconds`'s
    (R'/R)² scaling of the fit predicted at ``rank``.

    Parameters
    ----------
    rank : int
        The rank the model would fit without a budget.
    predicted_seconds : float
        Predicted seconds of its fit.
    available_seconds : float
        Seconds left in the budget.
    min_rank : int
        The smallest rank returned (a model needs a few components even when the budget is spent).

    Returns
    -------
    int
        Between ``min(min_rank, rank)`` and ``rank``.
    """
    if float(predicted_seconds) <= float(available_seconds):
        return int(rank)
    scaled = int(int(rank) * math.sqrt(max(float(available_seconds), 0.0) / float(predicted_seconds)))
    return max(min(int(min_rank), int(rank)), min(int(rank), scaled))


def first_rank_deadline(started: float, budget_end: float, held_out_refit: bool) -> float:
    """When the first rank of a rank search, which no measured rank predicts, should stop its sweeps: the share of
    the time left that leaves the held-out refit (:data:`HELD_OUT_REFIT_SHARE` of the rank's own seconds) room
    before ``budget_end``.

    Parameters
    ----------
    started, budget_end : float
        ``time.perf_counter()`` values: the rank's start and the end of the budget.
    held_out_refit : bool

    Returns
    -------
    float
        A ``time.perf_counter()`` value (``budget_end`` without a refit)."""
    if not held_out_refit:
        return float(budget_end)
    return float(started) + (float(budget_end) - float(started)) / (1.0 + HELD_OUT_REFIT_SHARE)


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
