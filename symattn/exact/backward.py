"""The backward pass: every gradient of attention as an exact quantity.

:class:`BackwardModel` runs the formulas of :mod:`symattn.exact.gradients` in four
algebras: SymPy closed forms (``exact``), enclosures at a binary precision (the
numbers, correctly rounded by :class:`~symattn.exact.model.Rounding`), and the values at the limit
weights of :mod:`symattn.exact.candidates`, which rule out most entries as irrational at once, leaving
the exponential polynomials of :mod:`symattn.exact.exactness` to decide the few others.
The stable softmax gives the same weights, hence the same gradients. The model
makes no strings. Build it with :func:`build_backward`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from functools import cached_property
from typing import ClassVar, cast

import sympy
from sympy import ImmutableMatrix

from symattn.exact import candidates, exactness, numeric
from symattn.exact.base import ForwardModel, Rounding
from symattn.exact.exactness import Exps, Undecided, proved_rational, rational
from symattn.exact.gradients import Grid, Inputs, gradients, jacobian
from symattn.exact.model import Model
from symattn.exact.numeric import Fixed
from symattn.input import limits
from symattn.input.errors import LimitError, SpecError
from symattn.input.records import record
from symattn.input.spec import Spec
from symattn.variants import DENOMINATOR

HEAD_QUANTITIES = ("dO", "dV", "dA", "dot", "dZ", "dS", "dQ", "dK")  # "dot": rowsum(dA ⊙ A), one column
BIASES = ("db_Q", "db_K", "db_V", "db_O")
# enclosures that rule out the entries whose limit they do not hold: at the precision that compute's
# default 15 digits start from, so that one run of the enclosures serves both
CANDIDATE_BITS = numeric.start_bits(15)


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

    @staticmethod
    def trig(angle: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
        return sympy.cos(angle), sympy.sin(angle)

    @staticmethod
    def real(x: sympy.Expr) -> sympy.Expr:
        return x


# --- algebra 2: enclosures ---------------------------------------------------------


class _Box:
    """[lo, hi] · 2^−bits with integer ends; arithmetic rounds outward."""

    __slots__ = ("lo", "hi", "bits")

    def __init__(self, lo: int, hi: int, bits: int):
        self.lo, self.hi, self.bits = lo, hi, bits

    def __add__(self, other: _Box) -> _Box:
        return _Box(self.lo + other.lo, self.hi + other.hi, self.bits)

    def __sub__(self, other: _Box) -> _Box:
        return _Box(self.lo - other.hi, self.hi - other.lo, self.bits)

    def __mul__(self, other: _Box) -> _Box:
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

    def trig(self, angle: sympy.Expr) -> tuple[_Box, _Box]:
        boxes = []
        for f in (sympy.cos, sympy.sin):
            b = Fixed.from_interval(numeric.enclose(f(angle), self.bits + 32), self.bits)
            boxes.append(_Box(b.lo, b.hi, self.bits))
        return boxes[0], boxes[1]

    def real(self, x: sympy.Expr) -> _Box:
        """An exact real of the model (a map's derivative, a denominator's share), enclosed."""
        b = Fixed.from_interval(numeric.enclose(x, self.bits + 32), self.bits)
        return _Box(b.lo, b.hi, self.bits)


# --- the model ----------------------------------------------------------------------


@contextmanager
def _whole() -> Iterator[None]:
    """Around each of the caches below: filled whole, or not at all when the time limit rings meanwhile
    (Fraction's hash may swallow the alarm, leaving a dict half filled; see limits.alarm_guard)."""
    try:
        with limits.alarm_guard():
            yield
    except LimitError:
        exactness.power.cache_clear()  # it may keep a product made while the alarm was lost
        raise


def _proved(x: sympy.Expr, box: _Box) -> Fraction | None:
    return proved_rational(x, Fraction(box.lo, 1 << box.bits), Fraction(box.hi, 1 << box.bits))


def _jacobian_entry(a_j: Fraction | None, a_k: Fraction | None, same: bool) -> Fraction | None:
    """α_j(δ_jk − α_k), or None where either weight is irrational."""
    return None if a_j is None or a_k is None else a_j * (same - a_k)


def _fractions(m) -> tuple:
    return tuple(tuple(x.value for x in row) for row in m)


@record(eq=False)
class BackwardModel(Rounding):
    """The gradients of a forward model (one head, or several with W_O). Build with :func:`build_backward`."""

    forward: ForwardModel
    heads: tuple[Model, ...]
    inputs: Inputs
    scale: sympy.Expr
    terms: int = 0  # of the closed forms (_terms): printed up to BACKWARD_CLOSED_FORMS, none made past BACKWARD_FORMS
    source: str = "<dict>"
    kind: ClassVar[str] = "backward"
    compare = Model.compare  # the sign of (entry − r), decided exactly: the same code serves every Rounding

    @property
    def loss(self) -> str:
        return self.inputs.loss

    @property
    def backward(self) -> BackwardModel:
        return self

    @property
    def is_split(self) -> bool:
        """Several heads, or W_O: per-head gradients are named ``name@h``."""
        return len(self.heads) > 1 or self.inputs.W_O is not None

    @property
    def rules(self) -> tuple:
        """The rules of the first head's parts (every head has the same parts)."""
        return self.inputs.rules[0] if self.inputs.rules else ()

    @property
    def head_quantities(self) -> tuple[str, ...]:
        """One head's gradients, with its parts' own right after the gradient each follows (a map's before
        dS, a Q/K part's before dQ and dK)."""
        names: tuple[str, ...] = HEAD_QUANTITIES
        for rule in self.rules:
            if rule.stage != DENOMINATOR:
                at = names.index(rule.after) + 1
                names = names[:at] + rule.names + names[at:]
        return names

    @cached_property
    def top_quantities(self) -> tuple[str, ...]:
        names = list(self.head_quantities if not self.is_split else ("dO",))
        if self.inputs.W_O is not None:
            names += ["dW_O"] + (["db_O"] if self.inputs.b_O is not None else []) + ["dconcat"]
        if self.is_split:
            names += ["dQ", "dK", "dV"]
        names += [name for rule in self.rules if rule.stage == DENOMINATOR for name in rule.names]
        if self.inputs.X is not None:
            for name in ("Q", "K", "V"):
                names += [f"dW_{name}"] + ([f"db_{name}"] if name in self.inputs.biases else [])
            names += ["dX"] + (["dX_kv"] if self.inputs.X_kv is not None else [])
        return tuple(n for n in names if n != "dot")

    @cached_property
    def head_views(self) -> tuple[HeadGradients, ...]:
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
        return gradients(alg, self.inputs, weights)

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
            out[name] = tuple(
                tuple(
                    Fraction(0)
                    if not ok(i, j) or (j != k and not ok(i, k))
                    else _jacobian_entry(A[i][j], A[i][k], j == k)
                    for k in range(m)
                )
                for i in range(head.n_queries)
                for j in range(m)
            )
        return out

    @cached_property
    def _rationals(self) -> dict[str, tuple]:
        """The exact value of every entry that is rational, None elsewhere (irrational, or not decided
        within the work limits: then shown with ≈). Only the entries whose value at the limit weights is
        rational and inside their enclosure can be rational (:mod:`symattn.exact.candidates`); the
        exponential polynomials decide those, one entry at a time, from a graph of the gradients."""
        if self.is_variant:
            return self._closed_rationals()
        c = numeric.as_fraction(self.scale)
        limit = candidates.Limits(c, numeric.as_fraction(sympy.expand(self.scale**2)) or Fraction(0))
        with _whole():
            at_limit = self._run(limit, [candidates.limit_weights(limit, h) for h in self.heads])
            boxes = self._enclosure_grids(CANDIDATE_BITS)
            out = {}
            pending = []  # entries that may be rational: their limit is rational and inside their enclosure
            for name, grid in at_limit.items():
                table = []
                for i, row in enumerate(grid):
                    values = [r.rational for r in row]
                    for j, (r, value) in enumerate(zip(row, values)):
                        if r.w and value is not None:
                            values[j] = None
                            if candidates.holds(boxes[name][i][j], value):
                                pending.append((name, i, j, value))
                    table.append(values)
                out[name] = table
            if pending:
                self._decide(pending, out)
            return {name: tuple(tuple(row) for row in table) for name, table in out.items()}

    @property
    def is_variant(self) -> bool:
        """A head with parts: z is not n·scale/den, so no limit weights; the closed forms decide."""
        return any(h.parts for h in self.heads)

    @property
    def gradient_forms(self) -> bool:
        """Whether compute prints the gradients' closed forms (a part may say they run too long)."""
        return all(rule.forms for rule in self.rules)

    def _decide(self, pending: list, out: dict) -> None:
        """Each entry that may be rational, decided by the exponential polynomials, from the graph of the
        gradients (made only now: most specs need none of it), each node made once."""
        graph = self._run(candidates.Lazy(), candidates.lazy_weights(self.heads))
        alg = Exps(self.scale)
        weights = [alg.weights(h) for h in self.heads]
        memo: dict[int, object] = {}
        exactness.work[0] = 0
        for name, i, j, r in pending:
            try:
                value = rational(candidates.evaluate(graph[name][i][j], alg, weights, memo))
            except Undecided:  # the whole run's work is spent: the rest is left undecided (≈)
                return
            assert value is None or value == r, (name, i, j, value, r)  # a rational entry equals its limit
            out[name][i][j] = value

    def _closed_rationals(self) -> dict[str, tuple]:
        """The gradients of a head with parts: rational where the closed form is proved
        rational (:func:`~symattn.exact.exactness.proved_rational`: an identity of rational functions in
        the e^z, cos, sin and tanh holds for any values), None elsewhere."""
        boxes = self._enclosure_grids(64)
        return {
            name: tuple(tuple(_proved(x, boxes[name][i][j]) for j, x in enumerate(row)) for i, row in enumerate(grid))
            for name, grid in self._closed_forms.items()
        }

    def _enclosure_grids(self, bits: int) -> dict[str, Grid]:
        return self._box_run(bits)[0]

    def _box_run(self, bits: int) -> tuple[dict[str, Grid], _Boxes, list[Grid]]:
        work = -(-(bits + 64) // 32) * 32  # the run depends on this alone
        if work not in self._box_cache:
            alg = _Boxes(self.scale, work)
            weights = []
            for h in self.heads:
                flat = h._enclosures("weights", work)
                m = h.n_keys
                weights.append(
                    [[_Box(b.lo, b.hi, work) for b in flat[i * m : (i + 1) * m]] for i in range(h.n_queries)]
                )
            self._box_cache.clear()  # one precision at a time: refinement only goes up
            with _whole():
                self._box_cache[work] = (self._run(alg, weights), alg, weights)
        return self._box_cache[work]

    @cached_property
    def _box_cache(self) -> dict:
        return {}

    @property
    def _headroom_bits(self) -> int:
        return max(h._headroom_bits for h in self.heads)

    # --- the interface of every model kind ---------------------------------------------

    def _is_gradient(self, quantity: str) -> bool:
        return quantity in self._jacobian_names or quantity in self._rationals

    @property
    def has_closed_forms(self) -> bool:
        """Whether compute writes the gradients' SymPy closed forms (BACKWARD_CLOSED_FORMS)."""
        return self.terms <= limits.BACKWARD_CLOSED_FORMS

    def exact(self, quantity: str) -> ImmutableMatrix:
        if self.terms > limits.BACKWARD_FORMS and self._is_gradient(quantity):
            n, m = self.heads[0].n_queries, self.heads[0].n_keys
            raise LimitError(
                self.source,
                "backward",
                f"the closed forms of the gradients of {n}×{m} scores hold {self.terms} terms; at most "
                f"{limits.BACKWARD_FORMS} (the limit); compute --backward gives every gradient entry, as its "
                "exact rational or with ≈",
            )
        if quantity in self._jacobian_names:
            if quantity not in self._jacobian_forms:
                h = self._jacobian_names.index(quantity)
                with _whole():
                    self._jacobian_forms[quantity] = jacobian(_SymPy(self.scale), self._closed_weights[h])
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
            grids[quantity] = jacobian(alg, weights[self._jacobian_names.index(quantity)])
        return [b.fixed(bits) for row in grids[quantity] for b in row]

    def rounded(self, quantity: str, decimals):
        if self._is_gradient(quantity):
            return super().rounded(quantity, decimals)
        return self.forward.rounded(quantity, decimals)

    def significant(self, quantity: str, digits: int):
        if self._is_gradient(quantity):
            return super().significant(quantity, digits)
        return self.forward.significant(quantity, digits)


@record(eq=False)
class HeadGradients(Rounding):
    """One head's gradients of a multi-head backward pass (the same interface, its own names)."""

    parent: BackwardModel
    index: int
    kind: ClassVar[str] = "backward"
    compare = Model.compare

    @property
    def quantities(self) -> tuple[str, ...]:
        return tuple(q for q in self.parent.head_quantities if q != "dot")

    def _name(self, quantity: str) -> str:
        return f"{quantity}@{self.index}"

    @property
    def _headroom_bits(self) -> int:
        return self.parent._headroom_bits

    def exact(self, quantity: str) -> ImmutableMatrix:
        return self.parent.exact(self._name(quantity))

    def rationals(self, quantity: str):
        return self.parent.rationals(self._name(quantity))

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        return self.parent._enclosures(self._name(quantity), bits)


def _terms(spec: Spec, heads: Sequence[Model]) -> int:
    """The terms of the gradients' closed forms: Σ over heads of n·m·(m + d_k + d_v), and the projections'."""
    terms = sum(h.n_queries * h.n_keys * (h.n_keys + h.q.shape[1] + h.v.shape[1]) for h in heads)
    p = spec.projection
    if p is not None:  # dW = Xᵀ dQ and dX = dQ W_Qᵀ + …: rows × columns of X, times the widths of the W's
        width = sum(len(getattr(p, f"W_{name}")[0]) for name in ("Q", "K", "V"))
        terms += sum(len(X) * len(X[0]) * width for X in (p.X, p.X_kv) if X is not None)
    return terms


def _check_size(spec: Spec, terms: int, heads: Sequence[Model]) -> None:
    """Refuse a backward pass whose gradients hold more terms than BACKWARD_TERMS, before any is made."""
    if terms > limits.BACKWARD_TERMS:
        raise LimitError(
            spec.source,
            "backward",
            f"the gradients of {heads[0].n_queries}×{heads[0].n_keys} "
            f"scores hold {terms} terms; at most {limits.BACKWARD_TERMS} (the limit; "
            "64 tokens with 64 dimensions hold 786432)",
        )


def _rules(heads: tuple[Model, ...]) -> tuple[tuple, ...] | None:
    """Each head's rules of its parts' gradients (None where no head has a part with one)."""
    rules = tuple(tuple(r for r in (p.gradient(h) for p in h.parts) if r is not None) for h in heads)
    return rules if any(rules) else None


def build_backward(spec: Spec, forward: ForwardModel) -> BackwardModel:
    """The backward pass of a numeric spec with ``[backward]`` over its forward model."""
    b = spec.backward
    if b is None:
        raise SpecError(spec.source, "backward", "missing: give [backward] or --backward")
    # a MultiHead's heads, or the one head
    heads: tuple[Model, ...] = getattr(forward, "heads", None) or (cast(Model, forward),)
    terms = _terms(spec, heads)
    _check_size(spec, terms, heads)
    if spec.heads > 1:
        subs = [spec.head(h) for h in range(spec.heads)]
    else:
        subs = [spec]
    n = len(spec.tokens)
    width = len(spec.W_O[0]) if spec.W_O is not None else spec.concat_width
    p = spec.projection
    inputs = Inputs(
        V=tuple(_fractions(s.V) for s in subs),
        K=tuple(_fractions(s.K) for s in subs),
        Q=tuple(_fractions(s.Q) for s in subs),
        W_O=None if spec.W_O is None else _fractions(spec.W_O),
        b_O=None if spec.b_O is None else tuple(x.value for x in spec.b_O),
        loss=b.loss,
        dO=_fractions(b.grad_output)
        if b.loss == "given"
        else (tuple((Fraction(1),) * width for _ in range(n)) if b.loss == "sum" else None),
        target=None if b.target is None else _fractions(b.target),
        X=None if p is None else _fractions(p.X),
        X_kv=None if p is None or p.X_kv is None else _fractions(p.X_kv),
        W=None if p is None else {name: _fractions(getattr(p, f"W_{name}")) for name in ("Q", "K", "V")},
        biases=() if p is None else tuple(name for name in ("Q", "K", "V") if getattr(p, f"b_{name}") is not None),
        kv_heads=spec.kv_groups,
        rules=_rules(heads),
    )
    return BackwardModel(forward, tuple(heads), inputs, heads[0].scale, terms, spec.source)


__all__ = ["BackwardModel", "HeadGradients", "build_backward", "HEAD_QUANTITIES"]
