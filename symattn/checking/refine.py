"""Arb balls for the entries the float64 bound leaves open: their rows at rising precision.

Like the exact path: python-flint's arb (matrix products in C, one exp per score), the precision doubled
until each entry is decided. A row whose allowed scores are all equal has rational weights, known exactly.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from symattn.exact import float64
from symattn.exact.cores import map_forked
from symattn.input import limits
from symattn.input.decimals import significant_exact
from symattn.input.errors import EvaluationError

START_BITS = 96  # enough for most entries the float64 bounds leave open; doubled for the rest
ROWS_AT_ONCE = 32
PARALLEL_ROWS = 128  # rows of arb balls below which one process is quicker than two (each row: ~4 ms)


class Balls:
    """The arb balls of rows already computed, for the rows asked for again: each head's keys as integers,
    and each row's exps and their sum at a precision, up to limits.ARB_BALLS balls in all. Refinement's
    rows serve the row-relative figures and the verdict's narrowing after it: the same balls again."""

    def __init__(self, limit: int | None = None):
        self.limit = limits.ARB_BALLS if limit is None else limit
        self._keys: dict[int, tuple] = {}  # id(head): the heads outlive the comparison that holds this
        self._rows: dict[tuple[int, int, int], tuple] = {}  # (id(head), row, bits): (exps as a row, their sum)
        self._balls = 0

    def __len__(self) -> int:  # rows kept
        return len(self._rows)

    def keys(self, head: float64.Head) -> tuple:
        if id(head) not in self._keys:
            from flint import fmpz_mat

            keys, shift = _integers(head.K)
            self._keys[id(head)] = (fmpz_mat(keys).transpose(), shift)
        return self._keys[id(head)]

    def row(self, head: float64.Head, i: int, bits: int) -> tuple | None:
        return self._rows.get((id(head), i, bits))

    def keep(self, head: float64.Head, i: int, bits: int, row: tuple) -> None:
        if self._balls + row[0].ncols() <= self.limit:  # past the limit a row is computed again when asked for
            self._rows[(id(head), i, bits)] = row
            self._balls += row[0].ncols()


def refine(
    head: float64.Head,
    quantity: str,
    entries: dict[int, list[int]],
    decide_one,
    digits: int,
    balls: Balls | None = None,
):
    """Arb balls for the entries {row: [columns]} at rising precision until ``decide_one(i, j, lo, hi)``
    decides each and both ends agree on ``digits``; {(i, j): (outcome, shown)} and the digits reached.
    ``balls``: rows computed before, kept for the callers after."""
    out: dict[tuple[int, int], tuple] = {}
    bits = START_BITS
    candidates = _equal_score_rows(head, sorted(entries))
    for i, cols in entries.items():
        known = _rational_row(head, quantity, i) if i in candidates else None
        if known is None:
            continue
        for j in cols:
            outcome = decide_one(i, j, known[j], known[j])
            if outcome is not None:
                out[(i, j)] = (outcome, significant_exact(known[j], digits))
    pending = {i: [j for j in cols if (i, j) not in out] for i, cols in entries.items()}
    pending = {i: cols for i, cols in pending.items() if cols}
    while pending:
        for i, values in _by_rows(head, quantity, pending, bits, balls):
            for j in pending[i]:
                lo, hi = values[j]
                outcome = decide_one(i, j, lo, hi)
                exact = significant_exact(lo, digits)
                if outcome is not None and exact == significant_exact(hi, digits):
                    out[(i, j)] = (outcome, exact)
        pending = {i: [j for j in cols if (i, j) not in out] for i, cols in pending.items()}
        pending = {i: cols for i, cols in pending.items() if cols}
        if pending and bits * 2 > limits.DIGITS * 3.33:
            i = min(pending)
            raise EvaluationError(
                f"the error of entry ({i + 1}, {pending[i][0] + 1}) is not decided at {limits.DIGITS} digits"
            )
        bits *= 2
    return out, int(bits / 2 / 3.33)


def _rational_row(head: float64.Head, quantity: str, i: int) -> list[Fraction] | None:
    """A row whose allowed scores are all equal has rational weights 1/count (Lindemann–Weierstrass
    says no other row has): its weights or outputs exactly; None for any other row."""
    keep = np.ones(head.K.shape[0], dtype=bool) if head.allowed is None else head.allowed[i]
    keys = np.nonzero(keep)[0]
    if quantity in ("lse", "lse2"):  # log(count) + z: rational only for one key, a rational scale and base e
        return None if len(keys) > 1 or quantity == "lse2" or head.exact_scale is None else _one_key(head, i, keys[0])
    q = [Fraction(float(a)) for a in head.Q[i]]
    exact = [sum((Fraction(float(a)) * b for a, b in zip(head.K[j], q)), Fraction(0)) for j in keys]
    if any(e != exact[0] for e in exact):
        return None
    w = Fraction(1, len(keys))
    if quantity == "weights":
        return [w if k else Fraction(0) for k in keep]
    return [w * sum((Fraction(float(head.V[j, c])) for j in keys), Fraction(0)) for c in range(head.V.shape[1])]


def _equal_score_rows(head: float64.Head, rows: list[int]) -> set[int]:
    """The rows whose allowed float scores are all within their error of each other (the others certainly
    have scores that differ): one matrix product for all of them."""
    if not rows:
        return set()
    q = head.Q[rows]
    S = q @ head.K.T
    bound = 4 * float64.gamma(head.Q.shape[1]) * np.max(np.abs(q) @ np.abs(head.K).T, axis=1)
    if head.allowed is not None:
        keep = head.allowed[rows]
        top, low = np.where(keep, S, -np.inf).max(axis=1), np.where(keep, S, np.inf).min(axis=1)
    else:
        top, low = S.max(axis=1), S.min(axis=1)
    return {i for i, close in zip(rows, (top - low <= bound).tolist()) if close}


