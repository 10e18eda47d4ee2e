"""MLA on exercise sheets (issue 32): a template with an [mla] table and [vary.mla] rules gives each student
their own X and W_Q, a sheet that states the table and the route, and an answers file whose latent, absorbed
query and latent output check right with ``symattn check`` and grade full marks."""

import re
import shutil

import pytest

from symattn.checking.checker import check
from symattn.classroom import exercises as ex
from symattn.classroom import sheets
from symattn.cli.commands import main
from symattn.input.errors import SpecError

TEMPLATE = """title = "MLA by hand"
lang = "LANG"
tokens = ["the", "cat", "sat"]
focus = "sat"
mla_route = "absorbed"
ask = ["latent", "absorbed_query", "scores", "weights", "latent_output", "output"]
[mla]
X = [[1, 0, 1], [0, 1, 1], [1, 1, 0]]
W_DKV = [[1, 0], [0, 1], [0.5, 0.5]]
W_UK = [[1, 0], [1, 1]]
W_UV = [[1, 0], [0, 2]]
W_Q = [[1, 0], [0, 1], [0, 0]]
[vary.mla]
X = { range = [-1, 1], step = 1 }
W_Q = { range = [-1, 1], step = 0.5 }
"""
ASKED = (
    [f"latent[{i}][{c}]" for i in (1, 2, 3) for c in (1, 2)]
    + ["absorbed_query[3][1]", "absorbed_query[3][2]", "scores[3][1]", "scores[3][2]", "scores[3][3]"]
    + ["weights[3][1]", "weights[3][2]", "weights[3][3]", "latent_output[3][1]", "latent_output[3][2]"]
    + ["output[3][1]", "output[3][2]"]
)


def _template(tmp_path, lang="en", **replace):
    text = TEMPLATE.replace("LANG", lang)
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "mla.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _filled(v):
    """The answers file with every blank filled from the key."""
    text = sheets.answers(v)
    for a, value in zip(v.asked, sheets.answer_values(v)):
        text = text.replace(f'"{a.key}" = ""', f'"{a.key}" = "{value.value}"')
    return text


def test_the_draw_varies_x_and_w_q_in_their_shapes_and_keeps_the_rest(tmp_path):
    (v,) = ex.exercise(_template(tmp_path), ["s01"], 1)
    assert v.mapping["mla"] == {
        "X": [["1", "0", "1"], ["0", "0", "-1"], ["0", "-1", "-1"]],
        "W_DKV": [[1, 0], [0, 1], ["0.5", "0.5"]],
        "W_UK": [[1, 0], [1, 1]],
        "W_UV": [[1, 0], [0, 2]],
        "W_Q": [["0.5", "1.0"], ["-0.5", "1.0"], ["0.0", "1.0"]],
    }
    assert tuple(a.key for a in v.asked) == tuple(ASKED)
    assert [str(x.value) for x in sheets.answer_values(v)] == [
        *("1.5", "0.5", "-0.5", "-0.5", "-0.5", "-1.5"),  # c_KV, every key's
        *("0.5", "-1.5", "0.0", "0.5", "2.0"),  # q̃ of "sat", then its scores q̃ c_jᵀ
        *("0.153", "0.218", "0.629", "-0.194", "-0.976", "-0.194", "-1.952"),
    ]


@pytest.mark.parametrize(
    "lang, phrases",
    [
        (
            "en",
            (
                "Multi-head latent attention: the keys and values come from a latent $c_{KV} = X W_{DKV}$, with "
                "$K = c_{KV} W_{UK}$ and $V = c_{KV} W_{UV}$; the queries are $Q = X W_Q$.",
                "Take the absorbed route: fold $W_{UK}$ into the query, $\\tilde{q} = q\\, W_{UK}^{\\top}$,",
                "| the | $[1,\\ 0,\\ 1]$ |",
                "W_Q=\\begin{bmatrix}0.5 & 1.0 \\\\ -0.5 & 1.0 \\\\ 0.0 & 1.0\\end{bmatrix}",
                "Work out the row of the token “sat”.",
                "- MLA latent output $u = P\\, c_{KV}$: 3 decimal places",
                "| 1 | MLA latent $c_{KV}$ | the | column 1 | `latent[1][1]` ________ |",
                "| 16 | MLA latent output $u = P\\, c_{KV}$ | sat | column 2 | `latent_output[3][2]` ________ |",
            ),
        ),
        (
            "zh",
            (
                "多头潜在注意力：键和值来自潜在向量 $c_{KV} = X W_{DKV}$，$K = c_{KV} W_{UK}$，$V = c_{KV} W_{UV}$；"
                "查询是 $Q = X W_Q$。",
                "走吸收路线：把 $W_{UK}$ 并入查询",
                "| 7 | MLA 吸收后的查询 | sat | 第 1 列 | `absorbed_query[3][1]` ________ |",
            ),
        ),
    ],
)
def test_the_sheet_states_the_table_and_the_route(tmp_path, lang, phrases):
    text = sheet_saying(_template(tmp_path, lang), phrases)
    assert "| the | $Q$ |" not in text and "$V$ |" not in text  # Q, K and V are the student's to make


