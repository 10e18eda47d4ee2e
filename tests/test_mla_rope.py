"""MLA's decoupled RoPE dims and several heads (issue 32): q = [q_nope ; RoPE(q_R)], k = [k_nope ; RoPE(k_R)]
with one k_R shared by the heads, both routes against torch float64, the exact proof that they agree, claims
with error carried forward, the examples' documents, and the one-line refusals."""

import math
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
from symattn.rendering.renderer import render, render_report
from symattn.variants.mla_head import Latent

ONE = {  # d_model 3, d_c 2, d_nope 2, d_r 2, d_v 2
    "X": [["1", "0", "1"], ["0", "1", "1"], ["1", "1", "0"]],
    "W_DKV": [["1", "0"], ["0", "1"], ["0.5", "0.5"]],
    "W_UK": [["1", "0"], ["1", "1"]],
    "W_UV": [["1", "0"], ["0", "2"]],
    "W_Q": [["1", "0"], ["0", "1"], ["0", "0"]],
    "W_QR": [["1", "0"], ["0", "1"], ["0", "0"]],
    "W_KR": [["0", "1"], ["1", "0"], ["0", "0"]],
}
TWO = {  # 2 heads; the query through its own latent (W_DQ, W_UQ), d_r 2, d_v 3 per head
    "X": [["0.5", "-1", "2", "0"], ["1", "0.25", "0", "-0.5"], ["-1", "1", "1", "1"], ["2", "0", "-0.5", "1"]],
    "W_DKV": [["1", "0", "0.5"], ["0", "1", "-1"], ["0.25", "0.5", "0"], ["-0.5", "0", "1"]],
    "W_UK": [["1", "-0.5", "0", "1"], ["0.5", "1", "1", "0"], ["0", "2", "-1", "0.5"]],
    "W_UV": [["1", "0", "2", "0", "1", "0"], ["-1", "0.5", "0", "1", "0", "2"], ["0", "1", "1", "0.5", "-1", "0"]],
    "W_DQ": [["1", "0.5"], ["0", "1"], ["-1", "0"], ["0.5", "0.5"]],
    "W_UQ": [["1", "2", "0", "1"], ["-0.5", "1", "1", "0"]],
    "W_QR": [["1", "0", "0.5", "-1"], ["0", "2", "1", "1"]],
    "W_KR": [["1", "-1"], ["0.5", "0"], ["0", "1"], ["2", "0.5"]],
}
TOKENS3 = ["a", "b", "c"]


def _tensor(rows):
    torch = pytest.importorskip("torch")

    return torch.tensor([[float(Fraction(x)) for x in row] for row in rows], dtype=torch.float64)


def _turn(x, theta):
    """RoPE in the half style (Llama's rotate_half) on every column of x, row i at position i."""
    torch = pytest.importorskip("torch")

    half = x.shape[1] // 2
    angle = torch.arange(x.shape[0], dtype=torch.float64)[:, None] * theta[None, :]
    a, b = x[:, :half], x[:, half:]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], dim=1)


