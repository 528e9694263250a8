"""The Kalman engines of tnbayes.inference.kalman against the dense filter and closed-form posteriors: the
row-by-row TT filter (TNKF's), the batch TT filter over rank-one feature rows (TTKalmanGP's), truncation."""

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.inference.kalman import (
    DenseKalmanFilter,
    TTBatchKalmanFilter,
    TTKalmanFilter,
    Truncation,
    covariance_from_root,
    kalman_batch_update,
    prior_root_matrix,
)
from tnbayes.tensors import TTVector, tt_svd_batched
from tnbayes.tensors.tt_rounding import tt_svd

EXACT = {q: 0.0 for q in ("row", "mean", "covariance", "gain", "innovation")}


def _inputs(n, d=2, seed=0):
    """Uniform inputs on [-2, 2]^d (the first draw of the model tests' data)."""
    return torch.rand(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 4 - 2


def test_truncation_parses_every_form_and_refuses_bad_ones():
    assert Truncation.parse(None) == Truncation(0.0, None)
    assert Truncation.parse(1e-3) == Truncation(1e-3, None)
    assert Truncation.parse((1e-3, 8)) == Truncation(1e-3, 8)
    assert Truncation.parse({"tol": 1e-2, "max_rank": 4}) == Truncation(1e-2, 4)
    for bad in (1.5, (0.1, 0), "tight"):
        with pytest.raises(ValueError):
            Truncation.parse(bad)


@pytest.mark.parametrize("forgetting", [1.0, 0.95])
def test_exact_row_filter_equals_the_dense_filter_and_the_closed_form(forgetting):
    """Untruncated TTKalmanFilter (square root and covariance form) = DenseKalmanFilter = (for λ = 1) the
    Bayesian posterior N((CᵀC/R + I/p0)⁻¹ Cᵀt/R, (CᵀC/R + I/p0)⁻¹); ``isotropic`` = the general constructor."""
    g = torch.Generator().manual_seed(1)
    shape, n, R, p0 = (2, 3, 2), 12, 0.05, 1.5
    rows = torch.randn(9, n, generator=g, dtype=torch.float64)
    targets = torch.randn(9, generator=g, dtype=torch.float64)
    dense = DenseKalmanFilter(torch.zeros(n, dtype=torch.float64), p0 * torch.eye(n, dtype=torch.float64),
                              forgetting_factor=forgetting)
    isotropic = DenseKalmanFilter.isotropic(n, p0, forgetting_factor=forgetting)
    filters = [TTKalmanFilter(shape, p0, truncation=EXACT, forgetting_factor=forgetting, square_root=mode)
               for mode in (True, False)]
    for row, target in zip(rows, targets):
        dense.update(row, float(target), R)
        isotropic.update(row, float(target), R)
        variances = [kf.update(TTVector.from_dense(row, shape), float(target), R) for kf in filters]
        assert variances[0] == pytest.approx(variances[1], rel=1e-10)
    assert torch.equal(isotropic.mean, dense.mean) and torch.equal(isotropic.covariance, dense.covariance)
    for kf in filters:
        torch.testing.assert_close(kf.mean.to_dense(), dense.mean, rtol=1e-9, atol=1e-10)
        torch.testing.assert_close(kf.covariance.to_dense(), dense.covariance, rtol=1e-9, atol=1e-11)
        assert kf.num_updates == 9 and kf.covariance_trace() == pytest.approx(float(dense.covariance.trace()))
    L = filters[0].covariance_sqrt
    torch.testing.assert_close(covariance_from_root(L).to_dense(), L.to_dense() @ L.to_dense().T)
    if forgetting == 1.0:
        precision = rows.T @ rows / R + torch.eye(n, dtype=torch.float64) / p0
        cov = torch.linalg.inv(precision)
        torch.testing.assert_close(dense.mean, cov @ rows.T @ targets / R, rtol=1e-8, atol=1e-9)
        torch.testing.assert_close(dense.covariance, cov, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("square_root", [True, False])
def test_prediction_given_a_zero_entry_is_the_posterior_of_the_model_without_it(square_root):
    """``predict_given_zero_entry(c, i)`` = the closed-form posterior predictive of the model whose state lacks
    entry i, given the same rows without their column i (what TNKF's held-out rows are predicted from)."""
    g = torch.Generator().manual_seed(4)
    shape, n, R, p0 = (2, 3, 2), 12, 1e-4, 1.5
    rows = torch.randn(7, n, generator=g, dtype=torch.float64)
    targets = torch.randn(7, generator=g, dtype=torch.float64)
    kf = TTKalmanFilter(shape, p0, truncation=EXACT, square_root=square_root)
    for row, target in zip(rows, targets):
        kf.update(TTVector.from_dense(row, shape), float(target), R)
    new_row = torch.randn(n, generator=g, dtype=torch.float64)
    for entry in (0, 5, n - 1):
        kept = [j for j in range(n) if j != entry]
        reduced = rows[:, kept]
        cov = torch.linalg.inv(reduced.T @ reduced / R + torch.eye(n - 1, dtype=torch.float64) / p0)
        mean = cov @ reduced.T @ targets / R
        expected = (float(new_row[kept] @ mean), float(new_row[kept] @ cov @ new_row[kept]))
        got = kf.predict_given_zero_entry(TTVector.from_dense(new_row, shape), entry)
        assert got == pytest.approx(expected, rel=1e-7, abs=1e-9)
        plain = kf.predict(TTVector.from_dense(new_row, shape))
        assert abs(plain[0] - expected[0]) > 1e-3  # the entry matters: without the conditioning the mean differs
    # B rows at once (batched cores, as TNKF's held-out rows of a block): each row's own prediction
    new_rows = torch.randn(4, n, generator=g, dtype=torch.float64)
    entries = [0, 5, n - 1, 5]
    means, variances = kf.predict_given_zero_entries(tt_svd_batched(new_rows, shape), entries)
    assert means.shape == variances.shape == (4,)
    for row, entry, mean, variance in zip(new_rows, entries, means, variances):
        one = kf.predict_given_zero_entry(TTVector.from_dense(row, shape), entry)
        assert (float(mean), float(variance)) == pytest.approx(one, rel=1e-9, abs=1e-12)
    with pytest.raises(ValueError, match="one entry per row"):
        kf.predict_given_zero_entries(tt_svd_batched(new_rows, shape), [0])


def test_square_root_update_stays_psd_where_the_covariance_form_does_not():
    X = _inputs(32, seed=2)
    model = tnbayes.TNKF(lengthscale=0.5, outputscale=1.0, gamma=100.0, max_rows=1,
                         normalize_y=False).fit(X, X[:, 0])
    Xs = model.x_scaler_.transform(X)
    A = model.kernel_matrix(Xs, Xs) + 0.01 * torch.eye(32, dtype=torch.float64)
    shape = tuple(model.tt_shape_)
    rough = {"covariance": (0.05, None), "gain": 1e-10, "innovation": 1e-10, "mean": 1e-10}
    filters = {mode: TTKalmanFilter(shape, 1.0, truncation=rough, square_root=mode) for mode in (True, False)}
    worst = {True: np.inf, False: np.inf}
    for k in range(32):
        row = TTVector.from_dense(A[k], shape)
        for mode, kf in filters.items():
            kf.update(row, float(X[k, 0]), 1e-4)
            if mode:  # the filter's own state: P = L Lᵀ (the rounded `covariance` property is for inspection)
                L = kf.covariance_sqrt.to_dense()
                P = L @ L.T
            else:
                P = kf.covariance.to_dense()
            worst[mode] = min(worst[mode], float(torch.linalg.eigvalsh(P).min()))
    plain_P = filters[False].covariance.to_dense()
    assert worst[False] < -1e-3 * float(torch.linalg.eigvalsh(plain_P).max())  # lost definiteness
    assert worst[True] > -1e-10  # L Lᵀ: PSD after every rounding


def test_rank_capped_row_update_rounds_the_root_near_the_best_rounding():
    """With a cap on the covariance far below the formed sum's ranks (here 3 against up to 3 + 9·9), Potter's row
    update rounds L − β g wᵀ from Gram matrices with a subspace iteration per bond (the outer product is never
    formed): at every row its error against the exact sum (dense) is within 1.05× that of the deterministic rounding
    of the formed sum at the same cap (measured: 1.001), L Lᵀ stays PSD, and a cap that does not bind gives the
    dense filter."""
    g = torch.Generator().manual_seed(3)
    shape, n, R = (3, 3, 3, 3), 81, 0.01
    rows = torch.randn(12, n, generator=g, dtype=torch.float64)
    targets = torch.randn(12, generator=g, dtype=torch.float64)
    capped = TTKalmanFilter(shape, 1.0, truncation={**EXACT, "covariance": (0.0, 3)})
    loose = TTKalmanFilter(shape, 1.0, truncation={**EXACT, "covariance": (0.0, 81)})
    dense = DenseKalmanFilter.isotropic(n, 1.0)
    ratios = []
    for row, target in zip(rows, targets):
        row_tt = TTVector.from_dense(row, shape)
        before = capped.covariance_sqrt
        L = before.to_dense()
        w = L.T @ row
        S = float(w @ w) + R
        exact = L - torch.outer(L @ w, w) / (S + (R * S) ** 0.5)
        projected = before.T.matvec(row_tt)
        best = (before - before.matvec(projected).outer(projected) * (1.0 / (S + (R * S) ** 0.5))).round(0.0, 3)
        capped.update(row_tt, float(target), R)
        loose.update(row_tt, float(target), R)
        dense.update(row, float(target), R)
        assert max(capped.covariance_sqrt.ranks) <= 3
        error = float(torch.linalg.matrix_norm(capped.covariance_sqrt.to_dense() - exact))
        best_error = float(torch.linalg.matrix_norm(best.to_dense() - exact))
        assert best_error > 1e-3 * float(torch.linalg.matrix_norm(exact))  # the cap binds
        ratios.append(error / best_error)
        P = capped.covariance_sqrt.to_dense() @ capped.covariance_sqrt.to_dense().T
        assert float(torch.linalg.eigvalsh(P).min()) > -1e-10
    assert max(ratios) <= 1.05, ratios
    torch.testing.assert_close(loose.mean.to_dense(), dense.mean, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(loose.covariance.to_dense(), dense.covariance, rtol=1e-8, atol=1e-10)


def _kron_rows(phi):
    """Dense rows (n, M^D) of the rank-one feature rows phi (D, n, M)."""
    rows = phi[0]
    for factor in phi[1:]:
        rows = torch.einsum("na,nb->nab", rows, factor).reshape(rows.shape[0], -1)
    return rows


@pytest.mark.parametrize("batch_size, forgetting", [(4, 1.0), (1, 0.9), (7, 1.0)])
def test_untruncated_batch_update_equals_the_dense_filter(batch_size, forgetting):
    """kalman_batch_update over rank-one rows φ_1 ⊗ φ_2 ⊗ φ_3 with the diagonal prior L₀ = ⊗ diag(p_d), run by
    TTBatchKalmanFilter in batches, = DenseKalmanFilter row by row (forgetting per batch = per row for B = 1)."""
    g = torch.Generator().manual_seed(2)
    D, M, n, noise = 3, 3, 14, 0.1
    prior_root = 0.5 + torch.rand(D, M, generator=g, dtype=torch.float64)
    phi = torch.randn(D, n, M, generator=g, dtype=torch.float64)
    targets = torch.randn(n, generator=g, dtype=torch.float64)
    rows = _kron_rows(phi)
    prior_cov = torch.diag(_kron_rows(prior_root.unsqueeze(1) ** 2)[0])
    dense = DenseKalmanFilter(torch.zeros(M ** D, dtype=torch.float64), prior_cov, forgetting_factor=forgetting)
    for row, target in zip(rows, targets):
        dense.update(row, float(target), noise)
    kalman = TTBatchKalmanFilter(prior_root)
    assert kalman.covariance_trace() == pytest.approx(kalman.prior_covariance_trace(), rel=1e-12)
    torch.testing.assert_close(prior_root_matrix(prior_root).to_dense(), prior_cov.sqrt())
    for first in range(0, n, batch_size):
        kalman.forget(forgetting)
        kalman.update(phi[:, first:first + batch_size], targets[first:first + batch_size], noise)
    torch.testing.assert_close(kalman.mean.to_dense(), dense.mean, rtol=1e-8, atol=1e-10)
    L = kalman.covariance_sqrt.to_dense()
    torch.testing.assert_close(L @ L.T, dense.covariance, rtol=1e-8, atol=1e-11)
    torch.testing.assert_close(kalman.covariance_trace(), float(dense.covariance.trace()), rtol=1e-10, atol=0)
    # predictions of rank-one rows: mean φᵀm and variance φᵀPφ
    query = torch.randn(D, 5, M, generator=g, dtype=torch.float64)
    dense_query = _kron_rows(query)
    torch.testing.assert_close(kalman.predict_mean(query), dense_query @ dense.mean, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(kalman.predict_variance(query),
                               torch.einsum("ij,jk,ik->i", dense_query, dense.covariance, dense_query),
                               rtol=1e-8, atol=1e-11)


def test_rank_capped_batch_update_stays_within_its_cap_and_psd():
    g = torch.Generator().manual_seed(3)
    D, M = 4, 3
    prior_root = 0.5 + torch.rand(D, M, generator=g, dtype=torch.float64)
    mean, correction = TTVector.zeros((M,) * D), None
    for _ in range(6):
        phi = torch.randn(D, 5, M, generator=g, dtype=torch.float64)
        mean, correction = kalman_batch_update(mean, prior_root, correction, phi,
                                               torch.randn(5, generator=g, dtype=torch.float64), 0.05, tol=1e-8,
                                               max_rank=3, generator=g)
        assert max(mean.ranks) <= 3 and max(correction.ranks) <= 3
    L = (prior_root_matrix(prior_root) - correction).to_dense()
    assert float(torch.linalg.eigvalsh(L @ L.T).min()) >= -1e-12


def test_batch_update_rounds_the_mean_in_the_prior_coordinates():
    """With a tolerance that binds, the rounded mean m misses the dense filter's by at most tol·‖L₀⁻¹m‖ in the
    prior's coordinates, ‖L₀⁻¹(m − m_dense)‖ — where rounding m in its own coordinates (the same tolerance) misses by
    far more: its error lands on the weights of small prior variance, which later rows cannot correct."""
    g = torch.Generator().manual_seed(11)
    D, M, noise, tol = 3, 5, 0.01, 0.3
    prior_root = (10.0 ** -torch.arange(M, dtype=torch.float64)).repeat(D, 1)  # prior sd 1 … 1e-4 per factor
    whiten = _kron_rows(prior_root.unsqueeze(1))[0]  # diagonal of L₀ (M^D,)
    start = TTVector([torch.randn(1 if k == 0 else 4, M, 1 if k == D - 1 else 4, generator=g, dtype=torch.float64)
                      * w.reshape(1, -1, 1) for k, w in enumerate(prior_root)])  # a mean the prior allows
    phi = torch.randn(D, 1, M, generator=g, dtype=torch.float64)
    target = torch.randn(1, generator=g, dtype=torch.float64)
    dense = DenseKalmanFilter(start.to_dense(), torch.diag(whiten ** 2))
    dense.update(_kron_rows(phi)[0], float(target), noise)
    mean, _ = kalman_batch_update(start, prior_root, None, phi, target, noise, tol=tol)
    assert max(mean.ranks) < max(start.ranks) + 1  # the tolerance binds
    prior_norm = float(torch.linalg.vector_norm(dense.mean / whiten))
    missed = float(torch.linalg.vector_norm((mean.to_dense() - dense.mean) / whiten))
    assert missed <= tol * prior_norm * (1 + 1e-9)
    own_coordinates = TTVector.from_dense(dense.mean, (M,) * D).round(tol)
    assert float(torch.linalg.vector_norm((own_coordinates.to_dense() - dense.mean) / whiten)) > 2 * tol * prior_norm


def test_kalman_batch_update_keeps_its_old_import_path():
    from tnbayes.models.tt_kalman import kalman_batch_update as old

    assert old is kalman_batch_update and tnbayes.inference.kalman_batch_update is kalman_batch_update


def test_row_update_with_tolerances_stays_at_the_dense_filter():
    """Tolerances of 1e-6 (the Gram route: TT-SVD of the dense products from both ends, the root from Gram matrices)
    and a covariance cap that does not bind keep the row filter at the dense one; ``predict`` gives its moments."""
    g = torch.Generator().manual_seed(7)
    shape, n, R = (3, 3, 3, 3), 81, 0.01
    rows = torch.randn(10, n, generator=g, dtype=torch.float64)
    targets = torch.randn(10, generator=g, dtype=torch.float64)
    tight = {"row": 0.0, "mean": 1e-6, "gain": 1e-6, "innovation": 1e-6, "covariance": (1e-6, 81)}
    kf = TTKalmanFilter(shape, 1.0, truncation=tight)
    dense = DenseKalmanFilter.isotropic(n, 1.0)
    for row, target in zip(rows, targets):
        kf.update(TTVector.from_dense(row, shape), float(target), R)
        dense.update(row, float(target), R)
    L = kf.covariance_sqrt.to_dense()
    scale_mean, scale_cov = float(dense.mean.norm()), float(dense.covariance.norm())
    torch.testing.assert_close(kf.mean.to_dense(), dense.mean, rtol=0, atol=1e-5 * scale_mean)
    torch.testing.assert_close(L @ L.T, dense.covariance, rtol=0, atol=1e-5 * scale_cov)
    probe = torch.randn(n, generator=g, dtype=torch.float64)
    mean, variance = kf.predict(TTVector.from_dense(probe, shape))
    assert mean == pytest.approx(float(probe @ dense.mean), rel=1e-5)
    assert variance == pytest.approx(float(probe @ dense.covariance @ probe), rel=1e-5)


def _row_filter_run(truncation, read_every_row, round_relative_to="update", rows=12):
    """A row filter over fixed random rows; ``read_every_row`` reads ``kf.mean`` after each update."""
    g = torch.Generator().manual_seed(11)
    shape, n = (3, 3, 3, 3), 81
    kf = TTKalmanFilter(shape, 1.0, truncation=truncation, round_relative_to=round_relative_to)
    for _ in range(rows):
        row = torch.randn(n, generator=g, dtype=torch.float64)
        kf.update(TTVector.from_dense(row, shape), float(torch.randn(1, generator=g, dtype=torch.float64)), 0.01)
        if read_every_row:
            kf.mean  # noqa: B018 (a read must not change what the filter does next)
    return kf


def test_row_update_rounds_the_mean_when_read_relative_to_its_whole_change():
    """Rows carry the mean densely; reading ``mean`` rounds it with the "mean" rule relative to its change since the
    filter last took a TT mean (here the prior's 0: the mean's norm): exactly ``tt_svd`` of the dense mean. Reads
    change nothing later (the same dense mean and root as a filter without a "mean" rule, read or not), and after a
    block update the change is counted from the block's mean."""
    rules = {"row": 0.0, "gain": 1e-8, "innovation": 1e-8, "covariance": (1e-8, 81)}
    unrounded = _row_filter_run({**rules, "mean": 0.0}, read_every_row=False)
    exact = unrounded._dense_mean()
    for read_every_row in (False, True):
        lazy = _row_filter_run({**rules, "mean": 0.3}, read_every_row=read_every_row)
        torch.testing.assert_close(lazy._dense_mean(), exact, rtol=0, atol=0)
        torch.testing.assert_close(lazy.covariance_sqrt.to_dense(), unrounded.covariance_sqrt.to_dense(), rtol=0,
                                   atol=0)
        expected = tt_svd(exact.reshape(4 * (3,)), tol=0.3, reference_norm=float(torch.linalg.vector_norm(exact)))
        assert lazy.mean.ranks == TTVector(expected).ranks and max(lazy.mean.ranks) < max(unrounded.mean.ranks)
        torch.testing.assert_close(lazy.mean.to_dense(), TTVector(expected).to_dense(), rtol=0, atol=1e-14)
        torch.testing.assert_close(lazy._dense_mean(), exact, rtol=0, atol=0)  # the read changed nothing
    # a block update takes the rounded mean; the next rows' change is counted from it
    g = torch.Generator().manual_seed(5)
    kf = TTKalmanFilter((3, 3, 3, 3), 1.0, truncation={**rules, "mean": 0.3})
    kf.update_block(torch.randn(4, 81, generator=g, dtype=torch.float64), torch.randn(4, generator=g), 0.01)
    start = kf.mean.to_dense()
    for _ in range(5):
        row = torch.randn(81, generator=g, dtype=torch.float64)
        kf.update(TTVector.from_dense(row, (3, 3, 3, 3)), float(torch.randn(1, generator=g)), 0.01)
    dense = kf._dense_mean()
    expected = tt_svd(dense.reshape(4 * (3,)), tol=0.3, reference_norm=float(torch.linalg.vector_norm(dense - start)))
    torch.testing.assert_close(kf.mean.to_dense(), TTVector(expected).to_dense(), rtol=0, atol=1e-14)


def test_row_update_relative_to_the_state_rounds_the_mean_after_every_row():
    """With ``round_relative_to="state"`` (the paper's rounding) every row's mean is rounded at once, read or not."""
    rules = {"row": 0.0, "gain": 1e-8, "innovation": 1e-8, "covariance": (1e-8, 81), "mean": 0.3}
    unread = _row_filter_run(rules, read_every_row=False, round_relative_to="state")
    read = _row_filter_run(rules, read_every_row=True, round_relative_to="state")
    torch.testing.assert_close(unread.mean.to_dense(), read.mean.to_dense(), rtol=0, atol=0)
    assert unread.mean.ranks == read.mean.ranks
