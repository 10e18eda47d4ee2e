"""verify-certificate checks the output's digits in its workers, beside the floats (float_tensors.evaluate's
``shown``), and reads in its own process only the rows they did not find right and the values of path "a":
a changed digit of each path is found there as in one process, and a value out of form is one line."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from symattn.certificates.exact_verifier import verify
from symattn.certificates.float_tensors import build
from symattn.certificates.tensor_maker import certificate_json
from symattn.input.errors import SpecError
from symattn.kernel.cores import one_process


@pytest.fixture(scope="module")
def made():
    """A 512 × 512 × 64 head (enough work for two processes): 104 outputs by the error-free sums, 64 beyond."""
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((512, 64)).astype(np.float32).astype(np.float64) for _ in range(3))
    tensors = build({"Q": Q, "K": K, "V": V}, 1, 1, 1, "bhnd", None, None)
    data = json.loads("".join(certificate_json(tensors, 10, [])))
    assert data["certificate"]["paths"]["output"] == {"float64": 32600, "compensated": 104, "arb": 64}
    return data


def first(data, letter):
    """(row, column) of the first output of path ``letter`` in a row that also holds an "f"."""
    for r, path in enumerate(data["output"]["path"]):
        if letter in path and "f" in path:
            return r, path.index(letter)
    raise AssertionError(letter)


def changed(text):
    """The value with its last digit one more (mod 10): still ten digits, now wrong."""
    head, _, tail = text.rpartition("E") if "E" in text else (text, "", "")
    body = head[:-1] + str((int(head[-1]) + 1) % 10)
    return f"{body}E{tail}" if tail else body


def lines(data):
    """The failures of both ways: the workers (the work is 2^24 multiply-adds) and one process."""
    parallel = verify(data, "c.json").failures
    with one_process():
        alone = verify(data, "c.json").failures
    assert parallel == alone
    return parallel


def test_the_genuine_certificate_verifies_in_workers_and_in_one_process(made):
    assert lines(made) == ()
    assert verify(made, "c.json").checked == 512 * 64 + 2 * 512


@pytest.mark.parametrize("letter", ["f", "c", "a"])
def test_a_changed_digit_of_each_path_is_named(made, letter):
    r, c = first(made, letter) if letter != "f" else first(made, "a")
    if letter == "f":
        c = made["output"]["path"][r].index("f")
    bad = copy.deepcopy(made)
    shown = bad["output"]["value"][r][c]
    bad["output"]["value"][r][c] = changed(shown)
    (line,) = lines(bad)
    if letter == "a":
        assert line == f"output[{r}, {c}]: {changed(shown)}, but the exact value rounds to {shown}"
    else:
        assert line == (
            f"output[{r}, {c}]: {changed(shown)} is not the rounding of every point of the float64 path's "
            f"interval, which rounds to {shown}"
        )


def test_changed_digits_in_many_rows_are_named_in_order(made):
    bad = copy.deepcopy(made)
    places = [first(made, "a"), first(made, "c"), (0, 0), (511, 63)]
    for r, c in places:
        bad["output"]["value"][r][c] = changed(bad["output"]["value"][r][c])
    found = lines(bad)
    assert [line.split(":")[0] for line in found] == [f"output[{r}, {c}]" for r, c in sorted(places)]


@pytest.mark.parametrize(
    ("letter", "value", "problem"),
    [
        ("f", "0.5", "0.5 has 1 significant digits, not 10"),
        ("a", "0.5", "0.5 has 1 significant digits, not 10"),
        ("a", 0.5, 'expected a value such as "0.4171325333" or "2.028E+4", got the number 0.5'),
        ("f", None, 'expected a value such as "0.4171325333" or "2.028E+4", got null'),
    ],
)
def test_a_value_out_of_form_in_a_row_otherwise_right_is_one_line(made, letter, value, problem):
    r, c = first(made, "a")
    if letter == "f":
        c = made["output"]["path"][r].index("f")
    bad = copy.deepcopy(made)
    bad["output"]["value"][r][c] = value
    assert refused(bad) == f"c.json: output.value[{r + 1}][{c + 1}]: {problem}"


def test_the_first_value_out_of_form_in_the_files_order_is_named(made):
    """A row the workers did not find right (its "f" value out of form) before a row they did, whose value of
    path "a" is out of form: the first in the file is named, as the standalone verifier names it."""
    r_a, c_a = next((r, p.index("a")) for r, p in enumerate(made["output"]["path"]) if r > 0 and "a" in p)
    bad = copy.deepcopy(made)
    bad["output"]["value"][0][0] = "+" + bad["output"]["value"][0][0]
    bad["output"]["value"][r_a][c_a] = "+" + bad["output"]["value"][r_a][c_a]
    assert refused(bad).startswith("c.json: output.value[1][1]: expected a value such as")


def one_process_verify(data, source):
    with one_process():
        return verify(data, source)


def refused(data):
    """The one line that verify refuses ``data`` with, the same in the workers and in one process."""
    lines = []
    for way in (verify, one_process_verify):
        with pytest.raises(SpecError) as info:
            way(data, "c.json")
        lines.append(str(info.value))
    assert lines[0] == lines[1]
    return lines[0]


@pytest.mark.parametrize("letter", ["f", "a"])
def test_a_bare_json_number_is_not_a_value_shown(made, letter):
    """A value written as a JSON number, not a text (a hand edit: compute writes texts), is refused in one line
    though its digits are the right ones: the reader keeps a number's digits as a str subclass."""
    from symattn.input.files import parse_text

    r, c = first(made, "a")
    if letter == "f":
        c = made["output"]["path"][r].index("f")
    shown = made["output"]["value"][r][c]
    text = json.dumps(made).replace(
        json.dumps(made["output"]["value"][r]), json.dumps(made["output"]["value"][r]).replace(f'"{shown}"', shown)
    )
    data = parse_text(text, "c.json", json_=True)
    assert type(data["output"]["value"][r][c]) is not str and data["output"]["value"][r][c] == shown
    assert refused(data) == (
        f'c.json: output.value[{r + 1}][{c + 1}]: expected a value such as "0.4171325333" or "2.028E+4", '
        f"got the number {shown}"
    )


