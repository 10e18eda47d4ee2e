"""The two numeric engines (python-flint's arb, mpmath) give byte-identical values, and certify."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.certificates import exact_verifier as certificate
from symattn.derivation.intermediates import compute
from symattn.exact import engine
from symattn.exact.heads import build_model
from symattn.exact.numeric import Fixed
from symattn.input.errors import EvaluationError
from symattn.input.spec import load_spec

from .strategies import matrix, multihead_base

flint = pytest.importorskip("flint")

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def head_specs(draw):
    """One head: cross-attention (n_q ≠ n_k) sometimes, a mask matrix or causal sometimes, any scale."""
    n_q, n_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d, dv = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    raw = {
        "Q": matrix(draw, n_q, d),
        "K": matrix(draw, n_k, d),
        "V": matrix(draw, n_k, dv),
        "scale": draw(st.sampled_from(["sqrt", "none", "1/3", "2"])),
    }
    mask = draw(st.sampled_from(["none", "causal", "matrix"]))
    if mask == "causal" and n_q == n_k:
        raw["mask"] = "causal"
    elif mask == "matrix":
        rows = draw(st.lists(st.lists(st.integers(0, 1), min_size=n_k, max_size=n_k), min_size=n_q, max_size=n_q))
        raw["mask"] = [row if any(row) else [1] + row[1:] for row in rows]  # every query attends to a key
    return raw


@st.composite
def projection_specs(draw):
    """X with W_Q, W_K, W_V, W_O and biases: one or two heads, cross-attention sometimes."""
    return multihead_base(draw)[0]


def both(raw, **kwargs) -> tuple[str, str]:
    """compute's JSON on the flint engine and on the mpmath one (a fresh model for each)."""
    out = []
    for name in ("flint", "mpmath"):
        with engine.use(name):
            out.append(json.dumps(compute(load_spec(raw), exact=False, **kwargs), ensure_ascii=False))
    return out[0], out[1]


@SETTINGS
@given(head_specs(), st.sampled_from([15, 30, 50]))
def test_engines_agree_on_one_head(raw, digits):
    flint_out, mpmath_out = both(raw, digits=digits)
    assert flint_out == mpmath_out


@SETTINGS
@given(projection_specs(), st.sampled_from([15, 30, 50]))
def test_engines_agree_with_heads_and_projections(raw, digits):
    flint_out, mpmath_out = both(raw, digits=digits)
    assert flint_out == mpmath_out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(head_specs(), st.sampled_from([15, 30]))
def test_certified_bounds_verify_on_both_engines(raw, digits):
    values = []
    for name in ("flint", "mpmath"):
        with engine.use(name):
            data = compute(load_spec(raw), digits=digits, exact=False, certify=True)
        result = certificate.verify(json.loads(json.dumps(data)))
        assert result.ok, (name, result.failures)
        values.append(json.dumps({k: v["value"] for k, v in data.items() if isinstance(v, dict) and "value" in v}))
    assert values[0] == values[1]


def test_engines_agree_on_large_scores_and_exact_ties():
    # e^z with z near 180 (headroom bits), a flat row (rational weights), equal scores in a row
    raw = {
        "Q": [["30", "0"], ["1", "1"], ["0.5", "0.5"]],
        "K": [["12", "0"], ["1", "1"], ["1", "1"]],
        "V": [["1", "2"], ["3", "4"], ["3", "5"]],
        "scale": "none",
        "mask": [[1, 1, 1], [1, 1, 1], [0, 1, 1]],
    }
    flint_out, mpmath_out = both(raw, digits=40)
    assert flint_out == mpmath_out
    data = json.loads(flint_out)
    assert data["exp"]["value"][0][0] == "2.218265297538555399989665903558669919145E+156"  # e^360
    assert data["weights"]["value"][2] == ["0", "0.5" + "0" * 39, "0.5" + "0" * 39]  # exactly 1/2, 40 digits


def test_engine_choice(monkeypatch):
    monkeypatch.setenv(engine.VARIABLE, "mpmath")
    assert engine.name() == "mpmath"
    assert build_model(load_spec({"Q": [["1"]], "K": [["1"]], "V": [["1"]]})).numeric_engine == "mpmath"
    monkeypatch.setenv(engine.VARIABLE, "flint")
    assert engine.name() == "flint"
    with engine.use("mpmath"):
        assert engine.name() == "mpmath"
    monkeypatch.delenv(engine.VARIABLE)
    assert engine.name() == "flint"  # python-flint is installed here
    monkeypatch.setenv(engine.VARIABLE, "gmpy")
    with pytest.raises(EvaluationError, match="SYMATTN_ENGINE='gmpy': expected one of flint, mpmath"):
        engine.name()
    with pytest.raises(ValueError, match="unknown engine 'arb'"):
        with engine.use("arb"):
            pass


def test_a_ball_becomes_integers_exactly():
    # 5/2 ± 1/8 at 2^-3 is [19, 21]; at 2^-1 the ends round outwards to [4, 6]
    ball = flint.arb((5, -1), (1, -3))
    assert engine._to_fixed(ball, 3) == Fixed(19, 21, 3)
    assert engine._to_fixed(ball, 1) == Fixed(4, 6, 1)
    with pytest.raises(EvaluationError, match="value is not finite"):
        engine._to_fixed(flint.arb("inf"), 3)


def test_weighted_sums_agree_and_enclose():
    rows = [[Fixed(10, 12, 4), Fixed(-7, -3, 4)], [Fixed(0, 0, 4), Fixed(5, 5, 4)]]
    columns = [[3, -2], [0, 5]]
    a = engine.weighted_sums(rows, columns, 7, 4, "flint")
    b = engine.weighted_sums(rows, columns, 7, 4, "mpmath")
    # row 0: mids 11, −5 ± 5 (widest box 4, plus 1): (43 ± 25)/7 and (−25 ± 25)/7, outwards
    assert a == b == [[Fixed(2, 10, 4), Fixed(-8, 0, 4)], [Fixed(-3, 0, 4), Fixed(2, 5, 4)]]
