"""Inference engines (the *inference* axis): ALS for CPD weights and Laplace-type variances around the MAP."""

from .als import (
    CPDALS,
    REGULARIZERS,
    CoreSystem,
    cpd_predict,
    design_matrix,
    mode_projections,
    product_except,
    solve_spd,
)
from .features import BasisFeatures, TensorProductFeatures
from .laplace import conditional_core_variance

__all__ = [
    "CPDALS",
    "CoreSystem",
    "REGULARIZERS",
    "BasisFeatures",
    "TensorProductFeatures",
    "conditional_core_variance",
    "cpd_predict",
    "design_matrix",
    "mode_projections",
    "product_except",
    "solve_spd",
]
