"""ALS smoothing of a TT weight vector and its Laplace variance, against dense computations."""

import itertools

import pytest
import torch

from tnbayes.inference.tt_als import TTALS, tt_centre_design
from tnbayes.tensors import TTVector


def _problem(K, M, n=60, seed=0):
    generator = torch.Generator().manual_seed(seed)
    phi = torch.randn(K, n, M, generator=generator, dtype=torch.float64)
    root = 0.5 + torch.rand(K, M, generator=generator, dtype=torch.float64)
    y = torch.randn(n, generator=generator, dtype=torch.float64)
    return phi, root, y


def _dense_psi(phi, root):
    """Rows ψ(x) = ⊗_k (l_k ⊙ φ_k(x)) (n, M^K), in the TT's index order."""
    psi = phi * root[:, None, :]
    rows = psi[0]
    for k in range(1, psi.shape[0]):
        rows = torch.einsum("na,nm->nam", rows, psi[k]).reshape(psi.shape[1], -1)
    return rows


def _chunks(phi, y, size=17):
    return lambda: ((phi[:, i:i + size], y[i:i + size]) for i in range(0, y.shape[0], size))


def _objective(cores, phi, root, y, noise):
    u = TTVector(cores).to_dense().reshape(-1)
    residual = y - _dense_psi(phi, root) @ u
    return float(residual @ residual + noise * u @ u)


def test_full_rank_sweep_reaches_the_dense_map():
    """At full TT ranks the centre core 1 of K = 3 spans every weight: one sweep gives the ridge solution."""
    K, M, noise = 3, 3, 0.3
    phi, root, y = _problem(K, M)
    start = TTVector.random((M,) * K, 3, generator=torch.Generator().manual_seed(1))
    engine = TTALS(start.cores, root, noise, _chunks(phi, y)).run(1, 0.0)
    psi = _dense_psi(phi, root)
    expected = torch.linalg.solve(psi.T @ psi + noise * torch.eye(M ** K, dtype=torch.float64), psi.T @ y)
    torch.testing.assert_close(TTVector(engine.cores).to_dense().reshape(-1), expected, rtol=1e-9, atol=1e-10)


def test_low_rank_sweeps_never_increase_the_objective_and_track_it_exactly():
    K, M, noise = 4, 3, 0.1
    phi, root, y = _problem(K, M, n=80)
    start = TTVector.random((M,) * K, 2, generator=torch.Generator().manual_seed(2))
    before = _objective(start.cores, phi, root, y, noise)
    engine = TTALS(start.cores, root, noise, _chunks(phi, y)).run(6, 0.0)
    history = engine.objective_history
    assert engine.sweeps == 6 and len(history) == (2 * K - 1) + 5 * (2 * K - 2)  # core 0 ends a sweep
    assert history[0] <= before * (1 + 1e-12)
    assert all(b <= a * (1 + 1e-10) for a, b in zip(history, history[1:]))
    assert history[-1] == pytest.approx(_objective(engine.cores, phi, root, y, noise), rel=1e-9)
    assert max(max(core.shape[0], core.shape[2]) for core in engine.cores) <= 2  # the ranks are kept


def test_tol_stops_the_sweeps():
    phi, root, y = _problem(3, 3)
    start = TTVector.random((3, 3, 3), 2, generator=torch.Generator().manual_seed(3))
    engine = TTALS(start.cores, root, 0.2, _chunks(phi, y)).run(50, 1e-3)
    assert engine.converged and engine.sweeps < 50


def _tangent_block_basis(laplace, k):
    """Dense basis (M^K, d_k) of core k's tangent block: ℓ-cores ⊗ (Q_k ⊗ I) ⊗ ρ-cores, read off the factor."""
    K = len(laplace.left_cores)
    size = laplace.factors[k].shape[0]
    columns = []
    for local in torch.eye(size, dtype=torch.float64):
        cores = [*laplace.left_cores[:k], local.reshape(laplace.left_cores[k].shape), *laplace.right_cores[k + 1:]]
        columns.append(TTVector(cores).to_dense().reshape(-1))
    assert len(cores) == K
    return torch.stack(columns, 1)  # (M^K, s_k): the centre's local coordinates as dense weights


