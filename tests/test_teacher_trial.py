"""What a teacher's trial of check, grade and the derivation found (issue 32's variants in class)."""

import re

import pytest

from symattn.checking.checker import check
from symattn.classroom.gradebook import gradebook_text
from symattn.classroom.grading import Note, grade
from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render, render_report

from .test_exercise import key_numbers
from .test_grade import fill
from .test_grade_surprises import small_class  # noqa: F401  (the fixture)

TILE = {
    "title": "Online softmax, one key at a time",
    "tokens": ["sun", "rain", "wind", "snow"],
    "Q": [[1, 0], ["0.5", 1], [1, 1], [0, 2]],
    "K": [[1, 1], [0, 1], [2, 0], [1, -1]],
    "V": [[4, 0], [0, 2], [2, 2], [1, 3]],
    "rope": True,
    "rope_frequencies": ["60deg"],
    "block_keys": 1,
}
# the trial's running sums and accumulators of "snow": each carried from the claimant's own numbers before it
TRIAL = (  # block by block: running max m, rescale, running sum l, accumulator acc
    ("-1.414", "0", "1", ["4", "0"]),
    ("-0.707", "0.5", "1.5", ["2", "2"]),
    ("-0.707", "1", "1.675", ["2.350", "2.350"]),
    ("-0.707", "1", "2.168", ["2.843", "3.829"]),
)
BLOCKS = {
    f"{name}[{b}][4]": x
    for b, row in enumerate(TRIAL, 1)
    for name, x in zip(("running_max", "rescale", "running_sum", "accumulator"), row)
}
WEIGHTS = {"weights[4]": ["0.228", "0.463", "0.081", "0.228"]}  # the exact weights rounded


def verdicts(report, quantity: str = "output") -> list[tuple[str, str]]:
    return [(str(v.claim.number.text), v.verdict) for v in report.results if v.claim.quantity == quantity]


# --- 1. a tiled output is carried from the claimant's own acc / l ------------------------------------------


def test_a_tiled_output_follows_the_claimants_own_accumulator_over_running_sum():
    report = check(load_spec(TILE), {"claims": {**BLOCKS, "output[4][1]": "1.311", "output[4][2]": "1.766"}})
    # 2.843 / 2.168 = 1.3113…, 3.829 / 2.168 = 1.7661…; the exact output is 1.30275…, 1.77186…
    assert verdicts(report) == [("1.311", "carried"), ("1.766", "carried")]
    assert "Nothing to fix" in render_report(report, "text")
    # one unit off their own acc / l is a rounding slip of theirs; further off is wrong
    slips = check(load_spec(TILE), {"claims": {**BLOCKS, "output[4][1]": "1.312", "output[4][2]": "1.760"}})
    assert verdicts(slips) == [("1.312", "last-digit"), ("1.760", "wrong")]
    assert "  output (snow, column 1): 1.312 — last-digit\n" in render_report(slips, "text")


def test_a_tiled_output_follows_the_claimants_weights_too():
    # both routes at once: the weights give 1.302, their acc / l 1.311; each is theirs
    for output in ("1.302", "1.311"):
        report = check(load_spec(TILE), {"claims": {**BLOCKS, **WEIGHTS, "output[4][1]": output}})
        assert verdicts(report) == [(output, "carried")]
    # the weights alone (no acc or l claimed): the weights' route only
    alone = check(load_spec(TILE), {"claims": {**WEIGHTS, "output[4][1]": "1.302", "output[4][2]": "1.766"}})
    assert verdicts(alone) == [("1.302", "carried"), ("1.766", "wrong")]


def test_without_block_keys_the_output_is_the_weights_route_alone():
    spec = {k: v for k, v in TILE.items() if k != "block_keys"}
    report = check(load_spec(spec), {"claims": {**WEIGHTS, "output[4][1]": "1.311"}})
    assert verdicts(report) == [("1.311", "wrong")]


# --- 2. MLA: an output from either route's own numbers is carried -----------------------------------------

