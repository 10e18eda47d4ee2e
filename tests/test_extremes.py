"""Extreme but valid numbers (issue 28): claims of 10^±5000 on a spec with every score variant, tiny
softcaps, and the refusals that remain naming their file and key."""

from decimal import Decimal
from fractions import Fraction

import pytest
import sympy

from symattn.checking.checker import check
from symattn.cli.commands import main
from symattn.exact import numeric
from symattn.exact.heads import build_model
from symattn.input.spec import spec_from_mapping

ROWS = [[1, 0, 1, 0, 0, 1, 0, 1], [0, 1, 0, 1, 1, 0, 1, 0], [1, 1, 0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 1, 1, 0, 0]]
EVERY_VARIANT = f"""tokens = ["a", "b", "c", "d", "e"]
Q = {ROWS + [[1, 0, 0, 1, 0, 1, 1, 0]]}
K = {ROWS + [[1, 0, 0, 1, 0, 1, 1, 0]]}
V = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 1]]
heads = 2
rope = true
alibi = true
softcap = 2
sinks = [0.5, 1]
softmax = "stable"
"""


def verdicts(tmp_path, claims: str, spec: str = EVERY_VARIANT):
    (tmp_path / "s.toml").write_text(spec, encoding="utf-8")
    (tmp_path / "c.toml").write_text('spec = "s.toml"\n[claims]\n' + claims, encoding="utf-8")
    return [(v.claim.key, v.verdict, v.carried) for v in check(None, str(tmp_path / "c.toml")).results]


@pytest.mark.parametrize("claim", ["1e5000", "-1e5000", "1.5e-5000"])
def test_a_claim_of_ten_to_the_5000_is_judged(tmp_path, claim):
    # was "negative shift count" (rounding at 10^5000 asked for fewer than no bits), then str() of 10^5000
    (got,) = verdicts(tmp_path, f'"h2.scaled[4][5]" = "{claim}"\n')
    assert got == ("claims.h2.scaled[4][5]", "wrong" if claim == "1.5e-5000" else "last-digit", None)


def test_values_carried_from_10_to_the_5000_are_judged(tmp_path):
    claims = '"h2.scaled[4][5]" = "1e5000"\n"h2.scaled[4][1]" = "-1e5000"\n"h2.exp[4][1]" = "0.5"\n'
    claims += '"h2.exp_sum[4]" = "1e-5000"\n"h2.weights[4][1]" = "0.1"\n'
    got = verdicts(tmp_path, claims)
    # a claim written m·10^k gets its carried value so too (a Num), to its own digits where it is far off
    got = [(key, verdict, getattr(c, "value", c)) for key, verdict, c in got]
    carried = {key: (verdict, None if c is None else (str(c)[:6], c.adjusted())) for key, verdict, c in got}
    assert carried == {
        "claims.h2.scaled[4][1]": ("last-digit", None),
        "claims.h2.scaled[4][5]": ("last-digit", None),
        "claims.h2.exp[4][1]": ("last-digit", ("0.0", -1)),  # e^(−1e5000 − 1e5000), from their own max
        # 0.5 + e^0 + terms of e^(−1e5000): to the claim's one digit (its 5000 decimals would print 5001)
        "claims.h2.exp_sum[4]": ("wrong", ("2", 0)),
        "claims.h2.weights[4][1]": ("last-digit", ("500000", 4999)),  # 0.5 / 1e-5000
    }


def tiny_model(**variant):
    spec = {"tokens": ["a", "b", "c"], "Q": [[1, 0], [0, 1], [1, 1]], "K": [[1, 0], [0, 1], ["0.5", "0.5"]]}
    return build_model(spec_from_mapping({**spec, "V": [[1, 0], [0, 1], [1, 1]], **variant}))


