"""Q, K, V files with batch and head axes (issue 22): bhnd and bnhd, grouped-query K/V, causal masks in both
alignments; compare reports each (batch, head) and the whole, with figures an independent mpmath gives."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.input import limits
from symattn.input.errors import LimitError, ShapeError, SpecError
from symattn.input.spec import load_spec

from .test_kernel import mp_row, ulps_of

ROOT = Path(__file__).resolve().parent.parent
B, H, G, N, M, D = 2, 4, 2, 64, 80, 32  # 4 query heads share 2 key/value heads; 64 queries, 80 keys


def bottom_right(n: int, m: int) -> list[list[bool]]:
    """Query i (0-based) sees keys j ≤ i + m − n: FlashAttention's alignment, written out on its own."""
    return [[j <= i + m - n for j in range(m)] for i in range(n)]


def write(folder: Path, layout: str, **arrays: np.ndarray) -> None:
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", a if layout == "bhnd" else a.transpose(0, 2, 1, 3).copy())


def compare_json(folder: Path, spec: str, result: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-m", "symattn", "compare", spec, result, "--format", "json"],
        cwd=folder,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def sdpa(tmp_path_factory):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(22)
    Q = rng.standard_normal((B, H, N, D)).astype(np.float32)
    K, V = (rng.standard_normal((B, G, M, D)).astype(np.float32) for _ in range(2))
    mask = torch.tensor(bottom_right(N, M))
    out = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in (Q, K, V)), attn_mask=mask, enable_gqa=True
    ).numpy()
    reports = {}
    for layout in ("bhnd", "bnhd"):
        folder = tmp_path_factory.mktemp(layout)
        write(folder, layout, q=Q, k=K, v=V, o=out)
        (folder / "s.toml").write_text(
            f'layout = "{layout}"\nQ = "q.npy"\nK = "k.npy"\nV = "v.npy"\nmask = "causal"\n'
            'causal_align = "bottom-right"\n'
        )
        reports[layout] = compare_json(folder, "s.toml", "o.npy")
    return Q, K, V, out, reports


def test_both_layouts_give_the_same_report(sdpa):
    *_, reports = sdpa
    a, b = (dict(r, source=None, places=None) for r in reports.values())
    assert a == b  # a place names its axes: the same dict in either order
    assert reports["bhnd"]["places"] == "0-based, as numpy indexes: o[batch, head, query, column]"
    assert reports["bnhd"]["places"] == "0-based, as numpy indexes: o[batch, query, head, column]"
    assert a["engine"]["path"] == "float64" and a["summary"]["entries"] == B * H * N * D


def test_each_batch_and_head_has_the_figures_mpmath_gives(sdpa):
    Q, K, V, out, reports = sdpa
    data = reports["bhnd"]
    assert [(s["batch"], s["head"]) for s in data["heads"]] == [(b, h) for b in range(B) for h in range(H)]
    by_place = {(e["batch"], e["head"], e["query"], e["column"]): e for e in data["entries"]}
    allowed = bottom_right(N, M)
    for s in data["heads"]:
        b, h = s["batch"], s["head"]
        g = h // (H // G)  # the key/value head of query head h
        mine = [e for e in data["entries"] if (e["batch"], e["head"]) == (s["batch"], s["head"])]
        assert s["entries"] == len(mine) == N * D
        assert Decimal(s["max_ulps"]) == max(Decimal(e["ulps"]) for e in mine)
        worst = s["max_ulps_at"]
        assert (worst["batch"], worst["head"]) == (b, h)
        for i, j in [(0, 0), (N - 1, D - 1), (17, 5), (worst["query"], worst["column"])]:
            _, output = mp_row(Q[b, h], K[b, g], V[b, g], i, allowed)
            figure = ulps_of(float(out[b, h, i, j]), output[j], "float32")
            assert Decimal(by_place[(b, h, i, j)]["ulps"]) == figure, (b, h, i, j)
    whole = max(Decimal(s["max_ulps"]) for s in data["heads"])
    assert Decimal(data["summary"]["max_ulps"]) == whole
    assert data["summary"]["correctly_rounded"] == sum(s["correctly_rounded"] for s in data["heads"])


def test_the_text_report_has_a_line_per_batch_and_head(tmp_path, capsys):
    rng = np.random.default_rng(1)
    write(tmp_path, "bhnd", q=rng.standard_normal((2, 2, 8, 4)).astype(np.float32))
    np.save(tmp_path / "k.npy", rng.standard_normal((2, 1, 8, 4)).astype(np.float32))
    np.save(tmp_path / "o.npy", np.zeros((2, 2, 8, 4), dtype=np.float32))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "k.npy"\nmask = "causal"\n')
    assert main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "o.npy")]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("  batch ")]
    assert [line.split(":")[0] for line in lines] == [
        "  batch 0, head 0",
        "  batch 0, head 1",
        "  batch 1, head 0",
        "  batch 1, head 1",
    ]
    assert "of 32 correctly rounded; largest error " in lines[0] and " at o[0, 0, " in lines[0]
    assert "Places are 0-based, as numpy indexes: o[batch, head, query, column].\n" in out


