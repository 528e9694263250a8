"""Every benchmark entry runs end to end at tiny sizes (its smoke configuration in benchmarks/suite.py) and
writes a Markdown result with a table into ``results/<entry>/``, every file named after the entry; the suite and
the groups know every entry; ``tnbayes.compare`` runs what the paper entries need."""

from __future__ import annotations

import numpy as np
import pytest

from pathlib import Path

from benchmarks.__main__ import ENTRIES, GROUPS
from benchmarks.suite import CONFIGS, run_entry

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_every_entry_has_a_suite_configuration():
    assert set(ENTRIES) - {"suite"} == set(CONFIGS)


def test_every_entry_module_is_in_its_group_and_the_readme():
    modules = {path.stem: path.parent.name for path in BENCHMARKS.glob("*/*.py") if not path.stem.startswith("_")}
    assert modules == {name: group for group, names in GROUPS.items() for name in names}
    readme = (BENCHMARKS / "README.md").read_text()
    for group, names in GROUPS.items():
        for name in names:
            assert f"`{name}`" in readme and f"results/{name}/" in readme, name


def test_committed_results_lie_in_their_entry_folder():
    """``results/<entry>/<entry>…`` (and ``results/small/<entry>/<entry>…`` for the suite's small run)."""
    for root in (BENCHMARKS / "results", BENCHMARKS / "results" / "small"):
        for path in root.iterdir():
            if path.name == "small":
                continue
            assert path.is_dir() and path.name in ENTRIES, path
            assert all(f.name.startswith(path.name) for f in path.iterdir()), sorted(path.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_entry_smoke_run(name, tmp_path, monkeypatch):
    results = tmp_path / "results"
    monkeypatch.setenv("TNBAYES_BENCH_RESULTS", str(results))
    monkeypatch.setenv("TNBAYES_SCALE_OUT_DIR", str(tmp_path / "work" / "scale_out"))  # scale_out's scratch data
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run_entry(name, CONFIGS[name][1])
    folders = sorted(results.iterdir())
    assert [path.name for path in folders] == [name], f"{name} wrote outside results/{name}/: {folders}"
    files = sorted(results.joinpath(name).iterdir())
    assert all(path.name.startswith(name) for path in files), f"{name} wrote files not named after it: {files}"
    written = [path for path in files if path.suffix == ".md"]
    assert written, f"{name} wrote no Markdown result"
    assert any("|---" in path.read_text() for path in written), f"{name} wrote no table"


@pytest.mark.slow
def test_tt_kalman_cost_fit_smoke_run(tmp_path, monkeypatch):
    """``tt_kalman_cost --fit`` (the time budget's TTKalmanGP constants) measures the model and prints the fit."""
    results = tmp_path / "results"
    monkeypatch.setenv("TNBAYES_BENCH_RESULTS", str(results))
    run_entry("tt_kalman_cost", ["--fit", "--dims", "2", "--num-basis", "4", "--ranks", "3", "--batches", "4", "8",
                                 "--rows", "24", "--warm-rows", "8", "--variant", "fit"])
    text = (results / "tt_kalman_cost" / "tt_kalman_cost_fit.md").read_text()
    assert "## TT_KALMAN_COST, fitted to these rows" in text and '"core_per_batch":' in text
    assert text.count("\n| 2 | 4 | 3 |") == 2  # one row per batch size


@pytest.mark.slow
def test_tt_kalman_cost_fit_smoothing_smoke_run(tmp_path, monkeypatch):
    """``tt_kalman_cost --fit-smoothing`` (the time budget's smoothing constants) measures the smoothing with the
    noise given and estimated on held-out rows, and prints the fit."""
    results = tmp_path / "results"
    monkeypatch.setenv("TNBAYES_BENCH_RESULTS", str(results))
    run_entry("tt_kalman_cost", ["--fit-smoothing", "--dims", "3", "--num-basis", "4", "--ranks", "3",
                                 "--smoothing-rows", "80", "160", "--held-out-dims", "3", "--variant", "smoothing"])
    text = (results / "tt_kalman_cost" / "tt_kalman_cost_smoothing.md").read_text()
    assert "## TT_SMOOTHING_COST, fitted to these rows" in text and '"gram_entry":' in text
    assert text.count("\n| 3 | 4 | 3 | 160 | 0 |") == 1 and text.count("\n| 3 | 4 | 3 | 160 | 32 |") == 1


def test_cost_constants_are_a_non_negative_relative_least_squares_fit():
    """``fit_cost_constants``: from exact linear seconds of four cases it recovers the two constants (to its three
    digits); a third feature whose best least-squares weight is negative gets 0 (non-negative least squares)."""
    from benchmarks._common import fit_cost_constants

    true = {"a": 2.0e-3, "b": 5.0e-9}
    cases = [{"features": {"a": float(a), "b": float(b), "c": float(c)}} for a, b, c in
             ((1, 1e5, 3), (2, 4e5, 1), (4, 1e6, 2), (8, 3e6, 5))]
    for case in cases:
        case["measured"] = sum(true[name] * case["features"][name] for name in true)
    fitted = fit_cost_constants(cases, ["a", "b"])
    assert fitted == pytest.approx(true, rel=1e-2)
    # seconds that fall where c rises: unconstrained, c's weight would be negative
    for case in cases:
        exact = sum(true[name] * case["features"][name] for name in true)
        case["measured"] = exact * (1.2 - 0.04 * case["features"]["c"])
    features = np.array([[case["features"][name] for name in "abc"] for case in cases])
    measured = np.array([case["measured"] for case in cases])
    unconstrained = np.linalg.lstsq(features / measured[:, None], np.ones(len(cases)), rcond=None)[0]
    assert unconstrained[2] < 0
    assert fit_cost_constants(cases, ["a", "b", "c"])["c"] == 0.0


def test_compare_runs_a_benchmark_protocol(tmp_path):
    """What the paper entries take from ``tnbayes.compare``: their own splits (``load``), factories that see the
    split and the models fitted before them, no posterior (``predictive=False``), their own metric columns and a
    callback per split; ``write(prefix=…)`` names the files after the entry."""
    from types import SimpleNamespace

    import numpy as np

    import tnbayes

    def load(name, k):
        rng = np.random.default_rng(k)
        X = rng.uniform(-1, 1, (40, 1))
        y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(40)
        return SimpleNamespace(X_train=X[:30], y_train=y[:30], X_test=X[30:], y_test=y[30:])

    seen, splits_done = [], []

    def second(run):
        seen.append((run.dataset, run.split, run.label, sorted(run.fitted)))
        return tnbayes.HilbertGP(num_basis=run.fitted["first"].num_basis + 4)

    models = {"first": lambda run: tnbayes.HilbertGP(num_basis=16 + run.split), "second": second}
    mse = lambda run, model, post: {"mse": float(np.mean((model.predict(run.data.X_test) - run.data.y_test) ** 2))}  # noqa: E731
    result = tnbayes.compare(models, ["my-sine"], [0, 1], load=load, predictive=False, columns=mse, progress=False,
                             on_split=lambda dataset, split, rows: splits_done.append((split, len(rows))))
    assert [(r["model"], r["split"]) for r in result.rows] == [("first", 0), ("second", 0), ("first", 1), ("second", 1)]
    assert seen == [("my-sine", 0, "second", ["first"]), ("my-sine", 1, "second", ["first"])]
    assert splits_done == [(0, 2), (1, 2)]
    assert all("mse" in r and "fit_seconds" in r and "rmse" not in r and "predict_seconds" not in r
               for r in result.rows)
    assert result.summary(("mse",))[0]["n_splits"] == 2 and not result.calibration
    paths = result.write(tmp_path, prefix="entry_")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry_runs.csv", "entry_summary.csv", "entry_summary.json",
                                                          "entry_summary.md"]
    assert set(paths) == {"runs", "summary_csv", "summary_json", "summary_md"}
    with pytest.raises(ValueError, match="Unknown dataset"):
        tnbayes.compare(models, ["my-sine"], [0], progress=False)  # without its loader the name is unknown


