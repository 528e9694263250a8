"""The ALS engine (tnbayes.inference.als) against dense computations: monotone objective, exact ridge solutions at
full rank, chunking, caches and precision; complex and mixture feature maps; skipped mixture components."""

import numpy as np
import pytest
import torch

from tnbayes.basis import FourierPolynomialFeatures, PeriodMixtureFeatures
from tnbayes.inference import CPDALS
from tnbayes.tensors import cpd_to_dense
from tests.cpd_problems import (FourierFeatures as _FourierFeatures, cpd_data as _data, discrete_data as _discrete_data,
                                fl_data, hilbert_features as _features)


@pytest.mark.parametrize("penalty_form", ["full", "diagonal"])
@pytest.mark.parametrize("normalize", [True, False])
def test_objective_never_increases(penalty_form, normalize):
    X, y = _data(200, 3)
    engine = CPDALS(_features(3, 6), torch.tensor(X), torch.tensor(y), 4, 0.05, penalty_form=penalty_form,
                    normalize_cores=normalize, seed=3)
    engine.run(8, tol=0.0)
    history = np.array(engine.history)
    assert len(history) > 20
    assert np.all(np.diff(history) <= 1e-10 * history[0]), np.diff(history).max()
    # the objective tracked from the normal equations equals a direct evaluation
    assert engine.objective() == pytest.approx(history[-1], rel=1e-9)


def test_full_rank_map_equals_dense_ridge_solution():
    X, y = _data(300, 2)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    feats = _features(2, 6)
    Z = feats.basis.features(Xt, [0.5, 0.5])
    Phi = (Z[0][:, :, None] * Z[1][:, None, :]).reshape(len(X), -1)
    lam = 0.02
    w = torch.linalg.solve(Phi.T @ Phi + lam * torch.eye(36, dtype=Phi.dtype), Phi.T @ yt)
    engine = CPDALS(feats, Xt, yt, 6, lam, seed=1)
    engine.run(200, tol=1e-15)
    assert float((engine.predict(Xt) - Phi @ w).abs().max()) < 1e-6
    assert float((cpd_to_dense(engine.factors).reshape(-1) - w).abs().max()) < 1e-6


def test_chunk_size_does_not_change_the_result():
    X, y = _data(257, 3)
    runs = []
    for chunk in (16, 100, 10_000):
        engine = CPDALS(_features(3, 5), torch.tensor(X), torch.tensor(y), 3, 0.1, chunk_size=chunk, seed=0)
        engine.run(4, tol=0.0)
        runs.append(torch.stack(engine.factors))
    for other in runs[1:]:
        torch.testing.assert_close(other, runs[0], rtol=1e-9, atol=1e-11)


def test_projection_cache_off_gives_the_same_fit():
    X, y = _data(120, 3)
    a = CPDALS(_features(3, 5), torch.tensor(X), torch.tensor(y), 3, 0.1, seed=0)
    b = CPDALS(_features(3, 5), torch.tensor(X), torch.tensor(y), 3, 0.1, seed=0, memory_budget=0)
    assert a.caches_projections and not b.caches_projections
    a.run(3, tol=0.0)
    b.run(3, tol=0.0)
    torch.testing.assert_close(torch.stack(a.factors), torch.stack(b.factors), rtol=1e-9, atol=1e-11)


def test_float32_engine_runs_and_tracks_float64():
    X, y = _data(200, 2)
    f64 = CPDALS(_features(2, 6), torch.tensor(X), torch.tensor(y), 3, 0.1, seed=0)
    f32 = CPDALS(_features(2, 6), torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32), 3, 0.1, seed=0)
    f64.run(5, tol=0.0)
    f32.run(5, tol=0.0)
    assert f32.factors[0].dtype == torch.float32
    diff = (f32.predict(torch.tensor(X, dtype=torch.float32)).double() - f64.predict(torch.tensor(X))).abs().max()
    assert float(diff) < 1e-3


