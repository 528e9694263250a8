"""The block update of the row-by-row TT Kalman filter (TTKalmanFilter.update_block) against the dense filter and
the row-by-row update, and TNKF's block streaming against its row-by-row path."""

import math

import numpy as np
import pytest
import torch

from tnbayes import TNKF, datasets, metrics
from tnbayes.inference.kalman import BlockUpdateError, DenseKalmanFilter, TTKalmanFilter
from tnbayes.tensors import TTVector
from tnbayes.tensors.tt_block import (block_dot, block_from_dense, block_gram, block_outer,
                                      block_transpose_norms_squared)

EXACT = {q: 0.0 for q in ("row", "mean", "covariance", "gain", "innovation")}


def _se_rows(n: int = 64, lengthscale: float = 0.15, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of an SE kernel matrix on n sorted points of [0, 1] (+ 0.1 I) and noisy sine targets."""
    g = torch.Generator().manual_seed(seed)
    x = torch.sort(torch.rand(n, generator=g, dtype=torch.float64)).values
    K = torch.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / lengthscale**2) + 0.1 * torch.eye(n, dtype=torch.float64)
    y = torch.sin(6 * x) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return K, y


@pytest.mark.parametrize("forgetting", [1.0, 0.97])
def test_exact_block_update_equals_dense_and_row_filters(forgetting):
    """Untruncated: block updates of B = 8 rows (dense rows and block TTs) = the dense filter = row-by-row Potter."""
    shape, B, R, p0 = (4, 4, 4), 8, 0.05, 1.3
    K, y = _se_rows()
    n = K.shape[0]
    dense = DenseKalmanFilter.isotropic(n, p0)
    rows_filter = TTKalmanFilter(shape, p0, truncation=EXACT)
    block_filters = [TTKalmanFilter(shape, p0, truncation=EXACT, forgetting_factor=forgetting) for _ in range(2)]
    for first in range(0, 32, B):
        for k in range(first, first + B):
            rows_filter.update(TTVector.from_dense(K[k], shape), float(y[k]), R)
        if forgetting != 1.0:  # P / λ^B before the block, then the B rows
            dense.covariance /= forgetting**B
        for k in range(first, first + B):
            dense.update(K[k], float(y[k]), R)
        S = block_filters[0].update_block(K[first:first + B], y[first:first + B], R)
        block_filters[1].update_block(block_from_dense(K[first:first + B], shape), y[first:first + B], R)
        assert S.shape == (B, B)
    filters = block_filters + ([rows_filter] if forgetting == 1.0 else [])
    for kf in filters:
        torch.testing.assert_close(kf.mean.to_dense(), dense.mean, rtol=1e-8, atol=1e-9)
        root = kf.covariance_sqrt.to_dense()
        torch.testing.assert_close(root @ root.T, dense.covariance, rtol=1e-8, atol=1e-10)
    for kf in block_filters:
        assert kf.num_updates == 32 and len(kf.covariance_trace_history) == 32
        assert kf.covariance_trace_history[-1] == pytest.approx(float(dense.covariance.trace()), rel=1e-8)


def test_block_helpers_match_dense_algebra():
    shape, B = (2, 3, 4), 5
    g = torch.Generator().manual_seed(3)
    U, V = (torch.randn(B, 24, generator=g, dtype=torch.float64) for _ in range(2))
    x = torch.randn(24, generator=g, dtype=torch.float64)
    L = torch.randn(24, 24, generator=g, dtype=torch.float64)
    from tnbayes.tensors import TTMatrix
    L_tt = TTMatrix.from_dense(L, shape, shape)
    bu, bv = block_from_dense(U, shape), block_from_dense(V, shape)
    torch.testing.assert_close(block_dot(bu, TTVector.from_dense(x, shape), B), U @ x)
    torch.testing.assert_close(block_outer(bu, bv, B).to_dense(), U.T @ V)
    torch.testing.assert_close(block_transpose_norms_squared(L_tt, bu, B), ((U @ L) ** 2).sum(1))
    torch.testing.assert_close(block_gram(bu, B), U @ U.T)
    torch.testing.assert_close(block_gram(bu, B, bv), U @ V.T)


def test_truncated_block_update_keeps_the_covariance_psd():
    """Default-like truncation (rank caps, randomized rounding of L): L Lᵀ ⪰ 0 and close to the dense posterior."""
    shape, B, R, p0 = (4, 4, 4), 8, 0.05, 1.0
    K, y = _se_rows()
    truncation = {"row": 1e-4, "innovation": (1e-4, 6), "gain": (1e-5, 6), "mean": 1e-5, "covariance": (1e-4, 8)}
    kf = TTKalmanFilter(shape, p0, truncation=truncation)
    dense = DenseKalmanFilter.isotropic(K.shape[0], p0)
    for first in range(0, K.shape[0], B):
        kf.update_block(K[first:first + B], y[first:first + B], R)
        for k in range(first, first + B):
            dense.update(K[k], float(y[k]), R)
    root = kf.covariance_sqrt.to_dense()
    assert float(torch.linalg.eigvalsh(root @ root.T).min()) > -1e-10
    fitted, exact = K @ kf.mean.to_dense(), K @ dense.mean
    assert float(torch.linalg.vector_norm(fitted - exact) / torch.linalg.vector_norm(exact)) < 0.05


def test_tnkf_block_size_matches_the_row_path_on_a_small_sinc():
    data = datasets.make_sinc(n_train=512, n_test=256, seed=0)
    rmse, means = {}, {}
    for block_size in (1, 16):
        model = TNKF(block_size=block_size, time_budget=None, hyper_max_points=256).fit(data.X_train, data.y_train)
        assert model.block_size_ == block_size and model.rows_processed_ == 512
        assert len(model.history_) == model.n_iter_ == 512
        post = model.posterior(data.X_test)
        means[block_size] = post.mean.numpy()
        rmse[block_size] = metrics.evaluate(post, data.y_test)["rmse"]
        assert bool((post.variance > 0).all())
    assert rmse[16] < 0.12 and rmse[1] < 0.12
    assert abs(rmse[16] - rmse[1]) < 0.005
    assert np.sqrt(np.mean((means[16] - means[1]) ** 2)) < 0.02


def test_a_block_its_roundings_lose_is_rejected_with_the_state_unchanged():
    """Small noise with binding innovation and gain caps: a rounded block update that would miss its rows' exact
    posterior residual R S⁻¹ r (S⁻¹ amplifies rounding errors by up to 1/R) raises and changes nothing; without the
    caps every block passes and leaves exactly that residual."""
    shape, B, R = (4, 4, 4), 8, 1e-4
    g = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, generator=g, dtype=torch.float64)
    K = torch.exp(-0.5 * torch.cdist(x, x) ** 2 / 0.4**2)
    y = torch.sin(6 * x[:, 0]) + 0.1 * torch.randn(64, generator=g, dtype=torch.float64)
    caps = {"innovation": (0.0, 4), "gain": (0.0, 4), "covariance": (0.0, 8)}
    tight = TTKalmanFilter(shape, 1.0, truncation={**EXACT, **caps}, forgetting_factor=0.98)
    exact = TTKalmanFilter(shape, 1.0, truncation=EXACT)
    rejected = None
    for first in range(0, 64, B):
        rows, targets = K[first:first + B], y[first:first + B]
        residual = targets - rows @ exact.mean.to_dense()
        innovation = exact.update_block(rows, targets, R)
        torch.testing.assert_close(targets - rows @ exact.mean.to_dense(), R * torch.linalg.solve(innovation, residual),
                                   rtol=1e-6, atol=1e-9)
        if rejected is None:
            state = (tight.mean.to_dense(), tight.covariance_sqrt.to_dense(), tight.num_updates,
                     tight._generator.get_state())
            try:
                tight.update_block(rows, targets, R)
            except BlockUpdateError as error:
                assert "one at a time" in str(error)
                rejected = first
    assert rejected is not None and tight.block_misses[-1] > 0.5 and max(tight.block_misses[:-1], default=0) <= 0.5
    assert max(exact.block_misses) < 1e-6  # the exact update meets R S⁻¹ r to round-off
    assert torch.equal(tight.mean.to_dense(), state[0]) and torch.equal(tight.covariance_sqrt.to_dense(), state[1])
    assert tight.num_updates == state[2] == rejected == len(tight.covariance_trace_history)
    assert torch.equal(tight._generator.get_state(), state[3])  # the next block draws the sketches this one did


def test_tnkf_goes_row_by_row_from_a_rejected_block(monkeypatch):
    """TNKF catches the rejection and streams that block and the rest row by row (``block_fallback_row_``): nearly
    the row-by-row fit, where keeping every block (the check switched off) is 1.6× worse."""
    import tnbayes.inference.kalman.tt_rows as tt_rows

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (756, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.02 * rng.standard_normal(756)
    settings = dict(lengthscale=0.5, outputscale=1.0, measurement_noise=1e-6, time_budget=None,
                    noise_estimate="training", truncation={"innovation": (1e-4, 2), "gain": (1e-5, 2),
                                                           "covariance": (1e-4, 8)})

    def rmse(model):
        return metrics.evaluate(model.posterior(X[256:]), y[256:])["rmse"]

    rows = TNKF(block_size=1, **settings).fit(X[:256], y[:256])
    checked = TNKF(block_size=16, verbose=True, **settings).fit(X[:256], y[:256])
    assert rows.block_fallback_row_ is None and checked.block_fallback_row_ is not None
    assert checked.block_fallback_row_ % 16 == 0 and max(checked.block_misses_) > 0.5
    assert any(f"block update rejected at row {checked.block_fallback_row_}" in line for line in checked.fit_report_)
    assert checked.rows_processed_ == 256 and rmse(checked) <= 1.2 * rmse(rows)
    monkeypatch.setattr(tt_rows, "BLOCK_CONSISTENCY", math.inf)
    unchecked = TNKF(block_size=16, **settings).fit(X[:256], y[:256])
    assert unchecked.block_fallback_row_ is None and rmse(unchecked) > 1.4 * rmse(rows)


def test_tnkf_blocks_that_pass_the_check_stay_blocks():
    """A sinc with TNKF's default truncation: every block's miss is far below the limit, none is rejected."""
    data = datasets.make_sinc(n_train=256, n_test=64, seed=1)
    model = TNKF(block_size=16, time_budget=None, hyper_max_points=256).fit(data.X_train, data.y_train)
    assert model.block_fallback_row_ is None and len(model.block_misses_) == 16 and max(model.block_misses_) < 0.05


def test_tnkf_block_size_is_validated():
    data = datasets.make_sinc(n_train=64, n_test=8, seed=0)
    for bad in (0, -3, 2.5, "big", True):
        with pytest.raises(ValueError, match="block_size"):
            TNKF(block_size=bad).fit(data.X_train, data.y_train)
    assert math.isfinite(TNKF(block_size=7, time_budget=None).fit(data.X_train, data.y_train).block_size_)


def _svd_tt(tensor, tol, max_rank):
    """Oseledets' TT-SVD left to right with LAPACK's SVD: the reference of the Gram-route compressions."""
    from tnbayes.tensors import truncation_rank
    shape, cores, rank = tensor.shape, [], 1
    delta = tol * float(torch.linalg.vector_norm(tensor)) / math.sqrt(len(shape) - 1)
    rest = tensor.reshape(1, -1)
    for n in shape[:-1]:
        u, s, vh = torch.linalg.svd(rest.reshape(rank * n, -1), full_matrices=False)
        new_rank = truncation_rank(s, delta, max_rank)
        cores.append(u[:, :new_rank].reshape(rank, n, new_rank))
        rest, rank = s[:new_rank, None] * vh[:new_rank], new_rank
    return TTVector(cores + [rest.reshape(rank, shape[-1], 1)])


def test_gram_compression_of_a_row_block_meets_its_tolerance():
    """block_from_dense takes the Gram route of tt_svd at tolerances ≥ GRAM_MIN_TOL; the SVD TT-SVD is the
    reference (same ranks, the tolerance met, the same error where the cap binds)."""
    from tnbayes.inference.kalman import Truncation
    from tnbayes.tensors.tt_rounding import GRAM_MIN_TOL
    K, _ = _se_rows(n=64)
    for rule in (Truncation(1e-3, None), Truncation(1e-4, 6)):
        assert rule.tol >= GRAM_MIN_TOL
        block = block_from_dense(K[8:24], [4, 4, 4], tol=rule.tol, max_rank=rule.max_rank)
        modes = [4, 4, 4 * 16]
        reference = _svd_tt(K[8:24].T.reshape(*modes), rule.tol, rule.max_rank)
        assert block.ranks == reference.ranks
        errors = [float(torch.linalg.vector_norm(tt.to_dense().reshape(64, 16).T - K[8:24])
                        / torch.linalg.vector_norm(K[8:24])) for tt in (block, reference)]
        assert errors[0] <= rule.tol if rule.max_rank is None else errors[0] == pytest.approx(errors[1], rel=1e-6)


def test_automatic_block_size_is_row_by_row_unless_the_budget_needs_blocks():
    import warnings
    from tnbayes import TNKFClassifier
    from tnbayes.inference.budget import BudgetWarning
    from tnbayes.models.tnkf import DEFAULT_BLOCK_SIZE
    data = datasets.make_sinc(n_train=512, n_test=8)
    fixed = dict(lengthscale=0.1, measurement_noise=0.01, prior_variance=1.0)
    assert TNKF(time_budget=None, **fixed).fit(data.X_train, data.y_train).block_size_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        tight = TNKF(time_budget=1e-3, **fixed).fit(data.X_train, data.y_train)
        assert tight.block_size_ == DEFAULT_BLOCK_SIZE == 16  # row by row would have to drop rows
        assert TNKF(time_budget=1e-3, forgetting_factor=0.99, **fixed).fit(data.X_train, data.y_train).block_size_ == 1
        labels = np.where(np.asarray(data.y_train) > 0.2, 1, -1)
        assert TNKFClassifier(time_budget=1e-3, **fixed).fit(data.X_train, labels).block_size_ == 1


@pytest.mark.parametrize(("block", "forgetting", "refused"), [(True, 1.0, "any"), (False, 1.0, "any"),
                                                             (False, 0.9, "any"), (True, 0.9, "root")])
def test_a_product_too_large_for_the_memory_is_refused_with_the_state_unchanged(monkeypatch, block, forgetting,
                                                                                 refused):
    """Before forming the exact product of a block (or, without a covariance cap, the root's formed update), the
    filter checks its size against the free memory; over FORMED_MEMORY_SHARE of it, a MemoryError names the
    truncations without a rank cap and the state (root, mean, forgetting, sketches' generator, block_misses) is left as
    it was. The share is made tiny so that the first product is refused (``refused="root"``: only the root's update,
    after the products and the consistency check); a realistic share refuses the same way once uncapped ranks grew."""
    import tnbayes.inference.kalman.tt_rows as tt_rows

    shape, B, R = (4, 4, 4), 8, 0.05
    K, y = _se_rows()
    kf = TTKalmanFilter(shape, 1.0, truncation={"covariance": 1e-3, "innovation": (1e-4, 6), "gain": (1e-5, 6)},
                        forgetting_factor=forgetting)

    def step(first):
        if block:
            kf.update_block(K[first:first + B], y[first:first + B], R)
        else:
            kf.update(TTVector.from_dense(K[first], shape), float(y[first]), R)

    step(0)
    before = [core.clone() for core in kf.covariance_sqrt.cores]
    updates, mean, misses = kf.num_updates, kf.mean.to_dense(), list(kf.block_misses)
    generator = kf._generator.get_state()
    if refused == "root":
        check = tt_rows.TTKalmanFilter._refuse_unaffordable

        def root_only(self, formed, sizes, what, quantities, **kwargs):
            share = 1e-12 if what == "the covariance root's update" else 0.1
            monkeypatch.setattr(tt_rows, "FORMED_MEMORY_SHARE", share)
            return check(self, formed, sizes, what, quantities, **kwargs)

        monkeypatch.setattr(tt_rows.TTKalmanFilter, "_refuse_unaffordable", root_only)
    else:
        monkeypatch.setattr(tt_rows, "FORMED_MEMORY_SHARE", 1e-12)
    with pytest.raises(MemoryError, match=r"GiB \(TT ranks up to \d+\).*free on cpu\. The truncations? of "
                                          r"'covariance'.* no rank cap .*\(tol, max_rank\)"):
        step(B)
    assert kf.num_updates == updates and kf.block_misses == misses
    assert all(torch.equal(a, b) for a, b in zip(kf.covariance_sqrt.cores, before))
    assert torch.equal(kf._generator.get_state(), generator)
    torch.testing.assert_close(kf.mean.to_dense(), mean, rtol=0, atol=0)
    monkeypatch.undo()  # the default share: the same update goes through
    step(B)
    assert kf.num_updates == updates + (B if block else 1)


def test_tnkf_without_a_covariance_cap_fails_with_the_remedy_not_the_allocator(monkeypatch):
    import tnbayes.inference.kalman.tt_rows as tt_rows

    data = datasets.make_sinc(n_train=64, n_test=8, seed=0)
    monkeypatch.setattr(tt_rows, "FORMED_MEMORY_SHARE", 1e-12)
    with pytest.raises(MemoryError, match=r"The truncation of 'covariance' has no rank cap"):
        TNKF(truncation={"covariance": 1e-3}, time_budget=None, lengthscale=0.2, outputscale=1.0,
             measurement_noise=0.01, prior_variance=1.0).fit(data.X_train, data.y_train)
