"""The double-word enclosure of chosen outputs (kernel/doubled.py): its bound holds against arb and 50-digit
mpmath, it decides values the float64 and error-free bounds leave open, and certificates that use it verify
with both verifiers."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.certificates.float_digits import significant_many
from symattn.certificates.float_tensors import build, decide_beyond
from symattn.input.decimals import significant_exact
from symattn.kernel import compensated, doubled, float64, refine


def seed_head(seed: int = 4) -> float64.Head:
    """Two float16 queries, eight keys of d = 4, d_v = 2 (row 1, column 1 is the test's entry)."""
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.standard_normal(s).astype(np.float16).astype(np.float64) for s in ((2, 4), (8, 4), (8, 2)))
    head = float64.head(Q, K, V, None, None)
    assert head is not None
    return head


def exact_output(head: float64.Head, i: int, k: int) -> mpmath.mpf:
    """O[i, k] to 50 digits: exact integer scores, mpmath's exps."""
    with mpmath.workdps(60):
        c = 1 / mpmath.sqrt(head.Q.shape[1]) if head.exact_scale is None else mpmath.mpf(head.exact_scale.numerator)
        if head.exact_scale is not None:
            c /= head.exact_scale.denominator
        keys = range(head.K.shape[0]) if head.allowed is None else np.nonzero(head.allowed[i])[0].tolist()
        scores = [sum(Fraction(a) * Fraction(b) for a, b in zip(head.Q[i].tolist(), head.K[j].tolist())) for j in keys]
        top = max(scores)
        e = [mpmath.exp(c * (mpmath.mpf((s - top).numerator) / (s - top).denominator)) for s in scores]
        return mpmath.fsum(w * mpmath.mpf(float(head.V[j, k])) for w, j in zip(e, keys)) / mpmath.fsum(e)


def test_a_value_the_error_free_sums_leave_open_is_decided_and_right():
    head = seed_head()
    pair = [(1, 1)]
    assert not significant_many(*float64.interval(*compensated.outputs(head, pair)), 13)[0][0]  # left open there
    lo, hi = float64.interval(*doubled.outputs(head, pair))
    ok, q, e = significant_many(lo, hi, 13)
    assert ok[0] and (int(q[0]), int(e[0])) == (-8092989732763, -14)
    exact = exact_output(head, 1, 1)
    with mpmath.workdps(60):
        assert mpmath.nstr(exact, 13, strip_zeros=False) == "-0.08092989732763"
        assert Fraction(float(lo[0])) <= Fraction(mpmath.nstr(exact, 50)) <= Fraction(float(hi[0]))


def test_the_bound_is_about_three_units_of_the_value():
    head = seed_head()
    pairs = [(i, k) for i in range(2) for k in range(2)]
    value, error = doubled.outputs(head, pairs)
    relative = error / np.abs(value) / float64.U
    assert (relative < 3.01).all() and (relative > 3.0).all()


def test_a_certificate_decides_beyond_the_float64_bounds_as_arb_does():
    head = seed_head()
    tensors = build({"Q": head.Q, "K": head.K, "V": head.V}, 1, 1, 1, "bhnd", None, None)
    assert tensors is not None
    decided = decide_beyond(tensors, "output", [(1, 1)], 13)
    assert decided == {(1, 1): "-0.08092989732763"}


def test_heads_it_does_not_cover_are_left_to_arb():
    head = seed_head()
    huge = float64.head(head.Q, head.K, head.V, Fraction(2**120), None)
    assert huge is not None and not doubled.covers(huge)
    assert doubled.covers(head)


# float32 values, with its subnormals and the least normal: their products stay exact
float32s = st.one_of(st.floats(-40, 40, width=32), st.sampled_from([2.0**-149, -(2.0**-140), 2.0**-126, 0.0]))


@st.composite
def heads(draw):
    n, m, d, dv = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    Q = np.array(draw(st.lists(float32s, min_size=n * d, max_size=n * d))).reshape(n, d)
    K = np.array(draw(st.lists(float32s, min_size=m * d, max_size=m * d))).reshape(m, d)
    V = np.array(draw(st.lists(float32s, min_size=m * dv, max_size=m * dv))).reshape(m, dv)
    scale = draw(st.sampled_from([None, Fraction(1, 3), Fraction(1, 64), Fraction(5)]))
    allowed = None
    if draw(st.booleans()):
        allowed = np.array(draw(st.lists(st.booleans(), min_size=n * m, max_size=n * m))).reshape(n, m)
        allowed[:, 0] = True  # every query attends a key
    head = float64.head(Q, K, V, scale, allowed)
    assert head is not None
    return head


