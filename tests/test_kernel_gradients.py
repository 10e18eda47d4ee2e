"""compare --quantity dq|dk|dv on the float64 path (symattn/exact/float64_backward.py): the bound holds, the
figures are right, and they are the exact path's where both apply.

The exact values come from the exact backward model (SymPy), from mpmath at 50 digits with exact fractions
for the scores, or from arb balls at 256 bits (themselves checked against the exact model here).
"""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.exact.factory import build
from symattn.exact.numeric import significant_exact
from symattn.input import limits
from symattn.input.errors import EvaluationError
from symattn.input.floats import FloatResult, ulp
from symattn.input.spec import load_spec
from symattn.kernel import float64, float64_backward, refine
from symattn.kernel import inputs as kernel_inputs
from symattn.kernel.spec_comparison import compare
from tests.test_kernel import exact_text, in_format
from tests.test_kernel import heads as forward_heads

ROOT = Path(__file__).resolve().parent.parent
GRADIENTS = {"dq": "dQ", "dk": "dK", "dv": "dV"}
FORMATS = ["float16", "float32"]


def matrix(M) -> list[list[str]]:
    return [[exact_text(x) for x in row] for row in M]


def result_of(x: np.ndarray, fmt: str) -> FloatResult:
    rows = tuple(tuple(Fraction(float(v)) for v in row) for row in x)
    return FloatResult("r.npy", fmt, rows, (), array=np.asarray(x, dtype=np.float64))


def head_of(Q, K, V, dO, allowed=None) -> float64_backward.GradientHead:
    return float64_backward.GradientHead(Q, K, V, 1 / np.sqrt(Q.shape[1]), 3 * float64.U, None, allowed, dO)


def naive(Q, K, V, dO, allowed=None, dtype=np.float32) -> dict[str, np.ndarray]:
    """The backward pass computed in ``dtype`` (a naive kernel of that dtype)."""
    Q, K, V, dO = (M.astype(dtype) for M in (Q, K, V, dO))
    c = dtype(1 / np.sqrt(Q.shape[1]))
    Z = (Q @ K.T) * c
    if allowed is not None:
        Z = np.where(allowed, Z, -np.inf)
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    A = E / E.sum(axis=1, keepdims=True)
    dS = A * (dO @ V.T - np.sum(dO * (A @ V), axis=1, keepdims=True))
    return {"dq": c * (dS @ K), "dk": c * (dS.T @ Q), "dv": A.T @ dO}


def arb_values(head, quantity: str, bits: int = 256) -> dict[tuple[int, int], tuple[Fraction, Fraction]]:
    """Every entry's arb ends at ``bits`` bits."""
    rows = head.Q.shape[0] if quantity == "dQ" else head.K.shape[0]
    width = {"dQ": head.Q.shape[1], "dK": head.Q.shape[1], "dV": head.V.shape[1]}[quantity]
    wanted = {i: list(range(width)) for i in range(rows)}
    return {
        (i, j): refine._ends(b) for i, balls in refine._by_rows(head, quantity, wanted, bits) for j, b in balls.items()
    }


def mp_dq_row(Q, K, V, dO, i: int) -> list:
    """Row i of dQ by mpmath at 50 digits (scores and dO·Vᵀ as exact fractions)."""
    with mpmath.workdps(60):
        q = [Fraction(float(x)) for x in Q[i]]
        g = [Fraction(float(x)) for x in dO[i]]
        scores = [sum((Fraction(float(a)) * b for a, b in zip(k, q)), Fraction(0)) for k in K]
        dA = [sum((Fraction(float(a)) * b for a, b in zip(v, g)), Fraction(0)) for v in V]
        c = 1 / mpmath.sqrt(len(q))
        top = max(scores)
        e = [mpmath.exp(mpmath.mpf((s - top).numerator) / (s - top).denominator * c) for s in scores]
        total = mpmath.fsum(e)
        A = [x / total for x in e]
        D = mpmath.fsum(a * (mpmath.mpf(x.numerator) / x.denominator) for a, x in zip(A, dA))
        dS = [a * (mpmath.mpf(x.numerator) / x.denominator - D) for a, x in zip(A, dA)]
        return [c * mpmath.fsum(s * float(K[j][k]) for j, s in enumerate(dS)) for k in range(len(q))]


