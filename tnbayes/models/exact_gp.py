"""Exact Gaussian-process regression on GPyTorch: the baseline every tnbayes model is compared with.

Honest by construction: float64 by default, Cholesky forced at every size (GPyTorch would silently
switch to conjugate gradients above 800 points), hyper-parameters by type-II maximum likelihood
with restarts, marginal predictive variances computed in test-point chunks.
"""

from __future__ import annotations

import contextlib
import copy
import math
import warnings
from typing import Iterator, Sequence

import gpytorch
import torch
from linear_operator.utils.errors import NanError, NotPSDError
from linear_operator.utils.warnings import NumericalWarning

from tnbayes._validation import available_memory_bytes, unique_record_indices
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model

__all__ = ["ExactGP"]

_KERNELS = ("rbf", "matern")


@contextlib.contextmanager
def exact_gpytorch_settings() -> Iterator[None]:
    """GPyTorch settings for exact inference: Cholesky at any size, no CG, no Lanczos variances."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(gpytorch.settings.max_cholesky_size(2**62))
        stack.enter_context(gpytorch.settings.fast_computations(
            covar_root_decomposition=False, log_prob=False, solves=False))
        stack.enter_context(gpytorch.settings.fast_pred_var(False))
        stack.enter_context(gpytorch.settings.cholesky_max_tries(6))
        yield


class _GPyTorchRegressor(gpytorch.models.ExactGP):
    def __init__(self, train_x: torch.Tensor, train_y: torch.Tensor,
                 likelihood: gpytorch.likelihoods.GaussianLikelihood,
                 covar_module: gpytorch.kernels.Kernel) -> None:
        super().__init__(train_x, train_y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = covar_module

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


class ExactGP(BaseModel):
    """Exact GP regression with an ARD squared-exponential or Matérn kernel (GPyTorch).

    The model is ``y = c + f(x) + ε``, ``f ~ GP(0, σ_f² k_ℓ)``, ``ε ~ N(0, σ²)``, on standardised
    inputs and targets. Hyper-parameters (ℓ per input, σ_f², σ², c) maximise the exact marginal
    likelihood; the best of ``num_restarts + 1`` optimiser runs is kept (the first starts from
    ℓ = 1, σ_f² = 1, σ² = 0.1; the others from random log-uniform values).

    Parameters
    ----------
    kernel : {"rbf", "matern"}
        Base kernel (wrapped in a ``ScaleKernel``).
    nu : {0.5, 1.5, 2.5}
        Matérn smoothness (ignored for ``"rbf"``).
    ard : bool
        One lengthscale per input (True) or a shared one.
    optimizer : {"lbfgs", "adam"}
        L-BFGS with strong-Wolfe line search (default) or Adam.
    max_iter : int
        Iterations per optimiser run.
    lr : float
        Adam learning rate (ignored for L-BFGS).
    num_restarts : int
        Extra runs from random initial hyper-parameters.
    noise_lower_bound : float
        Lower bound of the noise variance on the standardised scale.
    lengthscale_lower_bound : float or sequence of float, optional
        Lower bound of the lengthscales, in the units of ``X`` (one value, or one per input). Use it
        when the kernel will later be approximated by a finite basis that cannot represent shorter
        lengthscales (``CPDKernelMachine`` does); ML-II then explains the unresolvable structure as
        noise instead of interpolating it. Default: no bound.
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
        Final negative marginal log likelihood per data point (of the records ML-II saw).
    num_duplicates_ : int
        Repeated (x, y) records left out of the marginal likelihood (0 with ``drop_duplicates=False``).
    history_ : list of float
        Best negative MLL per data point of each optimiser run.
    """

    _transient_attributes = ("gp_",)

    def __init__(self, kernel: str = "rbf", nu: float = 2.5, *, ard: bool = True, optimizer: str = "lbfgs",
                 max_iter: int = 200, lr: float = 0.05, num_restarts: int = 2,
                 noise_lower_bound: float = 1e-6, lengthscale_lower_bound: float | Sequence[float] | None = None,
                 drop_duplicates: bool = True, max_train_size: int | None = None, seed: int = 0, normalize_y: bool = True, dtype: torch.dtype | str | None = None,
                 device: str | torch.device | None = None, verbose: bool = False) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self.kernel = kernel
        self.nu = nu
        self.ard = ard
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.lr = lr
        self.num_restarts = num_restarts
        self.noise_lower_bound = noise_lower_bound
        self.lengthscale_lower_bound = lengthscale_lower_bound
        self.drop_duplicates = drop_duplicates
        self.max_train_size = max_train_size
        self.seed = seed

    # ------------------------------------------------------------------ construction
    def _validate_params(self) -> None:
        if self.kernel not in _KERNELS:
            raise ValueError(f"kernel must be one of {_KERNELS}; got {self.kernel!r}.")
        if self.kernel == "matern" and float(self.nu) not in (0.5, 1.5, 2.5):
            raise ValueError(f"GPyTorch's Matérn kernel needs nu in (0.5, 1.5, 2.5); got {self.nu}.")
        if self.optimizer not in ("lbfgs", "adam"):
            raise ValueError(f"optimizer must be 'lbfgs' or 'adam'; got {self.optimizer!r}.")
        if int(self.max_iter) < 1 or int(self.num_restarts) < 0:
            raise ValueError("max_iter must be >= 1 and num_restarts >= 0.")

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

    def _build(self, X: torch.Tensor, y: torch.Tensor) -> _GPyTorchRegressor:
        ard_dims = X.shape[1] if self.ard else None
        bound = self._standardised_lengthscale_bound(X.shape[1])
        constraint = None if bound is None else gpytorch.constraints.GreaterThan(bound.to(X.dtype))
        if self.kernel == "rbf":
            base = gpytorch.kernels.RBFKernel(ard_num_dims=ard_dims, lengthscale_constraint=constraint)
        else:
            base = gpytorch.kernels.MaternKernel(nu=float(self.nu), ard_num_dims=ard_dims,
                                                 lengthscale_constraint=constraint)
        likelihood = gpytorch.likelihoods.GaussianLikelihood(
            noise_constraint=gpytorch.constraints.GreaterThan(float(self.noise_lower_bound)))
        model = _GPyTorchRegressor(X, y, likelihood, gpytorch.kernels.ScaleKernel(base))
        return model.to(dtype=X.dtype, device=X.device)

    # ------------------------------------------------------------------ fitting
    def _initialise(self, model: _GPyTorchRegressor, run: int, generator: torch.Generator) -> None:
        n_ls = model.covar_module.base_kernel.lengthscale.shape[-1]
        if run == 0:
            lengthscale, outputscale, noise = torch.ones(n_ls), 1.0, 0.1
        else:
            u = torch.rand(n_ls + 2, generator=generator, dtype=torch.float64)
            lengthscale = torch.exp(math.log(0.2) + u[:n_ls] * math.log(5.0 / 0.2))
            outputscale = float(torch.exp(math.log(0.3) + u[n_ls] * math.log(3.0 / 0.3)))
            noise = float(torch.exp(math.log(1e-3) + u[n_ls + 1] * math.log(0.3 / 1e-3)))
        dev, dt = model.train_targets.device, model.train_targets.dtype
        bound = self._standardised_lengthscale_bound(model.train_inputs[0].shape[1])
        if bound is not None:  # start strictly inside the feasible region
            lengthscale = torch.maximum(lengthscale.reshape(1, -1), 2.0 * bound + 1e-3).reshape(-1)
        model.covar_module.base_kernel.lengthscale = lengthscale.to(dev, dt).reshape(1, -1)
        model.covar_module.outputscale = outputscale
        model.likelihood.noise = max(noise, 10 * float(self.noise_lower_bound))
        model.mean_module.constant.data.fill_(0.0)

    def _optimise(self, model: _GPyTorchRegressor) -> float:
        """Minimise the negative MLL per point from the current values; returns the final value.

        Aggressive line-search steps can reach hyper-parameters whose kernel matrix is numerically
        singular; such an evaluation is abandoned and the run ends at the best point seen so far.
        """
        model.train()
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
        X, y = model.train_inputs[0], model.train_targets
        params = [p for p in model.parameters() if p.requires_grad]
        best = {"loss": math.inf, "state": copy.deepcopy(model.state_dict())}

        def loss_fn() -> torch.Tensor:
            loss = -mll(model(X), y)
            if torch.isfinite(loss) and float(loss.detach()) < best["loss"]:
                best["loss"], best["state"] = float(loss.detach()), copy.deepcopy(model.state_dict())
            return loss

        try:
            with warnings.catch_warnings():
                # jitter added during line-search probes is expected; the final fit is checked below
                warnings.simplefilter("ignore", NumericalWarning)
                self._run_optimizer(params, loss_fn)
        except (NotPSDError, NanError):  # a probe step left the region of usable hyper-parameters
            pass
        model.load_state_dict(best["state"])
        with torch.no_grad():
            return float(-mll(model(X), y))

    def _run_optimizer(self, params: list[torch.nn.Parameter], loss_fn) -> None:
        if self.optimizer == "lbfgs":
            opt = torch.optim.LBFGS(params, lr=1.0, max_iter=int(self.max_iter), history_size=20,
                                    line_search_fn="strong_wolfe", tolerance_grad=1e-7, tolerance_change=1e-9)

            def closure() -> torch.Tensor:
                opt.zero_grad()
                loss = loss_fn()
                loss.backward()
                return loss

            opt.step(closure)
            return
        opt = torch.optim.Adam(params, lr=float(self.lr))
        for _ in range(int(self.max_iter)):
            opt.zero_grad()
            loss_fn().backward()
            opt.step()

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self._validate_params()
        self._check_size(X.shape[0])
        generator = torch.Generator().manual_seed(int(self.seed))
        keep = unique_record_indices(X, y) if self.drop_duplicates else None
        self.num_duplicates_ = 0 if keep is None else int(X.shape[0] - keep.numel())
        model = self._build(X, y) if not self.num_duplicates_ else self._build(X[keep], y[keep])
        best_state, best_loss, history = None, math.inf, []
        runs = range(int(self.num_restarts) + 1)
        if self.verbose:
            from tqdm.auto import tqdm
            runs = tqdm(runs, desc="ExactGP restarts")
        with exact_gpytorch_settings():
            for run in runs:
                self._initialise(model, run, generator)
                try:
                    loss = self._optimise(model)
                except (NotPSDError, NanError) as err:  # even the initial values gave a singular matrix
                    warnings.warn(f"ExactGP optimiser run {run} failed ({err}); skipped.", RuntimeWarning)
                    loss = math.nan
                history.append(loss)
                if math.isfinite(loss) and loss < best_loss:
                    best_loss, best_state = loss, copy.deepcopy(model.state_dict())
        if best_state is None:
            raise RuntimeError("Every ExactGP optimiser run failed; check the data for duplicates or "
                               "raise noise_lower_bound.")
        model.load_state_dict(best_state)
        if self.num_duplicates_:
            model.set_train_data(X, y, strict=False)  # condition on every record
        model.eval()
        self.gp_ = model
        self.train_inputs_ = X
        self.train_targets_ = y
        self.neg_mll_ = best_loss
        self.history_ = history
        self._read_hyperparameters()

    def _read_hyperparameters(self) -> None:
        with torch.no_grad():
            self.lengthscale_ = self.gp_.covar_module.base_kernel.lengthscale.detach().reshape(-1).clone()
            self.outputscale_ = float(self.gp_.covar_module.outputscale)
            self.noise_variance_ = float(self.gp_.likelihood.noise)
            self.mean_constant_ = float(self.gp_.mean_module.constant)

    # ------------------------------------------------------------------ prediction
    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        self.gp_.eval()
        with torch.no_grad(), exact_gpytorch_settings(), warnings.catch_warnings():
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
        """Exact log marginal likelihood of the (standardised) training data at the fitted values."""
        self._check_fitted("log_marginal_likelihood")
        self.gp_.train()
        try:
            with torch.no_grad(), exact_gpytorch_settings():
                mll = gpytorch.mlls.ExactMarginalLogLikelihood(self.gp_.likelihood, self.gp_)
                value = float(mll(self.gp_(self.train_inputs_), self.train_targets_)) * self.n_train_
        finally:
            self.gp_.eval()
        return value

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, torch.Tensor]:
        return dict(self.gp_.state_dict())

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        self._validate_params()
        model = self._build(self.train_inputs_, self.train_targets_)
        model.load_state_dict(extra)
        model.eval()
        self.gp_ = model


register_model("exact_gp", ExactGP)
register_model("exact_gp_matern", lambda **kw: ExactGP(kernel="matern", nu=2.5, **kw))