def test_engine_rejects_bad_arguments():
    X, y = torch.zeros(5, 2, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
    with pytest.raises(ValueError, match="rank"):
        CPDALS(_features(), X, y, 0, 0.1)
    with pytest.raises(ValueError, match="penalty_form"):
        CPDALS(_features(), X, y, 2, 0.1, penalty_form="l1")
    with pytest.raises(ValueError, match="penalty"):
        CPDALS(_features(), X, y, 2, -1.0)
    with pytest.raises(MemoryError, match="Lower the rank"):
        CPDALS(_features(m=1000), X, y, 100_000, 0.1)


def _dense_design(features, X, weights):
    """Σ_p c_p (Φ^p_1 ⊙ … row-wise Kronecker) for two modes → (N, M²)."""
    parts = []
    for p in range(features.num_components):
        a, b = features.mode_features(X, 0)[p], features.mode_features(X, 1)[p]
        parts.append(weights[p] * (a[:, :, None] * b[:, None, :]).reshape(len(X), -1))
    return sum(parts)


@pytest.mark.parametrize("periods, weights", [((3.0,), (1.0,)), ((3.0, 5.0), (0.7, -0.4))])
def test_complex_and_mixture_full_rank_match_dense_complex_ridge(periods, weights):
    X, y = _data(200, 2)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    feats = _FourierFeatures(2, 6, periods)
    lam = 0.05
    engine = CPDALS(feats, Xt, yt, 6, lam, component_weights=weights, seed=2)
    engine.run(300, tol=1e-15)
    A = _dense_design(feats, Xt, weights)
    w = torch.linalg.solve(A.mH @ A + lam * torch.eye(36, dtype=A.dtype), A.mH @ yt.to(A.dtype))
    assert engine.factors[0].is_complex()
    assert float((engine.predict(Xt) - A @ w).abs().max()) < 1e-6
    assert np.all(np.diff(engine.history) <= 1e-10 * engine.history[0])
    # per-component predictions combine to the prediction
    comps = engine.component_predictions(Xt)
    torch.testing.assert_close(comps @ torch.tensor(weights, dtype=comps.dtype), engine.predict(Xt))


@pytest.mark.parametrize("group_inputs", [False, "auto"])
def test_partial_products_give_the_same_sweeps(group_inputs):
    """Prefix/suffix products of the cached projections (O(K) per sweep) give the same cores as recomputing
    ⊙_{k≠d} for every update — with core normalisation, several components and partly grouped inputs."""
    X, y = _discrete_data(300, 3, [4, 50, 300])
    for feats, weights in ((FourierPolynomialFeatures(3, 8, period=2.0, quantized=True), None),
                           (PeriodMixtureFeatures(3, 8, (1.5, 3.0, 7.0), center=0.0), (0.6, 0.0, -0.3))):
        engines = []
        for keep in (False, True):
            engine = CPDALS(feats, X, y, 3, 0.05, component_weights=weights, seed=2, group_inputs=group_inputs)
            assert engine.caches_projections and engine.keeps_partial_products
            engine.keeps_partial_products = keep
            engine.run(3, tol=0.0)
            engine.set_component_weights((0.5, 0.2, 0.1) if weights else (1.0,))  # changes the active support
            engine.run(1, tol=0.0)
            engines.append(engine)
        for fa, fb in zip(engines[0].factors, engines[1].factors):
            torch.testing.assert_close(fa, fb, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(engines[0].history, engines[1].history, rtol=1e-10)


def test_quantized_engine_solves_2r_unknowns_per_core():
    X = torch.rand(50, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 0.5
    y = torch.sin(4 * X[:, 0]) * X[:, 1]
    features = FourierPolynomialFeatures(3, 16, "fourier", 2.0, quantized=True)
    engine = CPDALS(features, X, y, 5, 1.0)
    assert features.num_modes == 12
    assert engine.normal_equations(0).gram.shape == (10, 10)
    engine.run(5)
    assert all(b <= a * (1 + 1e-9) for a, b in zip(engine.history, engine.history[1:]))


def test_zero_weight_families_are_skipped_and_change_nothing():
    X, y = fl_data(120, 2)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    full = PeriodMixtureFeatures(2, 4, [2.0, 5.0, 9.0])
    engine = CPDALS(full, Xt, yt, 3, 0.01, component_weights=[0.5, 0.0, -0.3], seed=3)
    assert engine.active_components == (0, 2)
    reduced = CPDALS(PeriodMixtureFeatures(2, 4, [2.0, 9.0]), Xt, yt, 3, 0.01, component_weights=[0.5, -0.3], seed=3)
    engine.run(3, tol=0.0)
    reduced.run(3, tol=0.0)
    for a, b in zip(engine.factors, reduced.factors):
        torch.testing.assert_close(a, b)
    # per-family predictions still cover every family (the λ update needs them)
    assert engine.component_predictions(Xt).shape == (120, 3)
    # re-activating a family works (FISTA may move a λ away from zero)
    engine.set_component_weights([0.5, 0.2, -0.3])
    assert engine.active_components == (0, 1, 2)
    manual = engine.component_predictions(Xt) @ torch.tensor([0.5, 0.2, -0.3], dtype=torch.complex128)
    torch.testing.assert_close(engine.predict(Xt), manual)


def test_regularizer_is_a_deprecated_alias_of_penalty_form():
    X, y = _data(100, 2)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    new = CPDALS(_features(2, 5), Xt, yt, 3, 0.05, penalty_form="diagonal", seed=1)
    with pytest.warns(FutureWarning, match="penalty_form"):
        old = CPDALS(_features(2, 5), Xt, yt, 3, 0.05, regularizer="diagonal", seed=1)
    assert old.penalty_form == "diagonal"
    new.run(3, tol=0.0)
    old.run(3, tol=0.0)
    assert old.history == new.history
    with pytest.warns(FutureWarning, match="penalty_form"):
        assert old.regularizer == "diagonal"


@pytest.mark.parametrize("name, home", [("cpd_predict", "tnbayes.tensors"), ("design_matrix", "tnbayes.tensors"),
                                        ("mode_projections", "tnbayes.tensors"), ("product_except", "tnbayes.tensors"),
                                        ("StreamedRows", "tnbayes.data"), ("TensorProductFeatures", "tnbayes.basis")])
def test_names_that_left_the_inference_package_warn_there(name, home):
    import importlib

    import tnbayes.inference

    with pytest.warns(FutureWarning, match=f"moved to {home}.{name}"):
        moved = getattr(tnbayes.inference, name)
    assert moved is getattr(importlib.import_module(home), name)
    assert name not in tnbayes.inference.__all__


def test_regularizers_is_a_deprecated_alias_of_penalty_forms():
    import tnbayes.inference
    from tnbayes.inference import als

    for module in (tnbayes.inference, als):
        with pytest.warns(FutureWarning, match="PENALTY_FORMS"):
            assert module.REGULARIZERS == tnbayes.inference.PENALTY_FORMS == ("full", "diagonal")


def test_a_deadline_ends_the_sweeps_only_before_one_that_would_end_past_it():
    """At least one sweep runs; a deadline already past stops after it, one that falls on the last sweep does not
    count as a stop, and no deadline runs every sweep."""
    import time

    X, y = (torch.tensor(a) for a in _data(200))
    feats = FourierPolynomialFeatures(2, 6, period=3.0)

    def run(deadline):
        engine = CPDALS(feats, X, y, 3, 1e-3, seed=0)
        engine.run(4, tol=0.0, deadline=deadline)
        return engine

    past = run(time.perf_counter() - 1.0)
    assert len(past.sweep_objectives) == 1 and past.stopped_at_deadline and not past.converged
    free = run(None)
    assert len(free.sweep_objectives) == 4 and not free.stopped_at_deadline
    far = run(time.perf_counter() + 3600.0)
    assert len(far.sweep_objectives) == 4 and not far.stopped_at_deadline
    np.testing.assert_allclose(far.sweep_objectives, free.sweep_objectives)  # the deadline changes no sweep
    single = CPDALS(feats, X, y, 3, 1e-3, seed=0)
    single.run(1, tol=0.0, deadline=time.perf_counter() - 1.0)  # one sweep asked, one run: not a stop
    assert len(single.sweep_objectives) == 1 and not single.stopped_at_deadline


def test_largest_rank_with_partial_products_is_where_the_engine_keeps_them():
    from tnbayes.inference.als import PARTIAL_PRODUCT_COPIES, largest_rank_with_partial_products

    X, y = (torch.tensor(a) for a in _data(120))
    feats = PeriodMixtureFeatures(2, 8, (1.5, 3.0), center=0.0)
    per_rank = feats.num_modes * feats.num_components * X.shape[0] * 16  # complex128
    budget = PARTIAL_PRODUCT_COPIES * per_rank * 5 + per_rank  # room for rank 5, not 6
    assert largest_rank_with_partial_products(feats, X.shape[0], torch.float64, memory_budget=budget) == 5
    for rank, kept in ((5, True), (6, False)):
        engine = CPDALS(feats, X, y, rank, 1e-3, seed=0, memory_budget=budget)
        assert engine.caches_projections and engine.keeps_partial_products == kept


def test_the_deadline_predicts_the_next_sweep_from_the_last_ones_length(monkeypatch):
    """With a clock that advances 5 s at each reading (two readings a sweep: its start and its end), a deadline 25 s
    after the start lets the sweeps ending at 10, 20 and 30 s run: after each, another of 5 s would end at 15, 25
    (≤ 25, not past it) and then 35 s, past it."""
    import tnbayes.inference.als as als_module

    X, y = (torch.tensor(a) for a in _data(100))
    engine = CPDALS(FourierPolynomialFeatures(2, 4, period=3.0), X, y, 2, 1e-3, seed=0)
    readings = iter(range(5, 10**6, 5))
    monkeypatch.setattr(als_module.time, "perf_counter", lambda: float(next(readings)))
    engine.run(10, tol=0.0, deadline=25.0)
    assert len(engine.sweep_objectives) == 3 and engine.stopped_at_deadline
