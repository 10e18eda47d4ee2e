"""How the right value of a claim written m·10^k is shown: m·10^k too, not in fixed digits.

A claim's exponent may reach limits.CLAIM_EXPONENT, since exact values reach 10^±4343: rounded to such a
claim's decimals and printed in fixed digits, the right value of "1.000e-3071" was "0.000…" with 3,070
zeros, and that of "6e3" for an exact 6 was "0".
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from symattn.exact import numeric
from symattn.exact.rounding import Num
from symattn.input.claims import Claim
from symattn.input.limits import CLAIM_EXPONENT

SMALLEST = 4400  # decimals past 10^-4343, the smallest magnitude an exact value reaches (limits.ABS_Z)


def like_claim(
    claim: Claim, x: Decimal | None, at: Callable[[int], Decimal | None], shown: Decimal | None = None
) -> Num | None:
    """A value ``x`` rounded to the decimals of a claim written m·10^k, shown so (1.187×10^-3071, not 3,000
    zeros) where the value lies within a decade of the claim; else (a claim orders of magnitude off, as 5e-4999
    or 6e3 for 6) the value correctly rounded to the claim's significant digits by ``at`` (decimals → value).
    ``shown``: the value to a few significant digits, for its magnitude (else found by rounding finer)."""
    scale = _finer(claim, x, at) if shown is None and x is not None else shown
    if x is None or scale is None:
        return None
    if scale == 0:  # 0, or below any place a value reaches
        return Num(Decimal(0), False)
    magnitude = scale.adjusted()
    value = claim.number.value
    if value != 0 and abs(magnitude - numeric.log10_floor(value)) <= 1:
        return Num(x, False, x != 0)
    digits = max(1, len(claim.number.mantissa.lstrip("+-").replace(".", "").lstrip("0")))
    x = at(digits - 1 - magnitude)
    return None if x is None else Num(x, False, x != 0)


def _finer(claim: Claim, x: Decimal, at: Callable[[int], Decimal | None]) -> Decimal | None:
    """The value rounded at the claim's decimals (``x``) or at finer ones, until two digits show (a value
    rounded to one digit may have gone up a decade): its magnitude within one; 0 for 0."""
    decimals, step = claim.number.decimals or 0, 1
    rounded: Decimal | None = x
    while rounded is not None and (rounded == 0 or len(rounded.as_tuple().digits) < 2):
        if decimals + step > CLAIM_EXPONENT + SMALLEST:
            break
        decimals, step = decimals + step, step * 2
        rounded = at(decimals)
    return rounded


__all__ = ["like_claim"]
