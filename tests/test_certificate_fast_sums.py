"""The fast verifier's recomputation (issue 30, Speed): the error-free sums without a loop over the keys, float
for float the loop's; redone from the blocks' own exps; the bound with each exp's own error, against 50-digit
mpmath; the values beyond the float64 bounds decided by it first; and a failed run's last line, its verdict."""

from __future__ import annotations

import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from symattn.certificates import tensor_verifier
from symattn.certificates.verification import verdict
from symattn.cli.commands import main
from symattn.kernel import compensated, float64


def bits(a: np.ndarray) -> list[int]:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.int64).tolist()


def looped_sum2(terms: np.ndarray) -> np.ndarray:
    """Sum2 of each row as compensated.py summed it before, key by key: s, q = TwoSum(s, t); c += q; s + c."""
    s, c = np.zeros(terms.shape[0]), np.zeros(terms.shape[0])
    for t in terms.T:
        s, q = compensated._two_sum(s, t)
        c += q
    return s + c


@pytest.mark.parametrize("seed", range(6))
def test_sum2_without_the_loop_is_the_loop_float_for_float(seed):
    rng = np.random.default_rng(seed)
    rows, keys = int(rng.integers(1, 9)), int(rng.integers(1, 300))
    # wide exponents, cancellation, signed zeros: every TwoSum error is exercised
    terms = rng.standard_normal((rows, keys)) * np.exp2(rng.integers(-80, 80, (rows, keys)))
    terms[:, ::7] = -terms[:, ::7]
    terms[0, :3] = -0.0
    total = np.zeros(rows)
    for t in terms.T:
        total += t
    assert bits(compensated._sum2(compensated._with_zero(terms))) == bits(looped_sum2(terms))
    assert bits(compensated._accumulated(compensated._with_zero(terms))) == bits(total)


def head_of(seed: int, n: int, m: int, d: int, dv: int, scale: float, masked: bool) -> float64.Head:
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.standard_normal(s).astype(np.float32).astype(np.float64) for s in ((n, d), (m, d), (m, dv)))
    allowed = np.tril(np.ones((n, m), dtype=bool), m - n) if masked else None
    head = float64.head(Q * scale, K, V, None, allowed)
    assert head is not None
    return head


def from_stages(head: float64.Head, pairs: list[tuple[int, int]], per_key: bool):
    value, error = np.empty(len(pairs)), np.empty(len(pairs))
    for b in float64.blocks(head, weights=False, stages=True):
        mine = [p for p, (i, _) in enumerate(pairs) if b.start <= i < b.stop]
        if mine:
            r = np.array([pairs[p][0] - b.start for p in mine])
            cols = np.array([pairs[p][1] for p in mine])
            flags = np.full(len(mine), per_key)
            value[mine], error[mine] = compensated.stage_outputs(head, b.stage, r, cols, per_key=flags)
    return value, error


@pytest.mark.parametrize("masked", [False, True])
def test_the_sums_from_a_blocks_exps_are_compensated_outputs(masked):
    """The verifier redoes the "c" outputs from the exps its blocks made: the same floats and bounds as
    compensated.outputs, which makes its own exps (what the certificate's maker wrote)."""
    head = head_of(2, 300, 520, 24, 9, 2.0, masked)
    pairs = [(i, k) for i in range(0, 300, 7) for k in range(0, 9, 2)]
    value, error = compensated.outputs(head, pairs)
    again, bound = from_stages(head, pairs, per_key=False)
    assert (bits(again), bits(bound)) == (bits(value), bits(error))
    tight_value, tight = from_stages(head, pairs, per_key=True)
    assert bits(tight_value) == bits(value) and bool(np.all(tight <= error))


def exact_outputs(head: float64.Head, pairs: list[tuple[int, int]]) -> list[mpmath.mpf]:
    """O[i, k] at 50 digits: exact scores (float32 products), mpmath's exps; far inside any float64 bound."""
    mpmath.mp.dps = 50
    c = 1 / mpmath.sqrt(head.Q.shape[1])
    out = []
    for i, k in pairs:
        keys = range(head.K.shape[0]) if head.allowed is None else np.nonzero(head.allowed[i])[0].tolist()
        scores = [sum(Fraction(a) * Fraction(b) for a, b in zip(head.Q[i], head.K[j])) for j in keys]
        top = max(scores)
        e = [mpmath.exp(c * mpmath.mpf((s - top).numerator) / (s - top).denominator) for s in scores]  # dyadic: exact
        out.append(mpmath.fsum(w * mpmath.mpf(head.V[j, k]) for w, j in zip(e, keys)) / mpmath.fsum(e))
    return out


@pytest.mark.parametrize("masked", [False, True])
def test_the_per_key_bound_holds_against_50_digit_mpmath(masked):
    """Scores spread wide (Q times 6): the per-key bound holds every output and is tighter than the row's."""
    # 50 digits: mpmath's own error is some 10^-35 of the float64 bounds checked
    head = head_of(4, 12, 64, 8, 5, 6.0, masked)
    pairs = [(i, k) for i in range(12) for k in range(5)]
    value, row_bound = from_stages(head, pairs, per_key=False)
    _, key_bound = from_stages(head, pairs, per_key=True)
    mpmath.mp.dps = 50
    for (i, k), x, b, exact in zip(pairs, value.tolist(), key_bound.tolist(), exact_outputs(head, pairs)):
        assert abs(mpmath.mpf(x) - exact) <= mpmath.mpf(b), (i, k)
    assert int(np.sum(key_bound < row_bound)) == 60  # every one tighter: about 0.8 of the row's bound here


