"""compare's verdict: FlashAttention's ratio against a naive result, and its rule or torch.allclose's, decided.

The figures checked at kernel shapes come from mpmath at 50 digits (scores as exact fractions), none of
symattn's engines.
"""

from __future__ import annotations

import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.exact.numeric import significant_exact
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.floats import read_result, ulp
from symattn.kernel.spec_comparison import compare
from symattn.kernel.tolerance import decide, parse_tolerance
from tests.test_kernel import exact_text, mp_row

SEED = builtin.example_path("seed", "en")
OUT = np.array(  # a float32 kernel's output of the seed: 0.744 ULP at o[0, 0], the rest correctly rounded
    [
        [4.5334482192993164, 2.5695719718933105],
        [2.8882336616516113, 4.8722429275512695],
        [4.3835783004760742, 2.7600455284118652],
    ],
    dtype=np.float32,
)


def files(tmp_path, out, naive=None):
    np.save(tmp_path / "o.npy", out)
    if naive is not None:
        np.save(tmp_path / "n.npy", naive)
    return str(tmp_path / "o.npy"), str(tmp_path / "n.npy")


def test_flash_ratio_and_verdict_text_and_json(tmp_path, capsys):
    naive = OUT.copy()
    naive[0, 0] = np.nextafter(naive[0, 0], np.float32(9))  # one float32 ULP (2^-21) further out
    o, n = files(tmp_path, OUT, naive)
    assert main(["compare", str(SEED), o, "--naive", n]) == 0
    text = capsys.readouterr().out
    # |out − exact| = 3.5482e-7 at o[0, 0]; |naive − exact| = 3.5482e-7 + 2^-21 = 8.3166e-7: 0.42664
    assert f"FlashAttention's ratio max|out − exact| / max|naive − exact|: 0.427 (naive: {n}).\n" in text
    assert "Pass by FlashAttention's rule, max|out − exact| ≤ 2·max|naive − exact| + 0.\n" in text
    assert "The largest absolute error |out − exact| is at o[0, 0].\n" in text
    assert main(["compare", str(SEED), o, "--naive", n, "--format", "json", "--rtol", "0.4"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ratio"] == "0.427"
    assert data["verdict"] == {
        "rule": "flash",
        "rtol": "0.4",
        "atol": "0",
        "pass": False,
        "worst_at": {"query": 0, "column": 0},
        "not_finite": False,
        "naive": n,
        "ratio": "0.427",
    }
    assert main(["compare", str(SEED), o, "--naive", n, "--lang", "zh"]) == 0
    assert "按 FlashAttention 的规则 max|out − exact| ≤ 2·max|naive − exact| + 0：通过。" in capsys.readouterr().out


def test_allclose_verdict_text_and_json(tmp_path, capsys):
    o, _ = files(tmp_path, OUT)
    assert main(["compare", str(SEED), o, "--atol", "1e-7", "--rtol", "0"]) == 1
    text = capsys.readouterr().out
    assert "Fail by torch.allclose's rule, |out − exact| ≤ 1e-7 + 0·|exact| for every entry.\n" in text
    # 3.5482e-7 / 1e-7
    assert "The worst entry is o[0, 0], where |out − exact| / (atol + rtol·|exact|) = 3.55.\n" in text
    assert main(["compare", str(SEED), o, "--rtol", "1e-7", "--format", "json"]) == 0
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    # 3.5482e-7 / (1e-8 + 1e-7 · 4.53345): torch's default atol of 1e-8
    assert verdict == {
        "rule": "allclose",
        "rtol": "1e-7",
        "atol": "1e-8",
        "pass": True,
        "worst_at": {"query": 0, "column": 0},
        "not_finite": False,
        "share": "0.766",
    }


def test_identical_results_have_ratio_one_and_nan_fails(tmp_path, capsys):
    o, n = files(tmp_path, OUT, OUT)
    assert main(["compare", str(SEED), o, "--naive", n, "--rtol", "1", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"]["ratio"] == "1.00"
    bad = OUT.copy()
    bad[2, 1] = np.nan
    o, n = files(tmp_path, OUT, bad)
    assert main(["compare", str(SEED), o, "--naive", n]) == 1
    text = capsys.readouterr().out
    assert f"Not finite at o[2, 1] (in {n}): no tolerance holds.\n" in text and "ratio" not in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--atol", "1e-3x"], "--atol: expected a number at least 0 such as 1e-3 or 0.01, got '1e-3x'"),
        (["--rtol", "-1"], "--rtol: expected a number at least 0 such as 1e-3 or 0.01, got '-1'"),
        (["--rtol", "１"], "--rtol: expected a number at least 0"),
        (["--rtol", "1e400"], "--rtol: beyond float64's range (at most about 1.8e308)"),  # a traceback before
        (["--atol", "2e308"], "--atol: beyond float64's range (at most about 1.8e308)"),
    ],
)
def test_bad_tolerances_are_one_line(tmp_path, capsys, args, message):
    o, _ = files(tmp_path, OUT)
    assert main(["compare", str(SEED), o, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_naive_result_of_another_shape_is_refused(tmp_path, capsys):
    o, n = files(tmp_path, OUT, OUT[:2])
    assert main(["compare", str(SEED), o, "--naive", n]) == 2
    assert f"{n}: shape: the naive result is 2×2 and the result is 3×2" in capsys.readouterr().err


def test_parse_tolerance_is_exact():
    assert parse_tolerance("1e-3", "--atol") == Fraction(1, 1000)
    assert parse_tolerance("0.1", "--atol") == Fraction(1, 10)  # the decimal typed, not the float near it
    with pytest.raises(SpecError):
        parse_tolerance("1e-3" + "0" * 70, "--atol")


def test_planted_errors_pass_with_naive_and_fail_a_tight_atol(tmp_path):
    """A 256 × 64 head of float32 inputs (the float64 path): planted errors dominate both results, so the
    ratio is their ratio, which mpmath gives independently."""
    rng = np.random.default_rng(22)
    n, d = 256, 64
    Q, K, V = (rng.standard_normal(s).astype(np.float32).astype(np.float64) for s in ((n, d), (n, d), (n, d)))
    Z = Q @ K.T / np.sqrt(d)
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    reference = (E / E.sum(axis=1, keepdims=True)) @ V  # float64, far within 1 float32 ULP
    out, naive = reference.astype(np.float32), reference.astype(np.float32)
    exact_out = mp_row(Q, K, V, 5)[1][7]
    exact_naive = mp_row(Q, K, V, 9)[1][3]

    def planted(exact, k):
        e = Fraction(mpmath.nstr(exact, 60, strip_zeros=False, min_fixed=-mpmath.inf, max_fixed=mpmath.inf))
        return np.float32(float(e + k * ulp(e, "float32"))), e

    out[5, 7], e_out = planted(exact_out, 500)
    naive[9, 3], e_naive = planted(exact_naive, -300)
    spec = {"Q": [[exact_text(x) for x in r] for r in Q], "K": [[exact_text(x) for x in r] for r in K]}
    spec["V"] = [[exact_text(x) for x in r] for r in V]
    np.save(tmp_path / "o.npy", out)
    np.save(tmp_path / "n.npy", naive)
    result, naive_result = read_result(tmp_path / "o.npy"), read_result(tmp_path / "n.npy")
    c = compare(spec, result)
    assert c.refined is not None  # the float64 path
    want = significant_exact(abs(Fraction(float(out[5, 7])) - e_out) / abs(Fraction(float(naive[9, 3])) - e_naive), 3)
    flash = decide(result, c.enclose(), naive_result)
    assert (flash.rule, flash.passed, flash.worst, flash.ratio) == ("flash", True, (5, 7), want)
    assert str(want) == "1.67"  # 500 ULP against 300 ULP of values of about the same binade
    tight = decide(result, c.enclose(), None, Fraction(0), Fraction(1, 10**6))
    assert (tight.passed, tight.worst) == (False, (5, 7))
    err = abs(Fraction(float(out[5, 7])) - e_out)
    assert tight.share == significant_exact(err * 10**6, 3) and tight.share > 1


@pytest.mark.parametrize("quantity", ["output", "weights", "lse"])
def test_narrowed_ends_lie_inside_the_float64_bounds(quantity):
    """Level 1 (arb) narrows the float64 path's intervals of any quantity; each still holds mpmath's value."""
    rng = np.random.default_rng(5)
    Q, K, V = (rng.standard_normal((6, 4)).astype(np.float32).astype(np.float64) for _ in range(3))
    spec = {name: [[exact_text(x) for x in r] for r in M] for name, M in (("Q", Q), ("K", K), ("V", V))}
    rows = 1 if quantity == "lse" else 6
    cols = 6 if quantity != "output" else 4
    from symattn.input.floats import FloatResult

    zero = FloatResult("z.json", "float32", tuple((Fraction(0),) * cols for _ in range(rows)), ())
    enclosure = compare(spec, zero, quantity).enclose()
    points = [(0, 1), (0, 3)]
    base = enclosure.at(points, 0)
    arb_level = 2 if quantity == "output" else 1  # outputs: level 1 is the error-free sum (Sum2)
    for level in range(1, arb_level + 1):
        narrow = enclosure.at(points, level)
        for i, j in points:
            (a, b), (c, d) = base[(i, j)], narrow[(i, j)]
            assert a <= c <= d <= b
            if level == arb_level:
                assert d - c < (b - a) / 1000
            if quantity == "lse":
                with mpmath.workdps(60):
                    s = [sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(Q[j], k)) for k in K]
                    value = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(x.numerator) / x.denominator / 2) for x in s))
            else:
                weights, output = mp_row(Q, K, V, i)
                value = (weights if quantity == "weights" else output)[j]
            with mpmath.workdps(60):
                assert mpmath.mpf(c.numerator) / c.denominator <= value <= mpmath.mpf(d.numerator) / d.denominator


