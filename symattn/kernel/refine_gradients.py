"""Arb balls of the gradients the float64 bounds leave open (:mod:`symattn.kernel.refine`'s, for dQ, dK, dV and
dsink): the backward pass of float64_backward in arb. A dQ entry takes its query's row; a dK or dV entry
every query's ℓ and D, then only its own key's weights; dsink every query's ℓ and D of every batch.
"""

from __future__ import annotations

from collections import OrderedDict
from fractions import Fraction

from symattn.input import limits
from symattn.input.errors import EvaluationError
from symattn.kernel import float64
from symattn.kernel.rational_rows import denominators
from symattn.kernel.refine import (
    ROWS_AT_ONCE,
    _exp_rows,
    _integers,
    _scale,
    _transposed,
    _transposed_integers,
)


def _mod_factor(head: float64.Head, i: int, j: int):
    """The modifiers' derivative at query i, key j as an arb ball (the tanh cap's 1 − tanh², a bias's 1)."""
    from flint import arb

    score = sum((Fraction(a) * Fraction(b) for a, b in zip(head.Q[i].tolist(), head.K[j].tolist())), Fraction(0))
    z, g = _scale(head) * arb(score.numerator) / score.denominator, arb(1)
    for mod in float64.extras(head)[1]:
        if hasattr(mod, "arb_derivative"):
            g *= mod.arb_derivative(z)
        z = mod.arb(z, i, j)
    return g


def gradient_rows(head, quantity: str, wanted: dict[int, list[int]], bits: int, KT, name=None, parts=None):
    """For each row of ``wanted`` (in order), {column: ball} of dQ (a query's row) or dK, dV (a key's):
    the backward pass of float64_backward in arb, dS = A ∘ (dO·Vᵀ − D), D = rowsum(dO ∘ O). dK and dV need
    every query's ℓ and D (limits.GRADIENT_REFINE_SCORES bounds the scores that takes), then the exps of
    the keys asked for only. ``parts`` (a dict): dV's entries also as (F, r), dV = F + r, F = Σ dO_ik over the
    queries i whose pivot (the largest score) is this key, exact, and r the ball of the rest,
    Σ_{other i} A_ij dO_ik − Σ_{those i} (1 − A_ij) dO_ik, 1 − A_ij = Σ_{l≠j} e^z_il / ℓ_i (a denominator
    logit's e^s in it) summed without cancellation: a saturated dV is a float sum of dO up to e^(−gap), r keeps it."""
    from flint import arb, arb_mat, ctx, fmpz_mat

    n, m = head.Q.shape[0], head.K.shape[0]
    if quantity != "dQ" and n * m > limits.GRADIENT_REFINE_SCORES:
        i, j = min(wanted), wanted[min(wanted)][0]
        named = f"the error of {quantity} entry ({i + 1}, {j + 1})" if name is None else name(i, j)
        raise EvaluationError(
            f"{named} is not decided by the float64 bound, and refining it with arb takes all {n}×{m} scores; "
            f"at most {limits.GRADIENT_REFINE_SCORES} are allowed"
        )
    saved = ctx.prec
    ctx.prec = bits
    try:
        queries = list(wanted) if quantity == "dQ" else list(range(n))
        keys = list(range(m)) if quantity == "dQ" else list(wanted)  # the keys whose column of dS counts
        VT, VT_keys = _transposed(head.V), _transposed(head.V[keys])
        ints = KT[0].transpose().tolist()
        KT_keys = (fmpz_mat([ints[j] for j in keys]).transpose(), KT[1])  # the keys' rows, the same shift
        c, zero, one = _scale(head), arb(0), arb(1)
        capped = any(hasattr(mod, "arb_derivative") for mod in float64.extras(head)[1])
        valueless = bool(denominators(head))
        columns = head.K.T.tolist() if quantity == "dQ" else None  # K's columns as Python floats
        across = head.Q if quantity == "dK" else head.dO  # dK = c·dSᵀ·Q, dV = Aᵀ·dO
        stats = None if quantity == "dQ" else _row_stats(head, bits, KT, quantity == "dK", quantity == "dV")
        sums = {j: [zero] * len(wanted[j]) for j in keys} if quantity != "dQ" else {}  # dK, dV: over the queries
        split = parts is not None and quantity == "dV"
        exact = {j: [Fraction(0)] * len(wanted[j]) for j in keys} if split else {}
        rest = {j: [zero] * len(wanted[j]) for j in keys} if split else {}
        for start in range(0, len(queries), ROWS_AT_ONCE):
            chunk = queries[start : start + ROWS_AT_ONCE]
            if stats is None:
                exps, E, totals = _exp_rows(head, chunk, KT)
                ells, Ds = _ell_and_d(head, chunk, exps, totals, VT)
            else:
                _, E, _ = _exp_rows(head, chunk, KT_keys, keys)
                ells, Ds = stats[0][start : start + len(chunk)], stats[1][start : start + len(chunk)]
            dA = None
            if quantity != "dV":  # dO·Vᵀ at the keys exactly in integers, then as balls
                grads, shift = _integers(head.dO[chunk])
                dA = arb_mat(fmpz_mat(grads) * VT_keys[0]) * arb(2) ** -(shift + VT_keys[1])
            factors = []
            for r, i in enumerate(chunk):
                single = head.allowed is not None and head.allowed[i].sum() == 1 or m == 1
                if single and not valueless:  # A = 1: dS = 0 exactly (a denominator logit: A < 1)
                    weight = [one if head.allowed is None or head.allowed[i, j] else zero for j in keys]
                    factors.append(weight if quantity == "dV" else [zero] * len(keys))
                    continue
                weight = [E[r, t] / ells[r] for t in range(len(keys))]
                if dA is None:
                    factors.append(weight)
                    continue
                P, C = Ds[r]
                dS = [w * ((dA[r, t] - P) - C) for t, w in enumerate(weight)]  # dA − P exact: no cancellation
                if capped:  # the tanh cap: dS back through 1 − tanh²(z/c) at each key
                    dS = [x * _mod_factor(head, i, j) for x, j in zip(dS, keys)]
                factors.append(dS)
            if columns is not None:  # dQ: a dot product over the keys for each entry asked for
                for r, i in enumerate(chunk):
                    yield {col: c * sum((f * k for f, k in zip(factors[r], columns[col])), zero) for col in wanted[i]}
                continue
            rows = across[chunk].tolist()  # only the entries asked for: a dot product each, not a matrix product
            if split:
                _split_sums(chunk, keys, wanted, factors, rows, stats, exact, rest)
            for t, j in enumerate(keys):
                sums[j] = [
                    s + sum((f[t] * row[col] for f, row in zip(factors, rows)), zero)
                    for s, col in zip(sums[j], wanted[j])
                ]
        for j in sums:
            if split:
                parts.update({(j, col): (f, r) for col, f, r in zip(wanted[j], exact[j], rest[j])})
            yield {col: (c if quantity == "dK" else one) * s for col, s in zip(wanted[j], sums[j])}
    finally:
        ctx.prec = saved


