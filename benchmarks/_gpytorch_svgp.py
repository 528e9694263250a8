"""The SVGP a GPyTorch user writes from the GPyTorch SVGP tutorial: the hand-written reference that
``tnbayes.SVGP()`` is measured against (a helper of the benchmark entries, not an entry).

Protocol of :class:`HandWrittenSVGP` (fixed; only ``num_inducing``, ``num_steps``, ``batch_size``,
``learning_rate`` and ``seed`` can be changed, and the defaults study changes none of them):

* inputs standardised with the training mean and standard deviation (a constant column is left unscaled),
  targets standardised likewise; predictions are mapped back to the targets' units;
* 500 inducing points = a uniform random subsample without replacement of the standardised training inputs
  (``numpy.random.default_rng(seed)``; all of them when n < 500), learnt with the other parameters;
* ``gpytorch.models.ApproximateGP`` with ``CholeskyVariationalDistribution`` and the whitened
  ``VariationalStrategy(learn_inducing_locations=True)``, ``ConstantMean``,
  ``ScaleKernel(RBFKernel(ard_num_dims=D))``, ``GaussianLikelihood`` — GPyTorch's defaults for everything else
  (initial hyper-parameters, constraints, jitter);
* objective ``VariationalELBO(likelihood, model, num_data=n)``; one ``torch.optim.Adam`` over the model's and
  the likelihood's parameters, learning rate 0.01, 2000 steps, each on a minibatch of min(n, 1024) rows; the
  minibatches come from a shuffling loop that behaves like ``DataLoader(TensorDataset(X, y), batch_size,
  shuffle=True)`` (a new permutation per epoch, the last batch of an epoch may be shorter), restarted until
  2000 steps are done; no early stopping, no validation set;
* float64; ``torch.manual_seed(seed)`` (the variational mean's random start) inside a forked RNG state, so the
  caller's global torch RNG is left as it was;
* ``predict(X, return_std=True)``: mean and standard deviation of a *new observation* (latent variance + the
  likelihood's noise), in y's units, computed in batches of 4096 rows.
"""

from __future__ import annotations

import math
from typing import Any

import gpytorch
import numpy as np
import torch


