"""The exact values a float64-path certificate's rules know (docs/kernel.md, *Certificates*): an output of a row
of equal scores or of a V column of one value over the allowed keys, an LSE of one key of score 0, a dQ, dK
or dV entry that the backward pass makes 0 term by term. Its maker and its verifier (float_tensors.decide_beyond)
apply them before arb; the standalone verifier applies the same rules in its own code.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from symattn.kernel import float64
from symattn.kernel.float64 import SAFETY, gamma
from symattn.kernel.rational_rows import Exact


# ``tensors``: a float_tensors.Tensors (which imports this module)
def differing_scores(tensors: Any, entries: list[tuple[int, int]], memo: dict) -> None:
    """Marks in ``memo`` the output rows whose allowed scores certainly differ, as _one_value tells them apart,
    with one matrix product per head and block of rows (a product per row took a minute at 4096 × 4096)."""
    n = tensors.heads[0].Q.shape[0]
    by_head: dict[int, list[int]] = {}
    for r in sorted({r for r, _ in entries}):
        by_head.setdefault(r // n, []).append(r % n)
    for hh, rows in by_head.items():
        head = tensors.heads[hh]
        absK = np.abs(head.K).T
        for start in range(0, len(rows), float64.BLOCK):
            block = rows[start : start + float64.BLOCK]
            q = head.Q[block]
            dots = q @ head.K.T
            # each dot within error of its exact value, the largest error of the row's keys or more
            error = SAFETY * gamma(q.shape[1]) * np.max(np.abs(q) @ absK, axis=1)
            keep = np.ones(dots.shape, dtype=bool) if head.allowed is None else head.allowed[block]
            spread = np.where(keep, dots, -np.inf).max(axis=1) - np.where(keep, dots, np.inf).min(axis=1)
            for i, differ in zip(block, (spread > 3 * error).tolist()):
                if differ:
                    memo[("scores", hh, i)] = False


def exact_value(tensors: Any, name: str, r: int, c: int, memo: dict | None = None) -> Fraction | None:
    """The exact value where docs/kernel.md's rules for a certificate know it (its verifiers apply the same):
    an output of a row of equal scores or of a V column of one value over the allowed keys; an LSE of one key
    of score 0; a dQ, dK or dV entry that the backward pass makes 0 term by term (with denominator logits, only
    a dK or dV entry whose every term has a zero Q or dO factor; with a distance bias, no rule of equal scores
    or of the LSE; with a tanh cap, no dQ rule of a K column of one value). Else None. ``memo`` keeps what a row's
    entries share (whether its scores, or its dP, are one value) for the next entry."""
    n, m = tensors.heads[0].Q.shape[0], tensors.heads[0].K.shape[0]
    memo = {} if memo is None else memo
    sunk = tensors.logits is not None  # weights that add up to less than 1: only the term-by-term zeros hold
    if name in ("dk", "dv"):
        first = tensors.kv_heads_first()[r // m]
        for hh in range(first, first + tensors.group):
            head = tensors.heads[hh]
            attends = np.arange(n) if head.allowed is None else np.nonzero(head.allowed[:, r % m])[0]
            across = head.dO if name == "dv" else head.Q
            for i in attends[across[attends, c] != 0].tolist():  # a zero there adds nothing
                if name == "dv" or sunk or not _still(head, hh, i, memo):
                    return None
        return Fraction(0)
    if sunk:
        return None
    biased = tensors.slopes is not None  # z = c·S − m·|i − j|: equal scores need not be equal z
    hh, i = (r, c) if name in ("lse", "lse2") else (r // n, r % n)
    head = tensors.heads[hh]
    keys = _keys(head, i)
    if name == "output":
        column = head.V[keys, c]
        equal = not biased and _memo(
            memo, ("scores", hh, i), lambda: _one_value(_exact(memo, hh, head), head.Q[i], "K", keys)
        )
        if (column == column[0]).all() or equal:  # the column's mean, every column's at once for these keys
            return _exact(memo, hh, head).output(keys)[c]
        return None
    if name in ("lse", "lse2"):
        if biased:
            return None
        one = head.K[keys]
        return Fraction(0) if len(one) == 1 and not _exact(memo, hh, head).scores(i, keys)[0].any() else None
    column = head.K[keys, c]
    # Σ_j dS_ij·K_c = K_c·Σ_j dS_ij = 0; with a cap dQ sums dS_ij·(1 − tanh²(z_ij/c))·K_c, which need not be 0
    if (tensors.tanh_cap is None and (column == column[0]).all()) or _still(head, hh, i, memo):
        return Fraction(0)
    return None


def _keys(head: float64.Head, i: int) -> np.ndarray:
    """The keys query i attends, as indices."""
    return np.arange(head.K.shape[0]) if head.allowed is None else np.nonzero(head.allowed[i])[0]


def _memo(memo: dict, key: tuple, find) -> bool:
    if key not in memo:
        memo[key] = find()
    return memo[key]


def _still(head, hh: int, i: int, memo: dict) -> bool:
    """dS_i = 0: dP_ij = dO_i · V_j is one value over the keys query i attends (exactly)."""
    return _memo(memo, ("dP", hh, i), lambda: _one_value(_exact(memo, hh, head), head.dO[i], "V", _keys(head, i)))


def _one_value(exact: Exact, x: np.ndarray, name: str, keys: np.ndarray) -> bool:
    """x · row is one value for every row of K or V (``name``) the keys pick, exactly. Most rows are told apart
    in float64 first: each float dot is within e of its exact value, so two floats more than 3·max e apart
    (their difference rounds once) are two values; only the rest are summed exactly, in integers (Fractions
    took 0.37 s a row of 512 keys of 64, 106 s a head of such rows)."""
    rows = getattr(exact.head, name)[keys]
    if len(rows) <= 1:
        return True
    dots = rows @ x
    error = SAFETY * gamma(len(x)) * float((np.abs(rows) @ np.abs(x)).max())
    if float(dots.max() - dots.min()) > 3 * error:
        return False
    values = exact.dots(x, name, keys)[0].tolist()
    return all(v == values[0] for v in values)


def _exact(memo: dict, hh: int, head: float64.Head) -> Exact:
    """The head's rational_rows.Exact, made once for the entries of a call (its V's sums kept per set of keys)."""
    if ("exact", hh) not in memo:
        memo[("exact", hh)] = Exact(head)
    return memo[("exact", hh)]


__all__ = ["differing_scores", "exact_value"]
