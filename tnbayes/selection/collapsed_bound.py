"""Kernel hyper-parameters by the collapsed variational bound of sparse GP regression (Titsias 2009, "SGPR").

For a Gaussian likelihood the optimal variational distribution of the inducing values can be integrated out,
leaving a bound on the log marginal likelihood that costs O(n m²) for n rows and m inducing inputs:

    log N(y | c, Q + σ² I) − tr(K − Q) / (2σ²),      Q = K_xz K_zz⁻¹ K_zx.

GPyTorch implements it as the marginal likelihood of an exact GP whose kernel is ``InducingPointKernel``. Fitted on
a few thousand rows it finds in seconds the hyper-parameters that stochastic minibatch steps reach only after many
hundred (:class:`~tnbayes.SVGP` races it against an exact GP's ML-II on a smaller subsample). The kernel, priors and
bounds are those of :func:`~tnbayes.selection.build_kernel_and_likelihood`, as for every GP fit in tnbayes.
"""

from __future__ import annotations

from dataclasses import dataclass

import gpytorch
import torch

from tnbayes.selection.marginal_likelihood import MarginalLikelihoodSettings, build_kernel_and_likelihood

__all__ = ["CollapsedBoundFit", "fit_collapsed_bound"]


@dataclass
class CollapsedBoundFit:
    """Result of :func:`fit_collapsed_bound` (standardised units, as given).

    Attributes
    ----------
    lengthscale : torch.Tensor of shape (D,) or (1,)
    outputscale : float
    noise_variance : float
    mean : float
        The constant mean.
    bound : float
        The collapsed bound per row at the end (with the hyper-priors over n), larger is better.
    num_points : int
        Rows the bound was computed on.
    inducing : torch.Tensor of shape (m, D)
        The inducing inputs at the end.
    """

    lengthscale: torch.Tensor
    outputscale: float
    noise_variance: float
    mean: float
    bound: float
    num_points: int
    inducing: torch.Tensor


class _CollapsedGP(gpytorch.models.ExactGP):
    def __init__(self, X: torch.Tensor, y: torch.Tensor, inducing: torch.Tensor,
                 settings: MarginalLikelihoodSettings) -> None:
        kernel, likelihood = build_kernel_and_likelihood(X, settings)
        super().__init__(X, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.InducingPointKernel(kernel, inducing_points=inducing.clone(),
                                                                 likelihood=likelihood)

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def fit_collapsed_bound(X: torch.Tensor, y: torch.Tensor, inducing: torch.Tensor,
                        settings: MarginalLikelihoodSettings, *, steps: int = 100,
                        learning_rate: float = 0.05) -> CollapsedBoundFit:
    """Maximise the collapsed bound over the kernel hyper-parameters, the noise, the mean and the inducing inputs
    with ``steps`` Adam steps on all of ``X``, from GPyTorch's default values.

    Parameters
    ----------
    X : torch.Tensor of shape (n, D)
        Standardised inputs (take a subsample: each step costs O(n m²)).
    y : torch.Tensor of shape (n,)
        Standardised targets.
    inducing : torch.Tensor of shape (m, D)
        Initial inducing inputs (moved by the steps).
    settings : MarginalLikelihoodSettings
        Kernel family, ARD, hyper-priors and bounds.
    steps : int
    learning_rate : float

    Returns
    -------
    CollapsedBoundFit
    """
    model = _CollapsedGP(X, y, inducing, settings).to(dtype=X.dtype, device=X.device)
    base = model.covar_module.base_kernel
    model.train()
    objective = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimiser = torch.optim.Adam(model.parameters(), lr=float(learning_rate))
    # GPyTorch's default settings: the kernel's low-rank structure is used (O(n m²)); exact_gpytorch_settings would
    # make it an n × n Cholesky
    for _ in range(int(steps)):
        optimiser.zero_grad()
        loss = -objective(model(X), y)
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        return CollapsedBoundFit(bound=float(objective(model(X), y)),
                                 lengthscale=base.base_kernel.lengthscale.detach().reshape(-1).clone(),
                                 outputscale=float(base.outputscale), noise_variance=float(model.likelihood.noise),
                                 mean=float(model.mean_module.constant), num_points=int(X.shape[0]),
                                 inducing=model.covar_module.inducing_points.detach().clone())
