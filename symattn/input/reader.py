"""Reading a spec's values one key at a time, with messages that name the file, the key and the position.

:class:`Reader` is shared by specs, claims, exercise templates and the web page's requests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeGuard, cast, overload

from symattn.input import limits
from symattn.input.choices import SCALES
from symattn.input.errors import LimitError, SpecError
from symattn.input.errors import brief as shortly
from symattn.input.files import FloatText, kind_of
from symattn.input.messages import said
from symattn.input.numeral import NotFiniteError, Numeral, NumeralError, RangeError, parse_numeral
from symattn.input.text import math_problem, normalize, unsupported_character

if TYPE_CHECKING:  # formulas are SymPy: imported only where an entry is one (the float64 path needs none)
    from symattn.input.formula import Formula

Scale = Literal["sqrt", "none"] | Numeral  # Z = S/√d_k, Z = S, or Z = S · number

Entry: TypeAlias = "Numeral | Formula"  # one entry as read: a number or, where symbols are allowed, a formula
Matrix: TypeAlias = "tuple[tuple[Entry, ...], ...]"  # Q, K, V, X and the W: formulas allowed
Numerals = tuple[tuple[Numeral, ...], ...]  # numbers only (W_O, dL/dO, the target)


def is_number_row(row: tuple[Entry, ...]) -> TypeGuard[tuple[Numeral, ...]]:
    """True if every entry is a number (no formula)."""
    return all(isinstance(x, Numeral) for x in row)


def is_numbers(m: Matrix) -> TypeGuard[Numerals]:
    """True if every entry is a number (no formula)."""
    return all(is_number_row(row) for row in m)


_INDEX = re.compile(r"[0-9]{1,9}")  # a 1-based index as text: ASCII digits, never '²'


def parse_index(raw: object) -> int | None:
    """A whole number given as an int or as ASCII digits; None for anything else."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and _INDEX.fullmatch(raw.strip()):
        return int(raw.strip())
    return None


