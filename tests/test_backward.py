"""The backward pass: gradients agree with PyTorch autograd, exact identities hold, documents compile,
and the checker marks a hand-worked backward example with planted slips."""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.checking.checker import check
from symattn.checking.report import report_data
from symattn.cli.commands import main
from symattn.derivation.derive import derive
from symattn.derivation.intermediates import compute
from symattn.exact.backward import _SymPy
from symattn.exact.exactness import Exps, rational
from symattn.exact.factory import build
from symattn.exact.gradients import _head_gradients, gradients, jacobian
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec
from symattn.rendering.renderer import render

from .conftest import SEED
from .strategies import matrix, multihead_base

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EN = {**SEED, "tokens": ["cat", "eats", "it"], "lang": "en"}


def grads(raw, *names, head=None):
    data = compute(load_spec(raw), digits=17, exact=False)["backward"]
    data = data if head is None else data["heads"][head]
    return [data[name]["value"] for name in names]


# --- exact values -------------------------------------------------------------------------


def test_the_seed_gradients_with_loss_sum():
    dV, dA, dZ, dQ, dK = grads({**SEED, "backward": {"loss": "sum"}}, "dV", "dA", "dZ", "dQ", "dK")
    assert dV[0] == ["1.0806150050196699", "1.0806150050196699"]
    assert dA == [["10.000000000000000", "10.000000000000000", "2.0000000000000000"]] * 3  # Σ_k V_jk, exactly
    assert dZ[2] == ["1.1501287461059147", "0.68638673186979963", "-1.8365154779757143"]
    assert dQ[2] == ["-0.17709133171331085", "0.25841771527421818"]
    assert dK[0] == ["1.5864227610311050", "0.49437108959131778"]


def test_masked_entries_have_exactly_zero_gradient():
    model = build(load_spec({**SEED, "mask": "causal", "backward": {"loss": "sum"}}))
    for name in ("dZ", "dS"):
        rationals = model.rationals(name)
        assert [rationals[0][1], rationals[0][2], rationals[1][2]] == [0, 0, 0]
        assert model.significant(name, 5)[0][1:] == (0, 0)


def test_a_constant_dA_row_gives_an_exactly_zero_dZ_row():
    # every row of V sums to 10, so with L = Σ O every dA entry is 10 and the softmax passes nothing back
    model = build(load_spec({**SEED, "V": [[10, 0], [0, 10], [5, 5]], "backward": {"loss": "sum"}}))
    assert model.rationals("dZ") == ((0, 0, 0),) * 3
    assert model.rationals("dQ") == ((0, 0),) * 3
    assert model.significant("dK", 3) == ((0, 0),) * 3


def test_a_flat_row_is_rational():
    # equal scores: the weights are 1/3 and every gradient of that row is rational
    model = build(
        load_spec(
            {
                "Q": [[0, 0]],
                "K": [[1, 2], [3, 4], [5, 6]],
                "V": [[1], [2], [6]],
                "key_tokens": ["a", "b", "c"],
                "backward": {"loss": "sum"},
            }
        )
    )
    assert model.rationals("dZ") == ((Fraction(-2, 3), Fraction(-1, 3), 1),)
    assert model.rationals("dV") == ((Fraction(1, 3),), (Fraction(1, 3),), (Fraction(1, 3),))


def test_identical_rows_of_opposite_gradient_cancel_exactly():
    # two identical queries with opposite dO: dV is exactly 0, though each term is irrational
    model = build(
        load_spec(
            {"Q": [[1, 0], [1, 0]], "K": [[1, 0], [0, 1]], "V": [[1], [2]], "backward": {"grad_output": [[1], [-1]]}}
        )
    )
    assert model.rationals("dV") == ((0,), (0,))
    assert model.rationals("dK") == ((0, 0), (0, 0))
    assert model.rationals("dZ")[0][0] is None


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"backward": 3}, "<dict>: backward: expected a table, got a number"),
        ({"backward": {"loss": "l1"}}, "<dict>: backward.loss: expected one of 'sum', 'mse', 'given', got 'l1'"),
        ({"backward": {"loss": "mse"}}, '<dict>: backward.target: missing (loss = "mse" needs the target T)'),
        (
            {"backward": {"grad_output": [[1, 2]]}},
            "<dict>: backward.grad_output: shape mismatch: the output O is 3×2 and grad_output is 1×2; grad_output needs "
            "the shape of O",
        ),
        (
            {"backward": {"loss": "sum", "grad_output": [[1, 1]] * 3}},
            '<dict>: backward.grad_output: give loss = "sum" or grad_output, not both',
        ),
        ({"backward": {"loss": "mse", "target": [[1, "x"]] * 3}}, None),
        (
            {"backward": {"lose": "sum"}},
            "<dict>: backward.lose: unknown key; expected one of backward.grad_output, "
            "backward.loss, backward.target (did you mean 'backward.loss'?)",
        ),
    ],
)
def test_bad_backward_tables(raw, message):
    with pytest.raises(SpecError) as err:
        load_spec({**SEED, **raw})
    if message is not None:
        assert str(err.value) == message
    else:
        assert str(err.value).startswith("<dict>: backward.target[1][2]: ")


