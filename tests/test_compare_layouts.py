"""symattn compare of the layouts of 2026 from files (issue 30): varlen, paged KV caches and FP8 descales as
spec keys naming .npy/.safetensors files, split-KV partials with --partials; and every bad input's one line.

The tensors are made by torch and saved with numpy and safetensors in tmp_path, as a kernel author would;
the exact values are checked against torch's float64 attention (rounded to float32: within float32's
rounding, so allclose with rtol 1.2e-7 holds), and a planted error is named at its place.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from symattn.cli.commands import main

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")
from tests.test_kernel_layouts import packed, sdpa64, varlen_gradients  # noqa: E402,F401 (packed: a fixture)
from tests.test_kernel_partials import split_kernel  # noqa: E402

CLOSE = ["--rtol", "1.2e-7", "--atol", "1e-13"]
LOOSE = ["--rtol", "1e-3", "--atol", "1e-3"]


def write(folder, spec, **arrays):
    """spec.toml with the given lines, and each tensor saved by numpy (name.npy) from torch."""
    for name, t in arrays.items():
        np.save(folder / f"{name}.npy", t.numpy() if hasattr(t, "numpy") else t)
    (folder / "spec.toml").write_text("\n".join(spec) + "\n")
    return str(folder / "spec.toml")


def compare(capsys, *args):
    code = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def line(text, start):
    """The one line of ``text`` that starts with ``start``."""
    (found,) = [x for x in text.splitlines() if x.startswith(start)]
    return found


@pytest.fixture
def varlen(tmp_path, packed):
    """Four packed sequences (one without queries), 4 query heads and 2 kv heads, causal bottom-right."""
    q, k, v, cq, ck, ref = packed
    spec = ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', 'cu_seqlens_q = "cu_q.npy"', 'cu_seqlens_k = "cu_k.npy"']
    spec += ['mask = "causal"', 'causal_align = "bottom-right"']
    return write(tmp_path, spec, q=q, k=k, v=v, cu_q=cq, cu_k=ck, o=ref.float()), ref.float()


def test_varlen_from_files_passes_and_names_the_planted_place(varlen, tmp_path, capsys):
    spec, ref = varlen
    code, out, _ = compare(capsys, spec, tmp_path / "o.npy", *CLOSE)
    assert code == 0 and "Places are 0-based, as numpy indexes: o[token, head, column]." in out
    assert line(out, "480 of 480") == "480 of 480 entries are correctly rounded (error at most 0.5 ULP)."
    bad = ref.clone()
    bad[9, 2, 5] += 0.125
    np.save(tmp_path / "bad.npy", bad.numpy())
    code, out, _ = compare(capsys, spec, tmp_path / "bad.npy", *LOOSE)
    assert code == 1
    assert line(out, "The worst entry") == (
        "The worst entry is o[9, 2, 5] (sequence 2, query 4), where |out − exact| / (atol + rtol·|exact|) = 111."
    )
    code, out, _ = compare(capsys, spec, tmp_path / "bad.npy", "--format", "json", "--summary")
    summary = json.loads(out)["summary"]
    assert code == 0 and summary["max_ulps_at"] == {"token": 9, "head": 2, "column": 5}


def test_varlen_from_files_is_the_api_report(varlen, tmp_path, capsys):
    """The same engine: the CLI's JSON is symattn.kernel.compare's, with the file's name for out's."""
    from symattn.kernel import compare as api

    spec, ref = varlen
    code, out, _ = compare(capsys, spec, tmp_path / "o.npy", "--format", "json")
    arrays = {n: np.load(tmp_path / f"{n}.npy") for n in ("q", "k", "v", "cu_q", "cu_k")}
    report = api(
        ref,
        arrays["q"],
        arrays["k"],
        arrays["v"],
        cu_seqlens_q=arrays["cu_q"],
        cu_seqlens_k=arrays["cu_k"],
        causal=True,
        causal_align="bottom-right",
    )
    expected = report.to_json().replace('"out"', json.dumps(str(tmp_path / "o.npy"))).replace("out[", "o[")
    assert code == 0 and out == expected


def test_varlen_gradients_from_files(varlen, tmp_path, capsys):
    spec, _ = varlen
    q, k, v = (torch.from_numpy(np.load(tmp_path / f"{n}.npy")) for n in "qkv")
    cq, ck = (np.load(tmp_path / f"{n}.npy") for n in ("cu_q", "cu_k"))
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(4))
    _, dv = varlen_gradients(q, k, v, cq, ck, dout)
    np.save(tmp_path / "do.npy", dout.numpy())
    np.save(tmp_path / "dv.npy", dv.float().numpy())
    args = ["--quantity", "dv", "--grad-output", tmp_path / "do.npy", *CLOSE]
    code, out, _ = compare(capsys, spec, tmp_path / "dv.npy", *args)
    assert code == 0 and "Places are 0-based, as numpy indexes: dv[key, head, column]." in out


def test_varlen_gradients_take_the_spec_s_backward_grad_output(varlen, tmp_path, capsys):
    """dO from [backward] grad_output, as a plain spec names it: the report of --grad-output's; the forward
    compare of the same spec as before; a bad [backward] in one line."""
    spec, ref = varlen
    q, k, v = (torch.from_numpy(np.load(tmp_path / f"{n}.npy")) for n in "qkv")
    cq, ck = (np.load(tmp_path / f"{n}.npy") for n in ("cu_q", "cu_k"))
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(4))
    np.save(tmp_path / "do.npy", dout.numpy())
    np.save(tmp_path / "dk.npy", varlen_gradients(q, k, v, cq, ck, dout)[0].float().numpy())
    args = ["--quantity", "dk", "--format", "json", *CLOSE]
    code, given, _ = compare(capsys, spec, tmp_path / "dk.npy", *args, "--grad-output", tmp_path / "do.npy")
    text = (tmp_path / "spec.toml").read_text()
    (tmp_path / "spec.toml").write_text(text + '[backward]\ngrad_output = "do.npy"\n')
    assert compare(capsys, spec, tmp_path / "dk.npy", *args) == (0, given, "")
    assert compare(capsys, spec, tmp_path / "o.npy", *CLOSE)[0] == 0
    np.save(tmp_path / "do.npy", dout.numpy()[:, :2])
    assert compare(capsys, spec, tmp_path / "dk.npy", *args) == (
        2,
        "",
        f"symattn: {spec}: backward.grad_output: 'do.npy': shape: (15, 2, 8); O's shape is (15, 4, 8)\n",
    )
    for table, problem in (
        ('loss = "sum"', "backward.loss: not taken with a layout's files: [backward] gives grad_output, dO's file"),
        (
            "grad_output = [[1]]",
            "backward.grad_output: expected a .npy or .safetensors file name (dO as saved), got a list",
        ),
    ):
        (tmp_path / "spec.toml").write_text(text + f"[backward]\n{table}\n")
        assert compare(capsys, spec, tmp_path / "dk.npy", *args) == (2, "", f"symattn: {spec}: {problem}\n")


@pytest.fixture
def paged(tmp_path):
    """Two sequences in a cache of 6 blocks of 4 keys (2 kv heads), q (batch, queries, heads, d)."""
    gen = torch.Generator().manual_seed(5)
    k_cache, v_cache = (torch.randn(6, 4, 2, 8, generator=gen) for _ in range(2))
    table = torch.tensor([[5, 0, 3], [2, 4, 1]], dtype=torch.int32)
    lengths = torch.tensor([10, 7], dtype=torch.int32)
    q = torch.randn(2, 3, 4, 8, generator=gen)
    refs = []
    for b in range(2):
        k, v = (c[table[b].long()].reshape(-1, 2, 8)[: lengths[b]].transpose(0, 1) for c in (k_cache, v_cache))
        refs.append(sdpa64(q[b].transpose(0, 1), k, v, causal=True).transpose(0, 1))
    safetensors_torch.save_file({"block_table": table, "seqlens_k": lengths}, str(tmp_path / "paged.safetensors"))
    spec = ['layout = "bnhd"', 'Q = "q.npy"', 'K = "k_cache.npy"', 'V = "v_cache.npy"', 'mask = "causal"']
    spec += ['causal_align = "bottom-right"']
    spec += ['block_table = "paged.safetensors:block_table"', 'seqlens_k = "paged.safetensors:seqlens_k"']
    ref = torch.stack(refs).float()
    return write(tmp_path, spec, q=q, k_cache=k_cache, v_cache=v_cache, o=ref), ref


def test_a_paged_cache_from_files(paged, tmp_path, capsys):
    spec, ref = paged
    code, out, _ = compare(capsys, spec, tmp_path / "o.npy", *CLOSE)
    assert code == 0 and "Places are 0-based, as numpy indexes: o[batch, query, head, column]." in out
    bad = ref.clone()
    bad[1, 2, 3, 5] -= 0.25
    np.save(tmp_path / "bad.npy", bad.numpy())
    code, out, _ = compare(capsys, spec, tmp_path / "bad.npy", "--max-ulp", "4")
    assert code == 1 and line(out, "Largest error:").endswith("ULP, at o[1, 2, 3, 5].")
    assert line(out, "Fail by --max-ulp 4").startswith("Fail by --max-ulp 4: 1 of 192 entries exceed it;")


def test_fp8_safetensors_inputs_with_descale_files(tmp_path, capsys):
    gen = torch.Generator().manual_seed(8)
    e4m3 = torch.float8_e4m3fn
    q = (2 * torch.randn(2, 32, 4, 16, generator=gen)).to(e4m3)  # (batch, queries, heads, d)
    k, v = ((2 * torch.randn(2, 32, 2, 16, generator=gen)).to(e4m3) for _ in range(2))
    qs, ks, vs = (2 * torch.rand(2, 2, generator=gen) for _ in range(3))  # (batch, kv heads)

    def scaled(x, s):
        return (x.double() * s.double()[:, None, :, None]).transpose(1, 2)

    ref = sdpa64(scaled(q, qs.repeat_interleave(2, dim=1)), scaled(k, ks), scaled(v, vs), causal=True)
    ref = ref.transpose(1, 2).float()
    safetensors_torch.save_file({"q": q, "k": k, "v": v}, str(tmp_path / "qkv.safetensors"))
    spec = ['layout = "bnhd"', 'mask = "causal"', 'Q = "qkv.safetensors:q"', 'K = "qkv.safetensors:k"']
    spec += ['V = "qkv.safetensors:v"', 'q_descale = "qd.npy"', 'k_descale = "kd.npy"', 'v_descale = "vd.npy"']
    spec = write(tmp_path, spec, qd=qs, kd=ks, vd=vs, o=ref)
    code, out, _ = compare(capsys, spec, tmp_path / "o.npy", *CLOSE)
    assert code == 0 and line(out, "Each (batch, head)") == "Each (batch, head):"
    bad = ref.clone()
    bad[0, 7, 3, 2] += 0.5
    np.save(tmp_path / "bad.npy", bad.numpy())
    code, out, _ = compare(capsys, spec, tmp_path / "bad.npy", *LOOSE)
    assert code == 1 and line(out, "The worst entry").startswith("The worst entry is o[0, 7, 3, 2], where")


def partials(q, k, v, offsets):
    """A split-KV kernel's tensors as saved for --partials (tests/test_kernel_partials.py's kernel)."""
    return dict(zip(("partials_out", "partials_lse", "out", "lse"), split_kernel(q, k, v, offsets)))


@pytest.fixture
def decode(tmp_path):
    gen = torch.Generator().manual_seed(9)
    q = torch.randn(2, 4, 1, 32, generator=gen)  # one query per sequence: decoding
    k, v = (torch.randn(2, 4, 100, 32, generator=gen) for _ in range(2))
    return write(tmp_path, ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"'], q=q, k=k, v=v), (q, k, v)


def test_partials_from_a_safetensors_file(decode, tmp_path, capsys):
    spec, (q, k, v) = decode
    path = tmp_path / "splits.safetensors"
    safetensors_torch.save_file(partials(q, k, v, [0, 25, 50, 75, 100]), str(path))
    code, out, _ = compare(capsys, spec, path, "--partials", "--rtol", "1e-6", "--atol", "1e-6")
    heads = [x for x in out.splitlines() if x.startswith("== ")]
    assert code == 0 and heads[:2] == ["== split 0 (keys 0 to 24): O_0 ==", "== split 0 (keys 0 to 24): LSE_0 =="]
    assert heads[-2:] == ["== the merge: O ==", "== the merge: LSE =="]
    assert (
        line(out, f"The output of {path}:partials_out[3]")
        == f"The output of {path}:partials_out[3] (float32) against the exact values"
    )
    made = partials(q, k, v, [0, 40, 100])
    made["partials_out"][1, 1, 2, 0, 7] += 0.01
    del made["out"], made["lse"]
    safetensors_torch.save_file(made, str(path))
    code, out, _ = compare(capsys, spec, path, "--partials", "--splits", "0,40,100", "--format", "json", *LOOSE[:2])
    checks = json.loads(out)["checks"]
    assert code == 1 and json.loads(out)["splits"] == [{"keys": [0, 40]}, {"keys": [40, 100]}]
    assert [c["check"] for c in checks if not c["verdict"]["pass"]] == ["split 1 (keys 40 to 99): O_1"]
    code, out, _ = compare(capsys, spec, path, "--partials", "--splits", "0,40,100", *LOOSE)
    assert line(out, "The worst entry is partials_out[1]").startswith(
        "The worst entry is partials_out[1][1, 2, 0, 7], where"
    )


BAD_VARLEN = [  # (the file saved as cu_q.npy, the line)
    (
        np.array([0.0, 5, 5, 12, 15], np.float32),
        "descr: a float32 array where whole numbers are needed (int32 or int64, as torch saves them)",
    ),
    (np.array([0, 5, 3, 12, 15], np.int32), "[2]: 3 is less than [1] (5): the offsets may not decrease"),
    (np.array([0, 5, 5, 12, 14], np.int32), "[4]: 14 is the last offset; q holds 15 tokens"),
    (np.array([1, 5, 5, 12, 15], np.int64), "[0]: 1 is not 0: the offsets start at 0"),
    (
        np.array([0, 5, 5, 12, 15], ">i4"),
        "descr: a big-endian int32 array ('>i4'); save it little-endian (numpy's default)",
    ),
    (
        np.array([0, 5, 5, 12, 15], object),
        "descr: an object array where whole numbers are needed (int32 or int64, as torch saves them)",
    ),
    (np.array([[0, 5], [12, 15]], np.int32), "expected 1 axis of whole numbers, got shape (2, 2) of int32"),
    (np.array([0, 5, 12, 15], np.int32), "4 sequences; cu_seqlens_q has 3"),
    # offsets that a difference of int64s would see rise: 2^62, then −2^63 + 100 (np.diff wraps round)
    (
        np.array([0, 2**62, -(2**63) + 100, 12, 15], np.int64),
        "[2]: -9223372036854775708 is less than [1] (4611686018427387904): the offsets may not decrease",
    ),
    (np.array([0], np.int32), "1 offset: at least 2, a sequence's first and its end"),
]


@pytest.mark.parametrize("array, message", BAD_VARLEN)
def test_bad_varlen_files_are_one_line(varlen, tmp_path, capsys, array, message):
    spec, _ = varlen
    np.save(tmp_path / "cu_q.npy", array, allow_pickle=array.dtype.hasobject)
    code, out, err = compare(capsys, spec, tmp_path / "o.npy")
    key = "cu_seqlens_k" if message.startswith("4 sequences") else "cu_seqlens_q"
    file = "cu_k.npy" if key == "cu_seqlens_k" else "cu_q.npy"
    after = message if message.startswith("[") else f": {message}"  # a place in the file: 'cu_q.npy'[2]
    assert (code, out) == (2, "") and err == f"symattn: {spec}: {key}: '{file}'{after}\n"


def test_hostile_integer_files_are_one_line(varlen, tmp_path, capsys):
    """A file cut short, a uint64 past int64's range, booleans: read within the limits, never unpickled."""
    spec, _ = varlen
    np.save(tmp_path / "whole.npy", np.array([0, 5, 5, 12, 15], np.int32))
    cases = [
        ((tmp_path / "whole.npy").read_bytes()[:-4], "shape: 16 bytes of data for 5 int32 (20 expected)"),
        (np.array([0, 2**63 + 1, 5, 12, 15], np.uint64), "[1]: 9223372036854775809 is past int64's range"),
        (
            np.array([0, 1, 1, 1, 1], bool),
            "descr: a bool array where whole numbers are needed (int32 or int64, as torch saves them)",
        ),
    ]
    for given, message in cases:
        if isinstance(given, bytes):
            (tmp_path / "cu_q.npy").write_bytes(given)
        else:
            np.save(tmp_path / "cu_q.npy", given)
        code, out, err = compare(capsys, spec, tmp_path / "o.npy")
        after = message if message.startswith("[") else f": {message}"
        assert (code, out, err) == (2, "", f"symattn: {spec}: cu_seqlens_q: 'cu_q.npy'{after}\n")


