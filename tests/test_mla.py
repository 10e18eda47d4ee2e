"""MLA (issue 32): Q, K, V made exactly from an [mla] table, the naive and the absorbed routes against torch
float64, the exact proof that they give one output, claims with error carried forward, the example's
documents, and the one-line refusals."""

import re
from fractions import Fraction

import pytest

from symattn.checking.checker import check
from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.exact.factory import build
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render, render_report
from symattn.variants.mla_head import Latent

TABLE = {
    "X": [["1", "0", "1"], ["0", "1", "1"], ["1", "1", "0"]],
    "W_DKV": [["1", "0"], ["0", "1"], ["0.5", "0.5"]],
    "W_UK": [["1", "0"], ["1", "1"]],
    "W_UV": [["1", "0"], ["0", "2"]],
    "W_Q": [["1", "0"], ["0", "1"], ["0", "0"]],
}
BASE = {"tokens": ["a", "b", "c"], "mla": TABLE}
WIDE = {  # d_model 4, d_c 3, d_k 2, d_v 3, the query through its own latent (W_DQ, W_UQ)
    "X": [["0.5", "-1", "2", "0"], ["1", "0.25", "0", "-0.5"], ["-1", "1", "1", "1"], ["2", "0", "-0.5", "1"]],
    "W_DKV": [["1", "0", "0.5"], ["0", "1", "-1"], ["0.25", "0.5", "0"], ["-0.5", "0", "1"]],
    "W_UK": [["1", "-0.5"], ["0.5", "1"], ["0", "2"]],
    "W_UV": [["1", "0", "2"], ["-1", "0.5", "0"], ["0", "1", "1"]],
    "W_DQ": [["1", "0.5"], ["0", "1"], ["-1", "0"], ["0.5", "0.5"]],
    "W_UQ": [["1", "2"], ["-0.5", "1"]],
}


def _tensor(rows):
    torch = pytest.importorskip("torch")

    return torch.tensor([[float(Fraction(x)) for x in row] for row in rows], dtype=torch.float64)


def _torch_routes(table, causal):
    """Both routes in torch float64: (c_KV, q̃, u, naive output, absorbed output, K, V)."""
    torch = pytest.importorskip("torch")

    X, W_DKV, W_UK, W_UV = (_tensor(table[k]) for k in ("X", "W_DKV", "W_UK", "W_UV"))
    Q = X @ _tensor(table["W_Q"]) if "W_Q" in table else (X @ _tensor(table["W_DQ"])) @ _tensor(table["W_UQ"])
    c = X @ W_DKV
    K, V = c @ W_UK, c @ W_UV
    naive = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=causal)
    absorbed_q = Q @ W_UK.T  # W_UK folded into the query
    z = absorbed_q @ c.T / (W_UK.shape[1] ** 0.5)  # 1/√(d_k + d_r), d_r = 0
    if causal:
        z = z.masked_fill(torch.ones_like(z, dtype=torch.bool).triu(1), float("-inf"))
    u = torch.softmax(z, dim=-1) @ c
    return c, absorbed_q, u, naive, u @ W_UV, K, V


@pytest.mark.client
@pytest.mark.parametrize(
    "table, extra",
    [(TABLE, {}), (TABLE, {"mla_route": "absorbed"}), (WIDE, {"mask": "causal", "softmax": "stable"})],
)
def test_both_routes_agree_with_torch_float64(table, extra):
    pytest.importorskip("torch")
    tokens = [f"t{i}" for i in range(len(table["X"]))]
    data = compute(load_spec({"tokens": tokens, "mla": table, **extra}), digits=17, exact=False)
    c, absorbed_q, u, naive, absorbed, K, V = _torch_routes(table, "mask" in extra)
    pairs = [
        (data["latent"]["value"], c),
        (data["absorbed_query"]["value"], absorbed_q),
        (data["latent_output"]["value"], u),
        (data["output"]["value"], naive),
        (data["output"]["value"], absorbed),
    ]
    for ours, theirs in pairs:
        for row, want in zip(ours, theirs.tolist()):
            for value, w in zip(row, want):
                assert abs(float(value) - w) <= 1e-12 * max(abs(w), 10.0), (value, w)
    assert data["K"]["exact"] == [[str(Fraction(x).limit_denominator(10**6)) for x in r] for r in K.tolist()]
    assert data["V"]["exact"] == [[str(Fraction(x).limit_denominator(10**6)) for x in r] for r in V.tolist()]
    assert data["routes_agree"] is True


