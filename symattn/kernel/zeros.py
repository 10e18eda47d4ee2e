"""Which exact values are 0, or rational, proved from the structure of the inputs (issue 28).

An enclosure never shrinks to a point, so an exact 0 (or an exact rational on a float or a rounding tie) is
never decided by narrowing it: it is proved here.
By Lindemann–Weierstrass, e^{α_1}, …, e^{α_n} for distinct algebraic α are linearly independent over the
algebraic numbers, so Σ_k c_k e^{α_k} with rational c_k is 0 exactly when the c_k of each distinct α sum
to 0. The inputs are exact rationals (floats, or a spec's decimals), so each score s_j = q·k_j is rational
and z_j = c·s_j, with c = 1/√d or a rational scale, algebraic; distinct sums of scores give distinct
exponents. With L = Σ_j e^{z_j} over the keys a query attends and dP_j = dO_i·V_j:

- a weight e^{z_j}/L is 0 exactly where the key is masked;
- O_ic = Σ_j e^{z_j} V_jc / L is 0 iff Σ V_jc over each group of equal scores is 0, and rational iff the
  mean of V_jc over each group is the same (Σ_g e^{z_g}(S_g − x·n_g) = 0 for a rational x: each group's
  sum S_g is x times its count n_g), and then it is that mean;
- the log-sum-exp log L is 0 iff L = 1 = e^0: one key, of score 0;
- dQ_ic · L² / c = Σ_{j,k} e^{z_j + z_k} K_jc (dP_j − dP_k) is 0 iff for each distinct value σ of
  s_j + s_k the pairs' K_jc (dP_j − dP_k) sum to 0 (with groups of equal scores a, b of n_a keys:
  Σ_{j∈a, k∈b} K_jc (dP_j − dP_k) = n_b Σ_a K_jc dP_j − Σ_a K_jc · Σ_b dP_k);
- dK_jc and dV_jc sum over queries whose L differ: the share of each group of queries with the same Q
  row and mask (the same L) is proved 0 the same way (dV: Σ dO_ic; dK: Q_gc Σ_{k∈a} dO_G·(V_j − V_k) for
  each group a of equal scores), which proves the sum 0; a sum that cancels across such groups is not
  proved here, and stays undecided.

Each proof is exact rational arithmetic over at most limits.ZERO_TERMS terms, and is run only for an
entry whose enclosure still holds 0 after refinement began, so it costs nothing elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from symattn.input import limits

Rows = Sequence[Sequence[Fraction]]
QUANTITIES = ("output", "weights", "lse", "lse2", "dQ", "dK", "dV")  # those the rules above cover


@dataclass
class Inputs:
    """One head's exact inputs: rows of Q, K, V (and dO for the gradients), each a list of Fractions."""

    Q: Rows
    K: Rows
    V: Rows
    attends: Callable[[int, int], bool]  # whether query i sees key j
    dO: Rows | None = None
    _scores: dict[int, list[Fraction]] = field(default_factory=dict)
    _dP: dict[tuple[int, int], Fraction] = field(default_factory=dict)

    def keys(self, i: int) -> list[int]:
        return [j for j in range(len(self.K)) if self.attends(i, j)]

    def scores(self, i: int) -> list[Fraction]:
        """Query i's score with every key, exactly."""
        if i not in self._scores:
            q = self.Q[i]
            self._scores[i] = [sum((a * b for a, b in zip(q, k)), Fraction(0)) for k in self.K]
        return self._scores[i]

    def dP(self, i: int, j: int) -> Fraction:
        """dO_i·V_j exactly, made once: a dQ row's proofs (one per column) read every key's."""
        assert self.dO is not None  # the gradients' inputs have dO
        if (i, j) not in self._dP:
            self._dP[(i, j)] = sum((a * b for a, b in zip(self.dO[i], self.V[j])), Fraction(0))
        return self._dP[(i, j)]


def is_zero(inputs: Inputs, quantity: str, i: int, j: int) -> bool:
    """Whether entry (i, j) of ``quantity`` (output, weights, lse, lse2, dQ, dK, dV: a query's row, or a key's
    for dK and dV) is exactly 0, as the module says; False where it is not, or where the proof would take
    more than limits.ZERO_TERMS terms."""
    if quantity == "weights":
        return not inputs.attends(i, j)
    if quantity in ("lse", "lse2"):
        keys = inputs.keys(i)
        return len(keys) == 1 and _work(len(inputs.K) * len(inputs.Q[i])) and inputs.scores(i)[keys[0]] == 0
    if quantity == "output":
        return _work(len(inputs.K) * len(inputs.Q[i])) and _groups_sum_to_zero(
            inputs.scores(i), inputs.keys(i), lambda k: inputs.V[k][j]
        )
    if quantity == "dQ":
        return _dq_is_zero(inputs, i, j)
    if quantity in ("dK", "dV"):
        return _key_is_zero(inputs, quantity, i, j)
    return False


