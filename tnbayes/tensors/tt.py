"""Tensor-train (TT) vectors and matrices in torch.

A length-N vector with ``N = n_1·n_2·…·n_d`` is reshaped (row-major) into a d-way tensor and held as
``d`` cores ``G_k`` of shape ``(r_{k-1}, n_k, r_k)`` with ``r_0 = r_d = 1``::

    x[i_1, …, i_d] = G_1[:, i_1, :] G_2[:, i_2, :] … G_d[:, i_d, :]

An ``M × N`` matrix with ``M = m_1·…·m_d`` and ``N = n_1·…·n_d`` is held as cores of shape
``(r_{k-1}, m_k, n_k, r_k)``: ``A[(i_1…i_d), (j_1…j_d)] = Π_k G_k[:, i_k, j_k, :]``.

Every operation is exact; ranks grow (sums add them, products multiply them) and :meth:`TTVector.round`
/ :meth:`TTMatrix.round` bring them back down (Oseledets 2011, Algorithms 1 and 2). Real dtypes only.

References
----------
I. V. Oseledets, "Tensor-train decomposition", SIAM J. Sci. Comput. 33(5), 2011.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from tnbayes.tensors.shapes import check_tt_shape, prime_factors

__all__ = [
    "TTVector",
    "TTMatrix",
    "randomized_round_sum",
    "tt_svd",
]


def _truncation_rank(singular_values: torch.Tensor, delta: float, max_rank: int | None) -> int:
    """Smallest rank whose discarded tail has Frobenius norm ≤ delta, capped at max_rank (≥ 1)."""
    tail = torch.flip(torch.cumsum(torch.flip(singular_values.double() ** 2, [0]), 0), [0])  # tail[k] = Σ_{j≥k} s_j²
    keep = int((tail > delta**2).sum())  # tail is non-increasing: keep the first `keep` values
    keep = max(keep, 1)
    if max_rank is not None:
        keep = min(keep, int(max_rank))
    return keep


def tt_svd(tensor: torch.Tensor, *, tol: float = 0.0, max_rank: int | None = None) -> list[torch.Tensor]:
    """TT-SVD of a dense d-way tensor (Oseledets 2011, Algorithm 1).

    Parameters
    ----------
    tensor : torch.Tensor of shape (n_1, …, n_d)
    tol : float
        Relative accuracy: ``‖X − TT‖_F ≤ tol·‖X‖_F`` when ``max_rank`` does not bind.
    max_rank : int, optional
        Upper bound on every TT rank.

    Returns
    -------
    list of torch.Tensor
        Cores of shape ``(r_{k-1}, n_k, r_k)``.
    """
    shape = tuple(tensor.shape)
    d = len(shape)
    norm = float(torch.linalg.vector_norm(tensor))
    delta = tol * norm / math.sqrt(max(d - 1, 1))
    cores, rank = [], 1
    rest = tensor.reshape(1, -1)
    for k in range(d - 1):
        rest = rest.reshape(rank * shape[k], -1)
        u, s, vh = torch.linalg.svd(rest, full_matrices=False)
        new_rank = _truncation_rank(s, delta, max_rank)
        cores.append(u[:, :new_rank].reshape(rank, shape[k], new_rank))
        rest = s[:new_rank, None] * vh[:new_rank]
        rank = new_rank
    cores.append(rest.reshape(rank, shape[-1], 1))
    return cores


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
        """The represented vector, shape (N,)."""
        full = self.cores[0].reshape(self.cores[0].shape[1], -1)
        for core in self.cores[1:]:
            full = (full @ core.reshape(core.shape[0], -1)).reshape(-1, core.shape[2])
        return full.reshape(-1)

    # -------------------------------------------------------------- algebra
    def _check_compatible(self, other: "TTVector") -> None:
        if not isinstance(other, TTVector):
            raise TypeError(f"Expected a TTVector; got {type(other).__name__}.")
        if other.shape != self.shape:
            raise ValueError(f"TT-vectors have different mode sizes: {self.shape} and {other.shape}.")

    def __add__(self, other: "TTVector") -> "TTVector":
        self._check_compatible(other)
        return TTVector(_block_sum(self.cores, other.cores))

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
            env = torch.einsum("ac,anb,cnd->bd", env, a, b)
        return env.reshape(())

    def norm(self) -> torch.Tensor:
        """Euclidean norm, from an orthogonalised copy (no cancellation)."""
        cores = _left_orthogonalize([c for c in self.cores])
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
        return TTVector(_round_cores(self.cores, tol, max_rank, reference_norm))


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
        return _matrix_from_vector(_block_sum(self.as_vector().cores, other.as_vector().cores), self)

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
        for a, b in zip(self.cores, x.cores):
            core = torch.einsum("amnb,cnd->acmbd", a, b)
            cores.append(core.reshape(a.shape[0] * b.shape[0], a.shape[1], a.shape[3] * b.shape[2]))
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
        d = len(self.cores)
        carry = torch.ones(1, 1, 1, dtype=self.dtype, device=self.device)  # (t, r_A, r_x)
        cores: list[torch.Tensor] = []
        for k, (a, b) in enumerate(zip(self.cores, x.cores)):
            partial = torch.einsum("tag,gjd->tajd", carry, b)
            block = torch.einsum("tajd,amjb->tmbd", partial, a)  # (t, m, r_A', r_x')
            t, m, rb, rd = block.shape
            if k == d - 1:
                cores.append(block.reshape(t, m, rb * rd))
                break
            u, sv, vh = torch.linalg.svd(block.reshape(t * m, rb * rd), full_matrices=False)
            delta = 0.1 * tol * float(torch.linalg.vector_norm(sv)) / math.sqrt(max(d - 1, 1))
            rank = _truncation_rank(sv, delta, max_rank)
            cores.append(u[:, :rank].reshape(t, m, rank))
            carry = (sv[:rank, None] * vh[:rank]).reshape(rank, rb, rd)
        return TTVector(cores).round(tol, max_rank)

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

    def round(self, tol: float = 0.0, max_rank: int | None = None, *,
              reference_norm: float | None = None) -> "TTMatrix":
        """TT-rounding of the matrix (as a TT over merged modes); see :meth:`TTVector.round`."""
        return _matrix_from_vector(_round_cores(self.as_vector().cores, tol, max_rank, reference_norm), self)


# ---------------------------------------------------------------------------------------------- kernels
def _matrix_from_vector(cores: Sequence[torch.Tensor], like: TTMatrix) -> TTMatrix:
    return TTMatrix([c.reshape(c.shape[0], m, n, c.shape[2])
                     for c, m, n in zip(cores, like.row_shape, like.col_shape)])


def _block_sum(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Cores of the sum of two TTs (3-way cores): block-diagonal in the ranks."""
    d = len(a)
    if d == 1:
        return [a[0] + b[0]]
    cores = []
    for k, (x, y) in enumerate(zip(a, b)):
        n = x.shape[1]
        if k == 0:
            cores.append(torch.cat([x, y], dim=2))
        elif k == d - 1:
            cores.append(torch.cat([x, y], dim=0))
        else:
            core = x.new_zeros(x.shape[0] + y.shape[0], n, x.shape[2] + y.shape[2])
            core[: x.shape[0], :, : x.shape[2]] = x
            core[x.shape[0]:, :, x.shape[2]:] = y
            cores.append(core)
    return cores


