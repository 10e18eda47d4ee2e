"""The layouts of 2026 in symattn.kernel.compare (issue 30, item 3): varlen, paged KV, decode, MLA, FP8 descales.

Each against torch's float64 attention of the same inputs: rounded to float32 it must be within float32's
rounding of the exact values (rtol 1.2e-7), and within 1e-13 of an exact 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from symattn.input.errors import ShapeError, SpecError

torch = pytest.importorskip("torch")
F = torch.nn.functional
CLOSE = {"rule": "allclose", "rtol": 1.2e-7, "atol": 1e-13}


def sdpa64(q, k, v, causal=False, **options):
    """torch's float64 attention of (H, n, d) heads, causal bottom-right (FlashAttention's alignment)."""
    q, k, v = (t.double() for t in (q, k, v))
    n, m = q.shape[-2], k.shape[-2]
    mask = torch.ones(n, m, dtype=torch.bool).tril(m - n) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, **options)


@pytest.fixture(scope="module")
def packed():
    """Four packed sequences (one with no query) of 4 query heads and 2 kv heads, and torch's float64 output."""
    gen = torch.Generator().manual_seed(3)
    lens_q, lens_k = [5, 0, 7, 3], [6, 2, 7, 9]
    q = torch.randn(sum(lens_q), 4, 8, generator=gen)
    k, v = (torch.randn(sum(lens_k), 2, 8, generator=gen) for _ in range(2))
    cq = torch.tensor(np.cumsum([0, *lens_q]), dtype=torch.int32)
    ck = torch.tensor(np.cumsum([0, *lens_k]), dtype=torch.int32)
    parts = [
        sdpa64(*(t[c[s] : c[s + 1]].transpose(0, 1) for t, c in ((q, cq), (k, ck), (v, ck))), causal=True).transpose(
            0, 1
        )
        for s in range(4)
    ]
    return q, k, v, cq, ck, torch.cat(parts)


def test_varlen_against_torch_float64_and_places_name_the_sequence(packed):
    from symattn.kernel import compare

    q, k, v, cq, ck, ref = packed
    options = {"cu_seqlens_q": cq, "cu_seqlens_k": ck, "causal": True, "causal_align": "bottom-right"}
    report = compare(ref.float(), q, k, v, **options, **CLOSE)
    assert report.ok and report.comparison.where.convention == "out[token, head, column]"
    bad = ref.float().clone()
    bad[9, 2, 5] += 0.125
    report = compare(bad, q, k, v, **options, rtol=1e-3, atol=1e-3)
    assert not report.ok and report.worst_place == "out[9, 2, 5] (sequence 2, query 4)"


def varlen_gradients(q, k, v, cq, ck, dout):
    """torch's float64 dK and dV of packed sequences, each sequence alone (causal bottom-right)."""
    dk, dv = (torch.zeros(t.shape, dtype=torch.float64) for t in (k, v))
    for s in range(len(cq) - 1):
        rows, keys = slice(int(cq[s]), int(cq[s + 1])), slice(int(ck[s]), int(ck[s + 1]))
        qs, ks, vs = (t[r].transpose(0, 1).double().requires_grad_() for t, r in ((q, rows), (k, keys), (v, keys)))
        sdpa64(qs, ks, vs, causal=True).backward(dout[rows].transpose(0, 1).double())
        dk[keys], dv[keys] = ks.grad.transpose(0, 1), vs.grad.transpose(0, 1)
    return dk, dv


def test_varlen_gradients_sum_each_sequence_alone(packed):
    from symattn.kernel import compare

    q, k, v, cq, ck, _ = packed
    gen = torch.Generator().manual_seed(4)
    dout = torch.randn(q.shape, generator=gen)
    dk, _ = varlen_gradients(q, k, v, cq, ck, dout)
    options = {"cu_seqlens_q": cq, "cu_seqlens_k": ck, "causal": True, "causal_align": "bottom-right"}
    report = compare(dk.float(), q, k, v, kind="dk", dout=dout, **options, **CLOSE)
    assert report.ok and report.comparison.where.convention == "out[key, head, column]"
    bad = dk.float().clone()
    bad[int(ck[2]) + 1, 1, 3] += 1  # the second key of sequence 2
    report = compare(bad, q, k, v, kind="dk", dout=dout, **options, **CLOSE)
    assert report.worst_place == f"out[{int(ck[2]) + 1}, 1, 3] (sequence 2, key 1)"  # a row of dK is a key's


