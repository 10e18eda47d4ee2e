"""Claims the public worked examples make: backward claims labelled by their rows and columns, the stable
softmax's exps, the author's own scale, dO and rowsum, and last-digit only where rounding is plausible."""

import subprocess

import pytest
import sympy

from symattn.checking.checker import check
from symattn.checking.report import report_data
from symattn.exact import numeric
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render_report

# 2 tokens, 3 input dimensions: the rows of dW_Q are input dimensions (3 of them, past the 2 tokens)
PROJECTED = {
    "lang": "en",
    "tokens": ["a", "b"],
    "X": [[1, 0, "0.5"], [0, 1, "0.5"]],
    "W_Q": [[1, 0], [0, 1], ["0.2", "-0.2"]],
    "W_K": [[1, 0], [0, 1], [0, "0.5"]],
    "W_V": [[1, 0], [0, 1], [1, 1]],
    "backward": {"loss": "sum"},
}


def places(report):
    return [(v.claim.key, v.row_label, v.col_label, v.row_axis, v.col_axis) for v in report.results]


def test_backward_claims_are_labelled_by_their_rows_and_columns():
    # this crashed in Checker.labels with "IndexError: tuple index out of range": dW_Q's row 3 was looked up
    # among the 2 tokens
    report = check(PROJECTED, {"claims": {"dW_Q[3][1]": "0.1", "dX[2][3]": "0.5", "dV[1][2]": "2", "dK[2][1]": "1"}})
    assert places(report) == [
        ("claims.dV[1][2]", "a", 2, "key", "dim"),
        ("claims.dK[2][1]", "b", 1, "key", "dim"),
        ("claims.dW_Q[3][1]", 3, 1, "input", "dim"),
        ("claims.dX[2][3]", "b", 3, "token", "input"),
    ]
    text = render_report(report, "text")
    assert (
        "  gradient dW_Q (input dimension 3, column 1): 0.1 — last-digit\n    0.5×0 + 0.5×0 = 0; correctly rounded: 0.0\n"
        in text
    )
    assert "  gradient dX (b, input dimension 3): 0.5 — wrong\n" in text
    table = render_report(report, "markdown")
    assert "| 3 | gradient $dW_Q$ | input dimension 3 | column 1 | 0.1 | 0 |" in table
    data = report_data(report)["claims"]
    assert [(c["row"], c["col"]) for c in data] == [("a", 2), ("b", 1), (3, 1), ("b", 3)]


def test_a_dq_column_past_the_tokens_is_a_column():
    # d_k = 3 with 2 tokens: the column of dQ was called by a token's name where one existed
    spec = {"tokens": ["a", "b"], "Q": [[1, 0, 1], [0, 1, 0]], "K": [[1, 1, 0], [0, 1, 1]], "V": [[1], [2]]}
    report = check(spec, {"claims": {"dQ[1][3]": "0.1", "dQ[2][1]": "0"}}, backward=True)
    assert places(report) == [
        ("claims.dQ[1][3]", "a", 3, "token", "dim"),
        ("claims.dQ[2][1]", "b", 1, "token", "dim"),
    ]
    assert render_report(report, "text").split("\n")[4].startswith("1   gradient dQ (a, column 3)")


@pytest.mark.parametrize(
    "claims, message",
    [
        ({"dW_Q[4][1]": 1}, "claims.dW_Q[4][1]: index 4 is out of range 1..3"),
        ({"dW_V[1][3]": 1}, "claims.dW_V[1][3]: index 3 is out of range 1..2"),
        ({"dX[3][1]": 1}, "claims.dX[3][1]: index 3 is out of range 1..2"),
        ({"dX[1][4]": 1}, "claims.dX[1][4]: index 4 is out of range 1..3"),
        ({"dQ[1][3]": 1}, "claims.dQ[1][3]: index 3 is out of range 1..2"),
        ({"rowsum[3]": 1}, "claims.rowsum[3]: index 3 is out of range 1..2"),
        ({"rowsum[1][1]": 1}, "claims.rowsum[1][1]: rowsum takes 1 index(es), got 2"),
        ({"dO[1][3]": 1}, "claims.dO[1][3]: index 3 is out of range 1..2"),
        ({"scale[1]": 1}, "claims.scale[1]: scale takes 0 index(es), got 1"),
        ({"dW_O[1][1]": 1}, "claims.dW_O[1][1]: dW_O is a quantity of several heads or W_O; this spec has one head"),
        (
            {"rows": {"a": {"dW_Q": [1, 2]}}},
            "claims.rows.a.dW_Q: dW_Q is claimed as a whole matrix or by entry "
            "(dW_Q[i][j]), not in a row section (its rows are keys or input dimensions)",
        ),
    ],
)
def test_an_index_past_the_matrix_is_one_line_naming_the_claim(claims, message):
    with pytest.raises(SpecError) as info:
        check(PROJECTED, {"claims": claims})
    assert str(info.value) == "<dict>: " + message


