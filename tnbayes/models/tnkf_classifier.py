"""TNKFClassifier: the two-class TNKF (the LS-SVM dual on ±1 labels), with cross-validated hyper-parameters.

The filter, the kernel rows and the time budget are :class:`~tnbayes.models.tnkf.TNKF`'s; this module adds the
label handling (:class:`~tnbayes.models._classifier.BinaryClassifierMixin`) and the LS-SVM cross-validation of
ℓ and γ (:func:`~tnbayes.selection.cross_validation.lssvm_cross_validation_score`).
"""

from __future__ import annotations

from typing import Any

import gpytorch
import torch

from tnbayes.models._classifier import BinaryClassifierMixin
from tnbayes.models.tnkf import TNKF
from tnbayes.selection.cross_validation import lssvm_cross_validation_score

__all__ = ["TNKFClassifier"]


class TNKFClassifier(BinaryClassifierMixin, TNKF):
    """Two-class TNKF: the LS-SVM dual on ±1 labels (targets not standardised), sign for labels.

    Parameters are those of :class:`TNKF` (but ``block_size="auto"`` is 1: block updates lost accuracy on both
    classification problems measured — Adult 0.74 against 0.83 test accuracy with the benchmark's CV settings, the
    two-class CV test 0.78 against more than 0.9 — where R → 0 leaves the B × B innovation system of a block nearly
    singular), plus

    hyperparameter_search : {"marginal_likelihood", "cv"}
        How missing hyper-parameters are chosen. ``"marginal_likelihood"`` (default): those of
        :class:`TNKF`, an exact GP fitted to the ±1 labels. ``"cv"``: an isotropic kernel lengthscale
        and γ by k-fold cross-validated accuracy of the dense LS-SVM on at most ``hyper_max_points``
        training points (see Notes), then ``prior_variance = 1`` and a measurement noise
        ``R = 1e-6 · mean_i ‖c_i‖²``, so that the filter computes that LS-SVM (R → 0). Neither wins
        everywhere (the measurements are in the TNKF model page). The CV often prefers large γ, whose
        ill-conditioned rows need a covariance of higher TT rank than the default cap to be reproduced by
        the filter.
    cv_folds : int
        Folds of the cross-validation.

    Attributes
    ----------
    cv_results_ : list of dict
        One entry per grid point (``lengthscale``, ``gamma``, ``accuracy``, ``mse``) when the CV ran.
    cv_gamma_ : float
        The γ the CV chose (``penalty_ = 1/γ``).

    Notes
    -----
    **Which LS-SVM classifier.** Suykens' textbook classifier solves
    ``[0 yᵀ; y Ω + I/γ] [b; α] = [0; 1]`` with ``Ω_ij = y_i y_j k(x_i, x_j)`` and predicts
    ``sign(Σ α_i y_i k(x, x_i) + b)``. Since ``y_i² = 1``, substituting ``α̃ = y ∘ α`` turns its rows into
    ``(K + I/γ) α̃ = y − b 1`` with ``1ᵀα̃ = 0``: exactly LS-SVM *regression* on the ±1 labels, with the
    same decision function. We therefore stream the rows of ``K + I/γ`` with targets ``y − b`` (as the
    authors' code does, without ``y_i y_j`` factors) — one filter for both tasks, and kernel rows that do
    not depend on the labels (lower TT ranks than label-modulated rows). Like the paper's experiments we
    fix ``b`` instead of solving for it: ``bias="mean"`` (default) uses the mean label; the paper's Adult code
    uses ``b = 0`` (``bias=0.0``) and streams the constraint ``1ᵀα̃ = 0`` (``constraint_row=True``).

    **Cross-validated hyper-parameters** (``hyperparameter_search="cv"``). As LS-SVMlab tunes classifiers,
    by misclassification rate rather than a likelihood: on a random subsample of at most
    ``hyper_max_points`` standardised points, every combination of an isotropic lengthscale ``ℓ ∈ d_med · (0.05, 0.1, 0.2, 0.5, 1, 2)`` (``d_med`` the
    median pairwise distance of the subsample) and ``γ ∈ (0.1, 1, 10, 100)`` (σ_f² = 1) is scored by the
    accuracy of the dense LS-SVM ``(K + I/γ) α = y − b`` over ``cv_folds`` folds, and the best one is
    used; ties (common on noise-free problems such as two spirals, where several settings classify
    every held-out fold correctly) go to the smaller held-out squared error of the decision values on
    the ±1 labels, the LS-SVM's own loss. Given ``lengthscale`` or ``gamma`` values are kept and only
    the others searched (with the given ``outputscale``, else σ_f² = 1). The rows the filter then
    streams are those of that LS-SVM; with R → 0 the untruncated filter over all rows returns its
    solution, and over the first rows the minimum-norm solution of those rows' equations.
    """

    #: isotropic lengthscales searched, as multiples of the median pairwise distance
    CV_LENGTHSCALE_FACTORS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
    #: γ values searched
    CV_GAMMAS = (0.1, 1.0, 10.0, 100.0)

    _auto_block_size = 1
    #: no lost-data check: the targets are class codes, whose decision values may overshoot while their signs are right
    _lost_data_advice = None

    def __init__(self, kernel: str = "se", nu: float = 2.5, *, normalize_y: bool = False,
                 hyperparameter_search: str = "marginal_likelihood", cv_folds: int = 5, **kwargs: Any) -> None:
        super().__init__(kernel, nu, normalize_y=normalize_y, **kwargs)
        self.hyperparameter_search = hyperparameter_search
        self.cv_folds = cv_folds

    def _validate_params(self) -> None:
        super()._validate_params()
        if self.hyperparameter_search not in ("marginal_likelihood", "cv"):
            raise ValueError(f"hyperparameter_search must be 'marginal_likelihood' or 'cv'; "
                             f"got {self.hyperparameter_search!r}.")
        if int(self.cv_folds) < 2:
            raise ValueError(f"cv_folds must be >= 2; got {self.cv_folds}.")

    def _resolve_hyperparameters(self, X: torch.Tensor, y: torch.Tensor) -> None:
        missing = self.lengthscale is None or self.gamma is None
        if self.hyperparameter_search == "marginal_likelihood" or not missing:
            super()._resolve_hyperparameters(X, y)
            return
        num_dims = X.shape[1]
        generator = torch.Generator().manual_seed(int(self.seed))
        rows = torch.randperm(X.shape[0], generator=generator)[: int(self.hyper_max_points)].to(X.device)
        Xs, ys = X[rows].to(torch.float64), y[rows].to(torch.float64)
        distances = torch.cdist(Xs, Xs)
        median = float(distances[torch.triu_indices(len(rows), len(rows), 1, device=X.device).unbind()].median())
        if self.lengthscale is not None:
            given = torch.as_tensor(self.lengthscale, dtype=torch.float64).reshape(-1)
            if given.numel() not in (1, num_dims) or not bool((given > 0).all()):
                raise ValueError(f"lengthscale must be one positive number or one per input ({num_dims}).")
            candidates = [given.expand(num_dims).clone()]
        else:
            candidates = [torch.full((num_dims,), max(median, 1e-12) * f, dtype=torch.float64)
                          for f in self.CV_LENGTHSCALE_FACTORS]
        gammas = [float(self.gamma)] if self.gamma is not None else list(self.CV_GAMMAS)
        folds = torch.arange(len(rows), device=X.device) % int(self.cv_folds)
        results, best = [], None
        self.outputscale_ = float(self.outputscale) if self.outputscale is not None else 1.0
        for lengthscale in candidates:
            self.lengthscale_ = lengthscale
            K = self._make_kernel_module(num_dims).double()
            with torch.no_grad(), gpytorch.settings.lazily_evaluate_kernels(False):
                gram = K(Xs, Xs).to_dense()
            for gamma in gammas:
                accuracy, mse = lssvm_cross_validation_score(gram, ys, folds, gamma, self.bias)
                results.append({"lengthscale": float(lengthscale[0]), "gamma": gamma, "accuracy": accuracy,
                                "mse": mse})
                if best is None or (accuracy, -mse) > (best[2], -best[3]):
                    best = (lengthscale, gamma, accuracy, mse)
        self.cv_results_ = results
        self.lengthscale_ = best[0]
        self.penalty_ = 1.0 / best[1]
        self.cv_gamma_ = best[1]
        self.hyperparameter_source_ = (f"{int(self.cv_folds)}-fold LS-SVM cross-validation on {len(rows)} points "
                                       f"(accuracy {best[2]:.4f})")
        self._gp_outputscale = None
        if self.measurement_noise is not None:
            self.measurement_noise_ = float(self.measurement_noise)
        else:  # R → 0 relative to the rows: the filter then computes the cross-validated LS-SVM
            self.kernel_module_ = self._make_kernel_module(num_dims)
            self.measurement_noise_ = 1e-6 * self._mean_square_row(X)

    def _default_prior_variance(self, X: torch.Tensor) -> float:
        """1 with cross-validated defaults (only R/p_0 matters, and R → 0); else :class:`TNKF`'s rule."""
        return 1.0 if self._gp_outputscale is None else super()._default_prior_variance(X)
