"""Correctly rounded decimals of exact values.

Every shown digit must be right, so values are never rounded from a float or a
single finite-precision evaluation. Instead each value is *enclosed*: mpmath's
interval arithmetic gives a rigorous [lo, hi], which is turned into integers at
a fixed binary point. Rounding half-up is decided when both ends round to the
same decimal; otherwise the working precision doubles and the value is
enclosed again. Rationals never go near intervals: they are rounded exactly.

A rounding that cannot be decided (an exact tie hidden in a closed form) stops
at :data:`~symattn.input.limits.PRECISION_BITS` beyond the value's magnitude, with an
:class:`~symattn.input.errors.EvaluationError` instead of looping forever.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple

import sympy
from mpmath import iv, libmp

from symattn.exact.intervals import enclose as enclose  # numeric.enclose, as callers have always named it
from symattn.exact.intervals import working_precision as working_precision
from symattn.input.decimals import exact_decimal, pow10, round_half_up, significant_decimal
from symattn.input.decimals import significant_exact as significant_exact  # sympy-free, for the float64 path
from symattn.input.errors import EvaluationError, clip
from symattn.input.limits import PRECISION_BITS

GUARD_BITS = 24


def as_fraction(expr: sympy.Expr) -> Fraction | None:
    """The exact rational value of a SymPy number, or None if it is not rational."""
    if isinstance(expr, sympy.Rational):
        return Fraction(int(expr.p), int(expr.q))
    return None


# --- fixed-point enclosures ----------------------------------------------


class Fixed(NamedTuple):
    """The interval [lo, hi] * 2**-bits with integer ends (a named tuple: large models make
    millions of them, and a tuple is made several times faster than a frozen dataclass)."""

    lo: int
    hi: int
    bits: int

    @classmethod
    def exact(cls, value: Fraction, bits: int) -> Fixed:
        scaled = value * (1 << bits)
        lo = scaled.numerator // scaled.denominator
        return cls(lo, lo if scaled.denominator == 1 else lo + 1, bits)

    @classmethod
    def from_interval(cls, x: iv.mpf, bits: int) -> Fixed:
        a, b = x._mpi_
        return cls(_floor_mpf(a, bits), _ceil_mpf(b, bits), bits)

    def rounded(self, decimals: int) -> Decimal | None:
        """The half-up rounding shared by every point of the interval, if any."""
        lo, hi = _round_int(self.lo, self.bits, decimals), _round_int(self.hi, self.bits, decimals)
        return exact_decimal(lo < 0, abs(lo), decimals) if lo == hi else None

    def exponent(self) -> int | None:
        """floor(log10 |x|) shared by the whole interval, if decided."""
        if self.lo <= 0 <= self.hi:
            return None
        lo, hi = sorted((abs(self.lo), abs(self.hi)))
        a, b = _log10_floor(lo, self.bits), _log10_floor(hi, self.bits)
        return a if a == b else None


def _mpf_parts(x: tuple) -> tuple[int, int]:
    sign, man, exp, _ = x
    if not man and exp:  # inf or nan
        raise EvaluationError("value is not finite")
    return (-man if sign else man), exp


def _floor_mpf(x: tuple, bits: int) -> int:
    man, exp = _mpf_parts(x)
    shift = exp + bits
    return man << shift if shift >= 0 else man >> -shift


def _ceil_mpf(x: tuple, bits: int) -> int:
    man, exp = _mpf_parts(x)
    shift = exp + bits
    return man << shift if shift >= 0 else -((-man) >> -shift)


def _round_int(n: int, bits: int, decimals: int) -> int:
    # round(n * 10**d / 2**bits) half-up (ties away from zero), as a signed integer
    if decimals >= 0:
        num, den = abs(n) * 10**decimals, 1 << bits
    else:
        num, den = abs(n), (1 << bits) * 10**-decimals
    q = (2 * num + den) // (2 * den)
    return -q if n < 0 else q


def _log10_floor(n: int, bits: int) -> int:
    # floor(log10(n / 2**bits)) for n > 0, in integers: estimate from the bit length, then fix
    k = int((n.bit_length() - bits) * 0.30102999566398120) - 1

    def at_least(k: int) -> bool:  # n / 2**bits >= 10**k
        return n >= (10**k << bits) if k >= 0 else n * 10**-k >= 1 << bits

    while at_least(k + 1):
        k += 1
    while not at_least(k):
        k -= 1
    return k


def log10_floor(x: Fraction) -> int:
    """floor(log10 |x|) of a nonzero rational, exactly."""
    x = abs(x)
    # from the bit lengths, off by at most one (str() of an int past 4300 digits raises)
    k = int((x.numerator.bit_length() - x.denominator.bit_length()) * 0.30102999566398120)
    while x >= Fraction(10) ** (k + 1):
        k += 1
    while x < Fraction(10) ** k:
        k -= 1
    return k


# --- enclosing SymPy expressions: symattn.exact.intervals ------------------


def sign(expr: sympy.Expr, cache: dict[int, dict] | None = None) -> int | None:
    """The sign of a closed form: exact for a rational, else its enclosures at rising precision
    separate it from 0; None where they never do (0 to PRECISION_BITS beyond its terms' size)."""
    exact = as_fraction(expr)
    if exact is not None:
        return (exact > 0) - (exact < 0)
    caches = {} if cache is None else cache
    bits = 64
    while bits <= PRECISION_BITS:
        box = enclose(expr, bits, caches.setdefault(bits, {}))
        if box.a > 0:
            return 1
        if box.b < 0:
            return -1
        bits *= 2
    return None


def exp_fixed(z: Fixed, prec: int, bits: int) -> Fixed:
    """e^z for z in [lo, hi] * 2**-z.bits, as an enclosure at 2**-bits.

    One exp per interval: mpmath's exp rounded down at the lower end gives L with
    L <= e^lo < L + ulp(L); then e^hi <= (L + ulp) * e^(hi - lo) and
    e^d <= 1 + 2d for 0 <= d <= 1.
    """
    low = libmp.mpf_exp(libmp.from_man_exp(z.lo, -z.bits), prec, libmp.round_floor)
    lo = _floor_mpf(low, bits)
    man, exp = _mpf_parts(low)
    ulp = 1 << max(exp + abs(man).bit_length() - prec + bits, 0)  # one unit in the last place of L
    width = z.hi - z.lo
    if width >= 1 << (z.bits - 1):
        raise EvaluationError("interval too wide for exp_fixed")
    upper = lo + ulp + 1
    upper += -(-(upper * 2 * width) >> z.bits)  # * (1 + 2d), rounded up
    return Fixed(lo, upper, bits)


def start_bits(decimals: int, magnitude_bits: int = 0) -> int:
    # decimals < 0 round at 10^|d| (a claimed 1e5000): no more bits than at the point itself, and never
    # fewer than none (a negative binary point is a negative shift further on)
    return int(max(decimals, 0) * 3.33) + max(magnitude_bits, 0) + GUARD_BITS


class Undecided(EvaluationError):
    """A rounding that no precision up to the limit decided; ``index``: the first such value."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


def _refine(
    enclosures: Callable[[int], Sequence[Fixed]],
    result: list[Decimal | None],
    pick: Callable[[int, Fixed], Decimal | None],
    bits: int,
    what: str | Callable[[], str],
    headroom: int,
    witness: list[Fixed | None] | None = None,
) -> list[Decimal]:
    # raise the precision only while some rounding is undecided; ``witness`` keeps the box that decided each.
    # PRECISION_BITS beyond the start, which holds the decimals asked (a claimed 1e-5000 asks 5000)
    ceiling = PRECISION_BITS + headroom + bits
    while any(r is None for r in result):
        if bits > ceiling:
            index = result.index(None)
            name = what() if callable(what) else what
            raise Undecided(f"cannot decide the rounding of {name} (entry {index + 1}): it may be an exact tie", index)
        for i, box in enumerate(enclosures(bits)):
            if result[i] is None:
                result[i] = pick(i, box)
                if witness is not None and result[i] is not None:
                    witness[i] = box
        bits *= 2
    return result  # type: ignore[return-value]


def decide(
    enclosures: Callable[[int], Sequence[Fixed]],
    exact: Sequence[Fraction | None],
    decimals: int | Sequence[int],
    bits: int,
    what: str | Callable[[], str],
    headroom: int = 0,
) -> list[Decimal]:
    """Round each value half-up to fixed decimals.

    ``enclosures(bits)`` encloses every value at a working precision; entries
    whose exact rational value is known are rounded exactly instead.
    ``headroom``: bits the values' magnitudes may need beyond the usual precision.
    """
    places = [decimals] * len(exact) if isinstance(decimals, int) else list(decimals)
    result = [None if e is None else round_half_up(e, places[i]) for i, e in enumerate(exact)]
    return _refine(enclosures, result, lambda i, box: box.rounded(places[i]), bits, what, headroom)


def decide_significant(
    enclosures: Callable[[int], Sequence[Fixed]],
    exact: Sequence[Fraction | None],
    digits: int,
    bits: int,
    what: str | Callable[[], str],
    headroom: int = 0,
    witness: list[Fixed | None] | None = None,
) -> list[Decimal]:
    """Like :func:`decide`, to ``digits`` significant digits; ``witness`` receives the deciding boxes."""

    def pick(_: int, box: Fixed) -> Decimal | None:
        lo, hi, b = box
        if lo > 0:
            return _significant_box(lo, hi, b, digits, 1)
        if hi < 0:
            return _significant_box(-hi, -lo, b, digits, -1)
        return None  # the box holds 0: no exponent yet

    result = [None if e is None else significant_exact(e, digits) for e in exact]
    return _refine(enclosures, result, pick, bits, what, headroom, witness)


def exponent_bits(x: iv.mpf) -> int:
    """log2 of the larger end's size, roughly (to a bit): where a floating interval's value lies."""
    return max(exp + abs(man).bit_length() for man, exp in (_mpf_parts(end) for end in x._mpi_))


def significant_of(x: iv.mpf, digits: int) -> Decimal | None:
    """The rounding to ``digits`` significant digits shared by every point of a floating interval (its exponent
    unbounded: 10^−300000 too), if any; None where it holds 0 or the ends round apart."""
    lo, hi = x._mpi_
    if not libmp.mpf_lt(libmp.fzero, lo) and not libmp.mpf_lt(hi, libmp.fzero):
        return None
    man, exp = _mpf_parts(hi if libmp.mpf_lt(libmp.fzero, lo) else lo)
    bits = int(digits * 3.33) + GUARD_BITS - (exp + abs(man).bit_length())  # the value's digits above 2^−bits
    box = Fixed(_floor_mpf(lo, bits), _ceil_mpf(hi, bits), bits)
    if box.lo > 0:
        return _significant_box(box.lo, box.hi, bits, digits, 1)
    return _significant_box(-box.hi, -box.lo, bits, digits, -1) if box.hi < 0 else None


_LOG10_2 = math.log10(2)


def _at_least(n: int, den_bits: int, k: int) -> bool:
    # n / 2**den_bits >= 10**k
    return n >= (pow10(k) << den_bits) if k >= 0 else n * pow10(-k) >= 1 << den_bits


def _significant_box(lo: int, hi: int, bits: int, digits: int, sign: int) -> Decimal | None:
    """The rounding to ``digits`` significant digits shared by [lo, hi] * 2**-bits (0 < lo), if any.

    The same decision as :meth:`Fixed.exponent` then :meth:`Fixed.rounded`, in integers and in one
    function (it runs once per value of a large model).
    """
    # k = floor(log10 lo·2^-bits), estimated with floats; e = digits - 1 - k
    e = digits - 1 - math.floor(math.log10(lo) - bits * _LOG10_2)
    if e >= 0:
        low, high = _BOUNDS.get((digits, bits)) or _bounds(digits, bits)
        p = pow10(e)
        a, b = lo * p, hi * p
        if low <= a and b < high:  # the estimate was right, and hi has the same exponent
            half = 1 << bits >> 1
            q = (a + half) >> bits
            return significant_decimal(sign, q, e, digits) if q == (b + half) >> bits else None
    k = _exponent(lo, bits)  # the estimate was off by one, or the value is huge: the slow way
    e = digits - 1 - k
    shown = significant_decimal(sign, _half_up(lo, bits, e), e, digits)
    if _at_least(hi, bits, k + 1):
        # the ends straddle a power of ten: decided where both round to it (a cap's c·(1 − e^−10⁶) just
        # under c = 10^−6 never leaves the box around c); rounding is monotone, so every point between does too
        f = digits - 1 - _exponent(hi, bits)
        other = significant_decimal(sign, _half_up(hi, bits, f), f, digits)
        return shown if shown.as_tuple() == other.as_tuple() else None
    return shown if _half_up(lo, bits, e) == _half_up(hi, bits, e) else None


_BOUNDS: dict[tuple[int, int], tuple[int, int]] = {}


def _bounds(digits: int, bits: int) -> tuple[int, int]:
    # x·10^e at 2^-bits has exactly ``digits`` digits before the point iff low <= it < high
    if len(_BOUNDS) > 1000:
        _BOUNDS.clear()
    b = _BOUNDS[digits, bits] = (pow10(digits - 1) << bits, pow10(digits) << bits)
    return b


def _exponent(n: int, bits: int) -> int:
    """floor(log10(n / 2**bits)) for n > 0: a float estimate, checked in integers."""
    k = math.floor(math.log10(n) - bits * _LOG10_2)
    while _at_least(n, bits, k + 1):
        k += 1
    while not _at_least(n, bits, k):
        k -= 1
    return k


def _half_up(n: int, bits: int, e: int) -> int:
    # round(n * 10**e / 2**bits) half-up, for n >= 0
    if e >= 0:
        return (n * pow10(e) + (1 << bits >> 1)) >> bits
    den = pow10(-e) << bits
    return (2 * n + den) // (2 * den)


def rational_bounds(value: Fraction, digits: int, bits: int) -> tuple[Fraction, Fraction]:
    """Dyadic bounds of a rational that decide its rounding to ``digits`` significant digits.

    Floor and ceiling at 2^-bits, refined until both ends round alike; only a value exactly on a
    rounding boundary (0.15 to one digit) is its own bound, since nothing around it rounds alike.
    """
    shown = significant_exact(value, digits)
    if value != 0:
        step = Fraction(10) ** (log10_floor(abs(value)) - digits + 1)
        if (abs(value) / step - Fraction(1, 2)).denominator == 1:
            return value, value
    if value == 0:
        return value, value
    while True:
        box = Fixed.exact(value, bits)
        lo, hi = Fraction(box.lo, 1 << bits), Fraction(box.hi, 1 << bits)
        if significant_exact(lo, digits) == shown == significant_exact(hi, digits):
            return lo, hi
        bits *= 2


def _normalize_significant(value: Decimal, digits: int) -> Decimal:
    # a carry (9.99 -> 10.00) adds a trailing zero digit: drop it
    sign, ds, exp = value.as_tuple()
    assert isinstance(exp, int)  # a rounded value is finite (not NaN or infinite): its exponent is a number
    if len(ds) > digits:
        value = Decimal((sign, ds[:digits], exp + len(ds) - digits))
    return value


class TooLarge(EvaluationError):
    """A closed form beyond the magnitude its caller can use (a value carried from a claimed 1e5000)."""


def round_expr(
    expr: sympy.Expr,
    decimals: int,
    caches: dict[int, dict] | None = None,
    significant: bool = False,
    most_bits: int | None = None,
) -> Decimal:
    """Round one closed form half-up to ``decimals`` places (or, with ``significant``,
    to ``decimals`` significant digits), correctly.

    ``caches`` (one dict per precision) shares the enclosures of common
    subexpressions, such as a row's sum of exps, across many calls. A value that may have more than
    ``most_bits`` bits above the point raises :class:`TooLarge`, before any work at its size.
    """
    caches = {} if caches is None else caches
    exact = as_fraction(expr)
    if (
        exact is not None
        and most_bits is not None
        and exact.numerator.bit_length() - exact.denominator.bit_length() > most_bits
    ):
        raise TooLarge("larger than 2^" + str(most_bits))
    magnitude = 0 if exact is not None else _magnitude_bits(enclose(expr, 64, caches.setdefault(64, {})))
    if most_bits is not None and magnitude > most_bits:
        raise TooLarge("larger than 2^" + str(most_bits))

    def boxes(bits: int) -> list[Fixed]:
        prec = bits + magnitude + 32  # mpmath's precision is relative: a large value needs its own bits too
        return [Fixed.from_interval(enclose(expr, prec, caches.setdefault(prec, {})), bits)]

    def what() -> str:
        try:  # a closed form of huge rationals has no str() past 4300 digits
            return clip(str(expr), 80)
        except ValueError:
            return "a closed form of huge numbers"

    if significant:
        return decide_significant(boxes, [exact], decimals, start_bits(decimals), what, magnitude)[0]
    return decide(boxes, [exact], decimals, start_bits(decimals), what, magnitude)[0]


def _magnitude_bits(x: iv.mpf) -> int:
    """Bits above the binary point of the larger end of an interval (0 for |x| < 1)."""
    ends = [_mpf_parts(end) for end in x._mpi_]
    return max(0, max(abs(man).bit_length() + exp for man, exp in ends))


def weighted_sums(boxes: Sequence[Fixed], columns: Sequence[Sequence[int]], den: int, bits: int) -> list[Fixed]:
    """Σ_j box_j · columns[k][j] / den for each column k, enclosed.

    Each box is mid ± rad: the mids go through one exact integer dot product,
    the radii bound the rest.
    """
    mids = [(b.lo + b.hi) >> 1 for b in boxes]
    rad = max(b.hi - b.lo for b in boxes) + 1
    out = []
    for col in columns:
        total = sum(map(operator.mul, mids, col))
        err = rad * sum(map(abs, col))
        out.append(Fixed((total - err) // den, -((-(total + err)) // den), bits))
    return out
