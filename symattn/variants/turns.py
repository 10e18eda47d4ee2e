"""Turning each pair of a head's Q and K columns by position with angles people choose, exactly: by rational
multiples of π, whose cos and sin lie in a cyclotomic field, or by given cos/sin tables. The part of Q and K
turned by position reads the keys and mixes these into its head part; the exactness argument is here.

- **Rational multiples of π** (degrees, or ``k·pi/n``): Lindemann–Weierstrass, which the turn by algebraic
  angles rests on, says nothing here, since e^{iφ} is then a root of unity and cos φ, sin φ are algebraic
  (cos 30° = √3/2, cos 60° = 1/2). Instead: every angle is 2πk/N for one N (a multiple of 4, so that
  i = ζ_N^{N/4}), so cos φ = (ζ^k + ζ^{−k})/2 and sin φ = (ζ^k − ζ^{−k})/(2i) lie in the cyclotomic field
  Q(ζ_N), and so does every turned entry and score. Such a number has exactly one coordinate vector over
  the power basis 1, ζ, …, ζ^{φ(N)−1} (Φ_N, of degree φ(N), is ζ's minimal polynomial): the remainder of
  its Laurent sum modulo Φ_N. So two scores are equal iff their vectors are, and a score is rational iff
  only its constant coordinate is nonzero. The scale c·√r (r square-free) may make an irrational score
  rational (√2/2 · 1/√2): y = S·c·√r is rational iff S·√r is; for irrational S that needs √r ∈ Q(ζ_N)
  (else √r = (S√r)/S would be in it), that is, the conductor of Q(√r) (r or 4r) divides N, and then √r is
  a product of Gauss sums (√2 = ζ_8 + ζ_8^{−1}; for an odd prime p, g = Σ_a (a|p) ζ_p^a is √p or i√p)
  and S·√r is reduced in the field and read the same way. An additive slope (2^e) is not in the
  field, so the two are not combined. Unequal scores are ordered on enclosures of their difference (not 0:
  the vectors differ) at rising precision. Whether a cos or sin alone is rational follows Niven's theorem
  (only 0, ±1/2, ±1), which SymPy's evaluation at multiples of π/6 and π/4 gives exactly; e^y is
  transcendental for algebraic y ≠ 0 (Lindemann), so the exps are rational only at y = 0, as without a turn.
- **Given tables**: the typed numbers are the cos and sin, read exactly; cos² + sin² need not be 1 (the turn
  then also stretches, and is no rotation), which the document says where; every turned entry and score is
  rational, and backward goes through the turn's transpose (not its inverse).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact import numeric
from symattn.exact.num import Num, NumRows
from symattn.exact.numeric import Fixed
from symattn.input.records import record
from symattn.variants.base import Rows
from symattn.variants.forms import scale_parts

# one score: (constant numerator, ((angle index, cos numerator, sin numerator), ...)) over dq·dk
Structure = tuple[int, tuple[tuple[int, int, int], ...]]


def minus(x: Structure, y: Structure) -> Structure:
    """x − y, term by term (terms that cancel are dropped)."""
    terms = {n: [c, s] for n, c, s in x[1]}
    for n, c, s in y[1]:
        entry = terms.setdefault(n, [0, 0])
        entry[0] -= c
        entry[1] -= s
    return x[0] - y[0], tuple((n, c, s) for n, (c, s) in sorted(terms.items()) if c or s)


ROTATED = ("Q_rot", "K_rot")  # the turned Q and K


def unturned(pairs: tuple[tuple[int, int], ...], width: int) -> tuple[int, ...]:
    """The columns of a head that no pair turns (MLA's dims from the latent): each score's rational part."""
    turned = {c for pair in pairs for c in pair}
    return tuple(c for c in range(width) if c not in turned)


def combine(constant: int, terms: list[tuple[int, Fixed]], den: int, bits: int) -> Fixed:
    """(constant + Σ n·box) / den at 2**-bits: ``constant`` already at 2**-bits, each box too."""
    lo = hi = constant
    for n, box in terms:
        if n >= 0:
            lo, hi = lo + n * box.lo, hi + n * box.hi
        else:
            lo, hi = lo + n * box.hi, hi + n * box.lo
    return Fixed(lo // den, -(-hi // den), bits)


# --- the cyclotomic field Q(ζ_N) --------------------------------------------------------------------


class Cyclotomic:
    """Q(ζ_N), ζ = e^{2πi/N}: integer coordinate vectors over 1, ζ, …, ζ^{φ(N)−1} (trailing zeros dropped)."""

    def __init__(self, n: int):
        self.n = n
        x = sympy.Symbol("x")
        coeffs = [int(c) for c in sympy.Poly(sympy.cyclotomic_poly(n, x), x).all_coeffs()[::-1]]
        self.degree = len(coeffs) - 1
        self.phi = tuple((m, c) for m, c in enumerate(coeffs[:-1]) if c)  # Φ_N without its leading x^d

    def element(self, terms: dict[int, int]) -> tuple[int, ...]:
        """Σ c·ζ^e of {e: c} (e taken mod N), reduced modulo Φ_N."""
        a = [0] * self.n
        for e, c in terms.items():
            a[e % self.n] += c
        d = self.degree
        for e in range(self.n - 1, d - 1, -1):
            c = a[e]
            if c:
                for m, p in self.phi:
                    a[e - d + m] -= c * p
                a[e] = 0
        del a[d:]
        while a and a[-1] == 0:
            a.pop()
        return tuple(a)

    def times(self, x: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, ...]:
        terms: dict[int, int] = {}
        for e, c in enumerate(x):
            if c:
                for f, b in enumerate(y):
                    if b:
                        terms[e + f] = terms.get(e + f, 0) + c * b
        return self.element(terms)

    def sqrt(self, r: int) -> tuple[tuple[int, ...], int] | None:
        """√r (r square-free) as (vector, denominator), or None where it is not in the field."""
        primes = sympy.primefactors(r)
        if any(self.n % p for p in primes) or (2 in primes and self.n % 8):
            return None
        one: tuple[int, ...] = (1,)
        out, den = one, 1
        for p in primes:
            if p == 2:
                e = self.n // 8
                root = self.element({e: 1, -e: 1})
            else:
                step = self.n // p
                gauss = self.element({a * step: 1 if pow(a, (p - 1) // 2, p) == 1 else -1 for a in range(1, p)})
                # the Gauss sum is √p for p ≡ 1 (mod 4), i√p for p ≡ 3: then √p = −i·g
                root = gauss if p % 4 == 1 else self.times(self.element({3 * self.n // 4: 1}), gauss)
            out = self.times(out, root)
        return out, den

    @cached_property
    def cos_sympy(self) -> tuple[sympy.Expr, ...]:
        """cos(2πk/N) for k below φ(N): the real part of ζ^k."""
        return tuple(sympy.cos(2 * sympy.pi * sympy.Rational(k, self.n)) for k in range(self.degree))


# --- one head, angles that are rational multiples of π --------------------------------------------


class FieldLinear:
    """y = S·scale of a score S in Q(ζ_N), as :mod:`symattn.variants.forms` asks (no additive part)."""

    def __init__(self, part: Any, model: Any):
        self.den = part.den(model)
        self.c, self.r = scale_parts(model.scale)
        self.field = part.field
        self.root = self.field.sqrt(self.r) if self.r != 1 else None

    def key(self, p: tuple[int, ...], q: Fraction) -> tuple[int, ...]:
        return p

    def value(self, p: tuple[int, ...], q: Fraction) -> Fraction | None:
        if len(p) <= 1:  # S rational: the plain rule
            s = Fraction(p[0] if p else 0, self.den)
            return Fraction(0) if s == 0 else s * self.c if self.r == 1 else None
        if self.root is None:  # S irrational, and √r (if any) outside the field
            return None
        product = self.field.times(p, self.root[0])
        return Fraction(product[0] if product else 0, self.den * self.root[1]) * self.c if len(product) <= 1 else None

    def sign(self, p: tuple[int, ...], q: Fraction) -> int | None:
        if len(p) <= 1:
            s = p[0] if p else 0
            return (s > 0) - (s < 0)
        return None


class ByRoots:
    """A head's turn by angles p·r_t·π (mixed in before the head part it changes, which gives ``pairs``,
    ``structures``, ``exact`` and the rest): the scores are held as vectors of Q(ζ_N) over 2·dq·dk."""

    field: Cyclotomic
    halves: tuple[Fraction, ...]  # r_t / 2: angle p·θ_t = 2π·p·halves[t]
    pairs: tuple[tuple[int, int], ...]
    if TYPE_CHECKING:

        def structures(self, model: Any) -> Any: ...

        def exact(self, model: Any, quantity: str) -> Any: ...

        def place(self, which: str, row: int) -> int: ...

    def den(self, model: Any) -> int:
        return 2 * model.dq * model.dk

    def _exponent(self, p: int, t: int) -> int:
        k = p * self.halves[t] * self.field.n
        assert k.denominator == 1  # N is a multiple of every denominator of r_t/2
        return int(k)

    def _trig_terms(self, p: int, t: int, c: int, s: int, out: dict[int, int]) -> None:
        """Add 2·(c·cos + s·sin) of angle p·θ_t to ``out``, exponents of ζ."""
        n, k = self.field.n, self._exponent(p, t)
        quarter = 3 * n // 4  # 1/i = ζ^{3N/4}
        for e, x in ((k, c), (-k, c), (k + quarter, s), (-k + quarter, -s)):
            out[e] = out.get(e, 0) + x

    def _structures(self, model: Any) -> tuple[tuple[Any, ...], ...]:
        q, k = model.q.to_list(), model.k.to_list()
        kept, out = unturned(self.pairs, model.d_k), []
        for i, qi in enumerate(q):
            row = []
            for j, kj in enumerate(k):
                terms: dict[int, int] = {0: 2 * sum(int(qi[c]) * int(kj[c]) for c in kept)} if kept else {}
                for t, (a, b) in enumerate(self.pairs):
                    qa, qb, ka, kb = int(qi[a]), int(qi[b]), int(kj[a]), int(kj[b])
                    delta = self.place("K", j) - self.place("Q", i)  # the rows' own, or the given positions
                    self._trig_terms(delta, t, qa * ka + qb * kb, qb * ka - qa * kb, terms)
                row.append(self.field.element(terms))
            out.append(tuple(row))
        return tuple(out)

    def split(self, model: Any, s: Any) -> tuple[tuple, Any]:
        return (), s

    @staticmethod
    def minus(x: Any, y: Any) -> Any:
        n = max(len(x), len(y))
        out = [a - b for a, b in zip(x + (0,) * (n - len(x)), y + (0,) * (n - len(y)))]
        while out and out[-1] == 0:
            out.pop()
        return tuple(out)

    def linear(self, model: Any) -> FieldLinear:
        return FieldLinear(self, model)

    def scores(self, model: Any) -> ImmutableMatrix:
        Q, K = self.exact(model, "Q_rot"), self.exact(model, "K_rot")
        return ImmutableMatrix(Q.rows, K.rows, lambda i, j: sympy.expand(sum(Q[i, c] * K[j, c] for c in range(Q.cols))))

    def box(self, model: Any, x: Any, bits: int) -> Fixed:
        from symattn.exact import numeric

        key = f"turns:roots:{bits}"
        if key not in model.memo:
            cache: dict[Any, Any] = {}
            model.memo[key] = [
                Fixed.from_interval(numeric.enclose(c, bits + 32, cache), bits) for c in self.field.cos_sympy
            ]
        cos = model.memo[key]
        return combine(0, [(c, cos[e]) for e, c in enumerate(x) if c], self.den(model), bits)

    def rationals(self, model: Any, quantity: str) -> Rows | None:
        if quantity == "scores":
            den = self.den(model)
            return tuple(
                tuple(Fraction(x[0] if x else 0, den) if len(x) <= 1 else None for x in row)
                for row in self.structures(model)
            )
        if quantity in ("Q_rot", "K_rot"):
            m = model.q if quantity == "Q_rot" else model.k
            d = model.dq if quantity == "Q_rot" else model.dk
            out = []
            for r, row in enumerate(m.to_list()):
                values: list[Fraction | None] = [Fraction(int(x), d) for x in row]
                p = self.place(quantity[0], r)
                for t, (a, b) in enumerate(self.pairs):
                    xa, xb = int(row[a]), int(row[b])
                    for col, (c, s) in ((a, (xa, -xb)), (b, (xb, xa))):
                        terms: dict[int, int] = {}
                        self._trig_terms(p, t, c, s, terms)
                        v = self.field.element(terms)
                        values[col] = Fraction(v[0] if v else 0, 2 * d) if len(v) <= 1 else None
                out.append(tuple(values))
            return tuple(out)
        return super().rationals(model, quantity)  # type: ignore[misc]


# --- one head, given cos/sin tables -----------------------------------------------------------------


class ByTables:
    """A head's turn by given cos and sin (rationals, [position][pair]), mixed in as :class:`ByRoots` is:
    every turned entry and score is rational."""

    cos: tuple[tuple[Fraction, ...], ...]
    sin: tuple[tuple[Fraction, ...], ...]
    pairs: tuple[tuple[int, int], ...]
    not_rational: ClassVar[str] = "the scores with given tables are held as fractions: use structures"
    if TYPE_CHECKING:

        def structures(self, model: Any) -> Any: ...

    def trig_exact(self, p: int, t: int) -> tuple[sympy.Expr, sympy.Expr]:
        return _rational(self.cos[p][t]), _rational(self.sin[p][t])

    def _rotated(self, m: Any, den: int) -> list[list[Fraction]]:
        out = []
        for p, row in enumerate(m.to_list()):
            values = [Fraction(int(x), den) for x in row]
            for t, (a, b) in enumerate(self.pairs):
                c, s = self.cos[p][t], self.sin[p][t]
                xa, xb = values[a], values[b]
                values[a], values[b] = xa * c - xb * s, xa * s + xb * c
            out.append(values)
        return out

    def _fractions(self, model: Any, quantity: str) -> list[list[Fraction]]:
        key = "turns:table:" + quantity
        if key not in model.memo:
            m, den = (model.q, model.dq) if quantity == "Q_rot" else (model.k, model.dk)
            model.memo[key] = self._rotated(m, den)
        return model.memo[key]

    def _rotated_closed(self, m: ImmutableMatrix, which: str) -> ImmutableMatrix:
        return m  # not used: exact() below

    def exact(self, model: Any, quantity: str) -> ImmutableMatrix:
        if quantity not in ROTATED:
            return super().exact(model, quantity)  # type: ignore[misc]
        return ImmutableMatrix([[_rational(x) for x in row] for row in self._fractions(model, quantity)])

    def _structures(self, model: Any) -> tuple[tuple[Any, ...], ...]:
        Q, K = self._fractions(model, "Q_rot"), self._fractions(model, "K_rot")
        return tuple(tuple(sum((x * y for x, y in zip(q, k)), Fraction(0)) for k in K) for q in Q)

    def split(self, model: Any, s: Any) -> tuple[tuple, Any]:
        return (), s

    @staticmethod
    def minus(x: Any, y: Any) -> Any:
        return x - y

    def scores(self, model: Any) -> ImmutableMatrix:
        rows: Any = self.structures(model)  # fractions here, not the base's cos/sin structures
        return ImmutableMatrix([[_rational(x) for x in row] for row in rows])

    def box(self, model: Any, x: Any, bits: int) -> Fixed:
        return Fixed.exact(x, bits)

    def rationals(self, model: Any, quantity: str) -> Rows | None:
        if quantity == "scores":
            rows: Any = self.structures(model)
            return tuple(tuple(row) for row in rows)
        if quantity in ROTATED:
            return tuple(tuple(row) for row in self._fractions(model, quantity))
        return super().rationals(model, quantity)  # type: ignore[misc]

    def boxes(self, boxes: Any, quantity: str) -> list[Fixed]:
        if quantity not in ROTATED:
            return super().boxes(boxes, quantity)  # type: ignore[misc]
        return [Fixed.exact(x, boxes.bits) for row in self._fractions(boxes.model, quantity) for x in row]


class TableTurn:
    """Backward through the given turn, mixed in before the backward rule of the head part: each row's pairs
    with the tables' cos and sin (position 0 too: a table need not start at the identity)."""

    cos: tuple[tuple[Fraction, ...], ...]
    sin: tuple[tuple[Fraction, ...], ...]
    pairs: tuple[tuple[int, int], ...]

    def rotate(self, alg: Any, M: list, which: str, back: bool = False) -> list:
        # by row: the part refuses tables together with given positions
        out = [list(row) for row in M]
        for p, row in enumerate(M):
            for t, (a, b) in enumerate(self.pairs):
                c, s = alg.const(self.cos[p][t]), alg.const(self.sin[p][t])
                if back:
                    out[p][a], out[p][b] = row[a] * c + row[b] * s, row[b] * c - row[a] * s
                else:
                    out[p][a], out[p][b] = row[a] * c - row[b] * s, row[a] * s + row[b] * c
        return out


