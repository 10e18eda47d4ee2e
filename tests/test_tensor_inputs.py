"""Spec keys that name a .npy or .safetensors file (issue 22): every float read exactly, hostile files refused
in one line, and compare's float64 path fed the array itself."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.input import limits
from symattn.input.errors import LimitError, SpecError
from symattn.input.filematrix import FileMatrix, numeral
from symattn.input.floats import read_result
from symattn.input.spec import load_spec, spec_from_mapping
from symattn.kernel import heads as kernel

ROOT = Path(__file__).resolve().parent.parent

# (format, exponent bits, fraction bits): the value of a bit pattern, by the IEEE formula, in Fractions
LAYOUT = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}


def value_of(bits: int, fmt: str) -> Fraction:
    e_bits, f_bits = LAYOUT[fmt]
    sign = -1 if bits >> (e_bits + f_bits) else 1
    exponent = (bits >> f_bits) & ((1 << e_bits) - 1)
    fraction = bits & ((1 << f_bits) - 1)
    bias = (1 << (e_bits - 1)) - 1
    if exponent == 0:  # subnormal (and ±0)
        return sign * Fraction(fraction, 1 << f_bits) * Fraction(2) ** (1 - bias)
    return sign * (1 + Fraction(fraction, 1 << f_bits)) * Fraction(2) ** (exponent - bias)


def patterns(fmt: str) -> list[int]:
    """±0, the smallest and largest subnormals, the smallest normal, 1, 1 + ulp, the largest finite, −max."""
    e_bits, f_bits = LAYOUT[fmt]
    top = 1 << (e_bits + f_bits)
    bias = (1 << (e_bits - 1)) - 1
    biggest = (((1 << e_bits) - 2) << f_bits) | ((1 << f_bits) - 1)
    one = bias << f_bits
    return [0, top, 1, (1 << f_bits) - 1, 1 << f_bits, one, one + 1, biggest, top | biggest, top | 3]


UINT = {"float16": "<u2", "bfloat16": "<u2", "float32": "<u4", "float64": "<u8"}
DESCR = {"float16": "<f2", "bfloat16": "<V2", "float32": "<f4", "float64": "<f8"}
ST = {"float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}


def npy(path: Path, descr: str, shape: tuple[int, ...], body: bytes, fortran: bool = False) -> Path:
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}".encode("latin-1")
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + body)
    return path


def safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]], meta: dict | None = None) -> Path:
    header, body = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    if meta is not None:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)
    return path


def spec_file(folder: Path, **keys: str) -> Path:
    path = folder / "s.toml"
    path.write_text("".join(f'{k} = "{v}"\n' for k, v in keys.items()))
    return path


def entries(m) -> list[Fraction]:
    return [x.value for row in m for x in row]


@pytest.mark.parametrize("fmt", list(LAYOUT))
@pytest.mark.parametrize("container", ["npy", "npy-fortran", "safetensors"])
def test_every_bit_pattern_is_read_as_the_rational_it_is(tmp_path, fmt, container):
    bits = patterns(fmt)  # 10 of them: a 2×5 matrix
    body = np.array(bits, dtype=UINT[fmt]).tobytes()
    expected = [value_of(b, fmt) for b in bits]
    if container == "npy":
        npy(tmp_path / "q.npy", DESCR[fmt], (2, 5), body)
        name = "q.npy"
    elif container == "npy-fortran":  # the same matrix, stored column by column
        column_major = np.array(bits, dtype=UINT[fmt]).reshape(2, 5).T.copy().tobytes()
        npy(tmp_path / "q.npy", DESCR[fmt], (2, 5), column_major, fortran=True)
        name = "q.npy"
    else:
        safetensors(tmp_path / "t.safetensors", {"q": (ST[fmt], [2, 5], body)}, {"format": "pt"})
        name = "t.safetensors"
    ones = tmp_path / "k.npy"
    np.save(ones, np.ones((3, 5), dtype=np.float32))
    spec = load_spec(spec_file(tmp_path, Q=name, K="k.npy", V="k.npy"))
    assert isinstance(spec.Q, FileMatrix) and spec.Q.format == fmt
    assert entries(spec.Q) == expected
    assert [Fraction(x) for x in spec.Q.array.ravel().tolist()] == expected  # the array is as exact
    for x in (x for row in spec.Q for x in row):  # each entry's text is its exact value again
        assert Fraction(Decimal(x.text)) == x.value


@pytest.mark.parametrize("descr", ["|V2", "V2", "bfloat16"])  # "<bfloat16": numpy cannot read it
def test_bfloat16_as_torch_and_ml_dtypes_save_it(tmp_path, descr):
    npy(tmp_path / "q.npy", descr, (1, 2), np.array([0x3F80, 0x0001], dtype="<u2").tobytes())
    spec = load_spec(spec_file(tmp_path, Q="q.npy", K="q.npy", V="q.npy"))
    assert entries(spec.Q) == [Fraction(1), Fraction(2) ** -133]


def test_numpy_saves_in_both_orders_and_the_values_agree(tmp_path):
    a = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    np.save(tmp_path / "c.npy", a)
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    assert b"'fortran_order': True" in (tmp_path / "f.npy").read_bytes()[:128]
    spec = load_spec(spec_file(tmp_path, Q="c.npy", K="f.npy", V="f.npy"))
    assert entries(spec.Q) == entries(spec.K) == [Fraction(float(x)) for x in a.ravel()]


def test_a_safetensors_file_names_its_tensor(tmp_path):
    q = np.arange(6, dtype=np.float32).reshape(2, 3) / 8
    k = -q
    safetensors(tmp_path / "qkv.safetensors", {"q": ("F32", [2, 3], q.tobytes()), "k": ("F32", [1, 2, 3], k.tobytes())})
    spec = load_spec(spec_file(tmp_path, Q="qkv.safetensors:q", K="qkv.safetensors:k", V="qkv.safetensors:q"))
    assert entries(spec.Q) == [Fraction(int(i), 8) for i in range(6)]
    assert entries(spec.K) == [-Fraction(int(i), 8) for i in range(6)]
    with pytest.raises(SpecError) as info:
        load_spec(spec_file(tmp_path, Q="qkv.safetensors", K="qkv.safetensors:k", V="qkv.safetensors:q"))
    assert str(info.value) == (
        f"{tmp_path / 's.toml'}: Q: 'qkv.safetensors': 2 tensors (k, q…): name one as FILE.safetensors:NAME"
    )


def test_a_tensors_name_may_hold_a_colon_and_an_empty_name_is_one_line(tmp_path):
    q = np.arange(6, dtype=np.float32).reshape(2, 3) / 8
    safetensors(tmp_path / "qkv.safetensors", {"layer:0/q": ("F32", [2, 3], q.tobytes())})
    np.save(tmp_path / "k.npy", q)
    spec = load_spec(spec_file(tmp_path, Q="qkv.safetensors:layer:0/q", K="qkv.safetensors:layer:0/q", V="k.npy"))
    assert entries(spec.Q) == [Fraction(int(i), 8) for i in range(6)]
    result = read_result(tmp_path / "qkv.safetensors:layer:0/q")
    assert result.rows == tuple(tuple(Fraction(int(i), 8) for i in range(r, r + 3)) for r in (0, 3))
    for name, why in (
        ("qkv.safetensors:", "expected a tensor's name after ':' (FILE.safetensors:NAME)"),
        ("k.npy:q", "a .npy file holds one array; no name follows it"),
    ):
        with pytest.raises(SpecError) as info:
            load_spec(spec_file(tmp_path, Q=name, K="k.npy", V="k.npy"))
        assert str(info.value) == f"{tmp_path / 's.toml'}: Q: {name!r}: {why}"
    with pytest.raises(SpecError) as info:
        read_result(tmp_path / "qkv.safetensors:")
    assert str(info.value) == f"{tmp_path}/qkv.safetensors:: expected a tensor's name after ':' (FILE.safetensors:NAME)"


def test_the_exact_decimal_is_the_text():
    assert numeral(0.1).text == "0.1000000000000000055511151231257827021181583404541015625"
    assert numeral(float(np.float32(0.1))).text == "0.100000001490116119384765625"
    small = numeral(2.0**-149)
    assert small.text.startswith("1.40129846432481707092372958328991613128026194187651577") and small.text.endswith(
        "e-45"
    )
    assert Fraction(Decimal(small.text)) == Fraction(1, 2**149) == small.value
    assert numeral(-0.0).text == "0" and numeral(-0.0).value == 0
    assert numeral(65504.0).text == "65504" and numeral(-3.0e38).value == Fraction(-3.0e38)


def test_x_w_and_grad_output_may_name_files_too(tmp_path):
    rng = np.random.default_rng(2)
    for name, shape in (("x", (3, 4)), ("w", (4, 4)), ("g", (3, 4))):
        np.save(tmp_path / f"{name}.npy", (rng.integers(-8, 8, shape) / 4).astype(np.float16))
    path = tmp_path / "s.toml"
    path.write_text('X = "x.npy"\nW_Q = "w.npy"\nW_K = "w.npy"\nW_V = "w.npy"\n[backward]\ngrad_output = "g.npy"\n')
    spec = load_spec(path)
    x = np.load(tmp_path / "x.npy").astype(np.float64)
    assert spec.projection is not None
    assert entries(spec.projection.X) == [Fraction(float(v)) for v in x.ravel()]
    assert spec.backward is not None and spec.backward.grad_output is not None
    assert entries(spec.backward.grad_output) == [
        Fraction(float(v)) for v in np.load(tmp_path / "g.npy").astype(np.float64).ravel()
    ]


def test_a_file_spec_computes_the_same_exact_values_as_the_typed_one(tmp_path):
    from symattn.derivation.intermediates import compute_json

    q = np.array([[0.5, -1.25], [2.0, 0.75]], dtype=np.float16)
    np.save(tmp_path / "q.npy", q)
    typed = spec_from_mapping({"Q": q.tolist(), "K": q.tolist(), "V": q.tolist()})
    from_file = load_spec(spec_file(tmp_path, Q="q.npy", K="q.npy", V="q.npy"))
    assert [x.value for x in from_file.Q[1]] == [Fraction(2), Fraction(3, 4)]
    assert json.loads("".join(compute_json(from_file)))["output"] == json.loads("".join(compute_json(typed)))["output"]


def bad_spec(tmp_path, content: bytes, name: str = "q.npy", key_name: str | None = None) -> str:
    (tmp_path / name).write_bytes(content)
    ok = tmp_path / "ok.npy"
    np.save(ok, np.ones((2, 2), dtype=np.float32))
    path = spec_file(tmp_path, Q=key_name or name, K="ok.npy", V="ok.npy")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value).removeprefix(f"{path}: ")


def header_only(text: str, body: bytes = b"") -> bytes:
    data = text.encode("latin-1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(data)) + data + body


def test_hostile_npy_files_are_one_line_errors(tmp_path, capsys):
    import io
    import pickle

    buffer = io.BytesIO()
    np.save(buffer, np.array([[{"a": 1}]], dtype=object), allow_pickle=True)
    cases = [
        (buffer.getvalue(), "Q: 'q.npy': descr: expected a float16, bfloat16, float32 or float64 array"),
        (pickle.dumps([[1.0]]), "Q: 'q.npy': not a .npy file (no \\x93NUMPY magic)"),
        (header_only("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1), }"), "Q: 'q.npy': descr: expected"),
        (
            header_only("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", b"\0" * 12),
            "Q: 'q.npy': shape: 12 bytes of data for 2×2 float32 (16 expected)",
        ),
        (
            header_only("{'descr': '<f4', 'fortran_order': False, 'shape': (99999, 99999), }"),
            f"Q: 'q.npy': shape: (99999, 99999): more than {limits.TENSOR_ENTRIES} entries (the limit)",
        ),
        (
            header_only("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 1), }", b"\0" * 16),
            "Q: Q, K and V need 3 or 4 axes alike (bhnd); got Q (2, 2, 1), K (2, 2), V (2, 2)",
        ),
        (
            header_only("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2000), }", b"\0" * 8000),
            f"Q: 'q.npy': 1×2000; at most {limits.KERNEL_TOKENS}×{limits.DIMS}",
        ),
        (
            header_only("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }", struct.pack("<ff", 1, np.nan)),
            "Q: 'q.npy'[0, 1]: not a finite number: nan",
        ),
        (  # UTF-8 in the header: shown as written, the right-to-left override escaped (mojibake before)
            b"\x93NUMPY\x01\x00\x40\x00" + "{'descr': '<f4\u202e', 'shape': (2,), }".encode().ljust(64),
            "Q: 'q.npy': a .npy header numpy cannot read (\"{'descr': '<f4\\u202e', 'shape': (2,), }\")",
        ),
    ]
    for content, message in cases:
        got = bad_spec(tmp_path, content)
        assert got.startswith(message), (got, message)
        code = main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "ok.npy")])
        out, err = capsys.readouterr()
        assert (code, out, err.count("\n")) == (2, "", 1) and err.startswith("symattn: ") and message in err


OFFSETS = "not a .safetensors file: invalid shape, data type, or offset for tensor"
COVERED = "not a .safetensors file: incomplete metadata, file not fully covered"


def test_hostile_safetensors_files_are_one_line_errors(tmp_path):
    good = np.ones(4, dtype=np.float32).tobytes()

    def raw(header: bytes, body: bytes = b"") -> bytes:
        return struct.pack("<Q", len(header)) + header + body

    cases = [
        (b"\x01\x02", "not a .safetensors file (shorter than its 8-byte header length)"),
        (struct.pack("<Q", 2**40), f"a .safetensors header of {2**40} bytes; at most {limits.SAFETENSORS_HEADER}"),
        (raw(b"{"), "not a .safetensors header: "),
        (
            raw(b'{"q": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "q": 1}'),
            "not a .safetensors header: the name 'q' twice",
        ),
        (raw(b'{"q": {"dtype": "I32", "shape": [2, 2], "data_offsets": [0, 16]}}', good), "q: dtype 'I32'"),
        # the safetensors package's own words from here on
        (raw(b'{"q": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 64]}}', good), OFFSETS),
        (raw(b'{"q": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 16]}}', good), OFFSETS),
        (raw(b'{"q": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}', good + b"xx"), COVERED),
        (
            raw(b'{"q": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 16]}}', good),
            "not a .safetensors file: invalid JSON in header: invalid value: integer `-2`, expected usize",
        ),
        (
            raw(b'{"__metadata__": {"a": 1}, "q": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}', good),
            "not a .safetensors file: invalid JSON in header: invalid type: integer `1`, expected a string",
        ),
        (
            raw(b'{"q": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "x": NaN}', good),
            "not a .safetensors header: NaN is not JSON",
        ),
    ]
    for content, message in cases:
        got = bad_spec(tmp_path, content, "t.safetensors")
        assert got.startswith(f"Q: 't.safetensors': {message}"), (got, message)
    got = bad_spec(
        tmp_path,
        raw(b'{"q": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}', good),
        "t.safetensors",
        "t.safetensors:k",
    )
    assert got == "Q: 't.safetensors': no tensor named 'k'"


def test_paths_stay_in_the_spec_folder(tmp_path, capsys):
    folder = tmp_path / "specs"
    folder.mkdir()
    outside = tmp_path / "secret.npy"
    np.save(outside, np.ones((2, 2), dtype=np.float32))
    np.save(folder / "ok.npy", np.ones((2, 2), dtype=np.float32))
    os.symlink(outside, folder / "link.npy")
    (folder / "sub").mkdir()
    os.symlink(tmp_path, folder / "sub" / "up")
    os.mkfifo(folder / "fifo.npy")
    cases = [
        (str(outside), "a file name relative to the spec's folder is needed"),
        ("../secret.npy", "a file name may not go up a folder (..)"),
        ("sub/../../secret.npy", "a file name may not go up a folder (..)"),
        ("link.npy", "leads outside the spec's folder (through a link)"),
        ("sub/up/secret.npy", "leads outside the spec's folder (through a link)"),
        ("missing.npy", "cannot read file: No such file or directory"),
        ("fifo.npy", "not a regular file"),
        ("q.txt", None),
    ]
    for name, problem in cases:
        path = spec_file(folder, Q=name, K="ok.npy", V="ok.npy")
        with pytest.raises(SpecError) as info:
            load_spec(path)
        expected = (
            f"{path}: Q: {name!r}: {problem}"
            if problem
            else f"{path}: Q: expected a matrix (a list of rows) or a .npy or .safetensors file name, got 'q.txt'"
        )
        assert str(info.value) == expected
        assert main(["compare", str(path), str(folder / "ok.npy")]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", f"symattn: {expected}\n")


def test_a_file_name_needs_a_spec_file(tmp_path):
    with pytest.raises(SpecError) as info:
        spec_from_mapping({"Q": "q.npy", "K": [[1]], "V": [[1]]})
    assert (
        str(info.value)
        == "<dict>: Q: a file name ('q.npy') is read only from a spec file, beside it; give the rows here"
    )


def test_the_file_size_limit_is_checked_before_reading(tmp_path, monkeypatch):
    np.save(tmp_path / "q.npy", np.ones((1024, 512), dtype=np.float32))  # 2 MiB and its header
    monkeypatch.setattr(limits, "TENSOR_BYTES", 2**20)
    path = spec_file(tmp_path, Q="q.npy", K="q.npy", V="q.npy")
    with pytest.raises(LimitError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}: Q: 'q.npy': larger than 1 MiB (the limit)"


def test_compare_takes_the_array_and_makes_no_numerals(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((64, 32)).astype(np.float32))
    spec = load_spec(spec_file(tmp_path, Q="q.npy", K="k.npy", V="v.npy"))
    import symattn.input.filematrix as filematrix

    def refuse(x):
        raise AssertionError("a Numeral was made")

    monkeypatch.setattr(filematrix, "numeral", refuse)
    heads = kernel.heads_of(spec, "output")
    assert heads is not None and heads[0].Q is spec.Q.array  # type: ignore[union-attr]


def test_torch_sdpa_from_npy_files_end_to_end(tmp_path):
    """Q, K, V as float32 .npy files, torch's CPU SDPA output compared, figures equal to mpmath's."""
    torch = pytest.importorskip("torch")
    from .test_kernel import mp_row, ulps_of

    rng = np.random.default_rng(7)
    Q, K, V = (rng.standard_normal((80, 32)).astype(np.float32) for _ in range(3))
    for name, M in zip("qkv", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", M)
    out = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(M)[None] for M in (Q, K, V)))[0]
    np.save(tmp_path / "o.npy", out.numpy())
    spec_file(tmp_path, Q="q.npy", K="k.npy", V="v.npy")
    run = subprocess.run(
        [sys.executable, "-m", "symattn", "compare", "s.toml", "o.npy", "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["engine"]["path"] == "float64" and data["summary"]["entries"] == 80 * 32
    x = out.numpy().astype(np.float64)
    by_position = {(e["query"], e["column"]): e for e in data["entries"]}
    worst = (data["summary"]["max_ulps_at"]["query"], data["summary"]["max_ulps_at"]["column"])
    for i, j in [(0, 0), (33, 9), (79, 31), worst]:
        _, output = mp_row(Q, K, V, i)
        assert Decimal(by_position[(i, j)]["ulps"]) == ulps_of(x[i, j], output[j], "float32")


def test_results_read_bfloat16_too(tmp_path):
    path = npy(tmp_path / "r.npy", "<V2", (1, 2), np.array([0x3F80, 0xBF40], dtype="<u2").tobytes())
    result = read_result(path)
    assert result.format == "bfloat16" and result.rows == ((Fraction(1), Fraction(-3, 4)),)


def test_a_npy_result_keeps_its_array_and_compares_as_its_fractions_do(tmp_path):
    from dataclasses import replace

    from symattn.kernel.spec_comparison import compare, comparison_data

    rng = np.random.default_rng(11)
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((24, 8)).astype(np.float32))
    out = rng.standard_normal((24, 8)).astype(np.float32) / 4
    out[3, 5] = np.inf
    np.save(tmp_path / "o.npy", out)
    spec = load_spec(spec_file(tmp_path, Q="q.npy", K="k.npy", V="v.npy"))
    result = read_result(tmp_path / "o.npy")
    assert result.array is not None and result.not_finite == (((3, 5), "inf"),)
    assert comparison_data(compare(spec, result)) == comparison_data(compare(spec, replace(result, array=None)))


def test_a_claims_file_s_spec_reads_its_files_beside_that_spec(tmp_path):
    from symattn.input.claims import load_claims

    folder = tmp_path / "specs"
    folder.mkdir()
    np.save(folder / "q.npy", np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float16))
    spec_file(folder, Q="q.npy", K="q.npy", V="q.npy")
    claims = tmp_path / "c.toml"
    claims.write_text('spec = "specs/s.toml"\n[claims]\nscores = [[1, 0], [0, 1]]\n')
    loaded = load_claims(claims)
    assert entries(loaded.spec.Q) == [1, 0, 0, 1]


@pytest.mark.parametrize("variant", ["softcap = 1", "sinks = [0.5]", "alibi = true", "rope = true"])
def test_a_score_variant_s_path(tmp_path, variant):
    """Softcap, sinks and ALiBi of float values take the float64 path (their rules, kernel/score_mods.py);
    RoPE keeps the exact model. Either way the figures are the exact path's."""
    from symattn.exact.factory import build
    from symattn.kernel.spec_comparison import compare, comparison_data

    np.save(tmp_path / "q.npy", np.array([[0.5, 1.0], [1.0, -0.5]], dtype=np.float32))
    path = tmp_path / "s.toml"
    path.write_text(f'Q = "q.npy"\nK = "q.npy"\nV = "q.npy"\n{variant}\n')
    spec = load_spec(path)
    assert (kernel.heads_of(spec, "output") is None) == (variant == "rope = true")
    exact = build(spec).significant("output", 40)  # type: ignore[attr-defined]
    np.save(tmp_path / "o.npy", np.array([[float(x) for x in row] for row in exact], dtype=np.float64))
    data = comparison_data(compare(spec, read_result(tmp_path / "o.npy")))
    assert ("engine" in data) == (variant != "rope = true") and data["summary"]["correctly_rounded"] == 4