BAD_PAGED = [  # (what is saved over the paged.safetensors tensors, the key, the line)
    (
        {"block_table": torch.tensor([[5, 0, 6], [2, 4, 1]], dtype=torch.int32)},
        "block_table",
        "[0, 2]: 6 is no block of the caches (0 to 5)",
    ),
    (
        {"block_table": torch.tensor([[5, 0, -1], [2, 4, 1]], dtype=torch.int64)},
        "block_table",
        "[0, 2]: -1 is no block of the caches (0 to 5)",
    ),
    (
        {"seqlens_k": torch.tensor([-3, 7], dtype=torch.int32)},
        "seqlens_k",
        "[0]: -3 is not 1 to 12, the keys batch 0's cache holds",
    ),
    ({"seqlens_k": torch.tensor([10, 7, 1], dtype=torch.int32)}, "seqlens_k", "shape: 3 lengths; q has a batch of 2"),
    (
        {"block_table": torch.tensor([[5.0, 0, 3], [2, 4, 1]])},
        "block_table",
        "dtype 'F32' where whole numbers are needed (I32 or I64, as torch saves them)",
    ),
    (
        {"block_table": torch.tensor([5, 0, 3], dtype=torch.int32)},
        "block_table",
        "expected 2 axes of whole numbers, got shape (3,) of int32",
    ),
]


