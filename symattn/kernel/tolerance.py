"""The kernel author's verdict: pass or fail by the kernel libraries' own rules, decided on the exact values.

Two rules, as the libraries test their kernels:

- **FlashAttention's** (``--naive FILE``: the same formula run in the kernel's dtype): pass when
  max|out − exact| ≤ rtol · max|naive − exact| + atol (rtol 2 by default, FlashAttention's factor); the
  report gives the ratio max|out − exact| / max|naive − exact|.
- **torch.allclose's** (``--rtol`` or ``--atol`` alone): pass when |out − exact| ≤ atol + rtol · |exact|
  for every entry; the report gives the worst entry's |out − exact| / (atol + rtol · |exact|).

Each maximum is enclosed from the comparison's intervals (:mod:`enclosing`): numpy finds the few entries
that may hold it (with margins that cover its own roundings), exact rationals bound it, and only those
entries are narrowed until the figure's three digits and the verdict are the same at every point.
"""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np

from symattn.input.decimals import significant_exact
from symattn.input.errors import EvaluationError, ShapeError, SpecError
from symattn.input.floats import FLOAT64_LIMIT, FloatResult
from symattn.input.records import record
from symattn.kernel.deviation import _arb, error_of

SHOWN_DIGITS = 3
FLASH_RTOL = Fraction(2)  # FlashAttention's tests: max|out − ref| ≤ 2 · max|out_pt − ref| + atol
ALLCLOSE_RTOL, ALLCLOSE_ATOL = Fraction(1, 10**5), Fraction(1, 10**8)  # torch.allclose's defaults
WIDEN = 2.0**-45  # numpy's relative roundings in a candidate's figure (a few, each at most 2^-53)
INF = float("inf")
FLOOR = 4096  # bits: an error ball below 2^-FLOOR is kept as a ball, its rational ends [0, 2^-FLOOR]
ALL = (slice(None), slice(None))  # the whole result
_TOLERANCE = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,3})?")  # whole, ASCII digits only


@record
class Tolerance:
    rule: str  # "flash" or "allclose"
    rtol: Fraction
    atol: Fraction
    passed: bool
    worst: tuple[int, int] | None  # 0-based: the largest error (flash) or the largest share of the tolerance
    ratio: Decimal | None = None  # flash: max|out − exact| / max|naive − exact|; None where undefined
    share: Decimal | None = None  # allclose: the worst |out − exact| / (atol + rtol·|exact|); None: infinite
    naive: str | None = None  # the naive result's source
    not_finite: bool = False  # a NaN or infinity in either result: a fail, as in the libraries' tests
    not_finite_in: str | None = None  # the source of the result the first of them (at worst) is in
    # a result with batch and head axes: each ((batch, head), its own verdict by the same rule), in order
    heads: tuple[tuple[tuple[int, int], Tolerance], ...] = ()
    worst_places: int = 1  # entries whose error balls may each hold the worst figure (``worst`` is the first)


def parse_tolerance(text: str, option: str) -> Fraction:
    """A tolerance as the exact decimal typed (1e-3 is 1/1000), never through float(); one line otherwise."""
    if len(text) > 64 or _TOLERANCE.fullmatch(text) is None:
        raise SpecError(option, None, f"expected a number at least 0 such as 1e-3 or 0.01, got {text!r}")
    return checked_tolerance(Fraction(Decimal(text)), option)  # exact: a short decimal, an exponent of ≤ 3 digits


def parse_ulps(text: str) -> Decimal | None:
    """A count of ULPs as typed (``2``, ``0.5``, ``1e3``: the tolerances' grammar, as the report writes
    ``1.32e6``), exactly; None where it is not one."""
    if len(text) > 64 or _TOLERANCE.fullmatch(text) is None:
        return None
    value = Decimal(text)
    return value if value < FLOAT64_LIMIT else None


def checked_tolerance(value: Fraction, option: str) -> Fraction:
    """A tolerance at least 0 and within float64's range (the bounds compare it in floats): else one line."""
    if value < 0:
        raise SpecError(option, None, f"expected a number at least 0 such as 1e-3 or 0.01, got {value}")
    if value >= FLOAT64_LIMIT:  # float() of it would overflow
        raise SpecError(option, None, "beyond float64's range (at most about 1.8e308)")
    return value


