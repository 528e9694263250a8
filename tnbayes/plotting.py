"""The pictures people want from a Bayesian regressor: predictive bands, calibration curves, relevances.

All functions draw on a matplotlib ``Axes`` (created when not given) and return it; nothing here
calls ``plt.show``. Import of matplotlib is deferred so that the package imports without a display.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tnbayes import metrics
from tnbayes._validation import ArrayLike, to_numpy
from tnbayes.posterior import GaussianPosterior

__all__ = ["plot_predictive_band", "plot_calibration", "plot_relevances", "save_figure"]


def _axes(ax: Any, figsize: tuple[float, float] = (6.0, 4.0)) -> Any:
    if ax is not None:
        return ax
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "png", "cairo") and not _has_display():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def _has_display() -> bool:
    import os

    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def plot_predictive_band(
    x: ArrayLike,
    posterior: Any,
    *,
    x_train: ArrayLike | None = None,
    y_train: ArrayLike | None = None,
    x_test: ArrayLike | None = None,
    y_test: ArrayLike | None = None,
    levels: Sequence[float] = (0.95,),
    label: str = "prediction",
    color: str = "C0",
    xlabel: str | None = None,
    ylabel: str | None = None,
    title: str | None = None,
    ax: Any = None,
) -> Any:
    """Predictive mean with central bands over a 1-D input.

    Parameters
    ----------
    x : array-like of shape (n,) or (n, 1)
        Inputs at which ``posterior`` was computed.
    posterior : GaussianPosterior
        Predictive distribution at ``x`` (n points).
    x_train, y_train, x_test, y_test : array-like of shape (m,), optional
        Data drawn as points.
    levels : sequence of float
        Central probability of each band, e.g. (0.68, 0.95).
    label, color : str
    xlabel, ylabel, title : str, optional
        Axis labels and title (left as they are when None).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
    """
    ax = _axes(ax)
    xs = to_numpy(x).reshape(-1)
    order = np.argsort(xs)
    mean = to_numpy(posterior.mean)[order]
    for i, level in enumerate(sorted(levels, reverse=True)):
        lo, hi = (to_numpy(b)[order] for b in posterior.interval(level))
        ax.fill_between(xs[order], lo, hi, color=color, alpha=0.15 + 0.1 * i, lw=0,
                        label=f"{int(round(100 * level))}% interval")
    ax.plot(xs[order], mean, color=color, lw=1.5, label=label)
    if x_train is not None and y_train is not None:
        ax.scatter(to_numpy(x_train).reshape(-1), to_numpy(y_train), s=8, color="k", alpha=0.6, label="train")
    if x_test is not None and y_test is not None:
        ax.scatter(to_numpy(x_test).reshape(-1), to_numpy(y_test), s=10, color="C3", marker="x", label="test")
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_calibration(
    curves: GaussianPosterior | dict[str, tuple[ArrayLike, ArrayLike] | GaussianPosterior],
    y_true: ArrayLike | None = None,
    *,
    title: str | None = None,
    label: str = "model",
    ax: Any = None,
) -> Any:
    """Reliability diagram: observed coverage of central intervals against their nominal level.

    Parameters
    ----------
    curves : GaussianPosterior, or dict of name -> (nominal, observed) or GaussianPosterior
        What to draw: a predictive :class:`~tnbayes.GaussianPosterior` at the test inputs (with ``y_true``), or
        several curves by name, each a pair of arrays of shape (k,) (e.g. from
        :func:`tnbayes.metrics.calibration_curve`) or a posterior of shape (n,) (with ``y_true``).
    y_true : array-like of shape (n,), optional
        Observed targets; needed for every posterior given.
    title : str, optional
    label : str
        Name of the curve when ``curves`` is a single posterior.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
    """
    if isinstance(curves, GaussianPosterior):
        curves = {label: curves}
    if not isinstance(curves, dict):
        raise TypeError("curves must be a GaussianPosterior or a dict of name -> (nominal, observed) or "
                        f"GaussianPosterior; got {type(curves).__name__}.")
    resolved: dict[str, tuple[ArrayLike, ArrayLike]] = {}
    for name, curve in curves.items():
        if isinstance(curve, GaussianPosterior):
            if y_true is None:
                raise ValueError(f"curve {name!r} is a GaussianPosterior: pass y_true, the observed targets at "
                                 "its inputs, to compute its calibration curve.")
            curve = metrics.calibration_curve(y_true, curve)
        resolved[name] = curve
    ax = _axes(ax, (4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="0.5", ls="--", lw=1, label="ideal")
    for name, (nominal, observed) in resolved.items():
        ax.plot(to_numpy(nominal), to_numpy(observed), marker="o", ms=3, label=name)
    ax.set_xlabel("nominal coverage of central interval")
    ax.set_ylabel("observed coverage")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    if title:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    return ax


def calibration_from_posterior(y_true: ArrayLike, posterior: Any) -> tuple[np.ndarray, np.ndarray]:
    """Shortcut for :func:`tnbayes.metrics.calibration_curve` with the default levels.

    Returns
    -------
    nominal, observed : ndarray of shape (19,)
    """
    return metrics.calibration_curve(y_true, posterior)


def plot_relevances(values: ArrayLike, *, feature_names: Sequence[str] | None = None, ylabel: str = "scaled |λ|",
                    title: str = "RFFNet relevances", ax: Any = None) -> Any:
    """Stem plot of one relevance per input (e.g. :meth:`tnbayes.RFFNet.plot_relevances`).

    Parameters
    ----------
    values : array-like of shape (p,)
        The relevances, in the order of the inputs.
    feature_names : sequence of str of length p, optional
        Tick labels (default 1 … p); with more than 25 inputs every ⌈p/25⌉-th is shown, rotated.
    ylabel, title : str
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
    """
    values = to_numpy(values).reshape(-1)
    p = values.shape[0]
    ax = _axes(ax, figsize=(max(4.0, 0.25 * p + 2.0), 3.0))
    ax.stem(np.arange(p), values)
    labels = list(feature_names) if feature_names is not None else [str(j + 1) for j in range(p)]
    step = max(1, p // 25)
    ax.set_xticks(np.arange(p)[::step])
    ax.set_xticklabels(labels[::step], rotation=90 if p > 25 else 0)
    ax.set_xlabel("input")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return ax


def save_figure(ax: Any, path: str, dpi: int = 120) -> None:
    """Save the figure of ``ax`` to ``path`` and close it."""
    import matplotlib.pyplot as plt

    fig = ax.figure
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