def test_tiny_softcaps_are_decided():
    # c·tanh(z/c) is c·(1 − e^(−10^6)) just under c: the enclosure around c straddles 10^−6 at any precision
    for cap, shown in (("1e-6", "0.00000100000"), ("1e-30", "1.00000E-30")):
        m = tiny_model(softcap=cap)
        assert m.significant("scaled", 6)[0] == (Decimal(shown), Decimal(0), Decimal(shown))
        assert m.rounded("scaled", 3)[0] == (Decimal("0.000"),) * 3
        assert m.significant("weights", 6)[0] == (Decimal("0.333333"),) * 3


TINY_STABLE = (
    'tokens = ["a", "b", "c"]\nQ = [[1, 0], [0, 1], [1, 1]]\nK = [[1, 0], [0, 1], [0.5, 0.5]]\n'
    'V = [[1, 0], [0, 1], [1, 1]]\nsoftcap = "1e-30"\nsoftmax = "stable"\n'
)


@pytest.mark.parametrize(
    "variant, row",
    [
        # z − max of two saturated scores is −2c·e^(−2·0.354/c)(1 − …): 10^−307099, no box at 16384 bits holds it
        ({}, ("0", "-0.00000100000", "-5.34373E-307099")),
        # against the sink s = c: c·tanh(x) − c = −2c/(e^(2x) + 1)
        ({"sinks": ["0.000001"]}, ("-1.42777E-614191", "-0.00000100000", "-5.34373E-307099")),
        ({"alibi": True}, ("0", "-0.00000200000", "-3.79423E-300313")),
    ],
)
def test_z_minus_max_of_saturated_scores_has_its_digits(variant, row):
    m = tiny_model(softcap="1e-6", softmax="stable", **variant)
    assert m.significant("shifted", 6)[0] == tuple(Decimal(x) for x in row)


def test_a_value_below_ten_to_the_minus_a_million_names_the_file_and_entry(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(TINY_STABLE, encoding="utf-8")
    # c = 10^−30: z − max is about 10^−(3·10^29), which has no digits to write
    assert main(["render", str(spec)]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {spec}: shifted[1][3] is below 10^-1000000 in size: it has no digits to show\n"
    )


def test_the_engine_at_huge_magnitudes():
    assert numeric.log10_floor(Fraction(10) ** 5000) == 5000  # without str() of a 5001-digit int
    assert numeric.log10_floor(Fraction(1, 10**5000) * 3) == -5000
    assert numeric.start_bits(-5000) == numeric.start_bits(0) == numeric.GUARD_BITS
    box = numeric.enclose(sympy.exp(-(sympy.Integer(10) ** 5000) + sympy.sqrt(2)), 64)  # seconds in mpmath
    assert box.a == 0 and 0 < box.b < sympy.Rational(1, 2**1000)
    with pytest.raises(numeric.TooLarge):
        numeric.round_expr(sympy.exp(sympy.Integer(10) ** 5000), 3, most_bits=17_000)


def test_a_refusal_in_check_names_the_claims_file_and_the_claim(tmp_path, capsys):
    (tmp_path / "s.toml").write_text(TINY_STABLE, encoding="utf-8")
    claims = tmp_path / "c.toml"
    claims.write_text('spec = "s.toml"\n[claims]\n"shifted[1][3]" = "0"\n', encoding="utf-8")
    assert main(["check", str(claims)]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {claims}: claims.shifted[1][3]: shifted[1][3] is below 10^-1000000 in size: it has no digits to show\n"
    )


@pytest.mark.parametrize(
    "cap, sink, wins, weight",
    [("1e-30", "1e-30", True, "0.250000"), ("1e-6", "-0.000001", False, "0.250000"), ("1e-6", "2", True, "0.0962551")],
)
def test_a_sink_at_or_past_a_tiny_softcap_is_ordered_without_boxes(cap, sink, wins, weight):
    # c·tanh(y/c) < c strictly, however close: was "cannot compare a score with the sink"
    m = tiny_model(softcap=cap, sinks=[sink])
    assert m.sink_wins == (wins,) * 3
    assert m.significant("weights", 6)[0][1] == Decimal(weight)  # z = 0 against two near ±c and the sink
