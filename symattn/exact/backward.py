"""The backward pass: every gradient of attention as an exact quantity.

    dO = dL/dO               ones (L = Σ O), O − T (L = ½ Σ (O − T)²), or given
    dV = Aᵀ dO               dA = dO Vᵀ
    dZ = A ⊙ (dA − rowsum(dA ⊙ A))      the softmax Jacobian, row by row
    dS = scale · dZ          dQ = dS K          dK = dSᵀ Q
    then W_O (several heads), and the projections: dW = Xᵀ dQ, db = Σ_rows dQ, dX.

The formulas are written once (:func:`_gradients`) over an *algebra*, and run in
three: SymPy closed forms (``exact``), enclosures at a binary precision (the
numbers, correctly rounded by :class:`~symattn.exact.model.Rounding`), and exponential
polynomials, which decide exactly which entries are rational. Every weight is
e^{c q_j} / Σ_k e^{c q_k} with c the scale and q rational, so every gradient is a
sum of fractions P / Π s̃^p, where P is a sum of rational multiples of e^{c q} and
s̃ a row's sum of exps relative to its maximum; by Lindemann–Weierstrass such a
fraction is a rational r exactly when P equals r times the expanded denominator.
Masked entries have weight exactly 0, so their gradients are exactly 0.
The stable softmax gives the same weights, hence the same gradients. The model
makes no strings.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any, Callable, ClassVar, Iterable, Iterator, Sequence

import sympy
from sympy import ImmutableMatrix

from symattn.input import limits
from symattn.exact import numeric
from symattn.input.errors import LimitError, SpecError
from symattn.exact.base import AttentionModel, Rounding
from symattn.exact.model import Model
from symattn.input.limits import COMBINE_WORK, EXACTNESS_WORK, EXPANDED_TERMS, PRODUCT_WORK
from symattn.exact.numeric import Fixed
from symattn.input.spec import Spec

HEAD_QUANTITIES = ("dO", "dV", "dA", "dot", "dZ", "dS", "dQ", "dK")  # "dot": rowsum(dA ⊙ A), one column
BIASES = ("db_Q", "db_K", "db_V", "db_O")


# --- the formulas, once, over any algebra -----------------------------------------

Grid = list  # a matrix: a list of rows of algebra elements


def _sum(alg, items: Iterable) -> Any:
    total = None
    for x in items:
        total = x if total is None else total + x
    return alg.zero if total is None else total


def _matmul(alg, A: Grid, B: Grid) -> Grid:
    """A B for matrices of elements."""
    return [[_sum(alg, (row[t] * B[t][k] for t in range(len(B)))) for k in range(len(B[0]))] for row in A]


def _T(A: Grid) -> Grid:
    return [list(col) for col in zip(*A)]


def _consts(alg, rows: Sequence[Sequence[Fraction]]) -> Grid:
    return [[alg.const(x) for x in row] for row in rows]


@dataclass(frozen=True)
class _Inputs:
    """The exact inputs of the backward pass, as rationals (weights come from the algebra)."""

    V: tuple[tuple[tuple[Fraction, ...], ...], ...]  # per head
    K: tuple[tuple[tuple[Fraction, ...], ...], ...]
    Q: tuple[tuple[tuple[Fraction, ...], ...], ...]
    W_O: tuple[tuple[Fraction, ...], ...] | None
    b_O: tuple[Fraction, ...] | None
    loss: str
    dO: tuple[tuple[Fraction, ...], ...] | None  # given, or all ones
    target: tuple[tuple[Fraction, ...], ...] | None
    X: tuple[tuple[Fraction, ...], ...] | None
    X_kv: tuple[tuple[Fraction, ...], ...] | None
    W: dict | None  # "Q", "K", "V" -> weight matrix
    biases: tuple[str, ...]  # "Q", "K", "V" with a bias


def _head_gradients(alg, A: Grid, V: Grid, K: Grid, Q: Grid, dO: Grid, hook: Callable) -> dict[str, Grid]:
    """One head's gradients, each passed through ``hook`` (hand rounding replaces it by what is shown)."""
    n, m = len(A), len(A[0])
    out = {"dO": dO}
    out["dV"] = hook("dV", _matmul(alg, _T(A), dO))
    out["dA"] = dA = hook("dA", _matmul(alg, dO, _T(V)))
    out["dot"] = dot = hook("dot", [[_sum(alg, (dA[i][k] * A[i][k] for k in range(m)))] for i in range(n)])
    out["dZ"] = dZ = hook("dZ", [[A[i][j] * (dA[i][j] - dot[i][0]) for j in range(m)] for i in range(n)])
    out["dS"] = dS = hook("dS", [[alg.scale(x) for x in row] for row in dZ])
    out["dQ"] = hook("dQ", _matmul(alg, dS, K))
    out["dK"] = hook("dK", _matmul(alg, _T(dS), Q))
    return out


