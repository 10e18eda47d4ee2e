"""The kernel oracle's one-line messages as a kernel author's trial met them (issue 30, kmsg5): shapes in the
shapes given, the place of a float64 value that is no float32 value, varlen's sequences, windows, the
standalone verifier's verdict line and the wording of the variants' messages.

Each test writes its spec and .npy files in tmp_path and runs ``symattn compare`` (exit 2: bad input,
1: a failed check) or calls the API, and matches the whole line.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.test_compare_layouts import compare as run
from tests.test_compare_layouts import write
from tests.test_kernel_layouts import packed  # noqa: F401 (a fixture)

torch = pytest.importorskip("torch")

SPEC = ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', 'mask = "causal"']
# the one message of a float64 value that is no float32 value (symattn.input.tensorfile.not_float32), every caller's
NO_FLOAT32 = "no float32 value: 0.1; the float64 path takes float32 values (float16, bfloat16 and float8 ones are)"


def inputs(b=2, h=4, kv=2, n=8, d=4, seed=0):
    """float32 q (b, h, n, d) and k, v (b, kv, n, d)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, h, n, d)).astype(np.float32)
    k, v = (rng.standard_normal((b, kv, n, d)).astype(np.float32) for _ in "kv")
    return q, k, v


@pytest.mark.parametrize(
    ("name", "shape", "quantity", "line"),
    [
        ("o_short", (2, 4, 7, 4), "output", "(2, 4, 7, 4); the output of these q, k and v is (2, 4, 8, 4)"),
        ("o_3d", (4, 8, 4), "output", "(4, 8, 4); the output of these q, k and v is (2, 4, 8, 4)"),
        ("lse_short", (2, 4, 5), "lse", "(2, 4, 5); the lse of these q, k and v is (2, 4, 8)"),
        ("dk_q", (2, 4, 8, 4), "dk", "(2, 4, 8, 4); the dk of these q, k and v is (2, 2, 8, 4)"),
    ],
)
def test_a_result_of_another_shape_is_named_in_the_shapes_given(tmp_path, capsys, name, shape, quantity, line):
    q, k, v = inputs()
    spec = write(tmp_path, [*SPEC, "[backward]", 'grad_output = "do.npy"'], q=q, k=k, v=v, do=q)
    np.save(tmp_path / f"{name}.npy", np.zeros(shape, np.float32))
    code, out, err = run(capsys, spec, tmp_path / f"{name}.npy", "--quantity", quantity)
    assert (code, out) == (2, "")
    assert err == f"symattn: {tmp_path / name}.npy: shape: {line}\n"


def test_a_bnhd_result_of_another_shape_is_named_in_its_layout(tmp_path, capsys):
    q, k, v = (a.transpose(0, 2, 1, 3).copy() for a in inputs())
    spec = write(tmp_path, [*SPEC, 'layout = "bnhd"'], q=q, k=k, v=v, o=np.zeros((2, 6, 4, 4), np.float32))
    code, _, err = run(capsys, spec, tmp_path / "o.npy")
    assert code == 2
    assert err == f"symattn: {tmp_path}/o.npy: shape: (2, 6, 4, 4); the output of these q, k and v is (2, 8, 4, 4)\n"


def test_the_api_names_the_same_shapes(tmp_path):
    from symattn.input.errors import ShapeError
    from symattn.testing import assert_attention_close

    q, k, v = inputs()
    with pytest.raises(ShapeError) as info:
        assert_attention_close(np.zeros((2, 4, 7, 4), np.float32), q, k, v, causal=True)
    assert str(info.value) == "out: shape: (2, 4, 7, 4); the output of these q, k and v is (2, 4, 8, 4)"
    with pytest.raises(ShapeError) as info:  # a batch of two without its axis
        assert_attention_close(np.zeros((4, 8, 4), np.float32), q, k, v, causal=True)
    assert str(info.value) == "out: shape: (4, 8, 4); the output of these q, k and v is (2, 4, 8, 4)"


