"""symattn compare of a spec with softcap, ALiBi or sinks on the float64 path (issue 30): the same heads,
figures, places and verdicts as symattn.kernel.compare on the same arrays, and the one line that refuses a
spec number no kernel saw (no float64 value).

The tensors are made with numpy in tmp_path; the reference is torch's float64 attention (gpt-oss's sink
column, FlashAttention's softcap), rounded to float32.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from symattn.cli.commands import main

torch = pytest.importorskip("torch")

B, H, HKV, N, M, D = 2, 4, 2, 24, 24, 8
SINKS = [0.5, -1.25, 2, 0]
SLOPES = [0.5, 0.25, 0.125, 0.0625]


def arrays(seed: int = 3, n: int = N, m: int = M):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((B, H, n, D)).astype(np.float32),
        rng.standard_normal((B, HKV, m, D)).astype(np.float32),
        rng.standard_normal((B, HKV, m, D)).astype(np.float32),
    )


def reference(q, k, v, *, softcap=None, sinks=None, slopes=None, offset=0):
    """torch float64: scaled scores, ALiBi's −m·|i + offset − j|, c·tanh(z/c), a causal mask aligned by
    offset, and a sink column dropped after the softmax; rounded to float32."""
    Q, K, V = (torch.from_numpy(a).double() for a in (q, k, v))
    K, V = K.repeat_interleave(H // HKV, 1), V.repeat_interleave(H // HKV, 1)
    n, m = Q.shape[2], K.shape[2]
    z = Q @ K.transpose(-1, -2) / D**0.5
    i, j = torch.arange(n)[:, None], torch.arange(m)[None, :]
    if slopes is not None:
        z = z - torch.tensor(slopes, dtype=torch.float64)[:, None, None] * (i + offset - j).abs()
    if softcap is not None:
        z = softcap * torch.tanh(z / softcap)
    z = z.masked_fill(j > i + offset, -torch.inf)
    if sinks is not None:
        column = torch.tensor(sinks, dtype=torch.float64)[None, :, None, None].expand(B, H, n, 1)
        z = torch.cat([z, column], -1)
    w = torch.softmax(z, -1)[..., :m]
    return (w @ V).float().numpy()


def write(folder, lines, **saved):
    for name, a in saved.items():
        np.save(folder / f"{name}.npy", a)
    path = folder / "s.toml"
    path.write_text("\n".join(['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', 'mask = "causal"', *lines]) + "\n")
    return str(path)


def cli(capsys, *args):
    code = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def as_file(api_json: str, path, symbol: str = "o") -> str:
    """The API's JSON as the CLI names a file's result: its path for ``out``, the quantity's symbol in places."""
    return api_json.replace('"out"', json.dumps(str(path))).replace("out[", symbol + "[")


def test_softcap_and_sinks_from_a_spec_are_the_api_report(tmp_path, capsys):
    from symattn.kernel import compare

    q, k, v = arrays()
    out = reference(q, k, v, softcap=30, sinks=SINKS)
    spec = write(tmp_path, ["softcap = 30", "sinks = [0.5, -1.25, 2, 0]"], q=q, k=k, v=v, o=out)
    keywords = {"causal": True, "softcap": 30.0, "sinks": np.array(SINKS, dtype=np.float32)}
    code, text, err = cli(capsys, spec, tmp_path / "o.npy", "--format", "json", "--rtol", "1e-6", "--atol", "1e-7")
    api = compare(out, q, k, v, rtol=1e-6, atol=1e-7, **keywords)
    assert (code, err) == (0, "") and api.ok and text == as_file(api.to_json(), tmp_path / "o.npy")
    assert json.loads(text)["engine"]["path"] == "float64"
    bad = out.copy()
    bad[1, 2, 17, 5] += 0.25
    np.save(tmp_path / "bad.npy", bad)
    code, text, _ = cli(capsys, spec, tmp_path / "bad.npy", "--format", "json", "--rtol", "1e-6", "--atol", "1e-7")
    api = compare(bad, q, k, v, rtol=1e-6, atol=1e-7, **keywords)
    assert code == 1 and not api.ok and text == as_file(api.to_json(), tmp_path / "bad.npy")
    assert json.loads(text)["verdict"]["worst_at"] == {"batch": 1, "head": 2, "query": 17, "column": 5}