def _gradients(alg, inputs: _Inputs, weights: Sequence[Grid], hook: Callable = lambda name, m: m) -> dict[str, Grid]:
    """Every gradient; per-head ones are named ``name@h`` (h from 0) when there are several heads or W_O."""
    heads = len(weights)
    Vs = [_consts(alg, v) for v in inputs.V]
    outputs = [_matmul(alg, A, V) for A, V in zip(weights, Vs)]
    concat = [sum((o[i] for o in outputs), []) for i in range(len(outputs[0]))]
    out: dict[str, Grid] = {}
    if inputs.loss == "mse":
        O = concat
        if inputs.W_O is not None:
            concat = hook("concat", concat)
            O = _matmul(alg, concat, _consts(alg, inputs.W_O))
            if inputs.b_O is not None:
                O = [[x + alg.const(b) for x, b in zip(row, inputs.b_O)] for row in O]
        O = hook("O", O)
        dO = [[o - alg.const(t) for o, t in zip(row, trow)] for row, trow in zip(O, inputs.target)]
    else:
        dO = _consts(alg, inputs.dO)
        if inputs.W_O is not None:
            concat = hook("concat", concat)
    out["dO"] = dO = hook("dO", dO)
    split = heads > 1 or inputs.W_O is not None
    if inputs.W_O is not None:
        out["dW_O"] = hook("dW_O", _matmul(alg, _T(concat), dO))
        if inputs.b_O is not None:
            out["db_O"] = hook("db_O", [[_sum(alg, col) for col in zip(*dO)]])
        dO = out["dconcat"] = hook("dconcat", _matmul(alg, dO, _T(_consts(alg, inputs.W_O))))
    per_head = []
    first = 0
    for h, A in enumerate(weights):
        width = len(inputs.V[h][0])
        dO_h = [row[first:first + width] for row in dO]
        first += width
        prefix = (lambda name, m, h=h: hook(f"{name}@{h}", m)) if split else hook
        grads = _head_gradients(alg, A, Vs[h], _consts(alg, inputs.K[h]), _consts(alg, inputs.Q[h]), dO_h, prefix)
        per_head.append(grads)
        if split:
            out.update({f"{name}@{h}": m for name, m in grads.items()})
    if split:
        for name in ("dQ", "dK", "dV"):
            out[name] = [sum((g[name][i] for g in per_head), []) for i in range(len(per_head[0][name]))]
    else:
        out.update(per_head[0])
    if inputs.X is not None:
        _projections(alg, inputs, out, hook)
    return out


def _projections(alg, inputs: _Inputs, out: dict[str, Grid], hook: Callable) -> None:
    X = _consts(alg, inputs.X)
    X_kv = X if inputs.X_kv is None else _consts(alg, inputs.X_kv)
    for name, source in (("Q", X), ("K", X_kv), ("V", X_kv)):
        grad = out[f"d{name}"]
        out[f"dW_{name}"] = hook(f"dW_{name}", _matmul(alg, _T(source), grad))
        if name in inputs.biases:
            out[f"db_{name}"] = hook(f"db_{name}", [[_sum(alg, col) for col in zip(*grad)]])
    W = {name: _T(_consts(alg, inputs.W[name])) for name in ("Q", "K", "V")}
    from_q = _matmul(alg, out["dQ"], W["Q"])
    from_kv = _matmul(alg, out["dK"], W["K"])
    from_kv = [[a + b for a, b in zip(r, s)] for r, s in zip(from_kv, _matmul(alg, out["dV"], W["V"]))]
    if inputs.X_kv is None:
        out["dX"] = hook("dX", [[a + b for a, b in zip(r, s)] for r, s in zip(from_q, from_kv)])
    else:
        out["dX"] = hook("dX", from_q)
        out["dX_kv"] = hook("dX_kv", from_kv)


