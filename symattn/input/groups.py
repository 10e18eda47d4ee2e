"""Grouped-query heads (issue 20): ``kv_heads = G`` key/value heads shared by the ``heads`` query heads,
as torch's ``scaled_dot_product_attention(..., enable_gqa=True)`` shares them. G = 1 is multi-query.

K and V (or W_K and W_V) have G head blocks of columns where Q has one per query head; query head h
uses key/value head h // (heads / G), so consecutive query heads form a group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from symattn.input import limits
from symattn.input.reader import Reader, brief, parse_index


def read_kv_heads(reader: Reader, data: Mapping[str, Any], most: int | None = None) -> int | None:
    """``kv_heads`` as given (None when absent); :func:`check_kv_heads` checks it against ``heads``;
    ``most``: another limit."""
    if "kv_heads" not in data:
        return None
    most = limits.KV_HEADS if most is None else most
    raw = data["kv_heads"]
    value = parse_index(raw)
    if value is None or not 1 <= value <= most:
        raise reader.error("kv_heads", f"expected an integer from 1 to {most}, got {brief(raw)}")
    return value


def check_kv_heads(reader: Reader, kv_heads: int | None, heads: int) -> None:
    if kv_heads is not None and heads % kv_heads:
        raise reader.error(
            "kv_heads",
            f"{kv_heads} key/value heads do not divide heads = {heads}; each group needs as many query heads",
        )


def group_of(head: int, heads: int, kv_heads: int) -> int:
    """The key/value head that query head ``head`` (0-based) uses."""
    return head // (heads // kv_heads)
