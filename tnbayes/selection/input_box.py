"""The one rule for test inputs outside the region a fitted basis represents.

Bases with a bounded domain — the Hilbert basis (Dirichlet eigenfunctions on a box of half-width L = c·S) and
Fourier features (periodic with period P) — cannot represent inputs beyond that domain: the eigenfunctions vanish
at the box edge, and periodic features wrap around. Each such model sizes its domain with a margin beyond the
training range (from the lengthscale, see :func:`tnbayes.basis.accurate_hilbert_parameters`, or from the period)
and reports it through ``BaseModel._representable_box``. This module turns that into the *prediction box*:

    prediction box = training range extended by half the margin to the domain edge, per input

so that the predictions inside it stay clear of the edge, and applies the model's ``out_of_box`` policy to test
inputs beyond it:

* ``"clip"`` (default): the inputs are moved to the nearest point of the prediction box (the prediction is that
  of the edge point: constant extrapolation) and one :class:`OutOfBoxWarning` counts them, in the units of X;
* ``"raise"``: a ``ValueError`` that names the first offending value and the box, in the units of X.

Part of the selection layer, beside the three axes: it guards the basis axis's domain.
"""

from __future__ import annotations

import torch

from tnbayes._warnings import warn_user

__all__ = ["OUT_OF_BOX_POLICIES", "OutOfBoxWarning", "apply_input_box", "check_out_of_box_policy", "prediction_box"]

#: values of the ``out_of_box`` parameter
OUT_OF_BOX_POLICIES = ("clip", "raise")


class OutOfBoxWarning(UserWarning):
    """Test inputs lay outside the region the fitted model represents and were clipped to its edge."""


def check_out_of_box_policy(policy: str) -> None:
    """Raise ``ValueError`` unless ``policy`` is one of :data:`OUT_OF_BOX_POLICIES`.

    Parameters
    ----------
    policy : str
    """
    if policy not in OUT_OF_BOX_POLICIES:
        raise ValueError(f"out_of_box must be one of {OUT_OF_BOX_POLICIES}; got {policy!r}.")


def prediction_box(training_range: torch.Tensor, domain: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The region predictions are made in: the training range plus half the margin to the domain edge.

    Parameters
    ----------
    training_range : torch.Tensor of shape (2, D)
        Column minima (row 0) and maxima (row 1) of the training inputs, in the model's scaled units.
    domain : (torch.Tensor of shape (D,), torch.Tensor of shape (D,))
        Lower and upper edge of the region the basis represents, same units.

    Returns
    -------
    torch.Tensor of shape (2, D)
        Lower (row 0) and upper (row 1) edge. Where the training range reaches beyond the domain (a basis fitted
        on a box narrower than the data), the domain edge is used.
    """
    low, high = (edge.to(training_range) for edge in domain)
    lower = torch.minimum(training_range[0], low + 0.5 * (training_range[0] - low).clamp_min(0))
    upper = torch.maximum(training_range[1], high - 0.5 * (high - training_range[1]).clamp_min(0))
    return torch.stack([torch.maximum(lower, low), torch.minimum(upper, high)])


def apply_input_box(X: torch.Tensor, box: torch.Tensor, policy: str, *, shift: torch.Tensor,
                    scale: torch.Tensor, model_name: str, remedy: str) -> torch.Tensor:
    """Apply the ``out_of_box`` policy to scaled test inputs.

    Parameters
    ----------
    X : torch.Tensor of shape (n, D)
        Test inputs in the model's scaled units.
    box : torch.Tensor of shape (2, D)
        The prediction box (:func:`prediction_box`) in the same units.
    policy : {"clip", "raise"}
    shift, scale : torch.Tensor of shape (D,) or (1, D)
        The input scaler (user units = scaled · scale + shift), for messages in the units of X.
    model_name : str
        Named in the messages.
    remedy : str
        How to fit a model that reaches further (e.g. "refit with a larger boundary factor c").

    Returns
    -------
    torch.Tensor of shape (n, D)
        ``X`` itself when every input is inside the box; otherwise the clipped inputs (policy ``"clip"``).

    Raises
    ------
    ValueError
        With policy ``"raise"``, when an input lies outside the box.
    """
    check_out_of_box_policy(policy)
    low, high = box[0].to(X), box[1].to(X)
    tolerance = 1e-10 * (high - low).abs().clamp_min(1.0)
    outside = (X < low - tolerance) | (X > high + tolerance)
    if not bool(outside.any()):
        return X
    shift = shift.reshape(-1).to(X)
    scale = scale.reshape(-1).to(X)
    user_low, user_high = low * scale + shift, high * scale + shift
    columns = torch.nonzero(outside.any(0)).flatten().tolist()
    ranges = "; ".join(f"input {d}: [{float(user_low[d]):.6g}, {float(user_high[d]):.6g}]" for d in columns[:5])
    if len(columns) > 5:
        ranges += f"; and {len(columns) - 5} more inputs"
    rows = int(outside.any(1).sum())
    if policy == "raise":
        row, col = (int(i) for i in torch.nonzero(outside)[0])
        value = float(X[row, col] * scale[col] + shift[col])
        raise ValueError(
            f"Input row {row}, column {col} has value {value:.6g}, outside the region this {model_name} represents "
            f"({rows} of {X.shape[0]} rows have inputs outside it; {ranges}, in the units of X). Its basis cannot "
            f"represent inputs beyond that region. Pass out_of_box='clip' to predict them as the nearest edge point, "
            f"or {remedy}."
        )
    warn_user(
        f"{rows} of {X.shape[0]} test rows lie outside the region this {model_name} represents ({ranges}, in the "
        f"units of X); they were clipped to its edge, so their predictions are those of the nearest edge point. "
        f"To reach further, {remedy}; pass out_of_box='raise' to refuse such inputs instead.",
        OutOfBoxWarning,
    )
    return torch.maximum(torch.minimum(X, high), low)
