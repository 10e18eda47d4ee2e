"""RoPE against a float64 rotation in PyTorch (torch==2.13.0, CPU), then PyTorch's own attention.

The rotation is written here as the two reference codes write it: Llama's Hugging Face
``rotate_half`` (pairs t, t + d/2) and RoFormer's interleaved pairs (2t, 2t + 1).
"""

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.derivation.intermediates import compute
from symattn.input.spec import load_spec

from .strategies import matrix, multihead_base
from .test_torch import assert_close, magnitude, tensor

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs torch==2.13.0)")
F = torch.nn.functional

pytestmark = pytest.mark.client
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASES = ("10000", "10", "2.5", "1/3", "1", "500000")


def rotate(x, base, style):
    """x (n × d) with row p rotated by p·base^(−2t/d), as Llama's code (half) or RoFormer (interleaved)."""
    n, d = x.shape
    t = torch.arange(d // 2, dtype=torch.float64)
    inv_freq = 1.0 / (float(Fraction(base)) ** (2 * t / d))
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = angles.cos(), angles.sin()
    if style == "half":  # Hugging Face: q * cos + rotate_half(q) * sin, with cos repeated over both halves
        c, s = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
        half = torch.cat([-x[:, d // 2 :], x[:, : d // 2]], -1)
        return x * c + half * s
    a, b = x[:, 0::2], x[:, 1::2]
    out = torch.empty_like(x)
    out[:, 0::2] = a * cos - b * sin
    out[:, 1::2] = a * sin + b * cos
    return out


@st.composite
def rope_inputs(draw):
    n_q, n_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d, dv = 2 * draw(st.integers(1, 3)), draw(st.integers(1, 3))
    raw = {"Q": matrix(draw, n_q, d), "K": matrix(draw, n_k, d), "V": matrix(draw, n_k, dv), "rope": True}
    raw["rope_base"] = draw(st.sampled_from(BASES))
    raw["rope_style"] = draw(st.sampled_from(("half", "interleaved")))
    if n_q != n_k:
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    mask = draw(st.sampled_from(("none", "causal", "matrix")))
    if mask == "causal":
        raw["mask"] = "causal"
    elif mask == "matrix":
        rows = []
        for _ in range(n_q):
            row = draw(st.lists(st.sampled_from([0, 1]), min_size=n_k, max_size=n_k))
            row[draw(st.integers(0, n_k - 1))] = 1  # every query may attend to some key
            rows.append(row)
        raw["mask"] = rows
    if draw(st.booleans()):
        raw["softmax"] = "stable"
    return raw


@SETTINGS
@given(rope_inputs())
def test_rope_sdpa(raw):
    base, style = raw["rope_base"], raw["rope_style"]
    q, k, v = rotate(tensor(raw["Q"]), base, style), rotate(tensor(raw["K"]), base, style), tensor(raw["V"])
    data = compute(load_spec(raw), digits=17, exact=False)
    scale = magnitude(raw["Q"], raw["K"])
    assert_close(data["Q_rot"]["value"], q, scale)
    assert_close(data["K_rot"]["value"], k, scale)
    assert_close(data["scores"]["value"], q @ k.T, scale * scale * q.shape[1])
    mask = raw.get("mask")
    if isinstance(mask, list):
        allowed = torch.tensor(mask, dtype=torch.bool)  # True: may attend, as ours
        theirs = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=allowed)[0]
    else:
        theirs = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=mask == "causal")[0]
    assert_close(data["output"]["value"], theirs, magnitude(raw["V"]))


@st.composite
def projected_inputs(draw):
    raw, E, n_q, n_k = multihead_base(draw)
    if (E // raw["heads"]) % 2:
        raw["heads"] = 1 if E % 2 == 0 else raw["heads"]
    if (E // raw["heads"]) % 2:  # d_k must be even: widen to two heads of 2 or one of 2
        raw, E = _even(draw, raw, n_q, n_k)
    raw.update(
        rope=True, rope_base=draw(st.sampled_from(BASES)), rope_style=draw(st.sampled_from(("half", "interleaved")))
    )
    return raw


def _even(draw, raw, n_q, n_k):
    E = 2
    raw = {k: v for k, v in raw.items() if k not in ("X", "X_kv")}
    raw["heads"] = 1
    raw["X"] = matrix(draw, n_q, E)
    if n_q != n_k or draw(st.booleans()):
        raw["X_kv"] = matrix(draw, n_k, E)
    for w in ("W_Q", "W_K", "W_V", "W_O"):
        raw[w] = matrix(draw, E, E)
    for b in ("b_Q", "b_K", "b_V", "b_O"):
        raw[b] = [x[0] for x in matrix(draw, E, 1)]
    return raw, E


@settings(SETTINGS, max_examples=25)  # projected heads: each example is seconds of exact work
@given(projected_inputs())
def test_rope_projected_heads(raw):
    """X W (+ b), then RoPE per head, SDPA per head, concatenation and W_O, in float64."""
    base, style, heads = raw["rope_base"], raw["rope_style"], raw["heads"]
    x = tensor(raw["X"])
    kv = tensor(raw.get("X_kv", raw["X"]))

    def bias(name):
        return torch.tensor([float(Fraction(b)) for b in raw[name]], dtype=torch.float64)

    W = {name: tensor(raw[name]).requires_grad_() for name in ("W_Q", "W_K", "W_V")}
    Q, K, V = x @ W["W_Q"] + bias("b_Q"), kv @ W["W_K"] + bias("b_K"), kv @ W["W_V"] + bias("b_V")
    width = Q.shape[1] // heads
    outs = []
    for h in range(heads):
        part = slice(h * width, (h + 1) * width)
        q, k = rotate(Q[:, part], base, style), rotate(K[:, part], base, style)
        outs.append(F.scaled_dot_product_attention(q[None], k[None], V[:, part][None])[0])
    theirs = torch.cat(outs, -1) @ tensor(raw["W_O"]) + bias("b_O")
    E = x.shape[1]
    scale = magnitude(raw["X"], raw.get("X_kv", []), raw["W_V"], raw["W_O"]) ** 3 * E * E
    data = compute(load_spec({**raw, "backward": {"loss": "sum"}}), digits=17, exact=False)
    assert_close(data["output"]["value"], theirs, scale)
    theirs.sum().backward()  # and the gradients of the projections, through the rotation
    for name in ("W_Q", "W_K", "W_V"):
        assert_close(data["backward"]["d" + name]["value"], W[name].grad, scale * scale)


@SETTINGS
@given(rope_inputs())
def test_rope_backward_autograd(raw):
    """dQ, dK, dV of L = Σ O against torch's autograd through the float64 rotation and SDPA."""
    base, style = raw["rope_base"], raw["rope_style"]
    q, k, v = (tensor(raw[name]).requires_grad_() for name in ("Q", "K", "V"))
    mask = raw.get("mask")
    qr, kr = rotate(q, base, style), rotate(k, base, style)
    if isinstance(mask, list):
        out = F.scaled_dot_product_attention(
            qr[None], kr[None], v[None], attn_mask=torch.tensor(mask, dtype=torch.bool)
        )
    else:
        out = F.scaled_dot_product_attention(qr[None], kr[None], v[None], is_causal=mask == "causal")
    out.sum().backward()
    data = compute(load_spec({**raw, "backward": {"loss": "sum"}}), digits=17, exact=False)["backward"]
    scale = magnitude(raw["Q"], raw["K"], raw["V"]) ** 3 * 20  # as test_backward's autograd test
    for name, t in (("dQ", q), ("dK", k), ("dV", v)):
        assert_close(data[name]["value"], t.grad, scale)
