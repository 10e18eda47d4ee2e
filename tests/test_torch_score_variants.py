"""Agreement with PyTorch (torch==2.13.0, CPU, float64) for the score variants of issue 20: ALiBi,
softcap and sinks.

ALiBi's bias −m_h·|i − j| (query i and key j counted 0, 1, … from the first row) is given to
``scaled_dot_product_attention`` as an additive float mask built the same way; a boolean mask or the
causal mask is folded into it as −∞. The softcap is the float64 formula c·tanh(z / c) before the
softmax; sinks are a softmax over the scores with one more column (the sink logit), then dropped.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.derivation.intermediates import compute
from symattn.input.spec import load_spec

from .strategies import matrix, multihead_base
from .test_torch import SETTINGS as TORCH_SETTINGS
from .test_torch import assert_close, magnitude, tensor

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs torch==2.13.0)")
F = torch.nn.functional

pytestmark = pytest.mark.client

# each example builds one or more exact models with the variants: 60 keep the file to seconds
SETTINGS = settings(TORCH_SETTINGS, max_examples=60)


def alibi_bias(slope: float, n_q: int, n_k: int):
    i = torch.arange(n_q, dtype=torch.float64)[:, None]
    j = torch.arange(n_k, dtype=torch.float64)[None, :]
    return -slope * (i - j).abs()


@st.composite
def alibi_inputs(draw):
    heads = draw(st.integers(1, 3))
    n_q, n_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d, dv = draw(st.integers(1, 2)) * heads, draw(st.integers(1, 2)) * heads
    raw = {"Q": matrix(draw, n_q, d), "K": matrix(draw, n_k, d), "V": matrix(draw, n_k, dv), "heads": heads}
    if n_q != n_k:
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    if draw(st.booleans()):
        raw["alibi"] = True
    else:
        raw["alibi_slopes"] = [draw(st.sampled_from(["0.5", "0.25", "1", "0.125", "2.5", "1/3"])) for _ in range(heads)]
    mask = draw(st.sampled_from(["none", "causal", "matrix"]))
    if mask == "causal":
        raw["mask"] = "causal"
    elif mask == "matrix":
        rows = []
        for _ in range(n_q):
            row = draw(st.lists(st.sampled_from([0, 1]), min_size=n_k, max_size=n_k))
            row[draw(st.integers(0, n_k - 1))] = 1
            rows.append(row)
        raw["mask"] = rows
    if draw(st.booleans()):
        raw["softmax"] = "stable"
    return raw


def slopes(raw):
    from fractions import Fraction

    heads = raw["heads"]
    if "alibi" in raw:
        return [2.0 ** (-8 * h / heads) for h in range(1, heads + 1)]
    return [float(Fraction(x)) for x in raw["alibi_slopes"]]


def theirs(raw):
    n_q, n_k, heads = len(raw["Q"]), len(raw["K"]), raw["heads"]
    q, k, v = (tensor(raw[x]) for x in "QKV")
    split = [t.reshape(t.shape[0], heads, -1).transpose(0, 1) for t in (q, k, v)]  # heads × rows × width
    bias = torch.stack([alibi_bias(m, n_q, n_k) for m in slopes(raw)])
    if raw.get("mask") == "causal":
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril()
    elif isinstance(raw.get("mask"), list):
        allowed = torch.tensor(raw["mask"], dtype=torch.bool)
    else:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool)
    bias = bias.masked_fill(~allowed, float("-inf"))
    out = F.scaled_dot_product_attention(*split, attn_mask=bias)  # heads × n_q × width
    return out.transpose(0, 1).reshape(n_q, -1)


@SETTINGS
@given(alibi_inputs())
def test_alibi_against_sdpa_additive_mask(raw):
    data = compute(load_spec(raw), digits=17, exact=False)
    if raw["heads"] == 1:
        ours = data["output"]["value"]
    else:  # the heads side by side, as torch concatenates them
        ours = [sum((h["output"]["value"][i] for h in data["heads"]), []) for i in range(len(raw["Q"]))]
    assert_close(ours, theirs(raw), magnitude(raw["V"]))


@st.composite
def projected_alibi_inputs(draw):
    raw, E, n_q, n_k = multihead_base(draw)
    raw["alibi"] = True
    if draw(st.booleans()):
        raw["mask"] = "causal"
    if draw(st.booleans()):
        raw["softcap"] = draw(st.sampled_from(["0.5", "2", "1/3"]))
    if draw(st.booleans()):
        raw["sinks"] = [draw(st.sampled_from(["0", "1.5", "-2"])) for _ in range(raw["heads"])]
    return raw


@SETTINGS
@given(projected_alibi_inputs())
def test_variants_with_projections_and_w_o(raw):
    x = tensor(raw["X"])
    kv = tensor(raw.get("X_kv", raw["X"]))

    def vec(name):
        return torch.tensor([float(v) for v in raw[name]], dtype=torch.float64)

    q, k, v = (src @ tensor(raw["W_" + n]) + vec("b_" + n) for src, n in ((x, "Q"), (kv, "K"), (kv, "V")))
    n_q, n_k, heads = q.shape[0], k.shape[0], raw["heads"]
    split = [t.reshape(t.shape[0], heads, -1).transpose(0, 1) for t in (q, k, v)]
    bias = torch.stack([alibi_bias(m, n_q, n_k) for m in slopes(raw)])
    if raw.get("mask") == "causal":
        bias = bias.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), float("-inf"))
    heads_out = F.scaled_dot_product_attention(*split, attn_mask=bias).transpose(0, 1).reshape(n_q, -1)
    if "sinks" in raw:  # the softmax with a sink column
        heads_out = variants(raw, q, k, v)[0]
    elif "softcap" in raw:  # no SDPA takes tanh: the float64 formula
        heads_out = variants(raw, q, k, v)[0]
    out = heads_out @ tensor(raw["W_O"]) + vec("b_O")
    data = compute(load_spec(raw), digits=17, exact=False)
    E = len(raw["X"][0])
    scale = magnitude(raw["X"], raw.get("X_kv", []), raw["W_V"], raw["W_O"]) ** 3 * E * E
    assert_close(data["output"]["value"], out, scale)


@st.composite
def softcap_inputs(draw):
    raw = draw(alibi_inputs())
    if draw(st.booleans()):  # soft-capping alone, or after ALiBi's bias
        raw.pop("alibi", None)
        raw.pop("alibi_slopes", None)
    raw["softcap"] = draw(st.sampled_from(["0.5", "1", "2.5", "30", "1/3"]))
    return raw


def variants(raw, q=None, k=None, v=None, sinks=None):
    """The float64 formula, per head and concatenated: z = S/√d + bias, c·tanh(z/c), masked, a softmax with the
    sink as one more column (then dropped), × V. Returns O and each head's sink share (None without sinks);
    differentiable in q, k, v and ``sinks`` (the logits; by default the spec's)."""
    from fractions import Fraction

    if q is None:
        q, k, v = (tensor(raw[x]) for x in "QKV")
    if sinks is None and "sinks" in raw:
        sinks = torch.tensor([float(Fraction(s)) for s in raw["sinks"]], dtype=torch.float64)
    n_q, n_k, heads = q.shape[0], k.shape[0], raw["heads"]
    qs, ks, vs = (t.reshape(t.shape[0], heads, -1).transpose(0, 1) for t in (q, k, v))
    z = qs @ ks.transpose(1, 2) / qs.shape[-1] ** 0.5
    if "alibi" in raw or "alibi_slopes" in raw:
        z = z + torch.stack([alibi_bias(m, n_q, n_k) for m in slopes(raw)])
    if "softcap" in raw:
        c = float(Fraction(raw["softcap"]))
        z = c * torch.tanh(z / c)
    if raw.get("mask") == "causal":
        z = z.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), float("-inf"))
    elif isinstance(raw.get("mask"), list):
        z = z.masked_fill(~torch.tensor(raw["mask"], dtype=torch.bool), float("-inf"))
    if sinks is None:
        return (torch.softmax(z, dim=-1) @ vs).transpose(0, 1).reshape(n_q, -1), None
    a = torch.softmax(torch.cat([z, sinks[:, None, None].expand(heads, n_q, 1)], dim=-1), dim=-1)
    return (a[..., :-1] @ vs).transpose(0, 1).reshape(n_q, -1), a[..., -1]


