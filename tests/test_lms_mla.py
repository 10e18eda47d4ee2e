"""MLA sheets as Moodle and Canvas quizzes (issue 32): the gaps of the latent c_KV, the absorbed query, the
scores, the weights, the latent output and the output, each the exact value (computed here independently,
with fractions) within half a unit of its last digit; MLA's planted slips as 0 % answers with feedback that
names them; Moodle's own Cloze parser and QTI's structure; and the LMS's responses graded with error
carried forward."""

import math
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from io import BytesIO

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom.gaps import gaps
from symattn.classroom.mla_slips import slipped_models
from symattn.classroom.moodle import moodle_xml
from symattn.classroom.qti import qti_files, qti_zip
from symattn.classroom.sheets import answer_values
from symattn.cli.commands import main

from . import independent as ind
from .test_exercise_mla import _template
from .test_lms import QTI, assert_items, moodle_gaps, responses_csv, summary


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return _template(tmp_path_factory.mktemp("mla"))


@pytest.fixture(scope="module")
def variants(template):
    return ex.exercise(template, ["s01", "s02"], 1)


def _fractions(rows):
    return [[Fraction(str(x)) for x in row] for row in rows]


def independent(v):
    """{claims key: (value, tolerance)}: the MLA chain in fractions from the drawn table, rounded as the sheet
    asks (the latent, q̃ and the scores are exact decimals, written with their own digits)."""
    table = {k: _fractions(m) for k, m in v.mapping["mla"].items()}
    c = ind.matmul(table["X"], table["W_DKV"])
    Q = ind.matmul(table["X"], table["W_Q"])
    K, V = ind.matmul(c, table["W_UK"]), ind.matmul(c, table["W_UV"])
    absorbed = ind.matmul(Q, ind.transpose(table["W_UK"]))
    S, _, _, _, A, O = ind.head(Q, K, V, 1 / Fraction(math.isqrt(2 * 10**120), 10**60))
    assert ind.matmul(absorbed, ind.transpose(c)) == S  # the routes' scores are one rational matrix
    u = ind.matmul(A, c)
    tables = {"latent": c, "absorbed_query": absorbed, "scores": S, "weights": A, "latent_output": u, "output": O}
    out = {}
    for a in v.asked:
        x = tables[a.quantity][a.row][a.col]
        places = 3 if a.quantity in ("weights", "latent_output", "output") else max(1, _digits(x))
        out[a.key] = (ind.text(x, places), format(Decimal(5).scaleb(-places - 1), "f"))
    return out


def _digits(x):
    places = 0
    while (x * 10**places).denominator != 1:
        places += 1
    return places


def test_every_moodle_gap_is_the_exact_value_within_half_a_unit(variants):
    quiz = ET.fromstring(moodle_xml(variants))
    assert [q.get("type") for q in quiz.findall("question")] == ["category", "cloze", "cloze"]
    for q, v in zip(quiz.findall("question")[1:], variants):
        _, found = moodle_gaps(q.findtext("questiontext/text"))
        want = independent(v)
        assert len(found) == len(v.asked) == 18
        for (kind, alternatives), a in zip(found, v.asked):
            fraction, answer, tolerance, feedback = alternatives[0]
            assert (kind, fraction, (answer, tolerance), feedback) == ("NUMERICAL", "1", want[a.key], "Right.")
            assert all(f == "0" and t == tolerance for f, _, t, _ in alternatives[1:])


