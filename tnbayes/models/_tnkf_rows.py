"""TNKF's measurement rows: the kernel that builds them, the order of α's entries and of the stream, and the
streaming of the compressed rows through the row-by-row TT Kalman filter.

The LS-SVM dual's rows ``c_k = K[k] + e_k/γ`` play for :class:`~tnbayes.TNKF` the part a basis plays for the
primal models: they are what the filter of :mod:`tnbayes.inference.kalman` measures. :class:`KernelRowsMixin`
holds that machinery for :class:`~tnbayes.TNKF` (and :class:`~tnbayes.TNKFClassifier`); it reads the model's
parameters and fitted attributes (``lengthscale_``, ``outputscale_``, ``penalty_``, ``tt_shape_``, ``n_padded_``).
"""

from __future__ import annotations

import math

import gpytorch
import torch

from tnbayes.inference.kalman import BlockUpdateError, TTKalmanFilter, Truncation
from tnbayes.inference.stream_deadline import EvenThinning, StreamDeadline
from tnbayes.kernels import UnderflowSafeRBFKernel
from tnbayes.selection.calibration import PrequentialResiduals
from tnbayes.selection.hyperparameters import estimate_kernel_hyperparameters
from tnbayes.tensors import TTMatrix, TTVector, hierarchical_order, tt_svd_batched
from tnbayes.tensors.tt_block import block_from_dense, columns_to_block

__all__ = ["KernelRowsMixin", "ROW_ORDERS", "STREAM_ORDERS"]

#: how the entries of α (the columns of the kernel rows) are ordered before tensorisation (the order
#: changes TT ranks, not the exact solution)
ROW_ORDERS = ("auto", "given", "sorted", "pca", "tree")
#: in which order the rows are streamed into the filter (matters with ``max_rows``, early stopping, the budget's
#: deadline or truncation)
STREAM_ORDERS = ("auto", "given", "index", "random")
#: entries of one dense kernel block computed at a time (rows × training points)
_KERNEL_BLOCK_ENTRIES = 2**24
#: numbers the partial products of compressed rows with the covariance root hold at once (test rows, held-out rows)
_ROOT_PRODUCT_ENTRIES = 2**22