def _one_key(head: float64.Head, i: int, j: int) -> list[Fraction]:
    assert head.exact_scale is not None  # asked for by the caller
    score = sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(head.Q[i], head.K[j])), Fraction(0))
    return [score * head.exact_scale]


def _integers(a: np.ndarray) -> tuple[list[list[int]], int]:
    """a = ints · 2^-shift exactly (float32 values: each a dyadic rational of at most 24 bits)."""
    nonzero = a[a != 0]
    if not nonzero.size:
        return [[0] * a.shape[1] for _ in range(a.shape[0])], 0
    _, e = np.frexp(nonzero)
    shift = max(0, 53 - int(e.min()))  # every entry's last bit at 2^-shift or above
    return [[int(x) for x in row] for row in np.ldexp(a, shift).tolist()], shift


def _by_rows(head: float64.Head, quantity: str, wanted: dict[int, list[int]], bits: int, balls: Balls | None = None):
    """(row, {column: exact ends}) for each row of ``wanted``, in order, at ``bits``."""
    # ROWS_AT_ONCE rows of balls at a time: memory stays O(ROWS_AT_ONCE · keys), not O(rows · keys)
    balls = Balls(0) if balls is None else balls
    rows = sorted(wanted)
    chunks = [{i: wanted[i] for i in rows[n : n + ROWS_AT_ONCE]} for n in range(0, len(rows), ROWS_AT_ONCE)]
    parallel = len(rows) >= PARALLEL_ROWS
    if parallel:
        balls.keys(head)  # made once, before the processes copy it
    for done in map_forked(_chunk_ends, (head, quantity, bits, balls), chunks, parallel):
        yield from done


def _chunk_ends(data: tuple, chunk: dict[int, list[int]]) -> list[tuple[int, dict[int, tuple[Fraction, Fraction]]]]:
    head, quantity, bits, balls = data
    return [
        (i, {j: _ends(ball) for j, ball in values.items()})
        for i, values in zip(chunk, _arb_rows(head, quantity, chunk, bits, balls))
    ]


def _arb_rows(head: float64.Head, quantity: str, wanted: dict[int, list[int]], bits: int, balls: Balls | None = None):
    """For each row of ``wanted`` (in order), {column: ball} of its weights, outputs or log-sum-exp (column 0)."""
    from flint import arb, arb_mat, ctx

    balls = Balls(0) if balls is None else balls
    saved = ctx.prec
    ctx.prec = bits
    try:
        made: dict[int, tuple] = {}
        for i in wanted:
            row = balls.row(head, i, bits)
            if row is not None:  # computed at this precision before
                made[i] = row
        rows = [i for i in wanted if i not in made]
        for i, row in zip(rows, _exps(head, rows, balls.keys(head))):
            made[i] = row
            balls.keep(head, i, bits, row)
        if quantity in ("lse", "lse2"):
            ln2 = arb(2).log()
            for i in wanted:
                yield {0: made[i][1].log() / (ln2 if quantity == "lse2" else 1)}
            return
        if quantity == "weights":
            for i in wanted:
                yield {j: made[i][0][0, j] / made[i][1] for j in wanted[i]}
            return
        for i in wanted:  # only the outputs asked for: each row's e · V[:, its columns]
            cols = wanted[i]
            weighted = made[i][0] * arb_mat(head.V[:, cols].tolist())
            yield {k: weighted[0, n] / made[i][1] for n, k in enumerate(cols)}
    finally:
        ctx.prec = saved


def _exps(head: float64.Head, rows: list[int], KT: tuple) -> list[tuple]:
    """(e^z of each key as a 1×m row, their sum) for each of the query rows, at ctx.prec."""
    from flint import arb, arb_mat, fmpz_mat

    if not rows:
        return []
    queries, q_shift = _integers(head.Q[rows])
    exact = fmpz_mat(queries) * KT[0]  # the scores exactly, as integers · 2^-(q_shift + KT[1])
    d = head.Q.shape[1]
    c = (
        1 / arb(d).sqrt()
        if head.exact_scale is None
        else arb(head.exact_scale.numerator) / head.exact_scale.denominator
    )
    c = c * arb(2) ** -(q_shift + KT[1])
    m = exact.ncols()
    scores = (arb_mat(exact) * c).entries()  # exact integers to balls, each times c: in C, as fmpz · arb is
    zero = arb(0)
    exps = []
    for r, i in enumerate(rows):
        z = scores[r * m : (r + 1) * m]
        if head.allowed is None:
            exps.append([x.exp() for x in z])
        else:
            exps.append([x.exp() if keep else zero for x, keep in zip(z, head.allowed[i].tolist())])
    totals = arb_mat(exps) * arb_mat([[1]] * m)
    return [(arb_mat([exps[r]]), totals[r, 0]) for r in range(len(rows))]


def _ends(x) -> tuple[Fraction, Fraction]:
    if not x.is_finite():
        raise EvaluationError("value is not finite")
    man, exp = x.mid().man_exp()
    rman, rexp = x.rad().man_exp()
    mid = Fraction(int(man)) * Fraction(2) ** int(exp)
    rad = Fraction(int(rman)) * Fraction(2) ** int(rexp)
    return mid - rad, mid + rad


__all__ = ["refine"]