class _Maximum:
    """max over the finite entries of g(x, exact), enclosed, its candidates narrowed level by level."""

    def __init__(self, result: FloatResult, enclosure, kind: str, rtol: Fraction, atol: Fraction, region=ALL):
        self.result, self.enclosure, self.kind, self.rtol, self.atol = result, enclosure, kind, rtol, atol
        x, finite = (a[region] for a in result.floats())
        g_lo, g_hi = self._float_figure(x, enclosure.lo[region], enclosure.hi[region])
        g_lo, g_hi = np.where(finite, g_lo, -1.0), np.where(finite, g_hi, -1.0)
        self.empty = not finite.any()
        top = g_lo.max() if not self.empty else 0.0
        first = (region[0].start or 0, region[1].start or 0)  # the region's place in the whole
        self.candidates = [(int(i) + first[0], int(j) + first[1]) for i, j in zip(*np.nonzero(finite & (g_hi >= top)))]
        self.bounds: tuple[Any, Any] = (Fraction(0), Fraction(0))
        self.worst: tuple[int, int] | None = None
        self.ball: Any = None  # the maximum's figure as an arb ball, where one entry's error ball holds it
        self.places = 1  # the places that may hold it: several where overlapping balls are all that is left

    def _float_figure(self, x, lo, hi):
        slack = np.abs(x) * 2.0**-52  # a result that is no float64 (JSON decimals): float() moved it this far
        inside = (lo <= x) & (x <= hi)
        near = np.maximum(np.where(inside, 0.0, np.minimum(np.abs(x - lo), np.abs(x - hi))) - slack, 0.0)
        near = near * (1 - WIDEN)
        far = (np.maximum(np.abs(x - lo), np.abs(x - hi)) + slack) * (1 + WIDEN)
        if self.kind == "abs":
            return near, far
        rtol, atol = float(self.rtol), float(self.atol)
        small = np.where(lo > 0, lo, np.where(hi < 0, -hi, 0.0))
        big = np.maximum(np.abs(lo), np.abs(hi))
        d_lo, d_hi = (atol + rtol * small) * (1 - WIDEN), (atol + rtol * big) * (1 + WIDEN)
        with np.errstate(divide="ignore", invalid="ignore"):
            q_lo = np.where(d_hi > 0, near / d_hi, np.where(near > 0, INF, 0.0)) * (1 - WIDEN)
            q_hi = np.where(far == 0, 0.0, np.where(d_lo > 0, far / d_lo, INF)) * (1 + WIDEN)
        return q_lo, q_hi

    def _exact_figure(self, x: Fraction, lo: Fraction, hi: Fraction) -> tuple[Any, Any]:
        near = Fraction(0) if lo <= x <= hi else min(abs(x - lo), abs(x - hi))
        far = max(abs(x - lo), abs(x - hi))
        if self.kind == "abs":
            return near, far
        small = lo if lo > 0 else (-hi if hi < 0 else Fraction(0))
        d_lo, d_hi = self.atol + self.rtol * small, self.atol + self.rtol * max(abs(lo), abs(hi))
        q_lo = near / d_hi if d_hi else (INF if near else Fraction(0))
        q_hi = Fraction(0) if not far else (far / d_lo if d_lo else INF)
        return q_lo, q_hi

    def narrow(self, level: int) -> tuple[Any, Any]:
        """The maximum's ends at ``level``; the candidates that may still hold it are kept."""
        if self.empty:
            return self.bounds
        ends = self.enclosure.at(self.candidates, level)
        figures = {}
        balls = {}  # the figures of the entries whose errors are arb balls (kernel/deviation.py)
        for i, j in self.candidates:
            v = self.result.value(i, j)
            assert v is not None  # candidates are finite entries
            found = self.enclosure.deviations.get((i, j))
            if found is not None:  # a ball of e − y for a float y near e: of e − v, for this result's v
                balls[(i, j)] = self._ball_figure(error_of(found, v), *ends[(i, j)])
                figures[(i, j)] = _ball_ends(balls[(i, j)])
            else:
                figures[(i, j)] = self._exact_figure(v, *ends[(i, j)])
        low = max(f[0] for f in figures.values())
        self.candidates = [p for p in self.candidates if figures[p][1] >= low]
        self.ball = None
        if balls and all(p in balls for p in self.candidates):  # each a ball: kept where it may reach the top
            first = self.candidates[0]
            top, high, worst = balls[first].lower(), balls[first].upper(), first
            for p in self.candidates[1:]:
                top, worst = (balls[p].lower(), p) if balls[p].lower() > top else (top, worst)
                high = balls[p].upper() if balls[p].upper() > high else high
            self.candidates = [p for p in self.candidates if not balls[p] < top]
            self.ball = top.union(high)  # the maximum lies between the largest lower end and the largest upper
        self.bounds = (low, max(figures[p][1] for p in self.candidates))
        # the largest lower end (of the balls, where each is one), the first of equal ones; the others kept may
        # hold the maximum too
        self.worst = (
            worst if self.ball is not None else max(self.candidates, key=lambda p: (figures[p][0], -p[0], -p[1]))
        )
        self.places = len(self.candidates)
        return self.bounds

    def _ball_figure(self, d: Any, lo: Fraction, hi: Fraction) -> Any:
        from flint import arb

        if self.kind == "abs":
            return abs(d)
        small = lo if lo > 0 else (-hi if hi < 0 else Fraction(0))
        big = max(abs(lo), abs(hi))
        scale = arb(_arb(self.atol + self.rtol * small)).union(_arb(self.atol + self.rtol * big))
        return abs(d) / scale if scale > 0 else arb("inf")

    def digits(self) -> Decimal | None:
        """The maximum's three digits: of its ball where one entry with a ball of its error holds it."""
        if self.ball is not None:
            from symattn.kernel.deviation import digits

            return digits(self.ball, SHOWN_DIGITS)
        return _digits(*self.bounds)