def sheet_saying(template, phrases):
    """The first student's sheet (Markdown), which says each phrase once."""
    (v,) = ex.exercise(template, ["s01"], 1)
    text = sheets.sheet(v)
    for phrase in phrases:
        assert text.count(phrase) == 1, phrase
    return text


def test_the_naive_route_says_so(tmp_path):
    path = _template(tmp_path, **{'mla_route = "absorbed"': 'mla_route = "naive"'})
    (v,) = ex.exercise(path, ["s01"], 1)
    assert "Take the naive route: up-project the latent to K and V, then attend as usual." in sheets.sheet(v)


@pytest.mark.parametrize("seed", [1, 2, 3, 7])
def test_the_filled_answers_check_right(tmp_path, seed):
    report = key_report(_template(tmp_path), tmp_path, seed)
    assert [r.claim.quantity for r in report.results].count("latent_output") == 2
    assert {r.verdict for r in report.results} <= {"exact", "rounded"}
    assert all(r.verdict == "exact" for r in report.results if r.claim.quantity in ("latent", "absorbed_query"))


def key_report(template, tmp_path, seed):
    """check's report of the key's numbers in the answers file: right, none blank."""
    (v,) = ex.exercise(template, ["s01"], seed)
    path = tmp_path / "answers.toml"
    path.write_text(_filled(v), encoding="utf-8")
    report = check(None, str(path))
    assert report.ok and report.blanks == ()
    return report


def test_a_slip_in_the_latent_is_wrong_and_carried_into_the_absorbed_query(tmp_path):
    (v,) = ex.exercise(_template(tmp_path), ["s01"], 1)
    text = _filled(v).replace('"latent[3][1]" = "-0.5"', '"latent[3][1]" = "-1.5"')
    path = tmp_path / "answers.toml"
    path.write_text(text, encoding="utf-8")
    verdicts = {r.claim.quantity + str((r.row_label, r.col_label)): r.verdict for r in check(None, str(path)).results}
    assert verdicts["latent('sat', 1)"] == "wrong"
    assert verdicts["absorbed_query('sat', 1)"] == "exact"  # q̃ needs Q and W_UK only


def graded_rows(template, out, capsys, count):
    """The gradebook's CSV rows of a class of ``count`` where s01 returned the key's numbers."""
    assert main(["exercise", str(template), "--count", str(count), "--seed", "1", "-o", str(out)]) == 0
    (v,) = ex.exercise(template, ["s01"], 1)
    (out / "s01" / "answers.toml").write_text(_filled(v), encoding="utf-8")
    capsys.readouterr()
    assert main(["grade", str(out), "--format", "csv"]) == 0
    return capsys.readouterr().out.splitlines()


def test_the_class_grades_full_marks_for_the_key(tmp_path, capsys):
    rows = graded_rows(_template(tmp_path), tmp_path / "class", capsys, 2)
    assert rows[1].startswith("s01,,11,7,0,0,0,0,0,0,18,18,")
    # s02 left the file as handed out: not returned
    assert (
        rows[2] == "s02,,0,0,0,0,0,0,0,0,0,0,,,answers file not filled in: every blank is still blank,s02/answers.toml"
    )


