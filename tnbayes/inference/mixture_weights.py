"""The λ block of the feature-learning model (Saiapin & Batselier): penalised least squares for P mixture weights
(the *inference* axis).

With the CPD weights fixed, FL's objective in λ is ::

    ½‖y − F λ‖² + β·Reg(λ)          F (n, P) real,  y (n,) real

with β the ``mixture_penalty_strength`` and ``Reg`` the ``mixture_penalty``, one of

- ``"l1"``: ‖λ‖₁ — exactly, by the LARS-lasso homotopy on the Gram matrix (Efron, Hastie, Johnstone &
  Tibshirani 2004; scikit-learn's ``lars_path_gram``, at most a few times P steps), whose support and signs give
  the solution ``G_S λ_S = b_S − β sign(λ_S)``, kept when it meets the optimality conditions
  ``|b − Gλ| ≤ β`` off the support. Nearly collinear families make FᵀF ill-conditioned (condition numbers of
  10¹² measured on FL's airfoil fits), where first-order methods move very slowly along the flat directions.
  Fallback when the check fails: FISTA (Beck & Teboulle 2009) with step 1/‖FᵀF‖₂, soft threshold βt and the
  standard momentum sequence t_{k+1} = (1 + √(1 + 4t_k²))/2 (the reference code's momentum differs), restarted
  when it stops descending (O'Donoghue & Candès 2015), then polished: the exact solution on the support and
  signs FISTA found, kept when it meets the optimality conditions;
- ``"l2"``: ½‖λ‖² — closed form λ = (FᵀF + βI)⁻¹Fᵀy;
- ``"fixed_norm"``: the constraint ‖λ‖₂ ≤ 1 (no β) — λ(μ) = (FᵀF + μI)⁻¹Fᵀy with μ ≥ 0 the root of
  ‖λ(μ)‖ = 1 from the eigen-decomposition of FᵀF (the SVD of F) by a safeguarded root finder (Brent);
  μ = 0 when the least-squares solution (minimum norm) already lies inside the ball;

each optionally with λ ≥ 0: L1 by the one-sided threshold max(z − βt, 0), L2 exactly by non-negative least
squares on the Cholesky factor of FᵀF + βI, the fixed norm by FISTA with the projection onto
{λ ≥ 0, ‖λ‖ ≤ 1} (clip, then scale into the ball — exact for a ball centred at 0).

Everything works on the P × P Gram matrix G = FᵀF and b = Fᵀy, so one update costs O(nP²) for G and then O(P³).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import brentq, nnls
from sklearn.linear_model import lars_path_gram

from tnbayes._deprecation import DEPRECATED, REMOVED_IN, RENAMED_IN, is_deprecated_default
from tnbayes._deprecation import moved_names_getattr
from tnbayes._warnings import warn_user

__all__ = ["MIXTURE_PENALTIES", "MixtureWeightSolution", "mixture_weight_objective", "solve_mixture_weights"]

#: the values of ``mixture_penalty`` (FL's ``mixture_penalty`` adds "none": no λ update)
MIXTURE_PENALTIES = ("l1", "l2", "fixed_norm")

__getattr__ = moved_names_getattr(__name__, {"REGULARIZATIONS": (__name__, "MIXTURE_PENALTIES")})  # renamed in 0.2


def _renamed_arguments(function: str, mixture_penalty: str, mixture_penalty_strength: float, regularization: str,
                       beta: float | str) -> tuple[str, float]:
    """``(mixture_penalty, mixture_penalty_strength)`` with the values of the deprecated names when given (warns)."""
    for old, new in (("regularization", "mixture_penalty"), ("beta", "mixture_penalty_strength")):
        value = regularization if old == "regularization" else beta
        if is_deprecated_default(value):
            continue
        warn_user(f"{function}: the argument {old!r} was renamed {new!r} in tnbayes {RENAMED_IN}; pass "
                  f"{new}={value!r} instead ({old!r} will be removed in {REMOVED_IN}).", FutureWarning)
        if old == "regularization":
            mixture_penalty = value
        else:
            mixture_penalty_strength = value
    return mixture_penalty, mixture_penalty_strength


@dataclass
class MixtureWeightSolution:
    """Result of :func:`solve_mixture_weights`.

    Attributes
    ----------
    weights : torch.Tensor of shape (P,)
    objective : float
        ½‖y − Fλ‖² + β·Reg(λ) at ``weights`` (the constant ½‖y‖² included).
    iterations : int
        FISTA iterations (0 for closed forms and the exact L1 homotopy).
    multiplier : float
        μ of the fixed-norm problem (0 otherwise).
    """

    weights: torch.Tensor
    objective: float
    iterations: int = 0
    multiplier: float = 0.0


def mixture_weight_objective(gram: torch.Tensor, rhs: torch.Tensor, yy: float, weights: torch.Tensor,
                             mixture_penalty: str = DEPRECATED, mixture_penalty_strength: float = DEPRECATED, *,
                             regularization: str = DEPRECATED, beta: float | str = DEPRECATED) -> float:
    """½‖y − Fλ‖² + β·Reg(λ) from G = FᵀF, b = Fᵀy and yᵀy (``inf`` outside the fixed-norm ball).

    Parameters
    ----------
    gram : torch.Tensor of shape (P, P)
    rhs : torch.Tensor of shape (P,)
    yy : float
    weights : torch.Tensor of shape (P,)
    mixture_penalty : {"l1", "l2", "fixed_norm"}
        Reg.
    mixture_penalty_strength : float
        β.
    regularization, beta
        Deprecated aliases of ``mixture_penalty`` and ``mixture_penalty_strength`` (FutureWarning).

    Returns
    -------
    float
    """
    mixture_penalty, mixture_penalty_strength = _renamed_arguments(
        "mixture_weight_objective", mixture_penalty, mixture_penalty_strength, regularization, beta)
    if is_deprecated_default(mixture_penalty) or is_deprecated_default(mixture_penalty_strength):
        raise TypeError("mixture_weight_objective needs mixture_penalty and mixture_penalty_strength.")
    fit = 0.5 * (yy - 2.0 * float(rhs @ weights) + float(weights @ gram @ weights))
    if mixture_penalty == "l1":
        return fit + mixture_penalty_strength * float(weights.abs().sum())
    if mixture_penalty == "l2":
        return fit + 0.5 * mixture_penalty_strength * float(weights @ weights)
    return fit if float(torch.linalg.vector_norm(weights)) <= 1.0 + 1e-9 else math.inf


def _objective(G: np.ndarray, b: np.ndarray, yy: float, lam: np.ndarray, mixture_penalty: str,
               strength: float) -> float:
    return mixture_weight_objective(torch.as_tensor(G), torch.as_tensor(b), yy, torch.as_tensor(lam), mixture_penalty,
                                    strength)


def _fista(gram: np.ndarray, rhs: np.ndarray, start: np.ndarray, lipschitz: float, prox, max_iter: int,
           tol: float) -> tuple[np.ndarray, int]:
    """FISTA for ½λᵀGλ − bᵀλ + h(λ) with ``prox(z, step)`` the proximal map of h (numpy: P is small, and torch's
    per-call overhead would dominate thousands of P-sized iterations)."""
    step = 1.0 / max(lipschitz, 1e-300)
    current = prox(start.copy(), step)
    point, momentum = current.copy(), 1.0
    # ‖v‖ as √(v·v) (what np.linalg.norm computes for a vector, without its per-call checks)
    for iteration in range(1, int(max_iter) + 1):
        following = prox(point - step * (gram @ point - rhs), step)
        difference = following - current
        if float((point - following) @ difference) > 0:  # adaptive restart (O'Donoghue & Candès 2015)
            momentum = 1.0
        next_momentum = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * momentum * momentum))
        point = following + ((momentum - 1.0) / next_momentum) * difference
        change = math.sqrt(float(difference @ difference))
        current, momentum = following, next_momentum
        if change <= tol * (1.0 + math.sqrt(float(current @ current))):
            return current, iteration
    return current, int(max_iter)


def _polish_l1(gram: np.ndarray, rhs: np.ndarray, weights: np.ndarray, beta: float,
               nonnegative: bool) -> np.ndarray | None:
    """Exact L1 solution on the support and signs FISTA found, if it satisfies the optimality conditions."""
    support = weights != 0
    signs = np.sign(weights)
    polished = np.zeros_like(weights)
    if bool(support.any()):
        index = np.nonzero(support)[0]
        block = gram[np.ix_(index, index)]
        try:
            polished[index] = np.linalg.solve(block, rhs[index] - beta * signs[index])
        except np.linalg.LinAlgError:
            return None
        if bool((np.sign(polished[index]) != signs[index]).any()):
            return None
    slack = rhs - gram @ polished  # the subgradient condition on the zero coordinates
    off = ~support
    bound = beta * (1.0 + 1e-9) + 1e-12
    if bool(off.any()) and (float(slack[off].max()) > bound or (not nonnegative and float(slack[off].min()) < -bound)):
        return None
    return polished


def _lasso_homotopy(gram: np.ndarray, rhs: np.ndarray, beta: float, nonnegative: bool) -> np.ndarray | None:
    """The exact minimiser of ½λᵀGλ − bᵀλ + β‖λ‖₁ (λ ≥ 0 with ``nonnegative``) from the LARS-lasso path on the
    Gram matrix, verified by the optimality conditions (:func:`_polish_l1`); None when they fail (a degenerate
    path), so that the caller falls back to FISTA."""
    if gram.shape[0] == 0 or not np.all(np.isfinite(gram)) or not np.all(np.isfinite(rhs)):
        return None
    with warnings.catch_warnings():  # degenerate steps are caught by the optimality check below
        warnings.simplefilter("ignore")
        try:
            _, _, path = lars_path_gram(Xy=rhs, Gram=gram, n_samples=1, alpha_min=float(beta), method="lasso",
                                        positive=bool(nonnegative))
        except (ValueError, np.linalg.LinAlgError):
            return None
    return _polish_l1(gram, rhs, path[:, -1], beta, nonnegative)


def _project_ball(weights: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(weights))
    return weights / norm if norm > 1.0 else weights


def _fixed_norm(gram: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, float]:
    """min ½‖y − Fλ‖² s.t. ‖λ‖ ≤ 1 by the secular equation on the eigen-decomposition G = V S Vᵀ."""
    eigenvalues, vectors = np.linalg.eigh(gram)
    eigenvalues = np.clip(eigenvalues, 0.0, None)
    projected = vectors.T @ rhs  # = σ_i c_i
    tiny = 1e-12 * max(float(eigenvalues.max()), 1e-300)
    keep = eigenvalues > tiny  # directions F does not see carry no data (and take no weight)

    def norm_at(mu: float) -> float:
        return float(np.linalg.norm(projected[keep] / (eigenvalues[keep] + mu)))

    def solution(mu: float) -> np.ndarray:
        coefficients = np.zeros_like(projected)
        coefficients[keep] = projected[keep] / (eigenvalues[keep] + mu)
        return vectors @ coefficients

    if not bool(keep.any()) or norm_at(0.0) <= 1.0:
        return solution(0.0), 0.0
    upper = max(float(np.linalg.norm(projected)), 1e-300)  # ‖λ(μ)‖ ≤ ‖b‖/μ ≤ 1 at μ = ‖b‖
    mu = brentq(lambda m: norm_at(m) - 1.0, 0.0, upper, xtol=1e-14 * upper, rtol=1e-15, maxiter=500)
    return solution(mu), float(mu)


def solve_mixture_weights(F: torch.Tensor | None, y: torch.Tensor | None, mixture_penalty: str = "l1",
                          mixture_penalty_strength: float = 0.1, *, nonnegative: bool = False,
                          start: torch.Tensor | None = None, gram: torch.Tensor | None = None,
                          rhs: torch.Tensor | None = None, yy: float | None = None, max_iter: int = 20000,
                          tol: float = 1e-12, regularization: str = DEPRECATED,
                          beta: float | str = DEPRECATED) -> MixtureWeightSolution:
    """Minimise ½‖y − Fλ‖² + β·Reg(λ) (see the module docstring).

    Parameters
    ----------
    F : torch.Tensor of shape (n, P), optional
        Per-component predictions (real). Not needed when ``gram``, ``rhs`` and ``yy`` are given.
    y : torch.Tensor of shape (n,), optional
    mixture_penalty : {"l1", "l2", "fixed_norm"}
        Reg.
    mixture_penalty_strength : float
        β ≥ 0 (ignored by ``"fixed_norm"``).
    nonnegative : bool
        Constrain λ ≥ 0.
    start : torch.Tensor of shape (P,), optional
        Warm start of the iterative solvers (default zeros).
    gram, rhs : torch.Tensor of shape (P, P) and (P,), optional
        FᵀF and Fᵀy when already formed (e.g. stacked real and imaginary parts).
    yy : float, optional
        yᵀy (only enters the reported objective).
    max_iter : int
        FISTA iteration budget.
    tol : float
        FISTA stops when an iteration moves λ by less than ``tol·(1 + ‖λ‖)``.
    regularization, beta
        Deprecated aliases of ``mixture_penalty`` and ``mixture_penalty_strength`` (FutureWarning).

    Returns
    -------
    MixtureWeightSolution
    """
    mixture_penalty, strength = _renamed_arguments("solve_mixture_weights", mixture_penalty,
                                                   mixture_penalty_strength, regularization, beta)
    if mixture_penalty not in MIXTURE_PENALTIES:
        raise ValueError(f"mixture_penalty must be one of {MIXTURE_PENALTIES}; got {mixture_penalty!r}.")
    if not math.isfinite(float(strength)) or strength < 0:
        raise ValueError(f"mixture_penalty_strength must be a finite number >= 0; got {strength!r}.")
    if gram is None or rhs is None:
        if F is None or y is None or F.ndim != 2 or y.shape != (F.shape[0],):
            raise ValueError("give F (n, P) and y (n,), or gram (P, P), rhs (P,) and yy.")
        gram, rhs, yy = F.T @ F, F.T @ y, float(y @ y)
    like = gram
    yy = float(rhs @ rhs) if yy is None else float(yy)
    G = gram.detach().cpu().double().numpy()
    G = 0.5 * (G + G.T)
    b = rhs.detach().cpu().double().numpy()
    P = G.shape[0]
    lam0 = np.zeros(P) if start is None else start.detach().cpu().double().numpy().reshape(P)
    lipschitz = float(np.linalg.eigvalsh(G)[-1]) if P else 0.0
    iterations, multiplier = 0, 0.0

    if mixture_penalty == "l2" and not nonnegative:
        weights = np.linalg.solve(G + strength * np.eye(P), b) if strength > 0 else np.linalg.lstsq(G, b, rcond=None)[0]
    elif mixture_penalty == "l2":
        # min ½λᵀ(G + βI)λ − bᵀλ, λ ≥ 0  ⇔  min ‖Lᵀλ − L⁻¹b‖², λ ≥ 0 with G + βI = LLᵀ
        lower = np.linalg.cholesky(G + max(strength, 1e-12 * max(lipschitz, 1e-300)) * np.eye(P))
        weights, _ = nnls(lower.T, np.linalg.solve(lower, b), maxiter=50 * max(P, 1))
    elif mixture_penalty == "fixed_norm" and not nonnegative:
        weights, multiplier = _fixed_norm(G, b)
    else:
        if mixture_penalty == "l1":
            def prox(z: np.ndarray, step: float) -> np.ndarray:
                if nonnegative:
                    return np.maximum(z - strength * step, 0.0)
                return np.sign(z) * np.maximum(np.abs(z) - strength * step, 0.0)
        else:  # fixed norm with λ ≥ 0
            def prox(z: np.ndarray, step: float) -> np.ndarray:
                return _project_ball(np.clip(z, 0.0, None))
        weights = _lasso_homotopy(G, b, strength, nonnegative) if mixture_penalty == "l1" else None
        if weights is None:
            weights, iterations = _fista(G, b, lam0, lipschitz, prox, max_iter, tol)
        if mixture_penalty == "l1" and iterations:  # after FISTA: the exact solution on its support and signs
            polished = _polish_l1(G, b, weights, strength, nonnegative)
            if polished is not None and (_objective(G, b, yy, polished, mixture_penalty, strength)
                                         <= _objective(G, b, yy, weights, mixture_penalty, strength)):
                weights = polished
    weights = torch.as_tensor(np.asarray(weights, dtype=np.float64), dtype=like.dtype, device=like.device)
    gram = 0.5 * (gram + gram.T)
    objective = mixture_weight_objective(gram, rhs, yy, weights, mixture_penalty, strength)
    return MixtureWeightSolution(weights, objective, iterations, multiplier)
