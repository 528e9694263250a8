"""The estimator contract every tnbayes model follows.

``fit(X, y) -> self``, ``predict(X, return_std=False)``, ``posterior(X, observation_noise=True)``,
``save(path)`` / ``load(path)``. Subclasses only implement the model-specific pieces on *scaled*
tensors (``_fit`` and ``_latent``); validation, scaling, unit conversion, persistence and the
fitted-check live here, once.

The model file (a ``torch.save`` file of tensors, strings and numbers only, read back with
``torch.load(weights_only=True)``, checksummed) is written and read by :mod:`tnbayes._model_file`; every damaged
or edited file raises :class:`~tnbayes.ModelFileError` at load time. Model classes are found by name through
:mod:`tnbayes.models.registry`.
"""

from __future__ import annotations

import inspect
import math
import os
import time
from typing import Any, ClassVar

import numpy as np
import sklearn.exceptions
import torch
from sklearn.base import BaseEstimator, RegressorMixin

from tnbayes._deprecation import apply_renamed_parameters
from tnbayes._model_file import FORMAT_VERSION, ModelFileError, read_model_file, restore_model, write_model_file
from tnbayes._validation import (
    ArrayLike,
    check_feature_names,
    check_inputs,
    check_targets,
    check_X_y,
    resolve_device,
    resolve_dtype,
    too_few_samples_message,
)
from tnbayes._version import __version__
from tnbayes.data import ChunkedData, StreamedRows, as_chunked, is_chunked, summarize
from tnbayes.distributed import check_distributed
from tnbayes.models.registry import chunked_fit_models, model_class, register_model_class
from tnbayes.posterior import GaussianPosterior
from tnbayes.preprocessing import make_input_scaler, make_target_scaler
from tnbayes.selection.input_box import apply_input_box, prediction_box

__all__ = ["BaseModel", "NotFittedError", "ModelFileError", "load_model", "FORMAT_VERSION",
           "MEAN_ONLY_EXPLAINED"]

#: a regressor whose fitted mean explains less than this share of the variation of y warns that it predicts about
#: the mean of y (RFFNet's Bayesian last layer, the CPD models' ALS)
MEAN_ONLY_EXPLAINED = 0.01


class NotFittedError(sklearn.exceptions.NotFittedError, RuntimeError):
    """Raised when a model is used before ``fit``.

    A :class:`sklearn.exceptions.NotFittedError` (so scikit-learn's ``check_is_fitted`` and estimator checks
    recognise it; that makes it a ``ValueError`` and ``AttributeError`` too) and, as before, a ``RuntimeError``.
    """


