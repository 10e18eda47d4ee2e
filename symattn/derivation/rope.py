"""The rotation step of RoPE: the focus query's pairs turned by their angles, Q' and K', and how the
focus row's scores change."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, ClassVar

import sympy

from symattn.exact.numeric import round_expr
from symattn.exact.rounding import Num, NumRow, NumRows, _exact_or_rounded, _from_model
from symattn.input.formula import Formula
from symattn.input.numeral import Numeral
from symattn.input.spec import Spec

if TYPE_CHECKING:
    from symattn.exact.rope import RotaryModel


@dataclass(frozen=True)
class RotatedPair:
    """Pair t of the focus query: dimensions (a, b) (0-based) turned by the angle p·θ_t."""

    t: int
    a: int
    b: int
    angle: Formula  # exact, p·base^(−2t/d_k)
    cos: Num
    sin: Num
    x_a: Numeral  # the query's entries before the rotation
    x_b: Numeral
    out_a: Num  # after it
    out_b: Num


@dataclass(frozen=True)
class Rotation:
    kind: ClassVar[str] = "rotation"
    style: str  # "half" or "interleaved"
    base: Numeral
    d_k: int
    position: int  # of the focus query (0-based, as RoPE counts)
    pairs: tuple[RotatedPair, ...]
    Q_rot: NumRows
    K_rot: NumRows
    scores_before: NumRow  # the focus row of Q Kᵀ without RoPE
    scores_after: NumRow  # and with it
    cross: bool  # keys numbered from 0 as the queries are


def rotation_step(spec: Spec, model: RotaryModel, scores: NumRows) -> Rotation:
    """The step, with Q' and K' shown to the scores' decimals (the same for cos and sin)."""
    places, notation = spec.decimals.scores, spec.notation
    Q_rot = _from_model(model, "Q_rot", places, notation)
    K_rot = _from_model(model, "K_rot", places, notation)
    f = spec.focus
    cos_sin = _trig_shown(model, f, places)  # in [−1, 1]: fixed decimals
    pairs = tuple(
        RotatedPair(
            t,
            a,
            b,
            Formula("", model.angle(f, t)),
            cos_sin[t][0],
            cos_sin[t][1],
            spec.Q[f][a],  # type: ignore[arg-type]  # numbers: RoPE refuses symbols
            spec.Q[f][b],  # type: ignore[arg-type]
            Q_rot[f][a],
            Q_rot[f][b],
        )
        for t, (a, b) in enumerate(model.pairs)
    )
    den = model.dq * model.dk
    before = _exact_or_rounded([[Fraction(int(x), den) for x in model.s.to_list()[f]]], places, notation)[0]
    assert spec.rope is not None  # the step of a spec with rope = true
    return Rotation(
        spec.rope.style, spec.rope.base, model.d_k, f, pairs, Q_rot, K_rot, before, scores[f], spec.is_cross
    )


def _trig_shown(model: RotaryModel, p: int, places: int) -> list[tuple[Num, Num]]:
    """cos and sin of each pair's angle at position p, correctly rounded (exactly 1 and 0 at p = 0)."""
    out = []
    for t in range(len(model.pairs)):
        angle = model.angle(p, t)
        pair = [sympy.cos(angle), sympy.sin(angle)]
        shown = [
            Num(Decimal(int(x)), True) if isinstance(x, sympy.Integer) else Num(round_expr(x, places), False)
            for x in pair
        ]
        out.append((shown[0], shown[1]))
    return out


__all__ = ["RotatedPair", "Rotation", "rotation_step"]
