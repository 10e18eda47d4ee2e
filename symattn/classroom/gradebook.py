"""The gradebook as a file (CSV, JSON, Markdown, LaTeX, HTML, PDF) and each student's feedback."""

from __future__ import annotations

import json
from collections.abc import Sequence

from symattn.classroom.grading import COUNTED, Gradebook, Row, note_text, score_text

CSV_COLUMNS = ("id", "name", *COUNTED, "score", "asked", "first_to_fix", "notes", "error", "file")
CSV_NUMBERS = (*COUNTED, "score", "asked")  # our own numbers: never quoted (a negative score stays a number)
LMS_FORMATS = ("moodle-grades", "canvas-grades")


def gradebook_text(book: Gradebook, fmt: str = "csv", lang: str = "en") -> str:
    """The gradebook as CSV (one row per student), JSON (rows, summary, policy), Markdown or LaTeX."""
    if fmt == "json":
        summary = book.summary
        data = {
            "students": book.as_data(lang),
            "summary": {
                "graded": summary.graded,
                "not_graded": summary.not_graded,
                "not_returned": summary.not_returned,
                "steps": dict(summary.steps),
                "slips": dict(summary.slips),
            },
            "policy": {k: score_text(v) for k, v in book.policy},
        }
        return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    if fmt == "csv":
        from symattn.input.csvfile import csv_text

        rows = (
            [("; ".join(r[c]) if isinstance(r[c], list) else "" if r[c] is None else str(r[c])) for c in CSV_COLUMNS]
            for r in book.as_data(lang)
        )
        return csv_text(CSV_COLUMNS, rows, numbers=CSV_NUMBERS)
    if fmt in ("markdown", "latex"):
        from symattn.input.choices import default_paper
        from symattn.rendering.environment import render_template
        from symattn.rendering.renderer import latex_setup

        texts = [r.name for r in book.rows] + [r.id for r in book.rows] + [book.source]
        # the labels each "fix first" names: a script among them needs its font's macro (\symattnhangul)
        firsts = [r.report.first_problem for r in book.rows if r.first_to_fix and r.report is not None]
        texts += [str(label) for v in firsts if v is not None for label in (v.row_label, v.col_label) if label]
        return render_template(
            "gradebook",
            fmt,
            lang,
            b=book,
            summary=book.summary,
            say=note_text(lang),
            score=score_text,
            paper=default_paper(lang),
            cjk_font=None,
            report=True,
            **latex_setup(texts, lang),
        )
    raise ValueError(f"unknown gradebook format {fmt!r}")


def gradebook_document(
    book: Gradebook, fmt: str = "csv", lang: str = "en", assignment: str | None = None
) -> str | bytes:
    """The gradebook in any of FORMATS: HTML is one offline page, PDF is compiled from the LaTeX; moodle-grades
    and canvas-grades are the CSV each LMS's gradebook imports (``assignment``: Canvas's assignment id)."""
    if fmt in LMS_FORMATS:
        from symattn.classroom.lmsexport import canvas_grades, moodle_grades

        return moodle_grades(book, lang) if fmt == "moodle-grades" else canvas_grades(book, assignment)
    if fmt == "html":
        from symattn.rendering.html import page

        return page(gradebook_text(book, "markdown", lang), lang, layout="gradebook")
    if fmt == "pdf":
        from symattn.rendering.export import pdf

        return pdf(gradebook_text(book, "latex", lang), lang, fit_last_page=True)
    return gradebook_text(book, fmt, lang)


def feedback(row: Row, fmt: str = "markdown") -> str | bytes:
    """A student's check report, in the student's language (the same renderer as ``symattn check``)."""
    if row.report is None:
        raise ValueError(f"{row.file}: not graded, so there is no report")
    if fmt == "html":
        from symattn.rendering.html import report_page

        return report_page(row.report)
    from symattn.rendering.renderer import render_report

    if fmt == "pdf":
        from symattn.rendering.export import pdf

        return pdf(render_report(row.report, "latex", standalone=True), row.report.lang, fit_last_page=True)
    return render_report(row.report, fmt, standalone=fmt == "latex")


def nothing_graded(book: Gradebook, returns: str = "answers file") -> str | None:
    """One line when a gradebook holds no number to grade: the returns (``answers file`` or ``attempt``) are
    not filled in yet, or there are none. The CLI says it and still exits 0: the gradebook is written and
    true (every number blank), and nothing failed."""
    s = book.summary
    if s.graded and s.blank == s.graded and not s.not_graded:
        plural = "s" if s.graded > 1 else ""
        return f"{book.source}: {s.graded} {returns}{plural}, none filled in yet: every asked number is blank"
    left = sum(r.error is not None and r.error.code == "not_returned" and bool(r.error.text) for r in book.rows)
    if not s.graded and not s.not_graded and left:  # answers files as ``exercise`` wrote them, and no other
        plural = "s" if left > 1 else ""
        return f"{book.source}: {left} {returns}{plural}, none filled in yet: every asked number is blank"
    if not s.graded and not s.not_graded and s.not_returned:
        students = f"{s.not_returned} student" + ("s" if s.not_returned > 1 else "")
        return f"{book.source}: no {returns}s returned yet ({students} in the index)"
    return None


FEEDBACK_EXTENSIONS = {"text": "txt", "markdown": "md", "latex": "tex", "html": "html", "pdf": "pdf"}


def feedback_files(book: Gradebook, fmt: str = "markdown") -> tuple[tuple[str, str | bytes], ...]:
    """(file name, content) of every graded student's feedback: ``<id>.<ext>``, ``<id>-2.<ext>`` for a second return."""
    from symattn.classroom.roster import check_student_id

    out = []
    seen: dict[str, int] = {}
    for i, r in enumerate(book.rows, 1):
        if r.report is None:
            continue
        check_student_id(r.id, book.source or "<gradebook>", "id", i)  # it names a file
        seen[r.id] = seen.get(r.id, 0) + 1
        suffix = "" if seen[r.id] == 1 else f"-{seen[r.id]}"
        out.append((f"{r.id}{suffix}.{FEEDBACK_EXTENSIONS[fmt]}", feedback(r, fmt)))
    return tuple(out)


def write_feedback(files: Sequence[tuple[str, str | bytes]], folder: str, force: bool = False) -> None:
    """Feedback files (see :func:`feedback_files`) into ``folder``, never outside it.

    A folder that already holds files is refused unless ``force``: they may be feedback already sent.
    """
    from symattn.rendering.output import check_folder, write_files

    check_folder(folder, force, "earlier feedback", "the feedback")
    write_files(folder, list(files))


__all__ = [
    "CSV_COLUMNS",
    "feedback",
    "feedback_files",
    "gradebook_document",
    "gradebook_text",
    "nothing_graded",
    "write_feedback",
]
