"""Every code block of README.md runs, on a "fresh machine": empty HOME, no data directory.

Python blocks are executed in a temporary folder. Shell lines run in-process through the
``tnbayes`` command line; ``make demo`` runs ``tnbayes.demo`` (with one split per set), ``make test``
is the suite itself and is not re-entered. ``tnbayes fetch`` reads from a ``file://`` mirror built from
../shared/data (the tests never touch the network). The first-contact pages of docs/ may only name
data that work offline.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tnbayes import cli, datasets

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
README = (ROOT / "README.md").read_text()
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks(text: str, lang: str) -> list[str]:
    return [body for kind, body in _BLOCK.findall(text) if kind == lang]


def _shell_lines(text: str) -> list[str]:
    lines = []
    for block in _blocks(text, "bash"):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line:
                lines.append(line)
    return lines


@pytest.fixture
def fresh_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Empty HOME, no TNBAYES_DATA_DIR / XDG_CACHE_HOME, working directory in tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TNBAYES_DATA_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TNBAYES_DATA_MIRROR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert datasets.data_dir() == home / ".cache" / "tnbayes"
    return tmp_path


def test_readme_order_setup_then_quick_start() -> None:
    setup, quick = README.index("## Set-up on a fresh machine"), README.index("## Quick start")
    assert setup < quick
    first_block = _BLOCK.search(README)
    assert first_block is not None and first_block.start() > setup
    assert _shell_lines(README)[:2] == ["make demo", "make test"]


def test_readme_python_blocks_run_offline(fresh_machine: Path) -> None:
    blocks = _blocks(README, "python")
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "SHA256SUMS").is_file(), reason="shared data bundle not found")
def test_readme_shell_lines_run_offline(fresh_machine: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.datasets.test_fetch import build_mirror

    lines = _shell_lines(README)
    assert any(line.startswith("tnbayes compare") for line in lines)
    for line in lines:
        argv = shlex.split(line)
        if argv == ["make", "test"]:
            continue  # the suite this test is part of
        if argv == ["make", "demo"]:
            from tnbayes import demo

            assert demo.main(["--out", str(fresh_machine / "demo_output"), "--real-splits", "0",
                              "--toy-splits", "0", "--no-progress"]) == 0
            out = capsys.readouterr().out
            assert "CPDKernelMachine" in out and "HilbertGP" in out and "ExactGP" in out
            for figure in ("bands_toy-sin.png", "calibration.png"):
                assert (fresh_machine / "demo_output" / figure).stat().st_size > 10_000
            continue
        assert argv[0] == "tnbayes", f"README line {line!r} is not covered by this test"
        if argv[1] == "fetch":
            monkeypatch.setenv("TNBAYES_DATA_MIRROR", build_mirror(fresh_machine / "mirror").as_uri())
        if argv[1] == "compare":
            argv.append("--no-progress")
        assert cli.main(argv[1:]) == 0, line
        out = capsys.readouterr().out
        if argv[1] == "datasets":
            assert "wilson/yacht" in out and "bundled" in out and "fetchable" in out
        if argv[1] == "fetch":
            for name in argv[2:]:
                assert datasets.availability(name) == "cached"


@pytest.mark.parametrize("page", ["README.md", "docs/compare.md", "docs/install.md", "docs/index.md"])
def test_first_contact_commands_need_no_download(page: str) -> None:
    """Every `tnbayes compare` line on the pages a new user reads first names offline data only."""
    for line in _shell_lines((ROOT / page).read_text()):
        argv = shlex.split(line)
        if argv[:2] != ["tnbayes", "compare"]:
            continue
        args = cli.build_parser().parse_args(argv[1:])
        for name in args.datasets:
            assert datasets.availability(name, data_dir="/nonexistent") in ("bundled", "synthetic"), \
                f"{page}: {line!r} needs {name!r}, which is not bundled"