@pytest.mark.parametrize(("layout", "key", "at"), [("bhnd", "K", (1, 1, 3, 2)), ("bnhd", "V", (1, 6, 0, 3))])
def test_a_float64_input_that_is_no_float32_value_is_named_at_its_place(tmp_path, capsys, layout, key, at):
    arrays = dict(zip("qkv", inputs()))
    if layout == "bnhd":
        arrays = {name: a.transpose(0, 2, 1, 3).copy() for name, a in arrays.items()}
    bad = arrays[key.lower()].astype(np.float64)
    bad[at] = 0.1
    arrays[key.lower()] = bad
    spec = write(tmp_path, [*SPEC, f'layout = "{layout}"'], **arrays, o=arrays["q"])
    code, out, err = run(capsys, spec, tmp_path / "o.npy")
    assert (code, out) == (2, "")
    place = ", ".join(map(str, at))
    assert err == (f"symattn: {spec}: {key}: '{key.lower()}.npy'[{place}]: {NO_FLOAT32}; a batch of 2 needs it\n")
    code, out, err = run(capsys, spec, tmp_path / "o.npy", "--quantity", "dq", "--grad-output", tmp_path / "q.npy")
    assert err == (
        f"symattn: {spec}: {key}: '{key.lower()}.npy'[{place}]: {NO_FLOAT32}; --quantity dq, dk and dv "
        "of 2 batches × 4 heads need it\n"
    )


def test_a_do_file_names_its_value(tmp_path, capsys):
    q, k, v = inputs()
    do = q.astype(np.float64)
    do[1, 2, 3, 1] = 0.1
    spec = write(tmp_path, SPEC, q=q, k=k, v=v, do=do)
    code, _, err = run(capsys, spec, tmp_path / "q.npy", "--quantity", "dq", "--grad-output", tmp_path / "do.npy")
    assert code == 2
    assert err == (f"symattn: {tmp_path}/do.npy: dO[1, 2, 3, 1]: {NO_FLOAT32}\n")
    do[0, 0, 0, 0] = -np.inf
    np.save(tmp_path / "do.npy", do)
    code, _, err = run(capsys, spec, tmp_path / "q.npy", "--quantity", "dq", "--grad-output", tmp_path / "do.npy")
    assert err == f"symattn: {tmp_path}/do.npy: dO[0, 0, 0, 0]: not a finite number: -inf\n"


def test_every_not_finite_input_names_its_value(tmp_path, capsys):
    from symattn.input.errors import SpecError
    from symattn.testing import assert_attention_close

    q, k, v = inputs()
    k[1, 0, 5, 2] = np.inf
    with pytest.raises(SpecError) as info:
        assert_attention_close(q, q, k, v)
    assert str(info.value) == "k[1, 0, 5, 2]: not a finite number: inf"
    spec = write(tmp_path, SPEC, q=q, k=k, v=v)
    assert (
        run(capsys, spec, tmp_path / "q.npy")[2]
        == f"symattn: {spec}: K: 'k.npy'[1, 0, 5, 2]: not a finite number: inf\n"
    )
    k[1, 0, 5, 2] = 0
    do = q.copy()
    do[0, 3, 7, 0] = np.nan
    spec = write(tmp_path, [*SPEC, "[backward]", 'grad_output = "do.npy"'], k=k, do=do)
    got = run(capsys, spec, tmp_path / "q.npy", "--quantity", "dq")[2]
    assert got == f"symattn: {spec}: backward.grad_output: 'do.npy'[0, 3, 7, 0]: not a finite number: nan\n"


@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
def test_a_specs_do_that_is_no_float32_names_its_batch_head_query_and_column(tmp_path, capsys, layout):
    """The spec's own [backward] grad_output (read as exact values for any path) meets the float64 path's one
    check when the gradients are compared, named by its batch, head, query and column whatever the file's axes."""
    q, k, v = inputs()
    do = q.astype(np.float64)
    do[1, 3, 6, 2] = 0.1
    arrays = {"q": q, "k": k, "v": v, "do": do}
    if layout == "bnhd":
        arrays = {name: a.transpose(0, 2, 1, 3).copy() for name, a in arrays.items()}
    spec = write(tmp_path, [*SPEC, f'layout = "{layout}"', "[backward]", 'grad_output = "do.npy"'], **arrays)
    code, out, err = run(capsys, spec, tmp_path / "q.npy", "--quantity", "dq")
    assert (code, out) == (2, "")
    assert err == f"symattn: {spec}: backward.grad_output: dO: batch 1, head 3, query 6, column 2: {NO_FLOAT32}\n"


