"""One head's online softmax, exactly (the part is :mod:`symattn.variants.tiling`): the keys in blocks of B,
as FlashAttention walks them, and each row's log-sum-exp.

For row i and block b (counted from 0 here, from 1 in claims), P_b is the keys of blocks 0..b that the row
may attend to, and

    m_b = max_{j ∈ P_b} z_ij                 the running max (−∞ while P_b is empty)
    r_b = e^(m_{b−1} − m_b)                  the rescale (m_{−1} = −∞: 0 at the first block with a key;
                                              1 where m_b is still −∞: there is nothing to rescale)
    l_b = r_b·l_{b−1} + Σ_{j ∈ block b} e^(z_ij − m_b)  = Σ_{j ∈ P_b} e^(z_ij − m_b)
    acc_b = r_b·acc_{b−1} + Σ_{j ∈ block b} e^(z_ij − m_b) V_j  = Σ_{j ∈ P_b} e^(z_ij − m_b) V_j
    LSE_i = m + log l  (the last block's)    = log Σ_j e^(z_ij)

Exactness, for algebraic z (Lindemann–Weierstrass: e^a for algebraic a ≠ 0 is transcendental, and
Σ c_g e^(a_g) over distinct algebraic a_g with algebraic c_g ≠ 0 is 0 only when empty): m_b is the
rational z where z is; r_b is rational only where m_b = m_{b−1} (1) or at the first block (0); l_b only
where every z of P_b equals m_b (then |P_b|); acc_b[c] only where the V of each group of equal z below
m_b sums to 0 in column c (then the top group's sum); LSE only for a row with one key and a rational z
(log n for an integer n > 1 is transcendental). Where a monotone part makes z transcendental, these are
the values known to be rational; the others are decided on enclosures.

The identity, that the tiled route's output acc/l *is* the softmax's, and each recurrence's value its
direct sum, is proved here on the closed forms: products of exps are merged (e^a·e^b = e^(a+b)) and the
difference of the two sides expands to 0, exactly (:meth:`Tiled.identity`).
"""

from __future__ import annotations

from fractions import Fraction
from functools import cached_property
from typing import Any

import sympy
from mpmath import iv
from sympy import ImmutableMatrix

from symattn.exact import numeric
from symattn.exact.base import Rounding
from symattn.exact.intervals import enclose
from symattn.exact.numeric import Fixed
from symattn.input.records import record

BLOCK_QUANTITIES = ("running_max", "rescale", "running_sum")  # [block][row]
TILED = BLOCK_QUANTITIES + ("accumulator",)  # accumulator: [block · n + row][column]
NEG_INF = sympy.S.NegativeInfinity


