"""symattn compare --quantity dsink (issue 30): the gradient of a spec's sink logits, (H,), from the spec's
[backward] grad_output or --grad-output, by the engine of symattn.kernel.compare(kind="dsink"); its exact
values against torch's float64 autograd of gpt-oss's reference, and the one line for a spec without sinks.

The tensors are made with numpy in tmp_path.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.test_compare_spec_variants import cli

torch = pytest.importorskip("torch")

B, H, HKV, N, D = 2, 4, 2, 12, 8
SINKS = [0.5, -1.25, 2, 0]
TOML = ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', 'mask = "causal"']


def case(seed: int, batch: int = B, heads: int = H, kv: int = HKV):
    """q, k, v, dO (float32 values) and torch's float64 dsink of gpt-oss's reference: the sink one more column
    of the causal scores, its weight dropped after the softmax."""
    rng = np.random.default_rng(seed)
    q, do = (rng.standard_normal((batch, heads, N, D)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((batch, kv, N, D)).astype(np.float32) for _ in range(2))
    Q, K, V = (torch.from_numpy(a).double().repeat_interleave(heads // a.shape[1], 1) for a in (q, k, v))
    sinks = torch.tensor(SINKS[:heads], dtype=torch.float64, requires_grad=True)
    z = (Q @ K.transpose(-1, -2) / math.sqrt(D)).masked_fill(torch.ones(N, N).triu(1).bool(), -torch.inf)
    z = torch.cat([z, sinks[None, :, None, None].expand(batch, heads, N, 1)], -1)
    (torch.softmax(z, -1)[..., :N] @ V).backward(torch.from_numpy(do).double())
    return q, k, v, do, sinks.grad.numpy()


def write(folder, lines, **saved):
    for name, a in saved.items():
        np.save(folder / f"{name}.npy", a)
    path = folder / "s.toml"
    path.write_text("\n".join([*TOML, *lines]) + "\n")
    return str(path)


def dsink(capsys, spec, folder, result, *options):
    """symattn compare --quantity dsink with --grad-output do.npy of the folder."""
    return cli(capsys, spec, folder / result, "--quantity", "dsink", "--grad-output", folder / "do.npy", *options)


def test_dsink_from_a_spec_is_torch_s_and_the_api_report(tmp_path, capsys):
    """The exact dsink agrees with torch's float64 autograd to its 13 digits shown, torch's value rounded to
    float32 passes allclose at 1e-6, and the JSON is the API's on the same arrays."""
    from symattn.kernel import compare

    q, k, v, do, grad = case(1)
    lines = ["sinks = [0.5, -1.25, 2, 0]", "[backward]", 'grad_output = "do.npy"']
    spec = write(tmp_path, lines, q=q, k=k, v=v, do=do, ds=grad.astype(np.float32))
    code, text, err = cli(
        capsys, spec, tmp_path / "ds.npy", "--quantity", "dsink", "--format", "json", "--rtol", "1e-6"
    )
    data = json.loads(text)
    assert (code, err, data["engine"]["path"], data["places"]) == (
        0,
        "",
        "float64",
        "0-based, as numpy indexes: dsink[head]",
    )
    exact = {e["head"]: float(e["exact"]) for e in data["entries"]}
    assert [abs(exact[h] - grad[h]) <= 1e-12 * abs(grad[h]) for h in range(H)] == [True] * H
    api = compare(
        grad.astype(np.float32), q, k, v, kind="dsink", dout=do, causal=True, sinks=np.array(SINKS), rtol=1e-6
    )
    assert text == api.to_json().replace('"out"', json.dumps(str(tmp_path / "ds.npy"))).replace("out[", "dsink[")
    assert dsink(capsys, spec, tmp_path, "ds.npy", "--format", "json", "--rtol", "1e-6")[1] == text


def test_a_planted_error_is_named_at_its_head_and_float64_is_refined(tmp_path, capsys):
    q, k, v, do, grad = case(2)
    bad = grad.astype(np.float32)
    bad[2] += 0.01
    spec = write(tmp_path, ["sinks = [0.5, -1.25, 2, 0]"], q=q, k=k, v=v, do=do, bad=bad, ds64=grad)
    code, text, _ = dsink(capsys, spec, tmp_path, "bad.npy", "--format", "json", "--rtol", "1e-6")
    assert (code, json.loads(text)["verdict"]["worst_at"]) == (1, {"head": 2})
    code, text, _ = dsink(capsys, spec, tmp_path, "ds64.npy", "--format", "json", "--max-ulp", "8")
    assert (code, json.loads(text)["engine"]["refined"]) == (0, 4)


def test_one_head_s_dsink_takes_a_matrix_do(tmp_path, capsys):
    q, k, v, do, grad = case(3, 1, 1, 1)
    spec = write(tmp_path, ["sinks = [0.5]"], q=q[0, 0], k=k[0, 0], v=v[0, 0], do=do[0, 0], ds=grad.astype(np.float32))
    code, text, err = dsink(capsys, spec, tmp_path, "ds.npy", "--rtol", "1e-6")
    assert (code, err) == (0, "") and "Pass by torch.allclose's rule" in text


def test_a_varlen_spec_s_dsink_is_the_api_s(tmp_path, capsys):
    from symattn.kernel import compare

    rng = np.random.default_rng(4)
    q, k, v, do = (rng.standard_normal((20, H, D)).astype(np.float32) for _ in range(4))
    cu = np.array([0, 7, 20], dtype=np.int32)
    ds = np.array([0.25, -1, 0.5, 2], dtype=np.float32)
    lines = [
        'cu_seqlens_q = "cu.npy"',
        'cu_seqlens_k = "cu.npy"',
        "sinks = [0.5, -1.25, 2, 0]",
        "[backward]",
        'grad_output = "do.npy"',
    ]
    spec = write(tmp_path, lines, q=q, k=k, v=v, do=do, cu=cu, ds=ds)
    code, text, _ = cli(capsys, spec, tmp_path / "ds.npy", "--quantity", "dsink", "--format", "json")
    api = compare(
        ds, q, k, v, kind="dsink", dout=do, causal=True, sinks=np.array(SINKS), cu_seqlens_q=cu, cu_seqlens_k=cu
    )
    assert code == 0 and text == api.to_json().replace('"out"', json.dumps(str(tmp_path / "ds.npy"))).replace(
        "out[", "dsink["
    )


def test_a_spec_without_sinks_and_a_wrong_shape_are_refused_in_one_line(tmp_path, capsys):
    q, k, v, do, grad = case(5)
    spec = write(tmp_path, [], q=q, k=k, v=v, do=do, ds=grad.astype(np.float32), row=grad[None].astype(np.float32))
    assert dsink(capsys, spec, tmp_path, "ds.npy") == (
        2,
        "",
        f"symattn: {spec}: sinks: missing: --quantity dsink is the gradient of the logits this key gives (a number "
        "per query head)\n",
    )
    spec = write(tmp_path, ["sinks = [0.5, -1.25, 2, 0]"])
    assert dsink(capsys, spec, tmp_path, "row.npy") == (
        2,
        "",
        f"symattn: {tmp_path / 'row.npy'}: shape: (1, 4); the dsink of this spec is (4,)\n",
    )
    assert cli(capsys, spec, tmp_path / "ds.npy", "--quantity", "dsink") == (
        2,
        "",
        "symattn: --grad-output: missing: --quantity dq, dk, dv and dsink need dO (--grad-output, or [backward] "
        "grad_output)\n",
    )
