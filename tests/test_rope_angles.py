"""RoPE with chosen angles (issue 32): rope_frequencies in radians, degrees or multiples of π, given
rope_cos/rope_sin tables, the claims on them, exactness in Q(ζ_N), and agreement with torch float64."""

import math
import re
from fractions import Fraction

import pytest

from symattn.checking.checker import check
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.errors import LimitError, SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render, render_report
from symattn.variants.rope import parse_frequency
from symattn.variants.turns import Cyclotomic

BASE = {
    "tokens": ["a", "b", "c"],
    "Q": [["1", "0"], ["0", "1"], ["1", "1"]],
    "K": [["1", "0"], ["1", "1"], ["0", "1"]],
    "V": [["1"], ["2"], ["3"]],
    "rope": True,
}
TABLES = {"rope_cos": [["1"], ["0.8"], ["0.5"]], "rope_sin": [["0"], ["0.6"], ["0.8"]]}


@pytest.mark.parametrize(
    "text, value, of_pi",
    [
        ("30deg", Fraction(1, 6), True),
        ("30°", Fraction(1, 6), True),
        ("-1.5deg", Fraction(-1, 120), True),
        ("pi/6", Fraction(1, 6), True),
        ("2pi/3", Fraction(2, 3), True),
        ("2*pi/3", Fraction(2, 3), True),
        ("-π", Fraction(-1), True),
    ],
)
def test_the_angle_grammar(text, value, of_pi):
    f = parse_frequency(text)
    assert f is not None and (f.value, f.of_pi) == (value, of_pi)


@pytest.mark.parametrize("text", ["pi/0", "pi**2", "__import__('os')", "sin(pi)", "30 rad", "0.5"])
def test_anything_else_is_not_an_angle(text):
    assert parse_frequency(text) is None


@pytest.mark.parametrize(
    "change, message",
    [
        ({"rope_frequencies": ["30deg", "0.5"]}, None),
        (
            {"rope_frequencies": ["30deg"], "rope_base": "10"},
            "rope_frequencies: give one of rope_base, rope_frequencies or rope_cos/rope_sin, not rope_base too",
        ),
        (
            {"rope_frequencies": ["0"]},
            'rope_frequencies[1]: a frequency in radians must be > 0, got 0 (or write "0deg")',
        ),
        (
            {"rope_frequencies": ["pi**2"]},
            'rope_frequencies[1]: \'pi**2\' is not an angle this reads: write "30deg", "pi/6" or "2pi/3"',
        ),
        (
            {"rope_frequencies": "30deg"},
            "rope_frequencies: expected a list of 1 frequencies (one per pair), got a string",
        ),
        ({"rope_cos": [["1"]] * 3}, "rope_cos: give rope_sin too: the tables come as a pair"),
        (
            {"rope_cos": [["1"]] * 2, "rope_sin": [["0"]] * 2},
            "rope_cos: expected 3 rows (positions 0 to 2) of 1 (one per pair), got 2×1",
        ),
        (
            {"rope_frequencies": ["30deg"], "alibi_slopes": ["0.5"]},
            "rope_frequencies: angles that are multiples of pi do not combine with ALiBi yet",
        ),
    ],
)
def test_bad_angles_are_one_line(change, message):
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, **change})
    if message is None:  # two heads' worth of pairs needed: d_k = 2 has one pair
        assert str(info.value) == "<dict>: rope_frequencies: expected 1 frequencies, one per pair (d_k/2 = 1), got 2"
    else:
        assert str(info.value) == f"<dict>: {message}"


def test_mixed_units_and_a_field_too_large_are_refused():
    wide = {**BASE, "Q": [["1", "0", "0", "1"]] * 3, "K": [["1", "0", "0", "1"]] * 3}
    with pytest.raises(SpecError) as info:
        load_spec({**wide, "rope_frequencies": ["30deg", "0.5"]})
    assert str(info.value) == (
        "<dict>: rope_frequencies[2]: give every frequency in radians or every one as a multiple of pi, not both"
    )
    with pytest.raises(LimitError) as limit:
        load_spec({**wide, "rope_frequencies": ["pi/997", "pi/991"]})
    assert (
        str(limit.value)
        == "<dict>: rope_frequencies: these angles need the 3952108th roots of unity; the limit is 1440"
    )


def test_rope_keys_need_rope():
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, "rope": False, "rope_frequencies": ["30deg"]})
    assert str(info.value) == "<dict>: rope_frequencies: needs rope = true"


