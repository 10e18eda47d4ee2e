import dataclasses
import shutil
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom import sheets
from symattn.classroom.gradebook import feedback, gradebook_text
from symattn.classroom.grading import INPUTS_CHANGED, Note, grade, read_policy
from symattn.classroom.notes import note_text
from symattn.cli.commands import main
from symattn.exact.head_figures import hand_figures
from symattn.exact.heads import build_model
from symattn.input.errors import SpecError
from symattn.input.spec import spec_from_mapping

from .test_exercise import HOMEWORK, key_numbers
from .test_export import browser  # noqa: F401  (the Chromium fixture)

ROOT = Path(__file__).resolve().parent.parent
IDS = [f"s{i:02d}" for i in range(1, 31)]


def fill(v, numbers, lang=None):
    text = sheets.answers(v, lang)
    for k, value in numbers.items():
        text = text.replace(f'"{k}" = ""', f'"{k}" = "{value}"')
    return text


def outputs_from(v, numbers):
    """The outputs a student gets from their own weights (error carried forward), exactly."""
    V = v.spec.V
    weights = [Fraction(Decimal(numbers[f"weights[3][{j}]"])) for j in (1, 2, 3)]
    out = dict(numbers)
    for k in (1, 2):
        total = sum(w * V[j][k - 1].value for j, w in enumerate(weights))
        out[f"output[3][{k}]"] = format(Decimal(total.numerator) / Decimal(total.denominator), "f")
    return out


def without_scaling(v, right):
    """The classic slip: scaled = scores, so every later number is that of a spec with no scaling."""
    spec = spec_from_mapping(dict(v.mapping, scale="none"))
    fig = hand_figures(build_model(spec), spec)
    numbers = dict(right)
    for j in (1, 2, 3):
        numbers[f"scaled[3][{j}]"] = right[f"scores[3][{j}]"]
        numbers[f"weights[3][{j}]"] = format(fig.weights[2][j - 1].value, "f")
    return outputs_from(v, numbers)


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    """30 students; the returns hold every kind of answer a teacher gets back."""
    out = tmp_path_factory.mktemp("class")
    assert main(["exercise", str(HOMEWORK), "--count", "30", "--seed", "1", "-o", str(out)]) == 0
    v = {x.id: x for x in ex.exercise(HOMEWORK, IDS, 1)}
    right = {i: key_numbers(x) for i, x in v.items()}
    returned = tmp_path_factory.mktemp("returned")
    shutil.copy(out / "index.csv", returned / "index.csv")
    shutil.copy(out / "template.toml", returned / "template.toml")

    def hand_in(name, text):
        (returned / name).parent.mkdir(parents=True, exist_ok=True)
        (returned / name).write_text(text, encoding="utf-8")

    for i in IDS[:17]:  # s01-s17: all correct; s02 works in Chinese
        hand_in(f"{i}/answers.toml", fill(v[i], right[i], "zh" if i == "s02" else None))
    # s18: a slip in the first weight; the outputs carried from the slipped weights (flat and renamed)
    slip = dict(right["s18"])
    slip["weights[3][1]"] = format(Decimal(slip["weights[3][1]"]) + Decimal("0.1"), "f")
    hand_in("s18.toml", fill(v["s18"], outputs_from(v["s18"], slip)))
    for i in ("s19", "s20", "s21"):  # the scaling forgotten
        hand_in(f"{i}.toml", fill(v[i], without_scaling(v[i], right[i])))
    # s22: the three scores left blank
    hand_in("s22.toml", fill(v["s22"], {k: x for k, x in right["s22"].items() if not k.startswith("scores")}))
    # s23: a tampered input
    tampered = fill(v["s23"], right["s23"]).replace("Q = [[", 'Q = [["9", ', 1)
    hand_in("s23.toml", tampered.replace('Q = [["9", "' + v["s23"].mapping["Q"][0][0] + '", ', 'Q = [["9", ', 1))
    # s24: a decimal comma
    comma = dict(right["s24"])
    comma["weights[3][1]"] = comma["weights[3][1]"].replace(".", ",")
    hand_in("s24.toml", fill(v["s24"], comma))
    # s25: an unknown id; s26: unreadable TOML; s27: correct, nested and renamed; s28: returned twice
    hand_in("s25.toml", fill(v["s25"], right["s25"]).replace('student = "s25"', 'student = "zz99"'))
    hand_in("s26.toml", 'student = "s26"\n[claims\n')
    hand_in("late/x/mine.toml", fill(v["s27"], right["s27"]))
    hand_in("s28.toml", fill(v["s28"], right["s28"]))
    hand_in("s28-again.toml", fill(v["s28"], right["s28"]))
    # s29 and s30 return nothing
    return out, returned, v, right


