"""Testing an attention kernel against the exact values: torch's SDPA stands in for your kernel.

Run it with `pytest test_sdpa_kernel.py --symattn-summary` (add `-n 4` with pytest-xdist): the
summary at the end is one table of every check. The documentation's test suite runs this file as it is.
"""

import json
import math

import pytest
import torch
import torch.nn.functional as F

from symattn.testing import assert_attention_close


def kernel(q, k, v, causal):
    """The kernel under test: swap in your own (FlashAttention, a Triton kernel, ...)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def naive(q, k, v, causal):
    """The naive attention in the inputs' dtype, softmax in float32: FlashAttention's tests' reference."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-1, -2)
    if causal:
        n, m = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(n, m, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


def inputs(dtype, heads=4, kv_heads=2, n=64, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, heads, n, d, generator=g).to(dtype)
    k, v = (torch.randn(2, kv_heads, n, d, generator=g).to(dtype) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("causal", [False, True])
def test_float32_within_pytorchs_sdpa_tolerances(causal):
    q, k, v = inputs(torch.float32)
    assert_attention_close(kernel(q, k, v, causal), q, k, v, causal=causal)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_flashattentions_rule_against_the_naive_reference(dtype):
    q, k, v = inputs(dtype)
    out, reference = kernel(q, k, v, True), naive(q, k, v, True)
    assert_attention_close(out, q, k, v, causal=True, rule="flash", reference=reference)


def test_the_report_of_a_check():
    q, k, v = inputs(torch.float32, heads=2, kv_heads=1)  # multi-query: one key/value head
    report = assert_attention_close(kernel(q, k, v, False), q, k, v)
    data = json.loads(report.to_json(summary=True))  # as `symattn compare --format json --summary` prints it
    assert data["verdict"]["pass"] and data["summary"]["entries"] == 2 * 2 * 64 * 32
    print(report.text())  # pytest -s shows it: the largest errors, each (batch, head), the histogram