@pytest.mark.parametrize("tensors, key, message", BAD_PAGED)
def test_bad_paged_files_are_one_line(paged, tmp_path, capsys, tensors, key, message):
    spec, _ = paged
    given = {"block_table": torch.tensor([[5, 0, 3], [2, 4, 1]], dtype=torch.int32)}
    given["seqlens_k"] = torch.tensor([10, 7], dtype=torch.int32)
    safetensors_torch.save_file(given | tensors, str(tmp_path / "paged.safetensors"))
    code, out, err = compare(capsys, spec, tmp_path / "o.npy")
    file = (
        "paged.safetensors" if message.startswith("dtype") else f"paged.safetensors:{key}"
    )  # the reader's, the engine's
    key = f"{key}: '{file}': {key}" if message.startswith("dtype") else f"{key}: '{file}'"
    after = message if message.startswith("[") else f": {message}"
    assert (code, out) == (2, "") and err == f"symattn: {spec}: {key}{after}\n"


def test_bad_specs_and_options_are_one_line(varlen, tmp_path, capsys):
    spec, _ = varlen
    text = (tmp_path / "spec.toml").read_text()
    result = tmp_path / "o.npy"
    cases = [
        (
            'tokens = ["a"]\n',
            [],
            f"{spec}: tokens: not taken with a layout's files: such a spec gives Q, K, V, layout, mask, causal_align, window, scale, backward, alibi_slopes, softcap, sinks, softcap_order, cu_seqlens_q, cu_seqlens_k, block_table, seqlens_k, q_descale, k_descale, v_descale",
        ),
        (
            "window = 0\n",
            [],
            f"{spec}: window: expected keys from 1 to 2147483647 (a causal window ending at the diagonal) or "
            "FlashAttention's window_size (left, right), each -1 (no bound) or 0 to 2147483647; got 0",
        ),
        ("", ["--quantity", "weights"], "--quantity: weights: cu_seqlens_q takes output, lse, dq, dk, dv or dsink"),
        ("", ["--splits", "2"], "--splits: is for --partials: the splits of a split-KV kernel's keys"),
        ("", ["--partials"], f"{result}: expected a .safetensors file, whose tensors are named"),  # varlen: taken
        ("", ["--quantity", "lse"], f"{result}: shape: (15, 4, 8); the lse of these q, k and v is (4, 15)"),
        (
            "",
            ["--dtype", "bfloat16"],
            f"{result}[0, 0, 0]: {float(np.load(result)[0, 0, 0])!r} is not a bfloat16 value: --dtype bfloat16 needs every value to be one (the file holds float32)",
        ),
    ]
    for extra, args, message in cases:
        (tmp_path / "spec.toml").write_text(text.replace('mask = "causal"\n', 'mask = "causal"\n' + extra))
        code, out, err = compare(capsys, spec, result, *args)
        assert (code, out, err) == (2, "", f"symattn: {message}\n"), extra or args
    (tmp_path / "spec.toml").write_text(text.replace('Q = "q.npy"', "Q = [[1, 2]]"))
    code, _, err = compare(capsys, spec, result)
    assert err == f"symattn: {spec}: Q: expected a .npy or .safetensors file name (the tensor as saved), got a list\n"
    (tmp_path / "spec.toml").write_text(text)
    json_result = tmp_path / "o.json"
    json_result.write_text("[[1, 2]]")
    code, _, err = compare(capsys, spec, json_result)
    assert err == f"symattn: {json_result}: expected a .npy or .safetensors file: this layout's result keeps its axes\n"
    assert main(["render", spec]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {spec}: cu_seqlens_q: varlen, paged caches and FP8 descales are for symattn compare; a derivation "
        "takes Q, K and V as matrices\n"
    )


