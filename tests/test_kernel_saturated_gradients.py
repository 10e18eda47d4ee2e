"""Saturated gradients (issue 30): one key takes nearly all of a row's weight. The arb refinement writes
dA − D as (dA − dA_p) − C with no cancellation (kernel/refine_gradients.py), so 96 bits give each ball's
digits where the plain D lost them at any precision short of the gap's; checked against mpmath at 50 digits."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.kernel.float64_backward import GradientHead
from symattn.kernel.refine import _transposed_integers
from symattn.kernel.refine_gradients import gradient_rows

mpmath.mp.dps = 50


def _head(scale: float, seed: int = 0, n: int = 4, m: int = 6, d: int = 4) -> GradientHead:
    rng = np.random.default_rng(seed)
    Q, K = ((rng.standard_normal((r, d)) * scale).astype(np.float32).astype(np.float64) for r in (n, m))
    V, dO = (rng.standard_normal((r, d)).astype(np.float32).astype(np.float64) for r in (m, n))
    return GradientHead(Q, K, V, 0.5, 0.0, Fraction(1, 2), None, dO)


def _exact(head: GradientHead, quantity: str, r: int, c: int) -> mpmath.mpf:
    """dQ[r, c], dK[r, c] or dV[r, c] in mpmath, dS_ij = A_ij Σ_k A_ik (dA_ij − dA_ik) (no cancellation)."""
    n, m = head.Q.shape[0], head.K.shape[0]
    mp = lambda x: mpmath.mpf(float(x))  # noqa: E731
    S = [
        [mp(0.5) * mpmath.fsum(mp(a) * mp(b) for a, b in zip(head.Q[i], head.K[j])) for j in range(m)] for i in range(n)
    ]
    dA = [[mpmath.fsum(mp(a) * mp(b) for a, b in zip(head.dO[i], head.V[j])) for j in range(m)] for i in range(n)]
    A = []
    for i in range(n):
        top = max(S[i])
        e = [mpmath.exp(s - top) for s in S[i]]
        A.append([x / mpmath.fsum(e) for x in e])
    dS = [
        [A[i][j] * mpmath.fsum(A[i][k] * (dA[i][j] - dA[i][k]) for k in range(m)) for j in range(m)] for i in range(n)
    ]
    if quantity == "dQ":
        return mp(0.5) * mpmath.fsum(dS[r][j] * mp(head.K[j, c]) for j in range(m))
    if quantity == "dK":
        return mp(0.5) * mpmath.fsum(dS[i][r] * mp(head.Q[i, c]) for i in range(n))
    return mpmath.fsum(A[i][r] * mp(head.dO[i, c]) for i in range(n))


@pytest.mark.parametrize("quantity", ["dQ", "dK", "dV"])
@pytest.mark.parametrize("scale", [1.0, 30.0, 300.0])
def test_saturated_gradients_are_tight_balls_at_96_bits(quantity, scale):
    head = _head(scale)
    rows = head.Q.shape[0] if quantity == "dQ" else head.K.shape[0]
    wanted = {i: list(range(head.Q.shape[1])) for i in range(rows)}
    got = list(gradient_rows(head, quantity, wanted, 96, _transposed_integers(head.K)))
    for i, row in zip(wanted, got):
        for c, ball in row.items():
            exact = _exact(head, quantity, i, c)
            mid, rad = ball.mid().man_exp(), ball.rad().man_exp()
            lo = mpmath.mpf(int(mid[0])) * mpmath.mpf(2) ** int(mid[1])
            radius = mpmath.mpf(int(rad[0])) * mpmath.mpf(2) ** int(rad[1])
            assert abs(lo - exact) <= radius + abs(exact) * mpmath.mpf(2) ** -160  # mpmath's own 50 digits
            assert radius <= abs(exact) * mpmath.mpf(2) ** -60  # tight: no cancellation left


def test_a_figure_that_rounds_into_the_next_decade_has_three_digits():
    from flint import arb

    from symattn.kernel.deviation import digits

    assert digits(arb(99967) / 10000 * arb(10) ** 20, 3) == Decimal("1.00E+21")
    assert str(digits(arb(99967) / 10000 * arb(10) ** 20, 3)) == "1.00E+21"


def test_a_zero_result_against_an_exact_value_far_below_normal_is_off_by_exactly_one():
    from flint import arb, ctx

    from symattn.kernel.deviation import decide

    saved, ctx.prec = ctx.prec, 96
    try:
        e = -arb(3) * arb(10) ** -5000  # a saturated row's dQ: far below float32's least subnormal
        figures, _, shown = decide(Fraction(0), e, "float32", 17, lambda y: e - arb(y.numerator) / y.denominator)
    finally:
        ctx.prec = saved
    assert figures == (Decimal("2.14E-4955"), Decimal("1.00"), 1)  # bucket 1: above 0, at most the first edge
    assert shown == Decimal("-3.0000000000000000E-5000")