def _torch_routes(table, heads, causal, theta=None):
    """DeepSeek's MLA in torch float64, head by head: (naive output, absorbed output, per-head (q̃, u))."""
    torch = pytest.importorskip("torch")

    X, W_DKV, W_UK, W_UV, W_QR, W_KR = (_tensor(table[k]) for k in ("X", "W_DKV", "W_UK", "W_UV", "W_QR", "W_KR"))
    source = X if "W_Q" in table else X @ _tensor(table["W_DQ"])
    Qn = source @ _tensor(table["W_Q"] if "W_Q" in table else table["W_UQ"])
    QR, c = source @ W_QR, X @ W_DKV
    d_r = W_KR.shape[1]
    if theta is None:
        theta = 10000.0 ** (-2 * torch.arange(d_r // 2, dtype=torch.float64) / d_r)
    KR = _turn(X @ W_KR, theta)  # one turned key part for every head
    n, v = W_UK.shape[1] // heads, W_UV.shape[1] // heads
    naive, absorbed, views = [], [], []
    for h in range(heads):
        Wk, Wv = W_UK[:, h * n : (h + 1) * n], W_UV[:, h * v : (h + 1) * v]
        q_r = _turn(QR[:, h * d_r : (h + 1) * d_r], theta)
        q, k = torch.cat([Qn[:, h * n : (h + 1) * n], q_r], 1), torch.cat([c @ Wk, KR], 1)
        naive.append(torch.nn.functional.scaled_dot_product_attention(q, k, c @ Wv, is_causal=causal))
        q_tilde = Qn[:, h * n : (h + 1) * n] @ Wk.T  # W_UK folded into q_nope only
        z = (q_tilde @ c.T + q_r @ KR.T) / (n + d_r) ** 0.5
        if causal:
            z = z.masked_fill(torch.ones_like(z, dtype=torch.bool).triu(1), float("-inf"))
        u = torch.softmax(z, dim=-1) @ c
        absorbed.append(u @ Wv)
        views.append((q_tilde, u))
    return torch.cat(naive, 1), torch.cat(absorbed, 1), views


def _close(ours, theirs):
    for row, want in zip(ours, theirs.tolist()):
        for value, w in zip(row, want):
            assert abs(float(value) - w) <= 1e-12 * max(abs(w), 10.0), (value, w)


@pytest.mark.client
@pytest.mark.parametrize("route", ["naive", "absorbed"])
def test_decoupled_dims_agree_with_torch_float64(route):
    pytest.importorskip("torch")
    data = compute(load_spec({"tokens": TOKENS3, "mla": ONE, "rope": True, "mla_route": route}), digits=17, exact=False)
    naive, absorbed, [(q_tilde, u)] = _torch_routes(ONE, 1, False)
    _close(data["output"]["value"], naive)
    _close(data["output"]["value"], absorbed)
    _close(data["absorbed_query"]["value"], q_tilde)
    _close(data["latent_output"]["value"], u)
    assert data["routes_agree"] is True
    # the turned columns are the decoupled ones: Q′ keeps q_nope, turns q_R
    assert data["Q"]["exact"] == [["1", "0", "1", "0"], ["0", "1", "0", "1"], ["1", "1", "1", "1"]]
    assert data["K"]["exact"] == [["2", "1/2", "0", "1"], ["2", "3/2", "1", "0"], ["2", "1", "1", "1"]]
    assert data["Q_rot"]["value"][1][:2] == ["0", "1.0000000000000000"]  # the latent columns of Q′ are Q's


@pytest.mark.client
@pytest.mark.parametrize("route", ["naive", "absorbed"])
def test_two_heads_with_decoupled_dims_agree_with_torch_float64(route):
    pytest.importorskip("torch")
    tokens = [f"t{i}" for i in range(4)]
    spec = {"tokens": tokens, "mla": TWO, "heads": 2, "rope": True, "mla_route": route, "mask": "causal"}
    data = compute(load_spec(spec), digits=17, exact=False)
    naive, absorbed, views = _torch_routes(TWO, 2, True)
    _close(data["output"]["value"], naive)
    _close(data["output"]["value"], absorbed)
    for head, (q_tilde, u) in zip(data["heads"], views):
        _close(head["absorbed_query"]["value"], q_tilde)
        _close(head["latent_output"]["value"], u)
        assert head["routes_agree"] is True
    # with W_O: the heads' outputs side by side, then projected
    W_O = [["1", "0"], ["0", "1"], ["0.5", "0"], ["0", "0.5"], ["1", "1"], ["-1", "0"]]
    with_o = compute(load_spec({**spec, "W_O": W_O}), digits=17, exact=False)
    _close(with_o["output"]["value"], naive @ _tensor(W_O))


@pytest.mark.client
def test_decoupled_dims_by_thirty_degrees_agree_with_torch_and_stay_exact():
    torch = pytest.importorskip("torch")
    spec = load_spec({"tokens": TOKENS3, "mla": ONE, "rope": True, "rope_frequencies": ["30deg"]})
    data = compute(spec, digits=17)
    naive, absorbed, _ = _torch_routes(ONE, 1, False, torch.tensor([math.pi / 6], dtype=torch.float64))
    _close(data["output"]["value"], naive)
    _close(data["output"]["value"], absorbed)
    # cos 30° = √3/2 exactly; the latent column of Q′ stays as typed
    assert data["rope_cos"]["exact"][1] == ["sqrt(3)/2"]
    assert data["Q_rot"]["exact"][1] == ["0", "1", "-1/2", "sqrt(3)/2"]
    assert data["scores"]["exact"][0][0] == "2"


@pytest.mark.client
def test_decoupled_dims_interleaved_and_by_tables_agree_with_torch_float64():
    torch = pytest.importorskip("torch")

    pytest.importorskip("torch")
    wide = {**ONE, "W_QR": [["1", "0", "0.5", "1"], ["0", "1", "1", "0"], ["0", "0", "0", "2"]]}
    wide["W_KR"] = [["0", "1", "1", "0"], ["1", "0", "0", "0.5"], ["0", "0", "1", "1"]]  # d_r = 4: 2 pairs
    data = compute(load_spec({"tokens": TOKENS3, "mla": wide, "rope": True, "rope_style": "interleaved"}), digits=17)
    # interleaved pairs (2t, 2t + 1) of the decoupled dims are the half style's after a permutation of them
    perm = [0, 2, 1, 3]
    permuted = {**wide, **{k: [[row[c] for c in perm] for row in wide[k]] for k in ("W_QR", "W_KR")}}
    naive, absorbed, _ = _torch_routes(permuted, 1, False)
    _close(data["output"]["value"], naive)
    _close(data["output"]["value"], absorbed)
    # given cos/sin tables (a 3-4-5 turn, not an angle of the base): every score rational
    tables = {"rope_cos": [["1"], ["0.6"], ["-0.28"]], "rope_sin": [["0"], ["0.8"], ["0.96"]]}
    data = compute(load_spec({"tokens": TOKENS3, "mla": ONE, "rope": True, **tables}), digits=17)
    angle = torch.tensor([math.atan2(0.8, 0.6)], dtype=torch.float64)  # cos 2φ = −0.28, sin 2φ = 0.96
    naive, absorbed, _ = _torch_routes(ONE, 1, False, angle)
    _close(data["output"]["value"], naive)
    _close(data["output"]["value"], absorbed)
    assert data["scores"]["exact"][2] == ["159/50", "33/10", "5"]  # 2.5 + 0.68, 3.5 − 0.2, 3 + 2
    assert data["routes_agree"] is True


def test_the_routes_are_exactly_equal_and_the_proof_can_fail():
    naive, absorbed = (
        build(load_spec({"tokens": TOKENS3, "mla": ONE, "rope": True, "mla_route": r})) for r in ("naive", "absorbed")
    )
    assert naive.exact("output") == absorbed.exact("output")
    spec = load_spec({"tokens": TOKENS3, "mla": ONE, "rope": True, "mla_route": "absorbed"})
    view = Latent(build(spec), spec.setting("mla"))
    assert (view.scores_agree, view.values_agree, view.routes_agree) == (True, True, True)
    texts = {name: [[x.text for x in row] for row in getattr(spec, name)] for name in ("Q", "K", "V")}
    for changed in (  # a head whose K differs from [K_nope ; K_R] in a latent column, then in a decoupled one
        [["2", "0.5", "0", "1"], ["2", "1.5", "1", "0"], ["2", "2", "1", "1"]],
        [["2", "0.5", "0", "1"], ["2", "1.5", "1", "0"], ["2", "1", "1", "0"]],
    ):
        other = load_spec({"tokens": TOKENS3, **texts, "K": changed, "rope": True})
        assert Latent(build(other), spec.setting("mla")).scores_agree is False


def test_the_heads_share_the_latent_and_the_decoupled_key():
    spec = load_spec({"tokens": [f"t{i}" for i in range(4)], "mla": TWO, "heads": 2, "rope": True})
    setting = spec.setting("mla")
    assert (setting.heads, setting.d_nope, setting.d_r, setting.d_v, setting.turned) == (2, 2, 2, 3, (2, 2))
    first, second = (spec.head(h).setting("mla") for h in (0, 1))
    assert (first.head, second.head, first.of_heads, second.heads) == (0, 1, 2, 1)
    assert first.latent == second.latent and first.W_KR == second.W_KR
    assert [[x.text for x in row] for row in second.W_UK] == [["0", "1"], ["1", "0"], ["-1", "0.5"]]
    assert [[x.text for x in row] for row in second.W_QR] == [["0.5", "-1"], ["1", "1"]]
    # each head's K is [its K_nope ; the one K_R = X W_KR], Q is [its Q_nope ; its Q_R]
    K_R = [row[2:4] for row in spec.K]
    assert K_R == [row[6:8] for row in spec.K]
    assert [[x.value for x in row] for row in K_R][0] == [0, Fraction(3, 2)]  # X's row [0.5, -1, 2, 0] by W_KR


def heads_without_rope(lang):
    """mla-heads as it was before it took the decoupled dims: two heads, no RoPE (what the tests of its columns,
    numbers and claims were written against)."""
    import tomllib

    data = tomllib.loads(builtin.example_path("mla-heads", lang).read_text(encoding="utf-8"))
    mla = {k: v for k, v in data["mla"].items() if k not in ("W_QR", "W_KR")}
    return {**{k: v for k, v in data.items() if k != "rope"}, "mla": mla}


def test_compute_writes_each_heads_latent_and_whether_its_routes_agree():
    data = compute(load_spec(heads_without_rope("en")), digits=4)
    assert data["Q"]["exact"][2] == ["1", "1", "1", "1"]
    assert data["K"]["exact"][0] == ["2", "1/2", "1/2", "3/2"]
    assert [h["absorbed_query"]["exact"][2] for h in data["heads"]] == [["1", "2"], ["1", "1"]]
    assert [h["latent"]["exact"][0] for h in data["heads"]] == [["3/2", "1/2"], ["3/2", "1/2"]]
    assert [h["routes_agree"] for h in data["heads"]] == [True, True]
    assert data["mla_route"] == "absorbed"


def test_claims_right_wrong_and_carried_forward_through_the_decoupled_dims():
    spec = load_spec(builtin.example_path("mla-rope", "en"))
    claims = {
        "claims": {
            "K[2][3]": "2",  # a slip: k_R of cat is X W_KR = [1, 0]
            "K_rot[2][3]": "1.081",  # their 2 turned by 1 rad: 2 cos 1 − 0 sin 1 ≈ 1.0806, carried
            "Q[3][1]": "5",  # a slip in q_nope
            "absorbed_query[3][2]": "6",  # their Q row [5, 1] times W_UK's row [1, 1]: carried
            "Q_rot[3][1]": "5",  # a latent column is not turned: their 5, carried
            "K[1][4]": "1",
            "Q_rot[3][3]": "-1.325",
        }
    }
    got = [(v.claim.quantity, v.row_label, v.col_label, v.verdict) for v in check(spec, claims).results]
    assert got == [
        ("Q", "sat", 1, "wrong"),
        ("K", "the", 4, "exact"),
        ("K", "cat", 3, "wrong"),
        ("Q_rot", "sat", 1, "carried"),
        ("Q_rot", "sat", 3, "rounded"),
        ("K_rot", "cat", 3, "carried"),
        ("absorbed_query", "sat", 2, "carried"),
    ]


def test_claims_on_the_second_head_carry_its_own_columns():
    spec = load_spec(heads_without_rope("en"))
    claims = {
        "claims": {
            "Q[3][3]": "3",  # head 2's q of sat is X W_Q's columns 3-4, [1, 1]; a slip
            "h2.absorbed_query[3][1]": "3",  # their [3, 1] by W_UK_2's row [0, 1] is 1, and so is the truth
            "h2.absorbed_query[3][2]": "3",  # their [3, 1] by W_UK_2's row [1, 0]: 3, carried
            "h1.absorbed_query[3][2]": "2",  # head 1's own block: [1, 1] by [1, 1]
            "h2.latent[1][1]": "1.5",  # one latent for both heads
        }
    }
    got = [(v.claim.quantity, v.claim.head, v.col_label, v.verdict) for v in check(spec, claims).results]
    assert got == [
        ("latent", None, 1, "exact"),  # one c_KV: h2.latent is the plain latent, before any head's numbers
        ("Q", None, 3, "wrong"),
        ("absorbed_query", 0, 2, "exact"),
        ("absorbed_query", 1, 1, "wrong"),
        ("absorbed_query", 1, 2, "carried"),
    ]


@pytest.mark.parametrize(
    "name, claims, want",
    [
        (  # q̃ = [1, 3] (a slip: [1, 2]): their scores q̃ · c_j = [3, 5, 4]; u = [0.5, 1.5]: their o = u W_UV
            "mla",
            {
                "absorbed_query[3]": ["1", "3"],
                "scores[3][2]": "5",
                "latent_output[3]": ["0.5", "1.5"],
                "output[3][2]": "3",
            },
            ["exact", "wrong", "carried", "wrong", "wrong", "carried"],
        ),
        (  # with the decoupled dims, their latent part plus the turned q′_R · k′_R: 3 + 0.493, 4 + 2
            "mla-rope",
            {"absorbed_query[3]": ["1", "3"], "scores[3][1]": "3.493", "scores[3][3]": "6"},
            ["exact", "wrong", "carried", "carried"],
        ),
        (  # head 2: q̃ = [2, 1] (a slip: [1, 1]) by its latent row [1.5, 0.5]; u = [2, 1] by W_UV_2
            "mla-heads",
            {
                "h2.absorbed_query[3]": ["2", "1"],
                "h2.scores[3][1]": "3.5",
                "h2.latent_output[3]": ["2", "1"],
                "h2.output[3][2]": "2",
            },
            ["wrong", "exact", "carried", "wrong", "exact", "carried"],
        ),
    ],
)
def test_the_absorbed_route_carries_scores_from_their_q_tilde_and_outputs_from_their_u(name, claims, want):
    spec = load_spec(heads_without_rope("en") if name == "mla-heads" else builtin.example_path(name, "en"))
    assert [v.verdict for v in check(spec, {"claims": claims}).results] == want


@pytest.mark.parametrize(
    "lang, phrases",
    [
        (
            "en",
            (
                "each head also has $d_r = 2$ decoupled dims, a query part $Q_R = X W_{QR}$",
                "The scale is $1/\\sqrt{d_{nope} + d_r} = 1/\\sqrt{4}$ of the whole query-key width",
                "Only the decoupled columns 3–4 of each head turn",
                "\\theta_t = 10000^{-2(t-1)/d_r} = 10000^{-(t-1)},\\ t = 1",
                "Both routes give the same output, exactly: the latent parts of the scores are equal rationals",
            ),
        ),
        (
            "zh",
            (
                "所以每个头还有 $d_r = 2$ 个解耦维度",
                "缩放是整个查询–键宽度的 $1/\\sqrt{d_{nope} + d_r} = 1/\\sqrt{4}$",
                "每个头只有解耦的列 3–4 被旋转",
                "两条路线的输出完全相同。分数的潜在部分满足",
            ),
        ),
    ],
)
def test_the_example_shows_the_decoupled_dims_and_states_the_identity(lang, phrases):
    text = render(derive(load_spec(builtin.example_path("mla-rope", lang))), "markdown")
    for phrase in phrases:
        assert text.count(phrase) == 1, phrase
    # the focus row: q̃ = q_nope W_UKᵀ and the latent part of its scores
    assert (
        "\\tilde{q} = \\begin{bmatrix}1 & 1\\end{bmatrix} W_{UK}^{\\top} =\\begin{bmatrix}1 & 2\\end{bmatrix},"
        "\\qquad \\tilde{q}\\, c_{KV}^{\\top} = \\begin{bmatrix}2.5 & 3.5 & 3.0\\end{bmatrix}" in text
    )


SIX = ",\\allowbreak ".join(["W_{DKV}", "W_{UK}", "W_{UV}", "W_Q", "W_{QR}", "W_{KR}"])  # may break in a narrow column


@pytest.mark.parametrize(
    "name, lang, row",
    [
        ("mla-rope", "en", f"| $X$ and ${SIX}$ written by hand |"),
        ("mla-rope", "zh", f"| $X$ 和 ${SIX}$ 手写给出 |"),
        ("mla", "en", "| $X$ and $W_{DKV}, W_{UK}, W_{UV}, W_Q$ written by hand |"),  # no decoupled dims
    ],
)
def test_the_toy_table_lists_every_matrix_of_the_mla_table(name, lang, row):
    text = render(derive(load_spec(builtin.example_path(name, lang))), "markdown")
    assert text.count(row) == 1


def test_the_heads_example_says_which_head_it_is():
    text = render(derive(load_spec(heads_without_rope("en"))), "markdown")
    assert text.count("This is head 2 of 2: it takes its own block of columns of $W_{UK}, W_{UV}, W_Q$") == 1
    assert "2 heads, each with its own $d_{head} = 2$ columns of Q and K (made in the next step)" in text


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name, route", [("mla-rope", "naive"), ("mla-rope", "absorbed"), ("mla-heads", "absorbed")])
def test_the_examples_pass_katex_and_tex(katex, latex, tmp_path, lang, name, route):
    import tomllib

    data = tomllib.loads(builtin.example_path(name, lang).read_text(encoding="utf-8"))
    spec = load_spec({**data, "mla_route": route})
    assert katex(render(derive(spec), "markdown")) == []
    latex(render(derive(spec), "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_two_heads_with_decoupled_dims_pass_katex_and_tex(katex, latex, tmp_path, lang):
    # wider numbers: the absorbed route's q̃ and its scores stack when they do not fit one line
    W_O = [["1", "0"], ["0", "1"], ["0.5", "0"], ["0", "0.5"], ["1", "1"], ["-1", "0"]]
    tokens = [f"t{i}" for i in range(4)]
    spec = load_spec({"tokens": tokens, "mla": TWO, "heads": 2, "rope": True, "mla_route": "absorbed", "W_O": W_O})
    spec = spec.with_options(lang=lang)
    text = render(derive(spec), "markdown")
    assert katex(text) == []
    assert text.count("\\begin{gathered}\\tilde{q} = ") == 2  # one per head
    latex(render(derive(spec), "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_report_on_decoupled_claims_passes_katex_and_tex(katex, latex, tmp_path, lang):
    claims = {"K[2][3]": "2", "K_rot[2][3]": "1.081", "absorbed_query[3][2]": "3", "Q[3][3]": "2"}
    report = check(load_spec(builtin.example_path("mla-rope", lang)), {"claims": claims})
    assert [v.verdict for v in report.results] == ["wrong", "wrong", "carried", "wrong"]
    assert katex(render_report(report, "markdown")) == []
    latex(render_report(report, "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


def _with(**changes):
    return {"tokens": TOKENS3, "rope": True, "mla": {**ONE, **changes}}


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"tokens": TOKENS3, "rope": True, "mla": {k: v for k, v in ONE.items() if k != "W_KR"}},
            "mla.W_KR: missing (the decoupled dims need W_QR and W_KR together)",
        ),
        (
            {"tokens": TOKENS3, "mla": ONE},
            "mla.W_QR: the decoupled dims (W_QR, W_KR) are the ones RoPE turns: set rope = true",
        ),
        (
            _with(W_KR=[["1", "0", "1"]] * 3, W_QR=[["1", "0", "1"]] * 3),
            "mla.W_KR: 3 columns (d_r): RoPE turns pairs of dimensions, so d_r must be even",
        ),
        (
            _with(W_QR=[["1", "0", "1", "0"]] * 3),
            "mla.W_QR: shape mismatch: W_KR is 3×2 and W_QR is 3×4; W_QR needs the same columns as W_KR (d_r)",
        ),
        (
            {**_with(W_UK=[["1", "0", "1"], ["1", "1", "0"]], W_Q=[["1", "0", "1"]] * 3), "heads": 2},
            "mla.W_UK: 3 columns do not split into heads = 2 blocks of one width",
        ),
        (
            _with(W_KR=[["1", "0"]] * 2),
            "mla.W_KR: shape mismatch: X is 3×3 and W_KR is 2×2; W_KR needs one row per column of X (d_model)",
        ),
        (
            {**_with(), "heads": "two"},
            "heads: expected an integer from 1 to 16, got 'two'",
        ),
        (
            {"tokens": TOKENS3, "rope": True, "mla": {k: v for k, v in ONE.items() if k not in ("W_QR", "W_KR")}},
            "rope: with MLA, RoPE turns only the decoupled dims: give mla.W_QR and mla.W_KR",
        ),
        ({"tokens": TOKENS3, "mla": ONE, "qk_norm": True}, "qk_norm: MLA does not combine with QK-norm yet"),
    ],
)
def test_what_is_refused_is_one_line(data, message):
    with pytest.raises(SpecError) as info:
        load_spec(data)
    assert str(info.value) == f"<dict>: {message}"
    assert "\n" not in str(info.value)


def test_the_two_heads_need_heads_times_d_r_columns_of_w_qr():
    table = {**TWO, "W_QR": [["1", "0"], ["0", "2"]]}
    with pytest.raises(SpecError) as info:
        load_spec({"tokens": [f"t{i}" for i in range(4)], "mla": table, "heads": 2, "rope": True})
    assert str(info.value) == (
        "<dict>: mla.W_QR: shape mismatch: W_KR is 4×2 and W_QR is 2×2; W_QR needs heads × d_r = 4 columns"
    )


def test_the_heads_example_turns_each_heads_decoupled_dims_and_its_backward_proves_the_zeros():
    import tomllib

    data = tomllib.loads(builtin.example_path("mla-heads", "en").read_text(encoding="utf-8"))
    forward = compute(load_spec(data), digits=4)
    assert [h["routes_agree"] for h in forward["heads"]] == [True, True]
    # "sat" (X row [1, 1, 0]): q_nope = X W_Q and q_R = X W_QR, [1, 1] for each head, side by side per head
    assert forward["Q"]["exact"][2] == ["1"] * 8
    # and c = [1, 1]: k_nope = c W_UK = [2, 1 | 1, 1], with the one k_R = X W_KR = [1, 1] in each head
    assert forward["K"]["exact"][2] == ["2", "1", "1", "1", "1", "1", "1", "1"]
    text = render(derive(load_spec(data)), "markdown")
    assert text.count("Only the decoupled columns 3–4 of each head turn") == 2
    # two heads of turned scores: each zero of dQ is proved rational (the proof took a minute before issue 32's fix)
    dQ = compute(load_spec({**data, "backward": {}}), digits=4)["backward"]["dQ"]["value"]
    assert dQ == [
        ["0", "0.1007", "0.06239", "-0.01382", "0", "0", "0", "0"],
        ["0", "0.06652", "0.01924", "-0.04385", "0", "0", "0", "0"],
        ["0", "0.05443", "-0.02095", "-0.02830", "0", "0", "0", "0"],
    ]
