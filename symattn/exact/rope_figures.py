"""The numbers RoPE's steps show, in the two rounding modes (see :mod:`symattn.exact.rounding`).

``exact``: cos, sin, Q', K' and the scores are the exact values, rounded.
``hand``:  cos and sin are rounded, and Q', K' and the scores are computed from the shown numbers,
           as a reader with a calculator does (q'_a = q_a·cos − q_b·sin with the shown cos and sin).
All of them use the scores' decimals.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

import sympy

from symattn.exact.numeric import round_expr
from symattn.exact.rounding import Num, NumRows, _from_model, exact_or_rounded

if TYPE_CHECKING:
    from symattn.exact.rope import RotaryModel


@dataclass(frozen=True)
class ShownRotation:
    trig: tuple[tuple[tuple[Num, Num], ...], ...]  # [position][pair] = (cos, sin) as shown
    Q_rot: NumRows
    K_rot: NumRows
    scores: NumRows


def shown_rotation(model: RotaryModel, places: int, notation: str, hand: bool) -> ShownRotation:
    positions = max(model.n_queries, model.n_keys)
    trig = tuple(tuple(_cos_sin(model.angle(p, t), places) for t in range(len(model.pairs))) for p in range(positions))
    if not hand:
        return ShownRotation(
            trig,
            _from_model(model, "Q_rot", places, notation),
            _from_model(model, "K_rot", places, notation),
            _from_model(model, "scores", places, notation),
        )

    def rotate(rows: list[list[Fraction]]) -> NumRows:
        out = [list(row) for row in rows]
        for p, row in enumerate(rows):
            for t, (a, b) in enumerate(model.pairs):
                c, s = (x.fraction for x in trig[p][t])
                out[p][a] = row[a] * c - row[b] * s
                out[p][b] = row[a] * s + row[b] * c
        return exact_or_rounded(out, places, notation)

    Q = rotate([[Fraction(int(x), model.dq) for x in row] for row in model.q.to_list()])
    K = rotate([[Fraction(int(x), model.dk) for x in row] for row in model.k.to_list()])
    scores = [[sum((x.fraction * y.fraction for x, y in zip(q, k)), Fraction(0)) for k in K] for q in Q]
    return ShownRotation(trig, Q, K, exact_or_rounded(scores, places, notation))


def _cos_sin(angle: sympy.Expr, places: int) -> tuple[Num, Num]:
    """cos and sin of an exact angle, correctly rounded (exactly 1 and 0 at angle 0); in [−1, 1], so
    always fixed decimals."""
    shown = [
        Num(Decimal(int(x)), True) if isinstance(x, sympy.Integer) else Num(round_expr(x, places), False)
        for x in (sympy.cos(angle), sympy.sin(angle))
    ]
    return shown[0], shown[1]


def rotation_operands(model: RotaryModel, X, p: int, column: int) -> tuple[tuple[object, Num], ...]:
    """The products whose sum is entry (p, column) of X rotated: (x_a, cos φ), (x_b, −sin φ) for the
    first of a pair, (x_a, sin φ), (x_b, cos φ) for the second; cos and sin to six significant digits."""
    t = next(t for t, pair in enumerate(model.pairs) if column in pair)
    a, b = model.pairs[t]
    angle = model.angle(p, t)

    def shown(x: sympy.Expr) -> Num:
        if isinstance(x, sympy.Integer):
            return Num(Decimal(int(x)), True)
        return Num(round_expr(x, 6, significant=True), False)

    cos, sin = shown(sympy.cos(angle)), shown(sympy.sin(angle))
    if column == a:
        return ((X[p][a], cos), (X[p][b], Num(-sin.value, sin.exact)))
    return ((X[p][a], sin), (X[p][b], cos))


__all__ = ["ShownRotation", "rotation_operands", "shown_rotation"]