@SETTINGS
@given(softcap_inputs())
def test_softcap_against_the_float64_formula(raw):
    data = compute(load_spec(raw), digits=17, exact=False)
    if raw["heads"] == 1:
        ours = data["output"]["value"]
    else:
        ours = [sum((h["output"]["value"][i] for h in data["heads"]), []) for i in range(len(raw["Q"]))]
    assert_close(ours, variants(raw)[0], magnitude(raw["V"]))


@st.composite
def sink_inputs(draw):
    raw = draw(alibi_inputs())
    if draw(st.booleans()):
        raw.pop("alibi", None)
        raw.pop("alibi_slopes", None)
    if draw(st.booleans()):
        raw["softcap"] = draw(st.sampled_from(["0.5", "2", "30"]))
    raw["sinks"] = [draw(st.sampled_from(["0", "-1.5", "0.25", "3", "1/3", "-20"])) for _ in range(raw["heads"])]
    return raw


@SETTINGS
@given(sink_inputs())
def test_sinks_against_softmax_with_a_sink_column(raw):
    data = compute(load_spec(raw), digits=17, exact=False)
    out, share = variants(raw)
    heads = [data] if raw["heads"] == 1 else data["heads"]
    ours = [sum((h["output"]["value"][i] for h in heads), []) for i in range(len(raw["Q"]))]
    assert_close(ours, out, magnitude(raw["V"]))
    assert_close([h["sink_share"]["value"] for h in heads], share, 1.0)
