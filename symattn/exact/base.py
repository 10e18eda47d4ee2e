"""What every model kind shares: the quantities, closed forms from the scaled scores, correct rounding,
and the interface (``kind``, ``exact``, ``forward``, ``backward``) that callers use without testing types.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import ClassVar, Protocol, Self, runtime_checkable

import sympy
from sympy import ImmutableMatrix
from sympy.polys.domains import ZZ
from sympy.polys.matrices import DomainMatrix

from symattn.exact import numeric, progress
from symattn.exact.numeric import Fixed
from symattn.input.errors import UndecidedRounding
from symattn.input.reader import Numerals

Rows = tuple[tuple[Decimal, ...], ...]
Bounds = tuple[Fraction, Fraction] | None
Mask = tuple[tuple[bool, ...], ...]

QUANTITIES = (
    "scale",
    "sqrt_dk",
    "scores",
    "scaled",
    "shifted",
    "exp",
    "exp_sum",
    "exp_shifted",
    "exp_shifted_sum",
    "weights",
    "products",
    "output",
)
NEG_INFINITY = Decimal("-Infinity")
INFINITE_QUANTITIES = ("scaled", "shifted")  # quantities that are −∞ where masked


def integer_matrix(m: Numerals) -> tuple[DomainMatrix, int]:
    """The matrix as (integer matrix over ZZ, common denominator)."""
    den = lcm_of_denominators([[x.value for x in row] for row in m])
    rows = [[x.value.numerator * (den // x.value.denominator) for x in row] for row in m]
    return DomainMatrix(rows, (len(m), len(m[0])), ZZ), den


def rational_matrix(m: DomainMatrix, den: int) -> ImmutableMatrix:
    return ImmutableMatrix(m.to_Matrix()) / den


def lcm_of_denominators(rows: Sequence[Sequence[Fraction]]) -> int:
    den = 1
    for row in rows:
        for x in row:
            den = den * x.denominator // math.gcd(den, x.denominator)
    return den


class ClosedForms:
    """exp, their row sums, weights and output from ``scaled`` and ``V``: shared by
    the numeric model and the symbolic one."""

    scaled: ImmutableMatrix
    V: ImmutableMatrix

    @cached_property
    def exp(self) -> ImmutableMatrix:
        return self.scaled.applyfunc(sympy.exp)

    @cached_property
    def exp_sum(self) -> ImmutableMatrix:
        return row_sums(self.exp)

    @cached_property
    def weights(self) -> ImmutableMatrix:
        e, sums = self.exp, self.exp_sum
        return ImmutableMatrix(e.rows, e.cols, lambda i, j: e[i, j] / sums[i, 0])

    @cached_property
    def output(self) -> ImmutableMatrix:
        # Σ_j V_jk e^{z_ij} over the row sum: one fraction per entry, as a reader writes it
        e, sums, V = self.exp, self.exp_sum, self.V
        return ImmutableMatrix(
            e.rows, V.cols, lambda i, k: sympy.Add(*[V[j, k] * e[i, j] for j in range(e.cols)]) / sums[i, 0]
        )


class Rounding:
    """Correctly rounded numbers of an exact model's quantities.

    Subclasses give ``rationals(quantity)`` (exact values where rational) and
    ``_enclosures(quantity, bits)`` (rigorous boxes of every entry).
    """

    def rounded(self, quantity: str, decimals: int | Sequence[int]) -> Rows:
        """Every entry rounded half-up to ``decimals`` places, each digit correct (−∞ where masked)."""
        return self._numbers(
            quantity,
            lambda boxes, exact, bits: numeric.decide(
                boxes, exact, decimals, bits + numeric.start_bits(max(_seq(decimals))), quantity, self._headroom_bits
            ),
        )

    def significant(self, quantity: str, digits: int) -> Rows:
        """Every entry rounded half-up to ``digits`` significant digits."""
        return self._numbers(
            quantity,
            lambda boxes, exact, bits: numeric.decide_significant(
                boxes, exact, digits, bits + numeric.start_bits(digits), quantity, self._headroom_bits
            ),
        )

    def certified(self, quantity: str, digits: int) -> tuple[Rows, tuple[tuple[Bounds, ...], ...]]:
        """:meth:`significant`, with the enclosure that decided each value: (lo, hi) holding the exact
        value, every point of which rounds to the shown digits (None where the value is −∞)."""
        exact = self.rationals(quantity)
        cols = len(exact[0])
        witness: list[Fixed | None] = [None] * (len(exact) * cols)
        rows = self._numbers(
            quantity,
            lambda boxes, ex, bits: numeric.decide_significant(
                boxes, ex, digits, bits + numeric.start_bits(digits), quantity, self._headroom_bits, witness
            ),
        )
        start = numeric.start_bits(digits)
        bounds: list[Bounds] = []
        for p, value in enumerate(x for row in rows for x in row):
            known, box = exact[p // cols][p % cols], witness[p]
            if value.is_infinite():
                bounds.append(None)
            elif box is None:  # rational: decided exactly
                bounds.append(numeric.rational_bounds(known if known is not None else Fraction(0), digits, start))
            else:
                bounds.append((Fraction(box.lo, 1 << box.bits), Fraction(box.hi, 1 << box.bits)))
        return rows, tuple(tuple(bounds[i * cols : (i + 1) * cols]) for i in range(len(exact)))

    def rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        raise NotImplementedError

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        raise NotImplementedError

    def _magnitude_bits(self, quantity: str) -> int:
        return 0

    @property
    def _headroom_bits(self) -> int:
        # extra precision that very large or very small values may need
        return 0

    def _is_infinite(self, quantity: str, row: int, col: int) -> bool:
        return False

    def _may_be_infinite(self, quantity: str) -> bool:
        # False when no entry of the quantity is −∞: the check per entry is skipped
        return True

    def _numbers(self, quantity: str, method: Callable) -> Rows:
        progress.step(quantity)
        exact = self.rationals(quantity)
        cols = len(exact[0])
        # −∞ entries (masked scores) have nothing to evaluate: a placeholder, then −∞
        infinite = (
            [self._is_infinite(quantity, p // cols, p % cols) for p in range(len(exact) * cols)]
            if self._may_be_infinite(quantity)
            else [False] * (len(exact) * cols)
        )
        flat_exact = [Fraction(0) if inf else x for inf, x in zip(infinite, (x for row in exact for x in row))]
        try:
            flat = method(lambda bits: self._enclosures(quantity, bits), flat_exact, self._magnitude_bits(quantity))
        except numeric.Undecided as exc:  # named by its place in the matrix, not its place in the flat list
            i, j = divmod(exc.index, cols)
            raise UndecidedRounding(quantity, i, j) from None
        flat = [NEG_INFINITY if inf else x for inf, x in zip(infinite, flat)]
        return tuple(tuple(flat[i * cols : (i + 1) * cols]) for i in range(len(exact)))


def row_sums(e: ImmutableMatrix) -> ImmutableMatrix:
    return ImmutableMatrix([[sympy.Add(*e.row(i))] for i in range(e.rows)])


@runtime_checkable
class AttentionModel(Protocol):
    """What every model kind offers (one head, several heads, symbols, the backward pass).

    The derivation, ``compute`` and the checker dispatch on ``kind`` through a
    table, as SymPy's printers dispatch on the class: no caller tests types.
    """

    kind: ClassVar[str]  # "head", "heads", "symbolic" or "backward"

    def exact(self, quantity: str) -> ImmutableMatrix:
        """The closed forms of one quantity."""

    @property
    def forward(self) -> AttentionModel:
        """The forward model: itself, or the one a backward model differentiates."""

    @property
    def backward(self) -> AttentionModel | None:
        """The backward model, or None for the forward kinds."""


class ForwardModel(AttentionModel, Protocol):
    """A model a backward pass can differentiate (one head, or several heads with W_O): its exact values and
    their correctly rounded numbers."""

    def rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]: ...

    def rounded(self, quantity: str, decimals: int | Sequence[int]) -> Rows: ...

    def significant(self, quantity: str, digits: int) -> Rows: ...


class ForwardPass:
    """The forward kinds' part of the interface: each is its own forward model, and has no gradients
    (a backward model's ``forward`` is the model it differentiates)."""

    @property
    def forward(self) -> Self:
        return self

    @property
    def backward(self) -> None:
        return None


def _seq(x: int | Sequence[int]) -> Sequence[int]:
    return [x] if isinstance(x, int) else x
