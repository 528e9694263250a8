# %% [markdown]
# # Quick start: HilbertGP next to an exact GP
#
# This tutorial fits an exact Gaussian process (`tnbayes.ExactGP`: GPyTorch, float64, Cholesky) and
# its Hilbert-space approximation (`tnbayes.HilbertGP`) to three classic 1-D data sets: motorcycle
# crash accelerations (`mcycle`), LIDAR log ratios (`lidar`) and the Mauna Loa CO2 series (`co2`).
# You learn the estimator contract (`fit` → `posterior` → `tnbayes.metrics.evaluate`), how to draw
# predictive bands, and what to expect from both models in accuracy and fit time, including where a
# plain squared-exponential (SE) kernel is the wrong model.
#
# Run it as a script or open it as a notebook (Jupytext percent format). Real data are read from
# `$TNBAYES_DATA_DIR`; figures go to `$TNBAYES_TUTORIAL_OUT` (default `docs/tutorials/figures`).

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
import warnings

import torch

from tnbayes.metrics import evaluate
from tnbayes.plotting import plot_predictive_band

# %% [markdown]
# ## Data
#
# `mcycle` and `lidar` have no published splits: `load(name, split=k)` draws a random 90/10 split with
# seed `k`. Values are returned raw (float64, no normalisation); every tnbayes model standardises
# inputs and targets internally and returns predictions in the units of `y`.

# %%
mcycle = tnbayes.datasets.load("mcycle", split=0)
lidar = tnbayes.datasets.load("lidar", split=0)
print(mcycle)
print(lidar)

# %% [markdown]
# ## Fitting and timing
#
# Both models choose their hyper-parameters (lengthscale, output scale, noise variance, constant
# mean) by maximising the marginal likelihood (ML-II). `ExactGP` pays O(N³) per likelihood
# evaluation and runs 3 optimiser starts by default. `HilbertGP` projects the data once onto M
# Laplace eigenfunctions of a box around the inputs (`num_basis_` functions, box half-width `c_` times
# the data half-range, both chosen from the data) and then each likelihood evaluation costs O(M³),
# whatever N is.
#
# The first fit in a Python process pays one-off costs (lazy imports, thread pools), so we fit both
# models once on a few points before timing anything.

# %%
def timed_fit(model, data):
    """Fit ``model`` on the training part of ``data``; return the model and the wall time in seconds."""
    start = time.perf_counter()
    model.fit(data.X_train, data.y_train)
    return model, time.perf_counter() - start


for warm in (tnbayes.ExactGP(num_restarts=0, max_iter=5), tnbayes.HilbertGP(max_iter=5)):
    warm.fit(mcycle.X_train[:30], mcycle.y_train[:30])

rows = []  # one entry per (data set, model) for the table at the end
fits = {}
for data in (mcycle, lidar):
    for name, model in (("ExactGP", tnbayes.ExactGP()), ("HilbertGP", tnbayes.HilbertGP())):
        model, seconds = timed_fit(model, data)
        fits[data.name, name] = model
        rows.append({"data": data.name, "model": name, "n_train": data.n_train, "fit_s": seconds,
                     **evaluate(model.posterior(data.X_test), data.y_test)})

for data in (mcycle, lidar):
    exact, hilbert = fits[data.name, "ExactGP"], fits[data.name, "HilbertGP"]
    print(f"{data.name}: ExactGP   lengthscale {exact.lengthscale_.item():.4f} (standardised x), "
          f"noise std {exact.noise_std:.4g}")
    print(f"{data.name}: HilbertGP lengthscale {hilbert.lengthscale_.item():.4f} (standardised x), "
          f"noise std {hilbert.noise_std:.4g}, M = {hilbert.num_basis_}, c = {hilbert.c_[0]:.2f}")

# %% [markdown]
# ## The posterior object
#
# `model.posterior(X)` returns a `tnbayes.GaussianPosterior` in the units of `y`. By default it is the
# predictive distribution of a new *observation* (the noise variance is included); pass
# `observation_noise=False` for the latent function. `rsample` draws from it (independently per
# point here; `full_covariance=True` in `posterior` gives joint draws).

# %%
post = fits["mcycle", "HilbertGP"].posterior(mcycle.X_test[:3])
lower, upper = post.interval(0.95)
print("mean   ", post.mean.numpy().round(2))
print("stddev ", post.stddev.numpy().round(2))
print("95% interval", np.c_[lower.numpy(), upper.numpy()].round(2).tolist())
draws = post.rsample((3,), generator=torch.Generator().manual_seed(0))  # (3 draws, 3 points)
print("3 draws", draws.numpy().round(2).tolist())

# %% [markdown]
# ## Predictive bands: mcycle and lidar
#
# Each row shows the two models side by side (68% and 95% central intervals of a new observation,
# training points in black, test points as red crosses). The right panel shows how far the Hilbert
# approximation is from the exact GP: the difference of the predictive means and of the predictive
# standard deviations, in units of `y`, against the exact GP's standard deviation for scale.
#
# What to look at: the two bands are indistinguishable; the differences are orders of magnitude
# below the predictive spread. Both models assume one noise level everywhere, while both data sets
# are heteroscedastic: on `mcycle` the band is far too wide for t < 14 ms, where the readings are
# nearly noise-free, and about right in the turbulent middle; on `lidar` the noise grows with the
# range. That is a property of the model (homoscedastic Gaussian likelihood), not of the
# approximation.