# --- the stable softmax -------------------------------------------------------------------------------

STABLE = {
    "lang": "en",
    "tokens": ["a", "b"],
    "Q": [[1, 0], [0, 1]],
    "K": [[1, 0], [0, 1]],
    "V": [[1, 2], [3, 4]],
    "scale": "none",
    "softmax": "stable",
}


def test_stable_exps_are_what_the_document_shows_and_e_to_the_z_gets_a_note():
    claims = {
        "rows": {
            "a": {"shifted": [0, -1], "exp": ["1.0", "0.368"], "exp_sum": "1.368"},  # e^(z − max), as shown
            "b": {"exp": ["1.000", "2.718"], "exp_sum": "3.718", "weights": ["0.269", "0.731"]},  # e^z
        },
        "exp[2][1]": "0.37",
        "shifted[2][1]": "-1.0",
    }
    report = check(STABLE, {"claims": claims})
    got = [(v.claim.quantity, v.row_label, v.col_label, v.claim.number.text, v.verdict, v.note) for v in report.results]
    assert got == [
        ("shifted", "a", "a", "0", "exact", None),
        ("shifted", "a", "b", "-1", "exact", None),
        ("shifted", "b", "a", "-1.0", "exact", None),
        ("exp", "a", "a", "1.0", "exact", None),
        ("exp", "a", "b", "0.368", "rounded", None),
        ("exp", "b", "a", "0.37", "rounded", None),  # e^(0 − 1)
        ("exp", "b", "a", "1.000", "exact", "unshifted"),  # e^0: right for e^z
        ("exp", "b", "b", "2.718", "rounded", "unshifted"),
        ("exp_sum", "a", None, "1.368", "rounded", None),
        ("exp_sum", "b", None, "3.718", "carried", None),  # the sum of their own exps
        ("weights", "b", "a", "0.269", "rounded", None),
        ("weights", "b", "b", "0.731", "rounded", None),
    ]
    text = render_report(report, "text")
    assert (
        "e^(z − max) (b, b)          2.718     rounded       2.71828 = E (given as e^z, without subtracting the row maximum; the document shows e^(z − max))\n"
        in text
    )
    assert "sum of e^(z − max) (a)      1.368     rounded       1.36788 = exp(-1) + 1\n" in text
    assert report_data(report)["claims"][7]["note"] == "unshifted"


def test_a_stable_exp_wrong_either_way_is_wrong():
    report = check(STABLE, {"claims": {"exp[2][2]": "0.5", "exp_sum[1]": "2.0"}})
    assert [(v.verdict, v.note) for v in report.results] == [("wrong", None), ("wrong", None)]
    text = render_report(report, "text")
    assert "  e^(z − max) (b, b): 0.5 — wrong\n    e^0 = 1; correctly rounded: 1.0\n" in text
    assert "  sum of e^(z − max) (a): 2.0 — wrong\n    1 + 0.367879 ≈ 1.36788; correctly rounded: 1.4\n" in text


# --- the author's scale --------------------------------------------------------------------------------

SEED = builtin.example_path("seed", "en")


def test_the_authors_multiplier_feeds_the_carried_chain():
    row = {"scaled": ["0.650", "0.134", "0.530"], "exp": ["1.916", "1.143", "1.699"]}
    # 0.92 × 0.707 = 0.65044: the 0.650 of a multiplier rounded to 0.707, not a slip
    report = check(SEED, {"claims": {"scale": "0.707", "rows": {"it": row}}})
    got = [(v.claim.quantity, v.col_label, v.claim.number.text, v.verdict) for v in report.results]
    assert got == [
        ("scale", None, "0.707", "rounded"),
        ("scaled", "cat", "0.650", "carried"),
        ("scaled", "eats", "0.134", "rounded"),
        ("scaled", "it", "0.530", "rounded"),
        ("exp", "cat", "1.916", "carried"),  # e^0.650
        ("exp", "eats", "1.143", "carried"),  # e^0.134; the exact e^0.134350 rounds to 1.144
        ("exp", "it", "1.699", "rounded"),
    ]
    # without it, 0.650 is the exact 0.650538 cut off
    alone = check(SEED, {"claims": {"rows": {"it": row}}})
    assert [(v.verdict, v.truncated) for v in alone.results][0] == ("last-digit", True)


