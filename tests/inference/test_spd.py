"""The Cholesky solve of the ALS core systems (tnbayes.inference.spd)."""

import pytest
import torch

from tnbayes.inference import solve_spd


def test_solve_spd_falls_back_to_jitter_and_rejects_indefinite():
    A = torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=torch.float64)  # singular PSD
    x, _, jitter = solve_spd(A, torch.tensor([1.0, 1.0], dtype=torch.float64))
    assert jitter > 0 and torch.isfinite(x).all()
    with pytest.raises(ValueError, match="not positive definite"):
        solve_spd(torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64), torch.ones(2, dtype=torch.float64))