def test_a_batch_of_one_is_a_multi_head_spec(tmp_path):
    rng = np.random.default_rng(2)
    write(tmp_path, "bhnd", q=rng.standard_normal((1, 4, 6, 3)).astype(np.float16))
    np.save(tmp_path / "k.npy", rng.standard_normal((2, 6, 3)).astype(np.float16))  # (H, N, D): 2 kv heads
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "k.npy"\n')
    with pytest.raises(ShapeError):  # 4 axes and 3
        load_spec(tmp_path / "s.toml")
    np.save(tmp_path / "k.npy", rng.standard_normal((1, 2, 6, 3)).astype(np.float16))
    spec = load_spec(tmp_path / "s.toml")
    assert (spec.heads, spec.kv_heads, spec.kernel.batch, len(spec.Q), len(spec.Q[0]), len(spec.K[0])) == (
        4,
        2,
        1,
        6,
        12,
        6,
    )
    q = np.load(tmp_path / "q.npy").astype(np.float64)
    assert [float(x.value) for x in spec.head(2).Q[5]] == q[0, 2, 5].tolist()


@pytest.mark.parametrize(
    "shapes, extra, message",
    [
        (((2, 4, 8, 4), (3, 2, 8, 4), (3, 2, 8, 4)), "", "K: a batch of 3 (K) and 3 (V); Q has 2"),
        (((2, 4, 8, 4), (2, 3, 8, 4), (2, 3, 8, 4)), "", "K: 3 key/value heads do not divide Q's 4 heads"),
        (((2, 4, 8, 4), (2, 2, 8, 5), (2, 2, 8, 5)), "", "K: K's heads have 5 dimensions, Q's 4 (d_k)"),
        (((2, 4, 8, 4), (2, 2, 8, 4), (2, 2, 9, 4)), "", "V: V (2, 2, 9, 4) needs the batch, heads and keys of K"),
        (((2, 4, 8, 4), (2, 2, 8, 4), (2, 2, 8, 4)), "heads = 2\n", "heads: 2, but the files have 4"),
        (((2, 4, 8, 4), (2, 2, 8, 4), (2, 2, 8, 4)), 'layout = "nhbd"\n', "layout: expected one of 'bhnd', 'bnhd'"),
    ],
)
def test_shapes_that_do_not_fit_are_one_line_errors(tmp_path, capsys, shapes, extra, message):
    for name, shape in zip("qkv", shapes):
        np.save(tmp_path / f"{name}.npy", np.ones(shape, dtype=np.float32))
    path = tmp_path / "s.toml"
    path.write_text(extra + 'Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: {message}")
    assert main(["compare", str(path), str(tmp_path / "q.npy")]) == 2
    assert capsys.readouterr().err.startswith(f"symattn: {path}: {message}")


@pytest.mark.parametrize("shape", [(0, 2, 4, 2), (2, 0, 4, 2), (2, 2, 4, 0)])
def test_an_empty_axis_is_one_line(tmp_path, capsys, shape):
    """Issue 28: Q, K, V of shape (0, 2, 4, 2) ended in an IndexError."""
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", np.ones(shape, dtype=np.float32))
    path = tmp_path / "s.toml"
    path.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    assert main(["compare", str(path), str(tmp_path / "q.npy")]) == 2
    axes = ", ".join(map(str, shape))
    assert capsys.readouterr().err == (
        f"symattn: {path}: Q: 'q.npy': shape ({axes}) has an axis of length 0 (no entries)\n"
    )


def test_batches_times_heads_are_limited(tmp_path, monkeypatch):
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", np.ones((3, 2, 4, 2), dtype=np.float32))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    monkeypatch.setattr(limits, "BATCH_HEADS", 5)
    with pytest.raises(LimitError) as info:
        load_spec(tmp_path / "s.toml")
    assert str(info.value).endswith("Q: 3 batches × 2 heads; at most 5 (the limit)")


def test_several_batches_are_for_compare_only(tmp_path, capsys):
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", np.ones((2, 1, 4, 2), dtype=np.float32))
    path = tmp_path / "s.toml"
    path.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    assert main(["compute", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {path}: Q: a batch of 2 is for compare (with float32-valued inputs); a derivation takes one batch\n"
    )
    np.save(tmp_path / "o.npy", np.ones((2, 4, 2), dtype=np.float32))  # no head axis: refused
    assert main(["compare", str(path), str(tmp_path / "o.npy")]) == 2
    assert capsys.readouterr().err.startswith(f"symattn: {tmp_path / 'o.npy'}: shape: ")


def test_a_not_finite_entry_is_named_by_its_batch_and_head(tmp_path, capsys):
    rng = np.random.default_rng(4)
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((2, 2, 4, 2)).astype(np.float32))
    out = np.zeros((2, 2, 4, 2), dtype=np.float32)
    out[1, 0, 3, 1] = np.nan
    np.save(tmp_path / "o.npy", out)
    path = tmp_path / "s.toml"
    path.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    assert main(["compare", str(path), str(tmp_path / "o.npy")]) == 1
    assert "Not finite at o[1, 0, 3, 1]: nan." in capsys.readouterr().out
    assert main(["compare", str(path), str(tmp_path / "o.npy"), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["not_finite"] == [{"batch": 1, "head": 0, "query": 3, "column": 1, "value": "nan"}]


def test_the_lse_of_each_batch_and_head_is_that_head_s_own(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    Q, K, V = (rng.standard_normal((2, 2, 16, 8)).astype(np.float32) for _ in range(3))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*(torch.tensor(a) for a in (Q, K, V)))[:2]
    write(tmp_path, "bhnd", q=Q, k=K, v=V)
    np.save(tmp_path / "lse.npy", lse.numpy())  # (B, H, N)
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    assert (
        main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "lse.npy"), "--quantity", "lse", "--format", "json"])
        == 0
    )
    whole = json.loads(capsys.readouterr().out)
    for b in range(2):
        for h in range(2):
            one = tmp_path / f"{b}{h}"
            one.mkdir()
            for name, a in zip("qkv", (Q, K, V)):
                np.save(one / f"{name}.npy", a[b, h])
            np.save(one / "lse.npy", lse.numpy()[b, h][None])
            (one / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
            assert (
                main(["compare", str(one / "s.toml"), str(one / "lse.npy"), "--quantity", "lse", "--format", "json"])
                == 0
            )
            alone = json.loads(capsys.readouterr().out)
            mine = [e for e in whole["entries"] if (e["batch"], e["head"]) == (b, h)]
            assert [(e["query"], e["ulps"], e["exact"], e["row_relative"]) for e in mine] == [
                (e["query"], e["ulps"], e["exact"], e["row_relative"]) for e in alone["entries"]
            ]


def test_a_model_s_width_of_heads_from_files(tmp_path, capsys):
    """32 query heads of d 128 over 8 key/value heads (a Llama's 4096 columns): each head's d is limited, as the
    in-memory API limits it, not the heads' columns side by side (refused as "32×4096 per batch" before); a
    spec's own ``heads`` keeps its limit of 16."""
    rng = np.random.default_rng(5)
    Q = rng.standard_normal((1, 32, 4, 128)).astype(np.float32)
    K, V = (rng.standard_normal((1, 8, 4, 128)).astype(np.float32) for _ in range(2))
    group = np.repeat(np.arange(8), 4)
    Z = np.einsum("hnd,hmd->hnm", Q[0].astype(np.float64), K[0, group].astype(np.float64)) / np.sqrt(128)
    A = np.exp(Z - Z.max(axis=2, keepdims=True))
    out = np.einsum("hnm,hmd->hnd", A / A.sum(axis=2, keepdims=True), V[0, group].astype(np.float64))
    out = out[None].astype(np.float32)
    out[0, 17, 2, 100] += 1
    write(tmp_path, "bhnd", q=Q, k=K, v=V, o=out)
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    spec = load_spec(tmp_path / "s.toml")
    assert (spec.heads, spec.kv_heads, len(spec.Q[0])) == (32, 8, 4096)
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "o.npy"), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["max_ulps_at"] == {"batch": 0, "head": 17, "query": 2, "column": 100}
    (tmp_path / "t.toml").write_text("Q = [[1, 2]]\nK = [[1, 2]]\nV = [[1, 2]]\nheads = 32\n")
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "t.toml")
    assert str(info.value).endswith("heads: expected an integer from 1 to 16, got 32")


