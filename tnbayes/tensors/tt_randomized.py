"""Randomized TT-rounding of a sum of TT objects, without forming the sum (the *format* axis).

:func:`randomized_round_sum` rounds ``Σ_t s_t X_t`` of TT-vectors, TT-matrices and outer products ``u cᵀ`` of
TT-vectors to a rank cap by a Gaussian TT sketch ("randomize-then-orthogonalize", Al Daas et al. 2023), at a
cost linear in each term's rank; the TT Kalman filters of :mod:`tnbayes.inference.kalman` use it to round their
rank-capped updates.

References
----------
H. Al Daas, G. Ballard, P. Cazeaux, E. Hallman, A. Międlar, M. Pasha, T. W. Reid, A. K. Saibaba, "Randomized
algorithms for rounding in the tensor-train format", SIAM J. Sci. Comput. 45(1), 2023.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from tnbayes.tensors.tt import TTMatrix, TTVector
from tnbayes.tensors.tt_rounding import round_cores

__all__ = ["randomized_round_sum"]


def _term_cores(term: "TTVector | TTMatrix | tuple[TTVector, TTVector]") -> tuple[str, list]:
    """('plain', cores (r, n, r')) for a TT-vector/matrix (modes merged), ('outer', [(u_k, c_k)]) for u cᵀ."""
    if isinstance(term, tuple):
        u, c, batch = (*term, 1) if len(term) == 2 else term
        if not (isinstance(u, TTVector) and isinstance(c, TTVector)) or len(u.cores) != len(c.cores):
            raise ValueError("An outer-product term must be a pair (u, c) of TT-vectors with the same number of modes, "
                             "or a triple (U, V, batch) of block TT-vectors.")
        pairs = list(zip(u.cores, c.cores))
        if batch != 1:  # block TTs: the batch index rides on the last modes (M·B, B fastest) and is summed over
            (a, b), B = pairs[-1], int(batch)
            if a.shape[1] % B or b.shape[1] % B:
                raise ValueError(f"The last modes {a.shape[1]} and {b.shape[1]} of a block outer term are not "
                                 f"multiples of its batch size {B}.")
            pairs[-1] = (a.reshape(a.shape[0], a.shape[1] // B, B), b.reshape(b.shape[0], b.shape[1] // B, B))
        return "outer", pairs
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
    terms : sequence of TTVector, TTMatrix, (TTVector u, TTVector c) or (TTVector U, TTVector V, int B)
        All with the same modes; a pair stands for the TT-matrix ``u cᵀ`` (``u.outer(c)``), a triple for
        ``Σ_b U[:, b] V[:, b]ᵀ`` of two block TTs whose last modes are ``M·B`` and ``N·B`` (the column index b
        fastest; see :mod:`tnbayes.tensors.tt_block`): B outer products in one term of the blocks' ranks.
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
    # drawn where the generator lives (a CPU generator for CUDA cores: the same sketch on every device), then moved
    source = generator.device if generator is not None else device
    sketch = [torch.randn(sketch_ranks[k], modes[k], sketch_ranks[k + 1], dtype=dtype, device=source,
                          generator=generator).to(device) for k in range(d)]
    # right-to-left: W[t][k] contracts cores k+1.. of term t with the sketch → (term rank_k..., ℓ_k)
    weights: list[list[torch.Tensor | None]] = []
    for kind, cores in parsed:
        W: list[torch.Tensor | None] = [None] * d
        if kind == "plain":
            env = torch.ones(1, 1, dtype=dtype, device=device)
            for k in range(d - 1, 0, -1):
                env = torch.einsum("ajm,ljm->al", torch.einsum("ajb,bm->ajm", cores[k], env), sketch[k])
                W[k - 1] = env
        else:  # the batch index of a block term (size 1 for a plain outer product) is traced at the last core
            batch = cores[-1][0].shape[2]
            env = torch.eye(batch, dtype=dtype, device=device).reshape(batch, batch, 1)
            for k in range(d - 1, 0, -1):
                u, c = cores[k]
                y = sketch[k].reshape(sketch[k].shape[0], u.shape[1], c.shape[1], sketch[k].shape[2])
                t = torch.einsum("amb,bdq->amdq", u, env)
                t = torch.einsum("amdq,lmnq->adln", t, y)  # the sketch before c: never an (a, m, c, n, q) block
                env = torch.einsum("adln,cnd->acl", t, c)
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
            core = sum(p.diagonal(dim1=2, dim2=3).sum(-1).reshape(p.shape[0], p.shape[1], 1) if p.dim() == 4
                       else p.reshape(p.shape[0], p.shape[1], 1) for p in pieces)
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
    cores = round_cores(out, tol, int(max_rank))
    if not is_matrix:
        return TTVector(cores)
    return TTMatrix([c.reshape(c.shape[0], m, n, c.shape[2]) for c, (m, n) in zip(cores, row_col)])
