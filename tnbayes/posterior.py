"""Gaussian predictive distributions returned by every tnbayes model.

:class:`GaussianPosterior` mirrors the names of BoTorch's ``GPyTorchPosterior`` (``mean``,
``variance``, ``stddev``, ``mvn``, ``rsample``, ``quantile``) and adds what users of a regressor want
(``interval``, per-point ``log_prob``, ArviZ conversion). It stores either per-point variances
(diagonal) or a full covariance; a diagonal posterior never forms an n×n matrix.

The output of every model, whatever its basis, format and inference; it belongs to no axis.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from linear_operator.operators import DiagLinearOperator, LinearOperator, to_linear_operator

from tnbayes._validation import ArrayLike, check_targets

__all__ = ["GaussianPosterior"]


#: dense covariances up to this size are checked for positive semi-definiteness at construction (an eigvalsh)
_EIGEN_CHECK_MAX_SIZE = 2000


def _as_float_tensor(value: Any, name: str, like: torch.Tensor | None = None) -> torch.Tensor:
    """``value`` (tensor, numpy array or sequence) as a floating tensor (of ``like``'s dtype and device)."""
    try:
        t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"{name} must be a torch tensor or an array of numbers; got {type(value).__name__} "
                        f"({err}).") from None
    if t.is_complex() or not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{name} must hold real numbers; got dtype {t.dtype}.")
    if like is not None:
        return t.to(dtype=like.dtype, device=like.device)
    return t if t.is_floating_point() else t.to(torch.float64)


def _check_finite_values(t: torch.Tensor, name: str) -> None:
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        raise ValueError(f"{name} contains {int(bad.sum())} non-finite value(s) (NaN or inf), first at index "
                         f"{tuple(torch.nonzero(bad)[0].tolist())}; a Gaussian needs finite moments.")


def _round_off(t: torch.Tensor) -> float:
    """Negative values within this of zero are round-off (√eps of the largest magnitude, at least √eps)."""
    scale = float(t.abs().max()) if t.numel() else 1.0
    return math.sqrt(torch.finfo(t.dtype).eps) * max(1.0, scale)


def _check_nonnegative(variance: torch.Tensor, name: str) -> None:
    if variance.numel() and float(variance.min()) < -_round_off(variance):
        index = int(variance.argmin())
        raise ValueError(f"{name} must be >= 0; entry {index} is {float(variance[index]):.6g}. A negative "
                         f"variance is not round-off; check how it was computed.")


def _check_covariance(cov: torch.Tensor) -> None:
    """A dense covariance must be finite, symmetric and positive semi-definite (up to round-off)."""
    _check_finite_values(cov, "covariance")
    if cov.numel() == 0:
        return
    tol = _round_off(cov)
    asym = float((cov - cov.transpose(-1, -2)).abs().max())
    if asym > tol:
        raise ValueError(f"covariance is not symmetric (largest |C - Cᵀ| = {asym:.3g}).")
    if cov.shape[-1] > _EIGEN_CHECK_MAX_SIZE:  # O(n³): large joint covariances are only checked by rsample
        return
    smallest = float(torch.linalg.eigvalsh(cov.to(torch.float64)).min())
    if smallest < -tol:
        raise ValueError(f"covariance is not positive semi-definite: its smallest eigenvalue is {smallest:.3g}.")


