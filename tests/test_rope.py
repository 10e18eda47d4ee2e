"""RoPE (rope, rope_base, rope_style): the keys' errors, the exact rotation, the scores' structure, check."""

from fractions import Fraction

import pytest
import sympy

from symattn.checking.checker import check
from symattn.derivation.intermediates import compute
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.errors import LimitError, SpecError
from symattn.input.spec import load_spec

BASE = {"Q": [[1, 0], [0, 1]], "K": [[1, 0], [1, 1]], "V": [[1], [2]], "rope": True}


def spec(**keys):
    return load_spec({**BASE, **keys})


@pytest.mark.parametrize(
    "keys, message",
    [
        (
            {"Q": [[1, 0, 1]], "K": [[1, 0, 1]], "V": [[1]]},
            "<dict>: rope: rotates pairs of dimensions: d_k must be even, got d_k = 3",
        ),
        ({"rope": False, "rope_base": 10}, "<dict>: rope_base: needs rope = true"),
        ({"rope": "yes"}, "<dict>: rope: expected true or false, got 'yes'"),
        (
            {"rope_style": "halves"},
            "<dict>: rope_style: expected one of 'half', 'interleaved', got 'halves' (did you mean 'half'?)",
        ),
        ({"rope_base": 0}, "<dict>: rope_base: must be positive, got '0'"),
        ({"rope_base": "-2"}, "<dict>: rope_base: must be positive, got '-2'"),
        ({"Q": [["a", 0], [0, 1]]}, "<dict>: rope: RoPE needs numbers in Q and K (symbols are not rotated)"),
        ({"inputs": "rounded"}, '<dict>: inputs: inputs = "rounded" is not supported with RoPE yet'),
    ],
)
def test_errors_are_one_line(keys, message):
    with pytest.raises(SpecError) as info:
        spec(**keys)
    assert str(info.value) == message


def test_base_has_a_limit():
    with pytest.raises(LimitError) as info:
        spec(rope_base="1e13")
    assert str(info.value).startswith("<dict>: rope_base: 1e13 is outside what RoPE takes here")


def test_odd_head_width_is_refused_per_head():
    with pytest.raises(SpecError, match="d_k must be even, got d_k = 1"):
        load_spec({"Q": [[1, 0]], "K": [[1, 0]], "V": [[1, 2]], "heads": 2, "rope": True})


def test_backward_turns_the_gradients_back():
    m = build(spec(backward={"loss": "sum"}))
    assert m.top_quantities == ("dO", "dV", "dA", "dZ", "dS", "dQ_rot", "dK_rot", "dQ", "dK")
    dQ_rot, dQ = m.exact("dQ_rot"), m.exact("dQ")
    # row 0 is not turned; row 1 turns back by 1: dq_1 = dq′_1 cos 1 + dq′_2 sin 1
    assert dQ[0, 0] == dQ_rot[0, 0]
    assert sympy.simplify(dQ[1, 0] - (dQ_rot[1, 0] * sympy.cos(1) + dQ_rot[1, 1] * sympy.sin(1))) == 0
    data = compute(spec(backward={"loss": "sum"}), digits=6)["backward"]
    assert list(data) == ["loss", "dO", "dV", "dA", "dZ", "dS", "dQ_rot", "dK_rot", "dQ", "dK"]


def test_check_carries_the_claimants_own_dS_through_the_rotation():
    s = spec(backward={"loss": "sum"})
    m = build(s)
    dS = m.rounded("dS", 3)
    dQ = m.rounded("dQ", 3)
    claims = {"claims": {"dS": [[str(x) for x in row] for row in dS], "dQ": [[str(x) for x in row] for row in dQ]}}
    verdicts = {v.verdict for v in check(s, claims).results}
    assert verdicts <= {"exact", "rounded", "carried"}


def test_rotation_is_exact_and_position_zero_is_not_turned():
    m = build(spec(rope_base=10000))
    assert [str(x) for x in m.Q_rot] == ["1", "0", "-sin(1)", "cos(1)"]
    assert [str(x) for x in m.K_rot] == ["1", "0", "-sin(1) + cos(1)", "cos(1) + sin(1)"]
    assert m.rationals("Q_rot") == ((Fraction(1), Fraction(0)), (None, None))
    assert str(m.scores[1, 0]) == "-sin(1)"  # q'·k' = qᵀ R((j − i)θ) k, j − i = −1
    assert str(m.scores[0, 1]) == "-sin(1) + cos(1)"
    assert m.rationals("scores") == ((Fraction(1), None), (None, Fraction(1)))


