"""Issue 30's gradient checks at their edges: rows saturated at inputs ×1000 (their row-relative figures and dV's
float sums), the float64 bound of dA − D on a saturated row (the pivot's identity), and the soft cap's tanh bound
near 0. Checked against mpmath at 50 digits."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.kernel.float64_backward import gradient
from symattn.kernel.score_mods import Cap
from symattn.testing import assert_attention_close
from tests.test_kernel_saturated_gradients import _exact as _exact_half
from tests.test_kernel_saturated_gradients import _head

mpmath.mp.dps = 50


def _exact(head, quantity: str, r: int, c: int) -> mpmath.mpf:
    """dQ[r, c], dK[r, c] or dV[r, c] at the head's scale, in mpmath (dS_ij = A_ij Σ_k A_ik (dA_ij − dA_ik))."""
    if head.scale == 0.5:
        return _exact_half(head, quantity, r, c)
    n, m = head.Q.shape[0], head.K.shape[0]
    mp = lambda x: mpmath.mpf(float(x))  # noqa: E731
    scale = mpmath.mpf(head.exact_scale.numerator) / head.exact_scale.denominator
    S = [[scale * mpmath.fsum(mp(a) * mp(b) for a, b in zip(head.Q[i], head.K[j])) for j in range(m)] for i in range(n)]
    dA = [[mpmath.fsum(mp(a) * mp(b) for a, b in zip(head.dO[i], head.V[j])) for j in range(m)] for i in range(n)]
    A = []
    for i in range(n):
        e = [mpmath.exp(s - max(S[i])) for s in S[i]]
        A.append([x / mpmath.fsum(e) for x in e])
    if quantity == "dV":
        return mpmath.fsum(A[i][r] * mp(head.dO[i, c]) for i in range(n))
    dS = [A[r][j] * mpmath.fsum(A[r][k] * (dA[r][j] - dA[r][k]) for k in range(m)) for j in range(m)]
    return scale * mpmath.fsum(dS[j] * mp(head.K[j, c]) for j in range(m))


def _inputs(shape: tuple[int, ...], scale: float) -> tuple:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    q, k = ((torch.randn(shape) * scale).float() for _ in range(2))
    return q, k, torch.randn(shape).float(), torch.randn(shape).float()


def _mp_head(q, k, v, dout):
    from symattn.kernel.float64_backward import GradientHead

    f = lambda t: t[0, 0].double().numpy()  # noqa: E731
    d = q.shape[-1]
    return GradientHead(f(q), f(k), f(v), d**-0.5, 0.0, Fraction(1, int(d**0.5)), None, f(dout))  # d a square


def test_a_saturated_dq_at_1000_has_every_row_relative_figure():
    torch = pytest.importorskip("torch")
    q, k, v, dout = _inputs((1, 1, 16, 16), 1000.0)
    report = assert_attention_close(torch.zeros(1, 1, 16, 16), q, k, v, kind="dq", dout=dout)
    entries = json.loads(report.to_json())["entries"]
    head = _mp_head(q, k, v, dout)
    row = [_exact(head, "dQ", 0, c) for c in range(16)]
    top = max(abs(x) for x in row)
    assert entries[0]["exact"] == "-6.3984435174995191E-325035"
    assert mpmath.nstr(row[0], 17, min_fixed=0, max_fixed=0) == "-6.3984435174995191e-325035"
    assert [Decimal(e["row_relative"]) for e in entries[:16]] == [Decimal(mpmath.nstr(abs(x) / top, 3)) for x in row]
    assert (
        entries[14]["row_relative"] == "1.00"
    )  # the row's largest: its ball straddles 1, and both sides round to 1.00
    # a result of 0: each row's largest is off by exactly 1 of its magnitude, each entry by exactly 1 relative
    assert [line for line in report.text().splitlines() if line.startswith("Largest") and "1.00" in line] == [
        "Largest relative error: 1.00, at out[0, 0, 0, 0] (one of 256 places).",
        "Largest error relative to its row's largest magnitude: 1.00, at out[0, 0, 0, 14] (one of 16 places).",
    ]


def test_a_saturated_dv_at_1000_is_decided_near_its_float_sum():
    torch = pytest.importorskip("torch")
    q, k, v, dout = _inputs((1, 1, 32, 64), 1000.0)
    leaves = [t.clone().double().requires_grad_() for t in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*leaves).backward(dout.double())
    report = assert_attention_close(leaves[2].grad.float(), q, k, v, kind="dv", dout=dout)
    entries = json.loads(report.to_json())["entries"]
    head = _mp_head(q, k, v, dout)
    got = entries[7 * 64 + 12]  # key 7's dV: F, dO summed over the queries it takes, and an e^(−10^5)-small rest
    x = Fraction(float(got["value"]))
    F, rest = _float_sum_and_rest(head, 7, 12)
    assert (F - x) / Fraction(1, 2**22) == Fraction(5, 16)  # 0.3125 ULP: a tie at three digits, which the rest breaks
    assert rest > 0  # the exact value lies past F, away from x: 0.3125… ULP rounds up
    assert got["ulps"] == "0.313"
    assert Decimal(got["exact"]) == Decimal(mpmath.nstr(mpmath.mpf(F.numerator) / F.denominator, 17))