def test_row_relative_error_of_an_output_near_zero_after_cancellation(tmp_path, capsys):
    """An output column that cancels to about 1e-4 in a row of magnitude about 1: thousands of ULPs and a
    large relative error, a small error relative to the row. The figures come from mpmath at 50 digits."""
    rng = np.random.default_rng(3)
    n, d = 64, 16
    Q, K = (rng.standard_normal((n, d)).astype(np.float32).astype(np.float64) for _ in range(2))
    V = rng.standard_normal((n, 4)).astype(np.float32).astype(np.float64)
    weights = mp_row(Q, K, V, 0)[0]
    with mpmath.workdps(60):  # V's column 4 chosen so that row 1's output there nearly cancels
        shift = mpmath.fsum(w * float(V[j][3]) for j, w in enumerate(weights)) - mpmath.mpf("1e-4")
    V[:, 3] = (V[:, 3] - float(shift)).astype(np.float32)
    spec = {name: [[exact_text(x) for x in r] for r in M] for name, M in (("Q", Q), ("K", K), ("V", V))}
    output = mp_row(Q, K, V, 0)[1]
    with mpmath.workdps(60):
        exact = [Fraction(mpmath.nstr(o, 55, min_fixed=-mpmath.inf, max_fixed=mpmath.inf)) for o in output]
    out = np.zeros((n, 4), dtype=np.float32)
    out[0] = [float(e) for e in exact]
    out[0, 3] = np.float32(float(exact[3] * (1 + Fraction(1, 1000))))  # relative 1e-3 where it cancels
    np.save(tmp_path / "c.npy", out)
    data = compare(spec, read_result(tmp_path / "c.npy"))
    e = data.entries[3]
    scale = max(abs(x) for x in exact)
    assert abs(exact[3]) < Fraction(1, 1000) < scale
    assert e.row_relative == significant_exact(abs(Fraction(float(out[0, 3])) - exact[3]) / scale, 3)
    assert e.relative == significant_exact(abs(Fraction(float(out[0, 3])) - exact[3]) / abs(exact[3]), 3)
    assert (str(e.ulps), str(e.relative), str(e.row_relative)) == ("1.37E+4", "0.00100", "2.21E-7")


