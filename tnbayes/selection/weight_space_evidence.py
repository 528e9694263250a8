"""ML-II of a weight-space model: the hyper-parameters that maximise the evidence of a basis + dense weights fit.

The *selection* axis for :class:`~tnbayes.HilbertGP` (and any model whose evidence is that of
:mod:`tnbayes.inference.weight_space`): the objective is −log p(y)/N from the sufficient statistics, O(M³) per
evaluation whatever N, with its gradient in closed form, so L-BFGS with a strong-Wolfe line search runs to
convergence cheaply. The model supplies what is specific to it — the objective, the map from unconstrained to
constrained values and the starting points; :func:`maximise_evidence` runs the optimiser from every start and
keeps the best point seen, whatever the line search does.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Iterator, Mapping

import torch

__all__ = ["constrain_hyperparameters", "maximise_evidence", "starting_points"]

#: L-BFGS runs per start: a line search that fails on a non-finite bracket resumes from the best point seen
LINE_SEARCH_ATTEMPTS = 3


def maximise_evidence(objective: Callable[[dict[str, torch.Tensor]], torch.Tensor],
                      constrain: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]],
                      starts: Iterable[Mapping[str, torch.Tensor | float]], trainable: Mapping[str, bool], *,
                      max_iter: int, dtype: torch.dtype, device: torch.device | str,
                      what: str = "the model") -> tuple[dict[str, torch.Tensor], float]:
    """Minimise ``objective(constrain(raw))`` by L-BFGS from every start; the best point of all runs.

    Each run tracks the lowest finite objective it evaluates and ends there (an overflowing line-search step or
    a matrix that is not positive definite counts as +∞, so it never breaks the search). torch's strong-Wolfe
    search can fail on a non-finite bracket; the run then resumes from its best point (at most
    :data:`LINE_SEARCH_ATTEMPTS` times).

    Parameters
    ----------
    objective : callable
        Constrained values (a dict of tensors) → the scalar to minimise, e.g. −log p(y)/N; may raise
        ``torch.linalg.LinAlgError``.
    constrain : callable
        Unconstrained values (a dict of tensors, keyed like the starts) → constrained values; fixed
        hyper-parameters are returned at their fixed values.
    starts : iterable of dict
        Unconstrained starting values of every run, in order (a generator may draw them lazily).
    trainable : mapping of str to bool
        Which unconstrained values the optimiser moves (the others stay at their start).
    max_iter : int
        L-BFGS iterations per attempt.
    dtype, device
        Of the unconstrained values.
    what : str
        Named in the error when every run fails.

    Returns
    -------
    values : dict of str to torch.Tensor
        The constrained values at the best point (detached).
    loss : float
        The objective there.

    Raises
    ------
    RuntimeError
        When no run reached a finite objective.
    """
    best: tuple[dict[str, torch.Tensor], float] | None = None
    for init_raw in starts:
        raw = {k: torch.as_tensor(v, dtype=dtype, device=device).clone().requires_grad_(bool(trainable[k]))
               for k, v in init_raw.items()}
        params = [p for p in raw.values() if p.requires_grad]
        track = {"loss": math.inf, "raw": {k: v.detach().clone() for k, v in raw.items()}}

        def loss_fn() -> torch.Tensor:
            p = constrain(raw)
            try:
                loss = objective(p)
            except torch.linalg.LinAlgError:
                return torch.tensor(math.inf, dtype=dtype, device=device, requires_grad=True)
            if not torch.isfinite(loss):  # e.g. an overflowing line-search step: a NaN would break the search
                return torch.tensor(math.inf, dtype=dtype, device=device, requires_grad=True)
            if float(loss.detach()) < track["loss"]:
                track["loss"], track["raw"] = float(loss.detach()), {k: v.detach().clone() for k, v in raw.items()}
            return loss

        if params:
            for _attempt in range(LINE_SEARCH_ATTEMPTS):
                opt = torch.optim.LBFGS(params, lr=1.0, max_iter=int(max_iter), history_size=20,
                                        line_search_fn="strong_wolfe", tolerance_grad=1e-8, tolerance_change=1e-10)

                def closure() -> torch.Tensor:
                    opt.zero_grad()
                    loss = loss_fn()
                    if loss.requires_grad and torch.isfinite(loss):
                        loss.backward()
                    return loss

                try:
                    opt.step(closure)
                    break
                except IndexError:  # torch's strong-Wolfe search fails on a non-finite bracket: resume at the best
                    with torch.no_grad():
                        for k, v in raw.items():
                            v.copy_(track["raw"][k])
        else:
            loss_fn()
        values = constrain({k: v.detach() for k, v in track["raw"].items()})
        if math.isfinite(track["loss"]) and (best is None or track["loss"] < best[1]):
            best = (values, track["loss"])
    if best is None:
        raise RuntimeError(f"{what}: every marginal-likelihood run failed; check the data or raise "
                           "noise_lower_bound.")
    return best


def constrain_hyperparameters(raw: Mapping[str, torch.Tensor], fixed: Mapping[str, object],
                              sizes: Mapping[str, int], *, noise_lower_bound: float,
                              product_lengthscale_floor: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The GP hyper-parameters from their unconstrained values (the parametrisation ML-II optimises in).

    ``lengthscale`` and ``outputscale`` are ``exp(raw)``, ``noise`` is ``σ²_min + softplus(raw)``, ``const`` is
    ``raw``; a hybrid kernel's ``share`` is ``sigmoid(raw)`` and its ``product_lengthscale`` is ``floor + exp(raw)``.

    Parameters
    ----------
    raw : mapping of str to torch.Tensor
        Unconstrained values, keyed by name.
    fixed : mapping of str to object
        The fixed value of each name, or None where it is maximised.
    sizes : mapping of str to int
        Length of the vector-valued ones (``lengthscale``, ``product_lengthscale``): a fixed value is broadcast to it.
    noise_lower_bound : float
        σ²_min.
    product_lengthscale_floor : torch.Tensor of shape (sizes["product_lengthscale"],), optional
        Needed with ``product_lengthscale``.

    Returns
    -------
    dict of str to torch.Tensor
    """
    dtype, device = next(iter(raw.values())).dtype, next(iter(raw.values())).device
    out = {}
    for name, value in raw.items():
        if fixed[name] is not None:
            t = torch.as_tensor(fixed[name], dtype=dtype, device=device)
            out[name] = t.reshape(-1).expand(sizes[name]).clone() if name in sizes else t
        elif name == "const":
            out[name] = value
        elif name == "noise":
            out[name] = noise_lower_bound + torch.nn.functional.softplus(value)
        elif name == "share":
            out[name] = torch.sigmoid(value)
        elif name == "product_lengthscale":
            out[name] = product_lengthscale_floor + torch.exp(value)
        else:
            out[name] = torch.exp(value)
    return out


