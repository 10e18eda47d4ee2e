"""Projections, masks, cross-attention, multi-head and stable softmax: exact values and bad input."""

from fractions import Fraction

import pytest
import sympy
from sympy import Rational, exp, sqrt

from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.exact.heads import build_model
from symattn.exact.multihead import build_multihead
from symattn.input import builtin
from symattn.input.errors import ShapeError, SpecError
from symattn.input.spec import load_spec

SEED = {
    "Q": [["1.0", "0.0"], ["0.0", "1.0"], ["0.9", "0.1"]],
    "K": [["1.0", "0.2"], ["0.1", "1.0"], ["0.8", "0.3"]],
    "V": [[10, 0], [0, 10], [1, 1]],
}


def test_causal_3x3_exact():
    model = build_model(load_spec({**SEED, "mask": "causal"}))
    z = [[Rational(1) * sqrt(2) / 2], [sqrt(2) / 10, sqrt(2) / 2]]
    assert model.weights.row(0).tolist() == [[1, 0, 0]]
    assert model.weights[1, 0] == exp(z[1][0]) / (exp(z[1][0]) + exp(z[1][1]))
    assert model.weights[1, 2] == 0
    assert model.output.row(0).tolist() == [[10, 0]]
    assert [str(x) for x in model.rounded("weights", 3)[1]] == ["0.362", "0.638", "0.000"]
    assert model.rounded("scaled", 3)[0][1].is_infinite()


def test_key_padding_blocks_a_key_for_every_query():
    spec = load_spec({**SEED, "key_padding": [False, True, False]})
    assert spec.allowed == ((True, False, True),) * 3
    model = build_model(spec)
    assert [model.weights[i, 1] for i in range(3)] == [0, 0, 0]


def test_stable_softmax_gives_exactly_the_same_weights():
    model = build_model(load_spec({**SEED, "mask": "causal"}))
    for i in range(3):
        for j in range(3):
            plain = model.weights[i, j]
            stable = model.exp_shifted[i, j] / model.exp_shifted_sum[i, 0]
            # e^(z-m) / Σ e^(z_k-m) == e^z / Σ e^(z_k): cross-multiply and combine the exponentials
            left = sympy.powsimp(sympy.expand(sympy.numer(stable) * sympy.denom(plain)))
            right = sympy.powsimp(sympy.expand(sympy.numer(plain) * sympy.denom(stable)))
            assert sympy.expand(left - right) == 0
    spec = load_spec({**SEED, "softmax": "stable"})
    row = derive(spec).steps[3].rows[0]
    assert (str(row.shift.value), [str(x.value) for x in row.z]) == ("0.651", ["0", "-0.516", "-0.120"])
    assert [str(x.value) for x in row.weights] == ["0.403", "0.240", "0.357"]


def test_cross_2x3_exact():
    spec = load_spec(builtin.example_path("cross", "en"))
    model = build_model(spec)
    assert (spec.tokens, spec.key_tokens) == (("le", "chat"), ("the", "cat", "sat"))
    assert model.scores.shape == (2, 3) and model.output.shape == (2, 2)
    assert model.scores.row(1).tolist() == [[Rational(11, 100), Rational(2, 5), Rational(51, 50)]]
    assert [str(x) for x in model.rounded("output", 3)[1]] == ["2.972", "4.607"]


def test_two_heads_2x4_exact():
    spec = load_spec(
        {
            "X": [[1, 0, 0, 1], [0, 1, 1, 0]],
            "heads": 2,
            "W_Q": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
            "W_K": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
            "W_V": [[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 2]],
        }
    )
    mh = build_multihead(spec)
    # head 1 sees columns 1-2: token 1 is [1, 0], token 2 is [0, 1]; scores are the identity, scaled by 1/√2
    a = exp(sqrt(2) / 2)
    assert mh.heads[0].weights[0, 0] == a / (a + 1)
    assert mh.concat[0, 0] == 2 * a / (a + 1)
    assert mh.concat.shape == (2, 4)
    assert [str(x) for x in mh.rounded("concat", 4)[0]] == ["1.3395", "0.6605", "0.6605", "1.3395"]


def test_projection_exact():
    spec = load_spec(builtin.example_path("projection", "en"))
    assert [x.text for x in spec.Q[2]] == ["1.1", "0.0"]  # 0.8 + 0.2·0 + 1.0·0.2 + 0.1
    assert [x.value for x in spec.K[0]] == [Fraction(1), Fraction(9, 20)]


