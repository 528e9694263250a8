"""User-facing estimators: each a composition of basis × weight format × inference (see docs/architecture.md).

Also the estimator contract (:class:`BaseModel`, :func:`load_model`) and the one model registry
(:func:`make_model`, :func:`list_models`, :func:`register_model`).
"""

from tnbayes.models.base import BaseModel, ModelFileError, NotFittedError, load_model
from tnbayes.models.cpd import CPDKernelClassifier, CPDKernelMachine
from tnbayes.models.exact_gp import ExactGP
from tnbayes.models.fl import FeatureLearningKM, FLModel
from tnbayes.models.hilbert_gp import HilbertGP
from tnbayes.models.qtkm import QTKM, TKM
from tnbayes.models.registry import list_models, make_model, register_model
from tnbayes.models.rffnet import RFFNet, RFFNetClassifier, RFFNetModule
from tnbayes.models.svgp import SVGP
from tnbayes.models.tnkf import TNKF
from tnbayes.models.tnkf_classifier import TNKFClassifier
from tnbayes.models.tt_kalman import TTKalmanGP

__all__ = [
    # the contract
    "BaseModel", "ModelFileError", "NotFittedError", "load_model",
    # estimators
    "CPDKernelClassifier", "CPDKernelMachine", "ExactGP", "FeatureLearningKM", "FLModel", "HilbertGP", "QTKM",
    "RFFNet", "RFFNetClassifier", "RFFNetModule", "SVGP", "TKM", "TNKF", "TNKFClassifier", "TTKalmanGP",
    # the registry
    "list_models", "make_model", "register_model",
]
