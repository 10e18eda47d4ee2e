"""`compare` at kernel sizes: float64 values with rigorous bounds first, arb for the entries they leave open.

The float64 path (:mod:`symattn.exact.float64`) encloses each exact value in [lo, hi]. An entry's
error in ULPs (three digits), its histogram bucket and its relative error are decided when every point
of [lo, hi] gives the same ones: numpy decides most entries at once, with margins that cover its own
roundings; the rest are decided on the same interval in exact rationals (``compare._decide``); an entry
still open is refined with arb balls of its row at rising precision, as the exact path does.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import numpy as np

from symattn.exact import float64, numeric
from symattn.input import limits
from symattn.input.errors import EvaluationError
from symattn.input.floats import FORMATS, FloatResult

MARGIN = 1e-9  # in units of the third digit: far above numpy's own rounding of the figures (≈ 1e-12)
WIDEN = 2.0**-48  # the relative rounding of near, far and the relative error's division
START_BITS = 128
FLOAT_DIGITS = 13  # of an exact value the float64 bound decides: shown() and shown_many() agree up to 13
_EDGES = None  # compare.EDGES as floats, made on first use


def head_of(spec) -> float64.Head | None:
    """The spec's one head as float32-valued arrays, or None where the float64 path does not apply."""
    if spec.heads != 1 or spec.projection is not None or spec.backward is not None:
        return None
    arrays = []
    for m in (spec.Q, spec.K, spec.V):
        values = [x.value for row in m for x in row]
        if not all(map(is_double, values)):  # a decimal like 0.1: not a float
            return None
        a = np.array([float(v) for v in values], dtype=np.float64).reshape(len(m), len(m[0]))
        if not float64.is_float32(a):
            return None
        arrays.append(a)
    if spec.scale == "sqrt":
        d = arrays[0].shape[1]
        scale, exact = 1.0 / np.sqrt(float(d)), None  # two roundings: within 2.01u
    elif spec.scale == "none":
        scale, exact = 1.0, Fraction(1)
    else:
        exact = spec.scale.value
        scale = float(exact)  # correctly rounded: within u
        if not 2.0**-900 < abs(scale) < 2.0**900:
            return None
    allowed = None if spec.allowed is None else np.array(spec.allowed, dtype=bool)
    return float64.Head(arrays[0], arrays[1], arrays[2], scale, 3 * float64.U, exact, allowed)


def is_double(v: Fraction) -> bool:
    """Whether a rational is a float64 value (then float() is exact): a dyadic one of at most 53 bits, in range."""
    den, num = v.denominator, abs(v.numerator)
    if den & (den - 1) or num == 0:
        return num == 0
    odd = num >> ((num & -num).bit_length() - 1)
    return odd.bit_length() <= 53 and den.bit_length() <= 1075 and num.bit_length() - den.bit_length() <= 1023


def decide(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, fmt: str):
    """Vectorised compare._decide: (decided, ulps, relative, bucket), each figure as (q, exponent) of
    q·10^exponent with q of three digits (relative: q = −1 where it has none: an exact 0)."""
    global _EDGES
    from symattn.checking.compare import EDGES

    if _EDGES is None:
        _EDGES = np.array([float(e) for e in EDGES])
    precision, emin = FORMATS[fmt]
    inside = (lo <= x) & (x <= hi)
    near = np.where(inside, 0.0, np.minimum(np.abs(x - lo), np.abs(x - hi))) * (1 - WIDEN)
    far = np.maximum(np.abs(x - lo), np.abs(x - hi)) * (1 + WIDEN)
    u_lo, u_hi = _ulp(lo, precision, emin), _ulp(hi, precision, emin)
    crosses = (lo < 0) & (hi > 0)
    u_small = np.where(crosses, 2.0 ** (emin - precision + 1), np.minimum(u_lo, u_hi))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        e_lo, e_hi = near / np.maximum(u_lo, u_hi), far / u_small
        b_lo, b_hi = np.searchsorted(_EDGES, e_lo, "left"), np.searchsorted(_EDGES, e_hi, "left")
        ok_u, q_u, k_u = _digits(e_lo, e_hi)
        small = np.where(lo > 0, lo, -hi)
        big = np.where(lo > 0, hi, -lo)
        r_lo, r_hi = near / big * (1 - WIDEN), far / small * (1 + WIDEN)
        ok_r, q_r, k_r = _digits(r_lo, r_hi)
    ok = (b_lo == b_hi) & ok_u & ok_r & ~crosses & (lo != 0) & (hi != 0) & np.isfinite(x)
    return ok, (q_u, k_u), (q_r, k_r), b_lo


