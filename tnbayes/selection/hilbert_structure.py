"""Choosing a Hilbert-space GP's structure and its (M, c): the *selection* axis of :class:`~tnbayes.HilbertGP`.

* **Which M to start from, and how far it may grow** per structure (:func:`start_num_basis`,
  :func:`largest_num_basis`): every evidence evaluation factorises an M_tot × M_tot matrix, so the feature
  counts are capped (:data:`AUTO_MAX_PRODUCT_FEATURES`, :data:`ADDITIVE_MAX_FEATURES`, the hybrid's blocks).
* **The (M, c) adaptation** (:func:`adapt_basis_and_box`): maximise the evidence, check the fitted lengthscales
  against the approximation rule (:func:`tnbayes.basis.hilbert_box`), enlarge the box and the basis where it is
  violated, refit.
* **The structure** (:func:`choose_structure`): the candidates are Gaussian-process models of the same targets,
  so their marginal likelihoods are comparable; the hyper-parameters are maximised rather than integrated out,
  which favours the candidate with more of them, and the Laplace/BIC approximation of the integral charges
  ½ log N per hyper-parameter (:func:`bic_score`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from tnbayes.basis import DEFAULT_MAX_PRODUCT_FEATURES, hilbert_box

__all__ = [
    "ADDITIVE_MAX_FEATURES",
    "AUTO_MAX_PRODUCT_FEATURES",
    "HYBRID_ADDITIVE_FEATURES",
    "HYBRID_PRODUCT_FEATURES",
    "MIN_PRODUCT_NUM_BASIS",
    "STRUCTURES",
    "adapt_basis_and_box",
    "auto_product_affordable",
    "automatic_width_cap",
    "bic_score",
    "candidate_structures",
    "choose_structure",
    "largest_num_basis",
    "memory_check_width",
    "start_num_basis",
]

#: the values of ``structure``
STRUCTURES = ("auto", "product", "additive", "hybrid")
#: largest M^D of the full product that structure="auto" tries (each likelihood step factorises M^D × M^D)
AUTO_MAX_PRODUCT_FEATURES = 1024
#: largest D·M the adaptation may reach for the additive structure (each likelihood step is O((D·M)³))
ADDITIVE_MAX_FEATURES = 1024
#: functions of the hybrid's product block (those of largest prior variance, see top_product_indices)
HYBRID_PRODUCT_FEATURES = 512
#: largest D·M of the hybrid's additive block
HYBRID_ADDITIVE_FEATURES = 512
#: smallest M per input of a product block that structure="auto" builds
MIN_PRODUCT_NUM_BASIS = 8


def _product_root(cap: int, num_dims: int) -> int:
    """The largest M with M^D ≤ cap."""
    return int(math.floor(cap ** (1.0 / num_dims) + 1e-9))


def auto_product_affordable(num_dims: int, num_basis: int | None) -> bool:
    """Whether ``structure="auto"`` tries the full product: M^D ≤ AUTO_MAX_PRODUCT_FEATURES with M ≥ 8.

    Parameters
    ----------
    num_dims : int
        D.
    num_basis : int, optional
        The given M (None: chosen from the data).
    """
    if num_basis is not None:
        return int(num_basis) ** num_dims <= AUTO_MAX_PRODUCT_FEATURES
    return _product_root(AUTO_MAX_PRODUCT_FEATURES, num_dims) >= MIN_PRODUCT_NUM_BASIS


def candidate_structures(requested: str, num_dims: int, num_basis: int | None) -> list[str]:
    """The structures fitted for ``structure=requested``, in the order they are fitted.

    ``"auto"``: additive, the product where :func:`auto_product_affordable`, then the hybrid (which starts from
    the additive fit); for D = 1 only the product (product = additive).

    Parameters
    ----------
    requested : {"auto", "product", "additive", "hybrid"}
    num_dims : int
    num_basis : int, optional

    Returns
    -------
    list of str
    """
    if requested == "product" or (requested == "auto" and num_dims == 1):
        return ["product"]
    if requested != "auto":
        return [requested]
    return ["additive"] + (["product"] if auto_product_affordable(num_dims, num_basis) else []) + ["hybrid"]


def largest_num_basis(structure: str, num_dims: int, *, max_num_basis: int, requested: str) -> int:
    """Largest M the adaptation may pick for a candidate.

    ``max_num_basis`` and, for products, M^D ≤ the product limit (``DEFAULT_MAX_PRODUCT_FEATURES`` when the product
    was requested, :data:`AUTO_MAX_PRODUCT_FEATURES` as an ``"auto"`` candidate); for the additive structure
    D·M ≤ :data:`ADDITIVE_MAX_FEATURES`, for the hybrid's additive block D·M ≤ :data:`HYBRID_ADDITIVE_FEATURES`.

    Parameters
    ----------
    structure : {"product", "additive", "hybrid"}
        The candidate.
    num_dims : int
    max_num_basis : int
    requested : str
        The ``structure`` parameter.

    Returns
    -------
    int
    """
    limit = int(max_num_basis)
    if num_dims == 1:
        return limit
    if structure == "product":
        cap = DEFAULT_MAX_PRODUCT_FEATURES if requested == "product" else AUTO_MAX_PRODUCT_FEATURES
        return min(limit, max(1, _product_root(cap, num_dims)))
    cap = HYBRID_ADDITIVE_FEATURES if structure == "hybrid" else ADDITIVE_MAX_FEATURES
    return min(limit, max(1, cap // num_dims))


def start_num_basis(structure: str, num_dims: int, *, num_basis: int | None, max_num_basis: int,
                    requested: str) -> int:
    """Starting M of a candidate: the given ``num_basis``, else the largest the feature limit allows (at most 64
    per input for a product, 32 otherwise; see :func:`largest_num_basis` for the arguments)."""
    if num_basis is not None:
        return int(num_basis)
    if structure == "product":
        return max(8, min(64, _product_root(AUTO_MAX_PRODUCT_FEATURES, num_dims)))
    return max(1, min(32, largest_num_basis(structure, num_dims, max_num_basis=max_num_basis, requested=requested)))


def automatic_width_cap(requested: str, num_dims: int, max_num_basis: int) -> int:
    """Most basis functions in all that the automatic M may reach because of ``max_num_basis`` alone.

    Over the structures ``requested`` tries, those whose M is capped by ``max_num_basis`` rather than by a feature
    limit (0 when the feature limits bound every structure): what a memory check must allow for.

    Parameters
    ----------
    requested : {"auto", "product", "additive", "hybrid"}
    num_dims : int
    max_num_basis : int

    Returns
    -------
    int
    """
    structures = {"product": ["product"], "additive": ["additive"], "hybrid": ["hybrid"],
                  "auto": ["product", "additive", "hybrid"] if num_dims > 1 else ["product"]}[requested]
    widths = [0]
    for structure in structures:
        M = largest_num_basis(structure, num_dims, max_num_basis=max_num_basis, requested=requested)
        if M == int(max_num_basis):
            widths.append(M ** num_dims if structure == "product" else
                          M * num_dims + (HYBRID_PRODUCT_FEATURES if structure == "hybrid" else 0))
    return max(widths)


def memory_check_width(requested: str, num_dims: int, num_basis: int | None,
                       max_num_basis: int) -> tuple[int, str, str]:
    """The feature count a fit must have memory for, what sets it, and how to lower it (for a memory error).

    With a given M, the smallest structure tried (M functions in all, D·M additive, M^D product); otherwise
    :func:`automatic_width_cap`, where ``max_num_basis`` rather than a feature limit caps the automatic M.

    Parameters
    ----------
    requested : {"auto", "product", "additive", "hybrid"}
    num_dims : int
    num_basis : int, optional
    max_num_basis : int

    Returns
    -------
    width : int
        M_tot (0: nothing to check).
    what, remedy : str
    """
    if num_basis is not None:
        width = int(num_basis) * (num_dims if requested == "additive" else 1)
        if requested == "product":
            width = int(num_basis) ** num_dims
        return (width, f"num_basis = {int(num_basis)} ({width} basis functions in all)",
                "lower num_basis (or leave it None to choose it from the data)")
    width = automatic_width_cap(requested, num_dims, max_num_basis)
    return (width, f"max_num_basis = {int(max_num_basis)} (up to {width} basis functions in all)",
            "lower max_num_basis")


def adapt_basis_and_box(fit_round: Callable[[int, torch.Tensor, Any], dict[str, Any]], num_basis: int,
                        c: torch.Tensor, half_range: torch.Tensor, rule: str | None, init: Any, *, adapt: bool,
                        given_c: Any, given_num_basis: bool, largest: int, max_rounds: int,
                        progress: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
    """The (M, c) adaptation: fit, check the fitted lengthscales against the rule, enlarge (M, c), refit.

    Each round fits at (M, c); the rule (:func:`tnbayes.basis.hilbert_box`) then asks for a box ``need_c`` and a
    basis ``need_m`` for the fitted lengthscales. The rounds stop when (M, c) already meet them (converged) or
    after ``max_rounds``; otherwise c grows to ``need_c`` and M to ``need_m`` (capped by ``largest``; M stays
    when it was given) and the next round starts from this round's values.

    Parameters
    ----------
    fit_round : callable
        ``fit_round(num_basis, c, init)`` fits at M = ``num_basis`` and box factors ``c`` (D,), starting from
        ``init``; returns a dict with at least ``"values"`` (its ``"lengthscale"`` a tensor of shape (D,) or (1,))
        and ``"loss"`` (−log p(y)/N).
    num_basis : int
        M of the first round.
    c : torch.Tensor of shape (D,)
        Box factors of the first round (box half-width c·S per input).
    half_range : torch.Tensor of shape (D,)
        S, the half-range of the training inputs.
    rule : str, optional
        The kernel of the rule (None: no rule, one round).
    init : object
        Passed to the first round.
    adapt : bool
        Run the adaptation (False: one round, nothing to check).
    given_c : float or list of float, optional
        The user's c (the rule's box is then not enlarged below it, see :func:`~tnbayes.basis.hilbert_box`).
    given_num_basis : bool
        M was given: it stays.
    largest : int
        Largest M the adaptation may pick.
    max_rounds : int
    progress : str, optional
        Show a progress bar with this description.

    Returns
    -------
    result : dict
        The last round's.
    history : list of dict
        One per round: ``num_basis``, ``c``, ``lengthscale`` and ``neg_mll``.
    converged : bool
        Whether (M, c) met the rule before the rounds ran out (True without adaptation).
    """
    num_dims = half_range.shape[0]
    rounds = range(int(max_rounds) if adapt else 1)
    if progress:
        from tqdm.auto import tqdm
        rounds = tqdm(rounds, desc=progress)
    history: list[dict[str, Any]] = []
    converged = not adapt  # one fit and no rule to meet
    result: dict[str, Any] = {}
    for _ in rounds:
        result = fit_round(num_basis, c, init)
        values, loss = result["values"], result["loss"]
        ls = values["lengthscale"].detach()
        history.append({"num_basis": num_basis, "c": c.tolist(), "lengthscale": ls.tolist(), "neg_mll": loss})
        if not adapt:
            break
        need_c, need_m = hilbert_box(ls.cpu().expand(num_dims), half_range.cpu(), rule, c=given_c)
        need_m = min(num_basis if given_num_basis else need_m, int(largest))
        if bool((need_c <= c * (1 + 1e-9)).all()) and need_m <= num_basis:
            converged = True
            break
        c, num_basis = torch.maximum(c, need_c), max(num_basis, need_m)
        init = values
    return result, history, converged


def bic_score(neg_mll: float, num_hyperparameters: int, n: int) -> float:
    """−log p(y | θ̂)/N plus the BIC charge ½ k log N / N for k maximised hyper-parameters (smaller is better)."""
    return neg_mll + 0.5 * num_hyperparameters * math.log(n) / n


def choose_structure(fits: list[dict[str, Any]], requested: str, n: int) -> tuple[dict[str, Any], str]:
    """The candidate ``"auto"`` keeps — the smallest ``"score"`` (:func:`bic_score`) — or the requested one.

    Parameters
    ----------
    fits : list of dict
        The fitted candidates, each with ``"score"``.
    requested : str
        The ``structure`` parameter (not ``"auto"``: the last candidate is the requested structure).
    n : int
        Training rows (to report the margin in nats).

    Returns
    -------
    chosen : dict
        One of ``fits``.
    reason : str
        Why, for verbose output.
    """
    if requested != "auto":
        return fits[-1], f"structure={requested!r} requested"
    chosen = min(fits, key=lambda f: f["score"])
    others = [f["score"] for f in fits if f is not chosen]
    reason = ("the only candidate" if not others else
              f"the highest marginal likelihood, less ½ log N per hyper-parameter, of {len(fits)} candidates "
              f"({(min(others) - chosen['score']) * n:.1f} nats above the next)")
    return chosen, reason
