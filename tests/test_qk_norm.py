"""QK-norm (issue 32): RMSNorm of each head's Q and K rows, exact with square roots, checked against torch
float64 (forward and backward), its claims, its refusals and its documents."""

import re
from fractions import Fraction

import pytest

from symattn.checking.checker import check
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

BASE = {
    "tokens": ["a", "b", "c"],
    "Q": [["1", "0"], ["0", "2"], ["3", "4"]],
    "K": [["1", "1"], ["2", "0"], ["0", "3"]],
    "V": [["1", "0"], ["0", "1"], ["1", "1"]],
    "qk_norm": True,
}


def _rms(x, w, eps):
    torch = pytest.importorskip("torch")

    return x * w / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


@pytest.mark.client
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"qk_norm_eps": "0.01", "q_norm_weight": ["0.5", "2"], "k_norm_weight": ["1.5", "-1"]},
        {"mask": "causal", "softmax": "stable", "qk_norm_eps": "1/3"},
        {
            "Q": [["1", "0", "2", "1"]] * 3,
            "K": [["0.5", "1", "0", "2"], ["1", "1", "1", "1"], ["2", "0", "0", "1"]],
            "V": [["1", "2"]] * 3,
            "heads": 2,
            "q_norm_weight": ["1", "0.5"],
        },
    ],
)
def test_qk_norm_agrees_with_torch_float64(extra):
    torch = pytest.importorskip("torch")
    raw = {**BASE, **extra, "backward": {}}
    f64 = torch.float64
    Q, K, V = (torch.tensor([[float(Fraction(x)) for x in row] for row in raw[m]], dtype=f64) for m in "QKV")
    Q.requires_grad_(True)
    K.requires_grad_(True)
    eps = float(Fraction(raw.get("qk_norm_eps", "1/1000000")))
    heads = raw.get("heads", 1)
    d = Q.shape[1] // heads
    wq = torch.tensor([float(Fraction(x)) for x in raw.get("q_norm_weight", ["1"] * d)], dtype=f64)
    wk = torch.tensor([float(Fraction(x)) for x in raw.get("k_norm_weight", ["1"] * d)], dtype=f64)
    split = lambda X: X.reshape(X.shape[0], heads, -1).transpose(0, 1)  # noqa: E731 - (heads, n, d)
    q, k, v = _rms(split(Q), wq, eps), _rms(split(K), wk, eps), split(V)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal="mask" in raw)
    out = out.transpose(0, 1).reshape(Q.shape[0], -1)
    out.sum().backward()
    data = compute(load_spec(raw), digits=17, exact=False)
    back = data["backward"]
    pairs = [(data["output"]["value"], out), (back["dQ"]["value"], Q.grad), (back["dK"]["value"], K.grad)]
    if heads == 1:
        pairs.append((data["Q_norm"]["value"], q[0]))
    for ours, theirs in pairs:
        for row, want in zip(ours, theirs.tolist()):
            for value, w in zip(row, want):
                assert abs(float(value) - w) <= 1e-12 * max(abs(w), 10.0), (value, w)


def test_scores_are_decided_exactly_without_enclosures():
    # eps = 1/2: row a of Q is [1, 0], mean 1/2 + 1/2 = 1, so σ = 1 and q' = [1, 0] is rational;
    # K row b = [2, 0]: σ² = 2.5, so S_ab = 2/√2.5 = √(8/5): irrational, and after 1/√2, √(4/5) still is
    model = build(load_spec({**BASE, "qk_norm_eps": "1/2"}))
    assert model.rationals("Q_norm")[0] == (Fraction(1), Fraction(0))
    assert model.rationals("scores")[0] == (None, None, Fraction(0))
    assert str(model.scores[0, 1]) == "2*sqrt(10)/5"
    # equal z decided by their squares: rows a and b of K' against the same query
    tie = build(load_spec({**BASE, "K": [["1", "0"], ["0", "1"], ["-1", "0"]], "Q": [["1", "1"]] * 3}))
    assert [len(g) for g in tie.groups[0]] == [2, 1]
    assert tie.exact("weights")[0, 0] == tie.exact("weights")[0, 1]


