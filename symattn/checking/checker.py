"""Check hand-computed numbers against the exact model, and say why each is right or wrong.

Each claim gets one verdict, the first that holds:

``exact``       it equals the exact value;
``rounded``     the exact value rounded half-up to the claim's decimals gives it;
``carried``     it follows from the claimant's own earlier numbers (error carried
                forward): the hand chain of :mod:`symattn.exact.rounding` run on what they
                claimed, or a rounding of their own more precise claim of the same number;
``last-digit``  one unit off in the last place from the rounded exact or carried
                value (``truncated`` when cutting the exact value gives it);
``wrong``       anything else.

A blank (``"weights[3][1]" = ""`` in a claims file, as ``symattn exercise`` writes
them) is not a claim: it gets no verdict and is never a problem. The report lists
blanks in ``Report.blanks``, and ``report_data`` gives them under
``summary.blanks`` when there are any.

Unclaimed steps of the chain are filled in from the claimant's earlier claims
(their implied values), or from the exact values where nothing is claimed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import Any, Mapping

import sympy

from symattn.input.decimals import round_half_up, terminating_decimals, truncate
from symattn.exact import numeric
from symattn.exact import progress
from symattn.input.claims import GRADIENTS, INPUTS, STAGE, Claim, Claims, load_claims
from symattn.exact.factory import build
from symattn.exact.model import Model
from symattn.exact.rounding import Num, is_extreme
from symattn.input.errors import SpecError
from symattn.input.spec import Spec

VERDICTS = ("exact", "rounded", "carried", "last-digit", "wrong")
# the classic slips a wrong claim is tested against, in this order
SLIPS = ("no_scaling", "column_softmax", "no_exp", "transposed_V")
SIGNIFICANT = 6


@dataclass(frozen=True)
class Explanation:
    """How the right number comes about, with the user's inputs: operands and result."""

    quantity: str
    row: int | None
    col: int | None
    operands: tuple[Any, ...]  # Numerals, Nums, or pairs of them for sums of products
    result: Num


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str
    truncated: bool
    value: Num  # the exact value to SIGNIFICANT digits
    closed_form: sympy.Expr
    expected: Decimal | None  # the exact value rounded to the claim's decimals
    carried: Decimal | None  # what the claimant's own numbers give at those decimals
    explanation: Explanation | None
    row_label: str | None  # the query token
    col_label: str | int | None  # the key token, or the 1-based output column
    masked: bool = False  # a finite claim on a masked score, compared with the score before the mask
    diagnosis: str | None = None  # a wrong claim that one of the classic slips (SLIPS) gives exactly

    @property
    def is_problem(self) -> bool:
        return self.verdict in ("wrong", "last-digit")


@dataclass(frozen=True)
class Report:
    title: str | None
    lang: str
    tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    source: str
    results: tuple[Verdict, ...]  # in the order of the derivation
    builtin: bool = False  # the claims file is a built-in example (the report says so in its language)
    paper: str = "a4"  # "a4" or "letter"
    cjk_font: str | None = None
    engine: str | None = None
    blanks: tuple[str, ...] = ()  # keys left blank (""), not checked
    student: str | None = None  # the claims file's ``student`` id

    @property
    def counts(self) -> tuple[tuple[str, int], ...]:
        return tuple((v, sum(r.verdict == v for r in self.results)) for v in VERDICTS)

    @property
    def first_problem(self) -> Verdict | None:
        """The first wrong or last-digit claim in the order of the derivation: fix it first."""
        return next((r for r in self.results if r.is_problem), None)

    @property
    def ok(self) -> bool:
        return self.first_problem is None


def _rational(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)


def _order(claim: Claim) -> tuple:
    return (STAGE[claim.quantity], claim.row if claim.row is not None else -1,
            claim.col if claim.col is not None else -1, claim.in_row_section, claim.quantity == "percent")


