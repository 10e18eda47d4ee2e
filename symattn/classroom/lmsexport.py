"""A gradebook as the CSV an LMS's own gradebook imports: Moodle's "Import grades from CSV" and Canvas's
gradebook import ("Import" in Grades).

Moodle (``grade/import/csv``) reads the first row as the column names and maps one column to a user field
(email address, username, ID number) and each other column to a grade item, the feedback of one, or
nothing; a grade is a number, or ``-`` or nothing for no grade, and a student it cannot find stops the
whole import. So each row here names its student, the grade is a number, and the feedback (HTML, as Moodle
shows it) says what to fix first and the notes.

Canvas (``GradebookImporter``) wants its own first columns: ``Student``, ``ID``, ``SIS User ID``, ``SIS
Login ID``, ``Section``; then one column per assignment, named ``Title (id)`` (or only by its title: an
assignment of that title, else a new one), and a row ``Points Possible``. It finds a student by Canvas id,
then SIS user id, then SIS login id, then name; an empty grade changes nothing.

A student with several graded returns (or attempts) gets the highest score, as Moodle's quiz grades by
default. Returns that could not be graded, and students who returned nothing, are left out: an import
then leaves their grade as it is (``left_out`` counts them, for the command line to say).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from fractions import Fraction

from symattn.classroom.grading import Gradebook, Row
from symattn.classroom.notes import note_text
from symattn.input.errors import SpecError

CANVAS_STUDENT = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "Points Possible"
# which Canvas column holds an id of each kind: Moodle's login names and addresses are Canvas logins
_CANVAS_COLUMN = {"id": "SIS User ID", "ID number": "SIS User ID", "Email address": "SIS Login ID"}
_CANVAS_COLUMN["Username"] = "SIS Login ID"
PLACES = 6  # decimals of a grade that does not terminate sooner (31/3 as 10.333333)


def graded(book: Gradebook) -> list[Row]:
    """One row per student: the highest score of their graded returns, in the gradebook's order."""
    best: dict[str, Row] = {}
    for r in book.rows:
        if r.error is None and r.id and (r.id not in best or r.score > best[r.id].score):
            best[r.id] = r
    return list(best.values())


def left_out(book: Gradebook) -> tuple[int, int]:
    """(returns not graded, students who returned nothing) with no graded return of the student."""
    kept = {r.id for r in graded(book)}
    missing = [r for r in book.rows if r.error is not None and r.id not in kept]
    returned = sum(r.error.code == "not_returned" for r in missing if r.error is not None)
    return len(missing) - returned, returned


def left_out_line(book: Gradebook, fmt: str) -> str | None:
    """One line for the command line: whom an LMS's gradebook CSV leaves out (their grades stay as they are)."""
    from symattn.classroom.gradebook import LMS_FORMATS

    failed, missing = left_out(book) if fmt in LMS_FORMATS else (0, 0)
    said = ([f"{failed} not graded"] if failed else []) + ([f"{missing} not returned"] if missing else [])
    if not said:
        return None
    return f"{book.source}: left out of the {fmt} file, so their grades stay as they are: {' and '.join(said)}"


def grade_text(x: Fraction) -> str:
    """A score as a gradebook takes it: a plain decimal, exact where it terminates within PLACES decimals."""
    from symattn.input.decimals import round_half_up, terminating_decimals

    places = terminating_decimals(x)
    return format(round_half_up(x, PLACES if places is None or places > PLACES else places), "f")


def _identity(book: Gradebook) -> str:
    if not book.identity:
        raise SpecError(
            book.source,
            None,
            "no one column names every attempt (Email address, Username or ID number): an LMS's gradebook "
            "finds each student by one; download the responses with an identity column filled in",
        )
    return book.identity


def _title(book: Gradebook) -> str:
    return book.title or "symattn"


def moodle_grades(book: Gradebook, lang: str = "en") -> str:
    """Moodle's "Import grades from CSV": the id column, the name, the score and its feedback."""
    from symattn.input.csvfile import csv_text

    identity, title = _identity(book), _title(book)
    say = note_text(lang)
    header = (identity, "Full name", title, f"{title} (feedback)")
    # the feedback is HTML where Moodle shows it: the text escaped once
    rows = [(r.id, r.name, grade_text(r.score), html.escape(_feedback(r, say, lang), False)) for r in graded(book)]
    return csv_text(header, rows, numbers=(title,))


def _feedback(r: Row, say, lang: str) -> str:
    """The score, what to fix first, and the notes, in the gradebook's language."""
    from symattn.classroom.lmstext import plain_phrases
    from symattn.classroom.notes import Place, place_words

    t = plain_phrases(lang)
    parts = [t("grade.score", score=grade_text(r.score), asked=r.asked)]
    first = None if r.report is None else r.report.first_problem
    if first is not None:
        place = Place(first.claim.quantity, first.row_label, first.col_label, first.row_axis, first.col_axis)
        parts.append(t("grade.fix_first", place=place_words(place, lang)))
    parts += [say(n) for n in r.notes]
    return t("report.sep").join(parts)


def canvas_grades(book: Gradebook, assignment: str | None = None) -> str:
    """Canvas's gradebook import: its student columns, one assignment column and the points possible."""
    from symattn.input.csvfile import csv_text

    identity, title = _identity(book), _title(book)
    rows = graded(book)
    asked = sorted({r.asked for r in rows})
    if len(asked) > 1:
        raise SpecError(
            book.source,
            None,
            f"the students were asked {_listed(asked)} numbers: one assignment column has one points possible",
        )
    column = title if assignment is None else f"{title} ({assignment})"
    header = (*CANVAS_STUDENT, column)
    where = CANVAS_STUDENT.index(_CANVAS_COLUMN[identity])
    lines: list[tuple[str, ...]] = [(POINTS_POSSIBLE, "", "", "", "", str(asked[0]) if asked else "")]
    for r in rows:
        cells = ["", "", "", "", "", grade_text(r.score)]
        cells[0], cells[where] = r.name, r.id
        lines.append(tuple(cells))
    return csv_text(header, lines, numbers=(column,))


def _listed(numbers: Sequence[int]) -> str:
    return ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"


__all__ = [
    "CANVAS_STUDENT",
    "canvas_grades",
    "grade_text",
    "graded",
    "left_out",
    "left_out_line",
    "moodle_grades",
]