@pytest.mark.parametrize(
    "replace, message",
    [
        (
            {'mla_route = "absorbed"': 'mla_route = "absorbed"\nrope = true'},
            "rope: an exercise sheet does not state this key yet; remove it, or render the derivation",
        ),
        (
            {"W_Q = [[1, 0], [0, 1], [0, 0]]": "W_Q = [[1, 0], [0, 1], [0, 0]]\nW_QR = [[1, 0], [0, 1], [0, 0]]"},
            "mla.W_KR: missing (the decoupled dims need W_QR and W_KR together)",
        ),
        (
            {"[vary.mla]": "[vary.Q]\nrange = [-1, 1]\nstep = 1\n[vary.mla]"},
            "vary.Q: with an [mla] table Q, K and V are made from it; vary its matrices",
        ),
        (
            {"W_Q = { range": "W_DQ = { range"},
            "vary.mla.W_DQ: no such matrix in [mla]; expected one of X, W_DKV, W_UK, W_UV, W_Q",
        ),
        ({"step = 0.5 }": "step = 0.3 }"}, "vary.mla.W_Q.range: low and high must be whole multiples of step"),
        (
            {"W_Q = [[1, 0], [0, 1], [0, 0]]": "W_Q = [[1, 0], [0, 1], [0, 0]]\nrope = true"},
            "mla.rope: unknown key; expected one of X, W_DKV, W_UK, W_UV, W_Q, W_DQ, W_UQ, W_QR, W_KR",
        ),
        (
            {"X = [[1, 0, 1], [0, 1, 1], [1, 1, 0]]": 'X = "hostile"'},
            "mla.X: expected a matrix (a list of rows), got a string",
        ),
    ],
)
def test_what_a_sheet_cannot_state_is_refused_in_one_line(tmp_path, replace, message):
    path = _template(tmp_path, **replace)
    with pytest.raises(SpecError) as info:
        ex.exercise(path, ["s01"], 1)
    assert str(info.value) == f"{path}: {message}"


def test_mla_quantities_are_asked_only_with_a_table(tmp_path):
    data = {"tokens": ["a", "b"], "ask": ["scores", "latent"], "vary": {"Q": {"range": ["-1", "1"], "step": "1"}}}
    data.update(K=[["1", "0"], ["0", "1"]], V=[["1", "0"], ["0", "1"]])
    with pytest.raises(SpecError) as info:
        ex.exercise(data, ["s01"], 1)
    assert str(info.value) == "<dict>: ask[2]: latent is asked only with an [mla] table"
    data = {**data, "ask": ["scores"], "vary": {**data["vary"], "mla": {}}}
    with pytest.raises(SpecError) as info:
        ex.exercise(data, ["s01"], 1)
    assert str(info.value) == "<dict>: vary.mla: varies an [mla] table, but the template has none"


@pytest.mark.client
@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_the_sheet_and_key_compile(latex, tmp_path, lang, engine):
    assert_compiles(latex, tmp_path, _template(tmp_path, lang), engine)


def assert_compiles(latex, tmp_path, template, engine):
    """The first student's sheet and key compile in TeX Live with no overfull box."""
    if not shutil.which(engine):
        pytest.skip(f"{engine} not installed")
    (v,) = ex.exercise(template, ["s01"], 1)
    for name, tex in (("sheet", sheets.sheet(v, "latex")), ("key", sheets.key(v, "latex"))):
        folder = tmp_path / name
        folder.mkdir()
        latex(tex, engine, folder)
        log = (folder / "doc.log").read_text(encoding="utf-8", errors="replace")
        assert re.findall(r"Overfull \\[hv]box", log) == [], name


def test_an_mla_key_that_is_no_table_is_refused_in_one_line(tmp_path):
    from symattn.input.files import read_table

    data = {**read_table(_template(tmp_path)), "mla": "hostile"}
    with pytest.raises(SpecError) as info:
        ex.exercise(data, ["s01"], 1)
    assert str(info.value) == "<dict>: mla: expected a table of X, W_DKV, W_UK, W_UV and W_Q, got 'hostile'"


def test_the_key_labels_the_latent_s_columns_by_number_and_its_rows_by_token(tmp_path):
    # the key wrote a latent's d_c columns as token names ("I | saw"): they are columns of c_KV
    (v,) = ex.exercise(_template(tmp_path), ["s01"], 1)
    text = sheets.key(v)
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \| MLA latent", line)]
    assert rows, "the key asks the latent"
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert all(c[3].startswith("column ") for c in cells)
    assert {c[2] for c in cells} <= set(v.spec.tokens)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_latent_s_names_are_set_as_math_like_the_scores(tmp_path, lang):
    (v,) = ex.exercise(_template(tmp_path, lang), ["s01"], 1)
    text = sheets.sheet(v)
    assert "c_KV" not in text and "c\\_KV" not in text
    if lang == "zh":
        assert "\n- MLA 潜在输出 $u = P\\, c_{KV}$ 保留 3 位小数\n" in text
        assert "\n| 1 | MLA 潜在向量 $c_{KV}$ | the | 第 1 列 | `latent[1][1]` ________ |\n" in text
