"""A fitted tnbayes regressor as a BoTorch model (``pip install tnbayes[botorch]``).

:class:`BoTorchModel` wraps any fitted regressor: ``model.to_botorch()`` returns one. Its ``posterior`` runs the
model's own prediction path on torch tensors (input scaling, input box, feature maps, latent mean and covariance,
unit conversion), so acquisition functions get gradients with respect to the candidate inputs wherever the
model's features are smooth in x (Hilbert, Fourier, quantized and random-feature maps are; ExactGP's posterior is
GPyTorch's). TNKF predicts outside autograd (each kernel row is compressed by a TT-SVD): asked for gradients, its
posterior raises ``UnsupportedError`` and says to optimise without them (``options={"with_grad": False}``).

An adapter beside the three axes (basis, format, inference).
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from linear_operator import to_linear_operator

from tnbayes.models.base import BaseModel

__all__ = ["BoTorchModel"]


class BoTorchModel(Model):
    """A fitted tnbayes regressor seen as a single-output ``botorch.models.model.Model``.

    Parameters
    ----------
    model : BaseModel
        A fitted regressor (not a classifier).

    Notes
    -----
    ``posterior(X)`` is joint over the q points of each batch: the full latent covariance of the model (HilbertGP's
    weight posterior, the Laplace covariance of the CPD models, the Kalman covariance, the exact GP's). Batches
    with q = 1 are computed in one call with marginal variances. The covariance is a lazy ``LinearOperator``, as in
    GPyTorch's own posteriors: a joint over more points than the model has features (or over a repeated point) is
    singular, and GPyTorch adds jitter when it factorises it for samples (with a ``NumericalWarning``).

    ``condition_on_observations(X, Y)`` returns a new adapter around a conditioned copy where the model has a cheap
    update, hyper-parameters kept (HilbertGP: a rank-k update of its Bayesian-linear-regression weight posterior;
    TTKalmanGP: its Kalman filter run on the new rows from the fitted state); other models raise
    ``NotImplementedError`` (TNKF's state is the dual over the training points, so new points change its size):
    refit them on the extended data and call ``to_botorch()``.
    """

    _num_outputs = 1

    def __init__(self, model: BaseModel) -> None:
        super().__init__()
        if not isinstance(model, BaseModel) or hasattr(model, "classes_") or hasattr(model, "predict_proba"):
            raise TypeError(f"to_botorch() needs a tnbayes regressor; got {type(model).__name__}.")
        model._check_fitted("to_botorch")
        self.tnbayes_model = model

    @property
    def num_outputs(self) -> int:
        """1: a tnbayes regressor has a single output."""
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        """Empty: one model, no model batch."""
        return torch.Size([])

    def posterior(self, X: torch.Tensor, output_indices: list[int] | None = None,
                  observation_noise: bool | torch.Tensor = False, posterior_transform: Any = None,
                  **kwargs: Any) -> GPyTorchPosterior:
        """The joint Gaussian over the q points of each batch of ``X``, in the units of the training targets.

        Parameters
        ----------
        X : torch.Tensor of shape (*b, q, d)
            Candidate inputs in the user's units; gradients flow back to ``X``.
        output_indices : list of int, optional
            Only ``[0]`` (or None): the model has one output.
        observation_noise : bool or torch.Tensor
            False (default, BoTorch's convention): the latent function. True or a tensor: add the model's fitted
            noise variance (a tensor's values are not used: the model's noise is homoscedastic).
        posterior_transform : PosteriorTransform, optional
            Applied to the result.

        Returns
        -------
        botorch.posteriors.GPyTorchPosterior
            Mean of shape (*b, q, 1); covariance (*b, q, q).

        Raises
        ------
        botorch.exceptions.errors.UnsupportedError
            When ``X`` requires a gradient (with grad mode on) and the model's posterior is not differentiable in X
            (TNKF); the message says how to optimise without gradients.
        """
        if output_indices is not None and list(output_indices) != [0]:
            raise ValueError(f"the model has one output; output_indices must be [0] or None, got {output_indices}.")
        model = self.tnbayes_model
        if X.ndim < 2 or X.shape[-1] != model.n_features_in_:
            raise ValueError(f"X must have shape (*b, q, {model.n_features_in_}); got {tuple(X.shape)}.")
        wants_gradient = X.requires_grad and torch.is_grad_enabled()  # before an input transform's own parameters
        X = self.transform_inputs(X)
        batch, q = X.shape[:-2], X.shape[-2]
        rows = X.reshape(-1, X.shape[-1]).to(dtype=model.dtype_, device=model.device_)
        noise = float(model.noise_variance_) if observation_noise is not False else 0.0
        if q == 1:  # one call for all batches: marginal variances are the whole covariance
            mean, variance = model._latent(model._scale_inputs(rows), full_covariance=False)
            covariance = (variance + noise).reshape(*batch, 1, 1)
            mean = mean.reshape(*batch, 1)
        else:
            means, covariances = [], []
            eye = torch.eye(q, dtype=rows.dtype, device=rows.device)
            for block in rows.reshape(-1, q, rows.shape[-1]):
                m, c = model._latent(model._scale_inputs(block), full_covariance=True)
                means.append(m)
                covariances.append(c + noise * eye)
            mean = torch.stack(means).reshape(*batch, q)
            covariance = torch.stack(covariances).reshape(*batch, q, q)
        if wants_gradient and not (mean.requires_grad or covariance.requires_grad):
            raise UnsupportedError(
                f"{type(model).__name__}'s posterior is not differentiable in X (it predicts outside autograd: TNKF "
                f"compresses each kernel row by a TT-SVD), so a gradient-based optimizer cannot use it. Optimise the "
                f"acquisition function without gradients, e.g. optimize_acqf(..., options={{'with_grad': False}}) "
                f"(finite differences), or use a model whose posterior is differentiable in X (HilbertGP, "
                f"CPDKernelMachine, TTKalmanGP, ExactGP).")
        scale, shift = model.y_scaler_.scale_, model.y_scaler_.shift_
        mean = (shift + scale * mean).to(X.dtype)
        covariance = (scale**2 * covariance).to(X.dtype)
        # Lazy covariance: GPyTorch factorises it on demand with added jitter where needed. A joint latent posterior
        # over more points than the model has features (or over repeated points) is singular, and the eager Cholesky
        # of a dense MultivariateNormal fails on it.
        posterior = GPyTorchPosterior(MultivariateNormal(mean, to_linear_operator(covariance)))
        return posterior if posterior_transform is None else posterior_transform(posterior)

    def condition_on_observations(self, X: torch.Tensor, Y: torch.Tensor, **kwargs: Any) -> "BoTorchModel":
        """The model conditioned on new observations, hyper-parameters kept (no refit).

        Parameters
        ----------
        X : torch.Tensor of shape (k, d)
            New inputs in the user's units.
        Y : torch.Tensor of shape (k, 1) or (k,)
            Their observations in the units of the training targets.
        **kwargs
            ``noise`` is ignored: the model's noise is homoscedastic (its fitted ``noise_variance_``).

        Returns
        -------
        BoTorchModel
            A new adapter around a conditioned copy of the tnbayes model (this one is unchanged); its posterior is
            the model's posterior computed on the union of the training rows and the new ones.

        Raises
        ------
        NotImplementedError
            For models without a cheap update (all but HilbertGP and TTKalmanGP), and for batched X or Y
            (fantasies).
        """
        model = self.tnbayes_model
        update = getattr(model, "condition_on_observations", None)
        if update is None:
            raise NotImplementedError(
                f"{type(model).__name__} has no cheap exact update of its posterior, so its BoTorch model does not "
                f"support condition_on_observations (or fantasize); refit the {type(model).__name__} on the "
                "extended data and call to_botorch() again, or use a HilbertGP or TTKalmanGP surrogate, which "
                "support it.")
        if X.ndim != 2 or Y.shape[:1] != X.shape[:1] or Y.ndim > 2 or (Y.ndim == 2 and Y.shape[-1] != 1):
            raise NotImplementedError(f"condition_on_observations takes X of shape (k, d) and Y of shape (k, 1); "
                                      f"got {tuple(X.shape)} and {tuple(Y.shape)} (batched conditioning, as "
                                      "fantasize uses, is not supported).")
        X = self.transform_inputs(X)
        return BoTorchModel(update(X.detach(), Y.detach().reshape(-1)))
