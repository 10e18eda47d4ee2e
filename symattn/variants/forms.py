"""The exact form of every z of a head with parts, built stage by stage, and what is decided on it.

A z's form is (S, q). S is the Q/K stage's structure of the score: the plain score n/(dq·dk), or a Q/K
part's own (a constant and cos/sin terms of Q and K turned by position), which the part splits into its
transcendental *terms* and a rational *constant* c. q is the coordinate of the additive stage over its
own basis (−|i − j| over a slope m; 0 without one). Then

    y = S · scale + q · basis        z = f(y) for each monotone map f of the MAP stage (none: z = y).

What is decided, and on what:

- *Equality* on a canonical key: (the terms, the additive stage's key of the rational part (c, q)). The
  Q/K stage's terms are linearly independent of the rational numbers over the algebraic ones where it
  has any (its module proves it), so two y are equal iff their terms match and their rational parts
  are equal, which the additive stage's key decides (without one: c, since scale > 0). A monotone map
  is one-to-one, so it keeps the ties.
- *Order* on the exact sign of a difference where the stages decide it (no terms left: the additive
  stage's rule, or the sign of c), else on enclosures of the difference at rising precision, which
  separate it from 0 since it is not 0. A monotone map keeps the order.
- *Rationality* of y: none with a term left; else the additive stage's value rule (without one:
  c · scale, rational iff the scale is or c = 0). A map's own rule says which values stay rational
  (c·tanh(y/c): only 0).

The model (:class:`~symattn.exact.model.Model`) asks these for its scaled and shifted scores, their
exps, the row maxima and the groups of equal z; the weights and outputs follow its rules on those groups.
The box arithmetic the parts' enclosures share closes the module.
"""

from __future__ import annotations

from collections.abc import Hashable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from symattn.exact import numeric
from symattn.exact.numeric import Fixed
from symattn.input.errors import EvaluationError
from symattn.input.limits import PRECISION_BITS
from symattn.variants.base import ADD, MAP, Rows

if TYPE_CHECKING:
    import sympy

Form = tuple[Any, Fraction]  # (S, q)


class Unordered(EvaluationError):
    """Two unequal z that no enclosure up to PRECISION_BITS separates."""


class PlainLinear:
    """The rational part without an additive stage: c · scale."""

    def __init__(self, scale: Any):
        self.c, self.r = scale_parts(scale)

    def key(self, p: Fraction, q: Fraction) -> Hashable:
        return p

    def value(self, p: Fraction, q: Fraction) -> Fraction | None:
        if p == 0:
            return Fraction(0)
        return p * self.c if self.r == 1 else None

    def sign(self, p: Fraction, q: Fraction) -> int | None:
        return (p > 0) - (p < 0)


