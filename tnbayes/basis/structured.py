"""A Hilbert basis laid out as the feature map of a product, additive or hybrid kernel (the *basis* axis).

:class:`HilbertLayout` is the basis of :class:`~tnbayes.HilbertGP`: the Laplace eigenfunctions of a
:class:`~tnbayes.basis.HilbertBasis` combined over the inputs (:mod:`tnbayes.basis.combine`), and the prior
standard deviation of every combined column (square roots of the spectral density, in the same column order).

- ``"product"``: ``k = Π_d k_d``, M^D columns;
- ``"additive"``: ``k = (1/D) Σ_d k_d``, D·M columns;
- ``"hybrid"``: the additive columns, scaled by √(1 − ρ), followed by a truncated product block over the inputs
  P, scaled by √ρ: ``k = (1 − ρ) (1/D) Σ_d k_d(ℓ_d) + ρ Π_{d ∈ P} k_d(ℓ_P,d)``, whose J multi-indices are those of
  largest prior variance (:meth:`HilbertLayout.select_product_block`) — a valid GP for any choice of J.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from tnbayes.basis.combine import (
    DEFAULT_MAX_PRODUCT_FEATURES,
    additive_features,
    indexed_product_features,
    product_features,
    top_product_indices,
)
from tnbayes.basis.hilbert import HilbertBasis
from tnbayes.basis.rules import HILBERT_RULE_CONSTANTS
from tnbayes.basis.spectral import kernel_name, log_spectral_density

__all__ = ["LAYOUTS", "HilbertLayout"]

#: the structures a :class:`HilbertLayout` can have
LAYOUTS = ("product", "additive", "hybrid")


@dataclass
class HilbertLayout:
    """The columns of a Hilbert-basis feature map for one structure.

    Parameters
    ----------
    basis : HilbertBasis
        M functions per input on a box per input (D inputs).
    structure : {"product", "additive", "hybrid"}
    product_inputs : list of int
        Inputs of the product block (all for ``"product"``, none for ``"additive"``).
    product_indices : torch.Tensor of shape (J, len(product_inputs)), optional
        The hybrid's product-block multi-indices (0-based function per product input); None otherwise.
    """

    basis: HilbertBasis
    structure: str
    product_inputs: Sequence[int] = ()
    product_indices: torch.Tensor | None = None

    def unweighted_features(self, X: torch.Tensor) -> torch.Tensor:
        """Φ(X): eigenfunction columns in the layout of ``structure``, no spectral weights.

        Parameters
        ----------
        X : torch.Tensor of shape (N, D)

        Returns
        -------
        torch.Tensor of shape (N, M_tot)
        """
        phi = self.basis.eigenfunctions(X)  # (D, N, M)
        if self.structure == "product":
            return product_features(phi, max_features=DEFAULT_MAX_PRODUCT_FEATURES)
        additive = torch.cat(list(phi), dim=-1)
        if self.structure == "additive":
            return additive
        product = indexed_product_features(phi, self.product_inputs, self.product_indices.to(phi.device))
        return torch.cat([additive, product], dim=-1)

    def feature_weights(self, lengthscale: torch.Tensor, kernel: str, nu: float | None,
                        block: dict[str, Any] | None = None) -> torch.Tensor:
        """s(ℓ): square roots of the spectral density, in the column order of :meth:`unweighted_features`.

        Parameters
        ----------
        lengthscale : torch.Tensor of shape (D,) or (1,)
            The lengthscales (of the additive block for ``"hybrid"``).
        kernel : str
        nu : float, optional
        block : dict, optional
            For ``"hybrid"``: ``"share"``, ρ, the product block's share of σ_f², and ``"product_lengthscale"``
            (|P|,) or (1,), the product block's lengthscales. The additive columns are scaled by √(1 − ρ), the
            product columns by √ρ.

        Returns
        -------
        torch.Tensor of shape (M_tot,)
        """
        w = self.basis.spectral_weights(lengthscale, kernel, nu)  # (D, M)
        if self.structure == "product":
            return product_features(w.unsqueeze(-2), max_features=w.shape[-1] ** w.shape[0]).reshape(-1)
        if self.structure == "additive":
            return additive_features(w.unsqueeze(-2)).reshape(-1)
        rho = torch.as_tensor(block["share"], dtype=w.dtype, device=w.device)
        inputs = list(self.product_inputs)
        ls_p = torch.as_tensor(block["product_lengthscale"], dtype=w.dtype, device=w.device).reshape(-1)
        # (|P|, M) weights of the product inputs at ℓ_P: a (D,) lengthscale vector carrying ℓ_P at the positions P
        full = torch.ones(w.shape[0], dtype=w.dtype, device=w.device).index_put((torch.as_tensor(inputs),),
                                                                               ls_p.expand(len(inputs)))
        w_p = self.basis.spectral_weights(full, kernel, nu)[inputs]
        s_p = indexed_product_features(w_p.unsqueeze(-2), range(len(inputs)), self.product_indices.to(w.device))
        s_a = additive_features(w.unsqueeze(-2)).reshape(-1)
        return torch.cat([s_a * torch.sqrt(1 - rho), s_p.reshape(-1) * torch.sqrt(rho)])

    def product_lengthscale_floor(self, kernel: str, nu: float | None) -> torch.Tensor:
        """Smallest lengthscales the hybrid's product block may take → shape (|P|,), float64.

        ℓ_d ≥ a L_d / m_d with m_d the block's functions of input d and a the rule's constant (1.75 for SE).
        Shorter lengthscales only flatten the weights of the few functions the block has, leaving the kernel
        family for a fixed feature set.
        """
        name = kernel_name(kernel, nu)
        factor = HILBERT_RULE_CONSTANTS.get(name, HILBERT_RULE_CONSTANTS["se"])[1]
        functions = (self.product_indices.max(dim=0).values + 1).to(torch.float64)
        return factor * self.basis.L[list(self.product_inputs)].to(torch.float64) / functions

    @staticmethod
    def select_product_block(basis: HilbertBasis, lengthscale: torch.Tensor, candidates: list[int], kernel: str,
                             nu: float | None, max_features: int, min_relative_variance: float) -> dict[str, Any]:
        """The hybrid's product block on ``basis``: its inputs and multi-indices.

        The (at most ``max_features``) multi-indices over the inputs ``candidates`` of largest prior variance
        under a product kernel with ``lengthscale``, down to ``min_relative_variance`` of the largest
        (:func:`~tnbayes.basis.top_product_indices`); inputs that only ever get their first function are left out
        (the block is then constant along them).

        Parameters
        ----------
        basis : HilbertBasis
        lengthscale : torch.Tensor of shape (D,)
        candidates : list of int
            Inputs the block may use.
        kernel : str
        nu : float, optional
        max_features : int
        min_relative_variance : float

        Returns
        -------
        dict
            ``"inputs"`` (list of int) and ``"indices"`` (torch.Tensor of shape (J, len(inputs))).
        """
        omega = basis.sqrt_eigenvalues()[candidates]  # (k, M)
        log_w = log_spectral_density(omega, lengthscale.cpu()[candidates].unsqueeze(-1), kernel, nu)
        indices = top_product_indices(log_w, max_features, min_log_ratio=-math.log(min_relative_variance))
        used = [a for a in range(len(candidates)) if bool((indices[:, a] > 0).any())] or [0]
        return {"inputs": [candidates[a] for a in used], "indices": indices[:, used]}
