"""Which entries of one head's quantities are rational, decided from the structure without closed forms.

By Lindemann–Weierstrass, e^z (z algebraic) is rational only at z = 0, and a softmax weight only when
every z its query may attend to is equal; an output Σ_j V_jk e^{z_j} / Σ_j e^{z_j} is rational iff the
mean of V over each group of equal z is the same. Without parts z = n·scale/den, so scores, z and their
exps are decided on the integers n; a head's parts decide their own quantities and, with them, z's
(:mod:`symattn.variants.forms`); a denominator part decides the softmax's.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any

from symattn.exact import numeric
from symattn.exact.base import QUANTITIES

Rows = tuple[tuple[Fraction | None, ...], ...]  # a quantity's exact values where rational, else None
Z_QUANTITIES = ("scaled", "shifted", "exp", "exp_shifted", "exp_sum", "exp_shifted_sum")


class Rationals:
    """The rational entries of a :class:`~symattn.exact.model.Model`'s quantities (a mixin: the model's fields)."""

    parts: tuple[Any, ...]
    v: Any
    dv: int
    allowed: Any
    scale: Any

    if TYPE_CHECKING:  # the model's

        @property
        def n_queries(self) -> int: ...

        @property
        def n_keys(self) -> int: ...

        @property
        def score_integers(self) -> tuple[int, list[list[int]]]: ...

        @property
        def row_max(self) -> tuple[int, ...]: ...

        @property
        def _groups(self) -> list[list[list[int]]]: ...

        @property
        def forms(self) -> Any: ...

        def may_attend(self, i: int, j: int) -> bool: ...

    def rationals(self, quantity: str) -> Rows:
        """The exact rational value of each entry, or None where it is irrational (or −∞)."""
        table = self._rational_tables.get(quantity)
        if table is None:
            table = self._rational_tables[quantity] = self._rationals(quantity)
        return table

    @cached_property
    def _rational_tables(self) -> dict[str, Rows]:
        return {}

    def _rationals(self, quantity: str) -> Rows:
        for part in reversed(self.parts):  # the later stages first: a denominator part decides the softmax's
            table = part.rationals(self, quantity)
            if table is not None:
                return table
        if self.parts and quantity in Z_QUANTITIES:
            return self.forms.rationals(quantity)
        ok = self.may_attend
        if quantity in ("scale", "sqrt_dk"):
            return ((numeric.as_fraction(getattr(self, quantity)),),)
        if quantity in ("weights", "products", "output"):  # from the groups alone
            return self._softmax_rationals(quantity)
        den, scores = self.score_integers
        if quantity in ("scores", "scaled", "shifted"):
            # from the integers, not the closed forms: z = n·scale/den is rational iff the scale is, or n = 0
            c = Fraction(1) if quantity == "scores" else numeric.as_fraction(self.scale)
            top = [row[self.row_max[i]] if quantity == "shifted" else 0 for i, row in enumerate(scores)]
            return tuple(
                tuple(
                    None
                    if quantity != "scores" and not ok(i, j)
                    else Fraction((x - top[i]) * c.numerator, den * c.denominator)
                    if c is not None
                    else Fraction(0)
                    if x == top[i]
                    else None
                    for j, x in enumerate(row)
                )
                for i, row in enumerate(scores)
            )
        top = [row[self.row_max[i]] for i, row in enumerate(scores)]
        if quantity == "exp":
            return tuple(
                tuple((Fraction(1) if x == 0 else None) if ok(i, j) else Fraction(0) for j, x in enumerate(row))
                for i, row in enumerate(scores)
            )
        if quantity == "exp_shifted":
            return tuple(
                tuple((Fraction(1) if x == top[i] else None) if ok(i, j) else Fraction(0) for j, x in enumerate(row))
                for i, row in enumerate(scores)
            )
        if quantity in ("exp_sum", "exp_shifted_sum"):
            target = (lambda i: 0) if quantity == "exp_sum" else (lambda i: top[i])
            return tuple(
                (
                    Fraction(self.allowed_count(i))
                    if all(x == target(i) for j, x in enumerate(row) if ok(i, j))
                    else None,
                )
                for i, row in enumerate(scores)
            )
        return self._softmax_rationals(quantity)

    def _softmax_rationals(self, quantity: str) -> Rows:
        """weights, products and output: rational where the groups of equal z say so."""
        n, m = self.n_queries, self.n_keys
        ok = self.may_attend
        weights = tuple(
            tuple(
                Fraction(0) if not ok(i, j) else (Fraction(1, self.allowed_count(i)) if self.row_is_flat(i) else None)
                for j in range(m)
            )
            for i in range(n)
        )
        if quantity == "weights":
            return weights
        if quantity == "products":
            return self.products_of(weights)
        if quantity == "output":
            return tuple(tuple(self._rational_output(i, k) for k in range(self.v.shape[1])) for i in range(n))
        raise ValueError(f"unknown quantity {quantity!r}; expected one of {', '.join(QUANTITIES)}")

    def products_of(self, weights: Rows) -> Rows:
        """The rational entries of the products A_ij · V_j from those of the weights."""
        return tuple(
            tuple(self._product(weights[i][j], v) for v in self.v_rows[j])
            for i in range(self.n_queries)
            for j in range(self.n_keys)
        )

    def allowed_count(self, i: int) -> int:
        """The keys row i may attend to."""
        return self.n_keys if self.allowed is None else sum(self.allowed[i])

    _allowed_count = allowed_count

    @cached_property
    def v_rows(self) -> list[list[Fraction]]:
        return [[Fraction(int(x), self.dv) for x in row] for row in self.v.to_list()]

    @cached_property
    def _v_integers(self) -> tuple[int, list[list[int]]]:
        """V = columns / den with integer columns."""
        rows = self.v.to_list()
        return self.dv, [[int(row[k]) for row in rows] for k in range(self.v.shape[1])]

    @property
    def v_columns(self) -> tuple[int, list[list[int]]]:
        return self._v_integers

    @cached_property
    def _all_distinct(self) -> list[bool]:
        return [all(len(group) == 1 for group in groups) for groups in self._groups]

    @cached_property
    def _constant_columns(self) -> list[Fraction | None]:
        den, columns = self._v_integers
        return [Fraction(col[0], den) if len(set(col)) == 1 else None for col in columns]

    def row_is_flat(self, i: int) -> bool:
        """Every z row i may attend to is equal."""
        return len(self._groups[i]) == 1

    _row_is_flat = row_is_flat

    @staticmethod
    def _product(weight: Fraction | None, v: Fraction) -> Fraction | None:
        if v == 0:
            return Fraction(0)
        return None if weight is None else weight * v

    def _rational_output(self, i: int, k: int) -> Fraction | None:
        # By Lindemann–Weierstrass, Σ_j V_jk e^{z_j} / Σ_j e^{z_j} (z algebraic) is
        # rational iff the mean of V over each group of equal z is the same.
        den, columns = self._v_integers
        column = columns[k]
        groups = self._groups[i]
        if self._all_distinct[i]:  # rational iff V is constant over the keys this row may attend to
            if self.allowed is None:
                return self._constant_columns[k]
            values = {column[group[0]] for group in groups}
            return Fraction(values.pop(), den) if len(values) == 1 else None
        first, count = sum(column[j] for j in groups[0]), len(groups[0])
        for group in groups[1:]:  # usually the second group already differs
            if sum(column[j] for j in group) * count != first * len(group):
                return None
        return Fraction(first, count * den)
