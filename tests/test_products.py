"""Partial products as claims (issue 32, item 7): the terms of a score's and of an output's dot product,
each judged exactly, with error carried forward; the terms' sum carries into the score or output."""

import json

import pytest

from symattn.checking.checker import check
from symattn.checking.report import report_data
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render_report

SEED = builtin.example_path("seed", "en")
PROJECTION = builtin.example_path("projection", "en")


def verdicts(spec, claims):
    report = check(load_spec(spec), {"claims": claims})
    return [
        (v.claim.quantity, v.row_label, v.col_label, v.claim.term, v.claim.number.text, v.verdict)
        for v in report.results
    ]


def test_the_worked_examples_terms_are_right_and_their_sums_carry():
    # the seed document's step 4 writes 0.403·[10, 0] + 0.240·[0, 10] + 0.357·[1, 1] = [4.387, 2.757]
    claims = {
        "products": {"scores[3][1]": ["0.9", "0.02"], "output[3][1]": ["4.03", "0", "0.357"]},
        "products.output[3][2]": ["0", "2.40", "0.357"],
        "scores[3][1]": "0.92",
        "output[3]": ["4.387", "2.757"],
    }
    assert verdicts(SEED, claims) == [
        ("products.scores", "it", "cat", 0, "0.9", "exact"),
        ("products.scores", "it", "cat", 1, "0.02", "exact"),
        ("scores", "it", "cat", None, "0.92", "exact"),
        ("products.output", "it", 1, 0, "4.03", "rounded"),
        ("products.output", "it", 1, 1, "0", "exact"),
        ("products.output", "it", 1, 2, "0.357", "rounded"),
        ("output", "it", 1, None, "4.387", "carried"),
        ("products.output", "it", 2, 0, "0", "exact"),
        ("products.output", "it", 2, 1, "2.40", "rounded"),
        ("products.output", "it", 2, 2, "0.357", "rounded"),
        ("output", "it", 2, None, "2.757", "carried"),
    ]


def test_terms_are_asked_the_decimals_of_their_score_or_output():
    # decimals = { output = 3 } asks 3 of each term p_ij·v_jc too: 4.03 is right at 2 but too coarse
    claims = {"products.output[3][1]": ["4.03", "0", "0.357"], "products.scores[3][1]": ["0.9", "0.02"]}
    report = check(load_spec(SEED), {"claims": claims, "decimals": {"output": 3, "scores": 3}})
    assert [(v.claim.term, v.claim.number.text, v.verdict, v.asked, str(v.expected)) for v in report.results] == [
        (0, "0.9", "exact", None, "0.9"),
        (1, "0.02", "exact", None, "0.02"),
        (0, "4.03", "too-coarse", 3, "4.027"),
        (1, "0", "exact", None, "0"),
        (2, "0.357", "rounded", None, "0.357"),
    ]


def test_a_term_from_the_claimants_wrong_weight_is_carried_and_a_wrong_term_explained():
    claims = {"weights[3][1]": "0.5", "products.output[3][1]": ["5.0", "0", "4.5"], "output[3][1]": "9.5"}
    assert [v[5] for v in verdicts(SEED, claims)] == ["last-digit", "carried", "exact", "wrong", "carried"]
    text = render_report(check(load_spec(SEED), {"claims": claims}), "text")
    assert "2   partial product of the output (it, column 1, term 1) 5.0       carried       4.02653 = " in text
    assert (
        "  partial product of the output (it, column 1, term 3): 4.5 — wrong\n"
        "    0.357047×1 ≈ 0.357047; correctly rounded: 0.4\n"
    ) in text


