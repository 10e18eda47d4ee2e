"""Each entry's error relative to the largest magnitude of its row: |x − exact| / max_k |exact_ik|, over
that head's own columns where several heads' outputs lie side by side (issue 28).

Beside the ULP and the relative error, for entries near zero after cancellation, where both explode
(12,400 ULP at a relative error of 1e-3) though the row is right to its own scale. Decided like every
figure: numpy settles the entries whose three digits are the same at every point of the interval (with
margins for its own roundings), exact rationals the rest; an entry still open is narrowed with the entries
that may hold its row's maximum (:mod:`enclosing`), level by level. With every entry decided, the float64
path sums the open ones again error-free first (:class:`Tighter`), so that few rows are left to narrow.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np

from symattn.input.decimals import significant_exact
from symattn.input.errors import EvaluationError
from symattn.input.floats import FloatResult
from symattn.kernel.deciding import BELOW, _digits
from symattn.kernel.deviation import error_of
from symattn.kernel.entry_table import Figures
from symattn.kernel.float64 import interval

WIDEN = 2.0**-45  # numpy's relative roundings in one figure (a few, each at most 2^-53)


def _magnitudes(lo, hi):
    """The least and the largest |e| over [lo, hi] (0 where it holds zero)."""
    small = np.maximum(lo, 0.0) + np.maximum(-hi, 0.0)  # lo > 0: lo; hi < 0: −hi; else 0 (one term is 0)
    return small, np.maximum(-lo, hi)  # lo ≤ hi


def _bounds(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, width: int):
    """Float bounds on each entry's figure, f_lo and f_hi (rigorous: numpy's roundings widened), the bounds
    on the largest magnitude of each entry's row, r_lo and r_hi, and each entry's largest magnitude."""
    small, big = _magnitudes(lo, hi)
    r_lo, r_hi = (_row_max(m, width) for m in (small, big))
    slack = np.abs(x) * 2.0**-52  # a result that is no float64 (JSON decimals): float() moved it this far
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a non-finite x: no figure is read
        below, above = x - lo, hi - x  # both ≥ 0 inside [lo, hi]
        near = np.maximum(-np.minimum(below, above) - slack, 0.0)
        far = np.maximum(below, above) + slack
        return near / r_hi * (1 - WIDEN) ** 2, far / r_lo * (1 + WIDEN) ** 2, r_lo, r_hi, big


def _figures(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, width: int) -> list[np.ndarray]:
    """_bounds and the three digits where they are decided (ok, q, k), a band of rows at a time, on threads."""
    from symattn.kernel.cores import in_bands

    def band(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple:
        f_lo, f_hi, *rest = _bounds(x, lo, hi, width)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return (f_lo, f_hi, *rest, *_digits(np.where(np.isfinite(f_lo), f_lo, 0.0), f_hi))

    return in_bands(band, (x, lo, hi), (np.float64,) * 5 + (bool, np.int64, np.int64))


def _may_be_largest(finite: np.ndarray, f_lo: np.ndarray, f_hi: np.ndarray) -> np.ndarray:
    top = np.max(np.where(finite & np.isfinite(f_lo), f_lo, 0.0), initial=0.0)
    return ~(f_hi < top * BELOW)


def may_be_largest(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, width: int) -> np.ndarray:
    """The finite entries that may hold the largest figure, on these ends (as row_relative finds them)."""
    from symattn.kernel.cores import bands, map_threads

    finite = np.isfinite(x)
    highs = np.empty(x.shape)

    def band(rows: slice) -> float:
        f_lo, highs[rows], *_ = _bounds(x[rows], lo[rows], hi[rows], width)
        return float(np.max(np.where(finite[rows] & np.isfinite(f_lo), f_lo, 0.0), initial=0.0))

    top = max(map_threads(band, bands(x.shape)), default=0.0)
    return finite & ~(highs < top * BELOW)


class Tighter:
    """With every entry decided: ends for the entries whose row-relative figure alone the float64 ends leave
    open (their ULP and relative figures decided), from their sums again, error-free (compensated.outputs,
    about ten times tighter), so that few are left to two floats and arb. Kept apart from lo and hi: the
    digits of the exact values shown and every other figure stay those the ends before give."""

    def __init__(self, result: FloatResult, lo: np.ndarray, hi: np.ndarray, decided: np.ndarray, places=None):
        x, finite = result.floats()
        width = (places.segment if places is not None else None) or lo.shape[1]
        self.open = finite & decided & ~_figures(x, lo, hi, width)[5]
        self.found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def pairs(self, pairs: list[tuple[int, int]], start: int, stop: int):
        """The open entries of one head's columns (start to stop) as (row, column of the head): those in the
        rows of ``pairs``, and the others."""
        rows = {i for i, _ in pairs}
        at = np.nonzero(self.open[:, start:stop])
        also: list[tuple[int, int]] = []
        apart: list[tuple[int, int]] = []
        for i, j in zip(at[0].tolist(), at[1].tolist()):
            (also if i in rows else apart).append((i, j))
        return also, apart

    def meet(self, pairs: list[tuple[int, int]], start: int, value: np.ndarray, error: np.ndarray) -> None:
        """The ends value ± error of these entries of the head whose columns start at ``start``."""
        a, b = interval(value, error)
        self.found.append((np.array([i for i, _ in pairs]), np.array([j + start for _, j in pairs]), a, b))

    def ends(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """lo and hi met with the ends found: both enclose each exact value, so does their meet."""
        lo, hi = lo.copy(), hi.copy()
        for r, c, a, b in self.found:
            lo[r, c], hi[r, c] = np.fmax(lo[r, c], a), np.fmin(hi[r, c], b)  # fmax: a NaN end is none
        return lo, hi


def row_relative(
    result: FloatResult, enclosure, zero: set[tuple[int, int]], shown=None, places=None, tighter=None
) -> Figures:
    """Each finite entry's |x − exact| / (its row's largest |exact|) to three significant digits (None where
    the entry is not finite or its row is exactly 0); ``zero``: the entries known to have no error at all.
    With ``shown`` (flat indices), only those entries and the ones that may hold the largest figure are
    decided where numpy leaves them open; the others are left out (no figure). ``places`` (places.Places)
    names an entry, and its ``segment``: a row that holds several heads side by side, this many columns
    each, where each head's row is its own scale. ``tighter``: (lo, hi) within the enclosure's ends
    (Tighter.ends), met with its ends at every level."""
    x, finite = result.floats()
    lo, hi = (enclosure.lo, enclosure.hi) if tighter is None else tighter
    moved = None if tighter is None else (lo != enclosure.lo) | (hi != enclosure.hi)
    width = (places.segment if places is not None else None) or lo.shape[1]
    f_lo, f_hi, r_lo, r_hi, big, ok, q, k = _figures(x, lo, hi, width)
    ok &= finite
    others: dict[tuple[int, int], Decimal | None] = {}
    out = Figures(ok, q, k, others)
    open_ = finite & ~ok
    if shown is not None:
        wanted = _may_be_largest(finite, f_lo, f_hi)
        wanted.flat[shown] = True
        open_ &= wanted
    pending = {(int(i), int(j)) for i, j in zip(*np.nonzero(open_))}
    for i, j in pending & zero:
        others[(i, j)] = Decimal(0)
    pending -= zero
    balls = enclosure.deviations  # {entry: (e − y, y, e)}, arb balls and a float y (kernel/deviation.py)
    largest: dict[tuple[int, int], tuple] = {}  # each row's, once
    for i, j in sorted(pending & balls.keys()):  # the row's largest |exact| in floats, or of its entries' balls
        s = j - j % width
        row = [(i, c) for c in range(s, s + width)]
        v = result.value(i, j)
        assert v is not None  # only finite entries are pending
        d = error_of(balls[(i, j)], v)
        figure = _deviation_figure(d, float(r_lo[i, j]), float(r_hi[i, j]))
        if figure is None and all(p in balls for p in row):
            if (i, s) not in largest:
                largest[(i, s)] = _largest([abs(balls[p][2]) for p in row])
            figure = _deviation_figure(d, *largest[(i, s)])
        if figure is not None:
            others[(i, j)] = figure
            pending.discard((i, j))
    if not pending:
        return out

    def row_of(p: tuple[int, int]) -> tuple[int, int]:  # (row, first column of its head's segment)
        return p[0], p[1] - p[1] % width

    # the entries that may hold each open row's largest magnitude: their largest |e| reaches the least max
    open_rows = sorted({row_of(p) for p in pending})
    holders = {
        (i, s): [(i, s + int(j)) for j in np.nonzero(big[i, s : s + width] >= r_lo[i, s])[0]] for i, s in open_rows
    }
    for level in range(enclosure.levels + 1):
        points = sorted(pending | {p for r in open_rows for p in holders[r]})
        ends = enclosure.at(points, level)
        for p in [] if moved is None else [p for p in points if moved[p]]:
            a, b = ends[p]
            ends[p] = (max(a, Fraction(float(lo[p]))), min(b, Fraction(float(hi[p]))))
        by_rows: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for p in sorted(pending):  # each open row's entries: one pass, not one over all of them a row
            by_rows.setdefault(row_of(p), []).append(p)
        for r in open_rows:
            mags = [_exact_magnitudes(*ends[p]) for p in holders[r]]
            low, high = max(m[0] for m in mags), max(m[1] for m in mags)
            for p in by_rows[r]:
                v = result.value(*p)
                assert v is not None  # only finite entries are pending
                a, b = ends[p]
                if high == 0:  # the row is exactly 0: no scale to measure against
                    others[p] = None
                    pending.discard(p)
                    continue
                near_e = Fraction(0) if a <= v <= b else min(abs(v - a), abs(v - b))
                far_e = max(abs(v - a), abs(v - b))
                if not low:
                    continue
                shown = significant_exact(near_e / high, 3)
                if shown == significant_exact(far_e / low, 3):
                    others[p] = shown
                    pending.discard(p)
        open_rows = sorted({row_of(p) for p in pending})
        if not pending:
            return out
    i, j = min(pending)
    name = f"entry ({i + 1}, {j + 1})" if places is None else places.text(i, j)
    raise EvaluationError(
        f"{result.source}: the error of {name} relative to its row is not decided at the highest precision"
    )


def _deviation_figure(d, low, high) -> Decimal | None:
    """|d| / the row's largest |exact|, in [low, high] (floats or arb points), to three digits, or None."""
    from flint import arb

    from symattn.kernel.deviation import digits

    if not (arb(low) > 0 and arb(low) <= arb(high) and arb(high).is_finite()):
        return None
    return digits(abs(d) / arb(low).union(arb(high)), 3)


def _largest(sizes: list) -> tuple:
    """Ends of the largest of some arb balls: the largest lower end, the largest upper end."""
    low, high = sizes[0].lower(), sizes[0].upper()
    for b in sizes[1:]:
        low, high = (b.lower() if b.lower() > low else low), (b.upper() if b.upper() > high else high)
    return low, high


def _row_max(m: np.ndarray, width: int) -> np.ndarray:
    """Each entry's row maximum over its segment of ``width`` columns, the shape of m."""
    rows, cols = m.shape
    top = m.reshape(rows, cols // width, width).max(axis=2)
    return np.repeat(top, width, axis=1)


def _exact_magnitudes(lo: Fraction, hi: Fraction) -> tuple[Fraction, Fraction]:
    small = lo if lo > 0 else (-hi if hi < 0 else Fraction(0))
    return small, max(abs(lo), abs(hi))


__all__ = ["Tighter", "may_be_largest", "row_relative"]