def mp_gradients(Q, K, V, dO):
    """dQ, dK, dV of softmax(Q Kᵀ/√d) V for dO, by mpmath at 50 digits (scores as exact fractions)."""
    with mpmath.workdps(60):
        n, m, d, dv = len(Q), len(K), len(Q[0]), len(V[0])
        c = 1 / mpmath.sqrt(d)
        S = [
            [sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(Q[i], K[j])) for j in range(m)]
            for i in range(n)
        ]
        A = []
        for i in range(n):
            e = [mpmath.exp(mpmath.mpf(s.numerator) / s.denominator * c) for s in S[i]]
            total = mpmath.fsum(e)
            A.append([x / total for x in e])
        dA = [[mpmath.fsum(float(dO[i][k]) * float(V[j][k]) for k in range(dv)) for j in range(m)] for i in range(n)]
        dS = []
        for i in range(n):
            dot = mpmath.fsum(dA[i][j] * A[i][j] for j in range(m))
            dS.append([A[i][j] * (dA[i][j] - dot) * c for j in range(m)])
        dQ = [[mpmath.fsum(dS[i][j] * float(K[j][k]) for j in range(m)) for k in range(d)] for i in range(n)]
        dK = [[mpmath.fsum(dS[i][j] * float(Q[i][k]) for i in range(n)) for k in range(d)] for j in range(m)]
        dV = [[mpmath.fsum(A[i][j] * float(dO[i][k]) for i in range(n)) for k in range(dv)] for j in range(m)]
        return {"dq": dQ, "dk": dK, "dv": dV}


