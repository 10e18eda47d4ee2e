"""The numbers a document shows of one head, every quantity in one rounding mode (see
:mod:`symattn.exact.rounding`), with its parts' own (:mod:`symattn.variants`): a Q/K part's scores, the
additive and monotone parts' z by hand, and a denominator part's term and share.
"""

from __future__ import annotations

from dataclasses import fields, replace
from fractions import Fraction

from symattn.exact.model import Model
from symattn.exact.rounding import (
    NEG_INFINITY,
    Figures,
    Num,
    NumRow,
    NumRows,
    _fractions,
    _percent,
    _rounded,
    exact_or_rounded,
    exp_of,
    from_model,
)
from symattn.input.errors import LimitError, SpecError
from symattn.input.limits import FIXED_DIGITS
from symattn.input.spec import Decimals, Spec
from symattn.variants import ADD, MAP


def _scores(model: Model, decimals: Decimals, notation: str, hand: bool = False) -> NumRows:
    if model.qk is not None:  # a Q/K part's scores, as its step shows them
        return model.qk.shown_scores(model, decimals.scores, notation, hand)
    den, rows = model.score_integers
    return exact_or_rounded([[Fraction(x, den) for x in row] for row in rows], decimals.scores, notation)


def exact_figures(model: Model, decimals: Decimals, stable: bool = False, notation: str = "auto") -> Figures:
    """Each number is the exact value, rounded for display."""
    n, m = model.n_queries, model.n_keys

    def shown(quantity: str, places: int, model: Model = model) -> NumRows:
        return from_model(model, quantity, places, notation)

    weights = shown("weights", decimals.weights)
    products = shown("products", decimals.output)
    scaled = shown("scaled", decimals.scaled)
    unmasked = scaled if model.allowed is None else shown("scaled", decimals.scaled, replace(model, allowed=None))
    suffix = "_shifted" if stable else ""
    return Figures(
        sqrt_dk=shown("sqrt_dk", decimals.sqrt_dk)[0][0],
        scores=_scores(model, decimals, notation),
        unmasked=unmasked,
        scaled=scaled,
        row_max=tuple(scaled[i][j] for i, j in enumerate(model.row_max)) if stable else None,
        softmax_input=shown("shifted", decimals.scaled) if stable else scaled,
        exp=shown("exp" + suffix, decimals.exp),
        exp_sum=tuple(row[0] for row in shown(f"exp{suffix}_sum", decimals.exp)),
        weights=weights,
        percent=_percent(from_model(model, "weights", decimals.percent + 2, notation, 2, decimals.percent + 1)),
        percent_whole=_percent(from_model(model, "weights", 2)),
        products=tuple(products[i * m : (i + 1) * m] for i in range(n)),
        output=shown("output", decimals.output),
    )


