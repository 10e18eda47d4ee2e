"""ALiBi (issue 20): reading the keys, exact slopes and biased scores, the derivation, and check."""

from decimal import Decimal
from fractions import Fraction

import pytest
import sympy

from symattn.checking.checker import check
from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.errors import LimitError, SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render, render_report

BASE = {
    "tokens": ["a", "b", "c"],
    "Q": [["1", "0"], ["0", "1"], ["1", "1"]],
    "K": [["1", "0"], ["0", "1"], ["1", "1"]],
    "V": [["1", "2"], ["3", "4"], ["5", "6"]],
}


def wide(heads, d_k=2, n=2, **extra):
    """Q, K, V of ``heads`` heads, each d_k wide: every head sees the same numbers."""
    row = ["1", "0"] * (heads * d_k // 2)
    return {"Q": [row] * n, "K": [row] * n, "V": [["1"] * heads] * n, "heads": heads, "alibi": True, **extra}


@pytest.mark.parametrize(
    "change, kind, message",
    [
        (
            {"alibi": True, "alibi_slopes": ["0.5"]},
            SpecError,
            "alibi_slopes: give alibi = true or alibi_slopes, not both",
        ),
        ({"alibi": "yes"}, SpecError, "alibi: expected true or false, got 'yes'"),
        ({"alibi_slopes": "0.5"}, SpecError, "alibi_slopes: expected a list of 1 slope(s), one per head, got a string"),
        (
            {"alibi_slopes": ["0.5", "0.25"]},
            SpecError,
            "alibi_slopes: expected 1 slope(s), one per head (heads = 1), got 2",
        ),
        ({"alibi_slopes": ["0"]}, SpecError, "alibi_slopes[1]: a slope must be > 0 and at most 100, got 0"),
        ({"alibi_slopes": ["-0.5"]}, SpecError, "alibi_slopes[1]: a slope must be > 0 and at most 100, got -0.5"),
        ({"alibi_slopes": ["100.5"]}, SpecError, "alibi_slopes[1]: a slope must be > 0 and at most 100, got 100.5"),
        ({"alibi_slopes": ["x"]}, SpecError, "alibi_slopes[1]:"),
        (
            {"alibi": True, "Q": [["a", "0"], ["0", "1"], ["1", "1"]]},
            SpecError,
            "alibi: symbols are not supported with ALiBi; give numbers",
        ),
    ],
)
def test_bad_alibi_keys(change, kind, message):
    with pytest.raises(kind) as info:
        load_spec({**BASE, **change})
    assert str(info.value).startswith("<dict>: " + message)


def test_alibi_false_is_no_alibi():
    assert load_spec({**BASE, "alibi": False}).alibi is None


def test_backward_flag_is_taken_with_alibi():
    assert load_spec({**BASE, "alibi": True}).with_options(backward=True).backward is not None


def test_cli_bad_alibi_is_one_line_and_exit_2(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text("Q = [[1, 0]]\nK = [[1, 0]]\nV = [[1]]\nalibi_slopes = [0, 1]\n", encoding="utf-8")
    assert main(["compute", str(spec)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"symattn: {spec}: alibi_slopes: expected 1 slope(s), one per head (heads = 1), got 2\n"


def test_certify_refuses_alibi():
    with pytest.raises(SpecError, match="--certify does not cover ALiBi"):
        compute(load_spec({**BASE, "alibi": True}), certify=True)


def test_paper_slopes_are_exact_powers_of_two():
    slopes = [m.slope for m in build(load_spec(wide(3))).heads]
    assert slopes == [2 ** sympy.Rational(-8, 3), 2 ** sympy.Rational(-16, 3), sympy.Rational(1, 256)]
    assert [m.slope for m in build(load_spec(wide(4))).heads] == [sympy.Rational(1, 4**h) for h in (1, 2, 3, 4)]


def test_biased_scores_closed_forms_and_bias():
    model = build(load_spec({**BASE, "alibi_slopes": ["1/2"]}))
    r2 = sympy.sqrt(2)
    assert model.scaled.row(2) == sympy.Matrix([[r2 / 2 - 1, r2 / 2 - sympy.Rational(1, 2), r2]])
    assert model.rationals("bias")[2] == (Fraction(-1), Fraction(-1, 2), Fraction(0))
    assert model.row_max == (0, 1, 2)


def test_equal_biased_scores_give_exact_weights():
    # z = S − |i − j|/2 with no scale: row b is [0.5 − 0.5, 0, 0.5 − 0.5], three equal scores
    K = [["1/2"], ["0"], ["1/2"]]
    spec = load_spec({"Q": [["1"]] * 3, "K": K, "V": [["3"], ["6"], ["9"]], "scale": "none", "alibi_slopes": ["0.5"]})
    model = build(spec)
    assert model.rationals("scaled")[1] == (Fraction(0), Fraction(0), Fraction(0))
    assert model.rationals("weights")[1] == (Fraction(1, 3),) * 3
    assert model.rationals("output")[1] == (Fraction(6),)
    assert model.rationals("weights")[0] == (None, None, None)


def test_irrational_slope_equal_to_the_scale_is_decided_exactly():
    # 16 heads: head 1's slope 2^(−1/2) is the scale 1/√2 itself; S = [0, 1] makes z = [0, 0] in row 1
    spec = load_spec(
        {"Q": [["1", "0"] * 16, ["1", "0"] * 16], "K": [["0", "0"] * 16, ["1", "0"] * 16], "V": [["1"] * 16] * 2}
        | {"heads": 16, "alibi": True}
    )
    head = build(spec).heads[0]
    assert head.slope == 1 / sympy.sqrt(2)
    assert head.rationals("scaled")[0] == (Fraction(0), Fraction(0))
    assert head.rationals("weights")[0] == (Fraction(1, 2), Fraction(1, 2))
    assert head.rationals("scaled")[1] == (None, None)


def test_independent_slope_orders_by_enclosures():
    # 3 heads: m = 2^(−8/3) ≈ 0.157490 and 1/√2 are independent; row 2's z = [0.707107 − 0.157490, 0]
    spec = load_spec(
        {"Q": [["1", "0"] * 3] * 2, "K": [["1", "0"] * 3, ["0", "0"] * 3], "V": [["1"] * 3] * 2}
        | {"heads": 3, "alibi": True}
    )
    head = build(spec).heads[0]
    assert head.row_max == (0, 0)
    assert head.rounded("scaled", 6)[1] == (Decimal("0.549617"), Decimal("0.000000"))


def test_largest_score_includes_the_bias():
    # S = 0 everywhere, but the bias −100·|i − j| reaches 100 · 199 at the last key
    spec = load_spec({"Q": [["0"]] * 2, "K": [["0"]] * 200, "V": [["0"]] * 200, "alibi_slopes": ["100"]})
    with pytest.raises(
        LimitError, match=r"^<dict>: scaled\[1\]\[200\]: \|z\| = \|S·scale\| is about 19900, more than 10000"
    ):
        build(spec)


def test_compute_writes_the_bias_and_sympy_closed_forms():
    data = compute(load_spec({**BASE, "alibi_slopes": ["0.5"]}), digits=6)
    assert data["bias"]["exact"][2] == ["-1", "-1/2", "0"]
    assert data["bias"]["value"][2] == ["-1.00000", "-0.500000", "0"]
    assert data["scaled"]["exact"][2] == ["-1 + sqrt(2)/2", "-1/2 + sqrt(2)/2", "sqrt(2)"]
    assert data["weights"]["value"][2] == ["0.122523", "0.202007", "0.675470"]


def test_document_shows_the_slope_distances_and_bias():
    spec = load_spec(builtin.example_path("alibi", "en"))
    text = render(derive(spec), "markdown")
    assert (
        "\\lvert 3 - j\\rvert = [3,\\ 2,\\ 1,\\ 0], \\qquad -m\\,\\lvert 3 - j\\rvert = [-1.5,\\ -1.0,\\ -0.5,\\ 0.0]"
        in text
    )
    assert "m = 0.5" in text
    # the scaling step shows S/√2 before the bias, the ALiBi step the biased scores
    assert "0.269 & 0.651 & 0.304 & 0.311" in text
    assert "-1.231 & -0.349 & -0.196 & 0.311" in text


def test_paper_slope_line():
    spec = load_spec({**wide(3), "tokens": ["x", "y"]})
    text = render(derive(spec), "markdown")
    assert "m = 2^{-8 \\cdot 1 / 3} = 2^{-8/3} \\approx 0.157" in text
    assert "m = 2^{-8 \\cdot 3 / 3} = 2^{-8} = 0.00390625" in text  # it terminates: shown whole, not ≈ 0.004


def test_paper_slopes_pass_katex(katex):
    for lang in ("en", "zh"):
        spec = load_spec({**wide(3), "tokens": ["x", "y"], "lang": lang, "mask": "causal", "softmax": "stable"})
        assert katex(render(derive(spec), "markdown")) == []


def verdicts(rows):
    spec = load_spec(builtin.example_path("alibi", "en"))
    return [v.verdict for v in check(spec, {"claims": {"rows": {"down": rows}}}).results]


def test_check_accepts_biased_numbers_and_explains_the_bias():
    rows = {"scaled": ["-1.231", "-0.349", "-0.196", "0.311"], "weights": ["0.092", "0.221", "0.258", "0.429"]}
    assert verdicts(rows) == ["rounded"] * 8


def test_check_rejects_unbiased_scores():
    assert verdicts({"scaled": ["0.269", "0.651", "0.304", "0.311"]}) == ["wrong", "wrong", "wrong", "rounded"]


def test_claimed_scores_carry_into_the_biased_scores():
    # a wrong score, then the biased score computed from it with the exact bias: carried, not a slip
    rows = {"scores": ["0.40", "0.92", "0.43", "0.44"], "scaled": ["-1.217", "-0.349", "-0.196", "0.311"]}
    assert verdicts(rows) == ["wrong", "exact", "exact", "exact", "carried", "rounded", "rounded", "rounded"]


# --- softcap -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"softcap": "0"},
            'softcap: 0 is FlashAttention\'s "no cap" (symattn.kernel.compare takes it so); a spec has no cap by '
            "leaving softcap out",
        ),
        ({"softcap": "-2"}, "softcap: expected a number > 0 and at most 1000, got -2"),
        ({"softcap": "1001"}, "softcap: expected a number > 0 and at most 1000, got 1001"),
        ({"softcap": "two"}, "softcap:"),
        (
            {"softcap": "2", "Q": [["a", "0"], ["0", "1"], ["1", "1"]]},
            "softcap: symbols are not supported with softcap; give numbers",
        ),
    ],
)
def test_bad_softcap(change, message):
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, **change})
    assert str(info.value).startswith("<dict>: " + message)


