"""The lean first bound of compare's text report at kernel sizes (kernel/lean.py, issue 30 "Speed"): its ends hold
the 50-digit value, and a report that starts from it is the report that starts from float64's bound, byte for byte."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.exact.numeric import significant_exact
from symattn.input.floats import FloatResult, ulp
from symattn.kernel import deciding, float64, lean
from symattn.kernel import heads as kernel
from symattn.kernel.comparison_report import render_comparison
from tests.test_kernel import heads, in_format

DIGITS = 50


def mp_outputs(head: float64.Head) -> list[list]:
    """Every output by mpmath at 50 digits (scores as exact fractions, the exact scale 1/√d)."""
    Q, K, V = head.Q, head.K, head.V
    out = []
    with mpmath.workdps(DIGITS + 10):
        c = 1 / mpmath.sqrt(Q.shape[1])
        for i in range(Q.shape[0]):
            scores = [sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(Q[i], k)), Fraction(0)) for k in K]
            top = max(s for j, s in enumerate(scores) if head.allowed is None or head.allowed[i, j])
            e = [
                mpmath.exp(mpmath.mpf((s - top).numerator) / (s - top).denominator * c)
                if head.allowed is None or head.allowed[i, j]
                else mpmath.mpf(0)
                for j, s in enumerate(scores)
            ]
            total = mpmath.fsum(e)
            out.append([mpmath.fsum(w * float(V[j][k]) for j, w in enumerate(e)) / total for k in range(V.shape[1])])
    return out


def exact_of(value) -> Fraction:
    with mpmath.workdps(DIGITS + 10):
        return Fraction(mpmath.nstr(value, DIGITS + 5, strip_zeros=False, min_fixed=-mpmath.inf, max_fixed=mpmath.inf))


@settings(max_examples=120, deadline=None)
@given(heads())
def test_the_lean_ends_hold_the_50_digit_value(head):
    lo, hi = lean.intervals(head)
    for i, row in enumerate(mp_outputs(head)):
        for j, value in enumerate(row):
            exact = exact_of(value)
            assert np.isnan(lo[i, j]) or Fraction(float(lo[i, j])) <= exact, (i, j)  # nan: no bound (inf later)
            assert np.isnan(hi[i, j]) or exact <= Fraction(float(hi[i, j])), (i, j)


def test_a_piece_of_rows_has_the_ends_of_the_whole_to_the_last_bits():
    rng = np.random.default_rng(3)
    Q, K, V = (in_format(rng.standard_normal((700, 16)), "float32") for _ in range(3))
    head = float64.Head(Q, K, V, 0.25, 3 * float64.U, None, None)
    lo, hi = lean.intervals(head)
    part = lean.intervals(head, 300, 650)
    # the same bounds, up to BLAS's last bits: OpenBLAS's SkylakeX kernels round a row's products apart
    # from the rows multiplied with it (and the threads); both hold each exact value, so they meet
    lo, hi = lo[300:650], hi[300:650]
    assert (part[0] <= hi).all() and (lo <= part[1]).all()
    wide = np.maximum(hi - lo, part[1] - part[0])
    assert (np.abs(part[0] - lo) <= wide).all() and (np.abs(part[1] - hi) <= wide).all()


def test_lean_decides_where_its_ends_agree_and_leaves_the_rest_to_float64_and_arb(monkeypatch):
    rng = np.random.default_rng(5)
    Q, K, V = (in_format(rng.standard_normal((8, 6)), "float16") for _ in range(3))
    head = float64.Head(Q, K, V, 1 / np.sqrt(6), 3 * float64.U, None, None)
    exact = mp_outputs(head)
    # a float32 result: lean's ends (about 1e-15 wide) decide every figure to three digits
    x32 = np.array([[float(np.float32(float(v))) for v in row] for row in exact])
    x32[1, 2] = float(np.nextafter(np.float32(x32[1, 2]), np.float32(1)))  # one planted ULP
    lo, hi = lean.intervals(head)
    ok, (q, k), _, _ = deciding.decide(x32, lo, hi, "float32")
    assert ok.all()
    for i in range(8):
        for j in range(6):
            e = exact_of(exact[i][j])
            shown = significant_exact(abs(Fraction(x32[i, j]) - e) / ulp(e, "float32"), 3)
            assert deciding.figure(int(q[i, j]), int(k[i, j])) == shown, (i, j)
    # a float64 result, the exact values rounded: lean's ends span ULPs and decide no figure of o[0, 0]; the
    # report still shows the figures of the 50-digit values (float64's ends, then arb)
    x64 = np.array([[float(mpmath.mpf(v)) for v in row] for row in exact])
    ok, _, _, _ = deciding.decide(x64, lo, hi, "float64")
    assert not ok[0, 0]
    monkeypatch.setattr(kernel, "LEAN_WORK", 0)
    result = FloatResult.of_array("r.npy", "float64", x64)
    assert kernel.takes_lean([head], "output", 10)
    c = kernel.compare_head([head], result, "output", 10)
    for e in c.entries.ranked(10):
        exact_e = exact_of(exact[e.row][e.col])
        assert e.ulps == significant_exact(abs(Fraction(x64[e.row, e.col]) - exact_e) / ulp(exact_e, "float64"), 3)
    assert c.worst is not None and c.worst.ulps <= Decimal("0.500")  # each the nearest float64


def report(heads_: list[float64.Head], result: FloatResult, worst: int, lean_first: bool) -> tuple:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kernel, "LEAN_WORK", 0 if lean_first else 2**62)
        assert kernel.takes_lean(heads_, "output", worst) == lean_first
        c = kernel.compare_head(heads_, result, "output", worst)
        figures = (c.histogram, c.worst, c.worst_relative, c.worst_row_relative, c.correctly_rounded)
        return render_comparison(c, worst=worst), figures, c.entries.ranked(worst), c.refined


@settings(max_examples=60, deadline=None)
@given(st.lists(heads(), min_size=1, max_size=3), st.sampled_from([1, 4, 10]), st.integers(0, 2**32 - 1))
def test_a_report_from_the_lean_bound_is_the_report_from_float64s(made, worst, seed):
    made = [h for h in made if lean.covers(h)]
    n = made[0].Q.shape[0] if made else 0
    made = [h for h in made if h.Q.shape[0] == n]  # side by side: one row count
    if not made:
        return
    rng = np.random.default_rng(seed)
    parts = []
    for h in made:
        Z = (h.Q @ h.K.T) * h.scale
        if h.allowed is not None:
            Z = np.where(h.allowed, Z, -np.inf)
        E = np.exp(Z - Z.max(axis=1, keepdims=True))
        parts.append((E @ h.V) / E.sum(axis=1, keepdims=True))
    x = in_format(np.concatenate(parts, axis=1), "float32")
    at = rng.integers(0, x.shape[0], 3), rng.integers(0, x.shape[1], 3)
    x[at] = in_format(x[at] * (1 + 2.0**-12), "float32")  # planted errors: a worst to find
    if x.shape[1] > 1:
        x[0, 1] = x[0, 0]  # equal figures: ties broken in row order
    if seed % 3 == 0:
        x[-1, -1] = np.nan  # not finite: its exact value shown all the same
    result = FloatResult.of_array("r.npy", "float32", x)
    assert report(made, result, worst, True) == report(made, result, worst, False)


def test_only_plain_heads_with_a_key_for_every_query_take_the_lean_bound():
    rng = np.random.default_rng(1)
    Q, K, V = (in_format(rng.standard_normal((4, 4)), "float32") for _ in range(3))
    plain = float64.Head(Q, K, V, 0.5, 3 * float64.U, None, None)
    assert lean.covers(plain)
    blind = np.ones((4, 4), dtype=bool)
    blind[2] = False  # query 2 attends to no key
    assert not lean.covers(float64.Head(Q, K, V, 0.5, 3 * float64.U, None, blind))
    assert not lean.covers(float64.ModHead(Q, K, V, 0.5, 5 * float64.U, None, None, Fraction(2), ()))
    assert not kernel.takes_lean([plain], "output", None)  # every entry decided: float64's bound alone
    assert not kernel.takes_lean([plain], "lse", 10)
