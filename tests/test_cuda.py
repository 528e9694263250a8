"""Every estimator on ``device="cuda"``: the fit runs there, the posterior lives there, and it agrees with the same
fit on the CPU; model files move between devices; chunked fits, the BoTorch wrapper and the TT algebra on CUDA.

Skipped where no CUDA device is visible (CI has none); run on a GPU machine with ``pytest tests/test_cuda.py``.
The reference of every check is the same computation on the CPU in float64. ``TNBAYES_TEST_DEVICE=cpu`` runs the
module against the CPU itself (a check of the tests, not of CUDA).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.data import ChunkedData
from tests.test_bad_input import CLASSIFIERS, REGRESSORS, _data

DEVICE = os.environ.get("TNBAYES_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="needs a CUDA device")

#: regressors whose CUDA fit must equal the CPU fit up to floating-point reassociation (same seeds, same draws:
#: random draws of the fits come from CPU generators); the others draw on the device or choose discretely
#: (a rank, a basis size, a stopping step) and are compared by accuracy: SVGP (its Adam/natural-gradient steps
#: differ in the last bits on the GPU, and after hundreds of stochastic steps by ~1e-4 std(y))
SAME_NUMBERS = {"CPDKernelMachine", "HilbertGP", "QTKM", "TKM", "ExactGP", "TNKF", "TTKalmanGP", "FeatureLearningKM",
                "RFFNet"}
#: largest |mean_cuda − mean_cpu| / std(y) for SAME_NUMBERS (float64 on both; BLAS reassociation only)
SAME_NUMBERS_TOL = 1e-6
#: largest test-RMSE excess of the CUDA fit over the CPU fit, in std(y), for the others
ACCURACY_TOL = 0.05


def _fit(factory, X, y, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return factory().set_params(device=device).fit(X, y)


_DEVICE_FITS: dict[str, object] = {}


def _device_fit(name: str):
    """One fit per regressor on DEVICE and session, on ``_data(60)`` (the later tests only read it)."""
    if name not in _DEVICE_FITS:
        _DEVICE_FITS[name] = _fit(REGRESSORS[name], *_data(60), DEVICE)
    return _DEVICE_FITS[name]


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressor_fits_on_cuda_and_matches_cpu(name):
    X, y = _data(60)
    X_test = np.random.default_rng(1).uniform(-1, 1, (25, 2))
    y_test = np.cos(2 * X_test[:, 0])
    cpu, gpu = _fit(REGRESSORS[name], X, y, "cpu"), _device_fit(name)
    post = gpu.posterior(X_test)
    assert post.mean.device.type == DEVICE and post.variance.device.type == DEVICE
    assert torch.isfinite(post.mean).all() and (post.variance > 0).all()
    mean_gpu = post.mean.cpu().double().numpy()
    mean_cpu = cpu.posterior(X_test).mean.double().numpy()
    scale = float(np.std(y))
    gap = float(np.max(np.abs(mean_gpu - mean_cpu))) / scale
    rmse_gpu = float(np.sqrt(np.mean((mean_gpu - y_test) ** 2))) / scale
    rmse_cpu = float(np.sqrt(np.mean((mean_cpu - y_test) ** 2))) / scale
    print(f"CUDA-DIFF {name}: max |mean gap| / std(y) = {gap:.3e}, RMSE/std cpu {rmse_cpu:.4f} cuda {rmse_gpu:.4f}")
    if name in SAME_NUMBERS:
        assert gap <= SAME_NUMBERS_TOL, f"{name}: CUDA mean differs from the CPU mean by {gap:.2e} std(y)"
    else:
        assert rmse_gpu <= rmse_cpu + ACCURACY_TOL
    assert isinstance(gpu.predict(X_test), np.ndarray)


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifier_fits_on_cuda_and_matches_cpu(name):
    X, labels = _data(60, classify=True)
    X_test = np.random.default_rng(1).uniform(-1, 1, (40, 2))
    cpu, gpu = _fit(CLASSIFIERS[name], X, labels, "cpu"), _fit(CLASSIFIERS[name], X, labels, DEVICE)
    predicted_gpu, predicted_cpu = gpu.predict(X_test), cpu.predict(X_test)
    agreement = float(np.mean(predicted_gpu == predicted_cpu))
    print(f"CUDA-DIFF {name}: label agreement with the CPU fit {agreement:.3f}")
    assert set(predicted_gpu) <= {"high", "low"}
    assert agreement >= 0.95
    probabilities = gpu.predict_proba(X_test)
    assert np.allclose(probabilities.sum(axis=1), 1.0)


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_cuda_model_file_loads_on_either_device(name, tmp_path):
    X_test = np.random.default_rng(2).uniform(-1, 1, (11, 2))
    model = _device_fit(name)
    path = tmp_path / "model.tnb"
    model.save(path)
    same = tnbayes.load_model(path)
    a, b = model.posterior(X_test), same.posterior(X_test)
    assert b.mean.device.type == DEVICE
    assert torch.equal(a.mean, b.mean) and torch.equal(a.variance, b.variance)
    on_cpu = tnbayes.load_model(path, device="cpu")
    c = on_cpu.posterior(X_test)
    assert c.mean.device.type == "cpu"
    torch.testing.assert_close(c.mean, a.mean.cpu(), rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(c.variance, a.variance.cpu(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["CPDKernelMachine", "QTKM", "SVGP", "TTKalmanGP"])
def test_chunked_fit_on_cuda_matches_in_memory_fit(name):
    X, y = _data(90)
    X_test = np.random.default_rng(3).uniform(-1, 1, (13, 2))
    factory = REGRESSORS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunked_gpu = factory().set_params(device=DEVICE).fit(ChunkedData.from_arrays(X, y, 32))
        chunked_cpu = factory().set_params(device="cpu").fit(ChunkedData.from_arrays(X, y, 32))
    a, b = chunked_gpu.posterior(X_test), chunked_cpu.posterior(X_test)
    scale = float(np.std(y))
    gap = float((a.mean.cpu() - b.mean).abs().max()) / scale
    print(f"CUDA-DIFF chunked {name}: max |mean gap| / std(y) = {gap:.3e}")
    assert a.mean.device.type == DEVICE
    if name in SAME_NUMBERS:
        assert gap <= SAME_NUMBERS_TOL
    else:
        y_test = np.cos(2 * X_test[:, 0])
        rmse_gpu, rmse_cpu = (float(np.sqrt(np.mean((p.mean.cpu().numpy() - y_test) ** 2))) / scale for p in (a, b))
        assert rmse_gpu <= rmse_cpu + ACCURACY_TOL


def test_botorch_model_on_cuda():
    pytest.importorskip("botorch")
    from tnbayes.integrations.botorch import BoTorchModel

    X, y = _data(50)
    model = BoTorchModel(_fit(REGRESSORS["HilbertGP"], X, y, DEVICE))
    candidates = torch.rand(4, 3, 2, dtype=torch.float64, device=DEVICE) * 2 - 1
    posterior = model.posterior(candidates)
    assert posterior.mean.shape == (4, 3, 1) and posterior.mean.device.type == DEVICE
    draws = posterior.rsample(torch.Size([5]))
    assert draws.shape == (5, 4, 3, 1) and torch.isfinite(draws).all()


def test_tt_algebra_on_cuda_matches_cpu():
    from tnbayes.inference.kalman.dense import DenseKalmanFilter
    from tnbayes.inference.kalman.tt_rows import TTKalmanFilter
    from tnbayes.tensors import TTVector

    generator = torch.Generator().manual_seed(0)
    shape = (3, 4, 3, 2)
    dense = torch.randn(*shape, generator=generator, dtype=torch.float64)
    tt_cpu = TTVector.from_dense(dense, max_rank=4)
    tt_gpu = TTVector.from_dense(dense.to(DEVICE), max_rank=4)
    torch.testing.assert_close(tt_gpu.to_dense().cpu(), tt_cpu.to_dense(), rtol=1e-10, atol=1e-12)

    size = int(np.prod(shape))
    rows = torch.randn(8, size, generator=generator, dtype=torch.float64)
    targets = torch.randn(8, generator=generator, dtype=torch.float64)
    reference = DenseKalmanFilter.isotropic(size, 1.0)
    by_row = TTKalmanFilter(shape, prior_variance=1.0, device=DEVICE)
    by_block = TTKalmanFilter(shape, prior_variance=1.0, device=DEVICE)
    for row, target in zip(rows, targets):
        reference.update(row, float(target), 0.1)
        by_row.update(TTVector.from_dense(row.reshape(shape).to(DEVICE)), float(target), 0.1)
    for first in (0, 4):
        by_block.update_block(rows[first:first + 4].to(DEVICE), targets[first:first + 4].to(DEVICE), 0.1)
    for filt in (by_row, by_block):
        assert filt.mean.to_dense().device.type == DEVICE
        torch.testing.assert_close(filt.mean.to_dense().reshape(-1).cpu(), reference.mean, rtol=1e-8, atol=1e-10)


def test_gram_roundings_and_the_capped_row_update_on_cuda_match_cpu():
    """The Gram routes on the device: TT-SVD from Gram matrices (a tolerance ≥ 1e-6 and a cap), the rank-one root
    rounding by eigendecomposition and by subspace iteration (caps 20 and 3 against bonds of 8 · 9 + …) give the
    CPU's numbers to round-off. Twelve row updates of a filter with the Adult configuration's kinds of rules
    (tolerances on w, g and the mean, the covariance capped at 3) stay within a small fraction of what the
    truncation itself costs against the dense filter: the subspace iteration at a cap this low is unconverged, and
    a rotation among nearly equal Ritz values (set by round-off) moves the next bond's start block, so the two
    devices agree to far below the truncation error, not to round-off."""
    from tnbayes.inference.kalman.dense import DenseKalmanFilter
    from tnbayes.inference.kalman.tt_rows import TTKalmanFilter
    from tnbayes.tensors import TTMatrix, TTVector, round_rank_one_update
    from tnbayes.tensors.tt_rounding import tt_svd

    generator = torch.Generator().manual_seed(5)
    shape = (3,) * 6
    dense = torch.randn(*shape, generator=generator, dtype=torch.float64) + 3.0
    for tol, cap in ((1e-3, None), (0.0, 5), (1e-2, 4)):
        cores_cpu = tt_svd(dense, tol=tol, max_rank=cap)
        cores_gpu = tt_svd(dense.to(DEVICE), tol=tol, max_rank=cap)
        assert [c.shape for c in cores_gpu] == [c.shape for c in cores_cpu]
        torch.testing.assert_close(TTVector(cores_gpu).to_dense().cpu(), TTVector(cores_cpu).to_dense(),
                                   rtol=1e-9, atol=1e-10)

    ranks = [1, 8, 8, 8, 8, 8, 1]
    matrix = TTMatrix([torch.randn(ranks[k], 3, 3, ranks[k + 1], generator=generator, dtype=torch.float64)
                       for k in range(6)])
    left, right = TTVector.random(shape, 4, generator=generator), TTVector.random(shape, 4, generator=generator)
    for cap in (20, 3):
        on_cpu = round_rank_one_update(matrix, left, right, -0.3, tol=1e-3, max_rank=cap)
        on_gpu = round_rank_one_update(matrix.to(DEVICE), left.to(DEVICE), right.to(DEVICE), -0.3, tol=1e-3,
                                       max_rank=cap)
        assert on_gpu.cores[0].device.type == DEVICE and on_gpu.ranks == on_cpu.ranks
        gap = float(torch.linalg.matrix_norm(on_gpu.to_dense().cpu() - on_cpu.to_dense()))
        assert gap <= 1e-9 * float(torch.linalg.matrix_norm(on_cpu.to_dense())), (cap, gap)

    truncation = {"innovation": (1e-3, None), "gain": (1e-3, None), "mean": (1e-4, None), "covariance": (1e-2, 3)}
    rows = torch.randn(12, 3**6, generator=generator, dtype=torch.float64)
    targets = torch.randn(12, generator=generator, dtype=torch.float64)
    filters = {device: TTKalmanFilter(shape, 1.0, truncation=truncation, device=device) for device in ("cpu", DEVICE)}
    reference = DenseKalmanFilter.isotropic(3**6, 1.0)
    for row, target in zip(rows, targets):
        reference.update(row, float(target), 0.1)
        for device, filt in filters.items():
            filt.update(TTVector.from_dense(row.reshape(shape).to(device), tol=1e-8), float(target), 0.1)
    cpu, gpu = filters["cpu"], filters[DEVICE]
    assert gpu.mean.cores[0].device.type == DEVICE and max(gpu.covariance_sqrt.ranks) <= 3
    mean_cpu, root_cpu = cpu.mean.to_dense().reshape(-1), cpu.covariance_sqrt.to_dense()
    mean_gap = float((gpu.mean.to_dense().reshape(-1).cpu() - mean_cpu).abs().max())
    mean_truncation = float((mean_cpu - reference.mean).abs().max())
    root_gpu = gpu.covariance_sqrt.to_dense().cpu()
    covariance_gap = float(torch.linalg.matrix_norm(root_gpu @ root_gpu.T - root_cpu @ root_cpu.T))
    covariance_truncation = float(torch.linalg.matrix_norm(root_cpu @ root_cpu.T - reference.covariance))
    print(f"CUDA-DIFF capped row update: max |mean gap| {mean_gap:.2e} (truncation {mean_truncation:.2e}), "
          f"‖P gap‖_F {covariance_gap:.2e} (truncation {covariance_truncation:.2e})")
    assert mean_gap <= 0.05 * mean_truncation and covariance_gap <= 0.01 * covariance_truncation


def test_dense_matvec_and_the_schur_form_root_rounding_on_cuda_match_cpu():
    """The two row-update pieces added after the last GPU run: ``matvec_to_dense`` (``A x`` and ``Aᵀ x`` contracted
    from both ends) and the rank-one root rounding with right-orthonormal ``g``/``w`` from ``tt_svd(norm_core=0)``
    give the CPU's numbers to round-off on the device."""
    from tnbayes.tensors import TTMatrix, TTVector, matvec_to_dense, round_rank_one_update
    from tnbayes.tensors.tt_rounding import tt_svd

    generator = torch.Generator().manual_seed(11)
    shape = (3, 4, 2, 3, 3)
    ranks = [1, 5, 7, 6, 4, 1]
    matrix = TTMatrix([torch.randn(ranks[k], n, n, ranks[k + 1], generator=generator, dtype=torch.float64)
                       for k, n in enumerate(shape)])
    vector = TTVector.random(shape, 3, generator=generator)
    for transpose in (False, True):
        on_cpu = matvec_to_dense(matrix.cores, vector.cores, transpose=transpose)
        on_gpu = matvec_to_dense([c.to(DEVICE) for c in matrix.cores], [c.to(DEVICE) for c in vector.cores],
                                 transpose=transpose)
        dense = matrix.to_dense()
        reference = (dense.T if transpose else dense) @ vector.to_dense().reshape(-1)
        assert on_gpu.device.type == DEVICE
        torch.testing.assert_close(on_cpu, reference, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(on_gpu.cpu(), on_cpu, rtol=1e-11, atol=1e-11)

    dense_left = torch.randn(*shape, generator=generator, dtype=torch.float64)
    dense_right = torch.randn(*shape, generator=generator, dtype=torch.float64)
    for cap in (30, 4):
        results = {}
        for device in ("cpu", DEVICE):
            left = TTVector(tt_svd(dense_left.to(device), tol=1e-12, norm_core=0))
            right = TTVector(tt_svd(dense_right.to(device), tol=1e-12, norm_core=0))
            results[device] = round_rank_one_update(matrix.to(device), left, right, -0.7, tol=1e-6, max_rank=cap,
                                                   right_orthonormal=True)
        assert results[DEVICE].ranks == results["cpu"].ranks
        reference = results["cpu"].to_dense()
        gap = float(torch.linalg.matrix_norm(results[DEVICE].to_dense().cpu() - reference))
        assert gap <= 1e-9 * float(torch.linalg.matrix_norm(reference)), (cap, gap)


def test_numerical_lengthscale_floor_on_cuda():
    """ML-II's numerical lengthscale floor is a constraint bound on the model's device: integer-coded lookup-table
    targets (``tests/models/test_exact_gp.py``) fitted on the device predict their training records, as on the CPU."""
    from tests.models.test_exact_gp import lookup_table_split
    from tnbayes.selection import NUMERICAL_LENGTHSCALE_FLOOR

    X_train, y_train, X_test, y_test, seen = lookup_table_split()
    fits = {device: _fit(tnbayes.ExactGP, X_train, y_train, device) for device in ("cpu", DEVICE)}
    for model in fits.values():  # the floor binds: ML-II would go below it (test_exact_gp.py's control)
        assert float(model.lengthscale_.min()) == pytest.approx(NUMERICAL_LENGTHSCALE_FLOOR, rel=1e-6)
    means = {device: model.posterior(X_test).mean.cpu().numpy() for device, model in fits.items()}
    np.testing.assert_allclose(means[DEVICE], means["cpu"], atol=1e-6)
    np.testing.assert_allclose(means[DEVICE][seen], y_test[seen], atol=1e-3)