def _ratio(a: _Maximum, b: _Maximum) -> Decimal | None:
    """FlashAttention's ratio to three digits: of the balls where each maximum has one, else of the ends."""
    if a.ball is not None or b.ball is not None:  # a maximum far below 2^-FLOOR: its ball, the other's ends
        from symattn.kernel.deviation import _arb, digits

        def ball(m: _Maximum) -> Any:
            return m.ball if m.ball is not None else _arb(Fraction(m.bounds[0])).union(_arb(Fraction(m.bounds[1])))

        return digits(ball(a) / ball(b), SHOWN_DIGITS)
    (a_lo, a_hi), (b_lo, b_hi) = a.bounds, b.bounds
    return _digits(a_lo / b_hi, a_hi / b_lo)


def _ball_ends(ball: Any) -> tuple[Fraction, Fraction]:
    """A ball's ends as short rationals: exact down to 2^-FLOOR, [0, 2^-FLOOR] below it (its digits are the ball's)."""
    from symattn.kernel.deviation import _arb, _fraction

    if not ball.is_finite():
        return Fraction(0), INF  # type: ignore[return-value]
    if ball < _arb(Fraction(1, 2**FLOOR)):
        return Fraction(0), Fraction(1, 2**FLOOR)
    mid, rad = _fraction(ball.mid()), _fraction(ball.rad())
    return max(mid - rad, Fraction(0)), mid + rad


def _digits(lo, hi) -> Decimal | None:
    """The three digits every point of [lo, hi] rounds to, or None where they differ (or an end is infinite)."""
    if lo == INF or hi == INF:
        return None
    a, b = significant_exact(Fraction(lo), SHOWN_DIGITS), significant_exact(Fraction(hi), SHOWN_DIGITS)
    return a if a == b else None


def _first_not_finite(region: tuple[slice, slice], *results: FloatResult) -> tuple[tuple[int, int], str] | None:
    """The first NaN or infinity in the region, and the source of the result it is in."""
    for r in results:
        for place, _ in r.not_finite:
            if all((s.start or 0) <= k and (s.stop is None or k < s.stop) for s, k in zip(region, place)):
                return place, r.source
    return None


def decide(
    out: FloatResult,
    enclosure,
    naive: FloatResult | None = None,
    rtol: Fraction | None = None,
    atol: Fraction | None = None,
    places=None,
) -> Tolerance:
    """The verdict on ``out`` (and, with ``naive``, FlashAttention's ratio), every figure decided; ``out``
    and ``naive`` as compare lines them up. With ``places`` (places.Places) of a result with batch and head
    axes, each (batch, head) has its own verdict by the same rule too."""
    if naive is not None:
        shape, got = out.shape, naive.shape
        if shape != got:
            raise ShapeError(
                naive.source, "shape", f"the naive result is {naive.shape_text()} and the result is {out.shape_text()}"
            )
        rule = partial(_flash, out, naive, enclosure, FLASH_RTOL if rtol is None else rtol, atol or Fraction(0))
    else:
        rtol = ALLCLOSE_RTOL if rtol is None else rtol
        atol = ALLCLOSE_ATOL if atol is None else atol
        rule = partial(_allclose, out, enclosure, rtol, atol)
    whole = rule(ALL)
    if places is None or not places.has_heads:
        return whole
    return replace(whole, heads=tuple((bh, rule(region)) for bh, region in places.regions(out.shape)))


