"""Tensor-train (TT) vectors and matrices in torch.

A length-N vector with ``N = n_1·n_2·…·n_d`` is reshaped (row-major) into a d-way tensor and held as
``d`` cores ``G_k`` of shape ``(r_{k-1}, n_k, r_k)`` with ``r_0 = r_d = 1``::

    x[i_1, …, i_d] = G_1[:, i_1, :] G_2[:, i_2, :] … G_d[:, i_d, :]

An ``M × N`` matrix with ``M = m_1·…·m_d`` and ``N = n_1·…·n_d`` is held as cores of shape
``(r_{k-1}, m_k, n_k, r_k)``: ``A[(i_1…i_d), (j_1…j_d)] = Π_k G_k[:, i_k, j_k, :]``.

Every operation is exact; ranks grow (sums add them, products multiply them) and :meth:`TTVector.round`
/ :meth:`TTMatrix.round` bring them back down (Oseledets 2011, Algorithms 1 and 2). Real dtypes only.

This module holds the two classes and :func:`tt_gram` (the *format* axis); the kernels on plain core lists
(TT-SVD, rounding, block sums) are in :mod:`tnbayes.tensors.tt_rounding`, the randomized rounding of sums in
:mod:`tnbayes.tensors.tt_randomized` and the save/load key scheme in :mod:`tnbayes.tensors.tt_state`.

References
----------
I. V. Oseledets, "Tensor-train decomposition", SIAM J. Sci. Comput. 33(5), 2011.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from tnbayes._deprecation import moved_names_getattr
from tnbayes.tensors.shapes import check_tt_shape, prime_factors
from tnbayes.tensors.tt_rounding import (block_sum, cores_to_dense, inner_product_step, left_orthogonalize,
                                        round_cores, tt_svd)

__all__ = [
    "TTVector",
    "TTMatrix",
    "tt_gram",
    "tt_svd",
]

# ---------------------------------------------------------------------------------------------- shared
def _checked_cores(cores: Sequence[torch.Tensor], kind: str, layout: str) -> list[torch.Tensor]:
    """Check a core list: at least one core, the layout's number of axes, matching ranks, r_0 = r_d = 1."""
    cores = list(cores)
    ndim = layout.count(",") + 1
    if len(cores) == 0:
        raise ValueError(f"A {kind} needs at least one core.")
    for k, core in enumerate(cores):
        if core.ndim != ndim:
            raise ValueError(f"{kind} core {k} must have shape {layout}; got {tuple(core.shape)}.")
        if k > 0 and core.shape[0] != cores[k - 1].shape[-1]:
            raise ValueError(f"TT ranks do not match between cores {k - 1} and {k}: "
                             f"{tuple(cores[k - 1].shape)} then {tuple(core.shape)}.")
    if cores[0].shape[0] != 1 or cores[-1].shape[-1] != 1:
        raise ValueError("The first core must have r_0 = 1 and the last r_d = 1.")
    return cores


class _TensorTrain:
    """Scalar arithmetic and bookkeeping shared by TT-vectors and TT-matrices (cores in ``self.cores``)."""

    cores: list[torch.Tensor]
    #: what to use instead of ``*`` for a product of two TT objects
    _product_hint = "a TT method"

    def __sub__(self, other):
        return self + (-other)

    def __neg__(self):
        return self * -1.0

    def __mul__(self, scalar: float | torch.Tensor):
        if isinstance(scalar, _TensorTrain):
            raise TypeError(f"Use {self._product_hint} for products of two TT objects.")
        cores = list(self.cores)
        cores[0] = cores[0] * scalar
        return type(self)(cores)

    __rmul__ = __mul__

    def __truediv__(self, scalar: float | torch.Tensor):
        return self * (1.0 / scalar)

    @property
    def num_parameters(self) -> int:
        """Numbers stored in the cores."""
        return sum(c.numel() for c in self.cores)

    @property
    def dtype(self) -> torch.dtype:
        return self.cores[0].dtype

    @property
    def device(self) -> torch.device:
        return self.cores[0].device

    def copy(self):
        """A deep copy (cloned cores)."""
        return type(self)([c.clone() for c in self.cores])

    def to(self, *args, **kwargs):
        """Move/cast every core (arguments as ``torch.Tensor.to``)."""
        return type(self)([c.to(*args, **kwargs) for c in self.cores])