def test_the_routes_give_the_same_exact_output_and_the_proof_can_fail():
    naive, absorbed = (build(load_spec({**BASE, "mla_route": r})) for r in ("naive", "absorbed"))
    assert naive.exact("output") == absorbed.exact("output")
    spec = load_spec({**BASE, "mla_route": "absorbed"})
    view = Latent(build(spec), spec.setting("mla"))
    assert (view.scores_agree, view.routes_agree) == (True, True)
    # u W_UV expands to P V on the closed forms: u is P c_KV, exactly
    assert str(view.exact("latent_output")[0, 0]) == "1"  # row a's scores are all 1: P = 1/3 each, u = mean(c_KV)
    assert view.rationals("latent_output")[0] == (Fraction(1), Fraction(1))
    # the same setting against a head whose V is not c_KV W_UV: the proof says no
    texts = {name: [[x.text for x in row] for row in getattr(spec, name)] for name in ("Q", "K")}
    other = load_spec({"tokens": BASE["tokens"], **texts, "V": [["1", "0"], ["0", "1"], ["1", "1"]]})
    assert Latent(build(other), spec.setting("mla")).routes_agree is False


def test_compute_writes_the_latent_the_made_matrices_and_the_absorbed_query():
    data = compute(load_spec(builtin.example_path("mla", "en")), digits=4)
    assert data["Q"]["exact"] == [["1", "0"], ["0", "1"], ["1", "1"]]
    assert data["K"]["exact"] == [["2", "1/2"], ["2", "3/2"], ["2", "1"]]
    assert data["V"]["exact"] == [["3/2", "1"], ["1/2", "3"], ["1", "2"]]
    assert data["latent"]["exact"] == [["3/2", "1/2"], ["1/2", "3/2"], ["1", "1"]]
    assert data["absorbed_query"]["exact"] == [["1", "1"], ["0", "1"], ["1", "2"]]
    assert data["latent_output"]["value"][2] == ["0.8845", "1.115"]
    assert data["output"]["value"][2] == ["0.8845", "2.231"]
    assert (data["mla_route"], data["routes_agree"]) == ("absorbed", True)


def test_claims_right_wrong_and_carried_forward():
    spec = load_spec(builtin.example_path("mla", "en"))
    claims = {
        "claims": {
            "latent[1][1]": "1.4",  # 1.5 exactly, from the inputs: no rounding to slip
            "latent[3]": ["1", "1"],
            "K[1][1]": "1.9",  # their 1.4 + 0.5: carried
            "K[2][1]": "7",
            "Q[3][1]": "5",
            "absorbed_query[3][2]": "6",  # their Q row [5, 1] times W_UK's row [1, 1]: carried
            "latent_output[3]": ["0.885", "1.115"],
            "latent_output[2][2]": "5",
        }
    }
    got = [(v.claim.quantity, v.row_label, v.col_label, v.verdict) for v in check(spec, claims).results]
    assert got == [
        ("latent", "the", 1, "wrong"),  # c_KV first: K and V are made from it
        ("latent", "sat", 1, "exact"),
        ("latent", "sat", 2, "exact"),
        ("Q", "sat", 1, "wrong"),
        ("K", "the", 1, "carried"),
        ("K", "cat", 1, "wrong"),
        ("absorbed_query", "sat", 2, "carried"),
        ("latent_output", "cat", 2, "wrong"),
        ("latent_output", "sat", 1, "rounded"),
        ("latent_output", "sat", 2, "rounded"),
    ]


