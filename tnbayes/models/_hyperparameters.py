"""Kernel hyper-parameters from a marginal-likelihood fit on a subsample (how T-KRR chose ℓ and λ)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tnbayes._validation import unique_record_indices
from tnbayes.basis import resolve_kernel

__all__ = ["KernelHyperparameters", "estimate_kernel_hyperparameters"]


@dataclass
class KernelHyperparameters:
    """ARD kernel hyper-parameters in the units of the data they were estimated on.

    Attributes
    ----------
    lengthscale : torch.Tensor of shape (D,)
    outputscale : float
        σ_f², the kernel variance.
    noise_variance : float
        σ², the observation-noise variance.
    num_points : int
        Size of the subsample the marginal likelihood was maximised on.
    num_duplicates : int
        Exact duplicate (x, y) records dropped before subsampling.
    """

    lengthscale: torch.Tensor
    outputscale: float
    noise_variance: float
    num_points: int
    num_duplicates: int = 0

    @property
    def penalty(self) -> float:
        """λ = σ²/σ_f², the ridge penalty that makes the ALS objective a negative log posterior."""
        return self.noise_variance / self.outputscale


def estimate_kernel_hyperparameters(X: torch.Tensor, y: torch.Tensor, *, kernel: str = "se", nu: float | None = None,
                                    max_points: int = 1000, seed: int = 0, num_restarts: int = 1,
                                    ard: bool = True,
                                    lengthscale_lower_bound: float | torch.Tensor | None = None,
                                    drop_duplicates: bool = True) -> KernelHyperparameters:
    """Maximise the exact GP marginal likelihood (ARD kernel, GPyTorch) on a random subsample.

    Exact duplicate records (same x *and* same y) are dropped first: to ML-II, a repeated record is a
    noise-free replicate, and a few hundred of them (wine-red has 172 in 1439 training rows) drive σ²
    to its lower bound and the lengthscales to 0 — an interpolating fit (measured on wine-red split 0:
    σ² = 1e-6 with duplicates, 0.57 without, on the standardised scale). Replicates whose targets
    differ carry information about the noise and are kept.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
    y : torch.Tensor of shape (N,)
    kernel : str
        ``"se"`` or a Matérn kernel (``"matern12"``, ``"matern32"``, ``"matern52"``, ``"matern"`` + ``nu``).
    nu : float, optional
    max_points : int
        Subsample size (the exact GP costs O(n³) per step).
    seed : int
        Seed of the subsample and of the optimiser restarts.
    num_restarts : int
        Extra optimiser runs from random starting values.
    ard : bool
        One lengthscale per input (default) or one shared lengthscale (returned repeated D times).
    lengthscale_lower_bound : float or torch.Tensor of shape (D,), optional
        Lower bound of the lengthscales in the units of ``X`` (see ``ExactGP``).
    drop_duplicates : bool
        Drop exact duplicate (x, y) records before subsampling (default).

    Returns
    -------
    KernelHyperparameters
        In the units of ``X`` and ``y`` (the exact GP's own standardisation is undone).
    """
    from tnbayes.models.exact_gp import ExactGP  # local: exact_gp imports the model base

    family, smoothness = resolve_kernel(kernel, nu)
    num_duplicates = 0
    if drop_duplicates:
        keep = unique_record_indices(X, y)
        num_duplicates = X.shape[0] - keep.numel()
        X, y = X[keep], y[keep]
    n = X.shape[0]
    if n > max_points:
        generator = torch.Generator().manual_seed(int(seed))
        rows = torch.randperm(n, generator=generator)[: int(max_points)].to(X.device)
        X, y = X[rows], y[rows]
    gp_kernel = "rbf" if family == "se" else "matern"
    gp = ExactGP(kernel=gp_kernel, drop_duplicates=False, nu=smoothness if smoothness is not None else 2.5, ard=ard,
                 num_restarts=num_restarts, seed=seed,
                 lengthscale_lower_bound=None if lengthscale_lower_bound is None else
                 torch.as_tensor(lengthscale_lower_bound, dtype=torch.float64).reshape(-1).cpu().tolist(), dtype=torch.float64, device=X.device)
    gp.fit(X.double(), y.double())  # GP-grade hyper-parameters even for float32 models
    x_scale = gp.x_scaler_.scale_.reshape(-1).to(torch.float64).cpu()
    y_scale2 = float(gp.y_scaler_.scale_) ** 2
    lengthscale = gp.lengthscale_.reshape(-1).to(torch.float64).cpu().expand(x_scale.numel()) * x_scale
    return KernelHyperparameters(lengthscale=lengthscale, outputscale=gp.outputscale_ * y_scale2,
                                 noise_variance=gp.noise_variance_ * y_scale2, num_points=int(X.shape[0]),
                                 num_duplicates=int(num_duplicates))
