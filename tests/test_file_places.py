"""The places of bad values read from files or given in memory are numpy's: 0-based, in the array's own axes
(``'q.npy'[0, 0, 2, 5]``, ``q[1, 3, 0, 2]``), as compare names a result's places; a spec's typed lists keep
their 1-based ``Q[1][2]`` (issue 30)."""

from __future__ import annotations

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
