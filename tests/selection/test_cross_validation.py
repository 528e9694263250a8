"""The exact-KRR cross-validation behind QTKM's defaults (tnbayes.selection.cross_validation)."""

import torch

from tnbayes.selection.cross_validation import DEFAULT_PENALTY_GRID, select_krr_hyperparameters
from tests.cpd_problems import qtkm_data as _regression


def test_krr_cross_validation_picks_a_sensible_period_and_penalty():
    X, y = _regression(n=240, d=2, seed=1, noise=0.1)
    Xs = torch.as_tensor(X) / 2.0  # [-0.5, 0.5]
    selection = select_krr_hyperparameters(Xs, torch.as_tensor(y), num_basis=16, folds=3)
    assert selection.period in (1.25, 1.5, 2.0, 3.0, 5.0, 9.0, 17.0, 33.0, 65.0)
    assert len(selection.table) == 9 * len(DEFAULT_PENALTY_GRID)
    assert selection.cv_mse == min(row["cv_mse"] for row in selection.table)
    assert selection.cv_mse < 0.05  # noise variance 0.01, signal variance ≈ 0.6
    assert 0.003 < selection.noise_variance < 0.03
