"""The exact values of a comparison as intervals that can be narrowed on demand, entry by entry.

``compare`` decides each entry's error once; the kernel author's verdict (:mod:`tolerance`) needs more:
the largest error over a whole tensor, for a second result (``--naive``) too, decided against a tolerance.
An :class:`Enclosure` gives float64 ends around every exact value at once (``base``) and, for the few
entries that decide a maximum, exact rational ends at rising precision (``at``): level 0 is the base,
each further level doubles the precision (the model's digits on the exact path, arb's bits on the float64
path).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from symattn.input import limits
from symattn.kernel import compensated, doubled, float64

Point = tuple[int, int]
Ends = tuple[Fraction, Fraction]


class Enclosure:
    """float64 ends ``lo`` ≤ exact ≤ ``hi`` of every entry, and exact ends of some entries at rising levels."""

    levels: int  # the highest level ``at`` takes
    deviations: dict[Point, Any] = {}  # arb balls of some entries' errors, exact − x (kernel/deviation.py)

    def __init__(self, lo: np.ndarray, hi: np.ndarray):
        self.lo, self.hi = lo, hi
        self.tie_orders: dict[tuple, list[list[Point]]] = {}  # kernel/ties.py's orders, found once per group

    def at(self, points: list[Point], level: int) -> dict[Point, Ends]:
        if level == 0:
            return {(i, j): (_rational(self.lo[i, j]), _rational(self.hi[i, j])) for i, j in points}
        return self._narrowed(points, level)

    def _narrowed(self, points: list[Point], level: int) -> dict[Point, Ends]:
        raise NotImplementedError


def _rational(end: float) -> Fraction:
    # ±∞ (a float64 bound that overflowed) as ±2^1024: every exact value compared lies within it
    return Fraction(end) if np.isfinite(end) else Fraction(2**1024 if end > 0 else -(2**1024))


def _outward(values: list[list[Fraction]], down: bool) -> np.ndarray:
    # float() of a Fraction is correctly rounded; one float further out makes it an enclosing end
    a = np.array([[float(v) for v in row] for row in values], dtype=np.float64)
    return np.nextafter(a, -np.inf if down else np.inf)


class ExactEnclosure(Enclosure):
    """The exact path: the model's significant digits (the exact value within half a unit of the last),
    40 at level 0, doubled at each level up to limits.DIGITS; exact rationals where the model knows them."""

    def __init__(self, model: Any, quantity: str, rationals, start: int = 40):
        self.model, self.quantity, self.rationals = model, quantity, rationals
        self.START = start  # the digits compare reached: level 0 decides what it decided
        self.levels = 0
        while self.START * 2 ** (self.levels + 1) <= limits.DIGITS:
            self.levels += 1
        self._cache: dict[int, list[list[Ends]]] = {}
        ends = self._ends(0)
        lows, highs = [[e[0] for e in row] for row in ends], [[e[1] for e in row] for row in ends]
        super().__init__(_outward(lows, True), _outward(highs, False))

    def _ends(self, level: int) -> list[list[Ends]]:
        if level not in self._cache:
            shown = self.model.significant(self.quantity, self.START * 2**level)
            self._cache[level] = [
                [(r, r) if r is not None else _half_unit_ends(v) for r, v in zip(rationals_row, shown_row)]
                for rationals_row, shown_row in zip(self.rationals, shown)
            ]
        return self._cache[level]

    def at(self, points: list[Point], level: int) -> dict[Point, Ends]:
        ends = self._ends(level)  # exact at every level, so level 0 is not the rounded-out floats
        return {(i, j): ends[i][j] for i, j in points}


def _half_unit_ends(value: Decimal) -> Ends:
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # a finite value (an entry without a rational is never −∞)
    middle, half = Fraction(value), Fraction(1, 2) * Fraction(10) ** exponent
    return middle - half, middle + half


class FloatEnclosure(Enclosure):
    """The float64 path: its bounds at level 0, arb balls of the entries' rows above (96 bits, doubled)."""

    def __init__(
        self,
        heads: list[float64.Head],
        quantity: str,
        lo,
        hi,
        offsets: list[int],
        narrowed=None,
        balls=None,
        summed: set[Point] | None = None,
        deviations: dict[Point, Any] | None = None,
        held: np.ndarray | None = None,
    ):
        super().__init__(lo, hi)
        self.deviations = deviations or {}
        self.balls = balls  # refine.Balls: the rows arb computed already
        self.summed = summed or set()  # entries whose sums compare redid error-free: lo and hi hold that bound
        self.held = held  # the same, as a flag per entry: ends met with the error-free product's (heads.py)
        self.heads, self.quantity, self.offsets = heads, quantity, offsets
        # {entry: exact ends}: what compare's refinement already reached, within [lo, hi]
        self.narrowed: dict[Point, Ends] = narrowed or {}
        for (i, j), (a, b) in self.narrowed.items():
            self.lo[i, j] = max(self.lo[i, j], np.nextafter(float(a), -np.inf))
            self.hi[i, j] = min(self.hi[i, j], np.nextafter(float(b), np.inf))
        self.first_arb = 2 if quantity == "output" else 1  # outputs: level 1 sums again error-free first
        self.levels = self.first_arb
        while 96 * 2 ** (self.levels - self.first_arb + 1) <= limits.DIGITS * 3.33:
            self.levels += 1

    def _place(self, i: int, j: int) -> tuple[int, int, int]:
        """(head, query row, column of that head) of an entry of the whole result."""
        if self.quantity in ("lse", "lse2"):
            return i, j, 0  # a row per head, a column per query
        h = next(h for h in range(len(self.heads)) if self.offsets[h] <= j < self.offsets[h + 1])
        return h, i, j - self.offsets[h]

    def at(self, points: list[Point], level: int) -> dict[Point, Ends]:
        out = super().at(points, level)
        for p in points:
            if p in self.narrowed:
                (a, b), (c, d) = out[p], self.narrowed[p]
                out[p] = (max(a, c), min(b, d))  # both enclose the exact value: so does their meet
        return out

    def _two_floats(self, wanted: dict[int, dict[int, list[int]]], back: dict) -> dict[Point, Ends]:
        """The wanted outputs of the heads doubled.quotients takes, met with lo and hi."""
        out: dict[Point, Ends] = {}
        for h, rows in wanted.items():
            at = [(row, col) for row, cols in rows.items() for col in cols]
            if not at or not doubled.takes(self.heads[h]):
                continue
            q1, q2, bound = doubled.quotients(self.heads[h], at)
            for (row, col), a, b, e in zip(at, q1.tolist(), q2.tolist(), bound.tolist()):
                i, j = back[(h, row, col)]
                lo, hi = _rational(self.lo[i, j]), _rational(self.hi[i, j])
                if math.isfinite(e):
                    middle, radius = Fraction(a) + Fraction(b), Fraction(e)
                    lo, hi = max(lo, middle - radius), min(hi, middle + radius)
                out[(i, j)] = (lo, hi)
        return out

    def _narrowed(self, points: list[Point], level: int) -> dict[Point, Ends]:
        from symattn.kernel.refine import NotFinite, _ends_by_rows

        wanted: dict[int, dict[int, list[int]]] = {}
        back: dict[tuple[int, int, int], Point] = {}
        for i, j in points:
            h, row, col = self._place(i, j)
            wanted.setdefault(h, {}).setdefault(row, []).append(col)
            back[(h, row, col)] = (i, j)
        out: dict[Point, Ends] = {}
        if level < self.first_arb:  # the outputs' sums again, error-free: two floats, or Sum2 (~10x tighter)
            out.update(self._two_floats(wanted, back))
            for i, j in [p for p in points if p in out]:
                h, row, col = self._place(i, j)
                wanted[h][row].remove(col)
            for i, j in points:
                if (i, j) in out:
                    continue
                if (i, j) in self.summed or (self.held is not None and self.held[i, j]):  # level 1 is their bound
                    h, row, col = self._place(i, j)
                    wanted[h][row].remove(col)
                    out[(i, j)] = (_rational(self.lo[i, j]), _rational(self.hi[i, j]))
            for h, rows in wanted.items():
                at = [(row, col) for row, cols in rows.items() for col in cols]
                if not at:
                    continue
                value, error = compensated.outputs(self.heads[h], at)
                lo, hi = float64.interval(value, error)
                for (row, col), a, b in zip(at, lo.tolist(), hi.tolist()):
                    i, j = back[(h, row, col)]
                    out[(i, j)] = (
                        max(_rational(a), _rational(self.lo[i, j])),
                        min(_rational(b), _rational(self.hi[i, j])),
                    )
            return out
        bits = 96 * 2 ** (level - self.first_arb)
        for h, rows in wanted.items():
            try:
                for row, values in _ends_by_rows(self.heads[h], self.quantity, rows, bits, self.balls):
                    for col in rows[row]:
                        i, j = back[(h, row, col)]
                        a, b = values[col]
                        # both enclose the exact value: so does their meet
                        out[(i, j)] = (max(a, _rational(self.lo[i, j])), min(b, _rational(self.hi[i, j])))
            except NotFinite:  # balls of scores far past 2^bits: this level narrows none of the head's
                for row, cols in rows.items():
                    for col in cols:
                        i, j = back[(h, row, col)]
                        out[(i, j)] = (_rational(self.lo[i, j]), _rational(self.hi[i, j]))
        return out


__all__ = ["Enclosure", "ExactEnclosure", "FloatEnclosure"]