@pytest.mark.parametrize("r", [2, 3, 5, 6, 7, 10, 15, 21, 30])
def test_square_roots_in_the_field_are_the_square_roots(r):
    n = 4 * r
    field = Cyclotomic(n)
    root, den = field.sqrt(r)
    value = sum(c * complex(math.cos(2 * math.pi * k / n), math.sin(2 * math.pi * k / n)) for k, c in enumerate(root))
    assert abs(value / den - math.sqrt(r)) < 1e-9


def test_thirty_degrees_gives_exact_cos_and_sin_and_the_claims_their_verdicts():
    spec = load_spec({**BASE, "rope_frequencies": ["30deg"]})
    data = compute(spec, digits=6)
    assert data["rope_frequency"] == {"exact": ["pi/6"], "value": ["0.523599"]}
    assert data["rope_cos"]["exact"] == [["1"], ["sqrt(3)/2"], ["1/2"]]
    assert data["rope_sin"]["exact"] == [["0"], ["1/2"], ["sqrt(3)/2"]]
    assert data["scores"]["exact"][2] == ["1/2 - sqrt(3)/2", "sqrt(3)", "1"]
    claims = {
        "claims": {
            "rope_frequency[1]": "0.5236",
            "rope_angle[3][1]": "1.047",
            "rope_cos[2][1]": "0.866",
            "rope_cos[3][1]": "0.5",
            "rope_sin[2][1]": "0.5",
            "rope_sin[3][1]": "0.7",
        }
    }
    text = render_report(check(spec, claims), "text")
    rows = [line for line in text.splitlines() if re.match(r"\d ", line)]
    assert rows == [
        "1   RoPE frequency (pair 1)     0.5236    rounded       0.523599 = pi/6",
        "2   RoPE angle (c, pair 1)      1.047     rounded       1.04720 = pi/3",
        "3   RoPE cos (b, pair 1)        0.866     rounded       0.866025 = sqrt(3)/2",
        "4   RoPE cos (c, pair 1)        0.5       exact         0.5 = 1/2",
        "5   RoPE sin (b, pair 1)        0.5       exact         0.5 = 1/2",
        "6   RoPE sin (c, pair 1)        0.7       wrong         0.866025 = sqrt(3)/2",
    ]


def test_a_claimed_angle_is_carried_into_cos_and_the_rotated_query():
    spec = load_spec({**BASE, "rope_frequencies": ["30deg"]})
    claims = {
        "claims": {
            "rope_angle[2][1]": "0.7",
            "rope_cos[2][1]": "0.765",
            "rope_sin[2][1]": "0.644",
            "Q_rot[2][1]": "-0.644",
        }
    }
    got = [v.verdict for v in check(spec, claims).results]
    assert got == ["wrong", "carried", "carried", "carried"]


def test_an_irrational_score_over_an_irrational_scale_is_rational_exactly():
    # 45°, d_k = 2: S = −√2/2, scale = 1/√2, so z = −1/2 exactly; and z_b,a ties z_b,c's negative exactly
    model = build(load_spec({**BASE, "rope_frequencies": ["pi/4"]}))
    assert model.rationals("scaled")[1] == (Fraction(-1, 2), None, Fraction(1, 2))
    assert model.rationals("scaled")[2][1] == Fraction(1)
    assert model.rationals("exp")[0][1] == Fraction(1)  # S = 0: e^0
    assert model.rationals("weights")[0][0] is None


def test_equal_algebraic_scores_tie_exactly():
    # 60°: cos 60° = 1/2; the two keys' scores are equal algebraic numbers, so their weights are too
    raw = {**BASE, "Q": [["1", "0"]] * 3, "K": [["1", "0"], ["1", "0"], ["1", "0"]], "rope_frequencies": ["60deg"]}
    model = build(load_spec(raw))
    assert [len(g) for g in model.groups[1]] == [2, 1]  # keys 1 and 3 (distance 1) tie with row b
    assert model.exact("weights")[1, 0] == model.exact("weights")[1, 2]


