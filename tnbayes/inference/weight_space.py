"""Exact Gaussian posterior of dense weights: Bayesian linear regression on features (the *inference* axis).

The model, on standardised targets, is::

    y = c·1 + Z w + ε,   Z = Φ S,   w ~ N(0, σ_f² I),   ε ~ N(0, σ² I)

with Φ (N, M) any feature matrix (a basis evaluated at the inputs) and S = diag(s) the prior standard deviations
of the features (for a Hilbert-space GP, the square roots of the kernel's spectral density). Φ does not depend
on the hyper-parameters, so the sufficient statistics ΦᵀΦ, Φᵀ1, Φᵀy, 1ᵀy and yᵀy are accumulated once over row
chunks (:func:`accumulate_statistics`); every evaluation of the evidence then costs O(M³), the same at N = 10⁴
and N = 10⁷. With B = S ΦᵀΦ S + (σ²/σ_f²) I and r = y − c·1::

    −log p(y) = ½ [ (rᵀr − rᵀΦS B⁻¹ SΦᵀr) / σ² + N log σ² + M log(σ_f²/σ²) + log|B| + N log 2π ]

and the weight posterior is N(B⁻¹ S Φᵀ r, σ² B⁻¹) (:func:`weight_posterior`).

Two ways of choosing the prior and noise variances live here, one model:

* :func:`neg_log_marginal_likelihood` — −log p(y)/N with its gradient in closed form, for an optimiser over
  (s, σ_f², σ², c) (:class:`~tnbayes.HilbertGP`, whose s depends on the lengthscales);
* :func:`bayesian_ridge` — an isotropic prior (S = I, c = 0) with σ_f² and σ² by MacKay's fixed point in the
  eigenbasis of ZᵀZ, as scikit-learn's ``BayesianRidge`` (RFFNet's Bayesian last layer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch

__all__ = [
    "BayesianRidgePosterior",
    "WeightSpaceStatistics",
    "accumulate_statistics",
    "bayesian_ridge",
    "condition_weight_posterior",
    "latent_moments",
    "neg_log_marginal_likelihood",
    "weight_covariance",
    "weight_posterior",
]


@dataclass
class WeightSpaceStatistics:
    """The sufficient statistics of the weight-space model: everything the evidence and the posterior need.

    Attributes
    ----------
    gram, rhs, ones : torch.Tensor of shapes (M, M), (M,) and (M,)
        ΦᵀΦ, Φᵀy and Φᵀ1.
    sum_y, yy : torch.Tensor, scalars
        1ᵀy and yᵀy.
    n : int
        N, the rows of Φ.
    """

    gram: torch.Tensor
    rhs: torch.Tensor
    ones: torch.Tensor
    sum_y: torch.Tensor
    yy: torch.Tensor
    n: int

    @property
    def num_features(self) -> int:
        """M, the columns of Φ."""
        return int(self.gram.shape[0])


def accumulate_statistics(features: Callable[[torch.Tensor], torch.Tensor], X: torch.Tensor, y: torch.Tensor,
                          chunk_size: int) -> WeightSpaceStatistics:
    """ΦᵀΦ, Φᵀy, Φᵀ1, 1ᵀy, yᵀy and N, accumulated over row chunks (memory O(chunk_size · M + M²)).

    Parameters
    ----------
    features : callable
        Maps a chunk of rows of ``X``, shape (n, D), to its features Φ, shape (n, M).
    X : torch.Tensor of shape (N, D)
    y : torch.Tensor of shape (N,)
    chunk_size : int
        Rows per call of ``features``.

    Returns
    -------
    WeightSpaceStatistics
        In the dtype of ``features``' output.
    """
    gram = rhs = ones = None
    for start in range(0, X.shape[0], int(chunk_size)):
        Xc, yc = X[start:start + int(chunk_size)], y[start:start + int(chunk_size)]
        Phi = features(Xc)
        if gram is None:
            gram, rhs, ones = Phi.T @ Phi, Phi.T @ yc, Phi.sum(0)
        else:
            gram += Phi.T @ Phi
            rhs += Phi.T @ yc
            ones += Phi.sum(0)
    return WeightSpaceStatistics(gram=gram, rhs=rhs, ones=ones, sum_y=y.sum(), yy=y @ y, n=int(X.shape[0]))


def _solve_posterior_system(s: torch.Tensor, outputscale: torch.Tensor, noise: torch.Tensor, const: torch.Tensor,
                            stats: WeightSpaceStatistics) -> tuple[torch.Tensor, ...]:
    """L (the Cholesky factor of B), g = Φᵀr, α = B⁻¹ S g and rᵀr."""
    B = s[:, None] * stats.gram * s[None, :]
    B.diagonal().add_(noise / outputscale)
    chol = torch.linalg.cholesky(B)
    g = stats.rhs - const * stats.ones  # Φᵀ r
    alpha = torch.cholesky_solve((s * g).unsqueeze(-1), chol).squeeze(-1)
    rr = stats.yy - 2 * const * stats.sum_y + const**2 * stats.n
    return chol, g, alpha, rr


class _NegLogMarginalLikelihood(torch.autograd.Function):
    """−log p(y)/N of the weight-space model from the sufficient statistics, with a closed-form gradient.

    Autograd through the Cholesky factor costs several O(M³) passes per step; the closed form needs the factor
    and K = B⁻¹ only. With G = ΦᵀΦ, g = Φᵀr, α = K S g, λ = σ²/σ_f² and q = gᵀ S K S g::

        ∂ log|B| / ∂s = 2 (G ∘ K) s,   ∂q/∂s = 2 α ∘ (g − G S α),   ∂(log|B| − q/σ²)/∂λ = tr K + αᵀα/σ².

    Inputs: s (M,), σ_f², σ², c (scalars) and the :class:`WeightSpaceStatistics`.
    """

    @staticmethod
    def forward(ctx: Any, s: torch.Tensor, outputscale: torch.Tensor, noise: torch.Tensor, const: torch.Tensor,
                stats: WeightSpaceStatistics) -> torch.Tensor:
        n, m = stats.n, s.shape[0]
        chol, g, alpha, rr = _solve_posterior_system(s, outputscale, noise, const, stats)
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
        n, m, gram = stats.n, s.shape[0], stats.gram
        K = torch.cholesky_inverse(chol)
        d_lambda = torch.trace(K) + (alpha @ alpha) / noise
        scale = grad * 0.5 / n
        d_s = scale * (2 * ((gram * K) @ s) - 2 * alpha * (g - gram @ (s * alpha)) / noise)
        d_outputscale = scale * (m / outputscale - d_lambda * noise / outputscale**2)
        d_noise = scale * (-(rr - q) / noise**2 + (n - m) / noise + d_lambda / outputscale)
        d_const = scale * 2 * (const * n - stats.sum_y + alpha @ (s * stats.ones)) / noise
        return d_s, d_outputscale, d_noise, d_const, None


def neg_log_marginal_likelihood(s: torch.Tensor, outputscale: torch.Tensor, noise: torch.Tensor,
                                const: torch.Tensor, stats: WeightSpaceStatistics) -> torch.Tensor:
    """−log p(y)/N of the weight-space model (module docstring), differentiable in s, σ_f², σ² and c.

    Parameters
    ----------
    s : torch.Tensor of shape (M,)
        Prior standard deviations of the features (the diagonal of S).
    outputscale, noise, const : torch.Tensor, scalar
        σ_f², σ² and the mean constant c.
    stats : WeightSpaceStatistics

    Returns
    -------
    torch.Tensor, scalar
        Its gradient is computed in closed form (one O(M³) inverse), not by autograd through the Cholesky factor.

    Raises
    ------
    torch.linalg.LinAlgError
        When B is not numerically positive definite.
    """
    return _NegLogMarginalLikelihood.apply(s, outputscale, noise, const, stats)


def weight_posterior(s: torch.Tensor, outputscale: torch.Tensor, noise: torch.Tensor, const: torch.Tensor,
                     stats: WeightSpaceStatistics) -> tuple[torch.Tensor, torch.Tensor]:
    """The Gaussian posterior of w, N(B⁻¹ S Φᵀ r, σ² B⁻¹).

    Parameters
    ----------
    s, outputscale, noise, const, stats
        As for :func:`neg_log_marginal_likelihood`.

    Returns
    -------
    mean : torch.Tensor of shape (M,)
        B⁻¹ S Φᵀ r.
    cholesky : torch.Tensor of shape (M, M)
        The lower Cholesky factor L of B = L Lᵀ; the covariance is σ² (L Lᵀ)⁻¹ (:func:`weight_covariance`).
    """
    chol, _, alpha, _ = _solve_posterior_system(s, outputscale, noise, const, stats)
    return alpha, chol


def weight_covariance(cholesky: torch.Tensor, noise: float) -> torch.Tensor:
    """σ² B⁻¹ from the Cholesky factor L of B → shape (M, M)."""
    return noise * torch.cholesky_inverse(cholesky)


def latent_moments(features: Iterable[torch.Tensor], mean: torch.Tensor, cholesky: torch.Tensor, noise: float,
                   full_covariance: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Moments of the latent ``zᵀw`` at test rows under the weight posterior.

    Parameters
    ----------
    features : iterable of torch.Tensor of shape (n_k, M)
        The weighted features Z = Φ S of the test rows, in chunks.
    mean, cholesky : torch.Tensor of shapes (M,) and (M, M)
        From :func:`weight_posterior`.
    noise : float
        σ².
    full_covariance : bool

    Returns
    -------
    mean : torch.Tensor of shape (n,)
        Z m (without the mean constant).
    variance : torch.Tensor of shape (n,) or (n, n)
        σ² ‖L⁻¹ zᵀ‖² per row, or the covariance σ² Z B⁻¹ Zᵀ.
    """
    means, roots = [], []
    for Z in features:
        means.append(Z @ mean)
        roots.append(torch.linalg.solve_triangular(cholesky, Z.T, upper=False))  # L⁻¹ zᵀ
    V = torch.cat(roots, dim=1)  # (M, n)
    if full_covariance:
        return torch.cat(means), noise * (V.T @ V)
    return torch.cat(means), noise * (V * V).sum(0)


