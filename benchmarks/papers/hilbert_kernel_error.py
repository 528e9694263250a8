"""Accuracy of the Hilbert-space (HSGP) and VFF kernel approximations against exact GPyTorch kernels.

For 1-D inputs on [-1, 1] (half-range S = 1, so the box half-width is L = c), tabulates the maximum
absolute error of the approximate kernel matrix (201 equispaced points, unit variance)

- Hilbert basis: SE, Matérn-3/2, Matérn-5/2; lengthscale ℓ ∈ {0.2, 0.5}; M ∈ {8, 16, 32, 64, 128};
  boundary factor c ∈ {1.2, 1.5, 2, 3, 4}; the (M, c) chosen by the Riutort-Mayol et al. (2022) rule is
  reported under each table;
- VFF: Matérn-1/2, 3/2, 5/2; ℓ ∈ {0.2, 0.5}; [a, b] = [-c, c] for c ∈ {1.5, 2, 3};
  num_frequencies ∈ {8, 16, 32, 64, 128, 256}.

Usage::

    python -m benchmarks hilbert_kernel_error [--output PATH]   # default: results/hilbert_kernel_error/hilbert_kernel_error.md
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import gpytorch
import torch

from benchmarks._common import output_path
from tnbayes.basis import HilbertBasis, VFFBasis, choose_hilbert_parameters

DT = torch.float64
N_POINTS = 201
HILBERT_M = (8, 16, 32, 64, 128)
HILBERT_C = (1.2, 1.5, 2.0, 3.0, 4.0)
HILBERT_KERNELS = (("se", None, "SE"), ("matern", 1.5, "Matérn-3/2"), ("matern", 2.5, "Matérn-5/2"))
VFF_M = (8, 16, 32, 64, 128, 256)
VFF_C = (1.5, 2.0, 3.0)
VFF_NU = (0.5, 1.5, 2.5)
LENGTHSCALES = (0.2, 0.5)


def exact_kernel_matrix(x: torch.Tensor, lengthscale: float, family: str, nu: float | None) -> torch.Tensor:
    """Exact unit-variance GPyTorch kernel matrix, shape (N, N) (lengthscale set as a float64 tensor)."""
    kernel = gpytorch.kernels.RBFKernel() if family == "se" else gpytorch.kernels.MaternKernel(nu=nu)
    kernel = kernel.to(DT)
    kernel.lengthscale = torch.tensor(lengthscale, dtype=DT)
    with torch.no_grad():
        return kernel(x, x).to_dense()


def hilbert_error(x: torch.Tensor, K_exact: torch.Tensor, lengthscale: float, family: str, nu, M: int, c: float) -> float:
    """Max |K_hilbert - K_exact| for the box L = c (data half-range 1)."""
    K = HilbertBasis(num_basis=M, L=c).kernel_matrix(x, None, lengthscale, family, nu)
    return float((K - K_exact).abs().max())


def vff_error(x: torch.Tensor, K_exact: torch.Tensor, lengthscale: float, nu: float, M: int, c: float) -> float:
    """Max |Q_vff - K_exact| on [-1, 1] with the interval [a, b] = [-c, c]."""
    Z = VFFBasis(num_frequencies=M, a=-c, b=c).features(x, lengthscale, nu)[0]
    return float((Z @ Z.T - K_exact).abs().max())


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=None,
                        help="Markdown file to write (default: hilbert_kernel_error/hilbert_kernel_error.md in the results folder)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    x = torch.linspace(-1, 1, N_POINTS, dtype=DT)[:, None]
    out: list[str] = [
        "# Kernel-approximation error: Hilbert-space basis and VFF",
        "",
        f"Produced by: `python -m {' '.join(['benchmarks hilbert_kernel_error', *(argv if argv is not None else sys.argv[1:])])}`",
        "",
        f"Max absolute error of the unit-variance kernel matrix on {N_POINTS} equispaced points in [-1, 1] "
        "(data half-range S = 1) against the exact GPyTorch kernel, float64. "
        f"torch {torch.__version__}, gpytorch {gpytorch.__version__}, Python {platform.python_version()}.",
        "",
        "## Hilbert-space basis (Solin & Särkkä 2020)",
        "",
        "Box [-L, L] with L = c·S = c; M basis functions. Rows: M, columns: boundary factor c.",
        "",
    ]
    for family, nu, label in HILBERT_KERNELS:
        rule_name = "se" if family == "se" else {1.5: "matern32", 2.5: "matern52"}[nu]
        for ell in LENGTHSCALES:
            K_exact = exact_kernel_matrix(x, ell, family, nu)
            rows = []
            for M in HILBERT_M:
                rows.append([str(M)] + [f"{hilbert_error(x, K_exact, ell, family, nu, M, c):.1e}" for c in HILBERT_C])
            rule = choose_hilbert_parameters(half_range=1.0, lengthscale_min=ell, kernel=rule_name)
            rule_err = hilbert_error(x, K_exact, ell, family, nu, rule.num_basis, float(rule.c[0]))
            out += [
                f"### {label}, ℓ = {ell}",
                "",
                markdown_table(["M \\ c"] + [f"{c:g}" for c in HILBERT_C], rows),
                "",
                f"Rule of thumb (Riutort-Mayol et al. 2022) for ℓ = {ell}: M = {rule.num_basis}, "
                f"c = {float(rule.c[0]):.3g} → max error {rule_err:.1e}.",
                "",
            ]
    out += [
        "## Variational Fourier features (Hensman, Durrande & Solin 2017)",
        "",
        "Q(x, x') = k_u(x)ᵀ K_uu⁻¹ k_u(x') with 2M + 1 features (M = num_frequencies) on [a, b] = [-c, c]; "
        "error measured on the data range [-1, 1]. Rows: num_frequencies, columns: c. "
        "The error stops decreasing at a floor set by the interval ends: the Fourier features span only "
        "the periodic part of the Matérn RKHS, so Q is accurate only a few lengthscales away from a and b "
        "(Q(a, a) ≈ ½) — widen [a, b] to lower the floor.",
        "",
    ]
    for nu in VFF_NU:
        for ell in LENGTHSCALES:
            K_exact = exact_kernel_matrix(x, ell, "matern", nu)
            rows = [[str(M)] + [f"{vff_error(x, K_exact, ell, nu, M, c):.1e}" for c in VFF_C] for M in VFF_M]
            out += [
                f"### VFF Matérn-{ {0.5: '1/2', 1.5: '3/2', 2.5: '5/2'}[nu] }, ℓ = {ell}",
                "",
                markdown_table(["M \\ c"] + [f"{c:g}" for c in VFF_C], rows),
                "",
            ]
    out.append(f"Total run time: {time.perf_counter() - start:.1f} s.")
    path = Path(args.output) if args.output else output_path("hilbert_kernel_error", ".md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    main()