def test_bad_partials_files_are_one_line(decode, tmp_path, capsys):
    spec, (q, k, v) = decode
    path = tmp_path / "splits.safetensors"
    made = partials(q, k, v, [0, 50, 100])
    cases = [
        (
            {"partials_out": made["partials_out"]},
            [],
            f"{path}: no tensor named 'partials_lse'; --partials reads partials_out, partials_lse, out, lse",
        ),
        (
            made | {"extra": made["lse"].clone()},
            [],
            f"{path}: a tensor named 'extra'; --partials reads partials_out, partials_lse, out, lse",
        ),
        (made, ["--splits", "3"], f"{path}:partials_out: shape: 2 splits; the splits given make 3"),
        (made, ["--splits", "0,60,50,100"], "--splits: expected 0, then increasing key offsets ending at 100"),
        (made, ["--splits", "two"], "--splits: expected a count such as 4 or key offsets such as 0,40,100, got 'two'"),
        (made, ["--naive", path], "--naive: is not for --partials, which compares O_i and LSE_i with the exact values"),
    ]
    for tensors, args, message in cases:
        safetensors_torch.save_file(tensors, str(path))
        code, out, err = compare(capsys, spec, path, "--partials", *args)
        assert (code, out, err) == (2, "", f"symattn: {message}\n"), message
