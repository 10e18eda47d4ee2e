"""symattn.kernel.compare and symattn.testing.assert_attention_close (issue 30): a kernel's tensors in memory
against the exact values, by the engine `symattn compare` runs.

The kernel is torch's CPU SDPA on (2, 4, 128, 64) queries with 2 key/value heads and a causal mask (the
other checks take (2, 4, 80, 16), which still holds out[1, 2, 77, 5], at a tenth of the work); each
figure a verdict prints is checked against torch's float64 SDPA of the same inputs (far closer to the
exact values than the three digits shown).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.input.decimals import significant_exact
from symattn.input.errors import ShapeError, SpecError
from symattn.kernel.comparison import number_text

torch = pytest.importorskip("torch")
F = torch.nn.functional
B, H, G, N, D = 2, 4, 2, 128, 64


WINDOW_RANGE = (
    "window: expected keys from 1 to 2147483647 (a causal window ending at the diagonal) or FlashAttention's "
    "window_size (left, right), each -1 (no bound) or 0 to 2147483647; got "
)


def figure(x: float) -> str:
    """Three significant digits, as the reports show a ratio, a share or an error."""
    return number_text(significant_exact(Fraction(x), 3))


def nine(x: float) -> str:
    return str(significant_exact(Fraction(float(x)), 9))


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def made(n: int, d: int):
    """q, k, v (float32), torch's output, the same with 0.25 planted at out[1, 2, 77, 5], the float64 reference."""
    gen = torch.Generator().manual_seed(30)
    q = torch.randn(B, H, n, d, generator=gen)
    k, v = (torch.randn(B, G, n, d, generator=gen) for _ in range(2))
    out = sdpa(q, k, v)
    bad = out.clone()
    bad[1, 2, 77, 5] += 0.25
    ref = sdpa(q.double(), k.double(), v.double()).numpy()
    return q, k, v, out, bad, ref


@pytest.fixture(scope="module")
def kernel():
    return made(N, D)


@pytest.fixture(scope="module")
def small():
    return made(80, 16)


def test_sdpa_gqa_causal_holds_from_tensors_and_from_numpy_arrays(kernel):
    from symattn.testing import assert_attention_close

    q, k, v, out, _, ref = kernel
    report = assert_attention_close(out, q, k, v, causal=True)
    share = (np.abs(out.numpy() - ref) / (1e-5 + 1.3e-6 * np.abs(ref))).max()
    assert (report.ok, report.rule_text(), report.figure()) == (
        True,
        "allclose(rtol=1.3e-6, atol=0.00001)",
        f"share {figure(share)}",
    )
    again = assert_attention_close(out.numpy(), q.numpy(), k.numpy(), v.numpy(), causal=True)
    # the summary and the text: the full JSON of 65,536 entries is test_kernel_api_shapes.py's, on small shapes
    assert again.to_json(summary=True) == report.to_json(summary=True) and again.text() == report.text()
    assert report.shape == (B, H, N, D) and report.comparison.format == "float32"


