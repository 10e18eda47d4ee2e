"""Grade an LMS's responses with error carried forward: Moodle's "Responses" report of a quiz that
``symattn exercise --format moodle`` made.

The report (Results → Responses → Download, CSV) has a row per attempt: ``Last name`` (``Surname`` before
Moodle 4), ``First name``, the identity columns (``Email address``, ``Username``, ``ID number``), then per
question slot ``Response N`` and, with "Right answer" ticked, ``Right answer N``. Column names are matched
as Moodle's English writes them, in any case. A Cloze question's cells read
``part 1: 0.707; part 2: ; part 3: 1.2`` (the word "part" in the language of the Moodle that wrote them).

Which variant a student had is found from the right answers: each slot's ``Right answer N`` holds the
values of one variant's gaps, and no two variants of a class have the same ones (if two do, they are the
same exercise and either grades it). A slot whose right answers never match a variant (another question of
the quiz) is left alone. Each answer is then a claim of the variant's asked number, graded by
:func:`symattn.classroom.grading.grade_variant` as a returned answers file is; the note ``lms_marks`` names
the numbers whose mark differs from the LMS's own right/wrong (a number within the gap's tolerance).
"""

from __future__ import annotations

import csv
import functools
import io
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

from symattn.classroom.gaps import Gap, gaps, masked
from symattn.classroom.grading import POLICY, Gradebook, Row, error_row, grade_variant, score_text
from symattn.classroom.notes import Note, place_of
from symattn.classroom.variants import Variant
from symattn.input.errors import LimitError, SpecError, brief, clip
from symattn.input.errors import shown as quoted
from symattn.input.limits import alarm_guard, deadline, own_clocks
from symattn.input.numeral import has_foreign_digits
from symattn.input.records import record

_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:[.,][0-9]*)?|[.,][0-9]+)(?:[eE][-+]?[0-9]+)?")  # 0-9 only: not ٣
_SLOT = re.compile(r"(Response|Right answer) (\d+)")
# a part's mark at the start of a piece: words without digits, then its number and a colon; each character
# is tried once (the words stop at the first digit), so a long cell takes linear time
_PART = re.compile(r"[^\d:：]*?\b(\d+)\s*[:：] ?")
SLOT_DIGITS = 6  # digits of a question slot's number (Moodle numbers its slots 1, 2, ...)
_IDENTITY = ("Email address", "Username", "ID number")  # the first filled in for every attempt names them
# Moodle's own headers, in the order tried (Moodle 4 says "Last name" where Moodle 3 said "Surname")
_FIRST_NAME = ("First name",)
_LAST_NAME = ("Last name", "Surname")
_EMPTY = ("", "-")


@record
class Attempt:
    """One row of the report: who, and per slot the answer text of each part (None: not given)."""

    line: int  # the CSV's row number, the header being row 1
    student: str
    name: str
    responses: tuple[tuple[int, str, str], ...]  # (slot, Response cell, Right answer cell)
    identity: str = ""  # the column that names the student (Email address, Username, ID number); "" for row-N


def parts(cell: str, most: int) -> dict[int, str]:
    """``part 1: 0.707; part 2: ; part 3: 1.2`` as {1: "0.707", 2: "", 3: "1.2"}: each part is found by its
    own number in order, so a word other than "part" (another language's) reads the same. At most ``most``
    parts are looked for (the rest is the last one's text). In one pass over the ``;``-separated pieces: a
    piece that does not begin the next part belongs to the part before it."""
    texts: list[str] = []
    for piece in cell.split(";"):
        m = _PART.match(piece) if len(texts) < most else None
        if m is not None and m.group(1) == str(len(texts) + 1):
            texts.append(piece[m.end() :])
        elif texts:
            texts[-1] += ";" + piece
    return {k: text.strip() for k, text in enumerate(texts, 1)}


def _value(text: str) -> Fraction | None:
    """A number as an LMS wrote it (a decimal comma too), exactly; None if it is not one, or longer than a
    claim may be (``NUMBER_LENGTH`` characters, an exponent of at most ``CLAIM_EXPONENT``)."""
    from symattn.input.limits import CLAIM_EXPONENT, NUMBER_LENGTH

    if len(text) > NUMBER_LENGTH or not _NUMBER.fullmatch(text):
        return None
    mantissa, _, exponent = text.replace(",", ".").lower().partition("e")
    power = int(exponent or 0)
    return None if abs(power) > CLAIM_EXPONENT else Fraction(mantissa) * Fraction(10) ** power


