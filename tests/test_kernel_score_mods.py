"""ALiBi and soft-capping on the float64 path of symattn.kernel.compare (issue 30, item 2), against torch
float64: the output, the LSE and the gradients (ALiBi's bias is constant; softcap's derivative 1 − tanh²)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.input.errors import ShapeError, SpecError

torch = pytest.importorskip("torch")
CLOSE = {"rule": "allclose", "rtol": 1.2e-7, "atol": 1e-13}
SLOPES = [0.5, 0.25, 0.125, 0.1875]  # per query head, float32 values


def reference(q, k, v, slopes=None, cap=None, causal=True):
    """torch float64 in FlashAttention's order (its attention_ref): z = q·kᵀ/√d capped, then ALiBi's
    − slope·|i + M − N − j|, causal bottom-right."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, 1).double() for t in (k, v))
    n, m = q.shape[2], k.shape[2]
    z = q.double() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if cap is not None:
        z = cap * torch.tanh(z / cap)
    if slopes is not None:
        i, j = torch.arange(n)[:, None], torch.arange(m)[None, :]
        z = z - torch.tensor(slopes, dtype=torch.float64)[:, None, None] * (i + m - n - j).abs()
    if causal:
        z = z.masked_fill(~torch.ones(n, m, dtype=torch.bool).tril(m - n), -math.inf)
    return torch.softmax(z, -1) @ v, torch.logsumexp(z, -1)


@pytest.fixture(scope="module")
def inputs():
    gen = torch.Generator().manual_seed(11)
    q = 2 * torch.randn(2, 4, 48, 16, generator=gen)
    k, v = (2 * torch.randn(2, 2, 64, 16, generator=gen) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize(
    "options", [{"alibi_slopes": SLOPES}, {"softcap": 30.0}, {"softcap": 5.0, "alibi_slopes": SLOPES}]
)
def test_output_and_lse_against_torch_float64(inputs, options):
    from symattn.kernel import compare

    q, k, v = inputs
    out, lse = reference(q, k, v, options.get("alibi_slopes"), options.get("softcap"))
    masks = {"causal": True, "causal_align": "bottom-right"}
    assert compare(out.float(), q, k, v, **masks, **options, **CLOSE).ok
    assert compare(lse.float(), q, k, v, kind="lse", **masks, **options, **CLOSE).ok
    assert not compare(out.float(), q, k, v, **masks, **CLOSE).ok  # the same without the variant


def test_an_error_planted_under_softcap_is_named_there(inputs):
    from symattn.testing import assert_attention_close

    q, k, v = inputs
    out, _ = reference(q, k, v, cap=30.0)
    bad = out.float()
    bad[1, 2, 40, 5] += 0.01
    with pytest.raises(AssertionError) as info:
        assert_attention_close(bad, q, k, v, causal=True, causal_align="bottom-right", softcap=30.0)
    assert " at out[1, 2, 40, 5] (out " in str(info.value).splitlines()[0]


@pytest.mark.parametrize("kind", ["dq", "dk", "dv"])
@pytest.mark.parametrize("variant", [{"slopes": SLOPES}, {"cap": 3.0}, {"slopes": SLOPES, "cap": 3.0}])
def test_alibi_and_softcap_gradients_against_torch_float64(inputs, kind, variant):
    from symattn.kernel import compare

    q, k, v = (t[:, :, :24] for t in inputs)
    gen = torch.Generator().manual_seed(12)
    dout = torch.randn(q.shape, generator=gen)
    wide = [t.double().requires_grad_() for t in (q, k, v)]
    out, _ = reference(*wide, **variant)
    out.backward(dout.double())
    grad = dict(zip(("dq", "dk", "dv"), (t.grad for t in wide)))[kind]
    options = {"causal": True, "causal_align": "bottom-right", "softcap": variant.get("cap")}
    options["alibi_slopes"] = torch.tensor(variant["slopes"]) if "slopes" in variant else None
    assert compare(grad.float(), q, k, v, kind=kind, dout=dout, **options, **CLOSE).ok


def test_variant_arguments_that_do_not_fit_are_one_line(inputs):
    from symattn.kernel import compare

    q, k, v = inputs
    with pytest.raises(ShapeError) as info:
        compare(q, q, k, v, alibi_slopes=[0.5, 0.25])
    assert str(info.value) == "alibi_slopes: shape: (2,); expected (4,) or (2, 4), finite"
    with pytest.raises(SpecError) as info:  # the place of the slope that is not finite, not a shape
        compare(q, q, k, v, alibi_slopes=[0.5, 0.25, float("nan"), 1.0])
    assert str(info.value) == "alibi_slopes[2]: nan is not a finite slope"
    with pytest.raises(SpecError) as info:
        compare(q, q, k, v, alibi_slopes=[[0.5, 0.25, 0.125, 1.0], [0.5, float("-inf"), 0.125, 1.0]])
    assert str(info.value) == "alibi_slopes[1, 1]: -inf is not a finite slope"
    with pytest.raises(SpecError) as info:
        compare(q, q, k, v, softcap=-1.0)
    assert str(info.value) == "softcap: expected a positive number (FlashAttention's softcap), got -1.0"


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.integers(1, 4), st.sampled_from([0.5, 3.0, 50.0]), st.booleans())
def test_hypothesis_softcap_and_alibi_on_small_shapes(n, extra, d, cap, alibi):
    from symattn.kernel import compare

    gen = torch.Generator().manual_seed(n * 100 + extra * 10 + d)
    q = 3 * torch.randn(1, 2, n, d, generator=gen)
    k, v = (3 * torch.randn(1, 1, n + extra - 1, d, generator=gen) for _ in range(2))
    slopes = [0.5, 0.0625] if alibi else None
    out, _ = reference(q, k, v, slopes, cap)
    options = {"softcap": cap, "alibi_slopes": None if slopes is None else np.array(slopes, np.float32)}
    report = compare(out.float(), q, k, v, causal=True, causal_align="bottom-right", **options, **CLOSE)
    assert report.ok, report.text()
