"""One head's QK-norm, exactly (the part is :mod:`symattn.variants.qk_norm`, whose docstring has the argument):
the normalized rows, the scores as ρ·√m, their decisions, enclosures and backward rule."""

from __future__ import annotations

from fractions import Fraction
from math import isqrt
from typing import Any, ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact import numeric
from symattn.exact.num import NumRows
from symattn.exact.numeric import Fixed
from symattn.input.records import record
from symattn.variants.base import QK, HeadPart, Rows
from symattn.variants.forms import ScoreBoxes, scale_parts
from symattn.variants.qk_norm import NORMED, RMS

Root = tuple[Fraction, Fraction]  # ρ·√m
Diff = tuple[Root, Root]  # a difference of two


def _square(x: Fraction) -> Fraction | None:
    """√x where x ≥ 0 is the square of a rational, else None."""
    p, q = isqrt(x.numerator), isqrt(x.denominator)
    return Fraction(p, q) if p * p == x.numerator and q * q == x.denominator else None


def _signed_square(y: Root) -> Fraction:
    """y·|y| of y = ρ√m: one-to-one, so it decides equality and order."""
    rho, m = y
    return (1 if rho >= 0 else -1) * rho * rho * m


class RootLinear:
    """y = S·scale for S = ρ√m, as :mod:`symattn.variants.forms` asks (the module's docstring says why)."""

    def __init__(self, scale: sympy.Expr):
        self.c, self.r = scale_parts(scale)

    def _y(self, s: Root) -> Root:
        return s[0] * self.c, s[1] * self.r

    def key(self, p: Any, q: Fraction) -> Any:
        return _signed_square(self._y(p)) if len(p) == 2 and isinstance(p[0], Fraction) else p

    def _value(self, s: Root) -> Fraction | None:
        rho, m = self._y(s)
        root = _square(m)
        return Fraction(0) if rho == 0 else None if root is None else rho * root

    def value(self, p: Any, q: Fraction) -> Fraction | None:
        if isinstance(p[0], Fraction):
            return self._value(p)
        a, b = p
        if _signed_square(a) == _signed_square(b):
            return Fraction(0)
        x, y = self._value(a), self._value(b)
        return None if x is None or y is None else x - y

    def sign(self, p: Any, q: Fraction) -> int | None:
        if isinstance(p[0], Fraction):
            return (p[0] > 0) - (p[0] < 0)
        x, y = (_signed_square(s) for s in p)
        return (x > y) - (x < y)


