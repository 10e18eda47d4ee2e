"""The list of every entry in ``compare --format json``, written as text straight from the entry arrays.

``json.dumps(..., indent=2)`` runs Python's own encoder (the C one takes no indent), and each entry was a
dict of Decimals first: 65,536 entries took about 19 s. This writes the same bytes (the tests hold the
goldens): each figure's text made once per (digits, exponent), each row's arrays read as lists, strings
escaped by json's own ``encode_basestring``, the layout json.dumps gives an item of a list at depth 2.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator
from decimal import Decimal
from fractions import Fraction
from json.encoder import encode_basestring
from typing import Any

from symattn.input.decimals import significant_exact
from symattn.kernel.comparison import EDGES, EXACT_DIGITS, SHOWN_DIGITS, ZERO, Comparison, Entry, number_text
from symattn.kernel.deciding import figure
from symattn.kernel.entry_table import EntryTable, Figures

# a float's exact Decimal rounded half-up to EXACT_DIGITS: significant_exact's digits, in C
_ROUNDED = decimal.Context(
    prec=EXACT_DIGITS, rounding=decimal.ROUND_HALF_UP, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN
)
_ITEM = "    "  # an entry's braces: depth 2 of indent 2
_KEY = "      "  # its keys: depth 3


def entries_text(c: Comparison, place: Callable[[int, int], dict[str, int]]) -> str:
    """The value of ``"entries"`` as json.dumps(data, ensure_ascii=False, indent=2) writes it at the top
    level of ``data``: "[", an entry per item, "  ]"; "[]" for none."""
    items = list(_items(c, place))
    if not items:
        return "[]"
    return "[\n" + ",\n".join(items) + "\n  ]"


def _items(c: Comparison, place: Callable[[int, int], dict[str, int]]) -> Iterator[str]:
    entries = c.entries.complete() if isinstance(c.entries, EntryTable) else c.entries
    if not isinstance(entries, EntryTable) or entries.known is not None:
        for e in entries:
            yield _item(place(e.row, e.col), _fields(e))
        return
    t = entries
    texts: dict[tuple[int, int], str] = {}
    rows, cols = t.shape
    for i in range(rows):
        finite, bucket = t.finite[i].tolist(), t.bucket[i].tolist()
        floats = None if t.floats is None else t.floats[i].tolist()
        figures = [_row(f, i, texts) for f in (t.ulps, t.relative, t.row_relative)]
        shown_ok, shown_q, shown_k = t.exact.ok[i].tolist(), t.exact.q[i].tolist(), t.exact.k[i].tolist()
        for j in range(cols):
            if not finite[j]:  # as EntryTable.entry: its exact value from its ends, no figures
                fields: list[tuple[str, str]] = [("value", "null"), ("exact", _string(t.exact.of_ends(i, j)))]
                fields += [("ulps", "null"), ("relative", "null"), ("row_relative", "null")]
                yield _item(place(i, j), fields)
                continue
            value = t.value(i, j) if floats is None else None
            if floats is not None:
                value_text = _string(float_text(floats[j]))
            else:
                value_text = "null" if value is None else _string(significant_exact(value, EXACT_DIGITS))
            if (i, j) in t.exact.others:
                exact = t.exact.others[(i, j)]
            elif shown_ok[j]:
                exact = figure(int(shown_q[j]), int(shown_k[j]))
            else:
                exact = t.exact.of_ends(i, j)
            fields = [
                ("value", value_text),
                ("exact", _string(exact)),
                ("ulps", figures[0][j]),
                ("relative", figures[1][j]),
                ("row_relative", figures[2][j]),
            ]
            if bucket[j] == ZERO:  # Entry.absolute
                if floats is not None:
                    value = Fraction(floats[j])
                absolute = None if value is None else significant_exact(abs(value), SHOWN_DIGITS)
                fields.append(("absolute", _number(absolute)))
            yield _item(place(i, j), fields)


def float_text(x: float) -> str:
    """str(significant_exact(Fraction(x), EXACT_DIGITS)) of a finite float: its exact Decimal rounded half-up
    in C, padded with zeros to EXACT_DIGITS digits as significant_exact writes them."""
    if x == 0:
        return "0"
    r = _ROUNDED.plus(Decimal(x))
    sign, digits, exponent = r.as_tuple()
    pad = EXACT_DIGITS - len(digits)
    if pad > 0:
        r = Decimal((sign, digits + (0,) * pad, int(exponent) - pad))
    return str(r)


def _row(f: Figures, i: int, texts: dict[tuple[int, int], str]) -> list[str]:
    """Row i of a figure as JSON texts: numbers_text of each, made once per (digits, exponent)."""
    out = []
    for j, (ok, q, k) in enumerate(zip(f.ok[i].tolist(), f.q[i].tolist(), f.k[i].tolist())):
        if ok:
            key = (q, k)
            if key not in texts:
                texts[key] = _number(figure(q, k))
            out.append(texts[key])
        else:
            out.append(_number(f.others.get((i, j))))
    return out


def _fields(e: Entry) -> list[tuple[str, str]]:
    """comparison_report's fields of one entry, as JSON texts."""
    fields = [
        ("value", "null" if e.value is None else _string(significant_exact(e.value, EXACT_DIGITS))),
        ("exact", _string(e.exact)),
        ("ulps", _number(e.ulps)),
        ("relative", _number(e.relative)),
        ("row_relative", _number(e.row_relative)),
    ]
    if e.bucket == ZERO:
        fields.append(("absolute", _number(e.absolute)))
    return fields


def _number(x: Decimal | None) -> str:
    return "null" if x is None else encode_basestring(number_text(x))


def _string(x: Any) -> str:
    return encode_basestring(str(x))


def _item(place: dict[str, int], fields: list[tuple[str, str]]) -> str:
    keys = [f"{_KEY}{encode_basestring(k)}: {int.__repr__(v)}" for k, v in place.items()]
    keys += [f'{_KEY}"{k}": {v}' for k, v in fields]
    return _ITEM + "{\n" + ",\n".join(keys) + "\n" + _ITEM + "}"


assert len(EDGES) + 1 == ZERO  # a not-finite entry's bucket, len(EDGES), is never ZERO

__all__ = ["entries_text", "float_text"]
