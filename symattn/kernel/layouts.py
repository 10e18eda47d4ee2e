"""The kernel layouts of 2026 as the float64 engine's per-batch arrays: varlen, paged KV, FP8 descales.

- **varlen** (``cu_seqlens_q``, ``cu_seqlens_k``; flash_attn_varlen_func): q (total_q, H, D), k and v
  (total_k, H_kv, D), the sequences packed one after another. It is one batch of total_q queries whose
  mask is block-diagonal: a query of sequence s attends only the keys of sequence s, causal alignment
  (top-left or bottom-right) and the window taken within the sequence, as flash_attn_varlen_func does.
  Masks are exact (a masked weight is exactly 0), so the float64 bounds hold as they are.
- **paged KV** (``block_table``, ``seqlens_k``; flash_attn_with_kvcache, vLLM, FlashInfer): k and v are
  caches (num_blocks, block_size, H_kv, D); batch b's keys are its blocks block_table[b, :] in order, the
  first seqlens_k[b] of them. ``seqlens_k`` alone takes the first seqlens_k[b] keys of a (B, M, H_kv, D)
  cache. Each batch has its own key count; causal alignment is per batch.
- **FP8 descales** (flash_attn_3): q_descale, k_descale, v_descale of shape (B, H_kv), float32 values:
  z = (q·k)·q_descale·k_descale·scale and O = softmax(z)·V·v_descale. q_descale·k_descale goes into the
  scale (float64.Head.factor: its float within 5u, arb exact); V·v_descale is exact in float64 (a float32
  value times a float32 value has at most 48 significant bits), so O's bound is the float64 path's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from symattn.input import limits
from symattn.input.errors import LimitError, ShapeError, SpecError
from symattn.input.records import record


@record
class Packed:
    """Per batch: K and V as (H_kv, m_b, D) and the mask of its queries (None: from causal and window)."""

    K: list[np.ndarray]
    V: list[np.ndarray]
    masks: list[np.ndarray | None]
    starts: tuple[int, ...] = ()  # varlen: cu_seqlens_q, so that a place names its sequence
    # paged: which entries of the k and v arrays as given (the file's axes but the last) are some batch's keys
    used: tuple[np.ndarray, ...] = ()
    key_starts: tuple[int, ...] = ()  # varlen: cu_seqlens_k


def integers(x: Any, name: str, axes: int) -> np.ndarray:
    """A tensor or array of whole numbers (torch's int32 cu_seqlens, a list) as int64, of ``axes`` axes."""
    if type(x).__module__.partition(".")[0] == "torch":
        x = dense_torch(x, name).numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "iu" or a.ndim != axes or 0 in a.shape:
        axis = "axes" if axes > 1 else "axis"
        raise SpecError(name, None, f"expected {axes} {axis} of whole numbers, got {_brief(a)}")
    return a.astype(np.int64)


def dense_torch(x: Any, name: str) -> Any:
    """A torch tensor detached and on the CPU; a meta, sparse or nested one (no values to read, or not as a
    dense array) is one line, where torch would raise its own error from deep inside."""
    if x.is_meta or getattr(x, "is_nested", False) or str(x.layout) != "torch.strided":
        form = "meta" if x.is_meta else "nested" if getattr(x, "is_nested", False) else str(x.layout)
        raise SpecError(name, None, f"a {form.removeprefix('torch.')} tensor: a dense one, with its values, is needed")
    return x.detach().cpu()


def _brief(a: np.ndarray) -> str:
    return f"shape {tuple(a.shape)} of {a.dtype}"


def _cumulative(cu: np.ndarray, name: str, total: int) -> None:
    """Offsets from 0 to the tokens given that never decrease (an empty sequence repeats one); the first
    that does not fit is named at its place (0-based, as numpy indexes: ``cu_seqlens_q[2]``)."""
    if cu[0] != 0:
        raise SpecError(name, None, f"{cu[0]} is not 0: the offsets start at 0", index=(0,))
    down = np.flatnonzero(cu[1:] < cu[:-1])  # compared, not subtracted: a difference of int64s can wrap
    if down.size:
        i = int(down[0]) + 1
        why = f"{cu[i]} is less than [{i - 1}] ({cu[i - 1]}): the offsets may not decrease"
        raise SpecError(name, None, why, index=(i,))
    if cu[-1] != total:
        why = f"{cu[-1]} is the last offset; {name[-1]} holds {total} tokens"
        raise SpecError(name, None, why, index=(len(cu) - 1,))


def varlen(Q: np.ndarray, K: np.ndarray, V: np.ndarray, cu_q: Any, cu_k: Any, allowed) -> tuple[np.ndarray, Packed]:
    """Q (1, H, total_q, D) and the packed sequences' block-diagonal mask from (total, heads, d) arrays.
    ``allowed(n, m)``: one sequence's mask from its causal alignment and window (None: every key)."""
    if cu_q is None or cu_k is None:
        raise SpecError("cu_seqlens_k" if cu_k is None else "cu_seqlens_q", None, "missing: varlen takes both")
    if Q.ndim != 3 or K.ndim != 3 or V.ndim != 3:
        shapes = ", ".join(f"{n} {tuple(a.shape)}" for n, a in zip("qkv", (Q, K, V)))
        raise ShapeError("q", "shape", f"varlen takes (total, heads, d) arrays; got {shapes}")
    cq, ck = integers(cu_q, "cu_seqlens_q", 1), integers(cu_k, "cu_seqlens_k", 1)
    for cu, name in ((cq, "cu_seqlens_q"), (ck, "cu_seqlens_k")):
        if len(cu) < 2:
            raise SpecError(name, None, f"{len(cu)} offset: at least 2, a sequence's first and its end")
    if len(cq) != len(ck):
        raise SpecError("cu_seqlens_k", None, f"{len(ck) - 1} sequences; cu_seqlens_q has {len(cq) - 1}")
    _cumulative(cq, "cu_seqlens_q", Q.shape[0])
    _cumulative(ck, "cu_seqlens_k", K.shape[0])
    n, m = Q.shape[0], K.shape[0]
    mask = np.zeros((n, m), dtype=bool)
    for s in range(len(cq) - 1):
        rows, keys = slice(int(cq[s]), int(cq[s + 1])), slice(int(ck[s]), int(ck[s + 1]))
        if rows.start == rows.stop:
            continue
        if keys.start == keys.stop:
            raise SpecError("cu_seqlens_k", None, f"sequence {s} has queries and no key; softmax is undefined there")
        try:
            block = allowed(rows.stop - rows.start, keys.stop - keys.start)
        except SpecError as e:
            raise SpecError(e.source, None, f"sequence {s}: {e.problem}") from None
        mask[rows, keys] = True if block is None else block
    return Q.transpose(1, 0, 2)[None], Packed(
        [K.transpose(1, 0, 2)], [V.transpose(1, 0, 2)], [mask], tuple(cq.tolist()), key_starts=tuple(ck.tolist())
    )


def paged(K: np.ndarray, V: np.ndarray, table: Any, seqlens: Any, batch: int, layout: str) -> Packed:
    """Each batch's keys of a paged cache (``table`` given) or of a contiguous one cut at ``seqlens``."""
    if seqlens is None:
        raise SpecError("seqlens_k", None, "missing: a paged cache needs each sequence's key count")
    lengths = integers(seqlens, "seqlens_k", 1)
    if len(lengths) != batch:
        raise ShapeError("seqlens_k", "shape", f"{len(lengths)} lengths; q has a batch of {batch}")
    if table is None:  # a contiguous cache (B, M, H_kv, D) in the layout, cut at each length
        for name, a in (("k", K), ("v", V)):
            if a.ndim != 4 or a.shape[0] != batch:
                raise ShapeError(
                    name, "shape", f"{tuple(a.shape)}; a cache with seqlens_k is (batch, keys, kv heads, d)"
                )
        given = K, V
        K, V = (a if layout == "bnhd" else a.transpose(0, 2, 1, 3) for a in (K, V))
        caches = [(K[b], V[b]) for b in range(batch)]
    else:
        blocks = integers(table, "block_table", 2)
        if K.ndim != 4 or V.ndim != 4 or K.shape[:3] != V.shape[:3]:
            shapes = f"k {tuple(K.shape)}, v {tuple(V.shape)}"
            raise ShapeError(
                "k", "shape", f"paged caches are (num_blocks, block_size, kv heads, d) alike; got {shapes}"
            )
        if blocks.shape[0] != batch:
            raise ShapeError("block_table", "shape", f"{blocks.shape[0]} rows; q has a batch of {batch}")
        bad = np.argwhere((blocks < 0) | (blocks >= K.shape[0]))
        if bad.size:
            b, i = (int(x) for x in bad[0])
            why = f"{blocks[b, i]} is no block of the caches (0 to {K.shape[0] - 1})"
            raise SpecError("block_table", None, why, index=(b, i))
        given = K, V
        caches = [
            (K[blocks[b]].reshape(-1, *K.shape[2:]), V[blocks[b]].reshape(-1, *V.shape[2:])) for b in range(batch)
        ]
    used = [np.zeros(a.shape[:-1], dtype=bool) for a in given]
    out_k, out_v = [], []
    for b, (k, v) in enumerate(caches):
        m = int(lengths[b])
        if not 1 <= m <= k.shape[0]:
            raise SpecError(
                "seqlens_k", None, f"{m} is not 1 to {k.shape[0]}, the keys batch {b}'s cache holds", index=(b,)
            )
        if m > limits.KERNEL_TOKENS:
            raise LimitError("seqlens_k", None, f"{m} keys; at most {limits.KERNEL_TOKENS}", index=(b,))
        out_k.append(np.ascontiguousarray(k[:m].transpose(1, 0, 2)))
        out_v.append(np.ascontiguousarray(v[:m].transpose(1, 0, 2)))
        for mask in used:  # its keys where the arrays hold them: (block, offset) or (batch, key), kv heads alike
            if table is not None:
                keys = np.arange(m)
                mask[blocks[b][keys // given[0].shape[1]], keys % given[0].shape[1]] = True
            elif layout == "bnhd":
                mask[b, :m] = True
            else:
                mask[b, :, :m] = True
    return Packed(out_k, out_v, [None] * batch, used=tuple(used))


def descales(given: dict[str, Any], batch: int, kv: int, sequences: int | None = None) -> dict[str, np.ndarray]:
    """Each descale given as (B, H_kv) float32 values (float64 arrays), checked: finite, positive. ``sequences``:
    varlen's count, whose one batch takes one factor for all of them (a factor per sequence, as flash_attn_3
    takes them, would scale the scores row by row: the engine's scale is one per head)."""
    from symattn.kernel.tensors import exact_array

    out = {}
    for name, x in given.items():
        if x is None:
            continue
        a = exact_array(x, name).values
        if a.shape != (batch, kv):
            why = f"flash_attn_3 takes (batch, kv heads) = {(batch, kv)}"
            if sequences is not None:
                why = (
                    f"varlen takes one factor for all {sequences} sequences here, {(batch, kv)} (flash_attn_3's "
                    f"factor per sequence, {(sequences, kv)}, is not taken: compare the sequences as batches of "
                    "their own)"
                )
            raise ShapeError(name, "shape", f"{tuple(a.shape)}; {why}")
        with np.errstate(over="ignore", invalid="ignore"):  # a float64 past float32's range: not one of its
            bad = np.argwhere(~(np.isfinite(a) & (a > 0) & (a.astype(np.float32) == a)))
        if bad.size:
            at = tuple(int(i) for i in bad[0])
            why = f"{float(a[at])!r} is not a positive float32 value (flash_attn_3's descale factors are)"
            raise SpecError(name, None, why, index=at)
        out[name] = a
    return out


__all__ = ["Packed", "dense_torch", "descales", "integers", "paged", "varlen"]