def test_an_irrational_score_can_be_rational_after_the_scale():
    # eps = 1: q = [2, 0] has σ² = 3, k = [1, 3] has σ² = 6, so S = 2/√18 = √2/3 and z = S/√2 = 1/3 exactly
    model = build(load_spec({**BASE, "Q": [["2", "0"]] * 3, "K": [["1", "3"]] * 3, "qk_norm_eps": "1"}))
    assert model.rationals("scores")[0] == (None, None, None)
    assert model.rationals("scaled")[0] == (Fraction(1, 3),) * 3
    assert model.rationals("weights")[0] == (Fraction(1, 3),) * 3


def test_claims_on_the_normalized_rows_and_the_scores_carried_from_them():
    spec = load_spec(builtin.example_path("qk-norm", "en"))
    claims = {
        "claims": {
            "Q_norm[3]": ["0.849", "1.131"],
            "K_norm[1][1]": "0.7",
            "scores[3][1]": "1.73",
            "scores[3][2]": "1.2",
        }
    }
    got = [(v.claim.quantity, v.row_label, v.col_label, v.verdict) for v in check(spec, claims).results]
    assert got == [
        ("Q_norm", "tea", 1, "rounded"),
        ("Q_norm", "tea", 2, "rounded"),
        ("K_norm", "I", 1, "wrong"),
        ("scores", "tea", "I", "carried"),
        ("scores", "tea", "like", "rounded"),
    ]


def test_a_claimed_sigma_carries_into_its_normalized_row_with_the_learned_scale():
    # q of "tea" = [3, 4] with w = [2, 1]: σ = √(12.5 + 10⁻⁶) ≈ 3.536; from a σ of 5, q̂ = (3·2/5, 4·1/5) = (1.2, 0.8)
    spec = load_spec({**_example_dict(), "q_norm_weight": ["2", "1"]})
    claims = {"claims": {"Q_rms[3]": "5.000", "Q_norm[3]": ["1.200", "0.800"], "K_rms": ["1.000", "1.414", "2.121"]}}
    got = [(v.claim.quantity, v.row_label, v.col_label, v.verdict) for v in check(spec, claims).results]
    assert got == [
        ("Q_rms", "tea", None, "wrong"),
        ("K_rms", "I", None, "rounded"),
        ("K_rms", "like", None, "rounded"),
        ("K_rms", "tea", None, "rounded"),
        ("Q_norm", "tea", 1, "carried"),
        ("Q_norm", "tea", 2, "carried"),
    ]
    assert compute(spec)["Q_norm"]["exact"][2] == ["2000*sqrt(154321)/462963", "4000*sqrt(154321)/1388889"]
    # compute writes the σ that check judges, one per row
    shown = compute(spec, digits=4)
    assert shown["Q_rms"] == {
        "exact": ["sqrt(500001)/1000", "sqrt(2000001)/1000", "9*sqrt(154321)/1000"],
        "value": ["0.7071", "1.414", "3.536"],
    }
    assert shown["K_rms"]["value"] == ["1.000", "1.414", "2.121"]