def test_softcap_closed_forms_and_exact_zero():
    # row a: S = [1, 0, 1]; z = 2·tanh(S/(2√2)): the zero score stays exactly 0, e^0 = 1
    model = build(load_spec({**BASE, "softcap": "2"}))
    t = sympy.tanh(sympy.sqrt(2) / 4)
    assert model.scaled.row(0) == sympy.Matrix([[2 * t, 0, 2 * t]])
    assert model.rationals("scaled")[0] == (None, Fraction(0), None)
    assert model.rationals("exp")[0] == (None, Fraction(1), None)


def test_softcap_keeps_ties_exact():
    # row c: S = [1, 1, 2]: the two equal scores stay equal after the cap, so their weights are equal
    model = build(load_spec({**BASE, "softcap": "1/2", "softmax": "stable"}))
    assert model._groups[2] == [[0, 1], [2]]
    w = model.rounded("weights", 12)[2]
    assert w[0] == w[1] and model.row_max[2] == 2


def test_softcap_numbers_are_correctly_rounded():
    import mpmath

    model = build(load_spec({**BASE, "softcap": "2"}))
    mpmath.mp.dps = 50
    want = 2 * mpmath.tanh(mpmath.sqrt(2) / 4)
    assert model.rounded("scaled", 12)[0][0] == Decimal(mpmath.nstr(want, 12, min_fixed=-1, max_fixed=1)).quantize(
        Decimal("1e-12")
    )


