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
from .test_torch import assert_close, magnitude, tensor
from .test_torch_score_variants import alibi_inputs, variants

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs torch==2.13.0)")

pytestmark = pytest.mark.client
# the closed forms behind each run are SymPy's: few examples keep the file to seconds
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def forward(raw, q, k, v, sinks):
    """O (n_q × heads·d_v) in float64, differentiable in q, k, v and the sink logits."""
    return variants(raw, q, k, v, sinks)[0]


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