class Forms:
    """The forms of one head's z and the decisions on them."""

    def __init__(self, model: Any):
        self.model = model
        self.qk = model.qk
        adds = model.stage_parts(ADD)
        if len(adds) > 1:  # their bases' independence is no one part's to prove
            raise NotImplementedError("one additive part at a time")
        self.add = adds[0] if adds else None
        self.maps = model.stage_parts(MAP)
        self.linear = self.add.linear(model.scale) if self.add is not None else PlainLinear(model.scale)

    # --- the forms ------------------------------------------------------------------------------------

    def form(self, i: int, j: int) -> Form:
        model = self.model
        if self.qk is not None:
            s = self.qk.structure(model, i, j)
        else:
            den, rows = model.score_integers
            s = Fraction(rows[i][j], den)
        return s, (self.add.coordinate(i, j) if self.add is not None else Fraction(0))

    def split(self, s: Any) -> tuple[Hashable, Fraction]:
        """(terms, constant) of a score's structure."""
        return self.qk.split(self.model, s) if self.qk is not None else ((), s)

    def shifted_form(self, i: int, j: int) -> Form:
        return self.minus(self.form(i, j), self.form(i, self.model.row_max[i]))

    def minus(self, a: Form, b: Form) -> Form:
        s = self.qk.minus(a[0], b[0]) if self.qk is not None else a[0] - b[0]
        return s, a[1] - b[1]

    def key(self, form: Form) -> Hashable:
        terms, c = self.split(form[0])
        return terms, self.linear.key(c, form[1])

    def value(self, form: Form) -> Fraction | None:
        """y of a form where it is rational (before the maps), else None."""
        terms, c = self.split(form[0])
        return None if terms else self.linear.value(c, form[1])

    def mapped(self, form: Form) -> Fraction | None:
        """z (after the maps) of a form where it is known to be rational, else None."""
        value = self.value(form)
        for part in self.maps:
            value = part.value(value)
        return value

    def z_value(self, i: int, j: int) -> Fraction | None:
        return self.mapped(self.form(i, j))

    # --- order -------------------------------------------------------------------------------------------

    def compare(self, a: Form, b: Form) -> int:
        """The sign of (z of a − z of b), exactly."""
        if self.key(a) == self.key(b):
            return 0
        diff = self.minus(a, b)
        terms, c = self.split(diff[0])
        sign = None if terms else self.linear.sign(c, diff[1])
        return sign if sign is not None else self.sign_of(diff)

    def sign_of(self, diff: Form) -> int:
        """The sign of a nonzero difference: its enclosures at rising precision separate it from 0."""
        bits = 64
        while bits <= PRECISION_BITS:
            box = self.box(diff, bits)
            if box.lo > 0:
                return 1
            if box.hi < 0:
                return -1
            bits *= 2
        raise Unordered("cannot order two scores")

    # --- enclosures ----------------------------------------------------------------------------------------

    def box(self, form: Form, bits: int) -> Fixed:
        """y of a form at 2**-bits."""
        scale = Fixed.from_interval(numeric.enclose(self.model.scale, bits + 8), bits)
        basis = self.add.basis_box(bits) if self.add is not None else None
        return self.box_with(form, scale, basis)

    def box_with(self, form: Form, scale: Fixed, basis: Fixed | None) -> Fixed:
        """y of a form from enclosures of the scale and the additive basis at one precision."""
        s, q = form
        if self.qk is not None:
            y = mul(self.qk.box(self.model, s, scale.bits), scale)
        else:
            y = times(s, scale)
        return y if basis is None else add(y, times(q, basis))

    def mapped_box(self, box: Fixed, prec: int) -> Fixed:
        for part in self.maps:
            box = part.box(box, prec)
        return box

    def z_box(self, i: int, j: int, bits: int) -> Fixed:
        return self.mapped_box(self.box(self.form(i, j), bits), bits)

    # --- the rational entries of z and its exps ------------------------------------------------------------

    def rationals(self, quantity: str) -> Rows:
        """scaled, shifted, exp, exp_shifted and their sums."""
        model = self.model
        n, m, ok = model.n_queries, model.n_keys, model.may_attend
        if quantity in ("exp_sum", "exp_shifted_sum"):
            exps = model.rationals(quantity[: -len("_sum")])
            return tuple(
                (Fraction(model._allowed_count(i)) if all(e == 1 for j, e in enumerate(row) if ok(i, j)) else None,)
                for i, row in enumerate(exps)
            )
        form = self.form if quantity in ("scaled", "exp") else self.shifted_form
        values = [[self.mapped(form(i, j)) if ok(i, j) else None for j in range(m)] for i in range(n)]
        if quantity.startswith("exp"):  # e^z is rational only at z = 0 (Lindemann–Weierstrass); e^−∞ = 0
            return tuple(
                tuple(Fraction(1) if v == 0 else None if ok(i, j) else Fraction(0) for j, v in enumerate(row))
                for i, row in enumerate(values)
            )
        return tuple(tuple(row) for row in values)


# --- the box arithmetic the parts share ---------------------------------------------------------------


def times(r: Fraction, box: Fixed) -> Fixed:
    """r · box, rounded outward."""
    lo, hi = (box.lo, box.hi) if r >= 0 else (box.hi, box.lo)
    return Fixed((lo * r.numerator) // r.denominator, -((-hi * r.numerator) // r.denominator), box.bits)


def add(a: Fixed, b: Fixed) -> Fixed:
    return Fixed(a.lo + b.lo, a.hi + b.hi, a.bits)


def sub(a: Fixed, b: Fixed) -> Fixed:
    return Fixed(a.lo - b.hi, a.hi - b.lo, a.bits)


def mul(a: Fixed, b: Fixed) -> Fixed:
    """a · b of two boxes at the same precision, rounded outward."""
    ends = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
    return Fixed(min(ends) >> a.bits, -(-max(ends) >> a.bits), a.bits)


def narrow(b: Fixed, bits: int) -> Fixed:
    """A box at a coarser precision, rounded outward."""
    shift = b.bits - bits
    return Fixed(b.lo >> shift, -(-b.hi >> shift), bits)


def upper(x: sympy.Expr) -> Fraction:
    """A rational upper bound of a positive constant."""
    box = Fixed.from_interval(numeric.enclose(x, 64), 32)
    return Fraction(box.hi, 1 << 32)


def scale_parts(scale: sympy.Expr) -> tuple[Fraction, int]:
    """The scale as c·√r, r square-free (1: rational)."""
    c, root = scale.as_coeff_Mul()
    return Fraction(int(c.p), int(c.q)), 1 if root == 1 else int(root.base)


__all__ = ["Form", "Forms", "PlainLinear", "Unordered", "add", "mul", "narrow", "scale_parts", "sub", "times", "upper"]