def test_a_paged_cache_against_torch_float64():
    from symattn.kernel import compare

    gen = torch.Generator().manual_seed(5)
    k_cache, v_cache = (torch.randn(6, 4, 2, 8, generator=gen) for _ in range(2))  # 6 blocks of 4 keys
    table = torch.tensor([[5, 0, 3], [2, 4, 1]], dtype=torch.int32)
    lengths = torch.tensor([10, 7], dtype=torch.int32)
    q = torch.randn(2, 3, 4, 8, generator=gen)  # (batch, queries, heads, d), as flash_attn_with_kvcache
    refs = []
    for b in range(2):
        k, v = (c[table[b].long()].reshape(-1, 2, 8)[: lengths[b]].transpose(0, 1) for c in (k_cache, v_cache))
        refs.append(sdpa64(q[b].transpose(0, 1), k, v, causal=True).transpose(0, 1))
    options = {"block_table": table, "seqlens_k": lengths, "layout": "bnhd", "causal": True}
    report = compare(torch.stack(refs).float(), q, k_cache, v_cache, causal_align="bottom-right", **options, **CLOSE)
    assert report.ok and report.comparison.where.convention == "out[batch, query, head, column]"
    with pytest.raises(SpecError) as info:
        compare(q, q, k_cache, v_cache, block_table=table + 1, seqlens_k=lengths, layout="bnhd")
    assert str(info.value) == "block_table[0, 0]: 6 is no block of the caches (0 to 5)"
    with pytest.raises(SpecError) as info:
        compare(q, q, k_cache, v_cache, block_table=table, seqlens_k=[13, 7], layout="bnhd")
    assert str(info.value) == "seqlens_k[0]: 13 is not 1 to 12, the keys batch 0's cache holds"


def test_a_decode_shape_a_few_queries_against_a_long_cache():
    from symattn.kernel import compare

    gen = torch.Generator().manual_seed(6)
    q = torch.randn(2, 4, 2, 64, generator=gen)
    k, v = (torch.randn(2, 2, 600, 64, generator=gen) for _ in range(2))
    ref = sdpa64(q, k, v, causal=True)
    report = compare(ref.float(), q, k, v, causal=True, causal_align="bottom-right", **CLOSE)
    assert report.ok and report.comparison.batch_heads == (2, 4)


