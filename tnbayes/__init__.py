"""tnbayes: tensor-network kernel machines as Bayesian regressors.

The public names: the estimators, :func:`load_model` and the model registry (all of :mod:`tnbayes.models`), the
:class:`GaussianPosterior` they return, :func:`compare`, and the subpackages.
"""

from tnbayes import basis, data, datasets, distributed, inference, kernels, metrics, models, tensors
from tnbayes._version import __version__
from tnbayes.compare import compare
from tnbayes.models import *  # noqa: F403 - every name of tnbayes.models.__all__
from tnbayes.posterior import GaussianPosterior

__all__ = [
    "__version__",
    "basis", "data", "datasets", "distributed", "inference", "kernels", "metrics", "tensors",
    "GaussianPosterior", "compare",
    *models.__all__,
]
