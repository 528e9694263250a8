"""The dense reference Kalman filter of a static weight vector (the *inference* axis).

The state is ``w ∈ R^N`` with prior ``N(m_0, P_0)`` and measurements ``t_k = c_kᵀ w + e_k``, ``e_k ~ N(0, R)``; the
mean (N,) and covariance (N, N) are held densely, O(N²) memory and work per row. The TT filters of this package are
tested against it. The forgetting factor follows the TNKF paper, ``P⁻ = P / λ_f`` before each update.
"""

from __future__ import annotations

import torch

__all__ = ["DenseKalmanFilter"]


class DenseKalmanFilter:
    """The reference filter with a dense mean (N,) and covariance (N, N): O(N²) memory and per row.

    Parameters
    ----------
    prior_mean : torch.Tensor of shape (N,)
    prior_covariance : torch.Tensor of shape (N, N)
    forgetting_factor : float
        ``λ_f ∈ (0, 1]``; ``P⁻ = P / λ_f`` before each update.
    """

    def __init__(self, prior_mean: torch.Tensor, prior_covariance: torch.Tensor, *,
                 forgetting_factor: float = 1.0) -> None:
        self.mean = prior_mean.clone()
        self.covariance = prior_covariance.clone()
        self.forgetting_factor = float(forgetting_factor)
        self.num_updates = 0

    @classmethod
    def isotropic(cls, size: int, prior_variance: float, *, dtype: torch.dtype = torch.float64,
                  device: str | torch.device | None = None, forgetting_factor: float = 1.0) -> "DenseKalmanFilter":
        """Zero prior mean and covariance ``prior_variance · I``, allocated once (8N² bytes in float64).

        Parameters
        ----------
        size : int
            N.
        prior_variance : float
        dtype, device
            Of the state.
        forgetting_factor : float

        Returns
        -------
        DenseKalmanFilter
        """
        filt = cls.__new__(cls)
        filt.mean = torch.zeros(int(size), dtype=dtype, device=device)
        filt.covariance = torch.eye(int(size), dtype=dtype, device=device).mul_(float(prior_variance))
        filt.forgetting_factor = float(forgetting_factor)
        filt.num_updates = 0
        return filt

    def update(self, row: torch.Tensor, target: float, measurement_noise: float) -> None:
        """Condition on ``target = rowᵀ w + e``, ``e ~ N(0, measurement_noise)``.

        Parameters
        ----------
        row : torch.Tensor of shape (N,)
        target : float
        measurement_noise : float
        """
        # in place: one N×N buffer, so the largest N this filter holds is set by 8N² bytes, not twice that
        if self.forgetting_factor != 1.0:
            self.covariance.div_(self.forgetting_factor)
        gain_numerator = self.covariance @ row
        innovation_variance = float(row @ gain_numerator) + measurement_noise
        residual = float(target) - float(row @ self.mean)
        self.mean = self.mean + (residual / innovation_variance) * gain_numerator
        self.covariance.addr_(gain_numerator, gain_numerator, alpha=-1.0 / innovation_variance)
        self.num_updates += 1
