"""ALiBi's distance bias in the exact model: z_ij = S_ij · scale − m·|i − j|.

Each biased score is p·scale + q·m with rationals p = S_ij and q = −|i − j|. Whether two scores are
equal, and whether one is rational, is decided from (p, q) alone:

- when scale/m = t is rational (1/√2 with the paper's m = 2^(−1/2), or rational scale and slope),
  z = (p·t + q)·m: order and equality are those of the rational p·t + q, since m > 0;
- otherwise 1, scale and m are linearly independent over Q (scale is c·√r, m is k·2^e; 2^e lies in
  Q(√r) only when it is rational or r = 2 and e − 1/2 is an integer, the case above), so z is
  rational iff each of p·scale and q·m is, and two scores are equal iff their (p, q) are; the order
  of unequal ones is decided by enclosures, which must separate them.

e^z is then rational only at z = 0 (Lindemann–Weierstrass), and the weights and outputs follow the
rules of :class:`~symattn.exact.model.Model` on the groups of equal scores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from fractions import Fraction
from functools import cached_property, cmp_to_key
from typing import ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact import numeric, rounding
from symattn.exact.base import Rows
from symattn.exact.boxes import Boxes
from symattn.exact.model import Model
from symattn.exact.numeric import Fixed
from symattn.exact.rounding import Num, NumRows
from symattn.input.decimals import round_half_up, terminating_decimals
from symattn.input.errors import EvaluationError
from symattn.input.limits import PRECISION_BITS
from symattn.input.score_variants import Slope

Form = tuple[Fraction, Fraction]  # (p, q): the value p·scale + q·m


def slope_expr(slope: Slope) -> sympy.Expr:
    """The exact slope: 2^e (algebraic, or rational when e is an integer), or the given decimal."""
    if slope.given is not None:
        value = slope.given.value
        return sympy.Rational(value.numerator, value.denominator)
    return sympy.Pow(2, sympy.Rational(slope.exponent.numerator, slope.exponent.denominator))


def distance(i: int, j: int) -> int:
    """|i − j|, query and key both counted 0, 1, … from the first row (cross-attention too)."""
    return abs(i - j)


@dataclass(frozen=True, eq=False)
class BiasedModel(Model):
    """A head whose scaled scores carry ALiBi's bias −m·|i − j| (m = k · 2^e)."""

    plain_scores: ClassVar[bool] = False
    slope: sympy.Expr = sympy.Integer(0)
    slope_k: Fraction = Fraction(1)
    slope_e: Fraction = Fraction(0)
    softcap: Fraction | None = None  # z ← c·tanh(z / c) after the bias (Gemma 2)

    def plain(self) -> Model:
        """The same head without the bias (the scaled scores before ALiBi)."""
        return Model(**{f.name: getattr(self, f.name) for f in fields(Model)})

    def significant(self, quantity: str, digits: int) -> Rows:
        try:
            return super().significant(quantity, digits)
        except EvaluationError:
            if quantity != "shifted" or self.softcap is None:
                raise
            from symattn.exact.saturated import shifted_significant  # saturated scores: their own enclosures

            return shifted_significant(self, digits)

    def uncapped(self) -> BiasedModel:
        """The same head before the soft-capping (with any bias)."""
        return replace(self, softcap=None)

    @property
    def has_bias(self) -> bool:
        return self.slope_k != 0

    @cached_property
    def _cap(self) -> sympy.Expr:
        assert self.softcap is not None  # asked for only with a softcap
        return sympy.Rational(self.softcap.numerator, self.softcap.denominator)

    def _capped(self, z: sympy.Expr) -> sympy.Expr:
        return z if self.softcap is None else self._cap * sympy.tanh(z / self._cap)

    # --- exact structure ------------------------------------------------------

    @cached_property
    def bias(self) -> ImmutableMatrix:
        """−m·|i − j| for every query i and key j (masked or not)."""
        return ImmutableMatrix(self.n_queries, self.n_keys, lambda i, j: -self.slope * distance(i, j))

    @cached_property
    def _scale_parts(self) -> tuple[Fraction, int]:
        c, root = self.scale.as_coeff_Mul()  # scale = c·√r, r square-free (1: rational)
        r = 1 if root == 1 else int(root.base)
        return Fraction(int(c.p), int(c.q)), r

    @cached_property
    def _ratio(self) -> Fraction | None:
        """scale/m when it is rational, else None."""
        if not self.has_bias:
            return None
        c, r = self._scale_parts
        e = self.slope_e
        if r == 1 and e.denominator == 1:
            power = -e
        elif r == 2 and (e - Fraction(1, 2)).denominator == 1:
            power = Fraction(1, 2) - e
        else:
            return None
        return c / self.slope_k * Fraction(2) ** int(power)

    @cached_property
    def _slope_rational(self) -> Fraction | None:
        return self.slope_k * Fraction(2) ** int(self.slope_e) if self.slope_e.denominator == 1 else None

    def _form(self, i: int, j: int) -> Form:
        den, rows = self.score_integers
        return Fraction(rows[i][j], den), Fraction(-distance(i, j) if self.has_bias else 0)

    def _bias_form(self, i: int, j: int) -> Form:
        """The form of the bias −m·|i − j| alone (a score of 0)."""
        return Fraction(0), Fraction(-distance(i, j))

    def _key(self, form: Form) -> object:
        # equal keys, equal z: tanh is one-to-one, so soft-capping keeps the order and the ties
        p, q = form
        return p * self._ratio + q if self._ratio is not None else form

    def _value(self, form: Form) -> Fraction | None:
        """The exact rational value of p·scale + q·m, or None where it is irrational."""
        p, q = form
        if self._ratio is not None:
            key = p * self._ratio + q
            if key == 0:
                return Fraction(0)
            return None if self._slope_rational is None else key * self._slope_rational
        c, r = self._scale_parts
        total = Fraction(0)
        if p != 0:
            if r != 1:
                return None
            total += p * c
        if q != 0:
            if self._slope_rational is None:
                return None
            total += q * self._slope_rational
        return total

    def _compare(self, a: Form, b: Form) -> int:
        """The sign of (value a − value b), exactly."""
        if self._key(a) == self._key(b):
            return 0
        diff = self._minus(a, b)
        sign = self._exact_sign(diff)
        return sign if sign is not None else self._sign_of(diff)

    def _minus(self, a: Form, b: Form) -> Form:
        return a[0] - b[0], a[1] - b[1]

    def _exact_sign(self, diff: Form) -> int | None:
        """The sign of a nonzero difference where it is decided without enclosures, else None."""
        p, q = diff
        if q == 0:  # the same distance: the scores decide (scale > 0)
            return (p > 0) - (p < 0)
        if self._ratio is not None:  # z = (p·t + q)·m with m > 0
            key = p * self._ratio + q
            return (key > 0) - (key < 0)
        return None

    def _sign_of(self, diff: Form) -> int:
        """The sign of a nonzero difference: its enclosures at rising precision separate it from 0."""
        bits = 64
        while bits <= PRECISION_BITS:
            box = self._form_box(diff, bits)
            if box.lo > 0:
                return 1
            if box.hi < 0:
                return -1
            bits *= 2
        raise EvaluationError("cannot order two biased scores")

    def _form_box(self, form: Form, bits: int) -> Fixed:
        scale = Fixed.from_interval(numeric.enclose(self.scale, bits + 8), bits)
        slope = Fixed.from_interval(numeric.enclose(self.slope, bits + 8), bits)
        return add(self._scaled_score(form[0], scale), times(form[1], slope))

    def _scaled_score(self, p: Fraction, scale: Fixed) -> Fixed:
        """A form's score part times the scale's box."""
        return times(p, scale)

    # --- the model's quantities -------------------------------------------------

    @cached_property
    def scaled(self) -> ImmutableMatrix:
        S, B = self.scores, self.bias
        return ImmutableMatrix(
            S.rows,
            S.cols,
            lambda i, j: (
                self._capped(S[i, j] * self.scale + B[i, j]) if self.may_attend(i, j) else sympy.S.NegativeInfinity
            ),
        )

    @cached_property
    def _shift(self) -> tuple[sympy.Expr, ...]:
        # what the stable softmax subtracts from each row: its largest z (a sink's model: or the sink)
        Z = self.scaled
        return tuple(Z[i, self.row_max[i]] for i in range(Z.rows))

    @cached_property
    def shifted(self) -> ImmutableMatrix:
        Z = self.scaled
        return ImmutableMatrix(
            Z.rows,
            Z.cols,
            lambda i, j: Z[i, j] - self._shift[i] if self.may_attend(i, j) else sympy.S.NegativeInfinity,
        )

    def _comparer(self, i: int) -> Callable[[int, int], int]:
        return lambda a, b: self._compare(self._form(i, a), self._form(i, b))

    @cached_property
    def row_max(self) -> tuple[int, ...]:
        out = []
        for i in range(self.n_queries):
            keys = [j for j in range(self.n_keys) if self.may_attend(i, j)]
            out.append(max(keys, key=cmp_to_key(self._comparer(i))))
        return tuple(out)

    @cached_property
    def _groups(self) -> list[list[list[int]]]:
        out = []
        for i in range(self.n_queries):
            groups: dict[object, list[int]] = {}
            for j in range(self.n_keys):
                if self.may_attend(i, j):
                    groups.setdefault(self._key(self._form(i, j)), []).append(j)
            out.append(list(groups.values()))
        return out

    def _shifted_form(self, i: int, j: int) -> Form:
        return self._minus(self._form(i, j), self._form(i, self.row_max[i]))

    def vary(self, i: int, j: int, z: sympy.Expr) -> sympy.Expr:
        return self._capped(z + self.bias[i, j])

    def extra_quantities(self) -> tuple[str, ...]:
        return ("bias",) if self.has_bias else ()

    def exact(self, quantity: str) -> ImmutableMatrix:
        return self.bias if quantity == "bias" else super().exact(quantity)

    def _rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        n, m, ok = self.n_queries, self.n_keys, self.may_attend
        if quantity == "bias":
            return tuple(tuple(self._value(self._bias_form(i, j)) for j in range(m)) for i in range(n))
        if quantity in ("scaled", "shifted", "exp", "exp_shifted"):
            form = self._form if quantity in ("scaled", "exp") else self._shifted_form
            values = [[self._capped_value(form(i, j), i, j) if ok(i, j) else None for j in range(m)] for i in range(n)]
            if quantity.startswith("exp"):  # e^z is rational only at z = 0; e^−∞ = 0
                return tuple(
                    tuple(Fraction(1) if v == 0 else None if ok(i, j) else Fraction(0) for j, v in enumerate(row))
                    for i, row in enumerate(values)
                )
            return tuple(tuple(row) for row in values)
        if quantity in ("exp_sum", "exp_shifted_sum"):
            exps = self.rationals(quantity[: -len("_sum")])
            return tuple(
                (Fraction(self._allowed_count(i)) if all(e == 1 for j, e in enumerate(row) if ok(i, j)) else None,)
                for i, row in enumerate(exps)
            )
        return super()._rationals(quantity)

    def _capped_value(self, form: Form, i: int, j: int) -> Fraction | None:
        """The value of a (shifted) score after any soft-capping, where it is known to be rational.

        c·tanh(x/c) is 0 at x = 0 and transcendental at any other algebraic x; a capped score minus its
        row's maximum is 0 in the maximum's group, and otherwise not known to be rational (None)."""
        value = self._value(form)
        if self.softcap is None or value is None:
            return value if self.softcap is None else None
        if form != self._form(i, j):  # shifted: zero exactly in the maximum's group
            return Fraction(0) if value == 0 else None
        return Fraction(0) if value == 0 else None

    @cached_property
    def largest_z(self) -> tuple[Fraction, int, int]:
        scale, slope = _upper(self.scale), _upper(self.slope)
        top, i, j = max(
            (x * scale + slope * distance(i, j), i, j)
            for i, row in enumerate(self._score_magnitudes())
            for j, x in enumerate(row)
            if self.may_attend(i, j)
        )
        return (top if self.softcap is None else min(top, self.softcap)), i, j

    def _score_magnitudes(self) -> list[list[Fraction]]:
        """An upper bound of each |S_ij|."""
        den, rows = self.score_integers
        return [[abs(Fraction(x, den)) for x in row] for row in rows]

    def _new_boxes(self, bits: int) -> BiasedBoxes:
        return BiasedBoxes(self, bits)


