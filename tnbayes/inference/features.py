"""Tensor-product feature maps as the ALS engine sees them.

A :class:`TensorProductFeatures` describes ``x ↦ Σ_p c_p φ^p_1(x) ⊗ … ⊗ φ^p_K(x)``: K *modes* (one per
input dimension, or several per dimension for quantized bases), each with its own feature matrix, and
optionally P *components* (a mixture of feature maps sharing one weight tensor, as in the FL model).
The engine only ever asks for one mode's features on one chunk of rows, so the M^K-sized Kronecker
product is never formed and memory stays independent of N.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tnbayes.basis import HilbertBasis

__all__ = ["TensorProductFeatures", "BasisFeatures"]


class TensorProductFeatures:
    """Interface: per-mode feature matrices of a tensor-product feature map.

    Subclasses set ``mode_sizes`` (list of K ints), ``num_components`` (P) and ``is_complex`` and
    implement :meth:`mode_features`.
    """

    mode_sizes: list[int]
    num_components: int = 1
    is_complex: bool = False

    @property
    def num_modes(self) -> int:
        """K, the number of modes of the weight tensor."""
        return len(self.mode_sizes)

    def mode_features(self, X: torch.Tensor, mode: int) -> torch.Tensor:
        """Feature matrix of one mode on a chunk of inputs.

        Parameters
        ----------
        X : torch.Tensor of shape (n, D)
            A chunk of (scaled) inputs.
        mode : int
            Which mode, 0 ≤ mode < K.

        Returns
        -------
        torch.Tensor of shape (P, n, M_mode)
            Real or complex (see ``is_complex``).
        """
        raise NotImplementedError

    def check_inputs(self, X: torch.Tensor) -> None:
        """Raise ``ValueError`` for inputs the feature map cannot represent (default: accept all)."""


class BasisFeatures(TensorProductFeatures):
    """One mode per input dimension from a 1-D basis with kernel weights (T-KRR's features).

    Parameters
    ----------
    basis : HilbertBasis
        The per-dimension basis (box per input dimension).
    lengthscale : sequence of float or torch.Tensor of shape (D,) or (1,)
        Kernel lengthscale(s) in the basis's input space.
    kernel : str
        Kernel whose spectral density weights the eigenfunctions (``"se"``, ``"matern32"``, …).
    nu : float, optional
        Matérn smoothness for ``kernel="matern"``.

    Notes
    -----
    The features are ``z_j(x_d) = √S(√λ_j) φ_j(x_d)``, so a unit-variance Gaussian prior on the weights
    gives the unit-variance product kernel (the square root is folded in as in T-KRR's code).
    """

    def __init__(self, basis: HilbertBasis, lengthscale: Sequence[float] | torch.Tensor, kernel: str = "se",
                 nu: float | None = None) -> None:
        self.basis = basis
        self.kernel = kernel
        self.nu = nu
        ls = torch.as_tensor(lengthscale, dtype=torch.float64).reshape(-1)
        self.lengthscale = ls.expand(basis.num_dims).clone() if ls.numel() == 1 else ls
        if self.lengthscale.numel() != basis.num_dims:
            raise ValueError(f"lengthscale has {ls.numel()} values; the basis has {basis.num_dims} dimensions.")
        self.mode_sizes = [basis.num_basis] * basis.num_dims
        self.num_components = 1
        self.is_complex = False
        self._weights: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}

    def _spectral_weights(self, like: torch.Tensor) -> torch.Tensor:
        key = (like.dtype, like.device)
        if key not in self._weights:
            self._weights[key] = self.basis.spectral_weights(
                self.lengthscale.to(dtype=like.dtype, device=like.device), self.kernel, self.nu)
        return self._weights[key]

    def mode_features(self, X: torch.Tensor, mode: int) -> torch.Tensor:
        center = self.basis.center[mode].to(X)
        half_width = self.basis.L[mode].to(X)
        column = X[:, mode]
        frequencies = torch.arange(1, self.basis.num_basis + 1, dtype=X.dtype, device=X.device) * (
            torch.pi / (2 * half_width))
        phi = torch.sin((column - center + half_width).unsqueeze(-1) * frequencies) / torch.sqrt(half_width)
        return (phi * self._spectral_weights(X)[mode]).unsqueeze(0)

    def check_inputs(self, X: torch.Tensor) -> None:
        self.basis.check_domain(X)
