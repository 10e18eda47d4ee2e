"""Forged and malformed certificates: each is refused with its own one-line message, quickly, exit 2."""

import copy
import json
import os
import subprocess
import sys

import pytest

from symattn.certificates.exact_verifier import verify
from symattn.cli.commands import main
from symattn.derivation.intermediates import compute
from symattn.input import builtin
from symattn.input.errors import LimitError, SpecError
from symattn.input.limits import BOUND_LENGTH
from symattn.input.spec import load_spec

from .conftest import ROOT

# The causal example: 3 queries, 3 keys, d_k = 2, 2 columns of V; mask [[T, F, F], [T, T, F], [T, T, T]].
GENUINE = compute(load_spec(builtin.example_path("causal", "en")), digits=6, exact=False, certify=True)
INF = "-inf, but only scaled is -inf, and only where the mask is false"
BOUND = 'expected a finite decimal in a string, such as "0.25"'
EXACT = 'expected an exact number in a string, such as "3/10" or "0.25"'
SHOWN = 'expected a value in a string as compute --certify shows it, such as "0.4171" or "2.028E+4"'


def _set(*path):
    """Set the entry at path (keys, then 0-based indexes) to the last item."""
    *keys, last, value = path

    def forge(d):
        for key in keys:
            d = d[key]
        d[last] = value

    return forge


def _both(quantity, *index_and_value):
    """One entry's value set to the given text, and its bounds to [text, text]."""
    *index, value = index_and_value

    def forge(d):
        _set(quantity, "value", *index, value)(d)
        _set(quantity, "bounds", *index, [value, value])(d)

    return forge


def _drop(*path):
    def forge(d):
        for key in path[:-1]:
            d = d[key]
        del d[path[-1]]

    return forge


def _all_false_row(d):
    # softmax is undefined on row 1 once no key is allowed; weights 0 and no output hide it
    d["mask"][0] = [False, False, False]
    d["weights"]["value"][0][0] = "0"
    d["weights"]["bounds"][0][0] = ["0", "0"]
    del d["output"]


