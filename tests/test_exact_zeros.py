"""Exact zeros are proved, not narrowed (issue 28): an entry whose exact value is 0 is decided by
Lindemann–Weierstrass on the structure of its inputs (exact/zeros.py), and a result that misses it is
reported by its absolute error, since no ULP measures an error at 0.

Each zero is confirmed by an independent mpmath backward pass at 60 digits (scores as exact fractions).
"""

from __future__ import annotations

import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.cli.commands import main
from symattn.input.decimals import significant_exact
from symattn.kernel import zeros
from symattn.kernel.comparison import number_text


def mp_gradients(Q, K, V, dO, allowed=None):
    """dQ, dK, dV of one head (scale 1/√d) by mpmath at 60 digits, from the floats exactly."""
    n, m, d = len(Q), len(K), len(Q[0])
    with mpmath.workdps(60):
        c = 1 / mpmath.sqrt(d)
        mp = [[[mpmath.mpf(float(x)) for x in row] for row in M] for M in (Q, K, V, dO)]
        q, k, v, g = mp
        P = []
        for i in range(n):
            keep = [allowed is None or allowed[i][j] for j in range(m)]
            e = [mpmath.exp(c * mpmath.fsum(a * b for a, b in zip(q[i], k[j]))) if keep[j] else 0 for j in range(m)]
            total = mpmath.fsum(e)
            P.append([x / total for x in e])
        dP = [[mpmath.fsum(a * b for a, b in zip(g[i], v[j])) for j in range(m)] for i in range(n)]
        Dr = [mpmath.fsum(P[i][j] * dP[i][j] for j in range(m)) for i in range(n)]
        dS = [[P[i][j] * (dP[i][j] - Dr[i]) for j in range(m)] for i in range(n)]
        dq = [[c * mpmath.fsum(dS[i][j] * k[j][t] for j in range(m)) for t in range(d)] for i in range(n)]
        dk = [[c * mpmath.fsum(dS[i][j] * q[i][t] for i in range(n)) for t in range(d)] for j in range(m)]
        dv = [[mpmath.fsum(P[i][j] * g[i][t] for i in range(n)) for t in range(len(v[0]))] for j in range(m)]
        return {"dQ": dq, "dK": dk, "dV": dv}


