"""Agreement with PyTorch's own attention (torch==2.13.0, CPU, float64).

For random small specs, the exact values evaluated to 17 significant digits
must equal PyTorch within 1e-12 relative.
"""

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.derivation.intermediates import compute
from symattn.input.spec import load_spec

from .strategies import matrix, multihead_base

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs torch==2.13.0)")
F = torch.nn.functional

pytestmark = pytest.mark.client
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tensor(rows):
    # through Fraction, so that "1/3" reads too (a decimal's float is the same either way: both correctly rounded)
    return torch.tensor([[float(Fraction(x)) for x in row] for row in rows], dtype=torch.float64)


def assert_close(ours, theirs, scale):
    assert len(ours) == theirs.shape[0] and len(ours[0]) == theirs.shape[1]
    for row, expected in zip(ours, theirs.tolist()):
        for value, want in zip(row, expected):
            assert abs(float(value) - want) <= 1e-12 * max(abs(want), scale), (value, want)


def magnitude(*matrices):
    return max([1.0] + [abs(float(Fraction(x))) for m in matrices for row in m for x in row])


@st.composite
def attention_inputs(draw, masked=False):
    n_q, n_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d, dv = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    raw = {"Q": matrix(draw, n_q, d), "K": matrix(draw, n_k, d), "V": matrix(draw, n_k, dv)}
    if n_q != n_k:
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    if masked:
        rows = []
        for _ in range(n_q):
            row = draw(st.lists(st.sampled_from([0, 1]), min_size=n_k, max_size=n_k))
            row[draw(st.integers(0, n_k - 1))] = 1  # every query may attend to some key
            rows.append(row)
        raw["mask"] = rows
    return raw


def ours(raw, key="output"):
    data = compute(load_spec(raw), digits=17, exact=False)
    return data[key]["value"]


@SETTINGS
@given(attention_inputs())
def test_sdpa_plain(raw):
    q, k, v = tensor(raw["Q"]), tensor(raw["K"]), tensor(raw["V"])
    theirs = F.scaled_dot_product_attention(q[None], k[None], v[None])[0]
    assert_close(ours(raw), theirs, magnitude(raw["V"]))


@SETTINGS
@given(attention_inputs(masked=True))
def test_sdpa_with_attn_mask(raw):
    q, k, v = tensor(raw["Q"]), tensor(raw["K"]), tensor(raw["V"])
    mask = torch.tensor(raw["mask"], dtype=torch.bool)  # True: may attend, as ours
    theirs = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask)[0]
    assert_close(ours(raw), theirs, magnitude(raw["V"]))


@SETTINGS
@given(attention_inputs())
def test_sdpa_is_causal(raw):
    raw = {**raw, "mask": "causal"}
    q, k, v = tensor(raw["Q"]), tensor(raw["K"]), tensor(raw["V"])
    theirs = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
    assert_close(ours(raw), theirs, magnitude(raw["V"]))


@st.composite
def multihead_inputs(draw):
    raw, E, n_q, n_k = multihead_base(draw)
    if draw(st.booleans()):
        padding = draw(st.lists(st.booleans(), min_size=n_k, max_size=n_k))
        padding[draw(st.integers(0, n_k - 1))] = False  # some key stays visible
        raw["key_padding"] = padding
    return raw


def transpose(rows):
    return tensor(rows).T.contiguous()


@SETTINGS
@given(multihead_inputs())
def test_multihead_attention(raw):
    E = len(raw["X"][0])
    mha = torch.nn.MultiheadAttention(E, raw["heads"], dropout=0.0, bias=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        # we multiply X W; torch multiplies x Wᵀ, so its weights are ours transposed
        mha.in_proj_weight.copy_(torch.cat([transpose(raw[w]) for w in ("W_Q", "W_K", "W_V")]))
        mha.in_proj_bias.copy_(
            torch.tensor([float(x) for b in ("b_Q", "b_K", "b_V") for x in raw[b]], dtype=torch.float64)
        )
        mha.out_proj.weight.copy_(transpose(raw["W_O"]))
        mha.out_proj.bias.copy_(torch.tensor([float(x) for x in raw["b_O"]], dtype=torch.float64))
    x = tensor(raw["X"])[None]
    kv = tensor(raw.get("X_kv", raw["X"]))[None]
    padding = torch.tensor([raw["key_padding"]]) if "key_padding" in raw else None  # True: ignore that key
    theirs, _ = mha(x, kv, kv, key_padding_mask=padding, need_weights=False)
    scale = magnitude(raw["X"], raw.get("X_kv", []), raw["W_V"], raw["W_O"]) ** 3 * E * E
    assert_close(ours(raw), theirs[0], scale)
