"""Which intervals of float64 ends round to one value at a given count of significant digits, vectorised.

A float64-path certificate shows an output when every point of [lo, hi] rounds half-up (away from zero)
to the same ``digits`` significant digits. numpy scales each end by an exact power of ten (one rounding)
and adds 0.5 (one more): t off by at most 2.3·10^-16 · t. The margin is 10^-15 · 10^digits, over four
times that; an entry inside it, or scaled by more than 10^22 (not exact in float64), is left undecided
(the maker refines it with arb; the verifier checks it in exact rationals).
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

MOST = 13  # significant digits the margin covers (0.01 of the last digit at 13)
_POWERS = np.array([float(10**k) for k in range(23)])  # exact: 10^22 < 2^53 · 2^22


def significant_many(lo: np.ndarray, hi: np.ndarray, digits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, signed q, exponent): where ok, every point of [lo, hi] rounds to q·10^exponent, q of ``digits`` digits."""
    if not 1 <= digits <= MOST:
        raise ValueError(f"digits must be from 1 to {MOST}, got {digits}")
    same = ((lo > 0) | (hi < 0)) & np.isfinite(lo) & np.isfinite(hi)
    a, b = np.where(same, np.abs(lo), 1.0), np.where(same, np.abs(hi), 1.0)
    small, big = np.minimum(a, b), np.maximum(a, b)
    with np.errstate(divide="ignore"):
        top = np.floor(np.log10(big)).astype(np.int64)
    exponent = top - digits + 1
    reach = np.abs(exponent) <= 22
    power = _POWERS[np.where(reach, np.abs(exponent), 0)]
    up = exponent < 0
    ta = np.where(up, small * power, small / power) + 0.5
    tb = np.where(up, big * power, big / power) + 0.5
    margin = 10.0 ** (digits - 15)
    fa, fb = np.floor(ta), np.floor(tb)
    ok = (
        same
        & reach
        & (ta - fa > margin)
        & (fa + 1 - ta > margin)
        & (tb - fb > margin)
        & (fb + 1 - tb > margin)
        & (fa == fb)
        & (fa >= 10.0 ** (digits - 1))  # log10's floor was not one too high
        & (fb < 10.0**digits)  # nor one too low
    )
    q = np.where(ok, fa, 0).astype(np.int64)
    return ok, np.where(lo < 0, -q, q), exponent


def text(q: int, exponent: int) -> str:
    """q·10^exponent as compute shows a Decimal of those digits: "0.4171325333", "2.028E+4"."""
    return str(Decimal(f"{q}E{exponent}"))


def texts(q: list[int], exponent: list[int]) -> list[str]:
    """[text(a, e) for a, e in zip(q, exponent)], each q nonzero: the digits placed by str(Decimal)'s own rule
    (Python's decimal.__str__, scientific off): with the coefficient's n digits and the exponent e, the point
    goes after e + n of them where e ≤ 0 and e + n > −6, else after the first with "E" and e + n − 1."""
    out = []
    for a, e in zip(q, exponent):
        digits = str(a)
        sign = ""
        if a < 0:
            sign, digits = "-", digits[1:]
        left = e + len(digits)
        if e <= 0 and left > -6:
            if e == 0:
                out.append(sign + digits)
            elif left <= 0:
                out.append(sign + "0." + "0" * -left + digits)
            else:
                out.append(sign + digits[:left] + "." + digits[left:])
        else:
            point = "." + digits[1:] if len(digits) > 1 else ""
            out.append(f"{sign}{digits[0]}{point}E{left - 1:+d}")
    return out


__all__ = ["MOST", "significant_many", "text", "texts"]
