"""Files stay where they belong: CSV cells no spreadsheet runs, returns read only from inside their folder,
feedback only into its own, rosters and indexes read bounded and as UTF-8 (issue 16, part 3)."""

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom.gradebook import feedback_files, gradebook_text
from symattn.classroom.grading import COUNTED, Gradebook, Row, grade, read_index
from symattn.cli.commands import main
from symattn.input.csvfile import cell, uncell
from symattn.input.errors import OutputError, SpecError
from symattn.rendering.output import write_files

from .test_exercise import HOMEWORK

ROOT = Path(__file__).resolve().parent.parent
NAMES = {"ann": "=cmd|' /C calc'!A0", "bo": "-1", "cy": "'quoted", "di": "@SUM(A1)", "ed": "+1", "fay": "Fay Lin"}
ID_RULE = "expected an id of at most 64 letters, digits, '.', '_' or '-', starting with a letter or digit, got"


def fails(capsys, *argv):
    """Exit 2 and one line on stderr, no traceback: the line."""
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("symattn: ") and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """A class whose names begin like spreadsheet formulas; its returns folder holds a link out and a FIFO."""
    base = tmp_path_factory.mktemp("hostile")
    roster = base / "roster.csv"
    roster.write_text(
        "id,name\n" + "".join(f'{i},"{n.replace(chr(34), 2 * chr(34))}"\n' for i, n in NAMES.items()), encoding="utf-8"
    )
    out = base / "class"
    assert main(["exercise", str(HOMEWORK), "--roster", str(roster), "--seed", "4", "-o", str(out)]) == 0
    for i in ("ann", "cy"):  # one answer each: a file left as exercise wrote it is no return
        answers = out / i / "answers.toml"
        answers.write_text(answers.read_text("utf-8").replace('"scores[3][1]" = ""', '"scores[3][1]" = "0"'), "utf-8")
    returned = base / "returned"
    returned.mkdir()
    for name in ("index.csv", "template.toml"):
        (returned / name).write_bytes((out / name).read_bytes())
    (returned / "ann.toml").write_bytes((out / "ann" / "answers.toml").read_bytes())
    (returned / "x.toml").write_text('student = "=HYPERLINK(\\"http://x\\")"\n', encoding="utf-8")
    # a valid return of bo, and a secret, both outside the folder: neither may be read through a link
    (base / "secret.toml").write_text('student = "fay"\nsecret = "TOP SECRET"\n', encoding="utf-8")
    (returned / "bo.toml").symlink_to(out / "bo" / "answers.toml")
    (returned / "evil.toml").symlink_to(base / "secret.toml")
    os.mkfifo(returned / "pipe.toml")
    return base, out, returned


# --- CSV cells ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, written",
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("'quoted", "''quoted"),
        ("'", "''"),
        ("a=1", "a=1"),
        ("", ""),
        ("1-2", "1-2"),
    ],
)
def test_a_formula_cell_gets_one_quote_and_reading_takes_it_off(text, written):
    assert cell(text) == written
    assert uncell(cell(text)) == text


def test_index_csv_quotes_names_and_grade_reads_them_back(hostile_class):
    _, out, _ = hostile_class
    lines = (out / "index.csv").read_text(encoding="utf-8").splitlines()
    assert [line.rsplit(",", 4)[0] for line in lines] == [
        "id,name",
        "ann,'=cmd|' /C calc'!A0",
        "bo,'-1",
        "cy,''quoted",
        "di,'@SUM(A1)",
        "ed,'+1",
        "fay,Fay Lin",
    ]
    assert {i: name for i, (name, _) in read_index(out / "index.csv").items()} == NAMES
    assert "Student: =cmd\\|' /C calc'\\!A0 (ann)" in (out / "ann" / "sheet.md").read_text(encoding="utf-8")


