"""FL's λ solvers against a generic convex solver (scipy) on random problems."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from tnbayes.inference.mixture_weights import mixture_weight_objective, solve_mixture_weights


def _problem(seed, n=40, P=6, scale=1.0):
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((n, P))
    F[:, -1] = F[:, 0] + 0.01 * rng.standard_normal(n)  # nearly collinear columns, as periods of one family are
    y = F @ rng.standard_normal(P) + 0.3 * rng.standard_normal(n)
    return torch.tensor(F * scale), torch.tensor(y)  # scale > 1: small least-squares λ; < 1: large


def _reference(F, y, mixture_penalty, beta, nonnegative):
    """scipy: L1 by splitting λ = u − v (u, v ≥ 0) with L-BFGS-B; the others by SLSQP / L-BFGS-B with bounds."""
    F, y = F.numpy(), y.numpy()
    P = F.shape[1]

    def fit(lam):
        r = y - F @ lam
        return 0.5 * r @ r, -F.T @ r

    if mixture_penalty == "l1":
        def f(z):
            lam = z[:P] - z[P:]
            value, grad = fit(lam)
            return value + beta * z.sum(), np.concatenate([grad + beta, -grad + beta])

        bounds = [(0, None)] * P + ([(0, 0)] * P if nonnegative else [(0, None)] * P)
        res = minimize(f, np.zeros(2 * P), jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
        return res.x[:P] - res.x[P:]
    if mixture_penalty == "l2":
        def f(lam):
            value, grad = fit(lam)
            return value + 0.5 * beta * lam @ lam, grad + beta * lam

        res = minimize(f, np.zeros(P), jac=True, method="L-BFGS-B", bounds=[(0, None)] * P if nonnegative else None,
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
        return res.x
    res = minimize(lambda lam: fit(lam)[0], np.zeros(P), jac=lambda lam: fit(lam)[1], method="SLSQP",
                   bounds=[(0, None)] * P if nonnegative else None,
                   constraints=[{"type": "ineq", "fun": lambda lam: 1.0 - lam @ lam, "jac": lambda lam: -2 * lam}],
                   options={"ftol": 1e-15, "maxiter": 1000})
    return res.x


@pytest.mark.parametrize("mixture_penalty", ["l1", "l2", "fixed_norm"])
@pytest.mark.parametrize("nonnegative", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solver_matches_scipy(mixture_penalty, nonnegative, seed):
    F, y = _problem(seed)
    beta = [0.1, 2.0, 10.0][seed]
    ours = solve_mixture_weights(F, y, mixture_penalty, beta, nonnegative=nonnegative)
    ref = torch.tensor(_reference(F, y, mixture_penalty, beta, nonnegative))
    gram, rhs, yy = F.T @ F, F.T @ y, float(y @ y)
    ref_value = mixture_weight_objective(gram, rhs, yy, ref, mixture_penalty, beta)
    if mixture_penalty == "fixed_norm" and not np.isfinite(ref_value):  # SLSQP's tiny constraint violation
        ref_value = mixture_weight_objective(gram, rhs, yy, ref / ref.norm(), mixture_penalty, beta)
    # never worse than the generic solver, and the same point (strictly convex problems)
    assert ours.objective <= ref_value + 1e-7 * abs(ref_value)
    assert float((ours.weights - ref).abs().max()) < 1e-4 * (1 + float(ref.abs().max()))
    if nonnegative:
        assert float(ours.weights.min()) >= 0.0
    if mixture_penalty == "fixed_norm":
        assert float(ours.weights.norm()) <= 1.0 + 1e-9


def test_fixed_norm_inside_ball_has_zero_multiplier_and_equals_least_squares():
    F, y = _problem(3, scale=1000.0)  # large columns: the least-squares λ is small
    sol = solve_mixture_weights(F, y, "fixed_norm")
    assert sol.multiplier == 0.0
    torch.testing.assert_close(sol.weights, torch.linalg.lstsq(F, y.unsqueeze(-1)).solution.squeeze(-1))
    F, y = _problem(3, scale=0.01)  # tiny columns: the constraint is active
    sol = solve_mixture_weights(F, y, "fixed_norm")
    assert sol.multiplier > 0 and abs(float(sol.weights.norm()) - 1.0) < 1e-10


def test_l1_gives_exact_zeros_and_l2_closed_form():
    F, y = _problem(4)
    sparse = solve_mixture_weights(F, y, "l1", mixture_penalty_strength=30.0)
    assert int((sparse.weights == 0).sum()) >= 1
    ridge = solve_mixture_weights(F, y, "l2", mixture_penalty_strength=0.5)
    torch.testing.assert_close(ridge.weights, torch.linalg.solve(F.T @ F + 0.5 * torch.eye(6, dtype=F.dtype), F.T @ y))


@pytest.mark.parametrize("nonnegative", [False, True])
@pytest.mark.parametrize("gap", [1e-4, 1e-7])
def test_l1_is_solved_exactly_on_ill_conditioned_grams(nonnegative, gap):
    """Nearly duplicate families (as FL's periods give: condition numbers of 1e12 measured) leave FISTA far from
    its tolerance after thousands of iterations; the homotopy meets the optimality conditions to round-off."""
    F, y = _problem(5, n=200, P=8)
    noise = torch.randn(200, 2, generator=torch.Generator().manual_seed(0), dtype=F.dtype)
    F[:, 1] = F[:, 2] + gap * noise[:, 0]
    F[:, 7] = F[:, 0] + gap * noise[:, 1]
    beta = 1.0
    sol = solve_mixture_weights(F, y, "l1", beta, nonnegative=nonnegative)
    assert sol.iterations == 0  # no FISTA fallback
    gram, rhs, yy = F.T @ F, F.T @ y, float(y @ y)
    ref = torch.tensor(_reference(F, y, "l1", beta, nonnegative))
    assert sol.objective <= mixture_weight_objective(gram, rhs, yy, ref, "l1", beta) + 1e-12 * yy
    # the optimality conditions: b − Gλ = β sign(λ) on the support, |b − Gλ| ≤ β off it (≤ β only, with λ ≥ 0)
    slack = rhs - gram @ sol.weights
    support = sol.weights != 0
    torch.testing.assert_close(slack[support], beta * torch.sign(sol.weights[support]), rtol=0, atol=1e-7)
    off = slack[~support]
    assert off.numel() == 0 or float(off.max()) <= beta * (1 + 1e-9)
    if nonnegative:
        assert float(sol.weights.min()) >= 0.0
    elif off.numel():
        assert float(off.min()) >= -beta * (1 + 1e-9)


def test_solver_rejects_bad_arguments():
    F, y = _problem(0)
    with pytest.raises(ValueError, match="mixture_penalty"):
        solve_mixture_weights(F, y, "l0")
    with pytest.raises(ValueError, match="mixture_penalty_strength"):
        solve_mixture_weights(F, y, "l1", mixture_penalty_strength=-1.0)
    with pytest.raises(ValueError, match="give F"):
        solve_mixture_weights(F, y[:3], "l1")


def test_old_argument_names_warn_and_give_the_same_solution():
    from tnbayes.inference import mixture_weights

    F, y = _problem(5)
    new = solve_mixture_weights(F, y, "l1", mixture_penalty_strength=3.0)
    with pytest.warns(FutureWarning, match="mixture_penalty"):
        old = solve_mixture_weights(F, y, regularization="l1", beta=3.0)
    torch.testing.assert_close(old.weights, new.weights, rtol=0, atol=0)
    gram, rhs, yy = F.T @ F, F.T @ y, float(y @ y)
    with pytest.warns(FutureWarning) as caught:
        value = mixture_weight_objective(gram, rhs, yy, new.weights, regularization="l1", beta=3.0)
    assert sorted(str(w.message).split("'")[3] for w in caught) == ["mixture_penalty", "mixture_penalty_strength"]
    assert value == mixture_weight_objective(gram, rhs, yy, new.weights, "l1", 3.0)
    with pytest.warns(FutureWarning, match="MIXTURE_PENALTIES"):
        assert mixture_weights.REGULARIZATIONS == mixture_weights.MIXTURE_PENALTIES