def test_softcap_document_and_hand_rounding():
    spec = load_spec(builtin.example_path("softcap", "en"))
    text = render(derive(spec), "markdown")
    assert (
        "z \\approx [4.596,\\ 1.131,\\ 2.404], \\qquad 2 \\tanh\\!\\left(\\frac{z}{2}\\right) \\approx [1.960,\\ 1.024,\\ 1.669]"
        in text
    )
    hand = render(derive(spec.with_options(rounding="hand")), "markdown")
    # by hand, 2·tanh(1.131 / 2) of the shown 1.131 is 1.025 (the exact value rounds to 1.024)
    assert "[1.960,\\ 1.025,\\ 1.669]" in hand


def test_softcap_check_carries_the_claimed_score():
    spec = load_spec(builtin.example_path("softcap", "en"))
    # a wrong score 6.0, then 2·tanh(6.0/√2/2) from it: carried
    rows = {"scores": ["6.0", "1.6", "3.4"], "scaled": ["1.943", "1.024", "1.669"]}
    got = [v.verdict for v in check(spec, {"claims": {"rows": {"sat": rows}}}).results]
    assert got == ["wrong", "exact", "exact", "carried", "rounded", "rounded"]


def test_softcap_after_alibi_passes_katex(katex):
    for lang in ("en", "zh"):
        spec = load_spec({**BASE, "lang": lang, "alibi": True, "softcap": "0.5", "mask": "causal"})
        text = render(derive(spec), "markdown")
        assert katex(text) == []
        assert text.index("ALiBi") < text.index("\\tanh\\!\\left(")


