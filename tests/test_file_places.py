"""The places of bad values read from files or given in memory are numpy's: 0-based, in the array's own axes
(``'q.npy'[0, 0, 2, 5]``, ``q[1, 3, 0, 2]``), as compare names a result's places; a spec's typed lists keep
their 1-based ``Q[1][2]`` (issue 30)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from symattn.input.errors import SpecError
from tests.test_compare_spec_variants import cli

B, H, N, D = 2, 3, 5, 4


def arrays(seed: int = 1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((B, N, H, D)).astype(np.float32) for _ in range(4)]  # bnhd


def write(folder, lines, **saved) -> str:
    for name, a in saved.items():
        np.save(folder / f"{name}.npy", a)
    path = folder / "s.toml"
    path.write_text("\n".join(['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', *lines]) + "\n")
    return str(path)


def test_a_file_with_batch_and_head_axes_names_its_own_place(tmp_path, capsys):
    """(B, N, H, D) saved with layout = "bnhd": the place is the file's, not the bhnd array's."""
    q, k, v, _ = arrays()
    k[1, 3, 0, 2] = np.nan
    spec = write(tmp_path, ['layout = "bnhd"'], q=q, k=k, v=v, o=q)
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: K: 'k.npy'[1, 3, 0, 2]: not a finite number: nan\n",
    )


def test_a_signalling_nan_in_a_bfloat16_file_is_one_line_and_no_warning(tmp_path, capsys, recwarn):
    """numpy warns as it widens a signalling NaN's bits (0x7F81 in bfloat16): the line alone is said."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, k, v, _ = arrays()
    q16 = q.astype(ml_dtypes.bfloat16)
    q16.view(np.uint16)[0, 4, 1, 3] = 0x7F81
    spec = write(tmp_path, ['layout = "bnhd"'], q=q16, k=k, v=v, o=q)
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: Q: 'q.npy'[0, 4, 1, 3]: not a finite number: nan\n",
    )
    assert [str(w.message) for w in recwarn] == []


def test_a_matrix_file_names_its_own_place(tmp_path, capsys):
    """A (1, N, D) file is one head's matrix; its place keeps the batch axis it was saved with."""
    q, k, v, _ = arrays()
    one = np.ascontiguousarray(q[:1, :, 0])
    one[0, 4, 1] = np.inf
    spec = write(tmp_path, [], q=one, k=k[:1, :, 0], v=v[:1, :, 0], o=one[0])
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: Q: 'q.npy'[0, 4, 1]: not a finite number: inf\n",
    )


def test_a_spec_s_typed_list_keeps_its_1_based_place():
    from symattn.input.spec import load_spec

    with pytest.raises(SpecError) as info:
        load_spec({"Q": [[1, 2], [3, "nan"]], "K": [[1, 2]], "V": [[1, 2]]})
    assert str(info.value) == "<dict>: Q[2][2]: not a finite number: 'nan'"


def test_do_files_name_their_own_place(tmp_path, capsys):
    """dO from --grad-output and from [backward] grad_output, with batch and head axes and as one head's."""
    q, k, v, do = arrays(2)
    do[0, 2, 1, 3] = np.nan
    spec = write(tmp_path, ['layout = "bnhd"', 'mask = "causal"'], q=q, k=k, v=v, do=do, dq=q)
    got = cli(capsys, spec, tmp_path / "dq.npy", "--quantity", "dq", "--grad-output", tmp_path / "do.npy")
    assert got == (2, "", f"symattn: {tmp_path / 'do.npy'}: dO[0, 2, 1, 3]: not a finite number: nan\n")
    spec = write(tmp_path, ['layout = "bnhd"', 'mask = "causal"', "[backward]", 'grad_output = "do.npy"'])
    got = cli(capsys, spec, tmp_path / "dq.npy", "--quantity", "dq")
    assert got == (2, "", f"symattn: {spec}: backward.grad_output: 'do.npy'[0, 2, 1, 3]: not a finite number: nan\n")
    one = [np.ascontiguousarray(a[0, :, 0]) for a in (q, k, v, do)]
    one[3][3, 1] = np.nan
    spec = write(tmp_path, [], q=one[0], k=one[1], v=one[2], do=one[3], dq=one[0])
    got = cli(capsys, spec, tmp_path / "dq.npy", "--quantity", "dq", "--grad-output", tmp_path / "do.npy")
    assert got == (2, "", f"symattn: {tmp_path / 'do.npy'}: dO[3, 1]: not a finite number: nan\n")


