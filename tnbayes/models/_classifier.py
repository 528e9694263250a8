"""Two-class classification on top of a Gaussian regression model (LS-SVM / least-squares style).

Part of the estimator contract (models/), not of an axis: any regressor becomes a classifier.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target

from tnbayes._validation import ArrayLike
from tnbayes._warnings import warn_user

__all__ = ["BinaryClassifierMixin", "ClassifierContract", "as_class_labels"]


def as_class_labels(y: ArrayLike) -> np.ndarray:
    """Class labels as a 1-D numpy array; a column vector (n, 1) is accepted with scikit-learn's warning.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels of any type scikit-learn takes for classes (integers, strings, booleans), not real numbers.

    Returns
    -------
    numpy.ndarray of shape (n_samples,)
    """
    if y is None:
        raise ValueError("This classifier requires y to be passed, but the target y is None: call fit(X, y).")
    labels = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if labels.ndim == 2 and labels.shape[1] == 1:
        warn_user("A column-vector y was passed when a 1d array was expected. Please change the shape of y to "
                  "(n_samples,), for example using ravel().", DataConversionWarning)
        labels = labels[:, 0]
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"y must be a non-empty 1-D array of class labels; got shape {labels.shape}.")
    if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
        raise ValueError("y contains NaN or infinite labels; remove those rows.")
    if type_of_target(labels, input_name="y") == "continuous":
        raise ValueError("Unknown label type: continuous. y holds real numbers, not class labels; use a regressor "
                         "for a continuous target, or pass the classes as integers or strings.")
    return labels


class ClassifierContract(ClassifierMixin):
    """scikit-learn's classifier contract for a class built on a tnbayes regressor base.

    Put it before the regressor in the bases: the tags then say "classifier" (``is_classifier`` is true,
    cross-validation stratifies) and carry no regressor tags.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags = None
        return tags


class BinaryClassifierMixin(ClassifierContract):
    """Turns a tnbayes regressor into a two-class classifier by regression on ±1 labels.

    Put it first in the bases (``class C(BinaryClassifierMixin, Regressor)``). ``fit`` maps any two
    labels to ±1 (the larger sorted label is +1) and fits the regressor; ``predict`` returns the sign
    of the latent mean as the original labels; ``predict_proba`` is ``Φ(μ/σ)`` from the Gaussian
    predictive (a probit read-out of a least-squares classifier, not a likelihood-based one).

    Attributes
    ----------
    classes_ : numpy.ndarray of shape (2,)
        The labels; ``classes_[1]`` is the positive class (+1).
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X: ArrayLike, y: ArrayLike) -> "BinaryClassifierMixin":
        """Fit on two-class labels of any type (numbers, strings, booleans).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Exactly two distinct labels; the larger (sorted) one is the positive class.

        Returns
        -------
        self
        """
        labels = as_class_labels(y)
        classes = np.unique(labels)
        if classes.size != 2:  # worded so scikit-learn's checks recognise "1 class" and a multiclass target
            what = "Only binary classification is supported. The type of the target is multiclass" \
                if classes.size > 2 else "Classifier can't train when only one class is present"
            raise ValueError(f"{what}: {type(self).__name__} needs exactly two classes; y has {classes.size} "
                             f"class{'es' if classes.size > 1 else ''} "
                             f"({classes[:5].tolist()}{' …' if classes.size > 5 else ''}).")
        signs = np.where(labels == classes[1], 1.0, -1.0)
        super().fit(X, signs)
        self.classes_ = classes
        return self

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Latent mean f(x) on the ±1 scale → shape (n,)."""
        self._check_fitted("decision_function")
        return self.posterior(X, observation_noise=False).mean.detach().cpu().numpy()

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities → shape (n, 2), columns in the order of ``classes_``."""
        self._check_fitted("predict_proba")
        post = self.posterior(X, observation_noise=True)
        mean = post.mean.detach().cpu().numpy()
        std = post.stddev.detach().cpu().numpy()
        from scipy.stats import norm

        positive = norm.cdf(mean / np.maximum(std, 1e-300))
        return np.stack([1.0 - positive, positive], axis=1)

    def predict(self, X: ArrayLike, return_std: bool = False) -> np.ndarray:
        """Predicted labels (sign of the latent mean) → shape (n,), values from ``classes_``."""
        if return_std:
            raise ValueError("return_std is for regression; use predict_proba for class probabilities.")
        self._check_fitted("predict")
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Accuracy (scikit-learn's classifier convention)."""
        return float(np.mean(self.predict(X) == as_class_labels(y)))

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        super()._after_load(extra)
        self.classes_ = np.asarray(self.classes_)
