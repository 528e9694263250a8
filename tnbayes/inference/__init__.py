"""Inference engines (the *inference* axis): ALS for CPD weights and for TT weights, Laplace-type variances around the
MAP, Kalman filters in TT form and the cost models that fit them into a time budget."""

from tnbayes._deprecation import moved_names_getattr as _moved_names_getattr

from .als import CPDALS, PENALTY_FORMS
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
from .proximal_adam import TrainingLog, train_block_proximal_adam
from .spd import CoreSystem, solve_spd
from .stream_deadline import EvenThinning, StreamDeadline
from .tt_als import TTALS, TTLaplace
from .weight_space import (
    BayesianRidgePosterior,
    WeightSpaceStatistics,
    accumulate_statistics,
    bayesian_ridge,
    neg_log_marginal_likelihood,
    weight_posterior,
)

__all__ = [
    "CPDALS",
    "BudgetPlan",
    "BudgetWarning",
    "CoreSystem",
    "DenseKalmanFilter",
    "EvenThinning",
    "StreamDeadline",
    "TTBatchKalmanFilter",
    "TTKalmanFilter",
    "Truncation",
    "TRUNCATED_QUANTITIES",
    "PENALTY_FORMS",
    "conditional_core_variance",
    "summed_core_variances",
    "tnkf_seconds_per_row",
    "tt_kalman_seconds_per_row",
    "kalman_batch_update",
    "plan_within_budget",
    "solve_spd",
    "TTALS",
    "TTLaplace",
    "BayesianRidgePosterior",
    "WeightSpaceStatistics",
    "accumulate_statistics",
    "bayesian_ridge",
    "neg_log_marginal_likelihood",
    "weight_posterior",
    "TrainingLog",
    "train_block_proximal_adam",
]


#: public names that moved to another axis, or were renamed, in tnbayes 0.2 → (new module, new name); the old
#: spelling warns for two releases
__getattr__ = _moved_names_getattr(__name__, {
    **{name: ("tnbayes.basis", name) for name in ("BasisFeatures", "FourierPolynomialFeatures", "PeriodMixtureFeatures",
                                                  "TensorProductFeatures")},
    **{name: ("tnbayes.tensors", name) for name in ("cpd_predict", "design_matrix", "mode_projections",
                                                    "product_except")},
    "StreamedRows": ("tnbayes.data", "StreamedRows"),
    "REGULARIZERS": ("tnbayes.inference.als", "PENALTY_FORMS"),
})