def rows_by_id(book):
    return {r.id or r.file: r for r in book.rows if r.error is None or r.error.code != "not_returned"}


FULL = (3, 11, 11, None, None)  # exact, score, asked, first to fix, error


def test_gradebook_counts(classroom):
    _, returned, v, right = classroom
    book = grade(returned)
    rows = rows_by_id(book)
    assert [(r.id, r.file) for r in book.rows][-9:] == [
        ("s25", ""),
        ("s26", ""),
        ("s27", "late/x/mine.toml"),
        ("s28", "s28-again.toml"),
        ("s28", "s28.toml"),
        ("s29", ""),
        ("s30", ""),
        ("zz99", "s25.toml"),
        ("", "s26.toml"),
    ]  # returns with no id last
    for i in IDS[:17] + ["s27"]:
        c = dict(rows[i].counts)
        assert (c["wrong"], c["last-digit"], c["blank"]) == (0, 0, 0)
        assert c["exact"] + c["rounded"] + c["carried"] == 11
        assert (c["exact"], rows[i].score, rows[i].asked, rows[i].first_to_fix, rows[i].error) == FULL
        assert (rows[i].wrong, rows[i].slips, rows[i].notes) == ((), (), ())
    assert dict(rows["s01"].counts) == {
        "exact": 3,
        "rounded": 7,
        "carried": 1,
        "input-rounding": 0,
        "too-coarse": 0,
        "last-digit": 0,
        "wrong": 0,
        "blank": 0,
    }
    s18 = rows["s18"]
    assert tuple(dict(s18.counts).values()) == (3, 5, 2, 0, 0, 0, 1, 0)
    assert (s18.score, s18.first_to_fix, s18.file, s18.wrong, s18.slips) == (
        10,
        "weights[3][1]",
        "s18.toml",
        ("weights",),
        (),
    )
    for i, counts, score in (
        ("s19", (3, 0, 5, 0, 0, 0, 3, 0), 8),
        ("s20", (3, 0, 5, 0, 0, 0, 3, 0), 8),
        ("s21", (3, 0, 4, 0, 0, 1, 3, 0), Fraction(15, 2)),
    ):
        assert tuple(dict(rows[i].counts).values()) == counts
        assert (rows[i].score, rows[i].first_to_fix, rows[i].wrong, rows[i].slips) == (
            score,
            "scaled[3][1]",
            ("scaled",),
            ("no_scaling",),
        )
        # the short scaled claims (two decimals) are named by the whole row: all three are the scores
        assert [(x.verdict, x.diagnosis) for x in rows[i].report.results if x.claim.quantity == "scaled"] == [
            ("wrong", "no_scaling")
        ] * 3
    assert (tuple(dict(rows["s22"].counts).values()), rows["s22"].score) == ((0, 6, 2, 0, 0, 0, 0, 3), 8)
    assert (rows["s23"].notes, rows["s23"].score) == ((INPUTS_CHANGED,), 11)
    comma = right["s24"]["weights[3][1]"].replace(".", ",")
    assert [note_text("en")(n) for n in rows["s24"].notes] == [
        f"decimal comma read as a point: weight A (sat, the) [weights[3][1]] = '{comma}'"
    ]
    assert rows["s24"].score == 11
    assert rows["zz99"].error == Note("unknown_student", text="zz99")
    assert rows["s26.toml"].error == Note(
        "unreadable",
        text=f"{returned / 's26.toml'}: invalid TOML: Expected ']' "
        "at the end of a table declaration (at line 2, column 8)",
    )
    assert [r.notes for r in book.rows if r.id == "s28"] == [(Note("duplicate", text="2"),)] * 2
    missing = [r.id for r in book.rows if r.error and r.error.code == "not_returned"]
    assert missing == ["s25", "s26", "s29", "s30"]
    assert (rows["s02"].lang, rows["s01"].lang) == ("zh", "en")