def test_a_json_do_names_its_typed_rows_1_based(tmp_path, capsys):
    (tmp_path / "t.toml").write_text("Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n")
    (tmp_path / "dq.json").write_text("[[0.5, 0.25], [0.5, 1.0]]")
    (tmp_path / "do.json").write_text("[[0.5, 0.25], [NaN, 1.0]]")
    got = cli(
        capsys, tmp_path / "t.toml", tmp_path / "dq.json", "--quantity", "dq", "--grad-output", tmp_path / "do.json"
    )
    assert got == (2, "", f"symattn: {tmp_path / 'do.json'}: dO[2][1]: not a finite number: nan\n")


def test_a_layout_spec_names_the_file_s_place(tmp_path, capsys):
    """varlen: q (total, heads, d) as saved; the engine's q[…] becomes the spec's key and file."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((9, H, D)).astype(np.float32) for _ in range(3))
    q[7, 2, 1] = np.nan
    np.save(tmp_path / "cu.npy", np.array([0, 4, 9], dtype=np.int32))
    spec = write(tmp_path, ['cu_seqlens_q = "cu.npy"', 'cu_seqlens_k = "cu.npy"'], q=q, k=k, v=v, o=k)
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: Q: 'q.npy'[7, 2, 1]: not a finite number: nan\n",
    )


def test_in_memory_arrays_name_their_own_place():
    """A bnhd tensor's place is in its own axes, as numpy (and torch) index it."""
    from symattn.kernel import compare

    q, k, v, out = arrays(4)
    v[1, 0, 2, 3] = np.inf
    with pytest.raises(SpecError) as info:
        compare(out, q, k, v, layout="bnhd")
    assert str(info.value) == "v[1, 0, 2, 3]: not a finite number: inf"
    dout = out.astype(np.float64)
    dout[0, 4, 1, 0] = 0.1  # float64's 0.1: no float32 value
    with pytest.raises(SpecError) as info:
        compare(out, q, k, q, kind="dq", dout=dout, layout="bnhd")
    assert str(info.value) == (
        "dout[0, 4, 1, 0]: no float32 value: 0.1; the float64 path takes float32 values (float16, bfloat16 and "
        "float8 ones are)"
    )


def test_dtype_names_the_first_value_not_of_its_format_at_the_result_s_place(tmp_path, capsys):
    """--dtype bfloat16 on float32 values: the file's place, 0-based in its own axes; a JSON result's rows
    (several runs) as its reader names them, 1-based."""
    import ml_dtypes

    q, k, v, out = arrays(5)
    out = out.astype(ml_dtypes.bfloat16).astype(np.float32)  # bfloat16 values saved as float32
    out[1, 3, 2, 1] = np.float32(0.1)
    spec = write(tmp_path, ['layout = "bnhd"'], q=q, k=k, v=v, o=out)
    assert cli(capsys, spec, tmp_path / "o.npy", "--dtype", "bfloat16") == (
        2,
        "",
        f"symattn: {tmp_path / 'o.npy'}[1, 3, 2, 1]: 0.10000000149011612 is not a bfloat16 value: --dtype bfloat16 "
        "needs every value to be one (the file holds float32)\n",
    )
    (tmp_path / "t.toml").write_text("Q = [[1, 0], [0, 1]]\nK = [[1, 0], [0, 1]]\nV = [[1, 2], [3, 4]]\n")
    (tmp_path / "r1.json").write_text("[[1.5, 2.5], [2.5, 0.1]]")
    (tmp_path / "r2.json").write_text("[[1.5, 2.5], [2.5, 3.0]]")
    assert cli(capsys, tmp_path / "t.toml", tmp_path / "r1.json", tmp_path / "r2.json", "--dtype", "bfloat16") == (
        2,
        "",
        f"symattn: {tmp_path / 'r1.json'}: result[2][2]: 0.1 is not a bfloat16 value: --dtype bfloat16 needs every "
        "value to be one (the file holds decimals)\n",
    )


def paged_cache():
    """q (batch 2, 3 queries, 4 heads, d 8) and caches of 6 blocks of 4 keys (2 kv heads): batch 0 holds
    blocks 5, 0 and the first 2 keys of 3; batch 1 blocks 2 and the first 3 keys of 4. Block 1 is no one's."""
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 3, 4, 8)).astype(np.float32)
    k, v = (rng.standard_normal((6, 4, 2, 8)).astype(np.float32) for _ in range(2))
    return q, k, v, np.array([[5, 0, 3], [2, 4, 1]], np.int32), np.array([10, 7], np.int32)


