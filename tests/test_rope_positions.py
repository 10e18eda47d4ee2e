"""RoPE's angles at given positions (issue 32): rope_angle, rope_cos and rope_sin are the queries' (a row per
query, at its position), rope_key_angle, rope_key_cos and rope_key_sin the keys' (a row per key); compute, the
derivation, check (a claimed cos and sin carry into Q′, a key's into K′) and torch float64 agree on them."""

import math
import re
from fractions import Fraction

import pytest

from symattn.checking.checker import check
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render, render_report
from symattn.variants.rope import parse_frequency
from tests.test_rope_angles import _turn  # x turned pair by pair, written independently of symattn

# two new queries at positions 4 and 5 against six keys at 0..5 (the four before them cached)
RAW = {
    "tokens": ["e", "f"],
    "key_tokens": ["a", "b", "c", "d", "e", "f"],
    "positions": [4, 5],
    "mask": "causal",
    "rope": True,
    "rope_base": 10000,
    "Q": [[1, 0, 0.5, -1], [0, 1, 1, 0]],
    "K": [[1, 0, 2, 0], [0, 2, 0, 1], [2, 0, 1, 1], [1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 0, 1]],
    "V": [[1, 0], [0, 1], [1, 1], [2, 0], [0, 2], [1, -1]],
}


def test_compute_gives_each_query_its_positions_angles_and_each_key_its_own():
    data = compute(load_spec(RAW), digits=6)
    assert data["rope_angle"] == {
        "exact": [["4", "1/25"], ["5", "1/20"]],
        "value": [["4.00000", "0.0400000"], ["5.00000", "0.0500000"]],
    }
    assert data["rope_cos"]["exact"] == [["cos(4)", "cos(1/25)"], ["cos(5)", "cos(1/20)"]]
    assert data["rope_sin"]["value"] == [["-0.756802", "0.0399893"], ["-0.958924", "0.0499792"]]
    assert data["rope_key_angle"]["exact"] == [
        ["0", "0"],
        ["1", "1/100"],
        ["2", "1/50"],
        ["3", "3/100"],
        ["4", "1/25"],
        ["5", "1/20"],
    ]
    assert data["rope_key_cos"]["exact"][:2] == [["1", "1"], ["cos(1)", "cos(1/100)"]]
    assert data["rope_key_sin"]["value"][5] == ["-0.958924", "0.0499792"]
    # Q′ turns by the queries' angles, K′ by the keys'
    assert data["Q_rot"]["exact"][0] == ["cos(4) - sin(4)/2", "sin(1/25)", "sin(4) + cos(4)/2", "-cos(1/25)"]
    assert data["K_rot"]["exact"][4] == ["-sin(4)", "-sin(1/25) + cos(1/25)", "cos(4)", "sin(1/25) + cos(1/25)"]
    keys = list(data)
    assert keys[keys.index("rope_frequency") :][:8] == [
        "rope_frequency",
        "rope_angle",
        "rope_cos",
        "rope_sin",
        "rope_key_angle",
        "rope_key_cos",
        "rope_key_sin",
        "Q_rot",
    ]


def test_without_positions_there_are_no_key_tables_and_claims_on_them_are_refused():
    raw = {k: v for k, v in RAW.items() if k not in ("positions", "key_tokens")}
    spec = load_spec({**raw, "tokens": list("abcdef"), "Q": RAW["K"]})
    data = compute(spec, digits=6)
    assert "rope_key_cos" not in data
    assert data["rope_angle"]["exact"][5] == ["5", "1/20"]  # query i at position i, as before
    with pytest.raises(SpecError) as info:
        check(spec, {"claims": {"rope_key_cos[2][1]": "0.54"}})
    assert str(info.value) == (
        "<dict>: claims.rope_key_cos[2][1]: claims on rope_key_cos need positions or key_positions (without them "
        "key j sits at position j: claim rope_angle[j] and so on)"
    )


def _rows(report: str) -> list[str]:
    return [line for line in report.splitlines() if re.match(r"\d+ ", line)]


