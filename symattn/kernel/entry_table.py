"""The float64 path's entries as arrays: an Entry is made only when one is read.

A kernel-sized comparison has half a million entries, and the text report shows ten. Here each figure
is an array of three-digit q·10^k (``Figures``) with the few entries decided in exact rationals beside
it, and the summary (the histogram, the largest errors, the worst entries) is found with numpy: the same
entries, in the same order, that :class:`~symattn.kernel.comparison.Entries` finds among Entry objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from symattn.input.records import record
from symattn.kernel.comparison import EDGES, ZERO, Entries, Entry, rank
from symattn.kernel.deciding import figure, shown

_OFFSET = 10**13  # added to a figure's exponent (|exponent| < 10^13, deviation.EXPONENTS): every key is positive
_SCALE = 10**17  # a bucket weighs more than any figure's key: (bucket, ulps) in one int64


@record
class Figures:
    """Three-digit figures of a matrix: q·10^k (q of three digits) where ``ok``, else ``others`` (None
    where an entry has no figure: not finite, or no scale to measure against)."""

    ok: np.ndarray
    q: np.ndarray
    k: np.ndarray
    others: dict[tuple[int, int], Decimal | None]

    def at(self, i: int, j: int) -> Decimal | None:
        if self.ok[i, j]:
            return figure(int(self.q[i, j]), int(self.k[i, j]))
        return self.others.get((i, j))

    def keys(self, finite: np.ndarray | None = None) -> np.ndarray:
        """An integer per entry in the order of the figures' values: 0 for an exact 0, −1 for none (and,
        where ``finite`` is given, for the entries it marks False)."""
        keys = self.k + (2 + _OFFSET)
        keys *= 1000
        keys += self.q
        keys = np.where(self.ok, keys, -1).astype(np.int64, copy=False)
        for (i, j), d in self.others.items():
            keys[i, j] = _key(d)
        if finite is not None:
            keys[~finite] = -1
        return keys


def _key(d: Decimal | None) -> int:
    if d is None:
        return -1
    if d == 0:
        return 0
    top = d.adjusted()
    q = int("".join(map(str, d.as_tuple().digits)).ljust(3, "0")[:3])  # its three digits, with no context's limits
    return (top + _OFFSET) * 1000 + q


@record
class ExactShown:
    """Each entry's exact value as shown: q·10^k where numpy decided it (``ok``), else from its float64
    ends (``deciding.shown``) or, where arb refined it, ``others``."""

    ok: np.ndarray
    q: np.ndarray
    k: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    digits: int
    others: dict[tuple[int, int], Decimal]
    # lean.Tight.row where a row's ends may be lean's: float64's ends first, the digits shown before
    tighten: Callable[[int, int], None] | None = None

    def at(self, i: int, j: int) -> Decimal:
        if (i, j) in self.others:
            return self.others[(i, j)]
        if self.ok[i, j]:
            return figure(int(self.q[i, j]), int(self.k[i, j]))
        return self.of_ends(i, j)

    def of_ends(self, i: int, j: int) -> Decimal:
        if self.tighten is not None:
            self.tighten(i, j)
        return shown(float(self.lo[i, j]), float(self.hi[i, j]), self.digits)


class EntryTable(Entries):
    """The entries of a comparison, row by row, as arrays; ``value(i, j)``: the result's entry exactly."""

    def __init__(
        self,
        value: Callable[[int, int], Fraction | None],
        finite: np.ndarray,
        exact: ExactShown,
        ulps: Figures,
        relative: Figures,
        bucket: np.ndarray,
        row_relative: Figures,
        known: np.ndarray | None = None,
        worst: int | None = None,
        floats: np.ndarray | None = None,
        full: Callable[[], EntryTable] | None = None,
        keys: dict[str, np.ndarray] | None = None,
    ):
        self.value, self.finite, self.exact = value, finite, exact
        self.floats = floats  # where given: each finite entry's value is that float, exactly (JSON writes it)
        self.ulps, self.relative, self.bucket, self.row_relative = ulps, relative, bucket, row_relative
        # kernel.compare_head's worst: the entries decided (known) are those a report of the worst shows
        self.known, self.worst_decided = known, worst
        self.full = full  # where given: reading an entry not decided reads the table of every entry (complete)
        self.shape = finite.shape
        self._keys: dict[str, np.ndarray] = dict(keys or {})  # a figure's keys (Figures.keys), made once

    def __len__(self) -> int:
        return self.shape[0] * self.shape[1]

    def complete(self) -> EntryTable:
        """The table of every entry decided: this one, or the one ``full`` makes (where given)."""
        return self if self.known is None or self.full is None else self.full()

    def entry(self, i: int, j: int) -> Entry:
        if self.known is not None and not self.known[i, j]:
            if self.full is not None:
                return self.full().entry(i, j)
            raise LookupError(f"entry ({i + 1}, {j + 1}) was not decided: compare(..., worst=None) decides all")
        if not self.finite[i, j]:  # not finite: its exact value still shown
            return Entry(i, j, None, self.exact.of_ends(i, j), None, None, len(EDGES))
        return Entry(
            i,
            j,
            self.value(i, j),
            self.exact.at(i, j),
            self.ulps.at(i, j),
            self.relative.at(i, j),
            int(self.bucket[i, j]),
            self.row_relative.at(i, j),
        )

    def __getitem__(self, n):
        if isinstance(n, slice):
            return [self[k] for k in range(*n.indices(len(self)))]
        i, j = divmod(range(len(self))[n], self.shape[1])
        return self.entry(i, j)

    def __iter__(self) -> Iterator[Entry]:
        for i in range(self.shape[0]):
            for j in range(self.shape[1]):
                yield self.entry(i, j)

    def _key(self, name: str) -> np.ndarray:
        if name not in self._keys:
            self._keys[name] = getattr(self, name).keys(self.finite)
        return self._keys[name]

    def _first_max(self, keys: np.ndarray) -> Entry | None:
        # max() keeps the first of equal keys: argmax does too, row by row
        n = int(np.argmax(keys))
        return None if keys.flat[n] < 0 else self[n]

    def histogram(self) -> tuple[tuple[int, int], ...]:
        counts = np.bincount(self.bucket[self.finite], minlength=len(EDGES) + 1)
        return tuple((int(b), int(n)) for b, n in enumerate(counts.tolist()) if n)

    def worst(self) -> Entry | None:
        ulps = self._key("ulps")
        return self._first_max(np.where(ulps >= 0, self.bucket * _SCALE + ulps, -1))

    def largest(self, relative: str) -> Entry | None:
        return self._first_max(self._key(relative))

    def correctly_rounded(self) -> int:
        return int(np.count_nonzero(self.finite & (self.bucket <= 1)))

    def tied(self, figure: str, region: tuple[slice, slice] | None = None) -> list[Entry]:
        rows, cols = region or (slice(0, self.shape[0]), slice(0, self.shape[1]))
        block = self._key(figure)[rows, cols]  # the region first: a head's summary reads its own block only
        if figure == "ulps":
            block = np.where(block >= 0, self.bucket[rows, cols] * _SCALE + block, -1)
        if block.size == 0 or block.max() < 0:
            return []
        return [self.entry(rows.start + int(i), cols.start + int(j)) for i, j in zip(*np.nonzero(block == block.max()))]

    def over(self, bound: Decimal) -> int:
        # only an entry whose bucket reaches past the bound may be over it: those are read, the rest counted out
        tops = np.array([float(e) for e in EDGES] + [np.inf, 0.0])  # each bucket's upper edge; ZERO: no ULP
        reach = self.finite & (tops[self.bucket] >= float(bound) * (1 - 2.0**-40))
        if self.known is not None and self.full is not None and not self.known[reach].all():
            return self.full().over(bound)
        figures = (self.ulps.at(*divmod(int(n), self.shape[1])) for n in np.flatnonzero(reach))
        return sum(1 for u in figures if u is not None and u > bound)

    def ranked(self, count: int) -> list[Entry]:
        if self.worst_decided is not None and count > self.worst_decided:
            if self.full is not None:
                return self.full().ranked(count)
            raise LookupError(f"only the {self.worst_decided} largest errors were decided, not {count}")
        return [self[int(n)] for n in ranked_at(self.finite, self.bucket, self._key("ulps"), count)]

    def not_finite(self) -> list[Entry]:
        return [self[int(n)] for n in np.flatnonzero(~self.finite)]

    def zeros_missed(self) -> list[Entry]:
        return [self[int(n)] for n in np.flatnonzero(self.finite & (self.bucket == ZERO))]

    def head_summaries(self, places) -> list[dict[str, Any]]:
        # each head's block of the arrays: no Entry is made but its two largest errors
        ulps = self._key("ulps")
        worst_keys = np.where(ulps >= 0, self.bucket * _SCALE + ulps, -1)
        relative = self._key("relative")
        out = []
        for (b, h), (rows, cols) in places.regions(self.shape):
            finite = self.finite[rows, cols]
            out.append(
                {
                    "batch": b,
                    "head": h,
                    "entries": int(finite.size),
                    "correctly_rounded": int(np.count_nonzero(finite & (self.bucket[rows, cols] <= 1))),
                    "not_finite": int(finite.size - np.count_nonzero(finite)),
                    "worst": self._block_max(worst_keys, rows, cols),
                    "worst_relative": self._block_max(relative, rows, cols),
                }
            )
        return out

    def _block_max(self, keys: np.ndarray, rows: slice, cols: slice) -> Entry | None:
        # the first largest key of the block in its row order, as max() over its entries keeps the first
        block = keys[rows, cols]
        n = int(np.argmax(block))
        if block.flat[n] < 0:
            return None
        i, j = divmod(n, block.shape[1])
        return self.entry(rows.start + i, cols.start + j)


