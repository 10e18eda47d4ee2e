"""grade --format moodle-grades|canvas-grades: the CSV each LMS's own gradebook imports, read back as its
importer reads it (Moodle's grade/import/csv load_data.php, Canvas's GradebookImporter), and the names of
Moodle's responses report in the headers it has written ("Surname" before Moodle 4, "Last name" since)."""

from __future__ import annotations

import csv
import io
import re
from fractions import Fraction

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom.gaps import gaps
from symattn.classroom.grading import COUNTED, Gradebook, Row
from symattn.classroom.lmsexport import canvas_grades, grade_text
from symattn.cli.commands import main
from symattn.input.errors import SpecError

from .test_exercise import HOMEWORK, key_numbers
from .test_grade import fill, outputs_from, without_scaling
from .test_lms import summary

TITLE = "Homework 3: attention by hand"


@pytest.fixture(scope="module")
def quiz_class():
    return ex.exercise(HOMEWORK, ["s01", "s02", "s03"], 1)


def responses(quiz_class, surname="Last name") -> str:
    """Moodle's Responses report: Ada right; Ben twice, first without the scaling, then right; Cy's answers
    are a decimal comma, a blank and text."""
    v1, v2, v3 = quiz_class
    right = {v.id: summary(format(g.value, "f") for g in gaps(v)) for v in quiz_class}
    keys = [a.key for a in v1.asked]
    slipped = without_scaling(v2, key_numbers(v2))
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow([surname, "First name", "Email address", "State", "Grade/11.00", "Response 1", "Right answer 1"])
    w.writerow(
        ["Ng", "Ada", "ada@example.org", "Finished", "", summary(key_numbers(v1)[k] for k in keys), right["s01"]]
    )
    w.writerow(["Okafor", "Ben", "ben@example.org", "Finished", "", summary(slipped[k] for k in keys), right["s02"]])
    w.writerow(
        ["Okafor", "Ben", "ben@example.org", "Finished", "", summary(key_numbers(v2)[k] for k in keys), right["s02"]]
    )
    w.writerow(["Wu", "Cy", "cy@example.org", "Finished", "", "part 1: 0,71; part 2: ; part 3: abc", right["s03"]])
    return out.getvalue()


def grade(tmp_path, capsys, text: str, fmt: str, *more: str) -> tuple[int, str, str]:
    path = tmp_path / "responses.csv"
    path.write_text(text, encoding="utf-8")
    args = ["grade", "--lms-csv", str(path), "--template", str(HOMEWORK), "--seed", "1", "--count", "3"]
    code = main([*args, "--format", fmt, *more])
    out, err = capsys.readouterr()
    return code, out, err


# --- Moodle: Grades → Import → CSV file ------------------------------------------------------------------


def moodle_import(text: str, mapfrom: str, grade_column: str) -> dict[str, float | None]:
    """What Moodle's CSV grade import takes from the file: the header (trimmed, one name per column), every
    line as long as the header (csvweirdcolumns), a line of one field skipped, the student found by the
    "Map from" column (an empty one stops the import: usermappingerrorusernotfound), a grade that is "" or
    "-" (none) or a number (unformat_float) no more than gradepointmax (100)."""
    rows = list(csv.reader(io.StringIO(text)))
    header = [h.strip() for h in rows[0]]
    assert len(set(header)) == len(header) >= 2
    grades: dict[str, float | None] = {}
    for line in rows[1:]:
        assert len(line) == len(header)
        if len(line) <= 1:
            continue
        cells = dict(zip(header, (x.strip() for x in line), strict=True))
        student, value = cells[mapfrom], cells[grade_column]
        assert student, "Moodle stops the whole import at a row it cannot map to a user"
        grades[student] = None if value in ("", "-") else float(value)
        assert grades[student] is None or 0 <= grades[student] <= 100
    return grades


