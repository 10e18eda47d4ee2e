"""compare decides the outputs the float64 bounds leave open in two floats first (doubled.quotients), arb
only for the rest: the same figures, exact digits, counts and JSON as with arb alone, and each value against
50-digit mpmath (none of symattn's engines)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.input.floats import FloatResult
from symattn.kernel import doubled, float64, refine
from symattn.kernel.comparison_report import comparison_data
from symattn.kernel.spec_comparison import compare
from symattn.kernel.tolerance import verdict
from tests.test_kernel import float_attention, in_format, mp_row, spec_of


def counted(monkeypatch) -> dict[str, list]:
    """The entries each round of refinement is asked for: two floats, then arb."""
    asked: dict[str, list] = {"two floats": [], "arb": []}
    two, arb = refine.by_two_floats, refine._ends_by_rows

    def spy_two(head, entries, *rest):
        asked["two floats"].append({i: list(js) for i, js in entries.items()})
        return two(head, entries, *rest)

    def spy_arb(head, quantity, wanted, *rest):
        asked["arb"].append({i: list(js) for i, js in wanted.items()})
        return arb(head, quantity, wanted, *rest)

    monkeypatch.setattr(refine, "by_two_floats", spy_two)
    monkeypatch.setattr(refine, "_ends_by_rows", spy_arb)
    return asked


def test_two_floats_decide_an_entry_the_float64_bounds_leave_open(monkeypatch):
    rng = np.random.default_rng(0)
    Q, K, V = (in_format(rng.standard_normal((16, 8)), "float16") for _ in range(3))
    result = FloatResult.of_array("r.npy", "float32", in_format(float_attention(Q, K, V)[1], "float32"))
    asked = counted(monkeypatch)
    c = compare(spec_of(Q, K, V), result)
    assert asked == {"two floats": [{0: [3]}], "arb": []}  # entry (0, 3): no arb at all
    assert c.refined == 1 and c.digits == 28  # counted and reported as refinement's first round, as before
    e = c.entries.entry(0, 3)
    assert (e.ulps, e.relative, e.exact) == (Decimal("0.259"), Decimal("2.12E-8"), Decimal("0.091227797720582796"))
    with mpmath.workdps(60):
        exact = mp_row(Q, K, V, 0)[1][3]
        assert mpmath.nstr(exact, 17, strip_zeros=False) == "0.091227797720582796"
        x = mpmath.mpf(float(result.array[0, 3]))
        assert mpmath.nstr(abs(x - exact) / abs(exact), 3) == "2.12e-8"


def test_an_exact_zero_the_two_floats_leave_open_goes_to_arb(monkeypatch):
    # keys 0 and 1 score alike, key 2 lower: O[0, 0] = (e^s − e^s + 0)/ℓ = 0 exactly, not a rational row
    Q = np.array([[1.0, 0.0]])
    K = np.array([[1.0, 0.5], [1.0, -0.5], [0.0, 1.0]])
    V = np.array([[1.0, 2.0], [-1.0, 3.0], [0.0, 5.0]])
    x = float_attention(Q, K, V)[1].astype(np.float32).astype(np.float64)
    x[0, 0] = 2.0**-30  # the exact 0 missed
    asked = counted(monkeypatch)
    c = compare(spec_of(Q, K, V), FloatResult.of_array("r.npy", "float32", x))
    assert asked["two floats"] == [{0: [0]}] and asked["arb"] == [{0: [0]}]  # the pair holds 0: arb proves it
    e = c.entries.entry(0, 0)
    assert (e.exact, e.ulps, e.absolute) == (Decimal(0), None, Decimal("9.31E-10"))
    with mpmath.workdps(60):
        assert abs(mp_row(Q, K, V, 0)[1][0]) < mpmath.mpf(10) ** -50


def test_quotients_hold_the_exact_outputs_to_about_two_to_the_minus_sixty():
    rng = np.random.default_rng(5)
    Q, K, V = (in_format(rng.standard_normal(s), "float32") for s in ((3, 16), (40, 16), (40, 3)))
    head = float64.head(Q, K, V, None, None)
    assert head is not None and doubled.takes(head)
    pairs = [(i, k) for i in range(3) for k in range(3)]
    q1, q2, bound = doubled.quotients(head, pairs)
    with mpmath.workdps(60):
        for (i, k), a, b, e in zip(pairs, q1.tolist(), q2.tolist(), bound.tolist()):
            exact = mp_row(Q, K, V, i)[1][k]
            assert abs(exact - mpmath.mpf(a) - mpmath.mpf(b)) <= e
            assert e <= 2.0**-60 * abs(exact)  # the float64 path's outputs are off by 2^-50 or so


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 6),
    m=st.integers(1, 9),
    d=st.sampled_from([2, 4, 5]),
    seed=st.integers(0, 2**32 - 1),
    fmt=st.sampled_from(["float16", "float32"]),
    result_fmt=st.sampled_from(["float32", "float64"]),  # float64: most entries go past the float64 bounds
)
def test_two_floats_then_arb_give_what_arb_alone_gives(n, m, d, seed, fmt, result_fmt):
    rng = np.random.default_rng(seed)
    Q, K, V = (in_format(rng.standard_normal(s), fmt) for s in ((n, d), (m, d), (m, 3)))
    x = in_format(float_attention(Q, K, V)[1], result_fmt)
    result = FloatResult.of_array("r.npy", result_fmt, x)
    naive = FloatResult.of_array("n.npy", result_fmt, in_format(x, "float16"))
    spec = spec_of(Q, K, V)

    def run():  # the comparison, FlashAttention's verdict against the naive result, torch.allclose's
        c = compare(spec, result)
        flash = verdict(c, result, naive, None, None)
        allclose = verdict(c, result, None, Fraction(1, 10**7), Fraction(0))
        return c, comparison_data(c, flash), comparison_data(c, allclose)

    both = run()
    taken = doubled.takes
    try:
        doubled.takes = lambda head: False  # arb alone, as before
        alone = run()
    finally:
        doubled.takes = taken
    assert both == alone and both[0].digits == alone[0].digits and both[0].refined == alone[0].refined


@settings(max_examples=60, deadline=None)
@given(
    d=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
    spread=st.integers(0, 30),
)
def test_the_high_parts_of_exact_s_sum_exactly(d, seed, spread):
    # float32 values of both signs and of many exponents: high·high' summed by BLAS is the exact sum
    rng = np.random.default_rng(seed)
    q, k = (
        in_format(rng.standard_normal((2, d)) * 2.0 ** rng.integers(-spread, spread + 1, (2, d)), "float32")
        for _ in range(2)
    )
    s = float64.exact_s(d)
    a, b = float64.Split.of(q, s), float64.Split.of(k, s)
    for i in range(2):
        for j in range(2):
            exact = sum(
                (Fraction(x) * Fraction(y) for x, y in zip(a.high[i].tolist(), b.high[j].tolist())), Fraction(0)
            )
            assert Fraction(float((a.high @ b.high.T)[i, j])) == exact


def test_the_scores_of_a_negative_entry_below_its_rows_binade_are_exact():
    # the case that showed float64.Split's own s one bit short (d = 2: s = 26): q·k's high parts summed
    # to −1.0587… off by 2^-53, since −0.0604 + 2^26 falls where the floats are 2^-27 apart
    q = np.array([[float.fromhex("-0x1.eedf0cp-5"), float.fromhex("-0x1.caf596p-1")]])
    k = np.array([[float.fromhex("-0x1.bebb38p-5"), float.fromhex("0x1.2f4c2cp+0")]])
    products = Fraction(q[0, 0]) * Fraction(k[0, 0]) + Fraction(q[0, 1]) * Fraction(k[0, 1])
    assert float(products) != products  # 54 bits: no float is the exact score
    a, b = float64.Split.of(q, float64.exact_s(2)), float64.Split.of(k, float64.exact_s(2))
    high = sum((Fraction(x) * Fraction(y) for x, y in zip(a.high[0].tolist(), b.high[0].tolist())), Fraction(0))
    assert Fraction(float((a.high @ b.high.T)[0, 0])) == high
