"""Exact rationals as decimals: rounded half-up, truncated, or as many places as they terminate with.

No float and no ``str(int)`` (which stops at 4300 digits) is ever involved.
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction


class Percent(Decimal):
    """A number in percent (40.3 for 40.3 %): the same digits, shown with a % sign wherever it is shown."""

    __slots__ = ()


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


def significant_exact(value: Fraction, digits: int) -> Decimal:
    """An exact rational rounded half-up to ``digits`` significant digits."""
    # in integers: Fraction arithmetic costs more than the rounding itself
    p, q = value.numerator, value.denominator
    if p == 0:
        return Decimal(0)
    sign = -1 if p < 0 else 1
    p = abs(p)
    k = math.floor(math.log10(p) - math.log10(q))  # floor(log10 p/q), or one off
    e = digits - 1 - k
    if e >= 0:
        num = p * (_POWERS.get(e) or pow10(e))
        if q * (_POWERS.get(digits - 1) or pow10(digits - 1)) <= num < q * pow10(digits):
            return significant_decimal(sign, (2 * num + q) // (2 * q), e, digits)
    while _ratio_at_least(p, q, k + 1):
        k += 1
    while not _ratio_at_least(p, q, k):
        k -= 1
    e = digits - 1 - k
    num, den = (p * pow10(e), q) if e >= 0 else (p, q * pow10(-e))
    return significant_decimal(sign, (2 * num + den) // (2 * den), e, digits)


def _ratio_at_least(p: int, q: int, k: int) -> bool:
    # p / q >= 10**k
    return p >= q * pow10(k) if k >= 0 else p * pow10(-k) >= q


_POWERS: dict[int, int] = {}


def pow10(k: int) -> int:
    p = _POWERS.get(k)
    if p is None:
        p = _POWERS[k] = 10**k
    return p


def significant_decimal(sign: int, q: int, e: int, digits: int) -> Decimal:
    # sign · q × 10**-e; a carry (9.99 -> 10.0) gives digits + 1 digits: drop the trailing zero
    if q >= (_POWERS.get(digits) or pow10(digits)):
        q //= 10
        e -= 1
    return Decimal(sign * q).scaleb(-e, EXACT_CONTEXT)


# scaleb in this context never rounds (and is twice as fast as parsing "qE-e")
EXACT_CONTEXT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