def test_a_bnhd_file_read_as_bhnd_past_the_limit_says_which_layout_fits_and_heads_are_whole(tmp_path, capsys):
    """A (1, 80, 8, 16) file given as bhnd reads as 80 heads: the line says the other layout has 8 (and says
    "1 batch", not "1 batches"); a spec's own heads must be a whole number, the files' count."""
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", np.ones((1, 80, 8, 16), np.float32))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    with pytest.raises(LimitError) as info:
        load_spec(tmp_path / "s.toml")
    assert str(info.value) == (
        f"{tmp_path / 's.toml'}: Q: 1 batch × 80 heads; at most 64 (the limit); read as layout='bnhd', 8 heads"
    )
    for given, problem in (
        ("8.0", "expected a whole number (the files have 8), got 8.0"),
        ("9", "9, but the files have 8"),
    ):
        (tmp_path / "t.toml").write_text(f'Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nlayout = "bnhd"\nheads = {given}\n')
        with pytest.raises(SpecError) as info:
            load_spec(tmp_path / "t.toml")
        assert str(info.value) == f"{tmp_path / 't.toml'}: heads: {problem}"
    (tmp_path / "t.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nlayout = "bnhd"\nheads = 8\n')
    assert load_spec(tmp_path / "t.toml").heads == 8