def test_wrong_claims_are_explained_from_the_latent(capsys, tmp_path):
    path = tmp_path / "claims.toml"
    text = builtin.example_path("mla", "en").read_text(encoding="utf-8")
    claims = '"K[2][1]" = "7"\n"latent_output[2][2]" = "5"\n"latent[1][1]" = "1.4"\n'
    path.write_text(text + "\n[claims]\n" + claims, encoding="utf-8")
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "  key K (cat, column 1): 7 — wrong\n    0.5×1 + 1.5×1 = 2; correctly rounded: 2\n" in out
    assert (
        "  MLA latent c_KV (the, column 1): 1.4 — wrong\n    1×1 + 0×0 + 1×0.5 = 1.5; correctly rounded: 1.5\n" in out
    )
    assert (
        "  MLA latent output u = P c_KV (cat, column 2): 5 — wrong\n"
        "    0.224606×0.5 + 0.455527×1.5 + 0.319866×1 ≈ 1.11546; correctly rounded: 1\n"
    ) in out


@pytest.mark.parametrize(
    "lang, heading", [("en", "## Step 0: the latent $c_{KV}$ (MLA)"), ("zh", "## 步骤 0：潜在向量 $c_{KV}$（MLA）")]
)
def test_the_example_shows_both_routes_and_states_the_identity(lang, heading):
    text = render(derive(load_spec(builtin.example_path("mla", lang))), "markdown")
    assert heading in text
    assert (
        "\\tilde{q} = \\begin{bmatrix}1 & 1\\end{bmatrix} W_{UK}^{\\top} =\\begin{bmatrix}1 & 2\\end{bmatrix}" in text
    )
    assert "c_{KV} = X W_{DKV} = \\begin{bmatrix}1.5 & 0.5 \\\\ 0.5 & 1.5 \\\\ 1.0 & 1.0\\end{bmatrix}" in text
    assert "u \\approx \\begin{bmatrix}0.885 & 1.115\\end{bmatrix}" in text
    agree = {"en": "Both routes give the same output, exactly", "zh": "两条路线的输出完全相同"}[lang]
    assert text.count(agree) == 1


def test_the_naive_route_shows_no_absorbed_step():
    text = render(derive(load_spec(BASE)), "markdown")
    assert "The naive route up-projects the latent" in text and "The absorbed route's output" not in text