def logit_gradient(given, bits: int, name=None):
    """dsink = −Σ_{b,i} e^s/ℓ_bi · D_bi as an arb ball (float64_backward.LogitGradient): every query's ℓ and D."""
    from flint import arb, ctx

    total = arb(0)
    for head in given.heads:
        n, m = head.Q.shape[0], head.K.shape[0]
        if n * m > limits.GRADIENT_REFINE_SCORES:
            named = "the error of dsink" if name is None else name(0, 0)
            raise EvaluationError(
                f"{named} is not decided by the float64 bound, and refining it with arb takes all {n}×{m} scores "
                f"of each batch; at most {limits.GRADIENT_REFINE_SCORES} are allowed"
            )
        saved = ctx.prec
        ctx.prec = bits
        try:
            ells, Ds, _, _ = _row_stats(head, bits, _transposed_integers(head.K), True)
            exp = denominators(head)[0].arb_exp
            total -= sum((exp(i) / ell * (D[0] + D[1]) for i, (ell, D) in enumerate(zip(ells, Ds))), arb(0))
        finally:
            ctx.prec = saved
    return total


# heads' (ℓ, D) at a precision, the latest last: the second pass over a comparison's heads (its row-relative
# figures' refinement) reuses them; the first pass over 64 heads of 256 made them again, head by head (half of
# a dK's 20 s). At most STATS_ROWS rows of balls (a few hundred bytes a row), until the comparison ends (forget).
_STATS: OrderedDict = OrderedDict()
STATS_ROWS = 2**16


def forget() -> None:
    """The kept row stats dropped, and the heads they keep alive (heads.compare_head, as it returns)."""
    _STATS.clear()


def _row_stats(head, bits: int, KT, with_d: bool, with_rest: bool = False):
    """Every query's ℓ = Σ_j e^z and D_i = Σ_k dO_ik O_ik (None without ``with_d``), as arb balls, and with
    ``with_rest`` its pivot p (:func:`_pivot`) and ℓ − e^z_ip summed over the other keys (a denominator logit's
    e^s too)."""
    from flint import arb

    key = (id(head), bits, with_d, with_rest)
    if key in _STATS:
        _STATS.move_to_end(key)
    else:
        ells: list = []
        Ds: list = []
        pivots: list = []
        rests: list = []
        n = head.Q.shape[0]
        VT = _transposed(head.V) if with_d else None
        for start in range(0, n, ROWS_AT_ONCE):
            chunk = list(range(start, min(start + ROWS_AT_ONCE, n)))
            exps, _, totals = _exp_rows(head, chunk, KT)
            ell, D = _ell_and_d(head, chunk, exps, totals, VT)
            ells += ell
            Ds += D
            for r, i in enumerate(chunk) if with_rest else ():
                p = _pivot(head, i)
                extra = sum((mod.arb_exp(i) for mod in denominators(head)), arb(0))
                pivots.append(p)
                rests.append(sum((x for t, x in enumerate(exps[r]) if t != p), extra))
        _STATS[key] = (head, (ells, Ds, pivots, rests))  # the head kept: its id stays its own
        while sum(len(v[1][0]) for v in _STATS.values()) > STATS_ROWS and len(_STATS) > 1:
            _STATS.popitem(last=False)
    return _STATS[key][1]