def test_an_error_planted_at_out_1_2_77_5_is_named_there(small):
    from symattn.testing import assert_attention_close

    q, k, v, _, bad, ref = small
    n_entries = small[3].numel()
    with pytest.raises(AssertionError) as info:
        assert_attention_close(bad, q, k, v, causal=True)
    share = abs(float(bad[1, 2, 77, 5]) - ref[1, 2, 77, 5]) / (1e-5 + 1.3e-6 * abs(ref[1, 2, 77, 5]))
    first, rest = str(info.value).split("\n", 1)
    assert first == (
        "fails torch.allclose's rule |out − exact| ≤ 0.00001 + 1.3e-6·|exact|: |out − exact| / (atol + rtol·|exact|) "
        f"= {figure(share)} at out[1, 2, 77, 5] (out {nine(bad[1, 2, 77, 5])}, exact {nine(ref[1, 2, 77, 5])})"
    )
    assert "Places are 0-based, as numpy indexes: out[batch, head, query, column].\n" in rest
    assert "The worst entry is out[1, 2, 77, 5], where |out − exact| / (atol + rtol·|exact|) = " in rest
    with pytest.raises(AssertionError) as info:
        assert_attention_close(bad, q, k, v, causal=True, max_ulp=4)
    x, exact = Fraction(float(bad[1, 2, 77, 5])), Fraction(ref[1, 2, 77, 5])
    ulps = abs(x - exact) / (Fraction(2) ** (math.frexp(ref[1, 2, 77, 5])[1] - 24))  # float32's ULP there
    over = int(np.count_nonzero(np.abs(bad.numpy() - ref) / np.ldexp(1.0, np.frexp(ref)[1] - 24) > 4.005))
    first = str(info.value).split("\n")[0]
    assert first.startswith("fails max_ulp=4: ") and first.endswith(
        f" of {n_entries} entries exceed it; the largest error is {figure(ulps)} ULP at out[1, 2, 77, 5] "
        f"(out {nine(bad[1, 2, 77, 5])}, exact {nine(ref[1, 2, 77, 5])})"
    )
    assert abs(int(first.removeprefix("fails max_ulp=4: ").split()[0]) - over) <= 2  # near 4.00: three digits


def test_flashattentions_rule_in_bfloat16_against_the_naive_bfloat16_reference(small):
    from symattn.kernel import compare
    from symattn.testing import assert_attention_close

    q, k, v = (t.bfloat16() for t in small[:3])
    n, d = small[0].shape[2:]
    out = sdpa(q, k, v)
    # the naive reference as FlashAttention's tests make it (attention_ref, upcast=False): the scores and
    # the product with V in the inputs' dtype, the softmax upcast to float32
    keys, values = (t.repeat_interleave(H // G, dim=1) for t in (k, v))
    scores = (q / math.sqrt(d)) @ keys.transpose(-1, -2)
    scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    naive = torch.softmax(scores.float(), dim=-1).to(q.dtype) @ values
    report = assert_attention_close(out, q, k, v, causal=True, rule="flash", reference=naive)
    ref = sdpa(*(t.double() for t in (q, k, v))).numpy()
    ratio = np.abs(out.float().numpy() - ref).max() / np.abs(naive.float().numpy() - ref).max()
    assert (report.ok, report.rule_text(), report.figure()) == (True, "flash(rtol=2, atol=0)", f"ratio {figure(ratio)}")
    assert compare(out, q, k, v, causal=True, reference=naive).to_json() == report.to_json()  # flash: implied
    assert json.loads(report.to_json())["ratio"] == figure(ratio)


def test_the_default_floors_fail_a_bfloat16_row_that_cancels_and_the_message_names_the_rule_to_use():
    """torch's CPU SDPA in bfloat16, causal, (2, 4, 128, 64): query 2 of head (0, 0) has three keys, and its
    output 0.0341 misses 1e-3 + 0.016·|exact| by 1.85 times; the message says which rule such a kernel is
    tested by. A tolerance given alone takes the other from the dtype's defaults, so no hint there."""
    from symattn.testing import assert_attention_close

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 128, 64, generator=g).bfloat16() for _ in range(3))
    out = sdpa(q, k, v)
    with pytest.raises(AssertionError) as info:
        assert_attention_close(out, q, k, v, causal=True)
    first = (
        "fails torch.allclose's rule |out − exact| ≤ 0.001 + 0.016·|exact|: |out − exact| / (atol + rtol·|exact|) "
        "= 1.85 at out[0, 0, 2, 24] (out 0.0312500000, exact 0.0341169650)"
    )
    assert str(info.value).splitlines()[:3] == [
        first,
        "(the default tolerances are PyTorch's floors; a bfloat16 or float16 kernel is tested by FlashAttention's "
        'rule: rule="flash", reference=the naive attention in its dtype; docs/pytest.md)',
        "",
    ]
    with pytest.raises(AssertionError) as info:
        assert_attention_close(out, q, k, v, causal=True, rtol=0.016)
    assert str(info.value).splitlines()[:2] == [first, ""]


