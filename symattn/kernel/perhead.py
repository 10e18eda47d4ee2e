"""compare's figures for each (batch, head) of a result with those axes (issues 22 and 28).

The float64 path lines the heads up side by side (``batched.arrange``): O as a block of columns per
head, batch by batch; the LSE as a row per head. Each head's summary is made from the same decided
entries as the whole, found by the comparison's places (``places.Places.head_of``).
"""

from __future__ import annotations

from typing import Any

from symattn.kernel.comparison import Comparison, Entry


def summaries(c: Comparison) -> list[dict[str, Any]]:
    """Each (batch, head), 0-based, in order: its entries, how many are correctly rounded, its largest errors
    (Entry objects, placed in the whole)."""
    places = c.where
    groups: dict[tuple[int, int], list[Entry]] = {}
    for e in c.entries:
        groups.setdefault(places.head_of(e.row, e.col), []).append(e)
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
                "worst_relative": worst_relative,
            }
        )
    return out


__all__ = ["summaries"]