def test_a_mask_row_that_attends_no_key_is_one_line_from_the_maker():
    from symattn.certificates.float_tensors import build

    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((4, 2)).astype(np.float32).astype(np.float64) for _ in range(3))
    allowed = np.ones((4, 4), dtype=bool)
    allowed[2] = False
    with pytest.raises(SpecError) as info:
        build({"Q": Q, "K": K, "V": V}, 1, 1, 1, "bhnd", None, allowed)
    assert str(info.value) == "mask[2]: query 2 (0-based) attends no key; softmax is undefined there"


@pytest.mark.parametrize("change", ["comma", "fullwidth", "nul"])
def test_a_row_joined_as_its_right_line_is_still_read_value_by_value(made, change):
    """The workers compare a row's values joined by commas with the line of its right texts: values that join
    into that line (one holding the next with its comma, and the next empty) or that differ from it only in
    bytes ASCII lacks or a NUL are not right, and the reader names the first in one line."""
    r = next(r for r, p in enumerate(made["output"]["path"]) if set(p) == {"f"})
    bad = copy.deepcopy(made)
    row = bad["output"]["value"][r]
    if change == "comma":
        row[0], row[1] = f"{row[0]},{row[1]}", ""
    else:
        row[0] = row[0][:-1] + (chr(0xFF10 + int(row[0][-1])) if change == "fullwidth" else row[0][-1] + "\0")
    assert refused(bad) == (
        f'c.json: output.value[{r + 1}][1]: expected a value such as "0.4171325333" or "2.028E+4", got the '
        f"text {row[0]!r}"
    )