def head_lines(text):
    """The heading and each head's line up to its count: ``  sequence 0, head 0: 0 of 40 correctly rounded``."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Each ("))
    return [lines[start]] + [x.split(";")[0] for x in lines[start + 1 :] if x.startswith("  ") and ", head " in x]


def test_varlen_reports_each_sequence_and_head(packed):
    """Sequences of 5, 0, 7 and 3 queries (6, 2, 7 and 9 keys): a summary per (sequence, head), the one
    without queries has none; dK's rows are keys, summed up by their own sequences."""
    from symattn.kernel import compare

    q, k, v, cq, ck, ref = packed
    options = {"cu_seqlens_q": cq, "cu_seqlens_k": ck, "causal": True, "causal_align": "bottom-right"}
    report = compare(np.zeros(ref.shape, np.float32), q, k, v, **options)
    want = [
        f"  sequence {s}, head {h}: 0 of {8 * n} correctly rounded"
        for s, n in ((0, 5), (2, 7), (3, 3))
        for h in range(4)
    ]
    assert head_lines(report.text()) == ["Each (sequence, head):", *want]
    heads = json.loads(report.to_json())["heads"]
    assert [(x["sequence"], x["head"], x["entries"]) for x in heads] == [
        (s, h, 8 * n) for s, n in ((0, 5), (2, 7), (3, 3)) for h in range(4)
    ]
    assert "batch" not in heads[0]
    dout = torch.ones(q.shape)
    report = compare(np.zeros(k.shape, np.float32), q, k, v, kind="dk", dout=dout, **options)
    # sequence 1 has keys and no query: its dK is exactly 0, and 0 is correctly rounded
    want = [
        f"  sequence {s}, head {h}: {16 if s == 1 else 0} of {8 * n} correctly rounded"
        for s, n in enumerate((6, 2, 7, 9))
        for h in range(2)
    ]
    assert head_lines(report.text()) == ["Each (sequence, head):", *want]