@record
class ShownTurn:
    trig: dict[int, tuple[tuple[Num, Num], ...]]  # [position][pair] = (cos, sin) as shown
    Q_rot: NumRows
    K_rot: NumRows
    scores: NumRows


def shown_turn(part: Any, model: Any, used: Any, places: int, notation: str, hand: bool) -> ShownTurn:
    """cos, sin, Q′, K′ and the scores as shown, to the scores' decimals (``used``: the positions). ``hand``:
    cos and sin rounded, and Q′, K′ and the scores from the shown numbers, as a reader with a calculator works
    them (q'_a = q_a·cos − q_b·sin with the shown cos and sin); else the exact values, rounded."""
    from symattn.exact.rounding import exact_or_rounded, from_model

    trig = {p: tuple(cos_sin_shown(part.trig_exact(p, t), places) for t in range(len(part.pairs))) for p in used}
    if not hand:
        return ShownTurn(
            trig,
            from_model(model, "Q_rot", places, notation),
            from_model(model, "K_rot", places, notation),
            from_model(model, "scores", places, notation),
        )

    def turn(rows: list[list[Fraction]], which: str) -> NumRows:
        out = [list(row) for row in rows]
        for r, row in enumerate(rows):
            p = part.place(which, r)
            for t, (a, b) in enumerate(part.pairs):
                c, s = (x.fraction for x in trig[p][t])
                out[r][a] = row[a] * c - row[b] * s
                out[r][b] = row[a] * s + row[b] * c
        return exact_or_rounded(out, places, notation)

    Q = turn([[Fraction(int(x), model.dq) for x in row] for row in model.q.to_list()], "Q")
    K = turn([[Fraction(int(x), model.dk) for x in row] for row in model.k.to_list()], "K")
    scores = [[sum((x.fraction * y.fraction for x, y in zip(q, k)), Fraction(0)) for k in K] for q in Q]
    return ShownTurn(trig, Q, K, exact_or_rounded(scores, places, notation))