def read_attempts(path: str | Path) -> list[Attempt]:
    """The report's rows; a malformed report is one error naming its row and column."""
    from symattn.input.files import read_text
    from symattn.input.limits import LMS_ROWS

    source = str(path)
    text = read_text(path, "an LMS responses report")
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        rows = []
        for row in reader:
            rows.append(row)
            if len(rows) > LMS_ROWS + 1:
                raise LimitError(source, None, f"more than {LMS_ROWS} rows; grade fewer attempts at a time")
    except csv.Error as exc:
        raise SpecError(source, None, f"not a CSV file: {exc} (row {reader.line_num})") from None
    if not rows:
        raise SpecError(source, None, "empty: expected Moodle's Responses report (Results → Responses → Download)")
    header = [h.strip() for h in rows[0]]
    slots = _slots(source, header)
    if not slots:
        raise SpecError(source, None, "no 'Response 1' column: expected Moodle's Responses report (CSV)")
    for slot, cols in sorted(slots.items()):
        if "Right answer" not in cols:
            raise SpecError(
                source,
                None,
                f"row 1: no column 'Right answer {slot}' beside 'Response {slot}': download the Responses "
                "report with 'Right answer' ticked, so that each attempt names its variant",
            )
        if "Response" not in cols:
            raise SpecError(source, None, f"row 1: no column 'Response {slot}' beside 'Right answer {slot}'")
    column: dict[str, int] = {}
    for col, name in enumerate(header):
        column.setdefault(name.casefold(), col)
    out = []
    for line, row in enumerate(rows[1:], 2):
        if len(row) > len(header):
            raise SpecError(source, None, f"row {line}, column {len(header) + 1}: a cell beyond the header's columns")
        row = row + [""] * (len(header) - len(row))

        def cell(*names: str, row: list[str] = row) -> str:  # the first of the names the header has
            found = next((column[n.casefold()] for n in names if n.casefold() in column), None)
            return "" if found is None else row[found].strip()

        responses = tuple(
            (slot, row[cols["Response"]], row[cols["Right answer"]].strip()) for slot, cols in sorted(slots.items())
        )
        if all(r.strip() in _EMPTY and right in _EMPTY for _, r, right in responses):
            continue  # not an attempt (an average row, or nothing answered and nothing to grade against)
        identity = next((k for k in _IDENTITY if cell(k)), "")
        student = cell(identity) if identity else f"row-{line}"
        name = " ".join(x for x in (cell(*_FIRST_NAME), cell(*_LAST_NAME)) if x)
        # the LMS's text, shown as it is in every gradebook format: controls as escapes, at most a name's length
        out.append(Attempt(line, _plain(student), _plain(name), responses, identity))
    return out


def _slots(source: str, header: list[str]) -> dict[int, dict[str, int]]:
    """{slot: {"Response": column, "Right answer": column}} from the header (0-based columns); a column
    named twice, a slot number longer than Moodle writes or more slots than ``LMS_SLOTS`` is refused."""
    from symattn.input.limits import LMS_SLOTS

    slots: dict[int, dict[str, int]] = {}
    for col, name in enumerate(header):
        m = _SLOT.fullmatch(name)
        if m is None:
            continue
        kind, digits = m.groups()
        if len(digits) > SLOT_DIGITS:  # checked before int(): Python refuses to read 4300 digits
            problem = f"{brief(name)} is no question slot (at most {SLOT_DIGITS} digits)"
            raise SpecError(source, None, f"row 1, column {col + 1}: {problem}")
        columns = slots.setdefault(int(digits), {})
        if kind in columns:
            raise SpecError(
                source, None, f"row 1: columns {columns[kind] + 1} and {col + 1} are both {brief(name)}; keep one"
            )
        if len(slots) > LMS_SLOTS:
            raise LimitError(
                source,
                None,
                f"row 1, column {col + 1}: more than {LMS_SLOTS} question slots (the limit of a responses report)",
            )
        columns[kind] = col
    return slots


def _plain(text: str) -> str:
    from symattn.input.limits import STUDENT_NAME

    return quoted(clip(text, STUDENT_NAME))