def test_a_term_from_the_claimants_wrong_projection_is_carried_into_the_score():
    # Q[1] = X[1] W_Q + b_Q = [1.2, -0.1], K[1] = [1.0, 0.45]: their claimed 1.5 makes the term 1.5, the score 1.455
    claims = {"Q[1][1]": "1.5", "products.scores[1][1]": ["1.5", "-0.045"], "scores[1][1]": "1.455"}
    assert verdicts(PROJECTION, claims) == [
        ("Q", "cat", 1, None, "1.5", "wrong"),
        ("products.scores", "cat", "cat", 0, "1.5", "carried"),
        ("products.scores", "cat", "cat", 1, "-0.045", "exact"),
        ("scores", "cat", "cat", None, "1.455", "carried"),
    ]
    # the same terms without the wrong Q: the first is wrong, and the score still follows from the terms
    assert [
        v[5] for v in verdicts(PROJECTION, {"products.scores[1][1]": ["1.5", "-0.045"], "scores[1][1]": "1.455"})
    ] == [
        "wrong",
        "exact",
        "carried",
    ]


def test_the_report_names_each_term_in_both_languages_and_json():
    claims = {"claims": {"products.scores[3][1]": ["0.9", "0.03"]}}
    report = check(load_spec(SEED), claims)
    assert "  partial product of S (it, cat, term 2): 0.03 — wrong\n    0.1×0.2 = 0.02; correctly rounded: 0.02\n" in (
        render_report(report, "text")
    )
    zh = check(load_spec(builtin.example_path("seed", "zh")), claims)
    assert "  S 的部分积（它，小猫，第 2 项）：0.03——错误\n" in render_report(zh, "text")
    data = report_data(report)["claims"]
    assert [(c["quantity"], c["row"], c["col"], c["term"], c["verdict"]) for c in data] == [
        ("products.scores", "it", "cat", 1, "exact"),
        ("products.scores", "it", "cat", 2, "wrong"),  # 0.1×0.2 is 0.02 exactly: no rounding to slip
    ]
    assert "term" not in report_data(check(load_spec(SEED), {"claims": {"scores[1][1]": "1"}}))["claims"][0]
    json.dumps(data)


def test_whole_matrices_rows_and_blanks_of_terms():
    rows = [
        [["1", "0"], ["0.1", "0"], ["0.8", "0"]],
        [["0", "0.2"], ["0", "1"], ["0", "0.3"]],
        [["", ""], ["", ""], ["", ""]],
    ]
    report = check(load_spec(SEED), {"claims": {"products.scores": rows, "products.scores[3]": [["0.9", "0.02"]] * 3}})
    assert [v.verdict for v in report.results].count("exact") == 14
    assert len(report.blanks) == 6 and report.blanks[0] == "claims.products.scores[3][1][1]"
    assert [(v.col_label, v.claim.term, v.verdict) for v in report.results if v.row_label == "it"] == [
        ("cat", 0, "exact"),
        ("cat", 1, "exact"),
        ("eats", 0, "wrong"),
        ("eats", 1, "wrong"),
        ("it", 0, "wrong"),
        ("it", 1, "wrong"),  # 0.1×0.3 = 0.03 exactly: one unit off with no rounding on its path
    ]


def test_terms_of_the_normalized_rows_with_qk_norm_are_exact_surds():
    spec = load_spec(
        {"Q": [["1", "1"]], "K": [["1", "0"], ["3", "4"]], "V": [["1"], ["2"]], "qk_norm": True, "qk_norm_eps": "1e-12"}
    )
    got = check(spec, {"claims": {"products.scores[1][2]": ["0.85", "1.13"]}}).results
    # q̂ = [1, 1]/√(1 + ε), k̂ = [3, 4]/√(12.5 + ε): the terms are 3/σσ′ and 4/σσ′, one surd each
    assert [(v.verdict, str(v.value.value), str(v.closed_form)) for v in got] == [
        ("rounded", "0.848528", "1000000000000*sqrt(1388888888890388888888889)/1388888888890388888888889"),
        ("rounded", "1.13137", "4000000000000*sqrt(1388888888890388888888889)/4166666666671166666666667"),
    ]