# ---------------------------------------------------------------------------------------------- vectors
class TTVector(_TensorTrain):
    """A vector of length ``n_1·…·n_d`` in tensor-train format.

    Parameters
    ----------
    cores : sequence of torch.Tensor of shape (r_{k-1}, n_k, r_k)
        ``r_0 = r_d = 1``; consecutive ranks must match. Cores are used as given (not copied).

    Attributes
    ----------
    cores : list of torch.Tensor
    shape : tuple of int
        Mode sizes ``(n_1, …, n_d)``.
    ranks : tuple of int
        ``(1, r_1, …, r_{d-1}, 1)``.
    """

    _product_hint = ".hadamard() or .dot()"

    def __init__(self, cores: Sequence[torch.Tensor]) -> None:
        self.cores = _checked_cores(cores, "TT-vector", "(r_prev, n, r_next)")

    # -------------------------------------------------------------- construction
    @classmethod
    def from_dense(cls, x: torch.Tensor, shape: Sequence[int] | None = None, *, tol: float = 0.0,
                   max_rank: int | None = None) -> "TTVector":
        """Compress a dense vector (or d-way tensor) by TT-SVD.

        Parameters
        ----------
        x : torch.Tensor of shape (N,) or (n_1, …, n_d)
        shape : sequence of int, optional
            Mode sizes with product N (default: ``x.shape`` for a tensor, the sorted prime factors of N
            for a vector — see :func:`tensorize_shape` to pad awkward lengths first).
        tol : float
            Relative accuracy ``‖x − TT‖ ≤ tol·‖x‖`` (0: exact up to round-off).
        max_rank : int, optional

        Returns
        -------
        TTVector
        """
        if shape is None:
            shape = x.shape if x.ndim > 1 else prime_factors(x.numel())
        shape = check_tt_shape(shape)
        if math.prod(shape) != x.numel():
            raise ValueError(f"Cannot reshape {x.numel()} entries into TT mode sizes {shape} "
                             f"(product {math.prod(shape)}).")
        return cls(tt_svd(x.reshape(shape), tol=tol, max_rank=max_rank))

    @classmethod
    def ones(cls, shape: Sequence[int], *, dtype: torch.dtype = torch.float64,
             device: torch.device | str = "cpu") -> "TTVector":
        """The all-ones vector (rank 1)."""
        return cls([torch.ones(1, n, 1, dtype=dtype, device=device) for n in check_tt_shape(shape)])

    @classmethod
    def zeros(cls, shape: Sequence[int], *, dtype: torch.dtype = torch.float64,
              device: torch.device | str = "cpu") -> "TTVector":
        """The zero vector (rank 1)."""
        return cls([torch.zeros(1, n, 1, dtype=dtype, device=device) for n in check_tt_shape(shape)])

    @classmethod
    def random(cls, shape: Sequence[int], ranks: int | Sequence[int], *, generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu") -> "TTVector":
        """Standard-normal cores with the given internal ranks (one number, or d − 1 of them)."""
        shape = check_tt_shape(shape)
        inner = [int(ranks)] * (len(shape) - 1) if isinstance(ranks, int) else [int(r) for r in ranks]
        if len(inner) != len(shape) - 1:
            raise ValueError(f"Need {len(shape) - 1} internal ranks for {len(shape)} modes; got {len(inner)}.")
        full = [1, *inner, 1]
        cores = [torch.randn(full[k], n, full[k + 1], generator=generator, dtype=torch.float64).to(dtype)
                 for k, n in enumerate(shape)]
        return cls([c.to(device) for c in cores])

    # -------------------------------------------------------------- properties
    @property
    def shape(self) -> tuple[int, ...]:
        """Mode sizes (n_1, …, n_d) of the represented tensor."""
        return tuple(int(c.shape[1]) for c in self.cores)

    @property
    def ranks(self) -> tuple[int, ...]:
        """TT ranks (1, r_1, …, r_{d-1}, 1): d + 1 numbers."""
        return (1, *(int(c.shape[2]) for c in self.cores))

    @property
    def numel(self) -> int:
        """Length of the represented vector, ``Π n_k``."""
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"TTVector(shape={self.shape}, ranks={self.ranks}, dtype={self.dtype})"

    # -------------------------------------------------------------- conversion
    def to_dense(self) -> torch.Tensor:
        """The represented vector, shape (N,) (contracted from both ends, see :func:`cores_to_dense`)."""
        return cores_to_dense(self.cores)

    # -------------------------------------------------------------- algebra
    def _check_compatible(self, other: "TTVector") -> None:
        if not isinstance(other, TTVector):
            raise TypeError(f"Expected a TTVector; got {type(other).__name__}.")
        if other.shape != self.shape:
            raise ValueError(f"TT-vectors have different mode sizes: {self.shape} and {other.shape}.")

    def __add__(self, other: "TTVector") -> "TTVector":
        self._check_compatible(other)
        return TTVector(block_sum(self.cores, other.cores))

    def hadamard(self, other: "TTVector") -> "TTVector":
        """Entrywise product; ranks multiply."""
        self._check_compatible(other)
        cores = []
        for a, b in zip(self.cores, other.cores):
            core = torch.einsum("anb,cnd->acnbd", a, b)
            cores.append(core.reshape(a.shape[0] * b.shape[0], a.shape[1], a.shape[2] * b.shape[2]))
        return TTVector(cores)

    def dot(self, other: "TTVector") -> torch.Tensor:
        """Inner product ``xᵀy`` as a 0-d tensor, without forming either vector (O(d n r³))."""
        self._check_compatible(other)
        env = torch.ones(1, 1, dtype=self.dtype, device=self.device)
        for a, b in zip(self.cores, other.cores):
            env = inner_product_step(env, a, b)
        return env.reshape(())

    def dot_rank_one(self, factors: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        """``xᵀ (f_1(i) ⊗ … ⊗ f_d(i))`` for n rank-one vectors given by their factors, in one batched sweep.

        Parameters
        ----------
        factors : torch.Tensor of shape (d, n, n_k), or a sequence of d tensors of shape (n, n_k)
            Factor k of every rank-one vector (row i of ``factors[k]`` belongs to vector i).

        Returns
        -------
        torch.Tensor of shape (n,)
        """
        env = torch.ones(factors[0].shape[0], 1, dtype=factors[0].dtype, device=factors[0].device)
        for core, factor in zip(self.cores, factors):
            env = torch.einsum("na,amb,nm->nb", env, core, factor)
        return env[:, 0]

    def norm(self) -> torch.Tensor:
        """Euclidean norm, from an orthogonalised copy (no cancellation)."""
        cores = left_orthogonalize([c for c in self.cores])
        return torch.linalg.vector_norm(cores[-1])

    def outer(self, other: "TTVector") -> "TTMatrix":
        """``x yᵀ`` as a TT-matrix with row modes of ``x`` and column modes of ``y`` (ranks multiply)."""
        if not isinstance(other, TTVector) or len(other.cores) != len(self.cores):
            raise ValueError("outer needs two TT-vectors with the same number of modes.")
        cores = []
        for a, b in zip(self.cores, other.cores):
            core = torch.einsum("aib,cjd->acijbd", a, b)
            cores.append(core.reshape(a.shape[0] * b.shape[0], a.shape[1], b.shape[1], a.shape[2] * b.shape[2]))
        return TTMatrix(cores)

    def round(self, tol: float = 0.0, max_rank: int | None = None, *,
              reference_norm: float | None = None) -> "TTVector":
        """TT-rounding: right-to-left QR, then left-to-right truncated SVDs (Oseledets 2011, Alg. 2).

        Parameters
        ----------
        tol : float
            Relative accuracy ``‖x − round(x)‖ ≤ tol·‖x‖`` when ``max_rank`` does not bind.
        max_rank : int, optional
        reference_norm : float, optional
            Make the bound ``tol·reference_norm`` instead of ``tol·‖x‖`` (e.g. the norm of the last
            update added to ``x``, so that small updates to a large state are not rounded away).

        Returns
        -------
        TTVector
            A new TT-vector (this one is unchanged).
        """
        return TTVector(round_cores(self.cores, tol, max_rank, reference_norm))


# ---------------------------------------------------------------------------------------------- matrices
class TTMatrix(_TensorTrain):
    """An ``(m_1·…·m_d) × (n_1·…·n_d)`` matrix in tensor-train (TT-matrix / MPO) format.

    Parameters
    ----------
    cores : sequence of torch.Tensor of shape (r_{k-1}, m_k, n_k, r_k)

    Attributes
    ----------
    cores : list of torch.Tensor
    row_shape, col_shape : tuple of int
    ranks : tuple of int
    """

    _product_hint = ".matvec(), .matmul() or .hadamard()"

    def __init__(self, cores: Sequence[torch.Tensor]) -> None:
        self.cores = _checked_cores(cores, "TT-matrix", "(r_prev, m, n, r_next)")

    # -------------------------------------------------------------- construction
    @classmethod
    def from_dense(cls, matrix: torch.Tensor, row_shape: Sequence[int], col_shape: Sequence[int], *,
                   tol: float = 0.0, max_rank: int | None = None) -> "TTMatrix":
        """Compress a dense matrix by TT-SVD of its index-interleaved tensor.

        Parameters
        ----------
        matrix : torch.Tensor of shape (M, N)
        row_shape, col_shape : sequence of int
            Mode sizes with products M and N and the same length d.
        tol : float
        max_rank : int, optional
        """
        row_shape, col_shape = check_tt_shape(row_shape), check_tt_shape(col_shape)
        if len(row_shape) != len(col_shape):
            raise ValueError("row_shape and col_shape need the same number of modes.")
        if matrix.shape != (math.prod(row_shape), math.prod(col_shape)):
            raise ValueError(f"Matrix of shape {tuple(matrix.shape)} does not match modes {row_shape} × {col_shape}.")
        d = len(row_shape)
        tensor = matrix.reshape(*row_shape, *col_shape)
        order = [i for k in range(d) for i in (k, d + k)]
        merged = tensor.permute(order).reshape([m * n for m, n in zip(row_shape, col_shape)])
        cores = tt_svd(merged, tol=tol, max_rank=max_rank)
        return cls([c.reshape(c.shape[0], m, n, c.shape[2]) for c, m, n in zip(cores, row_shape, col_shape)])

    @classmethod
    def identity(cls, shape: Sequence[int], *, dtype: torch.dtype = torch.float64,
                 device: torch.device | str = "cpu") -> "TTMatrix":
        """The identity matrix (rank 1)."""
        return cls([torch.eye(n, dtype=dtype, device=device).reshape(1, n, n, 1) for n in check_tt_shape(shape)])

    @classmethod
    def diagonal(cls, diag: TTVector) -> "TTMatrix":
        """``diag(x)`` for a TT-vector ``x`` (same ranks)."""
        cores = []
        for c in diag.cores:
            n = c.shape[1]
            core = torch.zeros(c.shape[0], n, n, c.shape[2], dtype=c.dtype, device=c.device)
            idx = torch.arange(n, device=c.device)
            core[:, idx, idx, :] = c
            cores.append(core)
        return cls(cores)

    # -------------------------------------------------------------- properties
    @property
    def row_shape(self) -> tuple[int, ...]:
        """Row mode sizes (m_1, …, m_d): the matrix has Π m_k rows."""
        return tuple(int(c.shape[1]) for c in self.cores)

    @property
    def col_shape(self) -> tuple[int, ...]:
        """Column mode sizes (n_1, …, n_d): the matrix has Π n_k columns."""
        return tuple(int(c.shape[2]) for c in self.cores)

    @property
    def ranks(self) -> tuple[int, ...]:
        """TT ranks (1, r_1, …, r_{d-1}, 1): d + 1 numbers."""
        return (1, *(int(c.shape[3]) for c in self.cores))

    def __repr__(self) -> str:
        return (f"TTMatrix(row_shape={self.row_shape}, col_shape={self.col_shape}, ranks={self.ranks}, "
                f"dtype={self.dtype})")

    # -------------------------------------------------------------- conversion
    def to_dense(self) -> torch.Tensor:
        """The represented matrix, shape (M, N)."""
        d = len(self.cores)
        full = self.cores[0].reshape(-1, self.cores[0].shape[3])  # (m1 n1, r1)
        for core in self.cores[1:]:
            full = (full @ core.reshape(core.shape[0], -1)).reshape(-1, core.shape[3])
        tensor = full.reshape([s for c in self.cores for s in (c.shape[1], c.shape[2])])
        order = [2 * k for k in range(d)] + [2 * k + 1 for k in range(d)]
        return tensor.permute(order).reshape(math.prod(self.row_shape), math.prod(self.col_shape))

    def as_vector(self) -> TTVector:
        """The same cores seen as a TT-vector over merged (m_k·n_k) modes (entries in interleaved order)."""
        return TTVector([c.reshape(c.shape[0], c.shape[1] * c.shape[2], c.shape[3]) for c in self.cores])

    # -------------------------------------------------------------- algebra
    def _check_same_shape(self, other: "TTMatrix") -> None:
        if not isinstance(other, TTMatrix):
            raise TypeError(f"Expected a TTMatrix; got {type(other).__name__}.")
        if other.row_shape != self.row_shape or other.col_shape != self.col_shape:
            raise ValueError(f"TT-matrices have different mode sizes: {self.row_shape}×{self.col_shape} and "
                             f"{other.row_shape}×{other.col_shape}.")

    def __add__(self, other: "TTMatrix") -> "TTMatrix":
        self._check_same_shape(other)
        return _matrix_from_vector(block_sum(self.as_vector().cores, other.as_vector().cores), self)

    @property
    def T(self) -> "TTMatrix":
        """The transpose (cores with row and column modes swapped)."""
        return TTMatrix([c.transpose(1, 2) for c in self.cores])

    def matvec(self, x: TTVector) -> TTVector:
        """``A x`` for a TT-vector ``x`` over the column modes (ranks multiply)."""
        if not isinstance(x, TTVector) or x.shape != self.col_shape:
            raise ValueError(f"matvec needs a TT-vector with modes {self.col_shape}; got "
                             f"{getattr(x, 'shape', type(x).__name__)}.")
        cores = []
        for a, b in zip(self.cores, x.cores):  # one matrix product per core over the shared mode n
            ra, m, n, rb = a.shape
            rc, _, rd = b.shape
            core = a.permute(0, 1, 3, 2).reshape(-1, n) @ b.transpose(0, 1).reshape(n, -1)  # (a m b, c d)
            core = core.reshape(ra, m, rb, rc, rd).permute(0, 3, 1, 2, 4)
            cores.append(core.reshape(ra * rc, m, rb * rd))
        return TTVector(cores)

    def matvec_rounded(self, x: TTVector, tol: float = 0.0, max_rank: int | None = None) -> TTVector:
        """``A x`` rounded, without forming the rank-``r_A·r_x`` product (zip-up).

        The product is built core by core from the left; after each core the partial result is split by a
        truncated SVD (keeping singular values above a tenth of the final tolerance), so the carried rank
        stays near the rank of the result. A final :meth:`TTVector.round` makes the accuracy
        ``‖Ax − result‖ ≤ tol·‖Ax‖`` (up to the small zip-up truncations; exact for ``tol = 0``).

        Parameters
        ----------
        x : TTVector with modes ``col_shape``
        tol : float
        max_rank : int, optional

        Returns
        -------
        TTVector with modes ``row_shape``
        """
        if not isinstance(x, TTVector) or x.shape != self.col_shape:
            raise ValueError(f"matvec_rounded needs a TT-vector with modes {self.col_shape}; got "
                             f"{getattr(x, 'shape', type(x).__name__)}.")
        from tnbayes.tensors.tt_block import block_matvec_rounded  # a vector is a block of one column

        return block_matvec_rounded(self, x, 1, tol, max_rank)

    def matmul(self, other: "TTMatrix") -> "TTMatrix":
        """``A B`` (ranks multiply)."""
        if not isinstance(other, TTMatrix) or other.row_shape != self.col_shape:
            raise ValueError(f"matmul needs a TT-matrix with row modes {self.col_shape}.")
        cores = []
        for a, b in zip(self.cores, other.cores):
            core = torch.einsum("amnb,cnld->acmlbd", a, b)
            cores.append(core.reshape(a.shape[0] * b.shape[0], a.shape[1], b.shape[2], a.shape[3] * b.shape[3]))
        return TTMatrix(cores)

    def __matmul__(self, other: "TTMatrix | TTVector") -> "TTMatrix | TTVector":
        return self.matvec(other) if isinstance(other, TTVector) else self.matmul(other)

    def hadamard(self, other: "TTMatrix") -> "TTMatrix":
        """Entrywise product (ranks multiply)."""
        self._check_same_shape(other)
        return _matrix_from_vector(self.as_vector().hadamard(other.as_vector()).cores, self)

    def dot(self, other: "TTMatrix") -> torch.Tensor:
        """Frobenius inner product ``trace(AᵀB)``."""
        self._check_same_shape(other)
        return self.as_vector().dot(other.as_vector())

    def norm(self) -> torch.Tensor:
        """Frobenius norm."""
        return self.as_vector().norm()

    def trace(self) -> torch.Tensor:
        """Trace of a square TT-matrix (O(d n r²))."""
        if self.row_shape != self.col_shape:
            raise ValueError("trace needs a square TT-matrix with equal row and column modes.")
        env = torch.ones(1, dtype=self.dtype, device=self.device)
        for core in self.cores:
            env = env @ torch.diagonal(core, dim1=1, dim2=2).sum(-1)
        return env.reshape(())

    def quadratic_form(self, x: TTVector, y: TTVector | None = None) -> torch.Tensor:
        """``xᵀ A y`` (``y = x`` by default) by one left-to-right contraction, O(d n² r_x r_A r_y)."""
        y = x if y is None else y
        if x.shape != self.row_shape or y.shape != self.col_shape:
            raise ValueError("quadratic_form: TT-vector modes do not match the matrix.")
        env = torch.ones(1, 1, 1, dtype=self.dtype, device=self.device)
        for a, xc, yc in zip(self.cores, x.cores, y.cores):
            env = torch.einsum("pqr,pms,qmnt,rnu->stu", env, xc, a, yc)
        return env.reshape(())

    def transpose_matvec_norm_squared(self, x: TTVector) -> torch.Tensor:
        """``‖Aᵀ x‖²`` (= ``xᵀ A Aᵀ x``) by one contraction, without forming ``Aᵀx``.

        Costs O(d r_x² r_A² m n (r_x + r_A)) instead of the O(d (r_x r_A)³) of a dot product of the
        formed vector; with ``A = L`` a covariance square root this is a predictive variance.
        """
        if not isinstance(x, TTVector) or x.shape != self.row_shape:
            raise ValueError(f"Need a TT-vector with modes {self.row_shape}.")
        env = torch.ones(1, 1, 1, 1, dtype=self.dtype, device=self.device)  # (x, A, A, x) ranks
        for a, xc in zip(self.cores, x.cores):
            t = torch.einsum("pqsu,pic->qsuic", env, xc)
            t = torch.einsum("qsuic,qijd->sucjd", t, a)
            t = torch.einsum("sucjd,skje->ucdke", t, a)
            env = torch.einsum("ucdke,ukf->cdef", t, xc)
        return env.reshape(())

    def transpose_matvec_rank_one(self, factors: torch.Tensor | Sequence[torch.Tensor]) -> TTVector:
        """``Aᵀ (f_1 ⊗ … ⊗ f_d)`` for a rank-one vector given by its factors: a TT-vector with A's ranks (exact).

        Parameters
        ----------
        factors : torch.Tensor of shape (d, m_k), or a sequence of d tensors of shape (m_k,)
            The factors over the row modes.

        Returns
        -------
        TTVector with modes ``col_shape``
        """
        return TTVector([torch.einsum("amkb,m->akb", core, factor) for core, factor in zip(self.cores, factors)])

    def transpose_matvec_norms_squared_rank_one(self, factors: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        """``‖Aᵀ (f_1(i) ⊗ … ⊗ f_d(i))‖²`` for n rank-one vectors by one batched left-to-right contraction.

        With ``A = L`` a covariance square root (``P = L Lᵀ``) these are the variances ``φ_iᵀ P φ_i`` of rank-one
        feature rows.

        Parameters
        ----------
        factors : torch.Tensor of shape (d, n, m_k), or a sequence of d tensors of shape (n, m_k)
            Factor k of every rank-one vector over the row modes.

        Returns
        -------
        torch.Tensor of shape (n,)
        """
        n = factors[0].shape[0]
        env = torch.ones(n, 1, 1, dtype=factors[0].dtype, device=factors[0].device)
        projected = [torch.einsum("amkb,nm->nakb", core, factor) for core, factor in zip(self.cores, factors)]
        for p in projected:
            env = torch.einsum("nab,nakc,nbkd->ncd", env, p, p)
        return env[:, 0, 0]

    def round(self, tol: float = 0.0, max_rank: int | None = None, *,
              reference_norm: float | None = None) -> "TTMatrix":
        """TT-rounding of the matrix (as a TT over merged modes); see :meth:`TTVector.round`."""
        return _matrix_from_vector(round_cores(self.as_vector().cores, tol, max_rank, reference_norm), self)


# ---------------------------------------------------------------------------------------------- functions
def tt_gram(vectors: Sequence[TTVector]) -> torch.Tensor:
    """Gram matrix ``G_ij = x_iᵀ x_j`` of n TT-vectors with the same modes, by n(n + 1)/2 dot products.

    Parameters
    ----------
    vectors : sequence of TTVector
        x_1 … x_n (any ranks).

    Returns
    -------
    torch.Tensor of shape (n, n)
        Symmetric, in the dtype and on the device of the first vector (float64 for n = 0).
    """
    n = len(vectors)
    if n == 0:
        return torch.empty(0, 0, dtype=torch.float64)
    gram = torch.empty(n, n, dtype=vectors[0].dtype, device=vectors[0].device)
    for i in range(n):
        for j in range(i, n):
            gram[i, j] = gram[j, i] = vectors[i].dot(vectors[j])
    return gram


def _matrix_from_vector(cores: Sequence[torch.Tensor], like: TTMatrix) -> TTMatrix:
    return TTMatrix([c.reshape(c.shape[0], m, n, c.shape[2])
                     for c, m, n in zip(cores, like.row_shape, like.col_shape)])


#: randomized_round_sum moved to tnbayes.tensors.tt_randomized (which imports this module)
__getattr__ = moved_names_getattr(__name__, {"randomized_round_sum": ("tnbayes.tensors.tt_randomized", "randomized_round_sum")})
