"""Base class for GPyTorch kernels defined by an explicit, finite feature map.

A :class:`FeatureKernel` computes ``k(x, x') = z(x)ᵀ z(x')`` from per-dimension feature matrices
(``(..., D, N, M)``, one 1-D basis per input dimension), combined into a product or additive kernel.
It returns low-rank ``LinearOperator``s and GPyTorch's ``LinearPredictionStrategy`` (see
:data:`LOW_RANK_PREDICTION_STRATEGY` for older GPyTorch; as
``gpytorch.kernels.RFFKernel`` does) so that ``ExactGP`` and BoTorch's ``SingleTaskGP`` stay on the
Woodbury path: with F feature columns and N training points, the marginal likelihood costs O(N F²)
instead of O(N³), and prediction works in feature space.

Subclasses implement :meth:`FeatureKernel.per_dimension_features`.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from gpytorch.models import exact_prediction_strategies
from linear_operator.operators import LinearOperator, LowRankRootLinearOperator, MatmulLinearOperator, RootLinearOperator

from ..basis.combine import DEFAULT_MAX_PRODUCT_FEATURES, additive_features, num_structured_features, product_features

__all__ = ["FeatureKernel", "LOW_RANK_PREDICTION_STRATEGY", "STRUCTURES"]

#: GPyTorch's prediction strategy for kernels with an explicit finite feature map: ``LinearPredictionStrategy``
#: (GPyTorch 1.14.1, 1.14.3 and later: exact predictions in feature space), else ``RFFPredictionStrategy``, the
#: strategy ``RFFKernel`` used in the GPyTorch releases without it (1.11–1.14.0, 1.14.2; BoTorch 0.10–0.15 pin
#: them), which supports no fantasy updates (``condition_on_observations`` raises ``NotImplementedError``)
LOW_RANK_PREDICTION_STRATEGY = (getattr(exact_prediction_strategies, "LinearPredictionStrategy", None)
                                or exact_prediction_strategies.RFFPredictionStrategy)

#: Ways of combining per-dimension 1-D kernels into a D-dimensional kernel.
STRUCTURES = ("product", "additive")


class FeatureKernel(Kernel):
    """A unit-variance kernel ``k(x, x') = z(x)ᵀ z(x')`` built from per-dimension features.

    Parameters
    ----------
    structure : {"product", "additive"}
        ``"product"``: ``k = Π_d k_d`` (row-wise Kronecker product of the per-dimension features,
        ``F = M^D`` columns — only for small ``M^D``). ``"additive"``: ``k = (1/D) Σ_d k_d``
        (concatenated blocks scaled by ``1/√D``, ``F = D·M`` columns). The ``1/D`` keeps the kernel
        unit-variance; wrap it in ``ScaleKernel`` for an output scale.
    max_product_features : int
        Largest ``M^D`` accepted for ``structure="product"`` (default 20 000); beyond it a
        ``ValueError`` points to ``structure="additive"`` or the tensor-network models.
    **kwargs
        Passed to :class:`gpytorch.kernels.Kernel` (``ard_num_dims``, ``batch_shape``, ``active_dims``,
        ``lengthscale_prior``, ``lengthscale_constraint``, ...).

    Notes
    -----
    ``forward`` returns, for ``x1 == x2``, a ``LowRankRootLinearOperator(Z)`` when ``F < N`` (else a
    ``RootLinearOperator``), and ``MatmulLinearOperator(Z1, Z2ᵀ)`` otherwise. After a Gaussian likelihood
    adds noise, the training covariance is a ``LowRankRootAddedDiagLinearOperator``.
    """

    has_lengthscale = True

    def __init__(
        self,
        *,
        structure: str = "product",
        max_product_features: int = DEFAULT_MAX_PRODUCT_FEATURES,
        **kwargs,
    ) -> None:
        if structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}; got {structure!r}.")
        if int(max_product_features) < 1:
            raise ValueError(f"max_product_features must be a positive integer; got {max_product_features!r}.")
        super().__init__(**kwargs)
        self.structure = structure
        self.max_product_features = int(max_product_features)

    # ------------------------------------------------------------------ to implement
    def per_dimension_features(self, x: torch.Tensor) -> torch.Tensor:
        """Per-dimension features with unit-variance weight prior: shape (..., D, N, M) from ``x`` of shape
        (..., N, D), broadcast over the kernel's batch shape (``k_d(x, x') = Z_d(x) Z_d(x')ᵀ``)."""
        raise NotImplementedError

    def num_features_per_dim(self) -> int:
        """Columns per input dimension (M)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared machinery
    def num_features(self, num_dims: int) -> int:
        """Total feature columns F for ``num_dims`` input dimensions under this kernel's structure."""
        return num_structured_features(num_dims, self.num_features_per_dim(), self.structure)

    def _check_product_size(self, num_dims: int) -> None:
        if self.structure == "product":
            total = self.num_features(num_dims)
            if total > self.max_product_features:
                M = self.num_features_per_dim()
                raise ValueError(
                    f"structure='product' with {num_dims} input dimensions needs M^D = {M}^{num_dims} = "
                    f"{total:.3g} feature columns, above max_product_features={self.max_product_features}. "
                    f"Use structure='additive' ({num_dims * M} columns), fewer basis functions, raise "
                    f"max_product_features if you have the memory, or a tensor-network model (CPD/TT "
                    f"weights), which never forms the Kronecker product."
                )

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The combined feature map ``z(x)`` with ``k(x, x') = z(x)ᵀ z(x')``.

        Parameters
        ----------
        x : torch.Tensor of shape (..., N, D)

        Returns
        -------
        torch.Tensor of shape (..., N, F)
            ``F = M^D`` (product) or ``D·M`` (additive).
        """
        self._check_product_size(x.shape[-1])
        per_dim = self.per_dimension_features(x)
        if self.structure == "product":
            return product_features(per_dim, max_features=self.max_product_features)
        return additive_features(per_dim)

    def _per_dimension_values(self, value: torch.Tensor, num_dims: int, name: str) -> torch.Tensor:
        """A buffer with one value per input dimension, or one for all: as shape (D,), checked against D."""
        if value.numel() == 1:
            return value.expand(num_dims)
        if value.numel() != num_dims:
            raise ValueError(f"{type(self).__name__} has {value.numel()} values of {name} but the inputs have "
                             f"{num_dims} columns.")
        return value

    def _lengthscale_per_dim(self, num_dims: int) -> torch.Tensor:
        """``self.lengthscale`` of shape (*batch, 1, D or 1) as (*batch, D or 1), checked against D."""
        lengthscale = self.lengthscale.squeeze(-2)
        if lengthscale.shape[-1] not in (1, num_dims):
            raise ValueError(
                f"{type(self).__name__} has ard_num_dims={lengthscale.shape[-1]} lengthscales but the inputs "
                f"have {num_dims} columns; set ard_num_dims to the number of input columns (or leave it unset)."
            )
        return lengthscale

    def forward(
        self,
        x1: torch.Tensor,
        x2: torch.Tensor,
        diag: bool = False,
        last_dim_is_batch: bool = False,
        **params,
    ) -> torch.Tensor | LinearOperator:
        if last_dim_is_batch:
            raise NotImplementedError(
                f"{type(self).__name__} does not support the deprecated last_dim_is_batch; use "
                f"structure='additive' for a sum of 1-D kernels."
            )
        x1_eq_x2 = x1.shape == x2.shape and torch.equal(x1, x2)
        z1 = self.features(x1)
        z2 = z1 if x1_eq_x2 else self.features(x2)
        if diag:
            return (z1 * z2).sum(-1)
        if x1_eq_x2:
            # Low-rank root only pays off with fewer features than points (Woodbury on F x F).
            if z1.size(-1) < z1.size(-2):
                return LowRankRootLinearOperator(z1)
            return RootLinearOperator(z1)
        return MatmulLinearOperator(z1, z2.transpose(-1, -2))

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        """GPyTorch's linear (Woodbury) prediction strategy: predictions in feature space (F × F solves, F the
        number of features) and fast posterior sampling, as ``gpytorch.kernels.RFFKernel`` does
        (:data:`LOW_RANK_PREDICTION_STRATEGY`)."""
        return LOW_RANK_PREDICTION_STRATEGY(train_inputs, train_prior_dist, train_labels, likelihood)