def test_files_reach_kernel_sizes_on_compare_only(tmp_path, capsys):
    # 1100 tokens from files: past the exact path's 1024, so compare's float64 path takes them, and
    # compute says where they belong
    rng = np.random.default_rng(4)
    Q, K, V = (rng.standard_normal((1100, 4)).astype(np.float32) for _ in range(3))
    for name, a in zip("qkv", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", a)
    Z = Q.astype(np.float64) @ K.T.astype(np.float64) / 2
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    np.save(tmp_path / "o.npy", ((E @ V) / E.sum(axis=1, keepdims=True)).astype(np.float32))
    spec = tmp_path / "s.toml"
    spec.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    assert main(["compare", str(spec), str(tmp_path / "o.npy"), "--format", "json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["summary"]["entries"] == 4400
    assert main(["compute", str(spec)]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {spec}: Q: 1100 tokens; compute, check and render take at most 1024 (compare takes up to 8192 "
        "from .npy or .safetensors files of float32 values, on its float64 path)\n"
    )


def test_the_kernel_token_limit(tmp_path):
    np.save(tmp_path / "q.npy", np.zeros((limits.KERNEL_TOKENS + 1, 2), dtype=np.float32))
    with pytest.raises(LimitError) as info:
        load_spec(spec_file(tmp_path, Q="q.npy", K="q.npy", V="q.npy"))
    assert str(info.value) == f"{tmp_path / 's.toml'}: Q: 'q.npy': 8193×2; at most 8192×1024"