def write(folder, causal: bool = False, **arrays) -> None:
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", np.asarray(a, dtype=np.float32))
    (folder / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n' + ('mask = "causal"\n' if causal else ""))


@pytest.fixture
def run(capsys):
    def run(folder, *args: str) -> tuple[int, str]:
        code = main(["compare", str(folder / "s.toml"), *args])
        captured = capsys.readouterr()
        assert captured.err == ""
        return code, captured.out

    return run


def bf16(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (as torch's .bfloat16() does: to nearest, ties to even)."""
    torch = pytest.importorskip("torch")
    return torch.tensor(a).bfloat16().float().numpy()


def test_the_bf16_causal_dq_that_stopped_at_1000_digits(tmp_path, run, capsys):
    """Query 1 sees keys 0 and 1 only, equal in column 5: dQ[1, 5] is exactly 0 (issue 28's case)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    Q, K, V, dO = (bf16(rng.standard_normal((8, 8)).astype(np.float32)) for _ in range(4))
    K[1, 5] = K[0, 5]
    q, k, v = (torch.tensor(a).requires_grad_() for a in (Q, K, V))
    o = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
    o.backward(torch.tensor(dO))
    dq = q.grad.numpy()
    assert dq[1, 5] != 0  # the kernel's float32 misses the exact 0
    allowed = [[j <= i for j in range(8)] for i in range(8)]
    assert abs(mp_gradients(Q, K, V, dO, allowed)["dQ"][1][5]) < mpmath.mpf(10) ** -50
    write(tmp_path, causal=True, q=Q, k=K, v=V, do=dO, r=dq)
    code, out = run(tmp_path, str(tmp_path / "r.npy"), "--quantity", "dq", "--grad-output", str(tmp_path / "do.npy"))
    assert code == 0
    absolute = significant_exact(abs(Fraction(float(dq[1, 5]))), 3)
    assert (
        "Entries exactly 0 that the result misses (no ULP measures them): 1; the largest |dq − exact| is "
        f"{number_text(absolute)}, at dq[1, 5].\n"
    ) in out
    assert "  exact 0 missed  1       " in out
    code, out = run(
        tmp_path,
        str(tmp_path / "r.npy"),
        "--quantity",
        "dq",
        "--grad-output",
        str(tmp_path / "do.npy"),
        "--format",
        "json",
    )
    data = json.loads(out)
    entry = next(e for e in data["entries"] if (e["query"], e["column"]) == (1, 5))
    assert (entry["exact"], entry["ulps"], entry["relative"], entry["absolute"]) == (
        "0",
        None,
        None,
        number_text(absolute),
    )
    summary = data["summary"]
    assert (summary["zeros_missed"], summary["max_zero_error"]) == (1, number_text(absolute))
    assert summary["max_zero_error_at"] == {"query": 1, "column": 5}
    assert {"ulps": "exact 0 missed", "count": 1} in summary["histogram"]


def test_a_zero_the_kernel_gets_is_0_ulp(tmp_path, capsys):
    """The same zero, hit: an error of 0 ULP, and counted correctly rounded."""
    rng = np.random.default_rng(5)
    Q, K, V, dO = (bf16(rng.standard_normal((8, 8)).astype(np.float32)) for _ in range(4))
    K[1, 5] = K[0, 5]
    allowed = [[j <= i for j in range(8)] for i in range(8)]
    exact = mp_gradients(Q, K, V, dO, allowed)["dQ"]
    dq = np.array([[float(x) for x in row] for row in exact], dtype=np.float32)
    dq[1, 5] = 0.0
    write(tmp_path, causal=True, q=Q, k=K, v=V, do=dO, r=dq)
    args = ["--quantity", "dq", "--grad-output", str(tmp_path / "do.npy"), "--format", "json"]
    assert main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "r.npy"), *args]) == 0
    data = json.loads(capsys.readouterr().out)
    entry = next(e for e in data["entries"] if (e["query"], e["column"]) == (1, 5))
    assert entry == {
        "query": 1,
        "column": 5,
        "value": "0",
        "exact": "0",
        "ulps": "0",
        "relative": None,
        "row_relative": "0",
    }
    assert "zeros_missed" not in data["summary"]


# one query, four keys of scores 0, 1, 2, 3 (q = (1, 0)): no two scores equal, yet dQ[0, 1] is 0, since
# K's column 1 is (a, a, b, b) and dP = dO·V_j is (p, q, p, q): the pairs of equal sum s_j + s_k cancel
LW = {"q": [[1, 0]], "k": [[0, 5], [1, 5], [2, 7], [3, 7]], "v": [[2, 0], [3, 1], [2, 4], [3, -1]], "do": [[1, 0]]}


def test_a_dq_zero_that_only_equal_sums_of_scores_explain(tmp_path, run):
    exact = mp_gradients(LW["q"], LW["k"], LW["v"], LW["do"])["dQ"][0]
    assert abs(exact[1]) < mpmath.mpf(10) ** -55 and abs(exact[0]) > mpmath.mpf("0.1")
    inputs = zeros.of_arrays(
        *(np.array(LW[n], dtype=np.float64) for n in ("q", "k", "v")), dO=np.array(LW["do"], float)
    )
    assert zeros.is_zero(inputs, "dQ", 0, 1) and not zeros.is_zero(inputs, "dQ", 0, 0)
    moved = dict(LW, v=[[2, 0], [3, 1], [2, 4], [3.5, -1]])  # dP no longer (p, q, p, q)
    inputs = zeros.of_arrays(
        *(np.array(moved[n], dtype=np.float64) for n in ("q", "k", "v")), dO=np.array(LW["do"], float)
    )
    assert not zeros.is_zero(inputs, "dQ", 0, 1)
    write(tmp_path, **LW, r=[[0.5, 1e-8]])
    code, out = run(tmp_path, str(tmp_path / "r.npy"), "--quantity", "dq", "--grad-output", str(tmp_path / "do.npy"))
    assert code == 0
    assert "dq[0, 1]  0                       9.9999999392252903E-9   —         —         " in out
    assert "the largest |dq − exact| is 1.00e-8, at dq[0, 1].\n" in out


def test_an_output_zero_of_groups_of_equal_scores(tmp_path, run):
    """Scores (0, 0, 1, 1) and V's column 0 summing to 0 over each group: O[0, 0] is exactly 0."""
    arrays = {"q": [[1, 0]], "k": [[0, 1], [0, 2], [1, 3], [1, 4]], "v": [[1, 3], [-1, 0], [2, 1], [-2, 5]]}
    inputs = zeros.of_arrays(*(np.array(arrays[n], dtype=np.float64) for n in ("q", "k", "v")))
    assert zeros.is_zero(inputs, "output", 0, 0) and not zeros.is_zero(inputs, "output", 0, 1)
    write(tmp_path, **arrays, r=[[1e-9, 2.0]])
    code, out = run(tmp_path, str(tmp_path / "r.npy"), "--all")
    assert code == 0
    assert "o[0, 0]   0                       9.9999997171806854E-10  —         —         " in out


def test_dk_and_dv_zeros_of_equal_queries(tmp_path, capsys):
    """Two equal queries whose dO cancel in column 0: dV's column 0 is 0; with V's column 1 one value,
    every dK entry is 0 too (each key's share dO_G·(V_j − V_k) is 0)."""
    arrays = {"q": [[1, 0], [1, 0]], "k": [[0, 1], [1, 2]], "v": [[1, 2], [3, 2]], "do": [[1, 2], [-1, 3]]}
    exact = mp_gradients(*(arrays[n] for n in ("q", "k", "v", "do")))
    Q, K, V, dO = (np.array(arrays[n], dtype=np.float64) for n in ("q", "k", "v", "do"))
    inputs = zeros.of_arrays(Q, K, V, dO=dO)
    for j in range(2):
        assert zeros.is_zero(inputs, "dV", j, 0) and not zeros.is_zero(inputs, "dV", j, 1)
        assert abs(exact["dV"][j][0]) < mpmath.mpf(10) ** -55 and abs(exact["dV"][j][1]) > 0.1
        for c in range(2):
            assert zeros.is_zero(inputs, "dK", j, c) and abs(exact["dK"][j][c]) < mpmath.mpf(10) ** -55
    write(tmp_path, **arrays, r=[[0, 1], [0, 1]])
    for quantity in ("dv", "dk"):
        args = ["--quantity", quantity, "--grad-output", str(tmp_path / "do.npy"), "--format", "json"]
        assert main(["compare", str(tmp_path / "s.toml"), str(tmp_path / "r.npy"), *args]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [e["exact"] for e in data["entries"] if e["column"] == 0] == ["0", "0"]
        assert data["places"] == f"0-based, as numpy indexes: {quantity}[key, column]"


def test_a_log_sum_exp_of_one_key_of_score_0_is_0_in_base_2(tmp_path, run):
    """Causal: query 0 sees key 0 only, with score 0, so L = 1 and log2 L = 0 (the scale 1/√2 is irrational)."""
    arrays = {"q": [[1, 0], [0.5, 0.5]], "k": [[0, 1], [1, 1]], "v": [[1, 0], [0, 1]]}
    inputs = zeros.of_arrays(
        *(np.array(arrays[n], dtype=np.float64) for n in ("q", "k", "v")), np.tril(np.ones((2, 2), bool))
    )
    assert zeros.is_zero(inputs, "lse2", 0, 0) and not zeros.is_zero(inputs, "lse2", 1, 0)
    write(tmp_path, causal=True, **arrays, r=[[0.0, 1.0]])
    code, out = run(tmp_path, str(tmp_path / "r.npy"), "--quantity", "lse", "--lse-base", "2", "--all")
    # r.npy is (1, 2): its places index it as given, lse[head, query]
    assert code == 0 and "lse[0, 0]  0                       0                       0         —         0\n" in out


def test_a_proof_past_its_limit_is_not_attempted(monkeypatch):
    from symattn.input import limits

    inputs = zeros.of_arrays(
        *(np.array(LW[n], dtype=np.float64) for n in ("q", "k", "v")), dO=np.array(LW["do"], float)
    )
    monkeypatch.setattr(limits, "ZERO_TERMS", 4)
    assert not zeros.is_zero(inputs, "dQ", 0, 1)


def test_a_float64_certificate_leaves_a_proved_zero_open(tmp_path, capsys):
    """compare proves O[0, 0] = 0 (above); a certificate may hold only what its verifier re-checks, and the
    verifier knows no such proof, so --certify --float64 still refuses it in one line, as before."""
    arrays = {"q": [[1, 0]], "k": [[0, 1], [0, 2], [1, 3], [1, 4]], "v": [[1, 3], [-1, 0], [2, 1], [-2, 5]]}
    write(tmp_path, **arrays)
    out = tmp_path / "c.json"
    assert main(["compute", str(tmp_path / "s.toml"), "--certify", "--float64", "-o", str(out)]) == 2
    assert (
        capsys.readouterr().err
        == "symattn: --certify: output[0, 0] is not decided at the most digits (an exact value on a rounding "
        "boundary that a certificate's rules do not prove): show fewer --digits\n"
    )
    assert not out.exists()
