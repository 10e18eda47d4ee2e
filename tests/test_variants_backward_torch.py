"""The backward pass of ALiBi, softcap and sinks against torch's autograd (torch==2.13.0, CPU, float64).

The forward pass is written here in float64 as test_torch_score_variants.py checks it: the scaled
scores plus −m_h·|i − j|, c·tanh(z / c), the mask as −∞, a softmax over the scores with the sink as one
more column (then dropped), × V per head, side by side. L = Σ O; autograd gives dQ, dK, dV, the sink
logits' gradient and, with projections, dW_Q, dW_K, dW_V.
"""

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.derivation.intermediates import compute
from symattn.input.spec import load_spec

from .strategies import multihead_base
from .test_torch_score_variants import alibi_bias, alibi_inputs, slopes

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs torch==2.13.0)")

pytestmark = pytest.mark.client
# the closed forms behind each run are SymPy's: few examples keep the file to seconds
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tensor(rows):
    return torch.tensor([[float(Fraction(x)) for x in row] for row in rows], dtype=torch.float64)


def assert_close(ours, theirs, scale):
    """Within 1e-12, relative, with an absolute floor of 1e-12 × the matrix's own scale."""
    assert len(ours) == theirs.shape[0] and len(ours[0]) == theirs.shape[1]
    for row, expected in zip(ours, theirs.tolist()):
        for value, want in zip(row, expected):
            assert abs(float(value) - want) <= 1e-12 * max(abs(want), scale), (value, want)


def magnitude(*matrices):
    return max([1.0] + [abs(float(Fraction(x))) for m in matrices for row in m for x in row])


def forward(raw, q, k, v, sinks):
    """O (n_q × heads·d_v) in float64, differentiable in q, k, v and the sink logits."""
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
        a = torch.softmax(z, dim=-1)
    else:
        a = torch.softmax(torch.cat([z, sinks[:, None, None].expand(heads, n_q, 1)], dim=-1), dim=-1)[..., :-1]
    return (a @ vs).transpose(0, 1).reshape(n_q, -1)


def sink_tensor(raw):
    if "sinks" not in raw:
        return None
    return torch.tensor([float(Fraction(s)) for s in raw["sinks"]], dtype=torch.float64, requires_grad=True)


@st.composite
def variant_inputs(draw):
    """ALiBi, softcap or sinks, alone or together, on 1 to 3 heads, with a causal, a matrix or no mask."""
    raw = draw(alibi_inputs())
    kinds = draw(st.sets(st.sampled_from(("alibi", "softcap", "sinks")), min_size=1))
    if "alibi" not in kinds:
        raw.pop("alibi", None)
        raw.pop("alibi_slopes", None)
    if "softcap" in kinds:
        raw["softcap"] = draw(st.sampled_from(["0.5", "1", "2.5", "30", "1/3"]))
    if "sinks" in kinds:
        raw["sinks"] = [draw(st.sampled_from(["0", "-1.5", "0.25", "3", "1/3"])) for _ in range(raw["heads"])]
    return raw


@SETTINGS
@given(variant_inputs())
def test_variant_gradients_agree_with_autograd(raw):
    q, k, v = (tensor(raw[name]).requires_grad_() for name in ("Q", "K", "V"))
    sinks = sink_tensor(raw)
    forward(raw, q, k, v, sinks).sum().backward()
    data = compute(load_spec({**raw, "backward": {"loss": "sum"}}), digits=17, exact=False)["backward"]
    scale = magnitude(raw["Q"], raw["K"], raw["V"]) ** 3 * 20  # as test_backward's autograd test
    for name, t in (("dQ", q), ("dK", k), ("dV", v)):
        assert_close(data[name]["value"], t.grad, scale)
    if sinks is not None:
        assert_close(data["dsinks"]["value"], sinks.grad[None], scale)
    else:
        assert "dsinks" not in data


@st.composite
def projected_inputs(draw):
    raw, E, n_q, n_k = multihead_base(draw)
    if draw(st.booleans()):
        raw["alibi"] = True
    if draw(st.booleans()):
        raw["mask"] = "causal"
    if draw(st.booleans()) or "alibi" not in raw:
        raw["softcap"] = draw(st.sampled_from(["0.5", "2", "1/3"]))
    if draw(st.booleans()):
        raw["sinks"] = [draw(st.sampled_from(["0", "1.5", "-2"])) for _ in range(raw["heads"])]
    return raw


@SETTINGS
@given(projected_inputs())
def test_variant_gradients_with_projections(raw):
    """X W (+ b), the variants per head, W_O (+ b_O): dW_Q, dW_K, dW_V and dsinks by autograd."""
    x, kv = tensor(raw["X"]), tensor(raw.get("X_kv", raw["X"]))

    def vec(name):
        return torch.tensor([float(Fraction(b)) for b in raw[name]], dtype=torch.float64)

    W = {name: tensor(raw[name]).requires_grad_() for name in ("W_Q", "W_K", "W_V")}
    q, k, v = (src @ W["W_" + n] + vec("b_" + n) for src, n in ((x, "Q"), (kv, "K"), (kv, "V")))
    sinks = sink_tensor(raw)
    (forward(raw, q, k, v, sinks) @ tensor(raw["W_O"]) + vec("b_O")).sum().backward()
    data = compute(load_spec({**raw, "backward": {"loss": "sum"}}), digits=17, exact=False)["backward"]
    E = x.shape[1]
    scale = (magnitude(raw["X"], raw.get("X_kv", []), raw["W_V"], raw["W_O"]) ** 3 * E * E) ** 2
    for name in ("W_Q", "W_K", "W_V"):
        assert_close(data["d" + name]["value"], W[name].grad, scale)
    if sinks is not None:
        assert_close(data["dsinks"]["value"], sinks.grad[None], scale)