# %%
LABELS = {"mcycle": ("time after impact (ms)", "acceleration (g)"),
          "lidar": ("range (m)", "log ratio")}

fig, axes = plt.subplots(2, 3, figsize=(15, 8), gridspec_kw={"width_ratios": [1, 1, 0.8]})
for row, data in zip(axes, (mcycle, lidar)):
    xlabel, ylabel = LABELS[data.name]
    grid = np.linspace(data.X_train.min(), data.X_train.max(), 400).reshape(-1, 1)
    posts = {}
    for ax, (name, color) in zip(row[:2], (("ExactGP", "C0"), ("HilbertGP", "C1"))):
        posts[name] = fits[data.name, name].posterior(grid)
        plot_predictive_band(grid, posts[name], x_train=data.X_train, y_train=data.y_train,
                             x_test=data.X_test, y_test=data.y_test, levels=(0.68, 0.95),
                             label=f"{name} mean", color=color, ax=ax)
        ax.set_title(f"{data.name}: {name}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    row[1].sharey(row[0])
    diff_mean = (posts["HilbertGP"].mean - posts["ExactGP"].mean).numpy()
    diff_std = (posts["HilbertGP"].stddev - posts["ExactGP"].stddev).numpy()
    ax = row[2]
    ax.plot(grid, np.abs(diff_mean), color="C2", label="|mean difference|")
    ax.plot(grid, np.abs(diff_std), color="C4", label="|stddev difference|")
    ax.plot(grid, posts["ExactGP"].stddev.numpy(), color="0.4", ls="--", label="ExactGP stddev")
    ax.set_yscale("log")
    ax.set_title(f"{data.name}: HilbertGP − ExactGP")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{ylabel} (absolute)")
    ax.legend(fontsize="small", loc="lower right")
fig.tight_layout()
fig.savefig(OUT / "01_quickstart_bands.png", dpi=100)
plt.close(fig)
print("wrote", OUT / "01_quickstart_bands.png")

# %% [markdown]
# ## Mauna Loa CO2: where the SE kernel is the wrong model
#
# The CO2 series (weekly, 1958–2001) is a smooth rising trend plus a yearly cycle of about ±3 ppm. A
# GP that captures both needs a sum of a long-lengthscale trend kernel and a periodic kernel;
# `HilbertGP` and `ExactGP` here both use one SE kernel, so ML-II has to choose: follow the trend and
# call the seasonal cycle noise, or follow the wiggles with a short lengthscale. Both models get
# the same random subsample of the training rows (300 with `TNBAYES_TUTORIAL_SMALL=1`, 800
# otherwise), and `HilbertGP` once more on all training rows, which costs it almost nothing extra.
#
# Two settings differ from the defaults, on purpose:
#
# * On CO2 the SE marginal likelihood has more than one local optimum in the lengthscale.
#   `ExactGP` restarts its optimiser twice by default (`num_restarts=2`); `HilbertGP` does not
#   (`num_restarts=0`) and from its starting value ends in a local optimum on the 800-point
#   subsample. We give it the same two restarts.
# * The trend lengthscale is more than twice the data half-range, so the box of the Hilbert basis
#   has to grow to c ≈ 7–17 times the half-range before the boundary stops distorting the kernel.
#   `HilbertGP` enlarges (M, c) and refits until the fitted lengthscale satisfies the accuracy rule,
#   but by default for at most 3 rounds (`max_adapt_rounds=3`), which is not enough here (it then
#   warns with an `ApproximationWarning`). We allow 6 rounds; `history_` shows the rounds.

# %%
n_sub = 300 if SMALL else 800
co2_sub = tnbayes.datasets.load("co2", split=0, n_train=n_sub)
co2_all = tnbayes.datasets.load("co2", split=0)
print(co2_sub)
print(co2_all)

co2_models = [
    ("ExactGP", co2_sub, tnbayes.ExactGP()),
    ("HilbertGP", co2_sub, tnbayes.HilbertGP(num_restarts=2, max_adapt_rounds=6)),
    ("HilbertGP, all rows", co2_all, tnbayes.HilbertGP(num_restarts=2, max_adapt_rounds=6)),
]
co2_fits = []
for name, data, model in co2_models:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, seconds = timed_fit(model, data)
    for w in caught:
        print(f"{name}: {type(w.message).__name__}: {w.message}")
    co2_fits.append((name, data, model))
    rows.append({"data": "co2", "model": name, "n_train": data.n_train, "fit_s": seconds,
                 **evaluate(model.posterior(data.X_test), data.y_test)})
    print(f"{name:20s} lengthscale {model.lengthscale_.item():.3f} (standardised x), "
          f"noise std {model.noise_std:.2f} ppm, fit {seconds:.2f} s")

for name, _, model in co2_fits[1:]:
    print(f"{name}: (M, c) rounds")
    for entry in model.history_:
        print(f"   M = {entry['num_basis']:3d}  c = {entry['c'][0]:6.2f}  lengthscale = {entry['lengthscale'][0]:.3f}"
              f"  -log p(y)/N = {entry['neg_mll']:.4f}")

# %% [markdown]
# In the figure, the top row shows the whole series, the bottom row 1990–1995. What to look at:
#
# * On the subsample, both models pick the same long lengthscale (about 4.5 standardised units; the
#   standardised x unit is about 12.7 years): the mean is the smooth trend, and the seasonal cycle is
#   left to the noise, whose standard deviation (about 2.1 ppm) is that of a ±3 ppm sine wave. The
#   95% band therefore covers the data well, but the mean misses every seasonal peak and trough.
# * With all ~2000 training rows the marginal likelihood prefers a shorter lengthscale (about 0.5, or
#   roughly 7 years). The trend bends more, the RMSE drops a little, but the yearly cycle is still
#   noise. With an SE kernel, more data does not buy the structure; a periodic component would.

# %%
fig, axes = plt.subplots(2, 3, figsize=(15, 7.5), sharey="row")
colors = ("C0", "C1", "C2")
full_grid = np.linspace(co2_all.X_train.min(), co2_all.X_train.max(), 600).reshape(-1, 1)
zoom_grid = np.linspace(1990.0, 1995.0, 400).reshape(-1, 1)
for col, ((name, data, model), color) in enumerate(zip(co2_fits, colors)):
    # top: the whole series with the test points only (the training rows would hide the band);
    # bottom: five years with training and test points
    ax = axes[0, col]
    plot_predictive_band(full_grid, model.posterior(full_grid), x_test=data.X_test, y_test=data.y_test,
                         levels=(0.68, 0.95), label=f"{name} mean", color=color, ax=ax)
    ax.set_title(f"{name} (n_train = {data.n_train})")
    ax.legend(fontsize="small", loc="upper left")
    ax = axes[1, col]
    lo, hi = zoom_grid.min(), zoom_grid.max()
    tr = (data.X_train[:, 0] >= lo) & (data.X_train[:, 0] <= hi)
    te = (data.X_test[:, 0] >= lo) & (data.X_test[:, 0] <= hi)
    plot_predictive_band(zoom_grid, model.posterior(zoom_grid), x_train=data.X_train[tr], y_train=data.y_train[tr],
                         x_test=data.X_test[te], y_test=data.y_test[te], levels=(0.68, 0.95), color=color, ax=ax)
    ax.get_legend().remove()
    ax.set_title(f"{name}: 1990–1995 (train: black, test: red)")
    for ax in axes[:, col]:
        ax.set_xlabel("year")
axes[0, 0].set_ylabel("CO2 (ppm)")
axes[1, 0].set_ylabel("CO2 (ppm)")
fig.tight_layout()
fig.savefig(OUT / "01_quickstart_co2.png", dpi=100)
plt.close(fig)
print("wrote", OUT / "01_quickstart_co2.png")

# %% [markdown]
# ## Metrics
#
# `tnbayes.metrics.evaluate(posterior, y_test)` returns RMSE, MAE, the negative log predictive
# density (NLPD, lower is better), the continuous ranked probability score (CRPS, in units of `y`,
# lower is better), the fraction of test points inside the central 95% interval (`coverage_95`,
# ideally 0.95) and the mean width of that interval. The `mcycle` and `lidar` test sets have 13 and
# 22 points, so their coverage moves in steps of 8% and 5%: compare the two models with each other,
# not with the nominal 95%. Fit times are wall-clock seconds on this machine (one thread when
# `OMP_NUM_THREADS=1`).

# %%
header = f"{'data':7s} {'model':20s} {'n_train':>7s} {'fit_s':>6s} {'rmse':>8s} {'nlpd':>7s} {'crps':>7s} {'cov95':>6s} {'width95':>8s}"
print(header)
print("-" * len(header))
for r in rows:
    print(f"{r['data']:7s} {r['model']:20s} {r['n_train']:7d} {r['fit_s']:6.2f} {r['rmse']:8.4g} {r['nlpd']:7.3f} "
          f"{r['crps']:7.4g} {r['coverage_95']:6.3f} {r['interval_width_95']:8.4g}")

# %% [markdown]
# What to read from the table: on `mcycle` and `lidar` the two models agree to about three digits in
# every metric, and `HilbertGP` fits more than ten times faster. On the CO2 subsample they agree as
# well. Their fit times there say something different: `ExactGP`'s time grows as N³ (compare the
# two sizes of this tutorial, or try `n_train=2000`), while `HilbertGP`'s is set by the number of
# likelihood evaluations (restarts × (M, c) rounds), not by N. The data enter only through ΦᵀΦ, so
# the fit on all 2003 rows, which needed a single round, is the cheapest of the three.
#
# Next: `02_choosing_m_and_l.py` shows how M and c control the approximation error, and
# `03_tkrr_calibration.py` moves to 8-dimensional inputs with a tensor-network model.
