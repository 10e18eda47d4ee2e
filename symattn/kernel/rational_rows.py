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


class Exact:
    """A head's K and V as Python integers times a power of two each, made once for the rows that refine or a
    certificate's exact rules ask about: a row's exact dots are one integer product and V's sums over its keys
    integer sums (Fractions took 14 s for the 768 rows of an all-ones (2, 4, 96, 32) head; the sums are kept
    for each set of keys)."""

    def __init__(self, head: float64.Head):
        self.head = head
        self._made: dict[str, tuple[np.ndarray, int]] = {}
        self._sums: dict[bytes, list[Fraction]] = {}

    def _integers(self, name: str) -> tuple[np.ndarray, int]:
        if name not in self._made:
            self._made[name] = integers(getattr(self.head, name))
        return self._made[name]

    def dots(self, x: np.ndarray, name: str, keys: np.ndarray) -> tuple[np.ndarray, int]:
        """x · row for the keys' rows of K or V (``name``), exactly: (integers, shift), each dot integer·2^shift."""
        rows, shift = self._integers(name)
        a, more = integers(x)
        return rows[keys] @ a, shift + more

    def scores(self, i: int, keys: np.ndarray) -> tuple[np.ndarray, int]:
        """The exact scores q_i·k_j of the keys, as integers times 2^shift: (integers, shift)."""
        return self.dots(self.head.Q[i], "K", keys)

    def output(self, keys: np.ndarray) -> list[Fraction]:
        """Each column's mean of V over the keys, exactly."""
        found = self._sums.get(keys.tobytes())
        if found is None:
            ints, shift = self._integers("V")
            scale = Fraction(2) ** shift / len(keys)
            found = self._sums[keys.tobytes()] = [int(x) * scale for x in ints[keys].sum(axis=0).tolist()]
        return found


def integers(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Finite floats x as integers times 2^shift, exactly: (an object array of Python's integers, shift)."""
    mantissa, exponent = np.frexp(x)
    whole = (mantissa * 2.0**53).astype(np.int64)  # exact: a float's 53 bits
    exponent = exponent.astype(np.int64) - 53
    nonzero = whole != 0
    shift = int(exponent[nonzero].min()) if nonzero.any() else 0
    out = np.empty(x.shape, dtype=object)
    out.reshape(-1)[:] = [
        a << b if a else 0 for a, b in zip(whole.ravel().tolist(), (exponent - shift).ravel().tolist())
    ]
    return out, shift


def rational_row(head: float64.Head, quantity: str, i: int, exact: Exact | None = None) -> list[Fraction] | None:
    """A row whose allowed scores are all equal has rational weights 1/count (Lindemann–Weierstrass
    says no other row has): its weights or outputs exactly; None for any other row. ``exact``: the head's
    :class:`Exact`, kept by the caller for its other rows."""
    keep = np.ones(head.K.shape[0], dtype=bool) if head.allowed is None else head.allowed[i]
    keys = np.nonzero(keep)[0]
    if not keys.size:  # a row that attends to no key: no value
        return None
    exact = Exact(head) if exact is None else exact
    scores, shift = exact.scores(i, keys)
    if quantity in ("lse", "lse2"):
        return _log_row(head, [int(x) * Fraction(2) ** shift for x in scores.tolist()], quantity)
    if any(x != scores[0] for x in scores.tolist()):
        return None
    w = Fraction(1, len(keys))
    if quantity == "dQ":
        return _rational_dq(head, i, keys, w)
    if quantity == "weights":
        return [w if k else Fraction(0) for k in keep]
    return exact.output(keys)


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


__all__ = ["Exact", "constant_output", "denominators", "equal_score_rows", "integers", "rational_row"]