def test_a_paged_cache_reports_each_batch_and_head():
    from symattn.kernel import compare

    q, k, v = inputs(b=2, h=2, kv=1, n=4, d=4)
    cache_k, cache_v = (a.transpose(0, 2, 1, 3).reshape(4, 2, 1, 4) for a in (k, v))  # blocks of 2 keys
    table = np.array([[0, 1], [2, 3]], np.int32)
    paged = {"block_table": table, "seqlens_k": np.array([4, 3], np.int32), "layout": "bnhd"}
    q = q.transpose(0, 2, 1, 3).copy()
    report = compare(np.zeros(q.shape, np.float32), q, cache_k, cache_v, **paged)
    want = [f"  batch {b}, head {h}: 0 of 16 correctly rounded" for b in range(2) for h in range(2)]
    assert head_lines(report.text()) == ["Each (batch, head):", *want]
    assert [(x["batch"], x["head"]) for x in json.loads(report.to_json())["heads"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def sdpa_masked(q, k, v, allowed):
    """torch's float64 attention under an explicit boolean mask (True: attend), rounded to float32."""
    q, k, v = (torch.from_numpy(a).double() for a in (q, k, v))
    k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(allowed))
    return out.float().numpy()


def flash_mask(n, m, left, right, offset, causal=False):
    """FlashAttention's window_size: key j allowed iff i + offset − left ≤ j ≤ i + offset + right (−1: no bound)."""
    i, j = np.arange(n)[:, None] + offset, np.arange(m)[None, :]
    allowed = ((left < 0) | (i - left <= j)) & ((right < 0) | (j <= i + right))
    return allowed & (j <= i) if causal else allowed


CLOSE = {"rtol": 1.2e-7, "atol": 1e-13}


@pytest.mark.parametrize(
    ("window", "align", "causal"),
    [
        ((2, 1), "top-left", False),
        ((3, 2), "bottom-right", False),
        ((-1, 0), "bottom-right", False),
        ((2, -1), "top-left", False),
        ((4, 3), "bottom-right", True),
    ],
)
def test_flashattentions_window_size_against_torch_float64_with_an_explicit_mask(window, align, causal):
    from symattn.testing import assert_attention_close

    q, k, v = inputs(n=6)
    k, v = (np.concatenate([a, a[:, :, :3] * 0.5], axis=2) for a in (k, v))  # 9 keys for 6 queries
    offset = 3 if align == "bottom-right" else 0
    allowed = flash_mask(6, 9, *window, offset, causal)
    out = sdpa_masked(q, k, v, allowed)
    report = assert_attention_close(out, q, k, v, window=window, causal=causal, causal_align=align, **CLOSE)
    assert report.ok


def test_an_int_window_is_causal_and_a_pair_is_not():
    """window=w keeps its meaning, (w − 1, 0) and causal even without causal=True; (w − 1, w − 1) looks ahead."""
    from symattn.testing import assert_attention_close

    q, k, v = inputs()
    causal = sdpa_masked(q, k, v, flash_mask(8, 8, 2, 0, 0))
    assert assert_attention_close(causal, q, k, v, window=3, **CLOSE).ok
    assert assert_attention_close(causal, q, k, v, window=[2, 0], **CLOSE).ok  # a spec's TOML array
    with pytest.raises(AssertionError):
        assert_attention_close(causal, q, k, v, window=(2, 2), **CLOSE)
    both = sdpa_masked(q, k, v, flash_mask(8, 8, 2, 2, 0))
    assert assert_attention_close(both, q, k, v, window=(2, 2), **CLOSE).ok


def test_a_window_wider_than_the_keys_is_no_window(tmp_path, capsys):
    from symattn.input.errors import SpecError
    from symattn.testing import assert_attention_close

    q, k, v = inputs()
    causal = sdpa_masked(q, k, v, flash_mask(8, 8, -1, 0, 0))
    for wide in (10000, 2**31 - 1, (2**31 - 1, 0)):
        assert assert_attention_close(causal, q, k, v, window=wide, **CLOSE).ok
    spec = write(tmp_path, ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', "window = 10000"], q=q, k=k, v=v, o=causal)
    code, out, _ = run(capsys, spec, tmp_path / "o.npy", "--rtol", "1.2e-7", "--atol", "1e-13")
    assert code == 0 and "Pass by torch.allclose's rule" in out
    why = (
        "window: expected keys from 1 to 2147483647 (a causal window ending at the diagonal) or FlashAttention's "
        "window_size (left, right), each -1 (no bound) or 0 to 2147483647; got "
    )
    for bad, got in ((0, "0"), (2**31, "2147483648"), ((3, -2), "(3, -2)"), ((1, 2, 3), "(1, 2, 3)"), (2.0, "2.0")):
        with pytest.raises(SpecError) as info:
            assert_attention_close(causal, q, k, v, window=bad)
        assert str(info.value) == why + got
    for bad in ("0", "2147483648"):
        spec = write(tmp_path, ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', f"window = {bad}"])
        code, _, err = run(capsys, spec, tmp_path / "o.npy")
        assert (code, err) == (
            2,
            f"symattn: {spec}: window: expected an integer from 1 to 2147483647 (keys), got {bad}\n",
        )


def test_a_window_size_that_leaves_a_query_no_key_is_one_line():
    from symattn.input.errors import SpecError
    from symattn.testing import assert_attention_close

    q, k, v = inputs()
    with pytest.raises(SpecError) as info:
        assert_attention_close(q, q, k[:, :, :2], v[:, :, :2], window=(0, 0))
    assert (
        str(info.value)
        == "window: query 2 (0-based) may attend no key (window_size (0, 0)); softmax is undefined there"
    )


def test_the_standalone_verifier_ends_a_failed_run_with_its_verdict(tmp_path, capsys):
    """After its per-value and per-file lines, one last line says what failed, counted; exit 1 as before."""
    from symattn.verifier.__main__ import main as verifier
    from tests.test_certificate_v3 import certify, forge, one_head

    cert = certify(one_head(tmp_path), "--grad-output", "do.npy", "--digits", "6")

    def changed(value):
        return value[:-1] + str((int(value[-1]) + 1) % 10)

    def change(data):
        for row in (0, 1, 2):
            data["dk"]["value"][row][1] = changed(data["dk"]["value"][row][1])

    forged = forge(cert, change)
    capsys.readouterr()
    assert verifier([str(forged)]) == 1
    out, err = capsys.readouterr()  # the report on stdout, its verdict last
    lines = out.splitlines()
    assert (err, lines[-1]) == ("", f"{forged}: NOT verified: 3 values do not round to the value shown")
    assert sum("does not round to" in line for line in lines) == 3
    np.save(tmp_path / "k.npy", np.load(tmp_path / "k.npy") * 2)  # and a file that is not the one certified
    assert verifier([str(forged)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{forged}: NOT verified: 1 file is not the file certified; 3 values do not round to the value shown"
    )
    np.save(tmp_path / "k.npy", np.load(tmp_path / "k.npy") / 2)
    assert verifier([str(cert)]) == 0
    assert "NOT verified" not in capsys.readouterr().out


def test_the_fast_verifier_names_where_a_changed_input_comes_from(tmp_path, capsys):
    """The cap is the spec's, dO its grad_output file's: each message names its own source."""
    from tests.test_certificate_v3 import certify, fast, forge, one_head

    spec = one_head(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8") + "softcap = 2.0\n", encoding="utf-8")
    cert = certify(spec, "--grad-output", "do.npy", "--digits", "6")
    forged = forge(cert, lambda d: d["certificate"]["inputs"].__setitem__("tanh_cap", "0x1.8000000000000p+1"))
    assert fast(capsys, forged)[2] == (
        f'symattn: {forged}: certificate.inputs.tanh_cap: "0x1.8000000000000p+1", but the spec {spec} gives '
        '"0x1.0000000000000p+1": the certificate is not of its files\n'
    )
    forged = forge(cert, lambda d: d["certificate"]["inputs"]["dO"][1].__setitem__(2, "0x1.0000000000000p+0"))
    err = fast(capsys, forged)[2]
    assert err.startswith(f"symattn: {forged}: certificate.inputs.dO[2][3]: 0x1.0000000000000p+0, but the grad_output ")
    assert err.endswith(
        f"file {tmp_path / 'do.npy'} gives {float(np.load(tmp_path / 'do.npy')[1, 2]).hex()}: the certificate is not of its files\n"
    )


def test_a_shape_of_one_axis_is_pythons_tuple(tmp_path, capsys):
    q, k, v = inputs()
    spec = write(tmp_path, [*SPEC, 'sinks = "sinks.npy"'], q=q, k=k, v=v, sinks=np.ones(3, np.float32))
    assert run(capsys, spec, tmp_path / "q.npy")[2] == (
        f"symattn: {spec}: sinks: 'sinks.npy': expected shape (4,), one number per head, got (3,)\n"
    )
    one = np.ones((4, 2), np.float32)
    spec = write(tmp_path, ['Q = "q1.npy"', 'K = "k1.npy"', 'V = "v1.npy"'], q1=np.ones(5, np.float32), k1=one, v1=one)
    assert run(capsys, spec, tmp_path / "q.npy")[2] == (
        f"symattn: {spec}: Q: 'q1.npy': expected a matrix (rows, columns), got shape (5,)\n"
    )


def test_a_gradients_text_names_its_own_quantity(tmp_path, capsys):
    """|dq − exact| beside dq[…] places, where an output's report says |out − exact|."""
    q, k, v = inputs()
    do = inputs(seed=1)[0]
    qq = torch.from_numpy(q).double().requires_grad_()
    kk, vv = (torch.from_numpy(a).double().repeat_interleave(2, dim=1) for a in (k, v))
    torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, is_causal=True).backward(torch.from_numpy(do).double())
    dq = qq.grad.float().numpy().copy()
    dq[:, :, 0] = 0  # query 0 attends key 0 alone: its dQ is exactly 0 (torch's is a rounding error off)
    dq[0, 0, 0, 0] = np.float32(1e-7)
    spec = write(tmp_path, SPEC, q=q, k=k, v=v, do=do, dq=dq)
    code, out, _ = run(
        capsys,
        spec,
        tmp_path / "dq.npy",
        "--quantity",
        "dq",
        "--grad-output",
        tmp_path / "do.npy",
        "--rtol",
        "1e-3",
        "--atol",
        "1e-9",
    )
    lines = out.splitlines()
    assert code == 1
    assert [x for x in lines if x.startswith("Entries exactly 0")] == [
        "Entries exactly 0 that the result misses (no ULP measures them): 1; the largest |dq − exact| is 1.00e-7, at dq[0, 0, 0, 0]."
    ]
    assert "Fail by torch.allclose's rule, |dq − exact| ≤ 1e-9 + 0.001·|exact| for every entry." in lines
    assert "The worst entry is dq[0, 0, 0, 0], where |dq − exact| / (atol + rtol·|exact|) = 100." in lines
    assert "    fail by torch.allclose's rule: |dq − exact| / (atol + rtol·|exact|) = 100 at dq[0, 0, 0, 0]" in lines
    assert "out − exact" not in out


def test_a_result_of_nans_lists_ten_places_and_counts_the_rest():
    """The text report listed each entry that is not finite, twice (its line, then the entries' table):
    32,788 lines for a (2, 4, 64, 32) output of NaN. It lists the first ten, in row order, then counts the
    rest; every one is in its JSON, and in the text of every entry."""
    from dataclasses import replace

    from symattn.kernel import compare

    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 4, 64, 32)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 64, 32)).astype(np.float32) for _ in range(2))
    out = np.full(q.shape, np.nan, np.float32)
    out[1, 3, 63, 31] = 1.0
    report = compare(out, q, k, v, causal=True)
    lines = report.text().splitlines()
    listed = [line for line in lines if line.startswith("Not finite at")]
    assert listed == [f"Not finite at out[0, 0, 0, {j}]: nan." for j in range(10)] + [
        "Not finite at 16373 more places (--all or JSON lists every one)."
    ]
    assert len(lines) < 60
    assert len(report.data(summary=True)["not_finite"]) == 16383
    every = replace(report, listed=None).text().splitlines()
    assert sum(line.startswith("Not finite at out[") for line in every) == 16383
    assert not any("more places" in line for line in every)
    zh = report.text("zh").splitlines()
    assert "另有 16373 处不是有限数（--all 或 JSON 列出每一处）。" in zh