class _Checker:
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
        best = max(found, key=lambda c: (c.in_row_section, c.number.decimals is None,
                                         c.number.decimals or 0))
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
        elif quantity in ("exp", "weights") and not m.may_attend(row, col):
            result = (sympy.Integer(0), False)  # masked: e^−∞ = 0, whatever was claimed before the mask
        elif quantity == "exp":
            z, a = self.implied("scaled", row, col)
            result = (sympy.exp(z), a)
        elif quantity == "exp_sum":
            terms = [self.implied("exp", row, j) for j in range(m.n_keys)]
            result = (sympy.Add(*[t for t, _ in terms]), any(a for _, a in terms))
        elif quantity == "weights":
            e, a = self.implied("exp", row, col)
            total, b = self.implied("exp_sum", row)
            result = (e / total, a or b)
        elif quantity == "output":
            terms = [(self.implied("weights", row, j), self.implied("V", j, col)) for j in range(m.n_keys)]
            result = (sympy.Add(*[w * v for (w, _), (v, _) in terms]), any(a or b for (_, a), (_, b) in terms))
        elif quantity in GRADIENTS or quantity in ("dO", "dot"):
            result = self.gradient(quantity, row, col)
        else:  # pragma: no cover - the claims reader allows no other quantity
            raise ValueError(quantity)
        self._cache[key] = result
        return result

    def _sum(self, pairs: list) -> tuple[sympy.Expr, bool]:
        return sympy.Add(*[a * b for (a, _), (b, _) in pairs]), any(x or y for (_, x), (_, y) in pairs)

    def gradient(self, quantity: str, row: int, col: int) -> tuple[sympy.Expr, bool]:
        """A gradient from the claimant's own weights (and dA, dZ, ...) before it: error carried forward."""
        m, b = self.model, self.spec.backward
        n, keys, dv = m.n_queries, m.n_keys, len(self.spec.V[0])
        if quantity == "dO":
            if b.loss == "sum":
                return sympy.Integer(1), False
            if b.loss == "given":
                return _rational(b.grad_output[row][col].value), False
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
            (w, a), (g, c), (r, e) = (self.implied("weights", row, col), self.implied("dA", row, col),
                                      self.implied("dot", row, 0))
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
        if quantity == "dX":
            terms = []
            for name in ("Q", "K", "V"):
                W = getattr(p, f"W_{name}")
                terms += [(self.implied(f"d{name}", row, c), (_rational(W[col][c].value), False))
                          for c in range(len(W[0]))]
            return self._sum(terms)
        name = quantity[-1]  # dW_Q, dW_K, dW_V: Xᵀ dQ (X_kv for K and V)
        X = p.X if name == "Q" else p.source_of_keys
        return self._sum([((_rational(X[i][row].value), False), self.implied(f"d{name}", i, col))
                          for i in range(len(X))])

    def source(self, quantity: str):
        """The model whose quantity it is: the backward model for gradients."""
        return self.gradients if quantity in GRADIENTS else self.model

    # --- verdicts --------------------------------------------------------

    def position(self, claim: Claim) -> tuple[int, int]:
        if claim.quantity == "sqrt_dk":
            return 0, 0
        if claim.quantity == "exp_sum":
            return claim.row, 0
        return claim.row, claim.col

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
        carried = numeric.round_expr(y, d, self._tables.setdefault("enclosures", {})) \
            if (from_claims and d is not None) else None

        truncated = False
        if exact is not None and exact == c:
            verdict = "exact"
        elif expected is not None and Fraction(expected) == c:
            verdict = "rounded"
        elif self.is_carried(claim, y, from_claims, carried):
            verdict = "carried"
        elif d is not None and self.one_off(c, d, expected, carried):
            verdict = "last-digit"
            truncated = self.is_truncation(self.unmasked if is_masked else self.source(quantity), quantity, i, j, c, d,
                                           exact)
        else:
            verdict = "wrong"
        explanation = None
        if verdict in ("wrong", "last-digit"):
            explanation = self.explain(quantity, claim.row, claim.col, shown)
        if claim.quantity == "percent":  # report in the claim's own unit
            expected, carried = (None if x is None else x.scaleb(2) for x in (expected, carried))
        diagnosis = self.diagnose(quantity, i, j, c, d) if verdict == "wrong" else None
        return Verdict(claim, verdict, truncated, shown, closed, expected, carried, explanation, *self.labels(claim),
                       masked=is_masked, diagnosis=diagnosis)

    # --- the classic slips ------------------------------------------------

    def diagnose(self, quantity: str, i: int, j: int, c: Fraction, d: int | None) -> str | None:
        """The first classic slip that gives the claimed digits exactly, if any (unmasked specs only).

        A claim of fewer than three significant digits (0.40) could match a slip by chance: none is named.
        """
        if d is None or self.model.allowed is not None or abs(c) * Fraction(10) ** d < 100:
            return None
        for slip in SLIPS:
            value = self.slip_value(slip, quantity, i, j)
            if value is not None and Fraction(numeric.round_expr(value, d, self._tables.setdefault("slips", {}))) == c:
                return slip
        return None

    def diagnose_rows(self, results: tuple[Verdict, ...]) -> tuple[Verdict, ...]:
        """Short claims (fewer than three significant digits) named after all, when a whole row shows the slip.

        One 0.4 may match a slip by chance; a row of two or more wrong claims of one quantity that each
        match the same slip at their own decimals (scaled = the scores, say) is the slip.
        """
        if self.model.allowed is not None:
            return results
        rows: dict[tuple[str, int], list[int]] = {}
        for k, v in enumerate(results):
            if v.verdict == "wrong" and v.diagnosis is None and v.claim.number.decimals is not None \
                    and not v.claim.number.is_infinite and v.claim.quantity != "percent":
                rows.setdefault((v.claim.quantity, self.position(v.claim)[0]), []).append(k)
        out = list(results)
        tables = self._tables.setdefault("slips", {})
        for (quantity, i), members in rows.items():
            if len(members) < 2:
                continue
            for slip in SLIPS:
                values = [self.slip_value(slip, quantity, i, self.position(results[k].claim)[1]) for k in members]
                if all(x is not None and Fraction(numeric.round_expr(x, results[k].claim.number.decimals, tables))
                       == results[k].claim.number.value for x, k in zip(values, members)):
                    for k in members:
                        out[k] = replace(out[k], diagnosis=slip)
                    break
        return tuple(out)

    def slip_value(self, slip: str, quantity: str, i: int, j: int) -> sympy.Expr | None:
        """What a quantity's entry is when computed with one classic slip, or None where it does not apply."""
        m = self.model
        S, V, n, keys = m.scores, m.V, m.n_queries, m.n_keys
        if slip == "no_scaling":
            if m.scale == 1 or quantity not in ("scaled", "exp", "weights", "output"):
                return None
            if quantity == "scaled":
                return S[i, j]
            if quantity == "exp":
                return sympy.exp(S[i, j])
            weights = [sympy.exp(S[i, k]) / sympy.Add(*[sympy.exp(S[i, r]) for r in range(keys)]) for k in range(keys)]
            return weights[j] if quantity == "weights" else sympy.Add(*[w * V[k, j] for k, w in enumerate(weights)])
        if slip == "column_softmax" and quantity == "weights" and n > 1:
            return m.exp[i, j] / sympy.Add(*[m.exp[r, j] for r in range(n)])
        if slip == "no_exp" and quantity == "weights":
            total = sympy.Add(*[m.scaled[i, k] for k in range(keys)])
            return None if total == 0 else m.scaled[i, j] / total
        if slip == "transposed_V" and quantity == "output" and V.rows == V.cols:
            return sympy.Add(*[m.weights[i, k] * V[j, k] for k in range(keys)])
        return None

    def labels(self, claim: Claim) -> tuple[str | None, str | int | None]:
        quantity = "weights" if claim.quantity == "percent" else claim.quantity
        rows = self.spec.keys if quantity in ("K", "V") else self.spec.tokens
        row_label = None if claim.row is None else rows[claim.row]
        col_label = None if claim.col is None else (
            claim.col + 1 if quantity in ("output",) + INPUTS else self.spec.keys[claim.col])
        return row_label, col_label

    def infinite(self, claim: Claim, quantity: str, i: int, j: int, is_masked: bool) -> Verdict:
        """−∞ is exact for a masked score and wrong anywhere else."""
        _, closed, shown, _ = self.exact_value(quantity, i, j, None)
        explanation = None if is_masked else self.explain(quantity, claim.row, claim.col, shown)
        return Verdict(claim, "exact" if is_masked else "wrong", False, shown, closed, None, None, explanation,
                       *self.labels(claim))

    def is_carried(self, claim: Claim, y: sympy.Expr, from_claims: bool, carried: Decimal | None) -> bool:
        c, d = claim.number.value, claim.number.decimals
        quantity = "weights" if claim.quantity == "percent" else claim.quantity
        for other in self.index.get((quantity, claim.row, claim.col), []):
            od = other.number.decimals
            if other is not claim and d is not None and (od is None or od > d) and \
                    Fraction(round_half_up(other.number.value, d)) == c:
                return True
        if not from_claims:
            return False
        if d is None:
            return isinstance(y, sympy.Rational) and Fraction(int(y.p), int(y.q)) == c
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
        return model.compare(quantity, i, j, low) >= 0 > model.compare(quantity, i, j, high) \
            if c >= 0 else model.compare(quantity, i, j, low) > 0 >= model.compare(quantity, i, j, high)

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
        return Num(value, exact is not None and Fraction(value) == exact,
                   value.is_finite() and is_extreme(Fraction(value)))

    def explain(self, quantity: str, row: int | None, col: int | None, result: Num) -> Explanation:
        spec, m = self.spec, self.model
        if quantity in INPUTS:
            X, W, b = spec.projection.weights(quantity)
            operands: tuple = (tuple(zip(X[row], [w[col] for w in W])), b[col] if b else None)
        elif quantity == "sqrt_dk":
            operands: tuple = (spec.d_k,)
        elif quantity == "scores":
            operands = tuple(zip(spec.Q[row], spec.K[col]))
        elif quantity == "scaled":
            operands = (self.sig("scores", row, col), spec.d_k if spec.scale == "sqrt" else spec.scale)
        elif quantity == "exp":
            operands = (self.sig("scaled", row, col),)
        elif quantity == "exp_sum":
            operands = tuple(self.sig("exp", row, j) for j in range(m.n_keys))
        elif quantity == "weights":
            operands = (self.sig("exp", row, col), self.sig("exp_sum", row, 0))
        elif quantity in GRADIENTS:
            operands = self.explain_gradient(quantity, row, col)
        else:
            operands = tuple((self.sig("weights", row, j), spec.V[j][col]) for j in range(m.n_keys))
        return Explanation(quantity, row, col, operands, result)