def test_pairs_of_both_styles():
    data = {"Q": [[1, 2, 3, 4]] * 2, "K": [[1, 0, 0, 0]] * 2, "V": [[1], [1]], "rope_base": 100}
    half = build(spec(**data))
    interleaved = build(spec(**data, rope_style="interleaved"))
    assert half.pairs == ((0, 2), (1, 3)) and interleaved.pairs == ((0, 1), (2, 3))
    assert [str(x) for x in half.Q_rot.row(1)] == [
        "-3*sin(1) + cos(1)",
        "-4*sin(1/10) + 2*cos(1/10)",
        "sin(1) + 3*cos(1)",
        "2*sin(1/10) + 4*cos(1/10)",
    ]
    assert [str(x) for x in interleaved.Q_rot.row(1)] == [
        "-2*sin(1) + cos(1)",
        "sin(1) + 2*cos(1)",
        "-4*sin(1/10) + 3*cos(1/10)",
        "3*sin(1/10) + 4*cos(1/10)",
    ]


def test_digits_of_the_rotation():
    data = compute(spec(), digits=17)
    assert data["Q_rot"]["value"][1] == ["-0.84147098480789651", "0.54030230586813972"]
    assert data["scores"]["value"] == [
        ["1.0000000000000000", "-0.30116867893975679"],  # cos 1 − sin 1
        ["-0.84147098480789651", "1.0000000000000000"],
    ]


def test_scores_depend_on_the_distance_only():
    m = build(load_spec(builtin.example_path("rope", "en")))
    S = m.scores
    assert all(S[i, j] == S[i + 1, j + 1] for i in range(3) for j in range(3))
    assert str(S[0, 3]) == "cos(3) + 2*cos(3/100)"
    assert m.row_max == (0, 1, 2, 3)
    assert m.structures[0][1] == m.structures[1][2]  # equal exactly: one structure
    assert m.rationals("weights")[3] == (None, None, None, None)


def test_equal_angles_are_grouped():
    # base 8, d_k 6: θ = 1, 1/2, 1/4, so position 2 of pair 1 turns as far as position 1 of pair 0
    m = build(load_spec({"Q": [[1] * 6] * 3, "K": [[1] * 6] * 3, "V": [[1]] * 3, "rope": True, "rope_base": 8}))
    assert m.thetas == (1, Fraction(1, 2), Fraction(1, 4))
    assert len(m.angles) == 4  # 1, 1/2, 1/4, 2: 2·(1/2) = 1 and 2·(1/4) = 1/2 are the same angles
    assert m.structures[0][2] == (0, ((0, 2, 0), (1, 2, 0), (3, 2, 0)))  # 2 cos 1 + 2 cos ½ + 2 cos 2


def test_base_one_turns_every_pair_alike():
    m = build(spec(Q=[[1, 0, 0, 1], [1, 0, 0, 1]], K=[[1, 0, 0, 1], [0, 1, 1, 0]], rope_base=1))
    assert str(m.scores[1, 0]) == "2*cos(1)"
    assert str(m.scores[0, 1]) == "0"  # the cos and sin terms of the two pairs cancel
    assert m.rationals("scores")[0][1] == 0


def test_a_zero_query_has_flat_weights():
    m = build(spec(Q=[[1, 0], [0, 0]]))
    assert m.rationals("weights")[1] == (Fraction(1, 2), Fraction(1, 2))
    assert m.rounded("output", 3)[1][0] == pytest.approx(1.5)


def test_stable_softmax_and_a_mask():
    data = compute(load_spec({**BASE, "K": [[1, 0], [2, 1]], "mask": "causal", "softmax": "stable"}), digits=6)
    assert data["weights"]["value"][0] == ["1.00000", "0"]
    assert data["scaled"]["value"][0][1] == "-inf"


def test_cross_attention_numbers_keys_from_zero():
    data = compute(load_spec({**BASE, "Q": [[0, 1]], "K": [[1, 0], [1, 1]], "key_tokens": ["a", "b"]}), digits=6)
    assert data["Q_rot"]["value"] == [["0", "1.00000"]]  # query 0 is not turned
    assert data["K_rot"]["value"][1] == ["-0.301169", "1.38177"]  # key 1 is: cos 1 − sin 1, sin 1 + cos 1