FORGERIES = [
    # -inf where the certificate's own mask is false: it passed for every quantity
    (
        "sqrt_dk -inf",
        lambda d: d.update(sqrt_dk={"value": "-inf", "bounds": ["-inf", "-inf"]}),
        f"sqrt_dk.value: {INF}",
    ),
    ("scale -inf", lambda d: d.update(scale={"value": "-inf", "bounds": ["-inf", "-inf"]}), f"scale.value: {INF}"),
    ("scores -inf", _both("scores", 0, 1, "-inf"), f"scores.value[1][2]: {INF}"),
    ("exp_sum -inf", _both("exp_sum", 0, "-inf"), f"exp_sum.value[1]: {INF}"),
    ("output -inf", _both("output", 0, 1, "-inf"), f"output.value[1][2]: {INF}"),
    ("exp -inf", _both("exp", 0, 1, "-inf"), "exp.value[1][2]: expected '0' where the mask is false, got '-inf'"),
    (
        "weights -inf",
        _both("weights", 0, 2, "-inf"),
        "weights.value[1][3]: expected '0' where the mask is false, got '-inf'",
    ),
    ("scaled -inf allowed", _both("scaled", 1, 1, "-inf"), "scaled.value[2][2]: -inf where the mask is true"),
    (
        "one bound -inf",
        lambda d: d["weights"]["bounds"][1][1].__setitem__(0, "-inf"),
        "weights.bounds[2][2]: -inf where the mask is true",
    ),
    (
        "masked scaled a number",
        _set("scaled", "value", 0, 1, "0.5"),
        "scaled.value[1][2]: expected '-inf' where the mask is false, got '0.5'",
    ),
    (
        "masked weight wide",
        _set("weights", "bounds", 0, 1, ["0", "0.1"]),
        "weights.bounds[1][2]: expected ['0', '0'] where the mask is false, got ['0', '0.1']",
    ),
    ("exp 0 allowed", _both("exp", 1, 1, "0"), "exp.value[2][2]: must be positive where the mask is true, got '0'"),
    (
        "rational at -inf",
        lambda d: d["certificate"]["rational"]["scaled"][0].__setitem__(1, "5"),
        "certificate.rational.scaled[1][2]: expected null where the value is -inf, got '5'",
    ),
    # a mask row that is all false, weights 0, output removed
    ("all-false mask row", _all_false_row, "mask[1]: no key is allowed: softmax is undefined on a row without keys"),
    ("output removed", _drop("output"), "output: missing: compute --certify gives every quantity, with its bounds"),
    # extra entries appended to inputs.Q, an extra row of inputs.V: they were ignored
    (
        "Q entry appended",
        lambda d: d["certificate"]["inputs"]["Q"][2].append("5"),
        "certificate.inputs.Q[3]: 3 entries, but row 1 has 2",
    ),
    (
        "Q column appended",
        lambda d: [row.append("5") for row in d["certificate"]["inputs"]["Q"]],
        "certificate.inputs.K[1]: 2 entries for the 3 columns of certificate.inputs.Q",
    ),
    (
        "Q row appended",
        lambda d: d["certificate"]["inputs"]["Q"].append(["5", "5"]),
        "mask: 3 rows for the 4 queries of certificate.inputs.Q",
    ),
    (
        "V row appended",
        lambda d: d["certificate"]["inputs"]["V"].append(["5", "5"]),
        "certificate.inputs.V: 4 rows for the 3 keys of certificate.inputs.K",
    ),
    (
        "V column appended",
        lambda d: [row.append("5") for row in d["certificate"]["inputs"]["V"]],
        "output.value[1]: 2 entries for the 3 columns of certificate.inputs.V",
    ),
    ("d_k", lambda d: d.update(d_k=3), "d_k: 3, but certificate.inputs.Q has 2 columns"),
    # √d_k and the scale finite and positive
    (
        "sqrt_dk 0",
        lambda d: d.update(sqrt_dk={"value": "0", "bounds": ["0", "0"]}),
        "sqrt_dk.value: must be positive, got '0'",
    ),
    (
        "scale negative",
        lambda d: d.update(scale={"value": "-0.707107", "bounds": ["-0.7071068", "-0.7071067"]}),
        "scale.value: must be positive, got '-0.707107'",
    ),
    (
        "inputs.scale 0",
        lambda d: d["certificate"]["inputs"].update(scale="0"),
        "certificate.inputs.scale: must be positive, got '0'",
    ),
    (
        "inputs.scale Infinity",
        lambda d: d["certificate"]["inputs"].update(scale="Infinity"),
        f"certificate.inputs.scale: {EXACT}, got 'Infinity'",
    ),
    (
        "inputs.scale missing",
        _drop("certificate", "inputs", "scale"),
        'certificate.inputs.scale: missing: "sqrt" or an exact number',
    ),
]

