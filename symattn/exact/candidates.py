"""Which gradient entries can be rational at all, found cheaply, so that the exponential polynomials of
:mod:`symattn.exact.exactness` decide only those.

Every weight is u^n / Σ_k u^{n_k} with n a row's score integers and u = e^{c/den} (c the scale, one den
for every head), and u is transcendental (Lindemann). So an entry is F(u) for a rational function F with
coefficients in Q(c), and it is a rational number r only if F is the constant r. Then F has the same
value r as u → ∞, where each row's weights become uniform over its highest scores (:func:`limit_weights`).
That value is a rational, or a rational plus a rational multiple of c: the gradients at those weights,
in :class:`Limits`. An entry whose limit is not rational, or whose enclosure does not hold its limit, is
irrational, proved; only the rest, a few, go to the exponential polynomials. Those run lazily: the
gradients are first built as a graph (:class:`Lazy`), and :func:`evaluate` makes the nodes one entry
needs, once each.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from symattn.exact.gradients import Grid
from symattn.exact.model import Model

try:  # FLINT's rationals: ten times faster than Fraction, for the ~10^5 operations of 32 tokens
    import flint

    _Q: Any = flint.fmpq
except ImportError:  # pragma: no cover - python-flint is a dependency; the mpmath engine works without it
    _Q = Fraction

# --- the value at the limit: a + b·c, with c² rational ------------------------------------


def _fraction(x: Any) -> Fraction:
    if isinstance(x, Fraction):
        return x
    return Fraction(int(x.p), int(x.q))


class Surd:
    """a + b·c with rationals a, b (b is 0 when the scale is rational); ``w``: whether a weight went into
    it (one that did not is its own exact value, made of the inputs alone)."""

    __slots__ = ("a", "b", "c2", "w")

    def __init__(self, a: Any, b: Any, c2: Any, w: bool = False):
        self.a, self.b, self.c2, self.w = a, b, c2, w

    def __add__(self, other: Surd) -> Surd:
        return Surd(self.a + other.a, self.b + other.b, self.c2, self.w or other.w)

    def __sub__(self, other: Surd) -> Surd:
        return Surd(self.a - other.a, self.b - other.b, self.c2, self.w or other.w)

    def __mul__(self, other: Surd) -> Surd:
        a, b, x, y = self.a, self.b, other.a, other.b
        # a product with an input's exact 0 (or a masked weight) is exactly 0, whatever the other factor
        w = (self.w or other.w) and not (not self.w and not a and not b) and not (not other.w and not x and not y)
        if not b and not y:
            return Surd(a * x, b, self.c2, w)
        return Surd(a * x + b * y * self.c2, a * y + b * x, self.c2, w)

    @property
    def rational(self) -> Fraction | None:
        return None if self.b else _fraction(self.a)


class Limits:
    """The algebra of :class:`Surd`: scale c (rational, or with c² rational)."""

    def __init__(self, c: Fraction | None, square: Fraction):
        self.c2 = c2 = _Q(square.numerator, square.denominator)
        self._0 = _Q(0)
        self.zero = Surd(self._0, self._0, c2)
        self.c = Surd(_Q(c.numerator, c.denominator), self._0, c2) if c is not None else Surd(self._0, _Q(1), c2)

    def const(self, x: Fraction) -> Surd:
        return Surd(_Q(x.numerator, x.denominator), self._0, self.c2)

    def scale(self, x: Surd) -> Surd:
        return x * self.c


def limit_weights(alg: Limits, model: Model) -> Grid:
    """The weights as u → ∞: uniform over each row's highest allowed scores, 0 elsewhere (masked: the
    exact 0, which no weight went into)."""
    rows = model.score_integers[1]
    out = []
    for i, row in enumerate(rows):
        ok = [j for j in range(len(row)) if model.may_attend(i, j)]
        top = max(row[j] for j in ok)
        tops = {j for j in ok if row[j] == top}
        share, low = alg.const(Fraction(1, len(tops))), Surd(alg._0, alg._0, alg.c2, True)
        share.w = True
        out.append([share if j in tops else low if j in ok else alg.zero for j in range(len(row))])
    return out


def holds(box: Any, r: Fraction) -> bool:
    """Whether the enclosure [lo, hi]·2^−bits holds r."""
    scaled = r.numerator << box.bits
    return box.lo * r.denominator <= scaled <= box.hi * r.denominator


# --- the gradients as a graph, evaluated entry by entry -----------------------------------

_CONST, _WEIGHT, _ADD, _SUB, _MUL, _SCALE = range(6)


class Node:
    """One operation of the gradients: made by :class:`Lazy`, evaluated by :func:`evaluate`."""

    __slots__ = ("op", "a", "b")

    def __init__(self, op: int, a: Any, b: Any = None):
        self.op, self.a, self.b = op, a, b

    def __add__(self, other: Node) -> Node:
        if other.op == _CONST and self.op == _CONST:
            return Node(_CONST, self.a + other.a)
        if other.op == _CONST and not other.a:
            return self
        if self.op == _CONST and not self.a:
            return other
        return Node(_ADD, self, other)

    def __sub__(self, other: Node) -> Node:
        if other.op == _CONST and self.op == _CONST:
            return Node(_CONST, self.a - other.a)
        if other.op == _CONST and not other.a:
            return self
        return Node(_SUB, self, other)

    def __mul__(self, other: Node) -> Node:
        if other.op == _CONST and self.op == _CONST:
            return Node(_CONST, self.a * other.a)
        if (other.op == _CONST and not other.a) or (self.op == _CONST and not self.a):
            return ZERO
        return Node(_MUL, self, other)


ZERO = Node(_CONST, Fraction(0))


class Lazy:
    """The algebra of :class:`Node`: constants fold as they are made; weights are leaves."""

    zero = ZERO

    @staticmethod
    def const(x: Fraction) -> Node:
        return Node(_CONST, x)

    @staticmethod
    def scale(x: Node) -> Node:
        return x if x.op == _CONST and not x.a else Node(_SCALE, x)


def lazy_weights(heads: Sequence[Model]) -> list[Grid]:
    """Each head's weights as leaves (h, i, j); masked ones are the constant 0."""
    return [
        [
            [Node(_WEIGHT, (h, i, j)) if model.may_attend(i, j) else ZERO for j in range(model.n_keys)]
            for i in range(model.n_queries)
        ]
        for h, model in enumerate(heads)
    ]