@record
class Normed(ScoreBoxes, HeadPart):
    """One head's RMSNorm of Q and K: the scores are those of the normalized rows."""

    eps: Fraction
    q_weight: tuple[Fraction, ...] | None
    k_weight: tuple[Fraction, ...] | None
    stage: ClassVar[int] = QK
    quantities: ClassVar[tuple[str, ...]] = RMS + NORMED
    computed: ClassVar[tuple[str, ...]] = RMS + NORMED  # σ too: practice asks for it and check judges it
    columns: ClassVar[tuple[str, ...]] = RMS  # one σ per row
    factors: ClassVar[tuple[str, str] | None] = NORMED
    exposes: ClassVar[tuple[str, ...]] = ()
    gradients: ClassVar[tuple[str, ...]] = ("dQ_norm", "dK_norm", "dot_Q_norm", "dot_K_norm")
    silent: ClassVar[tuple[str, ...]] = ("dQ", "dK")
    not_rational: ClassVar[str] = "the scores with QK-norm are not rational: use structures"

    def _rows(self, model: Any, quantity: str) -> list[list[Fraction]]:
        m, den = (model.q, model.dq) if quantity == "Q_norm" else (model.k, model.dk)
        return [[Fraction(int(x), den) for x in row] for row in m.to_list()]

    def _weight(self, quantity: str) -> tuple[Fraction, ...] | None:
        return self.q_weight if quantity == "Q_norm" else self.k_weight

    def mean_squares(self, model: Any, quantity: str) -> list[Fraction]:
        """mean(x²) + ε of each row: σ², rational and positive."""
        return [sum((x * x for x in row), Fraction(0)) / len(row) + self.eps for row in self._rows(model, quantity)]

    def weighted(self, model: Any, quantity: str) -> list[list[Fraction]]:
        w = self._weight(quantity)
        rows = self._rows(model, quantity)
        return rows if w is None else [[x * c for x, c in zip(row, w)] for row in rows]

    def exact(self, model: Any, quantity: str) -> ImmutableMatrix:
        if quantity in RMS:  # σ = √(mean(x²) + ε), one per row
            squares = self.mean_squares(model, NORMED[RMS.index(quantity)])
            return ImmutableMatrix([[sympy.sqrt(_rat(a))] for a in squares])
        key = "qk_norm:" + quantity
        if key not in model.memo:
            rows, a = self.weighted(model, quantity), self.mean_squares(model, quantity)
            model.memo[key] = ImmutableMatrix([[_rat(x) / sympy.sqrt(_rat(s)) for x in row] for row, s in zip(rows, a)])
        return model.memo[key]

    def rationals(self, model: Any, quantity: str) -> Rows | None:
        if quantity in RMS:
            return tuple((_square(a),) for a in self.mean_squares(model, NORMED[RMS.index(quantity)]))
        if quantity in NORMED:
            out = []
            for row, a in zip(self.weighted(model, quantity), self.mean_squares(model, quantity)):
                root = _square(a)
                out.append(tuple(Fraction(0) if x == 0 else None if root is None else x / root for x in row))
            return tuple(out)
        if quantity == "scores":
            return tuple(tuple(_root_value(s) for s in row) for row in self.structures(model))
        return None

    # --- the scores' structure -------------------------------------------

    def structures(self, model: Any) -> tuple[tuple[Root, ...], ...]:
        """Each score as (ρ, m): S_ij = ρ·√m = (q̂-numerators · k̂-numerators)/√(a_i b_j)."""
        if "qk_norm:structures" not in model.memo:
            Q, K = self.weighted(model, "Q_norm"), self.weighted(model, "K_norm")
            a, b = self.mean_squares(model, "Q_norm"), self.mean_squares(model, "K_norm")
            model.memo["qk_norm:structures"] = tuple(
                tuple((sum((x * y for x, y in zip(q, k)), Fraction(0)), 1 / (ai * bj)) for k, bj in zip(K, b))
                for q, ai in zip(Q, a)
            )
        return model.memo["qk_norm:structures"]

    def structure(self, model: Any, i: int, j: int) -> Root:
        return self.structures(model)[i][j]

    def split(self, model: Any, s: Any) -> tuple[tuple, Any]:
        return (), s

    @staticmethod
    def minus(x: Any, y: Any) -> Diff:
        return x, y

    def linear(self, model: Any) -> RootLinear:
        return RootLinear(model.scale)

    def scores(self, model: Any) -> ImmutableMatrix:
        return ImmutableMatrix([[_rat(rho) * sympy.sqrt(_rat(m)) for rho, m in row] for row in self.structures(model)])

    # --- enclosures ------------------------------------------------------

    def box(self, model: Any, x: Any, bits: int) -> Fixed:
        """ρ√m (or a difference of two) at 2**-bits."""
        if not isinstance(x[0], Fraction):
            a, b = (self.box(model, s, bits) for s in x)
            return Fixed(a.lo - b.hi, a.hi - b.lo, bits)
        rho, m = x
        return Fixed.from_interval(numeric.enclose(_rat(rho) * sympy.sqrt(_rat(m)), bits + 32), bits)

    def boxes(self, boxes: Any, quantity: str) -> list[Fixed]:
        m = self.exact(boxes.model, quantity)
        return [Fixed.from_interval(numeric.enclose(x, boxes.bits + 32), boxes.bits) for x in m]

    def shown_scores(self, model: Any, places: int, notation: str, hand: bool) -> NumRows:
        from symattn.exact.rounding import exact_or_rounded, from_model

        if not hand:
            return from_model(model, "scores", places, notation)
        # by hand: the dot products of the normalized rows as shown, as a student works them
        Q, K = (from_model(model, name, places, notation) for name in ("Q_norm", "K_norm"))
        rows = [[sum((x.fraction * y.fraction for x, y in zip(q, k)), Fraction(0)) for k in K] for q in Q]
        return exact_or_rounded(rows, places, notation)

    # --- the claimant's numbers carried forward ----------------------------------------

    def implied(self, chain: Any, model: Any, quantity: str, row: int, col: int | None, head: int | None) -> Any:
        """σ exact; Q̂ and K̂ from the inputs and the claimant's own σ of the row where claimed; the scores from
        their own Q̂ and K̂ where claimed."""
        if quantity in RMS:
            return self.exact(model, quantity)[row, 0], False
        if quantity in NORMED and col is not None:
            rms = RMS[NORMED.index(quantity)]
            if rms not in chain.names:
                return self.exact(model, quantity)[row, col], False
            sigma, carried = chain.implied(rms, row, None, head)
            x = self.weighted(model, quantity)[row][col]
            return _rat(x) / sigma, carried
        if quantity == "scores" and col is not None:
            if chain.names & set(NORMED):
                width = chain.layout.width_q
                return chain.dot(
                    [
                        (chain.implied("Q_norm", row, k, head), chain.implied("K_norm", col, k, head))
                        for k in range(width)
                    ]
                )
            return model.scores[row, col], False
        return None

    def explained(self, explainer: Any, model: Any, quantity: str, row: int | None, head: int | None) -> Any:
        """A wrong normalized entry: the document shows its row's σ; the report, its value."""
        return () if quantity in NORMED + RMS else None

    def operands(self, explainer: Any, model: Any, quantity: str, i: int, k: int, head: int | None) -> Any:
        if quantity == "scores":
            return tuple(
                (explainer.sig("Q_norm", i, c, head), explainer.sig("K_norm", k, c, head)) for c in range(model.d_k)
            )
        return None

    # --- the backward pass -------------------------------------------------------------

    def gradient(self, model: Any) -> RmsBack:
        return RmsBack(
            tuple(sympy.sqrt(_rat(a)) for a in self.mean_squares(model, "Q_norm")),
            tuple(sympy.sqrt(_rat(b)) for b in self.mean_squares(model, "K_norm")),
            self.q_weight,
            self.k_weight,
        )