def mp_fraction(x) -> Fraction:
    with mpmath.workdps(60):
        return Fraction(mpmath.nstr(x, 55, strip_zeros=False, min_fixed=-mpmath.inf, max_fixed=mpmath.inf))


def planted(x: np.ndarray, fmt: str, where: dict[tuple[int, int], int]) -> np.ndarray:
    """x with k ULPs added toward the middle of the binade at each (i, j): k: exact, and the ULP stays."""
    x = x.copy()
    for (i, j), k in where.items():
        m, _ = np.frexp(abs(x[i, j]))
        step = float(ulp(Fraction(x[i, j]), fmt)) * (1 if m < 0.75 else -1) * np.sign(x[i, j])
        x[i, j] += k * step
    return x


@pytest.mark.parametrize("seed", range(4))
def test_the_exact_backward_model_lies_within_the_bound_and_the_arb_balls(seed):
    rng = np.random.default_rng(seed)
    n, m, d, dv = 5, 4, 3, 2
    fmt = ("float16", "float32")[seed % 2]
    Q, K, V, dO = (
        in_format(rng.standard_normal(s) * (1, 4)[seed // 2], fmt) for s in ((n, d), (m, d), (m, dv), (n, dv))
    )
    mask = ("none", "causal")[seed % 2]
    spec = load_spec(
        {"Q": matrix(Q), "K": matrix(K), "V": matrix(V), "mask": mask, "backward": {"grad_output": matrix(dO)}}
    )
    model = build(spec).backward
    head = head_of(Q, K, V, dO, None if spec.allowed is None else np.array(spec.allowed))
    for quantity in float64_backward.GRADIENTS:
        lo, hi = float64.interval(*float64_backward.gradient(head, quantity))
        rationals, shown = model.rationals(quantity), model.significant(quantity, 40)
        balls = arb_values(head, quantity)
        for i, row in enumerate(shown):
            for j, value in enumerate(row):
                exact = rationals[i][j]
                half = Fraction(0) if exact is not None else Fraction(1, 2) * Fraction(10) ** value.as_tuple().exponent
                middle = exact if exact is not None else Fraction(value)
                a, b = balls[(i, j)]
                assert Fraction(float(lo[i, j])) <= middle - half and middle + half <= Fraction(float(hi[i, j]))
                assert a <= middle + half and middle - half <= b, (quantity, i, j)  # the ball holds it too


@st.composite
def heads(draw):
    """test_kernel's random heads, masks included, with a dO of float16 or float32 values."""
    head = draw(forward_heads())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.01, 1.0, 60.0]))
    dO = in_format(rng.standard_normal((head.Q.shape[0], head.V.shape[1])) * scale, draw(st.sampled_from(FORMATS)))
    return float64_backward.GradientHead(**{f: getattr(head, f) for f in head.__dataclass_fields__}, dO=dO)


@settings(max_examples=60, deadline=None)
@given(heads())
def test_the_arb_value_lies_within_the_float64_bound(head):
    for quantity in float64_backward.GRADIENTS:
        lo, hi = float64.interval(*float64_backward.gradient(head, quantity))
        for (i, j), (a, b) in arb_values(head, quantity).items():
            assert Fraction(float(lo[i, j])) <= a and b <= Fraction(float(hi[i, j])), (quantity, i, j)


