"""Issue 20 (modA) against PyTorch 2.13, float64: grouped-query heads against
``scaled_dot_product_attention(..., enable_gqa=True)``, the sliding window and both causal alignments
against SDPA with the boolean mask built by hand; forward within 1e-12 relative (absolute floor 1e-13 ×
the matrix's largest entry), and the gradients against autograd."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.derivation.intermediates import compute
from symattn.input.spec import load_spec

from .strategies import decimal_text, matrix

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs torch==2.13.0)")
F = torch.nn.functional

pytestmark = pytest.mark.client
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tensor(rows, grad=False):
    return torch.tensor([[float(x) for x in row] for row in rows], dtype=torch.float64, requires_grad=grad)


def assert_close(ours, theirs, size=0.0):
    """Within 1e-12 relative, with an absolute floor of 1e-13 × the matrix's largest |entry|; gradients,
    sums of products whose terms cancel, take the floor 1e-12 × ``size`` (from the inputs' magnitude)
    as tests/test_backward.py does."""
    theirs = theirs.tolist()
    assert len(ours) == len(theirs) and len(ours[0]) == len(theirs[0])
    floor = max(1e-13 * max([0.0] + [abs(x) for row in theirs for x in row]), 1e-12 * size)
    for row, expected in zip(ours, theirs):
        for value, want in zip(row, expected):
            assert abs(float(value) - want) <= max(1e-12 * abs(want), floor), (value, want)


def allowed(raw, n_q, n_k):
    """The boolean mask the spec's mask, window, alignment and padding make, built here from the
    definitions (True: may attend), independently of symattn's reader."""
    offset = n_k - n_q if raw.get("causal_align") == "bottom-right" else 0
    window = raw.get("window")
    mask = raw.get("mask", "none")
    rows = []
    for i in range(n_q):
        row = []
        for j in range(n_k):
            ok = mask[i][j] == 1 if isinstance(mask, list) else True
            if mask == "causal" or window is not None:
                ok = ok and j <= i + offset
            if window is not None and window < n_k:  # a window of n_k keys or more: no window
                ok = ok and j > i + offset - window
            if raw.get("key_padding") and raw["key_padding"][j]:
                ok = False
            row.append(ok)
        rows.append(row)
    return rows


@st.composite
def masks(draw, raw, n_q, n_k):
    """Any of: causal, a window, either alignment, a 0/1 matrix, key padding; rows left with no key are
    redrawn (the reader refuses them, which test_masks_modern checks)."""
    kind = draw(st.sampled_from(["none", "causal", "matrix"]))
    if kind == "causal":
        raw["mask"] = "causal"
    elif kind == "matrix":
        raw["mask"] = [draw(st.lists(st.sampled_from([0, 1]), min_size=n_k, max_size=n_k)) for _ in range(n_q)]
    if draw(st.booleans()) or kind != "causal":
        raw["window"] = draw(st.integers(1, n_k + 1))
    if draw(st.booleans()):
        raw["causal_align"] = draw(st.sampled_from(["top-left", "bottom-right"]))
    if draw(st.booleans()):
        raw["key_padding"] = draw(st.lists(st.booleans(), min_size=n_k, max_size=n_k))
    rows = allowed(raw, n_q, n_k)
    if not all(any(row) for row in rows):
        raw.pop("key_padding", None)
        if raw.get("mask") not in (None, "causal", "none"):
            raw["mask"] = "causal"
        raw["causal_align"] = "bottom-right" if n_q <= n_k else "top-left"
        raw["window"] = n_k  # the whole diagonal: every row keeps its diagonal key
        rows = allowed(raw, n_q, n_k)
    return rows


def loss_of(draw, n_q, width):
    kind = draw(st.sampled_from(["sum", "given"]))
    return {"loss": "sum"} if kind == "sum" else {"grad_output": matrix(draw, n_q, width)}


def backprop(out, backward):
    if "grad_output" in backward:
        out.backward(tensor(backward["grad_output"]))
    else:
        out.sum().backward()


def magnitude(raw, *keys):
    """max |entry|³ × 20 over the inputs, as tests/test_backward.py bounds the gradients' cancellation."""
    return max([1.0] + [abs(float(x)) for key in keys for row in raw.get(key, []) for x in row]) ** 3 * 20


def ours(raw):
    data = compute(load_spec(raw), digits=17, exact=False)
    return data["output"]["value"], data.get("backward", {})


# --- the sliding window and the causal alignment -----------------------------------------------


@st.composite
def windowed(draw):
    n_q, n_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d, dv = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    raw = {"Q": matrix(draw, n_q, d), "K": matrix(draw, n_k, d), "V": matrix(draw, n_k, dv)}
    if n_q != n_k:
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    rows = draw(masks(raw, n_q, n_k))
    raw["backward"] = loss_of(draw, n_q, dv)
    return raw, rows


@SETTINGS
@given(windowed())
def test_window_and_alignment_agree_with_sdpa_and_autograd(case):
    raw, rows = case
    q, k, v = (tensor(raw[name], True) for name in ("Q", "K", "V"))
    out = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=torch.tensor(rows))[0]
    backprop(out, raw["backward"])
    output, grads = ours(raw)
    assert_close(output, out)
    for name, t in (("dQ", q), ("dK", k), ("dV", v)):
        assert_close(grads[name]["value"], t.grad, magnitude(raw, "Q", "K", "V"))


