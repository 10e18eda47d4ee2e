"""A tighter bound for chosen outputs: the float64 path's sums redone with error-free transformations.

The first bound (:mod:`symattn.kernel.float64`) is dominated by its sums, γ of about 2√m of their
magnitudes. For the outputs that bound leaves undecided, this recomputes the row sum ℓ = Σ e and the
weighted sums N = Σ e·v by Ogita, Rump and Oishi's Sum2 (TwoSum on every term, the errors summed
apart): |Sum2 − Σ p| ≤ u·|Sum2| + γ_{n−1}² Σ|p| (their Proposition 4.5). Each product e·v is split
exactly into two floats first: e = e_hi + e_lo by Veltkamp's splitting (26 bits each) and v has at most
24, so e_hi·v and e_lo·v are exact. What is left is the exps' own bound (float64.exps), about 4u plus
the scores' rounding, so the bound shrinks by an order of magnitude and fewer entries need arb.
Products of a tiny e (below 2^-800) may underflow: float64's absolute UNDER per such e, as there.
An e below the floor is 0 within its eE from the stage: TINY, or inf where its T's bound reaches past ln TINY
(float64.exps), which makes ℓ's bound, so every bound of its row, inf; no floor of its own here.

:func:`product_outputs` gives every output of a stage's rows at once, as tight: the sums by
:mod:`.exact_product` (error-free but for u of each result and γ_m·2^(s−53) of the magnitudes, s =
float64.exact_s(m)) and the exps' part key by key, as stage_outputs's ``per_key``.
"""

from __future__ import annotations

import numpy as np

from symattn.kernel import exact_product
from symattn.kernel.cores import map_forked
from symattn.kernel.float64 import (
    SAFETY,
    TINY,
    UNDER,
    Head,
    Split,
    U,
    blocks,
    exps,
    extra_term,
    gamma,
    interval,
    joined,
    lost,
    tiny,
    tiny_terms,
)

_SPLITTER = 2.0**27 + 1  # Veltkamp: hi keeps 26 bits
PAIRS = 64  # pairs summed at once: a few PAIRS × 2m arrays of their terms (8 MB each at 8192 keys)
STEP = 256  # query rows of one exp stage (float64.exps)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)  # Knuth: s + err = a + b exactly


def _sum2(terms: np.ndarray) -> np.ndarray:
    """Ogita, Rump and Oishi's Sum2 of each row of ``terms`` (a first column of zeros, then the terms), left to
    right: float for float what the loop ``s, q = _two_sum(s, t); c += q`` (s = c = 0 first) and then s + c
    give, in a few numpy calls. The running sums s_j are np.add.accumulate from 0 (that recursion,
    s_j = fl(s_{j−1} + t_j), where a reduction may sum pairwise), each TwoSum's error comes from
    (s_{j−1}, t_j, s_j) by Knuth's operations, and c is their running sum in the same order."""
    run = np.add.accumulate(terms, axis=1)
    before, after = run[:, :-1], run[:, 1:]
    bb = after - before
    q = np.subtract(after, bb)
    np.subtract(before, q, out=q)
    t = terms[:, 1:]
    np.subtract(t, bb, out=bb)
    np.add(q, bb, out=bb)  # each TwoSum's error; then c, from 0 in the first column again
    terms[:, 1:] = bb
    return run[:, -1] + np.add.accumulate(terms, axis=1)[:, -1]


def _accumulated(terms: np.ndarray) -> np.ndarray:
    """Each row's sum, from 0 left to right, as ``total += t`` rounds it (a first column of zeros)."""
    return np.add.accumulate(terms, axis=1)[:, -1]


def _with_zero(terms: np.ndarray) -> np.ndarray:
    out = np.empty((terms.shape[0], terms.shape[1] + 1))
    out[:, 0] = 0.0
    out[:, 1:] = terms
    return out