@pytest.mark.parametrize("quantity", ["dq", "dk", "dv"])
def test_gradients_against_torch_autograd_and_mpmath(tmp_path, capsys, quantity):
    """torch's float32 autograd measured: the exact values agree with torch's float64 autograd, and every
    ULP figure with mpmath's 50 digits."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng({"dq": 1, "dk": 2, "dv": 3}[quantity])
    n, m, d, dv = 12, 10, 4, 3
    Q, K, V, dO = (rng.standard_normal(s).astype(np.float32) for s in ((n, d), (m, d), (m, dv), (n, dv)))
    spec = {name: [[exact_text(x) for x in r] for r in M] for name, M in (("Q", Q), ("K", K), ("V", V))}
    grads = {}
    for dtype in (torch.float32, torch.float64):
        q, k, v = (torch.tensor(M, dtype=dtype, requires_grad=True) for M in (Q, K, V))
        o = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]
        o.backward(torch.tensor(dO, dtype=dtype))
        grads[dtype] = {"dq": q.grad, "dk": k.grad, "dv": v.grad}[quantity].numpy()
    np.save(tmp_path / "g.npy", grads[torch.float32])
    np.save(tmp_path / "dO.npy", dO)
    c = compare(spec, read_result(tmp_path / "g.npy"), quantity, grad_output=read_result(tmp_path / "dO.npy"))
    assert c.quantity == {"dq": "dQ", "dk": "dK", "dv": "dV"}[quantity]
    reference = grads[torch.float64]
    for e in c.entries:
        assert abs(float(e.exact) - reference[e.row, e.col]) <= 1e-12 * max(1.0, abs(reference[e.row, e.col]))
    exact = mp_gradients(Q, K, V, dO)[quantity]
    for e in c.entries[::5]:
        x = float(grads[torch.float32][e.row, e.col])
        with mpmath.workdps(60):
            want = Fraction(mpmath.nstr(exact[e.row][e.col], 55, min_fixed=-mpmath.inf, max_fixed=mpmath.inf))
        assert e.ulps == significant_exact(abs(Fraction(x) - want) / ulp(want, "float32"), 3), (e.row, e.col)
    cli = ["compare", "s.json", str(tmp_path / "g.npy"), "--quantity", quantity]
    (tmp_path / "s.json").write_text(json.dumps(spec))
    cli[1] = str(tmp_path / "s.json")
    assert main([*cli, "--grad-output", str(tmp_path / "dO.npy"), "--format", "json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["quantity"] == c.quantity
    assert main(cli) == 2
    assert "--grad-output: missing: --quantity dq, dk and dv need the dO file they are for" in capsys.readouterr().err


def test_gradients_refuse_a_wrong_do_and_too_many_tokens(tmp_path, capsys, monkeypatch):
    from symattn.input import limits

    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"Q": [["0.1", "0"]] * 3, "K": [["0", "1"]] * 3, "V": [["1"]] * 3}))
    np.save(tmp_path / "g.npy", np.zeros((3, 2), dtype=np.float32))
    np.save(tmp_path / "dO.npy", np.zeros((3, 2), dtype=np.float32))
    args = ["compare", str(spec), str(tmp_path / "g.npy"), "--quantity", "dq", "--grad-output"]
    assert main([*args, str(tmp_path / "dO.npy")]) == 2
    assert f"{tmp_path / 'dO.npy'}: shape: dO is 3×2 and O is 3×1" in capsys.readouterr().err
    np.save(tmp_path / "dO.npy", np.zeros((3, 1), dtype=np.float32))
    monkeypatch.setattr(limits, "GRADIENT_TOKENS", 2)
    assert main([*args, str(tmp_path / "dO.npy")]) == 2  # 0.1 is no float: the exact path's limit
    assert "3 tokens; --quantity dq, dk and dv take at most 2 (the exact backward pass)" in capsys.readouterr().err
    spec.write_text(json.dumps({"Q": [["0.5", "0"]] * 3, "K": [["0", "1"]] * 3, "V": [["1"]] * 3}))
    assert main([*args, str(tmp_path / "dO.npy")]) == 0  # floats: the float64 path, past the exact path's limit
    capsys.readouterr()
    monkeypatch.setattr(limits, "KERNEL_GRADIENT_TOKENS", 2)
    assert main([*args, str(tmp_path / "dO.npy")]) == 2
    assert "3 tokens; --quantity dq, dk and dv take at most 2 (the float64 path)" in capsys.readouterr().err


def test_the_text_report_shows_a_hostile_files_name_escaped(tmp_path, capsys):
    """A result's and a naive result's names as a one-line error shows them: no escape sequence reaches the
    terminal, no right-to-left override turns the line around."""
    name = "ev\x1b[2Jil\u202e"
    o, n = (str(tmp_path / f"{name}{x}.npy") for x in ("o", "n"))
    np.save(o, OUT)
    np.save(n, OUT)
    assert main(["compare", str(SEED), o, "--naive", n]) == 0
    text = capsys.readouterr().out
    shown = str(tmp_path) + "/ev\\x1b[2Jil\\u202e"
    assert text.splitlines()[0] == f"The output of {shown}o.npy (float32) against the exact values"
    assert (
        text.splitlines()[7]
        == f"FlashAttention's ratio max|out − exact| / max|naive − exact|: 1.00 (naive: {shown}n.npy)."
    )
    assert "\x1b" not in text and "\u202e" not in text


def test_a_worst_place_not_told_apart_from_others_says_so():
    """Four shares agree to 14 digits (GQA heads of one key/value head, bfloat16 outputs): the verdict named
    out[1, 0, 11, 3] as the worst, where mpmath at 200 digits finds out[1, 1, 8, 3] larger by 1e-14. The
    place is now one of the 4 that may hold it, as for overlapping error balls (a helper's randomized grid)."""
    torch = pytest.importorskip("torch")
    from symattn.kernel import compare

    g = torch.Generator().manual_seed(262)
    q = torch.randn(2, 4, 22, 8, generator=g) * 3
    k = torch.randn(2, 2, 24, 8, generator=g) * 3
    v = torch.randn(2, 2, 24, 8, generator=g)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=2.0, enable_gqa=True).to(torch.bfloat16)
    verdict = json.loads(compare(out, q, k, v, scale=2.0, rtol=1e-3, atol=1e-5).to_json())["verdict"]
    assert verdict == {
        "rule": "allclose",
        "rtol": "0.001",
        "atol": "0.00001",
        "pass": False,
        "worst_at": {"batch": 1, "head": 0, "query": 11, "column": 3},
        "not_finite": False,
        "worst_places": 4,
        "share": "3.50",
    }
