# %% [markdown]
# # Quick start: HilbertGP next to an exact GP
#
# Fit an exact GP (GPyTorch, float64, Cholesky) and a Hilbert-space GP to the motorcycle data,
# compare their predictive bands and calibration metrics. Runs in a few seconds.
#
# Environment: `TNBAYES_DATA_DIR` points at the data directory (`../shared/data` in this project);
# `TNBAYES_TUTORIAL_OUT` is where figures go (default `tutorials/figures`).

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tnbayes
from tnbayes.plotting import plot_predictive_band

out_dir = Path(os.environ.get("TNBAYES_TUTORIAL_OUT", Path(__file__).resolve().parent / "figures"))
out_dir.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## Data: a random 90/10 split of `mcycle` (seed = split index)

# %%
data = tnbayes.datasets.load("mcycle", split=0)
print(data)

# %% [markdown]
# ## Fit both models; predictions come back in the units of y (acceleration, g)

# %%
exact = tnbayes.ExactGP().fit(data.X_train, data.y_train)
hilbert = tnbayes.HilbertGP().fit(data.X_train, data.y_train)
print("ExactGP   lengthscale", exact.lengthscale_.numpy(), "noise std", exact.noise_std)
print("HilbertGP lengthscale", hilbert.lengthscale_.numpy(), "noise std", hilbert.noise_std,
      f"(M={hilbert.num_basis_}, c={hilbert.c_[0]:.2f})")
for name, model in [("ExactGP", exact), ("HilbertGP", hilbert)]:
    print(name, tnbayes.metrics.evaluate(model.posterior(data.X_test), data.y_test))

# %% [markdown]
# ## Predictive bands (68% and 95%)

# %%
grid = np.linspace(data.X_train.min(), data.X_train.max(), 400).reshape(-1, 1)
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, (name, model, color) in zip(axes, [("ExactGP", exact, "C0"), ("HilbertGP", hilbert, "C1")]):
    plot_predictive_band(grid, model.posterior(grid), x_train=data.X_train, y_train=data.y_train,
                         x_test=data.X_test, y_test=data.y_test, levels=(0.68, 0.95), label=name, color=color, ax=ax)
    ax.set_xlabel("time after impact (ms)")
    ax.set_title(name)
axes[0].set_ylabel("acceleration (g)")
fig.tight_layout()
fig.savefig(out_dir / "quickstart_mcycle_bands.png", dpi=110)
print("wrote", out_dir / "quickstart_mcycle_bands.png")