def test_class_summary(classroom):
    _, returned, _, _ = classroom
    summary = grade(returned).summary
    assert (summary.graded, summary.not_graded, summary.not_returned) == (27, 2, 4)
    assert summary.steps == (("scaled", 3), ("weights", 1))
    assert summary.slips == (("no_scaling", 3),)


def test_gradebook_markdown(classroom):
    _, returned, _, _ = classroom
    text = gradebook_text(grade(returned), "markdown")
    lines = text.splitlines()
    assert lines[:9] == [
        "# Gradebook",
        "",
        f"Returned answers: {returned}",
        "",
        "Score per asked number: exact 1, rounded 1, carried 1, rounded input 1, too coarse 0.5, last-digit 0.5, "
        "wrong 0, blank 0, carried from a trivial answer 0.5.",
        "",
        "| id | name | exact | rounded | carried | rounded input | too coarse | last-digit | wrong | blank | score | fix first |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        "| s01 |  | 3 | 7 | 1 | 0 | 0 | 0 | 0 | 0 | 11/11 |  |",
    ]
    assert "| s26.toml |  |  |  |  |  |  |  |  |  |  | not graded |" in lines
    # fix first: the quantity and the tokens, not the claims key scaled[3][1]
    assert "| s21 |  | 3 | 0 | 4 | 0 | 0 | 1 | 3 | 0 | 7.5/11 | scaled $S/\\sqrt{d_k}$ (sat, the) |" in lines
    assert "| s29 |  |  |  |  |  |  |  |  |  |  | not returned |" in lines
    assert "- s29: no answers file returned" in lines
    assert "- s28 (s28.toml): returned 2 times; each return is graded" in lines
    assert text.endswith(
        "## Class summary\n\n27 returns graded, 2 could not be graded, 4 students returned nothing.\n\n"
        "Steps with wrong numbers, most often first:\n\n- scaled $S/\\sqrt{d_k}$: 3 students\n- weight $A$: 1 student\n\n"
        "Classic slips recognised:\n\n- the scores were not divided by the square root of the dimension: 3 students\n"
    )
    zh = gradebook_text(grade(returned), "markdown", "zh")
    assert "已评分 27 份，未能评分 2 份，4 人没有交。" in zh and "- 分数没有除以维度的平方根：3 人" in zh
    assert "- s28 (s28.toml)：交了 2 份；每份都评分" in zh


def test_policy(classroom, tmp_path):
    _, returned, _, _ = classroom
    policy = tmp_path / "policy.toml"
    policy.write_text('"last-digit" = 0\ncarried = "0.5"\nblank = 0.25\n', encoding="utf-8")
    rows = rows_by_id(grade(returned, policy=read_policy(policy)))
    assert rows["s21"].score == 3 + Fraction(4, 2)  # exact 3, carried 4 × 0.5, last-digit 0, wrong 0
    assert rows["s22"].score == 6 + 1 + Fraction(3, 4)  # rounded 6, carried 2 × 0.5, blank 3 × 0.25
    for text, message in (
        (
            "wrongg = 0\n",
            "wrongg: unknown verdict; expected one of exact, rounded, carried, input-rounding, too-coarse, "
            "last-digit, wrong, blank, carried-trivial",
        ),
        ("wrong = 2\n", "wrong: expected a score from 0 to 1, got 2"),
        ("wrong = true\n", "wrong: expected a score from 0 to 1, got a boolean"),
        ('wrong = "1/0"\n', None),
    ):
        policy.write_text(text, encoding="utf-8")
        with pytest.raises(SpecError) as info:
            read_policy(policy)
        if message:
            assert str(info.value) == f"{policy}: {message}"