# --- sinks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sinks": "0.5"}, "sinks: expected a list of 1 sink logit(s), one per head, got a string"),
        ({"sinks": ["0.5", "1"]}, "sinks: expected 1 sink logit(s), one per head (heads = 1), got 2"),
        ({"sinks": ["100.5"]}, "sinks[1]: a sink logit must be at most 100 in size, got 100.5"),
        ({"sinks": ["-101"]}, "sinks[1]: a sink logit must be at most 100 in size, got -101"),
        ({"sinks": ["s"]}, "sinks[1]:"),
        (
            {"sinks": ["1"], "Q": [["a", "0"], ["0", "1"], ["1", "1"]]},
            "sinks: symbols are not supported with sinks; give numbers",
        ),
    ],
)
def test_bad_sinks(change, message):
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, **change})
    assert str(info.value).startswith("<dict>: " + message)


def test_sink_closed_forms_and_share():
    model = build(load_spec({**BASE, "sinks": ["1/2"]}))
    r = sympy.sqrt(2) / 2
    e = sympy.exp
    assert model.exp_sum[0, 0] == e(r) + 1 + e(r) + e(sympy.Rational(1, 2))
    assert model.sink_share[0, 0] == e(sympy.Rational(1, 2)) / model.exp_sum[0, 0]
    assert model.weights[0, 1] == 1 / model.exp_sum[0, 0]


def test_sink_equal_to_every_score_gives_exact_weights():
    # no scale, S = 0 everywhere, s = 0: every weight and the share are 1/4, the output the mean × 3/4
    spec = load_spec({"Q": [["0"]] * 2, "K": [["0"]] * 3, "V": [["4"], ["8"], ["0"]], "scale": "none", "sinks": ["0"]})
    model = build(spec)
    assert model.rationals("weights") == ((Fraction(1, 4),) * 3,) * 2
    assert model.rationals("sink_share") == ((Fraction(1, 4),),) * 2
    assert model.rationals("exp_sum") == ((Fraction(4),),) * 2
    assert model.rationals("output") == ((Fraction(3),),) * 2
    assert build(load_spec({**spec_dict(spec), "sinks": ["1"]})).rationals("weights")[0] == (None, None, None)


def spec_dict(spec):
    return {"Q": [["0"]] * 2, "K": [["0"]] * 3, "V": [["4"], ["8"], ["0"]], "scale": "none"}


def test_stable_softmax_shifts_by_the_sink_when_it_is_the_largest():
    spec = load_spec({**BASE, "sinks": ["3"], "softmax": "stable"})
    model = build(spec)
    assert model.sink_wins == (True, True, True)
    assert model.shifted[2, 2] == sympy.sqrt(2) - 3
    assert model.rationals("sink_exp_shifted") == ((Fraction(1),),) * 3
    text = render(derive(spec), "markdown")
    assert "First subtract the row maximum $3$" in text
    assert "e^{3 - 3} &= 1\\quad\\text{sink}" in text


def test_sink_document_says_the_weights_do_not_sum_to_one():
    text = render(derive(load_spec(builtin.example_path("sinks", "en"))), "markdown")
    assert "\\alpha_j = \\frac{e^{z_j}}{e^{s} + \\sum_k e^{z_k}}" in text
    assert "e^{0.5 - 0.651} &\\approx 0.860\\quad\\text{sink}" in text
    assert "\\text{sink} \\approx \\frac{0.860}{3.344} \\approx 0.257, \\qquad \\sum_j \\alpha_j = 1 - 0.257" in text
    assert "[0.448,\\ 0.341,\\ 0.257]" in text


def sink_verdicts(rows):
    spec = load_spec(builtin.example_path("sinks", "en"))
    return [v.verdict for v in check(spec, {"claims": {"rows": {"sat": rows}}}).results]


def test_check_sink_numbers():
    # the exact numbers, rounded as a paper would print them
    rows = {"exp_sum": "6.409", "weights": ["0.299", "0.178", "0.265"], "output": ["3.256", "2.050"]}
    assert sink_verdicts(rows) == ["rounded"] * 6
    # weights normalised to 1, as if there were no sink: wrong
    assert sink_verdicts({"weights": ["0.403", "0.240", "0.357"]}) == ["wrong"] * 3
    # a sum without the sink's e^0.5, then weights from it: the sum is wrong, the weights follow from it
    got = sink_verdicts(
        {"exp": ["1.917", "1.144", "1.699"], "exp_sum": "4.760", "weights": ["0.403", "0.240", "0.357"]}
    )
    assert got == ["rounded", "rounded", "rounded", "wrong", "carried", "carried", "carried"]