class BiasedBoxes(Boxes):
    """Enclosures of a biased head: each z from its (p, q), each exp from its z."""

    model: BiasedModel

    @cached_property
    def _slope(self) -> Fixed:
        return Fixed.from_interval(numeric.enclose(self.model.slope, self.prec + 8), self.prec)

    def _box(self, form: Form) -> Fixed:
        return add(self.model._scaled_score(form[0], self._scale), times(form[1], self._slope))

    def _capped_box(self, form: Form) -> Fixed:
        z = self._box(form)
        cap = self.model.softcap
        return z if cap is None else softcap_fixed(z, cap, self.prec)

    def _rows(self, shifted: bool) -> list[list[Fixed | None]]:
        model = self.model
        zero = Fixed(0, 0, self.prec)
        out: list[list[Fixed | None]] = []
        for i in range(model.n_queries):
            top = {j for group in model._groups[i] for j in group if model.row_max[i] in group}
            row: list[Fixed | None] = []
            for j in range(model.n_keys):
                if not model.may_attend(i, j):
                    row.append(None)
                elif shifted and j in top:
                    row.append(zero)  # z − max z is exactly 0 for the maximum's group
                elif shifted and model.softcap is not None:  # the capped z minus the capped maximum
                    row.append(
                        sub(self._capped_box(model._form(i, j)), self._capped_box(model._form(i, model.row_max[i])))
                    )
                else:
                    row.append(self._capped_box(model._shifted_form(i, j) if shifted else model._form(i, j)))
            out.append(row)
        return out

    @cached_property
    def _z(self) -> list[list[Fixed | None]]:
        return self._rows(shifted=False)

    @cached_property
    def _z_shifted(self) -> list[list[Fixed | None]]:
        return self._rows(shifted=True)

    def _exps(self, shifted: bool) -> list[list[Fixed]]:
        zero = Fixed(0, 0, self.bits)
        rows = self._z_shifted if shifted else self._z
        return [[zero if z is None else numeric.exp_fixed(z, self.prec, self.bits) for z in row] for row in rows]

    def bias(self) -> list[Fixed]:
        n, m = self.model.n_queries, self.model.n_keys
        return self._flat([[self._box(self.model._bias_form(i, j)) for j in range(m)] for i in range(n)])