def test_a_wrong_scale_is_explained_and_a_rounder_one_carries():
    report = check(SEED, {"claims": {"scale": "0.75", "sqrt_dk": "1.4", "scaled[1][1]": "0.75"}})
    assert [(v.claim.quantity, v.verdict) for v in report.results] == [
        ("sqrt_dk", "rounded"),
        ("scale", "wrong"),
        ("scaled", "carried"),  # 1.00 × their 0.75
    ]
    assert "  scale 1/√d_k: 0.75 — wrong\n    1/√2 ≈ 0.707107; correctly rounded: 0.71\n" in render_report(
        report, "text"
    )
    # with √d_k claimed and no multiplier, z is the score over their √d_k: 1.00 / 1.4
    report = check(SEED, {"claims": {"sqrt_dk": "1.4", "scaled[1][1]": "0.714"}})
    assert [v.verdict for v in report.results] == ["rounded", "carried"]


# --- dO and rowsum -------------------------------------------------------------------------------------

MSE = builtin.example_path("backward-mse", "en")


def test_do_is_o_minus_t_from_the_claimants_output():
    claims = {"rows": {"it": {"output": ["4.387", "2.757"], "dO": ["4.387", "2.757"]}}, "dO[1][1]": "-5.3"}
    report = check(MSE, {"claims": claims})
    assert [(v.claim.quantity, v.row_label, v.col_label, v.verdict) for v in report.results] == [
        ("output", "it", 1, "wrong"),
        ("output", "it", 2, "wrong"),
        ("dO", "cat", 1, "wrong"),
        ("dO", "it", 1, "carried"),  # their O − T (T = 0)
        ("dO", "it", 2, "carried"),
    ]
    assert (
        "  gradient dO (cat, column 1): -5.3 — wrong\n    4.53345 − 10 ≈ -5.46655; correctly rounded: -5.5\n"
        in render_report(report, "text")
    )


def test_rowsum_claims_and_dz_from_the_claimed_rowsum():
    model = build(load_spec(MSE))
    w, dA = model.forward.exact("weights")[2, 0], model.exact("dA")[2, 0]
    # dZ = α (dA − r) with their r = 26.8 (the exact r rounds to 26.834)
    mine = numeric.round_expr(w * (dA - sympy.Rational(268, 10)), 3)
    claims = {
        "rows": {"it": {"rowsum": "26.8", "dZ": [format(mine, "f"), "", ""]}},
        "rowsum[1]": "-18.18",
        "rowsum[2]": "-15.6",
    }
    report = check(MSE, {"claims": claims})
    assert [(v.claim.quantity, v.row_label, v.col_label, v.verdict) for v in report.results] == [
        ("rowsum", "cat", None, "rounded"),
        ("rowsum", "eats", None, "wrong"),
        ("rowsum", "it", None, "rounded"),
        ("dZ", "it", "cat", "carried"),
    ]
    assert format(mine, "f") == "6.860"  # the exact dZ is 6.846
    text = render_report(report, "text")
    assert (
        "  row sum r (eats): -15.6 — wrong\n"
        "    28.8823×0.260829 + (-51.2776)×0.459230 + (-2.23952)×0.279940 ≈ -16.6418; correctly rounded: -16.6\n"
    ) in text


# --- last-digit only where a rounding slip is plausible ----------------------------------------------


@pytest.mark.parametrize(
    "Q, claim, verdict",
    [
        ([[2, 1]], "5", "wrong"),  # the score is exactly 6: an integer one off is a wrong computation
        ([[2, 1]], "7", "wrong"),
        ([[2, 1]], "5.9", "wrong"),  # 6 exactly from the given numbers: no rounding on its path to slip
        ([[2, 1]], "5.99", "wrong"),
        ([[2, 1]], "6", "exact"),
        ([["2.8", 0]], "5", "last-digit"),  # 5.6: an integer for a value that is not one
        ([["2.8", 0]], "6", "rounded"),
        ([["2.8", 0]], "4", "wrong"),
    ],
)
def test_an_integer_one_off_an_exact_integer_is_wrong(Q, claim, verdict):
    spec = {"Q": Q, "K": [[3, 0] if Q[0][0] == 2 else [2, 0]], "V": [[1]], "scale": "none"}
    assert [v.verdict for v in check(spec, {"claims": {"scores[1][1]": claim}}).results] == [verdict]


