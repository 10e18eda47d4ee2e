"""Strict readers of a certificate's values, one field at a time: whole numbers, rows, ``float.hex`` floats,
shown digits and exact fractions, each refusing with a :class:`CertificateError` that names the key and the
1-based position (the standalone verifier: the standard library only)."""

from __future__ import annotations

import base64
import binascii
import math
import re
import sys
from array import array
from decimal import Decimal
from fractions import Fraction
from typing import Any

_SHOWN = re.compile(r"-?[0-9]{1,40}(?:\.[0-9]{1,40})?(?:E[+-][0-9]{1,4})?")
_EXACT = re.compile(r"-?[0-9]{1,400}(?:/[0-9]{1,400})?")
BOUND_LENGTH = 64_000  # characters of a version-2 enclosure's end (its exact decimal)


class CertificateError(ValueError):
    """The certificate is malformed: ``key`` (dotted), ``position`` (1-based), ``problem``."""

    def __init__(self, key: str, problem: str, position: tuple[int, ...] = ()):
        self.key, self.problem, self.position = key, problem, position
        super().__init__(f"{key}{''.join(f'[{p}]' for p in position)}: {problem}" if key else problem)


class _Float(str):
    """A JSON number with a point or an exponent, kept as its text (a certificate's numbers are whole)."""


class _Long(str):
    """A JSON integer of more digits than any count a certificate holds, kept as its text (Python's int()
    refuses past 4300 digits, and the refusal would name no field)."""


def integer(text: str) -> int | str:
    """A JSON integer: an int, or past 100 digits its text (:class:`_Long`: no whole number a reader takes)."""
    return int(text) if len(text) <= 100 else _Long(text)


