"""An entry decided from an arb ball of its error itself, d = exact − x, where the exact value's own ball cannot.

A saturated row (one weight 1, the rest e^(−10^4)) has an output within e^(−10^4) of v_j, which the kernel
returns: a ball of the exact value holds x at any precision we can afford, so its error's digits never
separate. Summed as Σ_k e^(z_k)·(v_k − x) / Σ_k e^(z_k), the error keeps arb's relative precision (the
term v_j − x is exactly 0), so 96 bits give its three digits, its sign, and so the ULP the exact value has.
The same holds where the exact value is below the format's normal range (a denominator logit that takes all the
weight): its ULP is the least subnormal's, whatever its magnitude. Any other entry is left to the ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from symattn.input.decimals import significant_exact
from symattn.input.errors import EvaluationError
from symattn.input.floats import FORMATS, ulp

SHOWN_DIGITS = 3
NEAR = 40  # |d| below 2^-NEAR ULP of x: the exact value's ULP and its shown digits follow from d's sign
FINER = 256  # a rational y (``decide``'s near) is read within 2^-(NEAR + FINER) ULP where e lies that close
EXPONENTS = 10**13  # figures past 10^±EXPONENTS are refused: the entry table ranks exponents up to that
FAR_BITS = 1 << 20  # a ball's middle or radius past 2^±FAR_BITS is never made a rational (_near_enough)


@dataclass
class Floats:
    """A result's floats as refine asks for them: ``value(i, j)`` exactly, their format, and the balls of the
    errors that decided entries (``found``, by (i, j)), which the row-relative figures read again."""

    value: Callable[[int, int], Fraction]
    format: str
    found: dict[tuple[int, int], Any] = field(default_factory=dict)

    def suspect(self, i: int, j: int, lo: Fraction, hi: Fraction) -> bool:
        """Whether the ends [lo, hi] of an exact value hold a float of the format (x, in a saturated row), or
        lie below the least normal: only then may ``decide`` take the entry (an arb product of its row more)."""
        least = Fraction(2) ** FORMATS[self.format][1]
        if max(abs(lo), abs(hi)) < least:
            return True
        y = _nearest((lo + hi) / 2, self.format)
        return lo <= self.value(i, j) <= hi or lo <= y <= hi


def _arb(x: Fraction) -> Any:
    from flint import arb

    return arb(x.numerator) / x.denominator


def _fraction(x: Any) -> Fraction:
    man, exp = x.man_exp()
    man, exp = int(man), int(exp)
    _near_enough(man, exp)
    return Fraction(man) * Fraction(2) ** exp


def _near_enough(man: int, exp: int) -> None:
    """Refuses man·2^exp past 2^±FAR_BITS (an error of e^-(2^120) where scores reach 2^120): as a rational it
    would take gigabytes (one run took 24 GB before the system killed it)."""
    if man and abs(man.bit_length() + exp) > FAR_BITS:
        raise EvaluationError(f"is near 2^{man.bit_length() + exp}, past 2^±{FAR_BITS}")


def _scaled_ends(x: Any) -> tuple[int, int, int]:
    """Integers lo, hi and s ≥ 0 with the ball's ends lo·2^-s and hi·2^-s exactly."""
    man, exp = x.mid().man_exp()
    rman, rexp = x.rad().man_exp()
    man, exp, rman, rexp = int(man), int(exp), int(rman), int(rexp)
    _near_enough(man, exp)
    _near_enough(rman, rexp)
    s = max(0, -exp, -rexp)
    mid, rad = man << (exp + s), rman << (rexp + s)
    return mid - rad, mid + rad, s


