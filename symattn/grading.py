"""Grade returned answers.toml files, each against its own student's variant, with error carried forward.

``grade(folder, index=None, template=None)`` reads every ``*.toml`` under the folder
that holds a ``[claims]`` table (renamed files and flat folders too: a file is
matched by the ``student`` id inside it), rebuilds that student's variant from the
index (``index.csv``: id, name, seed) and the class template (``template.toml``
next to the index), and checks the claims against the variant's own inputs.

Default policy: exact, rounded and carried score 1; last-digit 0.5; wrong and
blank 0. An asked number missing from the file counts as blank.

Bad returns never stop the batch; they become rows with an ``error``:
unreadable TOML, a missing or unknown student id, a claims file that does not
parse. Findings that still allow grading are ``notes``: inputs edited so that
they no longer match the variant (the claims are then checked against the
variant's own inputs), numbers written with a decimal comma (read as a point).
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

from .errors import SymattnError
from .spec import read_table

POLICY = {"exact": Fraction(1), "rounded": Fraction(1), "carried": Fraction(1), "last-digit": Fraction(1, 2),
          "wrong": Fraction(0), "blank": Fraction(0)}
COUNTED = ("exact", "rounded", "carried", "last-digit", "wrong", "blank")
INPUTS_CHANGED = "inputs do not match the variant"
_COMMA = re.compile(r"\s*[-+−]?[0-9]+,[0-9]+\s*%?\s*")


@dataclass(frozen=True)
class Row:
    """One student's line of the gradebook."""

    id: str
    name: str
    file: str
    counts: tuple[tuple[str, int], ...]  # in COUNTED order
    score: Fraction
    asked: int
    first_to_fix: str | None  # the claims key of the first wrong or last-digit claim
    notes: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Gradebook:
    rows: tuple[Row, ...]  # by id, then file

    def as_data(self) -> list[dict[str, Any]]:
        return [{"id": r.id, "name": r.name, "file": r.file, **dict(r.counts), "score": _score(r.score),
                 "asked": r.asked, "first_to_fix": r.first_to_fix, "notes": list(r.notes), "error": r.error}
                for r in self.rows]