def test_gradebook_csv_has_no_formula_and_the_other_formats_show_the_text(hostile_class, capsys):
    _, _, returned = hostile_class
    assert main(["grade", str(returned)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        '"\'=HYPERLINK(""http://x"")",,0,0,0,0,0,0,0,0,0,0,,,'
        '"not graded: unknown student id \'=HYPERLINK(""http://x"")\'",x.toml'
    )
    assert lines[2] == "ann,'=cmd|' /C calc'!A0,0,0,0,0,0,1,0,10,0.5,11,scores[3][1],,,ann.toml"
    assert lines[3:7] == [
        "bo,'-1,0,0,0,0,0,0,0,0,0,0,,,no answers file returned,",
        "cy,''quoted,0,0,0,0,0,0,0,0,0,0,,,no answers file returned,",
        "di,'@SUM(A1),0,0,0,0,0,0,0,0,0,0,,,no answers file returned,",
        "ed,'+1,0,0,0,0,0,0,0,0,0,0,,,no answers file returned,",
    ]
    assert main(["grade", str(returned), "--format", "json"]) == 0
    students = json.loads(capsys.readouterr().out)["students"]
    assert [s["name"] for s in students[1:7]] == list(NAMES.values())
    assert students[0]["id"] == '=HYPERLINK("http://x")'
    assert main(["grade", str(returned), "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "| bo | -1 |" in markdown and "| di | @SUM(A1) |" in markdown and "| cy | 'quoted |" in markdown
    assert not any(quoted in markdown for quoted in ("'=cmd", "'-1", "''quoted", "'@SUM", "'+1"))


def test_numbers_in_the_gradebook_csv_are_never_quoted():
    # scores are 0 to 1 per verdict, so never negative; were one, it would stay a number, while text is quoted
    row = Row("s01", "-2", "-3.toml", tuple((v, -1) for v in COUNTED), Fraction(-1, 2), 11, None)
    assert (
        gradebook_text(Gradebook((row,)), "csv").splitlines()[1]
        == "s01,'-2,-1,-1,-1,-1,-1,-1,-1,-1,-0.5,11,,,,'-3.toml"
    )


# --- returns read only from inside their folder ---------------------------------


def test_grade_skips_links_out_of_the_folder_and_a_fifo(hostile_class):
    base, out, returned = hostile_class
    # in a child process with a time limit: a FIFO read would wait forever
    done = subprocess.run(
        [sys.executable, "-m", "symattn", "grade", str(returned), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    rows = {s["file"]: s for s in json.loads(done.stdout)["students"]}
    assert rows["bo.toml"]["error"] == (
        f"not read: a link to {os.path.realpath(out / 'bo' / 'answers.toml')}, outside the returns folder"
    )
    assert rows["evil.toml"]["error"] == (
        f"not read: a link to {os.path.realpath(base / 'secret.toml')}, outside the returns folder"
    )
    assert rows["pipe.toml"]["error"] == "not read: not a regular file (a FIFO, device or socket)"
    assert rows["bo.toml"]["id"] == rows["evil.toml"]["id"] == ""
    assert "TOP SECRET" not in done.stdout
    by_id = {s["id"]: s for s in json.loads(done.stdout)["students"] if s["id"]}
    assert by_id["bo"]["error"] == by_id["fay"]["error"] == "no answers file returned"


def test_a_link_inside_the_folder_is_read(hostile_class, tmp_path):
    _, out, _ = hostile_class
    returned = tmp_path / "r"
    (returned / "real").mkdir(parents=True)
    for name in ("index.csv", "template.toml"):
        (returned / name).write_bytes((out / name).read_bytes())
    (returned / "real" / "cy.toml").write_bytes((out / "cy" / "answers.toml").read_bytes())
    (returned / "link.toml").symlink_to(returned / "real" / "cy.toml")
    rows = [r for r in grade(returned).rows if r.id == "cy"]
    assert [(r.file, r.error, r.asked) for r in rows] == [("link.toml", None, 11), ("real/cy.toml", None, 11)]


def test_a_return_swapped_after_the_look_is_not_read(hostile_class, monkeypatch, tmp_path):
    """A return that becomes a FIFO or a link out between grade's look and its open: refused as opened."""
    from symattn.classroom import grading

    _, out, _ = hostile_class
    returned = tmp_path / "r"
    returned.mkdir()
    for name in ("index.csv", "template.toml"):
        (returned / name).write_bytes((out / name).read_bytes())
    (returned / "a.toml").write_bytes((out / "ann" / "answers.toml").read_bytes())
    (returned / "b.toml").write_bytes((out / "cy" / "answers.toml").read_bytes())
    looked = grading._not_read

    def swap(path, root):  # the look sees a regular file; then the file is swapped
        seen = looked(path, root)
        path.unlink()
        if path.name == "a.toml":
            os.mkfifo(path)
        else:
            path.symlink_to(out / "bo" / "answers.toml")
        return seen

    monkeypatch.setattr(grading, "_not_read", swap)
    rows = {r.file: r for r in grade(returned).rows if r.file}  # a FIFO opened blocking would hang here
    assert rows["a.toml"].error == grading.Note("unreadable", text=f"{returned / 'a.toml'}: not a regular file")
    assert rows["b.toml"].error == grading.Note(
        "unreadable", text=f"{returned / 'b.toml'}: cannot read file: Too many levels of symbolic links"
    )
    assert rows["a.toml"].id == rows["b.toml"].id == ""


# --- feedback only into its folder ---------------------------------------------------


@pytest.mark.parametrize(
    "student, shown",
    [("../escaped", "'../escaped'"), ("/abs/ABS", "'/abs/ABS'"), ("a\0b", "'a\\x00b'"), ("-1", "'-1'")],
)
def test_an_index_id_that_is_no_plain_name_is_refused(hostile_class, tmp_path, capsys, student, shown):
    _, out, returned = hostile_class
    index = tmp_path / "index.csv"
    index.write_text(f"id,name,seed\ns01,,1\n{student},,2\n", encoding="utf-8")
    err = fails(
        capsys, "grade", returned, "--index", index, "--template", out / "template.toml", "--feedback", tmp_path / "fb"
    )
    assert err == f"symattn: {index}: id[3]: {ID_RULE} {shown}\n"
    assert not (tmp_path / "fb").exists() and not (tmp_path / "escaped.txt").exists()


def test_feedback_files_check_ids_the_way_exercise_does(hostile_class):
    _, _, returned = hostile_class
    book = grade(returned)
    row = next(r for r in book.rows if r.id == "ann")
    for bad in ("../escaped", "/abs/ABS"):
        forged = Gradebook(
            (Row(bad, "", "x.toml", row.counts, row.score, row.asked, None, report=row.report),), source="returned"
        )
        with pytest.raises(SpecError) as info:
            feedback_files(forged, "text")
        assert str(info.value) == f"returned: id[1]: {ID_RULE} {bad!r}"


@pytest.mark.parametrize(
    "relative, shown",
    [
        ("../escaped.txt", "../escaped.txt"),
        ("/abs/ABS.txt", "/abs/ABS.txt"),
        ("a/../../b.txt", "a/../../b.txt"),
        ("a\0b.txt", "a\\x00b.txt"),
        ("", "''"),
    ],
)
def test_write_files_never_leaves_its_folder(tmp_path, relative, shown):
    with pytest.raises(OutputError) as info:
        write_files(str(tmp_path / "fb"), [("ok.txt", "x"), (relative, "x")])
    assert str(info.value) == f"{shown}: not a plain file name inside the folder {tmp_path / 'fb'}"
    assert not (tmp_path / "fb").exists()


def test_feedback_onto_an_existing_file_or_a_full_folder(hostile_class, tmp_path, capsys):
    _, _, returned = hostile_class
    existing = tmp_path / "feedback.txt"
    existing.write_text("mine\n", encoding="utf-8")
    assert (
        fails(capsys, "grade", returned, "--feedback", existing, "-o", tmp_path / "book.csv")
        == f"symattn: {existing}: not a folder; give a new or empty folder\n"
    )
    assert existing.read_text(encoding="utf-8") == "mine\n" and not (tmp_path / "book.csv").exists()
    fb = tmp_path / "fb"
    assert main(["grade", str(returned), "--feedback", str(fb), "-o", str(tmp_path / "book.csv")]) == 0
    assert sorted(p.name for p in fb.iterdir()) == ["ann.txt"]
    assert fails(capsys, "grade", returned, "--feedback", fb) == (
        f"symattn: {fb}: the folder is not empty (it may hold earlier feedback); write the feedback to a new "
        "folder, or give --force to write over it\n"
    )
    assert main(["grade", str(returned), "--feedback", str(fb), "--force", "-o", str(tmp_path / "book.csv")]) == 0
    # a link planted in the folder is never written through, --force or not
    (fb / "ann.txt").unlink()
    (fb / "ann.txt").symlink_to(existing)
    assert (
        fails(capsys, "grade", returned, "--feedback", fb, "--force")
        == f"symattn: {fb / 'ann.txt'}: is a link; refusing to write through it\n"
    )
    assert existing.read_text(encoding="utf-8") == "mine\n"


# --- exercise -o ---------------------------------------------------------------------


def test_exercise_onto_an_existing_file(tmp_path, capsys):
    existing = tmp_path / "class"
    existing.write_text("mine\n", encoding="utf-8")
    for force in ((), ("--force",)):
        assert (
            fails(capsys, "exercise", HOMEWORK, "--count", "1", "-o", existing, *force)
            == f"symattn: {existing}: not a folder; give a new or empty folder\n"
        )
    assert existing.read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["class"]


def test_exercise_under_proc(capsys):
    # /proc/self/x cannot be made, so this harms nothing
    assert (
        fails(capsys, "exercise", HOMEWORK, "--count", "1", "-o", "/proc/self/x")
        == "symattn: /proc/self/x: cannot write: no such file or directory\n"
    )
    assert not os.path.exists("/proc/self/x")


def test_exercise_never_writes_through_a_link_in_the_folder(tmp_path, capsys):
    out = tmp_path / "class"
    assert main(["exercise", str(HOMEWORK), "--count", "1", "-o", str(out)]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "s01" / "sheet.md").unlink()
    (out / "s01" / "sheet.md").symlink_to(elsewhere / "sheet.md")
    assert (
        fails(capsys, "exercise", HOMEWORK, "--count", "1", "--force", "-o", out)
        == f"symattn: {out / 's01' / 'sheet.md'}: is a link; refusing to write through it\n"
    )
    assert list(elsewhere.iterdir()) == []


def test_exercise_refuses_ids_that_are_no_plain_name():
    for i, bad in enumerate(("../x", "/abs/ABS", "a\0b"), 1):
        with pytest.raises(SpecError) as info:
            ex.exercise(HOMEWORK, [f"ok{i}", bad], 1)
        assert str(info.value) == f"{HOMEWORK}: ids[2]: {ID_RULE} {bad!r}"


# --- rosters and indexes: bounded, UTF-8 ------------------------------------------------


def test_roster_and_index_from_dev_zero(hostile_class, tmp_path, capsys):
    _, _, returned = hostile_class
    assert (
        fails(capsys, "exercise", HOMEWORK, "--roster", "/dev/zero", "-o", tmp_path / "c")
        == "symattn: /dev/zero: not a regular file\n"
    )
    assert (
        fails(capsys, "grade", returned, "--index", "/dev/zero", "--template", returned / "template.toml")
        == "symattn: /dev/zero: not a regular file\n"
    )
    assert not (tmp_path / "c").exists()


def test_roster_and_index_that_are_not_utf8(hostile_class, tmp_path, capsys):
    _, _, returned = hostile_class
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("id,name,seed\nann,Zoë,1\n".encode("latin-1"))
    assert (
        fails(capsys, "exercise", HOMEWORK, "--roster", bad, "-o", tmp_path / "c")
        == f"symattn: {bad}: not UTF-8 text (byte 20)\n"
    )
    assert (
        fails(capsys, "grade", returned, "--index", bad, "--template", returned / "template.toml")
        == f"symattn: {bad}: not UTF-8 text (byte 20)\n"
    )
    assert not (tmp_path / "c").exists()


def test_roster_and_index_with_a_bom(hostile_class, tmp_path):
    _, out, _ = hostile_class
    roster = tmp_path / "roster.csv"
    roster.write_bytes(b"\xef\xbb\xbfid,name\nann,Zo\xc3\xab\n")
    assert ex.read_roster(roster) == [("ann", "Zoë")]
    index = tmp_path / "index.csv"
    index.write_bytes(b"\xef\xbb\xbf" + (out / "index.csv").read_bytes())
    assert read_index(index) == read_index(out / "index.csv")


def test_index_seeds_and_duplicates(hostile_class, tmp_path, capsys):
    _, _, returned = hostile_class
    index = tmp_path / "index.csv"
    for text, message in [
        ("id,name\ns01,\n", "expected the columns id, name and seed (the index.csv that exercise wrote)"),
        ("id,name,seed\ns01,,-1\n", "seed[2]: expected a whole variant seed, got '-1'"),
        ("id,name,seed\ns01,,1" + "0" * 5000 + "\n", f"seed[2]: expected a whole variant seed, got '1{'0' * 49}…'"),
        ("id,name,seed\ns01,,1\ns01,,2\n", "id[3]: duplicate student id 's01' (also line 2)"),
    ]:
        index.write_text(text, encoding="utf-8")
        assert (
            fails(capsys, "grade", returned, "--index", index, "--template", returned / "template.toml")
            == f"symattn: {index}: {message}\n"
        )
