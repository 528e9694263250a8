"""HilbertGP: Hilbert basis × dense weights × exact inference (Solin & Särkkä 2020).

Model (on standardised inputs and targets)::

    y = c + z(x)ᵀ w + ε,   w ~ N(0, σ_f² I),   ε ~ N(0, σ²),
    z(x) = Φ(x) s(ℓ)       Φ: products (or the concatenation, additive) of Laplace eigenfunctions,
                           s: square roots of the kernel's spectral density at the eigenfrequencies.

The hybrid structure concatenates an additive block and a truncated product block, each with its own share of
σ_f² and its own lengthscales: ``k = σ_f² [(1 − ρ) (1/D) Σ_d k_d(x_d, x'_d; ℓ_d) + ρ Π_{d ∈ P} k_d(x_d, x'_d; ℓ_P,d)]``
with the product expanded in the J multi-indices of largest prior variance (a valid GP for any choice of J).

The three axes: the basis is :class:`~tnbayes.basis.structured.HilbertLayout` (Φ and s per structure); the weights
are dense; inference is :mod:`tnbayes.inference.weight_space` (sufficient statistics accumulated once, evidence
and weight posterior in O(M_tot³) whatever N). Selection: the structure and (M, c) by
:mod:`tnbayes.selection.hilbert_structure`, the hyper-parameters by :mod:`tnbayes.selection.weight_space_evidence`.
This module composes them.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import torch

from tnbayes._sizes import check_fits_in_memory
from tnbayes._validation import ArrayLike, check_positive
from tnbayes.basis import (
    HILBERT_RULE_CONSTANTS,
    HilbertBasis,
    check_hilbert_approximation,
    data_center_and_half_range,
    resolve_kernel,
)
from tnbayes.basis.spectral import kernel_name
from tnbayes.basis.structured import HilbertLayout
from tnbayes.inference.weight_space import (
    WeightSpaceStatistics,
    accumulate_statistics,
    condition_weight_posterior,
    latent_moments,
    neg_log_marginal_likelihood,
    weight_covariance,
    weight_posterior,
)
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model
from tnbayes.selection.hilbert_structure import (  # noqa: F401 (the constants were public here)
    ADDITIVE_MAX_FEATURES,
    AUTO_MAX_PRODUCT_FEATURES,
    HYBRID_ADDITIVE_FEATURES,
    HYBRID_PRODUCT_FEATURES,
    MIN_PRODUCT_NUM_BASIS,
    STRUCTURES,
    adapt_basis_and_box,
    bic_score,
    candidate_structures,
    choose_structure,
    largest_num_basis,
    memory_check_width,
    start_num_basis,
)
from tnbayes.selection.hyperparameters import estimate_kernel_hyperparameters
from tnbayes.selection.input_box import check_out_of_box_policy
from tnbayes.selection.weight_space_evidence import constrain_hyperparameters, maximise_evidence, starting_points

__all__ = ["HilbertGP"]

#: rows of the subsample whose exact-GP lengthscales choose the hybrid's product block
PILOT_POINTS = 256
#: cap on those lengthscales (standardised inputs; longer means "irrelevant" just as well)
PILOT_MAX_LENGTHSCALE = 100.0
#: smallest prior variance of a product-block function, relative to the largest, at the pilot lengthscales
PRODUCT_MIN_RELATIVE_VARIANCE = 1e-30
#: largest starting lengthscale of the hybrid's product block (standardised inputs)
PRODUCT_START_LENGTHSCALE = 1.0
#: box c = L/S the (M, c) search starts from when ``c`` is not given; each round enlarges it to what
#: :func:`tnbayes.basis.hilbert_box` asks for the fitted lengthscales (a box far too small for long lengthscales
#: would need many rounds)
ADAPTATION_START_BOUNDARY_FACTOR = 2.0
#: σ_f² (standardised scale) below which a fit is taken to have found no signal
COLLAPSED_OUTPUTSCALE = 1e-3


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
        self._keep_parameters(locals())

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

    def _layout(self) -> HilbertLayout:
        """The basis in the layout of ``structure_`` (see :class:`~tnbayes.basis.structured.HilbertLayout`)."""
        return HilbertLayout(self.basis_, self.structure_, self.product_inputs_, self.product_indices_)

    def _unweighted_features(self, X: torch.Tensor) -> torch.Tensor:
        """Φ(X): (N, M_tot) eigenfunction columns in the layout of ``structure_``, no spectral weights."""
        return self._layout().unweighted_features(X)

    def _feature_weights(self, lengthscale: torch.Tensor, block: dict[str, Any] | None = None) -> torch.Tensor:
        """s(ℓ): (M_tot,) square roots of the spectral density, in the column order of Φ; for the hybrid, ``block``
        holds ρ (``"share"``) and the product block's lengthscales (default ``product_share_`` and
        ``product_lengthscale_``)."""
        if block is None and self.structure_ == "hybrid":
            block = {"share": self.product_share_, "product_lengthscale": self.product_lengthscale_}
        return self._layout().feature_weights(lengthscale, self.kernel, self.nu, block)

    def _accumulate_statistics(self, X: torch.Tensor, y: torch.Tensor) -> WeightSpaceStatistics:
        """ΦᵀΦ, Φᵀ1, Φᵀy, 1ᵀy, yᵀy and N, accumulated over row chunks."""
        return accumulate_statistics(self._unweighted_features, X, y, int(self.chunk_size))

    # ------------------------------------------------------------------ marginal likelihood
    def _optimise(self, stats: WeightSpaceStatistics,
                  init: dict[str, torch.Tensor | float] | None) -> tuple[dict[str, torch.Tensor], float]:
        """Maximise the marginal likelihood; ``init`` holds starting values (lengthscale, outputscale, noise,
        const and, for the hybrid, share and product_lengthscale), missing ones start at the defaults of
        :func:`~tnbayes.selection.weight_space_evidence.starting_points`. Returns the values and −log p(y)/N."""
        dtype, device = stats.gram.dtype, stats.gram.device
        fixed = {"lengthscale": self.lengthscale, "outputscale": self.outputscale,
                 "noise": self.noise_variance, "const": self.mean_constant}
        sizes = {"lengthscale": self.basis_.num_dims if self.ard else 1}
        hybrid, floor = self.structure_ == "hybrid", None
        if hybrid:  # the product block's share of σ_f² and its own lengthscales (a given lengthscale fixes both)
            sizes["product_lengthscale"] = len(self.product_inputs_) if self.ard else 1
            fixed["share"] = None
            fixed["product_lengthscale"] = None
            if self.lengthscale is not None:
                ls = torch.as_tensor(self.lengthscale, dtype=dtype).reshape(-1)
                fixed["product_lengthscale"] = ls if ls.numel() == 1 else ls[self.product_inputs_]
            floor = self._layout().product_lengthscale_floor(self.kernel, self.nu).to(dtype=dtype, device=device)
            floor = floor if self.ard else floor.max().reshape(1)
        bounds = {"noise_lower_bound": float(self.noise_lower_bound), "product_lengthscale_floor": floor}
        starts = starting_points({} if init is None else init, num_restarts=int(self.num_restarts), sizes=sizes,
                                 generator=torch.Generator().manual_seed(int(self.seed)), dtype=dtype, **bounds)

        def objective(p: dict[str, torch.Tensor]) -> torch.Tensor:
            s = self._feature_weights(p["lengthscale"], p if hybrid else None)
            return neg_log_marginal_likelihood(s, p["outputscale"], p["noise"], p["const"], stats)

        return maximise_evidence(objective, lambda raw: constrain_hyperparameters(raw, fixed, sizes, **bounds),
                                 starts, {k: v is None for k, v in fixed.items()}, max_iter=int(self.max_iter),
                                 dtype=dtype, device=device, what="HilbertGP")

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

    def _num_basis_range(self, structure: str, num_dims: int) -> tuple[int, int]:
        """Starting and largest M of a candidate structure (:mod:`tnbayes.selection.hilbert_structure`)."""
        limits = {"max_num_basis": int(self.max_num_basis), "requested": self.structure}
        return (start_num_basis(structure, num_dims, num_basis=self.num_basis, **limits),
                largest_num_basis(structure, num_dims, **limits))

    def _fit_candidate(self, X: torch.Tensor, y: torch.Tensor, center: torch.Tensor, half_range: torch.Tensor,
                       rule: str | None, structure: str, num_basis: int, c: torch.Tensor,
                       init: dict[str, Any] | None, pilot: torch.Tensor | None = None) -> dict[str, Any]:
        """Fit one structure: maximise the marginal likelihood, then enlarge (M, c) while the fitted lengthscales
        violate the rule (:func:`~tnbayes.selection.hilbert_structure.adapt_basis_and_box`; the hybrid is fitted
        once). Leaves the model's structure and basis set to it. For the hybrid, ``pilot`` (D,) are the
        lengthscales that choose its product block
        (:meth:`~tnbayes.basis.structured.HilbertLayout.select_product_block`)."""
        num_dims = X.shape[1]
        candidates = list(range(num_dims)) if self.product_inputs is None else [int(d) for d in self.product_inputs]
        started = time.perf_counter()

        def fit_round(num_basis: int, c: torch.Tensor, init: dict[str, Any] | None) -> dict[str, Any]:
            self.basis_ = HilbertBasis(num_basis, L=(c * half_range.cpu()).tolist(), center=center.tolist(),
                                       num_dims=num_dims)
            product = None
            if structure == "hybrid":
                product = HilbertLayout.select_product_block(self.basis_, pilot, candidates, self.kernel, self.nu,
                                                             HYBRID_PRODUCT_FEATURES, PRODUCT_MIN_RELATIVE_VARIANCE)
                # started at most at PRODUCT_START_LENGTHSCALE: longer ones leave the block's higher functions
                # with vanishing weights and gradients
                start_ls = pilot.clamp(max=PRODUCT_START_LENGTHSCALE)
                start_ls = start_ls[product["inputs"]] if self.ard else start_ls[:1]
                init = {**(init or {}), "product_lengthscale": start_ls}
            self._set_structure(structure, num_basis, num_dims, product)
            stats = self._accumulate_statistics(X, y)
            values, loss = self._optimise(stats, init)
            return {"stats": stats, "values": values, "loss": loss}

        adapt = rule is not None and (self.num_basis is None or self.c is None) and structure != "hybrid"
        result, history, converged = adapt_basis_and_box(
            fit_round, num_basis, c, half_range, rule, init, adapt=adapt, given_c=self.c,
            given_num_basis=self.num_basis is not None, largest=self._num_basis_range(structure, num_dims)[1],
            max_rounds=int(self.max_adapt_rounds),
            progress=f"HilbertGP {structure} (M, c) rounds" if self.verbose else None)
        return {**result, "structure": structure, "product_inputs": list(self.product_inputs_),
                "product_indices": self.product_indices_, "product_num_basis": self.product_num_basis_,
                "basis": self.basis_, "history": history, "converged": converged,
                "seconds": time.perf_counter() - started}

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:
        resolve_kernel(self.kernel, self.nu)
        name = kernel_name(self.kernel, self.nu)
        rule = name if name in HILBERT_RULE_CONSTANTS else None
        num_dims = X.shape[1]
        self._validate_hyperparameters(num_dims)
        width, what, remedy = memory_check_width(self.structure, num_dims, self.num_basis, int(self.max_num_basis))
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
        additive = None
        for structure in candidate_structures(requested, num_dims, self.num_basis):
            if structure == "hybrid":
                fits.append(fit("hybrid", *self._hybrid_start(X, y, additive, half_range, constant, c0, init)))
            else:
                fits.append(fit(structure, self._num_basis_range(structure, num_dims)[0], c0, init))
                additive = fits[-1] if structure == "additive" else additive
        n = X.shape[0]
        for f in fits:
            f["num_hyperparameters"] = self._num_free_hyperparameters(num_dims, f)
            f["score"] = bic_score(f["loss"], f["num_hyperparameters"], n)
        chosen, reason = choose_structure(fits, requested, n)
        self._report(f"structure_ = {chosen['structure']!r}: {reason}.")
        self.structure_search_ = [
            {"candidate": f["structure"], "num_basis": f["basis"].num_basis, "product_inputs": f["product_inputs"],
             "product_num_basis": f["product_num_basis"], "num_features": f["stats"].num_features,
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
                                        self.num_basis_, name, half_range=half_range.tolist())
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
        num_basis, largest = self._num_basis_range("hybrid", num_dims)
        if self.num_basis is None:  # the additive fit's M, or M ≥ 3.4 L/ℓ for the shorter lengthscales if larger
            ls = torch.minimum(torch.as_tensor(start["lengthscale"]).detach().cpu().reshape(-1).expand(num_dims), pilot)
            need_m = int(math.ceil(float((3.4 * c0 * half_range.cpu() / ls).max())))
            if additive is not None:
                need_m = max(need_m, additive["basis"].num_basis)
            num_basis = min(largest, max(MIN_PRODUCT_NUM_BASIS, need_m))
        return num_basis, c0, start, pilot

    @staticmethod
    def _describe(fit: dict[str, Any]) -> str:
        text = f"{fit['structure']} (M = {fit['basis'].num_basis}"
        if fit["structure"] == "hybrid":
            text += (f", product block over inputs {fit['product_inputs']}: {fit['product_indices'].shape[0]} "
                     f"functions, up to {fit['product_num_basis']} per input")
        return text + f", {fit['stats'].num_features} features)"

    def _store_posterior(self, stats: WeightSpaceStatistics) -> None:
        like = {"dtype": stats.gram.dtype, "device": stats.gram.device}
        with torch.no_grad():
            self.feature_weights_ = self._feature_weights(self.lengthscale_)
            self.weight_mean_, self.weight_cov_factor_ = weight_posterior(
                self.feature_weights_, torch.tensor(self.outputscale_, **like),
                torch.tensor(self.noise_variance_, **like), torch.tensor(self.mean_constant_, **like), stats)

    # ------------------------------------------------------------------ prediction
    def _representable_box(self) -> tuple[torch.Tensor, torch.Tensor]:
        center, half_width = self.basis_.center, self.basis_.L
        return center - half_width, center + half_width

    def _latent(self, X: torch.Tensor, full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
        out_dtype = X.dtype
        weighted = (self._unweighted_features(chunk) * self.feature_weights_
                    for chunk in torch.split(X.to(torch.float64), int(self.chunk_size)))  # (n, M_tot) chunks
        mean, variance = latent_moments(weighted, self.weight_mean_, self.weight_cov_factor_, self.noise_variance_,
                                        full_covariance)
        return (self.mean_constant_ + mean).to(out_dtype), variance.to(out_dtype)

    def condition_on_observations(self, X: ArrayLike, y: ArrayLike) -> "HilbertGP":
        """A copy whose weight posterior also conditions on new rows ``X`` (k, n_features), ``y`` (k,), given in
        the user's units (inputs outside the basis box follow ``out_of_box``); this model is unchanged.

        The weight posterior is a Bayesian linear regression, w | y ~ N(B⁻¹ Zᵀ(y − c), σ² B⁻¹) with
        B = ZᵀZ + (σ²/σ_f²) I and Z the weighted features: new rows add Z_newᵀZ_new to B (a rank-k update,
        :func:`~tnbayes.inference.weight_space.condition_weight_posterior`) and Z_newᵀ(y_new − c) to the right-hand
        side. The returned fitted HilbertGP equals this model's posterior computed on the union of the old and new
        rows with the same scalers, basis, lengthscales, σ_f², σ² and mean constant (no ML-II refit; ``fit`` on
        the union would also re-select those).
        """
        self._check_fitted("condition_on_observations")
        Xs, ys = self._scaled_new_rows(X, y)
        step = int(self.chunk_size)
        rows = ((self._unweighted_features(Xs[start:start + step]) * self.feature_weights_,
                 ys[start:start + step] - self.mean_constant_) for start in range(0, Xs.shape[0], step))
        conditioned = copy.deepcopy(self)
        conditioned.weight_mean_, conditioned.weight_cov_factor_ = condition_weight_posterior(
            self.weight_mean_, self.weight_cov_factor_, rows)
        conditioned.n_conditioned_rows_ = int(getattr(self, "n_conditioned_rows_", 0)) + int(Xs.shape[0])
        return conditioned

    def weight_covariance(self) -> torch.Tensor:
        """Posterior covariance of the weights, σ² B⁻¹, of shape (M_tot, M_tot) (standardised scale)."""
        self._check_fitted("weight_covariance")
        return weight_covariance(self.weight_cov_factor_, self.noise_variance_)

    # ------------------------------------------------------------------ persistence
    _transient_attributes = ("basis_",)

    def _extra_state(self) -> dict[str, torch.Tensor]:
        return {"basis.L": self.basis_.L, "basis.center": self.basis_.center}

    def _after_load(self, extra: dict[str, torch.Tensor]) -> None:
        self.basis_ = HilbertBasis(int(self.num_basis_), L=extra["basis.L"].tolist(),
                                   center=extra["basis.center"].tolist(), num_dims=int(extra["basis.L"].numel()))


register_model("hilbert_gp", HilbertGP)
register_model("hilbert_gp_additive", lambda **kw: HilbertGP(structure="additive", **kw))