def test_the_figures_are_the_exact_paths_where_both_apply(monkeypatch):
    rng = np.random.default_rng(3)
    n, m, d, dv = 9, 7, 4, 3
    Q, K, V, dO = (in_format(rng.standard_normal(s), "float16") for s in ((n, d), (m, d), (m, dv), (n, dv)))
    for mask in ("none", "causal"):  # causal: the first query's one key makes its dQ exactly 0
        spec = load_spec({"Q": matrix(Q), "K": matrix(K), "V": matrix(V), "mask": mask})
        allowed = None if spec.allowed is None else np.array(spec.allowed)
        grads = naive(Q, K, V, dO, allowed)
        for quantity in GRADIENTS:
            result, dO_file = result_of(grads[quantity].astype(np.float64), "float32"), result_of(dO, "float16")
            fast = compare(spec, result, quantity, grad_output=dO_file)
            with monkeypatch.context() as mp:
                mp.setattr(kernel_inputs, "of_spec", lambda spec, quantity, grad_output: None)
                slow = compare(spec, result, quantity, grad_output=dO_file)
            assert fast.refined is not None and slow.refined is None and fast.quantity == slow.quantity
            assert [(e.ulps, e.relative, e.bucket, e.row_relative) for e in fast.entries] == [
                (e.ulps, e.relative, e.bucket, e.row_relative) for e in slow.entries
            ]
            for f, s in zip(fast.entries, slow.entries):  # the shown digits of the exact value: a prefix
                assert significant_exact(Fraction(str(s.exact)), len(f.exact.as_tuple().digits)) == f.exact


@pytest.mark.parametrize("quantity", ["dq", "dk", "dv"])
def test_planted_errors_of_known_ulps_are_found_exactly_at_a_kernel_shape(quantity):
    rng = np.random.default_rng({"dq": 1, "dk": 2, "dv": 3}[quantity])
    fmt = {"dq": "float32", "dk": "float16", "dv": "bfloat16"}[quantity]
    n, d = 256, 64
    Q, K, V, dO = (in_format(rng.standard_normal((n, d)), fmt) for _ in range(4))
    x = in_format(naive(Q, K, V, dO, dtype=np.float64)[quantity], fmt)  # within about half an ULP
    spots = {(3, 5): 7, (100, 0): 40, (255, 63): 3000}
    x = planted(x, fmt, spots)
    spec = load_spec({"Q": matrix(Q), "K": matrix(K), "V": matrix(V)})
    c = compare(spec, result_of(x, fmt), quantity, grad_output=result_of(dO, fmt))
    assert c.refined is not None and c.quantity == GRADIENTS[quantity]
    assert (c.worst.row, c.worst.col) == (255, 63)
    by_position = {(e.row, e.col): e for e in c.entries}
    checked = [*spots, (0, 0), (17, 33), (200, 1)]
    if quantity == "dq":  # mpmath, row by row
        exact = {(i, j): mp_fraction(mp_dq_row(Q, K, V, dO, i)[j]) for i, j in checked}
    else:  # arb's balls, narrow at 256 bits: their middle is far closer than the figures' digits
        head = head_of(Q, K, V, dO)
        wanted: dict[int, list[int]] = {}
        for i, j in checked:
            wanted.setdefault(i, []).append(j)
        balls = dict(refine._by_rows(head, GRADIENTS[quantity], dict(sorted(wanted.items())), 256))
        exact = {(i, j): sum(refine._ends(balls[i][j]), Fraction(0)) / 2 for i, j in checked}
    for (i, j), value in exact.items():
        want = significant_exact(abs(Fraction(x[i, j]) - value) / ulp(value, fmt), 3)
        assert by_position[(i, j)].ulps == want, (i, j)
    for (i, j), k in spots.items():  # k ULPs away from a value within half an ULP
        assert k - 1 <= by_position[(i, j)].ulps <= k + 1


