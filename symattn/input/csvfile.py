"""The CSV files symattn writes (the gradebook, ``index.csv``) and reads (rosters, ``index.csv``).

A spreadsheet runs a cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return as a formula, so every text cell that begins with one of them is
written with a leading ``'``, as OWASP advises. So is a cell that begins with ``'``
itself: reading then strips exactly one ``'`` and gives back the text as it was.
Numbers symattn computed itself (counts, scores) are written as they are.

Files are read as specs are: UTF-8 (a BOM allowed), at most ``limits.FILE_BYTES``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Container, Iterable, Sequence
from pathlib import Path

from symattn.input.errors import SpecError, brief
from symattn.input.files import read_text
from symattn.input.text import show_controls

_FORMULA = ("=", "+", "-", "@", "\t", "\r", "'")


def cell(text: str) -> str:
    """Text as a cell no spreadsheet runs: a leading ``'`` where it begins like a formula (or with ``'``);
    controls (a NUL, an ESC, a right-to-left override) shown as escapes."""
    text = show_controls(text)
    return "'" + text if text.startswith(_FORMULA) else text


def uncell(text: str) -> str:
    """The text of a cell that :func:`cell` wrote."""
    return text[1:] if text.startswith("'") else text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[str]], numbers: Container[str] = ()) -> str:
    """CSV with every text cell through :func:`cell`; the columns named in ``numbers`` are written as they are."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([cell(name) for name in header])
    for row in rows:
        writer.writerow([x if name in numbers else cell(x) for name, x in zip(header, row, strict=True)])
    return out.getvalue()


def read_csv(path: str | Path, what: str, quoted: bool) -> tuple[tuple[str, ...], list[dict[str, str]]]:
    """The header of a CSV file and its rows as {column: text}; a row's missing cells are left out.

    ``quoted``: the file is one symattn wrote, so every cell is read back through :func:`uncell`
    (a roster from elsewhere is read as it is).
    """
    source = str(path)
    text = read_text(path, what)
    reader = csv.DictReader(io.StringIO(text))
    try:
        rows = list(reader)
    except csv.Error as exc:
        raise SpecError(source, None, f"not a CSV file: {exc} (line {reader.line_num})") from None
    seen: dict[str, int] = {}
    for col, name in enumerate(reader.fieldnames or (), 1):  # a second "id" column would win silently
        first = seen.setdefault(name, col)
        if first != col:
            raise SpecError(source, None, f"row 1: columns {first} and {col} are both {brief(name)}; keep one")
    undo = uncell if quoted else str
    return tuple(reader.fieldnames or ()), [
        {k: undo(v) for k, v in row.items() if isinstance(k, str) and isinstance(v, str)} for row in rows
    ]


__all__ = ["cell", "csv_text", "read_csv", "uncell"]