def test_backward_flag_turns_on_loss_sum_and_keeps_the_spec_loss():
    spec = load_spec(SEED).with_options(backward=True)
    assert spec.backward.loss == "sum"
    mse = load_spec({**SEED, "backward": {"loss": "mse", "target": [[0, 0]] * 3}})
    assert mse.with_options(backward=True).backward.loss == "mse"


# --- exact identities, proved with SymPy -----------------------------------------------------


def _symbolic_row(m):
    z = sympy.symbols(f"z1:{m + 1}", real=True)
    total = sympy.Add(*[sympy.exp(x) for x in z])
    return z, [[sympy.exp(x) / total for x in z]]


@pytest.mark.parametrize("m", [2, 3, 4])
def test_rows_of_dZ_sum_to_zero_and_the_jacobian_equals_the_compact_form(m):
    z, A = _symbolic_row(m)
    dO = [list(sympy.symbols(f"g1:{3}"))]
    V = [list(sympy.symbols(f"v{j}_1:{3}")) for j in range(m)]
    alg = _SymPy(sympy.Integer(1))
    out = _head_gradients(alg, A, V, [[sympy.Integer(1)] for _ in range(m)], [[sympy.Integer(1)]], dO, lambda n, x: x)
    assert sympy.simplify(sympy.Add(*out["dZ"][0])) == 0
    J = jacobian(alg, A)
    for k in range(m):
        jacobian_form = sympy.Add(*[J[j][k] * out["dA"][0][j] for j in range(m)])
        assert sympy.simplify(jacobian_form - out["dZ"][0][k]) == 0
        assert sympy.simplify(sympy.diff(A[0][0], z[k]) - J[0][k]) == 0  # ∂α_1/∂z_k, the formula itself


@pytest.mark.parametrize("m", [2, 3])
def test_adding_a_constant_to_a_row_of_scores_changes_no_gradient(m):
    z, A = _symbolic_row(m)
    c = sympy.Symbol("c", real=True)
    shifted = [[x.subs({v: v + c for v in z}, simultaneous=True) for x in A[0]]]
    dO = [[sympy.Symbol("g")]]
    V = [[sympy.Symbol(f"v{j}")] for j in range(m)]
    K = [[sympy.Symbol(f"k{j}")] for j in range(m)]
    alg = _SymPy(sympy.Symbol("s", positive=True))
    for name, value in _head_gradients(alg, A, V, K, [[sympy.Symbol("q")]], dO, lambda n, x: x).items():
        other = _head_gradients(alg, shifted, V, K, [[sympy.Symbol("q")]], dO, lambda n, x: x)[name]
        for a, b in zip(sum(value, []), sum(other, [])):
            assert sympy.simplify(a - b) == 0, name


def test_the_exactness_algebra_proves_rows_of_dZ_sum_to_zero():
    spec = load_spec({**SEED, "backward": {"loss": "mse", "target": [[1, 2], [3, 4], [5, 6]]}})
    model = build(spec)
    alg = Exps(model.scale)
    out = gradients(alg, model.inputs, [alg.weights(model.forward)])
    for row in out["dZ"]:
        total = row[0] + row[1] + row[2]
        assert total.parts == {} and rational(total) == 0


# --- PyTorch autograd, float64 ------------------------------------------------------------------

torch_available = True
try:
    import torch
except ImportError:  # pragma: no cover - CI installs torch==2.13.0
    torch_available = False

needs_torch = pytest.mark.skipif(not torch_available, reason="PyTorch is not installed (CI installs torch==2.13.0)")


