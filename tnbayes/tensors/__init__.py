"""Tensor formats for the weights (the *format* axis): CPD and tensor-train algebra in torch, and the contractions of
CPD weights with tensor-product feature maps (projections, design rows, predictions)."""

from .cpd import (
    check_cpd_factors,
    cpd_factor_grams,
    cpd_hadamard_gram,
    cpd_norm_squared,
    cpd_to_dense,
    random_cpd,
)
from .cpd_contractions import PartialProducts, cpd_predict, design_matrix, mode_projections, product_except
from .shapes import hierarchical_order, prime_factors, tensorize_shape
from .tt import TTMatrix, TTVector, tt_svd

__all__ = [
    "TTMatrix",
    "TTVector",
    "hierarchical_order",
    "prime_factors",
    "tensorize_shape",
    "tt_svd",
    "check_cpd_factors",
    "cpd_factor_grams",
    "cpd_hadamard_gram",
    "cpd_norm_squared",
    "cpd_to_dense",
    "random_cpd",
    "PartialProducts",
    "cpd_predict",
    "design_matrix",
    "mode_projections",
    "product_except",
]