def _jacobian(alg, A: Grid) -> Grid:
    """∂α_j/∂z_k = α_j(δ_jk − α_k) of every row: row i·m + j, column k."""
    one, zero = alg.const(Fraction(1)), alg.zero
    m = len(A[0])
    return [[row[j] * ((one if j == k else zero) - row[k]) for k in range(m)] for row in A for j in range(m)]


# --- algebra 1: SymPy closed forms --------------------------------------------------

class _SymPy:
    zero = sympy.Integer(0)

    def __init__(self, scale: sympy.Expr):
        self.c = scale

    @staticmethod
    def const(x: Fraction) -> sympy.Rational:
        return sympy.Rational(x.numerator, x.denominator)

    def scale(self, x: sympy.Expr) -> sympy.Expr:
        return x * self.c


# --- algebra 2: enclosures ---------------------------------------------------------

class _Box:
    """[lo, hi] · 2^−bits with integer ends; arithmetic rounds outward."""

    __slots__ = ("lo", "hi", "bits")

    def __init__(self, lo: int, hi: int, bits: int):
        self.lo, self.hi, self.bits = lo, hi, bits

    def __add__(self, other: "_Box") -> "_Box":
        return _Box(self.lo + other.lo, self.hi + other.hi, self.bits)

    def __sub__(self, other: "_Box") -> "_Box":
        return _Box(self.lo - other.hi, self.hi - other.lo, self.bits)

    def __mul__(self, other: "_Box") -> "_Box":
        ends = (self.lo * other.lo, self.lo * other.hi, self.hi * other.lo, self.hi * other.hi)
        return _Box(min(ends) >> self.bits, -((-max(ends)) >> self.bits), self.bits)

    def fixed(self, bits: int) -> Fixed:
        shift = self.bits - bits
        return Fixed(self.lo >> shift, -((-self.hi) >> shift), bits)


class _Boxes:
    def __init__(self, scale: sympy.Expr, bits: int):
        self.bits = bits
        self.zero = _Box(0, 0, bits)
        c = Fixed.from_interval(numeric.enclose(scale, bits + 16), bits)
        self.c = _Box(c.lo, c.hi, bits)

    def const(self, x: Fraction) -> _Box:
        f = Fixed.exact(x, self.bits)
        return _Box(f.lo, f.hi, self.bits)

    def scale(self, x: _Box) -> _Box:
        return x * self.c


# --- algebra 3: exponential polynomials, for exactness ---------------------------------

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
        raise _Undecided
    return _pmul(a, b)


_work = [0]  # term products made by the current exactness run


def _pmul(a: Poly, b: Poly) -> Poly:
    _work[0] += len(a) * len(b)
    if _work[0] > EXACTNESS_WORK:
        raise _Undecided
    out: Poly = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = ka + kb
            out[k] = out.get(k, 0) + va * vb
    return {k: v for k, v in out.items() if v}


@lru_cache(maxsize=4096)
def _power(base: Base, p: int) -> tuple | None:
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
        factor = _power(base, p)
        if factor is None or len(out) * len(factor) > PRODUCT_WORK:
            return None
        out = _pmul(out, dict(factor))
        if len(out) > EXPANDED_TERMS:
            return None
    return out


class _Exp:
    """Σ over parts of P / Π s̃^p (a part with ``scaled`` = 1 is multiplied by the irrational scale)."""

    __slots__ = ("parts", "alg")

    def __init__(self, parts: dict, alg: "_Exps"):
        self.parts = parts  # (scaled, bases) -> (powers, Poly)
        self.alg = alg

    def _merge(self, other: "_Exp", sign: int) -> "_Exp":
        parts = dict(self.parts)
        for key, (powers, poly) in other.parts.items():
            _accumulate(parts, key, powers, poly, sign)
        return _Exp(parts, self.alg)

    def __add__(self, other: "_Exp") -> "_Exp":
        return self._merge(other, 1)

    def __sub__(self, other: "_Exp") -> "_Exp":
        return self._merge(other, -1)

    def __mul__(self, other: "_Exp") -> "_Exp":
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
            poly = _pmul(poly, dict(_power(base, q - p) or _too_many()))
    return poly


def _too_many():
    raise _Undecided


class _Undecided(Exception):
    """Exactness not decided within EXPANDED_TERMS: the entry is treated as irrational."""


