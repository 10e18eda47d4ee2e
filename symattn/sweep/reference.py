"""FlashAttention's naive reference, in the case's own dtype: what its rule measures a kernel's error against.

flash-attention's tests compute ``attention_ref(..., upcast=False, reorder_ops=True)`` beside the kernel:
the same formula in the kernel's dtype, K divided by √d rather than Q, and require the kernel's error to be
at most twice this one's (plus a small atol). Here the error of both is measured from the exact values.
Each part (symattn.variants) acts on the scores in the order of its stage (scale → ADD → MAP → MASK →
DENOMINATOR), by its ``score_mod``; a column past the keys is a logit with no value, dropped after the softmax.
"""

from __future__ import annotations

import math
from typing import Any


def naive(q: Any, k: Any, v: Any, *, causal: bool, causal_align: str, keywords: dict[str, Any]) -> tuple[Any, Any]:
    """(O, LSE) of (B, H, N, D) tensors in their own dtype; K and V may have fewer heads (GQA). ``keywords``:
    the parts' keywords as the kernel was called with them (those off absent)."""
    import torch

    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ (k / math.sqrt(q.shape[-1])).transpose(-1, -2)  # reorder_ops: K scaled, not Q
    n, m = scores.shape[-2:]
    i = torch.arange(n, device=q.device)[:, None]
    j = torch.arange(m, device=q.device)[None, :]
    for part in _in_order(keywords):
        scores = part.score_mod(keywords.get(part.keyword), scores, i, j, causal, causal_align)
    attention = torch.softmax(scores, dim=-1).to(v.dtype)
    if attention.shape[-1] > m:
        attention = attention[..., :m]
    return attention @ v, torch.logsumexp(scores, dim=-1)


def _in_order(keywords: dict[str, Any]) -> list[Any]:
    """The swept parts in the order they act: their stages, a cap and a distance bias in the order compare
    takes them (variants.rule_order: FlashAttention's, the cap first, unless the keywords say otherwise)."""
    from symattn import variants

    order = variants.rule_order(keywords.get(variants.ORDER_KEY))[0]
    first = min(p.stage for p in variants.SWEPT if p.kernel_rule in variants.ORDER_ACTS)

    def turn(part: Any) -> tuple[int, int]:
        return (first, order.index(part.kernel_rule)) if part.kernel_rule in variants.ORDER_ACTS else (part.stage, 0)

    return sorted(variants.SWEPT, key=turn)


__all__ = ["naive"]
