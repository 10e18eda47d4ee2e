"""Partial products: the terms of a dot product as a student writes them, each judged on its own.

``products.scores[i][j]`` lists the terms q_i,t·k_j,t of a score, one per column t (of Q′ and K′ where a
Q/K part turns or normalizes the rows), and ``products.output[i][c]`` the terms p_ij·v_jc of an output
entry, one per key j. A term gets a verdict as any claim does: exact, rounded, carried (the product of the
claimant's own earlier numbers: their Q and K, or their weights), last-digit or wrong. The claimed terms,
added up, are what the claimant's score or output entry carries forward (:mod:`symattn.checking.chain`).
"""

from __future__ import annotations

from typing import Any

import sympy

from symattn.checking.closed import Closed
from symattn.checking.enclosure import depends_on, explains
from symattn.checking.report import Explanation, Verdict
from symattn.exact import numeric
from symattn.exact.rounding import Num
from symattn.input.claims import PRODUCTS, Claim
from symattn.input.decimals import round_half_up, significant_exact, terminating_decimals

SIGNIFICANT = 6


def term_verdict(checker: Any, claim: Claim) -> Verdict:
    """The verdict on one claimed term, and the two numbers whose product it is where it is wrong."""
    from symattn.checking.verdicts import _Exact  # the checker imports this module

    assert claim.row is not None and claim.col is not None and claim.term is not None  # the reader gives all three
    quantity, i, j, t = PRODUCTS[claim.quantity], claim.row, claim.col, claim.term
    caches = checker._tables.setdefault("enclosures", {})
    expr = _exact(checker, quantity, i, j, t, claim.head)
    value = numeric.as_fraction(expr)
    d = claim.number.decimals
    if d is None:
        rounded = None
    else:
        rounded = round_half_up(value, d) if value is not None else numeric.round_expr(expr, d, caches)
    shown = _shown(expr, caches)
    exact = _Exact(value, Closed(checker.texts, expr=expr), shown, rounded)
    y, from_claims = checker.chain.term(quantity, i, j, t, claim.head)
    verdict, carried = checker.decide(claim, exact, y, from_claims)
    asked = checker.coarse(claim) if verdict in ("rounded", "carried") else None
    if asked is not None:  # right at its own decimals, but the sheet asks more of the score or output
        verdict, carried = "too-coarse", None
        rounded = round_half_up(value, asked) if value is not None else numeric.round_expr(expr, asked, caches)
    rounded_inputs: tuple[str, ...] = ()
    enclosure = checker.enclosure  # inputs = "rounded": the typed inputs' intervals, multiplied
    if verdict in ("wrong", "last-digit") and enclosure is not None and d is not None:
        if explains(enclosure.term(quantity, i, j, t), claim.number):
            verdict, rounded_inputs = "input-rounding", depends_on(checker.spec, quantity, i, j)
    explanation = None
    if verdict in ("wrong", "last-digit"):
        pair = tuple(_shown(f, caches) for f, _ in checker.chain.factors(quantity, i, j, t, claim.head))
        explanation = Explanation(claim.quantity, i, j, (pair,), shown)
    row_label, col_label, row_axis, col_axis = checker.layout.labels(quantity, i, j)
    return Verdict(
        claim,
        verdict,
        False,
        shown,
        exact.closed,
        rounded,
        carried,
        explanation,
        row_label,
        col_label,
        row_axis=row_axis,
        col_axis=col_axis,
        rounded_inputs=rounded_inputs,
        asked=asked,
    )


def own_sum(checker: Any, claim: Claim) -> Explanation | None:
    """How a score or output entry adds up from the claimant's own terms (where they claimed terms of it)."""
    key = (claim.head, claim.quantity, claim.row, claim.col)
    if key not in checker.chain.terms:
        return None
    caches = checker._tables.setdefault("enclosures", {})
    terms = [x for x, _ in checker.chain.own_terms(key)]
    operands = tuple(_shown(x, caches) for x in terms)
    return Explanation(claim.quantity, claim.row, claim.col, operands, _shown(sympy.Add(*terms), caches), summed=True)


def _exact(checker: Any, quantity: str, i: int, j: int, t: int, head: int | None) -> sympy.Expr:
    """Term t of a score (q_i,t·k_j,t) or of an output entry (p_it·v_t,j), exactly."""
    m = checker.layout.heads[checker.layout.index(head)]
    if quantity == "output":
        return m.weights[i, t] * m.V[t, j]
    factors = m.qk.factors if m.qk is not None else None
    if factors is None:
        return m.Q[i, t] * m.K[j, t]
    return m.exact(factors[0])[i, t] * m.exact(factors[1])[j, t]


def _shown(x: sympy.Expr, caches: dict) -> Num:
    """A term or a factor as a report shows it: a terminating rational whole, else six significant digits."""
    value = numeric.as_fraction(x)
    places = None if value is None else terminating_decimals(value)
    if value is not None and places is not None:
        return Num(round_half_up(value, places), True)
    if value is not None:
        return Num(significant_exact(value, SIGNIFICANT), False)
    return Num(numeric.round_expr(x, SIGNIFICANT, caches, significant=True), False)


__all__ = ["own_sum", "term_verdict"]