def _ulp(y: np.ndarray, precision: int, emin: int) -> np.ndarray:
    _, e = np.frexp(y)  # |y| = m·2^e, m in [1/2, 1): floor(log2 |y|) = e − 1, exactly
    return np.ldexp(1.0, np.maximum(e - 1, emin) - precision + 1)


def _digits(lo: np.ndarray, hi: np.ndarray):
    """Where every number in [lo, hi] rounds half-up to the same three significant digits: q, exponent."""
    safe = np.where((lo > 0) & np.isfinite(hi), lo, 1.0)
    k = np.floor(np.log10(safe)).astype(np.int64)
    scale = 10.0 ** (2 - k).astype(np.float64)
    t_lo, t_hi = lo * scale, hi * scale
    q = np.floor(t_lo + 0.5 - MARGIN)
    ok = (
        (lo > 0)
        & np.isfinite(hi)
        & (t_lo >= 100 + MARGIN)
        & (t_hi <= 999.5 - MARGIN)
        & (q == np.floor(t_hi + 0.5 + MARGIN))
    )
    return ok, q.astype(np.int64), k - 2


def figure(q: int, exponent: int) -> Decimal:
    """q·10^exponent as the Decimal that numeric.significant_exact gives for it (its digits, that exponent)."""
    return Decimal(f"{q}E{exponent}")


