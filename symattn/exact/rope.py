"""Rotary position embeddings (RoPE), exactly: Q and K rotated pair by pair, and the scores that follow.

Query i is at position i and key j at position j. Pair t of a head (dimensions (a, b), see
:class:`~symattn.input.rope.Rope`) turns by the angle p·θ_t with θ_t = base^(−2t/d_k):

    q'_a = q_a cos(iθ_t) − q_b sin(iθ_t)        q'_b = q_a sin(iθ_t) + q_b cos(iθ_t)

so that q'·k' = Σ_t (q_a k_a + q_b k_b) cos(φ) + (q_b k_a − q_a k_b) sin(φ), φ = (j − i)·θ_t: the
scores depend on the positions only through j − i. Each score is held as integers over a common
denominator: a constant and one (cos, sin) pair of coefficients per distinct angle φ > 0.

What is rational is decided from that structure. The angles are nonzero algebraic numbers (base is
rational), so by Lindemann–Weierstrass 1 and the e^{±iφ} of distinct φ are linearly independent over
the algebraic numbers: a score is rational only where no cos/sin term is left, and two scores are equal
exactly when their structures are. The exps of such scores are not covered by Lindemann–Weierstrass;
an exp, weight or output is called rational only where that is proved (e^0 = 1, rows of equal scores,
outputs whose values agree over each group of equal scores), and is otherwise rounded from enclosures.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact import numeric
from symattn.exact.base import QUANTITIES, rational_matrix
from symattn.exact.boxes import Boxes
from symattn.exact.model import Model
from symattn.exact.numeric import Fixed
from symattn.input.errors import EvaluationError
from symattn.input.limits import PRECISION_BITS
from symattn.input.rope import Rope

ROTATED = ("Q_rot", "K_rot")
# one score: (constant numerator, ((angle index, cos numerator, sin numerator), ...)) over dq·dk
Structure = tuple[int, tuple[tuple[int, int, int], ...]]


@dataclass(frozen=True, eq=False)
class RotaryModel(Model):
    """One head with RoPE: the scores are those of the rotated Q and K."""

    rope: Rope = Rope()
    rotated: ClassVar[tuple[str, ...]] = ROTATED

    # --- the rotation ----------------------------------------------------

    @cached_property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        return self.rope.pairs(self.d_k)

    @cached_property
    def thetas(self) -> tuple[sympy.Expr, ...]:
        """θ_t = base^(−2t/d_k), exact (rational where base has that root: 10000^(−1/2) = 1/100)."""
        base = sympy.Rational(self.rope.base.value.numerator, self.rope.base.value.denominator)
        return tuple(base ** sympy.Rational(-2 * t, self.d_k) for t in range(len(self.pairs)))

    @cached_property
    def angles(self) -> tuple[sympy.Expr, ...]:
        """Every distinct angle p·θ_t > 0 that a rotation or a score uses, in order of first use."""
        return tuple(self._angle_index)

    @cached_property
    def _angle_index(self) -> dict[sympy.Expr, int]:
        index: dict[sympy.Expr, int] = {}
        for p in range(1, max(self.n_queries, self.n_keys)):
            for theta in self.thetas:
                index.setdefault(sympy.Integer(p) * theta, len(index))
        return index

    def angle(self, p: int, t: int) -> sympy.Expr:
        """The exact angle of pair t at position p."""
        return sympy.Integer(p) * self.thetas[t]

    def _rotated_closed(self, m: ImmutableMatrix) -> ImmutableMatrix:
        out = [list(m.row(i)) for i in range(m.rows)]
        for i in range(m.rows):
            for t, (a, b) in enumerate(self.pairs):
                c, s = sympy.cos(self.angle(i, t)), sympy.sin(self.angle(i, t))
                out[i][a] = m[i, a] * c - m[i, b] * s
                out[i][b] = m[i, a] * s + m[i, b] * c
        return ImmutableMatrix(out)

    @cached_property
    def Q_rot(self) -> ImmutableMatrix:
        return self._rotated_closed(self.Q)

    @cached_property
    def K_rot(self) -> ImmutableMatrix:
        return self._rotated_closed(self.K)

    # --- the scores' structure -------------------------------------------

    @cached_property
    def structures(self) -> tuple[tuple[Structure, ...], ...]:
        """Each score as (constant, ((angle, cos coefficient, sin coefficient), …)), numerators over dq·dk."""
        q, k = self.q.to_list(), self.k.to_list()
        index = self._angle_index
        out = []
        for i, qi in enumerate(q):
            row = []
            for j, kj in enumerate(k):
                constant = 0
                terms: dict[int, list[int]] = {}
                for t, (a, b) in enumerate(self.pairs):
                    qa, qb, ka, kb = int(qi[a]), int(qi[b]), int(kj[a]), int(kj[b])
                    c, s = qa * ka + qb * kb, qb * ka - qa * kb
                    delta = j - i
                    if delta == 0:
                        constant += c
                        continue
                    if delta < 0:  # cos(−φ) = cos φ, sin(−φ) = −sin φ
                        delta, s = -delta, -s
                    entry = terms.setdefault(index[self.angle(delta, t)], [0, 0])
                    entry[0] += c
                    entry[1] += s
                row.append((constant, tuple((n, c, s) for n, (c, s) in sorted(terms.items()) if c or s)))
            out.append(tuple(row))
        return tuple(out)

    @cached_property
    def scores(self) -> ImmutableMatrix:
        den = self.dq * self.dk
        angles = self.angles

        def closed(structure: Structure) -> sympy.Expr:
            constant, terms = structure
            parts = [sympy.Rational(constant, den)]
            for n, c, s in terms:
                parts += [sympy.Rational(c, den) * sympy.cos(angles[n]), sympy.Rational(s, den) * sympy.sin(angles[n])]
            return sympy.Add(*parts)

        return ImmutableMatrix([[closed(x) for x in row] for row in self.structures])

    @cached_property
    def score_integers(self):
        raise TypeError("the scores with RoPE are not rational: use structures")

    @cached_property
    def _groups(self) -> list[list[list[int]]]:
        return self._grouped(self.structures)

    @cached_property
    def row_max(self) -> tuple[int, ...]:
        """For each row, the first key of the largest score it may attend to, decided on enclosures
        (distinct structures are distinct values, so the precision rises until they separate)."""
        out = []
        for i, groups in enumerate(self._groups):
            bits = 64
            while True:
                boxes = self._score_boxes(bits)[i]
                low = max(boxes[g[0]].lo for g in groups)
                left = [g for g in groups if boxes[g[0]].hi >= low]
                if len(left) == 1:
                    out.append(left[0][0])
                    break
                if bits > PRECISION_BITS:
                    raise EvaluationError(f"cannot decide the largest score of row {i + 1}")
                bits *= 2
        return tuple(out)

    # --- rational entries ------------------------------------------------

    def exact(self, quantity: str) -> ImmutableMatrix:
        if quantity in ROTATED:
            return getattr(self, quantity)
        return super().exact(quantity)

    def _rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        ok = self.may_attend
        if quantity in ROTATED:
            m, den = (self.q, self.dq) if quantity == "Q_rot" else (self.k, self.dk)
            rows = m.to_list()
            out = []
            for p, row in enumerate(rows):
                values: list[Fraction | None] = [Fraction(int(x), den) for x in row]
                for a, b in self.pairs:  # rational at position 0, or where the pair is 0 (Lindemann)
                    if p and (row[a] or row[b]):
                        values[a] = values[b] = None
                out.append(tuple(values))
            return tuple(out)
        if quantity in ("scale", "sqrt_dk"):
            return super()._rationals(quantity)
        if quantity in ("weights", "products", "output"):
            return self._softmax_rationals(quantity)
        den = self.dq * self.dk
        c = numeric.as_fraction(self.scale)
        top = [row[self.row_max[i]] for i, row in enumerate(self.structures)]

        def difference(x: Structure, y: Structure | None) -> Fraction | None:
            # x − y (y None: x itself), if rational, before the scale
            if y is not None and x[1] != y[1]:
                return None
            if y is None and x[1]:
                return None
            return Fraction(x[0] - (y[0] if y is not None else 0), den)

        def times_scale(d: Fraction | None) -> Fraction | None:
            if d is None:
                return None
            return d * c if c is not None else Fraction(0) if d == 0 else None

        rows = self.structures
        if quantity == "scores":
            return tuple(tuple(difference(x, None) for x in row) for row in rows)
        if quantity in ("scaled", "shifted"):
            return tuple(
                tuple(
                    times_scale(difference(x, top[i] if quantity == "shifted" else None)) if ok(i, j) else None
                    for j, x in enumerate(row)
                )
                for i, row in enumerate(rows)
            )
        if quantity in ("exp", "exp_shifted"):
            return tuple(
                tuple(
                    (Fraction(1) if difference(x, top[i] if quantity == "exp_shifted" else None) == 0 else None)
                    if ok(i, j)
                    else Fraction(0)
                    for j, x in enumerate(row)
                )
                for i, row in enumerate(rows)
            )
        if quantity in ("exp_sum", "exp_shifted_sum"):
            shifted = quantity == "exp_shifted_sum"
            return tuple(
                (
                    Fraction(self._allowed_count(i))
                    if all(difference(x, top[i] if shifted else None) == 0 for j, x in enumerate(row) if ok(i, j))
                    else None,
                )
                for i, row in enumerate(rows)
            )
        raise ValueError(f"unknown quantity {quantity!r}; expected one of {', '.join(QUANTITIES + ROTATED)}")

    # --- enclosures ------------------------------------------------------

    def trig(self, bits: int) -> tuple[list[Fixed], list[Fixed]]:
        """cos and sin of every angle at 2**-bits, each enclosed once per precision."""
        table = self._trig.get(bits)
        if table is None:
            prec = bits + 32
            cache: dict = {}
            cos = [Fixed.from_interval(numeric.enclose(sympy.cos(a), prec, cache), bits) for a in self.angles]
            sin = [Fixed.from_interval(numeric.enclose(sympy.sin(a), prec, cache), bits) for a in self.angles]
            table = self._trig[bits] = (cos, sin)
        return table

    @cached_property
    def _trig(self) -> dict[int, tuple[list[Fixed], list[Fixed]]]:
        return {}

    def _score_boxes(self, bits: int) -> list[list[Fixed]]:
        """Every score at 2**-bits: the integer combination of the cos/sin boxes over dq·dk."""
        table = self._scores_at.get(bits)
        if table is None:
            table = self._scores_at[bits] = [[self.structure_box(x, bits) for x in row] for row in self.structures]
        return table

    def structure_box(self, x: Structure, bits: int) -> Fixed:
        """One structure's value at 2**-bits: its integer combination of the cos/sin boxes over dq·dk."""
        cos, sin = self.trig(bits)
        terms = [(c, cos[n]) for n, c, _ in x[1]] + [(s, sin[n]) for n, _, s in x[1]]
        return _combine(x[0] << bits, terms, self.dq * self.dk, bits)

    @cached_property
    def _scores_at(self) -> dict[int, list[list[Fixed]]]:
        return {}

    def rotated_boxes(self, quantity: str, bits: int) -> list[Fixed]:
        """Q_rot or K_rot at 2**-bits, row by row."""
        m, den = (self.q, self.dq) if quantity == "Q_rot" else (self.k, self.dk)
        cos, sin = self.trig(bits)
        out = []
        for p, row in enumerate(m.to_list()):
            values = [Fixed.exact(Fraction(int(x), den), bits) for x in row]
            if p:
                for t, (a, b) in enumerate(self.pairs):
                    n = self._angle_index[self.angle(p, t)]
                    qa, qb = int(row[a]), int(row[b])
                    values[a] = _combine(0, [(qa, cos[n]), (-qb, sin[n])], den, bits)
                    values[b] = _combine(0, [(qa, sin[n]), (qb, cos[n])], den, bits)
            out += values
        return out

    @cached_property
    def _exp_bits(self) -> int:
        top = max(Fraction(b.hi, 1 << b.bits) for row in self._score_boxes(64) for b in row)
        return max(0, int(top * _upper(self.scale) * 3 // 2) + 8)

    @cached_property
    def largest_z(self) -> tuple[Fraction, int, int]:
        rows = self._score_boxes(64)
        top, i, j = max(
            (max(abs(b.lo), abs(b.hi)), i, j)
            for i, row in enumerate(rows)
            for j, b in enumerate(row)
            if self.may_attend(i, j)
        )
        return Fraction(top, 1 << 64) * _upper(self.scale), i, j

    def _new_boxes(self, bits: int) -> RotaryBoxes:
        return RotaryBoxes(self, bits)


def _upper(x: sympy.Expr) -> Fraction:
    box = Fixed.from_interval(numeric.enclose(x, 64), 32)
    return Fraction(box.hi, 1 << 32)


def _combine(constant: int, terms: list[tuple[int, Fixed]], den: int, bits: int) -> Fixed:
    """(constant + Σ n·box) / den at 2**-bits: ``constant`` already at 2**-bits, each box too."""
    lo = hi = constant
    for n, box in terms:
        if n >= 0:
            lo, hi = lo + n * box.lo, hi + n * box.hi
        else:
            lo, hi = lo + n * box.hi, hi + n * box.lo
    return Fixed(lo // den, -(-hi // den), bits)


class RotaryBoxes(Boxes):
    """The enclosures of a head with RoPE: scores from the cos/sin boxes, z from the scores and the scale."""

    def Q_rot(self) -> list[Fixed]:
        return self.model.rotated_boxes("Q_rot", self.bits)

    def K_rot(self) -> list[Fixed]:
        return self.model.rotated_boxes("K_rot", self.bits)

    def scores(self) -> list[Fixed]:
        wide = self.model._score_boxes(self.prec)
        return [_narrow(b, self.bits) for row in wide for b in row]

    def _zs(self, shifted: bool) -> list[list[Fixed | None]]:
        model, prec = self.model, self.prec
        c = self._scale  # at 2**-prec
        exact = model.rationals("shifted" if shifted else "scaled")
        S = model._score_boxes(prec)
        out = []
        for i, row in enumerate(S):
            top = row[model.row_max[i]]
            boxes: list[Fixed | None] = []
            for j, b in enumerate(row):
                if not model.may_attend(i, j):
                    boxes.append(None)
                elif exact[i][j] is not None:
                    boxes.append(Fixed.exact(exact[i][j], prec))
                else:
                    lo, hi = (b.lo - top.hi, b.hi - top.lo) if shifted else (b.lo, b.hi)
                    ends = (lo * c.lo, lo * c.hi, hi * c.lo, hi * c.hi)
                    boxes.append(Fixed(min(ends) >> prec, -(-max(ends) >> prec), prec))
            out.append(boxes)
        return out

    @cached_property
    def _z(self) -> list[list[Fixed | None]]:
        return self._zs(shifted=False)

    @cached_property
    def _z_shifted(self) -> list[list[Fixed | None]]:
        return self._zs(shifted=True)

    def _exps(self, shifted: bool) -> list[list[Fixed]]:
        zero = Fixed(0, 0, self.bits)
        rows = self._z_shifted if shifted else self._z
        return [[zero if z is None else numeric.exp_fixed(z, self.prec, self.bits) for z in row] for row in rows]


def _narrow(b: Fixed, bits: int) -> Fixed:
    shift = b.bits - bits
    return Fixed(b.lo >> shift, -(-b.hi >> shift), bits)


def unrotated_scores(model: RotaryModel) -> ImmutableMatrix:
    """Q Kᵀ before the rotation (exact rationals), to show how RoPE changes the scores."""
    return rational_matrix(model.s, model.dq * model.dk)


__all__ = ["ROTATED", "RotaryBoxes", "RotaryModel", "unrotated_scores"]
