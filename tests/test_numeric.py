from fractions import Fraction

import mpmath
import pytest
import sympy

from symattn.exact import numeric
from symattn.exact.heads import build_model
from symattn.input.decimals import round_half_up, terminating_decimals
from symattn.input.errors import EvaluationError
from symattn.input.spec import load_spec


@pytest.mark.parametrize(
    "value, decimals, expected",
    [
        (Fraction(5, 1000), 2, "0.01"),  # tie: half-up, not half-even
        (Fraction(15, 1000), 2, "0.02"),
        (Fraction(25, 1000), 2, "0.03"),
        (Fraction(-5, 1000), 2, "-0.01"),  # ties go away from zero
        (Fraction(-4, 1000), 2, "0.00"),  # no negative zero
        (Fraction(1, 3), 3, "0.333"),
        (Fraction(2, 3), 0, "1"),
        (Fraction(9995, 10000), 3, "1.000"),
        (Fraction(123, 1), 0, "123"),
    ],
)
def test_round_half_up(value, decimals, expected):
    assert str(round_half_up(value, decimals)) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (Fraction(1, 10), 1),
        (Fraction(23, 25), 2),
        (Fraction(1, 3), None),
        (Fraction(7), 0),
        (Fraction(1, 64), 6),
    ],
)
def test_terminating_decimals(value, expected):
    assert terminating_decimals(value) == expected


@pytest.mark.parametrize(
    "expr, decimals, expected",
    [
        (sympy.sqrt(2), 3, "1.414"),
        (sympy.exp(sympy.Rational(13, 20)), 3, "1.916"),  # e^0.650 of the document
        (sympy.exp(sympy.Rational(651, 1000)), 3, "1.917"),
        (sympy.exp(-sympy.sqrt(2) * 50), 3, "0.000"),
        (sympy.exp(sympy.Integer(0)), 3, "1.000"),
        (sympy.pi, 30, "3.141592653589793238462643383280"),
    ],
)
def test_round_expr(expr, decimals, expected):
    assert str(numeric.round_expr(expr, decimals)) == expected


def test_near_tie_needs_more_precision():
    # 1/2 + 10^-40 (irrational-free but far past the first guess of precision)
    x = sympy.Rational(1, 2) + sympy.exp(-sympy.Integer(92))  # e^-92 ≈ 1.1e-40
    assert str(numeric.round_expr(x, 0)) == "1"
    y = sympy.Rational(1, 2) - sympy.exp(-sympy.Integer(92))
    assert str(numeric.round_expr(y, 0)) == "0"


def test_hidden_exact_tie_raises_instead_of_looping():
    # sqrt(2)·sqrt(2)/4 is exactly 1/2, a tie at 0 decimals, in a form SymPy did not reduce
    tie = sympy.Mul(sympy.sqrt(2), sympy.sqrt(2), sympy.Rational(1, 4), evaluate=False)
    with pytest.raises(EvaluationError) as info:
        numeric.round_expr(tie, 0)
    assert str(info.value) == "cannot decide the rounding of sqrt(2)*sqrt(2)*(1/4) (entry 1): it may be an exact tie"


@pytest.mark.parametrize("digits", [1, 5, 15, 17, 40])
def test_significant_digits_match_mpmath(seed, digits):
    m = build_model(load_spec(seed))
    got = m.significant("weights", digits)
    mpmath.mp.dps = digits + 30
    for i in range(3):
        z = [mpmath.mpf(int(m.scores[i, j].p)) / int(m.scores[i, j].q) / mpmath.sqrt(2) for j in range(3)]
        e = [mpmath.exp(x) for x in z]
        for j in range(3):
            expected = mpmath.nstr(e[j] / sum(e), digits, strip_zeros=False, min_fixed=-10, max_fixed=10)
            assert str(got[i][j]) == expected


def test_significant_carry():
    assert str(numeric.significant_exact(Fraction(9999, 1000), 3)) == "10.0"
    assert str(numeric.significant_exact(Fraction(1, 3), 4)) == "0.3333"
    assert str(numeric.significant_exact(Fraction(0), 4)) == "0"