def test_compute_json_for_heads():
    data = compute(load_spec(builtin.example_path("multihead", "en")), digits=6)
    assert len(data["heads"]) == 2 and data["d_model"] == 4
    assert data["heads"][0]["d_k"] == 2
    assert data["Q"]["exact"][2] == ["13/10", "1/5", "11/10", "2/5"]
    assert len(data["concat"]["value"][0]) == 4 and len(data["output"]["value"][0]) == 4


def raw_projection(**changes):
    base = {"X": [[1, 0], [0, 1]], "W_Q": [[1, 0], [0, 1]], "W_K": [[1, 0], [0, 1]], "W_V": [[1, 0], [0, 1]]}
    return {**base, **changes}


BAD = [
    (
        raw_projection(W_Q=[[1, 0], [0, 1], [1, 1]]),
        ShapeError,
        "<dict>: W_Q: shape mismatch: X is 2×2 and W_Q is 3×2; W_Q needs one row per column of X",
    ),
    (
        raw_projection(W_K=[[1], [0]]),
        ShapeError,
        "<dict>: W_K: shape mismatch: W_Q is 2×2 and W_K is 2×1; W_Q and W_K need the same number of columns (d_k)",
    ),
    (raw_projection(b_Q=[1, 2, 3]), ShapeError, "<dict>: b_Q: 3 entries for the 2 columns of W_Q"),
    (
        raw_projection(heads=3, X=[[1, 0, 0, 0]], W_Q=[[1] * 4] * 4, W_K=[[1] * 4] * 4, W_V=[[1] * 4] * 4),
        SpecError,
        "<dict>: heads: d_model = 4 is not divisible by heads = 3",
    ),
    ({**SEED, "heads": 3}, SpecError, "<dict>: heads: Q and K have 2 columns, not divisible by heads = 3"),
    (
        {**SEED, "V": [[1, 2, 3]] * 3, "heads": 2},
        SpecError,
        "<dict>: heads: V has 3 columns, not divisible by heads = 2",
    ),
    (
        {**SEED, "mask": [[1, 0, 0], [0, 0, 0], [1, 1, 1]]},
        SpecError,
        "<dict>: mask: row 2 (t2) may attend to no key; softmax is undefined there",
    ),
    (
        {**SEED, "mask": [[1, 0], [1, 1]]},
        ShapeError,
        "<dict>: mask: shape mismatch: expected 3×3 (queries × keys), got 2×2",
    ),
    ({**SEED, "mask": [[1, 0, 0], [1, 2, 0], [1, 1, 1]]}, SpecError, "<dict>: mask[2][2]: expected 0 or 1, got 2"),
    ({**SEED, "mask": "future"}, SpecError, "<dict>: mask: expected one of 'none', 'causal', got 'future'"),
    (
        {**SEED, "key_padding": [True, True, True]},
        SpecError,
        "<dict>: mask: row 1 (t1) may attend to no key; softmax is undefined there",
    ),
    ({**SEED, "key_padding": [True]}, ShapeError, "<dict>: key_padding: 1 entries for 3 keys"),
    ({**SEED, "X": [[1]]}, SpecError, "<dict>: Q: give Q, K, V or X with W_Q, W_K, W_V, not both"),
    ({**SEED, "W_Q": [[1]]}, SpecError, "<dict>: W_Q: needs X (the inputs that W projects)"),
    ({**SEED, "softmax": "fast"}, SpecError, "<dict>: softmax: expected one of 'plain', 'stable', got 'fast'"),
]


@pytest.mark.parametrize("raw, kind, message", BAD)
def test_bad_input(raw, kind, message):
    with pytest.raises(kind) as info:
        load_spec(raw)
    assert str(info.value) == message


# --- symbolic entries ------------------------------------------------------


def test_symbolic_2x2_softmax_is_the_logistic_of_the_score_gap():
    from symattn.exact.symbolic import build_symbolic
    from symattn.input.formula import symbol

    spec = load_spec({"Q": [[1, 0], [0, 1]], "K": [["a", 0], ["b", 0]], "V": [["v_1"], ["v_2"]]})
    a, b = symbol("a"), symbol("b")
    weight = build_symbolic(spec).weights[0, 0]
    assert sympy.simplify(weight - 1 / (1 + sympy.exp((b - a) / sympy.sqrt(2)))) == 0


