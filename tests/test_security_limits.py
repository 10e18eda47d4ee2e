"""Issue 16, part 4: numbers too long are refused before any pattern or conversion; the time limit is the
time-limit message wherever it lands; the backward pass makes its Jacobians only when asked."""

import json
import signal
import struct
from fractions import Fraction

import pytest

import symattn.exact.backward as backward
import symattn.input.numeral as numeral
from symattn.cli.commands import main
from symattn.derivation.intermediates import compute, compute_json
from symattn.exact import engine
from symattn.exact.factory import build
from symattn.input import builtin, limits
from symattn.input.errors import EvaluationError, LimitError, SpecError
from symattn.input.floats import read_result
from symattn.input.numeral import NumeralError, parse_claimed
from symattn.input.spec import load_spec

SEED = builtin.example_path("seed", "en")
SPEC = {"Q": [["1", "0"], ["0", "1"]], "K": [["1", "0"], ["0", "1"]], "V": [["1", "2"], ["3", "4"]]}
LONG = "number longer than 64 characters: '11111111111111111111'…"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


class Recorder:
    """A compiled pattern that records the length of every text it is asked to match."""

    def __init__(self, pattern):
        self.pattern, self.lengths = pattern, []

    def fullmatch(self, text, *args):
        self.lengths.append(len(text))
        return self.pattern.fullmatch(text, *args)


# --- claims: the length is checked before any pattern ---------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("1" * 150_000, LONG),
        ("1" * 150_000 + "e5", LONG),
        ("1." + "1" * 150_000 + " × 10^{3}", "number longer than 64 characters: '1.111111111111111111'…"),
        ("1,1" + " " * 400_000, "not a number: '1,1' (a decimal comma? write '1.1')"),
        ("1,1" + " " * 400_000 + "x", "number longer than 64 characters: '1,1                 '…"),
    ],
)
def test_long_claims_are_refused_before_matching(monkeypatch, text, message):
    times = Recorder(numeral._TIMES_TEN)
    monkeypatch.setattr(numeral, "_TIMES_TEN", times)
    with pytest.raises(NumeralError) as info:
        parse_claimed(text)
    assert str(info.value) == message
    assert all(n <= limits.NUMBER_LENGTH for n in times.lengths)


def test_a_claimed_number_at_the_limit_still_reads():
    text = "1." + "2" * 55 + "×10^{3}"  # 64 characters
    assert len(text) == 64 and parse_claimed(text).value == Fraction("1." + "2" * 55) * 1000


def test_a_claims_file_with_a_150000_digit_claim(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**SPEC, "claims": {"weights[1][1]": "1" * 150_000}}), encoding="utf-8")
    assert run(capsys, "check", path) == (2, "", f"symattn: {path}: claims.weights[1][1]: {LONG}\n")


# --- compare: .npy headers and JSON results ------------------------------------------------------


def npy(header: str, body: bytes = b"") -> bytes:
    data = header.encode("latin-1")
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(data)) + data + body


HEADER = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }"


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("spaces.npy", npy(" " * 2**20), "a .npy header of 1048576 bytes; at most 10000 (the limit)"),
        (  # numpy's literal reader refuses an integer of 5000 digits (Python's own limit is 4300)
            "shape.npy",
            npy(HEADER % ("9" * 5000 + ", 1")),
            f"a .npy header numpy cannot read ({(HEADER % ('9' * 5000 + ', 1'))[:80]!r})",
        ),
        (
            "wide.npy",
            npy(HEADER % ("9" * 10 + ", 1")),
            "shape: a dimension of more than 9 digits; at most 1024×1024",
        ),
        ("negative.npy", npy(HEADER % "-1, 2"), "shape: (-1, 2): a negative dimension"),
        ("true.npy", npy(HEADER % "True, 2"), "shape: (True, 2): every dimension a whole number"),
        (
            "number.json",
            ("[[" + "1" * 5000 + "]]").encode(),
            "result[1][1]: 5000 characters; a number has at most 1100 (the limit)",
        ),
        ("deep.json", ("[" * 100_000 + "]" * 100_000).encode(), "lists nested too deep (a result is rows of numbers)"),
        (
            "list.json",
            ("[[" + "[" * 900 + "]" * 900 + "]]").encode(),
            (
                "result[1][1]: not a number: a list (JSON holds rows of numbers, two axes: a tensor of more goes in "
                "a .npy file)"
            ),
        ),
        ("object.json", b'[[{"a": 1}]]', "result[1][1]: not a number: an object"),
    ],
)
def test_hostile_results_are_one_line(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SpecError) as info:
        read_result(path)
    assert str(info.value) == f"{path}: {message}"
    assert run(capsys, "compare", SEED, path) == (2, "", f"symattn: {path}: {message}\n")


