"""One head's rotary position embeddings (RoPE), exactly (the part is :mod:`symattn.variants.rope`): Q and K
rotated pair by pair, the scores that follow, and the numbers a document shows of them.

Query i is at position i and key j at position j. Pair t of a head (dimensions (a, b), see
:class:`~symattn.variants.rope.Rope`) turns by the angle p·θ_t with θ_t = base^(−2t/d_k):

    q'_a = q_a cos(iθ_t) − q_b sin(iθ_t)        q'_b = q_a sin(iθ_t) + q_b cos(iθ_t)

so that q'·k' = Σ_t (q_a k_a + q_b k_b) cos(φ) + (q_b k_a − q_a k_b) sin(φ), φ = (j − i)·θ_t: the
scores depend on the positions only through j − i. Each score is held as integers over a common
denominator: a constant and one (cos, sin) pair of coefficients per distinct angle φ > 0 (a
*structure*).

What is rational is decided from that structure. The angles are nonzero algebraic numbers (base is
rational), so by Lindemann–Weierstrass 1 and the e^{±iφ} of distinct φ are linearly independent over
the algebraic numbers: a score is rational only where no cos/sin term is left, and two scores are equal
exactly when their structures are. The same holds after the scale, a bias (scale and a slope are
algebraic: z = scale·(c_0 + Σ_t c_t cos φ_t + s_t sin φ_t)/den − m·|i − j| is equal to another iff the
cos/sin terms match term by term and the rest is equal) and a monotone map; so a score's terms are its
transcendental part and c_0/den its rational one (:mod:`symattn.variants.forms`), and a z with a term
left is transcendental. Unequal z are ordered on enclosures at rising precision, which must separate
them. The exps of such scores are not covered by Lindemann–Weierstrass; an exp, weight or output is
called rational only where that is proved (e^0 = 1, rows of equal scores, outputs whose values agree
over each group of equal scores), and is otherwise rounded from enclosures; backward, no exponential
polynomial holds a cos or sin, so the gradients' rational entries are those their closed forms prove.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact import numeric
from symattn.exact.num import Num, NumRows
from symattn.exact.numeric import Fixed
from symattn.variants.base import QK, HeadPart, Rows

# one score: (constant numerator, ((angle index, cos numerator, sin numerator), ...)) over dq·dk
Structure = tuple[int, tuple[tuple[int, int, int], ...]]
ROTATED = ("Q_rot", "K_rot")


def minus(x: Structure, y: Structure) -> Structure:
    """x − y, term by term (terms that cancel are dropped)."""
    terms = {n: [c, s] for n, c, s in x[1]}
    for n, c, s in y[1]:
        entry = terms.setdefault(n, [0, 0])
        entry[0] -= c
        entry[1] -= s
    return x[0] - y[0], tuple((n, c, s) for n, (c, s) in sorted(terms.items()) if c or s)


def _combine(constant: int, terms: list[tuple[int, Fixed]], den: int, bits: int) -> Fixed:
    """(constant + Σ n·box) / den at 2**-bits: ``constant`` already at 2**-bits, each box too."""
    lo = hi = constant
    for n, box in terms:
        if n >= 0:
            lo, hi = lo + n * box.lo, hi + n * box.hi
        else:
            lo, hi = lo + n * box.hi, hi + n * box.lo
    return Fixed(lo // den, -(-hi // den), bits)


@dataclass(frozen=True)
class Rotated(HeadPart):
    """One head's rotation: the scores are those of the rotated Q and K."""

    pairs: tuple[tuple[int, int], ...]
    thetas: tuple[sympy.Expr, ...]  # θ_t = base^(−2t/d_k), exact (rational where base has that root)
    stage: ClassVar[int] = QK
    quantities: ClassVar[tuple[str, ...]] = ROTATED
    computed: ClassVar[tuple[str, ...]] = ROTATED
    exposes: ClassVar[tuple[str, ...]] = ("pairs", "thetas", "angles", "angle", "structures", *ROTATED)
    gradients: ClassVar[tuple[str, ...]] = ("dQ_rot", "dK_rot")
    silent: ClassVar[tuple[str, ...]] = ("dQ", "dK")  # dQ′ turned back: the document shows how
    not_rational: ClassVar[str] = "the scores with RoPE are not rational: use structures"

    def expose(self, model: Any, name: str) -> Any:
        if name in ROTATED:
            return self.exact(model, name)
        if name in ("angles", "structures"):
            return getattr(self, name)(model)
        if name == "angle":
            return self.angle
        return getattr(self, name)

    # --- the rotation ----------------------------------------------------

    def _angle_index(self, model: Any) -> dict[sympy.Expr, int]:
        if "rope:angles" not in model.memo:
            index: dict[sympy.Expr, int] = {}
            for p in range(1, max(model.n_queries, model.n_keys)):
                for theta in self.thetas:
                    index.setdefault(sympy.Integer(p) * theta, len(index))
            model.memo["rope:angles"] = index
        return model.memo["rope:angles"]

    def angles(self, model: Any) -> tuple[sympy.Expr, ...]:
        """Every distinct angle p·θ_t > 0 that a rotation or a score uses, in order of first use."""
        return tuple(self._angle_index(model))

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

    def exact(self, model: Any, quantity: str) -> ImmutableMatrix:
        key = "rope:" + quantity
        if key not in model.memo:
            model.memo[key] = self._rotated_closed(model.Q if quantity == "Q_rot" else model.K)
        return model.memo[key]

    # --- the scores' structure -------------------------------------------

    def structures(self, model: Any) -> tuple[tuple[Structure, ...], ...]:
        """Each score as (constant, ((angle, cos coefficient, sin coefficient), …)), numerators over dq·dk."""
        if "rope:structures" not in model.memo:
            model.memo["rope:structures"] = self._structures(model)
        return model.memo["rope:structures"]

    def _structures(self, model: Any) -> tuple[tuple[Structure, ...], ...]:
        q, k = model.q.to_list(), model.k.to_list()
        index = self._angle_index(model)
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

    def structure(self, model: Any, i: int, j: int) -> Structure:
        return self.structures(model)[i][j]

    def split(self, model: Any, s: Structure) -> tuple[tuple, Fraction]:
        """(the cos/sin terms, the rational constant) of a score."""
        return s[1], Fraction(s[0], model.dq * model.dk)

    @staticmethod
    def minus(x: Structure, y: Structure) -> Structure:
        return minus(x, y)

    def scores(self, model: Any) -> ImmutableMatrix:
        den = model.dq * model.dk
        angles = self.angles(model)

        def closed(structure: Structure) -> sympy.Expr:
            constant, terms = structure
            parts = [sympy.Rational(constant, den)]
            for n, c, s in terms:
                parts += [sympy.Rational(c, den) * sympy.cos(angles[n]), sympy.Rational(s, den) * sympy.sin(angles[n])]
            return sympy.Add(*parts)

        return ImmutableMatrix([[closed(x) for x in row] for row in self.structures(model)])

    # --- rational entries ------------------------------------------------

    def rationals(self, model: Any, quantity: str) -> Rows | None:
        if quantity in ROTATED:
            m, den = (model.q, model.dq) if quantity == "Q_rot" else (model.k, model.dk)
            out = []
            for p, row in enumerate(m.to_list()):
                values: list[Fraction | None] = [Fraction(int(x), den) for x in row]
                for a, b in self.pairs:  # rational at position 0, or where the pair is 0 (Lindemann)
                    if p and (row[a] or row[b]):
                        values[a] = values[b] = None
                out.append(tuple(values))
            return tuple(out)
        if quantity == "scores":
            den = model.dq * model.dk
            return tuple(tuple(None if x[1] else Fraction(x[0], den) for x in row) for row in self.structures(model))
        return None

    # --- enclosures ------------------------------------------------------

    def trig(self, model: Any, bits: int) -> tuple[list[Fixed], list[Fixed]]:
        """cos and sin of every angle at 2**-bits, each enclosed once per precision."""
        key = f"rope:trig:{bits}"
        if key not in model.memo:
            prec, cache = bits + 32, dict[Any, Any]()
            angles = self.angles(model)
            cos = [Fixed.from_interval(numeric.enclose(sympy.cos(a), prec, cache), bits) for a in angles]
            sin = [Fixed.from_interval(numeric.enclose(sympy.sin(a), prec, cache), bits) for a in angles]
            model.memo[key] = (cos, sin)
        return model.memo[key]

    def box(self, model: Any, x: Structure, bits: int) -> Fixed:
        """One structure's value at 2**-bits: its integer combination of the cos/sin boxes over dq·dk."""
        cos, sin = self.trig(model, bits)
        terms = [(c, cos[n]) for n, c, _ in x[1]] + [(s, sin[n]) for n, _, s in x[1]]
        return _combine(x[0] << bits, terms, model.dq * model.dk, bits)

    def score_boxes(self, model: Any, bits: int) -> list[list[Fixed]]:
        """Every score at 2**-bits."""
        key = f"rope:scores:{bits}"
        if key not in model.memo:
            model.memo[key] = [[self.box(model, x, bits) for x in row] for row in self.structures(model)]
        return model.memo[key]

    def boxes(self, boxes: Any, quantity: str) -> list[Fixed]:
        """Q_rot or K_rot at 2**-bits, row by row."""
        model, bits = boxes.model, boxes.bits
        m, den = (model.q, model.dq) if quantity == "Q_rot" else (model.k, model.dk)
        cos, sin = self.trig(model, bits)
        index = self._angle_index(model)
        out = []
        for p, row in enumerate(m.to_list()):
            values = [Fixed.exact(Fraction(int(x), den), bits) for x in row]
            if p:
                for t, (a, b) in enumerate(self.pairs):
                    n = index[self.angle(p, t)]
                    qa, qb = int(row[a]), int(row[b])
                    values[a] = _combine(0, [(qa, cos[n]), (-qb, sin[n])], den, bits)
                    values[b] = _combine(0, [(qa, sin[n]), (qb, cos[n])], den, bits)
            out += values
        return out

    def highest(self, model: Any) -> Fraction:
        """An upper bound of the largest score."""
        return max(Fraction(b.hi, 1 << b.bits) for row in self.score_boxes(model, 64) for b in row)

    def magnitudes(self, model: Any) -> list[list[Fraction]]:
        """An upper bound of each |S_ij|."""
        return [[Fraction(max(abs(b.lo), abs(b.hi)), 1 << b.bits) for b in row] for row in self.score_boxes(model, 64)]

    # --- the numbers a document shows --------------------------------------------------

    def shown(self, model: Any, places: int, notation: str, hand: bool) -> ShownRotation:
        """cos, sin, Q′, K′ and the scores as shown, to the scores' decimals. ``hand``: cos and sin rounded,
        and Q′, K′ and the scores from the shown numbers, as a reader with a calculator works them
        (q'_a = q_a·cos − q_b·sin with the shown cos and sin); else the exact values, rounded."""
        from symattn.exact.rounding import exact_or_rounded, from_model

        positions = max(model.n_queries, model.n_keys)
        trig = tuple(
            tuple(_cos_sin(self.angle(p, t), places) for t in range(len(self.pairs))) for p in range(positions)
        )
        if not hand:
            return ShownRotation(
                trig,
                from_model(model, "Q_rot", places, notation),
                from_model(model, "K_rot", places, notation),
                from_model(model, "scores", places, notation),
            )

        def rotate(rows: list[list[Fraction]]) -> NumRows:
            out = [list(row) for row in rows]
            for p, row in enumerate(rows):
                for t, (a, b) in enumerate(self.pairs):
                    c, s = (x.fraction for x in trig[p][t])
                    out[p][a] = row[a] * c - row[b] * s
                    out[p][b] = row[a] * s + row[b] * c
            return exact_or_rounded(out, places, notation)

        Q = rotate([[Fraction(int(x), model.dq) for x in row] for row in model.q.to_list()])
        K = rotate([[Fraction(int(x), model.dk) for x in row] for row in model.k.to_list()])
        scores = [[sum((x.fraction * y.fraction for x, y in zip(q, k)), Fraction(0)) for k in K] for q in Q]
        return ShownRotation(trig, Q, K, exact_or_rounded(scores, places, notation))

    def shown_scores(self, model: Any, places: int, notation: str, hand: bool) -> NumRows:
        return self.shown(model, places, notation, hand).scores

    def operands(self, explainer: Any, model: Any, quantity: str, i: int, k: int, head: int | None) -> Any:
        """A wrong claim's operands: the dot product of the rotated rows for a score; for Q′ (K′),
        x_a cos φ − x_b sin φ (or x_a sin φ + x_b cos φ), φ = p·θ_t, cos and sin to six significant digits."""
        if quantity == "scores":
            return tuple(
                (explainer.sig("Q_rot", i, c, head), explainer.sig("K_rot", k, c, head)) for c in range(model.d_k)
            )
        if quantity not in ROTATED:
            return None
        sub = explainer.layout.head_specs[explainer.layout.index(head)]
        X = sub.Q if quantity == "Q_rot" else sub.K
        t = next(t for t, pair in enumerate(self.pairs) if k in pair)
        a, b = self.pairs[t]
        cos, sin = (_six(f(self.angle(i, t))) for f in (sympy.cos, sympy.sin))
        if k == a:
            return ((X[i][a], cos), (X[i][b], Num(-sin.value, sin.exact)))
        return ((X[i][a], sin), (X[i][b], cos))

    # --- the claimant's numbers carried forward ------------------------------------------

    def implied(self, chain: Any, model: Any, quantity: str, row: int, col: int | None, head: int | None) -> Any:
        """Q′ and K′ from the claimant's own Q and K where claimed (else exact), the scores from their own Q′
        and K′ where claimed, and dQ, dK from their dS, turned back; None for the rest."""
        L = chain.layout
        if quantity in ROTATED:
            assert col is not None
            name = quantity[0]
            if name not in chain.names:
                return self.exact(model, quantity)[row, col], False
            q0 = L.index(head) * L.width_q
            t = next(t for t, pair in enumerate(self.pairs) if col in pair)
            a, b = self.pairs[t]
            c, s = sympy.cos(self.angle(row, t)), sympy.sin(self.angle(row, t))
            (x, u), (y, w) = chain.implied(name, row, q0 + a), chain.implied(name, row, q0 + b)
            return (x * c - y * s if col == a else x * s + y * c), u or w
        if quantity == "scores":
            assert col is not None
            if "Q_rot" in chain.names or "K_rot" in chain.names:
                return chain.dot(
                    [
                        (chain.implied("Q_rot", row, k, head), chain.implied("K_rot", col, k, head))
                        for k in range(L.width_q)
                    ]
                )
            return model.scores[row, col], False
        if quantity in ("dQ", "dK") and col is not None:
            return self._turned_back(chain, model, quantity, row, col, head)
        return None

    def _turned_back(self, chain: Any, model: Any, quantity: str, row: int, col: int, head: int | None) -> Any:
        """dQ (or dK): the gradient of Q′ (K′) from the claimant's dS, turned back (dQ = Rᵀ dQ′)."""

        def rotated(c: int) -> Any:
            if quantity == "dQ":
                return chain.dot(
                    [
                        (chain.implied("dS", row, j, head), chain.implied("K_rot", j, c, head))
                        for j in range(model.n_keys)
                    ]
                )
            return chain.dot(
                [
                    (chain.implied("dS", i, row, head), chain.implied("Q_rot", i, c, head))
                    for i in range(model.n_queries)
                ]
            )

        t = next(t for t, pair in enumerate(self.pairs) if col in pair)
        a, b = self.pairs[t]
        cos, sin = sympy.cos(self.angle(row, t)), sympy.sin(self.angle(row, t))
        (x, u), (y, w) = rotated(a), rotated(b)
        return (x * cos + y * sin if col == a else y * cos - x * sin), u or w

    # --- the backward pass -------------------------------------------------------------

    def gradient(self, model: Any) -> Rotary:
        return Rotary(self.pairs, self.thetas)


