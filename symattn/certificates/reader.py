"""Reading a certificate's numbers and tables: each checked for its form and its length before it is matched
or converted, each problem one line naming the certificate, the key and the position."""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from symattn.input import files
from symattn.input.errors import LimitError, SpecError
from symattn.input.limits import BOUND_LENGTH, DIMS, TOKENS
from symattn.input.records import record

# Matched whole and only once the length is known to be bounded: linear time. A bound has no exponent,
# and a shown value's exponent is bounded, so no conversion makes a number of millions of digits.
_FORMS = {
    "bound": (re.compile(r"-?[0-9]+(?:\.[0-9]+)?"), 'a finite decimal in a string, such as "0.25"'),
    "exact": (
        re.compile(r"-?[0-9]+(?:\.[0-9]+)?|-?[0-9]+/[0-9]+"),
        'an exact number in a string, such as "3/10" or "0.25"',
    ),
    "shown": (
        re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?([0-9]+))?"),
        'a value in a string as compute --certify shows it, such as "0.4171" or "2.028E+4"',
    ),
}


@record
class Value:
    """One shown value, its bounds (None where it is -inf) and the certificate's exact fraction, if any."""

    name: str
    row: int  # as the enclosures index it: scalars [0][0], exp_sum [i][0]
    col: int
    where: str  # weights[1][2], exp_sum[2], sqrt_dk
    text: str
    shown: Fraction | None  # None, as bounds, where the value is -inf
    bounds: tuple[Fraction, Fraction] | None
    bound_text: tuple[str, str]
    exact: Fraction | None


