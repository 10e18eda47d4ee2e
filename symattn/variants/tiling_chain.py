"""The online softmax's quantities from the claimant's own numbers before them (error carried forward): the
running max from their z, the rescale from their running maxima, l and acc from their last l and acc, their
rescale and their z, and the LSE from their last m and l (without tiling: from their sum of exps)."""

from __future__ import annotations

from typing import Any

import sympy

from symattn.exact import numeric
from symattn.variants.tiling_head import Tiled

Value = tuple[sympy.Expr, bool]
NEG_INF = sympy.S.NegativeInfinity


def carried(chain: Any, model: Any, setting: Any, quantity: str, row: int, col: int | None, head: Any) -> Value | None:
    """``quantity`` at (row, col) as the chain holds it: [block][query] and accumulator's [block·n + query][c]."""
    tiled = Tiled(model, None if setting is None else setting.block)

    def at(name: str, b: int, i: int, c: int | None = None) -> Value:
        if name == "accumulator":
            return chain.implied(name, b * tiled.n_queries + i, c, head)
        return chain.implied(name, b, i, head)

    def top(b: int, i: int) -> Value:
        """Their running max after block b: the larger of the last and this block's own z."""
        if b < 0:
            return NEG_INF, False
        best, a = at("running_max", b - 1, i) if b > 0 else (NEG_INF, False)
        for j in tiled.allowed(i, b):
            z, y = chain.implied("scaled", i, j, head)
            if best is NEG_INF or numeric.sign(z - best, chain.enclosures) == 1:
                best = z
            a = a or y
        return best, a

    def weighted(b: int, i: int, c: int | None) -> Value:
        """r_b·(their last l or acc) + Σ over block b of e^(z − m_b) (× V)."""
        (m, a), (r, e) = at("running_max", b, i), at("rescale", b, i)
        name = "running_sum" if c is None else "accumulator"
        last, g = at(name, b - 1, i, c) if b > 0 else (sympy.Integer(0), False)
        terms, carried_any = [], a or e or g
        for j in tiled.allowed(i, b):
            z, y = chain.implied("scaled", i, j, head)
            v = 1 if c is None else chain.implied("V", j, c)[0]
            terms.append(sympy.exp(z - m) * v)
            carried_any = carried_any or y
        return r * last + sympy.Add(*terms), carried_any

    if quantity == "lse":
        assert row is not None
        if setting is None or setting.block is None:  # log Σ e^z, from their sum (of e^(z − max) when stable)
            total, a = chain.implied("exp_sum", row, None, head)
            if chain.layout.stable:
                m, b = chain.top(row, head)
                return m + sympy.log(total), a or b
            return sympy.log(total), a
        last = tiled.blocks - 1
        (m, a), (s, b) = at("running_max", last, row), at("running_sum", last, row)
        return m + sympy.log(s), a or b
    if quantity == "running_max":
        assert col is not None
        return top(row, col)
    if quantity == "rescale":
        assert col is not None
        (new, a), (old, b) = (
            at("running_max", row, col),
            at("running_max", row - 1, col) if row > 0 else (NEG_INF, False),
        )
        if new is NEG_INF:
            return sympy.Integer(1), a
        return (sympy.Integer(0) if old is NEG_INF else sympy.exp(old - new)), a or b
    if quantity == "running_sum":
        assert col is not None
        return weighted(row, col, None)
    if quantity == "accumulator":
        assert col is not None
        b, i = divmod(row, tiled.n_queries)
        return weighted(b, i, col)
    return None


def carried_output(chain: Any, setting: Any, row: int, col: int | None, head: Any) -> Value | None:
    """O = acc / l of the last block, where the claimant gave that block's acc or l of the row (None: the
    head's rule, from their weights)."""
    if setting is None or setting.block is None or col is None:
        return None
    tiled = Tiled(chain.layout.heads[chain.layout.index(head)], setting.block)
    last = tiled.blocks - 1
    stacked = last * tiled.n_queries + row
    if (head, "accumulator", stacked, col) not in chain.index and (head, "running_sum", last, row) not in chain.index:
        return None
    (acc, a), (total, b) = (
        chain.implied("accumulator", stacked, col, head),
        chain.implied("running_sum", last, row, head),
    )
    return acc / total, a or b


__all__ = ["carried", "carried_output"]