def test_sinks_pass_katex(katex):
    for lang in ("en", "zh"):
        spec = load_spec({**wide(2), "tokens": ["x", "y"], "lang": lang, "sinks": ["-1", "2"], "softcap": "3"})
        assert katex(render(derive(spec), "markdown")) == []


@pytest.mark.parametrize("lang, engine", [("en", "pdflatex"), ("zh", "xelatex")])
def test_every_variant_at_once_compiles_without_overfull_boxes(latex, katex, tmp_path, lang, engine):
    # two heads, cross-attention (3 queries, 4 keys), ALiBi's paper slopes, a softcap, sinks, causal, stable
    raw = {
        "lang": lang,
        "tokens": ["x", "y", "z"],
        "key_tokens": ["a", "b", "c", "d"],
        "Q": [["1", "0", "0.5", "2"], ["0", "1", "1", "0"], ["0.9", "0.1", "0.3", "0.3"]],
        "K": [["1", "0.2", "0", "1"], ["0.1", "1", "1", "0"], ["0.8", "0.3", "0.5", "0.5"], ["0.4", "0.4", "2", "1"]],
        "V": [["10", "0"], ["0", "10"], ["1", "1"], ["4", "2"]],
        "heads": 2,
        "alibi": True,
        "softcap": "1.5",
        "sinks": ["0.5", "-1"],
        "mask": "causal",
        "softmax": "stable",
    }
    spec = load_spec(raw)
    text = render(derive(spec), "markdown")
    assert katex(text) == []
    latex(render(derive(spec), "latex", standalone=True), engine, tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert "Overfull" not in log


def test_check_sink_share_claims():
    spec = load_spec(builtin.example_path("sinks", "en"))
    report = check(
        spec, {"claims": {"sink_share": ["0.448", "0.341", "0.3"], "rows": {"sat": {"sink_share": "0.300"}}}}
    )
    assert [(v.claim.quantity, v.verdict) for v in report.results] == [
        ("sink_share", "rounded"),
        ("sink_share", "rounded"),
        ("sink_share", "rounded"),
        ("sink_share", "wrong"),
    ]
    # from the claimant's own sum of exps: 0.860 / 3.5 is carried
    assert sink_verdicts({"exp_sum": "3.5", "sink_share": "0.246"}) == ["wrong", "carried"]


def test_sink_share_claims_need_sinks():
    with pytest.raises(SpecError, match=r"claims\.sink_share: claims on sink_share need sinks$"):
        check(load_spec(BASE), {"claims": {"sink_share": ["0.1", "0.2", "0.3"]}})


def test_sink_share_per_head():
    spec = load_spec({**wide(2), "sinks": ["0", "1"], "alibi": False})
    data = compute(spec, digits=6)
    shares = [h["sink_share"]["value"] for h in data["heads"]]
    report = check(spec, {"claims": {"h1.sink_share": shares[0], "h2.sink_share": shares[1]}})
    assert len(report.results) == 4 and all(v.verdict in ("exact", "rounded") for v in report.results)
    wrong = check(spec, {"claims": {"h2.sink_share": ["0.9", "0.9"]}})
    assert [v.verdict for v in wrong.results] == ["wrong", "wrong"]


@pytest.mark.parametrize("variant", [{"alibi": True}, {"softcap": "2"}, {"sinks": ["1"]}])
def test_rounded_inputs_are_refused_with_the_variants(variant):
    spec = load_spec({**BASE, **variant, "inputs": "rounded"})
    with pytest.raises(SpecError, match=r'^<dict>: inputs: "rounded" is not checked with ALiBi, softcap or sinks yet$'):
        check(spec, {"claims": {"weights": [["0.3", "0.3", "0.4"]] * 3}})


@pytest.mark.parametrize(
    "lang, softcap, name",
    [("en", None, "biased z"), ("en", "2", "capped z"), ("zh", None, "加偏置后 z"), ("zh", "2", "软上限后 z")],
)
def test_reports_name_the_biased_scores_z(lang, softcap, name):
    # a claimed "scaled" score with a bias or a cap is z, not S/√d_k: the report says which
    spec = load_spec(builtin.example_path("alibi", "en")).with_options(lang=lang)
    if softcap is not None:
        spec = load_spec({**BASE, "lang": lang, "alibi": True, "softcap": softcap})
    report = check(spec, {"claims": {"scaled[2][1]": "-0.36"}})
    text = render_report(report, "text")
    assert f"1   {name}{' (' if lang == 'en' else '（'}" in text
    assert "S/√d_k" not in text
    md = render_report(report, "markdown")
    assert name.replace(" z", " $z$") in md