def test_claims_at_positions_get_their_verdicts_and_carry_forward():
    claims = {
        "claims": {
            "rope_angle[1][1]": "4",
            "rope_cos[1][1]": "-0.60",
            "rope_sin[1][1]": "-0.80",
            "Q_rot[1][1]": "-0.2",
            "Q_rot[1][3]": "-1.10",
            "rope_key_cos[5][1]": "-0.70",
            "rope_key_sin[5][1]": "-0.70",
            "K_rot[5][1]": "0.70",
            "K_rot[5][3]": "-0.70",
            "rope_key_angle[6][1]": "5.1",
            "rope_key_cos[6][1]": "0.378",
            "K_rot[6][1]": "0.378",
        }
    }
    assert _rows(render_report(check(load_spec(RAW), claims), "text")) == [
        "1   RoPE angle (e, pair 1)            4         exact         4 = 4",
        "2   RoPE cos (e, pair 1)              -0.60     wrong         -0.653644 = cos(4)",
        "3   RoPE sin (e, pair 1)              -0.80     wrong         -0.756802 = sin(4)",
        "4   RoPE angle of the key (f, pair 1) 5.1       wrong         5 = 5",
        "5   RoPE cos of the key (e, pair 1)   -0.70     wrong         -0.653644 = cos(4)",
        "6   RoPE cos of the key (f, pair 1)   0.378     carried       0.283662 = cos(5)",
        "7   RoPE sin of the key (e, pair 1)   -0.70     wrong         -0.756802 = sin(4)",
        "8   rotated query Q' (e, column 1)    -0.2      carried       -0.275242 = cos(4) - sin(4)/2",
        "9   rotated query Q' (e, column 3)    -1.10     carried       -1.08362 = sin(4) + cos(4)/2",
        "10  rotated key K' (e, column 1)      0.70      carried       0.756802 = -sin(4)",
        "11  rotated key K' (e, column 3)      -0.70     carried       -0.653644 = cos(4)",
        "12  rotated key K' (f, column 1)      0.378     carried       0.283662 = cos(5)",
    ]


def test_a_querys_claimed_cos_does_not_turn_a_key_at_the_same_position():
    # query e and key e both sit at position 4; K′ takes the keys' own cos and sin (exact where unclaimed)
    claims = {"claims": {"rope_cos[1][1]": "-0.60", "rope_sin[1][1]": "-0.80", "K_rot[5][3]": "-0.60"}}
    report = render_report(check(load_spec(RAW), claims), "text")
    assert _rows(report)[2] == "3   rotated key K' (e, column 3) -0.60     wrong         -0.653644 = cos(4)"
    assert "    0×(-0.756802) + 1×(-0.653644) ≈ -0.653644; correctly rounded: -0.65" in report.splitlines()


def test_a_wrong_angle_is_explained_by_its_position():
    claims = {"claims": {"rope_angle[2][2]": "0.5", "rope_key_angle[6][1]": "6"}}
    lines = render_report(check(load_spec(RAW), claims), "text").splitlines()
    assert "    5×0.01 = 0.05; correctly rounded: 0.1" in lines  # query f at position 5, pair 2
    assert "    5×1 = 5; correctly rounded: 5" in lines