def tensor(rows, grad=False):
    return torch.tensor([[float(x) for x in row] for row in rows], dtype=torch.float64, requires_grad=grad)


def close(ours, theirs, scale):
    theirs = theirs.tolist()
    assert len(ours) == len(theirs) and len(ours[0]) == len(theirs[0])
    for row, expected in zip(ours, theirs):
        for value, want in zip(row, expected):
            assert abs(float(value) - want) <= 1e-12 * max(abs(want), scale), (value, want)


@st.composite
def sdpa_inputs(draw):
    n_q, n_k = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d, dv = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    raw = {"Q": matrix(draw, n_q, d), "K": matrix(draw, n_k, d), "V": matrix(draw, n_k, dv)}
    if n_q != n_k:
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    if draw(st.booleans()):
        rows = []
        for _ in range(n_q):
            row = draw(st.lists(st.sampled_from([0, 1]), min_size=n_k, max_size=n_k))
            row[draw(st.integers(0, n_k - 1))] = 1
            rows.append(row)
        raw["mask"] = rows
    if draw(st.booleans()):
        raw["scale"] = draw(st.sampled_from(["1/2", "3/4", "none"]))
    loss = draw(st.sampled_from(["sum", "given", "mse"]))
    if loss == "given":
        raw["backward"] = {"grad_output": matrix(draw, n_q, dv)}
    elif loss == "mse":
        raw["backward"] = {"loss": "mse", "target": matrix(draw, n_q, dv)}
    else:
        raw["backward"] = {"loss": "sum"}
    return raw


@needs_torch
@SETTINGS
@given(sdpa_inputs())
def test_sdpa_gradients_agree_with_autograd(raw):
    q, k, v = tensor(raw["Q"], True), tensor(raw["K"], True), tensor(raw["V"], True)
    mask = torch.tensor(raw["mask"], dtype=torch.bool) if "mask" in raw else None
    scale = {"1/2": 0.5, "3/4": 0.75, "none": 1.0}.get(raw.get("scale"))
    out = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask, scale=scale)[0]
    b = raw["backward"]
    if "grad_output" in b:
        out.backward(tensor(b["grad_output"]))
    elif b.get("loss") == "mse":
        (0.5 * ((out - tensor(b["target"])) ** 2).sum()).backward()
    else:
        out.sum().backward()
    dQ, dK, dV = grads(raw, "dQ", "dK", "dV")
    size = max([1.0] + [abs(float(x)) for m in (raw["Q"], raw["K"], raw["V"]) for row in m for x in row]) ** 3 * 20
    close(dV, v.grad, size)
    close(dQ, q.grad, size)
    close(dK, k.grad, size)


@st.composite
def multihead_inputs(draw):
    raw, E, n_q, n_k = multihead_base(draw)
    if "X_kv" in raw:
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    raw["backward"] = {"grad_output": matrix(draw, n_q, E)} if draw(st.booleans()) else {"loss": "sum"}
    return raw


def transpose(rows):
    return tensor(rows).T.contiguous()