def test_mla_slips_exactly(variants):
    got = {g.asked.key: [(s.name, str(s.value)) for s in g.slips] for g in gaps(variants[0])}
    assert {k: x for k, x in got.items() if x} == {
        "absorbed_query[3][1]": [("transposed_W_UK", "-1.5")],
        "absorbed_query[3][2]": [("transposed_W_UK", "-2"), ("swapped_up", "-4")],
        "scores[3][1]": [("transposed_W_UK", "-3.25"), ("swapped_up", "-1.25"), ("skipped_W_UK", "-0.25")],
        "scores[3][2]": [("transposed_W_UK", "1.75"), ("skipped_W_UK", "0.75")],
        "scores[3][3]": [("transposed_W_UK", "3.75"), ("swapped_up", "5.75"), ("skipped_W_UK", "2.75")],
        "weights[3][1]": [
            *(("no_scaling", "0.100"), ("column_softmax", "0.172"), ("no_exp", "0.000")),
            *(("transposed_W_UK", "0.006"), ("swapped_up", "0.007"), ("skipped_W_UK", "0.088"), ("truncated", "0.152")),
        ],
        "weights[3][2]": [
            *(("no_scaling", "0.164"), ("column_softmax", "0.446"), ("no_exp", "0.200")),
            *(("transposed_W_UK", "0.194"), ("swapped_up", "0.055"), ("skipped_W_UK", "0.178"), ("truncated", "0.217")),
        ],
        "weights[3][3]": [
            *(("no_scaling", "0.736"), ("column_softmax", "0.583"), ("no_exp", "0.800")),
            *(("swapped_up", "0.938"), ("skipped_W_UK", "0.734")),
        ],
        "latent_output[3][1]": [("transposed_W_UK", "-0.489"), ("swapped_up", "-0.487"), ("skipped_W_UK", "-0.324")],
        "latent_output[3][2]": [("transposed_W_UK", "-1.294"), ("swapped_up", "-1.431"), ("skipped_W_UK", "-1.146")],
        "output[3][1]": [
            *(("no_scaling", "-0.301"), ("transposed_W_UK", "-0.489")),
            *(("swapped_up", "-1.918"), ("skipped_W_UK", "-0.324")),
        ],
        "output[3][2]": [
            *(("no_scaling", "-2.273"), ("transposed_W_UK", "-2.588"), ("swapped_up", "-1.431")),
            *(("skipped_W_UK", "-2.291"), ("skipped_W_UV", "-0.976")),
        ],
    }
    # independently: W_UK used untransposed gives q̃ = q W_UK and the scores q W_UK c_jᵀ; without W_UK, q c_jᵀ
    v = variants[0]
    table = {k: _fractions(m) for k, m in v.mapping["mla"].items()}
    c, q = ind.matmul(table["X"], table["W_DKV"]), ind.matmul(table["X"], table["W_Q"])[2]
    slipped = ind.matmul([q], table["W_UK"])[0]
    assert slipped == [Fraction(-3, 2), -2]
    assert [sum(a * b for a, b in zip(slipped, row)) for row in c] == [
        Fraction(-13, 4),
        Fraction(7, 4),
        Fraction(15, 4),
    ]
    assert [sum(a * b for a, b in zip(q, row)) for row in c] == [Fraction(-1, 4), Fraction(3, 4), Fraction(11, 4)]
    # without W_UV the output is u itself: output[3][2]'s slip is u's column 2
    assert got["output[3][2]"][-1][1] == str(answer_values(v)[15].value)


def test_a_slip_needs_its_shape(tmp_path):
    # W_DKV square: its transpose is a slip; W_UK and W_UV (3×2) have no transpose of their shape, no identity
    path = _template(
        tmp_path,
        **{
            "W_DKV = [[1, 0], [0, 1], [0.5, 0.5]]": "W_DKV = [[1, 0, 0], [0, 1, 0], [0.5, 0.5, 1]]",
            "W_UK = [[1, 0], [1, 1]]": "W_UK = [[1, 0], [1, 1], [0, 1]]",
            "W_UV = [[1, 0], [0, 2]]": "W_UV = [[1, 0], [0, 2], [1, 1]]",
        },
    )
    (v,) = ex.exercise(path, ["s01"], 1)
    assert [name for name, *_ in slipped_models(v)] == ["transposed_W_DKV", "swapped_up"]
    by_key = {g.asked.key: g for g in gaps(v)}
    slips = {s.name: Fraction(s.value) for s in by_key["latent[1][3]"].slips}
    X, W = (_fractions(v.mapping["mla"][k]) for k in ("X", "W_DKV"))
    assert slips == {"transposed_W_DKV": ind.matmul(X, ind.transpose(W))[0][2]}


def test_the_question_states_the_table_and_the_route_not_q_k_v(variants):
    text = ET.fromstring(moodle_xml(variants[:1])).findall("question")[1].findtext("questiontext/text")
    assert (
        "<p>Multi-head latent attention: the keys and values come from a latent \\(c_{KV} = X W_{DKV}\\), with "
        "\\(K = c_{KV} W_{UK}\\) and \\(V = c_{KV} W_{UV}\\); the queries are \\(Q = X W_Q\\). Work out Q, K and V "
        "from these numbers first. Take the absorbed route: fold \\(W_{UK}\\) into the query, "
        "\\(\\tilde{q} = q\\, W_{UK}^{\\top}\\), score the latent, \\(\\tilde{q}\\, c_{KV}^{\\top}\\), then weigh "
        "the latent rows, \\(u = P\\, c_{KV}\\), and only then apply \\(W_{UV}\\), \\(o = u\\, W_{UV}\\).</p>"
    ) in text
    assert "<tr><th>token</th><th>\\(X\\)</th></tr>" in text and "\\(Q\\)" not in text
    assert (
        "<p>\\(W_Q = \\begin{bmatrix}0.5 &amp; 1.0 \\\\ -0.5 &amp; 1.0 \\\\ 0.0 &amp; 1.0\\end{bmatrix}\\)</p>" in text
    )
    assert "<p>Work out the row of the token “<span" in text  # the latent of every key is no row to work out
    # the formulas in the quantities' names are math, as the other formulas of the question are
    assert "<li>MLA latent output \\(u = P\\, c_{KV}\\): 3 decimal places</li>" in text and "<li>MLA latent" in text
    assert "u = P c_KV" not in text
    rest, _ = moodle_gaps(text)
    assert "<td>MLA latent \\(c_{KV}\\)</td><td><span" in rest and "</span></td><td>column 2</td><td>{#2}</td>" in rest


