"""The rationality proof of a closed form with parts (issue 32: two heads of MLA with decoupled RoPE took a
minute, in SymPy's sign checks of the exponents): the exps of a product merged by arithmetic, each e^z, cos and
sin an independent symbol, and the zero test by polynomial arithmetic over one denominator."""

from fractions import Fraction

import sympy

from symattn.exact.exactness import _vanishes, proved_rational

C1, S2, C2 = sympy.cos(1), sympy.sin(2), sympy.cos(2)


def _around(x: Fraction) -> tuple[Fraction, Fraction]:
    return x - Fraction(1, 1 << 50), x + Fraction(1, 1 << 50)


def test_a_softmax_row_of_turned_scores_sums_to_one_and_its_weighted_deviations_to_zero():
    exps = [sympy.E, sympy.exp(C1 / 2 + 1), sympy.exp(-S2 / 2 + C2 / 2 + 1)]
    total = sympy.Add(*exps)
    weights = [e / total for e in exps]
    g = [sympy.Rational(5, 2), 3, sympy.Rational(7, 2)]
    mean = sympy.Add(*[w * x for w, x in zip(weights, g)])
    assert proved_rational(sympy.Add(*weights) + 1, *_around(Fraction(2))) == 2
    deviations = sympy.Add(*[w * (x - mean) for w, x in zip(weights, g)])
    assert deviations != 0  # SymPy does not see it: the proof does
    assert proved_rational(deviations, *_around(Fraction(0))) == 0


def test_exps_of_a_product_merge():
    a = C1 / 3 + sympy.sqrt(2)
    x = sympy.E * sympy.exp(a) / sympy.exp(a + 1) + sympy.exp(a) * sympy.exp(-a) / 2
    assert proved_rational(x, *_around(Fraction(3, 2))) == Fraction(3, 2)


def test_a_wrong_guess_is_not_proved():
    # (the enclosure only picks the guess: a value that is no rational function identity is never accepted)
    x = sympy.exp(C1) / (sympy.exp(C1) + sympy.E)
    assert proved_rational(x, *_around(Fraction(1, 2))) is None
    assert proved_rational(sympy.Add(*[sympy.E, sympy.exp(C1)]) / sympy.E, *_around(Fraction(2))) is None


def test_vanishes_over_one_denominator():
    y, z = sympy.symbols("y z")
    assert _vanishes(y / (y + z) + z / (y + z) - 1)
    assert _vanishes(sympy.sqrt(2) * y / (y * sympy.sqrt(2)) - 1)
    assert not _vanishes(y / (y + z) - 1)
    # √2 is a symbol here: (√2 + 1)(√2 − 1) − 1 = s² − 2 is undecided, and SymPy's cancel takes it
    assert not _vanishes((sympy.sqrt(2) + 1) * (sympy.sqrt(2) - 1) - 1)