@dataclass(frozen=True)
class ShownRotation:
    trig: tuple[tuple[tuple[Num, Num], ...], ...]  # [position][pair] = (cos, sin) as shown
    Q_rot: NumRows
    K_rot: NumRows
    scores: NumRows


def _cos_sin(angle: sympy.Expr, places: int) -> tuple[Num, Num]:
    """cos and sin of an exact angle, correctly rounded (exactly 1 and 0 at angle 0); in [−1, 1], so
    always fixed decimals."""
    shown = [
        Num(Decimal(int(x)), True) if isinstance(x, sympy.Integer) else Num(numeric.round_expr(x, places), False)
        for x in (sympy.cos(angle), sympy.sin(angle))
    ]
    return shown[0], shown[1]


def _six(x: sympy.Expr) -> Num:
    if isinstance(x, sympy.Integer):
        return Num(Decimal(int(x)), True)
    return Num(numeric.round_expr(x, 6, significant=True), False)


@dataclass(frozen=True)
class Rotary:
    """Backward through the rotation: the scores are Q′K′ᵀ, so dQ′ = dS K′ and dK′ = dSᵀ Q′, then turned back:
    dQ = Rᵀ dQ′, dK = Rᵀ dK′. Position p turns pair t by p·θ_t; an algebra that runs it gives
    ``trig(angle)``, the (cos, sin) of an exact angle as two of its elements."""

    pairs: tuple[tuple[int, int], ...]
    thetas: tuple[Any, ...]
    stage: ClassVar[int] = QK
    names: ClassVar[tuple[str, ...]] = ("dQ_rot", "dK_rot")
    after: ClassVar[str] = "dS"  # its gradients come right after dS
    forms: ClassVar[bool] = False  # thousands of characters an entry, ordered by SymPy's evaluation: not printed

    def rotate(self, alg: Any, M: list, back: bool = False) -> list:
        """Each row p of M turned by p·θ_t pair by pair (R), or back (Rᵀ, which takes dQ′ to dQ)."""
        out = [list(row) for row in M]
        for p, row in enumerate(M):
            if p == 0:
                continue  # position 0 is not turned
            for t, (a, b) in enumerate(self.pairs):
                c, s = alg.trig(p * self.thetas[t])
                if back:
                    out[p][a], out[p][b] = row[a] * c + row[b] * s, row[b] * c - row[a] * s
                else:
                    out[p][a], out[p][b] = row[a] * c - row[b] * s, row[a] * s + row[b] * c
        return out

    def through(self, alg: Any, dS: list, K: list, Q: list, out: dict, hook: Any) -> None:
        from symattn.exact.gradients import matmul, transpose

        out["dQ_rot"] = dQ = hook("dQ_rot", matmul(alg, dS, self.rotate(alg, K)))
        out["dK_rot"] = dK = hook("dK_rot", matmul(alg, transpose(dS), self.rotate(alg, Q)))
        out["dQ"] = hook("dQ", self.rotate(alg, dQ, back=True))
        out["dK"] = hook("dK", self.rotate(alg, dK, back=True))


__all__ = ["ROTATED", "Rotary", "Rotated", "ShownRotation", "Structure", "minus"]
