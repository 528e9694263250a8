"""tnbayes.basis.random_fourier: the random Fourier features with ARD relevances."""

import math

import torch

from tnbayes.basis.random_fourier import RFFNetModule, default_num_features, rff_features


def test_default_number_of_features_is_the_papers():
    assert default_num_features(50_000) == int(math.sqrt(50_000) * math.log(50_000)) == 2419
    assert default_num_features(10) == 16  # the floor for tiny n


def test_module_features_are_the_ard_random_fourier_map():
    generator = torch.Generator().manual_seed(0)
    module = RFFNetModule(3, 500, 1, initial_relevance=0.7, generator=generator, dtype=torch.float64)
    x = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        z = module.features(x)
    torch.testing.assert_close(z, rff_features(x, module.relevances, module.frequencies, module.phases))
    assert z.shape == (6, 500) and module.num_features == 500
    with torch.no_grad():
        torch.testing.assert_close(module(x), z @ module.output.weight.T)
    # z zᵀ approximates exp(−½ Σ_j λ_j² (x_j − x'_j)²) (Monte Carlo error ~ 1/√s)
    exact = torch.exp(-0.5 * (0.7 ** 2) * torch.cdist(x, x) ** 2)
    assert float((z @ z.T - exact).abs().max()) < 0.2