class BaseModel(RegressorMixin, BaseEstimator):
    """Base class of tnbayes estimators (regression).

    A scikit-learn regressor (``BaseEstimator`` and ``RegressorMixin``, with tags), so it works in ``Pipeline``,
    ``GridSearchCV``, ``cross_val_score`` and ``clone``; the internals stay torch.

    Parameters common to all models
    -------------------------------
    normalize_y : bool
        Standardise targets with the training mean and standard deviation (predictions are always
        returned in the original units).
    dtype : torch.dtype or {"float64", "float32"}, optional
        Computation dtype; float64 by default.
    device : str or torch.device, optional
        ``"cpu"`` (default) or ``"cuda"``.
    verbose : bool
        Show progress bars and messages during ``fit``.

    Attributes
    ----------
    fit_report_ : list of str
        The choices ``fit`` made from the data (hyper-parameters, basis sizes, ranks, structure) and why, one
        sentence each; printed as they are made when ``verbose=True``.
    n_iter_ : int
        Iterations of the fit's main loop: ALS sweeps (CPD models, QTKM, TKM, FL), optimiser runs (ExactGP),
        (M, c) rounds of ML-II (HilbertGP), epochs (RFFNet), filter updates (TNKF: rows; TTKalmanGP: batches),
        optimiser steps (SVGP).
    history_ : list of float of length n_iter_
        The loop's objective after each of those iterations: ALS objective, negative log marginal likelihood
        per point, mean training loss, the filter's covariance trace tr(P), or the minibatch ELBO per row. Finer records keep their own
        names (``update_objectives_``, ``objective_history_``, ``validation_losses_``, ``adapt_rounds_``, …).
    converged_ : bool
        Whether the loop's stopping rule (ALS ``tol``, early stopping, the (M, c) approximation rule) ended it
        before its iteration budget; True where the loop has no stopping rule to meet (a fixed number of
        optimiser runs). ALS fits that end their budget far from converged warn with
        :class:`sklearn.exceptions.ConvergenceWarning`.

    Notes
    -----
    Attributes learned in ``fit`` end with ``_`` (scikit-learn convention).
    """

    #: how inputs are scaled before they reach ``_fit`` ("standard", "minmax", "minmax-sym", "minmax-half", "none")
    input_scaling: ClassVar[str] = "standard"
    #: fitted attributes rebuilt by ``_after_load`` rather than stored
    _transient_attributes: ClassVar[tuple[str, ...]] = ()
    #: whether ``fit`` accepts chunk sources and ``distributed=True`` (models whose fit is a sum over rows;
    #: their ``_fit`` takes the ``sample`` and ``extremes`` keywords, see :meth:`_fit`)
    supports_chunked_fit: ClassVar[bool] = False
    #: renamed constructor parameters ``{old_name: new_name}``; see :mod:`tnbayes._deprecation`
    _renamed_parameters: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register_model_class(cls)

    def __init__(self, *, normalize_y: bool = True, dtype: torch.dtype | str | None = None,
                 device: str | torch.device | None = None, verbose: bool = False) -> None:
        self.normalize_y = normalize_y
        self.dtype = dtype
        self.device = device
        self.verbose = verbose

    # ------------------------------------------------------------------ parameters
    def _keep_parameters(self, arguments: dict[str, Any]) -> None:
        """Store a subclass's constructor arguments (its ``__init__``'s ``locals()``) as attributes of the same names,
        unchanged, as scikit-learn's estimator contract asks (one place instead of one line per parameter)."""
        for name in self._param_names():
            if name in arguments:
                setattr(self, name, arguments[name])

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """Constructor arguments, collected through the bases so a subclass whose ``__init__`` forwards
        ``**kwargs`` (``TKM``, the classifiers) still lists its parent's; scikit-learn's ``get_params``,
        ``set_params``, ``clone`` and ``repr`` read this."""
        return cls._param_names()

    @classmethod
    def _param_names(cls) -> list[str]:
        names: list[str] = []
        for klass in cls.__mro__:
            if klass is object or "__init__" not in vars(klass):
                continue
            for p in inspect.signature(klass.__init__).parameters.values():
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in names:
                    names.append(p.name)
        return names

    def __sklearn_tags__(self):
        """scikit-learn tags: 2-D numeric input without NaN, targets required, a regressor."""
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.required = True
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        """Read by :func:`sklearn.utils.validation.check_is_fitted`."""
        return self.is_fitted

    # ------------------------------------------------------------------ helpers for subclasses
    @property
    def dtype_(self) -> torch.dtype:
        """The resolved computation dtype."""
        return resolve_dtype(self.dtype)

    @property
    def device_(self) -> torch.device:
        """The resolved computation device."""
        return resolve_device(self.device)

    @property
    def is_fitted(self) -> bool:
        """Whether ``fit`` has been called successfully."""
        return getattr(self, "n_features_in_", None) is not None

    def _check_fitted(self, what: str = "posterior") -> None:
        if not self.is_fitted:
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet; call fit(X, y) before {what}(...)."
            )

    # ------------------------------------------------------------------ public API
    def fit(self, X: ArrayLike | ChunkedData, y: ArrayLike | None = None) -> "BaseModel":
        """Fit the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), or a chunk source
            Models with ``supports_chunked_fit`` also accept a :class:`tnbayes.data.ChunkedData` or any
            re-iterable of ``(X_chunk, y_chunk)`` pairs (a DataLoader, a list) with ``y=None``: the rows are then
            read chunk by chunk and never held in memory at once (see :mod:`tnbayes.data`).
        y : array-like of shape (n_samples,), optional
            Required with array inputs.

        Returns
        -------
        self
        """
        apply_renamed_parameters(self)
        distributed = check_distributed(bool(getattr(self, "distributed", False)))
        chunked = is_chunked(X, y)
        if (chunked or distributed) and not self.supports_chunked_fit:
            supported = chunked_fit_models()
            raise TypeError(
                f"{type(self).__name__} fits in-memory arrays only: pass X of shape (n, D) and y of shape (n,). "
                f"Out-of-core chunk sources and distributed=True are supported by {supported}."
            )
        self.fit_report_ = []
        self._fit_started = time.perf_counter()  # time budgets count from here
        if y is None and not chunked:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None: fit(X, y) needs "
                             f"the targets y (or X must be a ChunkedData / re-iterable of (X, y) chunks).")
        dtype, device = self.dtype_, self.device_
        if not chunked and not distributed:
            Xt, yt = check_X_y(X, y, dtype=dtype, device=device, min_samples=self._min_samples())
            check_feature_names(self, X, reset=True)
            self.x_scaler_ = make_input_scaler(self.input_scaling).fit(Xt)
            self.y_scaler_ = make_target_scaler(self.normalize_y).fit(yt)
            self.n_features_in_ = None  # not fitted until _fit succeeds
            self.n_train_ = int(Xt.shape[0])
            Xs = self.x_scaler_.transform(Xt)
            self.training_range_ = torch.stack([Xs.amin(dim=0), Xs.amax(dim=0)])
            self._fit(Xs, self.y_scaler_.transform(yt))
            self.n_features_in_ = int(Xt.shape[1])
            return self
        return self._fit_from_summary(X, y, chunked, distributed)

    def _fit_from_summary(self, X: ArrayLike | ChunkedData, y: ArrayLike | None, chunked: bool,
                          distributed: bool) -> "BaseModel":
        """The fit of a chunk source or of one shard of a data-parallel fit: a first pass for the scaling
        statistics and a hyper-parameter subsample (combined over processes), then ``_fit`` on the scaled rows
        (streamed for a chunk source, this shard's tensors otherwise)."""
        dtype, device = self.dtype_, self.device_
        if chunked:
            data = as_chunked(X, y)
        else:
            Xt, yt = check_X_y(X, y, dtype=dtype, device=device, min_samples=1)
            data = ChunkedData.from_arrays(Xt, yt, chunk_size=max(1, Xt.shape[0]))
        summary = summarize(data, sample_size=self._hyperparameter_sample_size(), seed=int(getattr(self, "seed", 0)),
                            distributed=distributed)
        if summary.num_rows < self._min_samples():
            raise ValueError(too_few_samples_message(self._min_samples(), summary.num_rows))
        self.x_scaler_ = make_input_scaler(self.input_scaling).fit_statistics(
            summary.x_mean, summary.x_variance, summary.x_min, summary.x_max).to(dtype, device)
        self.y_scaler_ = make_target_scaler(self.normalize_y).fit_statistics(
            summary.y_mean, summary.y_variance, summary.y_min, summary.y_max).to(dtype, device)
        self.n_features_in_ = None
        self.n_train_ = summary.num_rows
        sample = (self.x_scaler_.transform(summary.sample_X.to(dtype=dtype, device=device)),
                  self.y_scaler_.transform(summary.sample_y.to(dtype=dtype, device=device)))
        extremes = self.x_scaler_.transform(torch.stack([summary.x_min, summary.x_max]).to(dtype=dtype, device=device))
        self.training_range_ = extremes
        if chunked:
            rows = StreamedRows(data, summary.local_rows, summary.num_features, transform_X=self.x_scaler_.transform,
                                transform_y=self.y_scaler_.transform, dtype=dtype, device=device)
            self._fit(rows, None, sample=sample, extremes=extremes)
        else:
            self._fit(self.x_scaler_.transform(Xt), self.y_scaler_.transform(yt), sample=sample, extremes=extremes)
        self.n_features_in_ = summary.num_features
        return self

    def _hyperparameter_sample_size(self) -> int:
        """Rows kept in the first pass of a chunked or distributed fit for hyper-parameter estimation."""
        return max(2000, 2 * int(getattr(self, "hyper_max_points", 1000)))

    def posterior(self, X: ArrayLike, observation_noise: bool = True, *,
                  full_covariance: bool = False) -> GaussianPosterior:
        """Predictive distribution at new inputs, in the units of ``y``.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        observation_noise : bool
            Include the (fitted) observation-noise variance (predictive distribution of new
            observations) or not (distribution of the latent function).
        full_covariance : bool
            Return the joint n×n covariance (for correlated samples); otherwise marginals only.

        Returns
        -------
        GaussianPosterior
        """
        self._check_fitted("posterior")
        Xs = self._scaled_inputs(X)
        mean, cov_or_var = self._latent(Xs, full_covariance=full_covariance)
        noise = self.noise_variance_ if observation_noise else 0.0
        if full_covariance:
            cov = cov_or_var + noise * torch.eye(mean.shape[0], dtype=mean.dtype, device=mean.device)
            post = GaussianPosterior(mean, covariance=cov, observation_noise=observation_noise,
                                     noise_variance=self.noise_variance_)
        else:
            post = GaussianPosterior(mean, variance=cov_or_var + noise, observation_noise=observation_noise,
                                     noise_variance=self.noise_variance_)
        return post.affine(self.y_scaler_.shift_, self.y_scaler_.scale_)

    def predict(self, X: ArrayLike, return_std: bool = False, return_cov: bool = False):
        """Predictive mean (and standard deviation or covariance of new observations).

        The signature of :meth:`sklearn.gaussian_process.GaussianProcessRegressor.predict`; the spread is that of
        new observations (latent variance plus the fitted noise), see :meth:`posterior` for the latent one.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        return_std : bool
            Also return the predictive standard deviation.
        return_cov : bool
            Also return the joint predictive covariance (n × n); not together with ``return_std``.

        Returns
        -------
        mean : ndarray or tensor of shape (n,)
            Same array type as ``X`` (numpy unless ``X`` is a torch tensor).
        std : ndarray or tensor of shape (n,), if ``return_std``
        cov : ndarray or tensor of shape (n, n), if ``return_cov``
        """
        self._check_fitted("predict")
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        post = self.posterior(X, observation_noise=True, full_covariance=return_cov)
        as_torch = isinstance(X, torch.Tensor)

        def out(t: torch.Tensor):
            return t.detach() if as_torch else t.detach().cpu().numpy()

        if return_cov:
            return out(post.mean), out(post.covariance)
        return (out(post.mean), out(post.stddev)) if return_std else out(post.mean)

    def sample_y(self, X: ArrayLike, n_samples: int = 1, random_state: int | np.random.RandomState | None = 0, *,
                 observation_noise: bool = False):
        """Joint draws of the function at ``X`` (as :meth:`GaussianProcessRegressor.sample_y` draws them).

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        n_samples : int
            Number of draws.
        random_state : int, RandomState instance or None
            Seed of the draws (0 by default, so repeated calls agree, as in scikit-learn).
        observation_noise : bool
            Add the fitted observation noise to each draw (draws of new observations instead of the latent f).

        Returns
        -------
        ndarray or tensor of shape (n, n_samples)
            Each column one draw, correlated across the rows of ``X``; same array type as ``X``.
        """
        from sklearn.utils import check_random_state

        post = self.posterior(X, observation_noise=observation_noise, full_covariance=True)
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
        generator = torch.Generator(device=post.mean.device).manual_seed(seed)
        draws = post.rsample(torch.Size([int(n_samples)]), generator=generator).detach().T
        return draws if isinstance(X, torch.Tensor) else draws.cpu().numpy()

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Coefficient of determination R² of the predictive mean (scikit-learn convention).

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        y : array-like of shape (n,)

        Returns
        -------
        float
        """
        self._check_fitted("score")
        mean = self.posterior(X).mean
        yt = check_targets(y, n_samples=mean.shape[0], dtype=mean.dtype, device=mean.device)
        return float(1.0 - ((yt - mean) ** 2).sum() / ((yt - yt.mean()) ** 2).sum())

    def to_botorch(self):
        """This fitted regressor as a BoTorch model, for acquisition functions and ``optimize_acqf``.

        Returns
        -------
        tnbayes.integrations.botorch.BoTorchModel
            A ``botorch.models.model.Model`` whose ``posterior(X)`` takes inputs of shape (b, q, d), is joint over
            q, excludes the observation noise unless asked, and is differentiable in X except for ``TNKF``'s (see
            that class).
        """
        from tnbayes.integrations.botorch import BoTorchModel

        return BoTorchModel(self)

    @property
    def noise_std(self) -> float:
        """Fitted observation-noise standard deviation in the units of ``y``."""
        self._check_fitted("noise_std")
        return math.sqrt(float(self.noise_variance_)) * float(self.y_scaler_.scale_)

    def _report(self, message: str) -> None:
        """Record a choice made during ``fit`` in ``fit_report_`` and print it when ``verbose`` is set.

        Parameters
        ----------
        message : str
            What was chosen and why, in one sentence.
        """
        if not hasattr(self, "fit_report_"):
            self.fit_report_ = []
        self.fit_report_.append(message)
        if self.verbose:
            print(f"{type(self).__name__}: {message}", flush=True)

    # ------------------------------------------------------------------ subclass hooks
    def _min_samples(self) -> int:
        return 2

    def _scaled_new_rows(self, X: ArrayLike, y: ArrayLike) -> tuple[torch.Tensor, torch.Tensor]:
        """New observations for a fitted model's update (``condition_on_observations``): the inputs scaled as at
        fit time (input box applied) and the targets standardised, both float64, shapes (k, D) and (k,)."""
        Xs = self._scaled_inputs(X).to(torch.float64)
        yt = check_targets(y, n_samples=Xs.shape[0], dtype=self.dtype_, device=self.device_)
        return Xs, self.y_scaler_.transform(yt).to(torch.float64)

    def _scaled_inputs(self, X: ArrayLike) -> torch.Tensor:
        """Validated, scaled test inputs (n, D), with the ``out_of_box`` policy applied (see :meth:`input_box`)."""
        Xt = check_inputs(X, n_features=self.n_features_in_, dtype=self.dtype_, device=self.device_,
                          model_name=type(self).__name__)
        check_feature_names(self, X, reset=False)
        return self._scale_inputs(Xt)

    def _scale_inputs(self, Xt: torch.Tensor) -> torch.Tensor:
        """Scale validated inputs (n, D) and apply the ``out_of_box`` policy; differentiable in ``Xt`` inside the
        box (what :meth:`to_botorch` differentiates through)."""
        Xs = self.x_scaler_.transform(Xt)
        box = self._prediction_box()
        if box is None:
            return Xs
        return apply_input_box(Xs, box, getattr(self, "out_of_box", "clip"), shift=self.x_scaler_.shift_,
                               scale=self.x_scaler_.scale_, model_name=type(self).__name__,
                               remedy=self._out_of_box_remedy)

    #: how to fit a model that reaches further out (completes the out-of-box messages)
    _out_of_box_remedy: ClassVar[str] = "refit with a larger boundary factor c"

    def _representable_box(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Lower and upper edge, each of shape (D,), of the region the fitted basis represents, in scaled units.

        ``None`` (default): the model predicts anywhere. Models whose basis lives on a bounded domain (a Hilbert box,
        a Fourier period) return it; :mod:`tnbayes.selection.input_box` turns it into the prediction box.
        """
        return None

    def _prediction_box(self) -> torch.Tensor | None:
        """The prediction box (2, D) in scaled units, or None when the model has no bounded domain."""
        domain = self._representable_box()
        if domain is None:
            return None
        training_range = getattr(self, "training_range_", None)
        if training_range is None:  # a file saved before training_range_ existed: the domain itself
            return torch.stack([domain[0], domain[1]])
        return prediction_box(training_range, domain)

    def input_box(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Lower and upper corner of the region where predictions are made as they are, in the units of X.

        It is the training range extended by half the margin the basis leaves beyond it. ``posterior``/``predict``
        clip test inputs outside it to its edge with an :class:`~tnbayes.selection.OutOfBoxWarning` (default,
        ``out_of_box="clip"``) or refuse them (``out_of_box="raise"``).

        Returns
        -------
        (low, high) : numpy.ndarray of shape (D,) each, or None
            None for models that predict anywhere (no bounded basis domain).
        """
        self._check_fitted("input_box")
        box = self._prediction_box()
        if box is None:
            return None
        shift = self.x_scaler_.shift_.detach().cpu().double().reshape(-1)
        scale = self.x_scaler_.scale_.detach().cpu().double().reshape(-1)
        box = box.detach().cpu().double() * scale + shift
        return box[0].numpy(), box[1].numpy()

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:  # pragma: no cover - abstract
        """Fit on scaled inputs (n, d) and scaled targets (n,); must set ``noise_variance_``.

        Models with ``supports_chunked_fit`` take ``_fit(X, y, *, sample=None, extremes=None)``: ``X`` may then
        be a :class:`~tnbayes.data.StreamedRows` (with ``y`` None) or one process's shard; ``sample``
        = (X_s (n_s, d), y_s (n_s,)) is the scaled subsample for hyper-parameter estimation and ``extremes``
        (2, d) the scaled column minima and maxima of all training rows.
        """
        raise NotImplementedError

    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent mean (n,) and variance (n,) or covariance (n, n) in scaled units."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _extra_state(self) -> dict[str, torch.Tensor]:
        """Tensors of transient attributes that ``save`` must keep (e.g. a GPyTorch state dict)."""
        return {}

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        """Rebuild transient attributes after ``load``."""

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the model (parameters and fitted state) to ``path``.

        The file holds tensors and JSON strings only; see :mod:`tnbayes._model_file` for the format.

        Parameters
        ----------
        path : str or path-like
        """
        self._check_fitted("save")
        write_model_file(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike, *, device: str | torch.device | None = None) -> "BaseModel":
        """Read a model written by :meth:`save` (never executes code from the file).

        Parameters
        ----------
        path : str or path-like
        device : str or torch.device, optional
            Override the device stored in the file (e.g. load a GPU-fitted model on a CPU).

        Returns
        -------
        BaseModel
            An instance of the saved class; ``cls.load`` checks that it is a subclass of ``cls``.

        Raises
        ------
        FileNotFoundError
            When ``path`` does not exist.
        ModelFileError
            A ``ValueError`` starting "not a valid tnbayes model file: " for a damaged, truncated, edited or
            foreign file (checked at load time: layout, format version, checksum, parameters, and a prediction at
            the centre of the training data that catches tensors of the wrong shape).
        """
        payload = read_model_file(path)
        class_name = payload["class"]
        model_cls = model_class(class_name)
        if model_cls is None:
            raise ModelFileError(path, f"it holds a {class_name!r}, which this tnbayes ({__version__}) does not know.")
        if not issubclass(model_cls, cls):
            raise TypeError(f"{path} holds a {class_name}, not a {cls.__name__}.")
        return restore_model(path, payload, model_cls, device=device)


def load_model(path: str | os.PathLike, *, device: str | torch.device | None = None) -> BaseModel:
    """Load any tnbayes model saved with ``model.save(path)``; see :meth:`BaseModel.load`."""
    return BaseModel.load(path, device=device)