def _split_sums(chunk, keys, wanted, factors, rows, stats, exact: dict, rest: dict) -> None:
    """dV's (F, r) of gradient_rows, the chunk's queries added: a query pivoted at key j adds dO exactly to F
    and −(ℓ − e^z_ij)/ℓ · dO to r, any other its A_ij·dO to r."""
    for r, i in enumerate(chunk):
        p, ell, other = stats[2][i], stats[0][i], stats[3][i]  # every query: indexed by i
        for t, j in enumerate(keys):
            if j == p:
                deficit = -other / ell
                exact[j] = [f + Fraction(rows[r][col]) for f, col in zip(exact[j], wanted[j])]
                rest[j] = [s + deficit * rows[r][col] for s, col in zip(rest[j], wanted[j])]
            else:
                rest[j] = [s + factors[r][t] * rows[r][col] for s, col in zip(rest[j], wanted[j])]


def _ell_and_d(head, chunk: list[int], exps, totals, VT) -> tuple[list, list]:
    """ℓ of the chunk's rows, and with VT (Vᵀ as integers · 2^-shift; None: no D) their D = Σ_j A_ij dA_ij as a
    pair (P, C), D = P + C: P = dA_ip exactly at a pivot key p (the largest raw score), and, since
    Σ_j A_ij + a = 1 (a the denominator logits' share e^s/ℓ, 0 without one),

        C = Σ_j A_ij (dA_ij − dA_ip) − a·dA_ip,

    the differences dA_ij − dA_ip exact in integers. Then dA_ij − D = (dA_ij − P) − C has no cancellation
    where one key takes nearly all the weight: there D − dA_ip is e^(−gap)-small, and the plain D would
    lose it at any precision short of gap·log2(e) bits (a saturated row needed thousands)."""
    from flint import arb, arb_mat, fmpz, fmpz_mat

    ells = [totals[r, 0] for r in range(len(chunk))]
    if VT is None:
        return ells, [None] * len(chunk)
    grads, shift = _integers(head.dO[chunk])
    unit = arb(2) ** -(shift + VT[1])
    logits = denominators(head)
    Ds = []
    for r, i in enumerate(chunk):  # a row's dA = dO·Vᵀ exact in integers; its e times dA − dA_p: one dot product
        g = fmpz_mat([grads[r]]) * VT[0]
        p = _pivot(head, i)
        g_p = g[0, p] if p is not None else fmpz(0)
        diffs = fmpz_mat([[g[0, t] - g_p for t in range(g.ncols())]])
        P = arb(g_p) * unit
        C = (arb_mat([exps[r]]) * diffs.transpose())[0, 0] * unit / ells[r]
        if logits:
            C -= P * sum((mod.arb_exp(i) for mod in logits), arb(0)) / ells[r]
        Ds.append((P, C))
    return ells, Ds


def _pivot(head, i: int) -> int | None:
    """The allowed key of query i's largest raw score (smallest for a negative scale): any key keeps D = P + C
    exact, this one makes C small on a saturated row; None where the row attends no key."""
    import numpy as np

    z = (head.K @ head.Q[i]) * (1.0 if head.scale >= 0 else -1.0)
    if head.allowed is not None:
        if not head.allowed[i].any():
            return None
        z = np.where(head.allowed[i], z, -np.inf)
    return int(np.argmax(z))


def by_error_balls(kept: dict, entries: dict[int, list[int]], bits: int, errors, digits: int, name, parts=None) -> dict:
    """{(i, j): (outcome, shown)} of the gradient entries that deviation.decide decides from the ball of their
    error e − y = ball − y (one exact subtraction in arb): an exact value below the format's normal range, or
    below refine's TINY_END (a saturated row's dQ is e^(−gap)-small, past what its ends can hold), keeps the
    ball's relative precision, so its ULP (the least subnormal's) and its digits need no more bits."""
    from flint import ctx

    from symattn.kernel import deviation
    from symattn.kernel.deviation import _arb

    out: dict[tuple[int, int], tuple] = {}
    saved = ctx.prec
    ctx.prec = bits  # the balls' own precision: the figures' products and quotients keep it
    try:
        for i, cols in entries.items():
            for j in cols:
                ball = kept[(i, j)]
                if parts and (i, j) in parts:  # dV: F − y exact, then the rest, no cancellation
                    f, r = parts[(i, j)]
                    for near in (f, None) if f else (None,):  # read from F itself, then from the float nearest
                        if (i, j) not in out:
                            error = lambda y, f=f, r=r: _arb(f - y) + r  # noqa: E731
                            deviation.decide_entry(errors, i, j, ball, error, digits, name, out, near)
                    continue
                deviation.decide_entry(errors, i, j, ball, lambda y, b=ball: b - _arb(y), digits, name, out)
    finally:
        ctx.prec = saved
    return out


__all__ = ["by_error_balls", "forget", "gradient_rows", "logit_gradient"]
