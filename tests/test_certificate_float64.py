"""compute --certify --float64 and verify-certificate: the output certified by the float64 path's float and
bound (recomputed by the verifier), arb where that bound does not decide; a 256 × 64 head in seconds."""

import copy
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from symattn.certificates.exact_verifier import verify
from symattn.certificates.float_maker import certificate_json
from symattn.cli.commands import main
from symattn.derivation.intermediates import _decimal
from symattn.input.errors import LimitError, SpecError
from symattn.input.files import FloatText, parse_text
from symattn.kernel import float64


def head(n, d, causal=False, seed=1):
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.standard_normal((n, d)).astype(np.float16).astype(np.float64) for _ in range(3))
    allowed = np.tril(np.ones((n, n), dtype=bool)) if causal else None
    return float64.head(Q, K, V, None, allowed)


def made(n=32, d=8, digits=10, causal=False):
    text = "".join(certificate_json(head(n, d, causal), digits, []))
    return parse_text(text, "c.json", json_=True)  # as verify-certificate reads it


@pytest.fixture(scope="module")
def small():
    return made(causal=True)


def npy_spec(folder, h):
    """A spec naming the head's Q, K and V as float16 .npy files beside it."""
    for name, a in zip("qkv", (h.Q, h.K, h.V)):
        np.save(folder / f"{name}.npy", a.astype(np.float16))
    spec = folder / "s.toml"
    spec.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    return spec


def test_float64_certificates_show_10_digits_unless_told(tmp_path):
    spec = npy_spec(tmp_path, head(8, 4))
    cert = tmp_path / "c.json"
    assert main(["compute", str(spec), "--certify", "--float64", "-o", str(cert)]) == 0
    assert json.loads(cert.read_text(encoding="utf-8"))["certificate"]["digits"] == 10


def test_a_256_by_64_certificate_verifies(tmp_path, capsys):
    """Version 2, which compute --certify --float64 wrote before version 3 (tests/test_certificate_v3.py),
    still verifies."""
    from symattn.certificates.float_maker import compute_float64
    from symattn.input.spec import load_spec

    h = head(256, 64)
    spec = npy_spec(tmp_path, h)
    cert = tmp_path / "c.json"
    cert.write_text("".join(compute_float64(load_spec(spec), 10, tmp_path)), encoding="utf-8")
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["certificate"]["version"] == 2 and data["certificate"]["paths"] == {
        "float64": 16352,
        "compensated": 17,
        "arb": 15,
    }
    assert data["output"]["value"][0][:3] == ["-0.07012202020", "-0.1139758372", "0.06988937497"]
    capsys.readouterr()
    assert main(["verify-certificate", str(cert)]) == 0
    assert (
        capsys.readouterr().out
        == (
            f"{cert}: 16352 by the float64 path and 17 by its error-free sums (their floats and bounds recomputed "
            "here), 15 by arb\n"
            f"{cert}: spec {spec}: SHA-256 matches\n"
            + "".join(f"{cert}: {n.upper()} {tmp_path / f'{n}.npy'}: SHA-256 matches\n" for n in "qkv")
            + f"{cert}: its inputs are the values the spec {spec} gives, read here from its files\n"
            f"{cert}: it certifies output of Q, K and V, with the scale and the mask\n"  # as the standalone one says
            # the verdict last; not "every point of the bounds": the certificate's bounds are wider than the interval
            # that decided
            f"{cert}: 16384 values verified: each exact value lies in the interval recomputed here from the inputs "
            "(the float64 path's float ± its bound) or in its arb enclosure, and every point of that interval or "
            "enclosure rounds to the value shown\n"
        )
    )


def test_arb_values_agree_with_the_exact_path():
    # the exact (arb/interval) path's own digits for a few entries, both paths among them
    from symattn.input.spec import load_spec

    h = head(16, 4, causal=True)
    data = made(16, 4, digits=13, causal=True)
    spec = load_spec(
        {
            "Q": [[str(Fraction(x)) for x in row] for row in h.Q.tolist()],
            "K": [[str(Fraction(x)) for x in row] for row in h.K.tolist()],
            "V": [[str(Fraction(x)) for x in row] for row in h.V.tolist()],
            "mask": "causal",
        }
    )
    from symattn.exact.factory import build

    exact = build(spec).significant("output", 13)
    assert data["output"]["value"] == [[str(x) for x in row] for row in exact]
    assert data["certificate"]["paths"] == {"float64": "55", "compensated": "2", "arb": "7"}  # JSON numbers' text
    assert verify(data).failures == ()


