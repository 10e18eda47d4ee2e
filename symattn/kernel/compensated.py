"""A tighter bound for chosen outputs: the float64 path's sums redone with error-free transformations.

The first bound (:mod:`symattn.kernel.float64`) is dominated by its sums, γ of about 2√m of their
magnitudes. For the outputs that bound leaves undecided, this recomputes the row sum ℓ = Σ e and the
weighted sums N = Σ e·v by Ogita, Rump and Oishi's Sum2 (TwoSum on every term, the errors summed
apart): |Sum2 − Σ p| ≤ u·|Sum2| + γ_{n−1}² Σ|p| (their Proposition 4.5). Each product e·v is split
exactly into two floats first: e = e_hi + e_lo by Veltkamp's splitting (26 bits each) and v has at most
24, so e_hi·v and e_lo·v are exact. What is left is the exps' own bound (float64.exps), about 4u plus
the scores' rounding, so the bound shrinks by an order of magnitude and fewer entries need arb.
"""

from __future__ import annotations

import numpy as np

from symattn.kernel.cores import map_forked
from symattn.kernel.float64 import SAFETY, TINY, Head, Split, U, exps, extra_term, gamma, joined

_SPLITTER = 2.0**27 + 1  # Veltkamp: hi keeps 26 bits
PAIRS = 512  # pairs summed at once: a few m × PAIRS arrays of their terms (32 MB each at 8192 keys)
STEP = 256  # query rows of one exp stage (float64.exps)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)  # Knuth: s + err = a + b exactly


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLITTER * a
    hi = c - (c - a)
    return hi, a - hi


def outputs(head: Head, pairs: list[tuple[int, int]], split: Split | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Values and error bounds of the outputs O[i, k] for the (query row, column) pairs asked for; ``split``:
    K's, where the caller has it already (made again for each call, it took 128 MB at 8192 × 1024)."""
    split = Split.of(head.K) if split is None else split
    rows = sorted({i for i, _ in pairs})
    at = {i: n for n, i in enumerate(rows)}
    value, error = np.empty(len(pairs)), np.empty(len(pairs))
    starts = range(0, len(rows), STEP)
    with np.errstate(invalid="ignore", over="ignore"):  # here: BLAS's threads in one process only
        stages = [_stage(head, np.array(rows[start : start + STEP]), split) for start in starts]
    for where, O, eO in map_forked(_sums, (head, pairs, at, stages), list(starts)):  # numpy alone: both cores
        value[where], error[where] = O, eO
    return value, error


def _stage(head: Head, rows: np.ndarray, split: Split) -> tuple:
    """float64.exps of the rows, and the term of a logit in the denominator alone (None without one)."""
    stage = exps(head, rows, split)
    return (*stage, extra_term(head, rows, stage[4]))


def _sums(data: tuple, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The error-free sums of the rows of one exp stage (rows[start : start + STEP]): where their pairs are
    in ``pairs``, their values and error bounds."""
    head, pairs, at, stages = data
    m, step = head.K.shape[0], STEP
    E, eE, eps, under, _, extra = stages[start // STEP]
    chunk = range(start, start + E.shape[0])
    s, c = np.zeros(len(chunk)), np.zeros(len(chunk))
    for e in np.ascontiguousarray(E.T):  # Sum2 of each row, key by key (a row of E.T: a key's exps)
        s, q = _two_sum(s, e)
        c += q
    ell = s + c
    e_ell = SAFETY * (U * ell + gamma(m) ** 2 * ell * 2 + np.sum(eE, axis=1))
    ell, e_ell = joined(ell, e_ell, extra)
    eps_row = np.max(eps, axis=1)
    tiny_row = np.where(np.any(under, axis=1), TINY, 0.0)
    mine = [(n, i, k) for n, (i, k) in enumerate(pairs) if start <= at[i] < start + step]
    where = np.array([n for n, _, _ in mine])
    r = np.array([at[i] - start for _, i, _ in mine])
    cols = np.array([k for _, _, k in mine])
    hi, lo = _split(E)
    N, B, V1 = np.empty(len(mine)), np.empty(len(mine)), np.empty(len(mine))
    # PAIRS pairs at a time, each pair's terms contiguous, key by key: a few m × PAIRS arrays, never m × pairs
    # (a stage of 256 rows may hold 30,000 pairs: 2 GB an array at 8192 keys)
    for part in range(0, len(mine), PAIRS):
        some = slice(part, part + PAIRS)
        H, L = np.ascontiguousarray(hi[r[some]].T), np.ascontiguousarray(lo[r[some]].T)
        Vc = np.ascontiguousarray(head.V[:, cols[some]])
        s, c, b = np.zeros(H.shape[1]), np.zeros(H.shape[1]), np.zeros(H.shape[1])
        for j in range(m):  # Sum2 of the 2m exact products of each pair; Σ e|v| key by key beside it
            s, q = _two_sum(s, H[j] * Vc[j])
            c += q
            s, q = _two_sum(s, L[j] * Vc[j])
            c += q
            b += (H[j] + L[j]) * np.abs(Vc[j])
        N[some] = s + c
        B[some] = b * (1 + 2 * gamma(m))  # rounded up: γ_m covers the sum's roundings, in any order
        V1[some] = np.abs(Vc).sum(0)  # Σ |v|
    eN = SAFETY * (U * np.abs(N) + gamma(2 * m) ** 2 * B * 2 + eps_row[r] * B + tiny_row[r] * V1)
    L, eL = ell[r], e_ell[r]
    O = N / L
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(L > eL, L * (L - eL), 0.0)
        eO = SAFETY * (U * np.abs(O) + eN / L + (np.abs(N) + eN) * eL / room)
    eO[~np.isfinite(eO)] = np.inf
    return where, O, eO


__all__ = ["outputs"]
