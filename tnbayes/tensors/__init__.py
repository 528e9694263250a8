"""Tensor formats for the weights (the *format* axis): CPD and tensor-train algebra in torch.

- :mod:`~tnbayes.tensors.cpd` — CPD factors: dense form, Gram matrices, norms.
- :mod:`~tnbayes.tensors.cpd_contractions` — CPD weights contracted with tensor-product feature maps (projections,
  design rows, predictions, the prefix/suffix products ALS and Laplace share).
- :mod:`~tnbayes.tensors.tt` — :class:`TTVector`, :class:`TTMatrix` and :func:`tt_gram`.
- :mod:`~tnbayes.tensors.tt_rounding` — TT-SVD, TT-rounding, block sums on plain core lists.
- :mod:`~tnbayes.tensors.tt_batched` — TT-SVDs of many dense vectors in one batch (TTs of shared ranks, stacked).
- :mod:`~tnbayes.tensors.tt_randomized` — randomized rounding of a sum of TTs without forming it.
- :mod:`~tnbayes.tensors.tt_update_rounding` — deterministic rounding of a TT-matrix plus an outer product, from Gram
  matrices, without forming the sum.
- :mod:`~tnbayes.tensors.tt_block` — block TTs: B vectors in one TT (the column index on the last core), as the
  block Kalman updates use them.
- :mod:`~tnbayes.tensors.tt_state` — the key scheme with which models save and load TTs.
- :mod:`~tnbayes.tensors.shapes` — tensorized shapes and point orderings.
"""

from .cpd import (
    check_cpd_factors,
    cpd_factor_grams,
    cpd_hadamard_gram,
    cpd_norm_squared,
    cpd_to_dense,
    random_cpd,
)
from .cpd_contractions import PartialProducts, cpd_predict, design_matrix, mode_projections, product_except
from .shapes import hierarchical_order, prime_factors, tensorize_shape, tt_bond_bounds
from .tt import TTMatrix, TTVector, tt_gram
from .tt_randomized import randomized_round_sum
from .tt_rounding import (block_sum, cores_to_dense, left_orthogonalize, matvec_to_dense, right_orthogonalize,
                          round_cores, truncation_rank, tt_svd)
from .tt_state import has_tt_state, tt_from_state, tt_state
from .tt_batched import tt_svd_batched
from .tt_update_rounding import round_rank_one_update

__all__ = [
    "TTMatrix",
    "TTVector",
    "block_sum",
    "cores_to_dense",
    "has_tt_state",
    "hierarchical_order",
    "left_orthogonalize",
    "matvec_to_dense",
    "prime_factors",
    "randomized_round_sum",
    "right_orthogonalize",
    "round_rank_one_update",
    "round_cores",
    "tensorize_shape",
    "tt_bond_bounds",
    "truncation_rank",
    "tt_from_state",
    "tt_gram",
    "tt_state",
    "tt_svd",
    "tt_svd_batched",
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