def test_the_causal_certificate_verifies(small):
    result = verify(small)
    assert (result.ok, result.checked, result.paths) == (
        True,
        256,
        ("252 by the float64 path and 0 by its error-free sums (their floats and bounds recomputed here), 4 by arb",),
    )


def failures(data, change):
    bad = copy.deepcopy(data)
    change(bad)
    return verify(bad, "c.json").failures


def test_a_float_moved_past_its_bound_is_caught(small):
    x, b = float.fromhex(small["output"]["float"][2][1]), float.fromhex(small["output"]["bound"][2][1])

    def move(d):
        d["output"]["float"][2][1] = (x + b).hex()  # the certificate's interval no longer holds ours

    from symattn.certificates.float_verifier import _recomputed

    f, e = _recomputed(head(32, 8, causal=True))  # the verifier's own float and bound
    assert b == np.nextafter(3 * float64.SAFETY * e[2, 1], np.inf) and x == f[2, 1]
    assert failures(small, move) == (
        f"output[3][2]: the certificate's float ± bound, {(x + b).hex()} ± {b.hex()}, does not hold the float64 "
        f"path's {x.hex()} ± {e[2, 1].hex()}",
    )


def test_a_float_a_few_ulps_off_still_holds(small):
    # another machine's BLAS may sum in another order: a float a few ULPs off is still inside the bound
    def move(d):
        x = float.fromhex(d["output"]["float"][2][1])
        for _ in range(4):
            x = math.nextafter(x, math.inf)
        d["output"]["float"][2][1] = x.hex()

    assert failures(small, move) == ()


def test_a_machine_that_sums_in_another_order_verifies(small, monkeypatch):
    # the worst another machine can do: its float at the far end of our bound, its bound as ours
    from symattn.certificates import float_verifier as float_certificate

    real = float_certificate._recomputed

    def elsewhere(head):
        f, b = real(head)
        return f + b, b

    monkeypatch.setattr(float_certificate, "_recomputed", elsewhere)
    assert failures(small, lambda d: None) == ()


def test_a_compensated_float_moved_past_its_bound_is_caught():
    data = made(16, 4, digits=13, causal=True)
    i, k = next((i, p.index("c")) for i, p in enumerate(data["output"]["path"]) if "c" in p)
    x, b = float.fromhex(data["output"]["float"][i][k]), float.fromhex(data["output"]["bound"][i][k])
    assert failures(data, lambda d: None) == ()

    def move(d):
        d["output"]["float"][i][k] = (x - b).hex()

    (line,) = failures(data, move)
    assert line.startswith(f"output[{i + 1}][{k + 1}]: the certificate's float ± bound, ")


def test_a_shrunk_bound_is_caught(small):
    def shrink(d):
        # below the engine's own bound (a third of the certificate's)
        d["output"]["bound"][4][3] = (float.fromhex(d["output"]["bound"][4][3]) / 4).hex()

    (line,) = failures(small, shrink)
    assert line.startswith("output[5][4]: the certificate's float ± bound, ")


def test_a_bound_within_its_factor_holds_and_a_wider_one_is_refused(small):
    from symattn.certificates.float_verifier import BOUND_FACTOR, _recomputed

    _, e = _recomputed(head(32, 8, causal=True))  # the verifier's own bound
    b = float.fromhex(small["output"]["bound"][4][3])
    assert BOUND_FACTOR == 3 * 1.0001**2 and b == np.nextafter(3 * 1.0001 * e[4, 3], np.inf)

    def widen(bound):
        return lambda d: d["output"]["bound"][4].__setitem__(3, bound.hex())

    assert failures(small, widen(b * 1.00009)) == ()  # another machine's bound may be a little wider than ours
    # a bound of 2^1000 holds every float: true, and it says nothing, so it is refused
    for wide in (b * 2, 2.0**1000):
        with pytest.raises(SpecError) as info:
            failures(small, widen(wide))
        assert str(info.value) == (
            f"c.json: output.bound[5][4]: {wide.hex()} is more than 3.0006 times the float64 path's own "
            f"bound, {e[4, 3].hex()} (the most a certificate's bound may be)"
        )


