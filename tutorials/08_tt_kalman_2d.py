# %% [markdown]
# # The primal TT Kalman filter in two dimensions
#
# `tnbayes.TTKalmanGP` is Bayesian regression over all M^D weights of a product Hilbert-space GP, with the
# posterior mean and a square root of the posterior covariance stored as tensor trains and updated by a
# Kalman filter over mini-batches of rows. On a 2-D function with a hole in the inputs you will compare its
# posterior mean and standard deviation with the dense `HilbertGP(structure="product")` on the same basis,
# see that the two agree when the ranks are not capped, and watch the TT ranks and the covariance trace as
# the batches are filtered.

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tnbayes

SMALL = os.environ.get("TNBAYES_TUTORIAL_SMALL") == "1"  # reduced sizes for CI
try:
    _here = Path(__file__).resolve().parent
except NameError:  # inside Jupyter
    _here = Path.cwd()
OUT = Path(os.environ.get("TNBAYES_TUTORIAL_OUT", _here.parent / "docs" / "tutorials" / "figures"))
OUT.mkdir(parents=True, exist_ok=True)

import time

import torch
from matplotlib.colors import LogNorm

STEM = "08_tt_kalman_2d"

# %% [markdown]
# ## Data with a gap
#
# `f(x) = sin(x₁) cos(x₂) + 0.2 x₂` plus noise of standard deviation 0.1, with inputs uniform on
# [−3, 3]² except for a disc of radius 1.5 around (1, 0.5) where there are no training points.

# %%
n = 500 if SMALL else 2000
GAP_CENTER, GAP_RADIUS = np.array([1.0, 0.5]), 1.5


def f(X):
    return np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.2 * X[:, 1]


rng = np.random.default_rng(0)
X = rng.uniform(-3, 3, size=(3 * n, 2))
X = X[np.hypot(*(X - GAP_CENTER).T) > GAP_RADIUS][:n]
y = f(X) + 0.1 * rng.standard_normal(n)
print(X.shape, y.shape)

# %% [markdown]
# ## The dense reference and the filter on the same basis
#
# `HilbertGP(structure="product")` builds all M² products of the per-input Laplace eigenfunctions, fits the
# hyper-parameters by marginal likelihood and solves for the Gaussian weight posterior in closed form. We fix
# M = 16 functions per input and a box of c = 2.5 times the data half-range, then hand its hyper-parameters
# and basis to `TTKalmanGP`, so both models describe the same Bayesian linear model over the same 256
# weights.
#
# `TTKalmanGP` filters the rows in random mini-batches of 8. After every batch it rounds the mean and the
# covariance correction C (the root is L = L₀ − C with L₀ the exact rank-1 prior root) to the relative
# tolerance `tol`, and to at most `max_rank` if given. We fit it three times: with no rank cap
# (`max_rank=None`: only the rounding to `tol=1e-8`, so the posterior is exact up to that round-off), with
# its default cap of 10, and with a cap of 4.

# %%
M = 16
start = time.perf_counter()
dense = tnbayes.HilbertGP(structure="product", num_basis=M, c=2.5).fit(X, y)
print(f"HilbertGP: {time.perf_counter() - start:.1f} s, lengthscale {dense.lengthscale_.numpy().round(3)}, "
      f"outputscale {dense.outputscale_:.3f}, noise variance {dense.noise_variance_:.4f} (standardised scale)")

same_model = dict(num_basis=M, c=dense.c_, lengthscale=dense.lengthscale_.tolist(), outputscale=dense.outputscale_,
                  noise_variance=dense.noise_variance_, mean_constant=dense.mean_constant_)
filters = {}
for label, max_rank in [("no rank cap", None), ("rank ≤ 10", 10), ("rank ≤ 4", 4)]:
    start = time.perf_counter()
    filters[label] = tnbayes.TTKalmanGP(max_rank=max_rank, tol=1e-8, **same_model).fit(X, y)
    model = filters[label]
    mean_rank, correction_rank = model.rank_history_[-1]
    print(f"TTKalmanGP ({label}): {time.perf_counter() - start:.1f} s ({1e3 * model.seconds_per_row_:.1f} ms per row), "
          f"final ranks: mean {mean_rank}, correction {correction_rank}")

# %% [markdown]
# ## Posterior mean and standard deviation on a grid
#
# The grid reaches one unit beyond the data on every side (the Hilbert box, ±7.5, is further out still).
# We compare latent quantities (`observation_noise=False`): the standard deviation of f, not of a new y.

# %%
n_grid = 50 if SMALL else 80
grid_1d = np.linspace(-4, 4, n_grid)
g1, g2 = np.meshgrid(grid_1d, grid_1d)
grid = np.column_stack([g1.ravel(), g2.ravel()])
in_data_box = (np.abs(grid) <= 3).all(axis=1)
posteriors = {"HilbertGP (dense)": dense.posterior(grid, observation_noise=False)}
posteriors.update({f"TTKalmanGP, {label}": m.posterior(grid, observation_noise=False) for label, m in filters.items()})
reference = posteriors["HilbertGP (dense)"]
print("largest difference to the dense posterior        mean (all / inside data)      std (all / inside data)")
for label, post in posteriors.items():
    if post is reference:
        continue
    d_mean = np.abs(post.mean.numpy() - reference.mean.numpy())
    d_std = np.abs(post.stddev.numpy() - reference.stddev.numpy())
    print(f"  {label:32s} {d_mean.max():10.2e} / {d_mean[in_data_box].max():9.2e}    "
          f"{d_std.max():10.2e} / {d_std[in_data_box].max():9.2e}")

