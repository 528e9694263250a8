"""Type-II maximum likelihood (ML-II) of an exact GP: the one hyper-parameter fit every model uses.

:class:`~tnbayes.ExactGP` fits its own hyper-parameters with :func:`fit_marginal_likelihood`;
:class:`~tnbayes.CPDKernelMachine`, :class:`~tnbayes.TNKF` and :class:`~tnbayes.TTKalmanGP` borrow theirs
through :func:`~tnbayes.selection.estimate_kernel_hyperparameters`, which calls the same function.

What keeps it sound on data nobody tuned it for:

* **A dimension-scaled lengthscale prior** (Hvarfner, Hellsten & Nardi 2024, "Vanilla Bayesian optimization
  performs great in high dimensions"; BoTorch's default since 0.12): on inputs normalised to the unit cube,
  ``log ℓ_d ~ N(√2 + ½ log D, 3)``. Our inputs are standardised, so the location is shifted by the log of each
  column's range (the unit-cube normalisation BoTorch applies). In D dimensions squared distances grow like D,
  and a lengthscale that does not grow like √D makes every pair of points uncorrelated: the noise then explains
  everything, the "constant fit" optimum. The prior is weak (standard deviation √3 in log space) and enters the
  objective as a log density divided by N, as GPyTorch does for registered priors.
* **A log-normal noise prior**, ``log σ² ~ N(−4, 1)`` on the standardised scale (BoTorch's default beside the
  lengthscale prior): weak where the data speak, it keeps the noise off its lower bound, where ML-II otherwise
  finds interpolating optima that use irrelevant inputs to fit the noise.
* **Starts drawn around the prior**: the first run starts at the prior mode, the others at log-uniform values
  within a factor 5 of it.
* **A collapse check**: if the best optimum predicts the training targets no better than their mean — its
  leave-one-out R² (exact for a GP: ``r_i = [K⁻¹y]_i / [K⁻¹]_ii``) is below :data:`COLLAPSE_LOO_R2` — further runs
  start from a low noise and shorter lengthscales; a collapsed optimum is kept only if it is still the best, and
  it is then flagged (``MarginalLikelihoodFit.collapsed``). Leave-one-out catches both forms of "the noise explains
  everything": a large noise variance, and a lengthscale so short that the kernel acts as white noise.

Everything here works on standardised inputs and targets; callers convert units.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterator

import gpytorch
import torch
from linear_operator.utils.errors import NanError, NotPSDError
from linear_operator.utils.warnings import NumericalWarning

from tnbayes._warnings import warn_user
from tnbayes.basis.spectral import KERNEL_ALIASES
from tnbayes.selection.leave_one_out import leave_one_out_loss, leave_one_out_r2, leave_one_out_scores

__all__ = ["COLLAPSE_LOO_R2", "NUMERICAL_LENGTHSCALE_FLOOR", "LENGTHSCALE_PRIOR_SCALE", "gp_kernel_family",
           "NOISE_PRIOR_LOCATION", "NOISE_PRIOR_SCALE", "MarginalLikelihoodFit", "MarginalLikelihoodSettings", "build_exact_gp", "build_kernel_and_likelihood",
           "exact_gpytorch_settings", "exact_log_marginal_likelihood", "fit_marginal_likelihood", "initial_lengthscale",
           "lengthscale_prior_location"]

#: standard deviation of the log-normal lengthscale prior (Hvarfner et al. 2024)
LENGTHSCALE_PRIOR_SCALE = math.sqrt(3.0)
#: location and scale of the log-normal prior of the noise variance on the standardised scale (BoTorch's default)
NOISE_PRIOR_LOCATION = -4.0
NOISE_PRIOR_SCALE = 1.0
#: an optimum whose leave-one-out R² on the training targets is below this counts as collapsed
COLLAPSE_LOO_R2 = 0.05
#: initial noise variance (standardised scale) of the first run and of the collapse-check runs
_INITIAL_NOISE = 0.1
_RESCUE_NOISE = 0.01
#: factors of the prior-mode lengthscale the collapse-check runs start from
_RESCUE_LENGTHSCALE_FACTORS = (1.0, 0.3)
#: random restarts start within this factor of the prior mode (log-uniformly)
_RESTART_SPREAD = 5.0
_KERNELS = ("se", "matern")
#: floor of every lengthscale ML-II fits (standardised scale; a given lower bound applies on top). GPyTorch's squared
#: distances ‖x/ℓ‖² + ‖x'/ℓ‖² − 2 (x/ℓ)·(x'/ℓ) lose about eps·‖x/ℓ‖² to cancellation: at ℓ → 0 (ML-II's optimum when
#: targets are a lookup table of discrete inputs) an input equal to a training input got a kernel value near 0, not 1.
#: In float64 at the floor that error is about 1e-6 for inputs up to 5 in magnitude (float32 models are not covered)
NUMERICAL_LENGTHSCALE_FLOOR = 1e-4


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


def gp_kernel_family(kernel: str, nu: float | None) -> tuple[str, float | None]:
    """The GPyTorch kernel an ML-II fit builds: ``("se", nu)`` or ``("matern", ν)``.

    Parameters
    ----------
    kernel : str
        ``"se"`` / ``"matern"`` or any name :func:`tnbayes.basis.resolve_kernel` knows (``"rbf"``, ``"matern32"`` …).
    nu : float or None
        Matérn smoothness for ``kernel="matern"``; ignored for SE, and for a named Matérn when it agrees.

    Returns
    -------
    family : {"se", "matern"}
    nu : float or None
        The Matérn smoothness; None for SE.
    """
    key = kernel.lower().replace("-", "").replace("/", "").replace(" ", "") if isinstance(kernel, str) else kernel
    if key not in KERNEL_ALIASES:
        raise ValueError(f"kernel must be one of {_KERNELS} (or another SE / Matérn name: "
                         f"{sorted(KERNEL_ALIASES)}); got {kernel!r}.")
    family, named_nu = KERNEL_ALIASES[key]
    if family == "matern":
        return "matern", float(named_nu if named_nu is not None else nu)
    return "se", None


@dataclass(frozen=True)
class MarginalLikelihoodSettings:
    """How ML-II is run.

    Attributes
    ----------
    kernel : {"se", "matern"} or any SE / Matérn name of :func:`tnbayes.basis.resolve_kernel`
    nu : float
        Matérn smoothness (0.5, 1.5 or 2.5; ignored for SE; a named Matérn such as ``"matern32"`` sets it).
    ard : bool
        One lengthscale per input or a shared one.
    prior : {"dimension_scaled", None}
        The log-normal hyper-priors described in the module docstring, or none (plain maximum likelihood).
    optimizer : {"lbfgs", "adam"}
    max_iter : int
        Iterations per optimiser run.
    lr : float
        Adam learning rate.
    num_restarts : int
        Runs after the first, from random starts around the prior mode.
    noise_lower_bound : float
        Lower bound of the noise variance (standardised scale).
    lengthscale_lower_bound : torch.Tensor of shape (1, D) or (1, 1), optional
        Lower bound of the lengthscales on the standardised scale (at least :data:`NUMERICAL_LENGTHSCALE_FLOOR`).
    seed : int
        Seed of the random starts and of the screening subsample.
    screen_size : int
        With more records than this, the starts are compared on a random subsample of this size first.
    objective : {"marginal_likelihood", "leave_one_out"}
        ``"marginal_likelihood"``: ML-II (MAP-II with the prior). ``"leave_one_out"``: ML-II as above, then one
        more run from its optimum that keeps the lengthscales and fits the outputscale, the noise variance and the
        constant mean to the mean leave-one-out log predictive density (with the same prior;
        :mod:`tnbayes.selection.leave_one_out`).
    time_limit : float, optional
        Seconds after the start of the fit that the leave-one-out run may go on to; it ends in its best point so
        far when they are spent, and does not start when ML-II (which always finishes) has spent them. None: no
        limit.
    """

    kernel: str = "se"
    nu: float = 2.5
    ard: bool = True
    prior: str | None = "dimension_scaled"
    optimizer: str = "lbfgs"
    max_iter: int = 200
    lr: float = 0.05
    num_restarts: int = 2
    noise_lower_bound: float = 1e-6
    lengthscale_lower_bound: torch.Tensor | None = None
    seed: int = 0
    screen_size: int = 500
    objective: str = "marginal_likelihood"
    time_limit: float | None = None

    def validate(self) -> None:
        """Raise ``ValueError`` for settings ML-II cannot run with."""
        family, nu = gp_kernel_family(self.kernel, self.nu)
        if family == "matern" and nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"GPyTorch's Matérn kernel needs nu in (0.5, 1.5, 2.5); got {self.nu}.")
        if self.optimizer not in ("lbfgs", "adam"):
            raise ValueError(f"optimizer must be 'lbfgs' or 'adam'; got {self.optimizer!r}.")
        if self.prior not in ("dimension_scaled", None):
            raise ValueError(f"prior must be 'dimension_scaled' or None; got {self.prior!r}.")
        if self.objective not in ("marginal_likelihood", "leave_one_out"):
            raise ValueError(f"objective must be 'marginal_likelihood' or 'leave_one_out'; got {self.objective!r}.")
        if self.time_limit is not None and not float(self.time_limit) >= 0:
            raise ValueError(f"time_limit must be None or >= 0 seconds; got {self.time_limit!r}.")
        if int(self.max_iter) < 1 or int(self.num_restarts) < 0 or int(self.screen_size) < 2:
            raise ValueError("max_iter must be >= 1, num_restarts >= 0 and screen_size >= 2.")
        if not float(self.noise_lower_bound) > 0:
            raise ValueError(f"noise_lower_bound must be > 0; got {self.noise_lower_bound!r}.")


@dataclass
class MarginalLikelihoodFit:
    """Result of :func:`fit_marginal_likelihood`.

    Attributes
    ----------
    model : gpytorch.models.ExactGP
        The fitted GPyTorch model (in training mode is not guaranteed; call ``.eval()`` before predicting).
    objective : float
        The last objective minimised, at the kept optimum: the negative log marginal likelihood per data point
        (or, with ``settings.objective == "leave_one_out"``, the negative mean leave-one-out log density), plus the
        negative log prior density divided by N when a prior is used.
    history : list of float
        The final objective of every run (NaN for a failed run), in the order they ran.
    starts : list of str
        What each run started from (``"prior mode"``, ``"random"``, the best screened start, ``"collapse check"``).
    loo_r2 : float
        Leave-one-out R² of the kept optimum on the training targets.
    collapsed : bool
        ``loo_r2`` is below :data:`COLLAPSE_LOO_R2`: the fit predicts no better than the mean.
    leave_one_out_log_density : float
        Mean leave-one-out log predictive density of the kept optimum (nats per point).
    marginal_likelihood_optimum_log_density : float
        The same at the ML-II optimum (before a leave-one-out run; equal to the above without one).
    leave_one_out_run : bool
        The leave-one-out run took place (``settings.objective == "leave_one_out"`` and ML-II ended before
        ``settings.time_limit``).
    """

    model: gpytorch.models.ExactGP
    objective: float
    history: list[float] = field(default_factory=list)
    starts: list[str] = field(default_factory=list)
    loo_r2: float = math.nan
    collapsed: bool = False
    leave_one_out_log_density: float = math.nan
    marginal_likelihood_optimum_log_density: float = math.nan
    leave_one_out_run: bool = False

    def noise_fraction(self) -> float:
        """σ² / (σ² + σ_f²) of the kept optimum."""
        return _noise_fraction(self.model)


class _GPyTorchRegressor(gpytorch.models.ExactGP):
    def __init__(self, train_x: torch.Tensor, train_y: torch.Tensor,
                 likelihood: gpytorch.likelihoods.GaussianLikelihood,
                 covar_module: gpytorch.kernels.Kernel) -> None:
        super().__init__(train_x, train_y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = covar_module

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _column_ranges(X: torch.Tensor) -> torch.Tensor:
    """max − min per column (1 for a constant column), float64 on the CPU, shape (D,)."""
    ranges = (X.max(0).values - X.min(0).values).detach().to(torch.float64).cpu()
    return torch.where(ranges > 0, ranges, torch.ones_like(ranges))


def lengthscale_prior_location(X: torch.Tensor, ard: bool = True) -> torch.Tensor:
    """Location μ_d of the dimension-scaled log-normal lengthscale prior, in the units of ``X``.

    ``μ_d = √2 + ½ log D + log(range_d)``: the prior of Hvarfner et al. (2024) on the unit cube, carried over to
    data whose column d spans ``range_d``.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
    ard : bool
        One location per column (True) or one shared location (the mean of the log ranges).

    Returns
    -------
    torch.Tensor of shape (D,) or (1,)
        float64.
    """
    num_dims = X.shape[1]
    log_range = _column_ranges(X).log()
    if not ard:
        log_range = log_range.mean().reshape(1)
    return math.sqrt(2.0) + 0.5 * math.log(num_dims) + log_range


def initial_lengthscale(X: torch.Tensor, ard: bool = True) -> torch.Tensor:
    """Mode of the dimension-scaled lengthscale prior, ``exp(μ_d − 3)``: the start of the first ML-II run.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
    ard : bool

    Returns
    -------
    torch.Tensor of shape (D,) or (1,)
        float64, in the units of ``X``.
    """
    return torch.exp(lengthscale_prior_location(X, ard) - LENGTHSCALE_PRIOR_SCALE**2)


def _lengthscale_bound(settings: MarginalLikelihoodSettings) -> torch.Tensor:
    """The settings' lengthscale bound, at least :data:`NUMERICAL_LENGTHSCALE_FLOOR` (float64, CPU): (1, D) or (1, 1)
    as given; without one 0-d, the shape of GPyTorch's default constraint, so model files saved before the floor
    load."""
    bound = settings.lengthscale_lower_bound
    if bound is None:
        return torch.tensor(NUMERICAL_LENGTHSCALE_FLOOR, dtype=torch.float64)
    return bound.detach().to("cpu", torch.float64).reshape(1, -1).clamp_min(NUMERICAL_LENGTHSCALE_FLOOR)


def build_kernel_and_likelihood(X: torch.Tensor, settings: MarginalLikelihoodSettings
                                ) -> tuple[gpytorch.kernels.ScaleKernel, gpytorch.likelihoods.GaussianLikelihood]:
    """The covariance and the likelihood of every GPyTorch model in tnbayes (ExactGP, SVGP): ``ScaleKernel`` of an
    ARD SE or Matérn kernel and Gaussian noise, with the hyper-priors and bounds of ``settings``.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
        Standardised inputs whose column ranges place the dimension-scaled lengthscale prior (the rows ML-II sees,
        or a subsample of them); their dtype and device are the modules'.
    settings : MarginalLikelihoodSettings

    Returns
    -------
    (gpytorch.kernels.ScaleKernel, gpytorch.likelihoods.GaussianLikelihood)
        On ``X``'s dtype and device.
    """
    settings.validate()
    ard_dims = X.shape[1] if settings.ard else None
    # the priors' tensors are made on X's device: Module.to moves a prior's buffers but not the loc and scale of
    # its torch.distributions base (a CUDA model then failed with a CPU prior)
    on_x = {"dtype": X.dtype, "device": X.device}
    constraint = gpytorch.constraints.GreaterThan(_lengthscale_bound(settings).to(**on_x))
    prior = None
    if settings.prior == "dimension_scaled":
        loc = lengthscale_prior_location(X, settings.ard)
        prior = gpytorch.priors.LogNormalPrior(loc.to(**on_x).reshape(1, -1),
                                               torch.full((1, loc.numel()), LENGTHSCALE_PRIOR_SCALE, **on_x))
    family, nu = gp_kernel_family(settings.kernel, settings.nu)
    if family == "se":
        base = gpytorch.kernels.RBFKernel(ard_num_dims=ard_dims, lengthscale_constraint=constraint,
                                          lengthscale_prior=prior)
    else:
        base = gpytorch.kernels.MaternKernel(nu=nu, ard_num_dims=ard_dims,
                                             lengthscale_constraint=constraint, lengthscale_prior=prior)
    noise_prior = None
    if settings.prior == "dimension_scaled":
        noise_prior = gpytorch.priors.LogNormalPrior(torch.tensor(NOISE_PRIOR_LOCATION, **on_x),
                                                     torch.tensor(NOISE_PRIOR_SCALE, **on_x))
    likelihood = gpytorch.likelihoods.GaussianLikelihood(
        noise_prior=noise_prior, noise_constraint=gpytorch.constraints.GreaterThan(float(settings.noise_lower_bound)))
    kernel = gpytorch.kernels.ScaleKernel(base)
    return kernel.to(dtype=X.dtype, device=X.device), likelihood.to(dtype=X.dtype, device=X.device)


def build_exact_gp(X: torch.Tensor, y: torch.Tensor, settings: MarginalLikelihoodSettings,
                   prior_inputs: torch.Tensor | None = None) -> gpytorch.models.ExactGP:
    """The GPyTorch model ML-II optimises: constant mean, ScaleKernel(ARD SE or Matérn), Gaussian noise.

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
        Standardised training inputs.
    y : torch.Tensor of shape (N,)
        Standardised training targets.
    settings : MarginalLikelihoodSettings
    prior_inputs : torch.Tensor of shape (N', D), optional
        Inputs whose column ranges place the lengthscale prior (default ``X``; a model that conditions on more
        rows than ML-II saw passes the rows ML-II saw, so a rebuilt model has the same prior).

    Returns
    -------
    gpytorch.models.ExactGP
    """
    kernel, likelihood = build_kernel_and_likelihood(X if prior_inputs is None else prior_inputs.to(X), settings)
    model = _GPyTorchRegressor(X, y, likelihood, kernel)
    return model.to(dtype=X.dtype, device=X.device)


def _noise_fraction(model: gpytorch.models.ExactGP) -> float:
    with torch.no_grad():
        noise = float(model.likelihood.noise)
        signal = float(model.covar_module.outputscale)
    return noise / (noise + signal)


def _collapsed(model: gpytorch.models.ExactGP) -> bool:
    r2 = leave_one_out_r2(model)
    return not r2 >= COLLAPSE_LOO_R2  # NaN (singular matrix) counts as collapsed


def _set_start(model: gpytorch.models.ExactGP, settings: MarginalLikelihoodSettings, lengthscale: torch.Tensor,
               outputscale: float, noise: float) -> None:
    dev, dt = model.train_targets.device, model.train_targets.dtype
    lengthscale = torch.maximum(lengthscale.to(dev, dt).reshape(1, -1),  # strictly inside the feasible region
                                2.0 * _lengthscale_bound(settings).to(dev, dt) + 1e-3)
    model.covar_module.base_kernel.lengthscale = lengthscale
    model.covar_module.outputscale = outputscale
    model.likelihood.noise = max(noise, 10 * float(settings.noise_lower_bound))
    model.mean_module.constant.data.fill_(0.0)


def _run_optimizer(settings: MarginalLikelihoodSettings, params: list[torch.nn.Parameter],
                   loss_fn: Callable[[], torch.Tensor]) -> None:
    if settings.optimizer == "lbfgs":
        opt = torch.optim.LBFGS(params, lr=1.0, max_iter=int(settings.max_iter), history_size=20,
                                line_search_fn="strong_wolfe", tolerance_grad=1e-7, tolerance_change=1e-9)

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            return loss

        opt.step(closure)
        return
    opt = torch.optim.Adam(params, lr=float(settings.lr))
    for _ in range(int(settings.max_iter)):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()


class _OutOfTime(Exception):
    """The run's time limit was reached."""


def _optimise(model: gpytorch.models.ExactGP, settings: MarginalLikelihoodSettings,
              objective: Callable[[gpytorch.models.ExactGP], torch.Tensor] | None = None,
              deadline: float | None = None) -> float:
    """Minimise ``objective(model)`` (default: the negative log marginal likelihood per point, with the prior)
    from the current values; returns its final value.

    Aggressive line-search steps can reach hyper-parameters whose kernel matrix is numerically singular; such an
    evaluation is abandoned and the run ends at the best point seen so far, as it does before an evaluation that
    would end after ``deadline`` (a ``time.perf_counter()`` value; judged by the duration of the last one).
    """
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    X, y = model.train_inputs[0], model.train_targets
    if objective is None:
        def objective(target: gpytorch.models.ExactGP) -> torch.Tensor:
            return -mll(target(X), y)
    params = [p for p in model.parameters() if p.requires_grad]
    best = {"loss": math.inf, "state": copy.deepcopy(model.state_dict())}
    previous_start = [time.perf_counter()]

    def loss_fn() -> torch.Tensor:
        now = time.perf_counter()  # an evaluation (with its gradient) took about now - previous_start
        if deadline is not None and 2 * now - previous_start[0] > deadline:
            raise _OutOfTime
        previous_start[0] = now
        loss = objective(model)
        if torch.isfinite(loss) and float(loss.detach()) < best["loss"]:
            best["loss"], best["state"] = float(loss.detach()), copy.deepcopy(model.state_dict())
        return loss

    try:
        with warnings.catch_warnings():
            # jitter added during line-search probes is expected; the final fit is checked by the caller
            warnings.simplefilter("ignore", NumericalWarning)
            _run_optimizer(settings, params, loss_fn)
    except (NotPSDError, NanError, _OutOfTime):  # a probe left the usable hyper-parameters, or time ran out
        pass
    model.load_state_dict(best["state"])
    if math.isfinite(best["loss"]):  # the kept state's value, already computed
        return best["loss"]
    with torch.no_grad():
        return float(objective(model))


def _starts(X: torch.Tensor, settings: MarginalLikelihoodSettings,
            generator: torch.Generator) -> list[tuple[str, torch.Tensor, float, float]]:
    """(label, lengthscale, outputscale, noise) of every run: the prior mode, then random starts around it."""
    mode = initial_lengthscale(X, settings.ard)
    starts = [("prior mode", mode, 1.0, _INITIAL_NOISE)]
    spread = math.log(_RESTART_SPREAD)
    for _ in range(int(settings.num_restarts)):
        u = torch.rand(mode.numel() + 2, generator=generator, dtype=torch.float64)
        lengthscale = mode * torch.exp((2 * u[:-2] - 1) * spread)
        outputscale = float(torch.exp(math.log(0.3) + u[-2] * math.log(10.0)))
        noise = float(torch.exp(math.log(1e-3) + u[-1] * math.log(300.0)))
        starts.append(("random", lengthscale, outputscale, noise))
    return starts


def fit_marginal_likelihood(X: torch.Tensor, y: torch.Tensor, settings: MarginalLikelihoodSettings,
                            *, progress: bool = False) -> MarginalLikelihoodFit:
    """Fit the hyper-parameters of an exact GP by ML-II (MAP-II with the lengthscale prior) on standardised data.

    With more than ``settings.screen_size`` records and several starts, every start is first optimised on a random
    subsample of ``screen_size`` records (each step costs O(n³)), and only the best of them is then optimised on
    all records. The collapse check runs on all records. With ``settings.objective == "leave_one_out"`` one more
    run starts from the kept ML-II optimum and, with the lengthscales kept, maximises the mean leave-one-out log
    predictive density over the outputscale, the noise variance and the constant mean (it keeps the ML-II values
    if no point it reaches is better; see ``settings.time_limit``).

    Parameters
    ----------
    X : torch.Tensor of shape (N, D)
        Standardised inputs (zero mean, unit standard deviation per column is expected, not required).
    y : torch.Tensor of shape (N,)
        Standardised targets.
    settings : MarginalLikelihoodSettings
    progress : bool
        Show a progress bar over the runs.

    Returns
    -------
    MarginalLikelihoodFit
        The best run's model (in eval mode) and the diagnostics.

    Raises
    ------
    RuntimeError
        If every run failed (the kernel matrix was singular even at the starting values).
    """
    settings.validate()
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(int(settings.seed))
    starts = _starts(X, settings, generator)
    model = build_exact_gp(X, y, settings)
    screen = X.shape[0] > int(settings.screen_size) and len(starts) > 1
    screen_model = model
    if screen:
        rows = torch.randperm(X.shape[0], generator=generator)[: int(settings.screen_size)].to(X.device)
        screen_model = build_exact_gp(X[rows], y[rows], settings, prior_inputs=X)
    result = MarginalLikelihoodFit(model=model, objective=math.inf)
    best: dict[str, object] = {"loss": math.inf, "state": None}

    def run(target: gpytorch.models.ExactGP, label: str, start: tuple[torch.Tensor, float, float] | None) -> None:
        if start is not None:
            _set_start(target, settings, *start)
        try:
            loss = _optimise(target, settings)
        except (NotPSDError, NanError) as err:  # even the starting values gave a singular matrix
            warn_user(f"ML-II run from the {label} failed ({err}); skipped.", RuntimeWarning)
            loss = math.nan
        result.history.append(loss)
        result.starts.append(label)
        if math.isfinite(loss) and loss < best["loss"]:
            best["loss"], best["state"] = loss, copy.deepcopy(target.state_dict())

    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(starts) + int(screen), desc="ML-II runs")
    with exact_gpytorch_settings():
        for label, *start in starts:
            run(screen_model, label + (f" (screened on {settings.screen_size} records)" if screen else ""),
                tuple(start))
            if bar is not None:
                bar.update()
        if screen and best["state"] is not None:
            model.load_state_dict(best["state"])
            best["loss"] = math.inf  # objectives per point on the subsample and on all records differ
            run(model, "best screened start, on all records", None)
            if bar is not None:
                bar.update()
        if best["state"] is not None:
            model.load_state_dict(best["state"])
            if _collapsed(model):  # "the noise explains everything": look further
                mode = starts[0][1]
                for factor in _RESCUE_LENGTHSCALE_FACTORS:
                    run(model, "collapse check", (mode * factor, 1.0, _RESCUE_NOISE))
    if bar is not None:
        bar.close()
    if best["state"] is None:
        raise RuntimeError("Every ML-II optimiser run failed; check the data for duplicates or raise "
                           "noise_lower_bound.")
    model.load_state_dict(best["state"])
    result.objective = float(best["loss"])
    deadline = None if settings.time_limit is None else started + float(settings.time_limit)
    if settings.objective == "leave_one_out" and (deadline is None or time.perf_counter() < deadline):
        result.marginal_likelihood_optimum_log_density = leave_one_out_scores(model)[1]
        lengthscale = model.covar_module.base_kernel.raw_lengthscale
        lengthscale.requires_grad_(False)
        try:
            with exact_gpytorch_settings():
                result.objective = _optimise(model, settings, leave_one_out_loss, deadline)
        finally:
            lengthscale.requires_grad_(True)
        result.history.append(result.objective)
        result.starts.append("ML-II optimum, leave-one-out density over the scales and the mean")
        result.leave_one_out_run = True
    model.eval()
    result.loo_r2, result.leave_one_out_log_density = leave_one_out_scores(model)
    if not result.leave_one_out_run:
        result.marginal_likelihood_optimum_log_density = result.leave_one_out_log_density
    result.collapsed = not result.loo_r2 >= COLLAPSE_LOO_R2
    return result


def exact_log_marginal_likelihood(model: gpytorch.models.ExactGP, X: torch.Tensor, y: torch.Tensor) -> float:
    """log p(y | X, θ) of the model's hyper-parameters θ (no prior term), summed over the N points.

    Parameters
    ----------
    model : gpytorch.models.ExactGP
    X : torch.Tensor of shape (N, D)
    y : torch.Tensor of shape (N,)

    Returns
    -------
    float
    """
    model.train()
    try:
        with torch.no_grad(), exact_gpytorch_settings():
            return float(model.likelihood(model(X)).log_prob(y))
    finally:
        model.eval()
