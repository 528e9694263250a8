"""Out-of-core chunk sources, data-parallel fits on torch.distributed (gloo, via torchrun), float32 fits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.data import ChunkedData, as_chunked, summarize

REPO = Path(__file__).resolve().parents[1]
GIVEN = dict(rank=4, num_basis=8, lengthscale=[1.0, 0.7, 1.2], penalty=0.01, noise_variance=0.01, max_sweeps=3)


def _data(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = np.sin(X[:, 0]) + np.cos(2 * X[:, 1]) * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def _relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


# ---------------------------------------------------------------------- chunk sources
def test_summary_matches_numpy_and_does_not_depend_on_chunking():
    X, y = _data(1000)
    coarse = summarize(ChunkedData.from_arrays(X, y, 1000), sample_size=100)
    fine = summarize(ChunkedData.from_arrays(X, y, 37), sample_size=100)
    for s in (coarse, fine):
        assert s.num_rows == s.local_rows == 1000
        np.testing.assert_allclose(s.x_mean.numpy(), X.mean(0), rtol=0, atol=1e-13)
        np.testing.assert_allclose(s.x_variance.numpy(), X.var(0), rtol=1e-12)
        np.testing.assert_allclose(float(s.y_variance), y.var(), rtol=1e-12)
        np.testing.assert_array_equal(s.x_min.numpy(), X.min(0))
        np.testing.assert_array_equal(s.x_max.numpy(), X.max(0))
        assert s.sample_X.shape == (100, 3) and s.sample_y.shape == (100,)
    # the sample consists of training rows, with their targets
    rows = {tuple(np.round(r, 12)) for r in np.column_stack([X, y])}
    sample = np.column_stack([fine.sample_X.numpy(), fine.sample_y.numpy()])
    assert all(tuple(np.round(r, 12)) in rows for r in sample)


def test_npy_parquet_dataloader_and_list_sources_give_the_same_rows(tmp_path):
    X, y = _data(500)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "target": y})
    pq.write_table(table.slice(0, 300), tmp_path / "part0.parquet")
    pq.write_table(table.slice(300), tmp_path / "part1.parquet")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(X), torch.from_numpy(y)),
                                         batch_size=128)
    sources = {
        "npy": ChunkedData.from_npy(tmp_path / "X.npy", tmp_path / "y.npy", chunk_size=64),
        "parquet": ChunkedData.from_parquet(tmp_path / "part*.parquet", ["a", "b", "c"], "target", batch_size=100),
        "dataloader": ChunkedData.from_dataloader(loader),
        "list": as_chunked([(X[:250], y[:250]), (X[250:], y[250:])]),
    }
    assert sources["parquet"].num_rows == 500
    for name, source in sources.items():
        for _ in range(2):  # re-iterable
            chunks = list(source)
            np.testing.assert_array_equal(torch.cat([c[0] for c in chunks]).numpy(), X, err_msg=name)
            np.testing.assert_array_equal(torch.cat([c[1] for c in chunks]).numpy(), y, err_msg=name)


def test_shards_partition_the_chunks():
    X, y = _data(1000)
    data = ChunkedData.from_arrays(X, y, 90)
    parts = [torch.cat([c[0] for c in data.shard(k, 3)]) for k in range(3)]
    assert sum(p.shape[0] for p in parts) == 1000
    np.testing.assert_array_equal(np.sort(torch.cat(parts).numpy(), axis=0), np.sort(X, axis=0))


def test_bad_chunk_sources_get_clear_errors(tmp_path):
    X, y = _data(200)
    with pytest.raises(TypeError, match="one-shot iterator"):
        tnbayes.CPDKernelMachine(**GIVEN).fit((pair for pair in [(X, y)]))
    bad = X.copy()
    bad[150, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        tnbayes.CPDKernelMachine(**GIVEN).fit(ChunkedData.from_arrays(bad, y, 100))
    with pytest.raises(ValueError, match="same columns"):
        tnbayes.CPDKernelMachine(**GIVEN).fit([(X[:100], y[:100]), (X[100:, :2], y[100:])])
    with pytest.raises(ValueError, match="no rows"):
        tnbayes.CPDKernelMachine(**GIVEN).fit(ChunkedData(lambda: iter([])))
    with pytest.raises(ValueError, match=r"\(X, y\) pair"):
        tnbayes.CPDKernelMachine(**GIVEN).fit([X[:100]])
    with pytest.raises(TypeError, match="in-memory arrays only"):
        tnbayes.HilbertGP().fit(ChunkedData.from_arrays(X, y))
    with pytest.raises(FileNotFoundError, match="no parquet file"):
        ChunkedData.from_parquet(tmp_path / "missing*.parquet", ["a"], "t")
    with pytest.raises(ValueError, match="needs the targets"):
        tnbayes.CPDKernelMachine(**GIVEN).fit(X)
    with pytest.raises(RuntimeError, match="init_process_group"):
        tnbayes.CPDKernelMachine(**GIVEN, distributed=True).fit(X, y)


# ---------------------------------------------------------------------- out-of-core fits
def test_chunked_fit_equals_in_memory_fit_with_given_hyperparameters(tmp_path):
    X, y = _data()
    in_memory = tnbayes.CPDKernelMachine(**GIVEN).fit(X, y)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    streamed = tnbayes.CPDKernelMachine(**GIVEN).fit(ChunkedData.from_npy(tmp_path / "X.npy", tmp_path / "y.npy", 700))
    assert streamed.n_train_ == 3000 and streamed.n_features_in_ == 3
    assert _relative_difference(streamed.factors_, in_memory.factors_) < 1e-9
    a, b = streamed.posterior(X[:50]), in_memory.posterior(X[:50])
    torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-8, atol=0)
    assert streamed.residual_noise_variance_ == pytest.approx(in_memory.residual_noise_variance_, rel=1e-9)
    streamed.save(tmp_path / "m.pt")
    loaded = tnbayes.load_model(tmp_path / "m.pt")
    torch.testing.assert_close(loaded.posterior(X[:50]).mean, a.mean, rtol=0, atol=0)


def test_chunked_fit_with_default_hyperparameters_fits_well():
    X, y = _data(2500)
    Xte, yte = _data(500, seed=1)
    model = tnbayes.CPDKernelMachine().fit(ChunkedData.from_arrays(X, y, 400))
    assert model.hyperparameter_source_.startswith("marginal likelihood on 1000 points")
    metrics = tnbayes.metrics.evaluate(model.posterior(Xte), yte)
    reference = tnbayes.metrics.evaluate(tnbayes.CPDKernelMachine().fit(X, y).posterior(Xte), yte)
    assert metrics["rmse"] < 0.13 and metrics["rmse"] < 1.1 * reference["rmse"]
    assert 0.9 <= metrics["coverage_95"] <= 0.99


def test_chunked_qtkm_equals_in_memory_with_given_hyperparameters():
    X, y = _data(1500)
    kwargs = dict(rank=4, num_basis=8, period=3.0, penalty=1e-4, max_sweeps=3, noise_variance=0.01)
    in_memory = tnbayes.QTKM(**kwargs).fit(X, y)
    streamed = tnbayes.QTKM(**kwargs).fit(ChunkedData.from_arrays(X, y, 256))
    assert _relative_difference(streamed.factors_, in_memory.factors_) < 1e-9


def test_float32_fit_accumulates_in_float32_and_stays_close_to_float64():
    X, y = _data()
    single = tnbayes.CPDKernelMachine(**GIVEN, dtype="float32").fit(ChunkedData.from_arrays(X, y, 1000))
    double = tnbayes.CPDKernelMachine(**GIVEN).fit(X, y)
    assert single.factors_.dtype == torch.float32
    post = single.posterior(X[:200])
    assert post.mean.dtype == torch.float32
    np.testing.assert_allclose(post.mean.double().numpy(), double.posterior(X[:200]).mean.numpy(), atol=2e-3)


# ---------------------------------------------------------------------- torch.distributed
@pytest.mark.slow
def test_two_process_gloo_fit_equals_single_process_fit(tmp_path):
    """``torchrun --nproc_per_node=2 examples/distributed_fit.py``: both ranks end with the same cores, equal to
    the single-process in-memory fit to 1e-10 (relative; only the summation order differs)."""
    X, y = _data(4000)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29517",
               str(REPO / "examples" / "distributed_fit.py"), "--x", str(tmp_path / "X.npy"),
               "--y", str(tmp_path / "y.npy"), "--out", str(tmp_path / "model.pt"), "--out-all",
               "--chunk-size", "500", "--rank", "4", "--num-basis", "8", "--lengthscale", "1.0", "0.7", "1.2",
               "--penalty", "0.01", "--noise-variance", "0.01", "--max-sweeps", "3"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])
    assert report["processes"] == 2 and report["rows"] == 4000
    ranks = [tnbayes.load_model(tmp_path / f"model.pt.rank{k}") for k in range(2)]
    single = tnbayes.CPDKernelMachine(**GIVEN).fit(X, y)
    assert torch.equal(ranks[0].factors_, ranks[1].factors_)
    assert _relative_difference(ranks[0].factors_, single.factors_) < 1e-10
    assert _relative_difference(ranks[0].core_choleskys_, single.core_choleskys_) < 1e-10
    torch.testing.assert_close(ranks[0].posterior(X[:100]).mean, single.posterior(X[:100]).mean, rtol=0, atol=1e-9)


def test_tt_kalman_filters_a_chunk_source_in_one_pass():
    """Untruncated, the filter's posterior does not depend on the row order: chunk by chunk equals all rows."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(300, 2))
    y = np.sin(3 * X[:, 0]) * X[:, 1] + 0.05 * rng.normal(size=300)
    kwargs = dict(num_basis=6, lengthscale=[0.6, 0.8], outputscale=1.0, noise_variance=0.01, tol=0.0, max_rank=None)
    in_memory = tnbayes.TTKalmanGP(**kwargs).fit(X, y)
    streamed = tnbayes.TTKalmanGP(**kwargs).fit(ChunkedData.from_arrays(X, y, 70))
    assert streamed.rows_used_ == 300 and streamed.n_train_ == 300
    a, b = streamed.posterior(X[:40]), in_memory.posterior(X[:40])
    torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=1e-7)
    torch.testing.assert_close(a.variance, b.variance, rtol=1e-6, atol=0)


