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
from .kalman import TRUNCATED_QUANTITIES, DenseKalmanFilter, TTKalmanFilter, Truncation
from .features import BasisFeatures, FourierPolynomialFeatures, PeriodMixtureFeatures, TensorProductFeatures
from .laplace import conditional_core_variance, summed_core_variances

__all__ = [
    "CPDALS",
    "StreamedRows",
    "BudgetPlan",
    "BudgetWarning",
    "CoreSystem",
    "DenseKalmanFilter",
    "TTKalmanFilter",
    "Truncation",
    "TRUNCATED_QUANTITIES",
    "REGULARIZERS",
    "BasisFeatures",
    "FourierPolynomialFeatures",
    "PeriodMixtureFeatures",
    "TensorProductFeatures",
    "conditional_core_variance",
    "summed_core_variances",
    "tnkf_seconds_per_row",
    "tt_kalman_seconds_per_row",
    "cpd_predict",
    "design_matrix",
    "mode_projections",
    "plan_within_budget",
    "product_except",
    "solve_spd",
]
