"""Issue 30: float64.Split's s, and the bound of the scores every float64-path bound builds on.

ExtractScalar's high part is a multiple of u·σ (x + σ can fall below σ, where the floats are twice as
fine), so s = ⌈(53 + log₂ d)/2⌉, not ⌈(51 + log₂ d)/2⌉: with the old s the high parts' sum could round
and ``float64._scores``'s bound miss the exact score. The exact scores here are exact rationals (integer
dot products of the float32 values scaled to integers), compared with the bound exactly.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.kernel.float64 import Split, _scores, exact_s


def old_s(d: int) -> int:
    """Split's s before issue 30: one bit short."""
    return -(-(51 + max(1, d - 1).bit_length()) // 2)


def test_s_is_the_least_for_which_the_high_parts_sum_exactly():
    assert [exact_s(d) for d in (1, 2, 3, 4, 8, 9, 64, 128, 129, 256, 1024)] == [
        27, 27, 28, 28, 28, 29, 30, 30, 31, 31, 32
    ]  # fmt: skip
    assert all(exact_s(d) == old_s(d) + 1 for d in range(1, 5000))
    assert all(2 ** (2 * exact_s(d) - 53) >= d > 2 ** (2 * exact_s(d) - 55) for d in range(1, 5000))
    assert all(Split.of(np.ones((1, d))).s == exact_s(d) for d in (1, 2, 7, 256))


# a score row that the old s got wrong (a seeded search over float32 rows with mixed exponents, d ≤ 8)
Q = [float.fromhex("0x1.92791ap+9"), float.fromhex("-0x1.b5c95cp-12")]
K = [float.fromhex("0x1.583a64p+6"), float.fromhex("-0x1.ca80b0p-15")]


def test_a_row_the_old_s_got_wrong_is_bounded_with_the_new_one():
    q, k = np.array([Q]), np.array([K])
    exact = Fraction(Q[0]) * Fraction(K[0]) + Fraction(Q[1]) * Fraction(K[1])
    assert exact == Fraction(40890537404700393453191613, 590295810358705651712)  # 69271.26482543… exactly
    # the old s (26): q's −0x1.b5c95cp-12 + 2^36 falls below 2^36, where the floats are 2^-17 apart, so the
    # high parts' two products need 54 bits: their float sum rounds
    q_old, k_old = Split.of(q, 26), Split.of(k, 26)
    high = Fraction(q_old.high[0, 0]) * Fraction(k_old.high[0, 0]) + Fraction(q_old.high[0, 1]) * Fraction(
        k_old.high[0, 1]
    )
    assert Fraction(float((q_old.high @ k_old.high.T)[0, 0])) != high
    S, bound = _scores(q, k_old)
    assert (S[0, 0].hex(), bound[0, 0].hex()) == ("0x1.0e9743cb99761p+16", "0x1.0e9e3423ea0acp-37")
    assert Fraction(S[0, 0]) - exact == Fraction(7092502083, 2**69)  # 1.20e-11: past the bound, 7.69e-12
    assert abs(Fraction(S[0, 0]) - exact) > Fraction(bound[0, 0])  # the old bound misses the exact score
    # the new s (27): the high parts' sum is exact, and the bound holds the exact score
    q_new, k_new = Split.of(q), Split.of(k)
    assert (q_new.s, k_new.s) == (27, 27)
    high = Fraction(q_new.high[0, 0]) * Fraction(k_new.high[0, 0]) + Fraction(q_new.high[0, 1]) * Fraction(
        k_new.high[0, 1]
    )
    assert Fraction(float((q_new.high @ k_new.high.T)[0, 0])) == high
    S, bound = _scores(q, k_new)
    assert (S[0, 0].hex(), bound[0, 0].hex()) == ("0x1.0e9743cb99760p+16", "0x1.0e9e3724115d9p-37")
    assert Fraction(S[0, 0]) - exact == Fraction(-1497432509, 2**69)  # 2.54e-12: inside it
    assert abs(Fraction(S[0, 0]) - exact) <= Fraction(bound[0, 0])


def _integers(a: np.ndarray) -> tuple[np.ndarray, int]:
    """a = ints · 2^-shift exactly, the ints as Python integers (float32 values are dyadic)."""
    nonzero = a[a != 0]
    shift = max(0, 24 - int(np.frexp(nonzero)[1].min())) if nonzero.size else 0
    return np.array([[int(x) for x in row] for row in np.ldexp(a, shift).tolist()], dtype=object), shift


def missed(q: np.ndarray, k: np.ndarray, s: int | None = None) -> int:
    """How many of q·kᵀ's scores lie outside ``_scores``'s bound (k split with s; None: Split's own)."""
    S, bound = _scores(q, Split.of(k, s))
    (qi, a), (ki, b) = _integers(q), _integers(k)
    exact = qi.dot(ki.T)  # exact integers: the scores times 2^(a + b)
    # every float here is a multiple of 2^-(a + b) (sums of such products): S scaled is an integer, and
    # Python compares an integer with a float exactly
    scaled = np.ldexp(S, a + b)
    assert np.all(scaled == np.round(scaled))
    got = np.array([[int(x) for x in row] for row in scaled.tolist()], dtype=object)
    gap = np.abs(got - exact)
    room = np.ldexp(bound, a + b)
    return sum(int(g) > r for g, r in zip(gap.flat, room.flat))


def rows(seed: int, d: int, spread: int, aligned: bool) -> tuple[np.ndarray, np.ndarray]:
    """q and k of float32 values of both signs whose exponents run over ±spread; ``aligned``: each row's
    largest entry first (the case where the high parts' sum is largest)."""
    rng = np.random.default_rng(seed)
    count = max(2, int((20_000 / d) ** 0.5))
    out = []
    for _ in range(2):
        x = rng.standard_normal((count, d)) * 2.0 ** rng.integers(-spread, spread + 1, (count, d))
        if aligned:
            x = np.take_along_axis(x, np.argsort(-np.abs(x), axis=1), axis=1)
        out.append(x.astype(np.float32).astype(np.float64))
    return out[0], out[1]


SCORES = dict(
    seed=st.integers(0, 2**32 - 1),
    d=st.one_of(st.integers(1, 8), st.integers(1, 256)),
    spread=st.integers(0, 30),
    aligned=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(**SCORES)
def test_the_scores_bound_holds_the_exact_scores(seed, d, spread, aligned):
    assert missed(*rows(seed, d, spread, aligned)) == 0


@pytest.mark.longfuzz
@settings(max_examples=2_000, deadline=None)
@given(**SCORES)
def test_long_the_scores_bound_holds_the_exact_scores(seed, d, spread, aligned):
    assert missed(*rows(seed, d, spread, aligned)) == 0