def test_a_paged_cache_names_the_place_in_its_own_axes():
    """(block, offset, kv head, column) of the cache given, not of the keys gathered; the entries no batch
    holds are not read (a cache's free slots hold anything)."""
    from symattn.kernel import compare

    q, k, v, table, lengths = paged_cache()
    k[1, 0, 0, 0] = np.inf  # block 1: no batch's
    k[3, 2, 0, 0] = np.nan  # batch 0 holds keys 0 and 1 of block 3 only
    k[3, 1, 1, 2] = np.nan
    with pytest.raises(SpecError) as info:
        compare(q, q, k, v, block_table=table, seqlens_k=lengths, layout="bnhd")
    assert str(info.value) == "k[3, 1, 1, 2]: not a finite number: nan"
    k[3, 1, 1, 2] = 0.5
    v = v.astype(np.float64)
    v[4, 2, 0, 7] = 0.1  # batch 1's key 6; float64's 0.1
    with pytest.raises(SpecError) as info:
        compare(q, q, k, v, block_table=table, seqlens_k=lengths, layout="bnhd")
    assert str(info.value) == (
        "v[4, 2, 0, 7]: no float32 value: 0.1; the float64 path takes float32 values (float16, bfloat16 and float8 "
        "ones are)"
    )


def test_a_contiguous_cache_and_varlen_name_the_place_in_their_own_axes():
    from symattn.kernel import compare

    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 4, 3, 8)).astype(np.float32)  # bhnd
    k, v = (rng.standard_normal((2, 2, 12, 8)).astype(np.float32) for _ in range(2))
    k[1, 0, 10, 0] = np.nan  # batch 1 holds 9 keys
    v[1, 1, 8, 3] = -np.inf
    with pytest.raises(SpecError) as info:
        compare(q, q, k, v, seqlens_k=[12, 9], layout="bhnd")
    assert str(info.value) == "v[1, 1, 8, 3]: not a finite number: -inf"
    q, k, v = (rng.standard_normal((9, 2, 4)).astype(np.float32) for _ in range(3))  # (total, heads, d)
    k[7, 1, 2] = np.nan
    with pytest.raises(SpecError) as info:
        compare(q, q, k, v, cu_seqlens_q=[0, 4, 9], cu_seqlens_k=[0, 4, 9])
    assert str(info.value) == "k[7, 1, 2]: not a finite number: nan"
    q = rng.standard_normal((2, 4, 3, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 12, 8)).astype(np.float32)
    with pytest.raises(SpecError) as info:  # v of another batch: one line, not an IndexError
        compare(q, q, k, k[:1], seqlens_k=[12, 9], layout="bhnd")
    assert str(info.value) == "v: shape: (1, 2, 12, 8); a cache with seqlens_k is (batch, keys, kv heads, d)"


def test_a_layout_spec_names_the_cache_file_s_place(tmp_path, capsys):
    q, k, v, table, lengths = paged_cache()
    k[1, 0, 0, 0] = np.nan  # no batch's
    v[0, 3, 1, 6] = np.inf
    lines = ['layout = "bnhd"', 'block_table = "table.npy"', 'seqlens_k = "lengths.npy"']
    spec = write(tmp_path, lines, q=q, k=k, v=v, o=q, table=table, lengths=lengths)
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: V: 'v.npy'[0, 3, 1, 6]: not a finite number: inf\n",
    )