def _left_orthogonalize(cores: list[torch.Tensor]) -> list[torch.Tensor]:
    """QR sweep left to right: cores 0..d-2 become left-orthonormal; the norm sits in the last core."""
    cores = list(cores)
    for k in range(len(cores) - 1):
        r0, n, r1 = cores[k].shape
        q, r = torch.linalg.qr(cores[k].reshape(r0 * n, r1))
        cores[k] = q.reshape(r0, n, q.shape[1])
        cores[k + 1] = torch.einsum("ab,bnc->anc", r, cores[k + 1])
    return cores


def _round_cores(cores: Sequence[torch.Tensor], tol: float, max_rank: int | None,
                 reference_norm: float | None = None) -> list[torch.Tensor]:
    """Oseledets' TT-rounding on 3-way cores: right-to-left QR, then left-to-right truncated SVD."""
    cores = list(cores)
    d = len(cores)
    if d == 1:
        return [cores[0].clone()]
    # right-to-left orthogonalisation: cores 1..d-1 right-orthonormal, the norm in core 0
    for k in range(d - 1, 0, -1):
        r0, n, r1 = cores[k].shape
        q, r = torch.linalg.qr(cores[k].reshape(r0, n * r1).T)  # (n r1, s), (s, r0)
        cores[k] = q.T.reshape(q.shape[1], n, r1)
        cores[k - 1] = torch.einsum("anb,cb->anc", cores[k - 1], r)
    norm = float(torch.linalg.vector_norm(cores[0]))
    if reference_norm is not None:  # never below round-off of the whole, so zero updates cannot inflate ranks
        norm = max(float(reference_norm), norm * torch.finfo(cores[0].dtype).eps)
    delta = tol * norm / math.sqrt(d - 1)
    for k in range(d - 1):
        r0, n, r1 = cores[k].shape
        u, s, vh = torch.linalg.svd(cores[k].reshape(r0 * n, r1), full_matrices=False)
        rank = _truncation_rank(s, delta, max_rank)
        cores[k] = u[:, :rank].reshape(r0, n, rank)
        cores[k + 1] = torch.einsum("ab,bnc->anc", s[:rank, None] * vh[:rank], cores[k + 1])
    return cores


