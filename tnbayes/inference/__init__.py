"""Inference engines (the *inference* axis): ALS for CPD weights, Laplace-type variances around the MAP, Kalman filters in TT form."""

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
from .kalman import TRUNCATED_QUANTITIES, DenseKalmanFilter, TTKalmanFilter, Truncation
from .features import BasisFeatures, FourierPolynomialFeatures, PeriodMixtureFeatures, TensorProductFeatures
from .laplace import conditional_core_variance, summed_core_variances

__all__ = [
    "CPDALS",
    "StreamedRows",
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
    "cpd_predict",
    "design_matrix",
    "mode_projections",
    "product_except",
    "solve_spd",
]
