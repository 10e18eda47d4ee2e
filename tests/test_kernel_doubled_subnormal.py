"""The double-word quotient (kernel/doubled.py, *Subnormal outputs*) where the output cancels to 0, to a
value far below the scores' size, or into float64's subnormal range: each exact value (50-digit mpmath, or
exact fractions) lies within the bound of q1 + q2, and where q1·L could not be split exactly no bound is
given at all."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.kernel import doubled, float64

LEAST = 2.0**-1074  # float64's least subnormal
F32 = 2.0**-149  # float32's


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


def _exact(Q, K, V, scale: Fraction) -> mpmath.mpf:
    """O[0, 0] at 50 digits, the scores as exact fractions, shifted by their largest."""
    s = [sum((Fraction(a) * Fraction(b) for a, b in zip(Q[0], k)), Fraction(0)) * scale for k in K]
    e = [mpmath.exp(_mp(x - max(s))) for x in s]
    return mpmath.fsum(w * mpmath.mpf(v[0]) for w, v in zip(e, V)) / mpmath.fsum(e)


def _tanh(v: float, delta: Fraction) -> mpmath.mpf:
    """v·(e^δ − 1)/(e^δ + 1) = v·tanh(δ/2): two keys of values v and −v, scores δ apart, without the
    cancellation that 50 digits could not resolve."""
    return mpmath.mpf(v) * mpmath.tanh(_mp(delta) / 2)


CASES = {
    # equal scores, V's column a and −a: exactly 0
    "cancels to 0": ([[1.0, 0.0]], [[1.0, 0.5], [1.0, -0.5]], [[1.0], [-1.0]], Fraction(1), None),
    # scores 2^-298 apart (float32 subnormals): O = tanh(2^-299) = 2^-299, the exps' 2^-70 far above it
    "cancels to 2^-299": ([[F32]], [[F32], [0.0]], [[1.0], [-1.0]], Fraction(1), (1.0, Fraction(F32) ** 2)),
    "and times 2^-149 at c = 2^-100": (
        [[F32]],
        [[F32], [0.0]],
        [[F32], [-F32]],
        Fraction(1, 2**100),
        (F32, Fraction(F32) ** 2 / 2**100),
    ),
    # keys 0 and 1 cancel, key 2 is e^-700 (below the exps' floor, e^-480) times 2^-20: a subnormal output
    "cancels to a subnormal": ([[1.0]], [[0.0], [0.0], [-700.0]], [[0.5], [-0.5], [2.0**-20]], Fraction(1), None),
    # and to below float64's least subnormal
    "cancels below it": ([[1.0]], [[0.0], [0.0], [-740.0]], [[0.5], [-0.5], [F32]], Fraction(1), None),
    # above the floor: e^-470·2^-149 after the cancellation, about 2^-827 (a normal q1, far above the guard)
    "cancels to 2^-827": ([[1.0]], [[0.0], [0.0], [-470.0]], [[0.5], [-0.5], [F32]], Fraction(1), None),
}
WANT = {  # q1, q2 and the bound, as float.hex
    "cancels to 0": ("0x0.0p+0", "0x0.0p+0", "0x1.d9f03e9bdfd5dp-71"),
    "cancels to 2^-299": ("0x1.0000000000000p-299", "0x0.0p+0", "0x1.7ddfc0baf511ep-71"),
    "and times 2^-149 at c = 2^-100": ("0x1.0000000000000p-548", "0x0.0p+0", "0x1.79df092ca8447p-220"),
    "cancels to a subnormal": ("0x0.0p+0", "0x0.0p+0", "0x1.91e3568bf6399p-72"),
    "cancels below it": ("0x0.0p+0", "0x0.0p+0", "0x1.91e3568bf6399p-72"),
    "cancels to 2^-827": ("0x1.e8e0c7038478fp-829", "0x0.0p+0", "0x1.33cb316c62b43p-69"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_quotient_that_cancels_holds_its_exact_value(name):
    rows, keys, values, scale, closed = CASES[name]
    Q, K, V = (np.array(x, dtype=np.float64) for x in (rows, keys, values))
    head = float64.head(Q, K, V, scale, None)
    assert head is not None and doubled.takes(head)
    q1, q2, bound = doubled.quotients(head, [(0, 0)])
    assert (q1[0].hex(), q2[0].hex(), bound[0].hex()) == WANT[name]
    with mpmath.workdps(50):
        exact = _exact(rows, keys, values, scale) if closed is None else _tanh(*closed)
        assert abs(exact - mpmath.mpf(q1[0]) - mpmath.mpf(q2[0])) <= bound[0]
        if name == "cancels to a subnormal":
            assert 0 < exact < 2.0**-1022  # float64's subnormal range, e^-700·2^-20/(2 + e^-700)
        if name == "cancels below it":
            assert 0 < exact < LEAST


@pytest.mark.parametrize(
    ("name", "Ns", "Nsig", "L", "want"),
    [
        # N/L underflows to 0: p = p' = c = 0, r = N; q2 underflows too, within the bound's 2^-1074
        ("q1 underflows", LEAST, 0.0, 3.0, ("0x0.0p+0", "0x0.0p+0", "0x0.0000000000003p-1022")),
        # N cancels to 3·2^-1074: q1 = 2^-1074, so q1·L is not split exactly: no bound
        ("N cancels to a subnormal", 2.0**-1022, -(2.0**-1022) + 3 * LEAST, 3.0, ("0x0.0000000000001p-1022", "0x0.0p+0", "inf")),
        ("q1 subnormal", 7 * LEAST, 0.0, 2.0, ("0x0.0000000000004p-1022", "0x0.0p+0", "inf")),
        ("q1 below the guard", 2.0**-1000, 0.0, 1.5, ("0x1.5555555555555p-1001", "0x0.0p+0", "inf")),
        # q1 = 2^-899 exactly; r = N_σ, subnormal: q2 = fl(2^-1074/3) = 0, and fl(5·2^-1074/3) = 2·2^-1074
        ("q2 underflows", 3 * 2.0**-899, LEAST, 3.0, ("0x1.0000000000000p-899", "0x0.0p+0", "0x0.0000000000003p-1022")),
        ("q2 subnormal", 3 * 2.0**-899, 5 * LEAST, 3.0, ("0x1.0000000000000p-899", "0x0.0000000000002p-1022", "0x0.0000000000003p-1022")),
    ],
)  # fmt: skip
def test_the_second_float_near_and_below_the_subnormals(name, Ns, Nsig, L, want):
    """_second on sums given exactly (N = N_s + N_σ, ℓ = L): the exact N/ℓ, a fraction, within the bound."""
    ns, nsig, ell = (np.array([x]) for x in (Ns, Nsig, L))
    q1 = (ns + nsig) / ell
    zero = np.zeros(1)
    q2, bound = doubled._second(ns, nsig, q1, ell, zero, zero, zero)
    assert (q1[0].hex(), q2[0].hex(), "inf" if np.isinf(bound[0]) else bound[0].hex()) == want
    exact = (Fraction(Ns) + Fraction(Nsig)) / Fraction(L)
    if np.isfinite(bound[0]):
        assert abs(exact - Fraction(q1[0]) - Fraction(q2[0])) <= Fraction(bound[0])
