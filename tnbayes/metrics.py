"""Point and probabilistic metrics for regression predictions.

Every metric follows one calling convention (scikit-learn order, targets first):

* point metrics take ``(y_true, y_pred)``, where ``y_pred`` is an array of predictions or a
  posterior (its mean is used);
* probabilistic metrics take ``(y_true, pred, std=None, ...)``: if ``pred`` is a posterior, the mean
  and standard deviation come from it and ``std`` must be left as ``None``; otherwise ``pred`` is the
  predictive mean and ``std`` the predictive standard deviation (required).

A *posterior* is anything with ``.mean`` and ``.stddev`` attributes holding arrays or tensors of
shape (n,) -- a :class:`tnbayes.posterior.GaussianPosterior`, a ``torch.distributions.Normal``, a
GPyTorch ``MultivariateNormal`` (its marginals are used), ... Inputs may be numpy arrays, torch
tensors (any device, any floating dtype) or nested lists; everything is computed in float64 numpy
and scalar metrics are returned as Python ``float``. The input checks (and their messages) are those of
:mod:`tnbayes._validation`, the package's one validation place. Metrics belong to no axis: they score any model's
posterior.

All probabilistic metrics treat the prediction at each point as the marginal Gaussian
N(μ_i, σ_i²) and average per-point scores (protocol of the UCI uncertainty literature). In
particular :func:`nlpd` is the mean of per-point negative log densities, *not* the joint density of
all test points divided by n (which is what GPyTorch's ``negative_log_predictive_density`` returns).
For predictions of noisy targets use the posterior with observation noise
(``model.posterior(X, observation_noise=True)``); the latent posterior ignores the noise and is
overconfident about observations.

Examples
--------
>>> import numpy as np
>>> from tnbayes.metrics import nlpd, coverage, evaluate
>>> y = np.array([0.1, -0.3, 1.2])
>>> mu, sd = np.array([0.0, 0.0, 1.0]), np.array([0.5, 0.5, 0.5])
>>> round(nlpd(y, mu, sd), 6)
0.319125
>>> coverage(y, mu, sd, level=0.95)
1.0
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch
from scipy.special import ndtr, ndtri

from tnbayes._validation import ArrayLike, check_level, check_same_shape, check_values

PosteriorLike = Any  # anything with ``.mean`` and ``.stddev`` attributes

__all__ = [
    "accuracy",
    "calibration_curve",
    "coverage",
    "crps",
    "evaluate",
    "interval_width",
    "mae",
    "mse",
    "msll",
    "nlpd",
    "pit",
    "rmse",
]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# --------------------------------------------------------------------------- input handling
def _is_posterior(obj: Any) -> bool:
    """True for posterior-like objects (``.mean`` and ``.stddev``), False for arrays/tensors."""
    if isinstance(obj, (np.ndarray, torch.Tensor, list, tuple, float, int)):
        return False
    return hasattr(obj, "mean") and hasattr(obj, "stddev")


def _mean_std(pred: PosteriorLike | ArrayLike, std: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """Extract and validate the predictive mean and standard deviation.

    Parameters
    ----------
    pred : posterior or array-like of shape (n,)
        A posterior (``.mean`` and ``.stddev``) or the predictive mean.
    std : array-like of shape (n,) or scalar, optional
        Predictive standard deviation; required iff ``pred`` is not a posterior. A scalar is
        broadcast to the shape of the mean.

    Returns
    -------
    mean, std : np.ndarray of shape (n,), float64
        Finite means and finite, strictly positive standard deviations.
    """
    if _is_posterior(pred):
        if std is not None:
            raise ValueError(
                "std must be None when pred is a posterior (its mean and stddev are used); "
                "pass either a posterior alone or a mean array together with std."
            )
        mean = check_values(pred.mean, "posterior mean")
        sd = check_values(pred.stddev, "posterior stddev")
        check_same_shape(mean, sd, "posterior mean", "posterior stddev")
        sd_name = "posterior stddev"
    else:
        if std is None:
            raise ValueError(
                f"std is required when pred is an array ({type(pred).__name__}); call "
                f"metric(y_true, mean, std) or pass a posterior with .mean and .stddev instead, "
                f"e.g. metric(y_true, model.posterior(X_test))."
            )
        mean = check_values(pred, "pred")
        sd = check_values(std, "std")
        if sd.ndim == 0:
            sd = np.broadcast_to(sd, mean.shape)
        check_same_shape(mean, sd, "pred (mean)", "std")
        sd_name = "std"
    nonpos = sd <= 0.0
    if nonpos.any():
        latent = getattr(pred, "observation_noise", None) is False
        raise ValueError(
            f"{sd_name} must be strictly positive; {int(nonpos.sum())} value(s) are <= 0 "
            f"(min {sd.min():g}). Probabilistic metrics are undefined for a zero-variance "
            f"prediction. This typically happens with a latent (noise-free) posterior"
            f"{' (this one has observation_noise=False)' if latent else ''}; use "
            f"model.posterior(X, observation_noise=True) to score noisy observations."
        )
    return mean, sd


def _point_errors(y_true: ArrayLike, y_pred: PosteriorLike | ArrayLike) -> np.ndarray:
    """Validated errors ``y_true - y_pred`` (a posterior's mean for a posterior), of their common shape."""
    pred_name = "posterior mean" if _is_posterior(y_pred) else "y_pred"
    pred = check_values(y_pred.mean if _is_posterior(y_pred) else y_pred, pred_name)
    y = check_values(y_true, "y_true")
    check_same_shape(y, pred, "y_true", pred_name)
    return y - pred


def _prepare(
    y_true: ArrayLike, pred: PosteriorLike | ArrayLike, std: ArrayLike | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated ``(y, mean, std)`` of one common shape."""
    mean, sd = _mean_std(pred, std)
    y = check_values(y_true, "y_true")
    check_same_shape(y, mean, "y_true", "the predictive mean")
    return y, mean, sd


def _standardize(y: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    return (y - mean) / sd


def _per_point_nlpd(y: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    # -log N(y | μ, σ²) = ½ log 2π + log σ + ½ z²; avoids forming σ² or exp() so it cannot overflow.
    z = _standardize(y, mean, sd)
    return _HALF_LOG_2PI + np.log(sd) + 0.5 * z * z


# --------------------------------------------------------------------------- point metrics
def mse(y_true: ArrayLike, y_pred: PosteriorLike | ArrayLike) -> float:
    """Mean squared error.

    .. math:: \\mathrm{MSE} = \\frac{1}{n} \\sum_i (y_i - \\hat y_i)^2

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    y_pred : array-like of shape (n,) or posterior
        Point predictions, or a posterior whose ``mean`` is used.

    Returns
    -------
    float
    """
    return float(np.mean(_point_errors(y_true, y_pred) ** 2))


def rmse(y_true: ArrayLike, y_pred: PosteriorLike | ArrayLike) -> float:
    """Root mean squared error.

    .. math:: \\mathrm{RMSE} = \\sqrt{\\frac{1}{n} \\sum_i (y_i - \\hat y_i)^2}

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    y_pred : array-like of shape (n,) or posterior
        Point predictions, or a posterior whose ``mean`` is used.

    Returns
    -------
    float
    """
    return math.sqrt(mse(y_true, y_pred))


def mae(y_true: ArrayLike, y_pred: PosteriorLike | ArrayLike) -> float:
    """Mean absolute error.

    .. math:: \\mathrm{MAE} = \\frac{1}{n} \\sum_i |y_i - \\hat y_i|

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    y_pred : array-like of shape (n,) or posterior
        Point predictions, or a posterior whose ``mean`` is used.

    Returns
    -------
    float
    """
    return float(np.mean(np.abs(_point_errors(y_true, y_pred))))


def accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Fraction of correctly predicted labels.

    .. math:: \\mathrm{acc} = \\frac{1}{n} \\sum_i \\mathbb{1}[y_i = \\hat y_i]

    Parameters
    ----------
    y_true : array-like of shape (n,)
        True class labels (numbers, strings or booleans).
    y_pred : array-like of shape (n,)
        Predicted class labels, already thresholded (e.g. ``np.sign(f)`` for ±1 labels).

    Returns
    -------
    float
        In [0, 1].
    """
    if _is_posterior(y_pred):
        raise ValueError(
            "accuracy expects predicted labels, not a posterior; threshold the predictive mean "
            "first, e.g. accuracy(y_true, np.sign(post.mean))."
        )
    y = y_true.detach().cpu().numpy() if isinstance(y_true, torch.Tensor) else np.asarray(y_true)
    p = y_pred.detach().cpu().numpy() if isinstance(y_pred, torch.Tensor) else np.asarray(y_pred)
    for arr, name in ((y, "y_true"), (p, "y_pred")):
        if arr.size == 0:
            raise ValueError(f"{name} is empty (shape {arr.shape}); at least one label is required.")
        if arr.dtype.kind == "f" and np.isnan(arr).any():
            raise ValueError(f"{name} contains NaN labels; remove those points first.")
    check_same_shape(y, p, "y_true", "y_pred")
    return float(np.mean(y == p))


# --------------------------------------------------------------------------- probabilistic metrics
def nlpd(y_true: ArrayLike, pred: PosteriorLike | ArrayLike, std: ArrayLike | None = None) -> float:
    """Mean negative log predictive density under per-point Gaussian marginals.

    .. math::

        \\mathrm{NLPD} = \\frac{1}{n} \\sum_i -\\log \\mathcal N(y_i \\mid \\mu_i, \\sigma_i^2)
        = \\frac{1}{n} \\sum_i \\Big[\\tfrac12 \\log 2\\pi + \\log \\sigma_i + \\tfrac12 z_i^2\\Big],
        \\qquad z_i = \\frac{y_i - \\mu_i}{\\sigma_i}.

    This is the per-point mean (UCI protocol), not the joint density divided by n that GPyTorch's
    ``negative_log_predictive_density`` returns. Lower is better; it depends on the units of y.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    pred : posterior or array-like of shape (n,)
        A posterior (``.mean``, ``.stddev``) or the predictive mean.
    std : array-like of shape (n,) or scalar, optional
        Predictive standard deviation; required iff ``pred`` is an array.

    Returns
    -------
    float
    """
    y, mean, sd = _prepare(y_true, pred, std)
    return float(np.mean(_per_point_nlpd(y, mean, sd)))


def msll(
    y_true: ArrayLike,
    pred: PosteriorLike | ArrayLike,
    std: ArrayLike | None = None,
    *,
    y_train: ArrayLike,
) -> float:
    """Mean standardized log loss (Rasmussen & Williams 2006, eq. 2.34).

    The per-point negative log predictive density minus that of a trivial model which predicts
    every point with the Gaussian fitted to the training targets:

    .. math::

        \\mathrm{MSLL} = \\frac{1}{n} \\sum_i \\Big[-\\log \\mathcal N(y_i \\mid \\mu_i, \\sigma_i^2)
        + \\log \\mathcal N(y_i \\mid \\bar y_{\\mathrm{train}}, s^2_{\\mathrm{train}})\\Big],

    with :math:`\\bar y_{\\mathrm{train}}` the mean and :math:`s^2_{\\mathrm{train}}` the (biased,
    ``ddof=0``) variance of the training targets. About 0 for the trivial model, negative for
    better models; unlike :func:`nlpd` it does not depend on the units of y.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed test targets.
    pred : posterior or array-like of shape (n,)
        A posterior (``.mean``, ``.stddev``) or the predictive mean.
    std : array-like of shape (n,) or scalar, optional
        Predictive standard deviation; required iff ``pred`` is an array.
    y_train : array-like of shape (n_train,)
        Training targets (at least two distinct values), in the same units as ``y_true``.

    Returns
    -------
    float
    """
    y, mean, sd = _prepare(y_true, pred, std)
    yt = check_values(y_train, "y_train").ravel()
    if yt.size < 2:
        raise ValueError(f"y_train needs at least 2 values to estimate a variance; got {yt.size}.")
    train_sd = float(np.std(yt))
    if not train_sd > 0.0:
        raise ValueError(
            "y_train is constant (zero variance), so the trivial reference model of MSLL is "
            "degenerate; use nlpd instead."
        )
    ref = _per_point_nlpd(y, np.full_like(y, float(np.mean(yt))), np.full_like(y, train_sd))
    return float(np.mean(_per_point_nlpd(y, mean, sd) - ref))


def crps(y_true: ArrayLike, pred: PosteriorLike | ArrayLike, std: ArrayLike | None = None) -> float:
    """Mean continuous ranked probability score of Gaussian predictions (closed form).

    Gneiting & Raftery (2007), eq. 21:

    .. math::

        \\mathrm{CRPS}(\\mathcal N(\\mu, \\sigma^2), y)
        = \\sigma\\Big[z\\big(2\\Phi(z) - 1\\big) + 2\\varphi(z) - \\tfrac{1}{\\sqrt\\pi}\\Big],
        \\qquad z = \\frac{y - \\mu}{\\sigma},

    averaged over points. Lower is better; in the units of y; equals the absolute error in the
    limit σ → 0.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    pred : posterior or array-like of shape (n,)
        A posterior (``.mean``, ``.stddev``) or the predictive mean.
    std : array-like of shape (n,) or scalar, optional
        Predictive standard deviation; required iff ``pred`` is an array.

    Returns
    -------
    float
    """
    y, mean, sd = _prepare(y_true, pred, std)
    z = _standardize(y, mean, sd)
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * z * z)
    return float(np.mean(sd * (z * (2.0 * ndtr(z) - 1.0) + 2.0 * pdf - _INV_SQRT_PI)))


def pit(y_true: ArrayLike, pred: PosteriorLike | ArrayLike, std: ArrayLike | None = None) -> np.ndarray:
    """Probability integral transform values.

    .. math:: u_i = \\Phi\\Big(\\frac{y_i - \\mu_i}{\\sigma_i}\\Big)

    For calibrated predictions the :math:`u_i` are uniform on [0, 1]; a U-shaped histogram means
    overconfidence, a hump means underconfidence.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    pred : posterior or array-like of shape (n,)
        A posterior (``.mean``, ``.stddev``) or the predictive mean.
    std : array-like of shape (n,) or scalar, optional
        Predictive standard deviation; required iff ``pred`` is an array.

    Returns
    -------
    np.ndarray of shape (n,), float64
    """
    y, mean, sd = _prepare(y_true, pred, std)
    return ndtr(_standardize(y, mean, sd))


def _half_width_factor(level: float) -> float:
    """z-quantile q with P(|Z| <= q) = level."""
    return float(ndtri(0.5 + 0.5 * level))


def coverage(
    y_true: ArrayLike,
    pred: PosteriorLike | ArrayLike,
    std: ArrayLike | None = None,
    level: float = 0.95,
) -> float:
    """Fraction of targets inside the central ``level`` predictive interval.

    .. math::

        \\frac{1}{n} \\sum_i \\mathbb{1}\\big[\\mu_i - q\\sigma_i \\le y_i \\le \\mu_i + q\\sigma_i\\big],
        \\qquad q = \\Phi^{-1}\\big(\\tfrac{1 + \\mathrm{level}}{2}\\big).

    Should be close to ``level`` for calibrated predictions.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    pred : posterior or array-like of shape (n,)
        A posterior (``.mean``, ``.stddev``) or the predictive mean.
    std : array-like of shape (n,) or scalar, optional
        Predictive standard deviation; required iff ``pred`` is an array.
    level : float
        Nominal probability of the central interval, in (0, 1).

    Returns
    -------
    float
        In [0, 1].
    """
    level = check_level(level)
    y, mean, sd = _prepare(y_true, pred, std)
    half = _half_width_factor(level) * sd
    return float(np.mean((y >= mean - half) & (y <= mean + half)))


def interval_width(
    pred: PosteriorLike | ArrayLike, std: ArrayLike | None = None, level: float = 0.95
) -> float:
    """Mean width of the central ``level`` predictive intervals (sharpness).

    .. math:: \\frac{1}{n} \\sum_i 2 q \\sigma_i, \\qquad q = \\Phi^{-1}\\big(\\tfrac{1 + \\mathrm{level}}{2}\\big)

    Parameters
    ----------
    pred : posterior or array-like of shape (n,)
        A posterior (``.mean``, ``.stddev``) or the predictive mean.
    std : array-like of shape (n,) or scalar, optional
        Predictive standard deviation; required iff ``pred`` is an array.
    level : float
        Nominal probability of the central interval, in (0, 1).

    Returns
    -------
    float
        In the units of y.
    """
    level = check_level(level)
    _, sd = _mean_std(pred, std)
    return float(2.0 * _half_width_factor(level) * np.mean(sd))


def calibration_curve(
    y_true: ArrayLike,
    pred: PosteriorLike | ArrayLike,
    std: ArrayLike | None = None,
    levels: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Observed versus nominal coverage of central predictive intervals.

    For each nominal level :math:`p_k`, the observed coverage is
    :math:`\\hat p_k = \\frac1n \\sum_i \\mathbb 1[|z_i| \\le \\Phi^{-1}((1+p_k)/2)]` with
    :math:`z_i = (y_i - \\mu_i)/\\sigma_i`. Calibrated predictions lie on the diagonal; points below
    it mean overconfidence (intervals too narrow), above it underconfidence.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    pred : posterior or array-like of shape (n,)
        A posterior (``.mean``, ``.stddev``) or the predictive mean.
    std : array-like of shape (n,) or scalar, optional
        Predictive standard deviation; required iff ``pred`` is an array.
    levels : array-like of shape (k,), optional
        Nominal levels in (0, 1); default ``np.linspace(0.05, 0.95, 19)``.

    Returns
    -------
    levels : np.ndarray of shape (k,)
        The nominal levels.
    observed : np.ndarray of shape (k,)
        Observed coverage at each level.
    """
    if levels is None:
        lv = np.linspace(0.05, 0.95, 19)
    else:
        lv = check_values(levels, "levels").ravel()
        for v in lv:
            check_level(v, "every entry of levels")
    y, mean, sd = _prepare(y_true, pred, std)
    abs_z = np.abs(_standardize(y, mean, sd)).ravel()
    q = ndtri(0.5 + 0.5 * lv)
    # Sorting once makes k levels cost O(n log n + k log n) instead of O(nk).
    observed = np.searchsorted(np.sort(abs_z), q, side="right") / abs_z.size
    return lv, observed.astype(np.float64)


def _level_key(level: float) -> str:
    """0.95 -> '95', 0.5 -> '50', 0.995 -> '99.5'."""
    return format(round(100.0 * level, 6), "g")


def evaluate(
    posterior: PosteriorLike,
    y_true: ArrayLike,
    *,
    levels: Sequence[float] = (0.95,),
    y_train: ArrayLike | None = None,
) -> dict[str, float]:
    """All standard metrics of a posterior on test targets, in one dictionary.

    Parameters
    ----------
    posterior : posterior
        Predictive distribution at the n test inputs (``.mean`` and ``.stddev`` of shape (n,)),
        e.g. ``model.posterior(X_test, observation_noise=True)``.
    y_true : array-like of shape (n,)
        Observed test targets.
    levels : sequence of float
        Nominal levels of the central intervals to report. 0.95 is always included, so
        ``coverage_95`` is always present.
    y_train : array-like of shape (n_train,), optional
        Training targets; if given, ``msll`` is reported too.

    Returns
    -------
    dict
        ``rmse``, ``mae``, ``nlpd``, ``crps`` (see the functions of the same names);
        ``coverage_XX`` and ``interval_width_XX`` for each level (XX = 100·level, e.g.
        ``coverage_95``, ``interval_width_99.5``); ``msll`` if ``y_train`` is given; ``n`` the
        number of test points (int).
    """
    if not _is_posterior(posterior):
        raise ValueError(
            f"evaluate expects a posterior with .mean and .stddev as its first argument, got "
            f"{type(posterior).__name__}; note the order evaluate(posterior, y_true). For bare "
            f"arrays call the individual metrics, e.g. nlpd(y_true, mean, std)."
        )
    lv = [check_level(v, "every entry of levels") for v in levels]
    if not any(abs(v - 0.95) < 1e-12 for v in lv):
        lv = [0.95, *lv]
    # Validate once, then pass plain arrays to the individual metrics.
    y, mean, sd = _prepare(y_true, posterior, None)
    out: dict[str, float] = {
        "rmse": rmse(y, mean),
        "mae": mae(y, mean),
        "nlpd": nlpd(y, mean, sd),
        "crps": crps(y, mean, sd),
    }
    for v in lv:
        key = _level_key(v)
        out[f"coverage_{key}"] = coverage(y, mean, sd, level=v)
        out[f"interval_width_{key}"] = interval_width(mean, sd, level=v)
    if y_train is not None:
        out["msll"] = msll(y, mean, sd, y_train=y_train)
    out["n"] = int(y.size)
    return out