def digits(ball: Any, n: int) -> Decimal | None:
    """The ``n`` significant digits (half-up) every point of a positive ball rounds to, or None."""
    from flint import arb

    if not ball > 0:
        return None
    man, exp = ball.mid().man_exp()
    k0 = int((int(man).bit_length() + int(exp)) * 0.30102999566398120)  # log10 of the middle, nearly
    if abs(k0) >= EXPONENTS:
        raise EvaluationError(f"is near 10^{k0}, past 10^±{EXPONENTS}")
    for k in (k0, k0 - 1, k0 + 1, k0 - 2):
        t = ball * arb(10) ** (n - 1 - k)  # ~10^(n−1): its ends are short rationals
        if not t.rad() < 1:
            return None
        lo, hi, s = _scaled_ends(t)  # the ends lo/2^s and hi/2^s: integers, not fractions (a row takes thousands)
        low, top, half = 10 ** (n - 1) << s, 10**n << s, 1 << s >> 1 if s else 0
        if 10 * lo + half >= top and lo < low <= hi and 2 * hi < 2 * low + (1 << s):
            return Decimal(f"{10 ** (n - 1)}E{k - n + 1}")  # 0.99999… and 1.00001… both round to 1.00 (a row's max)
        if lo < low or hi >= top:
            continue
        q_lo, q_hi = (2 * lo + (1 << s)) >> (s + 1), (2 * hi + (1 << s)) >> (s + 1)  # ⌊end + 1/2⌋
        if q_lo != q_hi:
            return None
        if q_hi == 10**n:  # 9.995… rounds up into the next decade: 1.00·10^(k+1)
            return Decimal(f"{10 ** (n - 1)}E{k - n + 2}")
        return Decimal(f"{q_lo}E{k - n + 1}")  # no context: its exponent may be far past Decimal's default
    return None


def _bucket(ulps: Any) -> int | None:
    """The histogram bucket every point of a positive ball of ULPs lies in, or None."""
    from symattn.kernel.comparison import EDGES

    below = 0
    for k, edge in enumerate(_edges(tuple(EDGES))):
        if ulps <= edge:
            return k if below == k else None
        if ulps > edge:
            below = k + 1
    return len(EDGES) if below == len(EDGES) else None


def _edges(edges: tuple) -> list:
    """The edges as arb balls at the working precision, made once for it (a row's entries ask thousands of times)."""
    from flint import ctx

    key = (edges, ctx.prec)
    if key not in _EDGES:
        _EDGES.clear()
        _EDGES[key] = [_arb(edge) for edge in edges]
    return _EDGES[key]


_EDGES: dict = {}


def decide(
    x: Fraction, e: Any, fmt: str, shown_digits: int, error_from, near=None
) -> tuple[tuple, tuple, Decimal] | None:
    """((ULPs, relative, bucket), (the ball of e − y, y, e), exact value shown) of x against the exact value e, where
    e lies within 2^-NEAR ULP of a float y of the format (y = x in a saturated row) on a known side, or below
    the format's least normal; else None. ``error_from(y)``: the ball of e − y, summed as the module says.
    ``near``: a rational y to read from instead (a float sum of a saturated dV: its figures may be ties), where
    no power of 2 lies within 2^-NEAR ULP of it: the figures are monotone past it as past a float; where e lies
    within 2^-(NEAR + FINER) ULP of it, only that far is read (a 17-digit tie may lie nearer than 2^-NEAR)."""
    precision, emin = FORMATS[fmt]
    if not (e > 0 or e < 0):
        return None
    if abs(e) < _arb(Fraction(2) ** emin):  # subnormal: one ULP for all, e's own relative precision
        d = error_from(x)
        if not (d > 0 or d < 0):
            return None
        ulps = abs(d) / _arb(Fraction(2) ** (emin - precision + 1))
        signed = digits(abs(e), shown_digits)
        shown = None if signed is None else (signed if e > 0 else signed.copy_negate())  # no context: any exponent
        # x = 0: d = e, and the relative error is 1 exactly, which no ball of d/e decides
        relative = significant_exact(Fraction(1), SHOWN_DIGITS) if x == 0 else digits(abs(d) / abs(e), SHOWN_DIGITS)
        figures = digits(ulps, SHOWN_DIGITS), relative, _bucket(ulps)
        return None if shown is None or None in figures else (figures, (d, x, e), shown)
    y = _nearest(_fraction(e.mid()), fmt) if near is None else near
    dy = error_from(y)
    unit = ulp(y, fmt)
    if y == 0 or not (dy > 0 or dy < 0) or not abs(dy) < _arb(unit) / 2**NEAR:
        return None
    # no power of 2 strictly between y and e: the ULP is the one just past y on dy's side, and every
    # figure is monotone on (y, y + step] (x lies outside it), where its ties are far apart
    step = (1 if dy > 0 else -1) * unit / 2**NEAR
    if near is not None and abs(dy) < _arb(abs(step)) / 2**FINER:  # a tie at 17 digits may lie within 2^-NEAR ULP
        step /= 2**FINER  # still past e, and short: its fractions stay small
    if near is not None:
        if ulp(y - abs(step), fmt) != ulp(y + abs(step), fmt):  # a rational y: one ULP around it
            return None
    u = ulp(y + step, fmt)
    shown = _near(lambda t: t, y, step, shown_digits)
    if shown is None:  # a tie within the step: the ends of dy's own ball
        shown = _shown_within(y, dy, shown_digits)
    if x == y:
        ulps = abs(dy) / _arb(u)
        figures = digits(ulps, SHOWN_DIGITS), digits(abs(dy) / abs(e), SHOWN_DIGITS), _bucket(ulps)
    elif min(x, x - step) < y < max(x, x - step) or x == y + step:
        return None
    else:
        figures = (
            _near(lambda t: abs(x - t) / u, y, step, SHOWN_DIGITS),
            _near(lambda t: abs(x - t) / abs(t), y, step, SHOWN_DIGITS),
            _near_bucket(lambda t: abs(x - t) / u, y, step),
        )
    if shown is None or None in figures:
        return None
    return figures, (dy, y, e), shown


