"""Every warning a fit or a prediction raises points at the caller's line (the first frame outside tnbayes)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tnbayes
from tnbayes.data import ChunkedData


def _rows(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    return X, np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def _sine():
    """30 rows of a 1-D sine on which RFFNet() predicts the mean (see tests/models/test_rffnet.py)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (330, 1))
    return X[:30], np.sin(2 * X[:30, 0]) + 0.1 * rng.standard_normal(330)[:30]


def _import_renamed():
    from tnbayes.inference.als import REGULARIZERS  # noqa: F401 (the FutureWarning of a renamed name)


def _renamed_function_argument():
    import torch

    from tnbayes.inference.mixture_weights import solve_mixture_weights

    F = torch.eye(3, dtype=torch.float64)
    solve_mixture_weights(F, torch.ones(3, dtype=torch.float64), regularization="l2")


def _tnkf_deprecated_names():
    model = tnbayes.TNKF(early_stopping=True, hyper_max_points=40).fit(*_rows(40))  # the alias warns in fit
    return model.posterior_cov_tt_  # a deprecated property


def _qtkm_ignored_argument():
    X, y = _rows(40, d=1)
    tnbayes.QTKM(max_sweeps=2, tol=0.0).fit(X, y).weight_tensor(dim=0)


def _compare_with_a_failing_run():
    from tnbayes.compare import compare
    from tnbayes.datasets import make_sinc

    def failing(run):
        raise ValueError("this model cannot be built")

    compare({"failing": failing}, ["sinc"], splits=[0], on_error="record", progress=False, figures=False,
            load=lambda name, split: make_sinc(n_train=20, n_test=10, seed=split))


def _caught(action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    return caught


CASES = {
    "column-vector y": lambda: tnbayes.CPDKernelMachine(max_num_basis=4, rank=2).fit(_rows()[0], _rows()[1][:, None]),
    "ALS sweep budget": lambda: tnbayes.CPDKernelMachine(max_num_basis=8, rank=4, max_sweeps=1).fit(*_rows()),
    "chunked ALS sweep budget": lambda: tnbayes.QTKM(max_sweeps=1).fit(
        ChunkedData.from_arrays(*_rows(), chunk_size=20)),
    "predictions outside the box": lambda: tnbayes.CPDKernelMachine(max_num_basis=4, rank=2).fit(*_rows()).posterior(
        3 * _rows()[0]),
    "TNKF far from the data": lambda: tnbayes.TNKF().fit(*_rows()).posterior(50 * _rows()[0]),
    "TNKF over its budget": lambda: tnbayes.TNKF(time_budget=1e-3).fit(*_rows()),
    "TTKalmanGP over its budget": lambda: tnbayes.TTKalmanGP(time_budget=1e-3).fit(*_rows()),
    "CPD over its budget": lambda: tnbayes.CPDKernelMachine(time_budget=1e-3).fit(*_rows()),
    "HilbertGP box too small": lambda: tnbayes.HilbertGP(num_basis=4).fit(*_rows(d=1)),
    "RFFNet predicts the mean": lambda: tnbayes.RFFNet().fit(*_sine()),
    "a renamed module attribute": lambda: __import__("tnbayes.inference.als", fromlist=["REGULARIZERS"]).REGULARIZERS,
    "a renamed name imported": lambda: _import_renamed(),
    "classifier column-vector y": lambda: tnbayes.TNKFClassifier().fit(_rows()[0], (_rows()[1] > 0)[:, None]),
    "a renamed model parameter": lambda: tnbayes.FLModel(beta=0.1, max_sweeps=1).fit(*_rows()),
    "a renamed function argument": _renamed_function_argument,
    "TNKF's deprecated alias and property": _tnkf_deprecated_names,
    "QTKM's ignored argument": _qtkm_ignored_argument,
    "compare: a run that failed": _compare_with_a_failing_run,
    "FL's sweeps ended by the budget": lambda: tnbayes.FLModel(rank=2, time_budget=1e-9, max_sweeps=2).fit(*_rows()),
    # a given penalty far too large for the given noise: ALS keeps W near 0 and the model predicts the mean of y
    "CPD predicts the mean": lambda: tnbayes.CPDKernelMachine(rank=2, max_sweeps=2, penalty=1e8,
                                                              noise_variance=1e-3).fit(*_rows()),
}


#: the warning each case must raise (any other it raises must point at the caller too)
EXPECTED = {
    "column-vector y": "DataConversionWarning", "classifier column-vector y": "DataConversionWarning",
    "ALS sweep budget": "ConvergenceWarning", "chunked ALS sweep budget": "ConvergenceWarning",
    "RFFNet predicts the mean": "ConvergenceWarning", "predictions outside the box": "OutOfBoxWarning",
    "TNKF far from the data": "OutOfBoxWarning", "TNKF over its budget": "BudgetWarning",
    "TTKalmanGP over its budget": "BudgetWarning", "CPD over its budget": "BudgetWarning",
    "HilbertGP box too small": "ApproximationWarning", "a renamed module attribute": "FutureWarning",
    "a renamed name imported": "FutureWarning", "a renamed model parameter": "FutureWarning",
    "a renamed function argument": "FutureWarning", "TNKF's deprecated alias and property": "FutureWarning",
    "QTKM's ignored argument": "FutureWarning", "compare: a run that failed": "RuntimeWarning",
    "FL's sweeps ended by the budget": "BudgetWarning", "CPD predicts the mean": "ConvergenceWarning",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_warning_points_at_the_caller(case):
    caught = _caught(CASES[case])
    assert EXPECTED[case] in {w.category.__name__ for w in caught}, \
        f"{case}: expected a {EXPECTED[case]}, got {[w.category.__name__ for w in caught]}"
    for w in caught:
        assert w.filename == __file__, f"{case}: {w.category.__name__} points at {w.filename}:{w.lineno}"


def test_an_explicit_stacklevel_of_the_public_check_is_kept():
    """``check_hilbert_approximation(stacklevel=1)`` points at the check itself; by default at the caller."""
    from tnbayes.basis import check_hilbert_approximation

    default = _caught(lambda: check_hilbert_approximation(0.05, 1.0, 4, "se"))
    explicit = _caught(lambda: check_hilbert_approximation(0.05, 1.0, 4, "se", stacklevel=1))
    assert [w.filename for w in default] == [__file__]
    assert len(explicit) == 1 and explicit[0].filename.endswith("rules.py")
