"""Held-out noise estimates: the predictive variance a fitted approximation has earned on rows it did not see.

A tensor-network model borrows its noise variance σ² from an exact GP's marginal likelihood (or estimates it from
its own training residuals). Where the approximation is worse than the GP — a CP rank or TT rank too small for
the data, an M too small for the lengthscale, a truncated Kalman filter — its test errors are larger than σ², and
the predictive intervals built on σ² under-cover badly (a rank-40 CPD on a 9-input set with an almost noise-free
GP fit covered 33% of its test points in the defaults study). The honest noise variance is then the one the
model's own errors on held-out rows call for. Two forms of predictive variance occur:

* **proportional** — the CPD models' Laplace variance ``σ² (1 + q(x))`` (the latent variance σ² q(x) scales with
  the noise): :func:`proportional_noise_estimate` is the maximum-likelihood σ² on held-out residuals,
  ``mean(r_i² / (1 + q_i))``;
* **additive** — a model variance ``v(x)`` that does not scale with σ² (the Kalman filters): an extra variance
  s ≥ 0 is added, :func:`additive_variance_estimate` is the maximum-likelihood s on held-out residuals.

:func:`held_out_rows` draws the held-out rows, the same way for every model.
"""

from __future__ import annotations

import math

import torch

__all__ = ["HELD_OUT_FRACTION", "LOST_DATA_ERROR_RATIO", "MIN_HELD_OUT_ROWS", "NOISE_ESTIMATES",
           "PrequentialResiduals", "additive_variance_estimate", "check_noise_estimate", "held_out_count",
           "held_out_rows",
           "proportional_noise_estimate"]

#: the ``noise_estimate`` values of every model that offers one: ``"held_out"`` (the noise the model's errors on
#: rows it did not see call for) or ``"training"`` (the marginal-likelihood or training-residual noise)
NOISE_ESTIMATES = ("held_out", "training")

#: fraction of the training rows held out to estimate the noise a model has earned
HELD_OUT_FRACTION = 0.2
#: fewer held-out rows than this give no estimate (the relative standard error of a variance from n residuals is
#: √(2/n): 26% at 30 rows)
MIN_HELD_OUT_ROWS = 30
#: a sequential filter whose predictions of its last rows have a mean squared error above this multiple of its prior's
#: (which predicts 0 on the filter's centred scale) has lost the data: :meth:`PrequentialResiduals.error_ratio`
LOST_DATA_ERROR_RATIO = 2.0


def check_noise_estimate(value: str) -> None:
    """Raise ``ValueError`` unless ``value`` is one of :data:`NOISE_ESTIMATES`."""
    if value not in NOISE_ESTIMATES:
        raise ValueError(f"noise_estimate must be one of {NOISE_ESTIMATES}; got {value!r}.")