def decide_entry(errors: Floats, i: int, j: int, e: Any, error_from, digits: int, name, out: dict, near=None) -> None:
    """``decide`` for entry (i, j) of ``errors``' result: its (figures, shown) into ``out`` and its error's ball into
    ``errors.found`` where decided; a figure past what the reports rank raises, the entry named (``name``)."""
    try:
        decided = decide(errors.value(i, j), e, errors.format, digits, error_from, near)
    except EvaluationError as error:  # named, on one line
        named = f"the error of entry ({i + 1}, {j + 1})" if name is None else name(i, j)
        raise EvaluationError(f"{named} {error}") from None
    if decided is not None:
        figures, found, shown = decided
        errors.found[(i, j)] = found
        out[(i, j)] = (figures, shown)


def error_of(found: tuple, v: Fraction) -> Any:
    """The ball of e − v for any float v, from ``decide``'s (e − y, y, e): one rounding, after y − v exactly."""
    return found[0] + _arb(found[1] - v)


def _nearest(value: Fraction, fmt: str) -> Fraction:
    """A float of the format nearest ``value`` (or next to it, beside a power of 2)."""
    u = ulp(value, fmt)
    return round(value / u) * u


def _shown_within(y: Fraction, dy: Any, n: int) -> Decimal | None:
    """The n digits of e = y + dy from the ends of dy's own ball, where a tie of n digits lies within the step
    past y (e^(−32768) from y, and the tie 5·10^-21 from it, in a saturated row): both ends round alike."""
    lo, hi, s = _scaled_ends(dy)
    at, past = (significant_exact(y + Fraction(end, 1 << s), n) for end in (lo, hi))
    return at if at == past else None


def _near(g, y: Fraction, step: Fraction, n: int) -> Decimal | None:
    """What g of every point of (y, y + step] rounds to at n digits, or None: g is monotone there, and the
    digits' ties lie far apart (10^-n of g), so only g(y) itself may be one; then the side of step decides."""
    at, past = significant_exact(g(y), n), significant_exact(g(y + step), n)
    if at == past:
        return at
    scaled = abs(g(y)) * Fraction(10) ** (n - 1 - at.adjusted())
    return past if scaled - int(scaled) == Fraction(1, 2) else None


def _near_bucket(g, y: Fraction, step: Fraction) -> int | None:
    """The bucket of g over (y, y + step]: g(y)'s, or past an edge that g(y) is exactly."""
    from symattn.kernel.comparison import EDGES
    from symattn.kernel.comparison import _bucket as bucket

    at, past = bucket(g(y)), bucket(g(y + step))
    return past if at == past or g(y) in EDGES else None


__all__ = ["Floats", "decide", "decide_entry", "digits", "error_of"]
