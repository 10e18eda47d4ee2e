"""The true order of entries whose figures are the same to the three digits shown (issue 30).

A report names the largest error and ranks the ten largest by figures of three digits; two errors that
round alike may still differ (|err| 9.3114e-4 against 9.3047e-4, both 6.64e41 ULP). Their exact values,
narrowed level by level (``enclosing.Enclosure.at``, and the balls of ``deviation``), order them in exact
rationals. Entries whose figures are equal exactly (a result 0 is off by exactly 1 relative), whose
balls are the same to the bit at a level of rising precision (two heads alike), or that still overlap
when a doubled precision gains nothing more are one group: the first in row order stands for it, and a
report says it is one of the group's places.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from symattn.input.errors import EvaluationError
from symattn.input.floats import ulp

Interval = tuple[Fraction, Fraction | None]  # None: no finite upper end


def order(c: Any, figure: str, entries: list[Any]) -> list[list[Any]]:
    """``entries`` (Entry objects of comparison ``c`` whose ``figure``, "ulps", "relative" or "row_relative",
    shows the same digits) in groups, largest first: each group's entries may tie, in row order."""
    if len(entries) < 2:
        return [entries] if entries else []
    enclosure = c.enclose()
    cache = enclosure.tie_orders
    key = (figure, tuple((e.row, e.col) for e in entries))
    if key not in cache:
        cache[key] = _order(c, enclosure, figure, entries)
    found = {(e.row, e.col): e for e in entries}
    return [[found[p] for p in group] for group in cache[key]]


def _order(c: Any, enclosure: Any, figure: str, entries: list[Any]) -> list[list[tuple[int, int]]]:
    before: dict[tuple[int, int], Interval] = {}
    groups: list[list[tuple[int, int]]] = []
    # the levels below the first of rising precision (the float64 path's sums again, its two floats) may
    # gain nothing for an entry whose ends are theirs already: arb's levels are tried after them all the same
    rising = getattr(enclosure, "first_arb", 0)
    for level in range(enclosure.levels + 1):
        now = _figures(c, enclosure, figure, entries, level)
        groups = _groups(now)
        open_ = [g for g in groups if _loose(g, now)]
        if not open_:
            break  # decided, or equal exactly
        if level >= rising and all(len({now[p] for p in g}) == 1 for g in open_):
            break  # each group's balls the same to the bit (two heads alike): its errors are one
        if level > rising and all(now[p] == before.get(p) for g in open_ for p in g):
            break  # a doubled precision gained nothing
        before = now
    return groups


def _loose(group: list[tuple[int, int]], now: dict[tuple[int, int], Interval]) -> bool:
    # a group whose figures are each exact (and so equal) is decided: a tie
    return len(group) > 1 and any(now[p][0] != now[p][1] for p in group)


def _groups(figures: dict[tuple[int, int], Interval]) -> list[list[tuple[int, int]]]:
    """The points largest first; a point joins the group before it where its interval reaches the lowest
    lower end there (the overlapping intervals of a line, in order), each group in row order."""
    ranked = sorted(figures, key=lambda p: (-figures[p][0], p))
    groups: list[list[tuple[int, int]]] = []
    for p in ranked:
        hi = figures[p][1]
        if groups and (hi is None or hi >= figures[groups[-1][-1]][0]):
            groups[-1].append(p)
        else:
            groups.append([p])
    return [sorted(g) for g in groups]


def _figures(c: Any, enclosure: Any, figure: str, entries: list[Any], level: int) -> dict[tuple[int, int], Interval]:
    points = [(e.row, e.col) for e in entries]
    rows = _rows(c, points) if figure == "row_relative" else {}
    wanted = sorted(set(points) | {q for row in rows.values() for q in row})
    ends = _ends(enclosure, wanted, level, c)
    # entries of one row share its largest magnitude: their errors alone order their row-relative figures
    one_row = figure == "row_relative" and len({tuple(row) for row in rows.values()}) == 1
    out = {}
    for e in entries:
        p = (e.row, e.col)
        lo, hi = ends[p]
        v = e.value
        near = Fraction(0) if lo <= v <= hi else min(abs(v - lo), abs(v - hi))
        far = max(abs(v - lo), abs(v - hi))
        small, big = _magnitudes(lo, hi)
        if figure == "ulps":
            out[p] = (near / ulp(big, c.format), far / ulp(small, c.format))
        elif figure == "relative":
            out[p] = (Fraction(1), Fraction(1)) if v == 0 else (near / big, far / small if small else None)
        elif one_row:
            out[p] = (near, far)
        else:
            mags = {q: _magnitudes(*ends[q]) for q in rows[p]}
            top_lo, top_hi = max(m[0] for m in mags.values()), max(m[1] for m in mags.values())
            if v == 0 and small >= max((m[1] for q, m in mags.items() if q != p), default=Fraction(0)):
                out[p] = (Fraction(1), Fraction(1))  # a result 0 where the row's largest magnitude is its own
            else:
                out[p] = (near / top_hi, far / top_lo if top_lo else None)
    return out


def _magnitudes(lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction]:
    """The least and the largest |x| over [lo, hi]."""
    small = Fraction(0) if lo <= 0 <= hi else min(abs(lo), abs(hi))
    return small, max(abs(lo), abs(hi))


def _ends(enclosure: Any, points: list[tuple[int, int]], level: int, c: Any) -> dict[tuple[int, int], Any]:
    """Each point's exact ends at ``level``, narrowed by the ball of its error where one was found."""
    from symattn.kernel.deviation import _fraction

    ends = dict(enclosure.at(points, level))
    for p in points:
        found = enclosure.deviations.get(p)
        if found is None:
            continue
        d, y, e = found  # the balls of e − y and of e (its own relative precision, where it is tiny), and y
        lo, hi = ends[p]
        for at, ball in ((y, d), (0, e)):
            try:
                mid, rad = _fraction(ball.mid()), _fraction(ball.rad())
            except EvaluationError:  # a ball past 2^±FAR_BITS (deviation.py): the ends stand as they are
                continue
            lo, hi = max(lo, at + mid - rad), min(hi, at + mid + rad)
        ends[p] = (lo, hi)
    return ends


def _rows(c: Any, points: list[tuple[int, int]]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Each point's row as its row-relative figure measures it: the head's own columns, or the whole row."""
    shape = getattr(c.entries, "shape", None)
    cols = shape[1] if shape else max(e.col for e in c.entries) + 1
    width = c.where.segment or cols
    return {(i, j): [(i, k) for k in range(j // width * width, min(cols, (j // width + 1) * width))] for i, j in points}


__all__ = ["order"]