def starting_points(init: Mapping[str, object], *, num_restarts: int, sizes: Mapping[str, int],
                    noise_lower_bound: float, product_lengthscale_floor: torch.Tensor | None,
                    generator: torch.Generator, dtype: torch.dtype) -> Iterator[dict[str, torch.Tensor | float]]:
    """Unconstrained starts of the ML-II runs (:func:`constrain_hyperparameters` maps them back).

    The first run starts at ``init`` where it gives a value, else at ℓ = 0.5, σ_f² = 1, σ² = σ²_min + 0.1, c = 0
    (a hybrid kernel: ρ = 0.5 and the product block's ℓ at least 1.5 × its floor); each of the ``num_restarts``
    others draws log-uniformly ℓ ∈ [0.1, 3], σ_f² ∈ [0.3, 3], σ² ∈ [10⁻³, 0.3] and ρ ∈ [0.1, 0.9] uniformly, from
    ``generator`` (drawn lazily, run by run).

    Parameters
    ----------
    init : mapping of str to object
        Starting values of the first run (any subset of the names).
    num_restarts : int
    sizes : mapping of str to int
        ``"lengthscale"`` and, for a hybrid kernel, ``"product_lengthscale"``: the vector lengths.
    noise_lower_bound : float
    product_lengthscale_floor : torch.Tensor, optional
        With ``"product_lengthscale"`` in ``sizes``.
    generator : torch.Generator
    dtype : torch.dtype

    Yields
    ------
    dict of str to torch.Tensor or float
    """
    num_ls, hybrid, lower = sizes["lengthscale"], "product_lengthscale" in sizes, float(noise_lower_bound)
    floor = product_lengthscale_floor

    def start(name: str, default: float) -> float:
        return float(init[name]) if init.get(name) is not None else default

    for run in range(int(num_restarts) + 1):
        if run == 0:
            ls0 = init.get("lengthscale")
            ls0 = torch.full((num_ls,), 0.5, dtype=dtype) if ls0 is None else torch.as_tensor(ls0, dtype=dtype)
            noise0 = max(start("noise", lower + 0.1) - lower, 1e-12)
            init_raw = {"lengthscale": ls0.reshape(-1).expand(num_ls).log(),
                        "outputscale": torch.tensor(math.log(start("outputscale", 1.0))),
                        "noise": torch.tensor(math.log(math.expm1(noise0))),
                        "const": torch.tensor(start("const", 0.0))}
            if hybrid:
                share0 = min(max(start("share", 0.5), 1e-3), 1 - 1e-3)
                ls0 = init.get("product_lengthscale")
                ls0 = torch.full((1,), 0.5, dtype=dtype) if ls0 is None else torch.as_tensor(ls0, dtype=dtype)
                floor_here = floor.to(ls0)  # the floor lives with the features (maybe CUDA); the starts on the CPU
                ls0 = torch.maximum(ls0.reshape(-1).expand(sizes["product_lengthscale"]), 1.5 * floor_here)
                init_raw["product_lengthscale"] = (ls0 - floor_here).log()
                init_raw["share"] = torch.tensor(math.log(share0 / (1 - share0)))
        else:
            u = torch.rand(num_ls + 2, generator=generator, dtype=torch.float64)
            noise = torch.exp(math.log(1e-3) + u[num_ls + 1] * math.log(300.0))
            init_raw = {"lengthscale": math.log(0.1) + u[:num_ls] * math.log(3.0 / 0.1),
                        "outputscale": math.log(0.3) + u[num_ls] * math.log(10.0),
                        "noise": torch.log(torch.expm1(noise)),
                        "const": torch.tensor(0.0)}
            if hybrid:
                u = torch.rand(sizes["product_lengthscale"] + 1, generator=generator, dtype=torch.float64)
                init_raw["product_lengthscale"] = math.log(0.1) + u[1:] * math.log(3.0 / 0.1)
                init_raw["share"] = torch.logit(0.1 + 0.8 * u[0])
        yield init_raw