@settings(max_examples=60, deadline=None)
@given(heads(), st.integers(1, 13))
def test_the_exact_value_lies_within_the_bound_and_decided_digits_are_exact(head, digits):
    n, dv = head.Q.shape[0], head.V.shape[1]
    pairs = [(i, k) for i in range(n) for k in range(dv)]
    value, error = doubled.outputs(head, pairs)
    lo, hi = float64.interval(value, error)
    ok, q, e = significant_many(lo, hi, digits)
    wanted = {i: list(range(dv)) for i in range(n)}
    balls = dict(zip(wanted, refine._arb_rows(head, "output", wanted, 256)))
    for p, (i, k) in enumerate(pairs):
        a, b = refine._ends(balls[i][k])  # arb's ball at 256 bits: the exact value lies in [a, b]
        assert Fraction(float(lo[p])) <= a and b <= Fraction(float(hi[p])), (i, k)
        if ok[p]:
            assert (
                significant_exact(a, digits)
                == significant_exact(b, digits)
                == Fraction(int(q[p])) * Fraction(10) ** int(e[p])
            )


@settings(max_examples=60, deadline=None)
@given(heads())
def test_the_two_float_quotient_holds_the_exact_value(head):
    """quotients' q1 + q2 ± bound holds arb's ball at 256 bits, masks, keys below the exps' floor and
    scores far apart included (its ρ and η bounded a row at a time, each term by its largest)."""
    n, dv = head.Q.shape[0], head.V.shape[1]
    pairs = [(i, k) for i in range(n) for k in range(dv)]
    q1, q2, bound = doubled.quotients(head, pairs)
    wanted = {i: list(range(dv)) for i in range(n)}
    balls = dict(zip(wanted, refine._arb_rows(head, "output", wanted, 256)))
    for p, (i, k) in enumerate(pairs):
        if not math.isfinite(bound[p]):
            continue  # no bound: left to arb
        a, b = refine._ends(balls[i][k])
        middle, radius = Fraction(float(q1[p])) + Fraction(float(q2[p])), Fraction(float(bound[p]))
        assert middle - radius <= a and b <= middle + radius, (i, k)


def test_a_certificate_of_values_it_decides_verifies_with_both_verifiers(tmp_path, capsys):
    from symattn.cli.commands import main
    from symattn.verifier.__main__ import run

    head = seed_head()
    for name, a in (("q", head.Q), ("k", head.K), ("v", head.V)):
        np.save(tmp_path / f"{name}.npy", a.astype(np.float16))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    cert = tmp_path / "c.json"
    made = main(["compute", str(tmp_path / "s.toml"), "--certify", "--float64", "--digits", "13", "-o", str(cert)])
    assert made == 0
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["output"]["path"][1][1] == "a" and data["output"]["value"][1][1] == "-0.08092989732763"
    capsys.readouterr()
    assert main(["verify-certificate", str(cert)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith(f"{cert}: 8 values verified")
    code, lines = run(cert)
    assert code == 0 and lines[-1].startswith(f"{cert}: 8 values verified")


def test_the_constants_made_on_several_threads_at_once_are_the_ones_made_alone():
    """flint's precision is the process's: pieces on threads that made the table at once set and restored it
    under each other, and the exps' ρ came out of 53-bit balls (10^6 times wider: the 4096 certificate's
    double-word sums then left 1141 of 1269 outputs to arb, not 10)."""
    import threading

    from flint import ctx

    alone = doubled._constants()
    before = ctx.prec
    for _ in range(5):
        doubled._constants.cache_clear()
        start, made = threading.Barrier(4), []

        def make(start: threading.Barrier, made: list) -> None:
            start.wait()
            made.append(doubled._constants())

        threads = [threading.Thread(target=make, args=(start, made)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert ctx.prec == before
        for constants in made + [doubled._constants()]:
            assert constants["rho"] == alone["rho"] == 6.249480134389836e-22
            assert (constants["l1"], constants["l2"], constants["l3"]) == (alone["l1"], alone["l2"], alone["l3"])
            assert constants["hi"].tolist() == alone["hi"].tolist()
            assert constants["lo"].tolist() == alone["lo"].tolist()
