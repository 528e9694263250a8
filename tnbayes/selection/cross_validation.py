"""Cross-validation scores of exact kernel machines, for the models whose hyper-parameters are chosen by held-out
error rather than by marginal likelihood.

* :func:`select_krr_hyperparameters` — λ and the Fourier period P of :class:`~tnbayes.QTKM` /
  :class:`~tnbayes.TKM` by k-fold CV of *exact* kernel ridge regression with the kernel their features span;
* :func:`two_valued_columns` and :func:`select_binary_column_width` — then the width of their two-valued columns,
  by the same CV;
* :func:`lssvm_cross_validation_score` — the k-fold score of a dense LS-SVM classifier
  (:class:`~tnbayes.TNKFClassifier`'s ``hyperparameter_search="cv"``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from tnbayes.basis import FourierPolynomialFeatures

__all__ = ["DEFAULT_BINARY_WIDTH_GRID", "DEFAULT_PENALTY_GRID", "DEFAULT_PERIOD_GRID", "PAPER_PENALTY_GRID",
           "KRRSelection", "lssvm_cross_validation_score", "select_binary_column_width", "select_krr_hyperparameters",
           "two_valued_columns"]

#: λ grid of the paper's cross-validation, for its raw features (per-sample convention: penalty N·λ‖W‖²)
PAPER_PENALTY_GRID = tuple(10.0 ** k for k in range(-5, 6))
#: default λ grid for the normalised features (k(x, x) = 1): the paper's grid divided by M^D ranges from
#: 10⁻¹² (yacht, D = 6) to 10⁻⁸ (wine, D = 11) at its lower end, so the default reaches 10⁻¹⁴ … 10²
DEFAULT_PENALTY_GRID = tuple(10.0 ** k for k in range(-14, 3))
#: period grid of the paper's cross-validation (inputs scaled to [−0.5, 0.5])
DEFAULT_PERIOD_GRID = (1.25, 1.5, 2.0, 3.0, 5.0, 9.0, 17.0, 33.0, 65.0)
#: widths, relative to the other inputs', tried for columns with exactly two distinct values (0/1 and one-hot
#: indicators): at the full width their two values sit a whole scaled unit apart, where the Fourier kernel of the
#: short periods that suit continuous inputs has all but decorrelated them (each level is then fitted apart from
#: the other); narrower, the two levels share the fit and differ by a smooth offset
DEFAULT_BINARY_WIDTH_GRID = (1.0, 0.125, 0.03125)


@dataclass
class KRRSelection:
    """Result of :func:`select_krr_hyperparameters`.

    Attributes
    ----------
    penalty : float
        The chosen λ (per-sample convention).
    period : float or None
        The chosen period (None for polynomial features).
    cv_mse : float
        Its mean cross-validated mean squared error.
    noise_variance : float
        RSS/(n − dof) of exact KRR with the chosen values on the whole subsample (dof = tr S, S = K(K + nλI)⁻¹);
        RSS/‖I − Re S‖_F² when the fit interpolates (n − dof < 1), where the first is round-off over round-off.
    num_points : int
        Size of the subsample.
    table : list of dict
        Every (period, penalty, cv_mse) tried.
    """

    penalty: float
    period: float | None
    cv_mse: float
    noise_variance: float
    num_points: int
    table: list[dict[str, float]] = field(default_factory=list)


def _krr_spectral(kernel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    kernel = 0.5 * (kernel + kernel.mH)
    eigenvalues, eigenvectors = torch.linalg.eigh(kernel)
    return eigenvalues.clamp_min(0.0), eigenvectors


def select_krr_hyperparameters(X: torch.Tensor, y: torch.Tensor, *, num_basis: int, feature_map: str = "fourier",
                               penalties: Sequence[float] = DEFAULT_PENALTY_GRID,
                               periods: Sequence[float] = DEFAULT_PERIOD_GRID, folds: int = 3,
                               max_points: int = 1000, seed: int = 0, normalize: bool = True) -> KRRSelection:
    """λ (and P) by k-fold cross-validation of *exact* kernel ridge regression (the QTKM paper's protocol).

    The kernel is the one the (unconstrained) features span, ``k(x, x') = Π_d ψ(x_d)ᵀ conj(ψ(x'_d))``, so
    exact KRR is the full-rank limit of the CPD models. Objective ``‖y − f‖² + n·λ‖w‖²`` per fold
    (n = the fold's training size); each (P, fold) needs one eigendecomposition, after which every λ is
    cheap. λ (and P) minimise the CV MSE, unless exact KRR with them interpolates the subsample
    (n − tr S < 1): the CV MSE is then flat in λ (many inputs make the product kernel nearly diagonal), and the
    one-standard-error rule picks the largest λ within one standard error of the minimum.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
        Scaled inputs (in [−0.5, 0.5] for the default period grid).
    y : torch.Tensor of shape (N,)
    num_basis : int
        M.
    feature_map : {"fourier", "polynomial"}
    penalties, periods : sequence of float
        Grids (``periods`` is ignored for polynomials).
    folds : int
    max_points : int
        Random subsample size (the cost is O(max_points³) per period and fold).
    seed : int
    normalize : bool
        Use the normalised features ψ/√M (k(x, x) = 1), as the models do by default.

    Returns
    -------
    KRRSelection
    """
    if int(folds) < 2:
        raise ValueError(f"folds must be >= 2; got {folds!r}.")
    if len(penalties) == 0 or any(not math.isfinite(float(p)) or float(p) <= 0 for p in penalties):
        raise ValueError(f"penalties must be a non-empty grid of positive numbers; got {list(penalties)!r}.")
    generator = torch.Generator().manual_seed(int(seed))
    n_total = X.shape[0]
    if n_total < 2 * int(folds):
        raise ValueError(f"cross-validation with {folds} folds needs at least {2 * int(folds)} points; got {n_total}. "
                         f"Give penalty (and period) explicitly for tiny data sets.")
    order = torch.randperm(n_total, generator=generator)[: int(max_points)].to(X.device)
    Xs, ys = X[order], y[order]
    n = Xs.shape[0]
    fold_of = torch.arange(n, device=X.device) % int(folds)
    period_grid: list[float | None] = [float(p) for p in periods] if feature_map == "fourier" else [None]
    table: list[dict[str, float]] = []
    candidates: list[tuple[float, float, float, float | None]] = []  # (cv_mse, its standard error, λ, P)
    for period in period_grid:
        features = FourierPolynomialFeatures(X.shape[1], num_basis, feature_map, period, quantized=False,
                                             normalize=normalize)
        kernel = features.kernel(Xs, Xs)
        squared = torch.zeros(len(penalties), n, dtype=torch.float64)  # per-point squared CV errors
        for fold in range(int(folds)):
            train, valid = fold_of != fold, fold_of == fold
            eigenvalues, eigenvectors = _krr_spectral(kernel[train][:, train])
            projected = eigenvectors.mH @ ys[train].to(kernel.dtype)
            cross = kernel[valid][:, train] @ eigenvectors
            n_train = int(train.sum())
            for i, penalty in enumerate(penalties):
                prediction = (cross @ (projected / (eigenvalues + n_train * float(penalty)))).real
                squared[i, valid.cpu()] = ((prediction - ys[valid]) ** 2).to(torch.float64).cpu()
        errors, standard_errors = squared.mean(dim=1), squared.std(dim=1) / math.sqrt(n)
        for i, penalty in enumerate(penalties):
            table.append({"period": float("nan") if period is None else period, "penalty": float(penalty),
                          "cv_mse": float(errors[i])})
            candidates.append((float(errors[i]), float(standard_errors[i]), float(penalty), period))
    best = min(candidates, key=lambda c: c[0])  # the first of equal minima

    def residual(penalty: float, period: float | None) -> tuple[torch.Tensor, torch.Tensor, float, float]:
        """The smoother's spectrum, 1 − s = nλ/(e + nλ) (no cancellation at s ≈ 1), RSS and n − tr S."""
        features = FourierPolynomialFeatures(X.shape[1], num_basis, feature_map, period, quantized=False,
                                             normalize=normalize)
        eigenvalues, eigenvectors = _krr_spectral(features.kernel(Xs, Xs))
        complement = (n * penalty / (eigenvalues + n * penalty)).to(eigenvectors.dtype)
        rss = float(((eigenvectors @ (complement * (eigenvectors.mH @ ys.to(eigenvectors.dtype)))).real ** 2).sum())
        return eigenvectors, complement, rss, float(complement.real.sum())

    eigenvectors, complement, rss, residual_dof = residual(best[2], best[3])
    if residual_dof < 1.0:
        # The fit interpolates the subsample. With many inputs the isotropic product kernel is nearly diagonal:
        # no λ then predicts measurably better than another, the CV MSE is flat in λ, and its minimum falls on
        # the smallest λ — a choice the data do not support, under which a CPD fit with more weights than rows
        # interpolates too. Resolve the plateau by the one-standard-error rule (Hastie, Tibshirani & Friedman,
        # The Elements of Statistical Learning, §7.10): the largest λ whose CV MSE is within one standard error
        # of the minimum (at its best period). A fit that does not interpolate keeps the minimum.
        within = [c for c in candidates if c[0] <= best[0] + best[1]]
        largest = max(c[2] for c in within)
        best = min((c for c in within if c[2] == largest), key=lambda c: c[0])
        eigenvectors, complement, rss, residual_dof = residual(best[2], best[3])
    cv_mse, _, penalty, period = best
    if residual_dof < 1.0:
        # still interpolating: RSS/(n − tr S) would be round-off over round-off. For white noise
        # E‖(I − Re S)ε‖² = σ² ‖I − Re S‖_F², a denominator that stays positive
        residual_operator = ((eigenvectors * complement) @ eigenvectors.mH).real
        residual_dof = float((residual_operator ** 2).sum())
    noise = rss / residual_dof if residual_dof > 0 else cv_mse
    return KRRSelection(penalty, period, cv_mse, noise, n, table)


def two_valued_columns(X: torch.Tensor, extremes: torch.Tensor | None = None) -> list[int]:
    """The columns of ``X`` with exactly two distinct values, each at the column's minimum or maximum.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
    extremes : torch.Tensor of shape (2, D), optional
        The minimum and maximum of each column over all the data when ``X`` is a sample of it (chunked fits): a
        column counts only if its two values are those, so a rare third value outside the sample's two does.

    Returns
    -------
    list of int
    """
    low, high = X.amin(dim=0), X.amax(dim=0)
    two = ((X == low) | (X == high)).all(dim=0) & (high > low)
    if extremes is not None:
        two &= (low == extremes[0]) & (high == extremes[1])
    return [int(d) for d in torch.nonzero(two).reshape(-1)]


def select_binary_column_width(X: torch.Tensor, y: torch.Tensor, selection: KRRSelection, columns: Sequence[int], *,
                               num_basis: int, widths: Sequence[float] = DEFAULT_BINARY_WIDTH_GRID,
                               penalties: Sequence[float] = DEFAULT_PENALTY_GRID, folds: int = 3,
                               max_points: int = 1000, seed: int = 0,
                               normalize: bool = True) -> tuple[float, KRRSelection]:
    """The width of the two-valued ``columns`` of ``X`` by the CV of :func:`select_krr_hyperparameters` at the period
    ``selection`` chose (λ re-chosen from ``penalties``), after P and λ (Fourier features).

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
        Scaled inputs (in [−0.5, 0.5]), as given to :func:`select_krr_hyperparameters`.
    y : torch.Tensor of shape (N,)
    selection : KRRSelection
        The CV's choice at the full width; its ``cv_mse`` is the width-1 score (after the one-standard-error rule
        when that rule moved λ, so a narrower width competes with the score the CV kept, not with its minimum).
    columns : sequence of int
        The columns to narrow (:func:`two_valued_columns`).
    num_basis : int
        M, the Fourier features per input.
    widths : sequence of float
        Widths in (0, 1] relative to the other columns'; width 1 (the selection's own) is always a candidate.
    penalties : sequence of float
        The λ grid (per sample), as given to :func:`select_krr_hyperparameters`.
    folds, max_points, seed, normalize
        As in :func:`select_krr_hyperparameters` (the same seed draws the same subsample and folds).

    Returns
    -------
    width : float
        The width with the lowest CV MSE (1 when no other is lower, when ``columns`` is empty, or when every column
        is two-valued: narrowing them all is a longer period, which the period grid already tries).
    selection : KRRSelection
        The CV's choice at that width.
    """
    best, best_width = selection, 1.0
    if not columns or len(columns) == X.shape[1] or selection.period is None:
        return best_width, best
    for width in sorted({float(w) for w in widths} - {1.0}, reverse=True):
        column_widths = torch.ones(X.shape[1], dtype=X.dtype, device=X.device)
        column_widths[list(columns)] = width
        candidate = select_krr_hyperparameters(X * column_widths, y, num_basis=num_basis, penalties=penalties,
                                               periods=[selection.period], folds=folds, max_points=max_points,
                                               seed=seed, normalize=normalize)
        if candidate.cv_mse < best.cv_mse:
            best, best_width = candidate, width
    return best_width, best


def lssvm_cross_validation_score(gram: torch.Tensor, targets: torch.Tensor, folds: torch.Tensor, gamma: float,
                                 bias: float | str = "mean") -> tuple[float, float]:
    """K-fold score of the dense LS-SVM classifier ``(K + I/γ) α = y − b`` on ±1 targets.

    Parameters
    ----------
    gram : torch.Tensor of shape (n, n)
        Kernel matrix of the n points.
    targets : torch.Tensor of shape (n,)
        ±1 labels.
    folds : torch.Tensor of shape (n,), int
        Fold of each point; each fold is predicted from the others.
    gamma : float
        γ > 0.
    bias : "mean" or float
        b: the mean label of each fold's training points, or a fixed value.

    Returns
    -------
    accuracy : float
        Share of points whose held-out decision value has the sign of their label.
    mse : float
        Mean squared error of the held-out decision values against the labels (the LS-SVM's own loss).
    """
    correct, squared_error = 0, 0.0
    for fold in torch.unique(folds):
        train, test = folds != fold, folds == fold
        b = float(targets[train].mean()) if bias == "mean" else float(bias)
        system = gram[train][:, train] + torch.eye(int(train.sum()), dtype=gram.dtype, device=gram.device) / gamma
        alpha = torch.linalg.solve(system, targets[train] - b)
        decision = gram[test][:, train] @ alpha + b
        correct += int((torch.sign(decision) == torch.sign(targets[test])).sum())
        squared_error += float(((decision - targets[test]) ** 2).sum())
    return correct / targets.numel(), squared_error / targets.numel()
