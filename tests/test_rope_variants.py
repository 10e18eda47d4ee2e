"""RoPE together with ALiBi, a softcap and sinks: the model each combination gets, exact ties and rational
entries, orders decided by enclosures, what is still refused, and check's verdicts."""

import tomllib
from fractions import Fraction

import pytest

from symattn.checking.checker import check
from symattn.derivation.intermediates import compute
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec

# a zero query at position 0 and a query (1, 0) at position 1, three keys: d_k = 2, scale 1/√2
ZERO = {"Q": [[0, 0], [1, 0]], "K": [[1, 0], [1, 1], [0, 1]], "V": [[1], [2], [4]], "key_tokens": ["a", "b", "c"]}


def rope_example(**keys):
    """The built-in RoPE example: the same query and key at four positions."""
    raw = tomllib.loads(builtin.example_path("rope", "en").read_text(encoding="utf-8"))
    return load_spec(raw | keys)


@pytest.mark.parametrize(
    "keys, kinds",
    [
        ({"alibi": True}, ("Rotated", "Bias")),
        ({"softcap": "2"}, ("Rotated", "Cap")),
        ({"alibi": True, "softcap": "2"}, ("Rotated", "Bias", "Cap")),
        ({"sinks": ["0"]}, ("Rotated", "Sink")),
        ({"alibi": True, "softcap": "2", "sinks": ["0"]}, ("Rotated", "Bias", "Cap", "Sink")),
        ({}, ("Rotated",)),
    ],
)
def test_each_combination_gets_its_parts_in_the_order_they_act(keys, kinds):
    # one model class: its parts, rotation → bias → cap → sink whatever the order of the keys
    model = build(load_spec({**ZERO, **keys, "rope": True}))
    assert type(model).__name__ == "Model" and tuple(type(p).__name__ for p in model.parts) == kinds


def test_equal_structures_at_equal_distances_tie_exactly():
    # q = k in every row: the sin terms vanish, so keys i − 1 and i + 1 give the same score, and ALiBi the same bias
    model = build(rope_example(alibi=True))
    assert model._groups == [[[0], [1], [2], [3]], [[0, 2], [1], [3]], [[0], [1, 3], [2]], [[0], [1], [2], [3]]]
    assert model.row_max == (0, 1, 2, 3)
    weights = compute(rope_example(alibi=True), digits=6)["weights"]
    assert weights["value"][1] == ["0.257681", "0.325553", "0.257681", "0.159085"]
    assert weights["exact"][1][0] == weights["exact"][1][2]
    assert weights["exact"][1][1] == (
        "exp(3/2)/(exp(cos(2)/2 - 1/128 + cos(1/50)) + exp(3/2) + 2*exp(-1/256 + cos(1)/2 + cos(1/100)))"
    )


def test_scores_without_cos_or_sin_are_rational():
    # the zero query's scores are 0, so its z is the bias alone: −0.5·|0 − j|
    data = compute(load_spec({**ZERO, "rope": True, "alibi_slopes": ["0.5"]}), digits=6)
    assert data["scaled"]["exact"] == [
        ["0", "-1/2", "-1"],
        ["-1/2 + sqrt(2)*cos(1)/2", "sqrt(2)/2", "-sqrt(2)*sin(1)/2 - 1/2"],
    ]
    assert data["weights"]["exact"][0] == [
        "1/(exp(-1) + exp(-1/2) + 1)",
        "exp(-1/2)/(exp(-1) + exp(-1/2) + 1)",
        "exp(-1)/(exp(-1) + exp(-1/2) + 1)",
    ]
    model = build(load_spec({**ZERO, "rope": True, "alibi_slopes": ["0.5"]}))
    assert model.rationals("shifted") == ((0, Fraction(-1, 2), -1), (None, 0, None))


