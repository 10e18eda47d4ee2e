"""Arb balls for the entries the float64 bound leaves open: their rows at rising precision.

Like the exact path: python-flint's arb (matrix products in C, one exp per score), the precision doubled
until each entry is decided. What no ball can decide is known exactly: rows of equal scores, constant V
columns and rational LSEs (:mod:`.rational_rows`), zeros and rational outputs (:mod:`.zeros`).
The gradients dQ, dK, dV and dsink (float64_backward) are the backward pass in arb
(:mod:`symattn.kernel.refine_gradients`). A logit in the denominator alone (kernel/score_mods.Denominator)
adds its e^s to each row's sum.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np

from symattn.input import limits
from symattn.input.decimals import significant_exact
from symattn.input.errors import EvaluationError
from symattn.kernel import doubled, float64, rational_rows, zeros
from symattn.kernel.cores import map_forked
from symattn.kernel.float64_backward import GRADIENTS
from symattn.kernel.rational_rows import denominators

TINY_END = Fraction(1, 2**4096)  # a ball below it has these ends: its figures come from kernel/deviation.py
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
            self._keys[id(head)] = _transposed_integers(head.K)
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
    name=None,
    prove_zeros: bool = True,
    two_floats: bool = True,
    errors=None,
):
    """Arb balls for the entries {row: [columns]} at rising precision until ``decide_one(i, j, lo, hi)``
    decides each and both ends agree on ``digits``; {(i, j): (outcome, shown)} and the digits reached.
    ``balls``: rows computed before, kept for the callers after. An entry whose first balls hold 0 is
    proved exactly 0 where it is (exact/zeros.py), since no ball shrinks to a point; ``prove_zeros`` False
    leaves it open (a certificate's verifier does not check such proofs). The outputs of a plain head are
    tried in two floats first (``two_floats``; a certificate's bounds stay arb's). ``name(i, j)``: how a
    message names an entry's error (default "the error of entry (i + 1, j + 1)"). ``errors``
    (deviation.Floats): the result's floats, so that an output the balls of its exact value leave open is
    decided from a ball of its error itself (kernel/deviation.py), that ball kept in ``errors.found``."""
    out: dict[tuple[int, int], tuple] = {}
    bits = START_BITS
    # rational rows: a query's (dK's and dV's rows are keys': none is looked for)
    plain = not float64.extras(head)[1]  # modified scores: equal raw scores need not give equal z; no zeros proof
    candidates = (
        set()
        if quantity in ("dK", "dV", "dsink") or not plain
        else rational_rows.equal_score_rows(head, sorted(entries))
    )
    prove_zeros = prove_zeros and plain
    integers = rational_rows.Exact(head)
    for i, cols in entries.items():
        known = rational_rows.rational_row(head, quantity, i, integers) if i in candidates else None
        for j in cols:
            value = known[j] if known is not None else rational_rows.constant_output(head, quantity, i, j)
            if value is None:
                continue
            outcome = decide_one(i, j, value, value)
            if outcome is not None:
                out[(i, j)] = (outcome, significant_exact(value, digits))
    pending = {i: [j for j in cols if (i, j) not in out] for i, cols in entries.items()}
    pending = {i: cols for i, cols in pending.items() if cols}
    first = bits  # the precision reported for refinement's first round
    if pending and two_floats and quantity == "output" and doubled.takes(head):  # the first round: two floats
        out.update(by_two_floats(head, pending, decide_one, digits))
        first = 2 * bits  # reported as arb's first round: its balls are ~2^30 narrower than the two floats'
        pending = {i: c for i, cols in pending.items() if (c := [j for j in cols if (i, j) not in out])}
    prove_zeros = prove_zeros and quantity in zeros.QUANTITIES  # those its rules cover
    exact_inputs = (
        zeros.of_arrays(head.Q, head.K, head.V, head.allowed, getattr(head, "dO", None)) if prove_zeros else None
    )
    while pending:
        suspects: dict[int, list[int]] = {}  # outputs whose balls hold x, or lie below normal: deviation's
        kept: dict[tuple[int, int], Any] = {}  # the gradients' balls, for their suspects
        parts: dict[tuple[int, int], tuple] = {}  # dV's (exact part, rest): refine_gradients.gradient_rows
        try:
            rows = list(_ends_by_rows(head, quantity, pending, bits, balls, name, kept, parts))
        except NotFinite as bad:  # the value is finite; balls of scores far past 2^bits lose it: more bits
            if bits * 2 > limits.DIGITS * 3.33:
                raise _undecided(name, bad.i, bad.j, " (its arb balls were not finite)") from None
            bits *= 2
            continue
        for i, values in rows:
            for j in pending[i]:
                lo, hi = values[j]
                nonzero = (i, j) in kept and (kept[(i, j)] > 0 or kept[(i, j)] < 0)  # a tiny ball's ends hold 0
                proof = (
                    None
                    if exact_inputs is None
                    else zeros.proved(exact_inputs, quantity, i, j, lo, hi, bits == START_BITS)
                )
                if proof is not None and not nonzero:  # 0, or a rational output (Lindemann–Weierstrass)
                    lo = hi = proof
                outcome = decide_one(i, j, lo, hi)
                exact = None if outcome is None else significant_exact(lo, digits)
                if outcome is not None and exact == significant_exact(hi, digits):
                    out[(i, j)] = (outcome, exact)
                elif (
                    errors is not None
                    and quantity in ("output", *GRADIENTS)
                    and (
                        errors.suspect(i, j, lo, hi) or (i, j) in parts  # dV near a float sum of dO
                    )
                ):
                    suspects.setdefault(i, []).append(j)
        if suspects and quantity == "output":  # a saturated row's outputs, an exact value below normal: from
            out.update(_by_errors(head, suspects, bits, balls, errors, digits, name))  # the balls of their errors
        elif suspects:
            from symattn.kernel.refine_gradients import by_error_balls

            out.update(by_error_balls(kept, suspects, bits, errors, digits, name, parts))
        pending = {i: c for i, cols in pending.items() if (c := [j for j in cols if (i, j) not in out])}
        if pending and bits * 2 > limits.DIGITS * 3.33:
            raise _undecided(name, min(pending), pending[min(pending)][0])
        bits *= 2
    return out, int(max(bits, first) / 2 / 3.33)


def _undecided(name, i: int, j: int, why: str = "") -> EvaluationError:
    named = f"the error of entry ({i + 1}, {j + 1})" if name is None else name(i, j)
    return EvaluationError(f"{named} is not decided at {limits.DIGITS} digits{why}")


def by_two_floats(head: float64.Head, entries: dict[int, list[int]], decide_one, digits: int) -> dict:
    """{(i, j): (outcome, shown)} of the outputs whose two-float enclosure decides them and rounds to one
    value at ``digits`` at both ends, as an arb ball's would."""
    pairs = [(i, j) for i, cols in entries.items() for j in cols]
    q1, q2, bound = doubled.quotients(head, pairs)
    out = {}
    for (i, j), a, b, e in zip(pairs, q1.tolist(), q2.tolist(), bound.tolist()):
        if not math.isfinite(e):
            continue
        middle, radius = Fraction(a) + Fraction(b), Fraction(e)
        lo, hi = middle - radius, middle + radius
        outcome = decide_one(i, j, lo, hi)
        exact = significant_exact(lo, digits)
        if outcome is not None and exact == significant_exact(hi, digits):
            out[(i, j)] = (outcome, exact)
    return out


def _by_errors(head: float64.Head, entries: dict[int, list[int]], bits: int, balls, errors, digits: int, name) -> dict:
    """{(i, j): (outcome, shown)} of the outputs that deviation.decide decides from the balls of their errors."""
    from flint import arb, arb_mat, ctx

    from symattn.kernel import deviation

    out: dict[tuple[int, int], tuple] = {}
    saved = ctx.prec
    ctx.prec = bits
    try:
        for i, cols in entries.items():
            made = balls.row(head, i, bits) if balls is not None else None
            if made is None:
                made = _exps(head, [i], (balls or Balls(0)).keys(head))[0]
            exps, total = made
            extra = sum((mod.arb_exp(i) for mod in denominators(head)), arb(0))  # a denominator logit's e^s: no value

            for j in cols:
                e = (exps * arb_mat([[v] for v in head.V[:, j].tolist()]))[0, 0] / total
                error_from = partial(_error_from, head.V[:, j].tolist(), exps, extra, total)
                deviation.decide_entry(errors, i, j, e, error_from, digits, name, out)
    finally:
        ctx.prec = saved
    return out


def _error_from(column: list[float], exps, extra, total, y: Fraction) -> Any:
    """The ball of e − y: Σ e^z (v − y) − y·e^s over the total, in which v_j − y may be exactly 0."""
    from flint import arb, arb_mat

    ya = arb(y.numerator) / y.denominator
    return ((exps * arb_mat([[arb(v) - ya] for v in column]))[0, 0] - ya * extra) / total


def enclose(head: float64.Head, quantity: str, entries: dict[int, list[int]], bits: int) -> dict:
    """{(row, column): (lo, hi)}, exact ends of the arb balls of the entries {row: [columns]} at ``bits``:
    no shortcut for rational rows or zeros (a certificate's rules decide those; see certificates)."""
    return {(i, j): ends for i, values in _ends_by_rows(head, quantity, entries, bits) for j, ends in values.items()}


def _integers(a: np.ndarray) -> tuple[list[list[int]], int]:
    """a = ints · 2^-shift exactly (float32 values: each a dyadic rational of at most 24 bits)."""
    shift = _shift(a)
    whole = np.ldexp(a, shift)
    if float(np.max(np.abs(whole), initial=0.0)) < 2.0**62:  # each below 2^62: int64 holds it exactly (in C)
        return whole.astype(np.int64).tolist(), shift
    return [[int(x) for x in row] for row in whole.tolist()], shift


def _transposed_integers(a: np.ndarray) -> tuple:
    """(aᵀ as integers, an fmpz_mat, and their shift): :func:`_integers` transposed, filled a row of ``a`` at a
    time, never as a list of every entry (at 8192 × 1024 that list and its floats took 600 MB)."""
    from flint import fmpz_mat

    shift = _shift(a)
    whole = np.ldexp(a, shift)
    if a.size <= 2**20 and float(np.max(np.abs(whole), initial=0.0)) < 2.0**62:  # one list of ints (≤ 40 MB)
        return fmpz_mat(a.shape[1], a.shape[0], whole.T.astype(np.int64).ravel().tolist()), shift
    out = fmpz_mat(a.shape[1], a.shape[0])
    for i, row in enumerate(whole):
        for j, x in enumerate(row.tolist()):
            if x:
                out[j, i] = int(x)
    return out, shift


def _shift(a: np.ndarray) -> int:
    """The least shift that makes every entry of ``a`` an integer: each one's last bit at 2^-shift (the ints
    stay short). Block by block of rows: the temporaries of all 8192 × 1024 at once were 400 MB."""
    shift = 0
    for start in range(0, a.shape[0], float64.BLOCK):
        nonzero = a[start : start + float64.BLOCK]
        nonzero = nonzero[nonzero != 0]
        if nonzero.size:
            m, e = np.frexp(np.abs(nonzero))  # |x| = m·2^e: m·2^53 an integer below 2^53
            ints = np.ldexp(m, 53).astype(np.int64)
            zeros = np.log2((ints & -ints).astype(np.float64)).astype(np.int64)  # trailing zero bits (exact)
            shift = max(shift, int(np.max(53 - e - zeros)))
    return shift


def _by_rows(
    head: float64.Head, quantity: str, wanted: dict[int, list[int]], bits: int, balls=None, name=None, parts=None
):
    """(row, {column: ball}) for each row of ``wanted``, in order, at ``bits`` (``name``: as refine's)."""
    # ROWS_AT_ONCE rows of balls at a time: memory stays O(ROWS_AT_ONCE · keys), not O(rows · keys)
    balls = Balls(0) if balls is None else balls
    rows = sorted(wanted)
    if quantity in GRADIENTS:  # one pass over the queries for all the rows (dK, dV: every query counts)
        wanted = {i: wanted[i] for i in rows}
        from symattn.kernel.refine_gradients import gradient_rows

        yield from zip(rows, gradient_rows(head, quantity, wanted, bits, balls.keys(head), name, parts))
        return
    for start in range(0, len(rows), ROWS_AT_ONCE):
        chunk = rows[start : start + ROWS_AT_ONCE]
        yield from zip(chunk, _arb_rows(head, quantity, {i: wanted[i] for i in chunk}, bits, balls))


def _ends_by_rows(
    head: float64.Head, quantity: str, wanted: dict, bits: int, balls=None, name=None, kept=None, parts=None
):
    """(row, {column: exact ends}) for each row of ``wanted``, in order, at ``bits``: _by_rows's balls as
    their ends, its chunks of rows in two processes from PARALLEL_ROWS rows on (the same chunks); a
    gradient's balls also in ``kept``, by (row, column)."""
    balls = Balls(0) if balls is None else balls
    rows = sorted(wanted)
    if quantity == "dsink":  # one number: every row of every batch counts
        from symattn.kernel.refine_gradients import logit_gradient

        yield 0, {0: _ends(logit_gradient(head, bits, name))}
        return
    if quantity in GRADIENTS:
        for i, values in _by_rows(head, quantity, wanted, bits, balls, name, parts):
            if kept is not None:
                kept.update({(i, j): ball for j, ball in values.items()})
            yield i, {j: _ends(ball, i, j) for j, ball in values.items()}
        return
    chunks = [{i: wanted[i] for i in rows[n : n + ROWS_AT_ONCE]} for n in range(0, len(rows), ROWS_AT_ONCE)]
    parallel = len(rows) >= PARALLEL_ROWS
    if parallel:
        balls.keys(head)  # made once, before the processes copy it
    for done in map_forked(_chunk_ends, (head, quantity, bits, balls), chunks, parallel):
        yield from done


def _chunk_ends(data: tuple, chunk: dict[int, list[int]]) -> list[tuple[int, dict[int, tuple[Fraction, Fraction]]]]:
    head, quantity, bits, balls = data
    return [
        (i, {j: _ends(ball, i, j) for j, ball in values.items()})
        for i, values in zip(chunk, _arb_rows(head, quantity, chunk, bits, balls))
    ]


def _exp_rows(head: float64.Head, rows: list[int], KT, columns: list[int] | None = None):
    """Arb balls of the rows' e^z (masked keys exactly 0), as lists and as a matrix, and their row sums; KT
    holds the keys (all by default, else those of ``columns``) as integers."""
    from flint import arb, arb_mat, fmpz_mat

    queries, q_shift = _integers(head.Q[rows])
    scores = fmpz_mat(queries) * KT[0]  # the scores exactly, as integers · 2^-(q_shift + KT[1])
    Z = arb_mat(scores) * (_scale(head) * arb(2) ** -(q_shift + KT[1]))  # in C: one Python step an entry less
    columns = list(range(scores.ncols())) if columns is None else columns
    zero = arb(0)
    exps = []
    for r, i in enumerate(rows):
        keep = [True] * len(columns) if head.allowed is None else head.allowed[i, columns].tolist()
        if float64.extras(head)[1]:  # score modifiers: on each allowed z, as the float64 path's exps
            exps.append([_modded(head, Z[r, t], i, columns[t]).exp() if ok else zero for t, ok in enumerate(keep)])
            continue
        exps.append([Z[r, t].exp() if ok else zero for t, ok in enumerate(keep)])
    E = arb_mat(exps)
    totals = E * arb_mat([[1]] * len(columns))
    for extra in denominators(head):  # its e^s joins each row's sum, with no value
        totals = arb_mat([[totals[r, 0] + extra.arb_exp(i)] for r, i in enumerate(rows)])
    return exps, E, totals


def _modded(head: float64.Head, z, i: int, j: int):
    for mod in float64.extras(head)[1]:
        z = mod.arb(z, i, j)
    return z


def _scale(head: float64.Head):
    from flint import arb

    factor = float64.extras(head)[0]
    f = Fraction(1) if factor is None else factor
    if head.exact_scale is None:
        return arb(f.numerator) / f.denominator / arb(head.Q.shape[1]).sqrt()
    c = head.exact_scale * f
    return arb(c.numerator) / c.denominator


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
    from flint import arb_mat

    if not rows:
        return []
    exps, _, totals = _exp_rows(head, rows, KT)
    return [(arb_mat([exps[r]]), totals[r, 0]) for r in range(len(rows))]


def _transposed(a: np.ndarray):
    """aᵀ as an fmpz_mat of integers and their shift (a = ints · 2^-shift)."""
    from flint import fmpz_mat

    ints, shift = _integers(a)
    return fmpz_mat(ints).transpose(), shift


class NotFinite(EvaluationError):
    """A ball that is not finite, at row i, column j of a head: refine names it as its caller does."""

    def __init__(self, i: int, j: int):
        super().__init__(f"the exact value of entry ({i + 1}, {j + 1}) is not finite in arb")
        self.i, self.j = i, j

    def __reduce__(self):  # raised in a forked process too: it comes back whole
        return NotFinite, (self.i, self.j)


def _tiny():
    from flint import arb

    return arb(2) ** -4096


def _ends(x, i: int = 0, j: int = 0) -> tuple[Fraction, Fraction]:
    if not x.is_finite():
        raise NotFinite(i, j)
    man, exp = x.mid().man_exp()
    rman, rexp = x.rad().man_exp()
    if (man or rman) and abs(x) < _tiny():  # e^(−10^8): ends of 10^8 bits would take minutes; these hold it
        return (Fraction(0) if x > 0 else -TINY_END), (Fraction(0) if x < 0 else TINY_END)
    mid = Fraction(int(man)) * Fraction(2) ** int(exp)
    rad = Fraction(int(rman)) * Fraction(2) ** int(rexp)
    return mid - rad, mid + rad


__all__ = ["by_two_floats", "enclose", "refine"]