def test_tt_kalman_smooths_a_chunk_source_to_the_in_memory_map():
    """Rank-capped, the filter depends on the row order (chunk by chunk against one permutation), but the ALS
    smoothing that follows sweeps every row: the smoothed means of both fits are close, and the chunk source keeps
    the marginal-likelihood σ² (no held-out refit without the rows in memory)."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, size=(300, 3))
    y = np.sin(3 * X[:, 0]) * X[:, 1] + X[:, 2] + 0.05 * rng.normal(size=300)
    kwargs = dict(num_basis=5, lengthscale=[0.6, 0.8, 1.0], outputscale=1.0, max_rank=3, time_budget=None,
                  max_sweeps=30)
    in_memory = tnbayes.TTKalmanGP(**kwargs).fit(X, y)
    streamed = tnbayes.TTKalmanGP(**kwargs).fit(ChunkedData.from_arrays(X, y, 70))
    assert streamed.smoothing_sweeps_ >= 1 and in_memory.smoothing_sweeps_ >= 1
    assert streamed.held_out_noise_variance_ is None and streamed.noise_variance_ == streamed.measurement_noise_
    assert in_memory.held_out_noise_variance_ >= in_memory.measurement_noise_
    a, b = streamed.posterior(X[:60]).mean, in_memory.posterior(X[:60]).mean
    assert float((a - b).abs().max()) < 0.05 * float(np.std(y))
