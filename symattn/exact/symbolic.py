"""Attention with symbolic entries: general formulas, then numbers once values are given.

The formulas are SymPy closed forms of the same steps as the numeric model.
With a value for every symbol (``[subs]`` or ``--subs a=0.5``), the entries
are substituted and the numeric derivation follows. Numbers are only ever
shown for values; a formula is never filled with placeholders.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import cached_property
from typing import ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact.base import ClosedForms, ForwardPass
from symattn.exact.model import scale_of
from symattn.input.errors import SpecError
from symattn.input.formula import Formula, symbol, value_of
from symattn.input.numeral import Numeral
from symattn.input.projection import numeral_of, project
from symattn.input.reader import Entry, Matrix, Numerals
from symattn.input.records import record
from symattn.input.spec import Spec


def _matrix(m: Matrix) -> ImmutableMatrix:
    return ImmutableMatrix([[value_of(x) for x in row] for row in m])


@record(eq=False)
class SymbolicModel(ClosedForms, ForwardPass):
    Q: ImmutableMatrix
    K: ImmutableMatrix
    V: ImmutableMatrix
    d_k: int
    scale: sympy.Expr
    allowed: tuple[tuple[bool, ...], ...] | None = None
    kind: ClassVar[str] = "symbolic"

    def exact(self, quantity: str) -> ImmutableMatrix:
        return getattr(self, quantity)

    def may_attend(self, i: int, j: int) -> bool:
        return self.allowed is None or self.allowed[i][j]

    @cached_property
    def scores(self) -> ImmutableMatrix:
        return (self.Q * self.K.T).applyfunc(sympy.expand)

    @cached_property
    def scaled(self) -> ImmutableMatrix:
        S = self.scores
        return ImmutableMatrix(
            S.rows,
            S.cols,
            lambda i, j: sympy.expand(S[i, j] * self.scale) if self.may_attend(i, j) else sympy.S.NegativeInfinity,
        )

    @cached_property
    def products(self) -> tuple[ImmutableMatrix, ...]:
        """For each query, row j holds A_ij · V_j."""
        A, V = self.weights, self.V
        return tuple(ImmutableMatrix(V.rows, V.cols, lambda j, k, i=i: A[i, j] * V[j, k]) for i in range(A.rows))


def build_symbolic(spec: Spec) -> SymbolicModel:
    return SymbolicModel(_matrix(spec.Q), _matrix(spec.K), _matrix(spec.V), spec.d_k, scale_of(spec), spec.allowed)


def formulas(m: ImmutableMatrix) -> tuple[tuple[Formula, ...], ...]:
    return tuple(tuple(Formula("", x) for x in m.row(i)) for i in range(m.rows))


def has_all_values(spec: Spec) -> bool:
    """Symbols, each with a value (entries such as sqrt(2) without symbols have none to give)."""
    return bool(spec.symbols) and set(spec.symbols) <= {name for name, _ in spec.subs}


def substitute(spec: Spec) -> Spec:
    """The numeric spec: every formula entry replaced by its value (which must be rational)."""
    values = {symbol(name): sympy.Rational(v.value.numerator, v.value.denominator) for name, v in spec.subs}

    def entry(x: Entry, key: str, position: tuple[int, ...]) -> Numeral:
        if isinstance(x, Numeral):
            return x
        value = x.expr.subs(values)  # SymPy objects for SymPy symbols; no text is parsed here
        if value.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            given = ", ".join(f"{name} = {v.text}" for name, v in spec.subs if name in x.symbols)
            raise SpecError(spec.source, key, f"division by zero: {x.text!r} with {given}", position)
        if not isinstance(value, sympy.Rational):
            raise SpecError(
                spec.source,
                key,
                f"with the given values {x.text!r} is {value}, which is not "
                "rational; numbers are computed for rational entries only",
                position,
            )
        return numeral_of(Fraction(int(value.p), int(value.q)))

    def matrix(m: Matrix, key: str) -> Numerals:
        return tuple(tuple(entry(x, key, (i, j)) for j, x in enumerate(row, 1)) for i, row in enumerate(m, 1))

    def vector(v: tuple[Entry, ...] | None, key: str) -> tuple[Numeral, ...] | None:
        return None if v is None else tuple(entry(x, key, (j,)) for j, x in enumerate(v, 1))

    p = spec.projection
    if p is not None:
        p = replace(
            p,
            X=matrix(p.X, "X"),
            X_kv=None if p.X_kv is None else matrix(p.X_kv, "X_kv"),
            W_Q=matrix(p.W_Q, "W_Q"),
            W_K=matrix(p.W_K, "W_K"),
            W_V=matrix(p.W_V, "W_V"),
            b_Q=vector(p.b_Q, "b_Q"),
            b_K=vector(p.b_K, "b_K"),
            b_V=vector(p.b_V, "b_V"),
        )
        Q, K, V = (project(p, name) for name in ("Q", "K", "V"))
        return replace(spec, projection=p, Q=Q, K=K, V=V, subs=())
    return replace(spec, Q=matrix(spec.Q, "Q"), K=matrix(spec.K, "K"), V=matrix(spec.V, "V"), subs=())


def logistic(expr: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr] | None:
    """``(c, d)`` with expr == c / (1 + e^d), for expr = c·e^x / (e^x + e^y), proved by SymPy.

    Only a denominator of exactly two exponentials qualifies (two keys); the
    proof multiplies out c·e^x·(1 + e^d) − c·(e^x + e^y) and checks that it is 0.
    """
    if not isinstance(expr, sympy.Mul):
        return None
    numer, denom = sympy.fraction(expr, exact=True)
    scale, denom = denom.as_coeff_Mul()  # 3·(e^x + e^y): the number goes with c
    if not (
        isinstance(denom, sympy.Add) and len(denom.args) == 2 and all(isinstance(t, sympy.exp) for t in denom.args)
    ):
        return None
    factors = sympy.Mul.make_args(numer)
    for lead, other in (denom.args, denom.args[::-1]):
        if lead in factors:
            c = numer / (scale * lead)
            d = sympy.expand(other.args[0] - lead.args[0])
            if c.has(sympy.exp(lead.args[0])):
                continue
            if (
                sympy.expand(sympy.powsimp(sympy.expand(c * scale * lead * (1 + sympy.exp(d)) - c * scale * denom)))
                == 0
            ):
                return c, d
    return None