def evaluate(node: Node, alg: Any, weights: Sequence[Grid], memo: dict[int, Any]) -> Any:
    """The node in ``alg`` (weights[h][i][j] its weights), each node made once across calls (``memo``,
    by id: the graph outlives the memo). Iterative: chains of sums are deeper than Python's stack."""
    stack = [node]
    while stack:
        top = stack[-1]
        if id(top) in memo:
            stack.pop()
            continue
        op = top.op
        if op == _CONST:
            memo[id(top)] = alg.const(top.a) if top.a else alg.zero
        elif op == _WEIGHT:
            h, i, j = top.a
            memo[id(top)] = weights[h][i][j]
        elif op == _SCALE:
            if id(top.a) not in memo:
                stack.append(top.a)
                continue
            memo[id(top)] = alg.scale(memo[id(top.a)])
        else:
            missing = [x for x in (top.a, top.b) if id(x) not in memo]
            if missing:
                stack.extend(missing)
                continue
            a, b = memo[id(top.a)], memo[id(top.b)]
            memo[id(top)] = a + b if op == _ADD else a - b if op == _SUB else a * b
        stack.pop()
    return memo[id(node)]


__all__ = ["Lazy", "Limits", "Node", "Surd", "evaluate", "holds", "lazy_weights", "limit_weights"]