def _products(H: np.ndarray, L: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Each row's terms in Sum2's order after a 0, key by key: hi·v, then lo·v (each exact)."""
    terms = np.empty((H.shape[0], 2 * H.shape[1] + 1))
    terms[:, 0] = 0.0
    np.multiply(H, V, out=terms[:, 1::2])
    np.multiply(L, V, out=terms[:, 2::2])
    return terms


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLITTER * a
    hi = c - (c - a)
    return hi, a - hi


def outputs(
    head: Head, pairs: list[tuple[int, int]], split: Split | None = None, per_key: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Values and error bounds of the outputs O[i, k] for the (query row, column) pairs asked for; ``split``:
    K's, where the caller has it already (made again for each call, it took 128 MB at 8192 × 1024);
    ``per_key``: a flag per pair, stage_outputs's (the others' bounds are the same with it or without)."""
    split = Split.of(head.K) if split is None else split
    rows = sorted({i for i, _ in pairs})
    at = {i: n for n, i in enumerate(rows)}
    value, error = np.empty(len(pairs)), np.empty(len(pairs))
    starts = range(0, len(rows), STEP)
    # a stage in each piece, made where it is summed: numpy alone holds the GIL, so both cores
    for where, O, eO in map_forked(_sums, (head, pairs, at, rows, split, per_key), list(starts)):
        value[where], error[where] = O, eO
    return value, error


def _stage(head: Head, rows: np.ndarray, split: Split) -> tuple:
    """float64.exps of the rows, and the term of a logit in the denominator alone (None without one)."""
    stage = exps(head, rows, split)
    return (*stage, extra_term(head, rows, stage[4]))


def _sums(data: tuple, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The error-free sums of the rows of one exp stage (rows[start : start + STEP]): where their pairs are
    in ``pairs``, their values and error bounds."""
    head, pairs, at, rows, split, per_key = data
    with np.errstate(invalid="ignore", over="ignore"):  # the same rows as a stage: the same exps (BLAS's M)
        stage = _stage(head, np.array(rows[start : start + STEP]), split)
    mine = [(n, i, k) for n, (i, k) in enumerate(pairs) if start <= at[i] < start + STEP]
    where = np.array([n for n, _, _ in mine])
    r = np.array([at[i] - start for _, i, _ in mine])
    cols = np.array([k for _, _, k in mine])
    return (where, *stage_outputs(head, stage, r, cols, None if per_key is None else per_key[where]))


def stage_outputs(
    head: Head, stage: tuple, r: np.ndarray, cols: np.ndarray, per_key: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Values and error bounds of the outputs at (row r of the stage, column) by the error-free sums of the
    stage's exps (float64.exps and extra_term of its rows, as a block keeps them with blocks(stages=True)).

    Where ``per_key`` (a flag per pair) is set, the exps' part of the bound is also formed key by key, the
    smaller kept: Σ_j eE_j·|v_j| (each exp's own bound, TINY where it underflowed) rather than
    max_j eps_j · Σ_j E_j|v_j| (the row's largest eps times B). Both bound |Σ_j E_j·v_j − Σ_j e^(t_j)·v_j|, the
    first term by term (|E_j − e^(t_j)| ≤ eE_j); its float sum, m non-negative products rounded once each, is
    below the exact one by at most γ_{m+1} of it, so times 1 + 2γ_{m+1} it is above. It is tighter (about 0.8
    of the other at 4096 keys, where it decides half the outputs the other leaves open): the keys far below
    the row's maximum, whose eps is largest, weigh least.
    """
    m = head.K.shape[0]
    E, eE, eps, under, _, extra = stage
    ell = _sum2(_with_zero(E))  # Sum2 of each row, key by key
    e_ell = SAFETY * (U * ell + gamma(m) ** 2 * ell * 2 + np.sum(eE, axis=1))
    ell, e_ell = joined(ell, e_ell, extra)
    eps_row = np.max(eps, axis=1)
    tiny_row = np.where(np.any(under, axis=1), TINY, 0.0)
    hi, lo = _split(E)
    N, B, V1, W = np.empty(len(r)), np.empty(len(r)), np.empty(len(r)), np.empty(len(r))
    # PAIRS pairs at a time, each pair's terms a row, key by key: a few PAIRS × 2m arrays, never pairs × m
    # (a stage of 256 rows may hold 30,000 pairs: 2 GB an array at 8192 keys)
    for part in range(0, len(r), PAIRS):
        some = slice(part, part + PAIRS)
        H, L = hi[r[some]], lo[r[some]]
        Vc = head.V[:, cols[some]].T
        N[some] = _sum2(_products(H, L, Vc))  # the 2m exact products of each pair
        b = _accumulated(_with_zero((H + L) * np.abs(Vc)))  # Σ e|v| key by key
        B[some] = b * (1 + 2 * gamma(m))  # rounded up: γ_m covers the sum's roundings, in any order
        if per_key is not None:
            with np.errstate(invalid="ignore"):  # inf · 0: no bound
                W[some] = (eE[r[some]] * np.abs(Vc)).sum(axis=1) * (1 + 2 * gamma(m + 1))
    for part in range(0, len(r), 512):  # Σ |v|, summed as before (a column of 512 pairs' at a time)
        V1[part : part + 512] = np.abs(head.V[:, cols[part : part + 512]]).sum(0)
    under = UNDER * tiny_terms(np.sum(tiny(E), axis=1))[r]  # products hi·v, lo·v below 2^-1022 (float64.tiny)
    with np.errstate(invalid="ignore"):  # inf · 0 (an exp without a bound, B = 0): NaN, no bound in quotient
        eN = SAFETY * (U * np.abs(N) + gamma(2 * m) ** 2 * B * 2 + eps_row[r] * B + tiny_row[r] * V1 + under)
    if per_key is not None:  # fmin: a NaN is no bound
        eN = np.where(per_key, np.fmin(eN, SAFETY * (U * np.abs(N) + gamma(2 * m) ** 2 * B * 2 + W + under)), eN)
    return quotient(N, eN, ell[r], e_ell[r], lost(tiny_row[r]))


def quotient(
    N: np.ndarray, eN: np.ndarray, L: np.ndarray, eL: np.ndarray, floor: np.ndarray | float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """O = N / L and its bound, N within eN and L > 0 within eL of theirs: one rounding, u|O|; the errors
    through the division; UNDER where O or N is tiny; no bound (inf) where eL leaves no room below L.
    ``floor``: added to the bound (float64.lost: eN's part that may have rounded to 0 on the way)."""
    O = N / L
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(L > eL, L * (L - eL), 0.0)
        eO = SAFETY * (U * np.abs(O) + eN / L + (np.abs(N) + eN) * eL / room + UNDER * tiny(O, N) + floor)
    eO[~np.isfinite(eO)] = np.inf
    return O, eO


def met(head: Head, rows: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[lo, hi] of the outputs of the query rows [start, stop) (start a multiple of float64.BLOCK): float64's
    ends (its blocks, those of a whole pass) met with :func:`product_outputs`' ends of the same block's
    exps, and a flag per row where the product held (elsewhere float64's ends alone). Both enclose each
    exact value, so their meet does; inside float64's ends, it shows no digit fewer than they do."""
    start, stop = rows
    lo, hi = np.empty((stop - start, head.V.shape[1])), np.empty((stop - start, head.V.shape[1]))
    held = np.zeros(stop - start, dtype=bool)
    absV, columns = np.abs(head.V), values(head)
    for b in blocks(head, weights=False, rows=rows, stages=True):
        at = slice(b.start - start, b.stop - start)
        assert b.stage is not None  # kept: stages=True
        lo[at], hi[at] = interval(b.output, b.output_error)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # as float64.blocks: inf, no bound
            made = product_outputs(head, b.stage, absV, columns)
        if made is not None:
            a, c = interval(*made)
            lo[at], hi[at], held[at] = np.fmax(lo[at], a), np.fmin(hi[at], c), True  # fmax: a NaN end is none
    return lo, hi, held


def values(head: Head) -> exact_product.Columns:
    """V with a column of ones (N = E·V and ℓ = E·1 in one product), split once for every block."""
    return exact_product.Columns(np.concatenate([head.V, np.ones((head.K.shape[0], 1))], axis=1))


def product_outputs(
    head: Head, stage: tuple, absV: np.ndarray, columns: exact_product.Columns | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Every output of the stage's rows (float64.exps and extra_term's, as a block keeps them) and its bound:
    N = E·V and ℓ = E·1 by :func:`.exact_product.product` (V with a column of ones), each within its bound e_P
    of the sum of the stage's E; the exps' own errors key by key, Σ_j eE_j·|v_j| (TINY where one underflowed),
    a BLAS product of non-negative terms whose value is above the float by at most γ_m of it and m·2^-1075
    for products below 2^-1022, so times 1 + 2γ_m plus m·2^-1074 it is above; then ℓ's with the denominator
    logit's term and the quotient as stage_outputs carries them. ``absV``: |V|. None where the product's
    exact part would underflow (a row whose exps are all far below 1). ``columns``: :func:`values` (head)."""
    m = head.K.shape[0]
    E, eE, _, _, _, extra = stage
    columns = values(head) if columns is None else columns
    made = exact_product.product(E, columns.B, columns, nonnegative=True)  # exps: E ≥ 0
    if made is None:
        return None
    P, eP = made
    with np.errstate(invalid="ignore"):  # inf · 0 (an exp without a bound, a zero v): no bound
        W = (eE @ absV) * (1 + 2 * gamma(m)) + m * exact_product.LEAST
    W[np.isnan(W)] = np.inf
    N, ell = P[:, :-1], P[:, -1]
    e_ell = SAFETY * (eP[:, -1] + np.sum(eE, axis=1))
    ell, e_ell = joined(ell, e_ell, extra)
    return quotient(N, SAFETY * (eP[:, :-1] + W), ell[:, None], e_ell[:, None])


__all__ = ["met", "outputs", "product_outputs", "quotient", "stage_outputs"]