@needs_torch
@SETTINGS
@given(multihead_inputs())
def test_multihead_in_proj_and_out_proj_gradients_agree_with_autograd(raw):
    E = len(raw["X"][0])
    mha = torch.nn.MultiheadAttention(E, raw["heads"], dropout=0.0, bias=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # we multiply X W; torch multiplies x Wᵀ
        mha.in_proj_weight.copy_(torch.cat([transpose(raw[w]) for w in ("W_Q", "W_K", "W_V")]))
        mha.in_proj_bias.copy_(
            torch.tensor([float(x) for b in ("b_Q", "b_K", "b_V") for x in raw[b]], dtype=torch.float64)
        )
        mha.out_proj.weight.copy_(transpose(raw["W_O"]))
        mha.out_proj.bias.copy_(torch.tensor([float(x) for x in raw["b_O"]], dtype=torch.float64))
    x = tensor(raw["X"], True)
    kv = tensor(raw["X_kv"], True) if "X_kv" in raw else x
    out, _ = mha(x[None], kv[None], kv[None], need_weights=False)
    if "grad_output" in raw["backward"]:
        out[0].backward(tensor(raw["backward"]["grad_output"]))
    else:
        out.sum().backward()
    names = ["dW_Q", "dW_K", "dW_V", "db_Q", "db_K", "db_V", "dW_O", "db_O", "dX"] + (
        ["dX_kv"] if "X_kv" in raw else []
    )
    ours = dict(zip(names, grads(raw, *names)))
    size = (
        max(
            [1.0]
            + [
                abs(float(v))
                for key in ("X", "X_kv", "W_Q", "W_K", "W_V", "W_O")
                for row in raw.get(key, [])
                for v in row
            ]
        )
        ** 5
        * E**3
    )
    W = mha.in_proj_weight.grad
    for i, name in enumerate(("Q", "K", "V")):
        close(ours[f"dW_{name}"], W[i * E : (i + 1) * E].T, size)  # torch's gradient of Wᵀ, transposed back
        close(ours[f"db_{name}"], mha.in_proj_bias.grad[i * E : (i + 1) * E][None], size)
    close(ours["dW_O"], mha.out_proj.weight.grad.T, size)
    close(ours["db_O"], mha.out_proj.bias.grad[None], size)
    if "X_kv" in raw:
        close(ours["dX"], x.grad, size)
        close(ours["dX_kv"], kv.grad, size)
    else:
        close(ours["dX"], x.grad, size)


# --- derivation, documents and clients ------------------------------------------------------------


def test_the_focus_sums_are_expanded():
    text = render(derive(load_spec(builtin.example_path("backward", "zh"))), "markdown")
    assert r"dV_{\text{小猫},1} &\approx 0.417\times 1 + 0.261\times 1 + 0.403\times 1 \approx 1.081" in text
    assert (
        r"J_{\text{它}} \approx \begin{bmatrix}0.241 & -0.097 & -0.144 \\ -0.097 & 0.183 & -0.086 \\ "
        r"-0.144 & -0.086 & 0.230\end{bmatrix}" in text
    )
    assert r"dZ_{\text{它},\text{小猫}} &\approx 0.403\times\left( 10 - 7.144\right) \approx 1.150" in text
    assert r"dK_{\text{小猫},1} &\approx 0.854\times 1.0 + 0.413\times 0.0 + 0.813\times 0.9 \approx 1.586" in text


def test_hand_rounding_uses_the_shown_numbers():
    spec = load_spec(builtin.example_path("backward", "en")).with_options(rounding="hand")
    text = render(derive(spec), "markdown")
    # r = 10×0.403 + 10×0.240 + 2×0.357 = 7.144 from the shown weights, exactly (≈ the exact r: they are rounded)
    assert (
        r"r_{\text{it}} = \sum_k dA_k\,\alpha_k &\approx 10\times 0.403 + 10\times 0.240 + 2\times 0.357 = 7.144"
        in text
    )
    # 0.403 × 2.856 = 1.150968 exactly, shown at the gradients' 3 decimals (by hand digits would pile up: 11
    # places two steps on)
    assert r"dZ_{\text{it},\text{cat}} &\approx 0.403\times\left( 10 - 7.144\right) \approx 1.151" in text


def test_masked_keys_are_named_in_the_softmax_step():
    spec = load_spec(builtin.example_path("causal", "en")).with_options(backward=True, focus="cat")
    text = render(derive(spec), "markdown")
    assert "Masked keys (“ate”) have weight exactly 0, so their gradient is exactly 0." in text
    assert "The stable softmax subtracts the row maximum first" in text


@pytest.mark.parametrize("name", [n for n in builtin.names() if not n.startswith("backward")])
def test_backward_flag_works_on_every_example(capsys, name):
    assert main(["render", "--example", name, "--lang", "en", "--backward"]) == 0
    out = capsys.readouterr().out
    assert "## Recap of the gradients" in out


def test_compute_json_has_the_backward_section(capsys):
    assert main(["compute", "--example", "backward-mse", "--digits", "4"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith('  "backward"'))
    assert line.startswith('  "backward": {"loss": "mse", "dO": {"exact": [["')
    assert '"dV": {"exact": ' in line and '"value": [["0.2381", "0.8457"]' in line


@pytest.mark.client
@pytest.mark.parametrize("name", ["backward", "backward-mse"])
@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("variant", [{}, {"expand": "all", "rounding": "hand"}])
def test_backward_documents_pass_katex_and_compile_without_overfull_boxes(katex, latex, tmp_path, name, lang, variant):
    spec = load_spec(builtin.example_path(name, lang)).with_options(**variant)
    derivation = derive(spec)
    assert katex(render(derivation, "markdown")) == []
    latex(render(derivation, "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log) == []


@pytest.mark.client
@pytest.mark.parametrize("name", ["multihead", "projection", "cross"])
def test_backward_of_other_examples_compiles_without_overfull_boxes(katex, latex, tmp_path, name):
    # without the examples' own titles: the cross example's title is 9.5 pt too wide by itself (not the backward pass)
    spec = load_spec(builtin.example_path(name, "en")).with_options(backward=True)
    spec = replace(spec, document=replace(spec.document, title=None))
    derivation = derive(spec)
    assert katex(render(derivation, "markdown")) == []
    latex(render(derivation, "latex", standalone=True), "pdflatex", tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log) == []


# --- the checker ---------------------------------------------------------------------------------

CLAIMS = {
    "weights": [["0.417", "0.221", "0.362"], ["0.261", "0.459", "0.280"], ["0.40", "0.240", "0.357"]],
    "dV[1][1]": "1.081",  # rounded
    "dA": [[10, 10, 2], [10, 10, 2], [10, 10, 2]],  # exact
    "dZ[1][1]": "1.207",  # last digit: 0.417 × (10 − 7.104) = 1.2076 by their own numbers
    "dZ[3][1]": "1.24",  # wrong (1.15)
    "dS[3][1]": "0.877",  # carried: 1.24 / 1.414
    "dK[1][1]": "1.643",  # carried through their dS
    "dQ[3][2]": "0.2584",  # rounded
}


def test_a_hand_worked_backward_example_with_planted_slips():
    report = check({**EN, "backward": {"loss": "sum"}}, {"claims": CLAIMS})
    verdicts = {
        r.claim.key + ("" if "[" in r.claim.key else f"[{r.claim.row + 1}][{r.claim.col + 1}]"): r.verdict
        for r in report.results
        if not r.claim.key.startswith("claims.weights")
    }
    assert verdicts == {
        "claims.dV[1][1]": "rounded",
        **{f"claims.dA[{i}][{j}]": "exact" for i in (1, 2, 3) for j in (1, 2, 3)},
        "claims.dZ[1][1]": "last-digit",
        "claims.dZ[3][1]": "wrong",
        "claims.dS[3][1]": "carried",
        "claims.dQ[3][2]": "rounded",
        "claims.dK[1][1]": "carried",
    }
    data = report_data(report)
    assert data["summary"]["first_wrong"]["key"] == "claims.dZ[1][1]"
    assert data["summary"]["first_wrong"]["expected"] == "1.208"
    wrong = next(v for v in report.results if v.claim.key == "claims.dZ[3][1]")
    assert str(wrong.expected) == "1.15"
    ((alpha, difference),) = wrong.explanation.operands  # α × (dA − r)
    assert (str(alpha.value), str(difference.value)) == ("0.402653", "2.85638")


def test_gradient_claims_need_the_backward_pass():
    with pytest.raises(SpecError) as err:
        check(EN, {"claims": {"dV[1][1]": "1.081"}})
    assert (
        str(err.value) == "<dict>: claims.dV[1][1]: a claim on a gradient needs [backward] in the spec (or --backward)"
    )
    assert check(EN, {"claims": {"dV[1][1]": "1.081"}}, backward=True).results[0].verdict == "rounded"


def test_a_long_label_s_softmax_rows_stay_on_the_page(latex, tmp_path):
    # J dA^T = α ⊙ (dA − r) names the row five times: with a label of 13 signs it ran 54 pt past the line
    spec = load_spec(
        {
            "lang": "en",
            "tokens": ["我们", "注意力机制的一个很长的标签", "end"],
            "focus": "注意力机制的一个很长的标签",
            "Q": [["0.5", "1.0"], ["0.1", "-0.4"], ["0.3", "0.6"]],
            "K": [["1.0", "0.0"], ["0.5", "0.5"], ["-0.2", "0.9"]],
            "V": [[1, 2], ["0.5", -1], [0, 3]],
            "backward": {"loss": "sum"},
        }
    )
    tex = render(derive(spec), "latex", standalone=True)
    assert "\\\\ &= \\alpha_{" in tex  # the links on lines of their own
    latex(tex, "xelatex", tmp_path)  # fails on any overfull box
