"""The verdict on one claim, and why: the exact value, the claimant's own implied value, an explanation.

Each claim gets one verdict, the first that holds:

``exact``       it equals the exact value;
``rounded``     the exact value rounded half-up to the claim's decimals gives it;
``carried``     it follows from the claimant's own earlier numbers (error carried
                forward): the hand chain of :mod:`symattn.exact.rounding` run on what they
                claimed, or a rounding of their own more precise claim of the same number;
``last-digit``  one unit off in the last place from the rounded exact or carried
                value (``truncated`` when cutting the exact value gives it);
``wrong``       anything else.

Unclaimed steps of the chain are filled in from the claimant's earlier claims
(their implied values), or from the exact values where nothing is claimed.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from functools import cached_property

import sympy

from symattn.checking.report import Explanation, Verdict
from symattn.checking.slips import Slips
from symattn.exact import numeric
from symattn.exact.model import Model
from symattn.exact.rounding import Num, is_extreme
from symattn.input.claims import GRADIENTS, INPUTS, Claim
from symattn.input.decimals import round_half_up, terminating_decimals, truncate
from symattn.input.numeral import Numeral
from symattn.input.reader import Entry
from symattn.input.spec import Spec

SIGNIFICANT = 6


def _rational(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)


def _number(x: Entry) -> Fraction:
    assert isinstance(x, Numeral)  # the checker's spec has numbers only: values are substituted for symbols
    return x.value


def _entry(row: int | None, col: int | None) -> tuple[int, int]:
    """The position of one entry of a matrix quantity: a claim on one has both (only sqrt_dk and exp_sum lack some)."""
    assert row is not None and col is not None
    return row, col


class Checker:
    """The verdicts on one spec's claims: exact values, the claimant's own implied values, explanations."""

    def __init__(self, spec: Spec, model, claims: tuple[Claim, ...]):
        self.spec = spec
        self.model: Model = model.forward
        self.gradients = model.backward  # the backward model, or None
        self.claims = claims
        self.index: dict[tuple[str, int | None, int | None], list[Claim]] = {}
        for c in claims:
            quantity = "weights" if c.quantity == "percent" else c.quantity
            self.index.setdefault((quantity, c.row, c.col), []).append(c)

    # --- the claimant's implied values: (closed form, depends on a claim) ----

    def claimed(self, quantity: str, row: int | None, col: int | None) -> Fraction | None:
        found = [c for c in self.index.get((quantity, row, col), []) if not c.number.is_infinite]
        if not found:
            return None
        # a row section feeds its own row; the most precise of several claims wins
        best = max(found, key=lambda c: (c.in_row_section, c.number.decimals is None, c.number.decimals or 0))
        return best.number.value

    def implied(self, quantity: str, row: int | None = None, col: int | None = None) -> tuple[sympy.Expr, bool]:
        value = self.claimed(quantity, row, col)
        if value is not None:
            return _rational(value), True
        return self.computed(quantity, row, col)

    @cached_property
    def _cache(self) -> dict:
        return {}

    def computed(self, quantity: str, row: int | None, col: int | None) -> tuple[sympy.Expr, bool]:
        """The value of one quantity from the implied values before it."""
        key = (quantity, row, col)
        if key in self._cache:
            return self._cache[key]
        m = self.model
        if quantity in INPUTS:
            result = (_rational(getattr(self.spec, quantity)[row][col].value), False)
        elif quantity == "sqrt_dk":
            result = (m.sqrt_dk, False)
        elif quantity == "scores":
            if any(key[0] in ("Q", "K") for key in self.index):  # from the claimant's own Q and K
                terms = [(self.implied("Q", row, k), self.implied("K", col, k)) for k in range(len(self.spec.Q[0]))]
                result = (sympy.Add(*[q * k for (q, _), (k, _) in terms]), any(a or b for (_, a), (_, b) in terms))
            else:
                result = (m.scores[row, col], False)
        elif quantity == "scaled":
            score, a = self.implied("scores", row, col)
            if self.spec.scale == "sqrt":
                root, b = self.implied("sqrt_dk")
                result = (score / root, a or b)
            else:
                result = (score * m.scale, a)
        elif quantity in ("exp", "weights") and not m.may_attend(*_entry(row, col)):
            result = (sympy.Integer(0), False)  # masked: e^−∞ = 0, whatever was claimed before the mask
        elif quantity == "exp":
            z, a = self.implied("scaled", row, col)
            result = (sympy.exp(z), a)
        elif quantity == "exp_sum":
            exps = [self.implied("exp", row, j) for j in range(m.n_keys)]
            result = (sympy.Add(*[t for t, _ in exps]), any(a for _, a in exps))
        elif quantity == "weights":
            e, a = self.implied("exp", row, col)
            total, b = self.implied("exp_sum", row)
            result = (e / total, a or b)
        elif quantity == "output":
            terms = [(self.implied("weights", row, j), self.implied("V", j, col)) for j in range(m.n_keys)]
            result = (sympy.Add(*[w * v for (w, _), (v, _) in terms]), any(a or b for (_, a), (_, b) in terms))
        elif quantity in GRADIENTS or quantity in ("dO", "dot"):
            result = self.gradient(quantity, *_entry(row, col))
        else:  # pragma: no cover - the claims reader allows no other quantity
            raise ValueError(quantity)
        self._cache[key] = result
        return result

    def _sum(self, pairs: list) -> tuple[sympy.Expr, bool]:
        return sympy.Add(*[a * b for (a, _), (b, _) in pairs]), any(x or y for (_, x), (_, y) in pairs)

    def gradient(self, quantity: str, row: int, col: int) -> tuple[sympy.Expr, bool]:
        """A gradient from the claimant's own weights (and dA, dZ, ...) before it: error carried forward."""
        m, b = self.model, self.spec.backward
        assert b is not None  # gradient claims are checked only with [backward]
        n, keys, dv = m.n_queries, m.n_keys, len(self.spec.V[0])
        if quantity == "dO":
            if b.loss == "sum":
                return sympy.Integer(1), False
            if b.loss == "given":
                assert b.grad_output is not None  # the reader requires grad_output for loss "given"
                return _rational(b.grad_output[row][col].value), False
            assert b.target is not None  # and a target for the squared error
            out, a = self.implied("output", row, col)
            return out - _rational(b.target[row][col].value), a
        if quantity == "dV":
            return self._sum([(self.implied("weights", i, row), self.implied("dO", i, col)) for i in range(n)])
        if quantity == "dA":
            return self._sum([(self.implied("dO", row, k), self.implied("V", col, k)) for k in range(dv)])
        if quantity == "dot":
            return self._sum([(self.implied("dA", row, k), self.implied("weights", row, k)) for k in range(keys)])
        if quantity == "dZ":
            if not m.may_attend(row, col):
                return sympy.Integer(0), False
            (w, a), (g, c), (r, e) = (
                self.implied("weights", row, col),
                self.implied("dA", row, col),
                self.implied("dot", row, 0),
            )
            return w * (g - r), a or c or e
        if quantity == "dS":
            z, a = self.implied("dZ", row, col)
            if self.spec.scale == "sqrt":
                root, c = self.implied("sqrt_dk")
                return z / root, a or c
            return z * m.scale, a
        if quantity == "dQ":
            return self._sum([(self.implied("dS", row, j), self.implied("K", j, col)) for j in range(keys)])
        if quantity == "dK":
            return self._sum([(self.implied("dS", i, row), self.implied("Q", i, col)) for i in range(n)])
        p = self.spec.projection
        assert p is not None  # dX and dW_* are claimed only with X and W (the claims reader says so)
        if quantity == "dX":
            terms = []
            for name in ("Q", "K", "V"):
                W = getattr(p, f"W_{name}")
                terms += [
                    (self.implied(f"d{name}", row, c), (_rational(W[col][c].value), False)) for c in range(len(W[0]))
                ]
            return self._sum(terms)
        name = quantity[-1]  # dW_Q, dW_K, dW_V: Xᵀ dQ (X_kv for K and V)
        X = p.X if name == "Q" else p.source_of_keys
        return self._sum(
            [((_rational(_number(X[i][row])), False), self.implied(f"d{name}", i, col)) for i in range(len(X))]
        )

    def source(self, quantity: str):
        """The model whose quantity it is: the backward model for gradients."""
        return self.gradients if quantity in GRADIENTS else self.model

    # --- verdicts --------------------------------------------------------

    @staticmethod
    def position(claim: Claim) -> tuple[int, int]:
        if claim.quantity == "sqrt_dk":
            return 0, 0
        if claim.quantity == "exp_sum":
            return _entry(claim.row, 0)
        return _entry(claim.row, claim.col)

    def table(self, model: Model, method: str, quantity: str, *args: int) -> tuple:
        """A whole matrix of the model's numbers, computed once for every claim on it."""
        key = (id(model), method, quantity, *args)
        if key not in self._tables:
            self._tables[key] = getattr(model, method)(quantity, *args)
        return self._tables[key]

    @cached_property
    def _tables(self) -> dict:
        return {}

    @cached_property
    def slips(self) -> Slips:
        """The classic slips of the model (their roundings share the checker's tables)."""
        return Slips(self.model, self._tables)

    @cached_property
    def unmasked(self) -> Model:
        """The model without its mask: what a score printed before masking is compared with."""
        return replace(self.model, allowed=None)

    def exact_value(self, quantity: str, i: int, j: int, decimals: int | None, model: Model | None = None):
        """(rational or None, closed form, SIGNIFICANT-digit Num, rounded to decimals)."""
        if quantity in INPUTS:
            exact = getattr(self.spec, quantity)[i][j].value
            rounded = None if decimals is None else round_half_up(exact, decimals)
            return exact, _rational(exact), self.sig(quantity, i, j), rounded
        model = model or self.source(quantity)
        exact = self.table(model, "rationals", quantity)[i][j]
        rounded = self.table(model, "rounded", quantity, decimals)[i][j] if decimals is not None else None
        return exact, model.exact(quantity)[i, j], self.sig(quantity, i, j, model), rounded

    def verdict(self, claim: Claim) -> Verdict:
        quantity = "weights" if claim.quantity == "percent" else claim.quantity
        i, j = self.position(claim)
        number = claim.number
        is_masked = quantity == "scaled" and not self.model.may_attend(i, j)
        if number.is_infinite:
            return self.infinite(claim, quantity, i, j, is_masked)
        d = number.decimals
        c = number.value
        exact, closed, shown, expected = self.exact_value(quantity, i, j, d, self.unmasked if is_masked else None)
        y, from_claims = self.computed(quantity, claim.row, claim.col)
        if y.has(sympy.nan, sympy.zoo):  # e.g. weights from a claimed sum of 0: no value to carry
            from_claims = False
        carried = (
            numeric.round_expr(y, d, self._tables.setdefault("enclosures", {}))
            if (from_claims and d is not None)
            else None
        )

        truncated = False
        if exact is not None and exact == c:
            verdict = "exact"
        elif expected is not None and Fraction(expected) == c:
            verdict = "rounded"
        elif self.is_carried(claim, y, from_claims, carried):
            verdict = "carried"
        elif d is not None and self.one_off(c, d, expected, carried):
            verdict = "last-digit"
            truncated = self.is_truncation(
                self.unmasked if is_masked else self.source(quantity), quantity, i, j, c, d, exact
            )
        else:
            verdict = "wrong"
        explanation = None
        if verdict in ("wrong", "last-digit"):
            explanation = self.explain(quantity, claim.row, claim.col, shown)
        if claim.quantity == "percent":  # report in the claim's own unit
            expected, carried = (None if x is None else x.scaleb(2) for x in (expected, carried))
        diagnosis = self.slips.diagnose(quantity, i, j, c, d) if verdict == "wrong" else None
        return Verdict(
            claim,
            verdict,
            truncated,
            shown,
            closed,
            expected,
            carried,
            explanation,
            *self.labels(claim),
            masked=is_masked,
            diagnosis=diagnosis,
        )

    def labels(self, claim: Claim) -> tuple[str | None, str | int | None]:
        quantity = "weights" if claim.quantity == "percent" else claim.quantity
        rows = self.spec.keys if quantity in ("K", "V") else self.spec.tokens
        row_label = None if claim.row is None else rows[claim.row]
        col_label = (
            None
            if claim.col is None
            else (claim.col + 1 if quantity in ("output",) + INPUTS else self.spec.keys[claim.col])
        )
        return row_label, col_label

    def infinite(self, claim: Claim, quantity: str, i: int, j: int, is_masked: bool) -> Verdict:
        """−∞ is exact for a masked score and wrong anywhere else."""
        _, closed, shown, _ = self.exact_value(quantity, i, j, None)
        explanation = None if is_masked else self.explain(quantity, claim.row, claim.col, shown)
        return Verdict(
            claim, "exact" if is_masked else "wrong", False, shown, closed, None, None, explanation, *self.labels(claim)
        )

    def is_carried(self, claim: Claim, y: sympy.Expr, from_claims: bool, carried: Decimal | None) -> bool:
        c, d = claim.number.value, claim.number.decimals
        quantity = "weights" if claim.quantity == "percent" else claim.quantity
        for other in self.index.get((quantity, claim.row, claim.col), []):
            od = other.number.decimals
            if (
                other is not claim
                and d is not None
                and (od is None or od > d)
                and Fraction(round_half_up(other.number.value, d)) == c
            ):
                return True
        if not from_claims:
            return False
        if d is None:
            return isinstance(y, sympy.Rational) and Fraction(int(y.p), int(y.q)) == c
        assert carried is not None  # verdict() rounds y whenever it follows from claims and d is given
        return Fraction(carried) == c

    @staticmethod
    def one_off(c: Fraction, d: int, expected: Decimal | None, carried: Decimal | None) -> bool:
        unit = Fraction(10) ** -d
        return any(ref is not None and abs(Fraction(ref) - c) == unit for ref in (expected, carried))

    @staticmethod
    def is_truncation(model: Model, quantity: str, i: int, j: int, c: Fraction, d: int, exact: Fraction | None) -> bool:
        if exact is not None:
            return Fraction(truncate(exact, d)) == c
        # cutting x toward zero gives c  <=>  c <= x < c + unit (x >= 0), mirrored below zero
        unit = Fraction(10) ** -d
        low, high = (c, c + unit) if c >= 0 else (c - unit, c)
        return (
            model.compare(quantity, i, j, low) >= 0 > model.compare(quantity, i, j, high)
            if c >= 0
            else model.compare(quantity, i, j, low) > 0 >= model.compare(quantity, i, j, high)
        )

    # --- explanations ----------------------------------------------------

    def sig(self, quantity: str, i: int, j: int, model: Model | None = None) -> Num:
        model = model or self.source(quantity)
        if quantity in INPUTS:
            exact = getattr(self.spec, quantity)[i][j].value
        else:
            exact = self.table(model, "rationals", quantity)[i][j]
        places = None if exact is None else terminating_decimals(exact)
        if places is not None and not is_extreme(exact):  # a terminating value is shown whole: 0.92, not 0.920000
            return Num(round_half_up(exact, places), True)
        value = self.table(model, "significant", quantity, SIGNIFICANT)[i][j]
        return Num(
            value, exact is not None and Fraction(value) == exact, value.is_finite() and is_extreme(Fraction(value))
        )

    def explain(self, quantity: str, row: int | None, col: int | None, result: Num) -> Explanation:
        spec, m = self.spec, self.model
        if quantity == "sqrt_dk":  # a scalar: no row, no column
            return Explanation(quantity, row, col, (spec.d_k,), result)
        if quantity == "exp_sum":  # a column: a row, no column
            assert row is not None
            return Explanation(quantity, row, col, tuple(self.sig("exp", row, j) for j in range(m.n_keys)), result)
        i, k = _entry(row, col)  # every other quantity is a matrix
        operands: tuple
        if quantity in INPUTS:
            p = spec.projection
            assert p is not None  # Q, K and V are claimed only when computed from X and W
            X, W, b = p.weights(quantity)
            operands = (tuple(zip(X[i], [w[k] for w in W])), b[k] if b else None)
        elif quantity == "scores":
            operands = tuple(zip(spec.Q[i], spec.K[k]))
        elif quantity == "scaled":
            operands = (self.sig("scores", i, k), spec.d_k if spec.scale == "sqrt" else spec.scale)
        elif quantity == "exp":
            operands = (self.sig("scaled", i, k),)
        elif quantity == "weights":
            operands = (self.sig("exp", i, k), self.sig("exp_sum", i, 0))
        elif quantity in GRADIENTS:
            operands = self.explain_gradient(quantity, i, k)
        else:
            operands = tuple((self.sig("weights", i, j), spec.V[j][k]) for j in range(m.n_keys))
        return Explanation(quantity, row, col, operands, result)

    def explain_gradient(self, quantity: str, row: int, col: int) -> tuple:
        """Pairs whose products sum to the gradient (for dZ: α × (dA − r); for dS: dZ × scale)."""
        g, spec, m = self.gradients, self.spec, self.model
        n, keys = m.n_queries, m.n_keys

        def sig(q: str, i: int, j: int) -> Num:
            return self.sig(q, i, j, g)

        if quantity == "dV":
            return tuple((self.sig("weights", i, row), sig("dO", i, col)) for i in range(n))
        if quantity == "dA":
            return tuple((sig("dO", row, k), spec.V[col][k]) for k in range(len(spec.V[0])))
        if quantity == "dZ":
            difference = g.significant("dA", SIGNIFICANT)[row][col] - g.significant("dot", SIGNIFICANT)[row][0]
            return ((self.sig("weights", row, col), Num(difference, False)),)
        if quantity == "dS":
            return ((sig("dZ", row, col), Num(self.model.significant("scale", SIGNIFICANT)[0][0], False)),)
        if quantity == "dQ":
            return tuple((sig("dS", row, j), spec.K[j][col]) for j in range(keys))
        if quantity == "dK":
            return tuple((sig("dS", i, row), spec.Q[i][col]) for i in range(n))
        p = spec.projection
        assert p is not None  # dX and dW_* are claimed only with X and W (the claims reader says so)
        if quantity == "dX":
            return tuple(
                (sig(f"d{name}", row, c), getattr(p, f"W_{name}")[col][c])
                for name in ("Q", "K", "V")
                for c in range(len(getattr(p, f"W_{name}")[0]))
            )
        X = p.X if quantity == "dW_Q" else p.source_of_keys
        return tuple((X[i][row], sig(f"d{quantity[-1]}", i, col)) for i in range(len(X)))


__all__ = ["Checker", "SIGNIFICANT"]
