"""Exact rationals as decimals: rounded half-up, truncated, or as many places as they terminate with.

No float and no ``str(int)`` (which stops at 4300 digits) is ever involved.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction


def round_half_up(value: Fraction, decimals: int) -> Decimal:
    """Round an exact rational half-up (away from zero on ties) to fixed decimals."""
    scaled = abs(value) * Fraction(10) ** decimals
    q = (scaled.numerator * 2 + scaled.denominator) // (scaled.denominator * 2)
    return exact_decimal(value < 0 and q != 0, q, decimals)


def truncate(value: Fraction, decimals: int) -> Decimal:
    """Cut an exact rational to fixed decimals (toward zero)."""
    scaled = abs(value) * Fraction(10) ** decimals
    q = scaled.numerator // scaled.denominator
    return exact_decimal(value < 0 and q != 0, q, decimals)


def exact_decimal(negative: bool, digits: int, decimals: int) -> Decimal:
    # exact, with no context rounding, and no str(int) (which stops at 4300 digits)
    return Decimal((int(negative), Decimal(digits).as_tuple().digits, -decimals))


def terminating_decimals(value: Fraction) -> int | None:
    """Digits after the point of a terminating decimal, or None if it repeats."""
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    return max(twos, fives) if den == 1 else None