class GaussianPosterior:
    """A Gaussian distribution over the function values (latent) or observations at n inputs.

    Parameters
    ----------
    mean : torch.Tensor or array-like of shape (n,)
        Predictive mean in the user's units; finite.
    variance : torch.Tensor or array-like of shape (n,), optional
        Marginal variances, finite and >= 0 (negatives within round-off are set to 0). Give exactly one of
        ``variance`` and ``covariance``.
    covariance : torch.Tensor, array-like or LinearOperator of shape (n, n), optional
        Joint covariance; a dense one must be finite, symmetric and positive semi-definite (up to round-off).
        Marginal variances are read off its diagonal.
    observation_noise : bool
        ``True`` if the distribution is the predictive distribution of noisy observations
        (latent variance + noise variance), ``False`` for the latent function f.
    noise_variance : float or torch.Tensor of shape (n,), optional
        The observation-noise variance in the user's units (informational; already included
        when ``observation_noise`` is ``True``).

    Notes
    -----
    Single-output shapes: ``mean`` is (n,) and ``rsample`` returns (*S, n), where BoTorch's
    ``GPyTorchPosterior`` uses a trailing output dimension ((n, 1), (*S, n, 1)).

    Examples
    --------
    >>> post = model.posterior(X_test)                     # doctest: +SKIP
    >>> lower, upper = post.interval(0.95)                  # doctest: +SKIP
    >>> draws = post.rsample(torch.Size([100]))             # (100, n)  # doctest: +SKIP
    """

    def __init__(
        self,
        mean: torch.Tensor,
        variance: torch.Tensor | None = None,
        covariance: torch.Tensor | LinearOperator | None = None,
        *,
        observation_noise: bool = True,
        noise_variance: float | torch.Tensor | None = None,
    ) -> None:
        if (variance is None) == (covariance is None):
            raise ValueError("Give exactly one of `variance` (diagonal) or `covariance` (full).")
        mean = _as_float_tensor(mean, "mean")
        if mean.ndim != 1:
            raise ValueError(f"mean must be 1-D of shape (n,); got shape {tuple(mean.shape)}.")
        _check_finite_values(mean, "mean")
        n = mean.shape[0]
        if variance is not None:
            variance = _as_float_tensor(variance, "variance", like=mean)
            if variance.shape != mean.shape:
                raise ValueError(
                    f"variance has shape {tuple(variance.shape)} but mean has shape {tuple(mean.shape)}."
                )
            _check_finite_values(variance, "variance")
            _check_nonnegative(variance, "variance")
            variance = variance.clamp_min(0.0)  # round-off below zero only (checked above)
        if covariance is not None:
            if not isinstance(covariance, LinearOperator):
                covariance = _as_float_tensor(covariance, "covariance", like=mean)
            if tuple(covariance.shape) != (n, n):
                raise ValueError(f"covariance must have shape ({n}, {n}); got {tuple(covariance.shape)}.")
            if isinstance(covariance, torch.Tensor):
                _check_covariance(covariance)
        self._mean = mean
        self._variance = variance
        self._covariance = covariance
        self.observation_noise = bool(observation_noise)
        self.noise_variance = noise_variance

    # ------------------------------------------------------------------ basic moments
    @property
    def mean(self) -> torch.Tensor:
        """Predictive mean, shape (n,)."""
        return self._mean

    @property
    def variance(self) -> torch.Tensor:
        """Marginal predictive variance, shape (n,)."""
        if self._variance is None:
            cov = self._covariance
            diag = cov.diagonal(dim1=-2, dim2=-1) if isinstance(cov, LinearOperator) else cov.diagonal()
            self._variance = diag.clamp_min(0.0)
        return self._variance

    @property
    def stddev(self) -> torch.Tensor:
        """Marginal predictive standard deviation, shape (n,)."""
        return self.variance.sqrt()

    @property
    def is_diagonal(self) -> bool:
        """Whether only marginal variances are stored (no joint covariance)."""
        return self._covariance is None

    @property
    def covariance(self) -> torch.Tensor:
        """Dense joint covariance, shape (n, n); for a diagonal posterior, ``diag(variance)``."""
        if self._covariance is None:
            return torch.diag(self._variance)
        cov = self._covariance
        return cov.to_dense() if isinstance(cov, LinearOperator) else cov

    def __len__(self) -> int:
        return self._mean.shape[0]

    def __repr__(self) -> str:
        kind = "diagonal" if self.is_diagonal else "full"
        what = "observations" if self.observation_noise else "latent f"
        return f"GaussianPosterior(n={len(self)}, covariance={kind}, over {what}, dtype={self._mean.dtype})"

    # ------------------------------------------------------------------ GPyTorch / BoTorch
    @property
    def mvn(self):
        """The distribution as a ``gpytorch.distributions.MultivariateNormal`` (lazy covariance)."""
        from gpytorch.distributions import MultivariateNormal

        if self._covariance is None:
            cov: LinearOperator = DiagLinearOperator(self._variance)
        else:
            cov = to_linear_operator(self._covariance)
        return MultivariateNormal(self._mean, cov)

    def rsample(self, sample_shape: torch.Size | tuple[int, ...] = torch.Size(), *,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """Draw reparameterised samples.

        Parameters
        ----------
        sample_shape : torch.Size
            Leading sample shape S.
        generator : torch.Generator, optional
            For reproducible draws.

        Returns
        -------
        torch.Tensor of shape (*S, n)
            Joint draws (correlated when a full covariance is stored).
        """
        shape = torch.Size(sample_shape) + self._mean.shape
        eps = torch.randn(shape, dtype=self._mean.dtype, device=self._mean.device, generator=generator)
        if self._covariance is None:
            return self._mean + eps * self.stddev
        root = to_linear_operator(self._covariance).add_jitter(1e-10).cholesky().to_dense()
        return self._mean + eps @ root.transpose(-1, -2)

    def quantile(self, p: float | torch.Tensor) -> torch.Tensor:
        """Marginal quantiles.

        Parameters
        ----------
        p : float or torch.Tensor of shape (k,)
            Probabilities in (0, 1).

        Returns
        -------
        torch.Tensor of shape (n,) for scalar p, or (k, n).
        """
        p_t = torch.as_tensor(p, dtype=self._mean.dtype, device=self._mean.device)
        if bool(((p_t <= 0) | (p_t >= 1)).any()):
            raise ValueError(f"quantile probabilities must lie strictly in (0, 1); got {p}.")
        z = math.sqrt(2.0) * torch.erfinv(2 * p_t - 1)
        if p_t.ndim == 0:
            return self._mean + z * self.stddev
        return self._mean + z.reshape(-1, 1) * self.stddev

    def interval(self, level: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
        """Central credible/predictive interval.

        Parameters
        ----------
        level : float
            Probability mass inside the interval, in (0, 1).

        Returns
        -------
        lower, upper : torch.Tensor of shape (n,)
        """
        if not 0.0 < float(level) < 1.0:
            raise ValueError(f"level must lie strictly in (0, 1); got {level}.")
        alpha = (1.0 - float(level)) / 2.0
        return self.quantile(alpha), self.quantile(1.0 - alpha)

    def log_prob(self, y: ArrayLike) -> torch.Tensor:
        """Per-point log density of observations under the marginal Gaussians.

        Parameters
        ----------
        y : array-like of shape (n,)

        Returns
        -------
        torch.Tensor of shape (n,)
            ``log N(y_i | mean_i, variance_i)``. Use ``mvn.log_prob`` for the joint density.
        """
        yt = check_targets(y, dtype=self._mean.dtype, device=self._mean.device)
        if yt.shape[0] != len(self):
            raise ValueError(f"y has {yt.shape[0]} entries but this posterior is over {len(self)} points; pass one "
                             f"observation per input given to posterior(X).")
        var = self.variance
        if bool((var <= 0).any()):
            advice = ("the distribution already includes the observation noise, so the model that made it has a "
                      "zero noise variance; refit it (a noise floor applies) or add noise before evaluating densities"
                      if self.observation_noise else "use posterior(X, observation_noise=True)")
            raise ValueError(f"Some predictive variances are zero, so the density is undefined; {advice}.")
        return -0.5 * (math.log(2 * math.pi) + var.log() + (yt - self._mean) ** 2 / var)

    # ------------------------------------------------------------------ conversions
    def to_arviz(self, num_samples: int = 1000, *, seed: int | None = 0, observed: ArrayLike | None = None,
                 var_name: str = "y") -> Any:
        """Convert predictive draws to an ArviZ ``DataTree`` (``arviz_base.from_dict``).

        Parameters
        ----------
        num_samples : int
            Number of draws (one chain).
        seed : int, optional
            Seed for the draws.
        observed : array-like of shape (n,), optional
            Stored in the ``observed_data`` group for PPC plots.
        var_name : str
            Variable name in the groups.

        Returns
        -------
        xarray.DataTree
            Group ``posterior_predictive`` with ``var_name`` of dims (chain=1, draw, obs=n),
            and ``observed_data`` when given.
        """
        import arviz_base

        gen = torch.Generator(device=self._mean.device)
        if seed is not None:
            gen.manual_seed(int(seed))
        draws = self.rsample(torch.Size([num_samples]), generator=gen).detach().cpu().numpy()
        groups: dict[str, dict[str, Any]] = {"posterior_predictive": {var_name: draws[None]}}
        if observed is not None:
            yo = check_targets(observed, n_samples=len(self)).numpy()
            groups["observed_data"] = {var_name: yo}
        dims = {var_name: ["obs"]}
        return arviz_base.from_dict(groups, dims=dims)

    def numpy(self) -> dict[str, Any]:
        """Mean, stddev and variance as numpy arrays of shape (n,)."""
        return {
            "mean": self._mean.detach().cpu().numpy(),
            "stddev": self.stddev.detach().cpu().numpy(),
            "variance": self.variance.detach().cpu().numpy(),
        }

    def affine(self, shift: float | torch.Tensor, scale: float | torch.Tensor) -> "GaussianPosterior":
        """The distribution of ``shift + scale · Y`` (used to undo target standardisation).

        Parameters
        ----------
        shift, scale : float or torch.Tensor (scalar)

        Returns
        -------
        GaussianPosterior
        """
        scale_t = torch.as_tensor(scale, dtype=self._mean.dtype, device=self._mean.device)
        mean = shift + scale_t * self._mean
        noise = None if self.noise_variance is None else self.noise_variance * scale_t**2
        if self._covariance is None:
            return GaussianPosterior(mean, variance=self._variance * scale_t**2,
                                     observation_noise=self.observation_noise, noise_variance=noise)
        cov = self._covariance * scale_t**2
        return GaussianPosterior(mean, covariance=cov, observation_noise=self.observation_noise,
                                 noise_variance=noise)
