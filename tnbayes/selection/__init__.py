"""Model selection shared by every model: ML-II of kernel hyper-parameters, and the input-box rule.

* :mod:`~tnbayes.selection.marginal_likelihood` — type-II maximum likelihood of an exact GP with a
  dimension-scaled lengthscale prior, restarts and a collapse check (used by :class:`~tnbayes.ExactGP`);
* :mod:`~tnbayes.selection.leave_one_out` — an exact GP's leave-one-out predictions in closed form, and the
  hyper-parameter objective built on them (used by :class:`~tnbayes.SVGP` when its fit is the exact GP's);
* :mod:`~tnbayes.selection.collapsed_bound` — the collapsed variational bound of sparse GP regression (SGPR), a start
  of :class:`~tnbayes.SVGP`'s hyper-parameters;
* :mod:`~tnbayes.selection.hyperparameters` — the same fit on a subsample, in the data's units, for the models that
  borrow GP hyper-parameters (CPD, TNKF, TT Kalman);
* :mod:`~tnbayes.selection.cross_validation` — k-fold CV of exact kernel ridge regression (QTKM, TKM) and of the
  dense LS-SVM (TNKFClassifier);
* :mod:`~tnbayes.selection.calibration` — the noise a fitted approximation earns on held-out rows (CPD models, the
  Kalman filters);
* :mod:`~tnbayes.selection.input_box` — what happens to test inputs outside the region a basis represents.

Selection sits beside the three axes (basis, format, inference): it picks their sizes and hyper-parameters.
"""

from tnbayes.selection.calibration import (
    NOISE_ESTIMATES,
    PrequentialResiduals,
    additive_variance_estimate,
    check_noise_estimate,
    held_out_rows,
    proportional_noise_estimate,
)
from tnbayes.selection.collapsed_bound import CollapsedBoundFit, fit_collapsed_bound
from tnbayes.selection.cross_validation import (
    KRRSelection,
    lssvm_cross_validation_score,
    select_binary_column_width,
    select_krr_hyperparameters,
    two_valued_columns,
)
from tnbayes.selection.hyperparameters import KernelHyperparameters, estimate_kernel_hyperparameters
from tnbayes.selection.input_box import (
    OUT_OF_BOX_POLICIES,
    OutOfBoxWarning,
    apply_input_box,
    check_out_of_box_policy,
    prediction_box,
)
from tnbayes.selection.leave_one_out import (
    leave_one_out_loss,
    leave_one_out_predictions,
    leave_one_out_r2,
    leave_one_out_scores,
)
from tnbayes.selection.marginal_likelihood import (
    COLLAPSE_LOO_R2,
    LENGTHSCALE_PRIOR_SCALE,
    NUMERICAL_LENGTHSCALE_FLOOR,
    MarginalLikelihoodFit,
    MarginalLikelihoodSettings,
    build_exact_gp,
    build_kernel_and_likelihood,
    exact_gpytorch_settings,
    exact_log_marginal_likelihood,
    fit_marginal_likelihood,
    initial_lengthscale,
    lengthscale_prior_location,
)

__all__ = [
    # calibration
    "NOISE_ESTIMATES", "PrequentialResiduals", "additive_variance_estimate", "check_noise_estimate", "held_out_rows",
    "proportional_noise_estimate",
    # the collapsed bound
    "CollapsedBoundFit", "fit_collapsed_bound",
    # cross-validation
    "KRRSelection", "lssvm_cross_validation_score", "select_binary_column_width", "select_krr_hyperparameters",
    "two_valued_columns",
    # hyper-parameters of the models that borrow a GP's
    "KernelHyperparameters", "estimate_kernel_hyperparameters",
    # the input box
    "OUT_OF_BOX_POLICIES", "OutOfBoxWarning", "apply_input_box", "check_out_of_box_policy", "prediction_box",
    # ML-II
    "COLLAPSE_LOO_R2", "LENGTHSCALE_PRIOR_SCALE", "NUMERICAL_LENGTHSCALE_FLOOR", "MarginalLikelihoodFit", "MarginalLikelihoodSettings",
    "build_exact_gp", "build_kernel_and_likelihood", "exact_gpytorch_settings", "exact_log_marginal_likelihood",
    "fit_marginal_likelihood", "initial_lengthscale", "lengthscale_prior_location",
    # leave-one-out
    "leave_one_out_loss", "leave_one_out_predictions", "leave_one_out_r2", "leave_one_out_scores",
]
