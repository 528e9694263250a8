"""Exact Bayesian regression on Hilbert-space GP features (Solin & Särkkä 2020).

Model (on standardised inputs and targets)::

    y = c + z(x)ᵀ w + ε,   w ~ N(0, σ_f² I),   ε ~ N(0, σ²),
    z(x) = Φ(x) s(ℓ)       Φ: products (or the concatenation, additive) of Laplace eigenfunctions,
                           s: square roots of the kernel's spectral density at the eigenfrequencies.

Φ does not depend on the hyper-parameters, so the sufficient statistics ΦᵀΦ, Φᵀ1, Φᵀy, 1ᵀy and
yᵀy are accumulated once over row chunks; each marginal-likelihood evaluation then costs
O(M_tot³), the same at N = 10⁴ and N = 10⁷. With B = S ΦᵀΦ S + (σ²/σ_f²) I and r = y − c·1::

    −log p(y) = ½ [ (rᵀr − rᵀΦS B⁻¹ SΦᵀr) / σ² + N log σ² + M_tot log(σ_f²/σ²) + log|B| + N log 2π ]

and the weight posterior is N(B⁻¹ S Φᵀ r, σ² B⁻¹).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from tnbayes._validation import check_positive
from tnbayes.basis import (
    DEFAULT_MAX_PRODUCT_FEATURES,
    HILBERT_RULE_CONSTANTS,
    accurate_hilbert_parameters,
    HilbertBasis,
    additive_features,
    check_hilbert_approximation,
    choose_hilbert_parameters,
    data_center_and_half_range,
    product_features,
    resolve_kernel,
)
from tnbayes.basis.spectral import kernel_name
from tnbayes.models.base import BaseModel
from tnbayes.models.registry import register_model

__all__ = ["HilbertGP"]

#: largest M^D used by structure="auto" before it switches to the additive structure
AUTO_MAX_PRODUCT_FEATURES = 1024
#: largest D·M the adaptation may reach for the additive structure (each likelihood step is O((D·M)³))
ADDITIVE_MAX_FEATURES = 1024


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
    structure : {"auto", "product", "additive"}
        Product kernel over dimensions (M^D features) or additive kernel (D·M features, scaled by
        1/D so that the kernel has unit variance). ``"auto"`` takes the product when
        M^D ≤ 1024 (each marginal-likelihood step factorises an M^D × M^D matrix), else the
        additive structure.
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
    out_of_box : {"raise", "clip"}
        Inputs outside the Hilbert box at prediction time raise a ``ValueError`` (default) or are clipped to
        the training range per input (constant extrapolation), as in :class:`~tnbayes.CPDKernelMachine`.
    normalize_y, dtype, device, verbose
        See :class:`~tnbayes.models.base.BaseModel`.

    Attributes
    ----------
    basis_ : HilbertBasis
        The basis (box per standardised input).
    num_basis_, c_, structure_ : int, list of float (D,), str
        The values used.
    lengthscale_ : torch.Tensor of shape (D,) or (1,)
    outputscale_, noise_variance_, mean_constant_ : float
    weight_mean_ : torch.Tensor of shape (M_tot,)
        Posterior mean of w.
    weight_cov_factor_ : torch.Tensor of shape (M_tot, M_tot)
        Lower Cholesky factor L of B; the weight covariance is σ² (L Lᵀ)⁻¹.
    neg_mll_ : float
        Negative log marginal likelihood per point at the optimum.
    history_ : list of dict
        One entry per (M, c) round: M, c, lengthscale and negative MLL.

    Notes
    -----
    When ``num_basis``/``c`` are not given they are chosen from the data: start from c = 2 and the
    largest M allowed by the structure (64 for 1-D, 32 per dimension for 2-D products, 32 for additive;
    the enlargement stops at ``max_num_basis`` and, for additive models, at D·M ≤ 1024),
    maximise the marginal likelihood, then check the fitted lengthscales against the rule of
    Riutort-Mayol et al. (2022) (``c ≥ 3.2 ℓ/S``, ``M ≥ 1.75 c S/ℓ`` for SE; Matérn constants
    likewise) tightened to ``c ≥ 1 + 2.6 ℓ/S`` and ``M ≥ 3.4 c S/ℓ`` (the published rule leaves
    percent-level kernel errors that bias the output scale), and refit with enlarged (M, c) if
    they are violated. An
    :class:`~tnbayes.basis.ApproximationWarning` is issued if the final values still violate the
    rule (e.g. M capped by ``max_num_basis``). Matérn-1/2 has no published rule: M and c stay at
    their starting values.

    The statistics, the likelihood and the weight posterior are computed in float64 whatever
    ``dtype`` is (the O(M_tot³) work is cheap and float32 loses small noise variances); ``dtype``
    sets the dtype of the returned posterior. A constant input column gets a nominal unit box.
    """

    def __init__(self, kernel: str = "se", nu: float | None = None, *, num_basis: int | None = None,
                 c: float | None = None, structure: str = "auto", ard: bool = True,
                 lengthscale: float | list[float] | None = None, outputscale: float | None = None,
                 noise_variance: float | None = None, mean_constant: float | None = None,
                 max_iter: int = 200, num_restarts: int = 0, max_adapt_rounds: int = 3,
                 max_num_basis: int = 512, noise_lower_bound: float = 1e-6, chunk_size: int = 65536,
                 seed: int = 0, out_of_box: str = "raise", normalize_y: bool = True,
                 dtype: torch.dtype | str | None = None, device: str | torch.device | None = None,
                 verbose: bool = False) -> None:
        super().__init__(normalize_y=normalize_y, dtype=dtype, device=device, verbose=verbose)
        if out_of_box not in ("raise", "clip"):
            raise ValueError(f"out_of_box must be 'raise' or 'clip'; got {out_of_box!r}.")
        self.out_of_box = out_of_box
        self.kernel = kernel
        self.nu = nu
        self.num_basis = num_basis
        self.c = c
        self.structure = structure
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
    def _structure_for(self, num_dims: int, num_basis: int) -> str:
        if self.structure not in ("auto", "product", "additive"):
            raise ValueError(f"structure must be 'auto', 'product' or 'additive'; got {self.structure!r}.")
        if self.structure != "auto":
            return self.structure
        return "product" if num_basis**num_dims <= AUTO_MAX_PRODUCT_FEATURES else "additive"

    def _default_num_basis(self, num_dims: int) -> int:
        if self.structure == "additive" or (self.structure == "auto" and 8**num_dims > AUTO_MAX_PRODUCT_FEATURES):
            return 32
        return max(8, min(64, int(math.floor(AUTO_MAX_PRODUCT_FEATURES ** (1.0 / num_dims) + 1e-9))))

    def _unweighted_features(self, X: torch.Tensor) -> torch.Tensor:
        """Φ(X): (N, M_tot) products (or concatenation) of eigenfunctions, no spectral weights."""
        phi = self.basis_.eigenfunctions(X)  # (D, N, M)
        if self.structure_ == "product":
            return product_features(phi, max_features=DEFAULT_MAX_PRODUCT_FEATURES)
        return torch.cat(list(phi), dim=-1)

    def _feature_weights(self, lengthscale: torch.Tensor) -> torch.Tensor:
        """s(ℓ): (M_tot,) square roots of the spectral density, in the column order of Φ."""
        w = self.basis_.spectral_weights(lengthscale, self.kernel, self.nu)  # (D, M)
        if self.structure_ == "product":
            return product_features(w.unsqueeze(-2), max_features=w.shape[-1] ** w.shape[0]).reshape(-1)
        return additive_features(w.unsqueeze(-2)).reshape(-1)

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
                          noise: torch.Tensor, const: torch.Tensor) -> dict[str, torch.Tensor]:
        s = self._feature_weights(lengthscale)
        m = s.shape[0]
        B = s[:, None] * stats["gram"] * s[None, :] + (noise / outputscale) * torch.eye(m, dtype=s.dtype, device=s.device)
        chol = torch.linalg.cholesky(B)
        zr = s * (stats["rhs"] - const * stats["ones"])  # S Φᵀ r
        rr = stats["yy"] - 2 * const * stats["sum_y"] + const**2 * stats["n"]
        alpha = torch.cholesky_solve(zr.unsqueeze(-1), chol).squeeze(-1)  # B⁻¹ S Φᵀ r
        return {"s": s, "chol": chol, "alpha": alpha, "zr": zr, "rr": rr}

    def _neg_mll(self, stats: dict[str, Any], lengthscale: torch.Tensor, outputscale: torch.Tensor,
                 noise: torch.Tensor, const: torch.Tensor) -> torch.Tensor:
        """Negative log marginal likelihood per data point."""
        sys = self._posterior_system(stats, lengthscale, outputscale, noise, const)
        n, m = stats["n"], sys["s"].shape[0]
        quad = (sys["rr"] - sys["zr"] @ sys["alpha"]) / noise
        logdet = n * torch.log(noise) + m * torch.log(outputscale / noise) + 2 * torch.log(torch.diagonal(sys["chol"])).sum()
        return 0.5 * (quad + logdet + n * math.log(2 * math.pi)) / n

    def _optimise(self, stats: dict[str, Any], init_lengthscale: torch.Tensor | None) -> tuple[dict[str, float | torch.Tensor], float]:
        dtype, device = stats["gram"].dtype, stats["gram"].device
        num_ls = self.basis_.num_dims if self.ard else 1
        generator = torch.Generator().manual_seed(int(self.seed))
        fixed = {"lengthscale": self.lengthscale, "outputscale": self.outputscale,
                 "noise": self.noise_variance, "const": self.mean_constant}
        lower = float(self.noise_lower_bound)

        def unpack(raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            out = {}
            for name, value in raw.items():
                if fixed[name] is not None:
                    t = torch.as_tensor(fixed[name], dtype=dtype, device=device)
                    out[name] = t.reshape(-1).expand(num_ls).clone() if name == "lengthscale" else t
                elif name == "const":
                    out[name] = value
                elif name == "noise":
                    out[name] = lower + torch.nn.functional.softplus(value)
                else:
                    out[name] = torch.exp(value)
            return out

        best: tuple[dict[str, Any], float] | None = None
        for run in range(int(self.num_restarts) + 1):
            if run == 0:
                ls0 = init_lengthscale if init_lengthscale is not None else torch.full((num_ls,), 0.5, dtype=dtype)
                init = {"lengthscale": ls0.to(dtype).reshape(-1).expand(num_ls).log(), "outputscale": torch.tensor(0.0),
                        "noise": torch.tensor(math.log(math.expm1(0.1))), "const": torch.tensor(0.0)}
            else:
                u = torch.rand(num_ls + 2, generator=generator, dtype=torch.float64)
                init = {"lengthscale": math.log(0.1) + u[:num_ls] * math.log(3.0 / 0.1),
                        "outputscale": math.log(0.3) + u[num_ls] * math.log(10.0),
                        "noise": torch.log(torch.expm1(torch.exp(math.log(1e-3) + u[num_ls + 1] * math.log(300.0)))),
                        "const": torch.tensor(0.0)}
            raw = {k: torch.as_tensor(v, dtype=dtype, device=device).clone().requires_grad_(fixed[k] is None)
                   for k, v in init.items()}
            params = [p for p in raw.values() if p.requires_grad]
            track = {"loss": math.inf, "raw": {k: v.detach().clone() for k, v in raw.items()}}

            def loss_fn() -> torch.Tensor:
                p = unpack(raw)
                try:
                    loss = self._neg_mll(stats, p["lengthscale"], p["outputscale"], p["noise"], p["const"])
                except torch.linalg.LinAlgError:
                    return torch.tensor(math.inf, dtype=dtype, device=device, requires_grad=True)
                if torch.isfinite(loss) and float(loss.detach()) < track["loss"]:
                    track["loss"], track["raw"] = float(loss.detach()), {k: v.detach().clone() for k, v in raw.items()}
                return loss

            if params:
                opt = torch.optim.LBFGS(params, lr=1.0, max_iter=int(self.max_iter), history_size=20,
                                        line_search_fn="strong_wolfe", tolerance_grad=1e-8, tolerance_change=1e-10)

                def closure() -> torch.Tensor:
                    opt.zero_grad()
                    loss = loss_fn()
                    if loss.requires_grad and torch.isfinite(loss):
                        loss.backward()
                    return loss

                opt.step(closure)
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

    def _max_num_basis(self, num_dims: int) -> int:
        """Largest M the adaptation may pick: ``max_num_basis`` and, for products, M^D ≤ the product limit."""
        limit = int(self.max_num_basis)
        if self.structure == "product" or (self.structure == "auto" and num_dims > 1):
            cap = AUTO_MAX_PRODUCT_FEATURES if self.structure == "auto" else DEFAULT_MAX_PRODUCT_FEATURES
            limit = min(limit, max(1, int(math.floor(cap ** (1.0 / num_dims) + 1e-9))))
        elif num_dims > 1:  # additive: D·M features
            limit = min(limit, max(1, ADDITIVE_MAX_FEATURES // num_dims))
        return limit

    def _fit(self, X: torch.Tensor, y: torch.Tensor) -> None:
        resolve_kernel(self.kernel, self.nu)
        name = kernel_name(self.kernel, self.nu)
        has_rule = name in HILBERT_RULE_CONSTANTS
        num_dims = X.shape[1]
        self._validate_hyperparameters(num_dims)
        # The likelihood work is O(M_tot^3) and ill-conditioned for small noise: always float64.
        X, y = X.to(torch.float64), y.to(torch.float64)
        center, half_range = data_center_and_half_range(X, allow_constant=True)
        # a constant column carries no information; give it a nominal box so the basis is defined
        half_range = torch.where(half_range > 0, half_range, torch.ones_like(half_range))
        num_basis = int(self.num_basis) if self.num_basis is not None else self._default_num_basis(num_dims)
        c = torch.as_tensor(2.0 if self.c is None else self.c, dtype=torch.float64).reshape(-1).expand(num_dims).clone()
        self.history_ = []
        init_ls = None if self.lengthscale is None else torch.as_tensor(self.lengthscale, dtype=X.dtype).reshape(-1)
        adapt = has_rule and (self.num_basis is None or self.c is None)
        rounds = range(int(self.max_adapt_rounds) if adapt else 1)
        if self.verbose:
            from tqdm.auto import tqdm
            rounds = tqdm(rounds, desc="HilbertGP (M, c) rounds")
        for _ in rounds:
            self.structure_ = self._structure_for(num_dims, num_basis)
            self.basis_ = HilbertBasis(num_basis, L=(c * half_range.cpu()).tolist(), center=center.tolist(),
                                       num_dims=num_dims)
            stats = self._accumulate_statistics(X, y)
            values, loss = self._optimise(stats, init_ls)
            ls = values["lengthscale"].detach()
            self.history_.append({"num_basis": num_basis, "c": c.tolist(), "lengthscale": ls.tolist(), "neg_mll": loss})
            if not adapt:
                break
            need_c, need_m = accurate_hilbert_parameters(ls.cpu().expand(num_dims), half_range.cpu(), name)
            need_c = need_c if self.c is None else c
            need_m = min(need_m if self.num_basis is None else num_basis, self._max_num_basis(num_dims))
            if bool((need_c <= c * (1 + 1e-9)).all()) and need_m <= num_basis:
                break
            c, num_basis = torch.maximum(c, need_c), max(num_basis, need_m)
            init_ls = ls
        # report what the final basis really is (a last enlargement may not have been refitted)
        self.num_basis_ = self.basis_.num_basis
        self.c_ = (self.basis_.L / half_range.cpu()).tolist()
        self.lengthscale_ = values["lengthscale"].detach().clone()
        self.outputscale_ = float(values["outputscale"])
        self.noise_variance_ = float(values["noise"])
        self.mean_constant_ = float(values["const"])
        self.neg_mll_ = float(loss)
        if has_rule:
            check_hilbert_approximation(self.lengthscale_.cpu().expand(num_dims).tolist(), self.basis_.L.tolist(),
                                        self.num_basis_, name, half_range=half_range.tolist(), stacklevel=4)
        self._store_posterior(stats)

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
    def _scaled_inputs(self, X: Any) -> torch.Tensor:
        Xs = super()._scaled_inputs(X)
        L = self.basis_.L.to(Xs)
        center = self.basis_.center.to(Xs)
        if self.out_of_box == "clip":  # to the training range: centre ± half-range = centre ± L / c
            half_range = L / torch.as_tensor(self.c_, dtype=Xs.dtype, device=Xs.device)
            Xs = torch.maximum(torch.minimum(Xs, center + half_range), center - half_range)
        outside = (Xs - center).abs() > L * (1 + 1e-10)
        if bool(outside.any()):
            row, col = (int(i) for i in torch.nonzero(outside)[0])
            shift, scale = self.x_scaler_.shift_[col], self.x_scaler_.scale_[col]
            lo, hi = float((center[col] - L[col]) * scale + shift), float((center[col] + L[col]) * scale + shift)
            value = float(Xs[row, col] * scale + shift)
            raise ValueError(
                f"Input row {row}, column {col} has value {value:.6g}, outside the box [{lo:.6g}, {hi:.6g}] on "
                f"which this HilbertGP's basis is defined ({int(outside.sum())} value(s) outside in all). The "
                f"basis vanishes at the box edges, so predictions there would be silently wrong. Refit with a "
                f"larger c (currently {self.c_[col]:.3g} times the training half-range), or pass "
                f"out_of_box='clip' to clip inputs to the training range."
            )
        return Xs

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
