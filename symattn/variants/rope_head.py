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

from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact import numeric
from symattn.exact.num import Num, NumRows
from symattn.exact.numeric import Fixed
from symattn.input.records import record
from symattn.variants.base import QK, HeadPart, Rows
from symattn.variants.forms import ScoreBoxes
from symattn.variants.turns import (
    ROTATED,
    ByRoots,
    ByTables,
    Cyclotomic,
    ShownTurn,
    Structure,
    TableTurn,
    combine,
    minus,
    shown_turn,
    six_digits,
    unturned,
)

TRIG = ("rope_frequency", "rope_angle", "rope_cos", "rope_sin")  # θ_t per pair; per query row and pair
KEYED = ("rope_key_angle", "rope_key_cos", "rope_key_sin")  # per key row and pair: with given positions only
QUERY_OF = dict(zip(KEYED, TRIG[1:]))  # a key's quantity -> the query's of the same kind


@record
class Rotated(ScoreBoxes, HeadPart):
    """One head's rotation: the scores are those of the rotated Q and K."""

    pairs: tuple[tuple[int, int], ...]
    thetas: tuple[sympy.Expr, ...]  # θ_t = base^(−2t/d_k), exact (rational where base has that root)
    q_pos: tuple[int, ...] = ()  # the tokens' positions where the spec gives them (symattn.variants.positions)
    k_pos: tuple[int, ...] = ()
    stage: ClassVar[int] = QK
    quantities: ClassVar[tuple[str, ...]] = TRIG + KEYED + ROTATED
    columns: ClassVar[tuple[str, ...]] = ("rope_frequency",)  # one number per pair
    exposes: ClassVar[tuple[str, ...]] = ("pairs", "thetas", "angles", "angle", "structures", *ROTATED)
    gradients: ClassVar[tuple[str, ...]] = ("dQ_rot", "dK_rot")
    silent: ClassVar[tuple[str, ...]] = ("dQ", "dK")  # dQ′ turned back: the document shows how
    factors: ClassVar[tuple[str, str] | None] = ROTATED
    not_rational: ClassVar[str] = "the scores with RoPE are not rational: use structures"

    @property
    def computed(self) -> tuple[str, ...]:  # type: ignore[override]
        """What compute writes: the keys' angles, cos and sin too where the tokens sit at given positions."""
        return TRIG + KEYED + ROTATED if self.q_pos else TRIG + ROTATED

    def expose(self, model: Any, name: str) -> Any:
        if name in ROTATED:
            return self.exact(model, name)
        if name in ("angles", "structures"):
            return getattr(self, name)(model)
        if name == "angle":
            return self.angle
        return getattr(self, name)

    # --- the rotation ----------------------------------------------------

    def place(self, which: str, row: int) -> int:
        """The position of row ``row`` of Q (``which`` "Q") or K: the spec's, else the row itself."""
        if not self.q_pos:
            return row
        return (self.q_pos if which == "Q" else self.k_pos)[row]

    def _used(self, model: Any) -> list[int]:
        """Every position and every distance between a query and a key, above 0, in order."""
        if not self.q_pos:
            return list(range(1, max(model.n_queries, model.n_keys)))
        used = {p for p in self.q_pos + self.k_pos} | {abs(k - q) for q in self.q_pos for k in self.k_pos}
        return sorted(used - {0})

    def _angle_index(self, model: Any) -> dict[sympy.Expr, int]:
        if "rope:angles" not in model.memo:
            index: dict[sympy.Expr, int] = {}
            for p in self._used(model):
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

    def trig_exact(self, p: int, t: int) -> tuple[sympy.Expr, sympy.Expr]:
        """The exact cos and sin that turn pair t at position p."""
        return sympy.cos(self.angle(p, t)), sympy.sin(self.angle(p, t))

    def _rotated_closed(self, m: ImmutableMatrix, which: str) -> ImmutableMatrix:
        out = [list(m.row(i)) for i in range(m.rows)]
        for i in range(m.rows):
            p = self.place(which, i)
            for t, (a, b) in enumerate(self.pairs):
                c, s = self.trig_exact(p, t)
                out[i][a] = m[i, a] * c - m[i, b] * s
                out[i][b] = m[i, a] * s + m[i, b] * c
        return ImmutableMatrix(out)

    def _trig_quantity(self, model: Any, quantity: str) -> ImmutableMatrix:
        """θ_t (a column over the pairs), or each query row's (each key row's: KEYED) angle, cos or sin of each
        pair, at the row's position."""
        if quantity == "rope_frequency":
            return ImmutableMatrix([[theta] for theta in self.thetas])
        which, kind = ("K", QUERY_OF[quantity]) if quantity in KEYED else ("Q", quantity)
        pick = {"rope_angle": lambda p, t: self.angle(p, t), "rope_cos": lambda p, t: self.trig_exact(p, t)[0]}
        pick["rope_sin"] = lambda p, t: self.trig_exact(p, t)[1]
        rows = model.n_keys if which == "K" else model.n_queries
        return ImmutableMatrix(rows, len(self.pairs), lambda r, t: pick[kind](self.place(which, r), t))

    def exact(self, model: Any, quantity: str) -> ImmutableMatrix:
        if quantity in TRIG + KEYED:
            return self._trig_quantity(model, quantity)
        key = "rope:" + quantity
        if key not in model.memo:
            model.memo[key] = self._rotated_closed(model.Q if quantity == "Q_rot" else model.K, quantity[0])
        return model.memo[key]

    # --- the scores' structure -------------------------------------------

    def structures(self, model: Any) -> tuple[tuple[Structure, ...], ...]:
        """Each score as (constant, ((angle, cos coefficient, sin coefficient), …)), numerators over dq·dk."""
        if "rope:structures" not in model.memo:
            model.memo["rope:structures"] = self._structures(model)
        return model.memo["rope:structures"]

    def _structures(self, model: Any) -> tuple[tuple[Structure, ...], ...]:
        q, k = model.q.to_list(), model.k.to_list()
        index, kept = self._angle_index(model), unturned(self.pairs, model.d_k)
        out = []
        for i, qi in enumerate(q):
            row = []
            for j, kj in enumerate(k):
                constant = sum(int(qi[c]) * int(kj[c]) for c in kept)  # the columns no pair turns
                terms: dict[int, list[int]] = {}
                for t, (a, b) in enumerate(self.pairs):
                    qa, qb, ka, kb = int(qi[a]), int(qi[b]), int(kj[a]), int(kj[b])
                    c, s = qa * ka + qb * kb, qb * ka - qa * kb
                    delta = self.place("K", j) - self.place("Q", i)
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
        if quantity in TRIG + KEYED:  # SymPy keeps cos and sin of a nonzero algebraic angle (Lindemann) and
            # evaluates the rational ones at multiples of π (Niven: 0, ±1/2, ±1 only)
            m = self.exact(model, quantity)
            return tuple(tuple(numeric.as_fraction(m[i, j]) for j in range(m.cols)) for i in range(m.rows))
        if quantity in ROTATED:
            m, den = (model.q, model.dq) if quantity == "Q_rot" else (model.k, model.dk)
            out = []
            for p, row in enumerate(m.to_list()):
                values: list[Fraction | None] = [Fraction(int(x), den) for x in row]
                for a, b in self.pairs:  # rational at position 0, or where the pair is 0 (Lindemann)
                    if self.place(quantity[0], p) and (row[a] or row[b]):
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
        return combine(x[0] << bits, terms, model.dq * model.dk, bits)

    def boxes(self, boxes: Any, quantity: str) -> list[Fixed]:
        """Q_rot or K_rot at 2**-bits, row by row (and the angles, cos and sin)."""
        model, bits = boxes.model, boxes.bits
        if quantity in TRIG + KEYED:
            cache: dict[Any, Any] = {}
            m = self.exact(model, quantity)
            return [Fixed.from_interval(numeric.enclose(x, bits + 32, cache), bits) for x in m]
        m, den = (model.q, model.dq) if quantity == "Q_rot" else (model.k, model.dk)
        cos, sin = self.trig(model, bits)
        index = self._angle_index(model)
        out = []
        for r, row in enumerate(m.to_list()):
            values = [Fixed.exact(Fraction(int(x), den), bits) for x in row]
            p = self.place(quantity[0], r)
            if p:
                for t, (a, b) in enumerate(self.pairs):
                    n = index[self.angle(p, t)]
                    qa, qb = int(row[a]), int(row[b])
                    values[a] = combine(0, [(qa, cos[n]), (-qb, sin[n])], den, bits)
                    values[b] = combine(0, [(qa, sin[n]), (qb, cos[n])], den, bits)
            out += values
        return out

    # --- the numbers a document shows --------------------------------------------------

    def shown(self, model: Any, places: int, notation: str, hand: bool) -> ShownTurn:
        """cos, sin, Q′, K′ and the scores as shown (:func:`symattn.variants.turns.shown_turn`)."""
        used = [0, *self._used(model)] if self.q_pos else range(max(model.n_queries, model.n_keys))
        return shown_turn(self, model, used, places, notation, hand)

    def shown_scores(self, model: Any, places: int, notation: str, hand: bool) -> NumRows:
        return self.shown(model, places, notation, hand).scores

    def operands(self, explainer: Any, model: Any, quantity: str, i: int, k: int, head: int | None) -> Any:
        """A wrong claim's operands: the dot product of the rotated rows for a score; for Q′ (K′),
        x_a cos φ − x_b sin φ (or x_a sin φ + x_b cos φ), φ = p·θ_t, cos and sin to six significant digits."""
        if quantity == "scores":
            return tuple(
                (explainer.sig("Q_rot", i, c, head), explainer.sig("K_rot", k, c, head)) for c in range(model.d_k)
            )
        if quantity in ("rope_angle", "rope_key_angle"):  # position × frequency
            p = self.place("K" if quantity in KEYED else "Q", i)
            return ((Num(Decimal(p), True), explainer.sig("rope_frequency", k, 0, head)),)
        if quantity not in ROTATED:
            return None
        sub = explainer.layout.head_specs[explainer.layout.index(head)]
        X = sub.Q if quantity == "Q_rot" else sub.K
        t = next((t for t, pair in enumerate(self.pairs) if k in pair), None)
        if t is None:  # a column no pair turns: itself
            return ((X[i][k], Num(Decimal(1), True)),)
        a, b = self.pairs[t]
        cos, sin = (six_digits(x) for x in self.trig_exact(self.place(quantity[0], i), t))
        if k == a:
            return ((X[i][a], cos), (X[i][b], Num(-sin.value, sin.exact)))
        return ((X[i][a], sin), (X[i][b], cos))

    # --- the claimant's numbers carried forward ------------------------------------------

    def explained(self, explainer: Any, model: Any, quantity: str, row: int | None, head: int | None) -> Any:
        """A frequency, cos or sin is given or looked up: nothing to show but its value."""
        return () if quantity in ("rope_frequency", "rope_cos", "rope_sin", *KEYED[1:]) else None

    def _trig_implied(self, chain: Any, which: str, r: int, t: int, head: int | None) -> tuple[Any, Any, bool]:
        """(cos, sin, carried) of row r of Q or K (``which``): the claimant's own (claimed, or from an angle or a
        frequency), else exact. At given positions a query row takes the queries' table and a key row the keys';
        without them row r sits at position r, so a key row takes the query row's of that position, where
        there is one."""
        names: tuple[str, ...] = ("rope_cos", "rope_sin")
        if self.q_pos and which == "K":
            names = ("rope_key_cos", "rope_key_sin")
        elif not self.q_pos and r >= chain.layout.heads[chain.layout.index(head)].n_queries:
            names = ()
        if names and chain.names & {*TRIG, *KEYED}:
            (c, u), (s, w) = chain.implied(names[0], r, t, head), chain.implied(names[1], r, t, head)
            return c, s, u or w
        c, s = self.trig_exact(self.place(which, r), t)
        return c, s, False

    def implied(self, chain: Any, model: Any, quantity: str, row: int, col: int | None, head: int | None) -> Any:
        """Q′ and K′ from the claimant's own Q and K and cos and sin where claimed (else exact), the scores
        from their own Q′ and K′ where claimed, and dQ, dK from their dS, turned back; an angle from their
        frequency, a cos or sin from their angle; None for the rest."""
        L = chain.layout
        if quantity == "rope_frequency":
            return self.thetas[row], False
        keyed = quantity in KEYED
        kind, which = (QUERY_OF[quantity], "K") if keyed else (quantity, "Q")
        if kind == "rope_angle" and col is not None:
            theta, a = chain.implied("rope_frequency", col, None, head)
            return self.place(which, row) * theta, a
        if kind in ("rope_cos", "rope_sin") and col is not None:
            angle_name = "rope_key_angle" if keyed else "rope_angle"
            if not self.thetas or angle_name not in chain.names and "rope_frequency" not in chain.names:
                return self.trig_exact(self.place(which, row), col)[kind == "rope_sin"], False
            angle, a = chain.implied(angle_name, row, col, head)
            return (sympy.cos if kind == "rope_cos" else sympy.sin)(angle), a
        if quantity in ROTATED:
            assert col is not None
            name = quantity[0]
            if name not in chain.names and not chain.names & {*TRIG, *KEYED}:
                return self.exact(model, quantity)[row, col], False
            q0 = L.index(head) * L.width_q
            t = next((t for t, pair in enumerate(self.pairs) if col in pair), None)
            if t is None:  # a column no pair turns
                return chain.implied(name, row, q0 + col)
            a, b = self.pairs[t]
            c, s, v = self._trig_implied(chain, name, row, t, head)
            (x, u), (y, w) = chain.implied(name, row, q0 + a), chain.implied(name, row, q0 + b)
            return (x * c - y * s if col == a else x * s + y * c), u or w or v
        if quantity == "scores":
            assert col is not None
            if chain.names & {"Q_rot", "K_rot", *TRIG, *KEYED}:
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

        t = next((t for t, pair in enumerate(self.pairs) if col in pair), None)
        if t is None:  # a column no pair turns: its gradient is the turned row's
            return rotated(col)
        a, b = self.pairs[t]
        cos, sin = self.trig_exact(self.place("Q" if quantity == "dQ" else "K", row), t)
        (x, u), (y, w) = rotated(a), rotated(b)
        return (x * cos + y * sin if col == a else y * cos - x * sin), u or w

    # --- the backward pass -------------------------------------------------------------

    def gradient(self, model: Any) -> Rotary:
        return Rotary(self.pairs, self.thetas, self.q_pos, self.k_pos)


