"""Inference engines (the *inference* axis): ALS for CPD weights, Laplace-type variances around the MAP, Kalman filters in TT form
and the cost models that fit them into a time budget."""

from .als import (
    CPDALS,
    StreamedRows,
    REGULARIZERS,
    CoreSystem,
    cpd_predict,
    design_matrix,
    mode_projections,
    product_except,
    solve_spd,
)
from .budget import BudgetPlan, BudgetWarning, plan_within_budget, tnkf_seconds_per_row, tt_kalman_seconds_per_row
from .kalman import (
    TRUNCATED_QUANTITIES,
    DenseKalmanFilter,
    TTBatchKalmanFilter,
    TTKalmanFilter,
    Truncation,
    kalman_batch_update,
)
from .laplace import conditional_core_variance, summed_core_variances

__all__ = [
    "CPDALS",
    "StreamedRows",
    "BudgetPlan",
    "BudgetWarning",
    "CoreSystem",
    "DenseKalmanFilter",
    "TTBatchKalmanFilter",
    "TTKalmanFilter",
    "Truncation",
    "TRUNCATED_QUANTITIES",
    "REGULARIZERS",
    "conditional_core_variance",
    "summed_core_variances",
    "tnkf_seconds_per_row",
    "tt_kalman_seconds_per_row",
    "cpd_predict",
    "design_matrix",
    "kalman_batch_update",
    "mode_projections",
    "plan_within_budget",
    "product_except",
    "solve_spd",
]


#: public names that moved to the basis axis (tnbayes 0.2); the old import path warns for two releases
_MOVED_TO_BASIS = ("BasisFeatures", "FourierPolynomialFeatures", "PeriodMixtureFeatures", "TensorProductFeatures")


def __getattr__(name: str):
    if name in _MOVED_TO_BASIS:
        import warnings

        from tnbayes.basis import tensor_product

        warnings.warn(f"tnbayes.inference.{name} moved to tnbayes.basis.{name} in tnbayes 0.2; import it from there "
                      "(the old path will be removed in 0.4).", FutureWarning, stacklevel=2)
        return getattr(tensor_product, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