def _float_sum_and_rest(head, r: int, c: int) -> tuple[Fraction, mpmath.mpf]:
    """dV[r, c] = F + rest in mpmath, independently: F sums dO[i, c] exactly over the queries whose largest score is
    key r's, and rest = Σ_i A_ir dO_ic − F = Σ_{those i} −(1 − A_ir) dO_ic + Σ_{others} A_ir dO_ic, each 1 − A_ir summed
    over the other keys (no cancellation)."""
    mp = lambda x: mpmath.mpf(float(x))  # noqa: E731
    F, rest = Fraction(0), mpmath.mpf(0)
    for i in range(head.Q.shape[0]):
        S = [mpmath.fsum(mp(a) * mp(b) for a, b in zip(head.Q[i], head.K[j])) / 8 for j in range(head.K.shape[0])]
        shifted = [mpmath.exp(s - S[r]) for s in S]
        total = mpmath.fsum(shifted)
        if max(range(len(S)), key=lambda j: S[j]) == r:
            F += Fraction(float(head.dO[i, c]))
            rest -= mpmath.fsum(e for j, e in enumerate(shifted) if j != r) / total * mp(head.dO[i, c])
        else:
            rest += mp(head.dO[i, c]) / total
    return F, rest


def test_a_float_sum_half_way_between_two_floats_decides_on_its_side():
    from flint import arb, ctx

    from symattn.kernel.deviation import decide

    F = Fraction(30360333, 2**26)  # half-way between two float32s; the exact value a hair below it
    x = F - Fraction(1, 2**26)  # the float32 below it, half an ULP (2^-25) away
    saved, ctx.prec = ctx.prec, 96
    try:
        tiny = arb(10) ** -24296
        e = arb(F.numerator) / F.denominator - tiny
        error = lambda y: arb((F - y).numerator) / (F - y).denominator - tiny  # noqa: E731
        got = decide(x, e, "float32", 17, error, F)
        assert decide(x, e, "float32", 17, error) is None  # from the float nearest, no side to read
    finally:
        ctx.prec = saved
    assert got is not None
    assert got[0] == (Decimal("0.500"), Decimal("3.29E-8"), 1)  # 0.5 − tiny ULP: the bucket (0, 0.5]
    assert got[2] == Decimal("0.45240421593189240")


@pytest.mark.parametrize("scale", [10.0, 30.0])
def test_the_float64_bound_of_a_saturated_row_is_relative(scale):
    worst = 0.0
    for seed in range(3):
        head = _head(scale, seed, n=6, m=8, d=4)
        for quantity in ("dQ", "dK"):
            value, error = gradient(head, quantity)
            for i, c in np.ndindex(value.shape):
                exact = _exact(head, quantity, i, c)
                assert abs(mpmath.mpf(float(value[i, c])) - exact) <= error[i, c]
                worst = max(worst, float(error[i, c] / abs(exact)))
    assert worst < (1e-11 if scale == 10.0 else 1e-5)  # was 7e19 and 1e282 of the value with dA − D absolute


def test_the_cap_s_tanh_bound_is_relative_near_zero():
    rng = np.random.default_rng(1)
    Z = np.concatenate([rng.standard_normal(300) * 3, rng.standard_normal(300) * 30, [0.0, 1e-300, 15.0, -15.0]])
    cap = Cap(30.0)
    tau, e_tau = cap.tanh(Z[None, :], np.zeros((1, Z.size)))
    g, e_g = cap.derivative(Z[None, :], np.zeros((1, Z.size)))
    for z, t, b, d, e_d in zip(Z, tau[0], e_tau[0], g[0], e_g[0]):
        exact = mpmath.tanh(mpmath.mpf(float(z)) / 30)
        assert abs(mpmath.mpf(float(t)) - exact) <= b
        assert abs(mpmath.mpf(float(d)) - (1 - exact**2)) <= e_d
        assert b <= 1.6e-15 * abs(t) or z == 0  # was 5e-14 of τ near z = 0: 1 − e^(−2|x|) cancels
    assert tau[0, -4] == 0.0 and e_tau[0, -4] == 0.0