class _Exps:
    zero: _Exp

    def __init__(self, scale: sympy.Expr):
        self.zero = _Exp({}, self)
        rational = numeric.as_fraction(scale)
        self.c_rational = rational
        self.c2 = numeric.as_fraction(sympy.expand(scale ** 2))

    def const(self, x: Fraction) -> _Exp:
        return _Exp({(0, ()): ((), {Fraction(0): x})} if x else {}, self)

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
            out.append([_Exp({(0, (base,)): ((1,), {exps[j]: Fraction(1)})}, self) if j in exps else self.zero
                        for j in range(len(row))])
        return out


def _rational(x: _Exp) -> Fraction | None:
    """The exact value of an entry if rational; None if irrational (or not decided)."""
    try:
        scaled = [(b, p, n) for (s, b), (p, n) in x.parts.items() if s]
        if scaled and _group_value(scaled) != 0:  # c·r + (rational) is irrational for r ≠ 0
            return None
        return _group_value([(b, p, n) for (s, b), (p, n) in x.parts.items() if not s])
    except _Undecided:
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
        den = _expand(bases, powers)
        if den is None:
            raise _Undecided
        r = _ratio(poly, den)
        if r is None:
            irrational.append((poly, den))
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
            raise _Undecided
        num = _padd(_pmul(num, d), _pmul(poly, den))
        den = _pmul(den, d)
        if len(num) > EXPANDED_TERMS or len(den) > EXPANDED_TERMS:
            raise _Undecided
    if not num:
        return total
    r = _ratio(num, den)
    return None if r is None else total + r


# --- the model ----------------------------------------------------------------------

@contextmanager
def _whole() -> Iterator[None]:
    """Around each of the caches below: filled whole, or not at all when the time limit rings meanwhile
    (Fraction's hash may swallow the alarm, leaving a dict half filled; see limits.alarm_guard)."""
    try:
        with limits.alarm_guard():
            yield
    except LimitError:
        _power.cache_clear()  # it may keep a product made while the alarm was lost
        raise


def _fractions(m) -> tuple:
    return tuple(tuple(x.value for x in row) for row in m)