# %% [markdown]
# Top row: posterior means; bottom row: posterior standard deviations, with the training inputs as dots and
# the gap as a circle (the dotted square is the range of the training inputs). In the dense model the
# standard deviation is small where the data are dense, rises in the gap and rises again outside [−3, 3]²,
# most steeply towards the corners, where two inputs extrapolate at once. The uncapped filter reproduces the
# dense posterior (the printed differences are 1e-6 or smaller). With rank ≤ 4 the mean still looks right
# inside the data, but the standard deviation does not: the capped filter is too confident in the gap and
# less certain than it should be among the data, because the cap discards part of the covariance
# correction. The default cap of 10 is closer (see the printed differences). When you choose `max_rank`,
# check the uncertainty, not only the mean.

# %%
mean_range = (min(p.mean.numpy().min() for p in posteriors.values()),
              max(p.mean.numpy().max() for p in posteriors.values()))
std_norm = LogNorm(vmin=min(p.stddev.numpy().min() for p in posteriors.values()),
                   vmax=max(p.stddev.numpy().max() for p in posteriors.values()))
shown = ["HilbertGP (dense)", "TTKalmanGP, no rank cap", "TTKalmanGP, rank ≤ 4"]
fig, axes = plt.subplots(2, 3, figsize=(12.5, 7.6), sharex=True, sharey=True, layout="constrained")
extent = (grid_1d[0], grid_1d[-1], grid_1d[0], grid_1d[-1])
for j, label in enumerate(shown):
    post = posteriors[label]
    top = axes[0, j].imshow(post.mean.numpy().reshape(n_grid, n_grid), origin="lower", extent=extent,
                            cmap="viridis", vmin=mean_range[0], vmax=mean_range[1])
    bottom = axes[1, j].imshow(post.stddev.numpy().reshape(n_grid, n_grid), origin="lower", extent=extent,
                               cmap="magma", norm=std_norm)
    axes[1, j].scatter(X[:, 0], X[:, 1], s=0.5, color="w", alpha=0.4)
    axes[0, j].set_title(label)
    for ax in axes[:, j]:
        ax.add_patch(plt.Circle(GAP_CENTER, GAP_RADIUS, fill=False, ls="--", color="w", lw=1))
        ax.add_patch(plt.Rectangle((-3, -3), 6, 6, fill=False, ls=":", color="w", lw=1))
    axes[1, j].set_xlabel("x₁")
axes[0, 0].set_ylabel("x₂")
axes[1, 0].set_ylabel("x₂")
fig.colorbar(top, ax=axes[0, :], label="posterior mean of f", shrink=0.9)
fig.colorbar(bottom, ax=axes[1, :], label="posterior std of f (log scale)", shrink=0.9)
fig.savefig(OUT / f"{STEM}_posterior.png", dpi=100)
plt.close(fig)
print("wrote", OUT / f"{STEM}_posterior.png")

# %% [markdown]
# ## Ranks and covariance trace over the batches
#
# `rank_history_` holds, after every batch, the largest TT rank of the mean and of the covariance correction
# C; `trace_history_` holds tr(P). For two inputs a TT-matrix over 16 × 16 modes has ranks of at most 256;
# the uncapped correction settles below 100 and the mean's rank is at most M = 16. The dotted line is tr(P)
# of the dense posterior, computed from `HilbertGP.weight_covariance()` (the covariance of w, with v = s ∘ w
# the weights the filter tracks). The trace falls fast over the first batches and slowly after; the three
# filters end within about 1% of the dense value. tr(P) sums the variance of all 256 weights, most of it
# in directions the data leave close to their prior, so it hardly registers the truncation that the
# standard deviation maps above show.

# %%
s = dense.feature_weights_
dense_trace = float((s**2 * torch.diagonal(dense.weight_covariance())).sum())
print(f"tr(P): dense {dense_trace:.4f}; " + ", ".join(f"{label} {m.trace_history_[-1]:.4f}"
                                                    for label, m in filters.items()))

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
styles = {"no rank cap": ("C0", 3.0), "rank ≤ 10": ("C1", 1.5), "rank ≤ 4": ("C2", 1.5)}
for label, model in filters.items():
    color, width = styles[label]
    batches = np.arange(1, len(model.rank_history_) + 1)
    ranks = np.asarray(model.rank_history_)
    axes[0].plot(batches, ranks[:, 1], color=color, lw=width, label=label)
    axes[0].plot(batches, ranks[:, 0], color=color, lw=width, ls="--")
    axes[1].plot(batches, model.trace_history_, color=color, lw=width, label=label)
axes[1].axhline(dense_trace, color="k", ls=":", lw=1, label="dense HilbertGP")
axes[0].plot([], [], color="0.4", label="covariance correction C")
axes[0].plot([], [], color="0.4", ls="--", label="mean")
axes[0].set_yscale("log")
axes[0].set_xlabel("batches of 8 rows")
axes[0].set_ylabel("largest TT rank")
axes[0].set_title("TT ranks after each batch")
axes[0].legend(fontsize=8, loc="center right")
axes[1].set_xlabel("batches of 8 rows")
axes[1].set_ylabel("tr(P)")
axes[1].set_title("trace of the weight covariance")
axes[1].legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUT / f"{STEM}_ranks.png", dpi=100)
plt.close(fig)
print("wrote", OUT / f"{STEM}_ranks.png")