def test_softcap_keeps_only_zero_rational():
    model = build(load_spec({**ZERO, "rope": True, "alibi_slopes": ["0.5"], "softcap": "2"}))
    assert model.rationals("scaled") == ((0, None, None), (None, None, None))
    assert model.row_max == (0, 1)


def test_an_irrational_ratio_is_ordered_by_enclosures_and_the_sink_wins_a_tie():
    # scale/m = 256/√2 is irrational: the zero query's z = −|j|/256 are ordered on enclosures; its top z = 0 = s
    spec = load_spec({**ZERO, "rope": True, "alibi": True, "sinks": ["0"]})
    model = build(spec)
    assert model._ratio is None
    assert model.row_max == (0, 1)
    assert model.sink_wins == (True, False)
    data = compute(spec, digits=6)
    assert data["scaled"]["value"][0] == ["0", "-0.00390625", "-0.00781250"]
    assert data["sink_share"] == {
        "exact": [
            "1/(exp(-1/128) + exp(-1/256) + 2)",
            "1/(exp(-sqrt(2)*sin(1)/2 - 1/256) + 1 + exp(-1/256 + sqrt(2)*cos(1)/2) + exp(sqrt(2)/2))",
        ],
        "value": ["0.250732", "0.198527"],
    }


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"Q": [["a", 0], [1, 0]]}, "<dict>: rope: RoPE needs numbers in Q and K (symbols are not rotated)"),
    ],
)
def test_what_is_still_refused_is_one_line(keys, message):
    with pytest.raises(SpecError) as info:
        load_spec({**ZERO, "rope": True, "alibi": True, "sinks": ["0"], **keys})
    assert str(info.value) == message


def test_certify_is_refused_with_the_variants_too():
    with pytest.raises(SpecError) as info:
        compute(load_spec({**ZERO, "rope": True, "alibi": True, "sinks": ["0"]}), certify=True)
    assert str(info.value) == "<dict>: rope: --certify does not cover RoPE yet"


def test_check_judges_the_combined_quantities():
    spec = rope_example(alibi=True, softcap="2", sinks=["0.5"], softmax="stable")
    claims = {
        "claims": {
            "Q_rot[4]": ["-0.990", "0.970", "0.141", "1.030"],
            "scores[4]": ["1.009", "1.583", "2.540", "3"],
            "scaled[4]": ["0.483", "0.746", "1.120", "1.270"],
            "scaled[3][1]": "0.792",  # the scaled score before the bias and the cap
            "weights[4]": ["0.135", "0.176", "0.255", "0.297"],
            "sink_share[4]": "0.137",
            "output[4]": ["0.984", "0.431"],
        }
    }
    results = check(spec, claims).results
    got = [(v.claim.quantity, v.row_label, v.col_label, v.verdict) for v in results]
    wrong = next(v for v in results if v.verdict == "wrong")
    assert (str(wrong.closed_form), str(wrong.expected)) == ("2*tanh(cos(2)/4 - 1/256 + cos(1/50)/2)", "0.746")
    assert ("scores", "down", "down", "exact") in got
    assert ("scaled", "sat", "the", "wrong") in got
    assert [v for v in got if v[3] not in ("rounded", "exact")] == [("scaled", "sat", "the", "wrong")]
    assert len(got) == 20


def test_check_judges_the_gradients_through_the_rotation_the_cap_and_the_sink():
    spec = rope_example(alibi=True, softcap="2", sinks=["0.5"], softmax="stable", backward={})
    assert compute(spec, digits=4)["backward"]["dsinks"]["value"] == [["-0.6780"]]
    claims = {
        "claims": {
            "dQ[4]": ["0.1186", "0.04447", "-0.01092", "0.04628"],
            "dK[1]": ["0.01008", "-0.08567", "0.04368", "-0.08"],
        }
    }
    got = [v.verdict for v in check(spec, claims).results]
    assert got == ["rounded"] * 6 + ["wrong", "last-digit"]  # the sign of dK[1][3] flipped; dK[1][4] truncated
