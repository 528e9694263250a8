"""Test configuration: point the dataset loader at ../shared/data beside the repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# the cores this process may run on (taskset, cgroups), not the machine's: more threads than cores oversubscribe
# them, which made the GPyTorch-heavy tests 5–10× slower under `taskset -c 1`; under pytest-xdist (`make test` runs
# one worker per core) the workers share the cores, and so do the child processes a test starts (OMP_NUM_THREADS)
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_WORKERS = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
_THREADS = max(1, min(2, _CORES // _WORKERS))
torch.set_num_threads(_THREADS)
if _WORKERS > 1:
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(_THREADS)


def _gpytorch_settings() -> dict[tuple[object, str], object]:
    """The global values of GPyTorch's and linear_operator's settings (each setting class's ``_global_value`` and,
    for the fast-computation switches, ``_default``)."""
    import gpytorch.settings
    import linear_operator.settings

    values = {}
    for module in (gpytorch.settings, linear_operator.settings):
        for setting in vars(module).values():
            if isinstance(setting, type):
                for attribute in ("_global_value", "_default"):
                    if attribute in vars(setting):
                        values[(setting, attribute)] = vars(setting)[attribute]
    return values


def _set_gpytorch_settings(values: dict[tuple[object, str], object]) -> None:
    for (setting, attribute), value in values.items():
        setattr(setting, attribute, value)


#: GPyTorch's own defaults, read before any test module imports BoTorch
_GPYTORCH_DEFAULTS = _gpytorch_settings()


@pytest.fixture(autouse=True)
def _gpytorch_defaults_unless_botorch(request):
    """Importing BoTorch changes GPyTorch's global settings for the whole process (fast computations off, Cholesky
    up to 4096 points: its choice for BO loops), and collecting the BoTorch tests imports it for the whole session.
    Every other test runs with GPyTorch's own defaults, as a user without BoTorch has them (the SVGP tests took
    5–7× longer under BoTorch's), whatever was collected; the BoTorch tests keep BoTorch's."""
    before = _gpytorch_settings()
    if "botorch" not in getattr(getattr(request.node, "module", None), "__name__", ""):
        _set_gpytorch_settings(_GPYTORCH_DEFAULTS)
    yield
    _set_gpytorch_settings(before)


@pytest.fixture(autouse=True, scope="module")
def _seeded_torch_per_module():
    """Each test module starts from torch's seed 0, before its module-scoped fixtures (fits shared by its tests)."""
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _seeded_torch(_seeded_torch_per_module):
    """Each test starts from torch's seed 0, so a test that draws from torch's global generator (BoTorch's random
    restarts in optimize_acqf, ``torch.rand`` in a test) draws the same numbers whatever ran before it on its
    pytest-xdist worker. With the module-level seed, a failure reproduces with its test module alone."""
    torch.manual_seed(0)


@pytest.fixture(autouse=True, scope="session")
def _shared_data_dir():
    """Every test sees the shared data directory unless a test overrides TNBAYES_DATA_DIR."""
    previous = os.environ.get("TNBAYES_DATA_DIR")
    if SHARED_DATA.is_dir():
        os.environ["TNBAYES_DATA_DIR"] = str(SHARED_DATA)
    yield
    if previous is None:
        os.environ.pop("TNBAYES_DATA_DIR", None)
    else:
        os.environ["TNBAYES_DATA_DIR"] = previous
