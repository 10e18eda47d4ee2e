"""The error-free matrix product (kernel/exact_product.py) and the outputs it gives the fast verifier
(compensated.product_outputs): every bound against the exact product in rationals or 50-digit mpmath, on
cancellation, huge and tiny scales, subnormals, inner dimensions that are not powers of two and d = 1; and
verify-certificate on its numbers: a "c" value the product does not hold goes back to the error-free sums."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.certificates import float_tensors
from symattn.cli.commands import main
from symattn.kernel import compensated, exact_product, float64

U = 2.0**-53


def exact(A: np.ndarray, B: np.ndarray) -> list[list[Fraction]]:
    a = [[Fraction(x) for x in row] for row in A.tolist()]
    b = [[Fraction(x) for x in col] for col in B.T.tolist()]
    return [[sum((x * y for x, y in zip(row, col)), Fraction(0)) for col in b] for row in a]


def within(A: np.ndarray, B: np.ndarray) -> tuple[int, float]:
    """(entries checked, the largest bound in units of u·(|A|·|B|)): each |P − A·B| ≤ its bound, exactly."""
    P, error = exact_product.product(A, B)
    scale = np.abs(A) @ np.abs(B)
    worst = 0.0
    for i, row in enumerate(exact(A, B)):
        for k, x in enumerate(row):
            assert abs(Fraction(P[i, k]) - x) <= Fraction(error[i, k]), (i, k)
            if scale[i, k] > 0:
                worst = max(worst, error[i, k] / (U * scale[i, k]))
    return P.size, worst


def float32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("n, m, k", [(3, 1, 1), (5, 37, 1), (4, 1000, 3), (2, 4096, 2)])
def test_the_bound_holds_exactly_and_is_a_few_units_wide(n, m, k):
    rng = np.random.default_rng(m)
    A = rng.random((n, m)) * np.exp2(rng.integers(-30, 1, (n, m)))  # exps: 53-bit values spread over 2^30
    B = float32(rng.standard_normal((m, k)))
    count, worst = within(A, B)
    assert count == n * k and worst < 1.1  # u of the result and u/256 of the magnitudes: under 1.1 u|A||B|


def test_cancellation_leaves_only_the_last_rounding():
    """Columns whose terms cancel to a sum 2^-40 of their magnitudes: a plain product's error is u·|A||B|,
    here the bound is u of the small result plus the rest's 2^-20·γ_m."""
    rng = np.random.default_rng(3)
    m = 300
    A = np.ones((2, m)) + rng.random((2, m)) * 2.0**-30
    B = float32(rng.standard_normal((m, 1)))
    B = np.concatenate([B, -B], axis=0)
    A = np.concatenate([A, A], axis=1)
    A[:, m:] = A[:, :m]  # the same weights both halves: the exact sums are 0
    P, error = exact_product.product(A, B)
    assert P.tolist() == [[0.0], [0.0]]
    assert error.tolist() == [[error[0, 0]], [error[1, 0]]] and float(error.max()) < 2.0**-50 * float(
        (np.abs(A) @ np.abs(B)).max()
    )
    within(A, B)


@pytest.mark.parametrize("a_scale, b_scale", [(2.0**300, 2.0**-300), (2.0**-500, 1.0), (1.0, 2.0**-140)])
def test_huge_and_tiny_scales_and_subnormal_products(a_scale, b_scale):
    rng = np.random.default_rng(5)
    A = rng.standard_normal((3, 50)) * a_scale
    B = float32(rng.standard_normal((50, 4)) * b_scale) if b_scale >= 2.0**-126 else rng.standard_normal((50, 4))
    if b_scale < 2.0**-126:  # float32 subnormals: 2^-149 and its few multiples
        B = np.round(B * 8) * 2.0**-149
    within(A, B)


def test_subnormal_products_below_the_exact_units_unit_are_refused():
    """Rows and columns near 2^-600 each: the exact part's unit would fall below the subnormals, so None; a
    entry past 2^(1022 − s) would make σ infinite, so None too."""
    A, B = np.full((2, 8), 2.0**-600), np.full((8, 2), 2.0**-600)
    assert exact_product.product(A, B) is None
    assert exact_product.product(np.full((1, 8), 2.0**1000), np.ones((8, 1))) is None
    assert exact_product.product(np.ones((1, 8)), np.ones((8, 1))) is not None


def head_of(seed: int, n: int, m: int, d: int, dv: int, scale: float, masked: bool) -> float64.Head:
    rng = np.random.default_rng(seed)
    Q, K, V = (float32(rng.standard_normal(s)) for s in ((n, d), (m, d), (m, dv)))
    allowed = np.tril(np.ones((n, m), dtype=bool), m - n) if masked else None
    head = float64.head(Q * scale, K, V, None, allowed)
    assert head is not None
    return head