def head_maxima(places, bucket: np.ndarray, ulps: np.ndarray, relative: np.ndarray) -> np.ndarray:
    """The flat indices of each (batch, head)'s largest error and largest relative error, as
    :meth:`EntryTable.head_summaries` picks them from the same keys: a report shows each head's, so its
    figures (the row-relative one too) are decided, however far below the report's largest it ranks."""
    worst = np.where(ulps >= 0, bucket * _SCALE + ulps, -1)
    found = []
    for _, (rows, cols) in places.regions(worst.shape):
        for keys in (worst, relative):
            block = keys[rows, cols]
            n = int(np.argmax(block))
            if block.flat[n] >= 0:
                i, j = divmod(n, block.shape[1])
                found.append((rows.start + i) * worst.shape[1] + cols.start + j)
    return np.array(found, dtype=np.int64)


def ranked_at(finite: np.ndarray, bucket: np.ndarray, keys: np.ndarray, count: int) -> np.ndarray:
    """The flat indices of the ``count`` finite entries of the largest (bucket, ULPs), ties in row order; the
    exact zeros missed (bucket ZERO: no ULP figure) after all the others. ``keys``: the ULP figures' keys,
    −1 where an entry is not finite (Figures.keys(finite))."""
    # each finite entry's place in the buckets' order, from 1 (ZERO) up; 0: not finite
    places = rank(bucket).ravel() + 2
    places[~finite.ravel()] = 0
    at = np.flatnonzero(places)
    if 0 < count < at.size // 4:  # only the buckets from the top down that hold the count largest are sorted
        held = np.cumsum(np.bincount(places, minlength=2)[:0:-1])  # entries in the top 1, 2, … buckets
        least = len(held) - int(np.searchsorted(held, count))  # the lowest place among the count largest
        at = np.flatnonzero(places >= least)
        if count < at.size // 4:  # that bucket is crowded: the count-th largest (bucket, ULPs) found first
            key = places[at].astype(np.int64) * _SCALE + keys.ravel()[at]  # every key is below _SCALE
            at = at[key >= np.partition(key, -count)[-count]]
    order = np.lexsort((at, -keys.ravel()[at], -places[at]))[:count]
    return at[order]


__all__ = ["EntryTable", "ExactShown", "Figures", "head_maxima", "ranked_at"]
