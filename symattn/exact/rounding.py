"""Which number each step shows, in the two rounding modes.

``exact``: every number is the exact value, rounded half-up for display.
``hand``:  every number is computed from the numbers shown before it, as a
           reader with a calculator does: z = shown score / 1.414, then e^z
           of the shown z, the sum of the shown exps, and so on.

Sums and products of shown numbers that terminate are shown exactly, padded
to the same decimals across one matrix; everything else is rounded to its
quantity's decimals. In a matrix with rounded entries, each exact one keeps its
own shortest form (:func:`exact_width`): 2.5 beside 0.541, not 2.500, so an
exact value reads as in the matrix it came from.

Notation: ``fixed`` shows every number with its quantity's decimals;
``scientific`` shows every nonzero number as m × 10^k with one more significant
digit than decimals (3 decimals: 5.120 × 10^30); ``auto`` does so only where
|x| ≥ 10^6 or 0 < |x| < 10^-4, and keeps fixed decimals elsewhere. Either way
the digits are the correct rounding of the exact value (or, by hand, of the
shown numbers before it), never a re-rounding of fixed digits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from functools import cache
from typing import TYPE_CHECKING

import sympy

from symattn.exact import numeric
from symattn.exact.base import Rounding
from symattn.exact.num import NEG_INFINITY, Num, NumRow, NumRows
from symattn.input.decimals import round_half_up, terminating_decimals
from symattn.input.records import record

if TYPE_CHECKING:
    from symattn.input.spec import Spec


@record
class Figures:
    """Every number the derivation shows."""

    sqrt_dk: Num
    scores: NumRows
    unmasked: NumRows  # S · scale before the mask
    scaled: NumRows  # −∞ where masked
    row_max: NumRow | None  # stable softmax: the maximum subtracted from each row
    softmax_input: NumRows  # what goes into e^z: z, or z minus the row maximum
    exp: NumRows  # e^ of softmax_input
    exp_sum: NumRow
    weights: NumRows
    percent: NumRows
    percent_whole: NumRows  # "about 40%" in the recap
    products: tuple[NumRows, ...]  # [i][j] = weight_ij × V_j, the terms of output row i
    output: NumRows
    denominator: NumRow | None = None  # a denominator part's term in each row's sum (e^s, or e^(s − M) stable)
    share: NumRow | None = None  # and its share of the row, 1 − Σ_j α_ij


def is_exact(rows: Sequence[Sequence[Num]]) -> bool:
    return all(x.exact for row in rows for x in row)


def is_extreme(value: Fraction, shift: int = 0) -> bool:
    """Whether ``auto`` shows value · 10^shift as m × 10^k: nonzero and |·| ≥ 10^6 or < 10^-4."""
    n, d = abs(value.numerator), value.denominator  # in integers: Fraction arithmetic was most of a big derivation
    if n == 0:
        return False
    if shift >= 0:
        n *= 10**shift
    else:
        d *= 10**-shift
    return n >= 10**6 * d or 10**4 * n < d


def _wants_scientific(value: Fraction, notation: str, shift: int = 0) -> bool:
    return value != 0 and (notation == "scientific" or (notation == "auto" and is_extreme(value, shift)))


def exact_or_rounded(values: Sequence[Sequence[Fraction]], decimals: int, notation: str = "fixed") -> NumRows:
    # terminating everywhere: exact, padded to one width; otherwise all rounded
    places = [terminating_decimals(v) for row in values for v in row]
    known = [p for p in places if p is not None]
    if len(known) == len(places):
        width = max(known)
        return tuple(
            tuple(
                Num(_exact_digits(v), True, True)
                if _wants_scientific(v, notation)
                else Num(round_half_up(v, width), True)
                for v in row
            )
            for row in values
        )
    return exact_width(_rounded(values, decimals, notation))


def exact_width(rows: NumRows) -> NumRows:
    """Exact values are never padded to a rounding's decimals. A matrix of exact values only shares one width, the
    fewest decimals that show each of them (1.5 and 1.0); in a matrix with rounded values, each exact one has its
    own shortest form (2, 2.5, 0.75 beside 0.541), as in the matrix it came from. m × 10^k stays as it is."""

    def fixed_exact(x: Num) -> bool:
        return x.exact and not x.scientific and not x.is_infinite

    def places(x: Num) -> int:
        exponent = x.value.normalize().as_tuple().exponent
        return max(0, -exponent) if isinstance(exponent, int) else 0

    entries = [x for row in rows for x in row if not x.is_infinite]
    if all(x.exact for x in entries):
        common = max((places(x) for x in entries if fixed_exact(x)), default=0)
        return tuple(tuple(_quantized(x, common) if fixed_exact(x) else x for x in row) for row in rows)
    return tuple(tuple(_quantized(x, places(x)) if fixed_exact(x) else x for x in row) for row in rows)


def _quantized(x: Num, places: int) -> Num:
    return Num(x.value.quantize(Decimal(1).scaleb(-places)), True)


def _exact_digits(value: Fraction) -> Decimal:
    """A terminating value as a Decimal with no trailing zeros (m × 10^k shows every digit, no more)."""
    places = terminating_decimals(value)
    assert places is not None  # called for terminating values only
    sign, digits, exponent = round_half_up(value, places).as_tuple()
    assert isinstance(exponent, int)  # a finite Decimal (not NaN or infinite): its exponent is a number
    while len(digits) > 1 and digits[-1] == 0:
        digits, exponent = digits[:-1], exponent + 1
    return Decimal((sign, digits, exponent))


def _rounded(
    values: Sequence[Sequence[Fraction]],
    decimals: int,
    notation: str = "fixed",
    shift: int = 0,
    digits: int | None = None,
) -> NumRows:
    return tuple(tuple(_shown(v, decimals, notation, shift, digits) for v in row) for row in values)


def _in_notation(
    fixed: Num, exact: Fraction | None, significant: Callable[[], Decimal], notation: str, shift: int = 0
) -> Num:
    """The fixed form of a value, or m × 10^k where the notation asks for it.

    Whether it is extreme is decided on the exact value where known, else on its
    significant digits, which ``significant()`` decides (only when they may be needed).
    """
    if notation == "fixed" or fixed.is_infinite:
        return fixed
    if exact is not None:
        if not _wants_scientific(exact, notation, shift):
            return fixed
    elif not (notation == "scientific" or fixed.value == 0 or is_extreme(fixed.fraction, shift)):
        return fixed
    d = significant()
    if not _wants_scientific(Fraction(d), notation, shift):
        return fixed
    return Num(d, exact is not None and Fraction(d) == exact, True)


def _shown(value: Fraction, decimals: int, notation: str, shift: int = 0, digits: int | None = None) -> Num:
    """An exact rational as shown: fixed decimals, or significant digits in scientific notation."""
    return _in_notation(
        _num(round_half_up(value, decimals), value),
        value,
        lambda: numeric.significant_exact(value, digits or decimals + 1),
        notation,
        shift,
    )


def _num(shown: Decimal, value: Fraction | None) -> Num:
    if shown.is_infinite():
        return NEG_INFINITY
    if value is not None and value.denominator == 1:
        return Num(Decimal(value.numerator), True)  # √4 = 2, not 2.000: decimals are for rounded values
    return Num(shown, value is not None and Fraction(shown) == value)


def from_model(
    model: Rounding, quantity: str, decimals: int, notation: str = "fixed", shift: int = 0, digits: int | None = None
) -> NumRows:
    """The model's values as shown; ``shift``: they are displayed × 10^shift (percent: 2)."""
    shown = model.rounded(quantity, decimals)
    exact = model.rationals(quantity)
    significant = cache(lambda: model.significant(quantity, digits or decimals + 1))  # decided at most once

    def entry(i: int, j: int) -> Callable[[], Decimal]:
        return lambda: significant()[i][j]

    shown_rows = tuple(
        tuple(_in_notation(_num(d, e), e, entry(i, j), notation, shift) for j, (d, e) in enumerate(zip(row, exact_row)))
        for i, (row, exact_row) in enumerate(zip(shown, exact))
    )
    return exact_width(shown_rows)