def shown_many(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised :func:`shown` for up to 13 digits, where numpy's scaling (relative error < 1e-15) stays far
    from the rounding boundaries: (ok, signed q, exponent) with the value q·10^exponent."""
    same = ((lo > 0) | (hi < 0)) & np.isfinite(lo) & np.isfinite(hi)
    a, b = np.where(same, np.abs(lo), 1.0), np.where(same, np.abs(hi), 1.0)
    top = np.floor(np.log10(np.maximum(a, b))).astype(np.int64)
    ok = np.zeros(lo.shape, dtype=bool)
    q = np.zeros(lo.shape, dtype=np.int64)
    exponent = np.zeros(lo.shape, dtype=np.int64)
    active = same.copy()
    for k in range(13, 0, -1):
        scale = 10.0 ** (k - 1 - top).astype(np.float64)
        ta, tb = a * scale + 0.5, b * scale + 0.5
        fa, fb = np.floor(ta), np.floor(tb)
        clear = (  # each end far from a rounding boundary and inside the decade
            (ta - fa > 0.01)
            & (fa + 1 - ta > 0.01)
            & (tb - fb > 0.01)
            & (fb + 1 - tb > 0.01)
            & (np.minimum(ta, tb) > 10.0 ** (k - 1) + 0.51)
            & (np.maximum(ta, tb) < 10.0**k - 0.01)
        )
        fits = active & clear & (fa == fb)
        q = np.where(fits, fa.astype(np.int64), q)
        exponent = np.where(fits, top - k + 1, exponent)
        ok |= fits
        active &= clear & (fa != fb)  # unsure at k digits: left to shown()
    return ok, np.where(lo < 0, -q, q), exponent


def shown(lo: float, hi: float, digits: int) -> Decimal:
    """The exact value to as many significant digits (at most ``digits``) as every point of [lo, hi] agrees on."""
    a, b = Decimal(lo), Decimal(hi)  # exact: a float's decimal expansion is finite
    if a == b:
        return numeric.significant_exact(Fraction(lo), digits)
    width = b - a
    top = max(abs(a), abs(b))
    k = min(digits, max(1, top.adjusted() - width.adjusted()))
    while k >= 1:
        ra, rb = _round(a, k), _round(b, k)
        if ra == rb:
            return ra
        k -= 1
    return Decimal(0) if a <= 0 <= b else _round(a, 1)


def _round(x: Decimal, digits: int) -> Decimal:
    if x == 0:
        return Decimal(0)
    q = x.quantize(Decimal(1).scaleb(x.adjusted() - digits + 1), ROUND_HALF_UP)
    if len(q.as_tuple().digits) > digits:  # 9.99 → 10.0: one digit too many
        q = q.quantize(Decimal(1).scaleb(q.adjusted() - digits + 1), ROUND_HALF_UP)
    return q


def refine(head: float64.Head, quantity: str, entries: dict[int, list[int]], decide_one, digits: int):
    """Arb balls for the entries {row: [columns]} at rising precision until ``decide_one(i, j, lo, hi)``
    decides each and both ends agree on ``digits``; {(i, j): (outcome, shown)} and the digits reached."""
    out: dict[tuple[int, int], tuple] = {}
    bits = START_BITS
    for i, cols in entries.items():
        known = _rational_row(head, quantity, i)
        if known is None:
            continue
        for j in cols:
            outcome = decide_one(i, j, known[j], known[j])
            if outcome is not None:
                out[(i, j)] = (outcome, numeric.significant_exact(known[j], digits))
    pending = {i: [j for j in cols if (i, j) not in out] for i, cols in entries.items()}
    pending = {i: cols for i, cols in pending.items() if cols}
    while pending:
        rows = sorted(pending)
        for i, values in zip(rows, _arb_rows(head, quantity, rows, bits)):
            for j in pending[i]:
                lo, hi = _ends(values[j])
                outcome = decide_one(i, j, lo, hi)
                exact = numeric.significant_exact(lo, digits)
                if outcome is not None and exact == numeric.significant_exact(hi, digits):
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
    scores = head.K[keys] @ head.Q[i]
    bound = 4 * float64.gamma(head.Q.shape[1]) * float(np.max(np.abs(head.K[keys]) @ np.abs(head.Q[i])))
    if scores.max() - scores.min() > bound:
        return None  # certainly not all equal: the float scores differ by more than their error
    q = [Fraction(float(a)) for a in head.Q[i]]
    exact = [sum((Fraction(float(a)) * b for a, b in zip(head.K[j], q)), Fraction(0)) for j in keys]
    if any(e != exact[0] for e in exact):
        return None
    w = Fraction(1, len(keys))
    if quantity == "weights":
        return [w if k else Fraction(0) for k in keep]
    return [w * sum((Fraction(float(head.V[j, c])) for j in keys), Fraction(0)) for c in range(head.V.shape[1])]


def _arb_rows(head: float64.Head, quantity: str, rows: list[int], bits: int):
    from flint import arb, arb_mat, ctx

    saved = ctx.prec
    ctx.prec = bits
    try:
        KT = arb_mat(head.K.T.tolist())  # exact: each float is a dyadic rational
        V = arb_mat(head.V.tolist()) if quantity == "output" else None
        d = head.Q.shape[1]
        c = (
            1 / arb(d).sqrt()
            if head.exact_scale is None
            else arb(head.exact_scale.numerator) / head.exact_scale.denominator
        )
        scores = arb_mat(head.Q[rows].tolist()) * KT  # one product in C for every row asked
        m = scores.ncols()
        zero = arb(0)
        exps = []
        for r, i in enumerate(rows):
            keep = [True] * m if head.allowed is None else head.allowed[i].tolist()
            exps.append([(scores[r, j] * c).exp() if keep[j] else zero for j in range(m)])
        E = arb_mat(exps)
        totals = E * arb_mat([[1]] * m)
        weighted = E if V is None else E * V  # one product in C
        for r in range(len(rows)):
            total = totals[r, 0]
            yield [weighted[r, k] / total for k in range(weighted.ncols())]
    finally:
        ctx.prec = saved


def _ends(x) -> tuple[Fraction, Fraction]:
    if not x.is_finite():
        raise EvaluationError("value is not finite")
    man, exp = x.mid().man_exp()
    rman, rexp = x.rad().man_exp()
    mid = Fraction(int(man)) * Fraction(2) ** int(exp)
    rad = Fraction(int(rman)) * Fraction(2) ** int(rexp)
    return mid - rad, mid + rad


__all__ = ["decide", "figure", "head_of", "refine", "shown"]


def compare_head(head: float64.Head, result: FloatResult, quantity: str):
    """compare.compare for a head the float64 path takes (see head_of): the same Comparison."""
    from symattn.checking.compare import EDGES, EXACT_DIGITS, Comparison, Entry, ShapeError, _decide

    n, m, dv = head.Q.shape[0], head.K.shape[0], head.V.shape[1]
    rows, cols = (n, m) if quantity == "weights" else (n, dv)
    got = (len(result.rows), len(result.rows[0]))
    if got != (rows, cols):
        raise ShapeError(
            result.source, "shape", f"the result is {got[0]}×{got[1]} and the exact {quantity} is {rows}×{cols}"
        )
    x = np.array([[np.nan if v is None else float(v) for v in row] for row in result.rows], dtype=np.float64)
    exact_float = np.array([[v is not None and is_double(v) for v in row] for row in result.rows], dtype=bool)
    lo = np.empty((rows, cols))
    hi = np.empty((rows, cols))
    for b in float64.blocks(head, weights=quantity == "weights"):
        value, error = (b.weights, b.weights_error) if quantity == "weights" else (b.output, b.output_error)
        lo[b.start : b.stop], hi[b.start : b.stop] = float64.interval(value, error)
    ok, (q_u, k_u), (q_r, k_r), bucket = decide(np.where(exact_float, x, 0.0), lo, hi, result.format)
    ok &= exact_float
    decided: dict[tuple[int, int], tuple] = {}
    open_rows: dict[int, list[int]] = {}
    for i, j in zip(*np.nonzero(~ok)):
        i, j = int(i), int(j)
        v = result.rows[i][j]
        if v is None:
            continue
        outcome = _decide(v, Fraction(float(lo[i, j])), Fraction(float(hi[i, j])), result.format)
        if outcome is not None:
            decided[(i, j)] = (outcome, shown(float(lo[i, j]), float(hi[i, j]), FLOAT_DIGITS))
        else:
            open_rows.setdefault(i, []).append(j)

    def decide_one(i: int, j: int, a: Fraction, b: Fraction):
        v = result.rows[i][j]
        assert v is not None  # only finite entries are refined
        return _decide(v, a, b, result.format)

    refined, digits = refine(head, quantity, open_rows, decide_one, EXACT_DIGITS) if open_rows else ({}, 15)
    decided.update(refined)
    entries = []
    ok_list, lo_list, hi_list = ok.tolist(), lo.tolist(), hi.tolist()
    qu, ku, qr, kr, bk = q_u.tolist(), k_u.tolist(), q_r.tolist(), k_r.tolist(), bucket.tolist()
    ok_x, q_x, k_x = (a.tolist() for a in shown_many(lo, hi))
    for i in range(rows):
        for j in range(cols):
            v = result.rows[i][j]
            if ok_list[i][j]:
                exact = (
                    figure(q_x[i][j], k_x[i][j]) if ok_x[i][j] else shown(lo_list[i][j], hi_list[i][j], FLOAT_DIGITS)
                )
                entries.append(Entry(i, j, v, exact, figure(qu[i][j], ku[i][j]), figure(qr[i][j], kr[i][j]), bk[i][j]))
            elif (i, j) in decided:
                (ulps, relative, b), exact = decided[(i, j)]
                entries.append(Entry(i, j, v, exact, ulps, relative, b))
            else:  # not finite: its exact value still shown
                exact = shown(lo_list[i][j], hi_list[i][j], FLOAT_DIGITS)
                entries.append(Entry(i, j, None, exact, None, None, len(EDGES)))
    return Comparison(
        result.source, quantity, result.format, tuple(entries), result.not_finite, digits, refined=len(refined)
    )