def test_the_lse_and_dk_with_sinks_from_a_spec_are_the_api_report(tmp_path, capsys):
    from symattn.kernel import compare

    q, k, v = arrays(4)
    dout = np.random.default_rng(5).standard_normal((B, H, N, D)).astype(np.float32)
    lse = np.zeros((B, H, N), dtype=np.float32)
    dk = np.zeros((B, HKV, M, D), dtype=np.float32)
    spec = write(tmp_path, ["sinks = [0.5, -1.25, 2, 0]"], q=q, k=k, v=v, lse=lse, dk=dk, do=dout)
    sinks = {"causal": True, "sinks": np.array(SINKS, dtype=np.float32)}
    code, text, _ = cli(capsys, spec, tmp_path / "lse.npy", "--quantity", "lse", "--format", "json", "--summary")
    assert code == 0 and text == as_file(
        compare(lse, q, k, v, kind="lse", **sinks).to_json(True), tmp_path / "lse.npy", "lse"
    )
    code, text, _ = cli(
        capsys, spec, tmp_path / "dk.npy", "--quantity", "dk", "--grad-output", tmp_path / "do.npy", "--format", "json"
    )
    api = compare(dk, q, k, v, kind="dk", dout=dout, **sinks)
    assert code == 0 and text == as_file(api.to_json(), tmp_path / "dk.npy", "dk")


def test_alibi_slopes_and_positions_from_a_spec_are_the_api_report(tmp_path, capsys):
    """A spec's ALiBi counts rows (top-left) or the positions it gives: queries at M − N.. are FlashAttention's
    bottom-right alignment, the API's causal_align="bottom-right"."""
    from symattn.kernel import compare

    q, k, v = arrays(6, n=8)
    slopes = np.array(SLOPES, dtype=np.float32)
    out = reference(q, k, v, slopes=SLOPES, offset=M - 8)
    places = [f"positions = {list(range(M - 8, M))}", f"key_positions = {list(range(M))}"]
    spec = write(tmp_path, ["alibi_slopes = [0.5, 0.25, 0.125, 0.0625]", *places], q=q, k=k, v=v, o=out)
    code, text, _ = cli(capsys, spec, tmp_path / "o.npy", "--format", "json", "--rtol", "1e-6", "--atol", "1e-7")
    api = compare(out, q, k, v, causal=True, causal_align="bottom-right", alibi_slopes=slopes, rtol=1e-6, atol=1e-7)
    assert code == 0 and api.ok and text == as_file(api.to_json(), tmp_path / "o.npy")
    top = reference(q, k, v, slopes=SLOPES)  # no positions: rows counted from 0, the API's top-left
    spec = write(tmp_path, ["alibi_slopes = [0.5, 0.25, 0.125, 0.0625]"], o=top)
    code, text, _ = cli(capsys, spec, tmp_path / "o.npy", "--format", "json", "--rtol", "1e-6", "--atol", "1e-7")
    api = compare(top, q, k, v, causal=True, alibi_slopes=slopes, rtol=1e-6, atol=1e-7)
    assert code == 0 and api.ok and text == as_file(api.to_json(), tmp_path / "o.npy")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            ["softcap = 0.1"],
            "softcap: 0.1 is no float64 value, and the float64 path takes the binary values a kernel saw: give the "
            "float's exact decimal (float32: 0.100000001490116119384765625; float64: "
            "0.1000000000000000055511151231257827021181583404541015625)",
        ),
        (
            ["sinks = [0.5, 0.3, 1, 2]"],
            "sinks[2]: 0.3 is no float64 value, and the float64 path takes the binary values a kernel saw: give the "
            "float's exact decimal (float32: 0.300000011920928955078125; float64: "
            "0.299999999999999988897769753748434595763683319091796875)",
        ),
        (
            ["alibi = true"],  # the paper's slopes 2^(−8h/3) for 3 heads: 2^(−8/3) is no rational
            "alibi[1]: 2^(-8/3) is no float64 value, and the float64 path takes the binary values a kernel saw: give "
            "the kernel's as alibi_slopes",
        ),
    ],
)
def test_a_number_no_kernel_saw_is_refused_in_one_line(tmp_path, capsys, lines, message):
    q, k, v = arrays()
    heads = 3 if lines == ["alibi = true"] else H
    spec = write(tmp_path, lines, q=q[:, :heads], k=k[:, :1], v=v[:, :1], o=q[:, :heads])
    code, out, err = cli(capsys, spec, tmp_path / "o.npy")
    assert (code, out, err) == (2, "", f"symattn: {spec}: {message}\n")


def test_the_float_s_exact_decimal_is_that_float(tmp_path, capsys):
    """0.1's float32 value written out whole is a float: the float64 path takes it, as the API takes the float."""
    from symattn.kernel import compare

    q, k, v = arrays(7)
    c = float(np.float32(0.1))
    out = reference(q, k, v, softcap=c)
    spec = write(tmp_path, ["softcap = 0.100000001490116119384765625"], q=q, k=k, v=v, o=out)
    code, text, _ = cli(capsys, spec, tmp_path / "o.npy", "--format", "json", "--summary")
    api = compare(out, q, k, v, causal=True, softcap=c)
    assert code == 0 and text == as_file(api.to_json(True), tmp_path / "o.npy")