def proved(inputs: Inputs, quantity: str, i: int, j: int, lo: Fraction, hi: Fraction, first: bool) -> Fraction | None:
    """The exact value of entry (i, j) that balls [lo, hi] left open, where the rules above prove one: 0 where
    the ``first`` balls hold it, and from the second round on, an output's rational value in [lo, hi]."""
    if first:
        return Fraction(0) if lo <= 0 <= hi and is_zero(inputs, quantity, i, j) else None
    value = rational_output(inputs, i, j) if quantity == "output" else None
    return value if value is not None and lo <= value <= hi else None


def rational_output(inputs: Inputs, i: int, c: int) -> Fraction | None:
    """O_ic exactly where it is rational: the mean of V_jc over each group of equal scores, where it is the same
    for every group; None where not, or where the proof would take more than limits.ZERO_TERMS terms."""
    keys = inputs.keys(i)
    if not keys or not _work(len(inputs.K) * len(inputs.Q[i])):
        return None
    scores = inputs.scores(i)
    groups: dict[Fraction, list] = {}  # score: [count, Σ V_jc]
    for k in keys:
        g = groups.setdefault(scores[k], [0, Fraction(0)])
        g[0] += 1
        g[1] += inputs.V[k][c]
    means = {total / count for count, total in groups.values()}
    return means.pop() if len(means) == 1 else None


def _work(terms: int) -> bool:
    return terms <= limits.ZERO_TERMS


def _groups_sum_to_zero(scores: list[Fraction], keys: list[int], value: Callable[[int], Fraction]) -> bool:
    """Whether value(k) sums to 0 over each group of ``keys`` of equal score."""
    sums: dict[Fraction, Fraction] = {}
    for k in keys:
        sums[scores[k]] = sums.get(scores[k], Fraction(0)) + value(k)
    return not any(sums.values())


def _dq_is_zero(inputs: Inputs, i: int, c: int) -> bool:
    keys = inputs.keys(i)
    if not _work(len(inputs.K) * len(inputs.Q[i]) + len(keys) * len(inputs.V[0])):
        return False
    scores = inputs.scores(i)
    groups: dict[Fraction, list[Fraction]] = {}  # score: [n, Σ K_kc, Σ K_kc dP_k, Σ dP_k]
    for k in keys:
        g = groups.setdefault(scores[k], [Fraction(0)] * 4)
        kc, dp = inputs.K[k][c], inputs.dP(i, k)
        g[0] += 1
        g[1] += kc
        g[2] += kc * dp
        g[3] += dp
    if not _work(len(groups) ** 2):
        return False
    by_sum: dict[Fraction, Fraction] = {}
    for ta, (_, k_a, kdp_a, _) in groups.items():
        for tb, (n_b, _, _, dp_b) in groups.items():
            by_sum[ta + tb] = by_sum.get(ta + tb, Fraction(0)) + n_b * kdp_a - k_a * dp_b
    return not any(by_sum.values())


def _key_is_zero(inputs: Inputs, quantity: str, j: int, c: int) -> bool:
    """dK_jc or dV_jc: each group of queries with the same Q row and mask contributes 0."""
    n, m, d = len(inputs.Q), len(inputs.K), len(inputs.Q[0])
    if not _work(n * m):  # grouping the queries reads every mask entry
        return False
    queries: dict[tuple, list[int]] = {}
    for i in range(n):
        if inputs.attends(i, j):
            queries.setdefault((tuple(inputs.Q[i]), tuple(inputs.attends(i, k) for k in range(m))), []).append(i)
    if not _work(n * m + len(queries) * m * d * 2):  # each group's scores and shares
        return False
    assert inputs.dO is not None  # the gradients' inputs have dO
    for members in queries.values():
        dO = [sum((inputs.dO[i][e] for i in members), Fraction(0)) for e in range(len(inputs.dO[0]))]
        if quantity == "dV":
            if dO[c]:
                return False
            continue
        g = members[0]
        if inputs.Q[g][c] == 0:
            continue
        v_j = inputs.V[j]

        def share(k: int, dO: list[Fraction] = dO, v_j: Sequence[Fraction] = v_j) -> Fraction:
            return sum((a * (x - y) for a, x, y in zip(dO, v_j, inputs.V[k])), Fraction(0))

        if not _groups_sum_to_zero(inputs.scores(g), inputs.keys(g), share):
            return False
    return True


class FloatRows(Sequence[list[Fraction]]):
    """A float array's rows as exact Fractions, each made once when read."""

    def __init__(self, array: Any):
        self.array = array
        self._rows: dict[int, list[Fraction]] = {}

    def __len__(self) -> int:
        return self.array.shape[0]

    def __getitem__(self, i):  # an int: the float path reads rows one at a time
        if i not in self._rows:
            self._rows[i] = [Fraction(x) for x in self.array[i].tolist()]
        return self._rows[i]


def of_arrays(Q: Any, K: Any, V: Any, allowed: Any = None, dO: Any = None) -> Inputs:
    """Inputs of float arrays (a float64.Head's), exact: every float is a rational."""

    def attends(i: int, j: int) -> bool:
        return allowed is None or bool(allowed[i, j])

    return Inputs(FloatRows(Q), FloatRows(K), FloatRows(V), attends, None if dO is None else FloatRows(dO))


__all__ = ["QUANTITIES", "FloatRows", "Inputs", "is_zero", "of_arrays", "proved", "rational_output"]
