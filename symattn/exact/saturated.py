"""z − max of scores that a tiny softcap saturates, to significant digits.

With c = 10^−6, c·tanh(y/c) is c·(1 − 2e^(−2y/c)) for y ≈ 0.7: two such capped scores differ by about
10^−300000, which no fixed-point box of the engine separates from 0 (it would take a million bits). Written
as 2c·e^(2m)·(e^(2(x − m)) − 1) / ((e^(2x) + 1)(e^(2m) + 1)), with x = y/c and m the maximum's, the difference
has no cancellation, and mpmath's intervals, whose exponents are unbounded, give it to any relative precision.
Against a sink s that is the row's maximum, c·tanh(x) − s is (c − s) − 2c/(e^(2x) + 1), exact where s = c. A
value below 10^−(10^6) (c = 10^−30 makes 10^−(3·10^29)) has no digits to write: refused, naming the entry.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

from mpmath import iv

from symattn.exact import numeric
from symattn.input.errors import EvaluationError
from symattn.input.limits import PRECISION_BITS

NEG_INFINITY = Decimal("-Infinity")


def shifted_significant(model: Any, digits: int) -> tuple[tuple[Decimal, ...], ...]:
    """Every entry of a soft-capped head's ``shifted`` to ``digits`` significant digits."""
    exact = model.rationals("shifted")
    rows = []
    for i in range(model.n_queries):
        row = []
        for j in range(model.n_keys):
            if not model.may_attend(i, j):
                row.append(NEG_INFINITY)
            elif exact[i][j] is not None:
                row.append(numeric.significant_exact(exact[i][j], digits))
            else:
                row.append(_decided(model, i, j, digits))
        rows.append(tuple(row))
    return tuple(rows)


SMALLEST_BITS = 1 << 22  # 2^−(2^22) ≈ 10^−1262612: below it a value has no digits we write


def _decided(model: Any, i: int, j: int, digits: int) -> Decimal:
    prec = 64
    while prec <= PRECISION_BITS:
        box = _enclosure(model, i, j, prec)
        if numeric.exponent_bits(box) < -SMALLEST_BITS:
            raise EvaluationError(f"shifted[{i + 1}][{j + 1}] is below 10^-1000000 in size: it has no digits to show")
        shown = numeric.significant_of(box, digits)
        if shown is not None:
            return shown
        prec *= 2
    raise EvaluationError(f"cannot decide the rounding of shifted[{i + 1}][{j + 1}]: it may be an exact tie")


def _enclosure(model: Any, i: int, j: int, prec: int) -> iv.mpf:
    c = model.softcap
    bits = prec + 16 + max(c.denominator.bit_length() - c.numerator.bit_length(), 0)  # x = y/c to 2^−prec

    def over_c(form: Any) -> iv.mpf:
        box = model._form_box(form, bits)
        return iv.mpf([box.lo, box.hi]) / (iv.mpf(2) ** bits) / _rational(c)

    with numeric.working_precision(prec + 16):
        x = over_c(model._form(i, j))
        if getattr(model, "sink_wins", None) is not None and model.sink_wins[i]:
            s = model.sink
            return _rational(c - s) - 2 * _rational(c) / (iv.exp(2 * x) + 1)
        top = model.row_max[i]
        m = over_c(model._form(i, top))
        d = over_c(model._minus(model._form(i, j), model._form(i, top)))
        # c·(tanh x − tanh m) = 2c·e^(2m)·(e^(2d) − 1) / ((e^(2x) + 1)(e^(2m) + 1)), d = x − m: nothing cancels
        return 2 * _rational(c) * iv.exp(2 * m) * (iv.exp(2 * d) - 1) / ((iv.exp(2 * x) + 1) * (iv.exp(2 * m) + 1))


def _rational(x: Fraction) -> iv.mpf:
    return iv.mpf(x.numerator) / x.denominator


__all__ = ["shifted_significant"]
