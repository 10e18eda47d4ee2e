"""Which number each step shows, in the two rounding modes.

``exact``: every number is the exact value, rounded half-up for display.
``hand``:  every number is computed from the numbers shown before it, as a
           reader with a calculator does: z = shown score / 1.414, then e^z
           of the shown z, the sum of the shown exps, and so on.

Sums and products of shown numbers that terminate are shown exactly, padded
to the same decimals across one matrix; everything else is rounded to its
quantity's decimals.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Sequence

import sympy

from . import numeric
from .model import Model
from .spec import Decimals, Spec


@dataclass(frozen=True)
class Num:
    """A number as shown: its digits, and whether they are the whole value."""

    value: Decimal
    exact: bool

    @property
    def is_negative(self) -> bool:
        return self.value.is_signed() and self.value != 0

    @property
    def fraction(self) -> Fraction:
        return Fraction(self.value)


NumRow = tuple[Num, ...]
NumRows = tuple[NumRow, ...]


@dataclass(frozen=True)
class Figures:
    """Every number the derivation shows."""

    sqrt_dk: Num
    scores: NumRows
    scaled: NumRows
    exp: NumRows
    exp_sum: NumRow
    weights: NumRows
    percent: NumRows
    percent_whole: NumRows  # "about 40%" in the recap
    products: tuple[NumRows, ...]  # [i][j] = weight_ij × V_j, the terms of output row i
    output: NumRows


def is_exact(rows: Sequence[Sequence[Num]]) -> bool:
    return all(x.exact for row in rows for x in row)


def _exact_or_rounded(values: Sequence[Sequence[Fraction]], decimals: int) -> NumRows:
    # terminating everywhere: exact, padded to one width; otherwise all rounded
    places = [numeric.terminating_decimals(v) for row in values for v in row]
    if all(p is not None for p in places):
        width = max(places)
        return tuple(tuple(Num(numeric.round_half_up(v, width), True) for v in row) for row in values)
    return _rounded(values, decimals)


def _rounded(values: Sequence[Sequence[Fraction]], decimals: int) -> NumRows:
    return tuple(tuple(_num(numeric.round_half_up(v, decimals), v) for v in row) for row in values)


def _num(shown: Decimal, value: Fraction | None) -> Num:
    return Num(shown, value is not None and Fraction(shown) == value)


def _from_model(model: Model, quantity: str, decimals: int) -> NumRows:
    shown = model.rounded(quantity, decimals)
    return tuple(tuple(_num(d, e) for d, e in zip(row, exact_row))
                 for row, exact_row in zip(shown, model.rationals(quantity)))


def _percent(weights: NumRows, shift: int = 2) -> NumRows:
    return tuple(tuple(Num(w.value.scaleb(shift), w.exact) for w in row) for row in weights)


def _fractions(rows: NumRows) -> list[list[Fraction]]:
    return [[x.fraction for x in row] for row in rows]


def _v(model: Model) -> list[list[Fraction]]:
    return [[Fraction(int(model.V[j, k].p), int(model.V[j, k].q)) for k in range(model.V.cols)]
            for j in range(model.V.rows)]


def _scores(model: Model, decimals: Decimals) -> NumRows:
    return _exact_or_rounded([[Fraction(int(s.p), int(s.q)) for s in row] for row in model.scores.tolist()],
                             decimals.scores)


def exact_figures(model: Model, decimals: Decimals) -> Figures:
    """Each number is the exact value, rounded for display."""
    n, m = model.n_queries, model.n_keys
    weights = _from_model(model, "weights", decimals.weights)
    products = _from_model(model, "products", decimals.output)
    return Figures(
        sqrt_dk=_from_model(model, "sqrt_dk", decimals.sqrt_dk)[0][0],
        scores=_scores(model, decimals),
        scaled=_from_model(model, "scaled", decimals.scaled),
        exp=_from_model(model, "exp", decimals.exp),
        exp_sum=tuple(row[0] for row in _from_model(model, "exp_sum", decimals.exp)),
        weights=weights,
        percent=_percent(_from_model(model, "weights", decimals.percent + 2)),
        percent_whole=_percent(_from_model(model, "weights", 2)),
        products=tuple(products[i * m:(i + 1) * m] for i in range(n)),
        output=_from_model(model, "output", decimals.output),
    )


def hand_figures(model: Model, spec: Spec) -> Figures:
    """Each number is computed from the shown numbers before it."""
    decimals = spec.decimals
    sqrt_dk = _from_model(model, "sqrt_dk", decimals.sqrt_dk)[0][0]
    scores = _scores(model, decimals)
    if spec.scale == "sqrt":
        z = [[s.fraction / sqrt_dk.fraction for s in row] for row in scores]
    elif spec.scale == "none":
        z = _fractions(scores)
    else:
        z = [[s.fraction * spec.scale.value for s in row] for row in scores]
    scaled = _rounded(z, decimals.scaled) if spec.scale != "none" else scores
    exp = tuple(tuple(_num(numeric.round_expr(sympy.exp(sympy.Rational(x.fraction.numerator, x.fraction.denominator)),
                                              decimals.exp), None if x.value else Fraction(1))
                      for x in row) for row in scaled)
    exp_sum = _exact_or_rounded([[sum((e.fraction for e in row), Fraction(0))] for row in exp], decimals.exp)
    weights = _rounded([[e.fraction / total[0].fraction for e in row] for row, total in zip(exp, exp_sum)],
                       decimals.weights)
    V = _v(model)
    products = tuple(_exact_or_rounded([[w.fraction * v for v in V[j]] for j, w in enumerate(row)], decimals.output)
                     for row in weights)
    output = _exact_or_rounded([[sum((w.fraction * V[j][k] for j, w in enumerate(row)), Fraction(0))
                                 for k in range(len(V[0]))] for row in weights], decimals.output)
    return Figures(
        sqrt_dk=sqrt_dk, scores=scores, scaled=scaled, exp=exp, exp_sum=tuple(r[0] for r in exp_sum),
        weights=weights,
        percent=_exact_or_rounded([[w.fraction * 100 for w in row] for row in weights], decimals.percent),
        percent_whole=_rounded([[w.fraction * 100 for w in row] for row in weights], 0),
        products=products, output=output,
    )


def figures(model: Model, spec: Spec) -> Figures:
    return hand_figures(model, spec) if spec.rounding == "hand" else exact_figures(model, spec.decimals)
