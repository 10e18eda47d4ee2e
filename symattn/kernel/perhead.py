"""compare's figures for each (batch, head) of a result with those axes (issues 22 and 28).

The float64 path lines the heads up side by side (``batched.arrange``): O as a block of columns per
head, batch by batch; the LSE as a row per head. Each head's summary is made from the same decided
entries as the whole, found by the comparison's places (``places.Places.head_of``).
"""

from __future__ import annotations

from typing import Any

from symattn.kernel.comparison import Comparison


def summaries(c: Comparison) -> list[dict[str, Any]]:
    """Each (batch, head), 0-based, in order: its entries, how many are correctly rounded, its largest errors
    (Entry objects, placed in the whole) by the figures' true order, and how many places may hold each."""
    shape = getattr(c.entries, "shape", None)
    if shape is None:  # Entry objects: their rows and columns
        shape = (max((e.row for e in c.entries), default=0) + 1, max((e.col for e in c.entries), default=0) + 1)
    regions = dict(c.where.regions(shape))
    out = []
    for s in c.entries.head_summaries(c.where):
        region = regions.get((s["batch"], s["head"]))
        (worst, n), (relative, m) = c.top("ulps", region), c.top("relative", region)
        out.append({**s, "worst": worst, "worst_places": n, "worst_relative": relative, "worst_relative_places": m})
    return out


__all__ = ["summaries"]
