"""One engine (issue 30): for random shapes, layouts, grouped heads, masks and kinds, symattn.kernel.compare
on tensors in memory and `symattn compare` on the same floats in files give the same JSON, but for the
result's name (out, and the file's), and a naive float32 kernel passes FlashAttention's rule against itself."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from symattn.cli.commands import main
from symattn.kernel import compare


def naive(Q, K, V, causal: bool, align: str, window: int | None):
    """Attention in float64 over (B, H, N, D) with grouped K and V, rounded to float32; its LSE too."""
    group = Q.shape[1] // K.shape[1]
    K, V = np.repeat(K, group, axis=1).astype(np.float64), np.repeat(V, group, axis=1).astype(np.float64)
    n, m = Q.shape[2], K.shape[2]
    s = np.einsum("bhnd,bhmd->bhnm", Q.astype(np.float64), K) / math.sqrt(Q.shape[3])
    top = np.arange(n)[:, None] + (m - n if align == "bottom-right" else 0)
    j = np.arange(m)[None, :]
    allowed = np.ones((n, m), dtype=bool)
    if causal or window is not None:
        allowed = j <= top
    if window is not None and window < m:
        allowed &= top - window < j
    s = np.where(allowed, s, -np.inf)
    top_score = s.max(axis=-1, keepdims=True)
    w = np.exp(s - top_score)
    total = w.sum(axis=-1, keepdims=True)
    out = (w / total) @ V
    return out.astype(np.float32), (np.log(total[..., 0]) + top_score[..., 0]).astype(np.float32)


@st.composite
def cases(draw):
    batch = draw(st.sampled_from([None, 2]))  # None: (H, N, D) tensors, no batch axis
    kv = draw(st.sampled_from([1, 2]))
    heads = kv * draw(st.sampled_from([1, 2]))
    if batch is None and heads == 1:
        heads = 2  # (1, N, D) files read as one head's matrix: its places drop the head axis
    n, m, d = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.sampled_from([2, 4]))
    align = draw(st.sampled_from(["top-left", "bottom-right"]))
    causal = draw(st.booleans())
    window = draw(st.sampled_from([None, 2, 5]))
    if align == "bottom-right" and n > m and (causal or window is not None):
        n = m  # no query before the first key's diagonal
    if align == "bottom-right" and not (causal or window is not None):
        align = "top-left"  # an alignment alone places nothing (a spec refuses it)
    layout = draw(st.sampled_from(["bhnd", "bnhd"]))
    kind = draw(st.sampled_from(["output", "lse"]))
    seed = draw(st.integers(0, 2**16))
    return batch or 1, batch is not None, heads, kv, n, m, d, align, causal, window, layout, kind, seed


@settings(max_examples=6, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
# one query of two heads in bnhd, (1, 2, 2): its leading 1 is the query axis (files once read 2 queries)
@example(case=(1, False, 2, 1, 1, 1, 2, "bottom-right", True, None, "bnhd", "output", 0))
def test_tensors_in_memory_and_files_give_the_same_json(tmp_path_factory, case, capsys):
    batch, batched, heads, kv, n, m, d, align, causal, window, layout, kind, seed = case
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((batch, heads, n, d)).astype(np.float32)
    K, V = (rng.standard_normal((batch, kv, m, d)).astype(np.float32) for _ in range(2))
    out, lse = naive(Q, K, V, causal, align, window)
    result = out if kind == "output" else lse

    def held(a: np.ndarray, lse: bool = False) -> np.ndarray:
        """As the kernel holds it: the layout's order, with a batch axis or without."""
        if layout == "bnhd" and not lse:
            a = a.transpose(0, 2, 1, 3)
        return np.ascontiguousarray(a if batched else a[0])

    folder = tmp_path_factory.mktemp("case")
    for name, a in zip("qkv", (Q, K, V)):
        np.save(folder / f"{name}.npy", held(a))
    np.save(folder / "r.npy", held(result, kind == "lse"))
    keys = ['Q = "q.npy"', 'K = "k.npy"', 'V = "v.npy"', f'layout = "{layout}"']
    if causal:
        keys.append('mask = "causal"')
    if causal or window is not None:
        keys.append(f'causal_align = "{align}"')
    if window is not None:
        keys.append(f"window = {window}")
    (folder / "s.toml").write_text("\n".join(keys) + "\n")
    args = ["compare", str(folder / "s.toml"), str(folder / "r.npy"), "--quantity", kind, "--format", "json"]
    code = main(args)
    cli = capsys.readouterr().out
    tensors = [held(a) for a in (Q, K, V)]
    options = {"kind": kind, "causal": causal, "causal_align": align, "window": window, "layout": layout}
    report = compare(held(result, kind == "lse"), *tensors, **options)
    assert code == (0 if report.ok else 1)
    cli = cli.replace(str(folder / "r.npy"), "out").replace("o[", "out[").replace("lse[", "out[")
    assert json.loads(cli) == json.loads(report.to_json())
    if kind == "output":  # the same naive kernel as its own reference: a ratio of 1 passes
        assert compare(held(out), *tensors, reference=held(out), **options).figure() in (
            "ratio 1.00",
            "ratio undefined",
        )
