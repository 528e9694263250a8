"""tnbayes compare: function and command line, on tiny configurations."""

import json

import numpy as np
import pytest

import tnbayes
from tnbayes.cli import main
from tnbayes.compare import parse_splits


def test_parse_splits():
    assert parse_splits("all", 20) == list(range(20))
    assert parse_splits(None, None) == list(range(5))
    assert parse_splits("2:5", 20) == [2, 3, 4]
    assert parse_splits("1,4", 20) == [1, 4]
    assert parse_splits(3, None) == [3]
    with pytest.raises(ValueError, match="out of range"):
        parse_splits("18:25", 20)


def test_compare_function_writes_tables_and_figures(tmp_path):
    res = tnbayes.compare(["exact_gp"], ["toy-sin"], "0:2", model_kwargs={"exact_gp": {"num_restarts": 0}},
                          out_dir=tmp_path, progress=False)
    assert len(res.rows) == 2
    summary = res.summary()[0]
    assert summary["n_splits"] == 2
    values = [r["rmse"] for r in res.rows]
    assert summary["rmse_mean"] == pytest.approx(np.mean(values))
    assert summary["rmse_se"] == pytest.approx(np.std(values, ddof=1) / np.sqrt(2))
    for name in ("runs.csv", "summary.csv", "summary.json", "summary.md", "calibration_toy-sin.png",
                 "bands_toy-sin_exact_gp.png"):
        assert (tmp_path / name).is_file(), name
    payload = json.loads((tmp_path / "summary.json").read_text())
    assert payload["summary"][0]["model"] == "exact_gp"
    assert "coverage_95" in (tmp_path / "summary.md").read_text()


def test_compare_accepts_estimator_instances():
    res = tnbayes.compare([tnbayes.ExactGP(num_restarts=0, max_iter=20)], ["toy-step"], "0", progress=False)
    assert res.rows[0]["model"] == "ExactGP"


def test_cli_compare_and_listings(tmp_path, capsys):
    code = main(["compare", "--models", "exact_gp", "--datasets", "wilson/servo", "--splits", "0",
                 "--set", "exact_gp:num_restarts=0", "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "| wilson/servo | exact_gp | 1 |" in out
    assert main(["models"]) == 0 and "exact_gp" in capsys.readouterr().out
    assert main(["datasets"]) == 0 and "yacht" in capsys.readouterr().out


def test_cli_unknown_names_fail_cleanly(capsys):
    assert main(["compare", "--models", "no_such_model", "--datasets", "toy-sin", "--no-progress"]) == 2
    assert "Unknown model" in capsys.readouterr().err
    assert main(["compare", "--models", "exact_gp", "--datasets", "no_such_set", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no_such_set" in err and "list_datasets" in err



def test_cli_output_cut_short_by_the_reader_is_no_traceback(monkeypatch):
    """``tnbayes datasets | head``: the reader closes the pipe; the command ends quietly with status 1."""
    import os
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line arrives
    stream = os.fdopen(write_end, "w", buffering=1)  # line-buffered: the first line hits the closed pipe
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        assert main(["datasets"]) == 1
    finally:
        monkeypatch.undo()
        stream.close()