def test_chinese_feedback_names_the_mla_slip(variants):
    text = ET.fromstring(moodle_xml(variants[:1], "zh")).findall("question")[1].findtext("questiontext/text")
    _, found = moodle_gaps(text)
    assert (
        found[6][1][1][3]
        == "不对：这是典型错误（W_UK 的转置用反了：K = c_KV 乘 W_UK 的转置，或吸收后的查询 = q W_UK）得到的数。"
    )
    assert "多头潜在注意力：键和值来自潜在向量 \\(c_{KV} = X W_{DKV}\\)" in text


def test_qti_items(variants):
    files = dict(qti_files(variants))
    for v in variants:
        root = ET.fromstring(files[f"symattn-{v.id}/symattn-{v.id}.xml"]).find(f"{QTI}assessment")
        items = root.findall(f"{QTI}section/{QTI}item")
        assert len(items) == 19
        assert_items(items[1:], v, independent(v))
    items = ET.fromstring(files["symattn-s01/symattn-s01.xml"]).findall(f"{QTI}assessment/{QTI}section/{QTI}item")
    shown = [i.find(f"{QTI}presentation/{QTI}material/{QTI}mattext").text for i in items]
    assert (
        shown[1]
        == '<p>MLA latent \\(c_{KV}\\): row <span class="nolink tex2jax_ignore mathjax_ignore">the</span>, column 1.</p>'
    )
    assert shown[16] == (
        '<p>MLA latent output \\(u = P\\, c_{KV}\\): row <span class="nolink tex2jax_ignore mathjax_ignore">sat</span>, '
        "column 2.</p><p>MLA latent output \\(u = P\\, c_{KV}\\): 3 decimal places</p>"
    )
    assert "<th>\\(X\\)</th>" in shown[0]


def test_the_cli_writes_both_quizzes(tmp_path, template, variants):
    for fmt, name in (("moodle", "quiz.xml"), ("qti", "quiz.zip")):
        out = tmp_path / name
        args = ["exercise", str(template), "--count", "2", "--seed", "1", "--format", fmt, "-o", str(out)]
        assert main(args) == 0
    assert (tmp_path / "quiz.xml").read_bytes() == moodle_xml(variants)
    assert (tmp_path / "quiz.zip").read_bytes() == qti_zip(variants)
    assert zipfile.ZipFile(BytesIO(qti_zip(variants))).namelist()[0] == "imsmanifest.xml"


def _chain(v, slip):
    """Every asked number of a student who made one MLA slip and worked on from it, as the sheet asks."""
    (spec,) = [spec for name, spec, _ in slipped_models(v) if name == slip]
    return [format(x.value, "f") for x in answer_values(replace(v, spec=spec))]


def test_the_responses_grade_with_error_carried_forward(tmp_path, template, variants, capsys):
    v1, v2 = variants
    right1, right2 = ([format(g.value, "f") for g in gaps(v)] for v in variants)
    slipped = _chain(v1, "transposed_W_UK")
    assert slipped[6:11] == ["-1.5", "-2.0", "-3.25", "1.75", "3.75"]
    latent = list(right1)
    latent[4] = "-1.5"  # latent[3][1]: wrong
    path = tmp_path / "responses.csv"
    path.write_text(
        responses_csv(
            [
                ("Ng", "Al", "al@example.org", summary(right1), summary(right1)),
                ("Oh", "Bo", "bo@example.org", summary(slipped), summary(right1)),
                ("Pi", "Cy", "cy@example.org", summary(latent), summary(right1)),
                ("Qu", "Di", "di@example.org", summary(right2), summary(right2)),
            ]
        ),
        encoding="utf-8",
    )
    args = ["grade", "--lms-csv", str(path), "--template", str(template), "--seed", "1", "--count", "2"]
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "al@example.org,Al Ng,11,7,0,0,0,0,0,0,18,18,,,,row 2",
        # the slip: q̃ wrong, then every later number carried from it (u's first column is one digit off the
        # carried -0.488: the slip's chain here is rounded from its exact values, not worked from rounded ones)
        "bo@example.org,Bo Oh,6,0,9,0,0,1,2,0,15.5,18,absorbed_query[3][1],\"scored otherwise than by the LMS's own "
        "right/wrong, which gives 6/18: score S (sat, the) [part 9], score S (sat, cat) [part 10], score S (sat, sat) "
        "[part 11], weight A (sat, the) [part 12], weight A (sat, cat) [part 13], weight A (sat, sat) [part 14], MLA "
        "latent output u = P c_KV (sat, column 1) [part 15], MLA latent output u = P c_KV (sat, column 2) [part 16], "
        'output (sat, column 1) [part 17], output (sat, column 2) [part 18]",,row 3',
        # one latent wrong, the rest right: the LMS and error carried forward agree
        "cy@example.org,Cy Pi,10,7,0,0,0,0,1,0,17,18,latent[3][1],,,row 4",
        "di@example.org,Di Qu,11,7,0,0,0,0,0,0,18,18,,,,row 5",
    ]