def test_multiples_of_pi_at_positions_stay_exact():
    raw = {k: v for k, v in RAW.items() if k != "rope_base"}
    data = compute(load_spec({**raw, "rope_frequencies": ["30deg", "pi/2"]}), digits=6)
    assert data["rope_angle"]["exact"] == [["2*pi/3", "2*pi"], ["5*pi/6", "5*pi/2"]]
    assert data["rope_cos"]["exact"] == [["-1/2", "1"], ["-sqrt(3)/2", "0"]]
    assert data["rope_key_cos"]["exact"][1:4] == [["sqrt(3)/2", "0"], ["1/2", "-1"], ["0", "0"]]
    assert data["scores"]["exact"][1] == ["-sqrt(3) - 1/2", "2", "-3", "-1 - sqrt(3)/2", "sqrt(3)/2 + 1", "0"]
    # claimed angles carry into cos, cos and sin into Q′, as without positions
    claims = {"claims": {"rope_angle[1][1]": "1.8", "rope_cos[1][1]": "-0.227", "rope_key_angle[2][1]": "0.50"}}
    got = [r.verdict for r in check(load_spec({**raw, "rope_frequencies": ["30deg", "pi/2"]}), claims).results]
    assert got == ["wrong", "carried", "wrong"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_derivation_shows_the_keys_angles_at_their_positions(lang):
    text = render(derive(load_spec({**RAW, "lang": lang})), "markdown")
    said = {
        "en": [
            "Here the spec gives the positions: each query turns by its own position and each key by its own, and a "
            "token at position 0 is not turned.",
            "The keys stand at positions 0, 1, 2, 3, 4, 5, each turned by its own angles $p_j\\,\\theta_t$; their "
            "$\\cos\\varphi$ and $\\sin\\varphi$, a row per key and a column per pair:",
            "The row of “f” is at position 5; each of its pairs, by hand:",
        ],
        "zh": [
            "这里规格给出了位置：每个查询按自己的位置旋转，每个键也按自己的位置旋转，位于位置 0 的词元不转。",
            "各键位于位置 0, 1, 2, 3, 4, 5，各自按自己的角度 $p_j\\,\\theta_t$ 旋转；它们的 $\\cos\\varphi$ 与 "
            "$\\sin\\varphi$（每个键一行，每对一列）：",
            "「f」那一行在位置 5；它的每一对维度手算如下：",
        ],
    }[lang]
    for sentence in said:
        assert sentence in text
    assert "\\sin\\varphi^{K}\\approx\\begin{bmatrix}0 & 0 \\\\ 0.841 & 0.010 \\\\ 0.909 & 0.020" in text
    assert "&t = 1:\\ \\varphi = 5 \\cdot \\theta_{1} = 5,\\quad \\cos\\varphi \\approx 0.284" in text
    assert "Positions count from 0" not in text and "位置从 0 数起" not in text


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("extra", [{}, {"backward": {}, "rope_base": None, "rope_frequencies": ["30deg", "45deg"]}])
def test_positions_with_rope_pass_katex_and_tex(katex, latex, tmp_path, lang, extra):
    raw = {k: v for k, v in {**RAW, **extra, "lang": lang}.items() if v is not None}
    doc = derive(load_spec(raw))
    assert katex(render(doc, "markdown")) == []
    latex(render(doc, "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


@pytest.mark.client
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"rope_base": 100, "rope_style": "interleaved", "key_positions": [0, 1, 2, 3, 9, 11], "positions": [9, 11]},
        {"rope_base": None, "rope_frequencies": ["0.5", "0.25"], "positions": [7, 5], "mask": None},
        {"rope_base": None, "rope_frequencies": ["30deg", "-2pi/3"], "rope_style": "interleaved"},
    ],
)
def test_positions_agree_with_torch_float64(extra):
    torch = pytest.importorskip("torch")
    raw = {k: v for k, v in {**RAW, **extra, "backward": {}}.items() if v is not None}
    f64 = torch.float64
    Q, K, V = (torch.tensor([[float(x) for x in row] for row in raw[m]], dtype=f64) for m in "QKV")
    Q.requires_grad_(True)
    K.requires_grad_(True)
    d = Q.shape[1]
    if "rope_frequencies" in raw:
        theta = []
        for text in raw["rope_frequencies"]:
            f = parse_frequency(text)
            theta.append(float(f.value) * math.pi if f is not None else float(Fraction(text)))
        thetas = torch.tensor(theta, dtype=f64)
    else:
        thetas = float(raw["rope_base"]) ** (-2 * torch.arange(d // 2, dtype=f64) / d)
    q_pos = torch.tensor(raw["positions"], dtype=f64)
    k_pos = torch.tensor(raw.get("key_positions", range(len(raw["K"]))), dtype=f64)
    q_angles, k_angles = q_pos[:, None] * thetas[None, :], k_pos[:, None] * thetas[None, :]
    style = raw.get("rope_style", "half")
    q, k = _turn(Q, q_angles.cos(), q_angles.sin(), style), _turn(K, k_angles.cos(), k_angles.sin(), style)
    z = q @ k.T / math.sqrt(d)
    if "mask" in raw:
        z = z.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    out = torch.softmax(z, dim=-1) @ V
    out.sum().backward()
    data = compute(load_spec(raw), digits=17, exact=False)
    for ours, theirs in (
        (data["rope_angle"]["value"], q_angles),
        (data["rope_cos"]["value"], q_angles.cos()),
        (data["rope_key_sin"]["value"], k_angles.sin()),
        (data["Q_rot"]["value"], q),
        (data["K_rot"]["value"], k),
        (data["output"]["value"], out),
        (data["backward"]["dQ"]["value"], Q.grad),
        (data["backward"]["dK"]["value"], K.grad),
    ):
        for row, want in zip(ours, theirs.tolist(), strict=True):
            for value, w in zip(row, want, strict=True):
                assert abs(float(value) - w) <= 1e-12 * max(abs(w), 10.0), (value, w)
