"""RFFNet (Otto & Izbicki): random Fourier features for ARD kernels with learned relevances — the estimators.

The three axes: the basis is :mod:`tnbayes.basis.random_fourier` (``z(x) = √(2/s) cos(Ωᵀ(λ∘x) + b)`` with one
learned relevance λ_j per input; :class:`~tnbayes.basis.random_fourier.RFFNetModule`, ``g(x) = βᵀ z(x)``); (β, λ)
are trained by block proximal Adam on ``(1/n) Σ ℓ(y_i, g(x_i)) + μ‖β‖²`` (:mod:`tnbayes.inference.proximal_adam`,
the paper's Algorithm 1, with early stopping on a validation split).

Going beyond the paper, :class:`RFFNet` is a Bayesian regressor: given the learned features z(·), the output
weights get a Gaussian prior N(0, σ_w² I) and Gaussian noise σ², both chosen by maximising the marginal
likelihood (MacKay's fixed point in the eigenbasis of ZᵀZ, as scikit-learn's ``BayesianRidge``:
:func:`tnbayes.inference.weight_space.bayesian_ridge`), and the closed-form Gaussian posterior over β gives
``posterior(X)`` with variance ``z(x)ᵀ Σ z(x) + σ²``. :class:`RFFNetClassifier` trains the same network with
cross-entropy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from tnbayes._sizes import check_fits_in_memory
from tnbayes._validation import ArrayLike, check_feature_names, check_inputs
from tnbayes._warnings import warn_user
from tnbayes.basis.random_fourier import MIN_FEATURES, RFFNetModule, default_num_features, rff_features  # noqa: F401
from tnbayes.inference.proximal_adam import (  # noqa: F401 (public here before the split)
    LOSSES,
    SCHEDULES,
    TrainingLog,
    loss_and_output_gradient,
    train_block_proximal_adam,
)
from tnbayes.inference.weight_space import BayesianRidgePosterior as LastLayerPosterior  # noqa: F401
from tnbayes.inference.weight_space import accumulate_statistics
from tnbayes.inference.weight_space import bayesian_ridge as bayesian_last_layer
from tnbayes.models._classifier import ClassifierContract, as_class_labels
from tnbayes.models._cpd_base import NOISE_LOWER_BOUND
from tnbayes.models.base import MEAN_ONLY_EXPLAINED, BaseModel
from tnbayes.models.registry import register_model

__all__ = ["RFFNetModule", "RFFNet", "RFFNetClassifier", "TrainingLog", "train_block_proximal_adam",
           "default_num_features", "bayesian_last_layer"]

LAST_LAYER_MEANS = ("bayes", "trained")
#: a classifier whose features' phases move less than this across the training inputs (max_j |λ_j|·range of x_j,
#: radians per unit frequency) warns: its features are nearly constant and it predicts the class frequencies
CONSTANT_FEATURES_PHASE = 0.1


class _RFFNetBase(BaseModel):
    """Parameters, training and relevances shared by :class:`RFFNet` and :class:`RFFNetClassifier`."""

    input_scaling = "standard"  # the paper standardises inputs with training statistics
    _transient_attributes = ("module_",)

    def __init__(self, num_features: int | None = None, *, learning_rate: float = 1e-2, penalty: float = 1e-4,
                 batch_size: int = 32, max_epochs: int = 200, patience: int = 20, validation_fraction: float = 0.1,
                 schedule: str = "batch", initial_relevance: float = 0.0, training_dtype: str = "float32",
                 seed: int = 0, normalize_y: bool = True, dtype: torch.dtype | str | None = None,
                 device: str | torch.device | None = None, verbose: bool = False) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self._keep_parameters(locals())

    # ------------------------------------------------------------------ checks
    def _check_params(self, n: int) -> int:
        def positive_int(name: str, value: Any) -> int:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")
            return int(value)

        for name in ("batch_size", "max_epochs", "patience"):
            positive_int(name, getattr(self, name))
        for name in ("learning_rate",):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}.")
        for name in ("penalty",):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} (μ) must be a finite number >= 0; got {value!r}.")
        if not isinstance(self.initial_relevance, (int, float)) or not math.isfinite(self.initial_relevance):
            raise ValueError(f"initial_relevance must be a finite number; got {self.initial_relevance!r}.")
        if not 0.0 <= float(self.validation_fraction) < 1.0:
            raise ValueError(f"validation_fraction must be in [0, 1); got {self.validation_fraction!r}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}; got {self.schedule!r}.")
        if self.training_dtype not in ("float32", "float64"):
            raise ValueError(f"training_dtype must be 'float32' or 'float64'; got {self.training_dtype!r}.")
        s = default_num_features(n) if self.num_features is None else positive_int("num_features",
                                                                                     self.num_features)
        # ZᵀZ, its eigenvectors, a work copy (float64)
        check_fits_in_memory(3 * s * s * 8, f"num_features = {s} (the last layer's s×s matrices)",
                             "lower num_features", self.device_)
        return s

    # ------------------------------------------------------------------ training
    def _train(self, X: torch.Tensor, targets: torch.Tensor, num_outputs: int, loss: str) -> None:
        n, p = X.shape
        s = self._check_params(n)
        training_dtype = getattr(torch, self.training_dtype)
        generator = torch.Generator().manual_seed(int(self.seed))
        module = RFFNetModule(p, s, num_outputs, initial_relevance=float(self.initial_relevance),
                              generator=generator, dtype=training_dtype).to(X.device)
        Xt = X.to(training_dtype)
        yt = targets.to(training_dtype) if targets.is_floating_point() else targets
        n_val = int(round(float(self.validation_fraction) * n))
        if n_val >= 1 and n - n_val >= 1:
            order = torch.randperm(n, generator=generator).to(X.device)
            val, train = order[:n_val], order[n_val:]
            log = train_block_proximal_adam(
                module, Xt[train], yt[train], loss, learning_rate=float(self.learning_rate),
                penalty=float(self.penalty), batch_size=int(self.batch_size), max_epochs=int(self.max_epochs),
                patience=int(self.patience), schedule=self.schedule, X_val=Xt[val], y_val=yt[val],
                generator=generator, progress=bool(self.verbose))
        else:
            log = train_block_proximal_adam(
                module, Xt, yt, loss, learning_rate=float(self.learning_rate), penalty=float(self.penalty),
                batch_size=int(self.batch_size), max_epochs=int(self.max_epochs), patience=int(self.patience),
                schedule=self.schedule, generator=generator, progress=bool(self.verbose))
        self.module_ = module
        dtype = self.dtype_
        self.relevances_ = module.relevances.detach().to(dtype).clone()
        self.frequencies_ = module.frequencies.detach().to(dtype).clone()
        self.phases_ = module.phases.detach().to(dtype).clone()
        self.coef_ = module.output.weight.detach().to(dtype).clone()  # (num_outputs, s)
        self.num_features_ = s
        self.validation_losses_ = log.validation_losses
        self.training_losses_ = log.training_losses
        self.best_epoch_ = log.best_epoch
        self.epochs_ = log.epochs
        self.n_iter_ = int(log.epochs)
        self.history_ = [float(value) for value in log.training_losses]
        # early stopping (patience epochs without a better validation loss) ended training before max_epochs
        self.converged_ = bool(log.epochs < int(self.max_epochs))
        self.training_seconds_ = log.seconds

    def _relevance_phase(self, X: torch.Tensor) -> float:
        """max_j |λ_j|·(range of x_j) over the scaled training inputs ``X`` (n, p): how far the features' phases
        move across the data per unit frequency (below about 0.1 every feature is nearly constant)."""
        spans = (X.max(dim=0).values - X.min(dim=0).values).to(self.relevances_)
        return float((self.relevances_.abs() * spans).max())

    def _warn_mean_only(self, X: torch.Tensor, finding: str) -> None:
        """Warn (``ConvergenceWarning``) that the fit predicts little more than a constant, with ``finding`` (why)
        and the training that led there: with a few dozen rows an epoch is one or two Adam steps, and early
        stopping on the small validation split can end training before λ leaves its start at 0."""
        n = X.shape[0]
        held_out = int(round(float(self.validation_fraction) * n))
        held_out = held_out if 1 <= held_out < n else 0  # as _train splits
        steps = math.ceil((n - held_out) / int(self.batch_size))
        stopped = f"best validation loss at epoch {self.best_epoch_}" if held_out else "no validation split"
        warn_user(
            f"{type(self).__name__}: {finding}. Training ran {self.epochs_} epochs of {steps} Adam "
            f"step{'s' if steps != 1 else ''} each ({stopped}) and left the "
            f"relevances at a largest |λ_j|·(range of input j) of {self._relevance_phase(X):.2g}. If y depends on X, "
            f"start the relevances away from 0 (initial_relevance=1.0) or train longer (larger patience and "
            f"max_epochs).", ConvergenceWarning)

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        if hasattr(self, "classes_"):
            self.classes_ = np.asarray(self.classes_)
        training_dtype = getattr(torch, self.training_dtype)
        p, s = self.frequencies_.shape
        module = RFFNetModule(p, s, self.coef_.shape[0], dtype=training_dtype)
        with torch.no_grad():
            module.relevances.copy_(self.relevances_)
            module.frequencies.copy_(self.frequencies_)
            module.phases.copy_(self.phases_)
            module.output.weight.copy_(self.coef_)
        self.module_ = module.to(self.device_)

    def _features(self, X: torch.Tensor, chunk_size: int = 8192) -> torch.Tensor:
        """z(λ∘x) of scaled inputs in the model dtype → (n, s)."""
        return torch.cat([rff_features(X[i:i + chunk_size], self.relevances_, self.frequencies_, self.phases_)
                          for i in range(0, X.shape[0], chunk_size)]) if X.shape[0] else \
            X.new_zeros(0, self.phases_.shape[0])

    # ------------------------------------------------------------------ relevances
    @property
    def scaled_relevances_(self) -> np.ndarray:
        """|λ| min–max scaled to [0, 1] (the paper's feature importance) → shape (p,)."""
        self._check_fitted("scaled_relevances_")
        magnitude = self.relevances_.abs().cpu().numpy()
        spread = magnitude.max() - magnitude.min()
        return np.ones_like(magnitude) if spread == 0 else (magnitude - magnitude.min()) / spread

    @property
    def feature_importances_(self) -> np.ndarray:
        """Alias of :attr:`scaled_relevances_` (scikit-learn's name) → shape (p,)."""
        return self.scaled_relevances_

    def plot_relevances(self, ax: Any = None, *, feature_names: list[str] | None = None,
                        scaled: bool = True) -> Any:
        """Stem plot of the relevances per input.

        Parameters
        ----------
        ax : matplotlib Axes, optional
        feature_names : list of str, optional
            Tick labels (default 1 … p).
        scaled : bool
            Plot the min–max scaled |λ| (default) or the raw λ.

        Returns
        -------
        matplotlib Axes
        """
        from tnbayes.plotting import plot_relevances

        self._check_fitted("plot_relevances")
        values = self.scaled_relevances_ if scaled else self.relevances_.cpu().numpy()
        return plot_relevances(values, feature_names=feature_names, ylabel="scaled |λ|" if scaled else "λ", ax=ax)


class RFFNet(_RFFNetBase):
    """RFFNet regressor with a Bayesian last layer.

    ``RFFNet().fit(X, y)`` standardises X and y, trains (β, λ) by block proximal Adam with early stopping on
    a 10% validation split (the paper's defaults), then fits a Gaussian posterior over the output weights of the
    learned features on all rows, with prior and noise variances by marginal likelihood.

    Parameters
    ----------
    num_features : int, optional
        s, the number of random features. Default ``⌊√n ln n⌋`` (at least 16).
    learning_rate : float
        Adam step size of both blocks. Default 1e-2, not the paper's package default 5e-4: the paper tunes it
        on a grid {1e-5, …, 1e-2} for every experiment, and at 5e-4 the relevances start at 0 so slowly that
        early stopping (patience 20) fires before they move (SE1, n = 5000: test MSE 0.080 = var(y) at 5e-4,
        0.071 at 1e-2).
    penalty : float
        μ of μ‖β‖² (default 1e-4), on standardised y: the ridge strength on the output weights, as ``penalty`` is in
        every tnbayes model. The training loss is a mean over rows, so μ is per row (λ/n in the units of
        :class:`~tnbayes.CPDKernelMachine`'s ``penalty``, like :class:`~tnbayes.QTKM`'s with ``penalty_per_sample``).
    batch_size : int
        Mini-batch size (default 32).
    max_epochs : int
        At most this many epochs (default 200).
    patience : int
        Stop after this many epochs without a better validation loss (default 20).
    validation_fraction : float
        Share of the training rows held out for early stopping (default 0.1; 0 trains on all rows for
        ``max_epochs`` epochs).
    schedule : {"batch", "epoch"}
        Alternate the β and λ blocks per mini-batch (the paper, default) or per epoch (the authors' code).
    initial_relevance : float
        Initial λ_j (the paper: 0).
    last_layer_mean : {"bayes", "trained"}
        Predict with the posterior mean of β (default) or with the β found by training (the paper's
        predictor); the variance is the posterior's in both cases.
    training_dtype : {"float32", "float64"}
        Dtype of the stochastic training (the last layer is always solved in ``dtype``).
    seed : int
        Seed of Ω, b, the initial β, the validation split and the shuffling.
    normalize_y, dtype, device, verbose : see :class:`~tnbayes.models.base.BaseModel`

    Attributes
    ----------
    relevances_ : torch.Tensor of shape (p,)
        Raw λ (on standardised inputs).
    scaled_relevances_ : numpy.ndarray of shape (p,)
        |λ| min–max scaled to [0, 1].
    coef_ : torch.Tensor of shape (1, s)
        Trained output weights β.
    weight_mean_ : torch.Tensor of shape (s,)
        Posterior mean of β (standardised y).
    weight_prior_variance_ : float
        σ_w², by marginal likelihood.
    noise_variance_ : float
        σ² (standardised y), by marginal likelihood.
    log_marginal_likelihood_ : float
    validation_losses_, training_losses_ : list of float
        Per epoch.
    best_epoch_, epochs_ : int
    n_iter_ : int
        Epochs run (``epochs_``).
    history_ : list of float of length n_iter_
        Mean training loss of every epoch (``training_losses_``).
    converged_ : bool
        Whether early stopping (``patience`` epochs without a better validation loss) ended training before
        ``max_epochs`` (never without a validation split).
    training_seconds_ : float

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        From ``fit`` when the last layer's mean explains under :data:`MEAN_ONLY_EXPLAINED` of the variation of y: the
        model predicts about the mean (with a few dozen rows, early stopping can end training before the relevances
        leave 0); the message names the remedy.
    """

    def __init__(self, num_features: int | None = None, *, learning_rate: float = 1e-2, penalty: float = 1e-4,
                 batch_size: int = 32, max_epochs: int = 200, patience: int = 20, validation_fraction: float = 0.1,
                 schedule: str = "batch", initial_relevance: float = 0.0, last_layer_mean: str = "bayes",
                 training_dtype: str = "float32", seed: int = 0, normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False) -> None:
        super().__init__(num_features, learning_rate=learning_rate, penalty=penalty, batch_size=batch_size,
                         max_epochs=max_epochs, patience=patience, validation_fraction=validation_fraction,
                         schedule=schedule, initial_relevance=initial_relevance, training_dtype=training_dtype,
                         seed=seed, normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self.last_layer_mean = last_layer_mean

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:
        if self.last_layer_mean not in LAST_LAYER_MEANS:
            raise ValueError(f"last_layer_mean must be one of {LAST_LAYER_MEANS}; got {self.last_layer_mean!r}.")
        self._train(X, y.unsqueeze(-1), 1, "squared_error")
        stats = accumulate_statistics(self._features, X, y, 8192)
        posterior = bayesian_last_layer(stats.gram, stats.rhs, float(stats.yy), stats.n)
        # the share of y's variation about its mean that the last layer's mean explains: 1 − ‖y − Zm‖² / ‖y − ȳ‖²
        spread = float(stats.yy) - float(stats.sum_y) ** 2 / stats.n
        explained = 1.0 - posterior.residual_sum_of_squares / spread if spread > 1e-12 * float(stats.yy) else 1.0
        if explained < MEAN_ONLY_EXPLAINED:
            self._warn_mean_only(X, f"the Bayesian last layer explains {explained:.1%} of the variance of y (weight "
                                    f"prior variance {posterior.prior_variance:.3g} by marginal likelihood): the model "
                                    f"predicts about the mean of y")
        self.weight_mean_ = posterior.mean
        self.weight_eigenvectors_ = posterior.eigenvectors
        self.weight_covariance_eigenvalues_ = posterior.covariance_eigenvalues
        self.weight_prior_variance_ = posterior.prior_variance
        # floored as the other regressors' noise (constant targets would otherwise give a zero predictive variance)
        self.noise_variance_ = max(float(posterior.noise_variance), NOISE_LOWER_BOUND)
        self.log_marginal_likelihood_ = posterior.log_marginal_likelihood
        self._report(f"{self.num_features_} random Fourier features, relevances trained for {self.epochs_} epochs "
                     f"(best validation loss at epoch {self.best_epoch_}); last layer by marginal likelihood: "
                     f"weight prior variance {self.weight_prior_variance_:.3g}, noise variance "
                     f"{self.noise_variance_:.3g} (standardised scale).")

    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        z = self._features(X)
        weights = self.weight_mean_ if self.last_layer_mean == "bayes" else self.coef_[0]
        mean = z @ weights
        rotated = (z @ self.weight_eigenvectors_) * self.weight_covariance_eigenvalues_.sqrt()
        if full_covariance:
            return mean, rotated @ rotated.T
        return mean, rotated.square().sum(-1)

    def predict_network(self, X: ArrayLike) -> np.ndarray:
        """The trained network's prediction βᵀz(λ∘x) in the units of y (the paper's predictor) → shape (n,)."""
        self._check_fitted("predict_network")
        z = self._features(self._scaled_inputs(X))
        out = self.y_scaler_.inverse_transform(z @ self.coef_[0])
        return out.detach().cpu().numpy()


class RFFNetClassifier(ClassifierContract, _RFFNetBase):
    """RFFNet classifier: cross-entropy over C classes (softmax outputs), same training as :class:`RFFNet`.

    Parameters are those of :class:`RFFNet` without ``last_layer_mean`` (and ``normalize_y`` is unused). ``fit`` warns
    (``sklearn.exceptions.ConvergenceWarning``) when the features' phases move less than
    :data:`CONSTANT_FEATURES_PHASE` across the training inputs: the model then predicts the class frequencies.

    Attributes
    ----------
    classes_ : numpy.ndarray of shape (C,)
    relevances_ : torch.Tensor of shape (p,)
    coef_ : torch.Tensor of shape (C, s)
    """

    def fit(self, X: ArrayLike, y: ArrayLike) -> "RFFNetClassifier":
        """Fit on class labels of any type.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            At least two distinct labels.

        Returns
        -------
        self
        """
        labels = as_class_labels(y)
        classes, index = np.unique(labels, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"Classifier can't train when only one class is present: RFFNetClassifier needs at least "
                             f"two classes; y has {classes.size} class.")
        Xt = check_inputs(X, dtype=self.dtype_, device=self.device_)
        if Xt.shape[0] != labels.shape[0]:
            raise ValueError(f"X and y have inconsistent numbers of samples: X has {Xt.shape[0]} rows, "
                             f"y has {labels.shape[0]} entries.")
        check_feature_names(self, X, reset=True)
        from tnbayes.preprocessing import make_input_scaler

        self.x_scaler_ = make_input_scaler(self.input_scaling).fit(Xt)
        self.n_features_in_ = None
        targets = torch.as_tensor(index, dtype=torch.long, device=Xt.device)
        scaled = self.x_scaler_.transform(Xt)
        self._train(scaled, targets, int(classes.size), "cross_entropy")
        phase = self._relevance_phase(scaled)
        if phase < CONSTANT_FEATURES_PHASE:
            self._warn_mean_only(scaled, f"every random feature is nearly constant over the training inputs "
                                         f"(phase range {phase:.2g} < {CONSTANT_FEATURES_PHASE:g}): the model predicts "
                                         f"about the training class frequencies")
        self.classes_ = classes
        self.n_features_in_ = int(Xt.shape[1])
        self.n_train_ = int(Xt.shape[0])
        return self

    def _logits(self, X: ArrayLike) -> np.ndarray:
        """Logits βᵀz(λ∘x) → shape (n, C)."""
        self._check_fitted("decision_function")
        return (self._features(self._scaled_inputs(X)) @ self.coef_.T).detach().cpu().numpy()

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Logits βᵀz(λ∘x) → shape (n, C); with two classes the logit of ``classes_[1]`` against
        ``classes_[0]``, shape (n,) (scikit-learn's convention)."""
        logits = self._logits(X)
        return logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Softmax class probabilities → shape (n, C), columns in the order of ``classes_``."""
        self._check_fitted("predict_proba")
        return torch.softmax(torch.as_tensor(self._logits(X)), dim=-1).numpy()

    def predict(self, X: ArrayLike, return_std: bool = False) -> np.ndarray:
        """Most probable class → shape (n,), values from ``classes_``."""
        if return_std:
            raise ValueError("return_std is for regression; use predict_proba for class probabilities.")
        self._check_fitted("predict")
        best = self._logits(X).argmax(axis=1)
        return self.classes_[best]

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Accuracy."""
        return float(np.mean(self.predict(X) == as_class_labels(y)))

    def posterior(self, X: ArrayLike, observation_noise: bool = True, *, full_covariance: bool = False):
        """Not defined for the classifier (no Gaussian predictive); use :meth:`predict_proba`."""
        raise NotImplementedError("RFFNetClassifier has no Gaussian posterior; use predict_proba(X). "
                                  "RFFNet (the regressor) has posterior(X) from its Bayesian last layer.")


register_model("rffnet", RFFNet)