@record
class Rotary:
    """Backward through the rotation: the scores are Q′K′ᵀ, so dQ′ = dS K′ and dK′ = dSᵀ Q′, then turned back:
    dQ = Rᵀ dQ′, dK = Rᵀ dK′. Position p turns pair t by p·θ_t; an algebra that runs it gives
    ``trig(angle)``, the (cos, sin) of an exact angle as two of its elements."""

    pairs: tuple[tuple[int, int], ...]
    thetas: tuple[Any, ...]
    q_pos: tuple[int, ...] = ()  # as the head's Rotated has them
    k_pos: tuple[int, ...] = ()
    stage: ClassVar[int] = QK
    names: ClassVar[tuple[str, ...]] = ("dQ_rot", "dK_rot")
    after: ClassVar[str] = "dS"  # its gradients come right after dS
    forms: ClassVar[bool] = False  # thousands of characters an entry, ordered by SymPy's evaluation: not printed

    def rotate(self, alg: Any, M: list, which: str, back: bool = False) -> list:
        """Each row of M (of Q or K: ``which``) turned by p·θ_t pair by pair, p its position (R), or back (Rᵀ,
        which takes dQ′ to dQ)."""
        out = [list(row) for row in M]
        for r, row in enumerate(M):
            p = (self.q_pos if which == "Q" else self.k_pos)[r] if self.q_pos else r
            if p == 0:
                continue  # position 0 is not turned
            for t, (a, b) in enumerate(self.pairs):
                c, s = alg.trig(p * self.thetas[t])
                if back:
                    out[r][a], out[r][b] = row[a] * c + row[b] * s, row[b] * c - row[a] * s
                else:
                    out[r][a], out[r][b] = row[a] * c - row[b] * s, row[a] * s + row[b] * c
        return out

    def through(self, alg: Any, dS: list, K: list, Q: list, out: dict, hook: Any) -> None:
        from symattn.exact.gradients import matmul, transpose

        out["dQ_rot"] = dQ = hook("dQ_rot", matmul(alg, dS, self.rotate(alg, K, "K")))
        out["dK_rot"] = dK = hook("dK_rot", matmul(alg, transpose(dS), self.rotate(alg, Q, "Q")))
        out["dQ"] = hook("dQ", self.rotate(alg, dQ, "Q", back=True))
        out["dK"] = hook("dK", self.rotate(alg, dK, "K", back=True))


