"""The scikit-learn contract: every estimator passes scikit-learn's estimator checks, and works in Pipeline,
GridSearchCV and cross_val_score."""

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.validation import check_is_fitted

import tnbayes
from tnbayes.models.registry import list_models, make_model

# Small settings: scikit-learn's checks fit each estimator some sixty times on up to 200 rows × 10 columns.
SMALL = [
    tnbayes.ExactGP(num_restarts=0, max_iter=10),
    tnbayes.HilbertGP(max_iter=10, num_basis=4),
    tnbayes.CPDKernelMachine(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=40),
    tnbayes.CPDKernelClassifier(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=40),
    tnbayes.QTKM(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=40),
    tnbayes.TKM(rank=2, num_basis=4, max_sweeps=2, hyper_max_points=40),
    tnbayes.FeatureLearningKM(rank=2, num_basis=4, epochs=2),
    tnbayes.TNKF(hyper_max_points=40),
    tnbayes.TNKFClassifier(hyper_max_points=40),
    tnbayes.TTKalmanGP(hyper_max_points=40, max_num_basis=4),
    tnbayes.RFFNet(max_epochs=5, num_features=16),
    tnbayes.RFFNetClassifier(max_epochs=5, num_features=16),
]

#: checks each estimator is expected to fail, with the reason
_KWARGS_INIT = ("its __init__ forwards **kwargs to the parent's (the parent's parameters, listed by get_params); the "
                "check passes a parameter literally named 'kwargs'")
_PROBIT_READ_OUT = ("predict_proba is Φ(μ/σ) with a σ that varies between points, so it need not rank points as the "
                    "latent mean μ (decision_function) does")
EXPECTED_FAILURES: dict[str, dict[str, str]] = {
    "TKM": {"check_do_not_raise_errors_in_init_or_set_params": _KWARGS_INIT},
    "CPDKernelClassifier": {"check_do_not_raise_errors_in_init_or_set_params": _KWARGS_INIT,
                            "check_decision_proba_consistency": _PROBIT_READ_OUT},
    "TNKFClassifier": {"check_do_not_raise_errors_in_init_or_set_params": _KWARGS_INIT,
                       "check_decision_proba_consistency": _PROBIT_READ_OUT},
}


def expected_failed_checks(estimator) -> dict[str, str]:
    return EXPECTED_FAILURES.get(type(estimator).__name__, {})


def test_every_registered_model_is_checked():
    checked = {type(e).__name__ for e in SMALL}
    for name in list_models():
        assert type(make_model(name)).__name__ in checked, name


@parametrize_with_checks(SMALL, expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fit reports, clipped inputs and ill-conditioned tiny fits
        check(estimator)