def test_a_changed_digit_and_a_moved_enclosure_are_caught(small):
    wide = made(64, 16)  # an arb enclosure of an irrational output

    def digit(d):
        shown = d["output"]["value"][2][0]
        d["output"]["value"][2][0] = shown[:-1] + str((int(shown[-1]) + 1) % 10)

    (line,) = failures(small, digit)
    assert line.startswith("output[3][1]: ") and line.endswith(" to 10 digits")
    at = next(n for n, e in enumerate(wide["certificate"]["enclosures"]) if "bounds" in e)
    i, k = (int(x) for x in wide["certificate"]["enclosures"][at]["at"])

    def move(d):
        e = d["certificate"]["enclosures"][at]
        lo, hi = (Fraction(x) for x in e["bounds"])
        e["bounds"] = [_decimal(lo + 3 * (hi - lo)), _decimal(hi + 3 * (hi - lo))]

    assert failures(wide, move) == (f"output[{i}][{k}]: the exact value is outside its enclosure",)

    def claim(d):  # an irrational output claimed to be a fraction
        e = d["certificate"]["enclosures"][at]
        d["certificate"]["enclosures"][at] = {"at": [i, k], "exact": e["bounds"][0]}

    assert failures(wide, claim) == (
        f"output[{i}][{k}]: an exact fraction, but the row's scores differ: it is irrational",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["certificate"].update(version=6),
            "c.json: certificate.version: 6: this symattn reads versions 1 to 5",
        ),
        (
            lambda d: d["output"]["float"][0].__setitem__(0, "0.5"),
            "c.json: output.float[1][1]: expected a float as float.hex writes it, got '0.5'",
        ),
        (
            lambda d: d["output"]["bound"][0].__setitem__(0, "inf"),
            "c.json: output.bound[1][1]: expected a bound as float.hex writes it, got 'inf'",
        ),
        (
            lambda d: d["output"]["bound"][0].__setitem__(0, (-1.0).hex()),
            "c.json: output.bound[1][1]: must not be negative, got -0x1.0000000000000p+0",
        ),
        (
            lambda d: d["certificate"]["inputs"]["Q"][0].__setitem__(0, (0.1).hex()),
            "c.json: certificate.inputs.Q[1][1]: 0x1.999999999999ap-4 is not a float32 value: its products would round",
        ),
        (
            lambda d: d["output"]["path"].__setitem__(0, "x" * 8),
            'c.json: output.path[1]: expected 8 characters "f" (float64), "c" (compensated) or "a" (arb), got \'xxxxxxxx\'',
        ),
        (
            lambda d: d["certificate"]["inputs"].update(mask=["1" * 32] * 31),
            "c.json: certificate.inputs.mask: 31 rows for the 32 queries of certificate.inputs.Q",
        ),
        (
            lambda d: d["certificate"].update(digits=True),
            "c.json: certificate.digits: expected a whole number from 1 to 13, got a boolean",
        ),
        (
            lambda d: d["certificate"]["enclosures"][0].update(at=[1, 2]),
            'c.json: certificate.enclosures.at[1]: output[1][2] has path "f": it has no enclosure',
        ),
        (  # a JSON number, not a text: its digits right (the reader keeps them as FloatText, a str)
            lambda d: d["output"]["value"][0].__setitem__(0, FloatText(d["output"]["value"][0][0])),
            'c.json: output.value[1][1]: expected a value in a string as compute --certify shows it, such as "0.4171" '
            'or "2.028E+4", got a number',
        ),
        (
            lambda d: d["output"]["value"].__setitem__(0, "0.5"),
            "c.json: output.value[1]: expected a list of entries, one per column of certificate.inputs.V, got a string",
        ),
    ],
)
def test_hostile_certificates_get_one_line(small, change, message):
    bad = copy.deepcopy(small)
    change(bad)
    with pytest.raises(SpecError) as info:
        verify(bad, "c.json")
    assert str(info.value) == message