def test_softcap_gradients_refine_few_entries():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn((2, 4, 40, 16)).float() for _ in range(4))
    leaves = [t.clone().double().requires_grad_() for t in (q, k, v)]
    s = 30.0 * torch.tanh(leaves[0] @ leaves[1].transpose(-1, -2) / 4.0 / 30.0)
    (torch.softmax(s, -1) @ leaves[2]).backward(dout.double())
    report = assert_attention_close(leaves[0].grad.float(), q, k, v, kind="dq", dout=dout, softcap=30.0)
    assert json.loads(report.to_json())["engine"] == {"path": "float64", "refined": 113}  # was 672 of 5120


def test_a_ball_across_a_power_of_ten_has_three_digits_where_both_sides_round_alike():
    from flint import arb

    from symattn.kernel.deviation import digits

    assert digits(arb(1, 2.0**-80), 3) == Decimal("1.00")  # 0.99999… and 1.00001…: a row's largest against itself
    assert digits(arb(10) ** -300 * arb(1, 2.0**-80), 3) == Decimal("1.00E-300")
    assert digits(arb(1, 0.004), 3) is None  # 0.996 rounds to 0.996, 1.004 to 1.00


def test_gradients_whose_score_gradients_are_subnormal_keep_their_bound():
    """A weight near e^-697 (2^-1005.6) times dA − D near 2^-20 gives a subnormal dS, and its products with Q
    underflow further: each off by up to 2^-1075 absolute, which the relative u missed (bounds of 0 against
    values of 1.4e-312 before float64_backward.UNDER)."""
    from symattn.kernel.float64_backward import GradientHead

    rng = np.random.default_rng(0)
    f32 = lambda a: np.array(a, dtype=np.float32).astype(np.float64)  # noqa: E731
    mp = lambda x: mpmath.mpf(float(x))  # noqa: E731
    for _ in range(12):
        gap, q = float(rng.uniform(690, 699)), float(rng.uniform(0.5, 2))
        Q = f32([[q, 2.0**-12], [q * 1.0001, 2.0**-14]])
        K = f32([[0.0, 0.0], [-gap / q, 0.0]])
        V = f32([[1.0, 0.5], [1.0 + 2.0 ** -float(rng.integers(10, 30)), 0.5]])
        dO = f32([[1.0, rng.uniform(-1, 1)], [rng.uniform(-1, 1), 1.0]])
        head = GradientHead(Q, K, V, 1.0, 0.0, Fraction(1), None, dO)
        S = [[mpmath.fsum(mp(a) * mp(b) for a, b in zip(Q[i], K[j])) for j in range(2)] for i in range(2)]
        dA = [[mpmath.fsum(mp(a) * mp(b) for a, b in zip(dO[i], V[j])) for j in range(2)] for i in range(2)]
        A = [[mpmath.exp(s - max(row)) / mpmath.fsum(mpmath.exp(t - max(row)) for t in row) for s in row] for row in S]
        dS = [
            [A[i][j] * mpmath.fsum(A[i][k] * (dA[i][j] - dA[i][k]) for k in range(2)) for j in range(2)]
            for i in range(2)
        ]
        exact = {
            "dK": [[mpmath.fsum(dS[i][r] * mp(Q[i, c]) for i in range(2)) for c in range(2)] for r in range(2)],
            "dQ": [[mpmath.fsum(dS[r][j] * mp(K[j, c]) for j in range(2)) for c in range(2)] for r in range(2)],
        }
        for quantity, want in exact.items():
            value, error = gradient(head, quantity)
            for r, c in np.ndindex(value.shape):
                assert abs(mpmath.mpf(float(value[r, c])) - want[r][c]) <= error[r, c]


def test_a_saturated_output_next_to_a_tie_of_its_shown_digits_is_decided():
    # one weight 1 and one e^(−32768): the exact output is v_0 + O(e^(−32768)), which SDPA returns; v_0's 17th
    # digit lies 5.1·10^-21 from a tie, within the 2^-40 ULP that decide first reads past it (it said "not
    # decided at 1000 digits", exit 2)
    from symattn.kernel import compare

    q, k = np.array([[4096.0]], np.float32), np.array([[8.0], [0.0]], np.float32)
    v = np.array([[0.0804324522614479], [1.25]], np.float32)
    assert Fraction(float(v[0, 0])) == Fraction("0.080432452261447906494140625")  # the tie: …906|5
    report = compare(v[:1].copy(), q, k, v)
    # mpmath at 15,000 digits: e − v_0 = 1.2777·10^-14231, 1.715·10^-14223 ULP (2^-27), relative 1.5886·10^-14230
    assert json.loads(report.to_json())["entries"] == [
        {
            "query": 0,
            "column": 0,
            "value": "0.080432452261447906",
            "exact": "0.080432452261447906",
            "ulps": "1.71e-14223",
            "relative": "1.59e-14230",
            "row_relative": "1.59e-14230",
        }
    ]
