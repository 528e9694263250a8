"""TNKF's time budget: the rank caps, the rows streamed, and the random subset of the training rows a large data set
is fitted on.

The cost model and the ladders are in :mod:`tnbayes.inference.budget`; :class:`TNKFBudgetMixin` applies them to
:class:`~tnbayes.TNKF` (and :class:`~tnbayes.TNKFClassifier`), whose state holds one entry per training row: on many
rows the cost per row grows with the rows, so below :data:`~tnbayes.inference.budget.TNKF_SUBSET_CAPS` the budget
shrinks the state to a random subset of the rows rather than lowering the caps further; on few rows it lifts the caps
above the ladder to the state's full ranks where they fit with a margin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from tnbayes._memory import available_memory_bytes
from tnbayes.inference.budget import (
    TNKF_LIFTED_CAPS_MARGIN,
    TNKF_RANK_LADDER,
    TNKF_SUBSET_CAPS,
    TNKF_SUBSET_MIN_ROWS,
    filter_budget,
    format_seconds,
    given_max_rows,
    largest_rows_within_budget,
    plan_within_budget,
    tnkf_seconds_per_row,
)
from tnbayes.inference.kalman import Truncation
from tnbayes.tensors.shapes import tensorize_shape, tt_bond_bounds

__all__ = ["TNKFBudgetMixin"]


class TNKFBudgetMixin:
    """The budget's choice of rank caps, rows and training subset for a TNKF-like model (``time_budget``,
    ``truncation``, ``max_rows``, ``block_size``, ``max_factor``, ``mode_size`` and the fitted ``tt_shape_``; the
    model names its settings with ``_budget_settings_text`` of
    :class:`~tnbayes.models._kalman_common.KalmanModelMixin`, and sizes its covariance root with ``_root_bytes`` and
    ``_ROOT_MEMORY_SHARE``)."""

    _BUDGETED = ("covariance", "gain", "innovation")

    def _plan_budget(self, X: torch.Tensor, X_ordered: torch.Tensor, position: torch.Tensor,
                     rules: dict[str, Truncation], elapsed_seconds: float = 0.0, *,
                     on_subset: bool = False) -> tuple[dict[str, Truncation], int, int | None]:
        """Rank caps and rows within ``time_budget``, or the size of the random subset to fit on instead; sets
        ``budget_``, reports the choice and warns when over (not when it returns a subset size). Row by row, the
        rung above the ladder (:meth:`_lifted_candidate`) comes first where every row fits at it with
        :data:`~tnbayes.inference.budget.TNKF_LIFTED_CAPS_MARGIN` to spare.

        Parameters
        ----------
        X : torch.Tensor of shape (n, D)
            Scaled training inputs (the state's rows).
        X_ordered : torch.Tensor of shape (n, D)
            The same in α's order.
        position : torch.Tensor of shape (n,)
            Entry of α of each training input.
        rules : dict
            The truncations from the parameters (:meth:`_truncation_rules`).
        elapsed_seconds : float
            The fit's seconds so far (the hyper-parameters): the filter never plans for more than the rest.
        on_subset : bool
            X is the budget's subset: the caps stay at :data:`~tnbayes.inference.budget.TNKF_SUBSET_CAPS` or above
            (below them fewer of its rows are streamed), and no further subset.

        Returns
        -------
        rules : dict
            With the budget's maximum ranks for the quantities not in ``truncation``.
        rows : int
            Rows to stream.
        subset_size : int or None
            With ``max_rows="auto"``, more than :data:`~tnbayes.inference.budget.TNKF_SUBSET_MIN_ROWS` rows and a
            budget that every row exceeds at the caps :data:`~tnbayes.inference.budget.TNKF_SUBSET_CAPS` (row by row
            and, with ``block_size="auto"``, in blocks) but at least ``TNKF_SUBSET_MIN_ROWS`` of them do not: a subset
            size that streams whole within the budget at those caps (the bisection of :meth:`_subset_size`), on which
            the fit is to be planned again (``rules`` and ``rows`` then unused); else None.
        """
        n = X.shape[0]
        given = set(self.truncation or {})
        budgeted = [q for q in self._BUDGETED if q not in given] if self.time_budget is not None else []
        ladder = TNKF_RANK_LADDER if budgeted else TNKF_RANK_LADDER[:1]
        if on_subset:
            ladder = ladder[: TNKF_RANK_LADDER.index(TNKF_SUBSET_CAPS) + 1]
        candidates: list[dict[str, int | None]] = []
        for covariance, gain in ladder:
            candidate = self._caps_candidate(covariance, gain, budgeted, rules)
            if candidate not in candidates:
                candidates.append(candidate)
        row_ranks = self._sample_row_ranks(X, X_ordered, position, rules["row"])
        mean_rank = rules["mean"].max_rank

        budget = filter_budget(self.time_budget, self.hyperparameter_source_ != "given", elapsed_seconds)
        # a rank that every candidate leaves uncapped, with a tolerance, follows that tolerance, which the cost model
        # does not see: it takes the largest rank the modes allow (orders of magnitude too high for the TNKF paper's
        # tolerances) with the constants of capped ranks, so its figures are no prediction and choose nothing
        cost_unknown = any(candidates[-1][f"{q}_rank"] is None and rules[q].tol > 0 for q in self._BUDGETED)

        def seconds_per_row(candidate: Mapping[str, Any], block_size: int) -> float:
            return tnkf_seconds_per_row(self.tt_shape_, candidate["covariance_rank"], candidate["gain_rank"],
                                        candidate["innovation_rank"], row_ranks, mean_rank, block_size)

        def plan_for(block_size: int):
            return plan_within_budget(candidates, lambda candidate: seconds_per_row(candidate, block_size), n, budget,
                                      max_rows=given_max_rows(self.max_rows, n),
                                      chosen=[f"{q}_rank" for q in budgeted], cost_unknown=cost_unknown)

        wanted_rows = min(n, given_max_rows(self.max_rows, n) or n)
        lifted = self._lifted_candidate(budgeted, candidates[0]) \
            if budget is not None and self.block_size_ == 1 and not on_subset and not cost_unknown else None
        if lifted is not None:  # the state's full ranks, where every row fits at them with the margin to spare
            lifted_seconds = wanted_rows * seconds_per_row(lifted, 1)
            if lifted_seconds * TNKF_LIFTED_CAPS_MARGIN <= budget:
                candidates.insert(0, lifted)
            else:
                self._report(f"time budget: {self._budget_settings_text(lifted)} (the state's full ranks) on "
                             f"{wanted_rows} rows are predicted to take {format_seconds(lifted_seconds)}, more than "
                             f"1/{TNKF_LIFTED_CAPS_MARGIN:g} of the filter's {format_seconds(budget)}; the ladder "
                             f"instead.")
                lifted = None
        plan = plan_for(self.block_size_)
        if self.block_size == "auto" and self._auto_block_size > 1 and float(self.forgetting_factor) == 1.0 \
                and budget is not None and lifted is None \
                and (not plan.within_budget or plan.rows < wanted_rows or plan.settings != plan.first_settings):
            # row by row would exceed the budget, or lower the caps or drop rows to fit it: blocks instead where
            # they reach higher caps or more rows (at the same caps and rows within the budget, rows one at a time
            # are the more accurate). Where both exceed it at the same caps and rows: the cheaper of the two if
            # every rank is capped, else blocks (uncapped ranks follow the tolerances, which neither cost model
            # sees; blocks share their roundings between rows)
            blocks = plan_for(int(self._auto_block_size))
            reach, block_reach = (plan.candidates_tried, -plan.rows), (blocks.candidates_tried, -blocks.rows)
            uncapped = any(plan.settings[f"{q}_rank"] is None for q in self._BUDGETED)
            if block_reach < reach or (block_reach == reach and not plan.within_budget and
                                       (uncapped or blocks.predicted_seconds < plan.predicted_seconds)):
                self.block_size_, plan = int(self._auto_block_size), blocks
        # the chosen plan (row by row or in blocks) cannot keep every row at the subset caps: a subset instead
        if not on_subset and self.max_rows == "auto" and budget is not None and n > TNKF_SUBSET_MIN_ROWS \
                and not cost_unknown and lifted is None:
            floor = self._caps_candidate(*TNKF_SUBSET_CAPS, budgeted, rules)
            if plan.rows < n or plan.candidates_tried > candidates.index(floor) + 1:
                subset_size = self._subset_size(n, budget, floor, row_ranks, mean_rank)
                if subset_size is not None and subset_size < n:
                    self._report(f"time budget: all {n} rows at {self._budget_settings_text(floor)} are predicted "
                                 f"to exceed the filter's {budget:.3g} s (its state holds one entry per training "
                                 f"row); fitting on a random subset of {subset_size} rows instead (max_rows=None "
                                 f"keeps every row, at lower caps).")
                    return rules, subset_size, subset_size
        self._report(f"block_size: {self.block_size_} row(s) per filter update"
                     + (" (auto: row by row is the more accurate and fits the budget)" if self.block_size == "auto"
                        and self.block_size_ == 1 else ""))
        rules = dict(rules)
        for q in budgeted:
            rules[q] = Truncation(rules[q].tol, plan.settings[f"{q}_rank"])
        self._store_plan(plan, first_fits="the state's full ranks fit" if lifted is not None else None)
        return rules, plan.rows, None

    def _lifted_candidate(self, budgeted: list[str], first: dict[str, int | None]) -> dict[str, int | None] | None:
        """The rung above the ladder: the budgeted caps at the largest ranks the state's TT modes allow (L's: the
        squares of a vector's, :func:`~tnbayes.tensors.tt_bond_bounds`), never below those of the ladder's
        ``first`` candidate, so that only the tolerances (and any cap given in ``truncation``) truncate. None where
        it is that candidate (its caps cannot bind, or none is budgeted) or where the root at its rank would not fit
        in memory (``_root_bytes``, ``_ROOT_MEMORY_SHARE`` of the free memory: the model's own memory check)."""
        bounds = tt_bond_bounds(self.tt_shape_)  # none for a state of one core
        full = {"covariance": max((b * b for b in bounds), default=1), "gain": max(bounds, default=1)}
        full["innovation"] = full["gain"]
        lifted = {f"{q}_rank": max(full[q], first[f"{q}_rank"]) if q in budgeted else first[f"{q}_rank"]
                  for q in self._BUDGETED}
        if lifted == first:
            return None
        rank, free = lifted["covariance_rank"], available_memory_bytes(self.device_)
        needed = 0 if rank is None else self._root_bytes(rank)
        if needed > self._ROOT_MEMORY_SHARE * free:
            self._report(f"time budget: a covariance root at the state's full rank {rank} would need about "
                         f"{needed / 2**30:.3g} GiB of the {free / 2**30:.3g} GiB free; the ladder instead.")
            return None
        return lifted

    def _caps_candidate(self, covariance: int, gain: int, budgeted: list[str],
                        rules: dict[str, Truncation]) -> dict[str, int | None]:
        """The settings of one rung of the ladder: its caps for the budgeted quantities, the given caps for the rest."""
        caps = {"covariance": covariance, "gain": gain, "innovation": gain}
        return {f"{q}_rank": caps[q] if q in budgeted else rules[q].max_rank for q in self._BUDGETED}

    def _subset_size(self, n: int, budget: float, caps: Mapping[str, int | None], row_ranks: list[int],
                     mean_rank: int | None) -> int | None:
        """A large subset of the n rows (None: not even :data:`~tnbayes.inference.budget.TNKF_SUBSET_MIN_ROWS`) whose
        state streams all its rows at ``caps`` within ``budget`` seconds (in ``block_size``: row by row with
        ``"auto"``), by :func:`~tnbayes.inference.budget.largest_rows_within_budget`: the cost model on each size's
        TT modes with the sampled rows' largest rank (of ``row_ranks``) at every bond, an upper bound of the rows'
        ranks that keeps the subset within the budget."""
        top_rank, block_size = max(row_ranks, default=1), self._resolve_block_size()  # the subset plans blocks again

        def seconds(rows: int) -> float:
            shape = tensorize_shape(rows, int(self.max_factor), merge_to=int(self.mode_size))[0]
            return rows * tnkf_seconds_per_row(shape, caps["covariance_rank"], caps["gain_rank"],
                                               caps["innovation_rank"], [top_rank] * (len(shape) - 1), mean_rank,
                                               block_size)

        return largest_rows_within_budget(seconds, n, budget, min_rows=TNKF_SUBSET_MIN_ROWS)