def test_moodle_grades_csv_as_moodles_importer_reads_it(tmp_path, capsys, quiz_class):
    code, out, err = grade(tmp_path, capsys, responses(quiz_class), "moodle-grades")
    assert (code, err) == (0, "")
    assert list(csv.reader(io.StringIO(out))) == [
        ["Email address", "Full name", TITLE, f"{TITLE} (feedback)"],
        ["ada@example.org", "Ada Ng", "11", "11/11"],
        # the better of Ben's two attempts, as Moodle's quiz grades by default
        ["ben@example.org", "Ben Okafor", "11", "11/11; returned 2 times; each return is graded"],
        [
            "cy@example.org",
            "Cy Wu",
            "0",
            "0/11; fix first: score S (sat, the); score S (sat, sat) [part 3]: 'abc' is not a number; counted "
            "blank; decimal comma read as a point: score S (sat, the) [part 1] = '0,71'",
        ],
    ]
    assert moodle_import(out, "Email address", TITLE) == {
        "ada@example.org": 11.0,
        "ben@example.org": 11.0,
        "cy@example.org": 0.0,
    }


def test_moodle_feedback_is_html_escaped_once(tmp_path, capsys, quiz_class):
    text = responses(quiz_class).replace("part 3: abc", "part 3: <b>&")
    code, out, _ = grade(tmp_path, capsys, text, "moodle-grades")
    feedback = list(csv.reader(io.StringIO(out)))[3][3]
    assert "score S (sat, sat) [part 3]: '&lt;b&gt;&amp;' is not a number; counted blank" in feedback


@pytest.mark.parametrize("surname", ["Surname", "Last name", "LAST NAME"])
def test_the_surname_is_read_under_each_of_moodles_headers(tmp_path, capsys, quiz_class, surname):
    code, out, _ = grade(tmp_path, capsys, responses(quiz_class, surname), "csv")
    assert [row[1] for row in csv.reader(io.StringIO(out))][1:] == ["Ada Ng", "Ben Okafor", "Ben Okafor", "Cy Wu"]


def test_attempts_named_by_different_columns_are_refused(tmp_path, capsys, quiz_class):
    text = responses(quiz_class).replace("Email address", "Username", 1)
    lines = text.splitlines(keepends=True)
    lines[1] = lines[1].replace("ada@example.org", "")  # Ada's row: no username, so her row is row-2
    code, _, err = grade(tmp_path, capsys, "".join(lines), "moodle-grades")
    assert code == 2
    assert err == (
        f"symattn: {tmp_path / 'responses.csv'}: no one column names every attempt (Email address, Username or ID "
        "number): an LMS's gradebook finds each student by one; download the responses with an identity column "
        "filled in\n"
    )


# --- Canvas: Grades → Import -----------------------------------------------------------------------------


def canvas_import(text: str) -> tuple[dict[str, str], str, dict[tuple[str, str], str]]:
    """What Canvas's GradebookImporter takes: the header (row[0] holds "Student", row[1] "ID"; then "SIS User
    ID" and "SIS Login ID", and "Section" last of the student columns), the "Points Possible" row, and per
    student (found by ID, SIS User ID, SIS Login ID, then name) the grade of each assignment column."""
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3])
    assert "Section" in header[4]
    assignments = header[5:]
    points: dict[str, str] = {}
    grades: dict[tuple[str, str], str] = {}
    for row in rows[1:]:
        if "Points Possible" in row[0]:
            points = dict(zip(assignments, row[5:], strict=True))
            continue
        student = row[1] or (f"sis:{row[2]}" if row[2] else f"login:{row[3]}" if row[3] else f"name:{row[0]}")
        for name, grade in zip(assignments, row[5:], strict=True):
            grades[student, name] = grade
    match = re.fullmatch(r"(.*)\s\((\d+)\)", assignments[0])  # Assignment.title_and_id
    return points, match.group(2) if match else "", grades


def test_canvas_grades_csv_as_canvass_importer_reads_it(tmp_path, capsys, quiz_class):
    code, out, err = grade(tmp_path, capsys, responses(quiz_class), "canvas-grades", "--assignment-id", "4521")
    assert (code, err) == (0, "")
    assert list(csv.reader(io.StringIO(out))) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{TITLE} (4521)"],
        ["Points Possible", "", "", "", "", "11"],
        ["Ada Ng", "", "", "ada@example.org", "", "11"],
        ["Ben Okafor", "", "", "ben@example.org", "", "11"],
        ["Cy Wu", "", "", "cy@example.org", "", "0"],
    ]
    points, assignment, grades = canvas_import(out)
    assert (points, assignment) == ({f"{TITLE} (4521)": "11"}, "4521")
    assert grades[("login:cy@example.org", f"{TITLE} (4521)")] == "0"