class HandWrittenSVGP:
    """A tutorial GPyTorch SVGP with a scikit-learn-like ``fit`` / ``predict`` (see the module docstring).

    Parameters
    ----------
    num_inducing : int
        Inducing points, drawn from the training inputs (all of them when there are fewer).
    num_steps : int
        Adam steps (one minibatch each).
    batch_size : int
        Rows per minibatch (min(n, batch_size) are used).
    learning_rate : float
        Adam's learning rate.
    seed : int
        Seeds the inducing-point subsample, the minibatch order and the variational mean's start.

    Attributes
    ----------
    num_inducing_ : int
        Inducing points used.
    batch_size_ : int
        Rows per minibatch used.
    n_iter_ : int
        Adam steps taken.
    loss_history_ : list of float
        Negative ELBO per sample (GPyTorch's loss, standardised y) after every step.
    noise_variance_ : float
        The likelihood's noise variance in y's units.
    lengthscale_ : list of float
        The RBF length scales in standardised input units.
    """

    def __init__(self, num_inducing: int = 500, num_steps: int = 2000, batch_size: int = 1024,
                 learning_rate: float = 0.01, seed: int = 0) -> None:
        self.num_inducing = num_inducing
        self.num_steps = num_steps
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.seed = seed

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any) -> "HandWrittenSVGP":
        """Standardise, draw the inducing points and run the Adam steps.

        Parameters
        ----------
        X : array-like of shape (n, D)
            Training inputs.
        y : array-like of shape (n,)
            Training targets.

        Returns
        -------
        HandWrittenSVGP
            ``self``.
        """
        X = np.asarray(X, dtype=np.float64).reshape(len(y), -1)
        y = np.asarray(y, dtype=np.float64).ravel()
        n, num_dims = X.shape
        self._x_mean, self._x_std = X.mean(axis=0), X.std(axis=0)
        self._x_std[self._x_std == 0] = 1.0  # a constant column stays unscaled
        self._y_mean, self._y_std = float(y.mean()), float(y.std()) or 1.0
        train_x = torch.as_tensor((X - self._x_mean) / self._x_std)
        train_y = torch.as_tensor((y - self._y_mean) / self._y_std)
        rng = np.random.default_rng(self.seed)
        self.num_inducing_ = min(self.num_inducing, n)
        rows = np.sort(rng.choice(n, self.num_inducing_, replace=False))
        self.batch_size_ = min(n, self.batch_size)

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self._model = _TutorialSVGP(train_x[rows].clone(), num_dims).double()
            self._likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
            self._model.train()
            self._likelihood.train()
            optimizer = torch.optim.Adam([{"params": self._model.parameters()},
                                          {"params": self._likelihood.parameters()}], lr=self.learning_rate)
            elbo = gpytorch.mlls.VariationalELBO(self._likelihood, self._model, num_data=n)
            generator = torch.Generator().manual_seed(self.seed)
            self.loss_history_: list[float] = []
            for batch in _shuffled_batches(n, self.batch_size_, self.num_steps, generator):
                optimizer.zero_grad()
                loss = -elbo(self._model(train_x[batch]), train_y[batch])
                loss.backward()
                optimizer.step()
                self.loss_history_.append(float(loss.detach()))
        self.n_iter_ = len(self.loss_history_)
        self.noise_variance_ = float(self._likelihood.noise.detach()) * self._y_std ** 2
        self.lengthscale_ = self._model.covar_module.base_kernel.lengthscale.detach().ravel().tolist()
        return self

    # ------------------------------------------------------------------ prediction
    def predict(self, X: Any, return_std: bool = False, batch_rows: int = 4096) -> Any:
        """Predictive mean (and standard deviation of a new observation) in y's units.

        Parameters
        ----------
        X : array-like of shape (n, D)
            Test inputs.
        return_std : bool
            Also return the standard deviation (latent variance + noise).
        batch_rows : int
            Rows per prediction batch (bounds the memory of the n × m cross-covariance).

        Returns
        -------
        mean : ndarray of shape (n,)
        std : ndarray of shape (n,)
            Only when ``return_std``.
        """
        if not hasattr(self, "_model"):
            raise RuntimeError("HandWrittenSVGP is not fitted yet; call fit(X, y) first.")
        X = np.asarray(X, dtype=np.float64)
        X = X.reshape(X.shape[0], -1)
        test_x = torch.as_tensor((X - self._x_mean) / self._x_std)
        self._model.eval()
        self._likelihood.eval()
        means, variances = [], []
        with torch.no_grad():
            for start in range(0, test_x.shape[0], batch_rows):
                predictive = self._likelihood(self._model(test_x[start:start + batch_rows]))
                means.append(predictive.mean)
                variances.append(predictive.variance)
        mean = torch.cat(means).numpy() * self._y_std + self._y_mean
        if not return_std:
            return mean
        return mean, np.sqrt(torch.cat(variances).numpy()) * self._y_std


def _shuffled_batches(n: int, batch_size: int, num_steps: int, generator: torch.Generator):
    """``num_steps`` index batches, as ``DataLoader(..., batch_size, shuffle=True)`` yields them epoch after
    epoch: a fresh permutation per epoch, the last batch of an epoch shorter when batch_size does not divide n."""
    steps, per_epoch = 0, math.ceil(n / batch_size)
    while steps < num_steps:
        order = torch.randperm(n, generator=generator)
        for k in range(min(per_epoch, num_steps - steps)):
            yield order[k * batch_size:(k + 1) * batch_size]
        steps += min(per_epoch, num_steps - steps)


class _TutorialSVGP(gpytorch.models.ApproximateGP):
    """``ApproximateGP`` with a Cholesky variational distribution, a whitened variational strategy with learnt
    inducing locations, a constant mean and a scaled ARD RBF kernel (the GPyTorch SVGP tutorial's model)."""

    def __init__(self, inducing_points: torch.Tensor, num_dims: int) -> None:
        distribution = gpytorch.variational.CholeskyVariationalDistribution(inducing_points.size(0))
        strategy = gpytorch.variational.VariationalStrategy(self, inducing_points, distribution,
                                                            learn_inducing_locations=True)
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=num_dims))

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))