def test_example_writes_the_spec(capsys):
    assert main(["example", "--name", "mla", "--lang", "en"]) == 0
    assert capsys.readouterr().out == builtin.example_path("mla", "en").read_text(encoding="utf-8")


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("route", ["naive", "absorbed"])
def test_the_example_passes_katex_and_tex(katex, latex, tmp_path, lang, route):
    spec = load_spec({**_example(lang), "mla_route": route})
    assert katex(render(derive(spec), "markdown")) == []
    latex(render(derive(spec), "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []


def _example(lang):
    import tomllib

    return tomllib.loads(builtin.example_path("mla", lang).read_text(encoding="utf-8"))


def _with(**changes):
    return {**BASE, "mla": {**TABLE, **changes}}


@pytest.mark.parametrize(
    "data, message",
    [
        ({**BASE, "mla": "X"}, "mla: expected a table of X, W_DKV, W_UK, W_UV and W_Q, got 'X'"),
        (
            _with(W_QK=[["1"]]),
            "mla.W_QK: unknown key; expected one of X, W_DKV, W_UK, W_UV, W_Q, W_DQ, W_UQ, W_QR, W_KR",
        ),
        (
            _with(W_KR=[["1"]]),
            "mla.W_QR: missing (the decoupled dims need W_QR and W_KR together)",
        ),
        (
            {**BASE, "mla": {k: v for k, v in TABLE.items() if k != "W_UV"}},
            "mla.W_UV: missing ([mla] needs X, W_DKV, W_UK, W_UV and W_Q)",
        ),
        (_with(W_DQ=[["1"]]), "mla.W_Q: give W_Q or W_DQ with W_UQ, not both"),
        (
            {**BASE, "mla": {**{k: v for k, v in TABLE.items() if k != "W_Q"}, "W_DQ": [["1"], ["0"], ["1"]]}},
            "mla.W_UQ: missing (the query path: W_Q, or W_DQ with W_UQ)",
        ),
        (_with(W_UK=[["1", "x"], ["1", "1"]]), "mla.W_UK[1][2]: not a number: 'x'"),
        (
            _with(W_DKV=[["1", "0"], ["0", "1"]]),
            "mla.W_DKV: shape mismatch: X is 3×3 and W_DKV is 2×2; W_DKV needs one row per column of X (d_model)",
        ),
        (
            _with(W_UV=[["1", "0"]]),
            "mla.W_UV: shape mismatch: W_DKV is 3×2 and W_UV is 1×2; W_UV needs one row per column of W_DKV (d_c)",
        ),
        (
            _with(W_Q=[["1"], ["0"], ["1"]]),
            "mla.W_Q: shape mismatch: W_UK is 2×2 and W_Q is 3×1; W_Q needs the same columns as W_UK (d_k)",
        ),
        ({**BASE, "mla_route": "fast"}, "mla_route: expected one of 'naive', 'absorbed', got 'fast'"),
        (
            {"tokens": ["a"], "Q": [["1"]], "K": [["1"]], "V": [["1"]], "mla_route": "naive"},
            "mla_route: needs an [mla] table",
        ),
        ({**BASE, "Q": [["1", "0"]] * 3}, "Q: give Q, K, V, or X with W_Q, W_K, W_V, or an [mla] table, not both"),
        (
            {**_with(W_UK=[["1", "0", "1"], ["1", "1", "0"]], W_Q=[["1", "0", "1"]] * 3), "heads": 2},
            "mla.W_UK: 3 columns do not split into heads = 2 blocks of one width",
        ),
        ({**BASE, "rope": True}, "rope: with MLA, RoPE turns only the decoupled dims: give mla.W_QR and mla.W_KR"),
        ({**BASE, "qk_norm": True}, "qk_norm: MLA does not combine with QK-norm yet"),
        ({**BASE, "inputs": "rounded"}, 'inputs: inputs = "rounded" is not supported with MLA yet'),
        (_with(X=[["1", "0", "1"]] * 65), "mla.X: 65 rows; at most 64 are supported"),
        (_with(W_DKV=[["1"] * 65] * 3), "mla.W_DKV: more than 64 columns (the limit)"),
    ],
)
def test_what_is_refused_is_one_line(data, message):
    with pytest.raises(SpecError) as info:
        load_spec(data)
    assert str(info.value) == f"<dict>: {message}"
    assert "\n" not in str(info.value)


@pytest.mark.client
def test_compare_takes_the_absorbed_route_in_float32_as_a_kernel(tmp_path, capsys):
    # the made Q, K, V are exact: compare's float64 path holds a kernel's absorbed route to them
    import json

    pytest.importorskip("torch")
    _, _, _, _, absorbed, _, _ = _torch_routes(TABLE, False)
    result = tmp_path / "o.json"
    result.write_text(json.dumps(absorbed.float().tolist()), encoding="utf-8")
    spec = tmp_path / "mla.toml"
    spec.write_text(builtin.example_path("mla", "en").read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["compare", str(spec), str(result), "--dtype", "float32", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["entries"] == report["summary"]["correctly_rounded"] == 6
    assert report["engine"]["path"] == "float64"


@pytest.mark.client
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_report_on_mla_claims_passes_katex_and_tex(katex, latex, tmp_path, lang):
    claims = {"latent[1][1]": "1.4", "absorbed_query[3][2]": "3", "latent_output[2][2]": "5", "K[2][1]": "7"}
    report = check(load_spec(builtin.example_path("mla", lang)), {"claims": claims})
    assert [v.verdict for v in report.results] == ["wrong", "wrong", "wrong", "wrong"]
    assert katex(render_report(report, "markdown")) == []
    latex(render_report(report, "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\[hv]box", log) == []
