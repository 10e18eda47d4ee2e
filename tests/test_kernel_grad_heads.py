"""dQ, dK and dV of every (batch, head), grouped-query (issue 30, item 2): in memory and from a spec."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.cli.commands import main
from symattn.input.errors import ShapeError

torch = pytest.importorskip("torch")
F = torch.nn.functional

B, H, G, N, D = 2, 4, 2, 128, 64


def grads(q, k, v, dout, **mask):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **mask).backward(dout)
    return {"dq": q.grad, "dk": k.grad, "dv": v.grad}


@pytest.fixture(scope="module")
def sdpa():
    """(2, 4, 128, 64) with 2 kv heads, causal: float32 inputs, dO, torch's float32 and float64 gradients."""
    gen = torch.Generator().manual_seed(31)
    q = torch.randn(B, H, N, D, generator=gen)
    k, v = (torch.randn(B, G, N, D, generator=gen) for _ in range(2))
    dout = torch.randn(B, H, N, D, generator=gen)
    wide = grads(q.double(), k.double(), v.double(), dout.double(), is_causal=True)
    return q, k, v, dout, grads(q, k, v, dout, is_causal=True), wide


def float64_agrees(wide, q, k, v, **options):
    """torch's float64 result rounded to float32 is within float32's rounding of the exact values, and within
    float64's cancellation (1e-13) of an exact 0 (a float64 result itself leaves float64's ULPs to arb)."""
    from symattn.kernel import compare

    report = compare(wide.float(), q, k, v, rule="allclose", rtol=1.2e-7, atol=1e-13, **options)
    assert report.ok, report.text()


@pytest.mark.parametrize("kind", ["dq", "dk", "dv"])
def test_sdpa_gqa_causal_gradients_hold(sdpa, kind):
    from symattn.testing import assert_attention_close

    q, k, v, dout, got, _ = sdpa
    report = assert_attention_close(got[kind], q, k, v, kind=kind, dout=dout, causal=True)
    axis = "query" if kind == "dq" else "key"
    assert report.comparison.where.convention == f"out[batch, head, {axis}, column]"
    assert report.comparison.batch_heads == (B, H if kind == "dq" else G)


@pytest.mark.parametrize("kind", ["dq", "dk", "dv"])
def test_torch_float64_gradients_agree_with_the_exact_ones(sdpa, kind):
    q, k, v, dout, _, _ = sdpa
    q, k, v, dout = q[:, :, :32, :16], k[:, :, :32, :16], v[:, :, :32, :16], dout[:, :, :32, :16]
    wide = grads(q.double(), k.double(), v.double(), dout.double(), is_causal=True)[kind]
    float64_agrees(wide, q, k, v, kind=kind, dout=dout, causal=True)


def test_an_error_planted_in_a_summed_dk_is_named_there(sdpa):
    from symattn.testing import assert_attention_close

    q, k, v, dout = (t[:, :, :80, :16] for t in sdpa[:4])
    bad = grads(q, k, v, dout, is_causal=True)["dk"]
    bad[1, 0, 77, 5] += 0.5
    with pytest.raises(AssertionError) as info:
        assert_attention_close(bad, q, k, v, kind="dk", dout=dout, causal=True)
    first = str(info.value).splitlines()[0]
    assert first.startswith("fails torch.allclose's rule |out − exact| ≤ 0.00001 + 1.3e-6·|exact|: ")
    assert " at out[1, 0, 77, 5] (out " in first


def test_dk_of_one_kv_head_is_the_sum_of_its_query_heads(sdpa):
    """MQA: the exact dK of one kv head is the sum of the four query heads' own (each a head of its own)."""
    from symattn.kernel import compare

    q, k, v, dout, _, _ = sdpa
    q, k, v, dout = q[:1, :, :16, :8], k[:1, :1, :16, :8], v[:1, :1, :16, :8], dout[:1, :, :16, :8]
    wide = [t.double() for t in (q, k, v, dout)]
    each = [grads(wide[0][:, h : h + 1], wide[1], wide[2], wide[3][:, h : h + 1])["dk"] for h in range(H)]
    summed = sum(each)
    float64_agrees(summed, q, k, v, kind="dk", dout=dout)
    assert compare(summed.float(), q, k, v, kind="dk", dout=dout).comparison.batch_heads == (1, 1)
    with pytest.raises(AssertionError):  # one query head's alone is not the kv head's gradient
        from symattn.testing import assert_attention_close

        assert_attention_close(each[0].float(), q, k, v, kind="dk", dout=dout)