def test_output_path_names_every_file_after_its_entry(tmp_path, monkeypatch):
    from benchmarks._common import RESULTS_DIR, output_path, variant_of

    monkeypatch.setenv("TNBAYES_BENCH_RESULTS", str(tmp_path))
    assert output_path("qtkm_uci", ".md") == tmp_path / "qtkm_uci" / "qtkm_uci.md"
    assert output_path("qtkm_uci", "_runs.csv", "partial") == tmp_path / "qtkm_uci" / "qtkm_uci_partial_runs.csv"
    assert (tmp_path / "qtkm_uci").is_dir()
    committed = output_path("exact_gp_uci", "_runs.csv", committed=True)
    assert committed == RESULTS_DIR / "exact_gp_uci" / "exact_gp_uci_runs.csv" and committed.is_file()
    # the output names of results written before the entry folders still select the same files
    assert variant_of("scale_out", "scale_out_airline") == "airline"
    assert variant_of("defaults_study", "defaults_study") == variant_of("defaults_study", None) == ""
    assert variant_of("defaults_study", "n300") == "n300"


def test_header_names_the_threads_of_the_fits_not_of_the_parent():
    """A benchmark whose fits run in one-thread subprocesses says so, whatever its own process's torch threads."""
    import torch

    from benchmarks._common import header

    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert "1 torch thread per fit (each fit in a subprocess)" in header("t", "p", fit_threads=1)
        assert "2 torch threads\n" in header("t", "p") and "per fit" not in header("t", "p")
    finally:
        torch.set_num_threads(previous)


def test_defaults_study_generated_set_is_reproducible_per_split():
    """``sklearn/friedman1`` of the defaults study: 20 000 training and 2000 test rows of D = 10 per split, the same
    rows for the same split, other rows for another, and its targets Friedman's function plus noise of sd 1."""
    from benchmarks.calibration.defaults_study import load_split, study_rows

    first, again, other = (load_split("sklearn/friedman1", k) for k in (0, 0, 1))
    assert first.X_train.shape == (20_000, 10) and first.X_test.shape == (2_000, 10) and first.n_splits == 10
    assert np.array_equal(first.X_train, again.X_train) and not np.array_equal(first.X_train, other.X_train)
    X = first.X_train
    friedman = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
    assert abs(float(np.std(first.y_train - friedman)) - 1.0) < 0.03
    X_train, y_train, X_test, y_test = study_rows("sklearn/friedman1", 0, 500, 100)
    assert X_train.shape == (500, 10) and y_test.shape == (100,)