MLA = {
    "title": "MLA lesson: two heads, decoupled RoPE",
    "tokens": ["ice", "melts", "fast", "today"],
    "focus": "fast",
    "heads": 2,
    "mla_route": "absorbed",
    "rope": True,
    "rope_frequencies": ["90deg"],
    "mla": {
        "X": [[1, 0, 2], [0, 1, -1], [1, 1, 0], [2, 0, 1]],
        "W_DKV": [["0.5", 0], [0, 1], [1, "0.5"]],
        "W_UK": [[1, 0], [0, -1]],
        "W_UV": [[2, 0, 1, 0], [0, 1, 1, -1]],
        "W_Q": [[1, 0], [0, 1], ["0.5", "0.5"]],
        "W_QR": [[1, 0, 0, 1], [0, 1, 1, 0], [0, 0, 0, 0]],
        "W_KR": [[0, 1], [1, 0], [1, 1]],
    },
}
MLA_ROW = {
    "absorbed_query": ["1", "0"],
    "scores": ["-2.5", "-2", "2.6", "0"],
    "scaled": ["-1.443", "-1.155", "1.501", "0"],
    "exp": ["0.236", "0.315", "4.486", "1.000"],
    "exp_sum": "6.037",
    "weights": ["0.039", "0.052", "0.743", "0.166"],
    "latent_output": ["0.823", "0.891"],
}
MLA_LATENT = {"h1.latent[3][1]": "0.6", "h1.latent[3][2]": "1.0", "h1.V[3][1]": "1.2", "h1.V[3][2]": "1.0"}


def mla_claims(output: str) -> dict:
    return {"claims": {**MLA_LATENT, "h1": {"rows": {"fast": {**MLA_ROW, "output": [output, "0.891"]}}}}}


def test_an_mla_output_from_the_claimants_weights_and_v_is_carried_beside_u():
    # their weights × their V (from their latent 0.6): 1.647; their u × W_UV: 2 × 0.823 = 1.646
    for output in ("1.647", "1.646"):
        report = check(load_spec(MLA), mla_claims(output))
        assert verdicts(report) == [(output, "carried"), ("0.891", "carried")]
        assert "output of head 1 (fast, column 1)" not in render_report(report, "text").split("What went wrong")[-1]
    off = check(load_spec(MLA), mla_claims("1.649"))  # two off the one route, three off the other
    assert verdicts(off) == [("1.649", "wrong"), ("0.891", "carried")]
    for slip in ("1.645", "1.648"):  # one off either route's own number: a rounding slip of theirs
        text = render_report(check(load_spec(MLA), mla_claims(slip)), "text")
        assert f"  output of head 1 (fast, column 1): {slip} — last-digit\n" in text


# --- 3. last-digit only where a rounding lies on the claim's path --------------------------------------------

PLAIN = {
    "tokens": ["a", "b", "c"],
    "Q": [[1, 0], [0, 1], [1, 1]],
    "K": [[1, 0], [0, 1], [1, 1]],
    "V": [[1, 0], [0, 1], [1, 1]],
}


def test_one_unit_off_an_exact_product_of_the_given_decimals_is_wrong():
    claims = {"scores[3][1]": "1.1", "scores[3][3]": "3", "scaled[1][1]": "0.8"}
    report = check(load_spec(PLAIN), {"claims": claims})
    assert [(v.claim.key, v.verdict) for v in report.results] == [
        ("claims.scores[3][1]", "wrong"),  # 1 exactly, from the given numbers
        ("claims.scores[3][3]", "wrong"),
        ("claims.scaled[1][1]", "last-digit"),  # 1/√2 = 0.707…: rounded on its way
    ]
    text = render_report(report, "text")
    assert "  score S (c, a): 1.1 — wrong\n    1×1 + 1×0 = 1; correctly rounded: 1.0\n" in text
    assert "  scaled S/√d_k (a, a): 0.8 — last-digit\n    1 / √2 ≈ 0.707107; correctly rounded: 0.7\n" in text


