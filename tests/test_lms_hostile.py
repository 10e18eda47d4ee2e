"""Moodle's responses report from a hostile hand (issue 28): long cells, wide and duplicated headers,
huge slot numbers, digits of other scripts, a FIFO. Each is graded in linear time or refused in one line
that names the CSV, row and column."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom.gaps import gaps
from symattn.classroom.grading import note_text
from symattn.classroom.lmsgrade import grade_lms, parts
from symattn.input.errors import SpecError

from .test_lms import HOMEWORK, responses_csv, summary

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quiz_class():
    return ex.exercise(HOMEWORK, ["s01", "s02", "s03"], 1)


@pytest.fixture(scope="module")
def right(quiz_class):
    return summary(format(g.value, "f") for g in gaps(quiz_class[0]))


def test_a_megabyte_of_spaces_after_a_part_is_read_in_one_pass():
    # the old pattern backtracked over the spaces once per space: hours for this cell
    assert parts("part 1: 1;" + " " * 1_000_000, 12) == {1: "1;"}
    assert parts("part 1: 0.5; part 2:" + " " * 1_000_000 + "7; part 3: 1", 12) == {1: "0.5", 2: "7", 3: "1"}
    assert parts("Teil 1: 1;2; Teil 2: 3", 2) == {1: "1;2", 2: "3"}  # a ';' inside an answer stays in it
    assert parts("x; part 1: 4; part 10: 5; part 2: 6", 12) == {1: "4; part 10: 5", 2: "6"}
    assert parts("part 1: 1; part 2: 2; part 3: 3", 2) == {1: "1", 2: "2; part 3: 3"}


def test_a_100_kb_cell_is_graded(tmp_path, quiz_class, right):
    path = tmp_path / "r.csv"
    path.write_text(responses_csv([("A", "B", "a@x", "part 1: 1;" + " " * 100_000, right)]), encoding="utf-8")
    (row,) = grade_lms(path, quiz_class).rows
    assert dict(row.counts)["blank"] == 11
    assert [note_text("en")(n) for n in row.notes] == [
        "score S (sat, the) [part 1]: '1;' is not a number; counted blank"
    ]


def report(tmp_path, header, cells):
    path = tmp_path / "r.csv"
    path.write_text(",".join(header) + "\n" + ",".join(cells) + "\n", encoding="utf-8")
    return path


def refused(path, quiz_class):
    with pytest.raises(SpecError) as info:
        grade_lms(path, quiz_class)
    return str(info.value)


def test_ten_thousand_response_columns_are_refused_at_once(tmp_path, quiz_class, right):
    header = ["Surname"] + [f"{kind} {k}" for k in range(1, 10_001) for kind in ("Response", "Right answer")]
    path = report(tmp_path, header, ["A"] + [f'"{right}"'] * 20_000)
    assert refused(path, quiz_class) == (
        f"{path}: row 1, column 202: more than 100 question slots (the limit of a responses report)"
    )


def test_a_duplicated_response_column_names_both(tmp_path, quiz_class, right):
    path = report(tmp_path, ["Surname", "Response 1", "Right answer 1", "Response 1"], ["A", "x", f'"{right}"', "y"])
    assert refused(path, quiz_class) == f"{path}: row 1: columns 2 and 4 are both 'Response 1'; keep one"


def test_a_slot_number_of_ten_thousand_digits_is_counted_before_int(tmp_path, quiz_class, right):
    name = "Response " + "9" * 10_000
    path = report(tmp_path, ["Surname", "Response 1", "Right answer 1", name], ["A", "x", f'"{right}"', "y"])
    assert refused(path, quiz_class) == (
        f"{path}: row 1, column 4: 'Response {'9' * 41}…' is no question slot (at most 6 digits)"
    )


def test_arabic_indic_digits_count_blank_and_the_rest_is_graded(tmp_path, quiz_class, right):
    values = [format(g.value, "f") for g in gaps(quiz_class[0])]
    answers = summary(["٣.٥", *values[1:]])
    path = tmp_path / "r.csv"
    path.write_text(responses_csv([("A", "B", "a@x", answers, right)]), encoding="utf-8")
    (row,) = grade_lms(path, quiz_class).rows
    assert (row.error, dict(row.counts)["blank"], row.score) == (None, 1, 10)
    assert note_text("en")(row.notes[0]) == (
        "score S (sat, the) [part 1]: '٣.٥' is not a number in ASCII digits (write 3.5); counted blank"
    )


def test_a_fifo_as_the_report_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "r.csv"
    os.mkfifo(fifo)
    # in a child process with a time limit: opening a FIFO for reading waits for a writer
    args = ["grade", "--lms-csv", str(fifo), "--template", str(HOMEWORK), "--seed", "1", "--count", "3"]
    done = subprocess.run(
        [sys.executable, "-m", "symattn", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert (done.returncode, done.stderr) == (2, f"symattn: {fifo}: not a regular file\n")


def test_an_attempt_past_its_share_of_the_time_is_a_row_naming_the_csv_row_and_column(
    tmp_path, quiz_class, right, monkeypatch
):
    from contextlib import contextmanager

    from symattn.classroom import lmsgrade
    from symattn.input.errors import LimitError

    @contextmanager
    def rung(seconds, what):  # the alarm of the attempt's own deadline, at once
        raise LimitError(what, None, "took longer than 0.001 s (the time limit; raise it with --max-seconds)")
        yield

    monkeypatch.setattr(lmsgrade, "deadline", rung)
    path = tmp_path / "r.csv"
    path.write_text(responses_csv([("A", "B", "a@x", right, right)]), encoding="utf-8")
    (row,) = grade_lms(path, quiz_class).rows
    assert note_text("en")(row.error) == (
        f"not graded: {path}: row 2, column 'Response 1': took longer than 0.001 s (the time limit; raise it with "
        "--max-seconds)"
    )


def test_controls_in_names_and_ids_are_shown_as_escapes_in_every_format(tmp_path, quiz_class, right):
    from symattn.classroom.gradebook import gradebook_document

    path = tmp_path / "r.csv"
    rows = [("Nul\x00x", "Esc\x1b[31m", "a\x00@x\x1b", right, right), ("B\u202eidi", "\x7f", "b@x", right, right)]
    path.write_text(responses_csv(rows), encoding="utf-8")
    book = grade_lms(path, quiz_class)
    assert [(r.id, r.name) for r in book.rows] == [
        ("a\\x00@x\\x1b", "Esc\\x1b[31m Nul\\x00x"),
        ("b@x", "\\x7f B\\u202eidi"),
    ]
    csv_lines = gradebook_document(book, "csv").splitlines()
    assert [line.split(",")[:2] for line in csv_lines[1:]] == [
        ["a\\x00@x\\x1b", "Esc\\x1b[31m Nul\\x00x"],
        ["b@x", "\\x7f B\\u202eidi"],
    ]
    for fmt in ("markdown", "latex", "html", "json"):
        text = gradebook_document(book, fmt)
        assert not any(ch in text for ch in "\x00\x1b\x7f\u202e"), fmt
    pdf = tmp_path / "book.pdf"
    pdf.write_bytes(gradebook_document(book, "pdf"))  # a NUL stopped xelatex ("invalid character")
    shown = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert all(piece in shown for piece in ("a\\x00@x\\x1b", "Esc\\x1b[31m", "Nul\\x00x", "\\x7f B\\u202eidi"))


def test_the_escapes_of_each_format():
    from symattn.rendering.escape import escape_latex, escape_markdown, escape_text

    # user text is one line: a tab or a line break (a file's name in a note) is shown as its escape too
    text = "a\x00b\x1bc\u202ed\x85e\tf\ng"
    assert escape_latex(text) == (
        "a\\textbackslash{}x00b\\textbackslash{}x1bc\\textbackslash{}u202ed\\textbackslash{}x85e"
        "\\textbackslash{}tf\\textbackslash{}ng"
    )
    assert escape_markdown(text) == "a\\\\x00b\\\\x1bc\\\\u202ed\\\\x85e\\\\tf\\\\ng"
    assert escape_text(text) == "a\\x00b\\x1bc\\u202ed\\x85e\\tf\\ng"
