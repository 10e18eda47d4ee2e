"""A file and a tensor of one shape name one place (issue 30): places index the array as its author gave it,
axes of length one included (a 4-D file of batch one names o[0, 2, 7, 1]; a 2-D (N, D) file o[7, 1]),
in the CLI's JSON and text and in symattn.kernel.compare's report alike (kernel/places.as_given)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from symattn.cli.commands import main

CASES = [  # (shape of q, k, v and the result, the planted place, its named axes)
    ((8, 4), (7, 1), ("query", "column")),
    ((1, 8, 4), (0, 7, 1), ("head", "query", "column")),
    ((2, 8, 4), (1, 7, 1), ("head", "query", "column")),
    ((1, 1, 8, 4), (0, 0, 7, 1), ("batch", "head", "query", "column")),
    ((1, 2, 8, 4), (0, 1, 7, 1), ("batch", "head", "query", "column")),
]


def exact_output(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    z = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / 2  # d = 4
    w = np.exp(z - z.max(-1, keepdims=True))
    return ((w / w.sum(-1, keepdims=True)) @ v).astype(np.float32)


def planted(tmp_path, shape, place):
    rng = np.random.default_rng(31)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    out = exact_output(q, k, v)
    out[place] += np.float32(0.5)
    for name, a in zip("qkvo", (q, k, v, out)):
        np.save(tmp_path / f"{name}.npy", a)
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    return q, k, v, out


@pytest.mark.parametrize("shape, place, axes", CASES)
def test_the_file_and_the_api_name_the_same_place(tmp_path, capsys, shape, place, axes):
    from symattn.kernel import compare

    q, k, v, out = planted(tmp_path, shape, place)
    assert main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "o.npy"), "--format", "json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    from_api = json.loads(compare(out, q, k, v).to_json())
    expected = dict(zip(axes, place))
    assert from_file["summary"]["max_ulps_at"] == from_api["summary"]["max_ulps_at"] == expected
    symbols = ", ".join(axes)
    assert from_file["places"] == f"0-based, as numpy indexes: o[{symbols}]"
    assert from_api["places"] == f"0-based, as numpy indexes: out[{symbols}]"
    assert main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "o.npy")]) == 0
    index = ", ".join(map(str, place))
    largest = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Largest error: ")]
    assert len(largest) == 1 and largest[0].endswith(f" ULP, at o[{index}].")
    largest = [line for line in compare(out, q, k, v).text().splitlines() if line.startswith("Largest error: ")]
    assert len(largest) == 1 and largest[0].endswith(f" ULP, at out[{index}].")


def test_a_bnhd_batch_of_one_names_its_batch(tmp_path, capsys):
    """(1, N, H, D) in bnhd: o[0, query, head, column] from the file and the tensor alike."""
    from symattn.kernel import compare

    rng = np.random.default_rng(32)
    q, k, v = (rng.standard_normal((1, 2, 8, 4)).astype(np.float32) for _ in range(3))  # bhnd, then moved
    out = exact_output(q, k, v).transpose(0, 2, 1, 3).copy()
    out[0, 7, 1, 1] += np.float32(0.5)
    q, k, v = (a.transpose(0, 2, 1, 3).copy() for a in (q, k, v))
    for name, a in zip("qkvo", (q, k, v, out)):
        np.save(tmp_path / f"{name}.npy", a)
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nlayout = "bnhd"\n')
    assert main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "o.npy"), "--format", "json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    from_api = json.loads(compare(out, q, k, v, layout="bnhd").to_json())
    expected = {"batch": 0, "query": 7, "head": 1, "column": 1}
    assert from_file["summary"]["max_ulps_at"] == from_api["summary"]["max_ulps_at"] == expected
    assert list(from_file["summary"]["max_ulps_at"]) == ["batch", "query", "head", "column"]


def test_the_lse_of_a_batch_of_one_names_its_batch(tmp_path, capsys):
    """An LSE file of (1, H, N) names lse[0, head, query], as the tensor does."""
    from symattn.kernel import compare

    q, k, v, _ = planted(tmp_path, (1, 2, 8, 4), (0, 0, 0, 0))
    z = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / 2
    top = z.max(-1, keepdims=True)
    lse = (top + np.log(np.exp(z - top).sum(-1, keepdims=True)))[..., 0].astype(np.float32)
    lse[0, 1, 6] += np.float32(0.25)
    np.save(tmp_path / "lse.npy", lse)
    args = ["compare", str(tmp_path / "s.toml"), str(tmp_path / "lse.npy"), "--quantity", "lse", "--format", "json"]
    assert main(args) == 0
    from_file = json.loads(capsys.readouterr().out)
    from_api = json.loads(compare(lse, q, k, v, kind="lse").to_json())
    expected = {"batch": 0, "head": 1, "query": 6}
    assert from_file["summary"]["max_ulps_at"] == from_api["summary"]["max_ulps_at"] == expected
