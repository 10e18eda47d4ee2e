"""Version 5 (issue 30, "Speed"): from tensor_maker.PACKED_FROM values on, a certificate's floats, bounds and
inputs are packed, base64 of little-endian binary64 (binary32 for Q, K, V and dO). The same numbers as
version 4, verified by both verifiers; every packed field read strictly, a problem one line (exit 2)."""

from __future__ import annotations

import base64
import json
import struct

import numpy as np
import pytest

from symattn.certificates import tensor_maker
from tests.test_certificate_v3 import FAST_CLAIM, STANDALONE_CLAIM, batched, certify, fast, forge, standalone

VALUES = 3328  # the batched spec's output, LSEs, dQ, dK and dV


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(folder, version 4, version 5) certificates of one causal GQA spec with dO."""
    folder = tmp_path_factory.mktemp("packed")
    spec = batched(folder)
    text = spec.read_text(encoding="utf-8") + 'mask = "causal"\n'
    spec.write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tensor_maker, "PACKED_FROM", VALUES + 1)
        four = certify(spec, "--grad-output", "do.npy", name="four.json")
        patch.setattr(tensor_maker, "PACKED_FROM", VALUES)
        five = certify(spec, "--grad-output", "do.npy", name="five.json")
    return folder, four, five


def unpacked(table: dict, form: str = "float64") -> list[list[float]]:
    code = "<d" if form == "float64" else "<f"
    data = base64.b64decode(table[form])
    flat = list(struct.unpack(f"{code[0]}{len(data) // struct.calcsize(code)}{code[1]}", data))
    return [flat[i : i + table["columns"]] for i in range(0, len(flat), table["columns"])]


def test_from_packed_from_values_on_the_floats_bounds_and_inputs_are_packed_and_the_same(made):
    _, four, five = made
    old, new = (json.loads(x.read_text(encoding="utf-8")) for x in (four, five))
    assert (old["certificate"]["version"], new["certificate"]["version"]) == (4, 5)
    for name in ("output", "lse", "lse2", "dq", "dk", "dv"):
        assert new[name]["value"] == old[name]["value"] and new[name]["path"] == old[name]["path"]
        for field in ("float", "bound"):
            packed = new[name][field]
            rows = len(old[name][field])
            assert (sorted(packed), packed["rows"], packed["columns"]) == (
                ["columns", "float64", "rows"],
                rows,
                len(old[name][field][0]),
            )
            assert unpacked(packed) == [[float.fromhex(x) for x in row] for row in old[name][field]]
    for name in ("Q", "K", "V", "dO"):
        packed = new["certificate"]["inputs"][name]
        assert sorted(packed) == ["columns", "float32", "rows"]
        assert unpacked(packed, "float32") == [
            [float.fromhex(x) for x in r] for r in old["certificate"]["inputs"][name]
        ]
    assert new["certificate"]["inputs"]["Q"]["rows"] == 128 and new["certificate"]["inputs"]["K"]["rows"] == 64
    assert five.stat().st_size < four.stat().st_size / 2


def test_a_packed_certificate_verifies_with_both_as_its_version_4_does(made, capsys):
    _, four, five = made
    lines = {}
    for cert in (four, five):
        code, out, err = fast(capsys, cert)
        assert (code, err) == (0, "")
        lines[cert] = [line.replace(str(cert), "CERT") for line in out.splitlines()]
        assert lines[cert][-1] == f"CERT: {VALUES} values verified: {FAST_CLAIM}"
        code, said = standalone(cert)
        assert (code, said[-1]) == (0, f"{cert}: {VALUES} values verified: {STANDALONE_CLAIM}")
    assert lines[four] == lines[five]


def test_a_field_of_version_5_may_still_be_float_hex_rows(made, capsys):
    _, four, five = made
    old = json.loads(four.read_text(encoding="utf-8"))

    def mixed(d):
        d["dk"]["bound"] = old["dk"]["bound"]
        d["certificate"]["inputs"]["V"] = old["certificate"]["inputs"]["V"]

    forged = forge(five, mixed)
    assert fast(capsys, forged)[0] == 0 and standalone(forged)[0] == 0


def _float(d):
    return d["output"]["float"]


def _text(d, field="float64"):
    return d["output"]["float"][field]


def _set_float(d, row, column, x):  # output.float's value at [row, column] (0-based) set to x
    table = d["output"]["float"]
    data = bytearray(base64.b64decode(table["float64"]))
    struct.pack_into("<d", data, 8 * (row * table["columns"] + column), x)
    table["float64"] = base64.b64encode(bytes(data)).decode("ascii")


def _set_input(d, x):
    table = d["certificate"]["inputs"]["Q"]
    data = bytearray(base64.b64decode(table["float32"]))
    struct.pack_into("<f", data, 4, x)  # Q[1][2]
    table["float32"] = base64.b64encode(bytes(data)).decode("ascii")


ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _noncanonical(d):  # 8192 bytes: one "=" ends it; the last digit's two unused bits set, the same bytes
    text = _text(d)
    last = ALPHABET.index(text[-2])
    assert last & 3 == 0 and base64.b64decode(text[:-2] + ALPHABET[last | 3] + "=") == base64.b64decode(text)
    d["output"]["float"]["float64"] = text[:-2] + ALPHABET[last | 3] + "="


def _bound_inf(d, value=float("inf"), at=0):
    table = d["output"]["bound"]
    data = bytearray(base64.b64decode(table["float64"]))
    struct.pack_into("<d", data, 8 * at, value)
    table["float64"] = base64.b64encode(bytes(data)).decode("ascii")


BYTES = "expected the base64 text of 128 × 8 float64 values (8192 bytes, 10924 characters)"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda d: _float(d).update(extra=1),
            "output.float.extra: an unknown field; this holds rows, columns, float64",
        ),
        (lambda d: _float(d).pop("columns"), "output.float.columns: missing"),
        (lambda d: _float(d).update(rows=511), "output.float.rows: expected 128, got the number 511"),
        (lambda d: _float(d).update(columns="8"), "output.float.columns: expected 8, got the text '8'"),
        (lambda d: _float(d).update(float64=_text(d)[:-4]), f"output.float.float64: {BYTES}, got 10920 characters"),
        (lambda d: _float(d).update(float64=[_text(d)]), f"output.float.float64: {BYTES}, got a list"),
        (lambda d: _float(d).update(float64=None), f"output.float.float64: {BYTES}, got null"),
        (
            lambda d: _float(d).update(float64=_text(d)[:99] + "\n" + _text(d)[100:]),
            "output.float.float64: '\\n' at character 100: not base64's alphabet",
        ),
        (
            lambda d: _float(d).update(float64=_text(d)[:8].replace(_text(d)[7], "=") + _text(d)[8:]),
            "output.float.float64: its padding (=) is not where base64 writes it",
        ),
        (
            _noncanonical,
            "output.float.float64: not the text base64 writes of its bytes: the last digit's unused bits are set",
        ),
        (lambda d: _float(d).update(rows=True), "output.float.rows: expected 128, got true"),
        (
            lambda d: d["certificate"]["inputs"]["Q"].update(columns=7987200),
            "certificate.inputs.Q.columns: expected a whole number from 1 to 1024, got the number 7987200",
        ),
        (lambda d: _set_float(d, 1, 2, float("nan")), "output.float[2][3]: nan: expected a float"),
        (lambda d: _set_float(d, 0, 7, float("-inf")), "output.float[1][8]: -inf: expected a float"),
        (_bound_inf, 'output.bound[1][1]: negative, or infinite where the path is not "a"'),
        (  # every other bound plain: the reader's quick pass (their top bytes) leaves this one to the rows'
            lambda d: _bound_inf(d, -(2.0**-1074), 8 * 3 + 5),
            'output.bound[4][6]: negative, or infinite where the path is not "a"',
        ),
        (lambda d: _set_input(d, float("inf")), "certificate.inputs.Q[1][2]: inf: expected float32 values"),
        (
            lambda d: d["certificate"]["inputs"]["K"].update(rows=0),
            "certificate.inputs.K.rows: expected a whole number from 1 to 16777216, got the number 0",
        ),
        (
            lambda d: d["certificate"]["inputs"]["V"].update(float64=d["certificate"]["inputs"]["V"].pop("float32")),
            "certificate.inputs.V.float64: an unknown field; this holds rows, columns, float32",
        ),
    ],
)
def test_a_packed_field_out_of_form_is_one_line_from_both(made, capsys, change, problem):
    _, _, five = made
    forged = forge(five, change)
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: {problem}\n")
    assert standalone(forged) == (2, [f"{forged}: {problem}"])


def test_version_4_holds_no_packed_field(made, capsys):
    _, four, five = made
    packed = json.loads(five.read_text(encoding="utf-8"))["output"]["float"]
    forged = forge(four, lambda d: d["output"].update(float=packed))
    problem = "output.float: expected a list of rows of a float, got a table (packed values: version 5)"
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: {problem}\n")
    assert standalone(forged) == (2, [f"{forged}: {problem}"])


def test_a_changed_packed_input_is_refused_by_both(made, capsys):
    _, _, five = made
    x = float(np.load(five.parent / "q.npy")[0, 0, 0, 1])
    forged = forge(five, lambda d: _set_input(d, 2 * x))
    spec = five.parent / "s.toml"
    assert fast(capsys, forged) == (
        2,
        "",
        f"symattn: {forged}: certificate.inputs.Q[1][2]: {(2 * x).hex()}, but the spec {spec} gives {x.hex()}: the "
        "certificate is not of its files\n",
    )
    assert standalone(forged) == (
        2,
        [
            f"{forged}: certificate.inputs.Q[1][2]: {(2 * x).hex()}, but 'q.npy' holds {x.hex()} there: the "
            "certificate is not of its files"
        ],
    )


def test_a_count_of_5000_digits_is_named_with_its_field_by_both(made, capsys):
    _, _, five = made
    forged = forge(five, lambda d: _float(d).update(rows="ROWS"))
    forged.write_text(forged.read_text(encoding="utf-8").replace('"ROWS"', "1" + "0" * 5000), encoding="utf-8")
    problem = f"output.float.rows: expected 128, got the number 1{'0' * 39}…"
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: {problem}\n")
    assert standalone(forged) == (2, [f"{forged}: {problem}"])


@pytest.mark.parametrize("path", ["q\ud800.npy", "q\n.npy", "q\udcff.npy"])
def test_a_path_no_file_system_names_is_one_line_from_both(made, capsys, path):
    _, _, five = made
    forged = forge(five, lambda d: d["certificate"]["files"][1].update(path=path))
    problem = "certificate.files.path[2]: a control character or a lone surrogate"
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: {problem}\n")
    assert standalone(forged) == (2, [f"{forged}: {problem}"])


def test_a_key_with_a_newline_is_written_on_one_line_by_both(made, capsys):
    _, _, five = made
    forged = forge(five, lambda d: _float(d).update({"x\ny\u202e": 1}))
    problem = "output.float.x\\ny\\u202e: an unknown field; this holds rows, columns, float64"
    assert fast(capsys, forged) == (2, "", f"symattn: {forged}: {problem}\n")
    assert standalone(forged) == (2, [f"{forged}: {problem}"])


def test_inputs_changed_where_no_file_binds_them_are_refuted_by_both(made, capsys):
    """No files to check them against: the values do not round, and the bounds the certificate gives are
    wider than the fast verifier's own for those inputs; both exit 1, neither refuses to read it."""
    _, _, five = made

    def changed(d):
        d["certificate"]["files"] = []
        _set_input(d, 1e-40)  # Q[1][2], a float32 subnormal

    forged = forge(five, changed)
    code, out, err = fast(capsys, forged)
    verdict = out.splitlines()[-1]
    assert (code, err) == (1, "") and verdict.startswith(f"{forged}: NOT verified: ")
    code, lines = standalone(forged)
    assert code == 1 and lines[-1].startswith(f"{forged}: NOT verified: ")
    rounding = [part for part in verdict.split(": ", 2)[2].split("; ") if "do not round" in part]
    assert rounding == [lines[-1].split(": ", 2)[2]]  # the same count of values that do not round
    assert "have bounds wider than they may be" in verdict


def test_a_table_wider_than_the_inputs_columns_may_be_is_read(tmp_path, capsys):
    """The LSE of one head of 1040 queries is a row of 1040 values, past DIMS (1024), the most columns an
    input may have: the limit is the inputs', not the tables' (whose shape the inputs give)."""
    from symattn.verifier import reading

    rng = np.random.default_rng(8)
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((1040, 64)).astype(np.float16))
    (tmp_path / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    cert = certify(tmp_path / "s.toml")
    text = cert.read_text(encoding="utf-8")
    read = reading.certificate(reading.parse(text))  # the standalone verifier's reader
    assert (read.version, read.tables["lse"].shape, len(read.tables["lse"].floats[0])) == (5, (1040,), 1040)
    code, out, err = fast(capsys, cert)
    assert (code, err) == (0, "") and out.splitlines()[-1] == f"{cert}: 68640 values verified: {FAST_CLAIM}"
