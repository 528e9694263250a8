"""GPyTorch kernels built from tnbayes bases: low-rank ``LinearOperator``s on GPyTorch's Woodbury path.

- :class:`HilbertKernel` — Hilbert-space approximation of SE / Matérn-ν (Solin & Särkkä 2020).
- :class:`VFFKernel` — variational Fourier features, Matérn-1/2, 3/2, 5/2 (Hensman et al. 2017).
- :class:`UnderflowSafeRBFKernel` — GPyTorch's RBF kernel without the slow exponentials of far pairs of inputs.
- :class:`FeatureKernel` — base class for any kernel given by per-dimension features.
- :func:`get_kernel` / :func:`register_kernel` — name registry.
"""

from .base import STRUCTURES, FeatureKernel
from .hilbert import HilbertKernel
from .rbf import UnderflowSafeRBFKernel, exp_flushing_underflow
from .registry import available_kernels, get_kernel, register_kernel
from .vff import VFFKernel

__all__ = [
    "FeatureKernel",
    "HilbertKernel",
    "VFFKernel",
    "UnderflowSafeRBFKernel",
    "exp_flushing_underflow",
    "STRUCTURES",
    "get_kernel",
    "register_kernel",
    "available_kernels",
]
