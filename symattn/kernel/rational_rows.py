"""The entries of a plain head that refine knows exactly without balls (Lindemann–Weierstrass): the rows whose
allowed scores are all equal (weights 1/count, their outputs and dQ; an LSE of one key, or in base 2 of 2^k keys
of score 0), and an output whose V column is one value over the keys its query attends.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from symattn.kernel import float64


def equal_score_rows(head: float64.Head, rows: list[int]) -> set[int]:
    """The rows whose allowed float scores are all within their error of each other (the others certainly
    have scores that differ): one matrix product for each block of rows (a block's scores at a time, not
    every row's: 8192 rows of 8192 keys would be half a gigabyte a matrix)."""
    out: set[int] = set()
    absK = np.abs(head.K).T
    for start in range(0, len(rows), float64.BLOCK):
        block = rows[start : start + float64.BLOCK]
        q = head.Q[block]
        S = q @ head.K.T
        bound = 4 * float64.gamma(head.Q.shape[1]) * np.max(np.abs(q) @ absK, axis=1)
        if head.allowed is not None:
            keep = head.allowed[block]
            top, low = np.where(keep, S, -np.inf).max(axis=1), np.where(keep, S, np.inf).min(axis=1)
        else:
            top, low = S.max(axis=1), S.min(axis=1)
        out |= {i for i, close in zip(block, (top - low <= bound).tolist()) if close}
    return out


def rational_row(head: float64.Head, quantity: str, i: int) -> list[Fraction] | None:
    """A row whose allowed scores are all equal has rational weights 1/count (Lindemann–Weierstrass
    says no other row has): its weights or outputs exactly; None for any other row."""
    keep = np.ones(head.K.shape[0], dtype=bool) if head.allowed is None else head.allowed[i]
    keys = np.nonzero(keep)[0]
    if not keys.size:  # a row that attends to no key: no value
        return None
    q = [Fraction(float(a)) for a in head.Q[i]]
    exact = [sum((Fraction(float(a)) * b for a, b in zip(head.K[j], q)), Fraction(0)) for j in keys]
    if quantity in ("lse", "lse2"):
        return _log_row(head, exact, quantity)
    if any(e != exact[0] for e in exact):
        return None
    w = Fraction(1, len(keys))
    if quantity == "dQ":
        return _rational_dq(head, i, keys, w)
    if quantity == "weights":
        return [w if k else Fraction(0) for k in keep]
    return [w * sum((Fraction(float(head.V[j, c])) for j in keys), Fraction(0)) for c in range(head.V.shape[1])]


def _log_row(head: float64.Head, exact: list[Fraction], quantity: str) -> list[Fraction] | None:
    """The LSE of a row of these exact scores where it is rational: log Σ e^z = log(count) + z over equal z
    (Lindemann–Weierstrass), so in base e one key's z at a rational scale, and in base 2 k for 2^k keys of
    score 0; else None."""
    count, c, factor = len(exact), _rational_scale(head), float64.extras(head)[0]
    if quantity == "lse2":
        return [Fraction(count.bit_length() - 1)] if set(exact) == {0} and count & (count - 1) == 0 else None
    return None if count != 1 or c is None else [exact[0] * c * (1 if factor is None else factor)]


def _rational_dq(head, i: int, keys, w: Fraction) -> list[Fraction] | None:
    """dQ's row i exactly where its weights are all w: dS = w·(dA − D) is rational, and so is c·dS·K for a
    rational scale c (given, or 1/√d with d a square); None for an irrational one."""
    d, c = head.Q.shape[1], _rational_scale(head)
    if c is None or float64.extras(head)[0] is not None:
        return None
    g = [Fraction(x) for x in head.dO[i].tolist()]
    dA = [sum((Fraction(v) * x for v, x in zip(head.V[j].tolist(), g)), Fraction(0)) for j in keys]
    D = w * sum(dA, Fraction(0))
    dS = [w * (a - D) for a in dA]
    K = [[Fraction(x) for x in head.K[j].tolist()] for j in keys]
    return [c * sum((s * row[k] for s, row in zip(dS, K)), Fraction(0)) for k in range(d)]


def constant_output(head: float64.Head, quantity: str, i: int, k: int) -> Fraction | None:
    """Output (i, k) exactly where column k of V is one value v over the keys row i attends: the weights sum
    to 1, so the output is v, whatever the scores (an exact tie such as 1.5 at one digit needs it)."""
    if quantity != "output" or denominators(head):  # a denominator logit: the weights add up to less than 1
        return None
    column = head.V[:, k] if head.allowed is None else head.V[head.allowed[i], k]
    return Fraction(float(column[0])) if column.size and (column == column[0]).all() else None


def _rational_scale(head: float64.Head) -> Fraction | None:
    """The scale as a rational (given, or 1/√d with d a square); None where it is irrational."""
    root = math.isqrt(head.Q.shape[1])
    return (
        head.exact_scale if head.exact_scale is not None else Fraction(1, root) if root**2 == head.Q.shape[1] else None
    )


def denominators(head: float64.Head) -> list:
    """The head's logits in the denominator alone (kernel/score_mods.Denominator)."""
    return [mod for mod in float64.extras(head)[1] if hasattr(mod, "arb_exp")]


__all__ = ["constant_output", "denominators", "equal_score_rows", "rational_row"]
