"""What the Kalman-filter regressors TNKF and TTKalmanGP share: the time-budget bookkeeping (store the plan, report
it, warn, record the seconds) and the posterior covariance of their TT state.

The cost models and the choice of settings are in :mod:`tnbayes.inference.budget`; this mixin only connects a
model's plan to its ``budget_``, ``fit_report_`` and warnings, so that both regressors say the same things in the
same words. A model names its settings through three small hooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from tnbayes._warnings import warn_user
from tnbayes.inference.budget import MIN_ROWS, BudgetPlan, BudgetWarning, describe_plan, record_measured_seconds
from tnbayes.inference.kalman import covariance_from_root, released
from tnbayes.inference.stream_deadline import DEADLINE_GRACE, StreamDeadline
from tnbayes.selection.calibration import LOST_DATA_ERROR_RATIO, PrequentialResiduals
from tnbayes.tensors import TTMatrix

__all__ = ["KalmanModelMixin"]


class KalmanModelMixin:
    """Budget reporting, the predictive noise and the TT posterior covariance for a
    :class:`~tnbayes.models.base.BaseModel` with ``time_budget``, ``hyper_max_points``, ``measurement_noise_`` and a
    fitted covariance root ``posterior_cov_sqrt_tt_``.

    Subclasses implement :meth:`_budget_settings_text` and :meth:`_budget_pass_text` and set
    ``_budget_given_instead``; they call :meth:`_store_plan` once the plan is made, stream through
    :meth:`_stream_deadline` (then :meth:`_record_deadline`), and call :meth:`_record_budget` after the filter ran.
    ``hyperparameter_source_`` must be set before either (``"given"``: nothing was estimated).
    """

    #: the parameters that, given, skip the hyper-parameter estimate (named by the warning of a slow estimate)
    _budget_given_instead: ClassVar[str] = ""
    #: the report's remark when the first candidate of the ladder fits the budget
    _budget_first_fits: ClassVar[str] = "the first choice fits"
    #: what to change when the filter has lost the data (the warning of :meth:`_store_noise`; None: no check)
    _lost_data_advice: ClassVar[str | None] = None
    #: which rows the stream deadline left out (the warning of :meth:`_record_deadline`)
    _deadline_left_out: ClassVar[str] = "The filter stopped before the rest"

    def _budget_settings_text(self, settings: Mapping[str, Any]) -> str:
        """How the report names budgeted settings (e.g. ``"M = 8, TT rank cap 6, batches of 8"``)."""
        raise NotImplementedError

    def _budget_default_text(self, settings: Mapping[str, Any]) -> str:
        """How the report names the first candidate's settings (default: as :meth:`_budget_settings_text`)."""
        return self._budget_settings_text(settings)

    def _budget_pass_text(self, settings: Mapping[str, Any]) -> str:
        """The constructor arguments that fix these settings, for the over-budget warning."""
        raise NotImplementedError

    def _store_plan(self, plan: BudgetPlan, *, first_fits: str | None = None, **extra: Any) -> None:
        """Set ``budget_`` (``time_budget``, ``extra``, the plan, ``settings["max_rows"]``), report the choice (with
        ``first_fits``, else :attr:`_budget_first_fits`, as the remark when the first candidate fits) and warn
        (:class:`~tnbayes.inference.budget.BudgetWarning`) when the plan is over the budget."""
        time_budget = self.time_budget
        self.budget_ = {"time_budget": None if time_budget is None else float(time_budget), **extra, **plan.as_dict()}
        self.budget_["settings"]["max_rows"] = plan.rows
        line, warning = describe_plan(plan, model=type(self).__name__, time_budget=time_budget,
                                      settings_text=self._budget_settings_text,
                                      default_text=self._budget_default_text,
                                      first_fits=first_fits or self._budget_first_fits,
                                      pass_text=self._budget_pass_text)
        self._report(line)
        if warning is not None:
            warn_user(warning, BudgetWarning)

    def _stream_deadline(self, rows: int, fit_start: float, reserve_seconds: float = 0.0) -> StreamDeadline:
        """The deadline of the filter's stream of ``rows`` planned rows, when the budget chose the rows (``time_budget``
        set and ``max_rows="auto"``; else none): ``fit_start + (1 + DEADLINE_GRACE) · time_budget − reserve_seconds``
        (what the fit needs after the filter; the grace, :data:`~tnbayes.inference.stream_deadline.DEADLINE_GRACE`,
        leaves the cost model's own error alone). It never asks for fewer than
        :data:`~tnbayes.inference.budget.MIN_ROWS` rows. Made when the stream starts."""
        budgeted = self.time_budget is not None and self.max_rows == "auto"
        deadline = fit_start + (1.0 + DEADLINE_GRACE) * float(self.time_budget) - float(reserve_seconds) \
            if budgeted else None
        return StreamDeadline(rows, deadline, min_rows=MIN_ROWS)

    def _record_deadline(self, deadline: StreamDeadline, rows: int, left_out: bool) -> None:
        """Add ``planned_rows`` and ``stopped_at_deadline`` (= ``left_out``: the deadline left out some of the planned
        rows) to ``budget_``, for a filter that processed ``rows`` rows; report and warn
        (:class:`~tnbayes.inference.budget.BudgetWarning`) when it did, with :attr:`_deadline_left_out`."""
        self.budget_.update(planned_rows=deadline.planned_rows, stopped_at_deadline=bool(left_out))
        if left_out:
            predicted = self.budget_.get("predicted_seconds_per_row")
            ratio = None if not predicted or deadline.seconds_per_row is None else \
                deadline.seconds_per_row / float(predicted)
            pace = "" if ratio is None else f" (last measured: {ratio:.2g} times the cost model's seconds per row)"
            unknown = bool(self.budget_.get("cost_unknown"))
            why = ("ranks without a rank cap follow the tolerances, whose pace the cost model cannot predict"
                   if unknown else f"they ran slower than predicted{pace}, as on a slower or busier machine")
            message = (f"{type(self).__name__}: the time budget left the filter {int(rows)} of the "
                       f"{deadline.planned_rows} planned rows: {why}. {self._deadline_left_out}; pass a larger "
                       f"time_budget, {'rank caps in the truncation, ' if unknown else ''}or max_rows to stream a "
                       f"given number of rows.")
            self._report(message)
            warn_user(message, BudgetWarning)

    def _record_budget(self, hyperparameter_seconds: float, filter_seconds: float, rows: int,
                       fit_seconds: float) -> None:
        """Add the measured seconds to ``budget_`` and report them (see
        :func:`~tnbayes.inference.budget.record_measured_seconds`)."""
        self._report(record_measured_seconds(
            self.budget_, model=type(self).__name__, hyperparameter_seconds=hyperparameter_seconds,
            filter_seconds=filter_seconds, rows=rows, fit_seconds=fit_seconds, time_budget=self.time_budget,
            estimated=self.hyperparameter_source_ != "given", hyper_max_points=int(self.hyper_max_points),
            given_instead=self._budget_given_instead))

    def _release_stream_state(self) -> None:
        """Replace the inference tensors among the fitted attributes (what the stream in
        :func:`~tnbayes.inference.kalman.filter_stream` made: the filter's state, the stream's order) by normal
        copies, so that the posterior can be differentiated and the fitted state updated in place later; the
        constructor's parameters (no leading or trailing underscore) are left as given."""
        for name, value in list(vars(self).items()):
            if name.endswith("_") or name.startswith("_"):
                setattr(self, name, released(value))

    def _store_noise(self, held_out: PrequentialResiduals | None) -> None:
        """Set ``held_out_noise_variance_`` (None without a hold-out) and the predictive ``noise_variance_``: the
        filter's ``measurement_noise_``, or what the prequential hold-out of the last rows calls for. Warns
        (``RuntimeWarning``, also in ``fit_report_``) when those rows were predicted worse than
        :data:`~tnbayes.selection.calibration.LOST_DATA_ERROR_RATIO` times as badly as by the filter's prior."""
        self.held_out_noise_variance_ = (None if held_out is None
                                         else held_out.noise_variance(self.measurement_noise_))
        self.noise_variance_ = (self.measurement_noise_ if self.held_out_noise_variance_ is None
                                else self.held_out_noise_variance_)
        if self.held_out_noise_variance_ is not None:
            self._report(held_out.describe(self.measurement_noise_))
        ratio = None if held_out is None or self._lost_data_advice is None else held_out.error_ratio()
        if ratio is not None and not ratio <= LOST_DATA_ERROR_RATIO:  # NaN too
            message = (f"{type(self).__name__}: the filter predicted its last {held_out.num_collected} rows, each "
                       f"before it was processed, with a mean squared error {ratio:.3g} times that of its prior "
                       f"(which predicts the training mean): its state has lost the data, and its predictions are "
                       f"not to be trusted. Either rounding at the rank caps lost more over many rows than the rows "
                       f"restored, or the last rows are unlike the first (shuffle them); {self._lost_data_advice}")
            self._report(message)
            warn_user(message, RuntimeWarning)

    def posterior_cov_tt(self, tol: float = 1e-12, max_rank: int | None = None) -> TTMatrix:
        """The posterior covariance of the filtered weights, ``P = L Lᵀ`` (L = ``posterior_cov_sqrt_tt_``), rounded.

        Parameters
        ----------
        tol : float
            Relative accuracy of the rounding of P (0: exact up to round-off).
        max_rank : int, optional
            Cap of P's TT ranks.

        Returns
        -------
        TTMatrix
            Square, with the row modes of L (on the standardised scale).
        """
        self._check_fitted("posterior_cov_tt")
        return covariance_from_root(self.posterior_cov_sqrt_tt_, tol, max_rank)
