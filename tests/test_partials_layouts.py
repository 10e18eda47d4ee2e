"""Split-KV partials with varlen and a paged KV cache (issue 30): each sequence splits its own keys into
``splits`` ranges of ⌈M_s / splits⌉ keys, and each split's (O_i, LSE_i) in the layout's shapes, and the
merge, are checked against torch's float64 attention over those keys, through the API and from files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from symattn.input.errors import SpecError
from tests.test_compare_spec_variants import cli

torch = pytest.importorskip("torch")
H, HKV, D = 4, 2, 16


def attend(q, k, v):
    """(O, LSE) of q (n, H, D) over k, v (m, HKV, D), float64, GQA."""
    k, v = (t.repeat_interleave(H // HKV, 1) for t in (k, v))
    z = torch.einsum("nhd,mhd->hnm", q, k) / math.sqrt(D)
    return torch.einsum("hnm,mhd->nhd", torch.softmax(z, -1), v), torch.logsumexp(z, -1)


def split_ranges(length: int, count: int):
    size = -(-length // count)
    return [(min(i * size, length), min((i + 1) * size, length)) for i in range(count)]


@pytest.fixture(scope="module")
def varlen():
    """Two sequences of 3 and 5 queries over 10 and 7 keys, split in 2: keys 0–4 and 5–9, 0–3 and 4–6."""
    gen = torch.Generator().manual_seed(3)
    cu_q, cu_k = [0, 3, 8], [0, 10, 17]
    q = torch.randn(8, H, D, generator=gen)
    k, v = (torch.randn(17, HKV, D, generator=gen) for _ in range(2))
    outs, lses = torch.zeros(2, 8, H, D, dtype=torch.float64), torch.zeros(2, H, 8, dtype=torch.float64)
    merged, total = torch.zeros(8, H, D, dtype=torch.float64), torch.zeros(H, 8, dtype=torch.float64)
    for s in range(2):
        rows, start = slice(cu_q[s], cu_q[s + 1]), cu_k[s]
        qs, ks, vs = q[rows].double(), k[start : cu_k[s + 1]].double(), v[start : cu_k[s + 1]].double()
        for i, (a, b) in enumerate(split_ranges(cu_k[s + 1] - start, 2)):
            outs[i, rows], lses[i, :, rows] = attend(qs, ks[a:b], vs[a:b])
        merged[rows], total[:, rows] = attend(qs, ks, vs)
    cu = {"cu_seqlens_q": np.array(cu_q, np.int32), "cu_seqlens_k": np.array(cu_k, np.int32)}
    return (q, k, v), (outs.float(), lses.float(), merged.float(), total.float()), cu


def test_varlen_partials_are_each_sequence_s_splits(varlen):
    from symattn.kernel import compare_partials

    (q, k, v), (O, L, out, lse), cu = varlen
    report = compare_partials(O, L, q, k, v, splits=2, out=out, lse=lse, rtol=1e-6, atol=1e-6, **cu)
    assert report.ok and report.splits == (((0, 5), (0, 4)), ((5, 10), (4, 7)))
    assert [name for name, _ in report.reports][:2] == [
        "split 0 (each sequence's keys 0 to 4; 0 to 3): O_0",
        "split 0 (each sequence's keys 0 to 4; 0 to 3): LSE_0",
    ]
    assert json.loads(report.to_json(True))["splits"] == [
        {"sequence_keys": [[0, 5], [0, 4]]},
        {"sequence_keys": [[5, 10], [4, 7]]},
    ]
    whole = compare_partials(O[[1, 0]], L[[1, 0]], q, k, v, splits=2, rtol=1e-6, atol=1e-6, **cu)
    assert not whole.ok  # the splits swapped: each O_i is checked against its own keys


def test_a_planted_error_names_the_split_and_the_token(varlen):
    from symattn.kernel import compare_partials

    (q, k, v), (O, L, _, _), cu = varlen
    bad = O.clone()
    bad[1, 6, 2, 5] += 0.25
    report = compare_partials(bad, L, q, k, v, splits=2, rtol=1e-6, atol=1e-6, **cu)
    assert not report.ok and report.outputs[0].ok and not report.outputs[1].ok
    assert report.outputs[1].worst_place == "partials_out[1][6, 2, 5] (sequence 1, query 3)"


def test_a_paged_cache_s_partials_are_each_batch_s_splits():
    """Caches of 6 blocks of 4 keys; batch 0 holds 10 keys (blocks 4, 0, 2), batch 1 7 (blocks 1, 5)."""
    from symattn.kernel import compare_partials

    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 2, H, D, generator=gen)  # (batch, queries, heads, d): bnhd
    kc, vc = (torch.randn(6, 4, HKV, D, generator=gen) for _ in range(2))
    table, lengths = np.array([[4, 0, 2], [1, 5, 3]], np.int32), np.array([10, 7], np.int32)
    outs, lses = torch.zeros(2, 2, 2, H, D, dtype=torch.float64), torch.zeros(2, 2, H, 2, dtype=torch.float64)
    for b in range(2):
        k, v = (c[table[b]].reshape(-1, HKV, D)[: lengths[b]].double() for c in (kc, vc))
        for i, (a, z) in enumerate(split_ranges(int(lengths[b]), 2)):
            outs[i, b], lses[i, b] = attend(q[b].double(), k[a:z], v[a:z])
    paged = {"block_table": table, "seqlens_k": lengths, "layout": "bnhd"}
    report = compare_partials(outs.float(), lses.float(), q, kc, vc, splits=2, rtol=1e-6, atol=1e-6, **paged)
    assert report.ok and report.splits == (((0, 5), (0, 4)), ((5, 10), (4, 7)))


def test_a_count_is_needed_and_an_empty_split_is_refused(varlen):
    from symattn.kernel import compare_partials

    (q, k, v), (O, L, _, _), cu = varlen
    with pytest.raises(SpecError) as info:
        compare_partials(O, L, q, k, v, splits=[0, 5, 17], **cu)
    assert str(info.value) == "splits: expected a number of splits (each sequence splits its own keys), got [0, 5, 17]"
    with pytest.raises(SpecError) as info:  # 8 splits: split 5 holds none of sequence 0's 10 keys (2 each)
        compare_partials(torch.zeros(8, 8, H, D), torch.zeros(8, H, 8), q, k, v, splits=8, **cu)
    assert str(info.value) == (
        "splits: each sequence's keys none; 5 to 5: query 0 (0-based) attends none of them; a kernel writes LSE −inf "
        "and O 0 there, which this check does not take"
    )


def test_varlen_partials_from_files(varlen, tmp_path, capsys):
    """symattn compare SPEC FILE --partials of a varlen spec: the API's report, the file's tensors named."""
    from safetensors.numpy import save_file

    from symattn.kernel import compare_partials

    (q, k, v), (O, L, out, lse), cu = varlen
    for name, t in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", t.numpy())
    np.save(tmp_path / "cu_q.npy", cu["cu_seqlens_q"])
    np.save(tmp_path / "cu_k.npy", cu["cu_seqlens_k"])
    save_file(
        {"partials_out": O.numpy(), "partials_lse": L.numpy(), "out": out.numpy()}, str(tmp_path / "p.safetensors")
    )
    spec = tmp_path / "s.toml"
    lines = ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', 'cu_seqlens_q = "cu_q.npy"', 'cu_seqlens_k = "cu_k.npy"']
    spec.write_text("\n".join(lines) + "\n")
    args = (spec, tmp_path / "p.safetensors", "--partials", "--splits", "2", "--format", "json", "--rtol", "1e-6")
    code, text, err = cli(capsys, *args, "--atol", "1e-6")
    api = compare_partials(
        O, L, q, k, v, splits=2, out=out, rtol=1e-6, atol=1e-6, source=str(tmp_path / "p.safetensors"), **cu
    )
    assert (code, err) == (0, "") and text == api.to_json()


def test_descales_are_refused_with_partials(varlen, tmp_path, capsys):
    (q, k, v), _, cu = varlen
    for name, t in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", t.numpy())
    np.save(tmp_path / "cu.npy", cu["cu_seqlens_k"])
    np.save(tmp_path / "qd.npy", np.ones((2, HKV), np.float32))
    spec = tmp_path / "s.toml"
    keys = ['cu_seqlens_q = "cu.npy"', 'cu_seqlens_k = "cu.npy"', 'q_descale = "qd.npy"']
    spec.write_text("\n".join(['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', *keys]) + "\n")
    assert cli(capsys, spec, tmp_path / "p.safetensors", "--partials") == (
        2,
        "",
        f"symattn: {spec}: q_descale: --partials takes Q, K and V, with varlen's or a paged cache's keys\n",
    )
