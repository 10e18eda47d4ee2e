"""Grading a class without surprises (issue 19 §4): time, notes, one language per file."""

import os
import shutil
import tomllib
from decimal import Decimal
from fractions import Fraction

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom import grading, sheets
from symattn.classroom.gradebook import gradebook_text
from symattn.classroom.grading import Note, grade
from symattn.classroom.notes import note_text
from symattn.classroom.trivial import trivial_rows
from symattn.cli.commands import main

from .test_exercise import HOMEWORK, key_numbers
from .test_grade import fill


def words(row, lang="en") -> list[str]:
    return [note_text(lang)(n) for n in row.notes]


IDS = ["s01", "s02", "s03"]


@pytest.fixture()
def small_class(tmp_path):
    out = tmp_path / "class"
    assert main(["exercise", str(HOMEWORK), "--count", "3", "--seed", "1", "-o", str(out)]) == 0
    return out, {v.id: v for v in ex.exercise(HOMEWORK, IDS, 1)}


def test_decimal_commas_are_one_note(small_class):
    out, v = small_class
    right = key_numbers(v["s01"])
    commas = {k: x.replace(".", ",") for k, x in right.items()}
    (out / "s01" / "answers.toml").write_text(fill(v["s01"], commas), encoding="utf-8")
    row = next(r for r in grade(out).rows if r.id == "s01")
    assert all("." in x for x in right.values()) and len(right) == 11
    assert words(row) == ["decimal commas in 11 claims, read as points (the first: score S (sat, the) [scores[3][1]])"]
    assert row.score == 11
    lines = gradebook_text(grade(out), "markdown").splitlines()
    assert (
        "- s01 (s01/answers.toml): decimal commas in 11 claims, read as points (the first: score S (sat, the) "
        "\\[scores\\[3\\]\\[1\\]\\])" in lines
    )
    zh = gradebook_text(grade(out), "markdown", "zh")
    assert (
        "- s01 (s01/answers.toml)：11 个数用了小数逗号，按小数点读（第一个：分数 S (sat, the) \\[scores\\[3\\]\\[1\\]\\]）"
        in zh
    )


def test_all_blank_class_says_so(small_class):
    # answers files as ``exercise`` wrote them are not returns: nothing is graded, and nothing said to be right
    out, _ = small_class
    text = gradebook_text(grade(out), "markdown")
    assert text.endswith(
        "## Notes\n\n"
        "- s01 (s01/answers.toml): answers file not filled in: every blank is still blank\n"
        "- s02 (s02/answers.toml): answers file not filled in: every blank is still blank\n"
        "- s03 (s03/answers.toml): answers file not filled in: every blank is still blank\n\n"
        "## Class summary\n\n"
        "0 returns graded, 0 could not be graded, 3 students returned nothing.\n\n"
    )
    zh = gradebook_text(grade(out), "latex", "zh")
    assert "已评分 0 份，未能评分 0 份，3 人没有交。" in zh and "答卷没有填写：每个空都还是空的" in zh
    assert "没有错误的数。" not in zh


def test_a_chinese_class_is_chinese_in_every_file(tmp_path):
    out = tmp_path / "zh"
    assert main(["exercise", str(HOMEWORK), "--count", "2", "--seed", "1", "--lang", "zh", "-o", str(out)]) == 0
    answers = (out / "s01" / "answers.toml").read_text(encoding="utf-8")
    assert answers.splitlines()[0] == (
        '# Homework 3: attention by hand：s01 的答卷。把每个 "" 换成你算出的数（输入的数字保持不变），'
        "然后运行：symattn check answers.toml"
    )
    assert tomllib.loads(answers)["lang"] == "zh"
    for name in ("s01/sheet.md", "s01/key.md", "key-all.md"):
        assert "Student" not in (out / name).read_text(encoding="utf-8"), name
    v = ex.exercise(HOMEWORK, ["s01"], 1)[0]
    assert sheets.answers(v).splitlines()[0] == (
        '# Homework 3: attention by hand: answers of s01. Replace each "" with your number '
        "(keep the inputs as they are), then: symattn check answers.toml"
    )


def test_a_claims_error_names_the_return(small_class):
    out, _ = small_class
    path = out / "s02" / "answers.toml"
    path.write_text(path.read_text(encoding="utf-8").replace('"weights[3][1]" = ""', '"weights[3][1]" = ["x"]'))
    row = next(r for r in grade(out).rows if r.id == "s02")
    assert row.error is not None and row.error.code == "not_checked"
    assert row.error.text == "s02/answers.toml: claims.weights[3][1]: not a number: ['x']"