def _gradient_operands(self, quantity: str, row: int, col: int) -> tuple:
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
    if quantity == "dX":
        return tuple((sig(f"d{name}", row, c), getattr(p, f"W_{name}")[col][c])
                     for name in ("Q", "K", "V") for c in range(len(getattr(p, f"W_{name}")[0])))
    X = p.X if quantity == "dW_Q" else p.source_of_keys
    return tuple((X[i][row], sig(f"d{quantity[-1]}", i, col)) for i in range(len(X)))


_Checker.explain_gradient = _gradient_operands


def check(spec_or_result: Any, claims: Claims | Mapping[str, Any] | str, *, backward: bool = False) -> Report:
    """Check claimed numbers against the exact values of a spec (or a Result, or a Model's spec).

    ``claims`` is a claims file path, a mapping with a ``claims`` table (inputs
    inline or by path are ignored in favour of ``spec_or_result``), or Claims.
    ``backward``: add the backward pass (L = Σ O) when the spec has no ``[backward]``, as ``--backward`` does.
    """
    spec = getattr(spec_or_result, "spec", spec_or_result)
    model = getattr(spec_or_result, "model", None)
    if spec is None:
        loaded = load_claims(claims)
        spec = loaded.spec
    else:
        from symattn.input.spec import load_spec
        spec = load_spec(spec)
        loaded = load_claims(claims, spec=spec)
    given = spec
    spec = _numeric(spec.with_options(backward=True) if backward and spec.backward is None else spec)
    if spec.backward is None:
        gradient = next((c for c in loaded.claims if c.quantity in GRADIENTS), None)
        if gradient is not None:
            raise SpecError(loaded.source, gradient.key, "a claim on a gradient needs [backward] in the spec "
                                                         "(or --backward)")
    if model is None or spec is not given:  # a Result's model is reused when its spec is the one checked
        model = build(spec)
    checker = _Checker(spec, model, loaded.claims)
    results = checker.diagnose_rows(tuple(_verdict(checker, c) for c in sorted(loaded.claims, key=_order)))
    return Report(spec.title, spec.lang, spec.tokens, spec.keys, loaded.source, results, paper=spec.page,
                  cjk_font=spec.cjk_font, engine=spec.engine, blanks=loaded.blanks, student=loaded.student)