def _score(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else format(x.numerator / x.denominator, "g") \
        if x.denominator in (2, 4, 5, 10) else str(x)


def read_index(path: str | Path) -> dict[str, tuple[str, int]]:
    """id -> (name, variant seed), from index.csv."""
    from .errors import SpecError
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise SpecError(source, None, f"cannot read file: {exc.strerror or exc}") from None
    out = {}
    reader = csv.DictReader(io.StringIO(text))
    for line, row in enumerate(reader, 2):
        try:
            out[row["id"]] = (row.get("name") or "", int(row["seed"]))
        except (KeyError, TypeError, ValueError):
            raise SpecError(source, "seed", "expected the columns id, name and seed with a whole seed", (line,)) \
                from None
    return out


def _decimal_commas(table: Any, notes: list[str], key: str = "claims") -> Any:
    """Claims written with a decimal comma ("0,403"), read as "0.403"; each one noted."""
    if isinstance(table, Mapping):
        return {k: _decimal_commas(v, notes, f"{key}.{k}") for k, v in table.items()}
    if isinstance(table, list):
        return [_decimal_commas(v, notes, key) for v in table]
    if isinstance(table, str) and _COMMA.fullmatch(table):
        notes.append(f"decimal comma read as a point: {key} = {table.strip()!r}")
        return table.replace(",", ".")
    return table


def _inputs_match(data: Mapping[str, Any], variant) -> bool:
    from .spec import spec_from_mapping
    inline = {k: v for k, v in data.items() if k not in ("spec", "claims", "student")}
    try:
        spec = spec_from_mapping(inline, "<answers>")
    except SymattnError:
        return False
    mine = variant.spec

    def values(s):
        return [[x.value for x in row] for m in (s.Q, s.K, s.V) for row in m]
    return values(spec) == values(mine) and spec.tokens == mine.tokens and spec.focus == mine.focus and \
        spec.scale == mine.scale


def grade_file(path: Path, template, index: Mapping[str, tuple[str, int]], shown: str,
               policy: Mapping[str, Fraction] = POLICY) -> Row:
    from .checker import check
    from .exercises import draw
    notes: list[str] = []
    try:
        data = read_table(path)
    except SymattnError as exc:
        return _error("", "", shown, str(exc))
    student = data.get("student")
    if not isinstance(student, str) or not student:
        return _error("", "", shown, "no student id in the file (student = \"...\")")
    if student not in index:
        return _error(student, "", shown, f"unknown student id {student!r}")
    name, seed = index[student]
    try:
        variant = draw(template, seed, student, name)
        if not _inputs_match(data, variant):
            notes.append(INPUTS_CHANGED)
        claims = dict(data)
        claims["claims"] = _decimal_commas(data.get("claims"), notes)
        claims.pop("student", None)
        report = check(variant.spec, {"claims": claims["claims"]})
    except SymattnError as exc:
        return _error(student, name, shown, str(exc), tuple(notes))
    asked = {a.key for a in variant.asked}
    given = [v for v in report.results]
    counts = {v: 0 for v in COUNTED}
    for v in given:
        counts[v.verdict] += 1
    answered = {_canonical(v) for v in given}
    counts["blank"] = sum(1 for a in variant.asked if a.key not in answered)
    scored = {}
    for v in given:  # one score per asked number (the first claim of it in the derivation's order)
        scored.setdefault(_canonical(v), policy[v.verdict])
    score = sum((x for k, x in scored.items() if k in asked), Fraction(0))
    first = report.first_problem
    return Row(student, name, shown, tuple(counts.items()), score, len(variant.asked),
               None if first is None else _canonical(first), tuple(notes))


def _canonical(v) -> str:
    """A verdict's place as a 1-based claims key: weights[3][1]."""
    c = v.claim
    quantity = "weights" if c.quantity == "percent" else c.quantity
    return quantity + "".join(f"[{i + 1}]" for i in (c.row, c.col) if i is not None)


def _error(student: str, name: str, shown: str, error: str, notes: tuple[str, ...] = ()) -> Row:
    return Row(student, name, shown, tuple((v, 0) for v in COUNTED), Fraction(0), 0, None, notes, error)


def _is_answers(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".toml" and path.name != "template.toml"


def grade(folder: str | Path, index: str | Path | None = None, template: str | Path | Mapping | None = None,
          policy: Mapping[str, Fraction] = POLICY) -> Gradebook:
    """Grade every answers file under ``folder``; index.csv and template.toml default to the folder's own."""
    from .exercises import load_template
    folder = Path(folder)
    index_path = Path(index) if index is not None else folder / "index.csv"
    students = read_index(index_path)
    t = load_template(template if template is not None else index_path.parent / "template.toml")
    rows = []
    for path in sorted(p for p in folder.rglob("*.toml") if _is_answers(p)):
        shown = path.relative_to(folder).as_posix()
        rows.append(grade_file(path, t, students, shown, policy))
    return Gradebook(tuple(sorted(rows, key=lambda r: (r.id, r.file))))


def gradebook_text(book: Gradebook, fmt: str = "csv") -> str:
    """The gradebook as CSV, Markdown or JSON."""
    data = book.as_data()
    columns = ["id", "name", *COUNTED, "score", "asked", "first_to_fix", "notes", "error", "file"]
    if fmt == "json":
        return json.dumps(data, ensure_ascii=False, indent=2) + "\n"

    def cell(row: dict, c: str) -> str:
        value = row[c]
        if isinstance(value, list):
            return "; ".join(value)
        return "" if value is None else str(value)
    if fmt == "markdown":
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(cell(r, c).replace("|", "\\|") for c in columns) + " |" for r in data]
        return "\n".join(lines) + "\n"
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for r in data:
        writer.writerow([cell(r, c) for c in columns])
    return out.getvalue()


__all__ = ["COUNTED", "Gradebook", "POLICY", "Row", "grade", "gradebook_text", "read_index"]