def test_a_long_header_at_the_limit_is_read_by_numpy_and_refused(tmp_path):
    path = tmp_path / "h.npy"
    path.write_bytes(npy(HEADER % "1, 1" + " " * 9000 + "x"))
    with pytest.raises(SpecError) as info:
        read_result(path)
    shown = (HEADER % "1, 1" + " " * 9000 + "x")[:80]
    assert str(info.value) == f"{path}: a .npy header numpy cannot read ({shown!r})"


def test_the_exact_decimal_of_the_smallest_float64_is_read(tmp_path):
    exact = format(Fraction(1, 2**1074).numerator * 10**1074 // 2**1074, "d")  # 5^1074 without the point
    text = "0." + exact.zfill(1074)
    assert len(text) <= limits.RESULT_NUMBER_LENGTH
    path = tmp_path / "r.json"
    path.write_text(f"[[{text}]]", encoding="utf-8")
    assert read_result(path).rows == ((Fraction(1, 2**1074),),)


# --- the time limit, wherever it lands ------------------------------------------------------------

MESSAGE = "b.json: took longer than 60 s (the time limit; raise it with --max-seconds)"
BACKWARD = {**SPEC, "backward": {"loss": "sum"}}
DV = [["1.00000000000000"] * 2] * 2  # symmetric: each column of the weights sums to exactly 1


def ring_where_caught():
    """The alarm, landing inside code that catches ValueError (as Fraction.__hash__ does): lost."""
    try:
        signal.getsignal(signal.SIGALRM)(signal.SIGALRM, None)
    except ValueError:
        pass


def test_a_lost_alarm_then_a_key_error_is_the_time_limit(monkeypatch):
    def weights(self, model):
        ring_where_caught()
        raise KeyError("a half-filled dict")

    monkeypatch.setattr(backward.Exps, "weights", weights)
    spec = load_spec(BACKWARD)
    model = build(spec)
    with pytest.raises(LimitError) as info:
        with limits.deadline(60, "b.json"):
            compute(spec, model, exact=False)
    assert str(info.value) == MESSAGE
    assert "_rationals" not in model.__dict__  # nothing half made is kept


def test_a_lost_alarm_in_a_cache_that_then_finishes_is_not_kept(monkeypatch):
    real = backward.Exps.weights

    def weights(self, model):
        ring_where_caught()
        return real(self, model)

    monkeypatch.setattr(backward.Exps, "weights", weights)
    model = build(load_spec(BACKWARD))
    with limits.deadline(60, "b.json"):
        with pytest.raises(LimitError) as info:
            model.rationals("dV")
    assert str(info.value) == MESSAGE and "_rationals" not in model.__dict__
    monkeypatch.setattr(backward.Exps, "weights", real)
    assert model.rationals("dV") == ((Fraction(1),) * 2, (Fraction(1),) * 2)  # made again, whole


def test_a_lost_alarm_in_the_cli_is_one_line(tmp_path, capsys, monkeypatch):
    def weights(self, model):
        ring_where_caught()
        return {}["weights"]

    monkeypatch.setattr(backward.Exps, "weights", weights)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(BACKWARD), encoding="utf-8")
    out = tmp_path / "out.json"
    assert run(capsys, "compute", path, "--no-exact", "-o", out) == (
        2,
        "",
        f"symattn: {path}: took longer than 60 s (the time limit; raise it with --max-seconds)\n",
    )
    assert not out.exists()


def test_without_an_alarm_a_key_error_is_a_bug(monkeypatch):
    monkeypatch.setattr(backward.Exps, "weights", lambda self, model: {}["bug"])
    with pytest.raises(KeyError):
        with limits.deadline(60, "b.json"):
            compute(load_spec(BACKWARD), exact=False)


def test_the_time_limit_inside_flint_is_not_a_value_that_is_not_finite():
    class Ball:  # an arb ball whose read is interrupted by the alarm
        def is_finite(self):
            return True

        def mid(self):
            raise LimitError("b.json", None, "took longer than 60 s")

    with pytest.raises(LimitError):
        engine._to_fixed(Ball(), 64)
    arb = pytest.importorskip("flint").arb
    with pytest.raises(EvaluationError, match="^value is not finite$"):
        engine._to_fixed(arb("inf"), 64)


