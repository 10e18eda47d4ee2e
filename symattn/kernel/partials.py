"""Split-KV partials (flash-decoding) against their exact values: each split's (O_i, LSE_i), and the merge.

A split-KV kernel (FlashAttention's ``num_splits``, FlashInfer's ``merge_state``) attends each query to
the keys of one split at a time, writing O_i (attention over those keys alone) and LSE_i (the log-sum-exp
of their scaled scores), then merges them: LSE = log Σ_i e^{LSE_i}, O = Σ_i e^{LSE_i − LSE} O_i. The
exact O_i and LSE_i are those of attention whose mask is the full one restricted to the split's keys
(masked keys weigh exactly 0), so the float64 path and its bounds serve them as they are. The merge is
checked as the kernel's final O and LSE against the exact attention over every key.

Shapes follow FlashAttention's accumulators: ``partials_out`` (splits, B, H, N, D) in ``bhnd`` (or
(splits, B, N, H, D) in ``bnhd``; a list of the splits' tensors is taken too, as FlashInfer holds them)
and ``partials_lse`` (splits, B, H, N). ``lse_base="2"`` reads FlashInfer's base-2 LSE.

With varlen (``cu_seqlens_q``, ``cu_seqlens_k``) or a paged cache (``block_table``, ``seqlens_k``) each
sequence splits its own keys, as FlashAttention's split-KV kernels do (a split is a range of each
sequence's key blocks): ``splits`` is a count, and sequence s's split i is its keys [i·size_s,
(i + 1)·size_s) with size_s = ⌈M_s / count⌉. Each split's O_i and LSE_i have the layout's shapes (varlen
(total_q, H, D) and (H, total_q); paged (B, N, H, D) and (B, H, N)), the splits on a first axis.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np

from symattn.input.errors import ShapeError, SpecError
from symattn.input.records import record
from symattn.input.tensorfile import Array
from symattn.kernel.inputs import Inputs
from symattn.kernel.report import Report


@record
class Split:
    """One split of the keys: [start, stop) of every head's (one range), or of each sequence's own keys (a
    range per sequence: varlen, whose sequence s starts at ``offsets[s]`` of the packed keys, or a paged
    cache's batch)."""

    ranges: tuple[tuple[int, int], ...]
    offsets: tuple[int, ...] | None = None  # varlen: cu_seqlens_k; None for a paged cache's batches
    per_sequence: bool = False

    @property
    def label(self) -> str:
        if not self.per_sequence:
            return f"keys {self.ranges[0][0]} to {self.ranges[0][1] - 1}"
        return "each sequence's keys " + "; ".join(f"{a} to {b - 1}" if b > a else "none" for a, b in self.ranges)

    def data(self) -> dict[str, Any]:
        if not self.per_sequence:
            return {"keys": list(self.ranges[0])}
        return {"sequence_keys": [list(r) for r in self.ranges]}

    def keep(self, head: int, heads: int, m: int) -> np.ndarray:
        """Which of a head's m keys the split holds (``head`` of ``heads`` a batch: a paged cache's batch)."""
        keep = np.zeros(m, dtype=bool)
        if not self.per_sequence:
            keep[self.ranges[0][0] : self.ranges[0][1]] = True
        elif self.offsets is None:  # a paged cache: the head's batch's own keys
            a, b = self.ranges[head // heads]
            keep[a:b] = True
        else:
            for start, (a, b) in zip(self.offsets, self.ranges):
                keep[start + a : start + b] = True
        return keep


def per_sequence(count: Any, lengths: list[int], offsets: tuple[int, ...] | None) -> tuple[Split, ...]:
    """The splits of each sequence's own keys (``lengths``): ⌈M_s / count⌉ keys each, the last the rest."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        why = f"expected a number of splits (each sequence splits its own keys), got {count!r}"
        raise SpecError("splits", None, why)
    sizes = [-(-m // count) for m in lengths]
    return tuple(
        Split(tuple((min(i * z, m), min((i + 1) * z, m)) for z, m in zip(sizes, lengths)), offsets, True)
        for i in range(count)
    )


@record
class PartialsReport:
    """Each split's output and LSE reports, and the merged output's and LSE's where given."""

    parts: tuple[Split, ...]  # each split's keys
    outputs: tuple[Report, ...]
    lses: tuple[Report, ...]
    merged: Report | None = None
    merged_lse: Report | None = None

    @property
    def splits(self) -> tuple[Any, ...]:
        """Each split's keys [start, stop), or its range of each sequence's own keys."""
        return tuple(s.ranges if s.per_sequence else s.ranges[0] for s in self.parts)

    @property
    def reports(self) -> list[tuple[str, Report]]:
        named = []
        for i, split in enumerate(self.parts):
            named += [(f"split {i} ({split.label}): O_{i}", self.outputs[i])]
            named += [(f"split {i} ({split.label}): LSE_{i}", self.lses[i])]
        if self.merged is not None:
            named.append(("the merge: O", self.merged))
        if self.merged_lse is not None:
            named.append(("the merge: LSE", self.merged_lse))
        return named

    @property
    def ok(self) -> bool:
        return all(r.ok for _, r in self.reports)

    def text(self, lang: str = "en") -> str:
        return "\n\n".join(f"== {name} ==\n{r.text(lang)}" for name, r in self.reports)

    def data(self, summary: bool = False) -> dict[str, Any]:
        """The JSON of ``symattn compare --partials --format json``: the splits' keys and each check's report."""
        return {
            "splits": [split.data() for split in self.parts],
            "checks": [{"check": name, **r.data(summary)} for name, r in self.reports],
        }

    def to_json(self, summary: bool = False) -> str:
        return json.dumps(self.data(summary), ensure_ascii=False, indent=2) + "\n"


def boundaries(splits: Any, keys: int) -> tuple[Split, ...]:
    """The splits' key ranges: a count (FlashAttention's ⌈keys / count⌉ keys each, the last the rest) or
    the offsets [0, s_1, …, keys]."""
    if isinstance(splits, bool):
        raise SpecError("splits", None, f"expected a number of splits or their key offsets, got {splits!r}")
    if isinstance(splits, int):
        if not 1 <= splits <= keys:
            raise SpecError("splits", None, f"{splits} splits of {keys} keys; expected 1 to {keys}")
        size = -(-keys // splits)
        offsets = [min(i * size, keys) for i in range(splits + 1)]
    else:
        offsets = [int(x) for x in np.asarray(splits).tolist()] if np.asarray(splits).dtype.kind in "iu" else []
        ok = len(offsets) >= 2 and offsets[0] == 0 and offsets[-1] == keys
        if not ok or any(b <= a for a, b in zip(offsets, offsets[1:])):
            raise SpecError("splits", None, f"expected 0, then increasing key offsets ending at {keys}")
    return tuple(Split(((a, b),)) for a, b in zip(offsets, offsets[1:]) if b > a)


def restricted(inputs: Inputs, split: Split) -> Inputs:
    """The inputs with each head attending only the split's keys (within its own mask)."""
    heads = []
    for hh, h in enumerate(inputs.heads):
        mask = np.broadcast_to(split.keep(hh, inputs.head_count, h.K.shape[0]), (h.Q.shape[0], h.K.shape[0])).copy()
        if h.allowed is not None:
            mask &= h.allowed
        empty = np.flatnonzero(~mask.any(axis=1))
        if empty.size:
            raise SpecError(
                "splits",
                None,
                f"{split.label}: query {int(empty[0])} (0-based) attends none of them; a kernel writes "
                "LSE −inf and O 0 there, which this check does not take",
            )
        heads.append(replace(h, allowed=mask))
    return replace(inputs, heads=tuple(heads))


def compare_partials(
    partials_out: Any,
    partials_lse: Any,
    q: Any,
    k: Any,
    v: Any,
    *,
    splits: Any,
    out: Any = None,
    lse: Any = None,
    causal: bool = False,
    causal_align: str = "top-left",
    window: int | tuple[int, int] | None = None,
    scale: float | None = None,
    layout: str = "bhnd",
    lse_base: str | int = "e",
    rule: str | None = None,
    rtol: Any = None,
    atol: Any = None,
    max_ulp: Any = None,
    worst: int | None = 10,
    source: str = "",
    cu_seqlens_q: Any = None,
    cu_seqlens_k: Any = None,
    block_table: Any = None,
    seqlens_k: Any = None,
) -> PartialsReport:
    """Each split's (O_i, LSE_i) of a split-KV kernel against the exact attention over that split's keys,
    and, where given, the merged ``out`` and ``lse`` against the exact attention over every key (the rule
    and tolerances as :func:`symattn.kernel.compare` takes them, for every check). ``source``: the file the
    tensors were read from (``symattn compare --partials``), which each report names. With varlen's
    ``cu_seqlens_q`` and ``cu_seqlens_k`` or a paged cache's ``block_table`` and ``seqlens_k`` (as compare takes
    them), ``splits`` is a count and each sequence splits its own keys."""
    from symattn.kernel import layouts, oracle, tensors

    lse_base = oracle.base_of(lse_base)
    packing = {
        name: value
        for name, value in zip(oracle.PACKING, (cu_seqlens_q, cu_seqlens_k, block_table, seqlens_k))
        if value is not None
    }
    if cu_seqlens_k is not None:  # each sequence's keys of the packed ones
        ck = [int(x) for x in layouts.integers(cu_seqlens_k, "cu_seqlens_k", 1)]
        ranges = per_sequence(splits, [b - a for a, b in zip(ck, ck[1:])], tuple(ck[:-1]))
    elif seqlens_k is not None:  # each batch's keys of its cache
        ranges = per_sequence(splits, [int(x) for x in layouts.integers(seqlens_k, "seqlens_k", 1)], None)
    else:
        keys = tensors.exact_array(k, "k").values
        ranges = boundaries(splits, keys.shape[-2] if layout == "bhnd" or keys.ndim == 2 else keys.shape[-3])
    outs, lses = (
        _per_split(partials_out, "partials_out", len(ranges)),
        _per_split(partials_lse, "partials_lse", len(ranges)),
    )
    rtol, atol, bound = oracle._tolerance(rtol, "rtol"), oracle._tolerance(atol, "atol"), oracle._ulps(max_ulp)
    masks = {"causal": causal, "causal_align": causal_align, "window": window, "scale": scale, "layout": layout}

    def one(result: Any, kind: str, at: Split | None, symbol: str) -> Report:
        named = (f"{source}:{symbol}",) if source else ()
        how = (rule, None, rtol, atol, bound, lse_base, worst, at, symbol, named)
        return oracle.judged(result, q, k, v, kind, None, masks, packing, *how)

    made_out = tuple(one(outs[i], "output", r, f"partials_out[{i}]") for i, r in enumerate(ranges))
    made_lse = tuple(one(lses[i], "lse", r, f"partials_lse[{i}]") for i, r in enumerate(ranges))
    merged = None if out is None else one(out, "output", None, "out")
    merged_lse = None if lse is None else one(lse, "lse", None, "lse")
    return PartialsReport(ranges, made_out, made_lse, merged, merged_lse)


def _per_split(x: Any, name: str, count: int) -> list[Any]:
    """The splits' results: a list of them, or the first axis of one tensor or array."""
    if isinstance(x, Array):  # a file's (symattn compare --partials): each split keeps the file's format
        x = [Array(x.format, part) for part in x.values]
    parts = list(x) if isinstance(x, (list, tuple)) else [x[i] for i in range(len(x))] if hasattr(x, "shape") else []
    if len(parts) != count:
        raise ShapeError(name, "shape", f"{len(parts)} splits; the splits given make {count}")
    return parts


__all__ = ["PartialsReport", "Split", "boundaries", "compare_partials", "per_sequence", "restricted"]
