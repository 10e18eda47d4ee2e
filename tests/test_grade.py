import shutil
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from symattn import exercises as ex
from symattn.cli import main
from symattn.grading import INPUTS_CHANGED, grade, gradebook_text

from .test_exercise import HOMEWORK, key_numbers

ROOT = Path(__file__).resolve().parent.parent


def fill(v, numbers):
    text = ex.answers(v)
    for k, value in numbers.items():
        text = text.replace(f'"{k}" = ""', f'"{k}" = "{value}"')
    return text


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    out = tmp_path_factory.mktemp("class")
    assert main(["exercise", str(HOMEWORK), "--count", "10", "--seed", "1", "-o", str(out)]) == 0
    variants = ex.exercise(HOMEWORK, [f"s{i:02d}" for i in range(1, 11)], 1)
    returned = tmp_path_factory.mktemp("returned")
    shutil.copy(out / "index.csv", returned / "index.csv")
    shutil.copy(out / "template.toml", returned / "template.toml")
    v = {x.id: x for x in variants}
    right = {i: key_numbers(x) for i, x in v.items()}
    for i in ("s01", "s02", "s03"):  # all correct
        (returned / i).mkdir()
        (returned / i / "answers.toml").write_text(fill(v[i], right[i]), encoding="utf-8")
    # s04: a slip in the first weight; the outputs carried from the slipped weights
    slip = dict(right["s04"])
    slip["weights[3][1]"] = format(Decimal(slip["weights[3][1]"]) + Decimal("0.1"), "f")
    V = v["s04"].spec.V
    weights = [Fraction(Decimal(slip[f"weights[3][{j}]"])) for j in (1, 2, 3)]
    for k in (1, 2):
        total = sum(w * V[j][k - 1].value for j, w in enumerate(weights))
        slip[f"output[3][{k}]"] = format(Decimal(total.numerator) / Decimal(total.denominator), "f")
    (returned / "s04.toml").write_text(fill(v["s04"], slip), encoding="utf-8")  # flat and renamed
    # s05: three blanks
    partial = {k: x for k, x in right["s05"].items() if not k.startswith("scores")}
    (returned / "s05.toml").write_text(fill(v["s05"], partial), encoding="utf-8")
    # s06: a tampered input
    tampered = fill(v["s06"], right["s06"]).replace("Q = [[", 'Q = [["9", ', 1)
    tampered = tampered.replace('Q = [["9", "' + v["s06"].mapping["Q"][0][0] + '", ', 'Q = [["9", ', 1)
    (returned / "s06.toml").write_text(tampered, encoding="utf-8")
    # s07: a decimal comma
    comma = dict(right["s07"])
    comma["weights[3][1]"] = comma["weights[3][1]"].replace(".", ",")
    (returned / "s07.toml").write_text(fill(v["s07"], comma), encoding="utf-8")
    # s08: an unknown id; s09: unreadable TOML; s10: correct, in a nested folder with another name
    (returned / "s08.toml").write_text(fill(v["s08"], right["s08"]).replace('student = "s08"', 'student = "zz99"'),
                                       encoding="utf-8")
    (returned / "s09.toml").write_text("student = \"s09\"\n[claims\n", encoding="utf-8")
    (returned / "late" / "x").mkdir(parents=True)
    (returned / "late" / "x" / "mine.toml").write_text(fill(v["s10"], right["s10"]), encoding="utf-8")
    return out, returned, v


def rows_by_id(book):
    return {r.id or r.file: r for r in book.rows}


def test_gradebook_counts(classroom):
    _, returned, v = classroom
    book = grade(returned)
    rows = rows_by_id(book)
    assert sorted(rows) == ["s01", "s02", "s03", "s04", "s05", "s06", "s07", "s09.toml", "s10", "zz99"]
    for i in ("s01", "s02", "s03", "s10"):
        c = dict(rows[i].counts)
        assert (c["wrong"], c["last-digit"], c["blank"]) == (0, 0, 0)
        assert c["exact"] + c["rounded"] + c["carried"] == 11
        assert (rows[i].score, rows[i].asked, rows[i].first_to_fix, rows[i].error) == (11, 11, None, None)
    s04 = rows["s04"]
    assert dict(s04.counts)["wrong"] == 1 and dict(s04.counts)["carried"] >= 2
    assert (s04.score, s04.first_to_fix, s04.file) == (10, "weights[3][1]", "s04.toml")
    s05 = rows["s05"]
    assert (dict(s05.counts)["blank"], s05.score) == (3, 8)
    assert rows["s06"].notes == (INPUTS_CHANGED,)
    assert rows["s06"].score == 11
    assert rows["s07"].notes == ("decimal comma read as a point: claims.weights[3][1] = "
                                 f"'{key_numbers(v['s07'])['weights[3][1]'].replace('.', ',')}'",)
    assert rows["s07"].score == 11
    assert rows["zz99"].error == "unknown student id 'zz99'"
    assert rows["s09.toml"].error.startswith(f"{returned / 's09.toml'}: invalid TOML")
    assert rows["s10"].file == "late/x/mine.toml"


def test_untouched_class_is_all_blank(classroom):
    out, _, _ = classroom
    book = grade(out)
    assert len(book.rows) == 10
    assert all(dict(r.counts)["blank"] == 11 and r.score == 0 and r.error is None and not r.notes for r in book.rows)


def test_grade_cli_writes_csv(classroom, tmp_path, capsys):
    _, returned, _ = classroom
    assert main(["grade", str(returned), "-o", str(tmp_path / "book.csv")]) == 0
    lines = (tmp_path / "book.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "id,name,exact,rounded,carried,last-digit,wrong,blank,score,asked,first_to_fix,notes,error,file"
    assert len(lines) == 11
    assert main(["grade", str(returned), "--format", "json"]) == 0
    assert '"id": "s05"' in capsys.readouterr().out
    assert gradebook_text(grade(returned), "markdown").startswith("| id | name |")


def test_roster(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\nann,Ann Lee\nbo,Bo Chen\n", encoding="utf-8")
    assert main(["exercise", str(HOMEWORK), "--roster", str(roster), "--seed", "3", "-o", str(tmp_path / "o")]) == 0
    index = (tmp_path / "o" / "index.csv").read_text(encoding="utf-8").splitlines()
    assert [line.split(",")[:2] for line in index[1:]] == [["ann", "Ann Lee"], ["bo", "Bo Chen"]]
    assert "Student: Ann Lee (ann)" in (tmp_path / "o" / "ann" / "sheet.md").read_text(encoding="utf-8")
    roster.write_text("id,name\n../x,Evil\n", encoding="utf-8")
    assert main(["exercise", str(HOMEWORK), "--roster", str(roster), "-o", str(tmp_path / "p")]) == 2
