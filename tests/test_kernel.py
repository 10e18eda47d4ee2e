"""compare's float64 path (symattn/exact/float64.py, checking/kernel.py): the bound holds, the figures are right.

The exact values of the checks come from mpmath at 50 digits with exact fractions for the scores: none
of symattn's engines.
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

from symattn.exact.numeric import significant_exact
from symattn.input.floats import FloatResult, ulp
from symattn.input.spec import load_spec
from symattn.kernel import float64, logsumexp, refine
from symattn.kernel import heads as kernel
from symattn.kernel.spec_comparison import compare

ROOT = Path(__file__).resolve().parent.parent
DIGITS = 50


def exact_text(x: float) -> str:
    return str(Decimal(float(x)))  # a float's exact decimal expansion: the spec reads it as that rational


def spec_of(Q, K, V, mask: str = "none"):
    matrices = {name: [[exact_text(x) for x in row] for row in M] for name, M in (("Q", Q), ("K", K), ("V", V))}
    return load_spec({**matrices, "mask": mask})


def in_format(a: np.ndarray, fmt: str) -> np.ndarray:
    """a rounded to the nearest value of ``fmt`` (bfloat16: through torch), back as float64."""
    if fmt == "bfloat16":
        torch = pytest.importorskip("torch")
        return torch.tensor(a).to(torch.bfloat16).to(torch.float64).numpy()
    return a.astype({"float16": np.float16, "float32": np.float32, "float64": np.float64}[fmt]).astype(np.float64)


def mp_row(Q, K, V, i: int, allowed=None) -> tuple[list, list]:
    """Row i's weights and output by mpmath at 50 digits (scores as exact fractions)."""
    with mpmath.workdps(DIGITS + 10):
        d = len(Q[0])
        q = [Fraction(float(x)) for x in Q[i]]
        scores = [sum((Fraction(float(a)) * b for a, b in zip(k, q)), Fraction(0)) for k in K]
        c = 1 / mpmath.sqrt(d)
        keep = [allowed is None or allowed[i][j] for j in range(len(K))]
        e = [
            mpmath.exp(mpmath.mpf(s.numerator) / s.denominator * c) if ok else mpmath.mpf(0)
            for s, ok in zip(scores, keep)
        ]
        total = mpmath.fsum(e)
        weights = [x / total for x in e]
        output = [mpmath.fsum(w * float(V[j][k]) for j, w in enumerate(weights)) for k in range(len(V[0]))]
        return weights, output


def ulps_of(x: float, exact, fmt: str) -> Decimal:
    """|x − exact| in ULPs of exact, to three digits, from the 50-digit value."""
    with mpmath.workdps(DIGITS + 10):
        e = Fraction(mpmath.nstr(exact, DIGITS + 5, strip_zeros=False, min_fixed=-mpmath.inf, max_fixed=mpmath.inf))
    return significant_exact(abs(Fraction(x) - e) / ulp(e, fmt), 3)


def result_of(x: np.ndarray, fmt: str) -> FloatResult:
    return FloatResult("r.npy", fmt, tuple(tuple(Fraction(float(v)) for v in row) for row in x), ())


def float_attention(Q, K, V, allowed=None) -> tuple[np.ndarray, np.ndarray]:
    Z = (Q @ K.T) / np.sqrt(Q.shape[1])
    if allowed is not None:
        Z = np.where(allowed, Z, -np.inf)
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    A = E / E.sum(axis=1, keepdims=True)
    return A, A @ V


def test_exp_bounded_within_its_bound_against_mpmath():
    rng = np.random.default_rng(7)
    t = np.concatenate([-rng.random(2000) * 700, -rng.random(500) * 1e-3, [0.0, -700.0, -0.5 * np.log(2), -np.log(2)]])
    got = float64.exp_bounded(t)
    with mpmath.workdps(40):
        worst = max(abs(mpmath.mpf(float(g)) / mpmath.exp(mpmath.mpf(float(x))) - 1) for g, x in zip(got, t))
    assert worst <= float64.RHO
    assert float64.exp_bounded(np.array([-701.0, -np.inf]))[0] == 0.0


small = st.integers(1, 6)


