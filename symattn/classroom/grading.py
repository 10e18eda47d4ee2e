"""Grade returned answers.toml files, each against its own student's variant, with error carried forward.

``grade(folder, index=None, template=None, policy=POLICY)`` reads every ``*.toml``
under the folder (renamed files and flat folders too: a file is matched by the
``student`` id inside it), rebuilds that student's variant from the index
(``index.csv``: id, name, seed) and the class template (``template.toml`` next to
the index), and checks the claims against the variant's own inputs.

Default policy, per asked number: exact, rounded, carried and input-rounding 1; too-coarse (fewer decimals
than the sheet asks for) and last-digit 0.5; wrong and blank 0 (an asked number missing from the file is
blank); carried from a trivial wrong answer (all zeros, all equal, a row of the inputs copied) 0.5, with a
note. The decimals asked are the sheet's, whatever the returned file says.

Bad returns never stop the batch: they are rows with an ``error`` (unreadable
TOML, no or an unknown student id, claims that do not parse), and every student
of the index with no return is a row too. Findings that still allow grading are
``notes``: edited inputs (the claims are checked against the variant's own),
decimal commas (read as a point), a second return of the same student.

The gradebook's summary counts, per step and per classic slip, the students whose
claims show it; each row keeps its check report, for feedback in the student's
own language.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from symattn.classroom.notes import INPUTS_CHANGED, Note, note_text, place_of
from symattn.classroom.roster import read_index
from symattn.classroom.template import ASKABLE
from symattn.input.decimals import round_half_up, terminating_decimals
from symattn.input.errors import SpecError, SymattnError, clip
from symattn.input.errors import shown as quoted
from symattn.input.files import read_table
from symattn.input.records import record

POLICY = {
    "exact": Fraction(1),
    "rounded": Fraction(1),
    "carried": Fraction(1),
    "input-rounding": Fraction(1),
    "too-coarse": Fraction(1, 2),
    "last-digit": Fraction(1, 2),
    "wrong": Fraction(0),
    "blank": Fraction(0),
    # a carried number whose chain starts from a trivial wrong answer (all zeros, all equal, the inputs
    # copied): the method on such numbers shows little, so it scores apart from "carried"
    "carried-trivial": Fraction(1, 2),
}
COUNTED = ("exact", "rounded", "carried", "input-rounding", "too-coarse", "last-digit", "wrong", "blank")
FORMATS = ("csv", "json", "markdown", "latex", "html", "pdf")
FEEDBACK_FORMATS = ("text", "markdown", "latex", "html", "pdf")
# the steps in the order of the derivation, for the class summary
STEPS = ASKABLE  # the steps of a sheet, in their order: the quantities a template may ask for


@record
class Row:
    """One student's line of the gradebook."""

    id: str
    name: str
    file: str
    counts: tuple[tuple[str, int], ...]  # in COUNTED order
    score: Fraction
    asked: int
    first_to_fix: str | None  # the claims key of the first wrong, last-digit or too-coarse claim
    notes: tuple[Note, ...] = ()
    error: Note | None = None
    lang: str = "en"  # the student's language: their answers file's, else the template's
    wrong: tuple[str, ...] = ()  # steps (STEPS) with a wrong claim
    slips: tuple[str, ...] = ()  # classic slips (checking.slips.SLIPS) the claims show
    report: Any = field(default=None, compare=False, repr=False)  # the check report, for feedback
    scores: tuple[tuple[str, Fraction], ...] = ()  # the score of each asked number answered, by claims key


@record
class Summary:
    """What the class got wrong: per step and per classic slip, how many students (most first)."""

    graded: int
    not_graded: int  # returns that could not be graded
    not_returned: int  # students of the index with no return
    steps: tuple[tuple[str, int], ...]
    slips: tuple[tuple[str, int], ...]
    blank: int = 0  # graded returns with no number filled in


