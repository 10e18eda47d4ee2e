"""MLA's decoupled RoPE dims on an exercise sheet (issue 32): a template with W_QR, W_KR and RoPE given as
cos/sin tables (or frequencies of multiples of 90°) states the turn, each token's cos and sin per pair, and the
pairs; its answers check right and grade full marks, its Moodle quiz states the same, and its LaTeX compiles.
Angles whose cos or sin is no exact decimal are refused in one line."""

import xml.etree.ElementTree as ET
from fractions import Fraction

import pytest

from symattn.classroom import exercises as ex
from symattn.classroom import sheets
from symattn.classroom.moodle import moodle_xml
from symattn.input.errors import SpecError

from . import independent as ind
from .test_exercise_mla import _template as _plain
from .test_exercise_mla import assert_compiles, graded_rows, key_report, sheet_saying
from .test_lms import moodle_gaps

ROPE = {
    'mla_route = "absorbed"': 'mla_route = "absorbed"\nrope = true\nrope_cos = [[1], [0.6], [0]]\n'
    "rope_sin = [[0], [0.8], [1]]",
    "W_Q = [[1, 0], [0, 1], [0, 0]]\n": "W_Q = [[1, 0], [0, 1], [0, 0]]\nW_QR = [[1, 0], [0, 1], [0, 0]]\n"
    "W_KR = [[0, 1], [1, 0], [0, 0]]\nW_QR = { range = [-1, 1], step = 1 }\n",
}


def _template(tmp_path, lang="en", **replace):
    # the [vary.mla] line for W_QR goes under [vary.mla]: move it there
    path = _plain(tmp_path, lang, **{**ROPE, **replace})
    text = path.read_text(encoding="utf-8")
    line = "W_QR = { range = [-1, 1], step = 1 }\n"
    if line in text:
        text = text.replace(line, "").replace("[vary.mla]\n", "[vary.mla]\n" + line)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_draw_varies_w_qr_and_keeps_the_turn(tmp_path):
    (v,) = ex.exercise(_template(tmp_path), ["s01"], 1)
    assert v.mapping["mla"]["W_QR"] == [["1", "-1"], ["-1", "-1"], ["-1", "0"]]
    assert v.mapping["rope_cos"] == [[1], ["0.6"], [0]]
    # q̃ of "sat", its scores (the latent's part plus the turned parts' product), its weights
    assert [str(x.value) for x in sheets.answer_values(v)][6:14] == [
        # the scores are exact (rational cos and sin): one width across their matrix, as the document writes them
        *("1.5", "-0.5", "2.50", "0.10", "-1.00", "0.678", "0.204", "0.118"),
    ]


@pytest.mark.parametrize(
    "lang, phrases",
    [
        (
            "en",
            (
                "Decoupled RoPE: each query row also has 2 position dims, $q_R = x\\, W_{QR}$, and each key row "
                "one more part, $k_R = x\\, W_{KR}$; a query is $[\\,q_{nope}\\;\\; q_R\\,]$ and a key "
                "$[\\,k_{nope}\\;\\; k_R\\,]$, the parts made as above first. Turn only these dims, pair by pair "
                "($(1,\\ 2)$): the pair (a, b) of a token's row becomes (a c − b s, a s + b c), where c and s are "
                "that token's entries of $\\cos\\theta$ and $\\sin\\theta$ (one column per pair). In the absorbed "
                "route a score is $\\tilde{q}\\, c_j^{\\top} + q'_R\\, {k'_R}^{\\top}$: the latent's part plus the "
                "turned parts' product.",
                "W_{KR}=\\begin{bmatrix}0 & 1 \\\\ 1 & 0 \\\\ 0 & 0\\end{bmatrix}",
                "\\cos\\theta=\\begin{bmatrix}1.0 \\\\ 0.6 \\\\ 0.0\\end{bmatrix}",
                "\\sin\\theta=\\begin{bmatrix}0.0 \\\\ 0.8 \\\\ 1.0\\end{bmatrix}",
                "Dimension $d_k = 4$",
            ),
        ),
        (
            "zh",
            (
                "解耦 RoPE：每个查询行另有 2 个位置维 $q_R = x\\, W_{QR}$，每个键行另有一段 $k_R = x\\, W_{KR}$；",
                "吸收路线下，分数是 $\\tilde{q}\\, c_j^{\\top} + q'_R\\, {k'_R}^{\\top}$：潜在部分加上转过的部分之积。",
            ),
        ),
    ],
)
def test_the_sheet_states_the_turn(tmp_path, lang, phrases):
    sheet_saying(_template(tmp_path, lang), phrases)


