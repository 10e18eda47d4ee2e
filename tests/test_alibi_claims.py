"""Claims on ALiBi's slope and bias (issue 32): verdicts, error carried forward, per head, and refusals."""

import pytest

from symattn.checking.checker import check
from symattn.derivation.intermediates import compute
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render_report


def verdicts(spec, claims):
    return [
        (v.claim.quantity, v.row_label, v.col_label, v.verdict, str(v.expected)) for v in check(spec, claims).results
    ]


def test_slope_and_bias_claims_get_their_verdicts():
    spec = load_spec(builtin.example_path("alibi", "en"))
    claims = {"claims": {"alibi_slope": "0.5", "bias[4]": ["-1.5", "-1", "-0.5", "0"], "bias[3][1]": "-2"}}
    assert verdicts(spec, claims) == [
        ("alibi_slope", None, None, "exact", "0.5"),
        ("bias", "sat", "the", "wrong", "-1"),
        ("bias", "down", "the", "exact", "-1.5"),
        ("bias", "down", "cat", "exact", "-1"),
        ("bias", "down", "sat", "exact", "-0.5"),
        ("bias", "down", "down", "exact", "0"),
    ]


def test_a_wrong_slope_is_carried_into_the_bias_and_the_biased_scores():
    spec = load_spec(builtin.example_path("alibi", "en"))
    claims = {"claims": {"alibi_slope": "0.4", "bias[4][1]": "-1.2", "scaled[4][1]": "-0.931", "bias[3][2]": "-0.3"}}
    assert [v[3] for v in verdicts(spec, claims)] == ["last-digit", "last-digit", "carried", "carried"]
    text = render_report(check(spec, claims), "text")
    assert "  ALiBi bias B (sat, cat): -0.3 — last-digit\n    0.5×(-1) = -0.5; correctly rounded: -0.5; " in text
    assert "from your own earlier numbers: -0.4\n" in text


def test_slopes_per_head_are_claimed_with_the_prefix():
    spec = load_spec({"Q": [["1", "0"]] * 2, "K": [["1", "0"]] * 2, "V": [["1", "2"]] * 2, "heads": 2, "alibi": True})
    assert compute(spec, digits=4)["heads"][1]["alibi_slope"] == {"exact": [["1/256"]], "value": [["0.003906"]]}
    claims = {"claims": {"h1.alibi_slope": "0.0625", "h2.alibi_slope": "0.00391", "h2.bias[2][1]": "-0.0039"}}
    assert [(v.claim.quantity, v.head, v.verdict) for v in check(spec, claims).results] == [
        ("alibi_slope", 0, "exact"),
        ("alibi_slope", 1, "rounded"),
        ("bias", 1, "rounded"),
    ]


def test_an_irrational_paper_slope_is_judged_on_its_digits():
    spec = load_spec(
        {"Q": [["1", "0", "1"]] * 2, "K": [["1", "0", "1"]] * 2, "V": [["1", "2", "3"]] * 2, "heads": 3, "alibi": True}
    )
    got = check(spec, {"claims": {"h1.alibi_slope": "0.157", "h1.bias[1][2]": "-0.16"}}).results
    assert [(v.verdict, str(v.closed_form)) for v in got] == [("rounded", "2**(1/3)/8"), ("rounded", "-2**(1/3)/8")]


@pytest.mark.parametrize("name", ["alibi_slope", "bias[1][1]"])
def test_claims_on_them_need_alibi(name):
    spec = load_spec({"Q": [["1", "0"]], "K": [["1", "0"]], "V": [["1"]]})
    with pytest.raises(SpecError) as info:
        check(spec, {"claims": {name: "0"}})
    bare = name.split("[")[0]
    assert (
        str(info.value)
        == f"<dict>: claims.{name}: claims on {bare} need alibi = true or alibi_slopes (the distance bias of ALiBi)"
    )