class PrequentialResiduals:
    """Residuals, predictive variances and targets of the last rows a sequential filter processes, each predicted
    from the state before the filter saw it (a hold-out that needs no refit and loses no row), and the filter's
    innovations on them, which :meth:`error_ratio` checks.

    Parameters
    ----------
    num_rows : int
        Rows the filter will process; the last ``round(HELD_OUT_FRACTION · num_rows)`` are collected (none when
        fewer than :data:`MIN_HELD_OUT_ROWS`).
    """

    def __init__(self, num_rows: int) -> None:
        self.first = self._first_held_out(num_rows)
        self.residuals: list[torch.Tensor] = []
        self.variances: list[torch.Tensor] = []
        self.targets: list[torch.Tensor] = []
        self.innovations: list[torch.Tensor] = []

    @staticmethod
    def _first_held_out(num_rows: int) -> int:
        """The first of the last ``round(HELD_OUT_FRACTION · num_rows)`` rows (``num_rows`` when too few)."""
        held = int(round(HELD_OUT_FRACTION * int(num_rows)))
        return int(num_rows) - held if held >= MIN_HELD_OUT_ROWS else int(num_rows)

    def shorten(self, num_rows: int) -> None:
        """Collect the last rows of ``num_rows`` instead of those of the rows given when made (a deadline changed how
        many rows the filter will process; the rows given again put the window back), from the next row on where
        they would start before it. Once rows are collected, the collection goes on to the last row.

        Parameters
        ----------
        num_rows : int
            Rows the filter will now process in all.
        """
        if self.num_collected == 0:
            self.first = self._first_held_out(num_rows)

    def wanted(self, processed: int, batch_rows: int) -> slice:
        """The rows of the next batch (``batch_rows`` rows after ``processed`` processed ones) to predict."""
        return slice(min(max(self.first - int(processed), 0), int(batch_rows)), int(batch_rows))

    def add(self, residuals: torch.Tensor, predictive_variances: torch.Tensor, targets: torch.Tensor,
            innovations: torch.Tensor | None = None) -> None:
        """Record predicted rows, on the centred scale the filter fits (its prior predicts 0).

        Parameters
        ----------
        residuals : torch.Tensor of shape (n,)
            ``y − μ`` of each row predicted as a new input would be (the noise estimate's residuals).
        predictive_variances : torch.Tensor of shape (n,)
            The predictive variance of y of those predictions, noise included.
        targets : torch.Tensor of shape (n,)
            y.
        innovations : torch.Tensor of shape (n,), optional
            The filter's own one-step-ahead residuals of the measurements it is about to process, ``y − cᵀm``
            (what :meth:`error_ratio` checks); default ``residuals``, where the two are the same prediction.
        """
        innovations = residuals if innovations is None else innovations
        for store, values in ((self.residuals, residuals), (self.variances, predictive_variances),
                              (self.targets, targets), (self.innovations, innovations)):
            store.append(values.detach().reshape(-1).real.to(torch.float64).cpu())

    def error_ratio(self) -> float | None:
        """Mean squared innovation of the recorded rows over their mean squared target: the filter's error in
        predicting the measurements it was about to process against its prior's, which predicts 0 (None: fewer than
        :data:`MIN_HELD_OUT_ROWS` rows, or every target 0). A filter that learnt from its rows scores below 1, one
        that extrapolates reverts towards its prior and about 1, one whose state has lost the data far above
        :data:`LOST_DATA_ERROR_RATIO` (NaN when its mean overflowed)."""
        if self.num_collected < MIN_HELD_OUT_ROWS:
            return None
        prior_error = float(torch.cat(self.targets).square().mean())
        return float(torch.cat(self.innovations).square().mean()) / prior_error if prior_error > 0 else None

    @property
    def num_collected(self) -> int:
        """Rows recorded so far."""
        return int(sum(r.numel() for r in self.residuals))

    def noise_variance(self, measurement_noise: float) -> float | None:
        """``measurement_noise`` + :func:`additive_variance_estimate` of the recorded rows (None: too few)."""
        if self.num_collected < MIN_HELD_OUT_ROWS:
            return None
        self.extra_variance = additive_variance_estimate(torch.cat(self.residuals), torch.cat(self.variances))
        return float(measurement_noise) + self.extra_variance

    def describe(self, measurement_noise: float) -> str:
        """One line for a fit report: the rows used and the noise they call for (standardised scale)."""
        return (f"predictive noise variance {float(measurement_noise) + self.extra_variance:.3g} (standardised "
                f"scale): the filter's noise {float(measurement_noise):.3g} plus {self.extra_variance:.3g} that its "
                f"errors on its last {self.num_collected} rows, each predicted before it was processed, call for.")


def held_out_count(num_rows: int, *, fraction: float = HELD_OUT_FRACTION) -> int:
    """How many of ``num_rows`` rows :func:`held_out_rows` holds out: ``fraction`` of them, rounded, or 0 when
    fewer than :data:`MIN_HELD_OUT_ROWS` would be held out or left.

    Parameters
    ----------
    num_rows : int
        Number of training rows N.
    fraction : float
        Fraction of rows held out.

    Returns
    -------
    int
        Rows held out, n_h.
    """
    held = int(round(float(fraction) * int(num_rows)))
    return 0 if held < MIN_HELD_OUT_ROWS or int(num_rows) - held < MIN_HELD_OUT_ROWS else held


