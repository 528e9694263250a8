"""Exact Gaussian-process regression on GPyTorch: the baseline every tnbayes model is compared with.

Honest by construction: float64 by default, Cholesky forced at every size (GPyTorch would silently
switch to conjugate gradients above 800 points), hyper-parameters by type-II maximum likelihood
with restarts, marginal predictive variances computed in test-point chunks.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import gpytorch
import torch

from tnbayes._deprecation import DEPRECATED
from tnbayes._memory import available_memory_bytes
from tnbayes._validation import unique_record_indices
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model
from tnbayes.selection.marginal_likelihood import (
    MarginalLikelihoodSettings,
    build_exact_gp,
    exact_gpytorch_settings,
    exact_log_marginal_likelihood,
    fit_marginal_likelihood,
)

__all__ = ["ExactGP", "exact_gpytorch_settings"]


class ExactGP(BaseModel):
    """Exact GP regression with an ARD squared-exponential or Matérn kernel (GPyTorch).

    The model is ``y = c + f(x) + ε``, ``f ~ GP(0, σ_f² k_ℓ)``, ``ε ~ N(0, σ²)``, on standardised
    inputs and targets. Hyper-parameters (ℓ per input, σ_f², σ², c) maximise the exact marginal
    likelihood times weak log-normal priors on ℓ (scaled with the number of inputs) and σ²; the best of ``num_restarts + 1``
    optimiser runs is kept (the first starts at the prior mode, which grows like √D; the others at random
    values around it), and an optimum where the noise explains nearly all the variance triggers further
    runs from a low noise before it is accepted. See :mod:`tnbayes.selection.marginal_likelihood`.

    Parameters
    ----------
    kernel : {"se", "matern"}, or another SE / Matérn name of :func:`tnbayes.basis.resolve_kernel`
        Base kernel (wrapped in a ``ScaleKernel``).
    nu : {0.5, 1.5, 2.5}
        Matérn smoothness (ignored for SE; ``"rbf"`` is accepted as an alias of ``"se"``).
    ard : bool
        One lengthscale per input (True) or a shared one.
    optimizer : {"lbfgs", "adam"}
        L-BFGS with strong-Wolfe line search (default) or Adam.
    max_iter : int
        Iterations per optimiser run.
    learning_rate : float
        Adam learning rate (ignored for L-BFGS).
    num_restarts : int
        Extra runs from random initial hyper-parameters.
    screen_size : int
        With more training records than this, the ``num_restarts + 1`` starts are compared on a random subsample
        of this size (each step costs O(n³)) and only the best is optimised on all records.
    prior : {"dimension_scaled", None}
        Weak log-normal hyper-priors (default): on ℓ, scaled with the number of inputs (Hvarfner et al. 2024), and
        on σ² (BoTorch's defaults); or none (plain maximum likelihood, which can settle on the constant fit or on
        an interpolating fit in many dimensions).
    noise_lower_bound : float
        Lower bound of the noise variance on the standardised scale.
    lengthscale_lower_bound : float or sequence of float, optional
        Lower bound of the lengthscales, in the units of ``X`` (one value, or one per input). Use it
        when the kernel will later be approximated by a finite basis that cannot represent shorter
        lengthscales (``CPDKernelMachine`` does); ML-II then explains the unresolvable structure as
        noise instead of interpolating it. Default: none beyond the numerical floor every ML-II fit keeps
        (:data:`~tnbayes.selection.marginal_likelihood.NUMERICAL_LENGTHSCALE_FLOOR`, standardised scale).
    drop_duplicates : bool
        Maximise the marginal likelihood on the distinct (x, y) records only (default); the posterior
        still conditions on every training point. A repeated record looks to ML-II like a noise-free
        replicate: on wine-red (186 repeated records in 1439) keeping them drives σ² to its lower bound
        and the lengthscales to 0, an interpolating fit with worse test RMSE. Repeated inputs with
        different targets are kept either way (they inform the noise).
    max_train_size : int, optional
        Refuse larger training sets. By default the limit comes from the memory an n×n float
        Cholesky needs (several copies) against the memory available.
    seed : int
        Seed of the random restarts.
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.
    lr : float
        Deprecated alias of ``learning_rate`` (FutureWarning).

    Attributes
    ----------
    gp_ : gpytorch.models.ExactGP
        The fitted GPyTorch model (on standardised data).
    lengthscale_ : torch.Tensor of shape (d,) or (1,)
        Fitted lengthscales in standardised input units.
    outputscale_ : float
    noise_variance_ : float
        Noise variance on the standardised target scale (``noise_std`` gives the noise in user units).
    neg_mll_ : float
        Final objective per data point (of the records ML-II saw): the negative log marginal likelihood, plus
        the negative log prior density / N with ``prior``.
    num_duplicates_ : int
        Repeated (x, y) records left out of the marginal likelihood (0 with ``drop_duplicates=False``).
    n_iter_ : int
        The optimiser runs (restarts included; each at most ``max_iter`` iterations).
    history_ : list of float of length n_iter_
        Final objective of each optimiser run, in the order they ran.
    converged_ : bool
        Always True: the number of runs is fixed, there is no stopping rule a budget could cut short (each
        L-BFGS run stops at its own tolerance or at ``max_iter``).
    ml_starts_ : list of str
        Where each run started (``"prior mode"``, ``"random"``, ``"collapse check"``).
    loo_r2_ : float
        Leave-one-out R² of the fit on the (standardised) training targets of the records ML-II saw.
    collapsed_ : bool
        ``loo_r2_`` is about 0 or below: the fit predicts no better than the mean (no signal ML-II can find).
    """

    _transient_attributes = ("gp_",)
    _renamed_parameters = {"lr": "learning_rate"}

    def __init__(self, kernel: str = "se", nu: float = 2.5, *, ard: bool = True, optimizer: str = "lbfgs",
                 max_iter: int = 200, learning_rate: float = 0.05, num_restarts: int = 2,
                 screen_size: int = 500, prior: str | None = "dimension_scaled", noise_lower_bound: float = 1e-6, lengthscale_lower_bound: float | Sequence[float] | None = None,
                 drop_duplicates: bool = True, max_train_size: int | None = None, seed: int = 0, normalize_y: bool = True, dtype: torch.dtype | str | None = None,
                 device: str | torch.device | None = None, verbose: bool = False, lr: float | str = DEPRECATED) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self._keep_parameters(locals())

    # ------------------------------------------------------------------ construction
    def _settings(self, num_dims: int) -> MarginalLikelihoodSettings:
        return MarginalLikelihoodSettings(
            kernel=self.kernel, nu=float(self.nu), ard=bool(self.ard), prior=self.prior,
            optimizer=self.optimizer, max_iter=int(self.max_iter), lr=float(self.learning_rate),
            num_restarts=int(self.num_restarts), noise_lower_bound=float(self.noise_lower_bound),
            lengthscale_lower_bound=self._standardised_lengthscale_bound(num_dims), seed=int(self.seed),
            screen_size=int(self.screen_size))

    def _check_size(self, n: int) -> None:
        bytes_per = torch.finfo(self.dtype_).bits // 8
        needed = 6 * n * n * bytes_per  # kernel, Cholesky factor, gradients and temporaries
        limit = self.max_train_size
        if limit is not None and n > limit:
            reason = f"exceeds max_train_size={limit}"
        elif limit is None and needed > 0.8 * available_memory_bytes(self.device_):
            reason = (f"needs about {needed / 2**30:.1f} GiB for the n×n Cholesky but only "
                      f"{available_memory_bytes(self.device_) / 2**30:.1f} GiB are available")
        else:
            return
        raise MemoryError(
            f"ExactGP with n={n} training points {reason}. Use a scalable model instead "
            f"(tnbayes.HilbertGP, tnbayes.CPDKernelMachine) or fit on a random subsample."
        )

    def _standardised_lengthscale_bound(self, num_dims: int) -> torch.Tensor | None:
        """The lengthscale lower bound on the standardised input scale: shape (1, D), (1, 1) or None."""
        if self.lengthscale_lower_bound is None:
            return None
        bound = torch.as_tensor(self.lengthscale_lower_bound, dtype=torch.float64).reshape(-1).cpu()
        if bound.numel() not in (1, num_dims) or not bool(torch.isfinite(bound).all()) or bool((bound < 0).any()):
            raise ValueError(f"lengthscale_lower_bound must be one non-negative number or one per input "
                             f"({num_dims}); got {self.lengthscale_lower_bound!r}.")
        scale = self.x_scaler_.scale_.reshape(-1).to(torch.float64).cpu()
        bound = (bound.expand(num_dims) / scale).reshape(1, -1)
        return bound if self.ard else bound.max().reshape(1, 1)

    # ------------------------------------------------------------------ fitting
    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self._check_size(X.shape[0])
        settings = self._settings(X.shape[1])
        settings.validate()
        keep = unique_record_indices(X, y) if self.drop_duplicates else None
        self.num_duplicates_ = 0 if keep is None else int(X.shape[0] - keep.numel())
        X_ml, y_ml = (X, y) if not self.num_duplicates_ else (X[keep], y[keep])
        fit = fit_marginal_likelihood(X_ml, y_ml, settings, progress=bool(self.verbose))
        model = fit.model
        if self.num_duplicates_:
            model.set_train_data(X, y, strict=False)  # condition on every record
        model.eval()
        self.gp_ = model
        self.train_inputs_ = X
        self.train_targets_ = y
        self.neg_mll_ = fit.objective
        self.history_ = fit.history
        self.n_iter_ = len(self.history_)
        self.converged_ = True
        self.ml_starts_ = fit.starts
        self.collapsed_ = fit.collapsed
        self.loo_r2_ = fit.loo_r2
        self._read_hyperparameters()
        ls = self.lengthscale_.detach().cpu()
        screened = any("screened" in start for start in fit.starts)
        rescued = "collapse check" in fit.starts
        self._report(
            f"ML-II on {X_ml.shape[0]} records ({self.num_duplicates_} repeated records left out): best of "
            f"{int(self.num_restarts) + 1} starts (the dimension-scaled prior mode and {int(self.num_restarts)} random "
            f"ones" + (f", compared on {int(self.screen_size)} records first" if screened else "") + ")"
            + ("; the first optimum predicted no better than the mean, so it also started from a low noise"
               if rescued else "")
            + f". Lengthscales (standardised units) {float(ls.min()):.3g}–{float(ls.max()):.3g}, noise fraction "
            f"{fit.noise_fraction():.3f}, leave-one-out R² {fit.loo_r2:.3f}"
            + (" — collapsed: no signal found, the fit is (nearly) the mean" if fit.collapsed else "") + ".")

    def _read_hyperparameters(self) -> None:
        with torch.no_grad():
            self.lengthscale_ = self.gp_.covar_module.base_kernel.lengthscale.detach().reshape(-1).clone()
            self.outputscale_ = float(self.gp_.covar_module.outputscale)
            self.noise_variance_ = float(self.gp_.likelihood.noise)
            self.mean_constant_ = float(self.gp_.mean_module.constant)

    # ------------------------------------------------------------------ prediction
    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        self.gp_.eval()
        # a graph only for inputs that ask for gradients (to_botorch's acquisition functions); the fitted
        # hyper-parameters are in that graph too, so their .grad fills when an acquisition function backpropagates
        differentiable = torch.is_grad_enabled() and X.requires_grad
        with torch.set_grad_enabled(differentiable), exact_gpytorch_settings(), warnings.catch_warnings():
            # predicting at the training inputs is legitimate (GPyTorch suspects a forgotten .train())
            warnings.simplefilter("ignore", gpytorch.utils.warnings.GPInputWarning)
            if full_covariance:
                f = self.gp_(X)
                return f.mean, f.covariance_matrix
            means, variances = [], []
            for chunk in torch.split(X, 2048):
                f = self.gp_(chunk)
                means.append(f.mean)
                variances.append(f.variance)
            return torch.cat(means), torch.cat(variances).clamp_min(0.0)

    def log_marginal_likelihood(self) -> float:
        """Exact log marginal likelihood of the (standardised) training data at the fitted values (no prior term)."""
        self._check_fitted("log_marginal_likelihood")
        return exact_log_marginal_likelihood(self.gp_, self.train_inputs_, self.train_targets_)

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, torch.Tensor]:
        return dict(self.gp_.state_dict())

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        model = build_exact_gp(self.train_inputs_, self.train_targets_, self._settings(self.train_inputs_.shape[1]))
        model.load_state_dict(extra)
        model.eval()
        self.gp_ = model


register_model("exact_gp", ExactGP)
register_model("exact_gp_matern", lambda **kw: ExactGP(kernel="matern", nu=2.5, **kw))