def _percent(weights: NumRows, shift: int = 2) -> NumRows:
    def scaled(x: Decimal) -> Decimal:  # an exact 0.5 is 50, not 5E+1
        y = x.scaleb(shift)
        exponent = y.as_tuple().exponent
        return y.quantize(Decimal(1)) if isinstance(exponent, int) and exponent > 0 and y.is_finite() else y

    return tuple(tuple(Num(scaled(w.value), w.exact, w.scientific) for w in row) for row in weights)


def _fractions(rows: NumRows) -> list[list[Fraction]]:
    return [[x.fraction for x in row] for row in rows]


def exp_of(x: Num, decimals: int, notation: str) -> Num:
    if x.is_infinite:
        return Num(Decimal(0), True)  # e^−∞ = 0
    value = x.fraction
    if value == 0:
        return Num(Decimal(1), True)  # e^0 = 1
    power = sympy.exp(sympy.Rational(value.numerator, value.denominator))
    return _in_notation(
        _num(numeric.round_expr(power, decimals), None),
        None,
        lambda: numeric.round_expr(power, decimals + 1, significant=True),
        notation,
    )


# --- the backward pass ------------------------------------------------------------


class _Hand:
    """Rational arithmetic on shown numbers; the scale as shown (÷ 1.414 for 1/√2)."""

    zero = Fraction(0)

    def __init__(self, spec: Spec, sqrt_dk: Num | None):
        self.spec, self.sqrt_dk = spec, sqrt_dk

    @staticmethod
    def const(x: Fraction) -> Fraction:
        return x

    def trig(self, angle: sympy.Expr) -> tuple[Fraction, Fraction]:
        """The cos and sin of a rotation as its step shows them (to the scores' decimals)."""
        places = self.spec.decimals.scores
        c, s = (Fraction(numeric.round_expr(f(angle), places)) for f in (sympy.cos, sympy.sin))
        return c, s

    def real(self, x: sympy.Expr) -> Fraction:
        """A part's exact real (a map's derivative, a denominator's share), rounded to the weights' decimals
        (as the weights are)."""
        return Fraction(numeric.round_expr(x, self.spec.decimals.weights))

    def scale(self, x: Fraction) -> Fraction:
        if self.spec.scale == "sqrt":
            assert self.sqrt_dk is not None  # the figures of a 1/√d_k scale always show √d_k
            return x / self.sqrt_dk.fraction
        if self.spec.scale == "none":
            return x
        return x * self.spec.scale.value


