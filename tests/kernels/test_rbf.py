"""UnderflowSafeRBFKernel against GPyTorch's RBFKernel: the same kernel except where exp underflows."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch

import tnbayes
from tnbayes.kernels import UnderflowSafeRBFKernel, exp_flushing_underflow


def _inputs(dtype: torch.dtype, num_dims: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Points spread so that many pairs underflow (some into the subnormal band) and many do not."""
    reach = math.sqrt(-2 * math.log(torch.finfo(dtype).tiny) / num_dims)  # the distance per input where exp underflows
    generator = torch.Generator().manual_seed(0)
    x1 = (torch.rand(40, num_dims, generator=generator, dtype=torch.float64) * 2 - 1) * reach
    x2 = (torch.rand(300, num_dims, generator=generator, dtype=torch.float64) * 2 - 1) * reach
    return x1.to(dtype), x2.to(dtype)


def _pair(num_dims: int, ard: bool, dtype: torch.dtype) -> tuple[gpytorch.kernels.Kernel, gpytorch.kernels.Kernel]:
    ard_num_dims = num_dims if ard else None
    reference = gpytorch.kernels.RBFKernel(ard_num_dims=ard_num_dims).to(dtype)
    safe = UnderflowSafeRBFKernel(ard_num_dims=ard_num_dims).to(dtype)
    lengthscale = torch.linspace(0.7, 1.3, num_dims if ard else 1, dtype=dtype).reshape(1, -1)
    reference.lengthscale = lengthscale
    safe.lengthscale = lengthscale
    return reference, safe


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("num_dims", "ard"), [(1, False), (3, False), (3, True)])
def test_equal_to_gpytorch_except_below_the_smallest_normal(dtype, num_dims, ard):
    reference, safe = _pair(num_dims, ard, dtype)
    x1, x2 = _inputs(dtype, num_dims)
    tiny = torch.finfo(dtype).tiny
    with torch.no_grad():
        expected = reference(x1, x2).to_dense()
        got = safe(x1, x2).to_dense()
        expected_diag = reference(x1, x2[:40], diag=True)
        got_diag = safe(x1, x2[:40], diag=True)
    normal = expected >= tiny
    assert 0.05 < float(normal.double().mean()) < 0.95  # both kinds of entries are exercised
    assert bool(((expected > 0) & (expected < tiny)).any()) or dtype == torch.float32  # and subnormal ones (float64)
    assert torch.equal(got[normal], expected[normal])
    assert bool((got[~normal] == 0).all())
    normal_diag = expected_diag >= tiny
    assert torch.equal(got_diag[normal_diag], expected_diag[normal_diag])
    assert bool((got_diag[~normal_diag] == 0).all())


@pytest.mark.parametrize("ard", [False, True])
def test_lengthscale_gradient_matches_gpytorch(ard):
    num_dims = 2
    reference, safe = _pair(num_dims, ard, torch.float64)
    x1, x2 = _inputs(torch.float64, num_dims)
    weights = torch.rand(x1.shape[0], x2.shape[0], generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    gradients = []
    for kernel in (reference, safe):
        (kernel(x1, x2).to_dense() * weights).sum().backward()
        gradients.append(kernel.raw_lengthscale.grad.clone())
    torch.testing.assert_close(gradients[1], gradients[0], rtol=1e-12, atol=0.0)  # GPyTorch's own backward or autograd


def test_tnkf_builds_its_se_rows_with_the_underflow_safe_kernel():
    generator = torch.Generator().manual_seed(2)
    X = torch.rand(64, 1, generator=generator, dtype=torch.float64)
    model = tnbayes.TNKF(lengthscale=0.01, outputscale=1.0, gamma=10.0, measurement_noise=0.1, prior_variance=1.0,
                         max_rows=8).fit(X, torch.sin(6 * X[:, 0]))
    assert isinstance(model.kernel_module_.base_kernel, UnderflowSafeRBFKernel)
    Xs = model.x_scaler_.transform(X)
    rows = model.kernel_matrix(Xs, Xs)
    reference = gpytorch.kernels.RBFKernel().to(torch.float64)
    reference.lengthscale = model.kernel_module_.base_kernel.lengthscale
    with torch.no_grad():
        expected = reference(Xs, Xs).to_dense() * float(model.outputscale_)
    normal = expected >= torch.finfo(torch.float64).tiny
    assert bool((~normal).any())  # some pairs beyond the reach of exp
    assert torch.equal(rows[normal], expected[normal]) and bool((rows[~normal] == 0).all())


def test_exp_flushing_underflow_in_place_and_with_gradient():
    for dtype in (torch.float64, torch.float32):
        cut = math.log(torch.finfo(dtype).tiny)
        exponent = torch.tensor([0.0, -1.0, cut + 0.5, cut - 0.5, -1e4, -math.inf], dtype=dtype)
        expected = torch.where(exponent < cut, torch.zeros_like(exponent), exponent.exp())
        given = exponent.clone()
        result = exp_flushing_underflow(given)
        assert result.data_ptr() == given.data_ptr()  # in place without a gradient
        assert torch.equal(result, expected)
        leaf = exponent[:4].clone().requires_grad_(True)
        out = exp_flushing_underflow(leaf)
        out.sum().backward()
        assert torch.equal(out.detach(), expected[:4])
        assert torch.equal(leaf.grad, expected[:4])  # d exp = exp above the cut, 0 below it
        assert torch.equal(leaf.detach(), exponent[:4])  # a tensor that needs a gradient is not changed
