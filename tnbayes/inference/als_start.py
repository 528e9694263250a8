"""Where the ALS engine's cores start: a seeded random draw, or cores aligned with each mode's mean feature where
the random draw's products would vanish (the *inference* axis).

ALS (:class:`~tnbayes.inference.CPDALS`) starts from random cores of unit Frobenius norm. A row's prediction is a sum
of products of K per-mode projections ``φ_k(x)ᵀ w_k``; for a random unit column each projection is about
``‖φ_k(x)‖/√M_k``, so the product shrinks geometrically with K. The normal equations of a core hold the squares of the
other modes' products: where the products fall below the smallest normal number of the dtype, a row adds nothing,
and where that holds for every row the first core update sees no data and ALS stays at W = 0 — a fit of the mean,
with many modes (QTKM has four per input) and sooner in float32. (Between that number and its square root, where the
squares underflow, ALS still fits from the upper tail of the rows.) A common scale of the cores does not help: it
multiplies the penalty's Gram matrices by the same power that the products gain.

:func:`initial_cores` therefore checks the random draw first, in one pass over the rows (products summed in log
scale, which does not underflow): where its products vanish on more than :data:`VANISHING_SHARE` of the rows, the
cores start instead from each mode's mean feature scaled to unit norm, plus a random part (:func:`aligned_cores`, as
``FLModel`` starts where its normalised features would otherwise start at W = 0). A unit vector along the mean
feature projects the features at about their own size, against about 1/√M_k of it for a random one, so the
products stay representable over many more modes. Everywhere else the random draw is kept, so the fits it served do not
change. The check costs one pass over the rows per engine (for a streamed source, one more read of it), and a
second one where it replaces the start.

The feature maps of the CPD models have a nonzero mean feature in every mode (the constant Fourier frequency, the
positive first Hilbert function); a mode whose mean feature is zero would start from its random part alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from tnbayes.basis.tensor_product import TensorProductFeatures
from tnbayes.distributed import all_reduce_sum
from tnbayes.tensors.cpd import random_cpd

__all__ = ["INITIAL_PERTURBATION", "VANISHING_SHARE", "CoreStart", "aligned_cores", "initial_cores"]

#: size of the random part of each column of cores that start from the mean feature (relative to it)
INITIAL_PERTURBATION = 0.3
#: the random start is replaced where more than this share of the rows has every product (over ranks and
#: components) below the dtype's smallest normal number
VANISHING_SHARE = 0.5


@dataclass(frozen=True)
class CoreStart:
    """How :func:`initial_cores` started the cores.

    Attributes
    ----------
    kind : {"random", "mean feature", "given"}
        The seeded random draw, the mean features (:func:`aligned_cores`), or cores the caller passed.
    vanishing_share : float
        Share of the rows on which every product of the random draw fell below the dtype's smallest normal number
        (NaN when the caller passed the cores).
    """

    kind: str
    vanishing_share: float = math.nan

    def describe(self, dtype: torch.dtype) -> str:
        """One phrase for a fit report.

        Parameters
        ----------
        dtype : torch.dtype
            The engine's real dtype (named in the phrase).

        Returns
        -------
        str
        """
        if self.kind != "mean feature":
            return f"ALS started from {'the given' if self.kind == 'given' else 'random'} cores"
        return (f"ALS started from each mode's mean feature: the random start's products vanished (below the "
                f"smallest normal {str(dtype).replace('torch.', '')}) on {self.vanishing_share:.0%} of the rows")


def aligned_cores(directions: Sequence[torch.Tensor], rank: int, *, seed: int, dtype: torch.dtype,
                  device: torch.device | str) -> list[torch.Tensor]:
    """Cores whose R columns are a mode's direction plus a random part of relative size
    :data:`INITIAL_PERTURBATION`.

    Parameters
    ----------
    directions : sequence of K tensors of shape (M_k,)
        One vector per mode: the conjugated mean feature over the rows, scaled to unit norm (:func:`initial_cores`)
        or over the root of the rows' mean squared feature norm (``FLModel``).
    rank : int
        R.
    seed : int
        Seed of the random part (:func:`~tnbayes.tensors.random_cpd`).
    dtype : torch.dtype
        Of the cores (complex for complex features).
    device : torch.device or str
        Of the cores.

    Returns
    -------
    list of torch.Tensor of shape (M_k, R)
    """
    sizes = [int(direction.numel()) for direction in directions]
    noise = random_cpd(sizes, rank, generator=torch.Generator().manual_seed(int(seed)), dtype=dtype, device=device)
    # random_cpd's cores have unit Frobenius norm: √R makes each random column of unit size
    return [direction.unsqueeze(1).expand(size, rank) + INITIAL_PERTURBATION * math.sqrt(rank) * noise[mode]
            for mode, (direction, size) in enumerate(zip(directions, sizes))]


def initial_cores(features: TensorProductFeatures, weights: torch.Tensor, chunks: Callable[[], Iterable[torch.Tensor]],
                  rank: int, *, seed: int, dtype: torch.dtype, device: torch.device | str,
                  distributed: bool = False) -> tuple[list[torch.Tensor], CoreStart]:
    """The seeded random cores, or where their products vanish on most rows the cores of :func:`aligned_cores` from
    the mean features.

    Parameters
    ----------
    features : TensorProductFeatures
        The (active) feature map, P components.
    weights : torch.Tensor of shape (P,)
        The components' coefficients c_p (the mean feature of a mode is that of Σ_p c_p φ^p_k).
    chunks : callable
        Returns a new pass over this process's training rows: an iterable of torch.Tensor of shape (n_i, D). Called
        once, and once more only where the random start is replaced (for the mean features).
    rank : int
    seed : int
    dtype : torch.dtype
        The engine's dtype (complex for complex features).
    device : torch.device or str
    distributed : bool
        Sum the counts and means over the processes of the default ``torch.distributed`` group (every process then
        starts alike).

    Returns
    -------
    cores : list of torch.Tensor of shape (M_k, R)
    start : CoreStart
    """
    random = random_cpd(features.mode_sizes, rank, generator=torch.Generator().manual_seed(int(seed)), dtype=dtype,
                        device=device)
    tiny = torch.finfo(dtype).tiny  # of the real part for a complex dtype
    counts = torch.zeros(2, dtype=torch.float64, device=device)  # rows, rows whose products vanish
    for X in chunks():
        log_products = torch.zeros(features.num_components, X.shape[0], rank, dtype=torch.float64, device=device)
        for mode in range(features.num_modes):  # the products in log scale, which does not underflow
            log_products += (features.mode_features(X, mode).to(dtype) @ random[mode]).abs().to(torch.float64).log()
        counts[0] += X.shape[0]
        counts[1] += (log_products.amax(dim=(0, 2)) < math.log(tiny)).sum()  # on the device: no sync per chunk
    all_reduce_sum(counts, distributed)
    share = float(counts[1] / counts[0])
    if not share > VANISHING_SHARE:
        return random, CoreStart("random", share)
    weights = weights.to(dtype)
    sums = torch.zeros(sum(features.mode_sizes), dtype=dtype, device=device)  # Σ over rows of Σ_p c_p φ^p_k, all k
    for X in chunks():
        sums += torch.cat([torch.einsum("p,pnm->m", weights, features.mode_features(X, mode).to(dtype))
                           for mode in range(features.num_modes)])
    means = all_reduce_sum(sums, distributed).conj().split(list(features.mode_sizes))  # one reduction
    directions = [mean / max(float(torch.linalg.vector_norm(mean)), tiny) for mean in means]
    return aligned_cores(directions, rank, seed=seed, dtype=dtype, device=device), CoreStart("mean feature", share)
