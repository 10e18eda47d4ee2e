"""Invariants on random small specs."""

from decimal import Decimal

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.exact import numeric
from symattn.exact.heads import build_model
from symattn.input.spec import load_spec

from .strategies import specs

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(specs())
def test_softmax_rows_sum_to_exactly_one(raw):
    model = build_model(load_spec(raw))
    for i in range(model.weights.rows):
        assert sympy.cancel(sympy.together(sum(model.weights.row(i)))) == 1


@SETTINGS
@given(specs(max_tokens=3), st.fractions(min_value=-5, max_value=5, max_denominator=7))
def test_adding_a_constant_to_a_row_leaves_its_weights(raw, c):
    model = build_model(load_spec(raw))
    Z = model.scaled

    def weights(shift):
        rows = []
        for i in range(Z.rows):
            e = [sympy.exp(Z[i, j] + shift) for j in range(Z.cols)]
            rows.append([x / sympy.Add(*e) for x in e])
        return rows

    # exactly, for every real shift at once: a symbol c cancels out of each weight
    symbol = sympy.Symbol("c", real=True)
    for row, shifted in zip(weights(0), weights(symbol)):
        for a, b in zip(row, shifted):
            assert sympy.cancel(sympy.expand_power_exp(b)) == sympy.cancel(a)
    # and the shown digits, for a rational shift
    shift = sympy.Rational(c.numerator, c.denominator)
    shown = [[numeric.round_expr(w, 20) for w in row] for row in weights(shift)]
    assert tuple(map(tuple, shown)) == model.rounded("weights", 20)


@SETTINGS
@given(specs())
def test_float64_agrees_within_1e_12(raw):
    np = pytest.importorskip("numpy")
    spec = load_spec(raw)
    model = build_model(spec)
    Q, K, V = (np.array([[float(x.value) for x in row] for row in m]) for m in (spec.Q, spec.K, spec.V))
    S = Q @ K.T / np.sqrt(Q.shape[1])
    E = np.exp(S - S.max(axis=1, keepdims=True))
    A = E / E.sum(axis=1, keepdims=True)
    O = A @ V
    scale = max(1.0, float(np.abs(V).max()))
    for exact, approx, size in (
        (model.significant("weights", 17), A, 1.0),
        (model.significant("output", 17), O, scale),
    ):
        for i, row in enumerate(exact):
            for j, value in enumerate(row):
                assert abs(float(value) - approx[i, j]) <= 1e-12 * max(abs(approx[i, j]), size)


@SETTINGS
@given(specs(), st.integers(0, 8))
def test_rounded_values_are_the_exact_values_rounded_half_up(raw, decimals):
    # cross-check the interval machinery against 60-digit evalf, away from ties
    model = build_model(load_spec(raw))
    got = model.rounded("weights", decimals)
    for i in range(model.weights.rows):
        for j in range(model.weights.cols):
            value = Decimal(str(model.weights[i, j].evalf(60)))
            expected = value.quantize(Decimal(1).scaleb(-decimals), rounding="ROUND_HALF_UP")
            assert got[i][j] == expected
