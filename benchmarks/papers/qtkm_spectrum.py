"""QTKM learns the dominant spectral peaks first: recovered Fourier coefficients per rank against least squares.

The QTKM paper shows this on sound recordings, which are not available here. Two 1-D signals instead:

* ``multitone``: 2048 equally spaced samples on [−0.5, 0.5) of
  ``Σ_j a_j cos(2π f_j x + φ_j)`` with (f, a) = (20, 1.0), (45, 0.6), (83, 0.35), (130, 0.2), noise std 0.1;
* ``co2``: Mauna Loa weekly CO2 (``datasets.load("co2")``, all 2225 rows), a quadratic trend removed and
  the residual standardised — a yearly cycle with harmonics.

Model: ``QTKM(rank=R, num_basis=512, period=P, penalty=1e-8)`` for R = 1, 2, 4, 8 (9 length-2 cores,
18R parameters) and the unconstrained least-squares/ridge solution with the same features and λ
(512 complex coefficients, ``(ΦᴴΦ + Nλ I)⁻¹Φᴴy``). P = 1 (unit period, as the paper's sound experiment:
on the equally spaced grid the features are then nearly orthogonal; a longer period leaves part of it
without data and the least-squares coefficients blow up at high frequencies). Reported: the magnitudes |w_k| per frequency (figure), and the
relative distance of each rank's coefficients and fitted values to the least-squares ones.

    python -m benchmarks qtkm_spectrum
    python -m benchmarks qtkm_spectrum --quick      # ranks 1, 2 only
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from benchmarks._common import header, output_path
from tnbayes import QTKM, datasets
from tnbayes.basis import fourier_features, fourier_frequencies

NUM_BASIS = 512
RANKS = (1, 2, 4, 8)
PENALTY = 1e-8


def _signals() -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
    rng = np.random.default_rng(0)
    x = np.arange(2048) / 2048 - 0.5
    tones = ((20, 1.0, 0.3), (45, 0.6, 1.1), (83, 0.35, 2.0), (130, 0.2, 0.7))
    y = sum(a * np.cos(2 * np.pi * f * x + p) for f, a, p in tones) + 0.1 * rng.standard_normal(x.size)
    co2 = datasets.load("co2", split=0, test_fraction=0.5)
    t = np.concatenate([co2.X_train[:, 0], co2.X_test[:, 0]])
    c = np.concatenate([co2.y_train, co2.y_test])
    order = np.argsort(t)
    t, c = t[order], c[order]
    residual = c - np.polyval(np.polyfit(t, c, 2), t)
    residual = (residual - residual.mean()) / residual.std()
    return {"multitone": (x[:, None], y, 1.0), "co2": (t[:, None], residual, 1.0)}


def _dominant(weights: torch.Tensor, frequencies: np.ndarray, count: int = 4) -> list[int]:
    """The first ``count`` distinct |k| in order of decreasing |w_k|."""
    found: list[int] = []
    for index in np.argsort(-np.abs(weights.numpy())):
        k = int(abs(frequencies[index]))
        if k not in found:
            found.append(k)
        if len(found) == count:
            break
    return found


def _least_squares(model: QTKM, X: np.ndarray, y: np.ndarray) -> torch.Tensor:
    xs = model.x_scaler_.transform(torch.as_tensor(X))[:, 0]
    phi = fourier_features(xs, NUM_BASIS, model.period_) / NUM_BASIS**0.5  # the model's normalised features
    gram = phi.mH @ phi + len(y) * PENALTY * torch.eye(NUM_BASIS, dtype=phi.dtype)
    return torch.linalg.solve(gram, phi.mH @ torch.as_tensor(y).to(phi.dtype)), phi


def main(argv: list[str]) -> int:
    """Run the experiment; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks qtkm_spectrum")
    parser.add_argument("--quick", action="store_true", help="ranks 1 and 2, 10 sweeps (the suite's small run)")
    args = parser.parse_args(argv)
    ranks, sweeps = ((1, 2), 10) if args.quick else (RANKS, 30)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    signals = _signals()
    lines = ["| signal | rank | parameters | ‖w_R − w_LS‖ / ‖w_LS‖ | ‖f_R − f_LS‖ / ‖f_LS‖ | "
             "largest |w_k| at |k| (QTKM) | (least squares) |", "|---|---|---|---|---|---|---|"]
    fig, axes = plt.subplots(len(signals), len(ranks), figsize=(3.6 * len(ranks), 3.0 * len(signals)), squeeze=False)
    frequencies = fourier_frequencies(NUM_BASIS).numpy()
    for row, (name, (X, y, period)) in enumerate(signals.items()):
        w_ls = None
        for col, rank in enumerate(ranks):
            model = QTKM(rank=rank, num_basis=NUM_BASIS, period=period, penalty=PENALTY, max_sweeps=sweeps,
                         normalize_y=False, uncertainty="none").fit(X, y)
            if w_ls is None:
                w_ls, phi = _least_squares(model, X, y)
                f_ls = (phi @ w_ls).real
                top_ls = _dominant(w_ls, frequencies)
            w = model.weight_tensor()
            f = (phi @ w).real
            top = _dominant(w, frequencies)
            lines.append(f"| {name} | {rank} | {model.num_parameters} | "
                         f"{float(torch.linalg.norm(w - w_ls) / torch.linalg.norm(w_ls)):.3f} | "
                         f"{float(torch.linalg.norm(f - f_ls) / torch.linalg.norm(f_ls)):.3f} | "
                         f"{top} | {top_ls} |")
            print(lines[-1], flush=True)
            ax = axes[row][col]
            ax.plot(frequencies, np.abs(w_ls.numpy()), color="0.6", lw=1, label="least squares")
            ax.plot(frequencies, np.abs(w.numpy()), color="C3", lw=1, label=f"QTKM R = {rank}")
            ax.set_xlim(-200, 200) if name == "multitone" else ax.set_xlim(-120, 120)
            ax.set_title(f"{name}, R = {rank} ({model.num_parameters} parameters)", fontsize=9)
            ax.set_xlabel("frequency index k")
            if col == 0:
                ax.set_ylabel("|w_k|")
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(output_path("qtkm_spectrum", ".png"), dpi=110)
    plt.close(fig)
    protocol = "see the module docstring of benchmarks/papers/qtkm_spectrum.py; frequency index k ↔ k/P cycles per scaled unit"
    text = header("QTKM: recovered Fourier coefficients per rank", protocol) + "\n".join(lines) + \
        "\n\nFigure: qtkm_spectrum.png (|w_k| per frequency index, QTKM rank R against least squares)\n"
    output_path("qtkm_spectrum", ".md").write_text(text)
    print(text)
    return 0

