"""The data of a comparison of a float result with the exact values: each entry's error, the summary, and
how one entry's error is decided on an enclosure of its exact value.

Shared by the exact path (:mod:`symattn.kernel.spec_comparison`) and the float64 engine
(:mod:`symattn.kernel.heads`, ``deciding``, ``perhead``, ``rowscale``, ``tolerance``), so that none
of them imports the module that dispatches to the others.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from symattn.input.decimals import significant_exact
from symattn.input.floats import ulp
from symattn.input.records import record

SHOWN_DIGITS = 3  # of each error
EXACT_DIGITS = 17  # of each exact value shown (enough to tell float64 neighbours apart)
START_DIGITS = 40  # the model's first enclosure; doubled until every error is decided
# histogram buckets (in ULPs): 0, (0, 1/2], (1/2, 1], (1, 2], (2, 4], ..., (2^19, 2^20], beyond
EDGES = (Fraction(0), Fraction(1, 2)) + tuple(Fraction(2) ** k for k in range(0, 21))
# the bucket of an exact 0 the result misses: no ULP measures it (the ULP of 0 is the format's least
# subnormal), its absolute error does; ranked after every ULP error
ZERO = len(EDGES) + 1


@record
class Entry:
    row: int
    col: int
    value: Fraction | None  # the float, exactly; None where it is NaN or infinite
    exact: Decimal  # the exact value to EXACT_DIGITS significant digits
    ulps: Decimal | None  # |value − exact| / ulp(exact), to SHOWN_DIGITS significant digits
    relative: Decimal | None  # |value − exact| / |exact|; None where the exact value is 0
    bucket: int  # index into EDGES: 0 for no error, k for (EDGES[k-1], EDGES[k]], len(EDGES) beyond the last
    # |value − exact| / (the row's largest |exact|), to SHOWN_DIGITS; None where not finite or the row is 0
    row_relative: Decimal | None = None

    @property
    def absolute(self) -> Decimal | None:
        """|value − exact| to SHOWN_DIGITS where the exact value is 0 and the value is not (bucket ZERO)."""
        if self.bucket != ZERO or self.value is None:
            return None
        return significant_exact(abs(self.value), SHOWN_DIGITS)


class Entries(Sequence[Entry]):
    """A comparison's entries, row by row, and what its summary needs of them: the largest errors, the
    histogram. These are Entry objects; the float64 path's (entry_table.EntryTable) are arrays."""

    def __init__(self, entries: Sequence[Entry] = ()):
        self._entries = tuple(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, n):
        return self._entries[n]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} entries)"

    def entry(self, i: int, j: int) -> Entry:
        """The entry at row i, column j (0-based)."""
        return next(e for e in self if (e.row, e.col) == (i, j))

    def histogram(self) -> tuple[tuple[int, int], ...]:
        counts: dict[int, int] = {}
        for e in self:
            if e.value is not None:
                counts[e.bucket] = counts.get(e.bucket, 0) + 1
        return tuple(sorted(counts.items()))

    def worst(self) -> Entry | None:
        finite = [e for e in self if e.ulps is not None]
        return max(finite, key=lambda e: (e.bucket, e.ulps)) if finite else None

    def largest(self, relative: str) -> Entry | None:
        """The first entry of the largest ``relative`` ("relative" or "row_relative") figure."""
        # rounding is monotone: the largest rounded figure is the rounding of the largest
        finite = [(getattr(e, relative), e) for e in self if getattr(e, relative) is not None]
        return max(finite, key=lambda pair: pair[0])[1] if finite else None

    def correctly_rounded(self) -> int:
        return sum(1 for e in self if e.value is not None and e.bucket <= 1)

    def tied(self, figure: str, region: tuple[slice, slice] | None = None) -> list[Entry]:
        """The entries (in ``region``: rows and columns) whose ``figure`` shows the largest digits ("ulps": with
        its bucket), in row order: ties.order tells them apart."""
        inside = [e for e in self if getattr(e, figure) is not None and _inside(region, e)]
        key = (lambda e: (e.bucket, e.ulps)) if figure == "ulps" else (lambda e: getattr(e, figure))
        top = max(map(key, inside), default=None)
        return [e for e in inside if key(e) == top]

    def over(self, bound: Decimal) -> int:
        """How many entries have an error, in ULPs to the three digits shown, over ``bound`` (--max-ulp)."""
        return sum(1 for e in self if e.ulps is not None and e.ulps > bound)

    def ranked(self, count: int) -> list[Entry]:
        """The ``count`` finite entries of the largest errors, largest first (ties in row order); the exact
        zeros missed (no ULP figure) after all the others."""
        finite = [e for e in self if e.value is not None]
        return sorted(finite, key=lambda e: (-rank(e.bucket), -(e.ulps or 0)))[:count]

    def not_finite(self) -> list[Entry]:
        return [e for e in self if e.value is None]

    def zeros_missed(self) -> list[Entry]:
        """The entries whose exact value is 0 and whose value is not (bucket ZERO), in row order."""
        return [e for e in self if e.bucket == ZERO]

    def head_summaries(self, places: Any) -> list[dict[str, Any]]:
        """Each (batch, head) of ``places`` (places.Places), 0-based, in order: its entries, how many are
        correctly rounded and not finite, its largest errors (Entry objects, placed in the whole)."""
        groups: dict[tuple[int, int], list[Entry]] = {}
        for e in self:
            groups.setdefault(places.head_of(e.row, e.col), []).append(e)
        return [head_summary(b, h, Entries(entries)) for (b, h), entries in sorted(groups.items())]