def test_the_log_sum_exp_in_both_bases(small):
    from symattn.kernel import compare

    q, k, v = small[:3]
    n, d = small[0].shape[2:]
    keys = k.double().repeat_interleave(H // G, dim=1)
    scores = (q.double() @ keys.transpose(-1, -2) / math.sqrt(d)).masked_fill(
        ~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf")
    )
    lse = torch.logsumexp(scores, dim=-1)  # float64: within a few of its ULPs of the exact value
    report = compare(lse.float(), q, k, v, kind="lse", causal=True, max_ulp="0.51")
    assert report.ok and report.comparison.where.convention == "out[batch, head, query]"
    base2 = compare((lse / math.log(2)).float(), q, k, v, kind="lse", lse_base="2", causal=True, max_ulp="0.51")
    assert base2.ok
    as_number = compare((lse / math.log(2)).float(), q, k, v, kind="lse", lse_base=2, causal=True, max_ulp="0.51")
    assert as_number.to_json() == base2.to_json()  # the CLI's --lse-base 2, as a number
    for odd in (3, True, "10"):
        with pytest.raises(SpecError) as info:
            compare(lse.float(), q, k, v, kind="lse", lse_base=odd)
        assert str(info.value) == f"lse_base: expected 'e' or '2' (or 2), got {odd!r}"
    bad = lse.float().clone()
    bad[1, 2, 77] = torch.nextafter(torch.nextafter(bad[1, 2, 77], torch.tensor(1e9)), torch.tensor(1e9))
    report = compare(bad, q, k, v, kind="lse", causal=True, max_ulp=1)
    assert not report.ok and report.worst_place == "out[1, 2, 77]"
    assert json.loads(report.to_json())["max_ulp"]["over"] == 1
    wrong = compare(lse.float(), q, k, v, kind="lse", lse_base="2", causal=True)  # natural read as base 2
    assert str(wrong.comparison.worst_relative.relative) == figure(1 - math.log(2))  # every entry off by 0.307


def test_gradients_of_one_head_and_a_dout_of_the_wrong_shape(kernel):
    from symattn.kernel import compare
    from symattn.testing import assert_attention_close

    q, k, v = (t[:1, :1, :64, :32].clone().requires_grad_() for t in kernel[:3])
    out = F.scaled_dot_product_attention(q, k, v)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    out.backward(dout)
    for kind, grad in (("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        report = assert_attention_close(grad, q, k, v, kind=kind, dout=dout)
        axis = "key" if kind != "dq" else "query"
        assert report.comparison.where.convention == f"out[batch, head, {axis}, column]"
    q, k, v, out = kernel[:4]
    with pytest.raises(ShapeError) as info:  # batches and heads: tests/test_kernel_grad_heads.py
        compare(q, q, k, v, kind="dq", dout=out[0])
    assert str(info.value) == "dout: shape: (4, 128, 64); O's shape is (2, 4, 128, 64)"


WORST = "worst: expected a whole number from 1 up, or None (every entry), got "


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("sinks", [0.0, 1.0], "sinks: shape: (2,); expected (1,), a finite logit per query head"),
        ("layout", "thd", "layout: expected 'bhnd' or 'bnhd', got 'thd'"),
        ("kind", "weights", "kind: expected one of output, lse, dq, dk, dv, dsink, got 'weights'"),
        ("rule", "flash", "reference: missing: FlashAttention's rule measures out against the naive reference"),
        ("rule", "ulp", "max_ulp: missing: rule='ulp' needs the bound"),
        ("dout", np.ones((4, 2), np.float32), "dout: is for kind dq, dk, dv or dsink"),
        ("scale", "0.5", "scale: expected a finite number (the float the kernel multiplies by), got '0.5'"),
        ("window", 0, f"{WINDOW_RANGE}0"),
        ("window", 2**31, f"{WINDOW_RANGE}2147483648"),  # FlashAttention's int32
        ("rtol", -1, "rtol: expected a number at least 0 such as 1e-3 or 0.01, got '-1'"),
        ("rtol", Fraction(-1, 2), "rtol: expected a number at least 0 such as 1e-3 or 0.01, got -1/2"),
        ("atol", Fraction(10**400), "atol: beyond float64's range (at most about 1.8e308)"),  # an OverflowError
        ("rtol", Decimal("1e400"), "rtol: beyond float64's range (at most about 1.8e308)"),
        ("worst", 0, f"{WORST}0"),  # listed 10 before
        ("worst", -1, f"{WORST}-1"),  # an IndexError's traceback before
        ("worst", 2.5, f"{WORST}2.5"),
        ("worst", "3", f"{WORST}'3'"),
        ("worst", True, f"{WORST}True"),
    ],
)
def test_what_the_float64_path_does_not_take_is_one_line(name, value, message):
    from symattn.kernel import compare

    x = np.ones((4, 2), np.float32)
    with pytest.raises(SpecError) as info:
        compare(x, x, x, x, **{name: value})
    assert str(info.value) == message


def test_the_window_takes_any_int32_of_keys():
    """window = 2^31 − 1 (FlashAttention's int32; no array is sized by it) is a window, in memory and in a
    spec; one more is refused (above, and tests/test_masks_modern.py)."""
    from symattn.input.spec import load_spec
    from symattn.kernel import compare

    x = np.ones((4, 2), np.float32)
    report = compare(x, x, x, x, window=2**31 - 1, rule="ulp", max_ulp=0)
    assert report.ok and len(report.comparison.entries) == 8
    pair = compare(x, x, x, x, window=(1, 0), rule="ulp", max_ulp=0).to_json()
    for given in (torch.tensor([1, 0]), np.array([1, 0], np.int32)):  # a pair as an array, torch's or numpy's
        assert compare(x, x, x, x, window=given, rule="ulp", max_ulp=0).to_json() == pair
    with pytest.raises(SpecError) as info:
        compare(x, x, x, x, window=torch.tensor([1.5, 0.0]))
    assert str(info.value).startswith("window: ")
    assert load_spec({"Q": [[1]], "K": [[1]], "V": [[1]], "window": 2**31 - 1}).setting("masks").window == 2**31 - 1


def test_bad_tensors_are_one_line():
    from symattn.kernel import compare

    x = np.ones((4, 2), np.float32)
    cases = [
        (
            (x, x.astype(np.int32), x, x),
            {},
            "q: dtype int32; expected one of float8_e4m3fn, float8_e5m2, float16, bfloat16, float32, float64",
        ),
        ((x, x, x[:3], x), {}, "v: shape: v (1, 1, 4, 2) needs the heads and keys of k (1, 1, 3, 2) (bhnd)"),
        (
            (x, x, x, np.full((4, 2), 0.1)),
            {},
            "v[0, 0]: no float32 value: 0.1; the float64 path takes float32 values (float16, bfloat16 and float8 "
            "ones are)",
        ),
        (
            (x, np.array([[1, np.nan]] * 4, np.float32), x, x),
            {},
            "q[0, 1]: not a finite number: nan",
        ),
        ((x[:3], x, x, x), {}, "out: shape: (3, 2); the output of these q, k and v is (4, 2)"),
        (
            (x, x[:3], x[:2], x[:2]),
            {"causal": True},
            "causal_align: query 0 (0-based) may attend no key (causal_align = 'bottom-right' puts its diagonal before the first key); softmax is undefined there",
        ),
    ]
    for (out, q, k, v), options, message in cases:
        if "causal" in options:
            options["causal_align"] = "bottom-right"
        with pytest.raises(SpecError) as info:
            compare(out, q, k, v, **options)
        assert str(info.value) == message
    with pytest.raises(ShapeError):
        compare(x, x[None], x, x)


def test_float8_inputs_and_ml_dtypes_arrays_read_exactly():
    import ml_dtypes

    from symattn.kernel import compare

    gen = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 16, 8, generator=gen).to(torch.float8_e4m3fn) for _ in range(3))
    out = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    report = compare(out, q, k, v)
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double()).numpy()
    assert report.ok and report.comparison.where.convention == "out[head, query, column]"
    top = (np.abs(out.numpy() - ref) / np.abs(ref)).max()
    assert report.comparison.worst_relative.relative == significant_exact(Fraction(top), 3)
    as_numpy = [t.float().numpy().astype(ml_dtypes.float8_e4m3fn) for t in (q, k, v)]
    again = compare(out.bfloat16().float().numpy().astype(ml_dtypes.bfloat16), *as_numpy)
    assert again.comparison.format == "bfloat16"
    assert again.to_json() == compare(out.bfloat16(), q, k, v).to_json()