def test_a_layout_spec_takes_the_variants_as_compare_s_keywords(tmp_path, capsys):
    """varlen with softcap, sinks from a file and ALiBi's slopes: the report of the same call in memory (ALiBi
    aligned as causal_align says, as FlashAttention's); a slope no kernel saw, and --partials, refused."""
    from symattn.kernel import compare

    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((20, H, D)).astype(np.float32) for _ in range(3))
    cu = np.array([0, 7, 20], dtype=np.int32)
    out = rng.standard_normal((20, H, D)).astype(np.float32) / 8
    sinks = np.array(SINKS, dtype=np.float32)
    lines = ['cu_seqlens_q = "cu.npy"', 'cu_seqlens_k = "cu.npy"', 'causal_align = "bottom-right"', "softcap = 30"]
    lines += ['sinks = "sinks.npy"', "alibi_slopes = [0.5, 0.25, 0.125, 0.0625]"]
    spec = write(tmp_path, lines, q=q, k=k, v=v, cu=cu, sinks=sinks, o=out)
    code, text, err = cli(capsys, spec, tmp_path / "o.npy", "--format", "json", "--rtol", "1e-3", "--atol", "1e-3")
    keywords = {"causal": True, "causal_align": "bottom-right", "softcap": 30.0, "sinks": sinks}
    keywords |= {"alibi_slopes": np.array(SLOPES), "cu_seqlens_q": cu, "cu_seqlens_k": cu}
    api = compare(out, q, k, v, rtol=1e-3, atol=1e-3, **keywords)
    assert (code, err) == (1, "") and not api.ok and text == as_file(api.to_json(), tmp_path / "o.npy")
    (tmp_path / "s.toml").write_text((tmp_path / "s.toml").read_text().replace("0.0625", "0.06"))
    assert cli(capsys, spec, tmp_path / "o.npy") == (
        2,
        "",
        f"symattn: {spec}: alibi_slopes[4]: 0.06 is no float64 value, and the float64 path takes the binary values "
        "a kernel saw: give the float's exact decimal (float32: 0.0599999986588954925537109375; float64: "
        "0.059999999999999997779553950749686919152736663818359375)\n",
    )
    assert cli(capsys, spec, tmp_path / "o.npy", "--partials") == (
        2,
        "",
        f"symattn: {spec}: alibi_slopes: not taken with --partials, which compares each split's O_i and LSE_i\n",
    )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('sinks = "x"', "sinks: expected a list of numbers (one per head) or a .npy file, got 'x'"),
        ("sinks = []", "sinks: expected a list of numbers (one per head) or a .npy file, got an empty list"),
        ("sinks = [1, 2]", "sinks: shape: (2,); expected (4,), a finite logit per query head"),
        ('sinks = "s2.npy"', "sinks: 's2.npy': shape: (2,); expected (4,), a finite logit per query head"),
        ("sinks = [[1]]", "sinks[1]: not a number: [1]"),
        ("softcap = -1", "softcap: expected a positive number (FlashAttention's softcap), got -1.0"),
        (
            "alibi = true",
            "alibi: not taken with a layout's files: such a spec gives Q, K, V, layout, mask, causal_align, window, "
            "scale, backward, alibi_slopes, softcap, sinks, softcap_order, cu_seqlens_q, cu_seqlens_k, block_table, seqlens_k, "
            "q_descale, k_descale, v_descale",
        ),
    ],
)
def test_a_layout_spec_s_bad_variant_is_one_line(tmp_path, capsys, line, problem):
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((20, H, D)).astype(np.float32) for _ in range(3))
    lines = ['cu_seqlens_q = "cu.npy"', 'cu_seqlens_k = "cu.npy"', line]
    spec = write(tmp_path, lines, q=q, k=k, v=v, cu=np.array([0, 7, 20], dtype=np.int32), s2=np.zeros(2), o=q)
    assert cli(capsys, spec, tmp_path / "o.npy") == (2, "", f"symattn: {spec}: {problem}\n")


@pytest.mark.parametrize(
    ("line", "key"), [("softcap = 30", "softcap"), ('[backward]\ngrad_output = "q.npy"', "backward")]
)
def test_partials_take_no_variant_and_no_backward(tmp_path, capsys, line, key):
    q, k, v = arrays()
    spec = write(tmp_path, [line], q=q, k=k, v=v)
    assert cli(capsys, spec, tmp_path / "p.safetensors", "--partials") == (
        2,
        "",
        f"symattn: {spec}: {key}: not taken with --partials, which compares each split's O_i and LSE_i\n",
    )