def test_a_class_folder_to_canvas_by_sis_user_id(tmp_path, capsys, quiz_class):
    out_dir = tmp_path / "class"
    assert main(["exercise", str(HOMEWORK), "--count", "3", "--seed", "1", "-o", str(out_dir)]) == 0
    v = {x.id: x for x in quiz_class}
    (out_dir / "s01" / "answers.toml").write_text(fill(v["s01"], key_numbers(v["s01"])), encoding="utf-8")
    third = outputs_from(v["s02"], dict(key_numbers(v["s02"]), **{"weights[3][1]": "0.20"}))  # too coarse: ½
    (out_dir / "s02" / "answers.toml").write_text(fill(v["s02"], third), encoding="utf-8")
    (out_dir / "s03" / "answers.toml").unlink()
    capsys.readouterr()
    assert main(["grade", str(out_dir), "--format", "canvas-grades"]) == 0
    out, err = capsys.readouterr()
    assert list(csv.reader(io.StringIO(out))) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", TITLE],
        ["Points Possible", "", "", "", "", "11"],
        ["", "", "s01", "", "", "11"],
        ["", "", "s02", "", "", "10.5"],
    ]
    assert (
        err
        == f"symattn: {out_dir}: left out of the canvas-grades file, so their grades stay as they are: 1 not returned\n"
    )
    points, assignment, grades = canvas_import(out)
    assert (points, assignment, grades[("sis:s02", TITLE)]) == ({TITLE: "11"}, "", "10.5")


def test_assignment_id_goes_with_canvas_grades_only(tmp_path, capsys, quiz_class):
    for fmt, given in (("moodle-grades", "4521"), ("canvas-grades", "45x")):
        code, _, err = grade(tmp_path, capsys, responses(quiz_class), fmt, "--assignment-id", given)
        assert (code, err) == (
            2,
            "symattn: --assignment-id takes the digits of a Canvas assignment's id, with --format canvas-grades\n",
        )


@pytest.mark.parametrize(
    "score, text", [(Fraction(21, 2), "10.5"), (Fraction(31, 3), "10.333333"), (Fraction(11), "11")]
)
def test_a_grade_is_a_plain_decimal(score, text):
    assert grade_text(score) == text


def test_one_column_has_one_points_possible():
    rows = tuple(
        Row(i, "", f"{i}.toml", tuple((v, 0) for v in COUNTED), Fraction(1), n, None) for i, n in (("a", 11), ("b", 12))
    )
    with pytest.raises(SpecError) as info:
        canvas_grades(Gradebook(rows, source="class", title="T", identity="id"))
    assert (
        str(info.value)
        == "class: the students were asked 11 and 12 numbers: one assignment column has one points possible"
    )


# --- the HTML gradebook in Chromium --------------------------------------------------------------------


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_html_gradebook_shows_every_column_at_1000_px(tmp_path, capsys, quiz_class, lang):
    from .conftest import chromium_driver

    code, _, err = grade(
        tmp_path, capsys, responses(quiz_class), "html", "--lang", lang, "-o", str(tmp_path / "book.html")
    )
    assert (code, err) == (0, "")
    driver = chromium_driver(window="1000,800", scrollbars=False)
    try:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1000, "height": 800, "deviceScaleFactor": 1, "mobile": False},
        )
        driver.get((tmp_path / "book.html").as_uri())
        shown = driver.execute_script(
            "const th = Array.from(document.querySelectorAll('table')[0].querySelectorAll('th'));"
            "return {width: innerWidth, page: document.documentElement.scrollWidth,"
            " heads: th.map(h => [h.innerText.replace(/\\s+/g, ' '), Math.ceil(h.getBoundingClientRect().right)])};"
        )
    finally:
        driver.quit()
    assert (shown["width"], shown["page"]) == (1000, 1000)
    heads = dict(shown["heads"])
    score, fix = {"en": ("score", "fix first"), "zh": ("得分", "先改")}[lang]
    assert heads[score] <= 1000 and heads[fix] <= 1000
    assert max(heads.values()) <= 1000