def head_summary(batch: int, head: int, entries: Entries) -> dict[str, Any]:
    """One (batch, head)'s summary of its own entries."""
    return {
        "batch": batch,
        "head": head,
        "entries": len(entries),
        "correctly_rounded": entries.correctly_rounded(),
        "not_finite": len(entries.not_finite()),
        "worst": entries.worst(),
        "worst_relative": entries.largest("relative"),
    }


def _inside(region: tuple[slice, slice] | None, e: Entry) -> bool:
    return region is None or all(s.start <= k < s.stop for s, k in zip(region, (e.row, e.col)))


def _shown(e: Entry) -> tuple[Any, Any]:
    # the order ``ranked`` sorts by: the bucket's place, then the three digits (exact zeros missed: none)
    return rank(e.bucket), e.ulps


def rank(bucket: Any) -> Any:
    """A bucket's place in the order of errors (an int or an array of them): ZERO below every other."""
    import numpy as np

    return np.where(bucket == ZERO, -1, bucket) if isinstance(bucket, np.ndarray) else -1 if bucket == ZERO else bucket


@record
class Comparison:
    source: str
    quantity: str
    format: str
    entries: Entries  # row by row
    not_finite: tuple[tuple[tuple[int, int], str], ...]
    digits: int  # the model's significant digits that decided every error
    refined: int | None = None  # the float64 path (kernel/heads.py): entries arb decided; None: exact path
    # issue 22: (B, H) where the inputs and the result have batch and head axes: the heads lie side by side
    # (O: a block of columns each, batch by batch; LSE: a row each)
    batch_heads: tuple[int, int] | None = None
    # where each entry lies in the result as given (places.Places); None: a matrix of the quantity's own axes
    places: Any = None
    order: str | None = None  # where a cap and a distance bias both act: their order (variants.ORDER_KEY's value)
    # the exact values as intervals narrowed on demand (checking/enclosing.py), for the verdict of tolerance.py
    enclose: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    # the float64 path with worst: the comparison that decides every entry, made when first asked for (whole)
    complete: Callable[[], Comparison] | None = field(default=None, compare=False, repr=False)

    def whole(self) -> Comparison:
        """This comparison with every entry decided: itself, or the one ``complete`` makes."""
        return self if self.complete is None else self.complete()

    @property
    def where(self) -> Any:
        """The comparison's places.Places: named axes, 0-based."""
        from symattn.kernel.places import matrix_places

        if self.places is not None:
            return self.places
        shape = getattr(self.entries, "shape", None)  # an EntryTable's: no entry read (it may be undecided)
        rows = shape[0] if shape else self.entries[-1].row + 1 if len(self.entries) else 1  # the LSE: a row per head
        return matrix_places(self.quantity, rows)

    @property
    def histogram(self) -> tuple[tuple[int, int], ...]:
        """(bucket, count) for every bucket with an entry, not-finite entries left out."""
        return self.entries.histogram()

    def top(self, figure: str, region: tuple[slice, slice] | None = None) -> tuple[Entry | None, int]:
        """The entry of the largest ``figure`` ("ulps", "relative", "row_relative"; in ``region``, rows and
        columns, where given) by the figures' true order, and how many places may hold it (ties.order)."""
        from symattn.kernel.ties import order

        try:
            tied = self.entries.tied(figure, region)
        except LookupError:  # an entry tied with the largest was not decided: every entry decided
            if self.complete is None:
                raise
            return self.whole().top(figure, region)
        if len(tied) < 2:
            return (tied[0] if tied else None), 1
        first = order(self, figure, tied)[0]
        return first[0], len(first)

    def ranked(self, count: int) -> list[Entry]:
        """The ``count`` entries of the largest errors, as ``Entries.ranked``, those whose figures show the same
        digits in their true order (ties.order)."""
        from itertools import groupby

        from symattn.kernel.ties import order

        n = min(count + 1, len(self.entries))
        while count:  # enough entries that every one tied with the count-th is among them
            try:
                got = self.entries.ranked(n)
            except LookupError:  # past the entries decided: every entry decided, where it can be
                if self.complete is not None:
                    return self.whole().ranked(count)
                got = self.entries.ranked(count)  # compare_head's alone: those decided
                break
            if len(got) < n or len(got) <= count or _shown(got[-1]) != _shown(got[count - 1]):
                break
            n *= 2
        else:
            return []
        out: list[Entry] = []
        for _, same in groupby(got, key=_shown):
            group = list(same)
            out += [e for g in order(self, "ulps", group) for e in g] if group[0].ulps is not None else group
        return out[:count]

    @property
    def worst(self) -> Entry | None:
        return self.top("ulps")[0]

    @property
    def worst_relative(self) -> Entry | None:
        return self.top("relative")[0]

    @property
    def worst_row_relative(self) -> Entry | None:
        return self.top("row_relative")[0]

    @property
    def correctly_rounded(self) -> int:
        return self.entries.correctly_rounded()


