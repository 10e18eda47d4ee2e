"""Rotary position embeddings (RoPE), one part: ``rope = true`` with ``rope_base`` and ``rope_style`` turns each
head's Q and K rows by position before the scores (after any projection).

Query i sits at position i and key j at position j (both from 0, in cross-attention too). ``half`` pairs
dimension t with t + d_k/2 (Llama's Hugging Face code, the default); ``interleaved`` pairs 2t with
2t + 1 (RoFormer). This module reads and checks the keys, declares what claims may name (each head's
rotated ``Q_rot`` and ``K_rot``) and makes the steps a document shows: the rotation before the scores,
and backward dQ and dK turned back. One head's rotation, exactly (why a score is rational where it is,
its enclosures, its gradient, the numbers shown), is :mod:`symattn.variants.rope_head`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.exact.num import Num, NumRow, NumRows
from symattn.input.messages import said
from symattn.input.numeral import Numeral, parse_numeral
from symattn.variants.base import QK, Part, Quantity, Where

if TYPE_CHECKING:  # one head's rotation is SymPy's: the spec reads the part without it
    from symattn.variants.rope_head import Rotated

# --- limits of RoPE ------------------------------------------------------------------------------
ROPE_BASE_MAX = 10**12  # rope_base from 1/10^12 to 10^12, numerator and denominator at most 10^12
ROPE_TERMS = 2_000_000  # cos/sin terms of the rotated scores: heads × queries × keys × d_k/2

# --- the setting ---------------------------------------------------------------------------

ROPE_STYLES = ("half", "interleaved")
DEFAULT_BASE = parse_numeral("10000")
NEEDS = "rope = true (the rotated Q and K of RoPE)"  # what a claim on Q_rot or K_rot needs


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


# --- the steps of a derivation ---------------------------------------------------------------------


@dataclass(frozen=True)
class RotatedPair:
    """Pair t of the focus query: dimensions (a, b) (0-based) turned by the angle p·θ_t."""

    t: int
    a: int
    b: int
    angle: Any  # a Formula: exact, p·base^(−2t/d_k)
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


@dataclass(frozen=True)
class TurnedBack:
    """Pair t of one gradient row turned back: (dx_a, dx_b) = Rᵀ (dx′_a, dx′_b) by the angle p·θ_t."""

    t: int
    a: int
    b: int
    angle: Any  # a Formula
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


# --- the part -------------------------------------------------------------------------------------


class RopePart(Part):
    name = "rope"
    keys = ("rope", "rope_base", "rope_style")
    stage = QK
    title = "RoPE"
    unstated = keys
    web_fields = (
        {"key": "rope", "kind": "flag", "choices": ["false", "true"], "default": "false"},
        {"key": "rope_base", "kind": "text", "default": ""},
        {"key": "rope_style", "kind": "select", "choices": list(ROPE_STYLES), "default": "half"},
    )
    quantities = (
        Quantity("Q_rot", "scores", cols="dim", width="d_q", asked_by="scores", needs=NEEDS),
        Quantity("K_rot", "scores", rows="key", cols="dim", width="d_q", asked_by="scores", needs=NEEDS),
    )
    step_kinds = ("rotation", "backward_rotation")
    facts = (("toy_vs_real", "rope", False),)
    rounded_read = True
    certify = "--certify does not cover RoPE yet"

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Rope | None:
        """``rope = true`` with optional ``rope_base`` and ``rope_style``; None without RoPE."""
        on = reader.flag(data["rope"], "rope") if "rope" in data else False
        if not on:
            for key in ("rope_base", "rope_style"):
                if key in data:
                    raise reader.error(key, said("needs_rope"))
            return None
        d_k = where.d_k
        if d_k % 2:
            raise reader.error("rope", said("rope_odd", d_k=d_k))
        if where.symbolic_qk:
            raise reader.error("rope", "RoPE needs numbers in Q and K (symbols are not rotated)")
        if data.get("inputs") == "rounded":
            raise reader.error("inputs", 'inputs = "rounded" is not supported with RoPE yet')
        base = DEFAULT_BASE
        if "rope_base" in data:
            base = reader.number(data["rope_base"], "rope_base")
            if base.value <= 0:
                raise reader.error("rope_base", said("must_be_positive", text=repr(base.text)))
            low, high = Fraction(1, ROPE_BASE_MAX), Fraction(ROPE_BASE_MAX)
            if not low <= base.value <= high or max(base.value.numerator, base.value.denominator) > ROPE_BASE_MAX:
                raise reader.limit(
                    "rope_base",
                    f"{base.text} is outside what RoPE takes here: a number from 1/{ROPE_BASE_MAX} "
                    f"to {ROPE_BASE_MAX} with numerator and denominator up to {ROPE_BASE_MAX}",
                )
        style = reader.choice(data.get("rope_style", "half"), "rope_style", ROPE_STYLES)
        terms = where.heads * where.n_q * where.n_k * (d_k // 2)
        if terms > ROPE_TERMS:
            raise reader.limit(
                "rope",
                f"{where.n_q}×{where.n_k} scores with {where.heads} head(s) of {d_k // 2} rotated pairs make "
                f"{terms} cos/sin terms; the limit is {ROPE_TERMS}",
            )
        return Rope(base, style)

    def head_part(self, setting: Rope, spec: Any) -> Rotated:
        import sympy

        from symattn.variants.rope_head import Rotated

        pairs = setting.pairs(spec.d_k)
        base = sympy.Rational(setting.base.value.numerator, setting.base.value.denominator)
        return Rotated(pairs, tuple(base ** sympy.Rational(-2 * t, spec.d_k) for t in range(len(pairs))))

    def toy(self, spec: Any, setting: Any) -> tuple[tuple[str, Any], ...]:
        return (("rope", True),)

    def _shown(self, spec: Any, model: Any) -> Any:
        return model.qk.shown(model, spec.decimals.scores, spec.notation, spec.rounding == "hand")

    def scores_step(self, spec: Any, model: Any, fig: Any) -> tuple[Rotation, NumRows, NumRows]:
        """The rotation step, with cos, sin, Q' and K' as the rounding mode shows them (to the scores'
        decimals); the scores step then shows the dots of Q' and K'."""
        from symattn.exact.rounding import exact_or_rounded
        from symattn.input.formula import Formula

        part, shown, f = model.qk, self._shown(spec, model), spec.focus
        pairs = tuple(
            RotatedPair(
                t,
                a,
                b,
                Formula("", part.angle(f, t)),
                shown.trig[f][t][0],
                shown.trig[f][t][1],
                spec.Q[f][a],
                spec.Q[f][b],
                shown.Q_rot[f][a],
                shown.Q_rot[f][b],
            )
            for t, (a, b) in enumerate(part.pairs)
        )
        den = model.dq * model.dk
        before = exact_or_rounded(
            [[Fraction(int(x), den) for x in model.s.to_list()[f]]], spec.decimals.scores, spec.notation
        )[0]
        rope = spec.setting("rope")
        step = Rotation(
            rope.style, rope.base, model.d_k, f, pairs, shown.Q_rot, shown.K_rot, before, fig.scores[f], spec.is_cross
        )
        return step, shown.Q_rot, shown.K_rot

    def backward_inputs(self, spec: Any, model: Any) -> tuple[NumRows, NumRows]:
        """Q′ and K′ as the rotation step shows them."""
        shown = self._shown(spec, model)
        return shown.Q_rot, shown.K_rot

    def backward_after_qk(self, spec: Any, model: Any, g: Mapping[str, Any], key: int) -> tuple[GradRotation]:
        from symattn.exact.rounding import is_exact
        from symattn.input.formula import Formula

        part, shown = model.qk, self._shown(spec, model)

        def pairs(p: int, rotated: NumRows, out: NumRows) -> tuple[TurnedBack, ...]:
            return tuple(
                TurnedBack(
                    t,
                    a,
                    b,
                    Formula("", part.angle(p, t)),
                    shown.trig[p][t][0],
                    shown.trig[p][t][1],
                    rotated[p][a],
                    rotated[p][b],
                    out[p][a],
                    out[p][b],
                )
                for t, (a, b) in enumerate(part.pairs)
            )

        f = spec.focus
        return (
            GradRotation(
                f,
                key,
                pairs(f, g["dQ_rot"], g["dQ"]),
                pairs(key, g["dK_rot"], g["dK"]),
                g["dQ"],
                is_exact(g["dQ"]),
                g["dK"],
                is_exact(g["dK"]),
            ),
        )


PART = RopePart()

__all__ = ["PART", "ROPE_STYLES", "GradRotation", "Rope", "RopePart", "RotatedPair", "Rotation", "TurnedBack"]