def test_feedback_in_the_students_language(classroom):
    _, returned, _, _ = classroom
    rows = rows_by_id(grade(returned))
    zh = feedback(rows["s02"], "text")
    assert zh.startswith("手算结果核对：Homework 3: attention by hand\n核对文件：s02/answers.toml\n")
    en = feedback(rows["s19"], "markdown")
    assert en.startswith("# Checking hand-computed numbers: Homework 3: attention by hand\nClaims file: s19.toml\n")
    assert "wrong (the scores were not divided by the square root of the dimension)" in en


def test_grade_cli(classroom, tmp_path, capsys):
    _, returned, _, _ = classroom
    assert main(["grade", str(returned), "-o", str(tmp_path / "book.csv"), "--feedback", str(tmp_path / "fb")]) == 0
    lines = (tmp_path / "book.csv").read_text(encoding="utf-8").splitlines()
    assert (
        lines[0]
        == "id,name,exact,rounded,carried,input-rounding,too-coarse,last-digit,wrong,blank,score,asked,first_to_fix,notes,error,file"
    )
    assert len(lines) == 34
    assert "s21,,3,0,4,0,0,1,3,0,7.5,11,scaled[3][1],,,s21.toml" in lines
    assert "s29,,0,0,0,0,0,0,0,0,0,0,,,no answers file returned," in lines
    feedback_files = sorted(p.name for p in (tmp_path / "fb").iterdir())
    assert len(feedback_files) == 27 and feedback_files[:2] == ["s01.txt", "s02.txt"]
    assert "s28-2.txt" in feedback_files and "zz99.txt" not in feedback_files
    assert main(["grade", str(returned), "--format", "json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["summary"] == {
        "graded": 27,
        "not_graded": 2,
        "not_returned": 4,
        "steps": {"scaled": 3, "weights": 1},
        "slips": {"no_scaling": 3},
    }
    assert data["policy"] == {
        "exact": "1",
        "rounded": "1",
        "carried": "1",
        "input-rounding": "1",
        "too-coarse": "0.5",
        "last-digit": "0.5",
        "wrong": "0",
        "blank": "0",
        "carried-trivial": "0.5",
    }
    assert [s["id"] for s in data["students"]][:2] == ["s01", "s02"]
    # a bad policy is one line and nothing is written
    (tmp_path / "bad.toml").write_text("exact = 3\n", encoding="utf-8")
    assert main(["grade", str(returned), "--policy", str(tmp_path / "bad.toml"), "-o", str(tmp_path / "x.csv")]) == 2
    assert capsys.readouterr().err == f"symattn: {tmp_path / 'bad.toml'}: exact: expected a score from 0 to 1, got 3\n"
    assert not (tmp_path / "x.csv").exists()
    assert main(["grade", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == f"symattn: {tmp_path / 'nowhere'}: not a folder of returned answers\n"


def test_untouched_class_is_not_returned(classroom):
    out, _, _, _ = classroom
    book = grade(out)
    assert len(book.rows) == 30
    # as ``exercise`` wrote them: not returns, each row naming its file
    assert all(r.error == Note("not_returned", text=f"{r.id}/answers.toml") and r.score == 0 for r in book.rows)
    assert (book.summary.graded, book.summary.not_returned) == (0, 30)


@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_gradebook_latex_compiles(classroom, latex, tmp_path, lang, engine):
    _, returned, _, _ = classroom
    pdf = latex(gradebook_text(grade(returned), "latex", lang), engine, tmp_path)
    assert pdf.read_bytes().startswith(b"%PDF-")


@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_the_gradebook_fits_the_page_wherever_its_folder_is(classroom, latex_each, tmp_path, lang, engine):
    # a note names the file it could not read by its whole path, which breaks only every few characters:
    # with the folder's path of each length (the first the one a CI run overflowed by 1.7pt under xelatex),
    # every line of every note stays within the page
    _, returned, _, _ = classroom
    book = grade(returned)
    message = ": invalid TOML: Expected ']' at the end of a table declaration (at line 2, column 8)"
    folders = ["/tmp/pytest-of-root/pytest-0/popen-gw1/returned0"] + [f"/{'p' * k}/returned" for k in range(1, 31)]
    documents = {}
    for folder in folders:
        note = Note("unreadable", text=f"{folder}/s26.toml{message}")
        rows = tuple(dataclasses.replace(r, error=note) if r.file == "s26.toml" else r for r in book.rows)
        documents[folder] = gradebook_text(dataclasses.replace(book, rows=rows), "latex", lang)
    assert latex_each(documents, engine, tmp_path) == {folder: [] for folder in folders}


def test_roster(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\nann,Ann Lee\nbo,Bo Chen\n", encoding="utf-8")
    assert main(["exercise", str(HOMEWORK), "--roster", str(roster), "--seed", "3", "-o", str(tmp_path / "o")]) == 0
    index = (tmp_path / "o" / "index.csv").read_text(encoding="utf-8").splitlines()
    assert [line.split(",")[:2] for line in index[1:]] == [["ann", "Ann Lee"], ["bo", "Bo Chen"]]
    assert "Student: Ann Lee (ann)" in (tmp_path / "o" / "ann" / "sheet.md").read_text(encoding="utf-8")
    roster.write_text("id,name\n../x,Evil\n", encoding="utf-8")
    assert main(["exercise", str(HOMEWORK), "--roster", str(roster), "-o", str(tmp_path / "p")]) == 2
    assert not (tmp_path / "p").exists()


def test_roster_names_have_a_limit(tmp_path, capsys):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\nann,Ann Lee\nbo," + "B" * 101 + "\n", encoding="utf-8")
    assert main(["exercise", str(HOMEWORK), "--roster", str(roster), "-o", str(tmp_path / "p")]) == 2
    assert capsys.readouterr().err == f"symattn: {roster}: name[3]: a name of 101 characters; at most 100\n"
    assert not (tmp_path / "p").exists()


def test_class_pages_in_chromium(classroom, browser, tmp_path):
    """Sheet, every key, gradebook and a feedback report as offline pages: all math typeset, nothing fetched."""
    from symattn.classroom.gradebook import gradebook_document

    from .test_export import open_page

    _, returned, v, _ = classroom
    book = grade(returned)
    pages = {
        "sheet": sheets.sheet(v["s01"], "html"),
        "key-all": sheets.key_all([v["s01"], v["s02"]], "html", "zh"),
        "gradebook": gradebook_document(book, "html", "zh"),
        "feedback": feedback(rows_by_id(book)["s19"], "html"),
    }
    for name, page in pages.items():
        target = tmp_path / f"{name}.html"
        target.write_text(page, encoding="utf-8")
        state = open_page(browser, target)
        assert (state["typeset"], state["errors"], state["network"]) == (state["math"], 0, []), name
        assert state["scrollWidth"] <= state["innerWidth"], name
        assert "$" not in state["text"] and "\\begin{" not in state["text"], name
    # the quantity's name is math (typeset by KaTeX), the rest of the sentence text
    assert state["lang"] == "en" and "Fix first: scaled " in state["text"]
    assert " (sat, the) is given as 0.20 but should be 0.14" in state["text"]
    assert pages["gradebook"].count("<tr>") == 34 and '<html lang="zh-CN">' in pages["gradebook"]


def test_scores_written_with_fewer_digits_than_their_own_are_too_coarse():
    # the sheet does not round the scores: they are exact at the key's digits (-0.54), so -0.5 is a score
    # rounded early (half credit, as any number rounded early), not "rounded" (full credit, with everything
    # carried from it)
    from symattn.checking.checker import check
    from symattn.input.claims import claims_from_mapping

    (v,) = ex.exercise(HOMEWORK, ["s01"], 1)
    right = key_numbers(v)
    scores = {k: x for k, x in right.items() if k.startswith("scores")}
    assert {Decimal(x).as_tuple().exponent for x in scores.values()} == {-2}  # the key writes them at 2 decimals
    assert sheets.claimed_decimals(v) == {**sheets.asked_decimals(v), "scores": 2}
    assert "scores = 2" in sheets.answers(v)
    coarse = {k: format(Decimal(x).quantize(Decimal("0.1")), "f") for k, x in scores.items()}
    assert coarse != scores  # every one rounds to another value at 1 decimal
    loaded = claims_from_mapping({"claims": coarse}, "r.toml", spec=v.spec)
    report = check(v.spec, loaded, asked=sheets.claimed_decimals(v))
    assert [r.verdict for r in report.results] == ["too-coarse"] * len(scores)
