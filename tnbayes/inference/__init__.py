"""Inference engines (the *inference* axis): ALS for CPD weights, Laplace-type variances around the MAP, Kalman filters in TT form
and the cost models that fit them into a time budget."""

from .als import CPDALS, PENALTY_FORMS
from .budget import BudgetPlan, BudgetWarning, plan_within_budget, tnkf_seconds_per_row, tt_kalman_seconds_per_row
from .kalman import TRUNCATED_QUANTITIES, DenseKalmanFilter, TTKalmanFilter, Truncation
from .laplace import conditional_core_variance, summed_core_variances
from .spd import CoreSystem, solve_spd

__all__ = [
    "CPDALS",
    "BudgetPlan",
    "BudgetWarning",
    "CoreSystem",
    "DenseKalmanFilter",
    "TTKalmanFilter",
    "Truncation",
    "TRUNCATED_QUANTITIES",
    "PENALTY_FORMS",
    "conditional_core_variance",
    "summed_core_variances",
    "tnkf_seconds_per_row",
    "tt_kalman_seconds_per_row",
    "plan_within_budget",
    "solve_spd",
]


#: public names that moved to another axis (tnbayes 0.2) → the module that holds them now; the old import path warns
#: for two releases
_MOVED = {
    **dict.fromkeys(("BasisFeatures", "FourierPolynomialFeatures", "PeriodMixtureFeatures", "TensorProductFeatures"),
                    "tnbayes.basis"),
    **dict.fromkeys(("cpd_predict", "design_matrix", "mode_projections", "product_except"), "tnbayes.tensors"),
    "StreamedRows": "tnbayes.data",
}


def __getattr__(name: str):
    if name == "REGULARIZERS":
        from . import als

        return als.__getattr__(name)  # warns: renamed PENALTY_FORMS
    if name in _MOVED:
        import importlib
        import warnings

        home = _MOVED[name]
        warnings.warn(f"tnbayes.inference.{name} moved to {home}.{name} in tnbayes 0.2; import it from there "
                      "(the old path will be removed in 0.4).", FutureWarning, stacklevel=2)
        return getattr(importlib.import_module(home), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