def test_the_json_and_text_are_symattn_compares(small, tmp_path, capsys):
    from symattn.kernel import compare

    q, k, v, _, bad, _ = small
    for name, t in zip(("q", "k", "v", "o"), (q, k, v, bad)):
        np.save(tmp_path / f"{name}.npy", t.numpy())
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nmask = "causal"\n')
    report = compare(bad, q, k, v, causal=True, rtol="1e-3", atol="1e-4", max_ulp=100)
    source = str(tmp_path / "o.npy")
    for fmt in ("json", "text"):
        args = ["--rtol", "1e-3", "--atol", "1e-4", "--max-ulp", "100", "--format", fmt]
        assert main(["compare", str(tmp_path / "s.toml"), source, *args]) == 1
        cli = capsys.readouterr().out.replace(source, "out").replace("o[", "out[")
        if fmt == "json":
            assert cli == report.to_json()
        else:  # the table's first column is as wide as its longest place: "out[" is two longer than "o["
            assert cli.split() == report.text().split()


def test_three_runs_with_one_differing_entry_report_the_spread(small, tmp_path, capsys):
    from symattn.kernel import compare

    q, k, v, out, _, ref = small
    n_entries = small[3].numel()
    moved = out.clone()
    for _ in range(3):  # three floats up
        moved[1, 2, 77, 5] = torch.nextafter(moved[1, 2, 77, 5], torch.tensor(1e9))
    report = compare([out, moved, out], q, k, v, causal=True)
    spread = report.spread
    assert (spread.entries, spread.differ, spread.ulps_apart) == (n_entries, 1, 3)
    assert report.spread_at == {"batch": 1, "head": 2, "query": 77, "column": 5}  # the tensor's own axes
    alone = [compare(t, q, k, v, causal=True) for t in (out, moved)]
    data = json.loads(report.to_json())
    assert [r["source"] for r in data["runs"]] == ["run 0", "run 1", "run 2"]
    assert [r["summary"]["max_ulps"] for r in data["runs"]] == [
        json.loads(a.to_json())["summary"]["max_ulps"] for a in (alone[0], alone[1], alone[0])
    ]
    assert data["spread"] == {
        "entries": n_entries,
        "differ": 1,
        "ulps_apart": 3,
        "ulps_apart_at": {"batch": 1, "head": 2, "query": 77, "column": 5},
        "differ_not_finite": 0,
    }
    for i, t in enumerate((out, moved, out)):
        np.save(tmp_path / f"r{i}.npy", t.numpy())
    for name, t in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{name}.npy", t.numpy())
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nmask = "causal"\n')
    runs = [str(tmp_path / f"r{i}.npy") for i in range(3)]
    assert main(["compare", str(tmp_path / "s.toml"), *runs]) == 0
    text = capsys.readouterr().out
    assert text.startswith("3 runs of the output (float32) against the exact values\n")
    assert f"Bitwise spread: 1 of {n_entries} entries are not the same bits in every run.\n" in text
    assert (
        "The runs are at most 3 ULP apart (float32 floats counted one by one: 1 for neighbours), at o[1, 2, 77, 5].\n"
        in text
    )
    assert main(["compare", str(tmp_path / "s.toml"), runs[0], runs[2]]) == 0
    assert f"Bitwise spread: none; all {n_entries} entries are the same bits in every run.\n" in capsys.readouterr().out


