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
    (Entry objects, placed in the whole)."""
    return c.entries.head_summaries(c.where)


__all__ = ["summaries"]