TRACEBACKS = [
    (
        "bound Infinity",
        _set("weights", "bounds", 1, 0, ["Infinity", "Infinity"]),
        f"weights.bounds[2][1]: {BOUND}, got 'Infinity'",
    ),
    ("bound NaN", _set("exp_sum", "bounds", 2, ["NaN", "1"]), f"exp_sum.bounds[3]: {BOUND}, got 'NaN'"),
    ("value NaN", _set("weights", "value", 1, 0, "NaN"), f"weights.value[2][1]: {SHOWN}, got 'NaN'"),
    (
        "three bounds",
        lambda d: d["weights"]["bounds"][1][0].append("1"),
        "weights.bounds[2][1]: expected [lo, hi], got 3 entries",
    ),
    ("one bound", _set("output", "bounds", 2, 1, ["1"]), "output.bounds[3][2]: expected [lo, hi], got 1 entry"),
    ("bound a string", _set("exp_sum", "bounds", 0, "1"), "exp_sum.bounds[1]: expected [lo, hi], got a string"),
    (
        "extra row",
        lambda d: d["weights"]["value"].append(["0", "0", "1"]),
        "weights.value: 4 rows for the 3 queries of certificate.inputs.Q",
    ),
    (
        "missing row",
        lambda d: d["output"]["value"].pop(),
        "output.value: 2 rows for the 3 queries of certificate.inputs.Q",
    ),
    (
        "missing bounds row",
        lambda d: d["exp"]["bounds"].pop(),
        "exp.bounds: 2 rows for the 3 queries of certificate.inputs.Q",
    ),
    (
        "short row",
        lambda d: d["scores"]["value"][2].pop(),
        "scores.value[3]: 2 entries for the 3 keys of certificate.inputs.K",
    ),
    (
        "extra exp_sum",
        lambda d: d["exp_sum"]["value"].append("1"),
        "exp_sum.value: 4 entries for the 3 queries of certificate.inputs.Q",
    ),
    ("short mask", lambda d: d["mask"].pop(), "mask: 2 rows for the 3 queries of certificate.inputs.Q"),
    ("short mask row", lambda d: d["mask"][1].pop(), "mask[2]: 2 entries for the 3 keys of certificate.inputs.K"),
    (
        "mask entry a string",
        lambda d: d["mask"][0].__setitem__(0, "true"),
        "mask[1][1]: expected true or false, got 'true'",
    ),
    (
        "mask a table",
        lambda d: d.update(mask={}),
        "mask: expected a list of rows, one per query of certificate.inputs.Q, got a table",
    ),
    ("no mask", _drop("mask"), "mask: missing: one true or false per score, a row per query"),
    (
        "quantity a list",
        lambda d: d.update(weights=d["weights"]["value"]),
        "weights: expected a table with value and bounds, got a list",
    ),
    ("value missing", _drop("weights", "value"), "weights.value: missing"),
    (
        "value a table",
        _set("weights", "value", {}),
        "weights.value: expected a list of rows, one per query of certificate.inputs.Q, got a table",
    ),
    ("scalar a list", _set("sqrt_dk", "value", ["1.41421"]), f"sqrt_dk.value: {SHOWN}, got a list"),
    (
        "no inputs.Q",
        _drop("certificate", "inputs", "Q"),
        "certificate.inputs.Q: missing: the exact fractions of Q, a list of rows",
    ),
    ("no inputs", _drop("certificate", "inputs"), "certificate.inputs: missing: the exact Q, K, V and scale"),
    (
        "Q empty",
        lambda d: d["certificate"]["inputs"].update(Q=[]),
        "certificate.inputs.Q: expected a list of rows, got an empty list",
    ),
    (
        "Q a string",
        lambda d: d["certificate"]["inputs"].update(Q="1"),
        "certificate.inputs.Q: expected a list of rows, got a string",
    ),
    (
        "K row empty",
        lambda d: d["certificate"]["inputs"]["K"].__setitem__(1, []),
        "certificate.inputs.K[2]: expected a list of entries, got an empty list",
    ),
    (
        "Q entry NaN",
        lambda d: d["certificate"]["inputs"]["Q"][0].__setitem__(0, "NaN"),
        f"certificate.inputs.Q[1][1]: {EXACT}, got 'NaN'",
    ),
    (
        "zero denominator",
        lambda d: d["certificate"]["inputs"]["K"][0].__setitem__(0, "1/0"),
        "certificate.inputs.K[1][1]: '1/0' divides by zero",
    ),
    (
        "rational a list",
        lambda d: d["certificate"].update(rational=[]),
        "certificate.rational: expected a table, got an empty list",
    ),
    (
        "rational short",
        lambda d: d["certificate"]["rational"]["weights"].pop(),
        "certificate.rational.weights: 2 rows for the 3 queries of certificate.inputs.Q",
    ),
    (
        "rational NaN",
        lambda d: d["certificate"]["rational"]["scores"][0].__setitem__(0, "NaN"),
        f"certificate.rational.scores[1][1]: {EXACT}, got 'NaN'",
    ),
    # numbers that once took Python's big-int paths: refused on their text, before any conversion
    (
        "bound 1e30000000",
        _set("weights", "bounds", 1, 0, ["1e30000000", "1e30000000"]),
        f"weights.bounds[2][1]: {BOUND}, got '1e30000000'",
    ),
    (
        "value 1e30000000",
        _set("weights", "value", 1, 0, "1e30000000"),
        (
            f"weights.value[2][1]: the exponent of '1e30000000' is beyond ±{BOUND_LENGTH}, past any bound of the "
            "limit's length"
        ),
    ),
    (
        "bound too long",
        _set("weights", "bounds", 1, 0, ["0." + "3" * BOUND_LENGTH, "1"]),
        f"weights.bounds[2][1]: a number of {BOUND_LENGTH + 2} characters; the limit is {BOUND_LENGTH}",
    ),
    (
        "spaces after a bound",
        _set("weights", "bounds", 1, 0, ["0.3" + " " * 400_000, "1"]),
        f"weights.bounds[2][1]: a number of {400_003} characters; the limit is {BOUND_LENGTH}",
    ),
]

CASES = FORGERIES + TRACEBACKS