def _flash(out: FloatResult, naive: FloatResult, enclosure, rtol: Fraction, atol: Fraction, region=ALL) -> Tolerance:
    bad = _first_not_finite(region, out, naive)
    if bad is not None:
        return Tolerance("flash", rtol, atol, False, bad[0], naive=naive.source, not_finite=True, not_finite_in=bad[1])
    a = _Maximum(out, enclosure, "abs", rtol, atol, region)
    b = _Maximum(naive, enclosure, "abs", rtol, atol, region)
    if out.array is not None and naive.array is not None:  # then max|out − exact| = max|naive − exact| exactly
        same = bool(np.array_equal(out.array[region], naive.array[region], equal_nan=True))
    else:
        same = region == ALL and out.rows == naive.rows
    for level in range(enclosure.levels + 1):
        a_lo, a_hi = a.narrow(level)
        b_lo, b_hi = b.narrow(level)
        if same:
            ratio = None if b_hi == 0 else Decimal("1.00")  # exactly 1, to three digits
            ends = sorted(((rtol - 1) * b_lo + atol, (rtol - 1) * b_hi + atol))
        else:
            ratio = None if b_hi == 0 else (_ratio(a, b) if b_lo > 0 or b.ball is not None else None)
            ends = [rtol * b_lo + atol - a_hi, rtol * b_hi + atol - a_lo]
        ratio_done = b_hi == 0 or ratio is not None
        if ratio_done and (ends[0] >= 0 or ends[1] < 0):
            return Tolerance(
                "flash", rtol, atol, ends[0] >= 0, a.worst, ratio=ratio, naive=naive.source, worst_places=a.places
            )
    raise EvaluationError(f"{out.source}: FlashAttention's verdict is not decided at the highest precision")


def _allclose(out: FloatResult, enclosure, rtol: Fraction, atol: Fraction, region=ALL) -> Tolerance:
    bad = _first_not_finite(region, out)
    if bad is not None:
        return Tolerance("allclose", rtol, atol, False, bad[0], not_finite=True, not_finite_in=bad[1])
    m = _Maximum(out, enclosure, "share", rtol, atol, region)
    for level in range(enclosure.levels + 1):
        lo, hi = m.narrow(level)
        if lo == INF:  # an exact 0 missed with atol 0: infinitely far past the tolerance
            return Tolerance("allclose", rtol, atol, False, m.worst, share=None)
        share = m.digits()
        if share is not None and (hi <= 1 or lo > 1):
            return Tolerance("allclose", rtol, atol, hi <= 1, m.worst, share=share, worst_places=m.places)
    raise EvaluationError(f"{out.source}: the allclose verdict is not decided at the highest precision")


def options(rtol: str | None, atol: str | None) -> tuple[Fraction | None, Fraction | None]:
    """--rtol and --atol as typed (None where not given), each checked."""
    return (
        None if rtol is None else parse_tolerance(rtol, "--rtol"),
        None if atol is None else parse_tolerance(atol, "--atol"),
    )


def verdict(comparison, out: FloatResult, naive: FloatResult | None, rtol, atol) -> Tolerance | None:
    """The verdict compare's options ask for: FlashAttention's with a naive result, torch.allclose's with a
    tolerance alone, none otherwise. ``out`` and ``naive`` as read: they are lined up as compare lined
    ``out`` up, and with batch and head axes each (batch, head) has its verdict too."""
    if naive is None and rtol is None and atol is None:
        return None
    assert comparison.enclose is not None  # every comparison can enclose its exact values
    places = comparison.where
    if naive is not None and places.has_heads:
        given, got = out.array.shape, () if naive.array is None else naive.array.shape
        if given != got:
            shape = "no batch and head axes" if not got else f"shape {tuple(got)}"
            raise ShapeError(naive.source, "shape", f"the naive result has {shape} and the result {tuple(given)}")
    return decide(
        places.line_up(out), comparison.enclose(), None if naive is None else places.line_up(naive), rtol, atol, places
    )


def tolerance_data(t: Tolerance, places: Any) -> dict[str, Any]:
    """JSON-ready: the rule, its tolerances as typed, the verdict, the worst entry (named by ``places``,
    places.Places) and the figure."""
    from symattn.kernel.comparison import number_text

    data: dict[str, Any] = {
        "rule": t.rule,
        "rtol": fraction_text(t.rtol),
        "atol": fraction_text(t.atol),
        "pass": t.passed,
        "worst_at": None if t.worst is None else places.index(*t.worst),
        "not_finite": t.not_finite,
    }
    if t.worst_places > 1:  # overlapping error balls: worst_at is the first of them
        data["worst_places"] = t.worst_places
    if t.rule == "flash":
        data["naive"] = t.naive
        data["ratio"] = None if t.ratio is None else number_text(t.ratio)
    else:
        data["share"] = None if t.share is None else number_text(t.share)
    return data


def fraction_text(x: Fraction) -> str:
    """A tolerance as a short exact decimal (every typed decimal is one): 2, 0.001, 1e-8."""
    from symattn.kernel.comparison import number_text

    with localcontext() as ctx:
        ctx.prec = 2000  # exact: a typed decimal of at most 64 characters
        d = Decimal(x.numerator) / Decimal(x.denominator)
    return number_text(d.normalize()) if d else "0"


__all__ = [
    "Tolerance",
    "decide",
    "options",
    "checked_tolerance",
    "parse_tolerance",
    "parse_ulps",
    "tolerance_data",
    "verdict",
]