def hand_figures(model: Model, spec: Spec) -> Figures:
    """Each number is computed from the shown numbers before it."""
    decimals = spec.decimals
    notation = spec.notation
    sqrt_dk = from_model(model, "sqrt_dk", decimals.sqrt_dk, notation)[0][0]
    scores = _scores(model, decimals, notation, hand=True)
    if spec.scale == "sqrt":
        z = [[s.fraction / sqrt_dk.fraction for s in row] for row in scores]
    elif spec.scale == "none":
        z = _fractions(scores)
    else:
        z = [[s.fraction * spec.scale.value for s in row] for row in scores]
    unmasked = _rounded(z, decimals.scaled, notation) if spec.scale != "none" else scores
    for part in model.parts:  # an additive part's term, then a monotone map, on the shown z
        if part.stage in (ADD, MAP):
            unmasked = part.by_hand(model, unmasked, decimals.scaled, notation)
    scaled = tuple(
        tuple(x if model.may_attend(i, j) else NEG_INFINITY for j, x in enumerate(row))
        for i, row in enumerate(unmasked)
    )
    row_max = None
    softmax_input = scaled
    if spec.softmax == "stable":
        row_max = tuple(row[j] for row, j in zip(scaled, model.row_max))
        if model.denominator is not None:  # its logit may be a row's maximum
            row_max = model.denominator.shown_shift(model, row_max, decimals.scaled, notation)
        softmax_input = tuple(
            exact_or_rounded(
                [[x.fraction - top.fraction for x in row if not x.is_infinite]], decimals.scaled, notation
            )[0]
            for row, top in zip(scaled, row_max)
        )
        softmax_input = tuple(_reinsert(row, shifted) for row, shifted in zip(scaled, softmax_input))
    exp = tuple(tuple(exp_of(x, decimals.exp, notation) for x in row) for row in softmax_input)
    terms = (
        None if model.denominator is None else model.denominator.terms_by_hand(model, row_max, decimals.exp, notation)
    )
    exp_sum = exact_or_rounded(
        [
            [sum((e.fraction for e in row), Fraction(0)) + (terms[i].fraction if terms else 0)]
            for i, row in enumerate(exp)
        ],
        decimals.exp,
        notation,
    )
    for i, total in enumerate(exp_sum):
        if total[0].fraction == 0:
            raise SpecError(
                spec.source,
                "rounding",
                f"by hand, every e^z of row {i + 1} ({spec.tokens[i]}) shows "
                f"as 0 at {decimals.exp} decimals, so its weights would be 0/0; use softmax = "
                '"stable", or more decimals for exp',
            )
    weights = _rounded(
        [[e.fraction / total[0].fraction for e in row] for row, total in zip(exp, exp_sum)], decimals.weights, notation
    )
    V = model.v_rows
    products = tuple(
        exact_or_rounded([[w.fraction * v for v in V[j]] for j, w in enumerate(row)], decimals.output, notation)
        for row in weights
    )
    output = exact_or_rounded(
        [
            [sum((w.fraction * V[j][k] for j, w in enumerate(row)), Fraction(0)) for k in range(len(V[0]))]
            for row in weights
        ],
        decimals.output,
        notation,
    )
    return Figures(
        sqrt_dk=sqrt_dk,
        scores=scores,
        unmasked=unmasked,
        scaled=scaled,
        row_max=row_max,
        softmax_input=softmax_input,
        exp=exp,
        exp_sum=tuple(r[0] for r in exp_sum),
        weights=weights,
        percent=exact_or_rounded([[w.fraction * 100 for w in row] for row in weights], decimals.percent, notation),
        percent_whole=_rounded([[w.fraction * 100 for w in row] for row in weights], 0),
        products=products,
        output=output,
        denominator=terms,
        share=None
        if terms is None
        else tuple(
            r[0]
            for r in _rounded(
                [[e.fraction / t[0].fraction] for e, t in zip(terms, exp_sum)], decimals.weights, notation
            )
        ),
    )


def _reinsert(row: NumRow, finite: NumRow) -> NumRow:
    # put shifted values back where the row is not masked
    values = iter(finite)
    return tuple(x if x.is_infinite else next(values) for x in row)


def figures(model: Model, spec: Spec) -> Figures:
    if spec.rounding == "hand":
        fig = hand_figures(model, spec)
    else:
        stable = spec.softmax == "stable"
        fig = exact_figures(model, spec.decimals, stable=stable, notation=spec.notation)
        if model.denominator is not None:  # its term and share of each row
            fig = model.denominator.exact_figures(model, fig, spec.decimals, stable, spec.notation)
    # a denominator part's term and share are named as its quantities
    names = {} if model.denominator is None else dict(zip(("denominator", "share"), model.denominator.computed))
    _check_fixed(fig, spec.source, names)
    return fig


def _check_fixed(fig: Figures, source: str, names: dict[str, str]) -> None:
    """Refuse numbers too long to print in fixed notation (e^9900 has 4300 digits)."""
    for f in fields(fig):
        rows = getattr(fig, f.name)
        rows = () if rows is None else (rows,) if isinstance(rows, Num) else rows
        for i, row in enumerate(rows, 1):
            for j, x in enumerate((row,) if isinstance(row, Num) else row, 1):
                for k, y in enumerate((x,) if isinstance(x, Num) else x, 1):
                    if not y.scientific and y.value.is_finite() and y.value != 0 and y.value.adjusted() >= FIXED_DIGITS:
                        raise LimitError(
                            source,
                            names.get(f.name, f.name),
                            f"a number with {y.value.adjusted() + 1} digits before "
                            f"the point; documents show at most {FIXED_DIGITS} (compute gives "
                            'significant digits, or notation = "auto")',
                            (i, j) if isinstance(x, Num) else (i, j, k),
                        )