def forged(forge):
    data = copy.deepcopy(GENUINE)
    forge(data)
    return data


def test_the_corpus_names_each_case_once():
    assert len({name for name, *_ in CASES}) == len(CASES)
    assert len({message for *_, message in CASES}) == len(CASES)


def test_the_genuine_certificate_verifies():
    result = verify(copy.deepcopy(GENUINE))
    assert (result.ok, result.checked, result.failures) == (True, 47, ())


@pytest.mark.parametrize("name, forge, message", CASES, ids=[name for name, *_ in CASES])
def test_rejected_by_verify(name, forge, message):
    data = forged(forge)
    with pytest.raises(SpecError) as info:
        verify(data, "c.json")
    assert str(info.value) == f"c.json: {message}"
    assert isinstance(info.value, LimitError) == ("limit" in message)


@pytest.mark.parametrize("name, forge, message", CASES, ids=[name for name, *_ in CASES])
def test_rejected_by_the_cli(name, forge, message, tmp_path, capsys):
    target = tmp_path / "c.json"
    target.write_text(json.dumps(forged(forge)), encoding="utf-8")
    assert main(["verify-certificate", str(target)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"symattn: {target}: {message}\n")


def test_json_numbers_are_read_as_their_text(tmp_path, capsys):
    # the reader keeps a JSON number as its text: 1e30000000 is refused on that text, unquoted in the message
    data = forged(_set("weights", "bounds", 1, 0, ["@", "1"]))
    target = tmp_path / "c.json"
    target.write_text(json.dumps(data).replace('"@"', "1e30000000"), encoding="utf-8")
    assert main(["verify-certificate", str(target)]) == 2
    assert capsys.readouterr().err == f"symattn: {target}: weights.bounds[2][1]: {BOUND}, got 1e30000000\n"


def test_a_python_float_is_refused():
    # a float is not the exact text of a value (a JSON number is: the reader keeps its text)
    with pytest.raises(SpecError) as info:
        verify(forged(_set("output", "value", 0, 0, 10.0)))
    assert str(info.value) == f"<certificate>: output.value[1][1]: {SHOWN}, got a number"


def test_long_exact_inputs_never_reach_the_int_string_limit():
    # 10^5000 / 10^5000 is 1: more digits than int(str) takes by default, read through Decimal instead
    data = copy.deepcopy(GENUINE)
    data["certificate"]["inputs"]["Q"][0][0] = "1" + "0" * 5000 + "/1" + "0" * 5000
    assert verify(data).ok


def run_cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "symattn", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


# the cases the attack found, through python -m symattn: one line, exit 2, no traceback
ATTACKS = [
    "sqrt_dk -inf",
    "all-false mask row",
    "Q entry appended",
    "V row appended",
    "bound Infinity",
    "three bounds",
    "no mask",
    "bound 1e30000000",
]


def test_python_dash_m(tmp_path):
    genuine = run_cli(
        "compute", "--certify", "--no-exact", "--example", "causal", "--digits", "6", "-o", "c.json", cwd=tmp_path
    )
    assert (genuine.returncode, genuine.stderr) == (0, "")
    done = run_cli("verify-certificate", "c.json", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(
        "c.json: its inputs are the certificate's own: it names no files to check them against\n"
        "c.json: 47 values verified: "
    )
    cases = {name: (forge, message) for name, forge, message in CASES}
    for name in ATTACKS:
        forge, message = cases[name]
        (tmp_path / "f.json").write_text(json.dumps(forged(forge)), encoding="utf-8")
        bad = run_cli("verify-certificate", "f.json", cwd=tmp_path)  # run_cli's timeout bounds a slow rejection
        assert (bad.returncode, bad.stdout, bad.stderr) == (2, "", f"symattn: f.json: {message}\n"), name


def test_bounds_past_the_int_string_limit_are_written_and_verified():
    # |z| = 900 at 200 digits: a weight's bound has over 4300 digits, more than int(str) takes by default
    spec = load_spec({"Q": [[30, 0]], "K": [[30, 0], [-30, 0]], "V": [[1], [2]], "scale": "none"})
    certificate = compute(spec, digits=200, exact=False, certify=True)
    assert max(len(lo) for lo, _ in certificate["weights"]["bounds"][0]) > 4300
    result = verify(certificate)
    assert (result.ok, result.checked, result.failures) == (True, 12, ())
