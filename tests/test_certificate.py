"""compute --certify and verify-certificate: every value's deciding bounds, re-checked with mpmath intervals."""

import copy
import json
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symattn.certificates.exact_verifier import verify
from symattn.cli.commands import main
from symattn.derivation.intermediates import _decimal, compute
from symattn.input import builtin
from symattn.input.errors import SpecError
from symattn.input.spec import load_spec


def certified(name="seed", lang="en", digits=15, **keys):
    spec = load_spec(builtin.example_path(name, lang)) if not keys else load_spec(keys)
    return compute(spec, digits=digits, exact=False, certify=True)


def test_seed_certificate():
    data = certified(digits=6)
    assert data["weights"]["value"][0] == ["0.417133", "0.220745", "0.362123"]
    lo, hi = (Fraction(x) for x in data["weights"]["bounds"][0][0])
    assert lo < hi and hi - lo < Fraction(1, 10**12)  # far finer than the 6 digits shown
    assert data["scores"]["bounds"][0][1] == ["0.1", "0.1"] or Fraction(data["scores"]["bounds"][0][1][0]) < Fraction(
        1, 10
    ) < Fraction(data["scores"]["bounds"][0][1][1])
    cert = data["certificate"]
    assert cert["inputs"] == {
        "Q": [["1", "0"], ["0", "1"], ["9/10", "1/10"]],
        "K": [["1", "1/5"], ["1/10", "1"], ["4/5", "3/10"]],
        "V": [["10", "0"], ["0", "10"], ["1", "1"]],
        "scale": "sqrt",
    }
    assert cert["rational"]["scores"][2] == ["23/25", "19/100", "3/4"]
    assert cert["rational"]["weights"][0] == [None, None, None] and cert["rational"]["sqrt_dk"] is None
    assert cert["precision_bits"] >= 64 and cert["digits"] == 6
    result = verify(data)
    assert (result.ok, result.checked, result.failures) == (True, 47, ())


@pytest.mark.parametrize("name", ["seed", "causal", "cross", "projection"])
def test_builtin_examples_verify(name):
    result = verify(certified(name))
    assert result.ok and result.failures == ()


def test_a_changed_digit_is_caught():
    data = certified(digits=10)
    bad = copy.deepcopy(data)
    bad["weights"]["value"][0][0] = "0.4171325334"  # the shown value is 0.4171325333
    assert verify(bad).failures == (
        "weights[1][1]: 0.4171325334 is not the rounding of every point of "
        f"[{data['weights']['bounds'][0][0][0]}, {data['weights']['bounds'][0][0][1]}]",
    )
    moved = copy.deepcopy(data)  # bounds that still round to the value shown but miss the exact value
    lo, hi = (Fraction(x) for x in data["output"]["bounds"][0][0])
    moved["output"]["bounds"][0][0] = [_decimal(lo + 3 * (hi - lo)), _decimal(hi + 3 * (hi - lo))]
    assert verify(moved).failures[0].startswith("output[1][1]: the exact value is outside [")


def test_exact_boundary_and_masks():
    # 0.15 rounds half-up to 0.2 at one digit: a bound of zero width, proved by knowing the value exactly
    data = compute(
        load_spec({"Q": [["0.15"]], "K": [["1"]], "V": [["1"]], "scale": "none"}), digits=1, exact=False, certify=True
    )
    assert data["scores"]["value"] == [["0.2"]] and data["scores"]["bounds"] == [[["0.15", "0.15"]]]
    assert verify(data).ok
    causal = certified("causal")
    assert causal["scaled"]["bounds"][0][1] == ["-inf", "-inf"] and verify(causal).ok


def test_certify_refuses_what_it_does_not_cover():
    with pytest.raises(SpecError) as info:
        compute(load_spec(builtin.example_path("multihead", "en")), certify=True)
    assert str(info.value).endswith("--certify covers one head without symbols or --backward")


def test_cli(tmp_path, capsys):
    target = tmp_path / "c.json"
    assert main(["compute", "--certify", "--no-exact", "--digits", "20", "-o", str(target)]) == 0
    assert main(["verify-certificate", str(target)]) == 0
    assert capsys.readouterr().out == (
        f"{target}: its inputs are the certificate's own: it names no files to check them against\n"
        f"{target}: 47 values verified: each exact value lies in its bounds, and every "
        "point of the bounds rounds to the value shown\n"
    )
    data = json.loads(target.read_text(encoding="utf-8"))
    data["exp"]["value"][1][1] = "2.0281149816474724808"  # one digit up
    target.write_text(json.dumps(data), encoding="utf-8")
    assert main(["verify-certificate", str(target)]) == 1
    out, err = capsys.readouterr()  # the report on stdout, its verdict last
    assert err == "" and out.startswith(
        f"{target}: exp[2][2]: 2.0281149816474724808 is not the rounding of every point"
    )
    assert out.endswith(f"{target}: NOT verified: 1 value does not round to the value shown\n")
    target.write_text("{}", encoding="utf-8")
    assert main(["verify-certificate", str(target)]) == 2
    assert capsys.readouterr().err == (
        f"symattn: {target}: certificate: missing: not the output of symattn compute --certify\n"
    )


def numbers(rows, cols):
    return st.lists(
        st.lists(st.integers(-30, 30).map(lambda x: str(Fraction(x, 10))), min_size=cols, max_size=cols),
        min_size=rows,
        max_size=rows,
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.data(),
    st.sampled_from(["sqrt", "none", "1/3"]),
    st.booleans(),
    st.integers(1, 40),
)
def test_random_certificates_verify(n, d, data, scale, causal, digits):
    Q, K, V = (data.draw(numbers(n, d)) for _ in range(3))
    spec = {"Q": Q, "K": K, "V": V, "scale": scale}
    if causal:
        spec["mask"] = "causal"
    result = verify(compute(load_spec(spec), digits=digits, exact=False, certify=True))
    assert result.ok, result.failures
