"""RoPE together with ALiBi, a softcap or a sink: the rotary scores, then the score variants on them.

RoPE changes Q and K, hence the scores; the bias, the cap and the sink act on the scaled scores after it.
A score is a :data:`~symattn.exact.rope.Structure`, so a biased score's form is (structure, −|i − j|):

    z = scale·(c_0 + Σ_t c_t cos φ_t + s_t sin φ_t)/den − m·|i − j|.

The angles φ are distinct nonzero algebraic numbers and scale, m are algebraic, so by
Lindemann–Weierstrass 1 and the e^{±iφ} are linearly independent over the algebraic numbers: two z are
equal iff their cos/sin terms match term by term and the rest, scale·c_0/den − m·|i − j|, is equal
(which the biased model's key decides on (c_0/den, −|i − j|)); a z with a cos/sin term left is
irrational. Unequal z are ordered on enclosures at rising precision, which must separate them. The
softcap keeps the order and the ties (tanh is one-to-one). The sink's rational s is compared with a z
on enclosures too (:mod:`symattn.exact.sinks`): a z with cos/sin terms is transcendental, so it is not
s; capped, c·tanh(z/c) = s would need e^{2z/c} algebraic, which Lindemann–Weierstrass does not rule out
for such a z, so there the boxes decide and, should they never separate, the model says so
(EvaluationError) instead of guessing.

The biased model (and the sink's) come first in each class's MRO, so their z, shift and rational rules
apply unchanged; this module gives them the rotary forms, and the rotary model the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from fractions import Fraction

from symattn.exact.model import Model
from symattn.exact.numeric import Fixed
from symattn.exact.rope import RotaryBoxes, RotaryModel, Structure
from symattn.exact.score_variants import BiasedBoxes, BiasedModel
from symattn.exact.sinks import SinkBoxes, SinkModel

RotaryForm = tuple[Structure, Fraction]  # (the score's structure, −|i − j|)


def minus(x: Structure, y: Structure) -> Structure:
    """x − y, term by term (terms that cancel are dropped)."""
    terms = {n: [c, s] for n, c, s in x[1]}
    for n, c, s in y[1]:
        entry = terms.setdefault(n, [0, 0])
        entry[0] -= c
        entry[1] -= s
    return x[0] - y[0], tuple((n, c, s) for n, (c, s) in sorted(terms.items()) if c or s)


def mul(a: Fixed, b: Fixed) -> Fixed:
    """a · b of two boxes at the same precision, rounded outward."""
    ends = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
    return Fixed(min(ends) >> a.bits, -(-max(ends) >> a.bits), a.bits)


@dataclass(frozen=True, eq=False)
class RotaryBiasedModel(BiasedModel, RotaryModel):
    """A head with RoPE whose scaled scores carry ALiBi's bias and/or the softcap."""

    def plain(self) -> Model:
        """The same head without the bias or the cap: RoPE's scaled scores."""
        return RotaryModel(**{f.name: getattr(self, f.name) for f in fields(RotaryModel)})

    def _form(self, i: int, j: int) -> RotaryForm:  # type: ignore[override]
        return self.structures[i][j], Fraction(-abs(i - j) if self.has_bias else 0)

    def _bias_form(self, i: int, j: int) -> RotaryForm:  # type: ignore[override]
        return (0, ()), Fraction(-abs(i - j))

    def _rest(self, form: RotaryForm) -> tuple[Fraction, Fraction]:
        # the biased model's form of what is left without the cos/sin terms
        return Fraction(form[0][0], self.dq * self.dk), form[1]

    def _key(self, form: RotaryForm) -> object:  # type: ignore[override]
        return form[0][1], super()._key(self._rest(form))

    def _value(self, form: RotaryForm) -> Fraction | None:  # type: ignore[override]
        return None if form[0][1] else super()._value(self._rest(form))

    def _minus(self, a: RotaryForm, b: RotaryForm) -> RotaryForm:  # type: ignore[override]
        return minus(a[0], b[0]), a[1] - b[1]

    def _exact_sign(self, diff: RotaryForm) -> int | None:  # type: ignore[override]
        # with a cos/sin term left only the enclosures decide; without, the biased model's rules
        return None if diff[0][1] else super()._exact_sign(self._rest(diff))

    def _scaled_score(self, p: Structure, scale: Fixed) -> Fixed:  # type: ignore[override]
        return mul(self.structure_box(p, scale.bits), scale)

    def _score_magnitudes(self) -> list[list[Fraction]]:
        return [[Fraction(max(abs(b.lo), abs(b.hi)), 1 << b.bits) for b in row] for row in self._score_boxes(64)]

    def _new_boxes(self, bits: int) -> RotaryBiasedBoxes:
        return RotaryBiasedBoxes(self, bits)


@dataclass(frozen=True, eq=False)
class RotarySinkModel(SinkModel, RotaryBiasedModel):
    """A head with RoPE and a sink logit (and any bias or softcap)."""

    def _new_boxes(self, bits: int) -> RotarySinkBoxes:
        return RotarySinkBoxes(self, bits)


class RotaryBiasedBoxes(BiasedBoxes, RotaryBoxes):
    """Enclosures with RoPE and the score variants: each z from its rotary form; Q′, K′ and the scores as RoPE's."""

    model: RotaryBiasedModel


class RotarySinkBoxes(SinkBoxes, RotaryBiasedBoxes):
    """Enclosures with RoPE and the sink's term in every denominator."""

    model: RotarySinkModel


__all__ = ["RotaryBiasedModel", "RotarySinkModel"]
