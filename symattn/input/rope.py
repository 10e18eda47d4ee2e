"""Rotary position embeddings (RoPE): the ``rope``, ``rope_base`` and ``rope_style`` keys, read and checked.

Query i sits at position i and key j at position j (both from 0, in cross-attention too); each head's
Q and K rows are rotated after any projection. ``half`` pairs dimension t with t + d_k/2 (Llama's
Hugging Face code, the default); ``interleaved`` pairs 2t with 2t + 1 (RoFormer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from symattn.input import limits
from symattn.input.messages import said
from symattn.input.numeral import Numeral, parse_numeral
from symattn.input.reader import Reader

ROPE_STYLES = ("half", "interleaved")
ROPE_KEYS = ("rope", "rope_base", "rope_style")
DEFAULT_BASE = parse_numeral("10000")


@dataclass(frozen=True)
class Rope:
    """The rotation: pair t of a head turns by the angle p · base^(−2t/d_k) at position p."""

    base: Numeral = DEFAULT_BASE
    style: str = "half"

    def pairs(self, d_k: int) -> tuple[tuple[int, int], ...]:
        """The 0-based dimensions (a, b) of each pair t, rotated as (a, b) ↦ (a cos − b sin, a sin + b cos)."""
        half = d_k // 2
        if self.style == "half":
            return tuple((t, t + half) for t in range(half))
        return tuple((2 * t, 2 * t + 1) for t in range(half))


def read_rope(
    reader: Reader, data: Mapping[str, Any], d_k: int, heads: int, n_q: int, n_k: int, symbolic: bool
) -> Rope | None:
    """``rope = true`` with optional ``rope_base`` and ``rope_style``; None without RoPE."""
    on = reader.flag(data["rope"], "rope") if "rope" in data else False
    if not on:
        for key in ("rope_base", "rope_style"):
            if key in data:
                raise reader.error(key, said("needs_rope"))
        return None
    if d_k % 2:
        raise reader.error("rope", said("rope_odd", d_k=d_k))
    if symbolic:
        raise reader.error("rope", "RoPE needs numbers in Q and K (symbols are not rotated)")
    if data.get("inputs") == "rounded":
        raise reader.error("inputs", 'inputs = "rounded" is not supported with RoPE yet')
    base = DEFAULT_BASE
    if "rope_base" in data:
        base = reader.number(data["rope_base"], "rope_base")
        if base.value <= 0:
            raise reader.error("rope_base", said("must_be_positive", text=repr(base.text)))
        low, high = Fraction(1, limits.ROPE_BASE_MAX), Fraction(limits.ROPE_BASE_MAX)
        if not low <= base.value <= high or max(base.value.numerator, base.value.denominator) > limits.ROPE_BASE_MAX:
            raise reader.limit(
                "rope_base",
                f"{base.text} is outside what RoPE takes here: a number from 1/{limits.ROPE_BASE_MAX} "
                f"to {limits.ROPE_BASE_MAX} with numerator and denominator up to {limits.ROPE_BASE_MAX}",
            )
    style = reader.choice(data.get("rope_style", "half"), "rope_style", ROPE_STYLES)
    terms = heads * n_q * n_k * (d_k // 2)
    if terms > limits.ROPE_TERMS:
        raise reader.limit(
            "rope",
            f"{n_q}×{n_k} scores with {heads} head(s) of {d_k // 2} rotated pairs make {terms} cos/sin terms; "
            f"the limit is {limits.ROPE_TERMS}",
        )
    return Rope(base, style)


__all__ = ["ROPE_KEYS", "ROPE_STYLES", "Rope", "read_rope"]
