"""FlashAttention's naive reference, in the case's own dtype: what its rule measures a kernel's error against.

flash-attention's tests compute ``attention_ref(..., upcast=False, reorder_ops=True)`` beside the kernel:
the same formula in the kernel's dtype, K divided by √d rather than Q, and require the kernel's error to be
at most twice this one's (plus a small atol). Here the error of both is measured from the exact values.
The variants follow symattn's order (scale → ALiBi → softcap → mask → softmax with the sink): ALiBi's
bias is −m_h·|i − j|, a sink is one more logit per head in every row's softmax, with no value.
"""

from __future__ import annotations

import math
from typing import Any


def naive(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool,
    causal_align: str,
    window: int | None,
    softcap: float | None,
    alibi_slopes: Any,
    sinks: Any,
) -> tuple[Any, Any]:
    """(O, LSE) of (B, H, N, D) tensors in their own dtype; K and V may have fewer heads (GQA)."""
    import torch

    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ (k / math.sqrt(q.shape[-1])).transpose(-1, -2)  # reorder_ops: K scaled, not Q
    n, m = scores.shape[-2:]
    i = torch.arange(n, device=q.device)[:, None]
    j = torch.arange(m, device=q.device)[None, :]
    if alibi_slopes is not None:
        scores = scores - alibi_slopes.to(scores.dtype)[:, None, None] * (i - j).abs().to(scores.dtype)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if causal or window is not None:
        top = i + (m - n if causal_align == "bottom-right" else 0)
        allowed = j <= top
        if window is not None:
            allowed = allowed & (top - window < j)
        scores = scores.masked_fill(~allowed, float("-inf"))
    if sinks is not None:  # one more column, dropped after the softmax
        column = sinks.to(scores.dtype)[None, :, None, None].expand(*scores.shape[:-1], 1)
        scores = torch.cat([scores, column], dim=-1)
    attention = torch.softmax(scores, dim=-1).to(v.dtype)
    if sinks is not None:
        attention = attention[..., :-1]
    return attention @ v, torch.logsumexp(scores, dim=-1)


__all__ = ["naive"]