def test_absurd_sizes_are_refused(small, monkeypatch):
    from symattn.input import limits

    for change, message in (
        (
            lambda d: d["output"]["float"][0].__setitem__(0, "0x1" + "0" * 10**6),
            "c.json: output.float[1][1]: expected a float as float.hex writes it, got '0x1" + "0" * 47 + "'…",
        ),
        (
            lambda d: d["certificate"].update(enclosures=[{"at": [1, 1], "exact": "1"}] * 257),
            "c.json: certificate.enclosures: 257 enclosures for 256 values",
        ),
        (
            lambda d: d["output"]["value"][0].__setitem__(1, "1" * 10**5),
            "c.json: output.value[1][2]: a number of 100000 characters; the limit is 64000",
        ),
    ):
        bad = copy.deepcopy(small)
        change(bad)
        with pytest.raises(SpecError) as info:
            verify(bad, "c.json")
        assert str(info.value) == message

    monkeypatch.setattr(limits, "FLOAT_CERTIFICATE_TOKENS", 16)
    with pytest.raises(LimitError) as info:
        verify(small, "c.json")
    assert str(info.value) == "c.json: certificate.inputs.Q: 32 rows; the limit is 16"


def test_compute_refuses_what_the_float64_path_does_not_take(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('Q = [["0.1"]]\nK = [["1"]]\nV = [["1"]]\n', encoding="utf-8")
    assert main(["compute", str(spec), "--certify", "--float64", "--digits", "6"]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {spec}: --float64 covers Q, K and V of float32 values (float16 and bfloat16 ones are), one "
        "head or (batch, head) files with grouped-query heads, without projections, W_O, RoPE or QK-norm\n"
    )
    assert main(["compute", str(spec), "--certify", "--float64", "--digits", "15"]) == 2
    assert (
        capsys.readouterr().err == f"symattn: {spec}: --float64 shows 1 to 13 significant digits (--digits), not 15\n"
    )
    assert main(["compute", str(spec), "--float64"]) == 2
    assert capsys.readouterr().err.endswith("--float64: it makes a certificate; give --certify too\n")


def test_an_enclosures_ends_are_written_exactly():
    from symattn.certificates.float_maker import exact_decimal

    x = Fraction(3**60 + 1, 2**130)  # 97 significant digits: past any decimal context's precision
    assert Fraction(exact_decimal(x)) == x and Fraction(exact_decimal(-x)) == -x


def test_an_exact_scale_and_the_version_field():
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((16, 4)).astype(np.float32).astype(np.float64) for _ in range(3))
    text = "".join(certificate_json(float64.head(Q, K, V, Fraction(1, 3), None), 9, []))
    data = parse_text(text, "c.json", json_=True)
    assert data["certificate"]["inputs"]["scale"] == "1/3" and verify(data).ok
    from symattn.derivation.intermediates import compute
    from symattn.input.spec import load_spec

    old = compute(load_spec({"Q": [["1"]], "K": [["1"]], "V": [["1"]]}), digits=3, exact=False, certify=True)
    assert verify({**old, "certificate": {**old["certificate"], "version": 1}}).ok  # version 1, said or not
    with pytest.raises(SpecError) as info:
        verify({**old, "certificate": {**old["certificate"], "version": "1"}}, "c.json")
    assert str(info.value) == "c.json: certificate.version: '1': this symattn reads versions 1 to 5"


def test_d_k_must_match_the_inputs(small):
    with pytest.raises(SpecError) as info:
        verify({**small, "d_k": 9}, "c.json")
    assert str(info.value) == "c.json: d_k: 9, but certificate.inputs.Q has 8 columns"