def cos_sin_shown(trig: tuple[sympy.Expr, sympy.Expr], places: int) -> tuple[Num, Num]:
    """An exact cos and sin, correctly rounded (exactly 1 and 0 at angle 0; a rational shown whole where its
    digits end within the places); in [−1, 1], so always fixed decimals."""
    from symattn.exact.rounding import exact_width

    shown = []
    for x in trig:
        value = numeric.as_fraction(x)
        rounded = Decimal(int(x)) if isinstance(x, sympy.Integer) else numeric.round_expr(x, places)
        shown.append(Num(rounded, value is not None and Fraction(rounded) == value))
    cos, sin = exact_width(((shown[0], shown[1]),))[0]  # an exact one unpadded: −0.5, not −0.500
    return cos, sin


def six_digits(x: sympy.Expr) -> Num:
    """A cos or sin to six significant digits, as an explanation shows it (an integer whole)."""
    if isinstance(x, sympy.Integer):
        return Num(Decimal(int(x)), True)
    return Num(numeric.round_expr(x, 6, significant=True), False)


def _rational(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)


__all__ = [
    "ROTATED",
    "ByRoots",
    "ByTables",
    "Cyclotomic",
    "FieldLinear",
    "ShownTurn",
    "Structure",
    "TableTurn",
    "combine",
    "minus",
    "cos_sin_shown",
    "shown_turn",
    "six_digits",
    "unturned",
]