@record
class Gradebook:
    rows: tuple[Row, ...]  # by id, then file
    policy: tuple[tuple[str, Fraction], ...] = tuple(POLICY.items())
    source: str = ""
    title: str = ""  # the exercise's title: the name of its column in an LMS's gradebook
    # what the ids are: "id" (a class's index.csv), or the column of an LMS's report that names every
    # attempt ("Email address", "Username", "ID number"); "" where none names them all
    identity: str = ""

    @property
    def summary(self) -> Summary:
        graded = [r for r in self.rows if r.error is None]

        def tally(names: Iterable[str], of: Callable[[Row], tuple[str, ...]]) -> tuple[tuple[str, int], ...]:
            counts = [(name, sum(name in of(r) for r in graded)) for name in names]
            # most first; ties in the order of the derivation (sorted() is stable)
            return tuple(sorted(((n, c) for n, c in counts if c), key=lambda x: -x[1]))

        from symattn.checking.slips import SLIPS

        missing = sum(r.error is not None and r.error.code == "not_returned" for r in self.rows)
        return Summary(
            len(graded),
            len(self.rows) - len(graded) - missing,
            missing,
            tally(STEPS, lambda r: r.wrong),
            tally(SLIPS, lambda r: r.slips),
            sum(dict(r.counts)["blank"] == sum(dict(r.counts).values()) for r in graded),
        )

    def as_data(self, lang: str = "en") -> list[dict[str, Any]]:
        say = note_text(lang)
        return [
            {
                "id": r.id,
                "name": r.name,
                "file": r.file,
                **dict(r.counts),
                "score": score_text(r.score),
                "asked": r.asked,
                "first_to_fix": r.first_to_fix,
                "notes": [say(n) for n in r.notes],
                "error": None if r.error is None else say(r.error),
                "lang": r.lang,
                "wrong_steps": list(r.wrong),
                "slips": list(r.slips),
            }
            for r in self.rows
        ]


def score_text(x: Fraction) -> str:
    """A score as a short exact decimal where it has one (10.5), else as a fraction (31/3)."""
    places = terminating_decimals(x)
    if places is None or places > 6:
        return str(x)
    return format(round_half_up(x, places), "f")


def read_policy(path: str | Path) -> dict[str, Fraction]:
    """A scoring policy from a TOML or JSON file: a score from 0 to 1 per verdict; the rest keep the default.

    For example ``"last-digit" = 0`` and ``carried = "0.5"``; ``carried-trivial`` scores the numbers
    carried from a trivial wrong answer (all zeros, all equal, the inputs copied), default ½.
    """
    from symattn.input.files import kind_of
    from symattn.input.reader import Reader

    source = str(path)
    data = read_table(path)
    reader = Reader(source)
    policy = dict(POLICY)
    for key, raw in data.items():
        if key not in POLICY:
            raise reader.error(key, "unknown verdict; expected one of " + ", ".join(POLICY))
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise reader.error(key, f"expected a score from 0 to 1, got {kind_of(raw)}")
        value = reader.number(raw, key).value
        if not 0 <= value <= 1:
            raise reader.error(key, f"expected a score from 0 to 1, got {raw}")
        policy[key] = value
    return policy


def _inputs_match(data: Mapping[str, Any], variant) -> bool:
    from symattn.input.spec import spec_from_mapping

    inline = {k: v for k, v in data.items() if k not in ("spec", "claims", "student")}
    try:
        spec = spec_from_mapping(inline, "<answers>")
    except SymattnError:
        return False
    mine = variant.spec

    def values(s):
        return [[x.value for x in row] for m in (s.Q, s.K, s.V) for row in m]

    return (
        values(spec) == values(mine)
        and spec.tokens == mine.tokens
        and spec.focus == mine.focus
        and spec.scale == mine.scale
    )