@pytest.mark.parametrize("K, M, rank", [(3, 3, 2), (4, 2, 2), (2, 3, 3)])
def test_laplace_variance_is_the_block_gauss_newton_variance_of_the_tangent_space(K, M, rank):
    noise = 0.2
    phi, root, y = _problem(K, M)
    start = TTVector.random((M,) * K, rank, generator=torch.Generator().manual_seed(4))
    engine = TTALS(start.cores, root, noise, _chunks(phi, y)).run(3, 0.0)
    laplace = engine.laplace()
    # both gauges are the smoothed mean
    dense = TTVector(engine.cores).to_dense()
    torch.testing.assert_close(TTVector(laplace.left_cores).to_dense(), dense, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(TTVector(laplace.right_cores).to_dense(), dense, rtol=1e-10, atol=1e-12)
    psi = _dense_psi(phi, root)
    phi_test, _, _ = _problem(K, M, n=9, seed=5)
    psi_test = _dense_psi(phi_test, root)
    precision = psi.T @ psi + noise * torch.eye(M ** K, dtype=torch.float64)
    expected = torch.zeros(9, dtype=torch.float64)
    blocks = []
    for k in range(K):
        local = _tangent_block_basis(laplace, k)  # local coordinates → dense weights
        tangent = local @ laplace.factors[k]  # the block's directions, scaled
        if tangent.shape[1] == 0:
            blocks.append(tangent)
            continue
        # the block's directions are orthonormal images of the complement: (F Fᵀ)⁻¹ restricted = its precision
        basis = torch.linalg.qr(tangent).Q
        blocks.append(basis)
        block_precision = basis.T @ precision @ basis
        expected += noise * ((psi_test @ basis) @ torch.linalg.inv(block_precision) * (psi_test @ basis)).sum(1)
    torch.testing.assert_close(laplace.variance(phi_test * root[:, None, :], noise), expected, rtol=1e-8, atol=1e-12)
    # the blocks are mutually orthogonal (no direction counted twice)
    for a, b in itertools.combinations(blocks, 2):
        if a.shape[1] and b.shape[1]:
            assert float((a.T @ b).abs().max()) < 1e-9
    covariance = laplace.covariance(phi_test * root[:, None, :], noise)
    torch.testing.assert_close(covariance.diagonal(), expected, rtol=1e-8, atol=1e-12)


def test_full_rank_two_cores_laplace_is_the_exact_posterior():
    """K = 2 at full rank: core 0's block is empty (its gauge is square), core 1's is every weight."""
    K, M, noise = 2, 3, 0.25
    phi, root, y = _problem(K, M)
    start = TTVector.random((M, M), M, generator=torch.Generator().manual_seed(6))
    laplace = TTALS(start.cores, root, noise, _chunks(phi, y)).run(2, 0.0).laplace()
    assert laplace.factors[0].shape[1] == 0
    psi = _dense_psi(phi, root)
    phi_test, _, _ = _problem(K, M, n=7, seed=7)
    psi_test = _dense_psi(phi_test, root)
    exact = noise * (psi_test @ torch.linalg.inv(psi.T @ psi + noise * torch.eye(M * M, dtype=torch.float64))
                     * psi_test).sum(1)
    torch.testing.assert_close(laplace.variance(phi_test * root[:, None, :], noise), exact, rtol=1e-9, atol=1e-12)


def test_centre_design_is_the_derivative_of_the_prediction():
    """ψ(x)ᵀu = a_k(x)ᵀ vec(G_k) for any centre k when the other cores are the TT's own."""
    K, M = 4, 3
    phi, root, _ = _problem(K, M, n=5)
    tt = TTVector.random((M,) * K, 2, generator=torch.Generator().manual_seed(8))
    psi = phi * root[:, None, :]
    prediction = tt.dot_rank_one(psi)
    for k in range(K):
        design = tt_centre_design(psi, tt.cores, tt.cores, k)
        torch.testing.assert_close(design @ tt.cores[k].reshape(-1), prediction, rtol=1e-10, atol=1e-12)


def test_bad_input():
    phi, root, y = _problem(2, 2)
    start = TTVector.random((2, 2), 1, generator=torch.Generator().manual_seed(9))
    with pytest.raises(ValueError, match="noise_variance"):
        TTALS(start.cores, root, 0.0, _chunks(phi, y))
    with pytest.raises(ValueError, match="no rows"):
        TTALS(start.cores, root, 0.1, lambda: iter(())).run(1, 0.0)