def test_whole_percentages_are_integers_too():
    two = {"Q": [[1, 0]], "K": [[1, 0], [1, 0]], "V": [[1], [2]]}  # weights exactly 1/2: 50%
    three = {"Q": [[1, 0]], "K": [[1, 0]] * 3, "V": [[1], [2], [3]]}  # 1/3: 33.33…%
    assert check(two, {"claims": {"percent[1][1]": "49%"}}).results[0].verdict == "wrong"
    assert check(two, {"claims": {"percent[1][1]": "49.9%"}}).results[0].verdict == "last-digit"
    assert check(three, {"claims": {"percent[1][1]": "32%"}}).results[0].verdict == "last-digit"
    assert check(three, {"claims": {"weights[1][1]": "0.32"}}).results[0].verdict == "last-digit"


def test_a_percentage_reason_keeps_its_percent_sign():
    three = {"Q": [[1, 0]], "K": [[1, 0]] * 3, "V": [[1], [2], [3]]}  # 1/3: 33.33…%
    report = check(three, {"claims": {"percent[1][1]": "32%"}})
    text = render_report(report, "text")
    assert "    2.02811 / 6.08434 ≈ 0.333333; correctly rounded: 33%\n" in text
    assert "Fix first: weight (percent) (t1, k1) is given as 32% but should be 33% (later mistakes" in text
    assert r"correctly rounded: \(33\%\)" in render_report(report, "latex")
    assert report_data(report)["claims"][0]["expected"] == "33"  # JSON: the number, in the claim's unit


# --- the new names in every format, and compiled ------------------------------------------------------


def new_names_report(lang):
    heads = {**STABLE, "lang": lang, "heads": 2, "W_O": [[1, 0], [0, 1]], "backward": {"loss": "sum"}}
    claims = {
        "scale": "0.5",
        "h1.shifted[1][2]": "-1",
        "h2.exp[2][2]": "2.718",  # e^z of a stable softmax: a note
        "h2.rowsum[1]": "0.5",
        "concat[1][2]": "9",
        "dW_O[2][1]": "7",
        "dO[1][1]": "1",
    }
    return check(heads, {"claims": claims})


@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_new_names_compile_and_read_back(latex, tmp_path, lang, engine):
    report = new_names_report(lang)
    pdf = latex(render_report(report, "latex", standalone=True), engine, tmp_path)
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    words = {
        "en": ["of head 1", "of head 2", "row 2", "concatenation", "row sum", "without subtracting"],
        "zh": ["第 1 个头的", "第 2 个头的", "第 2 行", "拼接", "行和", "未减去行"],
    }[lang]
    flat = "".join(text.split())  # a place may wrap in its column: compare without the line breaks
    for word in words:
        assert "".join(word.split()) in flat, word


def test_new_names_in_text_and_markdown():
    report = new_names_report("en")
    lines = render_report(report, "text").split("\n")[4:11]
    assert [line.split("  ")[0] for line in lines] == [
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
    ]
    text = render_report(report, "text")
    for place in (
        "scale 1/√d_k ",
        "shifted z − max of head 1 (a, b) ",
        "e^(z − max) of head 2 (b, b) ",
        "concatenation (a, column 2) ",
        "gradient dO (a, column 1) ",
        "gradient dW_O (row 2, column 1) ",
        "row sum r of head 2 (a) ",
    ):
        assert place in text, place
    assert "(given as e^z, without subtracting the row maximum; the document shows e^(z − max))" in text
    markdown = render_report(report, "markdown")
    assert "(given as $e^{z}$, without subtracting the row maximum; the document shows $e^{z - \\max}$)" in markdown
    assert "| 2 | shifted $z - \\max$ of head 1 | a | b | -1 |" in markdown


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_claim_quantity_has_a_name(lang):
    from symattn.input.quantities import QUANTITIES
    from symattn.rendering.phrases import load_language

    names = load_language(lang)["quantity"]
    assert [q for q in QUANTITIES + ("exp_shifted", "exp_shifted_sum") if q not in names] == []
    # "term": a partial product's term (products.scores[i][j], issue 32)
    assert set(load_language(lang)["report"]["axis"]) == {"block", "dim", "dim_row", "input", "pair", "term"}
    assert set(names["products"]) == {"scores", "output"}