def whole(raw: Any) -> int | None:
    """A whole number of up to 9 digits: a JSON integer (or its text, as symattn's own reader keeps it)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw if abs(raw) < 10**9 else None
    if isinstance(raw, str) and type(raw) is not str and not isinstance(raw, _Float):
        return int(raw) if len(raw) <= 9 and raw.isdigit() else None
    return None


def kind(raw: Any) -> str:
    if isinstance(raw, dict):
        return "a table"
    if isinstance(raw, list):
        return "a list" if raw else "an empty list"
    if isinstance(raw, str) and type(raw) is str:
        return f"the text {raw[:40]!r}" + ("…" if len(raw) > 40 else "")
    if raw is None or isinstance(raw, bool):
        return {None: "null", True: "true", False: "false"}[raw]
    return f"the number {str(raw)[:40]}" + ("…" if len(str(raw)) > 40 else "")


def fields(table: dict[str, Any], key: str, known: tuple[str, ...], required: tuple[str, ...]) -> None:
    for name in table:
        if name not in known:
            where = f"{key}.{name[:50]}" if key else name[:50]
            raise CertificateError(where, f"an unknown field; this holds {', '.join(known)}")
    for name in required:
        if name not in table:
            raise CertificateError(f"{key}.{name}" if key else name, "missing")


def rows(raw: Any, key: str, count: int | None, width: int | None, what: str) -> list[list[Any]]:
    """A list of ``count`` rows of ``width`` entries each (None: as given, within the limits)."""
    if not isinstance(raw, list) or not raw:
        raise CertificateError(key, f"expected a list of rows of {what}, got {kind(raw)}")
    if count is not None and len(raw) != count:
        raise CertificateError(key, f"{len(raw)} rows; {count} expected")
    for i, row in enumerate(raw, 1):
        if not isinstance(row, list) or not row:
            raise CertificateError(key, f"expected a list of {what}, got {kind(row)}", (i,))
        if width is None:
            width = len(row)
        if len(row) != width:
            raise CertificateError(key, f"{len(row)} entries; {width} expected", (i,))
    return raw


# exactly the texts float.hex writes of finite floats (tests/test_verifier_speed.py): a normal one's 13 hex
# digits and its exponent from −1022 to +1023 (no leading zero, "+0" not "-0"), a subnormal's nonzero digits
# at −1022, and zero; float.hex itself took three times as long
_EXPONENT = r"(?:\+(?:0|[1-9]\d{0,2}|10[01]\d|102[0-3])|-(?:[1-9]\d{0,2}|10[01]\d|102[0-2]))"
HEX = re.compile(rf"-?0x(?:1\.[0-9a-f]{{13}}p{_EXPONENT}|0\.(?!0{{13}})[0-9a-f]{{13}}p-1022|0\.0p\+0)")
_HEX_INF = re.compile(rf"{HEX.pattern}|inf")
# a whole row at once, its texts joined by commas (which no text of either form holds): one match in C
_ROW = re.compile(rf"(?:{HEX.pattern})(?:,(?:{HEX.pattern}))*")
_ROW_INF = re.compile(rf"(?:{_HEX_INF.pattern})(?:,(?:{_HEX_INF.pattern}))*")


def floats(raw: Any, key: str, count: int | None, width: int | None, what: str, inf: bool = False) -> list[list[float]]:
    """Rows of float.hex texts as floats: each the text float.hex gives its own value, finite (or inf)."""
    out = []
    form = _ROW_INF if inf else _ROW
    for i, row in enumerate(rows(raw, key, count, width, what), 1):
        try:  # the usual row: every text of float.hex's form (as many as the commas say), checked in C
            joined = ",".join(row)
            if joined.count(",") == len(row) - 1 and form.fullmatch(joined):
                out.append(list(map(float.fromhex, row)))
                continue
        except TypeError:  # not a string: the check below names it
            pass
        try:  # the whole row at once in C; +inf (only where allowed) is "inf", float.hex's own text
            values = list(map(float.fromhex, row))
            good = list(map(float.hex, values)) == row and (
                all(map(math.isfinite, values)) or all(v == math.inf for v in values if not math.isfinite(v))
            )
        except (TypeError, ValueError, OverflowError):
            good = False
        if not good or not inf and "inf" in row:
            j = next(j for j, x in enumerate(row) if not _hex(x, inf))
            raise CertificateError(key, f"expected {what} as float.hex writes it, got {kind(row[j])}", (i, j + 1))
        out.append(values)
    return out


PACKED = {"float64": "d", "float32": "f"}  # a packed matrix's field: its values' IEEE binary64 or binary32


def packed(
    raw: Any,
    key: str,
    count: int | None,
    width: int | None,
    what: str,
    form: str,
    inf: bool = False,
    most: tuple[int, int] = (1 << 30, 1 << 30),
):
    """Rows of floats packed (version 5): ``{"rows": R, "columns": C, form: text}``, the text base64's own
    (RFC 4648, padded, no line breaks) of R × C little-endian IEEE values of ``form`` ("float64" or
    "float32") in row order; each finite (or +inf where ``inf``). ``count`` and ``width``: R and C wanted
    (None: as given, at most ``most``), checked before a byte is decoded."""
    if not isinstance(raw, dict):
        raise CertificateError(key, f"expected a list of rows of {what} or a packed table, got {kind(raw)}")
    fields(raw, key, ("rows", "columns", form), ("rows", "columns", form))
    r, c = whole(raw["rows"]), whole(raw["columns"])
    for name, n, wanted, limit in (("rows", r, count, most[0]), ("columns", c, width, most[1])):
        if n is None or n < 1 or (n != wanted if wanted is not None else n > limit):
            expected = str(wanted) if wanted is not None else f"a whole number from 1 to {limit}"
            raise CertificateError(f"{key}.{name}", f"expected {expected}, got {kind(raw[name])}")
    assert r is not None and c is not None
    text, size = raw[form], r * c * (8 if form == "float64" else 4)
    where, length = f"{key}.{form}", 4 * -(-size // 3)
    wanted_text = f"expected the base64 text of {r} × {c} {form} values ({size} bytes, {length} characters)"
    if not isinstance(text, str) or type(text) is not str:
        raise CertificateError(where, f"{wanted_text}, got {kind(text)}")
    if len(text) != length:
        raise CertificateError(where, f"{wanted_text}, got {len(text)} characters")
    try:  # validate: a character outside the alphabet raises (found and named below)
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        data = b""
    if len(data) != size:
        bad = _OUTSIDE.search(text)
        if bad is not None:
            raise CertificateError(where, f"{bad.group()!r} at character {bad.start() + 1}: not base64's alphabet")
        raise CertificateError(where, "its padding (=) is not where base64 writes it")
    # one text for each value: with the padding where it must be, only the last group's unused bits are free
    last = size % 3
    if last and base64.b64encode(data[-last:]).decode("ascii") != text[-4:]:
        raise CertificateError(where, "not the text base64 writes of its bytes: the last digit's unused bits are set")
    values = array(PACKED[form], data)
    if sys.byteorder == "big":
        values.byteswap()
    # each value's top byte (little-endian), scanned in C where summing boxed each float (25 ms at 4096 × 128):
    # a NaN or an infinity has every exponent bit set, so its top byte is 0x7F or 0xFF (so has a finite value
    # of 2^1009 and more, 2^127 in float32: summed, as any table holding such a byte); a negative one ≥ 0x80
    top = data[7::8] if form == "float64" else data[3::4]
    surely_finite = b"\x7f" not in top and b"\xff" not in top
    if not surely_finite and not math.isfinite(sum(values)):  # a NaN or an infinity makes the sum one
        for i, x in enumerate(values):
            if not (math.isfinite(x) or inf and x == math.inf):
                raise CertificateError(key, f"{x!r}: expected {what}", (i // c + 1, i % c + 1))
    return Packed(values, c, not top or max(top) < 0x7F)


class Packed:
    """A packed matrix's rows: its R × C floats in one array (8 or 4 bytes each, where a list of Python floats
    takes 32), each row made as a list of floats when asked for, as :func:`floats` gives them; numpy reads
    the whole at once through ``__array_interface__`` (no numpy here, and no list made)."""

    def __init__(self, values: array, columns: int, plain: bool = False):
        self.values, self.columns = values, columns
        self.plain = plain  # every value finite and at least +0, seen from its top byte (below 0x7F)
        self._last: tuple[int, list[float]] = (-1, [])  # the row asked for last: a value at a time reads it

    def __len__(self) -> int:
        return len(self.values) // self.columns

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        i = i + n if i < 0 else i
        if not 0 <= i < n:
            raise IndexError(i)
        if self._last[0] != i:
            self._last = (i, self.values[i * self.columns : (i + 1) * self.columns].tolist())
        return list(self._last[1])  # a copy: a caller may change its row

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    @property
    def __array_interface__(self) -> dict[str, Any]:
        order = "<" if sys.byteorder == "little" else ">"
        typestr = f"{order}f{self.values.itemsize}"
        return {"shape": (len(self), self.columns), "typestr": typestr, "data": self.values, "version": 3}


_OUTSIDE = re.compile(r"[^A-Za-z0-9+/=]")  # a character base64's alphabet (and its padding) lacks


def _hex(x: Any, inf: bool) -> bool:
    if not isinstance(x, str) or len(x) > 24:
        return False
    if x == "inf":
        return inf
    try:
        v = float.fromhex(x)
    except (ValueError, OverflowError):
        return False
    return math.isfinite(v) and v.hex() == x


def shown(text: Any, key: str, position: tuple[int, ...], digits: int) -> Fraction:
    """A value as shown: ``digits`` significant digits (or "0"), as Decimal writes it; exactly. A JSON text,
    not a number (whose digits a reader keeps as a str subclass: 1 is not "1")."""
    if type(text) is not str or _SHOWN.fullmatch(text) is None:
        raise CertificateError(
            key, f'expected a value such as "0.4171325333" or "2.028E+4", got {kind(text)}', position
        )
    value = Decimal(text)
    if value != 0 and len(value.as_tuple().digits) != digits:
        raise CertificateError(
            key, f"{text} has {len(value.as_tuple().digits)} significant digits, not {digits}", position
        )
    if value == 0 and text != "0":
        raise CertificateError(key, f'an exact zero is shown as "0", got {text!r}', position)
    if str(value) != text:  # one text for each value: the one compute writes
        raise CertificateError(key, f"{text} is not written as Decimal writes its value: {value}", position)
    return Fraction(value)


def exact(text: Any, key: str, position: tuple[int, ...], pattern: re.Pattern[str] = _EXACT) -> Fraction:
    if not isinstance(text, str) or len(text) > BOUND_LENGTH or pattern.fullmatch(text) is None:
        raise CertificateError(key, f'expected an exact number such as "3/10", got {kind(text)}', position)
    num, _, den = text.partition("/")
    if den and not den.strip("0"):
        raise CertificateError(key, f"{text} divides by zero", position)
    return Fraction(Decimal(num)) / (Fraction(Decimal(den)) if den else 1)
