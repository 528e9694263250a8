"""Tests of tnbayes.kernels: GPyTorch integration, low-rank operators, agreement with exact kernels."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from linear_operator.operators import (
    LowRankRootAddedDiagLinearOperator,
    LowRankRootLinearOperator,
    MatmulLinearOperator,
)

from tnbayes.basis import ApproximationWarning
from tnbayes.kernels import FeatureKernel, HilbertKernel, VFFKernel, available_kernels, get_kernel, register_kernel
from tnbayes.kernels.base import LOW_RANK_PREDICTION_STRATEGY

DT = torch.float64


class GPModel(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, kernel):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = kernel

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def dense(kernel, x1, x2=None):
    with torch.no_grad():
        return kernel(x1, x2 if x2 is not None else x1).to_dense()


def se_dense(x1, x2, lengthscale):
    """Direct dense SE formula (a second, GPyTorch-independent reference)."""
    ell = torch.as_tensor(lengthscale, dtype=DT).reshape(-1)
    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)) / ell
    return torch.exp(-0.5 * (diff**2).sum(-1))


def t(value):
    """Hyper-parameter values as float64 tensors: GPyTorch's setters turn a Python float into a float32
    tensor first, perturbing it by ~1e-9 relative — visible in 1e-8 comparisons."""
    return torch.as_tensor(value, dtype=DT)


@pytest.fixture
def data_1d():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(120, 1, generator=g, dtype=DT) * 2 - 1
    y = torch.sin(4 * x[:, 0]) + 0.1 * torch.randn(120, generator=g, dtype=DT)
    return x, y


# ----------------------------------------------------------------------------- accuracy vs exact kernels
def test_hilbert_kernel_matches_rbf_acceptance():
    x = torch.linspace(-1, 1, 200, dtype=DT)[:, None]
    k = HilbertKernel(base="rbf", num_basis=64, L=2.0).to(DT)
    k.lengthscale = t(0.2)
    assert float((dense(k, x) - se_dense(x, x, 0.2)).abs().max()) < 1e-8
    x2 = torch.linspace(-0.7, 0.9, 37, dtype=DT)[:, None]
    assert float((dense(k, x, x2) - se_dense(x, x2, 0.2)).abs().max()) < 1e-8
    exact = RBFKernel().to(DT)
    exact.lengthscale = t(0.2)
    assert float((dense(k, x) - dense(exact, x)).abs().max()) < 1e-8
    with torch.no_grad():
        torch.testing.assert_close(k(x, diag=True), dense(k, x).diagonal())


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
def test_hilbert_kernel_matern_error_decreases(nu):
    x = torch.linspace(-1, 1, 80, dtype=DT)[:, None]
    exact = MaternKernel(nu=nu).to(DT)
    exact.lengthscale = t(0.3)
    K_exact = dense(exact, x)
    errors = []
    for M in (16, 32, 64, 128):
        k = HilbertKernel(base="matern", nu=nu, num_basis=M, L=2.0).to(DT)
        k.lengthscale = t(0.3)
        errors.append(float((dense(k, x) - K_exact).abs().max()))
    assert all(b < a for a, b in zip(errors, errors[1:])), errors


def test_hilbert_kernel_2d_product_and_additive():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(50, 2, generator=g, dtype=DT) * 2 - 1
    ell = torch.tensor([[0.3, 0.45]], dtype=DT)
    prod = HilbertKernel(num_basis=48, L=[2.0, 3.0], ard_num_dims=2).to(DT)
    prod.lengthscale = ell
    assert float((dense(prod, x) - se_dense(x, x, ell)).abs().max()) < 1e-8
    with torch.no_grad():
        assert prod(x).evaluate_kernel().root.shape == (50, 48**2)

    add = HilbertKernel(num_basis=48, L=[2.0, 3.0], ard_num_dims=2, structure="additive").to(DT)
    add.lengthscale = ell
    # documented scaling: the mean of the unit-variance 1-D kernels
    expected = (se_dense(x[:, :1], x[:, :1], 0.3) + se_dense(x[:, 1:], x[:, 1:], 0.45)) / 2
    assert float((dense(add, x) - expected).abs().max()) < 1e-8
    k0, k1 = RBFKernel(active_dims=[0]).to(DT), RBFKernel(active_dims=[1]).to(DT)
    k0.lengthscale, k1.lengthscale = t(0.3), t(0.45)
    assert float((dense(add, x) - (dense(k0, x) + dense(k1, x)) / 2).abs().max()) < 1e-8
    with torch.no_grad():
        assert add(x).evaluate_kernel().root.shape == (50, 96)


def test_product_structure_refuses_too_many_columns():
    with pytest.raises(ValueError, match="structure='additive'"):
        HilbertKernel(num_basis=20, L=2.0, ard_num_dims=5)
    k = HilbertKernel(num_basis=20, L=2.0)  # D unknown until called
    with pytest.raises(ValueError, match="20\\^5"):
        with torch.no_grad():
            k(torch.zeros(3, 5)).to_dense()
    HilbertKernel(num_basis=20, L=2.0, ard_num_dims=5, structure="additive")
    HilbertKernel(num_basis=20, L=2.0, ard_num_dims=3, max_product_features=10_000)  # 8000 columns allowed
    with pytest.raises(ValueError, match="max_product_features=100"):
        HilbertKernel(num_basis=20, L=2.0, ard_num_dims=2, max_product_features=100)


def test_hilbert_kernel_outside_box_raises():
    k = HilbertKernel(num_basis=16, L=1.5, center=0.5).to(DT)
    with pytest.raises(ValueError, match=r"column 0.*\[-1, 2\]"):
        with torch.no_grad():
            k(torch.tensor([[2.2], [0.0]], dtype=DT)).to_dense()


def test_hilbert_kernel_box_from_c_and_state_dict():
    x = torch.linspace(-3, 1, 30, dtype=DT)[:, None]
    k = HilbertKernel(num_basis=32, c=2.0, center=-1.0).to(DT)
    assert k.L.numel() == 0
    dense(k, x)
    torch.testing.assert_close(k.L, torch.tensor([4.0], dtype=DT))  # c · max|x - center| = 2 · 2
    k2 = HilbertKernel(num_basis=32, c=2.0, center=-1.0).to(DT)
    k2.load_state_dict(k.state_dict())
    torch.testing.assert_close(k2.L, k.L)
    k3 = HilbertKernel(num_basis=32, c=1.5, half_range=[1.0, 2.0])
    torch.testing.assert_close(k3.L, torch.tensor([1.5, 3.0], dtype=k3.L.dtype))
    with pytest.raises(ValueError, match="exactly one of L"):
        HilbertKernel(num_basis=8)
    with pytest.raises(ValueError, match="exactly one of L"):
        HilbertKernel(num_basis=8, L=1.0, c=1.5)
    assert "matern52" in repr(HilbertKernel(base="matern", num_basis=8, L=1.0))


def test_hilbert_kernel_check_approximation_warns():
    k = HilbertKernel(num_basis=16, L=2.0).to(DT)
    k.lengthscale = t(0.5)
    assert k.check_approximation()
    k.lengthscale = t(0.05)
    with pytest.warns(ApproximationWarning):
        assert not k.check_approximation()


def test_scale_kernel_batch_and_float32():
    x = torch.linspace(-1, 1, 40, dtype=DT)[:, None]
    base = HilbertKernel(num_basis=32, L=2.0).to(DT)
    base.lengthscale = t(0.4)
    scaled = ScaleKernel(HilbertKernel(num_basis=32, L=2.0)).to(DT)
    scaled.base_kernel.lengthscale = t(0.4)
    scaled.outputscale = t(2.5)
    torch.testing.assert_close(dense(scaled, x), 2.5 * dense(base, x))
    # batch of two lengthscales
    kb = HilbertKernel(num_basis=32, L=2.0, batch_shape=torch.Size([2])).to(DT)
    kb.lengthscale = torch.tensor([0.3, 0.6], dtype=DT).view(2, 1, 1)
    Kb = dense(kb, x.expand(2, 40, 1))
    assert Kb.shape == (2, 40, 40)
    base.lengthscale = t(0.6)
    torch.testing.assert_close(Kb[1], dense(base, x))
    # float32 inputs and parameters
    k32 = HilbertKernel(num_basis=32, L=2.0)
    K32 = dense(k32, x.float())
    assert K32.dtype == torch.float32 and torch.isfinite(K32).all()


def test_gradients_wrt_inputs_flow():
    k = ScaleKernel(HilbertKernel(num_basis=16, L=2.0, ard_num_dims=2)).to(DT)
    x_train = torch.rand(10, 2, dtype=DT)
    x = torch.rand(3, 2, dtype=DT, requires_grad=True)
    k(x, x_train).to_dense().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- ExactGP integration
def _model(kernel, x, y, noise=0.05, lengthscale=0.3, outputscale=1.3):
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(DT)
    model = GPModel(x, y, likelihood, ScaleKernel(kernel)).to(DT)
    model.covar_module.base_kernel.lengthscale = t(lengthscale)
    model.covar_module.outputscale = t(outputscale)
    likelihood.noise = t(noise)
    return model, likelihood


def test_exact_gp_uses_low_rank_operators_and_gradients_flow(data_1d):
    x, y = data_1d
    model, likelihood = _model(HilbertKernel(num_basis=64, L=2.0), x, y)
    model.train()
    prior = model(x)
    assert isinstance(prior.lazy_covariance_matrix.evaluate_kernel(), LowRankRootLinearOperator)
    assert isinstance(likelihood(prior).lazy_covariance_matrix.evaluate_kernel(), LowRankRootAddedDiagLinearOperator)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    loss = -mll(model(x), y)
    loss.backward()
    grad_h = model.covar_module.base_kernel.raw_lengthscale.grad.clone()
    assert torch.isfinite(grad_h).all() and grad_h.abs().sum() > 0
    assert model.covar_module.raw_outputscale.grad is not None

    exact, lik_e = _model(RBFKernel(), x, y)
    exact.train()
    loss_e = -gpytorch.mlls.ExactMarginalLogLikelihood(lik_e, exact)(exact(x), y)
    loss_e.backward()
    assert loss.item() == pytest.approx(loss_e.item(), abs=1e-7)
    torch.testing.assert_close(grad_h, exact.covar_module.base_kernel.raw_lengthscale.grad, atol=1e-6, rtol=1e-6)


def test_exact_gp_predictions_match_exact_rbf(data_1d):
    x, y = data_1d
    x_test = torch.linspace(-1, 1, 57, dtype=DT)[:, None]
    preds = {}
    for name, kernel in (("hilbert", HilbertKernel(num_basis=64, L=2.0)), ("exact", RBFKernel())):
        model, likelihood = _model(kernel, x, y)
        model.eval()
        with torch.no_grad(), gpytorch.settings.max_cholesky_size(10_000):
            post = likelihood(model(x_test))
            preds[name] = (post.mean, post.variance)
        if name == "hilbert":
            assert isinstance(model.prediction_strategy, LOW_RANK_PREDICTION_STRATEGY)
    torch.testing.assert_close(preds["hilbert"][0], preds["exact"][0], atol=1e-6, rtol=0)
    torch.testing.assert_close(preds["hilbert"][1], preds["exact"][1], atol=1e-6, rtol=0)


def test_exact_gp_can_train_hyperparameters(data_1d):
    x, y = data_1d
    model, likelihood = _model(HilbertKernel(base="matern", nu=2.5, num_basis=48, L=2.0), x, y, lengthscale=1.0)
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    losses = []
    for _ in range(12):
        opt.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1


# ----------------------------------------------------------------------------- VFF kernel
@pytest.mark.parametrize("nu,final_tol", [(0.5, 2e-2), (1.5, 1e-4), (2.5, 1e-5)])
def test_vff_kernel_converges_to_matern(nu, final_tol):
    x = torch.linspace(-1, 1, 81, dtype=DT)[:, None]
    exact = MaternKernel(nu=nu).to(DT)
    exact.lengthscale = t(0.2)
    K_exact = dense(exact, x)
    errors = {}
    for M in (8, 32, 128):
        k = VFFKernel(nu=nu, num_frequencies=M, a=-2.0, b=2.0).to(DT)
        k.lengthscale = t(0.2)
        errors[M] = float((dense(k, x) - K_exact).abs().max())
    print(f"VFFKernel Matérn-{nu}: max |Q - K| by num_frequencies:", {m: f"{e:.1e}" for m, e in errors.items()})
    assert errors[8] > errors[32] > errors[128] and errors[128] < final_tol, errors


def test_vff_kernel_operators_structures_and_gp(data_1d):
    x, y = data_1d
    k = VFFKernel(nu=1.5, num_frequencies=20, a=-2.0, b=2.0).to(DT)
    with torch.no_grad():
        assert isinstance(k(x).evaluate_kernel(), LowRankRootLinearOperator)  # 41 columns < 120 rows
        assert isinstance(k(x, x[:5] * 0.5).evaluate_kernel(), MatmulLinearOperator)
    model, likelihood = _model(VFFKernel(nu=1.5, num_frequencies=20, a=-2.0, b=2.0), x, y)
    model.train()
    assert isinstance(likelihood(model(x)).lazy_covariance_matrix.evaluate_kernel(), LowRankRootAddedDiagLinearOperator)
    (-gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)(model(x), y)).backward()
    assert torch.isfinite(model.covar_module.base_kernel.raw_lengthscale.grad).all()
    model.eval()
    with torch.no_grad():
        assert torch.isfinite(likelihood(model(torch.zeros(3, 1, dtype=DT))).mean).all()

    x2 = torch.rand(30, 2, dtype=DT) * 2 - 1
    add = VFFKernel(nu=2.5, num_frequencies=64, a=-3.0, b=3.0, ard_num_dims=2, structure="additive").to(DT)
    add.lengthscale = torch.tensor([[0.3, 0.5]], dtype=DT)
    m0, m1 = MaternKernel(nu=2.5, active_dims=[0]).to(DT), MaternKernel(nu=2.5, active_dims=[1]).to(DT)
    m0.lengthscale, m1.lengthscale = t(0.3), t(0.5)
    assert float((dense(add, x2) - (dense(m0, x2) + dense(m1, x2)) / 2).abs().max()) < 1e-3
    with pytest.raises(ValueError, match="column 0"):
        with torch.no_grad():
            k(torch.tensor([[2.5]], dtype=DT)).to_dense()
    with pytest.raises(ValueError, match="nu"):
        VFFKernel(nu=3.5)


# ----------------------------------------------------------------------------- registry
def test_registry():
    assert {"hilbert", "vff", "rbf", "matern", "rff"} <= set(available_kernels())
    k = get_kernel("Hilbert", num_basis=8, L=1.0)
    assert isinstance(k, HilbertKernel) and isinstance(k, FeatureKernel)
    assert isinstance(get_kernel("vff", nu=0.5, num_frequencies=4), VFFKernel)
    assert isinstance(get_kernel("rbf"), RBFKernel)
    with pytest.raises(ValueError, match="Registered kernels"):
        get_kernel("nope")
    from tnbayes.kernels import registry

    try:
        register_kernel("my_rbf", RBFKernel)
        assert isinstance(get_kernel("my_rbf"), RBFKernel)
        with pytest.raises(ValueError, match="already registered"):
            register_kernel("my_rbf", MaternKernel)
        register_kernel("my_rbf", MaternKernel, overwrite=True)
        assert isinstance(get_kernel("my_rbf"), MaternKernel)
    finally:
        registry._REGISTRY.pop("my_rbf", None)


# ----------------------------------------------------------------------------- BoTorch
def test_botorch_single_task_gp():
    pytest.importorskip("botorch")
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP

    g = torch.Generator().manual_seed(3)
    X = torch.rand(30, 2, generator=g, dtype=DT)
    Y = torch.sin(6 * X[:, :1]) + X[:, 1:] ** 2
    covar = ScaleKernel(HilbertKernel(base="matern", nu=2.5, num_basis=10, center=0.5, L=0.75, ard_num_dims=2))
    model = SingleTaskGP(X, Y, covar_module=covar)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": 40}})
    post = model.posterior(torch.rand(5, 2, generator=g, dtype=DT))
    assert post.mean.shape == (5, 1) and torch.isfinite(post.variance).all() and (post.variance > 0).all()
    assert isinstance(model.prediction_strategy, LOW_RANK_PREDICTION_STRATEGY)