def grade_file(
    path: Path,
    template,
    index: Mapping[str, tuple[str, int]],
    shown: str,
    policy: Mapping[str, Fraction] = POLICY,
    real: str | None = None,
) -> Row:
    """One returned file against its student's own variant; a bad return is a row with an ``error``.

    ``real`` is where the file was found to lead (a link resolved inside the returns folder): that is
    what is opened, and only if it is still a regular file, not a link, as it is opened.
    """
    from symattn.classroom.variants import draw

    notes: list[Note] = []
    try:
        data = read_table(path if real is None else real, regular_only=real is not None)
    except SymattnError as exc:
        return error_row("", "", shown, Note("unreadable", text=str(exc)))
    student = data.get("student")
    if not isinstance(student, str) or not student:
        return error_row("", "", shown, Note("no_student"))
    if student not in index:
        named = quoted(clip(student))  # the return's own text: controls as escapes, never 100 KB
        return error_row(named, "", shown, Note("unknown_student", text=named))
    name, seed = index[student]
    try:
        variant = draw(template, seed, student, name)
    except SymattnError as exc:
        return error_row(student, name, shown, Note("not_checked", text=str(exc)))
    if not _inputs_match(data, variant):
        notes.append(INPUTS_CHANGED)
    row = grade_variant(data, variant, shown, policy, tuple(notes))
    if row.error is None and _untouched(row):
        # every blank still blank, as ``exercise`` wrote it: nothing was returned yet
        return error_row(student, name, shown, Note("not_returned", text=shown))
    return row


def _untouched(row: Row) -> bool:
    """Whether a graded return holds no answer: every asked number blank, and nothing written that is not one."""
    answered = sum(n for v, n in row.counts if v != "blank")
    return not answered and not any(n.code in ("not_number", "foreign_digits") for n in row.notes)


def grade_variant(data: Mapping[str, Any], variant, shown: str, policy=POLICY, found: tuple[Note, ...] = ()) -> Row:
    """The claims (``data["claims"]``; ``data["lang"]``) of the student ``variant.id`` against their variant, with
    error carried forward; ``found``: notes made before. A bad return is a row with an ``error``."""
    from symattn.checking.checker import check
    from symattn.classroom.sheets import claimed_decimals
    from symattn.input.claims import claims_from_mapping

    notes, student, name = list(found), variant.id, variant.name
    try:
        given = data.get("lang")
        lang = given if isinstance(given, str) and given in _languages() else variant.spec.document.lang
        # against the variant's own inputs: edited inputs must not change what is right; the claims'
        # errors name the return, not "<dict>"
        loaded = claims_from_mapping({"claims": data.get("claims")}, shown, spec=variant.spec, text_blank=True)

        def at(w) -> tuple:  # where a written answer stands, in the student's tokens and as its key
            return (place_of(variant.spec, w.quantity, w.row, w.col, w.key.removeprefix("claims.")),)

        # answers that are not numbers count blank, each named (as grading an LMS's report does)
        notes += [Note("foreign_digits", text=quoted(clip(w.text)), places=at(w)) for w in loaded.foreign]
        notes += [Note("not_number", text=quoted(clip(w.text)), places=at(w)) for w in loaded.unreadable]
        report = check(variant.spec, loaded, asked=claimed_decimals(variant))
        commas = loaded.commas  # read as points by the claims reader, as check reads them
        if commas:  # one note for all of them: the same habit, not one finding per claim
            many = len(commas) > 1
            notes.append(
                Note(
                    "decimal_commas" if many else "decimal_comma",
                    text=str(len(commas)) if many else commas[0].text,
                    places=at(commas[0]),
                )
            )
    except SymattnError as exc:
        return error_row(student, name, shown, Note("not_checked", text=str(exc)), tuple(notes))
    report = replace(report, lang=lang, source=shown, student=student)
    asked = {a.key for a in variant.asked}
    counts = {v: 0 for v in COUNTED}
    for v in report.results:
        counts[v.verdict] += 1
    answered = {_canonical(v) for v in report.results}
    counts["blank"] = sum(1 for a in variant.asked if a.key not in answered)
    from symattn.classroom.trivial import from_trivial as _from_trivial
    from symattn.classroom.trivial import trivial_rows

    trivial = trivial_rows(report.results, variant.spec)
    from_trivial = [v for v in report.results if _from_trivial(v, trivial)]
    carried_trivial = {id(v) for v in from_trivial}
    roots: set[int] = set()  # rows noted already: a trivial step carried from an earlier one is no new finding
    for (step, row), kind in sorted(trivial.items(), key=lambda x: (STEPS.index(x[0][0]), x[0][1])):
        later = sum(STEPS.index(_step(v)) > STEPS.index(step) and v.claim.row == row for v in from_trivial)
        if row in roots or not later:
            continue
        roots.add(row)
        if not any(x.code == f"trivial_{kind}" for x in notes):  # one note per kind
            notes.append(Note(f"trivial_{kind}", step, str(later), variant.spec.tokens[row]))
    scored: dict[str, Fraction] = {}
    for v in report.results:  # one score per asked number (the first claim of it in the derivation's order)
        scored.setdefault(_canonical(v), policy["carried-trivial" if id(v) in carried_trivial else v.verdict])
    score = sum((x for k, x in scored.items() if k in asked), Fraction(0)) + policy["blank"] * counts["blank"]
    first = report.first_problem
    wrong = {_step(v) for v in report.results if v.verdict == "wrong"}
    slips = {v.diagnosis for v in report.results if v.diagnosis}
    from symattn.checking.slips import SLIPS

    return Row(
        student,
        name,
        shown,
        tuple(counts.items()),
        score,
        len(variant.asked),
        None if first is None else _canonical(first),
        tuple(notes),
        None,
        lang,
        tuple(q for q in STEPS if q in wrong),
        tuple(s for s in SLIPS if s in slips),
        report,
        tuple((k, x) for k, x in scored.items() if k in asked),
    )


