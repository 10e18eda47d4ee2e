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
class PartialsReport:
    """Each split's output and LSE reports, and the merged output's and LSE's where given."""

    splits: tuple[tuple[int, int], ...]  # each split's keys [start, stop)
    outputs: tuple[Report, ...]
    lses: tuple[Report, ...]
    merged: Report | None = None
    merged_lse: Report | None = None

    @property
    def reports(self) -> list[tuple[str, Report]]:
        named = []
        for i, (start, stop) in enumerate(self.splits):
            named += [(f"split {i} (keys {start} to {stop - 1}): O_{i}", self.outputs[i])]
            named += [(f"split {i} (keys {start} to {stop - 1}): LSE_{i}", self.lses[i])]
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
            "splits": [{"keys": [start, stop]} for start, stop in self.splits],
            "checks": [{"check": name, **r.data(summary)} for name, r in self.reports],
        }

    def to_json(self, summary: bool = False) -> str:
        return json.dumps(self.data(summary), ensure_ascii=False, indent=2) + "\n"


def boundaries(splits: Any, keys: int) -> tuple[tuple[int, int], ...]:
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
    return tuple((a, b) for a, b in zip(offsets, offsets[1:]) if b > a)


def restricted(inputs: Inputs, start: int, stop: int) -> Inputs:
    """The inputs with each head attending only keys [start, stop) (within its own mask)."""
    heads = []
    for h in inputs.heads:
        m = h.K.shape[0]
        mask = np.zeros((h.Q.shape[0], m), dtype=bool)
        mask[:, start : min(stop, m)] = True
        if h.allowed is not None:
            mask &= h.allowed
        empty = np.flatnonzero(~mask.any(axis=1))
        if empty.size:
            raise SpecError(
                "splits",
                None,
                f"keys {start} to {stop - 1}: query {int(empty[0])} (0-based) attends none of them; a kernel writes "
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
    window: int | None = None,
    scale: float | None = None,
    layout: str = "bhnd",
    lse_base: str = "e",
    rule: str | None = None,
    rtol: Any = None,
    atol: Any = None,
    max_ulp: Any = None,
    worst: int | None = 10,
    source: str = "",
) -> PartialsReport:
    """Each split's (O_i, LSE_i) of a split-KV kernel against the exact attention over that split's keys,
    and, where given, the merged ``out`` and ``lse`` against the exact attention over every key (the rule
    and tolerances as :func:`symattn.kernel.compare` takes them, for every check). ``source``: the file the
    tensors were read from (``symattn compare --partials``), which each report names."""
    from symattn.kernel import oracle, tensors

    if lse_base not in ("e", "2"):
        raise SpecError("lse_base", None, f"expected 'e' or '2', got {lse_base!r}")
    keys = tensors.exact_array(k, "k").values
    m = keys.shape[-2] if layout == "bhnd" or keys.ndim == 2 else keys.shape[-3]
    ranges = boundaries(splits, m)
    outs, lses = (
        _per_split(partials_out, "partials_out", len(ranges)),
        _per_split(partials_lse, "partials_lse", len(ranges)),
    )
    rtol, atol, bound = oracle._tolerance(rtol, "rtol"), oracle._tolerance(atol, "atol"), oracle._ulps(max_ulp)
    masks = {"causal": causal, "causal_align": causal_align, "window": window, "scale": scale, "layout": layout}

    def one(result: Any, kind: str, at: tuple[int, int] | None, symbol: str) -> Report:
        named = (f"{source}:{symbol}",) if source else ()
        return oracle.judged(
            result, q, k, v, kind, None, masks, {}, rule, None, rtol, atol, bound, lse_base, worst, at, symbol, named
        )

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


__all__ = ["PartialsReport", "boundaries", "compare_partials", "restricted"]