class KernelRowsMixin:
    """Kernel rows of the LS-SVM dual for a TNKF-like model: build, order, compress and stream them."""

    def _make_kernel_module(self, num_dims: int) -> gpytorch.kernels.Kernel:
        """The GPyTorch kernel of the rows: ``ScaleKernel`` of the ARD SE or Matérn kernel with ``lengthscale_`` and
        ``outputscale_``, in eval mode, of the model's dtype and device (the SE kernel as
        :class:`~tnbayes.kernels.UnderflowSafeRBFKernel`: kernel rows of inputs far apart on the lengthscale's scale are
        exactly 0 there, without torch's slow exponentials of underflowing arguments)."""
        if self.kernel != "matern":
            base = UnderflowSafeRBFKernel(ard_num_dims=num_dims)
        else:
            base = gpytorch.kernels.MaternKernel(nu=float(self.nu), ard_num_dims=num_dims)
        module = gpytorch.kernels.ScaleKernel(base).to(dtype=self.dtype_, device=self.device_)
        module.base_kernel.lengthscale = self.lengthscale_.to(self.dtype_).reshape(1, -1).to(self.device_)
        module.outputscale = float(self.outputscale_)
        return module.eval()

    def _rows_per_root_product(self, rows: list[torch.Tensor], root: TTMatrix) -> int:
        """Rows of batched cores (B, r, n, r') multiplied by the covariance root at once: their partial products in
        :func:`~tnbayes.tensors.matvec_to_dense` hold about √N·n·r_L·r_row numbers per row, at most
        :data:`_ROOT_PRODUCT_ENTRIES` in all."""
        width = math.isqrt(self.n_padded_) * max(self.tt_shape_) * max(root.ranks) * max(c.shape[-1] for c in rows)
        return max(1, _ROOT_PRODUCT_ENTRIES // width)

    def _block_rows(self, num_columns: int) -> int:
        """Kernel rows computed in one dense block of ``num_columns`` columns."""
        return max(1, min(4096, _KERNEL_BLOCK_ENTRIES // max(num_columns, 1)))

    def _resolve_hyperparameters(self, X: torch.Tensor, y: torch.Tensor) -> None:
        """Set ``lengthscale_``, ``outputscale_``, ``penalty_`` and ``measurement_noise_``: given, or from an exact GP's
        marginal likelihood on (a subsample of) X (n, D), y (n,) (see the Notes of :class:`~tnbayes.TNKF`)."""
        num_dims = X.shape[1]
        estimate = None
        if self.lengthscale is None or self.measurement_noise is None or self.prior_variance is None:
            family = "matern" if self.kernel == "matern" else "se"
            estimate = estimate_kernel_hyperparameters(
                X, y, kernel=family, nu=None if family == "se" else float(self.nu),
                max_points=int(self.hyper_max_points), seed=int(self.seed))
        self.hyperparameter_source_ = "given" if estimate is None else estimate.describe()
        self._report(f"kernel hyper-parameters: {self.hyperparameter_source_} (an exact GP's ML-II, ℓ/√2 for the "
                     f"filter's data-dependent kernel; given values are kept).")
        if self.lengthscale is not None:
            ls = torch.as_tensor(self.lengthscale, dtype=torch.float64).reshape(-1)
            if ls.numel() not in (1, num_dims) or not bool((ls > 0).all()):
                raise ValueError(f"lengthscale must be one positive number or one per input ({num_dims}).")
            self.lengthscale_ = ls.expand(num_dims).clone()
        else:  # Σ_j k_ℓ(x, x_j) k_ℓ(x_j, x') ∝ k_{√2ℓ}(x, x') for the SE kernel
            self.lengthscale_ = estimate.lengthscale.clone() / math.sqrt(2.0)
        self.outputscale_ = float(self.outputscale) if self.outputscale is not None else 1.0
        self.penalty_ = 0.0 if self.gamma is None else 1.0 / float(self.gamma)
        self.measurement_noise_ = float(self.measurement_noise if self.measurement_noise is not None
                                        else estimate.noise_variance)
        self._gp_outputscale = None if estimate is None else float(estimate.outputscale)

    def _default_prior_variance(self, X: torch.Tensor) -> float:
        """p_0 = σ_f,GP² / mean_i Σ_j c_ij² (rows of K + I/γ)."""
        return self._gp_outputscale / self._mean_square_row(X)

    def _mean_square_row(self, X: torch.Tensor) -> float:
        """mean_i Σ_j c_ij² over (at most) 512 random rows c_i of K + I/γ (needs ``kernel_module_``)."""
        generator = torch.Generator().manual_seed(int(self.seed))
        rows = torch.randperm(X.shape[0], generator=generator)[:512].to(X.device)
        block = self.kernel_matrix(X[rows], X)
        block[torch.arange(rows.numel()), rows] += self.penalty_
        return float((block**2).sum(1).mean())

    def _row_order(self, X: torch.Tensor, shape: list[int]) -> torch.Tensor:
        """α's entry order (``order``): a permutation (n,) of the training inputs X (n, D) for TT modes ``shape``."""
        order = self.order
        if order == "auto":
            order = "sorted" if X.shape[1] == 1 else "tree"
        if order == "given":
            return torch.arange(X.shape[0], device=X.device)
        if order == "sorted":
            return torch.argsort(X[:, 0], stable=True)
        X = X / self.lengthscale_.to(X)  # the kernel's geometry: rare one-hot columns must not dominate
        if order == "tree":
            return hierarchical_order(X, shape).to(X.device)
        centred = X - X.mean(0)
        _, _, vh = torch.linalg.svd(centred[: min(X.shape[0], 20000)].double(), full_matrices=False)
        return torch.argsort(centred.double() @ vh[0], stable=True)

    def _sample_row_ranks(self, X: torch.Tensor, X_ordered: torch.Tensor, position: torch.Tensor,
                          rule: Truncation, num_rows: int = 4) -> list[int]:
        """Largest bond ranks (d − 1) of a few compressed kernel rows, the row ranks of the cost model."""
        generator = torch.Generator().manual_seed(int(self.seed))
        picked = torch.randperm(X.shape[0], generator=generator)[:num_rows].to(X.device)
        rows = torch.zeros(picked.numel(), self.n_padded_, dtype=self.dtype_, device=self.device_)
        rows[:, : X.shape[0]] = self.kernel_matrix(X[picked], X_ordered)
        rows[torch.arange(picked.numel()), position[picked]] += self.penalty_
        ranks = [TTVector.from_dense(row, self.tt_shape_, tol=rule.tol, max_rank=rule.max_rank).ranks[1:-1]
                 for row in rows]
        return [max(r[k] for r in ranks) for k in range(len(self.tt_shape_) - 1)]

    def _stream(self, n: int, order: torch.Tensor, num_dims: int, subsample: bool = False) -> torch.Tensor:
        """Training-input indices in the order their rows are streamed (see ``stream_order``); ``subsample``: the
        budget streams only the first rows, so ``"auto"`` means a random order."""
        stream_order = self.stream_order
        if stream_order == "auto":
            stream_order = "random" if subsample else "index" if num_dims == 1 else "given"
        if stream_order == "index":
            return order
        if stream_order == "random":
            generator = torch.Generator().manual_seed(int(self.seed))
            return torch.randperm(n, generator=generator).to(order.device)
        return torch.arange(n, device=order.device)

    def _compress_block(self, rows: torch.Tensor, rule: Truncation) -> TTVector:
        """Kernel rows (B, N) as one block TT. With a rank cap in ``rule`` every row is compressed on its own, as
        :meth:`_latent` compresses a test row (a block compression would fit α to different rows than those it
        predicts with; on Adult with rows of rank 10 that cost 0.83 → 0.69 accuracy), and the rows are stacked
        exactly; with a tolerance only, the block is compressed at once
        (:func:`~tnbayes.tensors.tt_block.block_from_dense`)."""
        if rule.max_rank is None:
            return block_from_dense(rows, self.tt_shape_, tol=rule.tol)
        return columns_to_block([TTVector.from_dense(row, self.tt_shape_, tol=rule.tol, max_rank=rule.max_rank)
                                 for row in rows])

    def _should_stop(self, history: list[float]) -> bool:
        """Whether tr(P) fell by less than ``early_stopping_tol`` (relative) over the last ``patience`` rows."""
        patience = int(self.patience)
        if len(history) <= patience:
            return False
        before, now = history[-patience - 1], history[-1]
        return before > 0 and (before - now) / before < float(self.early_stopping_tol)

    def _stream_rows(self, kalman: TTKalmanFilter, X: torch.Tensor, X_ordered: torch.Tensor, position: torch.Tensor,
                     stream: torch.Tensor, targets: torch.Tensor, limit: int, row_rule: Truncation,
                     held_out: PrequentialResiduals | None, block_size: int = 1,
                     deadline: StreamDeadline | None = None) -> tuple[dict[str, int], bool, bool]:
        """Stream the first ``limit`` rows of ``stream`` through the filter (the constraint row first when asked).

        Parameters
        ----------
        kalman : TTKalmanFilter
            The filter, updated in place.
        X, X_ordered : torch.Tensor of shape (n, D)
            Scaled training inputs as given and in α's order.
        position : torch.Tensor of shape (n,)
            Entry of α of each training input.
        stream : torch.Tensor of shape (n,)
            Training-input indices in streaming order.
        targets : torch.Tensor of shape (n,)
            y − b in streaming order.
        limit : int
            Rows to stream.
        row_rule : Truncation
            Compression of each kernel row (with ``block_size`` > 1: of each block of rows, by one TT-SVD).
        held_out : PrequentialResiduals or None
            Collects the prequential residuals of the last rows (predicted before they are filtered: with blocks,
            every held-out row of a block from the state before the block).
        block_size : int
            Rows per filter update: 1, Potter's row-by-row update (:meth:`TTKalmanFilter.update`); B > 1, one
            block update of B rows (:meth:`TTKalmanFilter.update_block`). Early stopping is checked after each
            update. A block the filter rejects (:class:`~tnbayes.inference.kalman.BlockUpdateError`) and every row
            after it are filtered one at a time (``block_fallback_row_``).
        deadline : StreamDeadline, optional
            Asked after each update how many rows the time left affords; where fewer than the planned rows left, the
            stream keeps that share of the rows left, spread evenly over them
            (:class:`~tnbayes.inference.stream_deadline.EvenThinning`: a stream in the inputs' order still reaches
            its end), ``held_out`` collects the last of them, and ``stream_order_`` lists the rows processed first.

        Returns
        -------
        max_ranks : dict
            Largest TT rank of the rows (of the row blocks when ``block_size`` > 1) and the covariance root; the
            final mean's TT rank.
        stopped : bool
            Whether early stopping ended the stream.
        left_out : bool
            Whether the deadline left out some of the ``limit`` rows.
        """
        n, n_padded, shape = X.shape[0], self.n_padded_, self.tt_shape_
        step = max(1, int(block_size))
        self.block_fallback_row_ = None
        chunk = max(step, self._block_rows(n) // step * step)  # kernel rows computed at once: whole blocks
        max_ranks = {q: 1 for q in ("row", "mean", "covariance")}
        progress = None
        if self.verbose:
            from tqdm.auto import tqdm
            progress = tqdm(total=limit, desc=f"{type(self).__name__} rows")
        stopped = False
        if self.constraint_row:
            ones = torch.zeros(n_padded, dtype=self.dtype_, device=self.device_)
            ones[:n] = 1.0
            kalman.update(TTVector.from_dense(ones, shape), 0.0, self.measurement_noise_)
        thinning = EvenThinning()  # which planned rows the deadline's share keeps (all without one)
        used: list[torch.Tensor] = []  # the rows processed, chunk by chunk
        frontier = processed = 0  # rows of the stream passed (processed or left out) / processed
        while frontier < limit and not stopped and thinning.share > 0:
            last = min(frontier + chunk, limit)
            rows = torch.zeros(last - frontier, n_padded, dtype=self.dtype_, device=self.device_)
            streamed = stream[frontier:last]
            rows[:, :n] = self.kernel_matrix(X[streamed], X_ordered)
            rows[torch.arange(last - frontier), position[streamed]] += self.penalty_
            local = 0  # rows of the chunk passed
            while local < last - frontier and not stopped and thinning.share > 0:
                picked = []  # the next rows of the update: `step` of those the thinning keeps
                while local < last - frontier and len(picked) < step:
                    if thinning.keeps_next():
                        picked.append(local)
                    local += 1
                if not picked:
                    continue
                size = len(picked)
                if picked[-1] - picked[0] + 1 == size:  # consecutive rows (every row without a deadline): views
                    index = slice(picked[0], picked[-1] + 1)
                    block_rows, block_streamed = rows[index], streamed[index]
                    block_targets = targets[frontier + picked[0]:frontier + picked[-1] + 1]
                else:
                    index = torch.tensor(picked)
                    block_rows, block_streamed = rows[index.to(rows.device)], streamed[index.to(streamed.device)]
                    block_targets = targets[frontier + index]
                used.append(block_streamed)
                if held_out is not None:
                    self._predict_held_out(kalman, block_rows, block_streamed, position, block_targets, row_rule,
                                           held_out.wanted(processed, size), held_out)
                blocked = False
                if step > 1:
                    block = self._compress_block(block_rows, row_rule)
                    try:
                        kalman.update_block(block, block_targets, self.measurement_noise_)
                        blocked = True
                        max_ranks["row"] = max(max_ranks["row"], max(block.ranks))
                    except BlockUpdateError as error:  # the state is unchanged: these rows and the rest one at a time
                        step, self.block_fallback_row_ = 1, processed
                        self._report(f"block update rejected at row {processed} ({error}); rows one at a time from "
                                     f"there.")
                if not blocked:  # row by row: from the start, or since a block was rejected
                    for dense_row, target in zip(block_rows, block_targets):
                        row = TTVector.from_dense(dense_row, shape, tol=row_rule.tol, max_rank=row_rule.max_rank)
                        kalman.update(row, float(target), self.measurement_noise_)
                        max_ranks["row"] = max(max_ranks["row"], max(row.ranks))
                processed += size
                max_ranks["covariance"] = max(max_ranks["covariance"], max(kalman.covariance_sqrt.ranks))
                if self.early_stopping_tol is not None and self._should_stop(kalman.covariance_trace_history):
                    stopped = True
                if deadline is not None:  # the share of the rows left that the time left affords (0: none)
                    rows_left = limit - frontier - local
                    share = thinning.keep_share(deadline.rows_after(processed) - processed, rows_left)
                    if held_out is not None:  # the last rows of those the filter will now process
                        held_out.shorten(processed + round(share * rows_left))
            if progress is not None:
                progress.update(local)
            frontier += local
        if progress is not None:
            progress.close()
        max_ranks["mean"] = max(kalman.mean.ranks)  # the row updates' mean is rounded when read: at the end
        streamed_first = torch.cat(used) if used else stream[:0]
        unprocessed = torch.ones(n, dtype=torch.bool, device=stream.device)
        unprocessed[streamed_first] = False
        self.stream_order_ = torch.cat([streamed_first, stream[unprocessed[stream]]])
        return max_ranks, stopped, bool(thinning.skipped) or (thinning.share == 0 and processed < limit)

    def _predict_held_out(self, kalman: TTKalmanFilter, rows: torch.Tensor, streamed: torch.Tensor,
                          position: torch.Tensor, targets: torch.Tensor, row_rule: Truncation, wanted: slice,
                          held_out: PrequentialResiduals) -> None:
        """Add the prequential residuals and predictive variances of the ``wanted`` rows of a block to ``held_out``.

        Each row is predicted as a new input at x_i would be, from the state before the block: the model without
        the row's own entry of α, i.e. its kernel row without k(x_i, x_i) (+ 1/γ), each row compressed alone as a
        test row is (:func:`~tnbayes.tensors.tt_svd_batched`, the rows of a block in one batch), and
        the state conditioned on α_i = 0 (:meth:`TTKalmanFilter.predict_given_zero_entries`, the exact posterior of
        the model without that entry). With the entry, its unprocessed prior variance p₀ would make every held-out row
        look well covered even when the kernel is nearly white. Without the conditioning, where α's posterior mean
        has large entries that cancel (little noise), dropping one entry moves the prediction far from the data. The
        lost-data check gets the filter's own innovations, ``y − cᵀm`` with the measurement row as given.

        Parameters
        ----------
        kalman : TTKalmanFilter
        rows : torch.Tensor of shape (B, N)
            The block's kernel rows (with their own entries).
        streamed : torch.Tensor of shape (B,)
            Their training inputs.
        position : torch.Tensor of shape (n,)
            Entry of α of each training input.
        targets : torch.Tensor of shape (B,)
            y − b of the rows.
        row_rule : Truncation
        wanted : slice
            The rows of the block that are held out.
        held_out : PrequentialResiduals
        """
        count = wanted.stop - wanted.start
        if count <= 0:
            return
        innovations = targets[wanted] - kalman.dense_means(rows[wanted]).cpu()  # the measurement rows as given
        kernel_rows = rows[wanted].clone()
        own = position[streamed[wanted]]
        kernel_rows[torch.arange(count), own] = 0.0
        compressed = tt_svd_batched(kernel_rows, self.tt_shape_, tol=row_rule.tol, max_rank=row_rule.max_rank)
        chunk = self._rows_per_root_product(compressed, kalman.covariance_sqrt) if kalman.square_root else count
        entries = own.tolist()
        predictions = [kalman.predict_given_zero_entries([core[start:start + chunk] for core in compressed],
                                                         entries[start:start + chunk])
                       for start in range(0, count, chunk)]
        means, variances = (torch.cat(values).to(torch.float64).cpu() for values in  # on the CPU, as the targets
                            zip(*predictions))
        held_out.add(targets[wanted] - means, variances + self.measurement_noise_, targets[wanted], innovations)