def test_torch_autograd_float32_gradients_end_to_end(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    n, d = 96, 32
    Q, K, V, dO = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(4))
    q, k, v = (torch.tensor(M, requires_grad=True) for M in (Q, K, V))
    out = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
    out.backward(torch.tensor(dO))
    for name, M in (("q", Q), ("k", K), ("v", V), ("do", dO)):
        np.save(tmp_path / f"{name}.npy", M)
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\nmask = "causal"\n')
    spec = load_spec(tmp_path / "s.toml")
    for quantity, grad in (("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        np.save(tmp_path / "g.npy", grad.numpy())
        run = subprocess.run(
            [sys.executable, "-m", "symattn", "compare", "s.toml", "g.npy", "--quantity", quantity]
            + ["--grad-output", "do.npy", "--format", "json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        assert run.returncode in (0, 1), run.stderr
        data = json.loads(run.stdout)
        assert data["engine"]["path"] == "float64" and data["quantity"] == GRADIENTS[quantity]
        assert data["summary"]["entries"] == n * d
        x = grad.numpy().astype(np.float64)
        row = "query" if quantity == "dq" else "key"  # dK's and dV's rows are keys'
        by_position = {(e[row], e["column"]): e for e in data["entries"]}
        head = head_of(*(M.astype(np.float64) for M in (Q, K, V, dO)), np.array(spec.allowed))
        worst = (data["summary"]["max_ulps_at"][row], data["summary"]["max_ulps_at"]["column"])
        points = [(0, 0), (40, 7), (95, 31), worst]
        wanted: dict[int, list[int]] = {}
        for i, j in points:
            wanted.setdefault(i, []).append(j)
        balls = dict(refine._by_rows(head, GRADIENTS[quantity], dict(sorted(wanted.items())), 256))
        for i, j in points:
            a, b = refine._ends(balls[i][j])
            exact = (a + b) / 2
            if exact == 0:  # the first query's dQ: exactly 0
                assert by_position[(i, j)]["relative"] is None
                continue
            want = significant_exact(abs(Fraction(x[i, j]) - exact) / ulp(exact, "float32"), 3)
            assert Decimal(by_position[(i, j)]["ulps"]) == want, (quantity, i, j)


def test_the_undecided_past_arbs_limit_are_refused_in_one_line(monkeypatch):
    rng = np.random.default_rng(8)
    Q, K, V, dO = (in_format(rng.standard_normal((8, 4)), "float16") for _ in range(4))
    spec = load_spec({"Q": matrix(Q), "K": matrix(K), "V": matrix(V)})
    result = result_of(in_format(naive(Q, K, V, dO)["dk"].astype(np.float64), "float32"), "float32")
    exact = float64_backward.gradient
    monkeypatch.setattr(float64_backward, "gradient", lambda h, q: (lambda v, e: (v, e * 1e9))(*exact(h, q)))
    monkeypatch.setattr(limits, "GRADIENT_REFINE_SCORES", 63)
    with pytest.raises(EvaluationError) as caught:
        compare(spec, result, "dk", grad_output=result_of(dO, "float16"))
    assert str(caught.value).startswith("r.npy: the error of dk[")  # a key's row, 0-based
    assert str(caught.value).endswith(
        "is not decided by the float64 bound, and refining it with arb takes all 8×8 scores; at most 63 are allowed"
    )
    monkeypatch.setattr(limits, "GRADIENT_REFINE_SCORES", 64)  # 8 × 8: arb decides them
    assert compare(spec, result, "dk", grad_output=result_of(dO, "float16")).refined > 0


def test_queries_of_equal_scores_have_their_dq_exactly():
    """Three equal keys score every query alike: the weights are 1/3 and dQ = c·dS·K is exactly 0 (dS sums
    to 0), which no arb ball around it decides; the exact rational does."""
    rng = np.random.default_rng(4)
    Q, V, dO = (rng.integers(-3, 4, s).astype(np.float64) for s in ((3, 4), (3, 2), (3, 2)))
    K = np.repeat(rng.integers(-3, 4, (1, 4)).astype(np.float64), 3, axis=0)
    x = in_format(naive(Q, K, V, dO, dtype=np.float64)["dq"], "float32")
    x[0, 0] = 2.0**-30  # one entry off, by far more than a ULP of 0
    spec = load_spec({"Q": matrix(Q), "K": matrix(K), "V": matrix(V)})
    c = compare(spec, result_of(x, "float32"), "dq", grad_output=result_of(dO, "float32"))
    assert c.refined == 12 and [e.exact for e in c.entries] == [Decimal(0)] * 12
    assert [e.ulps == 0 for e in c.entries] == [v == 0 for v in x.flat]