def test_symbolic_values_follow_from_subs():
    spec = load_spec(builtin.example_path("symbolic", "en"))
    assert spec.symbols == ("a", "b", "v_1", "v_2")
    data = compute(spec, digits=6)
    assert data["formulas"]["scores"] == [["a", "b"], ["0", "0"]]
    assert data["values"]["weights"]["value"][0] == ["0.587479", "0.412521"]  # 1/(1+e^((b-a)/√2)) with a = 1, b = 0.5
    derivation = derive(spec.with_options(subs={"a": "0"}))
    values = derivation.steps[-2]
    assert values.kind == "substitution" and dict(values.values)["a"].text == "0"


def test_symbolic_without_values_shows_formulas_only():
    spec = load_spec({"Q": [["q", 1]], "K": [[1, "k"]], "V": [[2]]})
    derivation = derive(spec)
    assert derivation.symbolic and all(step.kind != "substitution" for step in derivation.steps)
    assert "values" not in compute(spec)


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            {"Q": [["__import__('os')"]], "K": [[1]], "V": [[1]]},
            "<dict>: Q[1][1]: unknown function '__import__' in \"__import__('os')\"; allowed: exp, sqrt",
        ),
        (
            {"Q": [["log(a)"]], "K": [[1]], "V": [[1]]},
            "<dict>: Q[1][1]: unknown function 'log' in 'log(a)'; allowed: exp, sqrt",
        ),
        ({"Q": [["a.real"]], "K": [[1]], "V": [[1]]}, "<dict>: Q[1][1]: expected an operator before '.' in 'a.real'"),
        ({"Q": [["2a"]], "K": [[1]], "V": [[1]]}, "<dict>: Q[1][1]: expected an operator before 'a' in '2a'"),
        (
            {"Q": [["_x"]], "K": [[1]], "V": [[1]]},
            "<dict>: Q[1][1]: '_x' is not a symbol name (a letter, then letters, digits or _)",
        ),
        (
            {"Q": [["a^b"]], "K": [[1]], "V": [[1]]},
            "<dict>: Q[1][1]: an exponent must be a number from -16 to 16 in 'a^b'",
        ),
        (
            {"Q": [["a"]], "K": [[1]], "V": [[1]], "subs": {"2a": 1}},
            "<dict>: subs.2a: not a symbol name (a letter, then letters, digits or _)",
        ),
        (
            {"Q": [["a"]], "K": [[1]], "V": [[1]], "subs": {"z": 1}},
            "<dict>: subs.z: no entry uses this symbol; symbols: a",
        ),
    ],
)
def test_bad_symbolic_input(raw, message):
    with pytest.raises(SpecError) as info:
        load_spec(raw)
    assert str(info.value) == message


def test_irrational_values_are_refused_with_a_reason():
    spec = load_spec({"Q": [["sqrt(a)"]], "K": [[1]], "V": [[1]], "subs": {"a": 2}})
    with pytest.raises(SpecError) as info:
        derive(spec)
    assert str(info.value) == (
        "<dict>: Q[1][1]: with the given values 'sqrt(a)' is sqrt(2), which is not rational; "
        "numbers are computed for rational entries only"
    )


def test_symbols_in_projections():
    spec = load_spec(
        {
            "X": [["x", "0"], ["0", "1"]],
            "W_Q": [[1, 0], [0, 1]],
            "W_K": [["w", 0], [0, 1]],
            "W_V": [[1, 0], [0, 1]],
            "b_Q": ["c", 0],
            "subs": {"x": 2, "w": "0.5", "c": 1},
        }
    )
    assert spec.symbols == ("c", "w", "x")
    assert str(spec.Q[0][0].expr) == "c + x"
    # Q = [[3, 0], [1, 1]] and K = I: row 1 has scores [3, 0], so its first weight is 1/(1 + e^(-3/√2))
    assert compute(spec, digits=6)["values"]["weights"]["value"][0] == ["0.892958", "0.107042"]
    assert [step.kind for step in derive(spec).steps][:3] == ["setup", "projecting", "scores"]
    with pytest.raises(SpecError) as info:
        load_spec(
            {**raw_projection(X=[["x", 0, 0, 0]], W_Q=[[1] * 4] * 4, W_K=[[1] * 4] * 4, W_V=[[1] * 4] * 4), "heads": 2}
        )
    assert str(info.value) == "<dict>: heads: symbols are supported with one head only"


def test_irrational_entries_without_symbols_show_formulas():
    spec = load_spec({"Q": [["sqrt(2)", 0]], "K": [[1, "exp(1)"]], "V": [[3]]})
    assert spec.symbols == () and spec.is_symbolic
    steps = [step.kind for step in derive(spec).steps]
    assert "substitution" not in steps and derive(spec).symbolic
    assert compute(spec)["formulas"]["scores"] == [["sqrt(2)"]]