# ---------------------------------------------------------------------------------------------- randomized rounding
def _term_cores(term: "TTVector | TTMatrix | tuple[TTVector, TTVector]") -> tuple[str, list]:
    """('plain', cores (r, n, r')) for a TT-vector/matrix (modes merged), ('outer', [(u_k, c_k)]) for u cᵀ."""
    if isinstance(term, tuple):
        u, c = term
        if not (isinstance(u, TTVector) and isinstance(c, TTVector)) or len(u.cores) != len(c.cores):
            raise ValueError("An outer-product term must be a pair (u, c) of TT-vectors with the same number of modes.")
        return "outer", list(zip(u.cores, c.cores))
    if isinstance(term, TTMatrix):
        return "plain", term.as_vector().cores
    if isinstance(term, TTVector):
        return "plain", list(term.cores)
    raise TypeError(f"Terms must be TT-vectors, TT-matrices or (u, c) pairs; got {type(term).__name__}.")


def randomized_round_sum(terms: Sequence["TTVector | TTMatrix | tuple[TTVector, TTVector]"],
                         scales: Sequence[float] | None = None, *, max_rank: int, tol: float = 0.0,
                         oversampling: int = 10,
                         generator: torch.Generator | None = None) -> "TTVector | TTMatrix":
    """Round ``Σ_t s_t X_t`` to ranks ≤ ``max_rank`` without forming the sum ("randomize-then-orthogonalize").

    The sum of T terms of ranks R_t has ranks Σ_t R_t, and an outer product ``u cᵀ`` of TT-vectors has the
    product of their ranks; deterministic rounding of that sum costs O(d n (Σ R_t)³). Here each term is
    contracted, term by term, with a Gaussian TT sketch of ranks ℓ = ``max_rank + oversampling`` (right to
    left), the sketches give an orthonormal basis per core (left to right, QR), and the terms are projected on
    it; outer products are never formed (their cores stay the pair (u_k, c_k)). The cost is linear in each
    term's rank (O(d n R_t² ℓ); for an outer term O(d m n r_u r_c ℓ (r_u + r_c + ℓ))). The result (ranks ≤ ℓ)
    is then rounded deterministically to ``tol`` / ``max_rank``. The error is within a small factor of the
    best rank-ℓ error with high probability (Al Daas, Ballard, Cazeaux, Hallman, Międlar, Pasha, Reid, Saibaba,
    "Randomized algorithms for rounding in the tensor-train format", SIAM J. Sci. Comput. 45(1), 2023).

    Parameters
    ----------
    terms : sequence of TTVector, TTMatrix or (TTVector u, TTVector c)
        All with the same modes; a pair stands for the TT-matrix ``u cᵀ`` (``u.outer(c)``).
    scales : sequence of float, optional
        s_t (default 1).
    max_rank : int
        Cap of the ranks of the result.
    tol : float
        Relative tolerance of the final deterministic rounding.
    oversampling : int
        ℓ − max_rank.
    generator : torch.Generator, optional
        Source of the sketch (a fixed one makes the result reproducible).

    Returns
    -------
    TTVector or TTMatrix
        A TT-matrix when any term is a matrix or an outer pair, else a TT-vector; ranks ≤ ``max_rank``.
    """
    if not terms:
        raise ValueError("randomized_round_sum needs at least one term.")
    if int(max_rank) != max_rank or max_rank < 1:
        raise ValueError(f"max_rank must be a positive integer; got {max_rank!r}.")
    scales = [1.0] * len(terms) if scales is None else list(scales)
    if len(scales) != len(terms):
        raise ValueError(f"Got {len(scales)} scales for {len(terms)} terms.")
    parsed = [_term_cores(t) for t in terms]
    is_matrix = any(kind == "outer" or isinstance(t, TTMatrix) for (kind, _), t in zip(parsed, terms))
    first = terms[0][0] if isinstance(terms[0], tuple) else terms[0]
    modes = []
    for kind, cores in parsed:
        shape = [a.shape[1] * b.shape[1] for a, b in cores] if kind == "outer" else [c.shape[1] for c in cores]
        if modes and shape != modes:
            raise ValueError(f"All terms need the same (merged) modes; got {shape} and {modes}.")
        modes = shape
    row_col = None
    for (kind, cores), t in zip(parsed, terms):
        shape = [(a.shape[1], b.shape[1]) for a, b in cores] if kind == "outer" else \
            list(zip(t.row_shape, t.col_shape)) if isinstance(t, TTMatrix) else None
        if shape is not None:
            if row_col is not None and shape != row_col:
                raise ValueError("All matrix terms need the same row and column modes.")
            row_col = shape
    d, dtype, device = len(modes), first.dtype, first.device
    ell = int(max_rank) + int(oversampling)
    # sketch ranks bounded by the sizes of the unfoldings
    left, right, sketch_ranks = 1, math.prod(modes), [1]
    for k in range(d - 1):
        left, right = left * modes[k], right // modes[k]
        sketch_ranks.append(min(ell, left, right))
    sketch_ranks.append(1)
    sketch = [torch.randn(sketch_ranks[k], modes[k], sketch_ranks[k + 1], dtype=dtype, device=device,
                          generator=generator) for k in range(d)]
    # right-to-left: W[t][k] contracts cores k+1.. of term t with the sketch → (term rank_k..., ℓ_k)
    weights: list[list[torch.Tensor | None]] = []
    for kind, cores in parsed:
        W: list[torch.Tensor | None] = [None] * d
        if kind == "plain":
            env = torch.ones(1, 1, dtype=dtype, device=device)
            for k in range(d - 1, 0, -1):
                env = torch.einsum("ajm,ljm->al", torch.einsum("ajb,bm->ajm", cores[k], env), sketch[k])
                W[k - 1] = env
        else:
            env = torch.ones(1, 1, 1, dtype=dtype, device=device)
            for k in range(d - 1, 0, -1):
                u, c = cores[k]
                y = sketch[k].reshape(sketch[k].shape[0], u.shape[1], c.shape[1], sketch[k].shape[2])
                t = torch.einsum("amb,bdq->amdq", u, env)
                t = torch.einsum("amdq,cnd->amcnq", t, c)
                env = torch.einsum("amcnq,lmnq->acl", t, y)
                W[k - 1] = env
        weights.append(W)
    # left-to-right: project every term on the orthonormal basis of the summed sketch
    lefts: list[torch.Tensor] = [torch.ones(1, 1, dtype=dtype, device=device) if kind == "plain"
                                 else torch.ones(1, 1, 1, dtype=dtype, device=device) for kind, _ in parsed]
    out = []
    for k in range(d):
        pieces = []
        for (kind, cores), G, s in zip(parsed, lefts, scales):
            if kind == "plain":
                piece = torch.einsum("la,ajb->ljb", G, cores[k])  # (ℓ, n, R)
            else:
                u, c = cores[k]
                t = torch.einsum("lac,amb->lcmb", G, u)
                piece = torch.einsum("lcmb,cnd->lmnbd", t, c)
                piece = piece.reshape(piece.shape[0], u.shape[1] * c.shape[1], u.shape[2], c.shape[2])
            pieces.append(piece * s if k == 0 else piece)
        if k == d - 1:
            core = sum(p.reshape(p.shape[0], p.shape[1], 1) for p in pieces)
            out.append(core)
            break
        sketched = 0
        for piece, (kind, _), W in zip(pieces, parsed, weights):
            if kind == "plain":
                sketched = sketched + torch.einsum("ljb,bq->ljq", piece, W[k])
            else:
                sketched = sketched + torch.einsum("ljbd,bdq->ljq", piece, W[k])
        r0, n, r1 = sketched.shape
        q, _ = torch.linalg.qr(sketched.reshape(r0 * n, r1))
        out.append(q.reshape(r0, n, q.shape[1]))
        new_lefts = []
        for piece, (kind, _) in zip(pieces, parsed):
            if kind == "plain":
                new_lefts.append(torch.einsum("ljq,ljb->qb", q.reshape(r0, n, -1), piece))
            else:
                new_lefts.append(torch.einsum("ljq,ljbd->qbd", q.reshape(r0, n, -1), piece))
        lefts = new_lefts
    cores = _round_cores(out, tol, int(max_rank))
    if not is_matrix:
        return TTVector(cores)
    return TTMatrix([c.reshape(c.shape[0], m, n, c.shape[2]) for c, (m, n) in zip(cores, row_col)])