def test_tables_are_the_typed_numbers_and_the_document_says_where_they_are_no_rotation():
    spec = load_spec({**BASE, **TABLES, "backward": {}})
    data = compute(spec, digits=6)
    assert data["rope_cos"]["exact"] == [["1"], ["4/5"], ["1/2"]]
    assert data["scores"]["exact"][2] == ["-3/10", "44/25", "89/100"]
    assert "rope_angle" not in data
    text = render(derive(spec), "markdown")
    assert "At position(s) 2 some pair has $\\cos^2\\varphi + \\sin^2\\varphi \\ne 1$: the turn there is not" in text
    with pytest.raises(SpecError) as info:
        check(spec, {"claims": {"rope_angle[2][1]": "0.6"}})
    assert str(info.value) == (
        "<dict>: claims.rope_angle[2][1]: claims on rope_angle need angles, which rope_cos and rope_sin do not "
        "give (they give cos and sin)"
    )


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_example_and_tables_pass_katex_and_tex(katex, latex_each, tmp_path, lang):
    specs = {
        "example": load_spec(builtin.example_path("rope-angles", lang)),
        "example backward": load_spec(builtin.example_path("rope-angles", lang)).with_options(backward=True),
        "tables": load_spec({**BASE, **TABLES, "lang": lang, "backward": {}}),
    }
    derivations = {label: derive(spec) for label, spec in specs.items()}
    assert {label: katex(render(d, "markdown")) for label, d in derivations.items()} == {label: [] for label in specs}
    documents = {label: render(d, "latex", standalone=True) for label, d in derivations.items()}
    assert latex_each(documents, "xelatex" if lang == "zh" else "pdflatex", tmp_path) == {label: [] for label in specs}


def _turn(x, cos, sin, style):
    """x (n × d) turned pair by pair with cos/sin tables (n × d/2), written here independently of symattn."""
    d = x.shape[1]
    out = x.clone()
    pairs = [(t, t + d // 2) for t in range(d // 2)] if style == "half" else [(2 * t, 2 * t + 1) for t in range(d // 2)]
    for t, (a, b) in enumerate(pairs):
        out[:, a] = x[:, a] * cos[:, t] - x[:, b] * sin[:, t]
        out[:, b] = x[:, a] * sin[:, t] + x[:, b] * cos[:, t]
    return out


WIDE = {
    "Q": [["1", "0", "0.5", "2"], ["0", "1", "1", "0"], ["0.9", "0.1", "0.3", "0.3"]],
    "K": [["1", "0.2", "0", "1"], ["0.1", "1", "1", "0"], ["0.8", "0.3", "0.5", "0.5"]],
    "V": [["10", "0"], ["0", "10"], ["1", "1"]],
    "rope": True,
    "backward": {},
}


@pytest.mark.client
@pytest.mark.parametrize(
    "extra",
    [
        {"rope_frequencies": ["0.5", "0.25"]},
        {"rope_frequencies": ["30deg", "pi/4"], "rope_style": "interleaved"},
        {"rope_frequencies": ["10deg", "-2pi/3"], "mask": "causal"},
        {
            "rope_cos": [["1", "1"], ["0.8", "0.5"], ["0.6", "-1"]],
            "rope_sin": [["0", "0"], ["0.6", "0.9"], ["0.8", "0"]],
        },
    ],
)
def test_angles_and_tables_agree_with_torch_float64(extra):
    torch = pytest.importorskip("torch")
    raw = {**WIDE, **extra}
    f64 = torch.float64
    Q, K, V = (torch.tensor([[float(Fraction(x)) for x in row] for row in raw[m]], dtype=f64) for m in "QKV")
    Q.requires_grad_(True)
    K.requires_grad_(True)
    if "rope_cos" in raw:
        cos = torch.tensor([[float(Fraction(x)) for x in row] for row in raw["rope_cos"]], dtype=f64)
        sin = torch.tensor([[float(Fraction(x)) for x in row] for row in raw["rope_sin"]], dtype=f64)
    else:
        theta = []
        for text in raw["rope_frequencies"]:
            f = parse_frequency(text)
            theta.append(float(f.value) * math.pi if f is not None else float(text))
        angles = torch.arange(3, dtype=f64)[:, None] * torch.tensor(theta, dtype=f64)[None, :]
        cos, sin = angles.cos(), angles.sin()
    style = raw.get("rope_style", "half")
    q, k = _turn(Q, cos, sin, style), _turn(K, cos, sin, style)
    out = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], V[None], is_causal="mask" in raw)[0]
    out.sum().backward()
    data = compute(load_spec(raw), digits=17, exact=False)
    for ours, theirs in (
        (data["output"]["value"], out),
        (data["backward"]["dQ"]["value"], Q.grad),
        (data["backward"]["dK"]["value"], K.grad),
    ):
        for row, want in zip(ours, theirs.tolist()):
            for value, w in zip(row, want):
                assert abs(float(value) - w) <= 1e-12 * max(abs(w), 10.0), (value, w)
    for row, want in zip(data["rope_cos"]["value"], cos.tolist()):
        for value, w in zip(row, want):
            assert abs(float(value) - w) <= 1e-15