def test_a_result_of_no_entries_says_so_whatever_its_axes(tmp_path, capsys):
    # a 4-axis result is taken: its zero-length axis is the problem ("expected a matrix (rows, columns)" before)
    q, k, v = inputs()
    spec = write(tmp_path, SPEC, q=q, k=k, v=v)
    np.save(tmp_path / "o.npy", np.ones((2, 4, 0, 4), np.float32))
    assert run(capsys, spec, tmp_path / "o.npy")[2] == (
        f"symattn: {tmp_path / 'o.npy'}: shape: (2, 4, 0, 4) has an axis of length 0 (no entries)\n"
    )


@pytest.mark.parametrize("batch", [1, 2])
def test_weights_with_batch_and_head_axes_are_refused_for_that_whatever_the_batch(tmp_path, capsys, batch):
    """A helper's attack (session 13): a batch of 2 of plain float32 inputs was refused as if it needed float32
    values; a batch of 1 had the true reason."""
    q, k, v = inputs(b=batch)
    spec = write(tmp_path, SPEC[:3], q=q, k=k, v=v, a=np.zeros((batch, 4, 8, 8), np.float32))
    code, out, err = run(capsys, spec, tmp_path / "a.npy", "--quantity", "weights")
    assert (code, out, err) == (
        2,
        "",
        "symattn: --quantity: weights with batch and head axes: compare one head's (N, M) weights\n",
    )