@st.composite
def heads(draw):
    n, m, d, dv = draw(small), draw(small), draw(small), draw(small)
    fmt = draw(st.sampled_from(["float16", "float32"]))
    scale = draw(st.sampled_from([0.01, 1.0, 8.0, 60.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    Q, K, V = (in_format(rng.standard_normal(shape) * scale, fmt) for shape in ((n, d), (m, d), (m, dv)))
    allowed = None
    if draw(st.booleans()):
        allowed = rng.random((n, m)) < 0.6
        allowed[np.arange(n), rng.integers(0, m, n)] = True  # every query attends to a key
    return float64.Head(Q, K, V, 1 / np.sqrt(d), 3 * float64.U, None, allowed)


@settings(max_examples=150, deadline=None)
@given(heads())
def test_the_arb_value_lies_within_the_float64_bound(head):
    block = next(float64.blocks(head, weights=True))
    lse, lse_error = logsumexp.lse(block)
    lse2, lse2_error = logsumexp.lse(block, "2")
    for quantity, value, error in (
        ("weights", block.weights, block.weights_error),
        ("output", block.output, block.output_error),
        ("lse", lse[:, None], lse_error[:, None]),
        ("lse2", lse2[:, None], lse2_error[:, None]),
    ):
        lo, hi = float64.interval(value, error)
        wanted = {i: list(range(value.shape[1])) for i in range(head.Q.shape[0])}
        for i, balls in zip(wanted, refine._arb_rows(head, quantity, wanted, 256)):
            assert sorted(balls) == wanted[i]
            for j, ball in balls.items():
                a, b = refine._ends(ball)
                assert Fraction(float(lo[i, j])) <= a and b <= Fraction(float(hi[i, j])), (quantity, i, j)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float32"])
def test_planted_errors_of_known_ulps_are_found_exactly(fmt):
    rng = np.random.default_rng({"float16": 1, "bfloat16": 2, "float32": 3}[fmt])
    n, d = 256, 64
    Q, K, V = (in_format(rng.standard_normal((n, d)), fmt) for _ in range(3))
    _, O = float_attention(Q, K, V)
    x = in_format(O, fmt)
    planted = {(3, 5): 7, (100, 0): 40, (255, 63): 60}
    for (i, j), k in planted.items():  # k ULPs toward the middle of the binade: exact, and the ULP stays
        m, _ = np.frexp(abs(x[i, j]))
        step = float(ulp(Fraction(x[i, j]), fmt)) * (1 if m < 0.75 else -1) * np.sign(x[i, j])
        x[i, j] += k * step
    c = compare(spec_of(Q, K, V), result_of(x, fmt))
    assert c.refined is not None  # the float64 path
    by_position = {(e.row, e.col): e for e in c.entries}
    assert (c.worst.row, c.worst.col) == (255, 63)
    for i, j in [*planted, (0, 0), (17, 33), (200, 1)]:
        _, output = mp_row(Q, K, V, i)
        assert by_position[(i, j)].ulps == ulps_of(x[i, j], output[j], fmt), (i, j)
    for (i, j), k in planted.items():  # k ULPs away from a value within half an ULP
        assert k - 1 <= by_position[(i, j)].ulps <= k + 1


def test_float64_path_agrees_with_the_exact_path_on_small_heads(monkeypatch):
    rng = np.random.default_rng(11)
    Q, K, V = (in_format(rng.standard_normal((12, 6)), "float16") for _ in range(3))
    for mask in ("none", "causal"):
        spec = spec_of(Q, K, V, mask)
        allowed = None if spec.allowed is None else np.array(spec.allowed)
        A, O = float_attention(Q, K, V, allowed)
        for quantity, x in (("output", O), ("weights", A)):
            result = result_of(in_format(x, "float32"), "float32")
            fast = compare(spec, result, quantity)
            with monkeypatch.context() as m:
                m.setattr(kernel, "heads_of", lambda spec, quantity: None)
                slow = compare(spec, result, quantity)
            assert fast.refined is not None and slow.refined is None
            assert [(e.ulps, e.relative, e.bucket) for e in fast.entries] == [
                (e.ulps, e.relative, e.bucket) for e in slow.entries
            ]
            for f, s in zip(fast.entries, slow.entries):  # the shown digits of the exact value: a prefix
                assert significant_exact(Fraction(str(s.exact)), len(f.exact.as_tuple().digits)) == f.exact


def test_decimal_inputs_keep_the_exact_path(seed):
    spec = load_spec(seed)
    assert kernel.head_of(spec) is None  # 0.1 is no float: the exact path decides


def test_torch_cpu_sdpa_float32_end_to_end(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    Q, K, V = (rng.standard_normal((96, 32)).astype(np.float32) for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(M)[None] for M in (Q, K, V)))[0]
    np.save(tmp_path / "o.npy", out.numpy())
    rows = lambda M: "[" + ", ".join("[" + ", ".join(exact_text(x) for x in r) + "]" for r in M) + "]"  # noqa: E731
    (tmp_path / "s.toml").write_text(f"Q = {rows(Q)}\nK = {rows(K)}\nV = {rows(V)}\n")
    run = subprocess.run(
        [sys.executable, "-m", "symattn", "compare", "s.toml", "o.npy", "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["engine"]["path"] == "float64"
    assert data["summary"]["entries"] == 96 * 32
    x = out.numpy().astype(np.float64)
    by_position = {(e["query"], e["column"]): e for e in data["entries"]}
    worst = tuple(data["summary"]["max_ulps_at"].values())  # an output near 0: many ULPs, still right
    for i, j in [(0, 0), (40, 7), (95, 31), worst]:
        _, output = mp_row(Q, K, V, i)
        assert Decimal(by_position[(i, j)]["ulps"]) == ulps_of(x[i, j], output[j], "float32")


def test_several_heads_in_two_processes_give_the_serial_and_exact_figures(monkeypatch):
    rng = np.random.default_rng(13)
    Q, K, V = (in_format(rng.standard_normal((10, 8)), "bfloat16") for _ in range(3))
    spec = load_spec({**{k: [[exact_text(x) for x in r] for r in M] for k, M in zip("QKV", (Q, K, V))}, "heads": 2})
    O = np.concatenate(
        [
            float_attention(Q[:, h * 4 : h * 4 + 4], K[:, h * 4 : h * 4 + 4], V[:, h * 4 : h * 4 + 4])[1]
            for h in range(2)
        ],
        axis=1,
    )
    result = result_of(in_format(O, "bfloat16"), "bfloat16")
    serial = compare(spec, result)
    monkeypatch.setattr(kernel, "PARALLEL_WORK", 0)
    parallel = compare(spec, result)
    monkeypatch.setattr(kernel, "heads_of", lambda spec, quantity: None)
    exact = compare(spec, result)
    assert serial.refined is not None and serial == parallel
    assert [(e.ulps, e.relative, e.bucket) for e in serial.entries] == [
        (e.ulps, e.relative, e.bucket) for e in exact.entries
    ]


def test_the_text_report_says_how_many_entries_were_refined_past_the_bounds():
    from symattn.kernel.spec_comparison import render_comparison

    rng = np.random.default_rng(0)
    Q, K, V = (in_format(rng.standard_normal((8, 4)), "float16") for _ in range(3))
    c = compare(spec_of(Q, K, V), result_of(in_format(float_attention(Q, K, V)[1], "float32"), "float32"))
    share = Decimal(100 * c.refined) / Decimal(32)
    english = f"{c.refined} of 32 entries ({share:.3f}%) refined past them (in two floats, then arb).\n"
    assert f"Decided by float64 with error bounds; {english}" in render_comparison(c)
    chinese = f"32 个元素中有 {c.refined} 个（{share:.3f}%）超出该界，再细化（先用两个浮点数，再用 arb）。"
    assert chinese in render_comparison(c, "zh")


def test_log_bounded_within_its_bound_against_mpmath():
    rng = np.random.default_rng(9)
    x = np.concatenate([1 + rng.random(3000) * 5000, 1 + rng.random(500) * 1e-6, [1.0, 2.0, np.sqrt(2), 2**40 + 3.0]])
    value, error = logsumexp.log_bounded(x)
    with mpmath.workdps(40):
        for v, a, e in zip(value, x, error):
            assert abs(mpmath.mpf(float(v)) - mpmath.log(mpmath.mpf(float(a)))) <= e


def test_torch_flash_attention_lse_in_both_bases_end_to_end(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    Q, K, V = (rng.standard_normal((1, 2, 48, 16)).astype(np.float32) for _ in range(3))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*(torch.tensor(M) for M in (Q, K, V)))[:2]
    np.save(tmp_path / "lse.npy", lse.numpy())  # (1, 2, 48): a row per head
    np.save(tmp_path / "lse2.npy", (lse / np.log(2)).numpy())
    # heads side by side in the spec's columns: (48, 2·16)
    flat = {k: M[0].transpose(1, 0, 2).reshape(48, 32) for k, M in zip("QKV", (Q, K, V))}
    rows = lambda M: "[" + ", ".join("[" + ", ".join(exact_text(x) for x in r) + "]" for r in M) + "]"  # noqa: E731
    (tmp_path / "s.toml").write_text("heads = 2\n" + "".join(f"{k} = {rows(M)}\n" for k, M in flat.items()))

    def run(*extra: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-m", "symattn", "compare", "s.toml", *extra, "--quantity", "lse", "--format", "json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    natural, base2, mixed = run("lse.npy"), run("lse2.npy", "--lse-base", "2"), run("lse2.npy")
    assert natural["summary"]["entries"] == 96 and natural["engine"]["path"] == "float64"
    assert natural["places"] == "0-based, as numpy indexes: lse[batch, head, query]"  # (1, 2, 48): as given
    assert {e["batch"] for e in natural["entries"]} == {0}
    for h, i in [(0, 0), (1, 47), (1, 5)]:
        entry = {(e["head"], e["query"]): e for e in natural["entries"]}[(h, i)]
        with mpmath.workdps(60):
            d = 16
            q = [Fraction(float(a)) for a in Q[0, h, i]]
            scores = [sum((Fraction(float(a)) * b for a, b in zip(k, q)), Fraction(0)) for k in K[0, h]]
            exact = mpmath.log(
                mpmath.fsum(mpmath.exp(mpmath.mpf(s.numerator) / s.denominator / mpmath.sqrt(d)) for s in scores)
            )
        assert Decimal(entry["ulps"]) == ulps_of(float(lse[0, h, i]), exact, "float32")
    assert Decimal(natural["summary"]["max_ulps"]) < 8 and Decimal(base2["summary"]["max_ulps"]) < 8
    assert Decimal(mixed["summary"]["max_relative"]) > Decimal("0.3")  # log2 read as ln: off by 1/ln 2 − 1


def test_lse_of_decimal_inputs_is_refused_in_one_line(seed, tmp_path):
    from symattn.input.errors import SpecError

    with pytest.raises(SpecError, match="--quantity lse needs Q, K and V of float32 values"):
        compare(load_spec(seed), result_of(np.zeros((1, len(seed["Q"]))), "float32"), "lse")


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float32", "float64"])
def test_the_vectorised_decision_is_the_exact_one_wherever_it_decides(fmt):
    from symattn.kernel.comparison import _decide
    from symattn.kernel.deciding import decide, figure

    rng = np.random.default_rng(3)
    exact = rng.standard_normal(4000) * 10.0 ** rng.integers(-6, 4, 4000)
    x = in_format(exact + exact * 10.0 ** rng.uniform(-9, -1, 4000) * rng.choice([-1, 1], 4000), fmt)
    half = np.abs(exact) * 10.0 ** rng.uniform(-16, -6, 4000)
    lo, hi = exact - half, exact + half
    ok, (q_u, k_u), (q_r, k_r), bucket = decide(x, lo, hi, fmt)
    assert ok.mean() > 0.3
    for i in np.nonzero(ok)[0]:
        ulps, relative, b = _decide(Fraction(float(x[i])), Fraction(float(lo[i])), Fraction(float(hi[i])), fmt)
        assert (figure(int(q_u[i]), int(k_u[i])), figure(int(q_r[i]), int(k_r[i])), int(bucket[i])) == (
            ulps,
            relative,
            b,
        )


@settings(max_examples=100, deadline=None)
@given(heads())
def test_the_arb_value_lies_within_the_compensated_bound(head):
    from symattn.kernel import compensated

    pairs = [(i, k) for i in range(head.Q.shape[0]) for k in range(head.V.shape[1])]
    value, error = compensated.outputs(head, pairs)
    lo, hi = float64.interval(value, error)
    wanted = {i: list(range(head.V.shape[1])) for i in range(head.Q.shape[0])}
    balls = dict(zip(wanted, refine._arb_rows(head, "output", wanted, 256)))
    first = next(float64.blocks(head, weights=False))
    for n, (i, k) in enumerate(pairs):
        a, b = refine._ends(balls[i][k])
        assert Fraction(float(lo[n])) <= a and b <= Fraction(float(hi[n])), (i, k)
        assert error[n] <= first.output_error[i, k] or not np.isfinite(first.output_error[i, k])


def test_the_float64_path_imports_no_sympy(tmp_path):
    # SymPy takes 0.4 s to import: compare from .npy files, with its text report, never needs it
    rng = np.random.default_rng(2)
    Q, K, V = (rng.standard_normal((16, 8)).astype(np.float32) for _ in range(3))
    for name, M in zip("qkv", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", M)
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n')
    np.save(tmp_path / "o.npy", float_attention(Q, K, V)[1].astype(np.float32))
    code = (
        "import sys\nfrom symattn.cli.commands import main\n"
        "for fmt in ('text', 'json'):\n    main(['compare', 's.toml', 'o.npy', '--format', fmt, '-o', 'r.' + fmt])\n"
        "print(sorted(m for m in ('sympy', 'mpmath', 'symattn.input.formula', 'symattn.exact.base') if m in sys.modules))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "[]\n"
    assert (tmp_path / "r.text").read_text().startswith("The output of o.npy (float32) against the exact values\n")


def test_the_entry_table_summarises_as_the_entries_do():
    from symattn.kernel.comparison import Entries

    rng = np.random.default_rng(21)
    Q, K, V = (in_format(rng.standard_normal((12, 8)), "float32") for _ in range(3))
    V = np.concatenate([V[:, :4], V[:, :4]], axis=1)  # equal columns, equal errors: ties to break in row order
    x = in_format(float_attention(Q, K, V)[1], "float32")
    x[3, 2], x[7, 0] = np.nan, -np.inf
    c = compare(spec_of(Q, K, V), FloatResult.of_array("r.npy", "float32", x))
    plain = Entries(list(c.entries))  # the same Entry objects, summarised one by one
    assert type(c.entries).__name__ == "EntryTable" and c.entries == plain and len(c.entries) == 96
    assert (
        [(e.row, e.col) for e in c.entries.not_finite()]
        == [(3, 2), (7, 0)]
        == [(e.row, e.col) for e in plain.not_finite()]
    )
    for name in ("histogram", "worst", "correctly_rounded"):
        assert getattr(c.entries, name)() == getattr(plain, name)(), name
    for figure in ("relative", "row_relative"):
        assert c.entries.largest(figure) == plain.largest(figure), figure
    for count in (1, 7, 200):
        assert c.entries.ranked(count) == plain.ranked(count), count
    assert c.entries[-1] == plain[95] and c.entries[94:] == [plain[94], plain[95]]


def test_a_files_rows_are_fractions_made_as_they_are_read():
    from symattn.input.floats import ArrayRows

    values = np.array([[0.1, -np.inf], [2.0**-30, np.nan]])
    result = FloatResult.of_array("r.npy", "float64", values)
    assert result.not_finite == (((0, 1), "-inf"), ((1, 1), "nan"))
    assert result.rows[0] == (Fraction(0.1), None) and result.rows[-1] == (Fraction(1, 2**30), None)
    assert result.rows == ((Fraction(0.1), None), (Fraction(1, 2**30), None)) == ArrayRows(values.copy())
    assert result.rows != ArrayRows(values[:, ::-1].copy()) and result.shape == (2, 2)
    assert result.value(0, 0) == Fraction(0.1) and result.value(1, 1) is None and result.value(1, 0) == 2.0**-30
    with pytest.raises(IndexError):
        result.rows[2]


@pytest.mark.parametrize("quantity", ["output", "weights", "lse2"])
def test_a_row_arb_computed_before_is_served_again_with_the_same_balls(quantity):
    rng = np.random.default_rng(8)
    Q, K, V = (in_format(rng.standard_normal((6, 4)), "float32") for _ in range(3))
    head = float64.Head(Q, K, V, 0.5, 0.0, Fraction(1, 2), None)
    first, again = {0: [1], 3: [0, 2]}, {0: [0, 1, 2], 3: [3], 5: [1]}
    if quantity == "lse2":
        first, again = {0: [0], 3: [0]}, {0: [0], 3: [0], 5: [0]}
    kept = refine.Balls()
    list(refine._arb_rows(head, quantity, first, 96, kept))
    assert len(kept) == 2
    served = list(refine._arb_rows(head, quantity, again, 96, kept))  # rows 0 and 3 from before, 5 made
    fresh = list(refine._arb_rows(head, quantity, again, 96))
    assert len(kept) == 3
    for a, b in zip(served, fresh):
        assert {j: refine._ends(x) for j, x in a.items()} == {j: refine._ends(x) for j, x in b.items()}
    tight = refine.Balls(limit=4)  # one row of 6 keys passes the limit: computed again when asked for
    list(refine._arb_rows(head, quantity, first, 96, tight))
    assert len(tight) == 0


def test_arb_rows_in_two_processes_give_the_comparison_of_one(monkeypatch):
    rng = np.random.default_rng(17)
    Q, K, V = (in_format(rng.standard_normal((48, 8)), "float32") for _ in range(3))
    x = in_format(float_attention(Q, K, V)[1], "float32")  # errors near half an ULP: many left to arb
    spec, result = spec_of(Q, K, V), FloatResult.of_array("r.npy", "float32", x)
    monkeypatch.setattr(refine, "ROWS_AT_ONCE", 1)  # a chunk a row, for two processes to share
    serial = compare(spec, result)
    monkeypatch.setattr(refine, "PARALLEL_ROWS", 0)
    parallel = compare(spec, result)
    assert serial.refined is not None and serial.refined >= 3
    assert parallel == serial and parallel.digits == serial.digits and parallel.refined == serial.refined


def _square_and_nested(data, piece):
    from symattn.kernel.cores import map_forked

    inner = map_forked(lambda d, p: d + p, piece, [1, 2])  # inside a forked process: here, not forked again
    return data * piece * piece, inner


def test_map_forked_gives_each_piece_in_order():
    from symattn.kernel.cores import map_forked

    want = [(3 * p * p, [p + 1, p + 2]) for p in range(7)]
    assert map_forked(_square_and_nested, 3, list(range(7))) == want
    assert map_forked(_square_and_nested, 3, list(range(7)), parallel=False) == want


def test_the_text_report_refines_no_entry_it_does_not_show(monkeypatch):
    from symattn.kernel.spec_comparison import render_comparison

    rng = np.random.default_rng(0)
    Q, K, V = (in_format(rng.standard_normal((16, 8)), "float16") for _ in range(3))
    result = FloatResult.of_array("r.npy", "float32", in_format(float_attention(Q, K, V)[1], "float32"))
    asked = []
    real = kernel.refine
    monkeypatch.setattr(
        kernel,
        "refine",
        lambda head, quantity, mine, *rest, **kw: asked.append(mine) or real(head, quantity, mine, *rest, **kw),
    )
    full = compare(spec_of(Q, K, V), result)
    assert asked == [{0: [3]}] and full.refined == 1  # entry (1, 4): arb decides its three digits
    assert (full.entries.entry(0, 3).ulps, full.entries.entry(0, 3).relative) == (Decimal("0.259"), Decimal("2.12E-8"))
    asked.clear()
    shown = compare(spec_of(Q, K, V), result, worst=10)
    assert asked == [] and shown.refined == 0  # not among the ten worst, nor the largest of a figure
    with pytest.raises(
        LookupError, match=r"^entry \(1, 4\) was not decided: compare\(\.\.\., worst=None\) decides all$"
    ):
        shown.entries.entry(0, 3)
    # one more than the ten: whether the 11th ties the 10th shown is known without every entry decided
    assert len(shown.entries.ranked(11)) == 11
    with pytest.raises(LookupError, match="^only the 11 largest errors were decided, not 12$"):
        shown.entries.ranked(12)
    text, whole = render_comparison(shown), render_comparison(full)
    assert (
        "Decided by float64 with error bounds; 0 of 128 entries (0.000%) refined past them (in two floats, then arb).\n"
        in text
    )
    assert (
        "Decided by float64 with error bounds; 1 of 128 entries (0.781%) refined past them (in two floats, then arb).\n"
        in whole
    )
    assert text.replace("0 of 128 entries (0.000%)", "1 of 128 entries (0.781%)") == whole
    assert (
        "Largest error: 0.500 ULP, at o[5, 2].\n"
        "Largest relative error: 5.66e-8, at o[5, 2].\n"
        "Largest error relative to its row's largest magnitude: 4.33e-8, at o[5, 2].\n"
    ) in text
    assert (
        "o[5, 2]   0.2628892511243         0.26288926601409912     0.500     5.66e-8   4.33e-8\n"
        "o[11, 4]  -0.00866987975238       -0.0086698792874813080  0.499     5.36e-8   7.51e-10\n"
    ) in text


@pytest.mark.parametrize("fmt", ["float32", "float16"])
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_what_the_report_shows_is_what_deciding_every_entry_gives(fmt, mask):
    rng = np.random.default_rng(7)
    Q, K, V = (in_format(rng.standard_normal((24, 6)), "float16") for _ in range(3))
    spec = spec_of(Q, K, V, mask)
    A, O = float_attention(Q, K, V, None if spec.allowed is None else np.array(spec.allowed))
    O[rng.integers(0, 24, 5), rng.integers(0, 6, 5)] *= 1 + 2.0**-12  # planted errors: a worst to find
    O[2, 2] = O[2, 3]  # and equal figures, ties to break in row order
    for quantity, x in (("output", O), ("weights", A)):
        result = FloatResult.of_array("r.npy", fmt, in_format(x, fmt))
        full, shown = compare(spec, result, quantity), compare(spec, result, quantity, worst=4)
        assert full.entries.ranked(4) == shown.entries.ranked(4)
        for name in ("histogram", "worst", "worst_relative", "worst_row_relative", "correctly_rounded"):
            assert getattr(full, name) == getattr(shown, name), name


def test_the_text_report_of_an_lse_names_its_places_as_the_lse_s_axes(tmp_path, capsys):
    from symattn.cli.commands import main

    spec = tmp_path / "s.toml"
    spec.write_text(
        "Q = [[0.5, 0.25], [0.75, 1.0], [1.0, 0.5]]\nK = [[0.5, 0.125], [0.25, 1.0], [1.0, 0.5]]\n"
        "V = [[1, 0], [0, 1], [1, 1]]\n",
        encoding="utf-8",
    )
    q = np.array([[0.5, 0.25], [0.75, 1.0], [1.0, 0.5]])
    k = np.array([[0.5, 0.125], [0.25, 1.0], [1.0, 0.5]])
    scores = q @ k.T / np.sqrt(2)
    lse = np.log(np.exp(scores).sum(axis=1)).astype(np.float32)
    lse[2] = np.nextafter(np.nextafter(lse[2], np.float32(9)), np.float32(9))  # two float32 steps up
    np.save(tmp_path / "r.npy", lse)
    assert main(["compare", str(spec), str(tmp_path / "r.npy"), "--quantity", "lse", "--lang", "en"]) == 0
    out = capsys.readouterr().out
    assert "Places are 0-based, as numpy indexes: lse[query].\n" in out  # (B, H, N): lse[batch, head, query]
    assert "Largest error: 2.15 ULP, at lse[2].\n" in out
    assert "\nlse[2]    1.724237304479          1.7242375612258911      2.15      1.49e-7   1.41e-7\n" in out


def test_the_largest_errors_columns_stay_aligned_past_24_characters():
    """A float32 result near 10^-5 shows as up to 25 characters (-0.0000099781673270626925): the result
    column widens, as the exact one does, so that every ULP figure starts under its header."""
    from symattn.kernel import compare as compare_tensors

    rng = np.random.default_rng(4)
    q, k = (rng.standard_normal((1, 1, 64, 16)).astype(np.float32) for _ in range(2))
    v = (rng.standard_normal((1, 1, 64, 16)) * 1e-5).astype(np.float32)
    z = q[0, 0].astype(np.float64) @ k[0, 0].T.astype(np.float64) / 4
    a = np.exp(z - z.max(axis=1, keepdims=True))
    out = ((a / a.sum(axis=1, keepdims=True)) @ v[0, 0].astype(np.float64)).astype(np.float32)
    out = np.nextafter(out, np.float32(1))[None, None]  # a few ULP off everywhere
    lines = compare_tensors(out, q, k, v).text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("entry "))
    table = lines[header : header + 11]
    start, column = table[0].index("result"), table[0].index("ULP")
    assert max(len(line[start:column].strip()) for line in table[1:]) == 25  # past the old width, 24
    assert all(line[column - 2 : column] == "  " and line[column] != " " for line in table[1:])