def test_a_dout_of_the_wrong_heads_is_one_line(sdpa):
    from symattn.kernel import compare

    q, k, v, dout, got, _ = sdpa
    with pytest.raises(ShapeError) as info:
        compare(got["dq"], q, k, v, kind="dq", dout=dout[:, :2])
    assert str(info.value) == "dout: shape: (2, 2, 128, 64); O's shape is (2, 4, 128, 64)"
    with pytest.raises(ShapeError) as info:
        compare(got["dk"][:, :1], q, k, v, kind="dk", dout=dout)
    assert str(info.value) == "out: shape: (2, 1, 128, 64); the dk of these q, k and v is (2, 2, 128, 64)"


@pytest.fixture
def batched_spec(tmp_path):
    """A spec of (2, 4, 8, 4) Q and (2, 2, 8, 4) K, V files whose [backward] names a batched dO file."""
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 8, 4, generator=gen)
    k, v = (torch.randn(2, 2, 8, 4, generator=gen) for _ in range(2))
    dout = torch.randn(2, 4, 8, 4, generator=gen)
    for name, t in (("q", q), ("k", k), ("v", v), ("do", dout)):
        np.save(tmp_path / f"{name}.npy", t.numpy())
    np.save(tmp_path / "o.npy", F.scaled_dot_product_attention(q, k, v, enable_gqa=True).numpy())
    for kind, g in grads(q, k, v, dout).items():
        np.save(tmp_path / f"{kind}.npy", g.numpy())
    spec = tmp_path / "spec.toml"
    spec.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n\n[backward]\ngrad_output = "do.npy"\n')
    return tmp_path, (q, k, v, dout)