def test_one_unit_off_an_mla_latent_of_the_given_decimals_is_wrong():
    # (the latent is the heads' one matrix: claimed once, by its own name; h1.latent and h2.latent name it too)
    report = check(load_spec(MLA), {"claims": {"latent[3][1]": "0.6"}})
    assert [v.verdict for v in report.results] == ["wrong"]
    assert (
        "  MLA latent c_KV (fast, column 1): 0.6 — wrong\n    1×0.5 + 1×0 + 0×1 = 0.5; correctly rounded: 0.5\n"
    ) in render_report(report, "text")


def test_one_unit_off_a_number_carried_from_the_claimants_own_rounded_claims_is_last_digit():
    spec = {
        "tokens": ["a", "b"],
        "X": [[1, 0], [0, 1]],
        "W_Q": [["1.25", 0], [0, 1]],
        "W_K": [[2, 0], [0, 1]],
        "W_V": [[1, 0], [0, 1]],
    }
    # their Q 1.3 is 1.25 rounded; the score from it is 2.6 (exactly 2.5): 2.7 is one off their own number
    claims = {"Q[1][1]": "1.3", "scores[1][1]": "2.7", "scores[2][2]": "1.1"}
    report = check(load_spec(spec), {"claims": claims})
    assert [v.verdict for v in report.results] == ["rounded", "last-digit", "wrong"]
    assert "from your own earlier numbers: 2.6" in render_report(report, "text")
    # with their Q exact, nothing was rounded before the score: one off is wrong
    exact = check(load_spec(spec), {"claims": {"Q[1][1]": "1.25", "scores[1][1]": "2.6"}})
    assert [v.verdict for v in exact.results] == ["exact", "wrong"]


def test_grading_follows_the_same_verdict(small_class):  # noqa: F811
    out, v = small_class
    numbers = key_numbers(v["s01"])
    score = numbers["scores[3][1]"]  # a score of the given decimals: exact at its two decimals
    off = f"{float(score) + 0.01:.2f}"
    (out / "s01" / "answers.toml").write_text(fill(v["s01"], {**numbers, "scores[3][1]": off}), encoding="utf-8")
    row = next(r for r in grade(out).rows if r.id == "s01")
    assert (dict(row.counts)["last-digit"], dict(row.counts)["wrong"]) == (0, 1)
    assert row.first_to_fix == "scores[3][1]"


# --- 4. an answers file left as exercise wrote it is not a return --------------------------------------------


def test_untouched_answers_files_are_not_returned(small_class):  # noqa: F811
    out, v = small_class
    (out / "s01" / "answers.toml").write_text(fill(v["s01"], key_numbers(v["s01"])), encoding="utf-8")
    (out / "s01-copy.toml").write_text(fill(v["s01"], {}), encoding="utf-8")  # beside a graded return: none
    book = grade(out)
    assert [(r.id, r.file, r.error) for r in book.rows] == [
        ("s01", "s01/answers.toml", None),
        ("s02", "s02/answers.toml", Note("not_returned", text="s02/answers.toml")),
        ("s03", "s03/answers.toml", Note("not_returned", text="s03/answers.toml")),
    ]
    text = gradebook_text(book, "markdown")
    assert "| s02 |  |  |  |  |  |  |  |  |  |  | not returned |\n" in text
    assert "- s02 (s02/answers.toml): answers file not filled in: every blank is still blank\n" in text
    assert "1 returns graded, 0 could not be graded, 2 students returned nothing.\n" in text
    zh = gradebook_text(book, "markdown", "zh")
    assert "已评分 1 份，未能评分 0 份，2 人没有交。" in zh and "答卷没有填写：每个空都还是空的" in zh


def test_an_answers_file_with_one_answer_or_one_non_number_is_a_return(small_class, capsys):  # noqa: F811
    out, v = small_class
    (out / "s01" / "answers.toml").write_text(fill(v["s01"], {"scores[3][1]": "abc"}), encoding="utf-8")
    (out / "s02" / "answers.toml").write_text(fill(v["s02"], {"scores[3][1]": "0"}), encoding="utf-8")
    book = grade(out)
    assert [r.error for r in book.rows] == [None, None, Note("not_returned", text="s03/answers.toml")]
    assert dict(book.rows[0].counts)["blank"] == 11
    assert "2 returns graded, 0 could not be graded, 1 students returned nothing.\n" in gradebook_text(book, "markdown")
    assert main(["grade", str(out), "--format", "csv"]) == 0
    assert capsys.readouterr().err == ""


