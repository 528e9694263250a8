"""Laplace-type variances of CPD weights (tnbayes.inference.laplace) against dense per-core solves."""

import torch

import tnbayes
from tnbayes.basis import FourierPolynomialFeatures
from tnbayes.inference import CPDALS, conditional_core_variance, solve_spd, summed_core_variances
from tnbayes.tensors import design_matrix, random_cpd
from tests.cpd_problems import cpd_data as _data, discrete_data as _discrete_data, hilbert_features as _features


def test_complex_conditional_variance_matches_real_model():
    """Real features stored as complex give the same Laplace variance as the real model."""
    X, y = _data(100, 2)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    real = _features(2, 5)

    class AsComplex(tnbayes.basis.TensorProductFeatures):
        mode_sizes, num_components, is_complex = real.mode_sizes, 1, True

        def mode_features(self, X, mode):
            return real.mode_features(X, mode).to(torch.complex128)

    factors = random_cpd([5, 5], 2, generator=torch.Generator().manual_seed(0))
    a = CPDALS(real, Xt, yt, 2, 0.1, factors=factors, normalize_cores=False)
    b = CPDALS(AsComplex(), Xt, yt, 2, 0.1, factors=factors, normalize_cores=False)
    sa, sb = a.normal_equations(0), b.normal_equations(0)
    _, la, _ = solve_spd(sa.gram + 0.1 * sa.penalty, sa.rhs)
    _, lb, _ = solve_spd(sb.gram + 0.1 * sb.penalty, sb.rhs)
    va = conditional_core_variance(real, a.factors, 0, la, Xt[:20])
    vb = conditional_core_variance(AsComplex(), b.factors, 0, lb, Xt[:20])
    torch.testing.assert_close(va, vb.to(va.dtype))


def test_summed_core_variances_equal_per_core_design_solves():
    X, y = _discrete_data(300, 3, [5, 12, 400])
    feats = FourierPolynomialFeatures(3, 8, period=2.0, quantized=True)
    engine = CPDALS(feats, X, y, 3, 0.1, seed=0)
    engine.run(2, tol=0.0)
    modes, chols, expected = [0, 4, 8], [], torch.zeros(50, dtype=torch.float64)
    for mode in modes:
        system = engine.normal_equations(mode)
        _, chol, _ = solve_spd(system.gram + 0.1 * system.penalty, system.rhs)
        chols.append(chol)
        design = design_matrix(feats, engine.factors, X[:50], mode)
        expected += torch.linalg.solve_triangular(chol, design.mH, upper=False).abs().square().sum(0)
    got = summed_core_variances(feats, engine.factors, modes, chols, X[:50], chunk_size=17)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-14)
