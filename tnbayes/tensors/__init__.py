"""Tensor formats for the weights (the *format* axis): CPD algebra in torch."""

from .cpd import (
    check_cpd_factors,
    cpd_factor_grams,
    cpd_hadamard_gram,
    cpd_norm_squared,
    cpd_to_dense,
    random_cpd,
)

__all__ = [
    "check_cpd_factors",
    "cpd_factor_grams",
    "cpd_hadamard_gram",
    "cpd_norm_squared",
    "cpd_to_dense",
    "random_cpd",
]