def test_a_run_with_a_nan_where_another_has_a_number_is_counted_apart(small):
    """A helper's attack (session 13): one run's NaN beside another's float was 'differ: 1, ulps_apart: 0', as if
    that entry were near; the entries that differ where a run is not finite are counted on their own."""
    from symattn.kernel import compare

    q, k, v, out, _, ref = small
    broken = out.clone()
    broken[0, 1, 3, 2] = float("nan")
    report = compare([out, broken], q, k, v, causal=True)
    data = json.loads(report.to_json())["spread"]
    assert (data["differ"], data["ulps_apart"], data["ulps_apart_at"], data["differ_not_finite"]) == (1, 0, None, 1)
    assert "1 of them are not finite in some run: no ULP distance is counted there.\n" in report.text()


def test_a_safetensors_result_and_bfloat16_saved_as_float32(small, tmp_path, capsys):
    from safetensors.torch import save_file

    q, k, v, out = (t[:1, :2] for t in small[:4])
    n, d = small[0].shape[2:]
    folder = tmp_path
    for name, t in zip("qkv", (q, k, v)):
        np.save(folder / f"{name}.npy", t.contiguous().numpy())
    (folder / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nmask = "causal"\n')
    low = out.bfloat16().contiguous()
    save_file({"out": low, "lse": torch.zeros(1, 2, n)}, folder / "r.safetensors")
    np.save(folder / "r32.npy", low.float().numpy())  # the README's recipe: bfloat16 values saved as float32
    spec = str(folder / "s.toml")
    assert main(["compare", spec, str(folder / "r.safetensors:out"), "--format", "json"]) == 0
    from_safetensors = json.loads(capsys.readouterr().out)
    assert main(["compare", spec, str(folder / "r32.npy"), "--dtype", "bfloat16", "--format", "json"]) == 0
    from_npy = json.loads(capsys.readouterr().out)
    assert from_safetensors["format"] == from_npy["format"] == "bfloat16"
    assert {**from_safetensors, "source": ""} == {**from_npy, "source": ""}
    np.save(folder / "o32.npy", out.contiguous().numpy())  # float32 values: not all bfloat16 ones
    assert main(["compare", spec, str(folder / "o32.npy"), "--dtype", "bfloat16"]) == 2
    err = capsys.readouterr().err
    first = np.argwhere(out.contiguous().numpy() != out.bfloat16().float().numpy())[0]
    value = float(out[tuple(first)])
    place = ", ".join(map(str, first))
    assert err == (
        f"symattn: {folder / 'o32.npy'}[{place}]: {value!r} is not a bfloat16 value: "
        "--dtype bfloat16 needs every value to be one (the file holds float32)\n"
    )
    assert main(["compare", spec, str(folder / "r.safetensors")]) == 2
    assert "2 tensors (lse, out…): name one as FILE.safetensors:NAME" in capsys.readouterr().err


def test_summary_json_is_the_json_without_the_entries(small, tmp_path, capsys):
    q, k, v, out = (t[:1, :1, :32] for t in small[:4])
    for name, t in zip("qkvo", (q, k, v, out)):
        np.save(tmp_path / f"{name}.npy", t.contiguous().numpy())
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    args = ["compare", str(tmp_path / "s.toml"), str(tmp_path / "o.npy"), "--format", "json"]
    assert main([*args, "--max-ulp", "1"]) == 1
    full = json.loads(capsys.readouterr().out)
    assert main([*args, "--max-ulp", "1", "--summary"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert "entries" not in summary and summary == {key: value for key, value in full.items() if key != "entries"}
    assert main(args[:3] + ["--summary"]) == 2
    assert capsys.readouterr().err == "symattn: --summary: leaves the entries out of the JSON: give --format json too\n"


def test_the_public_names():
    import symattn
    import symattn.kernel
    from symattn.kernel.oracle import compare

    assert symattn.kernel.compare is compare and symattn.compare is compare
    assert symattn.kernel.Report.__name__ == "Report"


def test_the_message_shows_no_exact_digit_that_was_not_decided():
    # a kernel author's trial: a saturated dV's exact value decided to 6 digits read "exact 0.952760000"
    from decimal import Decimal

    from symattn.testing import _nine_decided

    assert [
        _nine_decided(Decimal(text))
        for text in ("0.952760", "0.16230000000000001", "2.1560783008892759E-1527", "0.12345678950000000")
    ] == ["0.952760", "0.162300000", "2.15607830E-1527", "0.12345678950000000"]


def test_worst_takes_numpys_whole_numbers_too():
    from symattn.kernel import compare

    x = np.ones((4, 2), np.float32)
    assert compare(x, x, x, x, worst=np.int64(3)).text() == compare(x, x, x, x, worst=3).text()


def test_the_text_report_decides_each_heads_own_worst_entry(tmp_path, capsys):
    """A head's largest error ranks below the report's ten, and its row-relative figure was left open: the
    text report raised LookupError, exit 1 (a helper's randomized grid: SDPA in float64, GQA 4/2, causal)."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(214)
    q = torch.randn(2, 4, 29, 2, generator=g)
    k, v = (torch.randn(2, 2, 15, 2, generator=g) for _ in range(2))
    out = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=True, scale=0.125, enable_gqa=True
    )
    for name, x in zip("qkvo", (q, k, v, out)):
        np.save(tmp_path / f"{name}.npy", x.numpy())
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nmask = "causal"\nscale = "1/8"\n')
    said = []
    for more in ([], ["--all"]):
        code = main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "o.npy"), *more])
        said.append((code, capsys.readouterr()))
    assert [(code, err) for code, (_, err) in said] == [(0, ""), (0, "")]
    text, every = (out.splitlines() for _, (out, _) in said)
    assert text[:19] == every[:19]  # the summary and each head's line: the same figures as every entry's
    assert (
        text[11]
        == "  batch 0, head 1: 9 of 58 correctly rounded; largest error 1550 ULP at o[0, 1, 23, 1], largest relative 1.80e-13"
    )


def test_a_bnhd_tensor_read_as_bhnd_past_the_heads_limit_says_which_layout_fits():
    from symattn.input.errors import LimitError
    from symattn.kernel import compare

    q = np.ones((2, 96, 4, 32), np.float32)  # (B, N, H, D) given without layout="bnhd"
    with pytest.raises(LimitError) as info:
        compare(q, q, q, q)
    assert str(info.value) == (
        "q: shape: 2 batches × 96 heads (bhnd); at most 64 (the limit); read as layout='bnhd', 4 heads"
    )
    assert compare(q, q, q, q, layout="bnhd", rule="ulp", max_ulp=0).ok  # V's rows all one: exactly 1
    three = np.ones((128, 8, 4), np.float32)  # (N, H, D) without its batch axis: the same slip
    with pytest.raises(LimitError) as info:
        compare(three, three, three, three)
    assert str(info.value) == (
        "q: shape: 1 batch × 128 heads (bhnd); at most 64 (the limit); read as layout='bnhd', 8 heads"
    )
    wide = np.ones((2, 96, 40, 32), np.float32)  # no layout fits: no hint
    with pytest.raises(LimitError) as info:
        compare(wide, wide, wide, wide)
    assert str(info.value) == "q: shape: 2 batches × 96 heads (bhnd); at most 64 (the limit)"


def test_max_ulp_takes_the_tolerances_grammar_as_the_report_writes_figures():
    """``1e3`` as the report writes 1.32e6 (it was refused: "such as 0.5 or 2"), in the API and the CLI's parser."""
    from symattn.cli.parser import _ulps
    from symattn.kernel import compare

    x = np.ones((4, 2), np.float32)
    assert compare(x, x, x, x, max_ulp="1e3").max_ulp == Decimal("1E+3")
    assert (_ulps("1e3"), _ulps("0.5"), _ulps("2")) == (Decimal("1e3"), Decimal("0.5"), Decimal("2"))
    for bad in ("inf", "-1", "1e9999", True):
        with pytest.raises(SpecError) as info:
            compare(x, x, x, x, max_ulp=bad)
        assert str(info.value) == f"max_ulp: expected a number of ULPs such as 0.5, 2 or 1e3, got {bad!r}"
