"""Every value a forward quantity can take when each typed input stands for any number that rounds to it.

With ``inputs = "rounded"``, an input typed ``0.1235`` is any x with 0.12345 <= x <= 0.12355 (a
fraction, ``1/3``, is exact). :class:`Enclosure` carries those intervals through one head's forward
pass (from X and the W where Q, K and V are projected) in exact rational interval arithmetic: sums
and products of intervals, e^x through its exact bounds (e^x is monotone), each weight as
1 / Σ_k e^(z_k − z_j) so that the query's entries count once. The result encloses every reachable
value (it may be a little wider, never narrower). Nothing is sampled.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cached_property

import sympy

from symattn.input.numeral import Numeral
from symattn.input.reader import Entry
from symattn.input.spec import Spec

Interval = tuple[Fraction, Fraction]
_DIGITS = 40  # the digits of each irrational bound, before it is widened outward by one unit more
ROUNDED_QUANTITIES = ("Q", "K", "V", "scores", "scaled", "shifted", "exp", "exp_sum", "weights", "percent", "output")
# the online softmax's (block_keys) and the log-sum-exp: row b of running_max, rescale and running_sum is block
# b (the column the query), row b·n + i of the accumulator is block b and query i
TILED = ("lse", "running_max", "rescale", "running_sum", "accumulator")


def _outward(x: sympy.Expr) -> Interval:
    """Rational bounds of a real constant: its digits, widened by more than their error."""
    value = Fraction(str(sympy.N(x, _DIGITS + 10)))
    slack = abs(value) * Fraction(1, 10**_DIGITS) + Fraction(1, 10 ** (2 * _DIGITS))
    return value - slack, value + slack


def _add(a: Interval, b: Interval) -> Interval:
    return a[0] + b[0], a[1] + b[1]


def _sub(a: Interval, b: Interval) -> Interval:
    return a[0] - b[1], a[1] - b[0]


def _mul(a: Interval, b: Interval) -> Interval:
    products = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(products), max(products)


def _exp(a: Interval) -> Interval:
    return _outward(sympy.exp(_rational(a[0])))[0], _outward(sympy.exp(_rational(a[1])))[1]


def _rational(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)


def _total(terms: list[Interval]) -> Interval:
    out = (Fraction(0), Fraction(0))
    for t in terms:
        out = _add(out, t)
    return out


def typed(x: Entry) -> Interval:
    """The numbers that round to a typed input at its typed decimals (a fraction: itself)."""
    assert isinstance(x, Numeral)  # the checker's spec has numbers only: values are substituted for symbols
    if x.decimals is None:
        return x.value, x.value
    half = Fraction(1, 2 * 10**x.decimals)
    return x.value - half, x.value + half


def is_supported(spec: Spec) -> bool:
    """Enclosures cover one head, with Q, K and V typed or projected from X (no W_O), and only the parts
    they cover (a mask's; symattn.variants says which)."""
    from symattn import variants

    return spec.heads == 1 and spec.W_O is None and variants.rounded_refusal(spec) is None


def _projected(X: list[list[Interval]], W: list[list[Interval]], b: list[Interval] | None) -> list[list[Interval]]:
    """X W + b, entry by entry (each X entry is used once per entry of the product, so this is tight)."""
    zero = (Fraction(0), Fraction(0))
    bias = [zero] * len(W[0]) if b is None else b
    cols = range(len(W[0]))
    return [[_add(_total([_mul(row[m], W[m][j]) for m in range(len(W))]), bias[j]) for j in cols] for row in X]


class Enclosure:
    """The intervals of one head's forward quantities, from the typed inputs' intervals."""

    def __init__(self, spec: Spec, model):
        self.spec = spec
        self.model = model  # the exact model: its mask and the row maxima of the stable softmax
        P = spec.projection
        if P is None:
            self.Q, self.K, self.V = ([[typed(x) for x in row] for row in m] for m in (spec.Q, spec.K, spec.V))
        else:  # spec.Q holds the exact products: the typed numbers are X, the W and the b

            def typed_rows(m):
                return [[typed(x) for x in row] for row in m]

            self.Q, self.K, self.V = (
                _projected(typed_rows(X), typed_rows(W), None if b is None else [typed(x) for x in b])
                for X, W, b in (P.weights(name) for name in ("Q", "K", "V"))
            )
        self._cache: dict[tuple, Interval] = {}

    @cached_property
    def scale(self) -> Interval:
        return _outward(self.model.scale)

    def keys(self, i: int) -> list[int]:
        return [j for j in range(len(self.K)) if self.model.may_attend(i, j)]

    def difference(self, i: int, k: int, j: int) -> Interval:
        """z_ik − z_ij, with each entry of the query once: Σ_m q_m (K_km − K_jm) · scale."""
        q = self.Q[i]
        dot = _total([_mul(q[m], _sub(self.K[k][m], self.K[j][m])) for m in range(len(q))])
        return _mul(dot, self.scale)

    @cached_property
    def tiles(self):
        """The online softmax's blocks and the key of each running max (the exact model's, as ``shifted`` takes
        the exact row maximum)."""
        from symattn import variants

        return variants.view(self.spec, "lse", self.model)

    def _tiled(self, quantity: str, b: int, i: int, c: int) -> Interval | None:
        """Block b's running max, rescale, running sum or accumulator column c of query i; the log-sum-exp of
        row i (b = 0); None where the value is −∞ (no key seen yet: nothing rounds to it)."""
        if quantity == "lse":  # log Σ_k e^(z_ik): monotone in each z
            keys = self.keys(i)
            if not keys:
                return None
            low, high = _total([_exp(self.at("scaled", i, k)) for k in keys])
            return _outward(sympy.log(_rational(low)))[0], _outward(sympy.log(_rational(high)))[1]
        tiles = self.tiles
        seen, top = tiles.seen(i, b), tiles.argmax[b][i]
        if quantity == "running_max":
            if top is None:
                return None
            boxes = [self.at("scaled", i, k) for k in seen]
            return max(x[0] for x in boxes), max(x[1] for x in boxes)
        if quantity == "rescale":  # e^(m_old − m_new) ≤ 1: 0 before the first key, 1 while none is seen
            old = tiles.argmax[b - 1][i] if b > 0 else None
            if top is None or old is None:
                one = Fraction(1 if top is None else 0)
                return one, one
            low, high = _exp(self.difference(i, old, top))
            return min(low, Fraction(1)), min(high, Fraction(1))
        if top is None:
            zero = Fraction(0)
            return zero, zero
        terms = [_exp(self.difference(i, k, top)) for k in seen]  # e^(z_k − m), the query counted once
        if quantity == "running_sum":
            return _total(terms)
        return _total([_mul(t, self.V[k][c]) for t, k in zip(terms, seen)])

    def reach(self, quantity: str, i: int, j: int) -> Interval | None:
        """The interval of one claimed entry, at the checker's (row, column) of it; None where no number is
        reachable (a running max of no key)."""
        if quantity not in TILED:
            return self.at(quantity, i, j)
        n = len(self.Q)
        if quantity == "lse":
            return self._tiled(quantity, 0, i, 0)
        b, query, c = (i // n, i % n, j) if quantity == "accumulator" else (i, j, 0)
        return self._tiled(quantity, b, query, c)

    def term(self, quantity: str, i: int, j: int, t: int) -> Interval:
        """Term t of a score (q_it·k_jt) or of an output entry (p_it·v_tj): a partial product."""
        if quantity == "scores":
            return _mul(self.Q[i][t], self.K[j][t])
        if not self.model.may_attend(i, t):  # a masked key's weight is 0
            return Fraction(0), Fraction(0)
        return _mul(self.at("weights", i, t), self.V[t][j])

    def at(self, quantity: str, i: int, j: int) -> Interval:
        """The interval of one entry (``exp_sum``: j is ignored; ``percent`` is the weight)."""
        key = (quantity, i, j)
        if key not in self._cache:
            self._cache[key] = self._compute(quantity, i, j)
        return self._cache[key]

    def _compute(self, quantity: str, i: int, j: int) -> Interval:
        stable = self.spec.softmax == "stable"
        if quantity in ("Q", "K", "V"):
            return getattr(self, quantity)[i][j]
        if quantity == "scores":
            return _total([_mul(self.Q[i][m], self.K[j][m]) for m in range(len(self.Q[i]))])
        if quantity == "scaled":
            return _mul(self.at("scores", i, j), self.scale)
        if quantity == "shifted":
            return self.difference(i, j, self.model.row_max[i])
        if quantity == "exp":
            return _exp(self.at("shifted" if stable else "scaled", i, j))
        if quantity == "exp_sum":
            return _total([self.at("exp", i, k) for k in self.keys(i)])
        if quantity in ("weights", "percent"):
            # 1 / Σ_k e^(z_k − z_j): the terms share the query once, not once per exp
            low, high = _total([_exp(self.difference(i, k, j)) for k in self.keys(i)])
            return 1 / high, 1 / low
        if quantity == "output":
            return _total([_mul(self.at("weights", i, k), self.V[k][j]) for k in self.keys(i)])
        raise ValueError(quantity)  # pragma: no cover - callers ask for ROUNDED_QUANTITIES only


def explains(interval: Interval | None, claim: Numeral) -> bool:
    """Whether some value in the interval rounds to the claim at its decimals."""
    assert claim.decimals is not None  # a fraction claims exactness: rounding explains nothing
    if interval is None:
        return False
    half = Fraction(1, 2 * 10**claim.decimals)
    return interval[0] <= claim.value + half and claim.value - half <= interval[1]


def depends_on(spec: Spec, quantity: str, i: int, j: int) -> tuple[str, ...]:
    """The inputs a forward entry is computed from, named for the report: ``Q[3]`` (a row), ``K``, ``V[:,1]``;
    with projections ``X[3]``, ``W_Q``, ``W_K[:,1]``."""
    if quantity in TILED:  # as the query's weights (lse) or its output column (the accumulator)
        n = len(spec.Q)
        i, j = (i % n, j) if quantity == "accumulator" else (i, 0) if quantity == "lse" else (j, 0)
        quantity = "output" if quantity == "accumulator" else "weights"
    P = spec.projection
    if P is not None:
        keys = "X" if P.X_kv is None else "X_kv"
        if quantity in ("Q", "K", "V"):
            source = "X" if quantity == "Q" else keys
            return (f"{source}[{i + 1}]", f"W_{quantity}[:,{j + 1}]") + (
                (f"b_{quantity}",) if getattr(P, f"b_{quantity}") is not None else ()
            )
        out = [f"X[{i + 1}]", "W_Q"] + ([] if keys == "X" else [keys]) + ["W_K"]
        out += [f"W_V[:,{j + 1}]"] if quantity == "output" else []
        return tuple(out + [f"b_{n}" for n in "QKV" if getattr(P, f"b_{n}") is not None])
    out = [f"Q[{i + 1}]"]
    out.append(f"K[{j + 1}]" if quantity in ("scores", "scaled") else "K")
    if quantity == "output":
        out.append(f"V[:,{j + 1}]")
    return tuple(out)


__all__ = ["Enclosure", "Interval", "ROUNDED_QUANTITIES", "TILED", "depends_on", "explains", "is_supported", "typed"]