def test_frequencies_of_ninety_degrees_are_stated_as_their_cos_and_sin(tmp_path):
    path = _template(
        tmp_path, **{'mla_route = "absorbed"': 'mla_route = "naive"\nrope = true\nrope_frequencies = ["90deg"]'}
    )
    (v,) = ex.exercise(path, ["s01"], 1)
    text = sheets.sheet(v)
    assert "\\cos\\theta=\\begin{bmatrix}1 \\\\ 0 \\\\ -1\\end{bmatrix}" in text
    assert "\\sin\\theta=\\begin{bmatrix}0 \\\\ 1 \\\\ 0\\end{bmatrix}" in text
    assert "In the absorbed route" not in text


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_filled_answers_check_right(tmp_path, seed):
    report = key_report(_template(tmp_path), tmp_path, seed)
    assert {r.verdict for r in report.results} <= {"exact", "rounded"}


def independent(v):
    """The focus row's scores, weights and output from fractions: [q_nope ; q_R turned] · [k_nope ; k_R turned]."""
    table = {k: [[Fraction(str(x)) for x in row] for row in m] for k, m in v.mapping["mla"].items()}
    cos, sin = ([Fraction(str(row[0])) for row in v.mapping[k]] for k in ("rope_cos", "rope_sin"))

    def turned(rows):
        return [[a * c - b * s, a * s + b * c] for (a, b), c, s in zip(rows, cos, sin)]

    c = ind.matmul(table["X"], table["W_DKV"])
    Q_R, K_R = turned(ind.matmul(table["X"], table["W_QR"])), turned(ind.matmul(table["X"], table["W_KR"]))
    Q = [a + b for a, b in zip(ind.matmul(table["X"], table["W_Q"]), Q_R)]
    K = [a + b for a, b in zip(ind.matmul(c, table["W_UK"]), K_R)]
    S, _, _, _, A, O = ind.head(Q, K, ind.matmul(c, table["W_UV"]), Fraction(1, 2))  # 1/√(2 + 2)
    return S[2], [ind.text(x, 3) for x in A[2]], [ind.text(x, 3) for x in O[2]]


def test_the_moodle_quiz_states_the_turn_and_asks_the_exact_values(tmp_path):
    (v,) = ex.exercise(_template(tmp_path), ["s01"], 1)
    text = ET.fromstring(moodle_xml([v])).findall("question")[1].findtext("questiontext/text")
    assert "<p>\\(\\cos\\theta = \\begin{bmatrix}1.0 \\\\ 0.6 \\\\ 0.0\\end{bmatrix}\\)</p>" in text
    assert "Decoupled RoPE: each query row also has 2 position dims, \\(q_R = x\\, W_{QR}\\)" in text
    _, found = moodle_gaps(text)
    right = [alternatives[0][1] for _, alternatives in found]
    scores, weights, outputs = independent(v)
    assert [Fraction(x) for x in right[8:11]] == scores
    assert right[11:14] == weights and right[16:18] == outputs


def test_the_class_grades_full_marks_for_the_key(tmp_path, capsys):
    rows = graded_rows(_template(tmp_path), tmp_path / "class", capsys, 1)
    assert rows[1].startswith("s01,,11,7,0,0,0,0,0,0,18,18,")


@pytest.mark.parametrize(
    "replace, key",
    [
        (
            {"rope_cos = [[1], [0.6], [0]]\nrope_sin = [[0], [0.8], [1]]": 'rope_frequencies = ["30deg"]'},
            "rope_frequencies",
        ),
        ({"rope_cos = [[1], [0.6], [0]]\nrope_sin = [[0], [0.8], [1]]": ""}, "rope"),
    ],
)
def test_angles_without_exact_cos_and_sin_are_refused_in_one_line(tmp_path, replace, key):
    path = _template(tmp_path, **replace)
    with pytest.raises(SpecError) as info:
        ex.exercise(path, ["s01"], 1)
    assert str(info.value) == (
        f"{path}: {key}: an exercise sheet states each token's cos and sin as exact decimals; these angles give "
        "others (cos 30° = √3/2): give rope_cos and rope_sin tables, or rope_frequencies in multiples of 90°"
    )


def test_positions_are_refused_in_one_line(tmp_path):
    # (given angles combine with no positions; the base's, at position 0 only, turn by 0: exact cos and sin)
    still = "rope = true\npositions = [0, 0, 0]\nkey_positions = [0, 0, 0]"
    path = _template(tmp_path, **{'mla_route = "absorbed"': f'mla_route = "absorbed"\n{still}'})
    with pytest.raises(SpecError) as info:
        ex.exercise(path, ["s01"], 1)
    assert str(info.value) == f"{path}: positions: an exercise sheet turns each token by its own row's position"


@pytest.mark.client
@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_the_sheet_and_key_compile(latex, katex, tmp_path, lang, engine):
    assert_compiles(latex, tmp_path, _template(tmp_path, lang), engine)
    (v,) = ex.exercise(_template(tmp_path, lang), ["s01"], 1)
    assert katex(sheets.sheet(v)) == []  # the Markdown sheet's math, the turn's included
