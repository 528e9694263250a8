"""TTKalmanGP's smoothing: ALS from the filter's mean to the MAP among TTs of its ranks, and the Laplace variance.

The algorithm is :mod:`tnbayes.inference.tt_als`; this mixin holds the model's side: when it runs, over which rows,
within which time, and how its state is stored in a model file.
"""

from __future__ import annotations

import time

import torch

from tnbayes.data import StreamedRows
from tnbayes.inference.budget import TT_SMOOTHING_PLANNED_SWEEPS, largest_rows_within_budget, tt_smoothing_seconds
from tnbayes.inference.tt_als import TTALS, TTLaplace
from tnbayes.selection.calibration import held_out_count, held_out_rows, proportional_noise_estimate
from tnbayes.tensors import TTVector, has_tt_state, tt_bond_bounds, tt_from_state, tt_state

#: rows per chunk of the smoothing's normal equations
SMOOTHING_CHUNK_ROWS = 4096


class TTSmoothingMixin:
    """ALS smoothing of :class:`~tnbayes.TTKalmanGP` (``smoothing``, ``max_sweeps``, ``sweep_tol``)."""

    def _smooths(self, num_modes: int, num_basis: int, max_rank: int | None) -> bool:
        """Whether ALS smoothing runs: asked for, no forgetting, and a rank cap below the largest TT rank of K =
        ``num_modes`` modes of size M (otherwise the filter is exact up to ``tol`` and its mean the MAP)."""
        full_rank = max(tt_bond_bounds([int(num_basis)] * int(num_modes)), default=1)
        return (self.smoothing == "als" and float(self.forgetting_factor) == 1.0 and max_rank is not None
                and int(max_rank) < full_rank)

    @property
    def _planned_sweeps(self) -> int:
        """Sweeps the budget plans the smoothing for (:data:`~tnbayes.inference.budget.TT_SMOOTHING_PLANNED_SWEEPS`,
        at most ``max_sweeps``)."""
        return min(TT_SMOOTHING_PLANNED_SWEEPS, int(self.max_sweeps))

    def _holds_out_rows(self, rows_in_memory: bool) -> bool:
        """Whether the smoothing estimates the noise on held-out rows (rows in memory, ``noise_estimate="held_out"``
        and no ``noise_variance`` given; :meth:`_smooth`)."""
        return bool(rows_in_memory) and self.noise_estimate == "held_out" and self.noise_variance is None

    def _planned_smoothing_seconds(self, num_modes: int, num_basis: int, max_rank: int | None, rows: int,
                                   rows_in_memory: bool) -> float:
        """The cost model's seconds of the smoothing the budget plans over ``rows`` rows (:func:`~tnbayes.inference.
        budget.tt_smoothing_seconds`: the planned sweeps, on the rows not held out when it holds rows out, then one
        over all)."""
        held = held_out_count(rows) if self._holds_out_rows(rows_in_memory) else 0
        return tt_smoothing_seconds(num_modes, num_basis, max_rank, rows,
                                    sweeps=self._planned_sweeps, held_out_rows=held)

    def _plan_smoothing(self, num_modes: int, num_basis: int, max_rank: int | None, num_rows: int,
                        filter_rows: int, reserve: float, rows_in_memory: bool) -> tuple[int, float]:
        """The rows the smoothing sweeps — every row when their predicted seconds fit ``reserve``, else the most that
        do, but at least the filter's ``filter_rows`` — and their predicted seconds; reports the plan."""
        def seconds(rows: int) -> float:
            return self._planned_smoothing_seconds(num_modes, num_basis, max_rank, rows, rows_in_memory)

        fewest = min(num_rows, filter_rows)
        rows = largest_rows_within_budget(seconds, num_rows, reserve, min_rows=fewest) or fewest
        predicted = seconds(rows)
        passes = f"{self._planned_sweeps} sweeps without the held-out rows, then 1 over all" \
            if self._holds_out_rows(rows_in_memory) else f"{self._planned_sweeps} sweeps"
        self._report(f"smoothing planned over {rows} rows ({passes}), predicted {predicted:.1f} s (kept from "
                     "the filter's budget).")
        return rows, predicted

    def _smooth(self, X: torch.Tensor | StreamedRows, y: torch.Tensor | None, rows: int, fit_start: float,
                smooths: bool) -> float | None:
        """ALS smoothing of the filter's mean over the first ``rows`` rows of the training order when ``smooths``
        (see ``smoothing``); sets ``smoothing_*_`` and, when it runs, ``posterior_mean_tt_``.

        Returns
        -------
        float or None
            σ² of held-out rows (``noise_estimate="held_out"``, rows in memory): the smoothing refitted without a
            seeded 20% of its rows, which are then predicted, σ² = mean(r² / (1 + q)) with q the Laplace variance
            over σ² (:func:`~tnbayes.selection.calibration.proportional_noise_estimate`, as for the CPD models), at
            least the marginal-likelihood σ²; the final smoothing starts from that refit. None otherwise.
        """
        self.smoothing_laplace_, self.smoothing_history_ = None, []
        self.smoothing_sweeps_, self.smoothing_converged_, self.smoothing_seconds_ = 0, False, 0.0
        if not smooths or rows == 0:
            if self.smoothing == "als" and rows:
                self._report("smoothing skipped: " + ("forgetting_factor < 1 (the filter tracks a drifting state)."
                                                      if float(self.forgetting_factor) < 1 else
                                                      "no rank cap below the full TT rank (the filter is exact)."))
            return None
        start = time.perf_counter()
        root, noise = self.prior_root_, self.measurement_noise_
        cores = [core / root[k].view(1, -1, 1) for k, core in enumerate(self.posterior_mean_tt_.cores)]
        deadline = None if self.time_budget is None else fit_start + float(self.time_budget)
        planned = self._planned_sweeps
        split = held_out_rows(rows, int(self.seed)) if self._holds_out_rows(isinstance(X, torch.Tensor)) else None

        def chunks():  # the first `rows` rows of the training order, as the filter saw them
            for batch_X, batch_y in self._batches(X, y, limit=rows, batch_rows=SMOOTHING_CHUNK_ROWS):
                yield self._features(batch_X), batch_y - self.mean_constant_

        held_out_noise = None
        if split is not None:
            cores, held_out_noise = self._held_out_refit(cores, *next(self._batches(X, y, limit=rows, batch_rows=rows)),
                                                         split, planned)
        engine = TTALS(cores, root, noise, chunks).run(int(self.max_sweeps), float(self.sweep_tol), deadline=deadline,
                                                       min_sweeps=1 if split is not None else planned)
        self.smoothing_laplace_ = engine.laplace()
        self.posterior_mean_tt_ = self._unwhitened(self.smoothing_laplace_.right_cores)
        self.smoothing_history_ = list(engine.objective_history)
        self.smoothing_sweeps_, self.smoothing_converged_ = engine.sweeps, engine.converged
        self.smoothing_seconds_ = time.perf_counter() - start
        self._report(f"smoothing: ALS over {rows} rows, objective {self.smoothing_history_[0]:.6g} → "
                     f"{self.smoothing_history_[-1]:.6g} in {engine.sweeps} sweep(s) "
                     f"({'converged' if engine.converged else 'not converged'}), "
                     f"{self.smoothing_seconds_:.1f} s; predictive variance: Laplace around the smoothed mean; "
                     + (f"predictive noise variance σ² = {noise:.4g} (marginal likelihood)" if held_out_noise is None
                        else f"predictive noise variance σ² = {held_out_noise:.4g} from {split[1].numel()} held-out "
                             f"rows (a refit without them; marginal likelihood {noise:.4g}), which also scales the "
                             "Laplace variance") + ".")
        return held_out_noise

    def _held_out_refit(self, cores: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor,
                        split: tuple[torch.Tensor, torch.Tensor], sweeps: int) -> tuple[list[torch.Tensor], float]:
        """Smooth from ``cores`` over the ``split[0]`` rows of X (n, D), y (n,) for ``sweeps`` sweeps, predict the
        ``split[1]`` rows; returns the refit's cores and σ² = max(marginal-likelihood σ², mean(r² / (1 + q)))."""
        root, noise = self.prior_root_, self.measurement_noise_
        fitted, held = (index.to(X.device) for index in split)
        refit = TTALS(cores, root, noise, self._row_chunks(X[fitted], y[fitted])).run(
            sweeps, float(self.sweep_tol), min_sweeps=sweeps)
        laplace = refit.laplace()
        psi = self._features(X[held]) * root[:, None, :]
        residuals = y[held] - self.mean_constant_ - TTVector(laplace.right_cores).dot_rank_one(psi)
        # never below the marginal-likelihood σ² (the estimate catches a model worse than the GP it borrowed σ²
        # from; a few held-out rows would otherwise also shrink it by chance)
        return refit.cores, max(noise, proportional_noise_estimate(residuals, laplace.variance(psi, 1.0)))

    def _row_chunks(self, X: torch.Tensor, y: torch.Tensor):
        """A callable yielding ``(φ (K, n, M), y − c (n,))`` chunks of scaled rows X (N, D), y (N,), in order."""
        return lambda: ((self._features(X[first:first + SMOOTHING_CHUNK_ROWS]),
                         y[first:first + SMOOTHING_CHUNK_ROWS] - self.mean_constant_)
                        for first in range(0, X.shape[0], SMOOTHING_CHUNK_ROWS))

    def _unwhitened(self, cores: list[torch.Tensor]) -> TTVector:
        """The TT of v = L₀u from whitened cores of u."""
        return TTVector([core * self.prior_root_[k].view(1, -1, 1) for k, core in enumerate(cores)])

    def _smoothing_state(self) -> dict[str, torch.Tensor]:
        """The smoothed TT (both gauges) and the Laplace factors for a model file (empty without smoothing)."""
        laplace = getattr(self, "smoothing_laplace_", None)
        if laplace is None:
            return {}
        state = tt_state(TTVector(laplace.left_cores), "smoothing.left")
        state.update(tt_state(TTVector(laplace.right_cores), "smoothing.right"))
        state.update({f"smoothing.factor.{k}": factor for k, factor in enumerate(laplace.factors)})
        return state

    def _load_smoothing(self, extra: dict[str, torch.Tensor]) -> None:
        """Set ``smoothing_laplace_`` from a model file's state (None when it holds none)."""
        self.smoothing_laplace_ = None
        if has_tt_state(extra, "smoothing.left"):
            left = list(tt_from_state(extra, "smoothing.left", "vector").cores)
            right = list(tt_from_state(extra, "smoothing.right", "vector").cores)
            self.smoothing_laplace_ = TTLaplace(left, right, [extra[f"smoothing.factor.{k}"] for k in range(len(left))])