def _languages() -> list[str]:
    from symattn.input.languages import languages

    return languages()


def _step(v) -> str:
    return "weights" if v.claim.quantity == "percent" else v.claim.quantity


def _canonical(v) -> str:
    """A verdict's place as a 1-based claims key: weights[3][1]."""
    c = v.claim
    return _step(v) + "".join(f"[{i + 1}]" for i in (c.row, c.col) if i is not None)


def _is_left(row: Row) -> bool:
    """An answers file left as ``exercise`` wrote it (its row reads "not returned", naming the file)."""
    return row.error is not None and row.error.code == "not_returned" and bool(row.error.text)


def error_row(student: str, name: str, shown: str, error: Note, notes: tuple[Note, ...] = ()) -> Row:
    """A return (or an attempt) that could not be graded: no counts, score 0, the reason as its error."""
    return Row(student, name, shown, tuple((v, 0) for v in COUNTED), Fraction(0), 0, None, notes, error)


def _is_answers(path: Path) -> bool:
    # a folder named x.toml is not a return; anything else that is not a regular file is refused by _not_read
    return not path.is_dir() and path.suffix.lower() == ".toml" and path.name not in ("template.toml", "policy.toml")


def _not_read(path: Path, root: str) -> tuple[Note | None, str]:
    """Why a return is not read: a link that leads out of the returns folder, or not a regular file
    (reading a FIFO waits forever, a device never ends); and the file it leads to, the one to open."""
    real = os.path.realpath(path)
    if os.path.commonpath([real, root]) != root:
        return Note("outside", text=real), real
    try:
        info = os.stat(real)
    except OSError:
        return None, real  # a link to nothing: the reader says so
    return (None if stat.S_ISREG(info.st_mode) else Note("not_a_file")), real