@record(eq=False)
class Tiled(Rounding):
    """A head's online softmax over blocks of ``block`` keys (None: no tiling; only ``lse`` is asked)."""

    model: Any  # the head's exact Model
    block: int | None
    kind = "tiling"
    columns = ("lse",)  # one number per query
    stacked = ("accumulator",)  # [block][row][column], held as rows b·n + i

    @property
    def n_queries(self) -> int:
        return int(self.model.n_queries)

    @property
    def n_keys(self) -> int:
        return int(self.model.n_keys)

    @property
    def blocks(self) -> int:
        b = self.block or self.n_keys
        return -(-self.n_keys // b)

    def keys_of(self, b: int) -> range:
        """The keys of block b (0-based)."""
        size = self.block or self.n_keys
        return range(b * size, min((b + 1) * size, self.n_keys))

    def allowed(self, i: int, b: int) -> list[int]:
        """The keys of block b that row i may attend to."""
        return [j for j in self.keys_of(b) if self.model.may_attend(i, j)]

    # --- order and equality of z, exactly --------------------------------------------------------------

    def order(self, i: int, a: int, b: int) -> int:
        """The sign of z_ia − z_ib."""
        m = self.model
        if not m.parts:
            row = m.score_integers[1][i]
            return (row[a] > row[b]) - (row[a] < row[b])
        forms = m.forms
        return int(forms.compare(forms.form(i, a), forms.form(i, b)))

    @cached_property
    def argmax(self) -> tuple[tuple[int | None, ...], ...]:
        """[b][i]: the key of the running max after block b (the first on ties; None: no key yet)."""
        out = []
        best: list[int | None] = [None] * self.n_queries
        for b in range(self.blocks):
            for i in range(self.n_queries):
                for j in self.allowed(i, b):
                    top = best[i]
                    if top is None or self.order(i, j, top) > 0:
                        best[i] = j
            out.append(tuple(best))
        return tuple(out)

    def seen(self, i: int, b: int) -> list[int]:
        """P_b: the keys of blocks 0..b that row i may attend to."""
        return [j for c in range(b + 1) for j in self.allowed(i, c)]

    # --- closed forms ----------------------------------------------------------------------------------

    def z(self, i: int, j: int) -> sympy.Expr:
        return self.model.scaled[i, j]

    def m(self, b: int, i: int) -> sympy.Expr:
        top = self.argmax[b][i] if b >= 0 else None
        return NEG_INF if top is None else self.z(i, top)

    def _rescale(self, b: int, i: int) -> sympy.Expr:
        new, old = self.m(b, i), self.m(b - 1, i)
        if new is NEG_INF:
            return sympy.Integer(1)
        return sympy.Integer(0) if old is NEG_INF else sympy.exp(old - new)

    def _sum(self, b: int, i: int, weights: Any = None) -> sympy.Expr:
        m = self.m(b, i)
        terms = [sympy.exp(self.z(i, j) - m) * (1 if weights is None else weights(j)) for j in self.seen(i, b)]
        return sympy.Add(*terms)

    def _lse(self, i: int) -> sympy.Expr:
        last = self.blocks - 1
        return self.m(last, i) + sympy.log(self._sum(last, i))

    @cached_property
    def _forms(self) -> dict[str, ImmutableMatrix]:
        n, nb, V = self.n_queries, self.blocks, self.model.V
        return {
            "running_max": ImmutableMatrix(nb, n, lambda b, i: self.m(b, i)),
            "rescale": ImmutableMatrix(nb, n, lambda b, i: self._rescale(b, i)),
            "running_sum": ImmutableMatrix(nb, n, lambda b, i: self._sum(b, i)),
            "accumulator": ImmutableMatrix(nb * n, V.cols, lambda r, c: self._sum(r // n, r % n, lambda j: V[j, c])),
            "lse": ImmutableMatrix(n, 1, lambda i, _: self._lse(i)),
        }

    def exact(self, quantity: str) -> ImmutableMatrix:
        return self._forms[quantity]

    # --- the identity ----------------------------------------------------------------------------------

    def recurrence(self, b: int, i: int, weights: Any = None) -> sympy.Expr:
        """l_b (or acc_b with weights) as the online route computes it: r_b·(the last) + this block's terms."""
        if b < 0:
            return sympy.Integer(0)
        m = self.m(b, i)
        own = [sympy.exp(self.z(i, j) - m) * (1 if weights is None else weights(j)) for j in self.allowed(i, b)]
        return self._rescale(b, i) * self.recurrence(b - 1, i, weights) + sympy.Add(*own)

    @cached_property
    def identity(self) -> bool:
        """Whether the online route's values are exactly the direct sums, and acc/l exactly the softmax's output:
        each difference expands to 0 once products of exps are merged."""
        V, last = self.model.V, self.blocks - 1
        for i in range(self.n_queries):
            if not self.seen(i, last):
                continue
            for b in range(self.blocks):
                if not _zero(self.recurrence(b, i) - self._sum(b, i)):
                    return False
            l_final = self.recurrence(last, i)
            for c in range(V.cols):
                acc = self.recurrence(last, i, lambda j, c=c: V[j, c])
                # acc/l = output ⟺ acc·Σe^z − l·Σ V e^z = 0 (both denominators are positive)
                exps = [sympy.exp(self.z(i, j)) for j in range(self.n_keys) if self.model.may_attend(i, j)]
                keys = [j for j in range(self.n_keys) if self.model.may_attend(i, j)]
                weighted = sympy.Add(*[V[j, c] * e for j, e in zip(keys, exps)])
                if not _zero(acc * sympy.Add(*exps) - l_final * weighted):
                    return False
        return True

    # --- rational values -------------------------------------------------------------------------------

    def rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        return self._rationals[quantity]

    @cached_property
    def _rationals(self) -> dict[str, tuple[tuple[Fraction | None, ...], ...]]:
        z = self.model.rationals("scaled")
        n, nb, V = self.n_queries, self.blocks, self.model.v_rows

        def m(b: int, i: int) -> Fraction | None:
            top = self.argmax[b][i]
            return Fraction(0) if top is None else z[i][top]  # −∞: a placeholder, never read

        def groups(b: int, i: int) -> list[list[int]]:
            out: list[list[int]] = []
            for j in self.seen(i, b):
                group = next((g for g in out if self.order(i, g[0], j) == 0), None)
                if group is None:
                    out.append([j])
                else:
                    group.append(j)
            return out

        def is_top(b: int, i: int, g: list[int]) -> bool:
            top = self.argmax[b][i]
            return top is not None and self.order(i, g[0], top) == 0

        def rescale(b: int, i: int) -> Fraction | None:
            new, old = self.argmax[b][i], self.argmax[b - 1][i] if b > 0 else None
            if new is None:
                return Fraction(1)
            if old is None:
                return Fraction(0)
            return Fraction(1) if self.order(i, old, new) == 0 else None

        def running_sum(b: int, i: int) -> Fraction | None:
            gs = groups(b, i)
            return Fraction(sum(len(g) for g in gs)) if len(gs) <= 1 else None

        def accumulator(b: int, i: int, c: int) -> Fraction | None:
            gs = groups(b, i)
            if any(sum(V[j][c] for j in g) != 0 for g in gs if not is_top(b, i, g)):
                return None
            return sum((V[j][c] for g in gs if is_top(b, i, g) for j in g), Fraction(0))

        def lse(i: int) -> Fraction | None:
            keys = self.seen(i, nb - 1)
            if len(keys) != 1 or self.model.denominator is not None:
                return None
            return z[i][keys[0]]

        d_v = len(V[0]) if V else 0
        return {
            "running_max": tuple(tuple(m(b, i) for i in range(n)) for b in range(nb)),
            "rescale": tuple(tuple(rescale(b, i) for i in range(n)) for b in range(nb)),
            "running_sum": tuple(tuple(running_sum(b, i) for i in range(n)) for b in range(nb)),
            "accumulator": tuple(tuple(accumulator(r // n, r % n, c) for c in range(d_v)) for r in range(nb * n)),
            "lse": tuple((lse(i),) for i in range(n)),
        }

    # --- enclosures ------------------------------------------------------------------------------------

    def _is_infinite(self, quantity: str, row: int, col: int) -> bool:
        return quantity == "running_max" and self.argmax[row][col] is None

    def _may_be_infinite(self, quantity: str) -> bool:
        return quantity == "running_max"

    @cached_property
    def _caches(self) -> dict[int, dict]:
        return {}

    def _magnitude_bits(self, quantity: str) -> int:
        boxes = [self._box(quantity, x, 64) for x in self._finite(quantity)]
        return max((numeric._magnitude_bits(b) for b in boxes), default=0)

    def _finite(self, quantity: str) -> list[sympy.Expr]:
        forms = self.exact(quantity)
        return [x for x in forms if x is not NEG_INF]

    def _box(self, quantity: str, x: sympy.Expr, prec: int) -> iv.mpf:
        return enclose(x, prec, self._caches.setdefault(prec, {}))

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        prec = bits + self._magnitude_bits(quantity) + 32
        return [
            Fixed(0, 0, bits) if x is NEG_INF else Fixed.from_interval(self._box(quantity, x, prec), bits)
            for x in self.exact(quantity)
        ]

    def compare(self, quantity: str, i: int, j: int, value: Fraction) -> int:
        """The sign of an entry minus a rational."""
        x = self.exact(quantity)[i, j]
        prec = 64
        while prec <= 1 << 16:
            box = self._box(quantity, x, prec)
            lo, hi = (_rational(end) for end in box._mpi_)
            if lo is not None and lo > value:
                return 1
            if hi is not None and hi < value:
                return -1
            prec *= 2
        return 0


def _rational(end: tuple) -> Fraction | None:
    """An interval's end (an mpf tuple) exactly, or None where it is unbounded."""
    sign, man, exp, _ = end
    if not man and exp:  # ±inf (or nan): the box decides nothing on that side yet
        return None
    return Fraction(-man if sign else man) * Fraction(2) ** exp


def _zero(expr: sympy.Expr) -> bool:
    """Whether a sum of products of exps is exactly 0: merge e^a·e^b into e^(a+b), expand, and collect."""
    return sympy.expand(sympy.powsimp(sympy.expand(expr), combine="exp")) == 0


__all__ = ["BLOCK_QUANTITIES", "TILED", "Tiled"]
