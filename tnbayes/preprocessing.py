"""Input and target scalers fitted on training data and stored inside each model.

Models work internally on scaled data and report predictions in the user's units. The scalers are
deliberately tiny (a shift and a scale per column) so that they save/load exactly as tensors.

Part of the estimator contract (the first step of the data flow, raw X, y → scaler), not of an axis.
"""

from __future__ import annotations

import torch

__all__ = ["AffineScaler", "make_input_scaler", "make_target_scaler"]

_INPUT_KINDS = ("standard", "minmax", "none")


class AffineScaler:
    """Column-wise affine map ``z = (x - shift) / scale``.

    Parameters
    ----------
    kind : {"standard", "minmax", "none"}
        ``standard``: zero mean, unit standard deviation per column. ``minmax``: columns mapped to
        ``[low, high]`` (default [0, 1]). ``none``: identity.
    feature_range : tuple of float
        Target interval for ``minmax``.

    Attributes
    ----------
    shift_ : torch.Tensor of shape (d,) or ()
    scale_ : torch.Tensor of shape (d,) or ()
    """

    def __init__(self, kind: str = "standard", feature_range: tuple[float, float] = (0.0, 1.0)) -> None:
        if kind not in _INPUT_KINDS:
            raise ValueError(f"scaler kind must be one of {_INPUT_KINDS}; got {kind!r}.")
        lo, hi = (float(v) for v in feature_range)
        if not hi > lo:
            raise ValueError(f"feature_range must satisfy low < high; got {feature_range}.")
        self.kind = kind
        self.feature_range = (lo, hi)
        self.shift_: torch.Tensor | None = None
        self.scale_: torch.Tensor | None = None

    def fit(self, data: torch.Tensor) -> "AffineScaler":
        """Estimate shift and scale from training data of shape (n, d) or (n,)."""
        variance = data.var(dim=0, correction=0) if data.shape[0] > 1 else torch.ones_like(data[0])
        return self.fit_statistics(data.mean(dim=0), variance, data.amin(dim=0), data.amax(dim=0))

    def fit_statistics(self, mean: torch.Tensor, variance: torch.Tensor, minimum: torch.Tensor,
                       maximum: torch.Tensor) -> "AffineScaler":
        """Set shift and scale from column statistics (what an out-of-core fit accumulates in one pass).

        Parameters
        ----------
        mean, variance, minimum, maximum : torch.Tensor of shape (d,) or ()
            Column mean, population variance (divisor n), minimum and maximum of the training data.
        """
        if self.kind == "standard":
            shift, scale = mean, variance.clamp_min(0).sqrt()
            # a column whose values are all equal is constant even when its computed variance is not zero (the mean
            # of n equal floats can miss them by a rounding error): shift it by its value and leave it unscaled, so
            # that the rounding error is not blown up to unit scale
            constant = maximum <= minimum
            shift = torch.where(constant, minimum.to(shift.dtype), shift)
            scale = torch.where(constant, torch.zeros_like(scale), scale)
        elif self.kind == "minmax":
            lo, hi = self.feature_range
            scale = (maximum - minimum) / (hi - lo)
            shift = minimum - lo * torch.where(scale > 0, scale, torch.ones_like(scale))
        else:
            shift = torch.zeros_like(mean)
            scale = torch.ones_like(shift)
        # constant columns carry no information: leave them unscaled instead of dividing by zero
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        self.shift_, self.scale_ = shift, scale
        return self

    def _require_fitted(self) -> None:
        if self.shift_ is None:
            raise RuntimeError("This scaler has not been fitted; call fit(data) first.")

    def transform(self, data: torch.Tensor) -> torch.Tensor:
        """Map data of shape (n, d) or (n,) to the scaled space."""
        self._require_fitted()
        return (data - self.shift_) / self.scale_

    def inverse_transform(self, data: torch.Tensor) -> torch.Tensor:
        """Map scaled data of shape (n, d) or (n,) back to the original units."""
        self._require_fitted()
        return data * self.scale_ + self.shift_

    def state(self) -> dict[str, torch.Tensor]:
        """Tensors needed to rebuild the fitted scaler."""
        self._require_fitted()
        return {"shift": self.shift_, "scale": self.scale_}

    def config(self) -> dict:
        """JSON-serialisable constructor arguments."""
        return {"kind": self.kind, "feature_range": list(self.feature_range)}

    @classmethod
    def from_state(cls, config: dict, state: dict[str, torch.Tensor]) -> "AffineScaler":
        """Rebuild a fitted scaler from :meth:`config` and :meth:`state`."""
        scaler = cls(config["kind"], tuple(config["feature_range"]))
        scaler.shift_, scaler.scale_ = state["shift"], state["scale"]
        return scaler

    def to(self, dtype: torch.dtype | None = None, device: torch.device | None = None) -> "AffineScaler":
        """Move the fitted tensors (in place) and return self."""
        self._require_fitted()
        self.shift_ = self.shift_.to(dtype=dtype, device=device)
        self.scale_ = self.scale_.to(dtype=dtype, device=device)
        return self


def make_input_scaler(kind: str) -> AffineScaler:
    """Input scaler by name: ``"standard"``, ``"minmax"`` (to [0, 1]), ``"minmax-sym"`` (to [-1, 1]),
    ``"minmax-half"`` (to [-0.5, 0.5]) or ``"none"``."""
    if kind == "minmax-sym":
        return AffineScaler("minmax", (-1.0, 1.0))
    if kind == "minmax-half":
        return AffineScaler("minmax", (-0.5, 0.5))
    return AffineScaler(kind)


def make_target_scaler(normalize_y: bool) -> AffineScaler:
    """Standardising target scaler when ``normalize_y`` else the identity."""
    return AffineScaler("standard" if normalize_y else "none")