def _example_dict() -> dict:
    from symattn.input.files import read_table

    return dict(read_table(builtin.example_path("qk-norm", "en")))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"qk_norm": False, "qk_norm_eps": "0.1"}, "qk_norm_eps: needs qk_norm = true"),
        ({"qk_norm_eps": "0"}, "qk_norm_eps: 0 is outside what QK-norm takes: a number from 1/1000000000000 to 1"),
        ({"q_norm_weight": ["1"]}, "q_norm_weight: expected 2 weights (one per column of a head), got 1"),
        ({"rope": True}, "qk_norm: QK-norm does not combine with RoPE yet"),
        ({"alibi_slopes": ["0.5"]}, "qk_norm: QK-norm does not combine with ALiBi yet"),
        (
            {"Q": [["a", "0"], ["0", "1"], ["1", "1"]]},
            "qk_norm: QK-norm needs numbers in Q and K (symbols are not normalized)",
        ),
    ],
)
def test_what_is_refused_is_one_line(change, message):
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, **change})
    assert str(info.value) == f"<dict>: {message}"


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_example_passes_katex_and_tex(katex, latex, tmp_path, lang):
    spec = load_spec(builtin.example_path("qk-norm", lang)).with_options(backward=True)
    assert katex(render(derive(spec), "markdown")) == []
    latex(render(derive(spec), "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


def test_the_backward_pass_goes_through_rmsnorm_to_dq_and_dk():
    # the step after dQ' and dK': the focus query's row and one key's, s, 1/σ and 1/(d σ³), then dQ and dK
    spec = load_spec(builtin.example_path("qk-norm", "en")).with_options(backward=True)
    text = render(derive(spec), "markdown")
    assert (
        "## QK-norm backward: through RMSNorm to $dQ$ and $dK$\n\n"
        "The scores were dot products of the normalized rows, so the step above gave the gradients of $Q'$ and "
        "$K'$. RMSNorm takes each row $x$ to $x' = x \\odot w / \\sigma$, and its gradient $g$ goes back to $x$ as "
        "$dx_t = \\dfrac{w_t\\, g_t}{\\sigma} - x_t\\, \\dfrac{s}{d_k\\, \\sigma^3}$, where "
        "$s = \\sum_j w_j\\, g_j\\, x_j$ sums over the row's columns. No weights are given, so $w = 1$.\n\n"
        "The query of “tea”, with $g$ its row of $dQ'$:\n\n$$\n\\begin{aligned}\n"
        "s &= \\textstyle\\sum_j (w_j\\, dQ'_j)\\, q_j \\approx \\left(-0.179\\right) \\times 3 + 0.121 \\times 4 "
        "\\approx -0.052 \\\\\n"
        "\\tfrac{1}{\\sigma} &\\approx 0.283,\\quad \\tfrac{1}{d_k\\,\\sigma^3} \\approx 0.011 \\\\\n"
        "dQ_{1} &= \\tfrac{w_1\\, dQ'_1}{\\sigma} - q_1 \\tfrac{s}{d_k\\,\\sigma^3} = \\left(-0.179\\right) \\times "
        "0.283 - 3 \\times \\left(-0.052\\right) \\times 0.011 \\approx -0.049 \\\\\n"
    ) in text
    # the rows of dQ and dK the step ends with are compute's, rounded
    got = compute(spec, digits=3)["backward"]
    assert got["dQ"]["value"][2] == ["-0.0489", "0.0367"] and "$$\ndQ \\approx \\begin{bmatrix}" in text
    zh = render(derive(load_spec(builtin.example_path("qk-norm", "zh")).with_options(backward=True)), "markdown")
    assert "## QK-norm 的反向：经过 RMSNorm 得到 $dQ$ 与 $dK$\n" in zh
    assert "「茶」的查询向量，$g$ 是它在 $dQ'$ 中的那一行：\n" in zh


def test_by_hand_the_rmsnorm_lines_work_from_the_shown_numbers():
    # weights w: each w·g is exact from the shown dQ′, s is their sum with x, and dx from the shown 1/σ
    spec = load_spec(
        {
            "Q": [["3", "4"], ["1", "0"]],
            "K": [["1", "1"], ["0", "2"]],
            "V": [["1", "0"], ["5", "2"]],
            "qk_norm": True,
            "q_norm_weight": ["1", "0.5"],
            "k_norm_weight": ["2", "1"],
            "rounding": "hand",
        }
    ).with_options(backward=True)
    step = next(s for s in derive(spec).steps if s.kind == "backward_norm")
    q = step.query
    # each gradient at the gradients' 3 decimals (its digits piled up to 8 places before): 0.092115 ≈ 0.092
    assert [str(x.value) for x in q.wg] == ["-0.89", "0.092"]
    assert (str(q.dot.value), str(q.inv.value), str(q.inv3.value)) == ("-0.890", "1.414", "1.414")
    assert [format(x.value, "f") for x in q.out] == ["0", "0.130"]  # 0.092 × 1.414 = 0.130088