@record
class RmsBack:
    """Backward through RMSNorm: with ŷ = x ⊙ w / σ, σ² = mean(x²) + ε, and g = dL/dŷ,

        dx = (w ⊙ g)/σ − x · Σ_j (w ⊙ g)_j x_j / (d · σ³)

    after dQ̂ = dS K̂ and dK̂ = dSᵀ Q̂."""

    q_sigma: tuple[sympy.Expr, ...]
    k_sigma: tuple[sympy.Expr, ...]
    q_weight: tuple[Fraction, ...] | None
    k_weight: tuple[Fraction, ...] | None
    stage: ClassVar[int] = QK
    names: ClassVar[tuple[str, ...]] = ("dQ_norm", "dK_norm")
    after: ClassVar[str] = "dS"
    forms: ClassVar[bool] = False

    @staticmethod
    def _normed(alg: Any, X: list, sigma: tuple, w: tuple[Fraction, ...] | None) -> list:
        return [
            [x * alg.const(w[c] if w else Fraction(1)) * alg.real(1 / s) for c, x in enumerate(row)]
            for row, s in zip(X, sigma)
        ]

    @staticmethod
    def _dots(alg: Any, G: list, X: list, w: tuple[Fraction, ...] | None) -> list:
        """Σ_j (w ⊙ g)_j x_j of each row: the one sum that RMSNorm's backward needs besides g."""
        from symattn.exact.gradients import total

        one = Fraction(1)
        return [
            [total(alg, (gi * alg.const(w[c] if w else one) * xi for c, (gi, xi) in enumerate(zip(g, x))))]
            for g, x in zip(G, X)
        ]

    @staticmethod
    def _back(alg: Any, G: list, X: list, dots: list, sigma: tuple, w: tuple[Fraction, ...] | None) -> list:
        out = []
        for g, x, dot, s in zip(G, X, dots, sigma):
            wg = [gi * alg.const(w[c] if w else Fraction(1)) for c, gi in enumerate(g)]
            inv, inv3 = alg.real(1 / s), alg.real(1 / (len(x) * s**3))
            out.append([a * inv - b * dot[0] * inv3 for a, b in zip(wg, x)])
        return out

    def through(self, alg: Any, dS: list, K: list, Q: list, out: dict, hook: Any) -> None:
        from symattn.exact.gradients import matmul, transpose

        # Q̂ and K̂ pass the hook as the forward pass shows them (by hand: the rows dQ̂ and dK̂ are worked from)
        Qn = hook("Q_norm", self._normed(alg, Q, self.q_sigma, self.q_weight))
        Kn = hook("K_norm", self._normed(alg, K, self.k_sigma, self.k_weight))
        out["dQ_norm"] = dQ = hook("dQ_norm", matmul(alg, dS, Kn))
        out["dK_norm"] = dK = hook("dK_norm", matmul(alg, transpose(dS), Qn))
        out["dot_Q_norm"] = q_dots = hook("dot_Q_norm", self._dots(alg, dQ, Q, self.q_weight))
        out["dot_K_norm"] = k_dots = hook("dot_K_norm", self._dots(alg, dK, K, self.k_weight))
        out["dQ"] = hook("dQ", self._back(alg, dQ, Q, q_dots, self.q_sigma, self.q_weight))
        out["dK"] = hook("dK", self._back(alg, dK, K, k_dots, self.k_sigma, self.k_weight))


def _root_value(s: Root) -> Fraction | None:
    """ρ√m where rational, else None."""
    root = _square(s[1])
    return Fraction(0) if s[0] == 0 else None if root is None else s[0] * root


def _rat(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)


__all__ = ["Normed", "RmsBack", "RootLinear"]
