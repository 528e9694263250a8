# %% [markdown]
# # RFFNet: which inputs matter, and how calibrated its intervals are
#
# `tnbayes.RFFNet` learns one relevance λ_j per input (an inverse length-scale of an ARD Gaussian kernel,
# approximated by random Fourier features) together with the output weights, then puts a Bayesian last layer
# on the learned features. On the SE1 benchmark only 5 of 18 inputs matter. This tutorial fits RFFNet at two
# training sizes, checks whether the relevances single out the right inputs, and tests the calibration of
# the predictive intervals on held-out data.

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

from scipy.stats import norm

from tnbayes.datasets.synthetic import make_se1
from tnbayes.plotting import plot_calibration

# %% [markdown]
# ## SE1
#
# `make_se1` draws X ~ N(0, I₁₈) and `y = sin((x1 + x3)²) · sin(x7 · x8 · x9) + 0.1 ε`: inputs x1, x3, x7, x8,
# x9 are relevant, the other 13 are noise. The target is hard to learn (fast oscillations wherever
# |x1 + x3| or |x7 x8 x9| is large): the RFFNet paper reaches a test MSE of 0.071 with 50 000 training
# rows, against a variance of y of about 0.08. We draw one training set and a test set of 2000 rows, and fit
# on the first `n` training rows for a small and a large n.

# %%
SIZES = (500, 2000) if SMALL else (2000, 20000)
RELEVANT = [0, 2, 6, 7, 8]  # x1, x3, x7, x8, x9 (0-based columns)
data = make_se1(n_train=max(SIZES), n_val=0, n_test=2000, seed=0)
p = data.X_train.shape[1]
print(f"p = {p}, test rows {data.y_test.size}, var(y_test) = {data.y_test.var():.4f}, noise variance 0.01")

# %% [markdown]
# ## Fit
#
# The package defaults follow the paper: ⌊√n ln n⌋ random features, relevances initialised at 0, block
# proximal Adam with mini-batches of 32, early stopping on 10% of the training rows (patience 20). After
# training, the output weights get a Gaussian prior and the noise a variance, both by maximising the marginal
# likelihood on all training rows; `posterior(X)` is then the Gaussian predictive of that Bayesian last
# layer.

# %%
fits = {}
for n in SIZES:
    start = time.perf_counter()
    model = tnbayes.RFFNet(seed=0).fit(data.X_train[:n], data.y_train[:n])
    seconds = time.perf_counter() - start
    post = model.posterior(data.X_test)
    report = tnbayes.metrics.evaluate(post, data.y_test, levels=(0.5, 0.9, 0.95, 0.99))
    top5 = sorted(int(j) for j in np.argsort(-model.scaled_relevances_)[:5])
    fits[n] = (model, post, report)
    print(f"n = {n}: {model.num_features_} features, {model.epochs_} epochs (best {model.best_epoch_}), {seconds:.1f} s")
    print(f"  test MSE: network {np.mean((model.predict_network(data.X_test) - data.y_test) ** 2):.4f}, "
          f"Bayes last layer {report['rmse'] ** 2:.4f}; NLPD {report['nlpd']:.3f}")
    print(f"  noise std {model.noise_std:.3f} (training residual), test RMSE {report['rmse']:.3f}")
    print("  coverage of central intervals: " +
          ", ".join(f"{lv}% → {report[f'coverage_{lv}']:.3f}" for lv in ("50", "90", "95", "99")))
    print(f"  top-5 inputs (1-based): {[j + 1 for j in top5]}; truly relevant: {[j + 1 for j in RELEVANT]}")
    print(f"  |λ|: {np.round(np.abs(model.relevances_.numpy()), 3)}")

# %% [markdown]
# ## Relevances
#
# `scaled_relevances_` is |λ| min–max scaled to [0, 1] (the paper's feature importance; `relevances_` holds
# the raw λ and `plot_relevances()` draws a quick stem plot). The shaded columns are the five relevant
# inputs.

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [2.2, 1]})
ax = axes[0]
width = 0.8 / len(SIZES)
for i, n in enumerate(SIZES):
    ax.bar(np.arange(1, p + 1) + (i - (len(SIZES) - 1) / 2) * width, fits[n][0].scaled_relevances_, width=width,
           color=f"C{i}", label=f"n = {n}")
for j in RELEVANT:
    ax.axvspan(j + 0.55, j + 1.45, color="0.88", zorder=0)