def test_a_spec_whose_backward_names_a_batched_dout_compares_o_and_every_gradient(batched_spec, capsys):
    from symattn.kernel import compare

    folder, (q, k, v, dout) = batched_spec
    spec = str(folder / "spec.toml")
    assert main(["compare", spec, str(folder / "o.npy"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["quantity"] == "output"
    for kind in ("dq", "dk", "dv"):
        result = str(folder / f"{kind}.npy")
        assert main(["compare", spec, result, "--quantity", kind, "--format", "json"]) == 0
        from_spec = json.loads(capsys.readouterr().out)
        assert main(["compare", spec, result, "--quantity", kind, "--grad-output", str(folder / "do.npy")]) == 0
        capsys.readouterr()
        report = compare(torch.from_numpy(np.load(result)), q, k, v, kind=kind, dout=dout, worst=None)
        ours = json.loads(report.to_json())
        assert from_spec["summary"] == ours["summary"] and len(from_spec["entries"]) == len(ours["entries"])


def test_a_batched_grad_output_of_the_wrong_shape_is_one_line(batched_spec, capsys):
    folder, _ = batched_spec
    np.save(folder / "bad.npy", np.zeros((2, 2, 8, 4), np.float32))
    args = ["compare", str(folder / "spec.toml"), str(folder / "dk.npy"), "--quantity", "dk"]
    assert main([*args, "--grad-output", str(folder / "bad.npy")]) == 2
    assert (
        capsys.readouterr().err
        == f"symattn: {folder / 'bad.npy'}: shape: dO is (2, 2, 8, 4) and O is (2, 4, 8, 4) (bhnd)\n"
    )
    (folder / "spec.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n\n[backward]\ngrad_output = "bad.npy"\n')
    assert main(args) == 2
    assert capsys.readouterr().err == (
        f"symattn: {folder / 'spec.toml'}: backward.grad_output: 'bad.npy': shape (2, 2, 8, 4); O's is (2, 4, 8, 4) (bhnd)\n"
    )


@settings(max_examples=12, deadline=None)
@given(
    st.integers(1, 2),
    st.integers(1, 2),
    st.integers(1, 3),
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from(["dq", "dk", "dv"]),
)
def test_hypothesis_gradients_of_any_small_gqa_shape_agree_with_torch_float64(batch, kv, group, n, m, d, causal, kind):
    gen = torch.Generator().manual_seed(batch * 1000 + kv * 100 + n * 10 + m)
    heads = kv * group
    q = torch.randn(batch, heads, n, d, generator=gen)
    k, v = (torch.randn(batch, kv, m, d, generator=gen) for _ in range(2))
    dout = torch.randn(batch, heads, n, d, generator=gen)
    mask = {}
    if causal:  # bottom-right, so that every query attends a key (FlashAttention's alignment)
        mask["attn_mask"] = torch.ones(n, m, dtype=torch.bool).tril(m - n)
        mask["attn_mask"][:, 0] |= mask["attn_mask"].sum(1) == 0  # no key: left to the refusal test
    align = {"causal": causal, "causal_align": "bottom-right"} if causal and n <= m else {}
    if causal and n > m:
        return  # rows with no key are refused (test_kernel_api)
    wide = grads(q.double(), k.double(), v.double(), dout.double(), **mask)[kind]
    float64_agrees(wide, q, k, v, kind=kind, dout=dout, **align)


TYPED = """\
heads = 4
kv_heads = 2
mask = "causal"
softcap = 2
alibi = true
Q = [[0.5, -1.25, 1, 0.75, -0.5, 2, 0.25, 1.5], [1.5, 0.25, -0.75, 1, 1.25, -1, 0.5, 0.5],
     [-1, 2, 0.5, -0.25, 0.75, 0.5, -1.5, 1], [0.25, 0.5, 1.75, -1.5, 0, 1, 1, -0.75]]
K = [[1, 0.5, -0.5, 1.25], [0.75, -1, 1.5, 0.25], [-0.5, 1.25, 0.5, -1], [2, 0.25, -1.25, 0.5]]
V = [[1, -2, 0.5, 3], [0.25, 1, -1.5, 2], [-1, 0.5, 2, -0.75], [1.5, -0.25, 1, 0.5]]
[backward]
"""
DO = [[1, -0.5, 0.25, 2, -1, 0.5, 1.5, -0.75], [0.5, 1, -1, 0.25, 2, -1.5, 0.75, 1],
      [-0.25, 0.75, 1.5, -2, 0.5, 1, -0.5, 0.25], [2, 0.25, -0.75, 1, -0.25, 0.5, 1, -1.5]]  # fmt: skip


def test_a_typed_or_json_do_of_a_multi_head_spec_is_the_files_do(tmp_path, capsys):
    """[backward] grad_output typed in the spec was "missing", and a JSON --grad-output "a .npy or .safetensors
    file of O's shape", where a .npy file of the same numbers was taken: all three give one report now."""
    np.save(tmp_path / "do.npy", np.array(DO, np.float32))
    np.save(tmp_path / "dq.npy", np.zeros((4, 8)))
    (tmp_path / "do.json").write_text(json.dumps(DO))
    (tmp_path / "file.toml").write_text(TYPED + 'grad_output = "do.npy"\n')
    (tmp_path / "typed.toml").write_text(TYPED + f"grad_output = {DO}\n")
    reports = []
    for spec, more in (("file", []), ("typed", []), ("file", ["--grad-output", str(tmp_path / "do.json")])):
        code = main(["compare", str(tmp_path / f"{spec}.toml"), str(tmp_path / "dq.npy"), "--quantity", "dq", *more])
        reports.append((code, capsys.readouterr()))
    assert reports[0][0] == 0 and reports[0][1].err == ""
    assert "\n8 of 32 entries are correctly rounded (error at most 0.5 ULP).\n" in reports[0][1].out  # the zeros
    assert reports[1:] == [reports[0]] * 2
    (tmp_path / "typed.toml").write_text(TYPED + f"grad_output = {DO}\n".replace("[[1,", "[[0.1,"))
    assert main(["compare", str(tmp_path / "typed.toml"), str(tmp_path / "dq.npy"), "--quantity", "dq"]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {tmp_path / 'typed.toml'}: backward.grad_output: dO[1][1]: 0.1 is not a float32 value\n"
    )


def test_each_heads_row_stats_are_made_once_in_a_comparison(monkeypatch):
    """dK decided entry by entry refines some entries of most heads, and then the rows its row-relative figures
    need, head by head again: each head's ℓ and D balls (every query's) are made once and kept for the
    second pass (it made them twice: half of a 2 × 32 × 256 causal dK's 20 s), then dropped."""
    from symattn.kernel import refine_gradients
    from symattn.kernel.oracle import compare

    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 4, 128, 32, generator=gen) for _ in range(3))
    dout = torch.randn(1, 4, 128, 32, generator=gen)
    made = grads(q, k, v, dout, is_causal=True)
    chunks: list[tuple[int, int]] = []
    ell_and_d = refine_gradients._ell_and_d

    def counted(head, chunk, *rest):
        chunks.append((id(head), chunk[0]))
        return ell_and_d(head, chunk, *rest)

    monkeypatch.setattr(refine_gradients, "_ell_and_d", counted)
    report = compare(made["dk"], q, k, v, kind="dk", dout=dout, causal=True, rule="allclose", atol=1e-3, rtol=1e-3)
    assert report.ok and report.comparison.refined == 14
    heads = {h for h, _ in chunks}
    assert len(chunks) == len(set(chunks)) == 4 * len(heads) and len(heads) == 4  # 128 rows: 4 chunks of 32
    assert not refine_gradients._STATS  # dropped as the comparison ends: no head kept alive past it
