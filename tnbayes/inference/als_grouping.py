"""Per-value accumulation of the ALS normal equations for inputs with few distinct values (the *inference* axis).

When a mode's features read a single input column that takes few distinct values (``features.mode_inputs()``;
airline's months, weekdays and minutes), its normal equations are accumulated per distinct value instead
of per row: with ``g_n = w_u ⊙ c_n`` split into the part from modes on the same column (a function of the
value u) and the rest, ``AᴴA = Σ_u (φ̄(u) φ(u)ᵀ) ⊗ ((w̄_u w_uᵀ) ∘ C_u)`` with ``C_u = Σ_{n: x_n = u} c̄_n c_nᵀ``.
``C`` depends only on the cores of *other* columns, so it is built once per column per sweep (O(N R²)) and
every core on that column (the K quantized factors of one input) is then updated in O(U M² R²), exact.

:class:`InputGroupingMixin` is one part of :class:`~tnbayes.inference.als.CPDALS`; it reads the engine's
``features``, ``active_features``, ``active_components``, ``active_weights``, ``factors``, ``X``, ``y``, ``rank``,
``dtype``, ``device``, ``chunk_size`` and keeps ``_groups``, ``_group_of_mode``, ``_tables`` and ``_cross``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tnbayes.inference.spd import CoreSystem

__all__ = ["GROUPING_MODES", "InputGroupingMixin"]

#: the values of CPDALS's ``group_inputs``
GROUPING_MODES = ("auto", True, False)


@dataclass
class _InputGroup:
    """The distinct values of one input column and the modes that read it (see the module docstring)."""

    column: int
    modes: list[int]
    inverse: torch.Tensor  # (N,) index of each row's value
    order: torch.Tensor  # (N,) rows sorted by value
    representatives: torch.Tensor  # (U, D) one training row per distinct value


class InputGroupingMixin:
    """The per-distinct-value normal equations of :class:`~tnbayes.inference.als.CPDALS` (see the module docstring)."""

    def _input_groups(self, how: bool | str, itemsize: int, memory_budget: int) -> dict[int, _InputGroup]:
        columns = self.features.mode_inputs() if how is not False else None
        if columns is None:
            return {}
        n, P, R = self.X.shape[0], self.features.num_components, self.rank
        groups = {}
        for column in sorted(set(columns)):
            modes = [k for k, c in enumerate(columns) if c == column]
            values, inverse = torch.unique(self.X[:, column], return_inverse=True)
            U = values.numel()
            if U * P * P * R * R * itemsize > memory_budget // 2:
                continue
            size = max(self.features.mode_sizes[k] for k in modes)
            # per core update: U P² M² R² (assembly) + N P² R² per column (C, shared by its cores), against N M² R²
            if how == "auto" and U * P * P * size * size + n * P * P / len(modes) > 0.5 * n * size * size:
                continue
            first = torch.full((U,), n, dtype=torch.long, device=self.device).scatter_reduce_(
                0, inverse, torch.arange(n, device=self.device), reduce="amin")
            order = torch.argsort(inverse, stable=True)
            groups[column] = _InputGroup(column, modes, inverse, order, self.X[first])
        return groups

    @property
    def grouped_modes(self) -> list[int]:
        """Cores whose normal equations are accumulated per distinct input value."""
        return sorted(self._group_of_mode)

    def _value_projections(self, group: _InputGroup, mode: int) -> torch.Tensor:
        """``φ^p_k(u) W_k`` at the distinct values of the mode's column → (P, U, R)."""
        return self.active_features.mode_features(group.representatives, mode).to(self.dtype) @ self.factors[mode]

    def _column_table(self, group: _InputGroup) -> torch.Tensor:
        """``⊙_{k reads the column} φ^p_k(u) W_k`` at the column's distinct values → (P, U, R), cached while the
        column's cores and the active components are unchanged."""
        key = (self.active_components, tuple(id(self.factors[k]) for k in group.modes))
        cached = self._tables.get(group.column)
        if cached is not None and cached[0] == key and all(a is self.factors[k] for a, k in zip(cached[1], group.modes)):
            return cached[2]
        table = self._value_projections(group, group.modes[0])
        for k in group.modes[1:]:
            table = table * self._value_projections(group, k)
        self._tables[group.column] = (key, tuple(self.factors[k] for k in group.modes), table)
        return table

    def _row_product(self, rows: torch.Tensor | slice, *, skip_column: int | None = None) -> torch.Tensor:
        """``⊙_k φ^p_k(x_n) W_k`` over every core (except those on ``skip_column``) for training rows ``rows``
        → (P, n, R); grouped columns are gathered from their value tables, the others computed per row."""
        index = torch.arange(self.X.shape[0], device=self.device)[rows] if isinstance(rows, slice) else rows
        P = self.active_features.num_components
        product = torch.ones(P, index.numel(), self.rank, dtype=self.dtype, device=self.device)
        for column, group in self._groups.items():
            if column != skip_column:
                product = product * self._column_table(group)[:, group.inverse[index]]
        skipped = self._groups[skip_column].modes if skip_column in self._groups else ()
        for k in range(self.features.num_modes):
            if k not in self._group_of_mode and k not in skipped:
                product = product * (self.active_features.mode_features(self.X[index], k).to(self.dtype)
                                     @ self.factors[k])
        return product

    def _cross_statistics(self, group: _InputGroup) -> tuple[torch.Tensor, torch.Tensor]:
        """``C_u[p, q] = Σ_{n∈u} c̄^p_n (c^q_n)ᵀ`` → (U, P, P, R, R) and ``t_u[p] = Σ_{n∈u} c̄^p_n y_n`` → (U, P, R),
        with c^p_n the product of the projections of every core *not* on the group's column (cached while those
        cores are unchanged)."""
        others = tuple(self.factors[k] for k in range(self.features.num_modes) if k not in group.modes)
        key = (group.column, self.active_components)
        if (self._cross is not None and self._cross[0] == key
                and all(a is b for a, b in zip(self._cross[1], others))):
            return self._cross[2], self._cross[3]
        self._cross = None  # free the previous column's statistics first
        P, R, U = self.active_features.num_components, self.rank, group.representatives.shape[0]
        width = P * R
        cross = torch.zeros(U, width, width, dtype=self.dtype, device=self.device)
        target = torch.zeros(U, width, dtype=self.dtype, device=self.device)
        n = self.X.shape[0]
        # rows sorted by the column's value, so each distinct value is a contiguous segment: C_u = B_uᴴ B_u by GEMM
        # (one per segment; outer products added with index_add_ were slower: memory-bound)
        for start in range(0, n, self.chunk_size):
            rows = group.order[start:start + self.chunk_size]
            block = self._row_product(rows, skip_column=group.column).transpose(0, 1).reshape(len(rows), width)
            values = group.inverse[rows]
            target.index_add_(0, values, block.conj() * self.y[rows].to(self.dtype).unsqueeze(-1))
            segments, counts = torch.unique_consecutive(values, return_counts=True)
            for value, part in zip(segments.tolist(), block.split(counts.tolist())):
                cross[value].addmm_(part.mH, part)
        cross = cross.reshape(U, P, R, P, R).permute(0, 1, 3, 2, 4)
        target = target.reshape(U, P, R)
        self._cross = (key, others, cross, target)
        return cross, target

    def _grouped_normal_equations(self, mode: int) -> CoreSystem:
        group = self._group_of_mode[mode]
        cross, target = self._cross_statistics(group)
        P, R, U = self.active_features.num_components, self.rank, group.representatives.shape[0]
        M = self.features.mode_sizes[mode]
        within = torch.ones(P, U, R, dtype=self.dtype, device=self.device)
        for k in group.modes:
            if k != mode:
                within = within * self._value_projections(group, k)
        weights = self.active_weights.to(self.dtype)
        within = within * weights.view(-1, 1, 1)  # c_p folded into the same-column part
        phi = self.active_features.mode_features(group.representatives, mode).to(self.dtype)  # (P, U, M)
        # S_u[p, q] = (w̄^p_u w^qᵀ_u) ∘ C_u[p, q];  AᴴA[(m, r), (m', s)] = Σ_{u, p, q} φ̄^p_m(u) φ^q_m'(u) S_u[p, q, r, s]
        scaled = within.conj().permute(1, 0, 2)[:, :, None, :, None] * within.permute(1, 0, 2)[:, None, :, None, :] * cross
        outer_phi = phi.conj().permute(1, 0, 2)[:, :, None, :, None] * phi.permute(1, 0, 2)[:, None, :, None, :]
        gram = (outer_phi.reshape(U * P * P, M * M).transpose(0, 1) @ scaled.reshape(U * P * P, R * R))
        gram = gram.reshape(M, M, R, R).permute(0, 2, 1, 3).reshape(M * R, M * R)
        rhs = torch.einsum("pum,upr->mr", phi.conj(), within.conj().permute(1, 0, 2) * target).reshape(-1)
        return self._combined_system(mode, gram.contiguous(), rhs)