ax.set_xlim(0.4, p + 0.6)
ax.set_xticks(np.arange(1, p + 1))
ax.set_xlabel("input j (shaded: x1, x3, x7, x8, x9, the relevant ones)")
ax.set_ylabel("|λ_j| scaled to [0, 1]")
ax.set_title("SE1: learned relevances", fontsize=10)
ax.legend(fontsize=8)
ax = axes[1]
for i, n in enumerate(SIZES):
    model = fits[n][0]
    ax.plot(model.validation_losses_, color=f"C{i}", label=f"n = {n}")
    ax.plot(model.best_epoch_, model.validation_losses_[model.best_epoch_], "o", color=f"C{i}")
ax.axhline(1.0, color="0.5", ls="--", lw=1, label="predicting the mean")
ax.set_xlabel("epoch")
ax.set_ylabel("validation MSE (standardised y)")
ax.set_title("early stopping (dot: the restored epoch)", fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUT / "06_rffnet_relevances_relevances.png", dpi=100)
plt.close(fig)

# %% [markdown]
# With the larger n the five largest relevances are the five relevant inputs, led by x7, x8, x9 (the
# product term), with x1 and x3 clearly above every irrelevant input. With the smaller n the product inputs
# already stand out, but x1 and x3 are hard to tell apart from the irrelevant inputs, which all keep some
# relevance: the relevances are only as good as the fit, and the fit of SE1 needs many rows. The validation
# curves (right) show how little of y's variance either fit explains (a validation MSE of 1 is predicting
# the mean) and that early stopping keeps an early epoch: more epochs overfit.

# %% [markdown]
# ## Calibration of the Bayesian last layer
#
# `tnbayes.metrics.calibration_curve` gives, for each nominal level, the fraction of test targets inside the
# central predictive interval; `tnbayes.plotting.plot_calibration` draws it (below the diagonal:
# intervals too narrow). Next to it, the standardised test residuals `z = (y − μ)/σ`, which should look like
# N(0, 1) for a calibrated Gaussian predictive.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
levels = np.r_[np.linspace(0.05, 0.95, 19), 0.99]
curves = {f"n = {n}": tnbayes.metrics.calibration_curve(data.y_test, fits[n][1], levels=levels) for n in SIZES}
plot_calibration(curves, title="SE1 test set: coverage of central intervals", ax=axes[0])
n = SIZES[-1]
post = fits[n][1]
z = (data.y_test - post.mean.numpy()) / post.stddev.numpy()
grid = np.linspace(-5, 5, 400)
axes[1].hist(z, bins=60, range=(-5, 5), density=True, color=f"C{len(SIZES) - 1}", alpha=0.6,
             label=f"test residuals, n = {n}")
axes[1].plot(grid, norm.pdf(grid), color="k", lw=1.2, label="N(0, 1)")
axes[1].set_xlabel("z = (y − predictive mean) / predictive std")
axes[1].set_ylabel("density")
axes[1].set_title(f"standardised residuals (std {z.std():.2f})", fontsize=10)
axes[1].legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUT / "06_rffnet_relevances_calibration.png", dpi=100)
plt.close(fig)
sd = post.stddev.numpy()
print(f"n = {n}: predictive std between {sd.min():.3f} and {sd.max():.3f} (noise std {fits[n][0].noise_std:.3f}); "
      f"share of test points with |z| < 0.5: {np.mean(np.abs(z) < 0.5):.2f} (N(0, 1): 0.38), "
      f"|z| > 2.5: {np.mean(np.abs(z) > 2.5):.3f} (N(0, 1): 0.012)")

# %% [markdown]
# The intervals are too wide at low levels and about right, or slightly too narrow, at high ones: at the
# larger n the central 50% interval holds about 63% of the test targets and the 95% interval about 92%. The
# histogram shows why. The residuals are sharply peaked with heavy tails, not Gaussian: where x7·x8·x9 is
# near zero the target is near zero and easy, elsewhere the fast oscillations of SE1 are not learned and
# leave large errors. The Bayesian last layer can only widen its intervals where the features are
# uncertain, and here its weight uncertainty is small next to the noise, so the predictive std is almost
# the same everywhere; one σ for all points is too wide for most of them and too narrow for the rest. Its
# σ, estimated on the rows the features were trained on, is also a little smaller than the test RMSE, which
# pulls the high-level coverage below nominal. On five UCI sets the same model's 95% intervals cover 93–95%
# of the test targets (`benchmarks/results/cpd_uci_calibration/cpd_uci_calibration_rffnet.md`); SE1, with its non-Gaussian
# residuals, is a hard case, and the calibration curve is the check that shows it.