@SETTINGS
@given(st.integers(1, 5), st.integers(1, 5), st.data())
def test_bottom_right_causal_is_the_mask_torch_builds_from_its_lower_right_diagonal(n_q, n_k, data):
    # torch's own bottom-right causal mask: tril with the diagonal at n_k − n_q
    expected = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
    raw = {"Q": matrix(data.draw, n_q, 1), "K": matrix(data.draw, n_k, 1), "V": matrix(data.draw, n_k, 1)}
    raw.update(mask="causal", causal_align="bottom-right")
    if n_q != n_k:
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    if n_q > n_k:  # the first n_q − n_k queries have no key left: refused (see test_masks_modern)
        return
    spec = load_spec(raw)
    got = spec.allowed or tuple(tuple(True for _ in range(n_k)) for _ in range(n_q))
    assert [list(row) for row in got] == expected.tolist()
    q, k, v = (tensor(raw[name]) for name in ("Q", "K", "V"))
    out = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=expected)[0]
    assert_close(ours(raw)[0], out)


# --- grouped-query heads ------------------------------------------------------------------------


@st.composite
def grouped(draw):
    kv = draw(st.sampled_from([1, 2]))
    heads = kv * draw(st.sampled_from([1, 2, 3]))
    d, dv = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    n_q, n_k = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    raw = {
        "Q": matrix(draw, n_q, heads * d),
        "K": matrix(draw, n_k, kv * d),
        "V": matrix(draw, n_k, kv * dv),
        "heads": heads,
        "kv_heads": kv,
    }
    if n_q != n_k:
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    rows = draw(masks(raw, n_q, n_k)) if draw(st.booleans()) else None
    raw["backward"] = loss_of(draw, n_q, heads * dv)
    return raw, rows, (heads, kv, d, dv, n_q, n_k)


@SETTINGS
@given(grouped())
def test_grouped_heads_agree_with_sdpa_enable_gqa_and_autograd(case):
    raw, rows, (heads, kv, d, dv, n_q, n_k) = case
    q, k, v = (tensor(raw[name], True) for name in ("Q", "K", "V"))
    # (batch, heads, tokens, d): head h is columns h·d … (h+1)·d − 1
    qh = q.reshape(n_q, heads, d).transpose(0, 1)[None]
    kh = k.reshape(n_k, kv, d).transpose(0, 1)[None]
    vh = v.reshape(n_k, kv, dv).transpose(0, 1)[None]
    mask = None if rows is None else torch.tensor(rows)
    out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, enable_gqa=True)[0]
    out = out.transpose(0, 1).reshape(n_q, heads * dv)
    backprop(out, raw["backward"])
    output, grads = ours(raw)
    assert_close(output, out)
    for name, t in (("dQ", q), ("dK", k), ("dV", v)):
        assert_close(grads[name]["value"], t.grad, magnitude(raw, "Q", "K", "V"))


