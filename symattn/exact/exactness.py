"""Which gradients are rational, decided exactly by a third algebra: exponential polynomials.

Every weight is e^{c q_j} / Σ_k e^{c q_k} with c the scale and q rational, so every gradient is a
sum of fractions P / Π s̃^p, where P is a sum of rational multiples of e^{c q} and
s̃ a row's sum of exps relative to its maximum; by Lindemann–Weierstrass such a
fraction is a rational r exactly when P equals r times the expanded denominator.
Masked entries have weight exactly 0, so their gradients are exactly 0. Past the work
limits (PRODUCT_WORK, EXACTNESS_WORK, EXPANDED_TERMS, COMBINE_WORK) an entry is left undecided.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import sympy

from symattn.exact import numeric
from symattn.exact.gradients import Grid
from symattn.exact.model import Model
from symattn.input.limits import COMBINE_WORK, EXACTNESS_WORK, EXPANDED_TERMS, PRODUCT_WORK

Poly = dict  # exponent q (Fraction) -> rational coefficient: Σ coeff · e^{c q}
Base = tuple  # a row's s̃ = Σ_k e^{c (q_k − max)}, as sorted (exponent, multiplicity) pairs


def _padd(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for k, v in b.items():
        x = out.get(k, 0) + sign * v
        if x:
            out[k] = x
        else:
            out.pop(k, None)
    return out


def _pmul_bounded(a: Poly, b: Poly) -> Poly:
    """A product made while deciding exactness: past PRODUCT_WORK, the entry is left undecided."""
    if len(a) * len(b) > PRODUCT_WORK:
        raise Undecided
    return _pmul(a, b)


work = [0]  # term products made by the current exactness run


def _pmul(a: Poly, b: Poly) -> Poly:
    work[0] += len(a) * len(b)
    if work[0] > EXACTNESS_WORK:
        raise Undecided
    out: Poly = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = ka + kb
            out[k] = out.get(k, 0) + va * vb
    return {k: v for k, v in out.items() if v}


@lru_cache(maxsize=4096)
def power(base: Base, p: int) -> tuple | None:
    """base^p expanded (as sorted items), or None past EXPANDED_TERMS."""
    out: Poly = {Fraction(0): Fraction(1)}
    poly = {k: Fraction(v) for k, v in base}
    for _ in range(p):
        if len(out) * len(poly) > PRODUCT_WORK:
            return None
        out = _pmul(out, poly)
        if len(out) > EXPANDED_TERMS:
            return None
    return tuple(sorted(out.items()))


def _expand(bases: tuple, powers: tuple) -> Poly | None:
    out: Poly = {Fraction(0): Fraction(1)}
    for base, p in zip(bases, powers):
        factor = power(base, p)
        if factor is None or len(out) * len(factor) > PRODUCT_WORK:
            return None
        out = _pmul(out, dict(factor))
        if len(out) > EXPANDED_TERMS:
            return None
    return out


class _Exp:
    """Σ over parts of P / Π s̃^p (a part with ``scaled`` = 1 is multiplied by the irrational scale)."""

    __slots__ = ("parts", "alg")

    def __init__(self, parts: dict, alg: Exps):
        self.parts = parts  # (scaled, bases) -> (powers, Poly)
        self.alg = alg

    def _merge(self, other: _Exp, sign: int) -> _Exp:
        parts = dict(self.parts)
        for key, (powers, poly) in other.parts.items():
            _accumulate(parts, key, powers, poly, sign)
        return _Exp(parts, self.alg)

    def __add__(self, other: _Exp) -> _Exp:
        return self._merge(other, 1)

    def __sub__(self, other: _Exp) -> _Exp:
        return self._merge(other, -1)

    def __mul__(self, other: _Exp) -> _Exp:
        parts: dict = {}
        for (s1, b1), (p1, n1) in self.parts.items():
            for (s2, b2), (p2, n2) in other.parts.items():
                powers = dict(zip(b1, p1))
                for b, p in zip(b2, p2):
                    powers[b] = powers.get(b, 0) + p
                bases = tuple(sorted(powers))
                poly = _pmul(n1, n2)
                scaled = s1 + s2
                if scaled == 2:  # c² is rational: 1/d_k
                    scaled, poly = 0, {k: v * self.alg.c2 for k, v in poly.items()}
                if poly:
                    _accumulate(parts, (scaled, bases), tuple(powers[b] for b in bases), poly, 1)
        return _Exp(parts, self.alg)


def _accumulate(parts: dict, key: tuple, powers: tuple, poly: Poly, sign: int) -> None:
    if key not in parts:
        parts[key] = (powers, poly if sign > 0 else {k: -v for k, v in poly.items()})
        return
    old_powers, old = parts[key]
    top = tuple(max(a, b) for a, b in zip(old_powers, powers))
    total = _padd(_raise(old, key[1], old_powers, top), _raise(poly, key[1], powers, top), sign)
    if total:
        parts[key] = (top, total)
    else:
        del parts[key]


def _raise(poly: Poly, bases: tuple, powers: tuple, top: tuple) -> Poly:
    for base, p, q in zip(bases, powers, top):
        if q > p:
            poly = _pmul(poly, dict(power(base, q - p) or _too_many()))
    return poly


def _too_many():
    raise Undecided


class Undecided(Exception):
    """Exactness not decided within EXPANDED_TERMS: the entry is treated as irrational."""


class Exps:
    zero: _Exp

    def __init__(self, scale: sympy.Expr):
        self.zero = _Exp({}, self)
        rational = numeric.as_fraction(scale)
        self.c_rational = rational
        self.c2 = numeric.as_fraction(sympy.expand(scale**2))

    def const(self, x: Fraction) -> _Exp:
        return _Exp({(0, ()): ((), {Fraction(0): x})} if x else {}, self)

    def trig(self, angle: sympy.Expr) -> tuple[_Exp, _Exp]:
        raise Undecided  # a rotation's cos and sin are no exponential polynomials: left undecided (irrational)

    def scale(self, x: _Exp) -> _Exp:
        if self.c_rational is not None:
            return x * self.const(self.c_rational)
        parts: dict = {}
        for (s, bases), (powers, poly) in x.parts.items():
            if s:
                _accumulate(parts, (0, bases), powers, {k: v * self.c2 for k, v in poly.items()}, 1)
            else:
                _accumulate(parts, (1, bases), powers, poly, 1)
        return _Exp(parts, self)

    def weights(self, model: Model) -> Grid:
        if model.parts:  # its z is no n·scale/den: no exponential polynomials of the integers
            raise Undecided
        den, rows = model.score_integers
        out = []
        for i, row in enumerate(rows):
            ok = [j for j in range(len(row)) if model.may_attend(i, j)]
            top = max(row[j] for j in ok)
            exps = {j: Fraction(row[j] - top, den) for j in ok}
            counts: dict = {}
            for q in exps.values():
                counts[q] = counts.get(q, 0) + 1
            base = tuple(sorted(counts.items()))
            out.append(
                [
                    _Exp({(0, (base,)): ((1,), {exps[j]: Fraction(1)})}, self) if j in exps else self.zero
                    for j in range(len(row))
                ]
            )
        return out


def rational(x: _Exp) -> Fraction | None:
    """The exact value of an entry if rational; None if irrational (or not decided)."""
    try:
        scaled = [(b, p, n) for (s, b), (p, n) in x.parts.items() if s]
        if scaled and _group_value(scaled) != 0:  # c·r + (rational) is irrational for r ≠ 0
            return None
        return _group_value([(b, p, n) for (s, b), (p, n) in x.parts.items() if not s])
    except Undecided:
        return None


def _ratio(num: Poly, den: Poly) -> Fraction | None:
    """r with num = r · den, if any."""
    if len(num) != len(den):
        return None
    top = max(den)
    if top not in num:
        return None
    r = num[top] / den[top]
    return r if all(num.get(k) == r * v for k, v in den.items()) else None


def _group_value(groups: list) -> Fraction | None:
    total = Fraction(0)
    irrational = []
    for bases, powers, poly in groups:
        expanded = _expand(bases, powers)
        if expanded is None:
            raise Undecided
        r = _ratio(poly, expanded)
        if r is None:
            irrational.append((poly, expanded))
        else:
            total += r
    if not irrational:
        return total
    if len(irrational) == 1:
        return None  # a rational plus one irrational fraction
    num: Poly = {}
    den: Poly = {Fraction(0): Fraction(1)}
    spent = 0
    for poly, d in irrational:  # bring every fraction over one denominator
        spent += (len(num) + len(poly) + len(den)) * len(d) + len(poly) * len(den)
        if spent > COMBINE_WORK:
            raise Undecided
        num = _padd(_pmul(num, d), _pmul(poly, den))
        den = _pmul(den, d)
        if len(num) > EXPANDED_TERMS or len(den) > EXPANDED_TERMS:
            raise Undecided
    if not num:
        return total
    r = _ratio(num, den)
    return None if r is None else total + r


def proved_rational(x: sympy.Expr, lo: Fraction, hi: Fraction) -> Fraction | None:
    """x's value where it is proved rational, from its closed form and an enclosure [lo, hi]: a closed form
    SymPy writes as a rational, or a rational of small denominator in [lo, hi] that x minus it cancels to
    0 with each e^z, cos, sin and tanh taken as an independent symbol; None elsewhere."""
    known = numeric.as_fraction(x)
    if known is not None:
        return known
    if hi - lo > Fraction(1, 1 << 40):
        return None
    guess = ((lo + hi) / 2).limit_denominator(10**6)
    if not lo <= guess <= hi:
        return None
    # the exps of each product merged (e^a · e^b = e^(a + b), as powsimp would, but asking SymPy no exponent's
    # sign: an evalf each, a minute for two heads of MLA's decoupled position dims), then each e^z, cos, sin and tanh an
    # independent symbol
    x = x.replace(_exp_product, _merged)
    atoms = sorted(x.atoms(sympy.exp), key=sympy.default_sort_key)
    formal = x.xreplace({a: sympy.Dummy() for a in atoms})
    trig = sorted(formal.atoms(sympy.cos, sympy.sin, sympy.tanh), key=sympy.default_sort_key)
    formal = formal.xreplace({a: sympy.Dummy() for a in trig}) - sympy.Rational(guess.numerator, guess.denominator)
    # one fraction whose numerator is the zero polynomial is 0 (SymPy's cancel, 10x slower, only where not)
    return guess if _vanishes(formal) or sympy.cancel(formal) == 0 else None


def _vanishes(x: sympy.Expr) -> bool:
    """Whether x is 0 as a rational function of its symbols and its other atoms (√2, e, ...): brought over one
    denominator by polynomial arithmetic, with no gcd; False where undecided (a power's base 0, or too big)."""
    from sympy.polys.domains import QQ
    from sympy.polys.rings import ring

    opaque = {a: sympy.Dummy() for a in _opaque(x)}
    gens = sorted(x.free_symbols | set(opaque.values()), key=sympy.default_sort_key)
    if not gens:
        return x == 0
    R, *symbols = ring(gens, QQ)
    index = {g: s for g, s in zip(gens, symbols)}
    memo: dict[sympy.Expr, tuple] = {}

    def frac(e: sympy.Expr) -> tuple:
        if e not in memo:
            memo[e] = _fraction(e, frac, R, index[opaque.get(e, e)] if e in opaque or e in index else None)
        return memo[e]

    try:
        return not frac(x)[0]
    except _TooBig:
        return False


def _fraction(e: sympy.Expr, frac, R, symbol) -> tuple:
    """(numerator, denominator) of e from its parts' (``frac``), as polynomials of the ring R."""
    from sympy.polys.domains import QQ

    if symbol is not None:
        return symbol, R.one
    if e.is_Rational:
        return R(QQ(int(e.p))), R(QQ(int(e.q)))
    if e.is_Pow:  # a whole power (the rest are opaque)
        n, d = frac(e.base)
        k = int(e.exp)
        if k < 0:
            if not n:
                raise _TooBig
            n, d, k = d, n, -k
        return n**k, d**k
    (n, d), *parts = [frac(a) for a in e.args]
    for pn, pd in parts:
        if e.is_Mul:
            n, d = n * pn, d * pd
        elif d == pd:
            n = n + pn
        else:
            n, d = n * pd + pn * d, d * pd
        if len(n) + len(d) > VANISH_TERMS:
            raise _TooBig
    return n, d


class _TooBig(Exception):
    """A fraction past VANISH_TERMS terms, or a division by a zero polynomial: left to SymPy's cancel."""


VANISH_TERMS = 20_000  # terms of a numerator and a denominator together, before cancel takes over


def _opaque(x: sympy.Expr) -> set[sympy.Expr]:
    """The atoms of x that polynomial arithmetic takes as symbols: all but rationals, symbols, sums, products
    and whole powers (√2, e, π)."""
    if x.is_Rational or x.is_Symbol:
        return set()
    if x.is_Add or x.is_Mul:
        return set().union(*(_opaque(a) for a in x.args))
    if x.is_Pow and x.exp.is_Integer:
        return _opaque(x.base)
    return {x}


def _exponent(f: sympy.Expr) -> sympy.Expr | None:
    """z where f is e^z (or a power of it, or of e), None elsewhere."""
    if isinstance(f, sympy.exp):
        return f.args[0]
    if f is sympy.E:
        return sympy.S.One
    if f.is_Pow and (isinstance(f.base, sympy.exp) or f.base is sympy.E):
        inner = _exponent(f.base)
        return None if inner is None else inner * f.exp
    return None


def _exp_product(e: sympy.Expr) -> bool:
    return e.is_Mul and sum(_exponent(f) is not None for f in e.args) > 1


def _merged(e: sympy.Expr) -> sympy.Expr:
    exponents = [z for z in map(_exponent, e.args) if z is not None]
    rest = [f for f in e.args if _exponent(f) is None]
    return sympy.Mul(sympy.exp(sympy.Add(*exponents)), *rest)