def whole(raw: Any) -> int | None:
    """A whole number of up to 9 digits, as JSON gives it (a number's text) or Python does; else None."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, files.FloatText) and len(raw) <= 9 and raw.isdigit():
        return int(raw)
    return None


def kind_of(raw: Any) -> str:
    # the readers' words, and an empty row said as such (a certificate's rows are never empty)
    if isinstance(raw, (list, tuple)) and not raw:
        return "an empty list"
    return "a table" if isinstance(raw, Mapping) else files.kind_of(raw)


def brief(raw: Any) -> str:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw.bit_length() <= 64:
        return str(raw)
    if not isinstance(raw, str):
        return kind_of(raw)
    if type(raw) is not str:  # a JSON number, as written
        return str(raw) if len(raw) <= 60 else str(raw[:50]) + "…"
    return repr(str(raw)) if len(raw) <= 60 else repr(str(raw[:50])) + "…"


def plural(noun: str) -> str:
    return {"entry": "entries", "query": "queries"}.get(noun, noun + "s")


def count(n: int, noun: str) -> str:
    return f"{n} {noun if n == 1 else plural(noun)}"


class Reader:
    """Reads the parts of one certificate; every error names the file, the key and the position."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, problem: str, position: tuple[int, ...] = ()) -> SpecError:
        return SpecError(self.source, key, problem, position)

    def number(self, raw: Any, key: str, position: tuple[int, ...], form: str) -> Fraction:
        pattern, expected = _FORMS[form]
        # a value shown is a JSON text, as compute writes it; a bare number's digits would read the same
        if not isinstance(raw, str) or form == "shown" and type(raw) is not str:
            raise self.error(key, f"expected {expected}, got {kind_of(raw)}", position)
        if len(raw) > BOUND_LENGTH:
            raise LimitError(
                self.source, key, f"a number of {len(raw)} characters; the limit is {BOUND_LENGTH}", position
            )
        match = pattern.fullmatch(raw)
        if match is None:
            raise self.error(key, f"expected {expected}, got {brief(raw)}", position)
        exponent = (match[1] or "").lstrip("0") if form == "shown" else ""
        if len(exponent) > 9 or exponent and int(exponent) > BOUND_LENGTH:
            raise LimitError(
                self.source,
                key,
                f"the exponent of {brief(raw)} is beyond ±{BOUND_LENGTH}, past any bound of the limit's length",
                position,
            )
        num, _, den = raw.partition("/")
        if den and not den.strip("0"):
            raise self.error(key, f"{brief(raw)} divides by zero", position)
        # through Decimal: exact, and never Python's limit on int(str)
        return Fraction(Decimal(num)) / (Fraction(Decimal(den)) if den else 1)

    def sized(self, raw: Any, key: str, noun: str, dim: tuple[int, str, str], position: tuple[int, ...] = ()) -> list:
        size, thing, owner = dim
        if not isinstance(raw, (list, tuple)):
            raise self.error(
                key, f"expected a list of {plural(noun)}, one per {thing} of {owner}, got {kind_of(raw)}", position
            )
        if len(raw) != size:
            raise self.error(key, f"{count(len(raw), noun)} for the {count(size, thing)} of {owner}", position)
        return list(raw)

    def cells(self, raw: Any, key: str, shape: tuple[tuple[int, str, str], ...]) -> list[list[Any]]:
        """``raw`` as rows of entries: a scalar (shape ()), a column (one dimension) or a matrix (two)."""
        if not shape:
            return [[raw]]
        rows = self.sized(raw, key, "row" if len(shape) == 2 else "entry", shape[0])
        if len(shape) == 1:
            return [[x] for x in rows]
        return [self.sized(row, key, "entry", shape[1], (i + 1,)) for i, row in enumerate(rows)]

    def matrix(
        self,
        inputs: Mapping[str, Any],
        name: str,
        rows: tuple[int, str, str] | None = None,
        cols: tuple[int, str, str] | None = None,
    ) -> list[list[Fraction]]:
        """An input matrix: ``rows`` and ``cols`` as another input gives them, or as its own first row does."""
        key = f"certificate.inputs.{name}"
        if name not in inputs:
            raise self.error(key, f"missing: the exact fractions of {name}, a list of rows")
        raw = inputs[name]
        if not isinstance(raw, (list, tuple)) or not raw:
            raise self.error(key, f"expected a list of rows, got {kind_of(raw)}")
        if len(raw) > TOKENS:
            raise LimitError(self.source, key, f"{len(raw)} rows; the limit is {TOKENS}")
        if rows is not None:
            self.sized(raw, key, "row", rows)
        out = []
        for i, row in enumerate(raw):
            if not isinstance(row, (list, tuple)) or not row:
                raise self.error(key, f"expected a list of entries, got {kind_of(row)}", (i + 1,))
            if len(row) > DIMS:
                raise LimitError(self.source, key, f"{len(row)} entries; the limit is {DIMS}", (i + 1,))
            if cols is not None:
                self.sized(row, key, "entry", cols, (i + 1,))
            elif len(row) != len(raw[0]):
                raise self.error(key, f"{count(len(row), 'entry')}, but row 1 has {len(raw[0])}", (i + 1,))
            out.append([self.number(x, key, (i + 1, j + 1), "exact") for j, x in enumerate(row)])
        return out

    def fields(self, table: Mapping[str, Any], key: str, known: tuple[str, ...], what: str) -> None:
        """Refuse a field of ``table`` (at ``key``; "" for the top) that is not ``known``: a certificate holds
        only what its verifier checks, and a field it ignored would seem proved."""
        for name in table:
            if name in known:
                continue
            short = name if len(name) <= 60 else name[:50] + "…"
            where = f"{key}.{short}" if key else short
            if name == "exact":
                raise self.error(where, "a closed form, which the verifier cannot check: a certificate holds none")
            raise self.error(where, f"an unknown field; {what} holds {', '.join(known)}")

    def bounds(self, raw: Any, key: str, position: tuple[int, ...]) -> tuple[Any, Any]:
        if not isinstance(raw, (list, tuple)) or len(raw) != 2:
            got = count(len(raw), "entry") if isinstance(raw, (list, tuple)) else kind_of(raw)
            raise self.error(key, f"expected [lo, hi], got {got}", position)
        return raw[0], raw[1]