def test_an_answer_that_is_not_a_number_counts_blank_as_in_an_lms_report(small_class):
    out, v = small_class
    right = dict(key_numbers(v["s02"]), **{"output[3][1]": "x", "output[3][2]": "0.5.1"})
    (out / "s02" / "answers.toml").write_text(fill(v["s02"], right), encoding="utf-8")
    row = next(r for r in grade(out).rows if r.id == "s02")
    assert (row.error, dict(row.counts)["blank"], row.score) == (None, 2, 9)
    assert words(row) == [
        "output (sat, column 1) [output[3][1]]: 'x' is not a number; counted blank",
        "output (sat, column 2) [output[3][2]]: '0.5.1' is not a number; counted blank",
    ]


def test_a_slow_return_cannot_starve_the_rest(small_class, monkeypatch, capsys, tmp_path):
    """The first return never finishes: it is stopped at its share of the time, and every other is graded."""
    out, v = small_class
    for i in IDS:
        (out / i / "answers.toml").write_text(fill(v[i], key_numbers(v[i])), encoding="utf-8")
    shutil.copy(out / "s01" / "answers.toml", out / "a-slow.toml")
    read = grading.read_table

    def slow(path, **kw):
        if os.path.basename(path) == "a-slow.toml":
            while True:  # pure Python, as a hostile return's work is: the time limit stops it
                sum(range(1000))
        return read(path, **kw)

    monkeypatch.setattr(grading, "read_table", slow)
    book = tmp_path / "book.csv"
    assert main(["grade", str(out), "--max-seconds", "4", "-o", str(book)]) == 0
    lines = book.read_text(encoding="utf-8").splitlines()
    assert [line.split(",")[0] for line in lines[1:]] == ["s01", "s02", "s03", ""]
    assert all(line.endswith(f"s0{i}/answers.toml") and ",11,11,," in line for i, line in zip((1, 2, 3), lines[1:]))
    # the limit names the return (a share of the 4 s: about 1 s), not template.toml or the folder
    slow_row = lines[-1]
    assert slow_row.startswith(",,0,0,0,0,0,0,0,0,0,0,,,not graded: a-slow.toml: took longer than 0.")
    assert slow_row.endswith(" s (the time limit; raise it with --max-seconds),a-slow.toml")
    assert capsys.readouterr().err == ""


def test_exercise_does_not_count_tex_time(tmp_path):
    """Seven PDFs take pdflatex longer than 4 s; as in render, --max-seconds counts only symattn's own work."""
    if not shutil.which("latexmk"):
        pytest.skip("latexmk not installed (TeX Live)")
    out = tmp_path / "pdf"
    args = ["exercise", str(HOMEWORK), "--count", "3", "--seed", "1", "--format", "pdf", "--max-seconds", "4"]
    assert main([*args, "-o", str(out)]) == 0
    assert sorted(p.name for p in (out / "s01").iterdir()) == ["answers.toml", "key.pdf", "sheet.pdf"]
    assert (out / "key-all.pdf").read_bytes().startswith(b"%PDF-")


