"""tnbayes: tensor-network kernel machines as Bayesian regressors."""

from tnbayes import basis, datasets, inference, kernels, metrics, tensors
from tnbayes._version import __version__
from tnbayes.compare import compare
from tnbayes.models import (
    BaseModel,
    CPDKernelClassifier,
    CPDKernelMachine,
    ExactGP,
    FeatureLearningKM,
    FLModel,
    HilbertGP,
    NotFittedError,
    QTKM,
    RFFNet,
    RFFNetClassifier,
    RFFNetModule,
    TKM,
    TNKF,
    TNKFClassifier,
    list_models,
    load_model,
    make_model,
    register_model,
)
from tnbayes.posterior import GaussianPosterior

__all__ = [
    "__version__",
    "basis",
    "inference",
    "tensors",
    "kernels",
    "BaseModel",
    "CPDKernelClassifier",
    "CPDKernelMachine",
    "ExactGP",
    "FeatureLearningKM",
    "FLModel",
    "GaussianPosterior",
    "HilbertGP",
    "NotFittedError",
    "QTKM",
    "RFFNet",
    "RFFNetClassifier",
    "RFFNetModule",
    "TKM",
    "TNKF",
    "TNKFClassifier",
    "compare",
    "datasets",
    "list_models",
    "load_model",
    "make_model",
    "metrics",
    "register_model",
]