def condition_weight_posterior(mean: torch.Tensor, cholesky: torch.Tensor,
                               rows: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight posterior after more rows, with every hyper-parameter kept.

    New rows add ZᵀZ to B (a rank-k update) and Zᵀr to the right-hand side B m of the rows seen so far.

    Parameters
    ----------
    mean, cholesky : torch.Tensor of shapes (M,) and (M, M)
        From :func:`weight_posterior`.
    rows : iterable of (torch.Tensor of shape (k, M), torch.Tensor of shape (k,))
        Chunks of the new rows' weighted features Z and residuals r = y − c.

    Returns
    -------
    mean, cholesky : torch.Tensor of shapes (M,) and (M, M)
    """
    precision = cholesky @ cholesky.T  # B
    rhs = precision @ mean  # SΦᵀr of the rows seen so far
    for Z, residual in rows:
        precision = precision + Z.T @ Z
        rhs = rhs + Z.T @ residual
    updated = torch.linalg.cholesky(precision)
    return torch.cholesky_solve(rhs.unsqueeze(-1), updated).squeeze(-1), updated


@dataclass
class BayesianRidgePosterior:
    """Gaussian posterior over weights with an isotropic prior, in the eigenbasis of ZᵀZ.

    Attributes
    ----------
    mean : torch.Tensor of shape (s,)
    eigenvectors : torch.Tensor of shape (s, s)
        V of ZᵀZ = V diag(e) Vᵀ.
    covariance_eigenvalues : torch.Tensor of shape (s,)
        1 / (α + e/σ²): the posterior covariance is V diag(·) Vᵀ.
    prior_variance : float
        σ_w² = 1/α.
    noise_variance : float
        σ².
    log_marginal_likelihood : float
    iterations : int
    residual_sum_of_squares : float
        ‖y − Z·mean‖² (from the sufficient statistics, floored at its round-off).
    """

    mean: torch.Tensor
    eigenvectors: torch.Tensor
    covariance_eigenvalues: torch.Tensor
    prior_variance: float
    noise_variance: float
    log_marginal_likelihood: float
    iterations: int
    residual_sum_of_squares: float


#: multiple of eps·(yᵀy + 2|mᵀZᵀy| + mᵀZᵀZm) below which ‖y − Zm‖² from the sufficient statistics is round-off
RSS_ROUNDOFF = 64.0


def _residual_sum_of_squares(yy: float, q: torch.Tensor, e: torch.Tensor, mean: torch.Tensor) -> float:
    """‖y − Zm‖² = yᵀy − 2 mᵀZᵀy + mᵀZᵀZm from the sufficient statistics, floored at its round-off.

    The three terms nearly cancel when Z fits y almost exactly (noiseless targets); below RSS_ROUNDOFF · eps times
    their size the difference is not resolved (an unfloored value there can be 0 or negative, and MacKay's
    σ² = rss/(n − γ) then sends the noise precision to infinity).

    Parameters
    ----------
    yy : float
        yᵀy.
    q, e, mean : torch.Tensor of shape (s,)
        VᵀZᵀy, the eigenvalues of ZᵀZ = V diag(e) Vᵀ, and the weight mean in that eigenbasis.

    Returns
    -------
    float
    """
    cross, fitted = float(mean @ q), float((e * mean * mean).sum())
    floor = RSS_ROUNDOFF * torch.finfo(q.dtype).eps * (abs(yy) + 2.0 * abs(cross) + fitted)
    return max(yy - 2.0 * cross + fitted, floor, 1e-300)


def bayesian_ridge(gram: torch.Tensor, projection: torch.Tensor, yy: float, n: int, *,
                   max_iter: int = 500, tol: float = 1e-10) -> BayesianRidgePosterior:
    """Bayesian linear regression y = Zβ + ε, β ~ N(0, I/α), ε ~ N(0, σ²) with α and σ² by evidence maximisation.

    MacKay's fixed point (as scikit-learn's ``BayesianRidge``), in the eigenbasis of ZᵀZ so each iteration
    costs O(s): γ = Σ e_i/(σ²α + e_i), α = γ/‖m‖², σ² = ‖y − Zm‖²/(n − γ).

    Parameters
    ----------
    gram : torch.Tensor of shape (s, s)
        ZᵀZ (:attr:`WeightSpaceStatistics.gram`).
    projection : torch.Tensor of shape (s,)
        Zᵀy (:attr:`WeightSpaceStatistics.rhs`).
    yy : float
        yᵀy.
    n : int
        The rows of Z.
    max_iter : int
        At most this many fixed-point iterations.
    tol : float
        Relative change of α and σ² below which the iteration stops.

    Returns
    -------
    BayesianRidgePosterior
    """
    eigenvalues, eigenvectors = torch.linalg.eigh(gram)
    s = eigenvalues.shape[0]
    # directions of ZᵀZ below its round-off carry no data (Zv = 0, so vᵀZᵀy = 0 but for round-off): zeroed, or when
    # Z fits y exactly the fixed point sends α → 0 while the mean grows along them as (vᵀZᵀy)/e
    resolved = eigenvalues > s * torch.finfo(eigenvalues.dtype).eps * eigenvalues.abs().max()
    e = torch.where(resolved, eigenvalues, 0.0)
    q = torch.where(resolved, eigenvectors.T @ projection, 0.0)
    noise_precision = n / max(yy, 1e-300)  # 1/var(y) for centred y
    prior_precision = 1.0
    iterations = 0
    for iterations in range(1, int(max_iter) + 1):
        shrunk = noise_precision * e + prior_precision
        mean = noise_precision * q / shrunk
        gamma = float((noise_precision * e / shrunk).sum())
        rss = _residual_sum_of_squares(yy, q, e, mean)
        new_prior = gamma / max(float(mean @ mean), 1e-300)
        new_noise = max(n - gamma, 1e-12) / rss
        change = max(abs(new_prior - prior_precision) / prior_precision,
                     abs(new_noise - noise_precision) / noise_precision)
        prior_precision, noise_precision = new_prior, new_noise
        if change < tol:
            break
    shrunk = noise_precision * e + prior_precision
    mean = noise_precision * q / shrunk
    rss = _residual_sum_of_squares(yy, q, e, mean)
    log_evidence = 0.5 * (s * math.log(prior_precision) + n * math.log(noise_precision)
                          - noise_precision * rss - prior_precision * float(mean @ mean)
                          - float(torch.log(shrunk).sum()) - n * math.log(2 * math.pi))
    return BayesianRidgePosterior(eigenvectors @ mean, eigenvectors, 1.0 / shrunk, 1.0 / prior_precision,
                                  1.0 / noise_precision, log_evidence, iterations, rss)