def _by_hand(values: Sequence[Sequence[Fraction]], decimals: int, notation: str) -> NumRows:
    """A gradient worked by hand from the shown numbers, at the gradients' decimals: products of shown decimals
    terminate, but their digits pile up step after step (dZ at 11 places); a value of no more places is shown
    whole (exact, unpadded), any other rounded (≈), as a calculator's user writes it."""
    return exact_width(_rounded(values, decimals, notation))


def gradient_figures(
    model,
    spec: Spec,
    weights: Sequence[NumRows],
    shown_output: NumRows | None = None,
    shown_concat: NumRows | None = None,
    sqrt_dk: Num | None = None,
    given: Mapping[str, NumRows] | None = None,
) -> dict[str, NumRows]:
    """Every gradient as shown, by name (``name@h`` per head): the exact values rounded, or (hand)
    each step from the shown numbers of the step before (the weights, O and the concatenation as shown, and
    ``given``: a Q/K part's Q′ and K′ as its step shows them)."""
    decimals, notation = spec.decimals.gradients, spec.notation
    names = list(model.quantity_names)
    if spec.rounding != "hand":
        exact = {name: from_model(model, name, decimals, notation) for name in names}
        for name in names:  # exactly, the Jacobian times dA is dZ
            if name.startswith("dZ"):
                exact["jacobian_dA" + name[2:]] = exact[name]
        return exact
    from symattn.exact.gradients import gradients, jacobian

    alg = _Hand(spec, sqrt_dk)
    shown: dict[str, NumRows] = {}
    forward = {"O": shown_output, "concat": shown_concat, **(given or {})}

    def hook(name: str, values):
        if name in forward:
            given = forward[name]
            assert given is not None  # the caller gives O and the concatenation as shown wherever they are used
            return _fractions(given)
        shown[name] = _by_hand(values, decimals, notation)
        return _fractions(shown[name])

    A = [_fractions(w) for w in weights]
    gradients(alg, model.inputs, A, hook)
    for h, a in enumerate(A):
        suffix = f"@{h}" if model.is_split else ""
        # the Jacobian and J·dA exactly from the shown weights (six places): its row is then dZ's exact row
        shown["jacobian" + suffix] = J = exact_or_rounded(jacobian(alg, a), decimals, notation)
        m = len(a[0])
        dA = shown["dA" + suffix]
        # the Jacobian times dA, from the shown Jacobian (the compact form uses the shown mean instead)
        shown["jacobian_dA" + suffix] = exact_or_rounded(
            [
                [sum((J[i * m + j][k].fraction * dA[i][j].fraction for j in range(m)), Fraction(0)) for k in range(m)]
                for i in range(len(a))
            ],
            decimals,
            notation,
        )
    first = 0
    for h in range(len(A) if model.is_split else 0):  # each head's dO is its slice of the shown one
        width = len(model.inputs.V[h][0])
        source = shown["dconcat"] if "dconcat" in shown else shown["dO"]
        shown[f"dO@{h}"] = tuple(row[first : first + width] for row in source)
        first += width
    heads = len(weights)
    size = heads // (model.inputs.kv_heads or heads)  # grouped-query: the query heads sharing one K and V
    for name in names:  # the concatenated dQ, dK, dV of several heads are the heads' shown numbers side by side
        if name not in shown:
            parts = [shown[f"{name}@{h}"] for h in range(heads)]
            if name in ("dK", "dV") and size > 1:  # a shared K or V: the sum of its group's shown numbers
                parts = [_group_sum(parts[g : g + size], decimals, notation) for g in range(0, heads, size)]
            shown[name] = tuple(sum((p[i] for p in parts), ()) for i in range(len(parts[0])))
    return shown


def _group_sum(parts: list[NumRows], decimals: int, notation: str) -> NumRows:
    sums = [
        [sum((p[i][k].fraction for p in parts), Fraction(0)) for k in range(len(parts[0][0]))]
        for i in range(len(parts[0]))
    ]
    return exact_or_rounded(sums, decimals, notation)