@st.composite
def grouped_projection(draw):
    kv = draw(st.sampled_from([1, 2]))
    heads = kv * draw(st.sampled_from([2, 3])) if kv == 1 else 4
    E = heads * draw(st.integers(1, 2))
    width = E // heads * kv
    n_q, n_k = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    raw = {
        "X": matrix(draw, n_q, E),
        "heads": heads,
        "kv_heads": kv,
        "W_Q": matrix(draw, E, E),
        "W_K": matrix(draw, E, width),
        "W_V": matrix(draw, E, width),
        "W_O": matrix(draw, E, E),
        "b_Q": draw(st.lists(decimal_text(), min_size=E, max_size=E)),
        "b_K": draw(st.lists(decimal_text(), min_size=width, max_size=width)),
        "b_V": draw(st.lists(decimal_text(), min_size=width, max_size=width)),
        "b_O": draw(st.lists(decimal_text(), min_size=E, max_size=E)),
    }
    if n_q != n_k or draw(st.booleans()):
        raw["X_kv"] = matrix(draw, n_k, E)
        raw["key_tokens"] = [f"k{j}" for j in range(n_k)]
    else:
        n_k = n_q
    raw["mask"] = "causal"
    raw["causal_align"] = "bottom-right" if n_q <= n_k else "top-left"
    raw["backward"] = loss_of(draw, n_q, E)
    return raw, (heads, kv, E, n_q, n_k)


def vector(items, grad=False):
    return torch.tensor([float(x) for x in items], dtype=torch.float64, requires_grad=grad)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grouped_projection())
def test_grouped_projections_and_output_projection_agree_with_autograd(case):
    raw, (heads, kv, E, n_q, n_k) = case
    x = tensor(raw["X"], True)
    x_kv = tensor(raw["X_kv"], True) if "X_kv" in raw else x
    W = {name: tensor(raw[name], True) for name in ("W_Q", "W_K", "W_V", "W_O")}
    b = {name: vector(raw[name], True) for name in ("b_Q", "b_K", "b_V", "b_O")}
    d = E // heads
    q = (x @ W["W_Q"] + b["b_Q"]).reshape(n_q, heads, d).transpose(0, 1)[None]
    k = (x_kv @ W["W_K"] + b["b_K"]).reshape(n_k, kv, d).transpose(0, 1)[None]
    v = (x_kv @ W["W_V"] + b["b_V"]).reshape(n_k, kv, d).transpose(0, 1)[None]
    mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q if n_q <= n_k else 0)
    heads_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)[0]
    out = heads_out.transpose(0, 1).reshape(n_q, E) @ W["W_O"] + b["b_O"]
    backprop(out, raw["backward"])
    output, grads = ours(raw)
    keys = ("X", "X_kv", "W_Q", "W_K", "W_V", "W_O")
    scale = max([1.0] + [abs(float(x)) for key in keys for row in raw.get(key, []) for x in row]) ** 5 * E**3
    assert_close(output, out)
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        assert_close(grads["d" + name]["value"], W[name].grad, scale)
    for name in ("b_Q", "b_K", "b_V", "b_O"):
        assert_close(grads["d" + name]["value"], b[name].grad[None], scale)
    assert_close(grads["dX"]["value"], x.grad, scale)
    if "X_kv" in raw:
        assert_close(grads["dX_kv"]["value"], x_kv.grad, scale)