def returned_files(folder: str | Path) -> list[Path]:
    """Every answers file under the folder, in a fixed order (not the template or a policy).

    Links and special files are listed too: :func:`grade` notes and skips those it must not read.
    """
    from symattn.input.errors import LimitError
    from symattn.input.limits import RETURNS

    folder = Path(folder)
    found = []
    for p in folder.rglob("*.toml"):
        if _is_answers(p):
            found.append(p)
            if len(found) > RETURNS:
                raise LimitError(str(folder), None, f"more than {RETURNS} answers files; grade fewer at a time")
    return sorted(found, key=lambda p: p.relative_to(folder).parts)


def grade(
    folder: str | Path,
    index: str | Path | None = None,
    template: str | Path | Mapping | None = None,
    policy: Mapping[str, Fraction] = POLICY,
    progress: Callable[[Sequence[Path]], Iterable[Path]] | None = None,
) -> Gradebook:
    """Grade every answers file under ``folder``; index.csv and template.toml default to the folder's own.

    ``progress`` wraps the list of files (the CLI passes a progress bar on a terminal). Under a time
    limit (the CLI's --max-seconds) each return gets its share of the time still left, and a return that
    takes longer is a row with the error ``time_limit``, named by its file.
    """
    from symattn.classroom.template import load_template
    from symattn.input.errors import LimitError
    from symattn.input.limits import alarm_guard, deadline, own_clocks

    folder = Path(folder)
    if not folder.is_dir():
        raise SpecError(str(folder), None, "not a folder of returned answers")
    index_path = Path(index) if index is not None else folder / "index.csv"
    students = read_index(index_path)
    t = load_template(template if template is not None else index_path.parent / "template.toml")
    paths = returned_files(folder)
    root = os.path.realpath(folder)
    rows = []
    with own_clocks() as budget:
        start = time.monotonic()
        for i, path in enumerate(progress(paths) if progress else paths):
            shown = path.relative_to(folder).as_posix()
            refused, real = _not_read(path, root)
            if refused:
                rows.append(error_row("", "", shown, refused))
                continue
            # each return gets its share of the time still left, so one slow return cannot starve the rest
            share = None if budget is None else max(budget - (time.monotonic() - start), 0.0) / (len(paths) - i)
            try:
                with deadline(None if share is None else max(share, 0.001), shown), alarm_guard():
                    row = grade_file(path, t, students, shown, policy, real)
            except LimitError as exc:  # alarm_guard: also where grade_file took the time limit for a bad file
                row = error_row("", "", shown, Note("time_limit", text=str(exc)))
            rows.append(row)
    returns: dict[str, int] = {}
    for r in rows:
        if r.error is None:
            returns[r.id] = returns.get(r.id, 0) + 1
    rows = [
        replace(r, notes=r.notes + (Note("duplicate", text=str(returns[r.id])),))
        if r.error is None and returns[r.id] > 1
        else r
        for r in rows
        if not _is_left(r) or r.id not in returns  # an untouched file beside a graded return is no return
    ]
    untouched = {r.id: r for r in reversed(rows) if _is_left(r)}  # one row for a student's untouched files
    rows = [r for r in rows if not _is_left(r) or untouched[r.id] is r]
    # a student of the index with no return at all is a row too: the teacher must see who is missing
    returned = {r.id for r in rows}
    rows += [
        error_row(student, name, "", Note("not_returned"))
        for student, (name, _) in students.items()
        if student not in returned
    ]
    # by id, then file; returns with no id last
    by_id = tuple(sorted(rows, key=lambda r: (not r.id, r.id, r.file)))
    return Gradebook(by_id, tuple(policy.items()), str(folder), str(dict(t.base).get("title") or ""), "id")


__all__ = [
    "COUNTED",
    "FEEDBACK_FORMATS",
    "FORMATS",
    "POLICY",
    "Gradebook",
    "Note",
    "Row",
    "Summary",
    "error_row",
    "grade",
    "grade_variant",
    "read_index",
    "read_policy",
]