class Reader:
    """Validation helpers that know the source name for error messages."""

    def __init__(self, source: str, folder: Path | None = None):
        self.source = source
        self.folder = folder  # the spec file's folder, where a matrix given as a file name is found

    def error(self, key: str | None, problem: str, position: tuple[int, ...] = ()) -> SpecError:
        return SpecError(self.source, key, problem, position)

    def limit(self, key: str | None, problem: str, position: tuple[int, ...] = ()) -> LimitError:
        return LimitError(self.source, key, problem, position)

    @overload
    def matrix(self, raw: object, key: str, *, max_rows: int = ..., symbolic: Literal[False] = ...) -> Numerals: ...
    @overload
    def matrix(self, raw: object, key: str, *, max_rows: int = ..., symbolic: bool) -> Matrix: ...
    def matrix(self, raw: object, key: str, *, max_rows: int = limits.TOKENS, symbolic: bool = False) -> Matrix:
        from symattn.input import filematrix

        if isinstance(raw, filematrix.FileMatrix):  # one batch of a file with batch and head axes, checked
            return cast(Matrix, raw)
        if isinstance(raw, str) and not isinstance(raw, FloatText):  # "q.npy": the exact floats of a file
            most = limits.KERNEL_TOKENS if max_rows == limits.TOKENS else max_rows  # tokens from a file: kernel sizes
            return cast(Matrix, filematrix.read(raw, key, self.source, self.folder, most))
        if not isinstance(raw, (list, tuple)):
            raise self.error(key, f"expected a matrix (a list of rows), got {kind_of(raw)}")
        if not raw:
            raise self.error(key, "empty matrix")
        if len(raw) > max_rows:
            raise self.limit(key, f"{len(raw)} rows; at most {max_rows} are supported")
        rows: list[tuple[Entry, ...]] = []
        for i, row in enumerate(raw, 1):
            if not isinstance(row, (list, tuple)):
                raise self.error(key, f"expected a row (a list of numbers), got {kind_of(row)}", (i,))
            if not row:
                raise self.error(key, "empty row", (i,))
            if len(row) > limits.DIMS:
                raise self.limit(key, f"{len(row)} columns; at most {limits.DIMS} are supported", (i,))
            if rows and len(row) != len(rows[0]):
                raise self.error(key, f"row has {len(row)} entries but row 1 has {len(rows[0])}", (i,))
            rows.append(
                tuple(
                    self.entry(x, key, (i, j)) if symbolic else self.number(x, key, (i, j))
                    for j, x in enumerate(row, 1)
                )
            )
        return tuple(rows)

    def entry(self, raw: object, key: str, position: tuple[int, ...]) -> Entry:
        """A number, or (for text that is not one) a formula with symbols."""
        try:
            return parse_numeral(raw)
        except NumeralError as exc:
            if (
                isinstance(exc, NotFiniteError)
                or not isinstance(raw, str)
                or isinstance(raw, FloatText)
                or not any(ch.isalpha() or ch in "()^*" for ch in raw)
            ):
                raise self.error(key, str(exc), position) from None
        from symattn.input.formula import parse_formula

        try:
            return parse_formula(raw)
        except NumeralError as exc:  # a FormulaError, or a number inside the formula ("1e999999": its exponent)
            raise self.error(key, str(exc), position) from None

    def number(self, raw: object, key: str, position: tuple[int, ...] = (), **kw: Any) -> Numeral:
        try:
            return parse_numeral(raw, **kw)
        except NumeralError as exc:
            raise self.error(key, str(exc), position) from None

    def text(self, raw: object, key: str, limit: int, position: tuple[int, ...] = ()) -> str:
        if not isinstance(raw, str):
            raise self.error(key, f"expected a string, got {kind_of(raw)}", position)
        if not raw.strip():
            raise self.error(key, said("empty_text"), position)
        if len(raw) > limit:
            raise self.limit(key, said("longer_than", most=limit), position)
        text = normalize(raw)
        bad = unsupported_character(text)
        if bad is not None:
            raise self.error(key, bad, position)
        return text

    def title(self, raw: object, key: str) -> str:
        """Text with optional inline math ``$...$``, checked before any client sees it."""
        text = self.text(raw, key, limits.TITLE)
        problem = math_problem(text)
        if problem:
            raise self.error(key, problem)
        return text

    def per_head(self, raw: object, key: str, heads: int, not_list: str, count: str) -> list[tuple[Numeral, Any]]:
        """One number per head: a list of decimals or, in a spec file, a ``.npy`` or ``.safetensors`` file of
        ``heads`` floats (each its exact decimal); each with the error naming its place: ``key[h]`` in a list
        (1-based, as TOML lists are read), ``'file'[h]`` in a file (0-based, as numpy indexes). ``not_list``
        and ``count`` are the messages for what is neither a list nor a file, and a list of another length."""
        from symattn.input import filematrix

        if self.folder is not None and filematrix.names_file(raw):
            assert isinstance(raw, str)  # names_file
            values = filematrix.per_head(raw, key, self.source, self.folder, heads)
            return [
                (x, lambda problem, h=h: self.error(key, f"{filematrix.place(raw, (h,))}: {problem}"))
                for h, x in enumerate(values)
            ]
        if not isinstance(raw, list):
            raise self.error(key, not_list)
        if len(raw) != heads:
            raise self.error(key, count)
        return [
            (self.number(x, key, (h,)), lambda problem, h=h: self.error(key, problem, (h,)))
            for h, x in enumerate(raw, 1)
        ]

    @overload
    def vector(self, raw: object, key: str, symbolic: Literal[False] = ...) -> tuple[Numeral, ...]: ...
    @overload
    def vector(self, raw: object, key: str, symbolic: bool) -> tuple[Entry, ...]: ...
    def vector(self, raw: object, key: str, symbolic: bool = False) -> tuple[Entry, ...]:
        if not isinstance(raw, (list, tuple)) or not raw:
            raise self.error(key, f"expected a non-empty list of numbers, got {kind_of(raw)}")
        if len(raw) > limits.DIMS:
            raise self.limit(key, f"{len(raw)} entries; at most {limits.DIMS} are supported")
        read = self.entry if symbolic else self.number
        return tuple(read(x, key, (j,)) for j, x in enumerate(raw, 1))

    def labels(self, raw: object, key: str, count: int, rows_of: str, default: str = "t") -> tuple[str, ...]:
        if raw is None:
            return tuple(f"{default}{i}" for i in range(1, count + 1))
        if not isinstance(raw, (list, tuple)):
            raise self.error(key, f"expected a list of labels, got {kind_of(raw)}")
        if len(raw) != count:
            raise self.error(key, said("labels_count", n=len(raw), count=count, rows_of=rows_of))
        seen: dict[str, int] = {}
        for i, raw_label in enumerate(raw, 1):
            label = self.text(raw_label, key, limits.LABEL, (i,))  # in NFC: one label however it was typed
            if label in seen:
                raise self.error(key, said("duplicate_label", label=repr(label), key=key, first=seen[label]), (i,))
            seen[label] = i
        return tuple(seen)

    def choice(self, raw: object, key: str, options: tuple[str, ...]) -> str:
        if not isinstance(raw, str) or raw not in options:
            listed = ", ".join(repr(o) for o in options)
            raise self.error(key, f"expected one of {listed}, got {brief(raw)}{did_you_mean(raw, options)}")
        return raw

    def heading_level(self, raw: object, key: str) -> int:
        from symattn.input.choices import HEADING_LEVELS

        level = parse_index(raw)
        if level not in HEADING_LEVELS:
            raise self.error(key, f"expected a heading level 1, 2 or 3, got {brief(raw)}")
        return level

    def flag(self, raw: object, key: str) -> bool:
        if not isinstance(raw, bool):
            raise self.error(key, f"expected true or false, got {brief(raw)}")
        return raw

    def lang(self, raw: object, key: str) -> str:
        from symattn.input.languages import languages

        known = languages()
        if not (isinstance(raw, str) and raw in known):
            raise self.error(key, f"expected {' or '.join(known)}, got {brief(raw)}{did_you_mean(raw, known)}")
        return raw

    def focus(self, raw: object, tokens: tuple[str, ...], key: str) -> int:
        if isinstance(raw, str) and normalize(raw) in tokens:
            return tokens.index(normalize(raw))
        index = parse_index(raw)
        if index is not None:
            if 1 <= index <= len(tokens):
                return index - 1
            raise self.error(key, f"{brief(index)} is out of range 1..{len(tokens)}")
        known = ", ".join(tokens)
        raise self.error(key, f"no token labelled {brief(raw)}; tokens are {known}")

    def scale(self, raw: object, key: str) -> Scale:
        if raw in SCALES:
            return cast(Scale, raw)
        if isinstance(raw, str) and raw.strip() in SCALES:
            return cast(Scale, raw.strip())
        try:
            number = parse_numeral(raw)
        except RangeError as exc:  # a number past the exponents a spec takes says so, not "not exact"
            raise self.error(key, str(exc)) from None
        except NumeralError:
            raise self.error(
                key, f"expected 'sqrt', 'none' or an exact number such as '1/2', got {brief(raw)}"
            ) from None
        if number.value <= 0:
            raise self.error(key, said("must_be_positive", text=repr(number.text)))
        return number

    def subs(self, raw: object, key: str, symbols: tuple[str, ...]) -> tuple[tuple[str, Numeral], ...]:
        if not isinstance(raw, Mapping):
            raise self.error(key, f"expected a table of symbol = value, got {kind_of(raw)}")
        from symattn.input.formula import is_symbol_name

        out = []
        for name, value in raw.items():
            if not is_symbol_name(name):
                raise self.error(f"{key}.{name}", "not a symbol name (a letter, then letters, digits or _)")
            if name not in symbols:
                used = ", ".join(symbols) or "none"
                raise self.error(f"{key}.{name}", f"no entry uses this symbol; symbols: {used}")
            out.append((name, self.number(value, f"{key}.{name}")))
        return tuple(sorted(out))


def brief(raw: object) -> str:
    """A value the user gave, for a message: text and numbers as :func:`errors.brief` cuts them, else its kind."""
    if isinstance(raw, (str, int, float)):
        return shortly(raw)
    return kind_of(raw)


def did_you_mean(raw: object, options: tuple[str, ...] | list[str]) -> str:
    if not isinstance(raw, str) or len(raw) > 40:
        return ""
    import difflib  # only a misspelt key needs it

    close = difflib.get_close_matches(raw, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_keys(reader: Reader, data: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            raise reader.error(
                str(key), "unknown key; expected one of " + ", ".join(sorted(allowed)) + did_you_mean(key, allowed)
            )