def test_two_processes_find_the_same_lines(monkeypatch):
    from symattn.certificates import float_verifier as float_certificate

    data = made(256, 64)  # 15 arb values, in as many rows
    boxes = [n for n, e in enumerate(data["certificate"]["enclosures"]) if "bounds" in e]

    def move(d):
        for n in boxes:  # every arb enclosure moved off the exact value
            e = d["certificate"]["enclosures"][n]
            lo, hi = (Fraction(x) for x in e["bounds"])
            e["bounds"] = [_decimal(lo + 3 * (hi - lo)), _decimal(hi + 3 * (hi - lo))]

    one = failures(data, move)
    monkeypatch.setattr(float_certificate, "PARALLEL_EXPS", 0)
    assert len(one) == len(boxes) == 15 and failures(data, move) == one


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 13),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
@example(1, 2, 3, 1, False, 1)  # V's column 2 is 1.5 for both keys: the output is 1.5 exactly, a tie at one digit
def test_the_values_are_the_exact_models_and_verify(n, m, d, digits, masked, seed):
    from symattn.exact.factory import build
    from symattn.input.spec import load_spec

    rng = np.random.default_rng(seed)
    Q, K, V = (
        (rng.integers(-8, 9, (rows, d)) / 4).astype(np.float64) if seed % 2 else rng.standard_normal((rows, d))
        for rows in (n, m, m)
    )
    Q, K, V = (a.astype(np.float16).astype(np.float64) for a in (Q, K, V))
    allowed = rng.random((n, m)) < 0.6 if masked else None
    if allowed is not None:
        allowed[:, 0] = True
    text = "".join(certificate_json(float64.head(Q, K, V, None, allowed), digits, []))
    data = parse_text(text, "c.json", json_=True)
    spec = {name: [[str(Fraction(x)) for x in row] for row in a.tolist()] for name, a in zip("QKV", (Q, K, V))}
    if allowed is not None:
        spec["mask"] = [[bool(x) for x in row] for row in allowed.tolist()]
    exact = build(load_spec(spec)).significant("output", digits)
    assert data["output"]["value"] == [[str(x) for x in row] for row in exact]
    assert verify(data).failures == ()


def test_a_column_of_zeros_is_exactly_zero():
    h = head(16, 4)
    V = h.V.copy()
    V[:, 1] = 0.0  # padding, as kernels' tests have: the output's column is exactly 0
    data = parse_text("".join(certificate_json(float64.head(h.Q, h.K, V, None, None), 10, [])), "c.json", json_=True)
    assert [row[1] for row in data["output"]["value"]] == ["0"] * 16
    assert [p[1] for p in data["output"]["path"]] == ["a"] * 16 and verify(data).failures == ()


def test_equal_keys_and_ties_are_decided_by_the_exact_rules_in_integers(tmp_path, capsys):
    """Every key the same (all scores equal) and V's columns alternating 0.25 and 0.5: each output is exactly
    0.375, a tie at 2 digits that no enclosure decides; the exact rules give it (0.38, half-up), with the
    dots and V's means in integers (in Fractions a 512 × 512 × 64 head took 106 s, a helper found)."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "q.npy", rng.standard_normal((32, 8)).astype(np.float32))
    np.save(tmp_path / "k.npy", np.tile(rng.standard_normal((1, 8)).astype(np.float32), (40, 1)))
    np.save(
        tmp_path / "v.npy",
        np.where(np.arange(40)[:, None] % 2 == 0, 0.25, 0.5).astype(np.float32) * np.ones((1, 8), np.float32),
    )
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    cert = tmp_path / "c.json"
    assert main(["compute", str(tmp_path / "s.toml"), "--certify", "--float64", "--digits", "2", "-o", str(cert)]) == 0
    data = json.loads(cert.read_text(encoding="utf-8"))
    assert data["output"]["value"] == [["0.38"] * 8] * 32 and data["output"]["path"] == ["a" * 8] * 32
    capsys.readouterr()
    assert main(["verify-certificate", str(cert)]) == 0


def test_scores_near_1e30_take_more_bits_not_a_refusal(tmp_path, capsys):
    """A query of 1e30 (float32) over two keys: arb's balls at 96 bits lose the finite value ("not finite in
    arb", exit 2, in compute and verify-certificate, where the standalone verifier verified); they now take
    more bits, as compare's refinement does. LSE = 1e30/√2 (float32's 1e30 is 1.0000000150474662e30)."""
    np.save(tmp_path / "q.npy", np.array([[1e30, 0]], np.float32))
    np.save(tmp_path / "k.npy", np.array([[1, 0], [0, 1]], np.float32))
    np.save(tmp_path / "v.npy", np.array([[0.5], [2]], np.float32))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    cert = tmp_path / "c.json"
    assert main(["compute", str(tmp_path / "s.toml"), "--certify", "--float64", "-o", str(cert)]) == 0
    data = json.loads(cert.read_text(encoding="utf-8"))
    shown = [data[name]["value"] for name in ("output", "lse", "lse2")]
    assert shown == [[["0.5000000000"]], [["7.071067918E+29"]], [["1.020139462E+30"]]]
    capsys.readouterr()
    assert main(["verify-certificate", str(cert)]) == 0