def grade_lms(path: str | Path, variants: Sequence[Variant], policy: Mapping[str, Fraction] = POLICY) -> Gradebook:
    """Grade every attempt of the report against the variant its right answers name."""
    source = str(path)
    attempts = read_attempts(path)
    gaps_of = {v.id: gaps(v, with_slips=False) for v in variants}
    by_right: dict[tuple[Fraction, ...], Variant] = {}
    for v in variants:
        by_right.setdefault(tuple(Fraction(g.value) for g in gaps_of[v.id]), v)

    most = 1 + max((len(g) for g in gaps_of.values()), default=0)  # one more: a longer cell matches none

    @functools.cache  # a class shares a few variants: each right-answer cell is read once
    def variant_of(right: str) -> Variant | None:
        given = parts(right, most)
        values = [_value(given[k]) for k in sorted(given)]
        if not values or any(x is None for x in values) or sorted(given) != list(range(1, len(values) + 1)):
            return None
        return by_right.get(tuple(x for x in values if x is not None))

    ours = {slot for a in attempts for slot, _, right in a.responses if variant_of(right) is not None}
    if not ours:
        raise SpecError(
            source,
            None,
            "no 'Right answer' matches a variant of the template with this --seed and --count (or --roster)",
        )
    work = []
    for a in attempts:
        for slot, response, right in a.responses:
            if slot not in ours or (response.strip() in _EMPTY and right in _EMPTY):
                continue
            variant = variant_of(right)
            if variant is None:
                raise SpecError(
                    source,
                    None,
                    f"row {a.line}, column 'Right answer {slot}': matches no variant of the template with this "
                    "--seed and --count (or --roster)",
                )
            work.append((a, slot, response, variant))
    shown_masked = {v.id: masked(v) for v in {v.id: v for *_, v in work}.values()}
    rows = []
    with own_clocks() as budget:
        start = time.monotonic()
        for i, (a, slot, response, variant) in enumerate(work):
            shown = f"row {a.line}" + (f", response {slot}" if len(ours) > 1 else "")
            # each attempt gets its share of the time still left, as each return does in grade
            share = None if budget is None else max(budget - (time.monotonic() - start), 0.0) / (len(work) - i)
            where = f"{source}: row {a.line}, column 'Response {slot}'"
            try:
                with deadline(None if share is None else max(share, 0.001), where), alarm_guard():
                    row = _grade_attempt(
                        a, variant, gaps_of[variant.id], shown_masked[variant.id], response, shown, policy
                    )
            except LimitError as exc:
                row = error_row(a.student, a.name, shown, Note("time_limit", text=str(exc)))
            rows.append(row)
    returns: dict[str, int] = {}
    for r in rows:
        returns[r.id] = returns.get(r.id, 0) + 1
    rows = [
        replace(r, notes=r.notes + (Note("duplicate", text=str(returns[r.id])),)) if returns[r.id] > 1 else r
        for r in rows
    ]
    kinds = {a.identity for a, *_ in work}
    identity = kinds.pop() if len(kinds) == 1 else ""  # one column names every attempt, or none does
    title = variants[0].spec.document.title or ""
    return Gradebook(tuple(sorted(rows, key=lambda r: (r.id, r.file))), tuple(policy.items()), source, title, identity)


def _grade_attempt(
    a: Attempt,
    v: Variant,
    the_gaps: Sequence[Gap],
    minus_infinity: Sequence[str],
    response: str,
    shown: str,
    policy: Mapping[str, Fraction],
) -> Row:
    given = parts(response, len(the_gaps)) if response.strip() not in _EMPTY else {}
    claims = {key: "-inf" for key in minus_infinity}  # masked: shown in the quiz as given, never asked
    notes = []
    lms: dict[str, Fraction] = {}  # the LMS's own mark of each asked number: 1 within the tolerance, else 0
    places = {}  # each asked number in words, and its part of the question
    for k, g in enumerate(the_gaps, 1):
        text = given.get(k, "")
        value = _value(text) if text not in _EMPTY else None
        lms[g.asked.key] = Fraction(int(value is not None and g.accepts(value)))
        places[g.asked.key] = place_of(v.spec, g.asked.quantity, g.asked.row, g.asked.col, part=k)
        if value is not None:
            claims[g.asked.key] = text
        elif text not in _EMPTY:
            code = "foreign_digits" if has_foreign_digits(text) else "not_number"
            notes.append(Note(code, text=quoted(clip(text)), places=(places[g.asked.key],)))
    row = grade_variant({"claims": claims}, replace(v, id=a.student, name=a.name), shown, policy, tuple(notes))
    if row.error is not None:
        return row
    # a number is found in the LMS's report by its part, not by an answers file's key
    parted = [replace(n, places=tuple(places.get(p.key, p) for p in n.places)) for n in row.notes]
    row = replace(row, notes=tuple(parted))
    ours = dict(row.scores)
    changed = [key for key in lms if ours.get(key, policy["blank"]) != lms[key]]
    if changed:
        total = score_text(sum(lms.values(), Fraction(0)))
        marks = Note("lms_marks", text=f"{total}/{len(lms)}", places=tuple(places[key] for key in changed))
        row = replace(row, notes=row.notes + (marks,))
    return row


__all__ = ["Attempt", "grade_lms", "parts", "read_attempts"]
