"""Random Fourier features with ARD relevances (Otto & Izbicki's RFFNet): a learned basis (the *basis* axis).

The ARD Gaussian kernel ``k_λ(x, x') = exp(−½ Σ_j λ_j² (x_j − x'_j)²)`` is approximated by random Fourier
features of the *unit* kernel evaluated at the scaled input λ∘x::

    z(x) = √(2/s) cos(Ωᵀ(λ∘x) + b),   Ω ∈ R^{p×s} i.i.d. N(0, 1),  b ~ U[0, 2π)   (fixed)

with λ, one relevance (inverse length-scale) per input, learned. :func:`rff_features` is the map,
:class:`RFFNetModule` the two-layer torch module ``βᵀ z(x)`` that :mod:`tnbayes.inference.proximal_adam` trains.
Unlike the other bases the features do not factorise over the inputs: RFFNet lives beside the tensor-product mould.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["MIN_FEATURES", "RFFNetModule", "default_num_features", "rff_features"]

#: fewest random features whatever n (the paper's ⌊√n ln n⌋ is tiny for small n)
MIN_FEATURES = 16


def default_num_features(n: int) -> int:
    """The paper's ``s = ⌊√n ln n⌋`` random features for n training rows (at least :data:`MIN_FEATURES`)."""
    return max(MIN_FEATURES, int(math.floor(math.sqrt(n) * math.log(max(n, 2)))))


class RFFNetModule(nn.Module):
    """RFFNet as a two-layer torch module: ARD random Fourier features, then a linear output without bias.

    Parameters
    ----------
    num_inputs : int
        p, the input dimension.
    num_features : int
        s, the number of random features.
    num_outputs : int
        1 for regression, the number of classes for classification.
    initial_relevance : float
        Initial value of every λ_j (the paper: 0).
    generator : torch.Generator, optional
        Source of Ω, b and the initial output weights.
    dtype : torch.dtype

    Attributes
    ----------
    relevances : torch.nn.Parameter of shape (p,)
        λ, the ARD relevances (inverse length-scales; their sign is irrelevant).
    frequencies : torch.Tensor of shape (p, s)
        Ω (buffer).
    phases : torch.Tensor of shape (s,)
        b (buffer).
    output : torch.nn.Linear
        β, weight of shape (num_outputs, s).
    """

    def __init__(self, num_inputs: int, num_features: int, num_outputs: int = 1, *, initial_relevance: float = 0.0,
                 generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.relevances = nn.Parameter(torch.full((num_inputs,), float(initial_relevance), dtype=dtype))
        self.register_buffer("frequencies", torch.randn(num_inputs, num_features, generator=generator, dtype=dtype))
        self.register_buffer("phases", 2 * math.pi * torch.rand(num_features, generator=generator, dtype=dtype))
        self.output = nn.Linear(num_features, num_outputs, bias=False, dtype=dtype)
        bound = 1.0 / math.sqrt(num_features)  # nn.Linear's default initialisation, from our generator
        with torch.no_grad():
            self.output.weight.uniform_(-bound, bound, generator=generator)

    @property
    def num_features(self) -> int:
        """s, the number of random features."""
        return int(self.phases.shape[0])

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``z(λ∘x)`` → shape (n, s) from x of shape (n, p)."""
        return rff_features(x, self.relevances, self.frequencies, self.phases)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``βᵀ z(λ∘x)`` → shape (n, num_outputs)."""
        return self.output(self.features(x))


def rff_features(x: torch.Tensor, relevances: torch.Tensor, frequencies: torch.Tensor,
                 phases: torch.Tensor) -> torch.Tensor:
    """``√(2/s) cos((λ∘x) Ω + b)``.

    Parameters
    ----------
    x : torch.Tensor of shape (n, p)
    relevances : torch.Tensor of shape (p,)
    frequencies : torch.Tensor of shape (p, s)
    phases : torch.Tensor of shape (s,)

    Returns
    -------
    torch.Tensor of shape (n, s)
    """
    s = phases.shape[0]
    return math.sqrt(2.0 / s) * torch.cos((x * relevances) @ frequencies + phases)
