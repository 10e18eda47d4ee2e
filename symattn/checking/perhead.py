"""compare's figures for each (batch, head) of inputs and a result with those axes (issue 22).

The float64 path lines the heads up side by side (``batched.arrange``): O as a block of columns per
head, batch by batch; the LSE as a row per head. Here each entry gets its (batch, head, row, column)
back, and each head its own summary, from the same decided entries as the whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symattn.checking.comparison import Comparison, Entry


def locator(c: Comparison) -> Callable[[Entry], tuple[int, int, int, int]]:
    """Each entry's (batch, head, row, column), 0-based, within its head's own matrix (the LSE: one row)."""
    assert c.batch_heads is not None
    heads = c.batch_heads[1]
    if c.quantity == "lse":
        return lambda e: (e.row // heads, e.row % heads, 0, e.col)
    columns = c.entries[-1].col + 1  # row by row: the last entry is in the last column
    width = columns // (c.batch_heads[0] * heads)

    def place(e: Entry) -> tuple[int, int, int, int]:
        k = e.col // width
        return k // heads, k % heads, e.row, e.col % width

    return place


def summaries(c: Comparison) -> list[dict[str, Any]]:
    """Each (batch, head), in order: its entries, how many are correctly rounded, its largest errors."""
    position = locator(c)
    groups: dict[tuple[int, int], list[Entry]] = {}
    for e in c.entries:
        b, h, _, _ = position(e)
        groups.setdefault((b, h), []).append(e)
    out = []
    for (b, h), entries in sorted(groups.items()):
        finite = [e for e in entries if e.ulps is not None]
        relative = [e for e in entries if e.relative is not None]
        worst = max(finite, key=lambda e: (e.bucket, e.ulps)) if finite else None
        worst_relative = max(relative, key=lambda e: e.relative) if relative else None  # type: ignore[arg-type, return-value]
        out.append(
            {
                "batch": b,
                "head": h,
                "entries": len(entries),
                "correctly_rounded": sum(1 for e in entries if e.value is not None and e.bucket <= 1),
                "not_finite": sum(1 for e in entries if e.value is None),
                "worst": worst,
                "worst_at": None if worst is None else position(worst)[2:],
                "worst_relative": worst_relative,
                "worst_relative_at": None if worst_relative is None else position(worst_relative)[2:],
            }
        )
    return out


__all__ = ["locator", "summaries"]