def test_integer_files_name_their_own_place(tmp_path, capsys):
    """cu_seqlens, a block table, seqlens_k and a descale: the value at its place, in the file and in memory."""
    from symattn.kernel import compare

    q, k, v, table, lengths = paged_cache()
    lines = ['layout = "bnhd"', 'block_table = "table.npy"', 'seqlens_k = "lengths.npy"']
    spec = write(tmp_path, lines, q=q, k=k, v=v, o=q, table=np.array([[5, 0, 3], [2, 9, 1]]), lengths=lengths)
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: block_table: 'table.npy'[1, 1]: 9 is no block of the caches (0 to 5)\n",
    )
    spec = write(tmp_path, lines, table=table, lengths=np.array([10, 13], np.int32))
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: seqlens_k: 'lengths.npy'[1]: 13 is not 1 to 12, the keys batch 1's cache holds\n",
    )
    descale = np.ones((2, 2), np.float32)
    descale[1, 0] = -0.5
    spec = write(tmp_path, [*lines, 'k_descale = "kd.npy"'], lengths=lengths, kd=descale)
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: k_descale: 'kd.npy'[1, 0]: -0.5 is not a positive float32 value (flash_attn_3's descale "
        "factors are)\n",
    )
    with pytest.raises(SpecError) as info:
        compare(q[0], q[0], k[0], v[0], cu_seqlens_q=[0, 2, 1, 3], cu_seqlens_k=[0, 1, 2, 4])
    assert str(info.value) == "cu_seqlens_q[2]: 1 is less than [1] (2): the offsets may not decrease"
    with pytest.raises(SpecError) as info:  # np.diff would wrap round and see these rise: no pass, no IndexError
        compare(q[0], q[0], k[0], v[0], cu_seqlens_q=[0, 2**62, -(2**63) + 100, 3], cu_seqlens_k=[0, 1, 2, 4])
    assert str(info.value) == (
        "cu_seqlens_q[2]: -9223372036854775708 is less than [1] (4611686018427387904): the offsets may not decrease"
    )
    spec = write(tmp_path, [*lines[:2], 'seqlens_k = "two.npy"'], two=np.array([[10, 12]], np.int32))
    assert cli(capsys, spec, tmp_path / "o.npy") == (  # the file's own dtype: int64 before
        2,
        "",
        f"symattn: {spec}: seqlens_k: 'two.npy': expected 1 axis of whole numbers, got shape (1, 2) of int32\n",
    )


def test_a_certificate_s_do_file_names_its_own_place(tmp_path, capsys):
    """compute --certify --float64 --grad-output: dO's place as compare names it (a JSON dO's rows 1-based)."""
    from symattn.cli.commands import main

    rng = np.random.default_rng(8)
    for name, heads in (("q", 4), ("k", 2), ("v", 2)):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((2, heads, 6, 4)).astype(np.float32))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    do = rng.standard_normal((2, 4, 6, 4)).astype(np.float64)
    do[1, 2, 5, 3] = np.nan
    cases = [(do, "dO[1, 2, 5, 3]: not a finite number: nan")]
    do = do.astype(np.float32).astype(np.float64)
    do[1, 2, 5, 3], do[0, 3, 1, 2] = 0.5, 0.1  # float64's 0.1
    why = "no float32 value: 0.1; the float64 path takes float32 values (float16, bfloat16 and float8 ones are)"
    cases.append((do, f"dO[0, 3, 1, 2]: {why}"))
    for array, message in cases:
        np.save(tmp_path / "do.npy", array)
        argv = [
            "compute",
            str(tmp_path / "s.toml"),
            "--certify",
            "--float64",
            "--grad-output",
            str(tmp_path / "do.npy"),
        ]
        assert main([*argv, "-o", str(tmp_path / "c.json")]) == 2
        assert capsys.readouterr() == ("", f"symattn: {tmp_path / 'do.npy'}: {message}\n")
        assert not (tmp_path / "c.json").exists()
    (tmp_path / "do.json").write_text("[[0.5, 0.25], [0.1, 1.0]]")  # 0.1: no float32 value
    argv = ["compute", str(tmp_path / "s.toml"), "--certify", "--float64", "--grad-output", str(tmp_path / "do.json")]
    assert main([*argv, "-o", str(tmp_path / "c.json")]) == 2
    assert capsys.readouterr() == ("", f"symattn: {tmp_path / 'do.json'}: dO[2][1]: not a finite float32 value\n")


def test_a_json_do_of_more_axes_is_named_do_and_told_what_json_holds(tmp_path, capsys):
    q, k, v, _ = arrays(2)
    spec = write(tmp_path, ['layout = "bnhd"'], q=q, k=k, v=v, dq=q)
    (tmp_path / "do.json").write_text(json.dumps(q.tolist()))
    got = cli(capsys, spec, tmp_path / "dq.npy", "--quantity", "dq", "--grad-output", tmp_path / "do.json")
    assert got == (
        2,
        "",
        f"symattn: {tmp_path / 'do.json'}: dO[1][1]: not a number: a list (JSON holds rows of numbers, two axes: a "
        "tensor of more goes in a .npy file)\n",
    )