def times(r: Fraction, box: Fixed) -> Fixed:
    """r · box, rounded outward."""
    lo, hi = (box.lo, box.hi) if r >= 0 else (box.hi, box.lo)
    return Fixed((lo * r.numerator) // r.denominator, -((-hi * r.numerator) // r.denominator), box.bits)


def add(a: Fixed, b: Fixed) -> Fixed:
    return Fixed(a.lo + b.lo, a.hi + b.hi, a.bits)


def sub(a: Fixed, b: Fixed) -> Fixed:
    return Fixed(a.lo - b.hi, a.hi - b.lo, a.bits)


def softcap_fixed(z: Fixed, cap: Fraction, prec: int) -> Fixed:
    """c·tanh(z/c) of a box, rigorously: tanh(x) = 1 − 2/(e^(2x) + 1) in mpmath's interval arithmetic
    (x occurs once, so the interval is not widened by dependence)."""
    from mpmath import iv

    with numeric.working_precision(prec + 16):
        c = iv.mpf(cap.numerator) / cap.denominator
        x = iv.mpf([z.lo, z.hi]) / (iv.mpf(2) ** z.bits)
        capped = c * (1 - 2 / (iv.exp(2 * x / c) + 1))
    return Fixed.from_interval(capped, z.bits)


def tanh_primes(model: Model) -> tuple[tuple[sympy.Expr, ...], ...]:
    """softcap's derivative 1 − tanh²(y/c) at each pre-cap score y = S·scale − m·|i − j| (0 where masked:
    its gradient is 0 there anyway), for the backward pass."""
    return tuple(tuple(tanh_prime(model, i, j) for j in range(model.n_keys)) for i in range(model.n_queries))


def tanh_prime(model: Model, i: int, j: int) -> sympy.Expr:
    """1 − tanh²(y_ij/c) of one entry (0 where masked)."""
    assert isinstance(model, BiasedModel) and model.softcap is not None  # asked for only with a softcap
    if not model.may_attend(i, j):
        return sympy.Integer(0)
    return 1 - sympy.tanh((model.scores[i, j] * model.scale + model.bias[i, j]) / model._cap) ** 2


def _upper(x: sympy.Expr) -> Fraction:
    box = Fixed.from_interval(numeric.enclose(x, 64), 32)
    return Fraction(box.hi, 1 << 32)


def variant_fields(spec) -> dict:  # spec: Spec (the input layer's)
    """A biased model's own fields from its spec: ALiBi's slope (0 without), the softcap, and any sink."""
    slope = spec.alibi.slopes[0] if spec.alibi is not None else Slope(given=None)
    k = Fraction(0) if spec.alibi is None else Fraction(1) if slope.given is None else slope.given.value
    return dict(
        slope=slope_expr(slope) if k != 0 else sympy.Integer(0),
        slope_k=k,
        slope_e=slope.exponent,
        softcap=None if spec.softcap is None else spec.softcap.value,
        **({} if spec.sinks is None else {"sink": spec.sinks[0].value}),
    )


def bias_shown(model: Model, decimals: int, notation: str = "fixed") -> NumRows:
    """ALiBi's bias as the document shows it: exact, padded to one width, where every entry terminates."""
    exact = model.rationals("bias")
    places = [terminating_decimals(x) if x is not None else None for row in exact for x in row]
    if all(p is not None and p <= decimals for p in places):  # short enough to show whole (−1.5, not −1.500)
        return rounding.exact_or_rounded(exact, decimals, notation)  # type: ignore[arg-type]
    return tuple(
        tuple(Num(d, x is not None and Fraction(d) == x) for d, x in zip(row, exact_row))
        for row, exact_row in zip(model.rounded("bias", decimals), exact)
    )


def biased_by_hand(model: Model, unmasked: NumRows, decimals: int, notation: str) -> NumRows:
    """By hand, the biased scores are the shown scaled scores plus the shown bias, and the capped ones
    c·tanh(shown z / c), rounded."""
    if not isinstance(model, BiasedModel):
        return unmasked
    if model.has_bias:
        bias = bias_shown(model, decimals, notation)
        values = [[z.fraction + b.fraction for z, b in zip(row, brow)] for row, brow in zip(unmasked, bias)]
        unmasked = rounding.exact_or_rounded(values, decimals, notation)
    if model.softcap is not None:
        unmasked = tuple(tuple(capped_by_hand(model, z, decimals) for z in row) for row in unmasked)
    return unmasked


def capped_by_hand(model: BiasedModel, z: Num, decimals: int) -> Num:
    """c·tanh(z / c) of a shown number, correctly rounded (0 stays exactly 0)."""
    value = z.fraction
    if value == 0:
        return Num(round_half_up(value, decimals), True)
    x = sympy.Rational(value.numerator, value.denominator)
    return Num(numeric.round_expr(model._capped(x), decimals), False)
