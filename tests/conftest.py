"""Test configuration: point the dataset loader at ../shared/data beside the repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

torch.set_num_threads(min(2, os.cpu_count() or 1))


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