# --- the angles people choose (symattn.variants.turns has the argument) -----------------------------


@record
class RotatedByPi(ByRoots, Rotated):
    """One head's rotation by angles that are rational multiples of π: its scores in Q(ζ_N)."""

    field: Cyclotomic = Cyclotomic(4)
    halves: tuple[Fraction, ...] = ()  # r_t / 2: angle p·θ_t = 2π·p·halves[t]


@record
class Tabled(ByTables, Rotated):
    """One head's turn by given cos/sin tables: no angles to claim, the tables' cos and sin."""

    cos: tuple[tuple[Fraction, ...], ...] = ()
    sin: tuple[tuple[Fraction, ...], ...] = ()
    quantities: ClassVar[tuple[str, ...]] = (*TRIG[2:], *ROTATED)
    computed: ClassVar[tuple[str, ...]] = quantities
    columns: ClassVar[tuple[str, ...]] = ()

    def gradient(self, model: Any) -> TableRotary:
        return TableRotary(self.pairs, (), cos=self.cos, sin=self.sin)


@record
class TableRotary(TableTurn, Rotary):
    cos: tuple[tuple[Fraction, ...], ...] = ()
    sin: tuple[tuple[Fraction, ...], ...] = ()


__all__ = [
    "KEYED",
    "ROTATED",
    "TRIG",
    "RotatedByPi",
    "TableRotary",
    "Tabled",
    "Rotary",
    "Rotated",
]