def test_several_heads_take_the_prefix():
    spec = builtin.example_path("multihead", "en")
    report = check(
        load_spec(spec),
        {"claims": {"h2.products.scores[1][1]": ["0.5", "0"], "h1": {"products": {"output[1][2]": ["0", "0", "0"]}}}},
    )
    assert [(v.claim.quantity, v.head, v.claim.term) for v in report.results] == [
        ("products.output", 0, 0),
        ("products.output", 0, 1),
        ("products.output", 0, 2),
        ("products.scores", 1, 0),
        ("products.scores", 1, 1),
    ]


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        (
            {"products.scores[3][1]": ["0.9", "0.02", "0"]},
            "claims.products.scores[3][1]: expected 2 terms (q_i,t·k_j,t for t = 1..2), got 3",
        ),
        (
            {"products": {"output[3][1]": ["4.03"]}},
            "claims.products.output[3][1]: expected 3 terms (p_ij·v_jc for j = 1..3), got 1",
        ),
        (
            {"products.scores": [[["1", "0"]] * 3] * 2},
            "claims.products.scores: shape mismatch: products.scores has 3 rows here, got 2",
        ),
        ({"products.scores[1][1]": "0.9"}, "claims.products.scores[1][1]: expected a list of terms, got a string"),
        ({"products.scores[1][1]": ["0.9", "abc"]}, "claims.products.scores[1][1][2]: not a number: 'abc'"),
        (
            {"products.scores[1][1]": ["1e99999", "0"]},
            "claims.products.scores[1][1][1]: exponent out of range (at most 5000): '1e99999'",
        ),
        ({"products.scores[1][1]": [["0.9"], "0"]}, "claims.products.scores[1][1][1]: not a number: ['0.9']"),
        ({"products.scores[4][1]": ["1", "0"]}, "claims.products.scores[4][1]: index 4 is out of range 1..3"),
        (
            {"products.scores[1][1][1]": ["1", "0"]},
            "claims.products.scores[1][1][1]: products.scores takes 2 index(es), got 3",
        ),
        (
            {"products.scores[1234567890][1]": ["1", "0"]},
            "claims.products.scores[1234567890][1]: an index has more than 9 digits",
        ),
        (
            {"products.weights[1][1]": ["1", "0"]},
            "claims.products.weights[1][1]: unknown partial products; expected products.scores[i][j] or products.output[i][c]",
        ),
        (
            {"rows": {"it": {"products.scores[1][1]": ["1", "0"]}}},
            "claims.rows.it.products.scores[1][1]: partial products are claimed by entry (products.scores[i][j]), not in a row section",
        ),
        (
            {"products": "0.9"},
            "claims.products: unknown partial products; expected products.scores[i][j] or products.output[i][c]",
        ),
    ],
)
def test_wrong_counts_and_hostile_text_are_one_line(claims, message):
    with pytest.raises(SpecError) as caught:
        check(load_spec(SEED), {"claims": claims})
    assert str(caught.value) == f"<dict>: {message}"


def test_several_heads_without_the_prefix_are_told_which_to_write():
    with pytest.raises(SpecError) as caught:
        check(load_spec(builtin.example_path("multihead", "en")), {"claims": {"products.scores[1][1]": ["1", "0"]}})
    assert str(caught.value) == (
        "<dict>: claims.products.scores[1][1]: products.scores is claimed per head: h1.products.scores to h2.products.scores"
    )


@pytest.mark.parametrize(("lang", "engine"), [("en", "pdflatex"), ("zh", "xelatex")])
def test_a_report_of_terms_compiles_and_parses(latex, katex, tmp_path, lang, engine):
    claims = {
        "claims": {
            "weights[3][1]": "0.5",
            "products.output[3][1]": ["5.0", "0", "4.5"],
            "products.scores[3][1]": ["0.9", "0.03"],
        }
    }
    report = check(load_spec(builtin.example_path("seed", lang)), claims)
    pdf = latex(render_report(report, "latex", standalone=True), engine, tmp_path)
    assert pdf.stat().st_size > 0
    markdown = render_report(report, "markdown")
    assert ("column 1, term 3" if lang == "en" else "第 1 列，第 3 项") in markdown
    assert katex(markdown) == []
