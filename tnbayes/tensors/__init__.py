"""Tensor formats for the weights (the *format* axis): CPD and tensor-train algebra in torch."""

from .cpd import (
    check_cpd_factors,
    cpd_factor_grams,
    cpd_hadamard_gram,
    cpd_norm_squared,
    cpd_to_dense,
    random_cpd,
)
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
]