def _bucket(e: Fraction) -> int:
    """The first bucket whose upper edge is at least e (past the last: len(EDGES)), by bisection: a loop over
    the 23 edges took a third of a refined entry's deciding."""
    return bisect.bisect_left(EDGES, e)


def _half_unit(value: Decimal) -> Fraction:
    # a value rounded half-up to its digits lies within half a unit of its last digit
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # a finite value's ("n", "N", "F": NaN and infinity)
    return Fraction(1, 2) * Fraction(10) ** exponent


def _decide(x: Fraction, lo: Fraction, hi: Fraction, fmt: str) -> tuple[Decimal | None, Decimal | None, int] | None:
    """The error of x against every exact value in [lo, hi], if the shown digits and bucket are the same; an
    exact 0 (lo = hi = 0) that x misses has no ULP figure (bucket ZERO)."""
    if lo == hi == 0:
        return (Decimal(0), None, 0) if x == 0 else (None, None, ZERO)
    if lo <= 0 <= hi:  # not exactly 0, but may be: no relative error (as below, without the big fractions)
        return None
    far = max(abs(x - lo), abs(x - hi))
    near = Fraction(0) if lo <= x <= hi else min(abs(x - lo), abs(x - hi))
    units = sorted({ulp(lo, fmt), ulp(hi, fmt)})
    e_lo, e_hi = near / units[-1], far / units[0]
    shown = significant_exact(e_lo, SHOWN_DIGITS)
    bucket = _bucket(e_lo)
    if shown != significant_exact(e_hi, SHOWN_DIGITS) or bucket != _bucket(e_hi):
        return None
    mags = (abs(lo), abs(hi)) if lo > 0 else (abs(hi), abs(lo))
    r_lo, r_hi = near / mags[1], far / mags[0]
    relative = significant_exact(r_lo, SHOWN_DIGITS)
    if relative != significant_exact(r_hi, SHOWN_DIGITS):
        return None
    return shown, relative, bucket


def number_text(x: Decimal) -> str:
    """7.83e-8 for small and large numbers, 0.744 and 12.5 otherwise (digits as decided, none added)."""
    if x == 0 or -5 <= x.adjusted() < 6:
        return format(x, "f")
    sign, digits, _ = x.as_tuple()
    mantissa = "".join(map(str, digits))
    mantissa = mantissa[0] + ("." + mantissa[1:] if len(mantissa) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{x.adjusted()}"


FIGURE_RANGE = 308  # past 10^±308, float64's range, a text figure reads as digits times a power of ten


def figure_text(x: Decimal) -> str:
    """A figure as the text reports show it: :func:`number_text`, except past 10^±308 its digits times a power
    of ten, ``1.26×10^881512`` (the same in every language; JSON keeps ``1.26e881512``)."""
    if x == 0 or abs(x.adjusted()) <= FIGURE_RANGE:
        return number_text(x)
    mantissa, power = number_text(x).split("e")
    return f"{mantissa}×10^{power}"