def test_check_judges_rotated_rows():
    claims = {
        "claims": {
            "Q_rot": [["1", "0"], ["-0.841", "0.540"]],
            "K_rot[2]": ["-0.301", "1.382"],
            "scores[2][1]": "-0.841",
            "scores[1][2]": "0.540",  # cos 1, forgetting the sin term
            "scores[2][2]": "1",
        }
    }
    report = check(spec(), claims)
    got = {(v.claim.quantity, v.row_label, v.col_label): v.verdict for v in report.results}
    assert got[("Q_rot", "t1", 1)] == "exact"
    assert got[("Q_rot", "t2", 1)] == "rounded"
    assert got[("K_rot", "t2", 2)] == "rounded"
    assert got[("scores", "t2", "t1")] == "rounded"
    assert got[("scores", "t1", "t2")] == "wrong"  # cos 1 − sin 1 = −0.301…
    assert got[("scores", "t2", "t2")] == "exact"  # the same position: not turned against itself


def test_rotated_claims_need_rope():
    with pytest.raises(SpecError, match="claims on Q_rot need rope = true"):
        check(load_spec({k: v for k, v in BASE.items() if k != "rope"}), {"claims": {"Q_rot[1][1]": "1"}})


def test_certify_is_refused():
    with pytest.raises(SpecError, match="--certify does not cover RoPE yet"):
        compute(spec(), certify=True)


@pytest.mark.client
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_rope_documents_pass_katex_and_compile_without_overfull_boxes(katex, latex_each, tmp_path, lang):
    from symattn.derivation.derive import derive
    from symattn.rendering.renderer import render

    documents, math = {}, {}
    for variant in ({}, {"expand": "all", "rounding": "hand"}):
        for backward in (None, True):
            label = f"{variant or 'focus'} backward={backward}"
            derivation = derive(
                load_spec(builtin.example_path("rope", lang)).with_options(**variant, backward=backward)
            )
            math[label] = katex(render(derivation, "markdown"))
            documents[label] = render(derivation, "latex", standalone=True)
    assert math == {label: [] for label in documents}
    boxes = latex_each(documents, "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    assert boxes == {label: [] for label in documents}


@pytest.mark.parametrize(
    "keys, theta",
    [
        ({}, r"\theta_t = 10000^{-2(t-1)/d_k} = 10000^{-(t-1)},\ t = 1"),  # d_k = 2: one pair
        (
            {"Q": [[1, 0, 0, 1], [0, 1, 1, 0]], "K": [[1, 0, 0, 1], [1, 1, 0, 0]], "rope_base": 100},
            r"\theta_t = 100^{-2(t-1)/d_k} = 100^{-(t-1)/2},\ t = 1, 2",
        ),
    ],
)
def test_the_angle_s_rule_says_d_k_then_puts_its_value_in(keys, theta):
    from symattn.derivation.derive import derive
    from symattn.rendering.renderer import render

    text = render(derive(spec(lang="en", **keys)), "markdown")
    assert f"with ${theta}$ (base" in text
    assert "-2(t-1)/2}" not in text and "-2(t-1)/4}" not in text


def test_a_rotated_matrix_shows_its_exact_numbers_in_their_own_form():
    from symattn.derivation.derive import derive
    from symattn.rendering.renderer import render

    text = render(derive(load_spec(builtin.example_path("rope", "en"))), "markdown")
    # position 0 is not turned: its exact 1 and 0 are written as in Q, not padded to the rounded entries' decimals
    assert r"Q'\approx\begin{bmatrix}1 & 1 & 0 & 1 \\ 0.540 & 0.990 & 0.841 & 1.010 \\ " in text
    assert r"Q'K'^\top&:\ [1.009,\ 1.583,\ 2.540,\ 3]" in text


def test_exact_numbers_keep_their_own_shortest_form_beside_rounded_ones():
    from decimal import Decimal

    from symattn.exact.num import Num
    from symattn.exact.rounding import exact_width
    from symattn.rendering.numbers import tex_number

    def row(*xs):
        return tuple(Num(Decimal(v), exact) for v, exact in xs)

    mixed = (row(("1", True), ("0.540", False), ("0.0625", True)), row(("-2", True), ("0.000", True), ("2.500", True)))
    assert [[tex_number(x) for x in r] for r in exact_width(mixed)] == [
        ["1", "0.540", "0.0625"],
        ["-2", "0", "2.5"],
    ]
    # exact numbers only: one width, the fewest decimals that show each of them
    exact = (row(("1", True), ("0.500", True)), row(("-2", True), ("0.25", True)))
    assert [[tex_number(x) for x in r] for r in exact_width(exact)] == [["1.00", "0.50"], ["-2.00", "0.25"]]
