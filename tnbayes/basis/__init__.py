"""1-D bases and spectral densities: the *basis* axis of every tnbayes model.

Each basis maps inputs of shape ``(..., N, D)`` to per-dimension feature matrices of shape
``(..., D, N, M)`` whose weights have a unit-variance Gaussian prior; the Kronecker product over
dimensions is never formed here (see :mod:`tnbayes.basis.combine` for the small-D product/additive maps).

- :class:`HilbertBasis` — Laplace eigenfunctions on a box, weighted by √S (Solin & Särkkä 2020).
- :class:`VFFBasis` — variational Fourier features for Matérn-1/2, 3/2, 5/2 (Hensman et al. 2017).
- :mod:`~tnbayes.basis.spectral` — spectral densities (SE, Matérn-ν) as differentiable torch functions.
- :mod:`~tnbayes.basis.fourier`, :mod:`~tnbayes.basis.polynomial` — plain Fourier and pure-power polynomial
  features; :mod:`~tnbayes.basis.quantized` — their exact quantization into length-2 (prime-size) Kronecker
  factors (Wesel & Batselier 2024).
- :mod:`~tnbayes.basis.tensor_product` — one model's bases as the *modes* of a tensor-product feature map (what
  the ALS engine, Laplace and the Kalman filters contract against).
- :mod:`~tnbayes.basis.rules` — choosing (M, L) and checking a fitted lengthscale against them.
"""

from .combine import (
    DEFAULT_MAX_PRODUCT_FEATURES,
    additive_features,
    indexed_product_features,
    num_structured_features,
    product_features,
    top_product_indices,
)
from .hilbert import (
    HilbertBasis,
    check_in_box,
    data_center_and_half_range,
    laplace_eigenfunctions,
    laplace_sqrt_eigenvalues,
)
from .rules import (
    HILBERT_RULE_CONSTANTS,
    LENGTHSCALE_RESOLUTION,
    MIN_DEFAULT_BOUNDARY_FACTOR,
    RULE_RELATIVE_SLACK,
    NO_RULE_BOUNDARY_FACTOR,
    ApproximationWarning,
    HilbertLengthscaleRange,
    accurate_hilbert_parameters,
    HilbertParameters,
    check_hilbert_approximation,
    choose_hilbert_parameters,
    hilbert_box,
    hilbert_lengthscale_range,
    resolvable_lengthscale,
)
from .spectral import (
    kernel_name,
    log_spectral_density,
    matern_log_spectral_density,
    resolve_kernel,
    se_log_spectral_density,
    spectral_density,
    sqrt_spectral_density,
    stationary_kernel,
)
from .fourier import check_in_period, fourier_features, fourier_frequencies
from .polynomial import polynomial_features
from .quantized import FEATURE_KINDS, kron_rows, quantized_factor, quantized_factor_sizes, quantized_factors
from .tensor_product import (
    BasisFeatures,
    FourierPolynomialFeatures,
    PeriodMixtureFeatures,
    TensorProductFeatures,
)
from .vff import VFF_SUPPORTED_NU, VFFBasis, vff_frequencies

__all__ = [
    "BasisFeatures",
    "FourierPolynomialFeatures",
    "PeriodMixtureFeatures",
    "TensorProductFeatures",
    "HilbertBasis",
    "VFFBasis",
    "VFF_SUPPORTED_NU",
    "vff_frequencies",
    "laplace_eigenfunctions",
    "laplace_sqrt_eigenvalues",
    "check_in_box",
    "data_center_and_half_range",
    "product_features",
    "additive_features",
    "indexed_product_features",
    "top_product_indices",
    "num_structured_features",
    "DEFAULT_MAX_PRODUCT_FEATURES",
    "spectral_density",
    "sqrt_spectral_density",
    "log_spectral_density",
    "se_log_spectral_density",
    "matern_log_spectral_density",
    "stationary_kernel",
    "resolve_kernel",
    "kernel_name",
    "choose_hilbert_parameters",
    "accurate_hilbert_parameters",
    "hilbert_box",
    "resolvable_lengthscale",
    "LENGTHSCALE_RESOLUTION",
    "RULE_RELATIVE_SLACK",
    "MIN_DEFAULT_BOUNDARY_FACTOR",
    "NO_RULE_BOUNDARY_FACTOR",
    "check_hilbert_approximation",
    "hilbert_lengthscale_range",
    "HilbertParameters",
    "HilbertLengthscaleRange",
    "ApproximationWarning",
    "HILBERT_RULE_CONSTANTS",
    "FEATURE_KINDS",
    "fourier_features",
    "fourier_frequencies",
    "polynomial_features",
    "quantized_factor",
    "quantized_factor_sizes",
    "quantized_factors",
    "kron_rows",
    "check_in_period",
]
