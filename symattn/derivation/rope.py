"""The rotation step of RoPE: the focus query's pairs turned by their angles, Q' and K', and how the
focus row's scores change."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, ClassVar

from symattn.exact.rope_figures import shown_rotation
from symattn.exact.rounding import Num, NumRow, NumRows, exact_or_rounded
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
    """The step, with cos, sin, Q' and K' as the rounding mode shows them (to the scores' decimals)."""
    shown = shown_rotation(model, spec.decimals.scores, spec.notation, spec.rounding == "hand")
    f = spec.focus
    pairs = tuple(
        RotatedPair(
            t,
            a,
            b,
            Formula("", model.angle(f, t)),
            shown.trig[f][t][0],
            shown.trig[f][t][1],
            spec.Q[f][a],  # type: ignore[arg-type]  # numbers: RoPE refuses symbols
            spec.Q[f][b],  # type: ignore[arg-type]
            shown.Q_rot[f][a],
            shown.Q_rot[f][b],
        )
        for t, (a, b) in enumerate(model.pairs)
    )
    den = model.dq * model.dk
    before = exact_or_rounded(
        [[Fraction(int(x), den) for x in model.s.to_list()[f]]], spec.decimals.scores, spec.notation
    )[0]
    assert spec.rope is not None  # the step of a spec with rope = true
    return Rotation(
        spec.rope.style, spec.rope.base, model.d_k, f, pairs, shown.Q_rot, shown.K_rot, before, scores[f], spec.is_cross
    )


def rotated_inputs(spec: Spec, model: RotaryModel) -> tuple[NumRows, NumRows]:
    """Q′ and K′ as the rotation step shows them."""
    shown = shown_rotation(model, spec.decimals.scores, spec.notation, spec.rounding == "hand")
    return shown.Q_rot, shown.K_rot


@dataclass(frozen=True)
class TurnedBack:
    """Pair t of one gradient row turned back: (dx_a, dx_b) = Rᵀ (dx′_a, dx′_b) by the angle p·θ_t."""

    t: int
    a: int
    b: int
    angle: Formula
    cos: Num
    sin: Num
    rotated_a: Num  # dx′_a, dx′_b: the gradient of the rotated row
    rotated_b: Num
    out_a: Num  # dx_a, dx_b
    out_b: Num


@dataclass(frozen=True)
class GradRotation:
    """dQ = Rᵀ dQ′ and dK = Rᵀ dK′: the focus query's and one key's pairs turned back, and both matrices."""

    kind: ClassVar[str] = "backward_rotation"
    query: int  # the focus query (its position)
    key: int  # the key shown pair by pair (the focus row's top key)
    query_pairs: tuple[TurnedBack, ...]
    key_pairs: tuple[TurnedBack, ...]
    dQ: NumRows
    dQ_exact: bool
    dK: NumRows
    dK_exact: bool


def rotation_back_step(spec: Spec, model: RotaryModel, g: dict[str, NumRows], key: int) -> GradRotation:
    from symattn.exact.rounding import is_exact

    shown = shown_rotation(model, spec.decimals.scores, spec.notation, spec.rounding == "hand")

    def pairs(p: int, rotated: NumRows, out: NumRows) -> tuple[TurnedBack, ...]:
        return tuple(
            TurnedBack(
                t,
                a,
                b,
                Formula("", model.angle(p, t)),
                *shown.trig[p][t],
                rotated[p][a],
                rotated[p][b],
                out[p][a],
                out[p][b],
            )
            for t, (a, b) in enumerate(model.pairs)
        )

    f = spec.focus
    return GradRotation(
        f,
        key,
        pairs(f, g["dQ_rot"], g["dQ"]),
        pairs(key, g["dK_rot"], g["dK"]),
        g["dQ"],
        is_exact(g["dQ"]),
        g["dK"],
        is_exact(g["dK"]),
    )


__all__ = [
    "GradRotation",
    "RotatedPair",
    "Rotation",
    "TurnedBack",
    "rotated_inputs",
    "rotation_back_step",
    "rotation_step",
]
