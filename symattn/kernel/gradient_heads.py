"""The float64 path's heads for dQ, dK and dV of every (batch, head), grouped-query and multi-query included.

dQ is one query head's: a :class:`~symattn.kernel.float64_backward.GradientHead` per (batch, query head).
dK and dV are a key/value head's, summed over the G query heads that share it (GQA, MQA):

    dK = c·Σ_g dS_gᵀ·Q_g,  dV = Σ_g A_gᵀ·dO_g.

The softmax is taken row by row, so the G heads' query rows stacked into one head of G·n rows (Q, dO
and the mask stacked alike; K and V the shared ones) have exactly the weights, D and dS of each head,
and the sum over g is a sum over the stacked rows. ``float64_backward`` already sums a product over
query rows block by block and bounds it (γ_blocks of the blocks' magnitudes, plus every block's own
bound), so the bound of the sum over the group is that derivation over the stacked rows: no new
rounding, and refinement (arb) and the exact zeros take the stacked head as one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from symattn.kernel import float64
from symattn.kernel.float64_backward import GradientHead
from symattn.kernel.inputs import gradient_head


def gradient_heads(
    forward: list[float64.Head], dO: np.ndarray, quantity: str, kv: int, sqrt_scale: bool
) -> tuple[list[float64.Head], int]:
    """The heads of ``quantity`` (dQ, dK, dV) from the forward heads (batch by batch, query head by query
    head; query head h uses key/value head h // (H / kv)) and dO (B, H, N, dv), and how many heads a
    batch's result has (H for dQ, kv for dK and dV)."""
    batch, heads = dO.shape[0], dO.shape[1]
    made: list[float64.Head]
    if quantity == "dQ":
        made = [
            gradient_head(forward[b * heads + h], np.ascontiguousarray(dO[b, h]), sqrt_scale)
            for b in range(batch)
            for h in range(heads)
        ]
        return made, heads
    size = heads // kv
    made = []
    for b in range(batch):
        for g in range(kv):
            group = range(g * size, (g + 1) * size)
            made.append(_stacked([forward[b * heads + h] for h in group], [dO[b, h] for h in group], sqrt_scale))
    return made, kv


def logit_gradients(forward: list[float64.Head], dO: np.ndarray, sqrt_scale: bool) -> list[Any] | None:
    """dsink's heads: a float64_backward.LogitGradient per query head (its gradient head in each batch), from
    the forward heads (batch by batch) and dO (B, H, N, dv); None where no DENOMINATOR part gives a logit."""
    from symattn.kernel.float64_backward import LogitGradient

    if not float64.extra_logits(forward[0], slice(0, 1), 1):
        return None
    batch, heads = dO.shape[0], dO.shape[1]
    return [
        LogitGradient(
            tuple(
                gradient_head(forward[b * heads + h], np.ascontiguousarray(dO[b, h]), sqrt_scale) for b in range(batch)
            )
        )
        for h in range(heads)
    ]


def _stacked(group: list[float64.Head], grads: list[np.ndarray], sqrt_scale: bool) -> GradientHead:
    """The group's query heads as one head of their rows stacked (the same K, V, scale and mask per head)."""
    first = group[0]
    Q = np.ascontiguousarray(np.concatenate([h.Q for h in group]))
    allowed = None if first.allowed is None else np.concatenate([h.allowed for h in group])
    factor, mods = float64.extras(first)
    mods = tuple(_stacked_mod([float64.extras(h)[1][k] for h in group]) for k in range(len(mods)))
    fields = (Q, first.K, first.V, first.scale, first.scale_error, first.exact_scale, allowed)
    one = float64.ModHead(*fields, factor, mods) if factor is not None or mods else float64.Head(*fields)
    return gradient_head(one, np.ascontiguousarray(np.concatenate(grads)), sqrt_scale)


def _stacked_mod(mods: list[Any]) -> Any:
    """One modifier for the stacked rows (a bias keeps each head's slope)."""
    return mods[0].stacked(mods)


__all__ = ["gradient_heads", "logit_gradients"]
