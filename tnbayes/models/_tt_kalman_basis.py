"""The bases :class:`~tnbayes.TTKalmanGP` filters over — the Hilbert basis (default) or a tensor-product feature map
— and how their hyper-parameters are set (the *basis* axis of the TT Kalman filter).

The batch filter of :mod:`tnbayes.inference.kalman.tt_batch` needs per-mode feature rows ``(K, n, M)`` and a
diagonal Gaussian prior on the weights. The Hilbert basis gives both through a kernel's spectral density; a
tensor-product feature map of :mod:`tnbayes.basis.tensor_product` gives features whose weights have a
unit-variance prior (scaled here by σ_f²). What the real-valued filter can take: real features, one component,
every mode of the same size M. :class:`TTKalmanBasisMixin` holds the model's side of it: the hyper-parameters,
the fitted basis, the prior root, the feature rows and the box the basis represents.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import minimize

from tnbayes.basis import (
    FourierPolynomialFeatures,
    HilbertBasis,
    TensorProductFeatures,
    check_hilbert_approximation,
    data_center_and_half_range,
    hilbert_box,
    resolvable_lengthscale,
)
from tnbayes.basis.spectral import kernel_name
from tnbayes.inference.budget import TT_KALMAN_MAX_NUM_BASIS
from tnbayes.selection.hyperparameters import estimate_kernel_hyperparameters

__all__ = ["BASES", "DEFAULT_POLYNOMIAL_NUM_BASIS", "TTKalmanBasisMixin", "check_basis", "evidence_hyperparameters",
           "feature_rows", "make_feature_map"]

#: the named bases: ``"hilbert"`` (Laplace eigenfunctions weighted by the kernel's spectral density) and
#: ``"polynomial"`` (pure powers 1, x, …, x^{M−1} per input, unit-variance weights)
BASES = ("hilbert", "polynomial")
#: M of ``basis="polynomial"`` when ``num_basis`` is not given (cubic in every input)
DEFAULT_POLYNOMIAL_NUM_BASIS = 4


def check_basis(basis: str | TensorProductFeatures) -> None:
    """Raise ``ValueError`` unless ``basis`` is one of :data:`BASES` or a feature map the real TT filter can take.

    Parameters
    ----------
    basis : str or TensorProductFeatures
        A feature map must be real (``is_complex`` False), have one component and modes of one size.
    """
    if isinstance(basis, str):
        if basis not in BASES:
            raise ValueError(f"basis must be one of {BASES} or a tnbayes.basis.TensorProductFeatures; got {basis!r}.")
        return
    if not isinstance(basis, TensorProductFeatures):
        raise ValueError(f"basis must be one of {BASES} or a tnbayes.basis.TensorProductFeatures; "
                         f"got {type(basis).__name__}.")
    if basis.is_complex:
        raise ValueError("TTKalmanGP filters real weights: complex feature maps (Fourier features) are not "
                         "supported; use basis='hilbert' (a real sine basis on a box) or polynomial features.")
    if basis.num_components != 1:
        raise ValueError(f"TTKalmanGP needs a feature map with one component; got {basis.num_components} "
                         "(a period mixture has no diagonal Gaussian prior over one weight tensor).")
    if len(set(basis.mode_sizes)) != 1:
        raise ValueError(f"TTKalmanGP needs modes of one size; got {basis.mode_sizes} (quantize a num_basis that is a "
                         "power of a prime, or quantized=False).")


def make_feature_map(basis: str | TensorProductFeatures, num_dims: int, num_basis: int | None) -> TensorProductFeatures:
    """The feature map of a non-Hilbert ``basis`` for inputs with ``num_dims`` columns.

    Parameters
    ----------
    basis : "polynomial" or TensorProductFeatures
        A ready feature map is used as it is.
    num_dims : int
        D, the input columns.
    num_basis : int, optional
        M of ``"polynomial"`` (default :data:`DEFAULT_POLYNOMIAL_NUM_BASIS`).

    Returns
    -------
    TensorProductFeatures
    """
    if isinstance(basis, TensorProductFeatures):
        inputs = basis.mode_inputs()
        if inputs is not None and max(inputs) >= num_dims:
            raise ValueError(f"The feature map reads input column {max(inputs)}; X has {num_dims} columns.")
        return basis
    if basis != "polynomial":
        raise ValueError(f"No feature map for basis={basis!r}.")
    M = DEFAULT_POLYNOMIAL_NUM_BASIS if num_basis is None else int(num_basis)
    return FourierPolynomialFeatures(num_dims, M, "polynomial", quantized=False)


def feature_rows(feature_map: TensorProductFeatures, X: torch.Tensor) -> torch.Tensor:
    """Per-mode features of the rows of X.

    Parameters
    ----------
    feature_map : TensorProductFeatures
        Real, one component, K modes of size M.
    X : torch.Tensor of shape (n, D)
        Scaled inputs (checked by the feature map's ``check_inputs``).

    Returns
    -------
    torch.Tensor of shape (K, n, M)
    """
    feature_map.check_inputs(X)
    return torch.stack([feature_map.mode_features(X, mode)[0] for mode in range(feature_map.num_modes)])


def evidence_hyperparameters(phi: torch.Tensor, y: torch.Tensor, *, outputscale: float | None = None,
                             noise_variance: float | None = None) -> tuple[float, float]:
    """σ_f² and σ² that maximise the marginal likelihood of ``y = φ(x)ᵀ v + ε``, ``v ~ N(0, σ_f² I)``,
    ``ε ~ N(0, σ²)``, on a (small) set of rows.

    The kernel of the features is ``K = ⊙_k Φ_k Φ_kᵀ`` (the Kronecker product of the modes is never formed); with
    ``K = U diag(λ) Uᵀ`` and ``z = Uᵀy`` the negative log evidence is ``½ Σ_i (z_i² / s_i + log s_i)`` for
    ``s_i = σ_f² λ_i + σ²``, minimised over the log-variances not given (L-BFGS-B with the exact gradient). σ² stays
    above 1e-6 of the targets' variance.

    Parameters
    ----------
    phi : torch.Tensor of shape (K, n, M)
        Per-mode features of the rows (n at most a few thousand: K is n × n).
    y : torch.Tensor of shape (n,)
        Their targets (centred).
    outputscale, noise_variance : float, optional
        Values to keep instead of estimating them.

    Returns
    -------
    outputscale, noise_variance : float
    """
    phi, y = phi.to(torch.float64), y.to(torch.float64)
    kernel = torch.ones(y.shape[0], y.shape[0], dtype=torch.float64, device=y.device)
    for factor in phi:
        kernel = kernel * (factor @ factor.T)
    eigenvalues, vectors = torch.linalg.eigh(kernel)
    eigenvalues = eigenvalues.clamp_min(0.0).cpu().numpy()
    projected = ((vectors.T @ y) ** 2).cpu().numpy()
    variance = float(y.var()) if y.numel() > 1 and float(y.var()) > 0 else 1.0
    floor = 1e-6 * variance

    def negative_log_evidence(theta: np.ndarray) -> tuple[float, np.ndarray]:
        prior, noise = np.exp(theta)
        total = prior * eigenvalues + floor + noise
        slope = 0.5 * (1.0 / total - projected / total**2)  # d/d(total) of ½ (z²/total + log total)
        value = 0.5 * float(np.sum(projected / total + np.log(total)))
        return value, np.array([float(np.sum(slope * eigenvalues)) * prior, float(np.sum(slope)) * noise])

    # a given value is kept by pinning its coordinate (equal bounds)
    start = [math.log(outputscale) if outputscale is not None
             else math.log(variance / max(float(kernel.diagonal().mean()), 1e-300)),
             math.log(noise_variance - floor) if noise_variance is not None and noise_variance > floor
             else math.log(0.1 * variance)]
    bounds = [(start[0], start[0]) if outputscale is not None else (None, None),
              (start[1], start[1]) if noise_variance is not None else (None, None)]
    theta = minimize(negative_log_evidence, np.array(start), jac=True, method="L-BFGS-B", bounds=bounds).x
    fitted_prior = float(outputscale) if outputscale is not None else float(np.exp(theta[0]))
    fitted_noise = float(noise_variance) if noise_variance is not None else floor + float(np.exp(theta[1]))
    return fitted_prior, fitted_noise


class TTKalmanBasisMixin:
    """TTKalmanGP's basis: hyper-parameters, the fitted basis (``basis_``), its prior root and feature rows.

    Reads the model's parameters (``basis``, ``kernel``, ``nu``, ``num_basis``, ``c``, ``lengthscale``,
    ``outputscale``, ``noise_variance``, ``max_num_basis``, …); ``_make_basis`` calls the model's ``_plan_budget``.
    """

    @property
    def _hilbert(self) -> bool:
        """Whether the basis is the Hilbert basis (``basis="hilbert"``)."""
        return isinstance(self.basis, str) and self.basis == "hilbert"

    def _hyperparameters(self, X: torch.Tensor, y: torch.Tensor,
                         extremes: torch.Tensor) -> tuple[torch.Tensor, float, float]:
        """ℓ (D,), σ_f², σ²: given, or by ML-II on (a subsample of) X (n, D), y (n,), bounded below by the shortest
        lengthscale the largest automatic M resolves over the training range ``extremes`` (≥ 1, D) (see
        :func:`~tnbayes.basis.resolvable_lengthscale`). For a basis other than Hilbert: ℓ is None, σ_f² and σ² are
        given or maximise the evidence of the basis's Bayesian linear regression."""
        if not self._hilbert:
            return (None, *self._feature_hyperparameters(X, y))
        D = X.shape[1]
        estimated = None
        if self.lengthscale is None or self.outputscale is None or self.noise_variance is None:
            _, half_range = data_center_and_half_range(extremes.cpu(), allow_constant=True)
            half_range = torch.where(half_range > 0, half_range, torch.ones_like(half_range))
            num_basis = int(self.num_basis) if self.num_basis is not None else self._num_basis_cap()
            estimated = estimate_kernel_hyperparameters(
                X, y, kernel=self.kernel, nu=self.nu, max_points=int(self.hyper_max_points), seed=int(self.seed),
                lengthscale_lower_bound=resolvable_lengthscale(half_range, num_basis, self.c))
        self.hyperparameter_source_ = "given" if estimated is None else estimated.describe()
        self._report(f"kernel hyper-parameters: {self.hyperparameter_source_} (an exact GP's ML-II, lengthscales at "
                     f"least what M ≤ {int(self.num_basis) if self.num_basis is not None else self._num_basis_cap()} "
                     f"functions resolve; given values are kept).")
        if self.lengthscale is not None:
            ls = torch.as_tensor(self.lengthscale, dtype=torch.float64).reshape(-1)
            if ls.numel() not in (1, D) or bool((ls <= 0).any()):
                raise ValueError(f"lengthscale must be one positive number or one per input ({D}); "
                                 f"got {self.lengthscale!r}.")
            ls = ls.expand(D).clone()
        else:
            ls = estimated.lengthscale.to(torch.float64).reshape(-1).expand(D).clone()
        outputscale = float(self.outputscale) if self.outputscale is not None else float(estimated.outputscale)
        noise = float(self.noise_variance) if self.noise_variance is not None else float(estimated.noise_variance)
        return ls, outputscale, noise

    def _feature_hyperparameters(self, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        """σ_f², σ² of a non-Hilbert basis: given, or by :func:`evidence_hyperparameters` on at most
        ``hyper_max_points`` random rows of X (n, D), y (n,)."""
        given = self.outputscale is not None and self.noise_variance is not None
        given_values = {"outputscale": None if self.outputscale is None else float(self.outputscale),
                        "noise_variance": None if self.noise_variance is None else float(self.noise_variance)}
        if given:
            self.hyperparameter_source_ = "given"
            return given_values["outputscale"], given_values["noise_variance"]
        rows = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(int(self.seed)))
        rows = rows[: int(self.hyper_max_points)].to(X.device)
        feature_map = make_feature_map(self.basis, X.shape[1], self.num_basis)
        outputscale, noise = evidence_hyperparameters(feature_rows(feature_map, X[rows]),
                                                      y[rows] - float(self.mean_constant), **given_values)
        self.hyperparameter_source_ = (f"marginal likelihood of the basis's Bayesian linear regression on "
                                       f"{rows.numel()} points")
        self._report(f"prior and noise variances: {self.hyperparameter_source_} (σ_f² = {outputscale:.3g}, "
                     f"σ² = {noise:.3g}; given values are kept).")
        return outputscale, noise

    def _make_basis(self, X: torch.Tensor, lengthscale: torch.Tensor | None, num_rows: int,
                    elapsed_seconds: float = 0.0, *,
                    rows_in_memory: bool = True) -> HilbertBasis | TensorProductFeatures:
        """The fitted basis for the training range X (≥ 1, D), after the budget chose M (Hilbert) or with the
        feature map's own M; ``elapsed_seconds``: what the fit took so far (the budget's filter share is cut when the
        hyper-parameters took longer than theirs); ``rows_in_memory``: the training rows are a tensor, not streamed
        (the budget's plan of the smoothing depends on it)."""
        if not self._hilbert:
            feature_map = make_feature_map(self.basis, X.shape[1], self.num_basis)
            self._plan_budget(feature_map.mode_sizes[0], feature_map.num_modes, num_rows, fixed_num_basis=True,
                              elapsed_seconds=elapsed_seconds, rows_in_memory=rows_in_memory)
            return feature_map
        D = X.shape[1]
        center, half_range = data_center_and_half_range(X, allow_constant=True)
        half_range = torch.where(half_range > 0, half_range, torch.ones_like(half_range))
        name = kernel_name(self.kernel, self.nu)
        if self.c is not None:
            given = torch.as_tensor(self.c, dtype=torch.float64).reshape(-1)
            if given.numel() not in (1, D) or bool((given < 1).any()):
                raise ValueError(f"c must be one number >= 1 or one per input ({D}); got {self.c!r}.")
        c, m_rule = hilbert_box(lengthscale, half_range.to(torch.float64), name, c=self.c)
        M = self._plan_budget(int(m_rule), D, num_rows, elapsed_seconds=elapsed_seconds, rows_in_memory=rows_in_memory)
        basis = HilbertBasis(M, L=(c * half_range.to(torch.float64).cpu()).tolist(), center=center.tolist(),
                             num_dims=D)
        if name in ("se", "matern32", "matern52"):
            check_hilbert_approximation(lengthscale.tolist(), basis.L.tolist(), M, name,
                                        half_range=half_range.tolist())
        return basis

    def _num_basis_cap(self) -> int:
        """Largest automatic M: ``max_num_basis``; for ``"auto"`` 8, or with a time budget
        :data:`~tnbayes.inference.budget.TT_KALMAN_MAX_NUM_BASIS`."""
        if self.max_num_basis != "auto":
            return int(self.max_num_basis)
        return TT_KALMAN_MAX_NUM_BASIS if self.time_budget is not None else 8

    def _prior_root(self) -> torch.Tensor:
        """The diagonals (K, M) of the prior root: L₀ = σ_f ⊗_d diag(√S_d) for the Hilbert basis (unit-variance
        weights times σ_f for a feature map)."""
        if self._hilbert:
            weights = self.basis_.spectral_weights(self.lengthscale_, self.kernel, self.nu)  # (D, M) = √S_d
        else:
            weights = torch.ones(self.basis_.num_modes, self.num_basis_)
        return (self.outputscale_ ** (0.5 / weights.shape[0])) * weights.to(dtype=torch.float64, device=self.device_)

    def _features(self, X: torch.Tensor) -> torch.Tensor:
        """Per-mode features (K, n, M) of scaled inputs X (n, D)."""
        return self.basis_.eigenfunctions(X) if self._hilbert else feature_rows(self.basis_, X)

    def _representable_box(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The Hilbert box (lower, upper), each (D,), of the fitted basis; None for a feature map without one."""
        basis = self.basis_ if self._hilbert else getattr(self.basis_, "basis", None)  # BasisFeatures: its box
        if not isinstance(basis, HilbertBasis):
            return None  # the feature map predicts anywhere (or checks its inputs itself)
        center, half_width = basis.center, basis.L
        return center - half_width, center + half_width
