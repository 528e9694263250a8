"""Exact Bayesian regression on Hilbert-space GP features (Solin & Särkkä 2020).

Model (on standardised inputs and targets)::

    y = c + z(x)ᵀ w + ε,   w ~ N(0, σ_f² I),   ε ~ N(0, σ²),
    z(x) = Φ(x) s(ℓ)       Φ: products (or the concatenation, additive) of Laplace eigenfunctions,
                           s: square roots of the kernel's spectral density at the eigenfrequencies.

The hybrid structure concatenates an additive block and a truncated product block, each with its own share of
σ_f² and its own lengthscales: ``k = σ_f² [(1 − ρ) (1/D) Σ_d k_d(x_d, x'_d; ℓ_d) + ρ Π_{d ∈ P} k_d(x_d, x'_d; ℓ_P,d)]``
with the product expanded in the J multi-indices of largest prior variance (a valid GP for any choice of J).

Φ does not depend on the hyper-parameters, so the sufficient statistics ΦᵀΦ, Φᵀ1, Φᵀy, 1ᵀy and
yᵀy are accumulated once over row chunks; each marginal-likelihood evaluation then costs
O(M_tot³), the same at N = 10⁴ and N = 10⁷. With B = S ΦᵀΦ S + (σ²/σ_f²) I and r = y − c·1::

    −log p(y) = ½ [ (rᵀr − rᵀΦS B⁻¹ SΦᵀr) / σ² + N log σ² + M_tot log(σ_f²/σ²) + log|B| + N log 2π ]

and the weight posterior is N(B⁻¹ S Φᵀ r, σ² B⁻¹).
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from typing import Any

import torch

from tnbayes._sizes import check_fits_in_memory
from tnbayes._validation import ArrayLike, check_positive
from tnbayes.basis import (
    DEFAULT_MAX_PRODUCT_FEATURES,
    HILBERT_RULE_CONSTANTS,
    hilbert_box,
    HilbertBasis,
    additive_features,
    indexed_product_features,
    check_hilbert_approximation,
    choose_hilbert_parameters,
    data_center_and_half_range,
    product_features,
    resolve_kernel,
    top_product_indices,
)
from tnbayes.basis.spectral import kernel_name, log_spectral_density
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model
from tnbayes.selection.hyperparameters import estimate_kernel_hyperparameters
from tnbayes.selection.input_box import check_out_of_box_policy

__all__ = ["HilbertGP"]

#: the values of ``structure``
STRUCTURES = ("auto", "product", "additive", "hybrid")
#: largest M^D of the full product that structure="auto" tries (each likelihood step factorises M^D × M^D)
AUTO_MAX_PRODUCT_FEATURES = 1024
#: largest D·M the adaptation may reach for the additive structure (each likelihood step is O((D·M)³))
ADDITIVE_MAX_FEATURES = 1024
#: functions of the hybrid's product block (those of largest prior variance, see top_product_indices)
HYBRID_PRODUCT_FEATURES = 512
#: largest D·M of the hybrid's additive block
HYBRID_ADDITIVE_FEATURES = 512
#: rows of the subsample whose exact-GP lengthscales choose the hybrid's product block
PILOT_POINTS = 256
#: cap on those lengthscales (standardised inputs; longer means "irrelevant" just as well)
PILOT_MAX_LENGTHSCALE = 100.0
#: smallest prior variance of a product-block function, relative to the largest, at the pilot lengthscales
PRODUCT_MIN_RELATIVE_VARIANCE = 1e-30
#: largest starting lengthscale of the hybrid's product block (standardised inputs)
PRODUCT_START_LENGTHSCALE = 1.0
#: smallest M per input of a product block that structure="auto" builds
MIN_PRODUCT_NUM_BASIS = 8
#: box c = L/S the (M, c) search starts from when ``c`` is not given; each round enlarges it to what
#: :func:`tnbayes.basis.hilbert_box` asks for the fitted lengthscales (a box far too small for long lengthscales
#: would need many rounds)
ADAPTATION_START_BOUNDARY_FACTOR = 2.0
#: σ_f² (standardised scale) below which a fit is taken to have found no signal
COLLAPSED_OUTPUTSCALE = 1e-3


class _NegLogMarginalLikelihood(torch.autograd.Function):
    """−log p(y)/N of the weight-space model from the sufficient statistics, with a closed-form gradient.

    Autograd through the Cholesky factor costs several O(M_tot³) passes per step; the closed form needs the factor
    and K = B⁻¹ only. With G = ΦᵀΦ, g = Φᵀr, α = K S g, λ = σ²/σ_f² and q = gᵀ S K S g::

        ∂ log|B| / ∂s = 2 (G ∘ K) s,   ∂q/∂s = 2 α ∘ (g − G S α),   ∂(log|B| − q/σ²)/∂λ = tr K + αᵀα/σ².

    Inputs: s (M_tot,), σ_f², σ², c (scalars) and the statistics of :meth:`HilbertGP._accumulate_statistics`.
    """

    @staticmethod
    def forward(ctx: Any, s: torch.Tensor, outputscale: torch.Tensor, noise: torch.Tensor, const: torch.Tensor,
                stats: dict[str, Any]) -> torch.Tensor:
        n, m = stats["n"], s.shape[0]
        B = s[:, None] * stats["gram"] * s[None, :]
        B.diagonal().add_(noise / outputscale)
        chol = torch.linalg.cholesky(B)
        g = stats["rhs"] - const * stats["ones"]  # Φᵀ r
        alpha = torch.cholesky_solve((s * g).unsqueeze(-1), chol).squeeze(-1)
        rr = stats["yy"] - 2 * const * stats["sum_y"] + const**2 * n
        q = (s * g) @ alpha
        logdet = 2 * torch.log(torch.diagonal(chol)).sum()
        loss = 0.5 * ((rr - q) / noise + n * torch.log(noise) + m * torch.log(outputscale / noise) + logdet
                      + n * math.log(2 * math.pi)) / n
        if any(ctx.needs_input_grad[:4]):
            ctx.save_for_backward(s, outputscale, noise, const, chol, alpha, g, rr, q)
            ctx.stats = stats
        return loss

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        s, outputscale, noise, const, chol, alpha, g, rr, q = ctx.saved_tensors
        stats = ctx.stats
        n, m, gram = stats["n"], s.shape[0], stats["gram"]
        K = torch.cholesky_inverse(chol)
        d_lambda = torch.trace(K) + (alpha @ alpha) / noise
        scale = grad * 0.5 / n
        d_s = scale * (2 * ((gram * K) @ s) - 2 * alpha * (g - gram @ (s * alpha)) / noise)
        d_outputscale = scale * (m / outputscale - d_lambda * noise / outputscale**2)
        d_noise = scale * (-(rr - q) / noise**2 + (n - m) / noise + d_lambda / outputscale)
        d_const = scale * 2 * (const * n - stats["sum_y"] + alpha @ (s * stats["ones"])) / noise
        return d_s, d_outputscale, d_noise, d_const, None


class HilbertGP(BaseModel):
    """Hilbert-space GP regression with a closed-form Gaussian posterior over the basis weights.

    Parameters
    ----------
    kernel : {"se", "matern12", "matern32", "matern52", "matern"}
        Stationary kernel approximated by the basis (``"matern"`` needs ``nu``).
    nu : float, optional
        Matérn smoothness for ``kernel="matern"`` (any ν > 0).
    num_basis : int, optional
        Basis functions per input dimension M. Default: chosen from the data (see Notes).
    c : float or list of float (one per input), optional
        Boundary factor: the box is ``[centre − c·S, centre + c·S]`` per standardised input, with S
        the half-range of the training inputs. Default: chosen from the data (see Notes).
    structure : {"auto", "product", "additive", "hybrid"}
        ``"product"``: product kernel over the inputs (M^D features). ``"additive"``: additive kernel
        (D·M features, scaled by 1/D so that the kernel has unit variance). ``"hybrid"``: an additive block plus a
        product block over the inputs that matter most, truncated to the ``HYBRID_PRODUCT_FEATURES`` functions of
        largest prior variance (see Notes). ``"auto"`` (default) fits the candidates (additive; product where
        M^D ≤ 1024 with M ≥ 8, i.e. D ≤ 3; hybrid; for D = 1 only the product) and keeps the one with the highest
        optimised marginal likelihood less ½ log N per hyper-parameter; ``structure_search_`` lists them.
    product_inputs : list of int, optional
        Inputs (columns) the hybrid's product block may use (default: all; those that get only their first
        function are dropped, see Notes). Only with ``structure`` ``"hybrid"`` or ``"auto"``.
    ard : bool
        One lengthscale per input dimension.
    lengthscale, outputscale, noise_variance, mean_constant : optional
        Fix a hyper-parameter (on the standardised scale, as :class:`~tnbayes.ExactGP` reports
        them) instead of maximising the marginal likelihood over it.
    max_iter : int
        L-BFGS iterations per marginal-likelihood run.
    num_restarts : int
        Extra runs from random initial values.
    max_adapt_rounds : int
        Rounds of the (M, c) adaptation (see Notes).
    max_num_basis : int
        Upper limit of the automatically chosen M.
    noise_lower_bound : float
        Lower bound of σ² (standardised scale).
    chunk_size : int
        Rows per chunk when accumulating ΦᵀΦ (memory is O(chunk_size · M_tot)).
    seed : int
        Seed of the random restarts.
    out_of_box : {"clip", "raise"}
        Test inputs beyond the prediction box (the training range plus half the Hilbert box's margin, see
        :meth:`input_box`) are clipped to its edge with one :class:`~tnbayes.selection.OutOfBoxWarning` that
        counts them (default), or refused with a ``ValueError``.
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.

    Attributes
    ----------
    basis_ : HilbertBasis
        The basis (box per standardised input).
    num_basis_, c_, structure_ : int, list of float (D,), str
        The values used (``structure_`` is ``"product"``, ``"additive"`` or ``"hybrid"``).
    structure_search_ : list of dict
        One entry per candidate fitted: ``candidate`` (structure), ``num_basis`` (M), ``product_inputs`` (inputs of
        the product block; all for ``"product"``, none for ``"additive"``), ``product_num_basis`` (largest number
        of functions per input in the product block), ``num_features`` (M_tot), ``neg_mll`` (−log p(y)/N at its
        optimum), ``num_hyperparameters`` (k, those maximised), ``score`` (``neg_mll + k log N / (2N)``, the
        smallest is chosen by ``"auto"``), ``chosen`` (bool) and ``seconds``.
    product_inputs_ : list of int
        Inputs of the product block (the chosen structure's, as in ``structure_search_``).
    product_indices_ : torch.Tensor of shape (J, len(product_inputs_)) or None
        The hybrid's product-block multi-indices (0-based function per product input); None otherwise.
    product_num_basis_ : int
        Largest number of functions per input in the product block (0 for ``"additive"``).
    lengthscale_ : torch.Tensor of shape (D,) or (1,)
        The lengthscales (of the additive block for ``"hybrid"``).
    product_lengthscale_ : torch.Tensor of shape (len(product_inputs_),) or (1,)
        The product block's lengthscales (``lengthscale_`` for ``"product"``, empty for ``"additive"``).
    product_share_ : float
        ρ, the product block's share of σ_f² (1 for ``"product"``, 0 for ``"additive"``).
    outputscale_, noise_variance_, mean_constant_ : float
    weight_mean_ : torch.Tensor of shape (M_tot,)
        Posterior mean of w.
    weight_cov_factor_ : torch.Tensor of shape (M_tot, M_tot)
        Lower Cholesky factor L of B; the weight covariance is σ² (L Lᵀ)⁻¹.
    neg_mll_ : float
        Negative log marginal likelihood per point at the optimum.
    n_iter_ : int
        The (M, c) rounds of ML-II that ran for the chosen structure (each at most ``max_iter`` L-BFGS iterations).
    history_ : list of float of length n_iter_
        Negative log marginal likelihood per point after every (M, c) round.
    converged_ : bool
        Whether the (M, c) rounds stopped because the box and basis met the approximation rule, before
        ``max_adapt_rounds`` ran out (True when ``num_basis`` and ``c`` are given or for the hybrid: one fit, no
        rounds to stop).
    adapt_rounds_ : list of dict
        One entry per (M, c) round: M, c, lengthscale and negative MLL.

    Notes
    -----
    When ``num_basis``/``c`` are not given they are chosen from the data: start from c = 2 (``ADAPTATION_START_BOUNDARY_FACTOR``) and the
    largest M allowed by the structure (64 for 1-D, 32 per dimension for 2-D products, min(32, 1024/D) for
    additive; the enlargement stops at ``max_num_basis`` and, for additive models, at D·M ≤ 1024),
    maximise the marginal likelihood, then check the fitted lengthscales against the rule of
    Riutort-Mayol et al. (2022) (``c ≥ 3.2 ℓ/S``, ``M ≥ 1.75 c S/ℓ`` for SE; Matérn constants
    likewise) tightened to ``c ≥ 1 + 2.6 ℓ/S`` and ``M ≥ 3.4 c S/ℓ`` (the published rule leaves
    percent-level kernel errors that bias the output scale), and refit with enlarged (M, c) if
    they are violated. An
    :class:`~tnbayes.basis.ApproximationWarning` is issued if the final values still violate the
    rule (e.g. M capped by ``max_num_basis``). Matérn-1/2 has no published rule: M and c stay at
    their starting values.

    **Structure.** With ``structure="auto"`` every candidate is a Gaussian-process model of the same targets, so
    their marginal likelihoods p(y | structure) are comparable: choosing the largest is Bayesian model selection
    over the structure, like choosing a kernel family by evidence, and the evidence already charges each candidate
    for the flexibility of its function space (the log-determinant term). The hyper-parameters θ, however, are
    maximised rather than integrated out, which favours the candidate with more of them (the hybrid has |P| + 1
    more than the additive model); the Laplace/BIC approximation of the integral charges ½ log N per
    hyper-parameter, so ``"auto"`` keeps the smallest ``−log p(y | θ̂)/N + k log N / (2N)``. The candidates are
    fitted in turn: the additive model with the (M, c) adaptation
    below; the full product (D ≤ 3) likewise; then the hybrid. The hybrid's product block is chosen from the
    lengthscales of an exact GP with a product (ARD) kernel fitted to ``PILOT_POINTS`` random rows
    (:func:`~tnbayes.selection.estimate_kernel_hyperparameters`): the ``HYBRID_PRODUCT_FEATURES`` multi-indices of
    largest prior variance under that kernel (:func:`~tnbayes.basis.top_product_indices`), so that short-lengthscale
    inputs get many functions and near-irrelevant ones only their first — those are dropped from the block, which
    is then constant along them. The hybrid keeps the start box c = 2 (or the given ``c``), starts its additive block
    from the additive fit, takes M as the additive fit's or what ``M ≥ 3.4 c S/ℓ`` asks for the shorter of the
    two lengthscales (at most D·M ≤ ``HYBRID_ADDITIVE_FEATURES``), and is fitted once, without the (M, c)
    adaptation and without the :class:`~tnbayes.basis.ApproximationWarning` check: it is a truncated expansion by
    design, judged by its evidence. Each marginal-likelihood step costs O(M_tot³) with M_tot ≤ 1024 for every
    candidate, its gradient in closed form.

    The statistics, the likelihood and the weight posterior are computed in float64 whatever
    ``dtype`` is (the O(M_tot³) work is cheap and float32 loses small noise variances); ``dtype``
    sets the dtype of the returned posterior. A constant input column gets a nominal unit box.
    """

    def __init__(self, kernel: str = "se", nu: float | None = None, *, num_basis: int | None = None,
                 c: float | None = None, structure: str = "auto", product_inputs: list[int] | None = None,
                 ard: bool = True,
                 lengthscale: float | list[float] | None = None, outputscale: float | None = None,
                 noise_variance: float | None = None, mean_constant: float | None = None,
                 max_iter: int = 200, num_restarts: int = 0, max_adapt_rounds: int = 3,
                 max_num_basis: int = 512, noise_lower_bound: float = 1e-6, chunk_size: int = 65536,
                 seed: int = 0, out_of_box: str = "clip", normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        self.out_of_box = out_of_box
        self.kernel = kernel
        self.nu = nu
        self.num_basis = num_basis
        self.c = c
        self.structure = structure
        self.product_inputs = product_inputs
        self.ard = ard
        self.lengthscale = lengthscale
        self.outputscale = outputscale
        self.noise_variance = noise_variance
        self.mean_constant = mean_constant
        self.max_iter = max_iter
        self.num_restarts = num_restarts
        self.max_adapt_rounds = max_adapt_rounds
        self.max_num_basis = max_num_basis
        self.noise_lower_bound = noise_lower_bound
        self.chunk_size = chunk_size
        self.seed = seed

    # ------------------------------------------------------------------ features
    def _set_structure(self, structure: str, num_basis: int, num_dims: int,
                       product: dict[str, Any] | None = None) -> None:
        """Set ``structure_``, ``product_inputs_``, ``product_indices_`` and ``product_num_basis_``; ``product``
        holds the hybrid's product block (``"inputs"``, list of int, and ``"indices"``, (J, |P|))."""
        self.structure_ = structure
        if structure == "product":
            self.product_inputs_, self.product_indices_ = list(range(num_dims)), None
            self.product_num_basis_ = int(num_basis)
        elif structure == "additive":
            self.product_inputs_, self.product_indices_, self.product_num_basis_ = [], None, 0
        else:
            self.product_inputs_ = [int(d) for d in product["inputs"]]
            self.product_indices_ = torch.as_tensor(product["indices"], dtype=torch.int64)
            self.product_num_basis_ = int(self.product_indices_.max()) + 1

    def _unweighted_features(self, X: torch.Tensor) -> torch.Tensor:
        """Φ(X): (N, M_tot) eigenfunction columns in the layout of ``structure_``, no spectral weights."""
        phi = self.basis_.eigenfunctions(X)  # (D, N, M)
        if self.structure_ == "product":
            return product_features(phi, max_features=DEFAULT_MAX_PRODUCT_FEATURES)
        additive = torch.cat(list(phi), dim=-1)
        if self.structure_ == "additive":
            return additive
        product = indexed_product_features(phi, self.product_inputs_, self.product_indices_.to(phi.device))
        return torch.cat([additive, product], dim=-1)

    def _feature_weights(self, lengthscale: torch.Tensor, block: dict[str, Any] | None = None) -> torch.Tensor:
        """s(ℓ): (M_tot,) square roots of the spectral density, in the column order of Φ.

        For ``structure_ == "hybrid"``, ``block`` holds ``"share"``, ρ, the product block's share of σ_f², and
        ``"product_lengthscale"`` (|P|,) or (1,), the product block's lengthscales (default: ``product_share_``
        and ``product_lengthscale_``); ``lengthscale`` is then the additive block's. The additive columns are
        scaled by √(1 − ρ), the product columns by √ρ.
        """
        w = self.basis_.spectral_weights(lengthscale, self.kernel, self.nu)  # (D, M)
        if self.structure_ == "product":
            return product_features(w.unsqueeze(-2), max_features=w.shape[-1] ** w.shape[0]).reshape(-1)
        if self.structure_ == "additive":
            return additive_features(w.unsqueeze(-2)).reshape(-1)
        if block is None:
            block = {"share": self.product_share_, "product_lengthscale": self.product_lengthscale_}
        rho = torch.as_tensor(block["share"], dtype=w.dtype, device=w.device)
        inputs = self.product_inputs_
        ls_p = torch.as_tensor(block["product_lengthscale"], dtype=w.dtype, device=w.device).reshape(-1)
        # (|P|, M) weights of the product inputs at ℓ_P: a (D,) lengthscale vector carrying ℓ_P at the positions P
        full = torch.ones(w.shape[0], dtype=w.dtype, device=w.device).index_put((torch.as_tensor(inputs),),
                                                                               ls_p.expand(len(inputs)))
        w_p = self.basis_.spectral_weights(full, self.kernel, self.nu)[inputs]
        s_p = indexed_product_features(w_p.unsqueeze(-2), range(len(inputs)), self.product_indices_.to(w.device))
        s_a = additive_features(w.unsqueeze(-2)).reshape(-1)
        return torch.cat([s_a * torch.sqrt(1 - rho), s_p.reshape(-1) * torch.sqrt(rho)])

    def _accumulate_statistics(self, X: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
        """ΦᵀΦ, Φᵀ1, Φᵀy, 1ᵀy, yᵀy and N, accumulated over row chunks."""
        gram = rhs = ones = None
        for start in range(0, X.shape[0], int(self.chunk_size)):
            Xc, yc = X[start:start + int(self.chunk_size)], y[start:start + int(self.chunk_size)]
            Phi = self._unweighted_features(Xc)
            if gram is None:
                gram, rhs, ones = Phi.T @ Phi, Phi.T @ yc, Phi.sum(0)
            else:
                gram += Phi.T @ Phi
                rhs += Phi.T @ yc
                ones += Phi.sum(0)
        return {"gram": gram, "rhs": rhs, "ones": ones, "sum_y": y.sum(), "yy": y @ y, "n": X.shape[0]}

    # ------------------------------------------------------------------ marginal likelihood
    def _posterior_system(self, stats: dict[str, Any], lengthscale: torch.Tensor, outputscale: torch.Tensor,
                          noise: torch.Tensor, const: torch.Tensor,
                          block: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
        s = self._feature_weights(lengthscale, block)
        m = s.shape[0]
        B = s[:, None] * stats["gram"] * s[None, :] + (noise / outputscale) * torch.eye(m, dtype=s.dtype, device=s.device)
        chol = torch.linalg.cholesky(B)
        zr = s * (stats["rhs"] - const * stats["ones"])  # S Φᵀ r
        rr = stats["yy"] - 2 * const * stats["sum_y"] + const**2 * stats["n"]
        alpha = torch.cholesky_solve(zr.unsqueeze(-1), chol).squeeze(-1)  # B⁻¹ S Φᵀ r
        return {"s": s, "chol": chol, "alpha": alpha, "zr": zr, "rr": rr}

    def _neg_mll(self, stats: dict[str, Any], lengthscale: torch.Tensor, outputscale: torch.Tensor,
                 noise: torch.Tensor, const: torch.Tensor,
                 block: dict[str, Any] | None = None) -> torch.Tensor:
        """Negative log marginal likelihood per data point (closed-form gradient: _NegLogMarginalLikelihood)."""
        s = self._feature_weights(lengthscale, block)
        return _NegLogMarginalLikelihood.apply(s, outputscale, noise, const, stats)

    def _optimise(self, stats: dict[str, Any],
                  init: dict[str, torch.Tensor | float] | None) -> tuple[dict[str, torch.Tensor], float]:
        """Maximise the marginal likelihood; ``init`` holds starting values (lengthscale, outputscale, noise,
        const and, for the hybrid, share and product_lengthscale), missing ones start at the defaults. Returns the
        values and −log p(y)/N."""
        dtype, device = stats["gram"].dtype, stats["gram"].device
        num_ls = self.basis_.num_dims if self.ard else 1
        generator = torch.Generator().manual_seed(int(self.seed))
        fixed = {"lengthscale": self.lengthscale, "outputscale": self.outputscale,
                 "noise": self.noise_variance, "const": self.mean_constant}
        sizes = {"lengthscale": num_ls}
        hybrid = self.structure_ == "hybrid"
        if hybrid:  # the product block's share of σ_f² and its own lengthscales (a given lengthscale fixes both)
            sizes["product_lengthscale"] = len(self.product_inputs_) if self.ard else 1
            fixed["share"] = None
            fixed["product_lengthscale"] = None
            if self.lengthscale is not None:
                ls = torch.as_tensor(self.lengthscale, dtype=dtype).reshape(-1)
                fixed["product_lengthscale"] = ls if ls.numel() == 1 else ls[self.product_inputs_]
            floor = self._product_lengthscale_floor().to(dtype=dtype, device=device)
            floor = floor if self.ard else floor.max().reshape(1)
        lower = float(self.noise_lower_bound)
        init = {} if init is None else init

        def unpack(raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            out = {}
            for name, value in raw.items():
                if fixed[name] is not None:
                    t = torch.as_tensor(fixed[name], dtype=dtype, device=device)
                    out[name] = t.reshape(-1).expand(sizes[name]).clone() if name in sizes else t
                elif name == "const":
                    out[name] = value
                elif name == "noise":
                    out[name] = lower + torch.nn.functional.softplus(value)
                elif name == "share":
                    out[name] = torch.sigmoid(value)
                elif name == "product_lengthscale":
                    out[name] = floor + torch.exp(value)
                else:
                    out[name] = torch.exp(value)
            return out

        def start(name: str, default: float) -> float:
            return float(init[name]) if init.get(name) is not None else default

        best: tuple[dict[str, Any], float] | None = None
        for run in range(int(self.num_restarts) + 1):
            if run == 0:
                ls0 = init.get("lengthscale")
                ls0 = torch.full((num_ls,), 0.5, dtype=dtype) if ls0 is None else torch.as_tensor(ls0, dtype=dtype)
                noise0 = max(start("noise", lower + 0.1) - lower, 1e-12)
                init_raw = {"lengthscale": ls0.reshape(-1).expand(num_ls).log(),
                            "outputscale": torch.tensor(math.log(start("outputscale", 1.0))),
                            "noise": torch.tensor(math.log(math.expm1(noise0))),
                            "const": torch.tensor(start("const", 0.0))}
                if hybrid:
                    share0 = min(max(start("share", 0.5), 1e-3), 1 - 1e-3)
                    ls0 = init.get("product_lengthscale")
                    ls0 = torch.full((1,), 0.5, dtype=dtype) if ls0 is None else torch.as_tensor(ls0, dtype=dtype)
                    ls0 = torch.maximum(ls0.reshape(-1).expand(sizes["product_lengthscale"]), 1.5 * floor)
                    init_raw["product_lengthscale"] = (ls0 - floor).log()
                    init_raw["share"] = torch.tensor(math.log(share0 / (1 - share0)))
            else:
                u = torch.rand(num_ls + 2, generator=generator, dtype=torch.float64)
                init_raw = {"lengthscale": math.log(0.1) + u[:num_ls] * math.log(3.0 / 0.1),
                            "outputscale": math.log(0.3) + u[num_ls] * math.log(10.0),
                            "noise": torch.log(torch.expm1(torch.exp(math.log(1e-3) + u[num_ls + 1] * math.log(300.0)))),
                            "const": torch.tensor(0.0)}
                if hybrid:
                    u = torch.rand(sizes["product_lengthscale"] + 1, generator=generator, dtype=torch.float64)
                    init_raw["product_lengthscale"] = math.log(0.1) + u[1:] * math.log(3.0 / 0.1)
                    init_raw["share"] = torch.logit(0.1 + 0.8 * u[0])
            raw = {k: torch.as_tensor(v, dtype=dtype, device=device).clone().requires_grad_(fixed[k] is None)
                   for k, v in init_raw.items()}
            params = [p for p in raw.values() if p.requires_grad]
            track = {"loss": math.inf, "raw": {k: v.detach().clone() for k, v in raw.items()}}

            def loss_fn() -> torch.Tensor:
                p = unpack(raw)
                try:
                    loss = self._neg_mll(stats, p["lengthscale"], p["outputscale"], p["noise"], p["const"],
                                         p if hybrid else None)
                except torch.linalg.LinAlgError:
                    return torch.tensor(math.inf, dtype=dtype, device=device, requires_grad=True)
                if not torch.isfinite(loss):  # e.g. an overflowing line-search step: a NaN would break the search
                    return torch.tensor(math.inf, dtype=dtype, device=device, requires_grad=True)
                if float(loss.detach()) < track["loss"]:
                    track["loss"], track["raw"] = float(loss.detach()), {k: v.detach().clone() for k, v in raw.items()}
                return loss

            if params:
                for _attempt in range(3):
                    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=int(self.max_iter), history_size=20,
                                            line_search_fn="strong_wolfe", tolerance_grad=1e-8, tolerance_change=1e-10)

                    def closure() -> torch.Tensor:
                        opt.zero_grad()
                        loss = loss_fn()
                        if loss.requires_grad and torch.isfinite(loss):
                            loss.backward()
                        return loss

                    try:
                        opt.step(closure)
                        break
                    except IndexError:  # torch's strong-Wolfe search fails on a non-finite bracket: resume at the best
                        with torch.no_grad():
                            for k, v in raw.items():
                                v.copy_(track["raw"][k])
            else:
                loss_fn()
            values = unpack({k: v.detach() for k, v in track["raw"].items()})
            if math.isfinite(track["loss"]) and (best is None or track["loss"] < best[1]):
                best = (values, track["loss"])
        if best is None:
            raise RuntimeError("HilbertGP: every marginal-likelihood run failed; check the data or raise "
                               "noise_lower_bound.")
        return best

    # ------------------------------------------------------------------ fitting
    def _validate_hyperparameters(self, num_dims: int) -> None:
        check_out_of_box_policy(self.out_of_box)
        if self.structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}; got {self.structure!r}.")
        if self.product_inputs is not None:
            if self.structure not in ("auto", "hybrid"):
                raise ValueError(f"product_inputs applies to structure='hybrid' or 'auto'; "
                                 f"got structure={self.structure!r}.")
            inputs = list(self.product_inputs)
            if (not inputs or len(set(inputs)) != len(inputs)
                    or any(int(d) != d or not 0 <= int(d) < num_dims for d in inputs)):
                raise ValueError(f"product_inputs must be distinct input columns in 0..{num_dims - 1}; "
                                 f"got {self.product_inputs!r}.")
        num_ls = num_dims if self.ard else 1
        if self.lengthscale is not None:
            ls = torch.as_tensor(self.lengthscale, dtype=torch.float64).reshape(-1)
            if ls.numel() not in (1, num_ls):
                raise ValueError(f"lengthscale has {ls.numel()} values; give 1 or {num_ls} "
                                 f"({'one per input' if self.ard else 'ard=False takes one'}).")
            for value in ls.tolist():
                check_positive(value, "lengthscale")
        for name in ("outputscale", "noise_variance"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)
        if self.mean_constant is not None and not math.isfinite(float(self.mean_constant)):
            raise ValueError(f"mean_constant must be finite; got {self.mean_constant!r}.")
        if self.c is not None:
            c = torch.as_tensor(self.c, dtype=torch.float64).reshape(-1)
            if c.numel() not in (1, num_dims) or bool((c < 1.0).any()) or not bool(torch.isfinite(c).all()):
                raise ValueError(f"c must be one number >= 1 or one per input ({num_dims}); got {self.c!r}.")
        if self.num_basis is not None and (int(self.num_basis) != self.num_basis or int(self.num_basis) < 1):
            raise ValueError(f"num_basis must be a positive integer; got {self.num_basis!r}.")
        if isinstance(self.max_adapt_rounds, bool) or int(self.max_adapt_rounds) != self.max_adapt_rounds \
                or int(self.max_adapt_rounds) < 1:
            raise ValueError(f"max_adapt_rounds must be an integer >= 1 (1: one fit at the starting M and c, no "
                             f"adaptation); got {self.max_adapt_rounds!r}.")

    def _default_num_basis(self, structure: str, num_dims: int) -> int:
        """Starting M of a structure: the largest the feature limit allows (at most 64 for 1-D, else 32)."""
        if self.num_basis is not None:
            return int(self.num_basis)
        if structure == "product":
            return max(8, min(64, int(math.floor(AUTO_MAX_PRODUCT_FEATURES ** (1.0 / num_dims) + 1e-9))))
        return max(1, min(32, self._max_num_basis(structure, num_dims)))

    def _max_num_basis(self, structure: str, num_dims: int) -> int:
        """Largest M the adaptation may pick: ``max_num_basis`` and, for products, M^D ≤ the product limit;
        for the additive structure D·M ≤ ``ADDITIVE_MAX_FEATURES``, for the hybrid's additive block
        D·M ≤ ``HYBRID_ADDITIVE_FEATURES``."""
        limit = int(self.max_num_basis)
        if num_dims == 1:
            return limit
        if structure == "product":
            cap = DEFAULT_MAX_PRODUCT_FEATURES if self.structure == "product" else AUTO_MAX_PRODUCT_FEATURES
            return min(limit, max(1, int(math.floor(cap ** (1.0 / num_dims) + 1e-9))))
        cap = HYBRID_ADDITIVE_FEATURES if structure == "hybrid" else ADDITIVE_MAX_FEATURES
        return min(limit, max(1, cap // num_dims))

    def _automatic_width_cap(self, num_dims: int) -> int:
        """Most basis functions in all that the automatic M may reach because of ``max_num_basis`` alone: over the
        structures ``structure`` tries, those whose M is capped by ``max_num_basis`` rather than by a feature limit
        (0 when the feature limits bound every structure)."""
        structures = {"product": ["product"], "additive": ["additive"], "hybrid": ["hybrid"],
                      "auto": ["product", "additive", "hybrid"] if num_dims > 1 else ["product"]}[self.structure]
        widths = [0]
        for structure in structures:
            M = self._max_num_basis(structure, num_dims)
            if M == int(self.max_num_basis):
                widths.append(M ** num_dims if structure == "product" else
                              M * num_dims + (HYBRID_PRODUCT_FEATURES if structure == "hybrid" else 0))
        return max(widths)

    def _auto_product_affordable(self, num_dims: int) -> bool:
        """Whether ``structure="auto"`` tries the full product: M^D ≤ AUTO_MAX_PRODUCT_FEATURES with M ≥ 8."""
        if self.num_basis is not None:
            return int(self.num_basis) ** num_dims <= AUTO_MAX_PRODUCT_FEATURES
        return int(math.floor(AUTO_MAX_PRODUCT_FEATURES ** (1.0 / num_dims) + 1e-9)) >= MIN_PRODUCT_NUM_BASIS

    def _product_lengthscale_floor(self) -> torch.Tensor:
        """(|P|,) smallest lengthscales the hybrid's product block may take: ℓ_d ≥ a L_d / m_d with m_d the block's
        functions of input d and a the rule's constant (1.75 for SE). Shorter lengthscales only flatten the weights
        of the few functions the block has, leaving the kernel family for a fixed feature set."""
        name = kernel_name(self.kernel, self.nu)
        factor = HILBERT_RULE_CONSTANTS.get(name, HILBERT_RULE_CONSTANTS["se"])[1]
        functions = (self.product_indices_.max(dim=0).values + 1).to(torch.float64)
        return factor * self.basis_.L[self.product_inputs_].to(torch.float64) / functions

    def _select_product_block(self, lengthscale: torch.Tensor, candidates: list[int]) -> dict[str, Any]:
        """The hybrid's product block on the current basis: the (at most ``HYBRID_PRODUCT_FEATURES``) multi-indices
        over the inputs ``candidates`` of largest prior variance under a product kernel with ``lengthscale`` (D,),
        down to ``PRODUCT_MIN_RELATIVE_VARIANCE`` of the largest; inputs that only ever get their first function
        are left out (the block is then constant along them)."""
        omega = self.basis_.sqrt_eigenvalues()[candidates]  # (k, M)
        log_w = log_spectral_density(omega, lengthscale.cpu()[candidates].unsqueeze(-1), self.kernel, self.nu)
        indices = top_product_indices(log_w, HYBRID_PRODUCT_FEATURES,
                                      min_log_ratio=-math.log(PRODUCT_MIN_RELATIVE_VARIANCE))
        used = [a for a in range(len(candidates)) if bool((indices[:, a] > 0).any())] or [0]
        return {"inputs": [candidates[a] for a in used], "indices": indices[:, used]}

    def _fit_candidate(self, X: torch.Tensor, y: torch.Tensor, center: torch.Tensor, half_range: torch.Tensor,
                       rule: str | None, structure: str, num_basis: int, c: torch.Tensor,
                       init: dict[str, Any] | None, pilot: torch.Tensor | None = None) -> dict[str, Any]:
        """Fit one structure: maximise the marginal likelihood, then enlarge (M, c) while the fitted lengthscales
        violate the rule (at most ``max_adapt_rounds`` fits; the hybrid is fitted once). Leaves the model's
        structure and basis set to it. For the hybrid, ``pilot`` (D,) are the lengthscales that choose its product
        block (see :meth:`_select_product_block`)."""
        num_dims = X.shape[1]
        adapt = rule is not None and (self.num_basis is None or self.c is None) and structure != "hybrid"
        rounds = range(int(self.max_adapt_rounds) if adapt else 1)
        if self.verbose:
            from tqdm.auto import tqdm
            rounds = tqdm(rounds, desc=f"HilbertGP {structure} (M, c) rounds")
        candidates = list(range(num_dims)) if self.product_inputs is None else [int(d) for d in self.product_inputs]
        history: list[dict[str, Any]] = []
        started = time.perf_counter()
        converged = not adapt  # one fit and no rule to meet
        for _ in rounds:
            self.basis_ = HilbertBasis(num_basis, L=(c * half_range.cpu()).tolist(), center=center.tolist(),
                                       num_dims=num_dims)
            product = None
            if structure == "hybrid":
                product = self._select_product_block(pilot, candidates)
                # started at most at PRODUCT_START_LENGTHSCALE: longer ones leave the block's higher functions
                # with vanishing weights and gradients
                start_ls = pilot.clamp(max=PRODUCT_START_LENGTHSCALE)
                start_ls = start_ls[product["inputs"]] if self.ard else start_ls[:1]
                init = {**(init or {}), "product_lengthscale": start_ls}
            self._set_structure(structure, num_basis, num_dims, product)
            stats = self._accumulate_statistics(X, y)
            values, loss = self._optimise(stats, init)
            ls = values["lengthscale"].detach()
            history.append({"num_basis": num_basis, "c": c.tolist(), "lengthscale": ls.tolist(), "neg_mll": loss})
            if not adapt:
                break
            need_c, need_m = hilbert_box(ls.cpu().expand(num_dims), half_range.cpu(), rule, c=self.c)
            need_m = min(need_m if self.num_basis is None else num_basis, self._max_num_basis(structure, num_dims))
            if bool((need_c <= c * (1 + 1e-9)).all()) and need_m <= num_basis:
                converged = True
                break
            c, num_basis = torch.maximum(c, need_c), max(num_basis, need_m)
            init = values
        return {"structure": structure, "product_inputs": list(self.product_inputs_),
                "product_indices": self.product_indices_, "product_num_basis": self.product_num_basis_,
                "basis": self.basis_, "stats": stats, "values": values, "loss": loss, "history": history,
                "converged": converged, "seconds": time.perf_counter() - started}

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:
        resolve_kernel(self.kernel, self.nu)
        name = kernel_name(self.kernel, self.nu)
        rule = name if name in HILBERT_RULE_CONSTANTS else None
        num_dims = X.shape[1]
        self._validate_hyperparameters(num_dims)
        if self.num_basis is not None:  # the smallest structure has M functions in all; ΦᵀΦ and Φ are float64
            width = int(self.num_basis) * (num_dims if self.structure == "additive" else 1)
            if self.structure == "product":
                width = int(self.num_basis) ** num_dims
            what, remedy = (f"num_basis = {int(self.num_basis)} ({width} basis functions in all)",
                            "lower num_basis (or leave it None to choose it from the data)")
        else:  # the automatic M may grow up to max_num_basis where that, not a feature limit, is the cap
            width = self._automatic_width_cap(num_dims)
            what, remedy = (f"max_num_basis = {int(self.max_num_basis)} (up to {width} basis functions in all)",
                            "lower max_num_basis")
        if width:
            check_fits_in_memory(8 * (width * width + min(int(self.chunk_size), X.shape[0]) * width), what, remedy,
                                 self.device_)
        # The likelihood work is O(M_tot^3) and ill-conditioned for small noise: always float64.
        X, y = X.to(torch.float64), y.to(torch.float64)
        center, half_range = data_center_and_half_range(X, allow_constant=True)
        # a constant column carries no information; give it a nominal box so the basis is defined
        constant = half_range <= 0
        half_range = torch.where(constant, torch.ones_like(half_range), half_range)
        # the box the (M, c) search starts from; each round then enlarges it to tnbayes.basis.hilbert_box's
        c0 = torch.as_tensor(self.c if self.c is not None else ADAPTATION_START_BOUNDARY_FACTOR,
                             dtype=torch.float64).reshape(-1).expand(num_dims).clone()
        init = (None if self.lengthscale is None
                else {"lengthscale": torch.as_tensor(self.lengthscale, dtype=X.dtype).reshape(-1)})

        def fit(structure: str, num_basis: int, c: torch.Tensor, start: dict[str, Any] | None,
                pilot: torch.Tensor | None = None) -> dict[str, Any]:
            result = self._fit_candidate(X, y, center, half_range, rule, structure, num_basis, c, start, pilot)
            self._report(f"candidate {self._describe(result)}: −log p(y)/N = {result['loss']:.4f} "
                         f"({result['seconds']:.1f} s)")
            return result

        requested = self.structure
        fits: list[dict[str, Any]] = []
        if requested == "product" or (requested == "auto" and num_dims == 1):  # 1-D: product = additive
            fits.append(fit("product", self._default_num_basis("product", num_dims), c0, init))
        else:
            additive = None
            if requested != "hybrid":
                additive = fit("additive", self._default_num_basis("additive", num_dims), c0, init)
                fits.append(additive)
            if requested == "auto" and self._auto_product_affordable(num_dims):
                fits.append(fit("product", self._default_num_basis("product", num_dims), c0, init))
            if requested in ("auto", "hybrid"):
                fits.append(fit("hybrid", *self._hybrid_start(X, y, additive, half_range, constant, c0, init)))
        n = X.shape[0]
        for f in fits:  # −log p(y)/N plus the BIC charge ½ k log N / N for the k free hyper-parameters
            f["num_hyperparameters"] = self._num_free_hyperparameters(num_dims, f)
            f["score"] = f["loss"] + 0.5 * f["num_hyperparameters"] * math.log(n) / n
        if requested == "auto":
            chosen = min(fits, key=lambda f: f["score"])
            others = [f["score"] for f in fits if f is not chosen]
            reason = ("the only candidate" if not others else
                      f"the highest marginal likelihood, less ½ log N per hyper-parameter, of {len(fits)} candidates "
                      f"({(min(others) - chosen['score']) * n:.1f} nats above the next)")
        else:
            chosen, reason = fits[-1], f"structure={requested!r} requested"
        self._report(f"structure_ = {chosen['structure']!r}: {reason}.")
        self.structure_search_ = [
            {"candidate": f["structure"], "num_basis": f["basis"].num_basis, "product_inputs": f["product_inputs"],
             "product_num_basis": f["product_num_basis"], "num_features": int(f["stats"]["gram"].shape[0]),
             "neg_mll": f["loss"], "num_hyperparameters": f["num_hyperparameters"], "score": f["score"],
             "chosen": f is chosen, "seconds": f["seconds"]} for f in fits]
        self._set_structure(chosen["structure"], chosen["basis"].num_basis, num_dims,
                            {"inputs": chosen["product_inputs"], "indices": chosen["product_indices"]})
        self.basis_, self.adapt_rounds_ = chosen["basis"], chosen["history"]
        self.history_ = [float(entry["neg_mll"]) for entry in self.adapt_rounds_]
        self.n_iter_ = len(self.history_)
        self.converged_ = bool(chosen["converged"])
        values, loss = chosen["values"], chosen["loss"]
        # report what the final basis really is (a last enlargement may not have been refitted)
        self.num_basis_ = self.basis_.num_basis
        self.c_ = (self.basis_.L / half_range.cpu()).tolist()
        self.lengthscale_ = values["lengthscale"].detach().clone()
        self.outputscale_ = float(values["outputscale"])
        self.noise_variance_ = float(values["noise"])
        self.mean_constant_ = float(values["const"])
        hybrid = self.structure_ == "hybrid"
        self.product_share_ = float(values["share"]) if hybrid else float(self.structure_ == "product")
        self.product_lengthscale_ = (values["product_lengthscale"].detach().clone() if hybrid
                                     else self.lengthscale_[:0].clone() if self.structure_ == "additive"
                                     else self.lengthscale_.clone())
        self.neg_mll_ = float(loss)
        if rule is not None and not hybrid:  # the hybrid is a truncated expansion by design
            check_hilbert_approximation(self.lengthscale_.cpu().expand(num_dims).tolist(), self.basis_.L.tolist(),
                                        self.num_basis_, name, half_range=half_range.tolist(), stacklevel=4)
        self._store_posterior(chosen["stats"])

    def _num_free_hyperparameters(self, num_dims: int, fit: dict[str, Any]) -> int:
        """Hyper-parameters maximised for a fitted candidate (the given ones are fixed)."""
        num_ls = num_dims if self.ard else 1
        count = sum(value is None for value in (self.outputscale, self.noise_variance, self.mean_constant))
        if self.lengthscale is None:
            count += num_ls
            if fit["structure"] == "hybrid":
                count += len(fit["product_inputs"]) if self.ard else 1
        return count + int(fit["structure"] == "hybrid")  # the product block's share

    def _hybrid_start(self, X: torch.Tensor, y: torch.Tensor, additive: dict[str, Any] | None,
                      half_range: torch.Tensor, constant: torch.Tensor, c0: torch.Tensor,
                      init: dict[str, Any] | None) -> tuple[int, torch.Tensor, dict[str, Any], torch.Tensor]:
        """M, c, initial values and pilot lengthscales (D,) of the hybrid.

        The pilot lengthscales, which choose the product block, are those of an exact GP with a product (ARD)
        kernel on ``PILOT_POINTS`` random rows (:func:`~tnbayes.selection.estimate_kernel_hyperparameters`), or the
        given ``lengthscale`` (constant inputs get the longest, which leaves them out of the product block); the
        additive block starts from the additive fit when there is one.
        """
        num_dims = X.shape[1]
        start = {**(init or {}), "outputscale": 1.0, "share": 0.5, "const": 0.0}
        if self.lengthscale is not None:
            pilot = torch.as_tensor(self.lengthscale, dtype=torch.float64).reshape(-1).expand(num_dims).clone()
        else:
            estimate = estimate_kernel_hyperparameters(X, y, kernel=self.kernel, nu=self.nu, max_points=PILOT_POINTS,
                                                       seed=int(self.seed), num_restarts=0)
            pilot = estimate.lengthscale.to(torch.float64).cpu().clamp(max=PILOT_MAX_LENGTHSCALE)
            pilot = pilot if self.ard else pilot.median().expand(num_dims).clone()
            start["noise"] = estimate.noise_variance
        pilot = torch.where(constant.cpu(), torch.full_like(pilot, PILOT_MAX_LENGTHSCALE), pilot)
        if additive is not None:
            start = {**additive["values"], **start}
        if self.lengthscale is None and (additive is None
                                         or float(additive["values"]["outputscale"]) < COLLAPSED_OUTPUTSCALE):
            start["lengthscale"] = pilot if self.ard else pilot[:1]  # no additive fit, or one that found no signal
        num_basis = self._default_num_basis("hybrid", num_dims)
        if self.num_basis is None:  # the additive fit's M, or M ≥ 3.4 L/ℓ for the shorter lengthscales if larger
            ls = torch.minimum(torch.as_tensor(start["lengthscale"]).detach().cpu().reshape(-1).expand(num_dims), pilot)
            need_m = int(math.ceil(float((3.4 * c0 * half_range.cpu() / ls).max())))
            if additive is not None:
                need_m = max(need_m, additive["basis"].num_basis)
            num_basis = min(self._max_num_basis("hybrid", num_dims), max(MIN_PRODUCT_NUM_BASIS, need_m))
        return num_basis, c0, start, pilot

    @staticmethod
    def _describe(fit: dict[str, Any]) -> str:
        text = f"{fit['structure']} (M = {fit['basis'].num_basis}"
        if fit["structure"] == "hybrid":
            text += (f", product block over inputs {fit['product_inputs']}: {fit['product_indices'].shape[0]} "
                     f"functions, up to {fit['product_num_basis']} per input")
        return text + f", {int(fit['stats']['gram'].shape[0])} features)"

    def _store_posterior(self, stats: dict[str, Any]) -> None:
        like = {"dtype": stats["gram"].dtype, "device": stats["gram"].device}
        with torch.no_grad():
            sys = self._posterior_system(stats, self.lengthscale_, torch.tensor(self.outputscale_, **like),
                                         torch.tensor(self.noise_variance_, **like),
                                         torch.tensor(self.mean_constant_, **like))
        self.feature_weights_ = sys["s"]
        self.weight_mean_ = sys["alpha"]
        self.weight_cov_factor_ = sys["chol"]

    # ------------------------------------------------------------------ prediction
    def _representable_box(self) -> tuple[torch.Tensor, torch.Tensor]:
        center, half_width = self.basis_.center, self.basis_.L
        return center - half_width, center + half_width

    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        out_dtype = X.dtype
        X = X.to(torch.float64)
        means, roots = [], []
        for chunk in torch.split(X, int(self.chunk_size)):
            Z = self._unweighted_features(chunk) * self.feature_weights_  # (n, M_tot)
            means.append(self.mean_constant_ + Z @ self.weight_mean_)
            roots.append(torch.linalg.solve_triangular(self.weight_cov_factor_, Z.T, upper=False))  # L⁻¹ zᵀ
        mean = torch.cat(means).to(out_dtype)
        V = torch.cat(roots, dim=1)  # (M_tot, n)
        if full_covariance:
            return mean, (self.noise_variance_ * (V.T @ V)).to(out_dtype)
        return mean, (self.noise_variance_ * (V * V).sum(0)).to(out_dtype)

    def condition_on_observations(self, X: ArrayLike, y: ArrayLike) -> "HilbertGP":
        """A copy whose weight posterior also conditions on new rows, with every hyper-parameter kept.

        The weight posterior is a Bayesian linear regression, w | y ~ N(B⁻¹ Zᵀ(y − c), σ² B⁻¹) with
        B = ZᵀZ + (σ²/σ_f²) I and Z the weighted features: new rows add Z_newᵀZ_new to B (a rank-k update) and
        Z_newᵀ(y_new − c) to the right-hand side. The result equals this model's posterior computed on the union of
        the old and new rows with the same scalers, basis, lengthscales, σ_f², σ² and mean constant (no ML-II
        refit; ``fit`` on the union would also re-select those).

        Parameters
        ----------
        X : array-like of shape (k, n_features)
            New inputs in the user's units (outside the basis box they follow ``out_of_box``).
        y : array-like of shape (k,)
            Their observed targets in the user's units.

        Returns
        -------
        HilbertGP
            A new fitted model; this one is unchanged.
        """
        self._check_fitted("condition_on_observations")
        Xs, ys = self._scaled_new_rows(X, y)
        dense_precision = self.weight_cov_factor_ @ self.weight_cov_factor_.T  # B
        rhs = dense_precision @ self.weight_mean_  # Zᵀ(y − c) of the rows seen so far
        for start in range(0, Xs.shape[0], int(self.chunk_size)):
            Z = self._unweighted_features(Xs[start:start + int(self.chunk_size)]) * self.feature_weights_
            dense_precision = dense_precision + Z.T @ Z
            rhs = rhs + Z.T @ (ys[start:start + int(self.chunk_size)] - self.mean_constant_)
        cholesky = torch.linalg.cholesky(dense_precision)
        conditioned = copy.deepcopy(self)
        conditioned.weight_cov_factor_ = cholesky
        conditioned.weight_mean_ = torch.cholesky_solve(rhs.unsqueeze(-1), cholesky).squeeze(-1)
        conditioned.n_conditioned_rows_ = int(getattr(self, "n_conditioned_rows_", 0)) + int(Xs.shape[0])
        return conditioned

    def weight_covariance(self) -> torch.Tensor:
        """Posterior covariance of the weights, σ² B⁻¹, of shape (M_tot, M_tot) (standardised scale)."""
        self._check_fitted("weight_covariance")
        return self.noise_variance_ * torch.cholesky_inverse(self.weight_cov_factor_)

    # ------------------------------------------------------------------ persistence
    _transient_attributes = ("basis_",)

    def _extra_state(self) -> dict[str, torch.Tensor]:
        return {"basis.L": self.basis_.L, "basis.center": self.basis_.center}

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        self.basis_ = HilbertBasis(int(self.num_basis_), L=extra["basis.L"].tolist(),
                                   center=extra["basis.center"].tolist(), num_dims=int(extra["basis.L"].numel()))


register_model("hilbert_gp", HilbertGP)
register_model("hilbert_gp_additive", lambda **kw: HilbertGP(structure="additive", **kw))