def exact_outputs(head: float64.Head, sink: float | None = None) -> list[list[mpmath.mpf]]:
    """O at 50 digits: exact scores (float32 products), mpmath's exps; ``sink``: a logit in the denominator.
    The scores are sums of integers: each float of Q and K is an integer over one power of two, 2^shift."""
    mpmath.mp.dps = 50
    c = 1 / mpmath.sqrt(head.Q.shape[1])
    shift = max(-math.frexp(x)[1] + 53 for x in [*head.Q.ravel().tolist(), *head.K.ravel().tolist(), 1.0])
    Q, K = ([[whole(x, shift) for x in row] for row in a.tolist()] for a in (head.Q, head.K))
    V = [[mpmath.mpf(x) for x in row] for row in head.V.tolist()]
    out = []
    for i in range(head.Q.shape[0]):
        keys = range(head.K.shape[0]) if head.allowed is None else np.nonzero(head.allowed[i])[0].tolist()
        scores = [sum(a * b for a, b in zip(Q[i], K[j])) for j in keys]  # each score times 2^(2·shift)
        top = max(scores)
        e = [mpmath.exp(c * mpmath.ldexp(mpmath.mpf(s - top), -2 * shift)) for s in scores]
        total = mpmath.fsum(e)
        if sink is not None:  # e^(s − c·top), as the engine shifts
            total += mpmath.exp(mpmath.mpf(sink) - c * mpmath.ldexp(mpmath.mpf(top), -2 * shift))
        out.append([mpmath.fsum(w * V[j][k] for w, j in zip(e, keys)) / total for k in range(head.V.shape[1])])
    return out


def whole(x: float, shift: int) -> int:
    """x·2^shift, an integer by the choice of shift, exactly."""
    num, den = x.as_integer_ratio()
    return num * (2**shift // den)


@pytest.mark.parametrize(
    "n, m, d, dv, scale, masked",
    [
        (6, 37, 8, 5, 1.0, False),
        (7, 64, 8, 3, 6.0, True),
        (5, 50, 1, 1, 3.0, False),
        (4, 129, 3, 2, 40.0, True),
        (4, 50, 2, 2, 900.0, False),  # scores thousands apart: most exps below e^-700, 0 within TINY
    ],
)
def test_product_outputs_hold_against_50_digit_mpmath_and_are_tighter_than_the_sums(n, m, d, dv, scale, masked):
    """Every output within its bound; each bound below the error-free sums' (compensated's row bound) and within
    1.1 times their bound key by key (the rest's γ_m·2^(s−53) is all that is added)."""
    head = head_of(n + m, n, m, d, dv, scale, masked)
    (b,) = list(float64.blocks(head, weights=False, stages=True))
    O, eO = compensated.product_outputs(head, b.stage, np.abs(head.V))
    mpmath.mp.dps = 50
    for i, row in enumerate(exact_outputs(head)):
        for k, x in enumerate(row):
            assert abs(mpmath.mpf(O[i, k]) - x) <= mpmath.mpf(eO[i, k]), (i, k)
    r, c = (x.ravel() for x in np.indices(O.shape))
    _, rows = compensated.stage_outputs(head, b.stage, r, c)
    _, keys = compensated.stage_outputs(head, b.stage, r, c, per_key=np.ones(len(r), bool))
    assert bool(np.all(eO.ravel() <= rows)) and bool(np.all(eO.ravel() <= 1.1 * keys))


@pytest.mark.parametrize("sink", [-3.0, 2.5, 650.0])
def test_a_logit_in_the_denominator_is_in_the_bound(sink):
    """A sink's e^(s − M) joins ℓ (at 650 every exp of the row is below e^-640): each output within its bound."""
    rng = np.random.default_rng(11)
    rows = {name: float32(rng.standard_normal((40, 4))) for name in "QKV"}
    tensors = float_tensors.build(rows, 1, 1, 1, "bhnd", None, None, logits=(sink,))
    head = tensors.heads[0]
    (b,) = list(float64.blocks(head, weights=False, stages=True))
    O, eO = compensated.product_outputs(head, b.stage, np.abs(head.V))
    for i, row in enumerate(exact_outputs(head, sink)):
        for k, x in enumerate(row):
            assert abs(mpmath.mpf(O[i, k]) - x) <= mpmath.mpf(eO[i, k]), (i, k)


def test_where_the_exact_part_would_underflow_the_error_free_sums_are_used():
    """Exps near e^-690 (a sink above every score) times float32 subnormals: the product's unit would fall
    below 2^-1074, so it declines, and evaluate gives the error-free sums' floats and bounds, bit for bit."""
    rng = np.random.default_rng(12)
    rows = {name: float32(rng.standard_normal((8, 4))) for name in "QK"}
    rows["V"] = np.round(rng.standard_normal((8, 3)) * 4) * 2.0**-149
    tensors = float_tensors.build(rows, 1, 1, 1, "bhnd", None, None, logits=(690.0,))
    head = tensors.heads[0]
    (b,) = list(float64.blocks(head, weights=False, stages=True))
    assert compensated.product_outputs(head, b.stage, np.abs(head.V)) is None
    pairs = [(i, k) for i in range(8) for k in range(3)]
    value, error = float_tensors.evaluate(tensors, {"c": pairs, "a": []})["summed"]
    again, bound = compensated.outputs(head, pairs)
    assert value.view(np.int64).tolist() == again.view(np.int64).tolist()
    assert error.view(np.int64).tolist() == bound.view(np.int64).tolist()


def certified(folder):
    rng = np.random.default_rng(3)
    for name in "qkv":
        np.save(folder / f"{name}.npy", (rng.standard_normal((96, 16)) * 2).astype(np.float32))
    (folder / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    cert = folder / "c.json"
    assert main(["compute", str(folder / "s.toml"), "--certify", "--float64", "--digits", "12", "-o", str(cert)]) == 0
    return cert


def verified(capsys, cert) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["verify-certificate", str(cert)])
    return code, capsys.readouterr().err.splitlines()


def test_a_value_the_product_does_not_hold_goes_back_to_the_error_free_sums(tmp_path, capsys, monkeypatch):
    """With the product's bounds made ten times wider than they are, no "c" value's float ± bound holds them:
    each is checked on the error-free sums' numbers (what the maker wrote), and the certificate verifies; a
    "c" bound shrunk below the sums' own is refused in the line it always was."""
    cert = certified(tmp_path)
    data = json.loads(cert.read_text(encoding="utf-8"))
    i, k = next((i, p.index("c")) for i, p in enumerate(data["output"]["path"]) if "c" in p)
    made = compensated.product_outputs
    asked: list[int] = []
    compensate = float_tensors.compensate

    def wide(head, stage, absV, columns=None):
        O, eO = made(head, stage, absV, columns)
        return O, 10 * eO

    def counted(tensors, pairs):
        asked.append(len(pairs))
        return compensate(tensors, pairs)

    monkeypatch.setattr(compensated, "product_outputs", wide)
    monkeypatch.setattr("symattn.certificates.tensor_verifier.compensate", counted)
    assert verified(capsys, cert) == (0, [])
    assert asked == [15]  # every "c" value
    value, error = compensated.outputs(
        float64.head(*(np.load(tmp_path / f"{x}.npy").astype(np.float64) for x in "qkv"), None, None), [(i, k)]
    )
    data["output"]["bound"][i][k] = (float.fromhex(data["output"]["bound"][i][k]) / 4).hex()
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data), encoding="utf-8")
    f, b = data["output"]["float"][i][k], data["output"]["bound"][i][k]
    assert verified(capsys, forged) == (1, [])  # a failed run's report is on stdout, its verdict last
    assert main(["verify-certificate", str(forged)]) == 1
    said = capsys.readouterr().out.splitlines()
    assert [said[0], *said[-2:]] == [
        f"{forged}: output[{i}, {k}]: the certificate's float ± bound, {f} ± {b}, does not hold the "
        f"float64 path's {value[0].hex()} ± {error[0].hex()}",
        f"{forged}: it certifies output, lse and lse2 of Q, K and V, with the scale and the mask",
        f"{forged}: NOT verified: 1 value has a float ± bound that does not hold the one recomputed",
    ]
    hashed = (("spec", "s.toml"), ("Q", "q.npy"), ("K", "k.npy"), ("V", "v.npy"))
    assert said[1:-2] == [
        *(f"{forged}: {name} {tmp_path / file}: SHA-256 matches" for name, file in hashed),
        f"{forged}: its inputs are the values the spec {tmp_path / 's.toml'} gives, read here from its files",
    ]


