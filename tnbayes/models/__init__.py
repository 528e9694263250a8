"""User-facing estimators."""

from tnbayes.models.base import BaseModel, ModelFileError, NotFittedError, load_model
from tnbayes.models.cpd import CPDKernelClassifier, CPDKernelMachine
from tnbayes.models.exact_gp import ExactGP
from tnbayes.models.fl import FeatureLearningKM, FLModel
from tnbayes.models.hilbert_gp import HilbertGP
from tnbayes.models.qtkm import QTKM, TKM
from tnbayes.models.registry import list_models, make_model, register_model
from tnbayes.models.rffnet import RFFNet, RFFNetClassifier, RFFNetModule
from tnbayes.models.tnkf import TNKF
from tnbayes.models.tnkf_classifier import TNKFClassifier
from tnbayes.models.tt_kalman import TTKalmanGP

__all__ = [
    "CPDKernelClassifier",
    "CPDKernelMachine",
    "FeatureLearningKM",
    "FLModel",
    "QTKM",
    "RFFNet",
    "RFFNetClassifier",
    "RFFNetModule",
    "TKM",
    "TNKF",
    "TNKFClassifier",
    "TTKalmanGP",
    "BaseModel", "ModelFileError", "NotFittedError", "load_model", "ExactGP", "HilbertGP", "list_models", "make_model", "register_model"]
