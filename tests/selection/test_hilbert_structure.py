"""tnbayes.selection.hilbert_structure and weight_space_evidence: HilbertGP's selection rules in isolation."""

from __future__ import annotations

import math

import pytest
import torch

from tnbayes.basis import hilbert_box
from tnbayes.selection.hilbert_structure import adapt_basis_and_box, bic_score, candidate_structures, choose_structure
from tnbayes.selection.hilbert_structure import largest_num_basis, memory_check_width, start_num_basis
from tnbayes.selection.weight_space_evidence import constrain_hyperparameters, maximise_evidence, starting_points


def test_candidates_and_their_basis_sizes():
    assert candidate_structures("auto", 1, None) == ["product"]
    assert candidate_structures("auto", 3, None) == ["additive", "product", "hybrid"]  # 10³ ≤ 1024 with M ≥ 8
    assert candidate_structures("auto", 4, None) == ["additive", "hybrid"]  # 5⁴ ≤ 1024 but M < 8
    assert candidate_structures("auto", 2, 40) == ["additive", "hybrid"]  # 40² > 1024
    assert candidate_structures("hybrid", 5, None) == ["hybrid"]
    limits = {"max_num_basis": 512, "requested": "auto"}
    assert start_num_basis("product", 1, num_basis=None, **limits) == 64
    assert start_num_basis("product", 2, num_basis=None, **limits) == 32
    assert start_num_basis("additive", 40, num_basis=None, **limits) == 25  # D·M ≤ 1024
    assert start_num_basis("additive", 40, num_basis=7, **limits) == 7
    assert largest_num_basis("product", 1, **limits) == 512
    assert largest_num_basis("product", 3, **limits) == 10
    assert largest_num_basis("product", 3, max_num_basis=512, requested="product") == 27  # 27³ ≤ 20 000
    assert largest_num_basis("hybrid", 4, **limits) == 128  # D·M ≤ 512
    assert memory_check_width("product", 3, 10, 512)[0] == 1000
    assert memory_check_width("additive", 3, 10, 512)[0] == 30
    assert memory_check_width("auto", 1, None, 10**6)[0] == 10**6  # 1-D: only max_num_basis caps M
    assert memory_check_width("additive", 3, None, 512)[0] == 0  # the feature limit caps M first


def test_bic_choice():
    fits = [{"structure": "additive", "score": bic_score(1.0, 3, 100)},
            {"structure": "hybrid", "score": bic_score(0.99, 6, 100)}]
    assert fits[1]["score"] == pytest.approx(0.99 + 3 * math.log(100) / 100)
    chosen, reason = choose_structure(fits, "auto", 100)
    assert chosen is fits[0] and "2 candidates" in reason
    assert choose_structure(fits, "hybrid", 100)[0] is fits[1]


def test_adaptation_enlarges_box_and_basis_until_the_rule_holds():
    half_range = torch.tensor([1.0, 1.0], dtype=torch.float64)
    calls = []

    def fit_round(num_basis, c, init):
        calls.append((num_basis, c.clone(), init))
        return {"values": {"lengthscale": torch.tensor([0.1, 0.5], dtype=torch.float64)}, "loss": 1.0 / len(calls)}

    c0 = torch.full((2,), 2.0, dtype=torch.float64)
    result, history, converged = adapt_basis_and_box(fit_round, 8, c0, half_range, "se", "start", adapt=True,
                                                     given_c=None, given_num_basis=False, largest=512, max_rounds=3)
    need_c, need_m = hilbert_box(torch.tensor([0.1, 0.5], dtype=torch.float64), half_range, "se")
    assert converged and len(calls) == 2 and calls[0][2] == "start" and calls[1][2] is not None
    assert calls[1][0] == need_m and torch.equal(calls[1][1], torch.maximum(c0, need_c))
    assert [entry["neg_mll"] for entry in history] == [1.0, 0.5] and result["loss"] == 0.5
    calls.clear()
    _, _, converged = adapt_basis_and_box(fit_round, 8, c0, half_range, "se", None, adapt=True, given_c=None,
                                          given_num_basis=True, largest=512, max_rounds=3)
    assert converged and [m for m, _, _ in calls] == [8, 8]  # a given M stays: only the box grows


def test_maximise_evidence_finds_the_minimum_and_keeps_fixed_values():
    sizes = {"lengthscale": 2}
    fixed = {"lengthscale": None, "outputscale": 2.0, "noise": None, "const": None}

    def objective(p):
        return ((p["lengthscale"].log() - torch.tensor([0.3, -0.2], dtype=torch.float64)) ** 2).sum() \
            + (p["noise"] - 0.05) ** 2 + (p["const"] - 1.0) ** 2 + 0 * p["outputscale"]

    starts = starting_points({}, num_restarts=2, sizes=sizes, noise_lower_bound=1e-6,
                             product_lengthscale_floor=None, generator=torch.Generator().manual_seed(0),
                             dtype=torch.float64)
    values, loss = maximise_evidence(objective, lambda raw: constrain_hyperparameters(raw, fixed, sizes,
                                                                                      noise_lower_bound=1e-6),
                                     starts, {k: v is None for k, v in fixed.items()}, max_iter=100,
                                     dtype=torch.float64, device="cpu")
    assert loss < 1e-10 and float(values["outputscale"]) == 2.0
    torch.testing.assert_close(values["lengthscale"].log(), torch.tensor([0.3, -0.2], dtype=torch.float64))
    assert float(values["noise"]) == pytest.approx(0.05, abs=1e-5)
    assert float(values["const"]) == pytest.approx(1.0, abs=1e-5)

    def singular(p):
        raise torch.linalg.LinAlgError("not positive definite")

    with pytest.raises(RuntimeError, match="Thing: every marginal-likelihood run failed"):
        maximise_evidence(singular, lambda raw: constrain_hyperparameters(raw, fixed, sizes, noise_lower_bound=1e-6),
                          starting_points({}, num_restarts=0, sizes=sizes, noise_lower_bound=1e-6,
                                          product_lengthscale_floor=None, generator=torch.Generator(),
                                          dtype=torch.float64),
                          {k: v is None for k, v in fixed.items()}, max_iter=5, dtype=torch.float64, device="cpu",
                          what="Thing")