# --- 5. QK-norm's weights are shown -------------------------------------------------------------------------

QKN = {
    "title": "QK-norm by hand",
    "tokens": ["red", "green", "blue"],
    "Q": [[3, 4], [1, 0], [2, 2]],
    "K": [[0, 2], [1, 1], [4, 3]],
    "V": [[1, 0], [0, 1], [2, 2]],
    "qk_norm": True,
    "qk_norm_eps": "1/100",
    "q_norm_weight": [1, "0.5"],
}


def test_qk_norm_shows_its_weights_as_given_in_both_languages():
    en = render(derive(load_spec(QKN)), "markdown")
    assert "The weights are $w_Q = [1,\\ 0.5]$ for the queries and $w_K = 1$ for the keys.\n" in en
    assert (
        "q' &= \\frac{x \\odot w_Q}{\\sigma} = \\frac{[2,\\ 2] \\odot [1,\\ 0.5]}{\\sigma} \\approx [0.999,\\ 0.499]\n"
    ) in en
    assert "No weights are given" not in en
    zh = render(derive(load_spec({**QKN, "lang": "zh", "k_norm_weight": ["2", "-1"]})), "markdown")
    assert "权重：查询用 $w_Q = [1,\\ 0.5]$，键用 $w_K = [2,\\ -1]$。\n" in zh
    # the keys' weights alone: no q′ formula with w_Q, and w_Q = 1 said
    keys = render(
        derive(load_spec({**{k: v for k, v in QKN.items() if k != "q_norm_weight"}, "k_norm_weight": [1, 2]})),
        "markdown",
    )
    assert "The weights are $w_Q = 1$ for the queries and $w_K = [1,\\ 2]$ for the keys.\n" in keys
    assert "q' &\\approx [0.999,\\ 0.999]\n" in keys


# --- 6. the recap names every key that ties for the top ----------------------------------------------------

TIE = {**{k: v for k, v in TILE.items() if not k.startswith("rope")}, "block_keys": 2, "rounding": "hand"}


def test_the_recap_names_every_tied_key_as_step_3_does():
    en = render(derive(load_spec(TIE)), "markdown")
    assert "“snow” attends most to “sun”, “rain” (43.4%).\n" in en
    assert (
        "- $QK^\\top$: snow·sun, snow·rain = 2.0 tie for the highest → “the right question”\n"
        "- dividing by $\\sqrt{d_k}$ only cools the scores down, so they do not grow too large\n"
        "- softmax: 2.0 becomes a weight of about 43% for each of them\n"
        "- $\\times V$: 43% × $[4,\\ 0]$ + 43% × $[0,\\ 2]$ → the output takes on the meanings of “sun”, “rain” alike\n"
    ) in en
    zh = render(derive(load_spec({**TIE, "lang": "zh"})), "markdown")
    assert (
        "- $QK^\\top$：snow·sun、snow·rain = 2.0 并列最高 →「问得对」\n"
        "- 除以 $\\sqrt{d_k}$：只是降温，防止分数太大\n"
        "- softmax：2.0 各变成约 43% 权重\n"
        "- $\\times V$：43% × $[4,\\ 0]$ + 43% × $[0,\\ 2]$ → 输出里同样出现「sun」、「rain」的语义成分\n"
    ) in zh
    # one top key: the recap as before
    alone = render(derive(load_spec({**TIE, "Q": [[1, 0], ["0.5", 1], [1, 1], [1, 2]]})), "markdown")
    assert "is the highest → “the right question”" in alone and "tie for" not in alone


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_weights_and_ties_pass_katex_and_tex(katex, latex, tmp_path, lang):
    for spec in (QKN, TIE):
        doc = derive(load_spec({**spec, "lang": lang}))
        assert katex(render(doc, "markdown")) == []
        latex(render(doc, "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
        log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
        assert re.findall(r"Overfull \\[hv]box", log) == []