def certified(folder, digits: int):
    rng = np.random.default_rng(3)
    for name in "qkv":
        np.save(folder / f"{name}.npy", (rng.standard_normal((96, 16)) * 2).astype(np.float32))
    (folder / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    cert = folder / "c.json"
    assert (
        main(["compute", str(folder / "s.toml"), "--certify", "--float64", "--digits", str(digits)] + ["-o", str(cert)])
        == 0
    )
    return cert


def test_the_values_beyond_the_float64_bounds_go_to_the_tight_bound_first(tmp_path, capsys, monkeypatch):
    """Of the 56 outputs of path "a" at 12 digits, the per-key bound decides 11 and the double-word sums 44 of
    the rest, in the workers; the 4 of the rows that hold the one they leave open go on to decide_beyond (the
    exact rules, two floats and arb). A value changed is refused as before, and the run ends on its verdict."""
    cert = certified(tmp_path, 12)
    data = json.loads(cert.read_text(encoding="utf-8"))
    paths = data["output"]["path"]
    assert (sum(p.count("a") for p in paths), sum(p.count("c") for p in paths)) == (56, 15)
    asked: list[int] = []
    beyond = tensor_verifier.decide_beyond

    def counted(tensors, name, entries, digits, known=None):
        asked.append(len(entries))
        return beyond(tensors, name, entries, digits, known)

    monkeypatch.setattr(tensor_verifier, "decide_beyond", counted)
    capsys.readouterr()
    assert main(["verify-certificate", str(cert)]) == 0
    assert asked == [4, 1, 0]  # output, lse, lse2
    passed = capsys.readouterr().out.splitlines()  # the paths' line, the files' lines, what it certifies, the verdict
    assert passed[0].startswith(f"{cert}: output: ")
    i, k = next((i, p.index("a")) for i, p in enumerate(paths) if "a" in p)
    shown = data["output"]["value"][i][k]
    data["output"]["value"][i][k] = changed = shown[:-1] + str((int(shown[-1]) + 1) % 10)
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data), encoding="utf-8")
    capsys.readouterr()
    assert main(["verify-certificate", str(forged)]) == 1
    out, err = capsys.readouterr()
    assert (out.splitlines(), err) == (
        [
            f"{forged}: output[{i}, {k}]: {changed}, but the exact value rounds to {shown}",
            *(line.replace(str(cert), str(forged)) for line in passed[1:-2]),
            f"{forged}: it certifies output, lse and lse2 of Q, K and V, with the scale and the mask",
            f"{forged}: NOT verified: 1 value does not round to the value shown",
        ],
        "",
    )


def test_the_verdict_counts_what_failed():
    assert verdict(()) == "NOT verified: no value was checked"
    assert verdict(
        (
            "K k.npy: its SHA-256 is 00, the certificate's is 11: not the file certified",
            "output[0, 1]: 0.5 is not the rounding of every point of the float64 path's interval, which rounds to 0.6",
            "output[0, 2]: 0.5, but the exact value rounds to 0.4",
            "output[0, 3]: the certificate's float ± bound, 0x1p-1 ± 0x0p+0, does not hold the float64 path's …",
            "output[0, 4]: not decided here at the most digits",
            "weights[1][2]: the exact value is outside [0.1, 0.2]",
            "weights[1][3]: a bound of zero width needs a value known exactly, and this one is not",
        )
    ) == (
        "NOT verified: 1 file is not the file certified; 2 values do not round to the value shown; 1 value has a "
        "float ± bound that does not hold the one recomputed; 1 value lies outside its bounds; 1 value is not "
        "decided; 1 value fails its check"
    )


def test_the_double_word_enclosures_are_made_beside_the_blocks_and_two_floats_come_before_arb(tmp_path, monkeypatch):
    """The 45 outputs the per-key bound leaves open at 12 digits get their double-word enclosures in the
    engine's pieces, from each block's own score products: bit for bit doubled.outputs' made alone. The 4
    values of "a" in the rows of the one those leave open are read after the workers; that one goes to the
    two-float quotient, which decides it: no output goes to arb (the LSE's one value does)."""
    from symattn.certificates import float_tensors
    from symattn.kernel import doubled, refine

    cert = certified(tmp_path, 12)
    seen: dict = {}
    beyond, two_floats, enclose = tensor_verifier.decide_beyond, float_tensors._two_floats, refine.enclose

    def counted(tensors, name, entries, digits, known=None):
        seen.setdefault(name, (tensors, len(entries), known))
        return beyond(tensors, name, entries, digits, known)

    def two(head, n, entries, digits, out):
        seen.setdefault("two floats", []).append(len(entries))
        return two_floats(head, n, entries, digits, out)

    def arb(head, engine, wanted, bits):
        seen.setdefault("arb", []).append(sum(len(columns) for columns in wanted.values()))
        return enclose(head, engine, wanted, bits)

    monkeypatch.setattr(tensor_verifier, "decide_beyond", counted)
    monkeypatch.setattr(float_tensors, "_two_floats", two)
    monkeypatch.setattr(refine, "enclose", arb)
    assert main(["verify-certificate", str(cert)]) == 0
    tensors, asked, known = seen["output"]
    pairs = sorted(known)
    value, error = doubled.outputs(tensors.heads[0], pairs)
    assert (asked, len(known)) == (4, 45)
    assert [known[p] for p in pairs] == list(zip(value.tolist(), error.tolist()))
    assert (seen["two floats"], seen["arb"], seen["lse"][1]) == ([1], [1], 1)