def held_out_rows(num_rows: int, seed: int, *, fraction: float = HELD_OUT_FRACTION,
                  device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A seeded random split of ``range(num_rows)`` into fitted and held-out rows.

    Parameters
    ----------
    num_rows : int
        Number of training rows N.
    seed : int
        Seed of the permutation (the model's ``seed``).
    fraction : float
        Fraction of rows held out (default :data:`HELD_OUT_FRACTION`).
    device : torch.device or str, optional

    Returns
    -------
    (fitted, held_out) : tuple of torch.Tensor of shape (N − n_h,) and (n_h,), or None
        Sorted row indices; None when fewer than :data:`MIN_HELD_OUT_ROWS` rows would be held out.
    """
    held = held_out_count(num_rows, fraction=fraction)
    if not held:
        return None
    order = torch.randperm(int(num_rows), generator=torch.Generator().manual_seed(int(seed)))
    return order[held:].sort().values.to(device), order[:held].sort().values.to(device)


def proportional_noise_estimate(residuals: torch.Tensor, relative_variance: torch.Tensor) -> float:
    """Maximum-likelihood σ² of held-out residuals whose predictive variance is ``σ² (1 + q)``.

    Parameters
    ----------
    residuals : torch.Tensor of shape (n,)
        ``y_i − μ(x_i)`` on held-out rows (real).
    relative_variance : torch.Tensor of shape (n,)
        ``q_i ≥ 0``: the latent variance at ``x_i`` divided by σ².

    Returns
    -------
    float
        ``mean(r_i² / (1 + q_i))`` — the σ² under which the held-out rows' standardised squared residuals
        average one.
    """
    residuals = residuals.real.to(torch.float64)
    relative_variance = relative_variance.real.to(torch.float64).clamp_min(0.0)
    if residuals.shape != relative_variance.shape or residuals.numel() == 0:
        raise ValueError(f"need matching non-empty residuals and variances; got shapes {tuple(residuals.shape)} "
                         f"and {tuple(relative_variance.shape)}.")
    return float((residuals.square() / (1.0 + relative_variance)).mean())


def additive_variance_estimate(residuals: torch.Tensor, predictive_variance: torch.Tensor, *,
                               iterations: int = 100) -> float:
    """Maximum-likelihood extra variance s ≥ 0 of held-out residuals with predictive variance ``v_i + s``.

    Parameters
    ----------
    residuals : torch.Tensor of shape (n,)
        ``y_i − μ(x_i)`` on held-out rows (real).
    predictive_variance : torch.Tensor of shape (n,)
        ``v_i > 0``: the model's predictive variance of y_i (noise included).
    iterations : int
        Bisection steps on log s.

    Returns
    -------
    float
        The s ≥ 0 maximising ``Σ −½ log(v_i + s) − r_i² / (2(v_i + s))``; 0 when the model's own variances already
        explain the residuals (the score's derivative in s, ``Σ (r_i² − v_i − s) / (v_i + s)²``, is ≤ 0 at
        s = 0), else a root of that derivative found by bisection on log s.
    """
    r2 = residuals.real.to(torch.float64).square()
    v = predictive_variance.real.to(torch.float64).clamp_min(torch.finfo(torch.float64).tiny)
    if r2.shape != v.shape or r2.numel() == 0:
        raise ValueError(f"need matching non-empty residuals and variances; got shapes {tuple(r2.shape)} "
                         f"and {tuple(v.shape)}.")

    def slope(s: float) -> float:
        return float(((r2 - v - s) / (v + s).square()).sum())

    if slope(0.0) <= 0.0:
        return 0.0
    low, high = math.log(float(v.min()) * 1e-6), math.log(max(float(r2.max()), float(v.max())) * 10.0)
    for _ in range(int(iterations)):
        middle = 0.5 * (low + high)
        if slope(math.exp(middle)) > 0.0:
            low = middle
        else:
            high = middle
    return math.exp(0.5 * (low + high))