def test_check_reads_decimal_commas_as_grade_does(tmp_path, capsys):
    claims = tmp_path / "c.toml"
    claims.write_text(
        'tokens = ["a", "b"]\nQ = [["1", "0"], ["0", "1"]]\nK = [["1", "0"], ["0", "1"]]\nV = [["1", "2"], ["3", "4"]]\n'
        '[claims]\nsqrt_dk = "1,414"\n"weights[1][1]" = "0,67"\n"percent[1][2]" = "33,0"\n"weights[2][2]" = "0.67"\n',
        encoding="utf-8",
    )
    assert main(["check", str(claims)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == (
        "  exact: 0, rounded: 4, carried: 0, last-digit: 0, wrong: 0, "
        "decimal commas in 3 claims, read as points (the first: claims.sqrt_dk)"
    )
    assert main(["check", str(claims), "--format", "json"]) == 0
    import json

    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["decimal_commas"] == ["claims.sqrt_dk", "claims.weights[1][1]", "claims.percent[1][2]"]
    claims.write_text(claims.read_text(encoding="utf-8").replace('"1,414"', '"1.414"').replace('"33,0"', '"33.0"'))
    assert main(["check", str(claims), "--lang", "zh"]) == 0
    assert capsys.readouterr().out.splitlines()[-2].endswith("1 个数用了小数逗号，按小数点读：claims.weights[1][1]")
    # the inputs still take points only
    claims.write_text(
        claims.read_text(encoding="utf-8").replace('[["1", "0"], ["0", "1"]]', '[["1,5", "0"], ["0", "1"]]', 1)
    )
    assert main(["check", str(claims)]) == 2
    assert (
        capsys.readouterr().err == f"symattn: {claims}: Q[1][1]: not a number: '1,5' (a decimal comma? write '1.5')\n"
    )


def trivial_numbers(v, score):
    """Every score written as ``score``; the rest carried correctly from there (a uniform softmax)."""
    V = v.spec.V
    numbers = {f"scores[3][{j}]": score for j in (1, 2, 3)}
    numbers.update({f"scaled[3][{j}]": "0.000" if score == "0" else "0.354" for j in (1, 2, 3)})
    numbers.update({f"weights[3][{j}]": "0.333" for j in (1, 2, 3)})
    for k in (0, 1):
        total = sum(row[k].value for row in V) * Fraction(333, 1000)
        numbers[f"output[3][{k + 1}]"] = format(Decimal(total.numerator) / Decimal(total.denominator), "f")
    return numbers


def test_a_class_of_30_without_surprises(tmp_path, monkeypatch):
    """A Chinese class of 30, every situation of issue 19 §4 at once."""
    out = tmp_path / "class"
    ids = [f"s{i:02d}" for i in range(1, 31)]
    assert main(["exercise", str(HOMEWORK), "--count", "30", "--seed", "7", "--lang", "zh", "-o", str(out)]) == 0
    v = {x.id: x for x in ex.exercise(HOMEWORK, ids, 7)}
    # one language per file: every answers file's header is Chinese
    for i in ids:
        assert (
            (out / i / "answers.toml")
            .read_text(encoding="utf-8")
            .splitlines()[0]
            .endswith(
                f'：{i} 的答卷。把每个 "" 换成你算出的数（输入的数字保持不变），然后运行：symattn check answers.toml'
            )
        )
    right = {i: key_numbers(x) for i, x in v.items()}

    def hand_in(i, numbers):
        (out / i / "answers.toml").write_text(fill(v[i], numbers, "zh"), encoding="utf-8")

    for i in ids[:20]:  # s01-s20 right
        hand_in(i, right[i])
    hand_in("s21", {k: x.replace(".", ",") for k, x in right["s21"].items()})  # decimal commas throughout
    hand_in("s22", trivial_numbers(v["s22"], "0"))  # 0 for every score, a uniform softmax carried
    hand_in("s23", trivial_numbers(v["s23"], "0.5"))  # every score the same
    slip = dict(right["s24"], **{"scaled[3][2]": "0.999"})  # one slip: fix first names it in words
    hand_in("s24", slip)
    # s25-s30 blank (as handed out); and a return that never finishes, first in the folder's order
    shutil.copy(out / "s30" / "answers.toml", out / "a-slow.toml")
    read = grading.read_table

    def slow(path, **kw):
        if os.path.basename(path) == "a-slow.toml":
            while True:
                sum(range(1000))
        return read(path, **kw)

    monkeypatch.setattr(grading, "read_table", slow)
    from symattn.input.limits import deadline

    # as the CLI's --max-seconds: each return gets its share of what is left, the slow one (first) 120/31 s;
    # 30 s gave each about 1 s, which a loaded machine (CI beside another suite) missed for a fast return
    with deadline(120, "test"):
        book = grade(out)
    text = gradebook_text(book, "markdown", "zh")
    rows = {(r.id or r.file): r for r in book.rows}
    assert all(rows[i].score == 11 and rows[i].notes == () for i in ids[:20])
    assert words(rows["s21"]) == [
        "decimal commas in 11 claims, read as points (the first: score S (sat, the) [scores[3][1]])"
    ]
    assert rows["s21"].score == 11
    # no method marks given silently: the 8 numbers carried from the zeros score ½ each
    assert rows["s22"].notes == (Note("trivial_zeros", "scores", "8", "sat"),)
    assert rows["s23"].notes == (Note("trivial_equal", "scores", "8", "sat"),)
    assert all(rows[i].score < 11 - 3 for i in ("s22", "s23"))
    assert rows["s24"].first_to_fix == "scaled[3][2]"
    assert all(rows[i].error == Note("not_returned", text=f"{i}/answers.toml") for i in ids[24:])
    assert text.count("：11 个数用了小数逗号，按小数点读（第一个：分数 S (sat, the) \\[scores\\[3\\]\\[1\\]\\]）") == 1
    assert (
        "- s22 (s22/answers.toml)：分数 S（sat）全写成 0；由它沿用的 8 个数按“沿用平凡答案”（carried-trivial）计分"
        in text
    )
    assert "| s24 |  | " in text and "$S/\\sqrt{d_k}$（sat，cat） |" in text and "scaled[3][2]" not in text
    # the return that never finished is named by its own file, and every other return was graded
    assert "- a-slow.toml：未能评分：a-slow.toml: took longer than 3." in text
    assert "已评分 24 份，未能评分 1 份，6 人没有交。" in text  # s25-s30 left their files as handed out
    assert "没有错误的数。" not in text or "出错的步骤" in text


def test_carried_trivial_is_a_policy_key(small_class, tmp_path):
    out, v = small_class
    (out / "s01" / "answers.toml").write_text(fill(v["s01"], trivial_numbers(v["s01"], "0")), encoding="utf-8")
    policy = tmp_path / "policy.toml"
    scores = []
    for value in ("1", "0"):
        policy.write_text(f'"carried-trivial" = {value}\n', encoding="utf-8")
        scores.append(next(r for r in grade(out, policy=grading.read_policy(policy)).rows if r.id == "s01").score)
    # too coarse ½ (a score of 2 decimals written "0") + last-digit 2 × ½, then the 8 carried numbers at 1
    # (the old silent 10/11) or 0
    assert scores == [Fraction(19, 2), Fraction(3, 2)]
    assert next(r for r in grade(out).rows if r.id == "s01").score == Fraction(11, 2)


def test_trivial_answers_of_each_kind():
    from symattn.checking.checker import check
    from symattn.input.spec import spec_from_mapping

    spec = spec_from_mapping(
        {
            "tokens": ["a", "b"],
            "Q": [["1", "2"], ["3", "4"]],
            "K": [["1", "0"], ["0", "1"]],
            "V": [["5", "6"], ["7", "8"]],
        }
    )

    def kinds(claims):
        return trivial_rows(check(spec, {"claims": claims}).results, spec)

    assert kinds({"scores[1][1]": "1", "scores[1][2]": "2"}) == {}  # the right scores are Q's row: no dodge
    assert kinds({"scores[2][1]": "1", "scores[2][2]": "2"}) == {("scores", 1): "inputs"}
    assert kinds({"scores[2][1]": "0", "scores[2][2]": "0"}) == {("scores", 1): "zeros"}
    assert kinds({"weights[1][1]": "0.5", "weights[1][2]": "0.5"}) == {("weights", 0): "equal"}
    assert kinds({"output[2][1]": "5", "output[2][2]": "6"}) == {("output", 1): "inputs"}


def test_an_answer_in_arabic_indic_digits_counts_blank_and_the_rest_is_graded(small_class):
    out, v = small_class
    right = dict(key_numbers(v["s01"]), **{"scaled[3][2]": "٣.٥"})
    (out / "s01" / "answers.toml").write_text(fill(v["s01"], right), encoding="utf-8")
    row = next(r for r in grade(out).rows if r.id == "s01")
    assert (row.error, dict(row.counts)["blank"], row.score) == (None, 1, 10)
    assert words(row) == [
        "scaled S/√d_k (sat, cat) [scaled[3][2]]: '٣.٥' is not a number in ASCII digits (write 3.5); counted blank"
    ]
    assert words(row, "zh") == [
        "缩放后 S/√d_k (sat, cat) [scaled[3][2]]：'٣.٥' 不是用 ASCII 数字写的数（请写 3.5），按空白计"
    ]


def test_an_unknown_student_id_with_controls_is_shown_escaped_and_short(small_class):
    out, v = small_class
    text = fill(v["s01"], {}).replace('student = "s01"', 'student = "x\\u001b[2J' + "y" * 10_000 + '"')
    (out / "s01" / "answers.toml").write_text(text, encoding="utf-8")
    row = next(r for r in grade(out).rows if r.file == "s01/answers.toml")
    named = "x\\x1b[2J" + "y" * 45 + "…"  # 50 characters of the id, then its controls escaped
    assert (row.id, row.error) == (named, Note("unknown_student", text=named))


def test_a_class_not_filled_in_yet_says_so_and_exits_0(small_class, tmp_path, capsys):
    out, _ = small_class
    page = tmp_path / "gradebook.html"
    assert main(["grade", str(out), "-o", str(page)]) == 0  # the gradebook is written and true: all blank
    assert (
        capsys.readouterr().err == f"symattn: {out}: 3 answers files, none filled in yet: every asked number is blank\n"
    )
    assert page.read_text(encoding="utf-8").count("not returned") == 3 and "0/11" not in page.read_text("utf-8")
    for i in IDS:
        (out / i / "answers.toml").unlink()
    assert main(["grade", str(out), "-o", str(page)]) == 0
    assert capsys.readouterr().err == f"symattn: {out}: no answers files returned yet (3 students in the index)\n"


def test_a_filled_in_class_says_nothing_more(small_class, tmp_path, capsys):
    out, v = small_class
    (out / "s01" / "answers.toml").write_text(fill(v["s01"], key_numbers(v["s01"])), encoding="utf-8")
    assert main(["grade", str(out), "-o", str(tmp_path / "gradebook.csv")]) == 0
    assert capsys.readouterr() == ("", "")
