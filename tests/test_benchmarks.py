"""Every benchmark entry runs end to end at tiny sizes (its smoke configuration in benchmarks/suite.py) and
writes a Markdown result with a table; the suite knows every entry."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import ENTRIES
from benchmarks.suite import CONFIGS, run_entry


def test_every_entry_has_a_suite_configuration():
    assert set(ENTRIES) - {"suite"} == set(CONFIGS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_entry_smoke_run(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TNBAYES_BENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("TNBAYES_SCALE_OUT_DIR", str(tmp_path / "scale_out_work"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run_entry(name, CONFIGS[name][1])
    written = sorted(tmp_path.glob("*.md"))
    assert written, f"{name} wrote no Markdown result"
    assert any("|---" in path.read_text() for path in written), f"{name} wrote no table"
