"""A number as shown (its digits, whether they are exact, whether it is m × 10^k): what the rounding
gives and the renderer prints. Apart from the rounding (:mod:`rounding`), which needs SymPy, so that
rendering a report of numbers alone imports no SymPy.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from symattn.input.records import record


@record
class Num:
    """A number as shown: its digits, whether they are the whole value, and whether it is m × 10^k."""

    value: Decimal
    exact: bool
    scientific: bool = False

    @property
    def is_negative(self) -> bool:
        return self.value.is_signed() and self.value != 0

    @property
    def is_infinite(self) -> bool:
        return self.value.is_infinite()

    @property
    def fraction(self) -> Fraction:
        return Fraction(self.value)


NEG_INFINITY = Num(Decimal("-Infinity"), True)  # a masked score


NumRow = tuple[Num, ...]
NumRows = tuple[NumRow, ...]


__all__ = ["NEG_INFINITY", "Num", "NumRow", "NumRows"]