# --- the backward pass: Jacobians only when asked ------------------------------------------------


def test_compute_makes_no_jacobian(monkeypatch):
    def refuse(alg, A):
        raise AssertionError("the Jacobian was made")

    monkeypatch.setattr(backward, "jacobian", refuse)
    data = compute(load_spec(BACKWARD), exact=True)
    assert data["backward"]["dV"]["value"] == DV


def test_jacobians_are_exact_where_the_exponential_polynomials_say(monkeypatch):
    spec = load_spec({**SPEC, "Q": [["1", "0"], ["0", "0"]], "mask": "causal", "backward": {"loss": "sum"}})
    model = build(spec)
    alg = backward.Exps(model.scale)
    decided = [[backward.rational(x) for x in row] for row in backward.jacobian(alg, alg.weights(model.heads[0]))]
    assert [list(row) for row in model.rationals("jacobian")] == decided
    assert decided[2:] == [[Fraction(1, 4), Fraction(-1, 4)], [Fraction(-1, 4), Fraction(1, 4)]]  # a flat row


def test_compute_json_is_compute_one_key_per_line():
    spec = load_spec(BACKWARD)
    text = "".join(compute_json(spec, exact=False))
    assert json.loads(text) == compute(spec, exact=False)
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and lines[1].startswith('  "tokens": ')
    assert len(lines) == len(compute(spec, exact=False)) + 2


# --- memory: the backward pass is refused past BACKWARD_TERMS, before anything is built ---------------


def test_a_backward_pass_past_the_limit_is_refused_before_it_is_built(tmp_path, capsys, monkeypatch):
    rows = [[str(i % 7)] for i in range(1024)]
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"Q": rows, "K": rows, "V": rows, "backward": {"loss": "sum"}}), encoding="utf-8")
    monkeypatch.setattr(backward, "gradients", lambda *a, **k: pytest.fail("built"))
    assert run(capsys, "compute", path, "--no-exact") == (
        2,
        "",
        f"symattn: {path}: backward: the gradients of 1024×1024 scores hold 1075838976 terms; at most "
        "1048576 (the limit; 64 tokens with 64 dimensions hold 786432)\n",
    )


def test_64_tokens_with_64_dimensions_are_allowed():
    rows = [[str((i * 7 + j * 3) % 19 / 10) for j in range(64)] for i in range(64)]
    assert build(load_spec({"Q": rows, "K": rows, "V": rows, "backward": {"loss": "sum"}})).kind == "backward"


def test_decimal_commas_are_read_from_bounded_text():
    from symattn.input.claims import claims_from_mapping
    from symattn.input.spec import spec_from_mapping

    spec = spec_from_mapping({"tokens": ["a", "b"], "Q": [["1"], ["0"]], "K": [["1"], ["0"]], "V": [["1"], ["2"]]})
    # once quadratic in the spaces: now matched only on text no longer than twice a number's limit
    with pytest.raises(SpecError) as info:
        claims_from_mapping({"claims": {"scaled[1][1]": "1,1" + " " * 40_000 + "x"}}, "c", spec=spec)
    assert str(info.value) == "c: claims.scaled[1][1]: number longer than 64 characters: '1,1                 '…"
    loaded = claims_from_mapping({"claims": {"scaled[1][1]": " 0,311 "}}, "c", spec=spec)
    assert [(w.key, w.text) for w in loaded.commas] == [("claims.scaled[1][1]", "0,311")]
    assert loaded.claims[0].number.text == "0.311"


@pytest.mark.parametrize("text", ["[" + "0," * (1 << 20) + "0]", '{"a": [' + "0.5," * (1 << 20) + "0]}"])
def test_a_certificate_of_millions_of_numbers_is_refused_as_it_is_read(tmp_path, capsys, text):
    """A helper's attack (session 13): every JSON number is an object, so 60 MB of "0," took 4.5 GB and 40 s
    before "expected a JSON object"; a certificate's numbers are its shapes and counts (34 at 4096 × 128)."""
    from symattn.verifier.__main__ import run

    path = tmp_path / "c.json"
    path.write_text(text, encoding="utf-8")
    assert main(["verify-certificate", str(path)]) == 2
    assert capsys.readouterr().err == f"symattn: {path}: more than 1048576 numbers, the most a certificate may hold\n"
    assert run(path) == (2, [f"{path}: more than 1048576 numbers, the most a certificate may hold"])