def test_mla_head_dims_192_and_128_forward_and_backward():
    from symattn.kernel import compare

    gen = torch.Generator().manual_seed(7)
    q, k = (torch.randn(1, 2, 16, 192, generator=gen) for _ in range(2))
    v, dout = (torch.randn(1, 2, 16, 128, generator=gen) for _ in range(2))
    wide = [t.double().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*wide, is_causal=True)  # the scale 1/√192, from d_qk
    out.backward(dout.double())
    assert compare(out.detach().float(), q, k, v, causal=True, **CLOSE).ok
    for kind, grad in zip(("dq", "dk", "dv"), (t.grad for t in wide)):
        assert compare(grad.float(), q, k, v, kind=kind, dout=dout, causal=True, **CLOSE).ok, kind


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_inputs_with_descales_as_flash_attn_3_takes_them(fmt):
    from symattn.kernel import compare

    gen = torch.Generator().manual_seed(8)
    dtype = getattr(torch, fmt)
    q = (2 * torch.randn(2, 32, 4, 16, generator=gen)).to(dtype)  # (batch, queries, heads, d)
    k, v = ((2 * torch.randn(2, 32, 2, 16, generator=gen)).to(dtype) for _ in range(2))
    qs, ks, vs = (2 * torch.rand(2, 2, generator=gen) for _ in range(3))  # (batch, kv heads)
    each = qs.repeat_interleave(2, dim=1)  # a query head's kv head's q_descale

    def scaled(x, s):
        return (x.double() * s.double()[:, None, :, None]).transpose(1, 2)

    ref = sdpa64(scaled(q, each), scaled(k, ks), scaled(v, vs), causal=True).transpose(1, 2)
    options = {"layout": "bnhd", "causal": True, "q_descale": qs, "k_descale": ks, "v_descale": vs}
    report = compare(ref.float(), q, k, v, **options, **CLOSE)
    assert report.ok and report.comparison.batch_heads == (2, 4)
    assert not compare(ref.float(), q, k, v, layout="bnhd", causal=True, **CLOSE).ok  # without the descales
    with pytest.raises(ShapeError) as info:
        compare(ref.float(), q, k, v, layout="bnhd", q_descale=qs[:, :1])
    assert str(info.value) == "q_descale: shape: (2, 1); flash_attn_3 takes (batch, kv heads) = (2, 2)"
    with pytest.raises(SpecError) as info:
        compare(ref.float(), q, k, v, layout="bnhd", kind="dq", dout=ref.float(), q_descale=qs)
    assert str(info.value) == "kind: dq is for training: FP8 descales and paged caches take kind 'output' or 'lse'"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"cu_seqlens_q": [0, 4]}, "cu_seqlens_k: missing: varlen takes both"),
        (
            {"cu_seqlens_q": [0, 3], "cu_seqlens_k": [0, 4]},
            "cu_seqlens_q[1]: 3 is the last offset; q holds 4 tokens",
        ),
        (
            {"cu_seqlens_q": [0.0, 4.0], "cu_seqlens_k": [0, 4]},
            "cu_seqlens_q: expected 1 axis of whole numbers, got shape (2,) of float64",
        ),
        (
            {"cu_seqlens_q": [0, 4], "cu_seqlens_k": [0, 4], "block_table": [[0]]},
            "block_table: give varlen's cu_seqlens or a paged cache's block_table, not both",
        ),
        (
            {"cu_seqlens_q": [0, 2, 4], "cu_seqlens_k": [0, 4, 4]},
            "cu_seqlens_k: sequence 1 has queries and no key; softmax is undefined there",
        ),
    ],
)
def test_layout_arguments_that_do_not_fit_are_one_line(options, message):
    from symattn.kernel import compare

    x = np.ones((4, 1, 2), np.float32)
    with pytest.raises(SpecError) as info:
        compare(x, x, x, x, **options)
    assert str(info.value) == message


def test_a_varlen_sequence_whose_query_sees_no_key_names_the_sequence():
    from symattn.kernel import compare

    x = np.ones((4, 1, 2), np.float32)
    with pytest.raises(SpecError) as info:  # sequence 1: 3 queries, 1 key, bottom-right
        compare(
            x, x, x[:2], x[:2], cu_seqlens_q=[0, 1, 4], cu_seqlens_k=[0, 1, 2], causal=True, causal_align="bottom-right"
        )
    assert str(info.value) == (
        "causal_align: sequence 1: query 0 (0-based) may attend no key (causal_align = 'bottom-right' puts its "
        "diagonal before the first key); softmax is undefined there"
    )


def test_varlen_descales_a_factor_per_sequence_are_refused_in_one_line():
    """flash_attn_3 takes varlen's descales per sequence, (sequences, kv heads); the engine's scale is one per
    head, so only one factor for all sequences is taken, and the other is one line that says so."""
    from symattn.kernel import compare

    x = np.ones((8, 4, 8), np.float32)
    y = np.ones((13, 2, 8), np.float32)
    layout = {"cu_seqlens_q": [0, 3, 3, 8], "cu_seqlens_k": [0, 5, 7, 13]}
    with pytest.raises(ShapeError) as info:
        compare(x, x, y, y, **layout, k_descale=np.ones((3, 2), np.float32))
    assert str(info.value) == (
        "k_descale: shape: (3, 2); varlen takes one factor for all 3 sequences here, (1, 2) (flash_attn_3's factor "
        "per sequence, (3, 2), is not taken: compare the sequences as batches of their own)"
    )
    assert compare(x, x, y, y, **layout, k_descale=np.ones((1, 2), np.float32)).ok