@dataclass(frozen=True, eq=False)
class BackwardModel(Rounding):
    """The gradients of a forward model (one head, or several with W_O). Build with :func:`build_backward`."""

    forward: AttentionModel
    heads: tuple[Model, ...]
    inputs: _Inputs
    scale: sympy.Expr
    kind: ClassVar[str] = "backward"
    compare = Model.compare  # the sign of (entry − r), decided exactly: the same code serves every Rounding

    @property
    def loss(self) -> str:
        return self.inputs.loss

    @property
    def backward(self) -> "BackwardModel":
        return self

    @property
    def is_split(self) -> bool:
        """Several heads, or W_O: per-head gradients are named ``name@h``."""
        return len(self.heads) > 1 or self.inputs.W_O is not None

    @cached_property
    def top_quantities(self) -> tuple[str, ...]:
        names = list(HEAD_QUANTITIES if not self.is_split else ("dO",))
        if self.inputs.W_O is not None:
            names += ["dW_O"] + (["db_O"] if self.inputs.b_O is not None else []) + ["dconcat"]
        if self.is_split:
            names += ["dQ", "dK", "dV"]
        if self.inputs.X is not None:
            for name in ("Q", "K", "V"):
                names += [f"dW_{name}"] + ([f"db_{name}"] if name in self.inputs.biases else [])
            names += ["dX"] + (["dX_kv"] if self.inputs.X_kv is not None else [])
        return tuple(n for n in names if n != "dot")

    @cached_property
    def head_views(self) -> tuple["HeadGradients", ...]:
        return tuple(HeadGradients(self, h) for h in range(len(self.heads))) if self.is_split else ()

    @cached_property
    def _jacobian_names(self) -> tuple[str, ...]:
        return tuple(f"jacobian@{h}" if self.is_split else "jacobian" for h in range(len(self.heads)))

    @property
    def quantity_names(self) -> tuple[str, ...]:
        """Every gradient, then the softmax's Jacobians: those have n·m² entries (10^9 at 1024 tokens), so
        each is made only when it is asked for (a derivation shows them; compute does not)."""
        return tuple(self._rationals) + self._jacobian_names

    def _run(self, alg, weights: Sequence[Grid]) -> dict[str, Grid]:
        return _gradients(alg, self.inputs, weights)

    @cached_property
    def _closed_forms(self) -> dict[str, Grid]:
        with _whole():
            return self._run(_SymPy(self.scale), self._closed_weights)

    @property
    def _closed_weights(self) -> list[Grid]:
        return [[[h.weights[i, j] for j in range(h.n_keys)] for i in range(h.n_queries)] for h in self.heads]

    @cached_property
    def _jacobian_forms(self) -> dict[str, Grid]:
        return {}

    @cached_property
    def _jacobian_rationals(self) -> dict[str, tuple]:
        """α_j(δ_jk − α_k): rational where both weights are (a row whose scores are all equal), 0 where
        α_j is masked (or α_k, off the diagonal), and irrational elsewhere: by Lindemann–Weierstrass, as
        e^{z_j}(δ_jk s − e^{z_k}) has other exponents than s² when the row's scores differ."""
        out = {}
        for name, head in zip(self._jacobian_names, self.heads):
            A = head.rationals("weights")
            ok = head.may_attend
            m = head.n_keys
            out[name] = tuple(tuple(
                Fraction(0) if not ok(i, j) or (j != k and not ok(i, k)) else
                A[i][j] * ((j == k) - A[i][k]) if A[i][j] is not None and A[i][k] is not None else None
                for k in range(m)) for i in range(head.n_queries) for j in range(m))
        return out

    @cached_property
    def _rationals(self) -> dict[str, tuple]:
        alg = _Exps(self.scale)
        _work[0] = 0
        with _whole():
            try:
                grids = self._run(alg, [alg.weights(h) for h in self.heads])
                return {name: tuple(tuple(_rational(x) for x in row) for row in m) for name, m in grids.items()}
            except _Undecided:
                return self._structural_rationals()

    def _structural_rationals(self) -> dict[str, tuple]:
        """Too large to decide every entry: the exact zeros of masked keys, the rational dO, and None elsewhere."""
        shapes = self._closed_form_shapes
        out = {name: tuple((None,) * cols for _ in range(rows)) for name, (rows, cols) in shapes.items()}
        if self.inputs.dO is not None:
            out["dO"] = self.inputs.dO
        for h, head in enumerate(self.heads):
            suffix = f"@{h}" if self.is_split else ""
            n, m = head.n_queries, head.n_keys
            zero = [[not head.may_attend(i, j) for j in range(m)] for i in range(n)]
            for name in ("dZ", "dS"):
                out[name + suffix] = tuple(tuple(Fraction(0) if zero[i][j] else None for j in range(m)) for i in range(n))
        return out

    @cached_property
    def _closed_form_shapes(self) -> dict[str, tuple[int, int]]:
        # the shapes of every quantity, from a run on the cheapest algebra (enclosures at a few bits)
        return {name: (len(m), len(m[0])) for name, m in self._enclosure_grids(32).items()}

    def _enclosure_grids(self, bits: int) -> dict[str, Grid]:
        return self._box_run(bits)[0]

    def _box_run(self, bits: int) -> tuple[dict[str, Grid], "_Boxes", list[Grid]]:
        if bits not in self._box_cache:
            work = -(-(bits + 64) // 32) * 32
            alg = _Boxes(self.scale, work)
            weights = []
            for h in self.heads:
                flat = h._enclosures("weights", work)
                m = h.n_keys
                weights.append([[_Box(b.lo, b.hi, work) for b in flat[i * m:(i + 1) * m]]
                                for i in range(h.n_queries)])
            self._box_cache.clear()  # one precision at a time: refinement only goes up
            with _whole():
                self._box_cache[bits] = (self._run(alg, weights), alg, weights)
        return self._box_cache[bits]

    @cached_property
    def _box_cache(self) -> dict:
        return {}

    @property
    def _headroom_bits(self) -> int:  # type: ignore[override]
        return max(h._headroom_bits for h in self.heads)

    # --- the interface of every model kind ---------------------------------------------

    def _is_gradient(self, quantity: str) -> bool:
        return quantity in self._jacobian_names or quantity in self._rationals

    def exact(self, quantity: str) -> ImmutableMatrix:
        if quantity in self._jacobian_names:
            if quantity not in self._jacobian_forms:
                h = self._jacobian_names.index(quantity)
                with _whole():
                    self._jacobian_forms[quantity] = _jacobian(_SymPy(self.scale), self._closed_weights[h])
            return ImmutableMatrix(self._jacobian_forms[quantity])
        if quantity in self._rationals:
            return ImmutableMatrix(self._closed_forms[quantity])
        return self.forward.exact(quantity)

    def rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        if quantity in self._jacobian_names:
            return self._jacobian_rationals[quantity]
        if quantity in self._rationals:
            return self._rationals[quantity]
        return self.forward.rationals(quantity)

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        grids, alg, weights = self._box_run(bits)
        if quantity not in grids and quantity in self._jacobian_names:
            grids[quantity] = _jacobian(alg, weights[self._jacobian_names.index(quantity)])
        return [b.fixed(bits) for row in grids[quantity] for b in row]

    def rounded(self, quantity: str, decimals):
        if self._is_gradient(quantity):
            return super().rounded(quantity, decimals)
        return self.forward.rounded(quantity, decimals)

    def significant(self, quantity: str, digits: int):
        if self._is_gradient(quantity):
            return super().significant(quantity, digits)
        return self.forward.significant(quantity, digits)


@dataclass(frozen=True, eq=False)
class HeadGradients(Rounding):
    """One head's gradients of a multi-head backward pass (the same interface, its own names)."""

    parent: BackwardModel
    index: int
    kind: ClassVar[str] = "backward"
    quantities: ClassVar[tuple[str, ...]] = tuple(q for q in HEAD_QUANTITIES if q != "dot")

    def _name(self, quantity: str) -> str:
        return f"{quantity}@{self.index}"

    @property
    def _headroom_bits(self) -> int:  # type: ignore[override]
        return self.parent._headroom_bits

    def exact(self, quantity: str) -> ImmutableMatrix:
        return self.parent.exact(self._name(quantity))

    def rationals(self, quantity: str):
        return self.parent.rationals(self._name(quantity))

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        return self.parent._enclosures(self._name(quantity), bits)


def _check_size(spec: Spec, heads: Sequence[Model]) -> None:
    """Refuse a backward pass whose gradients hold more terms than BACKWARD_TERMS, before any is made."""
    terms = sum(h.n_queries * h.n_keys * (h.n_keys + h.q.shape[1] + h.v.shape[1]) for h in heads)
    p = spec.projection
    if p is not None:  # dW = Xᵀ dQ and dX = dQ W_Qᵀ + …: rows × columns of X, times the widths of the W's
        width = sum(len(getattr(p, f"W_{name}")[0]) for name in ("Q", "K", "V"))
        terms += sum(len(X) * len(X[0]) * width for X in (p.X, p.X_kv) if X is not None)
    if terms > limits.BACKWARD_TERMS:
        raise LimitError(spec.source, "backward", f"the gradients of {heads[0].n_queries}×{heads[0].n_keys} "
                         f"scores hold {terms} terms; at most {limits.BACKWARD_TERMS} (the limit; "
                         "64 tokens with 64 dimensions hold 786432)")


def build_backward(spec: Spec, forward: AttentionModel) -> BackwardModel:
    """The backward pass of a numeric spec with ``[backward]`` over its forward model."""
    b = spec.backward
    if b is None:
        raise SpecError(spec.source, "backward", "missing: give [backward] or --backward")
    heads = getattr(forward, "heads", None) or (forward,)
    _check_size(spec, heads)
    if spec.heads > 1:
        subs = [spec.head(h) for h in range(spec.heads)]
    else:
        subs = [spec]
    n = len(spec.tokens)
    width = len(spec.W_O[0]) if spec.W_O is not None else len(spec.V[0])
    p = spec.projection
    inputs = _Inputs(
        V=tuple(_fractions(s.V) for s in subs), K=tuple(_fractions(s.K) for s in subs),
        Q=tuple(_fractions(s.Q) for s in subs),
        W_O=None if spec.W_O is None else _fractions(spec.W_O),
        b_O=None if spec.b_O is None else tuple(x.value for x in spec.b_O),
        loss=b.loss,
        dO=_fractions(b.grad_output) if b.loss == "given" else
        (tuple((Fraction(1),) * width for _ in range(n)) if b.loss == "sum" else None),
        target=None if b.target is None else _fractions(b.target),
        X=None if p is None else _fractions(p.X), X_kv=None if p is None or p.X_kv is None else _fractions(p.X_kv),
        W=None if p is None else {name: _fractions(getattr(p, f"W_{name}")) for name in ("Q", "K", "V")},
        biases=() if p is None else tuple(name for name in ("Q", "K", "V") if getattr(p, f"b_{name}") is not None),
    )
    return BackwardModel(forward, tuple(heads), inputs, heads[0].scale)


__all__ = ["BackwardModel", "HeadGradients", "build_backward", "HEAD_QUANTITIES"]
