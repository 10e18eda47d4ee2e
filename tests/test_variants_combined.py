"""Issue 20's variants at once: grouped-query heads, a sliding window aligned bottom-right, cross-attention,
projections, and RoPE with ALiBi, soft-capping and sinks (each, and all three), on one spec, against
PyTorch float64 written out step by step: forward, and backward through autograd."""

import json
import math
import random
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.api import solve

from .test_rope_torch import rope_inputs, rotate
from .test_torch import tensor
from .test_torch_score_variants import variants

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs torch==2.13.0)")

pytestmark = pytest.mark.client


def rope(x, positions, base: float, style: str):
    """x (n, d) turned by position·base^(−2t/d), pairs (t, t + d/2) ("half") or (2t, 2t+1)."""
    n, d = x.shape
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angle), torch.sin(angle)
    if style == "half":
        a, b = x[:, : d // 2], x[:, d // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], 1)
    a, b = x[:, 0::2], x[:, 1::2]
    out = torch.empty_like(x)
    out[:, 0::2], out[:, 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


def reference(raw: dict, Q=None, K=None, V=None, sinks=None):
    """The concatenated heads' output, in float64, each variant as its paper writes it; differentiable in
    Q, K, V and the sink logits (by default the spec's)."""
    if Q is None:
        Q, K, V = (tensor(raw[name]) for name in "QKV")
    if sinks is None and "sinks" in raw:
        sinks = torch.tensor([float(Fraction(s)) for s in raw["sinks"]], dtype=torch.float64)
    H, G, dk = raw["heads"], raw["kv_heads"], Q.shape[1] // raw["heads"]
    n_q, n_k = Q.shape[0], K.shape[0]
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    offset = n_k - n_q if raw["causal_align"] == "bottom-right" else 0
    allowed = (j <= i + offset) & (j > i + offset - raw["window"])
    out = []
    for h in range(H):
        g = h // (H // G)
        q, k, v = Q[:, h * dk : (h + 1) * dk], K[:, g * dk : (g + 1) * dk], V[:, g * dk : (g + 1) * dk]
        if raw.get("rope"):
            q = rope(q, torch.arange(n_q, dtype=torch.float64), float(raw["rope_base"]), raw["rope_style"])
            k = rope(k, torch.arange(n_k, dtype=torch.float64), float(raw["rope_base"]), raw["rope_style"])
        z = q @ k.T / math.sqrt(dk)
        if raw.get("alibi"):
            z = z - 2 ** (-8 * (h + 1) / H) * (i - j).abs()
        if "softcap" in raw:
            c = float(raw["softcap"])
            z = c * torch.tanh(z / c)
        z = z.masked_fill(~allowed, -math.inf)
        if "sinks" in raw:
            sink = sinks[h].expand(n_q, 1)
            out.append(torch.softmax(torch.cat([z, sink], 1), 1)[:, :n_k] @ v)
        else:
            out.append(torch.softmax(z, 1) @ v)
    return torch.cat(out, 1)


def draw(seed: int) -> dict:
    rng = random.Random(seed)
    (H, G), dk = rng.choice([(2, 1), (4, 2), (4, 1)]), 2
    n_k = rng.randint(3, 5)
    n_q = rng.randint(2, n_k)

    def m(rows, cols):
        return [[f"{rng.randint(-9, 9) / 10:.1f}" for _ in range(cols)] for _ in range(rows)]

    raw = {
        "tokens": [f"q{r}" for r in range(n_q)],
        "heads": H,
        "kv_heads": G,
        "Q": m(n_q, H * dk),
        "K": m(n_k, G * dk),
        "V": [[str(rng.randint(-5, 5)) for _ in range(G * dk)] for _ in range(n_k)],
        "mask": "causal",
        "causal_align": "bottom-right",
        "window": rng.randint(2, n_k),
    }
    if n_q != n_k:  # cross-attention: the keys are labelled apart
        raw["key_tokens"] = [f"k{r}" for r in range(n_k)]
    rope = {"rope": True, "rope_base": rng.choice(["10000", "100"]), "rope_style": rng.choice(["half", "interleaved"])}
    variants = {
        "alibi": True,
        "softcap": rng.choice(["2", "5", "0.5"]),
        "sinks": [f"{rng.randint(-10, 10) / 10:.1f}" for _ in range(H)],
    }
    kind = seed % 4  # the three score variants; RoPE alone; RoPE with one of them; RoPE with all three
    if kind:
        raw |= rope
    if kind == 2:
        only = ("alibi", "softcap", "sinks")[seed // 4 % 3]
        raw[only] = variants[only]
    elif kind != 1:
        raw |= variants
    return raw


@pytest.mark.parametrize("seed", range(12))
def test_every_variant_at_once_agrees_with_torch(seed):
    raw = draw(seed)
    got = solve(raw).compute(digits=20, exact=False)
    values = torch.tensor([[float(x) for x in row] for row in got["concat"]["value"]], dtype=torch.float64)
    want = reference(raw)
    floor = 1e-13 * want.abs().max().item()
    assert torch.allclose(values, want, rtol=1e-12, atol=floor), json.dumps(raw)


def close(ours, want, top: float | None = None) -> None:
    """Within rtol 1e-12 with an absolute floor of 1e-13 × the largest entry (issue 20's agreement); ``top``:
    the largest entry of all the gradients, since float64 loses digits to cancellation in a tiny one."""
    got = torch.tensor([[float(x) for x in row] for row in ours], dtype=torch.float64)
    floor = 1e-13 * (want.abs().max().item() if top is None else top)
    assert torch.allclose(got, want, rtol=1e-12, atol=floor), (ours, want)


@pytest.mark.parametrize("seed", [s for s in range(12) if s % 4 in (2, 3)])
def test_rope_with_the_score_variants_backward_agrees_with_autograd(seed):
    """dQ, dK, dV (and dsinks) of L = Σ O: RoPE's rotation back, softcap's tanh′, the sinks' own gradient."""
    raw = draw(seed)
    Q, K, V = (tensor(raw[name]).requires_grad_() for name in "QKV")
    sinks = None
    if "sinks" in raw:
        sinks = torch.tensor([float(Fraction(s)) for s in raw["sinks"]], dtype=torch.float64, requires_grad=True)
    reference(raw, Q, K, V, sinks).sum().backward()
    got = solve(raw | {"backward": {"loss": "sum"}}).compute(digits=20, exact=False)["backward"]
    top = max(t.grad.abs().max().item() for t in (Q, K, V))
    for name, t in (("dQ", Q), ("dK", K), ("dV", V)):
        close(got[name]["value"], t.grad, top)
    if sinks is not None:
        close(got["dsinks"]["value"], sinks.grad[None])


def projected(seed: int) -> dict:
    """RoPE and all three score variants after projections (X W + b, W_O), sometimes cross-attention."""
    rng = random.Random(seed)
    H, E = 2, 4
    n_q = rng.randint(2, 4)
    n_k = n_q if seed % 2 else rng.randint(n_q, 4)  # bottom-right: no query before the first key

    def m(rows, cols):
        return [[f"{rng.randint(-9, 9) / 10:.1f}" for _ in range(cols)] for _ in range(rows)]

    raw = {
        "X": m(n_q, E),
        "heads": H,
        **{w: m(E, E) for w in ("W_Q", "W_K", "W_V", "W_O")},
        **{b: m(1, E)[0] for b in ("b_Q", "b_K", "b_V", "b_O")},
        "mask": "causal",
        "window": rng.randint(2, 4),
        "rope": True,
        "rope_style": rng.choice(["half", "interleaved"]),
        "alibi": True,
        "softcap": rng.choice(["2", "0.5"]),
        "sinks": [f"{rng.randint(-10, 10) / 10:.1f}" for _ in range(H)],
    }
    if seed % 2 == 0:  # cross-attention: keys and values from X_kv
        raw |= {"X_kv": m(n_k, E), "causal_align": "bottom-right"}
    return raw


@pytest.mark.parametrize("seed", range(2))
def test_rope_with_the_score_variants_after_projections(seed):
    raw = projected(seed)
    X, X_kv = tensor(raw["X"]), tensor(raw.get("X_kv", raw["X"]))
    W = {name: tensor(raw[name]).requires_grad_() for name in ("W_Q", "W_K", "W_V", "W_O")}
    b = {name: tensor([raw[name]])[0] for name in ("b_Q", "b_K", "b_V", "b_O")}
    Q, K, V = (x @ W["W_" + n] + b["b_" + n] for x, n in ((X, "Q"), (X_kv, "K"), (X_kv, "V")))
    full = raw | {"kv_heads": 2, "causal_align": raw.get("causal_align", "top-left"), "rope_base": "10000"}
    out = reference(full, Q, K, V) @ W["W_O"] + b["b_O"]
    out.sum().backward()
    got = solve(raw | {"backward": {"loss": "sum"}}).compute(digits=20, exact=False)
    close(got["output"]["value"], out.detach())
    top = max(w.grad.abs().max().item() for w in W.values())
    for name, w in W.items():
        close(got["backward"]["d" + name]["value"], w.grad, top)


@st.composite
def rope_variant_inputs(draw):
    """One head with RoPE (any base, style, mask) and at least one of ALiBi, a softcap and a sink."""
    raw = draw(rope_inputs()) | {"heads": 1}
    kinds = draw(st.sets(st.sampled_from(("alibi", "softcap", "sinks")), min_size=1))
    if "alibi" in kinds:
        if draw(st.booleans()):
            raw["alibi"] = True
        else:
            raw["alibi_slopes"] = [draw(st.sampled_from(["0.5", "1", "2.5", "1/3"]))]
    if "softcap" in kinds:
        raw["softcap"] = draw(st.sampled_from(["0.5", "2", "1/3"]))
    if "sinks" in kinds:
        raw["sinks"] = [draw(st.sampled_from(["0", "-1.5", "3", "1/3"]))]
    if draw(st.booleans()):
        raw["softmax"] = "stable"
    return raw


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rope_variant_inputs())
def test_rope_with_score_variants_against_the_float64_formula(raw):
    """Forward (output and the sink's share) and backward (autograd) of L = Σ O, one head."""
    base, style = raw["rope_base"], raw["rope_style"]
    q, k, v = (tensor(raw[name]).requires_grad_() for name in "QKV")
    sinks = None
    if "sinks" in raw:
        sinks = torch.tensor([float(Fraction(s)) for s in raw["sinks"]], dtype=torch.float64, requires_grad=True)
    out, share = variants(raw, rotate(q, base, style), rotate(k, base, style), v, sinks)
    out.sum().backward()
    got = solve(raw | {"backward": {"loss": "sum"}}).compute(digits=20, exact=False)
    close(got["output"]["value"], out.detach())
    top = max(t.grad.abs().max().item() for t in (q, k, v))
    for name, t in (("dQ", q), ("dK", k), ("dV", v)):
        close(got["backward"][name]["value"], t.grad, top)
    if sinks is not None:
        close([[x] for x in got["sink_share"]["value"]], share.detach().T)
        close(got["backward"]["dsinks"]["value"], sinks.grad[None])


def combined_spec(lang: str):
    """The built-in RoPE example (equal Q and K rows at four positions) with ALiBi, a softcap and a sink."""
    import tomllib

    from symattn.input import builtin
    from symattn.input.spec import load_spec

    raw = tomllib.loads(builtin.example_path("rope", lang).read_text(encoding="utf-8"))
    return load_spec(raw | {"alibi": True, "softcap": "2", "sinks": ["0.5"], "softmax": "stable", "backward": {}})


# each language's steps in order, and the lines where RoPE's scores go through the bias, the cap and the sink
COMBINED = {
    "en": (
        (
            "## Setup",
            "## Step 0: rotate $Q, K$ by position (RoPE)",
            "## Step 1: compute $Q'K'^\\top$ (the dot product of every Q with every K)",
            "## Step 2: scale $S / \\sqrt{d_k}$",
            "## ALiBi: a penalty for distance, $-m\\,\\lvert i - j\\rvert$",
            "## Soft-capping: $z \\leftarrow c \\tanh(z / c)$",
            "## Step 3: softmax of that row (scores become weights)",
            "## The sink's share: weights that add up to less than 1",
            "## Step 4: weights × values, the new vector of “down”",
            "## Step 5: the whole sentence at once (matrix form)",
            "## Recap (with the numbers above)",
            "## Backward 1: the loss and $dO$",
            "## Backward 2: $dV = A^\\top dO$ and $dA = dO\\,V^\\top$",
            "## Backward 3: through the softmax ($dZ$)",
            "## Backward: through the soft-cap ($dY$)",
            "## Backward: the sink's own gradient ($ds$)",
            "## Backward 4: the scaling $dS = dY / \\sqrt{d_k}$",
            "## Backward 5: $dQ' = dS\\,K'$ and $dK' = dS^\\top Q'$",
            "## RoPE backward: $dQ = R^\\top dQ'$ and $dK = R^\\top dK'$",
            "## Recap of the gradients",
            "## Toy example vs a real Transformer",
        ),
        (
            "ALiBi, as in BLOOM, adds $-m\\,\\lvert i - j\\rvert$ to every scaled score: the farther key $j$ is from query $i$, the more its score drops, so nearby tokens win unless the scores say otherwise. Here it comes on top of RoPE: the scores are those of the rotated Q and K.",
            "z \\approx [0.493,\\ 0.784,\\ 1.266,\\ 1.5], \\qquad 2 \\tanh\\!\\left(\\frac{z}{2}\\right) \\approx [0.483,\\ 0.746,\\ 1.120,\\ 1.270]",
            "\\text{sink} \\approx \\frac{0.463}{3.371} \\approx 0.137, \\qquad \\sum_j \\alpha_j = 1 - 0.137",
        ),
    ),
    "zh": (
        (
            "## 设定",
            "## 步骤 0：按位置旋转 $Q, K$（RoPE）",
            "## 步骤 1：算 $Q'K'^\\top$（每个 Q 和每个 K 的点积）",
            "## 步骤 2：缩放 $S / \\sqrt{d_k}$",
            "## ALiBi：按距离扣分 $-m\\,\\lvert i - j\\rvert$",
            "## 软上限：$z \\leftarrow c \\tanh(z / c)$",
            "## 步骤 3：对该行做 Softmax（变成权重）",
            "## 汇点的份额：权重之和小于 1",
            "## 步骤 4：权重 × 值向量 V，得到「垫子」的新向量",
            "## 步骤 5：整句一次算完（矩阵形式）",
            "## 对照记忆（对着刚才的数字）",
            "## 反向 1：损失与 $dO$",
            "## 反向 2：$dV = A^\\top dO$ 与 $dA = dO\\,V^\\top$",
            "## 反向 3：穿过 Softmax（$dZ$）",
            "## 反向：穿过软上限（$dY$）",
            "## 反向：汇点自己的梯度（$ds$）",
            "## 反向 4：缩放 $dS = dY / \\sqrt{d_k}$",
            "## 反向 5：$dQ' = dS\\,K'$ 与 $dK' = dS^\\top Q'$",
            "## RoPE 的反向：$dQ = R^\\top dQ'$ 与 $dK = R^\\top dK'$",
            "## 梯度小结",
            "## 和真实 Transformer 差在哪（心里有数即可）",
        ),
        (
            "ALiBi（BLOOM 用的就是它）给每个缩放后的分数加上 $-m\\,\\lvert i - j\\rvert$：键 $j$ 离查询 $i$ 越远，分数扣得越多，所以除非分数另有所指，近处的词胜出。这里它叠加在 RoPE 之上：分数来自旋转后的 Q 和 K。",
            "z \\approx [0.493,\\ 0.784,\\ 1.266,\\ 1.5], \\qquad 2 \\tanh\\!\\left(\\frac{z}{2}\\right) \\approx [0.483,\\ 0.746,\\ 1.120,\\ 1.270]",
            "\\text{汇点} \\approx \\frac{0.463}{3.371} \\approx 0.137, \\qquad \\sum_j \\alpha_j = 1 - 0.137",
        ),
    ),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rope_with_the_score_variants_renders_every_step(katex, latex, tmp_path, lang):
    """RoPE's rotation, then ALiBi, the softcap and the sink, forward and backward: the exact steps and lines,
    KaTeX-clean Markdown, and LaTeX that compiles without an overfull box."""
    from symattn.derivation.derive import derive
    from symattn.rendering.renderer import render

    derivation = derive(combined_spec(lang))
    markdown = render(derivation, "markdown")
    headings, shown = COMBINED[lang]
    assert tuple(line for line in markdown.splitlines() if line.startswith("## ")) == headings
    assert all(line in markdown.splitlines() for line in shown)
    assert katex(markdown) == []
    assert (
        overfull(
            latex, render(derivation, "latex", standalone=True), "xelatex" if lang == "zh" else "pdflatex", tmp_path
        )
        == []
    )


def overfull(latex, tex: str, engine: str, tmp_path) -> list[str]:
    """Compile and return the overfull boxes TeX logged."""
    import re

    latex(tex, engine, tmp_path)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    return re.findall(r"Overfull \\[hv]box \(([\d.]+)pt too \w+\)", log)


def test_rope_with_the_score_variants_by_hand(katex, latex, tmp_path):
    """By hand: the biased scores are the shown rotated-and-scaled scores plus the shown bias (exact sums),
    then capped from those; every step written out is KaTeX-clean and compiles without an overfull box."""
    from symattn.derivation.derive import derive
    from symattn.rendering.renderer import render

    derivation = derive(combined_spec("en").with_options(expand="all", rounding="hand"))
    markdown = render(derivation, "markdown")
    lines = markdown.splitlines()
    assert (
        "z = [0.493,\\ 0.784,\\ 1.267,\\ 1.501], \\qquad 2 \\tanh\\!\\left(\\frac{z}{2}\\right) \\approx [0.483,\\ 0.746,\\ 1.121,\\ 1.271]"
        in lines
    )
    assert katex(markdown) == []
    assert overfull(latex, render(derivation, "latex", standalone=True), "pdflatex", tmp_path) == []


@pytest.mark.parametrize(
    ("example", "refused"),
    [
        ("seed", False),
        ("window", False),
        ("causal", False),
        ("alibi", False),
        ("softcap", False),
        ("sinks", False),
        ("rope", True),
        ("qk-norm", True),
    ],
)
def test_a_specs_float64_path_takes_the_parts_in_its_mask_or_with_a_kernel_rule_and_refuses_the_others(
    example, refused
):
    from symattn import variants
    from symattn.input import builtin
    from symattn.input.spec import load_spec

    assert variants.float64_refused(load_spec(builtin.example_path(example, "en"))) is refused