def _verdict(checker: "_Checker", claim: Claim) -> Verdict:
    progress.step("claim")
    return checker.verdict(claim)


def _numeric(spec: Spec) -> Spec:
    """The spec whose numbers are checked: values substituted for symbols; one head."""
    if spec.heads > 1 or spec.W_O is not None:
        raise SpecError(spec.source, "heads", "checking claims supports one head without W_O")
    if spec.is_symbolic:
        from symattn.exact.symbolic import substitute
        missing = sorted(set(spec.symbols) - {name for name, _ in spec.subs})
        if missing:
            raise SpecError(spec.source, "subs", "give a value for every symbol to check numbers; missing: "
                            + ", ".join(missing))
        spec = substitute(spec)
    return spec


def report_data(report: Report) -> dict[str, Any]:
    """The report as JSON-ready data: one object per claim, then a summary."""
    def text(x: Decimal | None) -> str | None:
        return None if x is None else format(x, "f")

    claims = [{
        "quantity": v.claim.quantity,
        "row": v.row_label,
        "col": v.col_label,
        "claimed": v.claim.number.text,
        "exact": str(v.closed_form),
        "value": str(v.value.value) if v.value.scientific else format(v.value.value, "f"),
        "verdict": v.verdict,
        "truncated": v.truncated,
        "expected": text(v.expected),
        "carried": text(v.carried),
        "key": v.claim.key,
        "diagnosis": v.diagnosis,
    } for v in report.results]
    first = report.first_problem
    summary: dict[str, Any] = {
        "counts": dict(report.counts),
        "first_wrong": None if first is None else claims[report.results.index(first)],
    }
    if report.blanks:
        summary["blanks"] = list(report.blanks)
    return {"claims": claims, "summary": summary}


__all__ = ["Explanation", "Report", "VERDICTS", "Verdict", "check", "report_data"]