def test_a_c_bound_is_held_to_the_factor_of_the_engines_first_bound(tmp_path, capsys):
    """A "c" value's bound is at most BOUND_FACTOR times the engine's first bound (its chunked sums), as an "f"
    value's is: 1.2 times the bound written passes (it is true, and at 96 keys the first bound is 1.24 to 1.48
    times the sums'), past the factor it is refuted (exit 1) in a line that names the first bound."""
    cert = certified(tmp_path)
    data = json.loads(cert.read_text(encoding="utf-8"))
    i, k = next((i, p.index("c")) for i, p in enumerate(data["output"]["path"]) if "c" in p)
    arrays = (np.load(tmp_path / f"{x}.npy").astype(np.float64) for x in "qkv")
    (b,) = list(float64.blocks(float64.head(*arrays, None, None), weights=False))
    first = float(b.output_error[i, k])
    written = float.fromhex(data["output"]["bound"][i][k])
    for bound, code in ((1.2 * written, 0), (3.01 * first, 1)):
        data["output"]["bound"][i][k] = bound.hex()
        forged = tmp_path / "forged.json"
        forged.write_text(json.dumps(data), encoding="utf-8")
        capsys.readouterr()
        assert main(["verify-certificate", str(forged)]) == code
        out = capsys.readouterr().out.splitlines()
        if code:  # refuted (exit 1): the value's line first, the verdict last
            assert out[0] == (
                f"{forged}: output[{i}, {k}]: the certificate's bound, {bound.hex()}, is more than 3.0006 times the "
                f"float64 path's own, {first.hex()} (wider than a certificate's bound may be)"
            )
            assert out[-1] == f"{forged}: NOT verified: 1 value has a bound wider than it may be"
