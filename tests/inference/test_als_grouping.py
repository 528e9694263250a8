"""Per-value accumulation of the ALS normal equations (tnbayes.inference.als_grouping): exact against per-row sums."""

import numpy as np
import pytest
import torch

from tnbayes.basis import BasisFeatures, FourierPolynomialFeatures, HilbertBasis
from tnbayes.inference import CPDALS
from tests.cpd_problems import FourierFeatures as _FourierFeatures, discrete_data as _discrete_data


class _GroupedFourier(_FourierFeatures):
    def mode_inputs(self):
        return list(range(len(self.mode_sizes)))


@pytest.mark.parametrize("kind", ["hilbert", "quantized", "tkm", "mixture"])
def test_grouped_normal_equations_equal_per_row_accumulation(kind):
    """Accumulating per distinct input value is exact: every core's system equals the per-row one."""
    levels = [5, 12, 400]  # the last column is (nearly) continuous: left ungrouped under "auto"
    X, y = _discrete_data(600, 3, levels)
    weights = None
    if kind == "hilbert":
        feats = BasisFeatures(HilbertBasis(8, L=[1.2] * 3), lengthscale=0.4)
    elif kind == "quantized":
        feats = FourierPolynomialFeatures(3, 8, period=2.0, quantized=True)
    elif kind == "tkm":
        feats = FourierPolynomialFeatures(3, 8, period=2.0, quantized=False)
    else:
        feats, weights = _GroupedFourier(3, 6, (3.0, 5.0)), (0.7, -0.4)
    per_row = CPDALS(feats, X, y, 3, 0.1, component_weights=weights, seed=1, group_inputs=False)
    grouped = CPDALS(feats, X, y, 3, 0.1, component_weights=weights, seed=1, group_inputs="auto")
    assert per_row.grouped_modes == []
    assert 0 < len(grouped.grouped_modes) < feats.num_modes  # the 400-level column stays per row
    for mode in range(feats.num_modes):
        a, b = per_row.normal_equations(mode), grouped.normal_equations(mode)
        scale = float(a.gram.abs().max())
        assert float((a.gram - b.gram).abs().max()) < 1e-12 * scale
        assert float((a.rhs - b.rhs).abs().max()) < 1e-12 * max(1.0, float(a.rhs.abs().max()))
    per_row.run(4, tol=0.0)
    grouped.run(4, tol=0.0)
    for fa, fb in zip(per_row.factors, grouped.factors):
        torch.testing.assert_close(fa, fb, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(per_row.sweep_objectives, grouped.sweep_objectives, rtol=1e-10)
    # predictions on the training rows are gathered from per-value tables when grouped
    torch.testing.assert_close(grouped.predict(grouped.X), per_row.predict(per_row.X), rtol=1e-9, atol=1e-11)
    assert grouped.objective() == pytest.approx(per_row.objective(), rel=1e-10)


def test_group_inputs_is_validated():
    X, y = _discrete_data(50, 2, [3, 4])
    feats = BasisFeatures(HilbertBasis(4, L=[1.2] * 2), lengthscale=0.4)
    with pytest.raises(ValueError, match="group_inputs"):
        CPDALS(feats, X, y, 2, 0.1, group_inputs="yes")
    assert CPDALS(feats, X, y, 2, 0.1, group_inputs=True).grouped_modes == [0, 1]
