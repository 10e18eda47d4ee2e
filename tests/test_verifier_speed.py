"""verify-certificate's quicker reading and checking (issue 30, "Speed"): each shortcut accepts exactly what
the check it stands before accepts, and leaves every refusal to that check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symattn.certificates.float_digits import text, text_lines, texts
from symattn.input.errors import LimitError
from symattn.input.files import parse_text
from symattn.input.limits import NESTING
from symattn.verifier import reading


def canonical(s: str) -> bool:
    """float.hex's own text of a finite float, as the reader checked it before."""
    try:
        v = float.fromhex(s)
    except (ValueError, OverflowError):
        return False
    return math.isfinite(v) and v.hex() == s


@settings(max_examples=400, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_floats_hex_text_has_the_form(x):
    assert reading.HEX.fullmatch(x.hex())


PIECES = ["-", "0x", "1.", "0.", "0", "f" * 13, "0" * 13, "0000000000001", "a" * 12, "p", "+", "-", "1022", "1023"]
PIECES += ["1024", "0", "00", "1", "999", "1021", "-1023", "+0", "-0", "A" * 13, " ", "\n", "inf"]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=7))
def test_the_form_is_exactly_the_texts_float_hex_writes(parts):
    s = "".join(parts)
    assert bool(reading.HEX.fullmatch(s)) == canonical(s), s


@pytest.mark.parametrize(
    "s",
    [
        "0x1.0000000000000p-1022",  # the least normal
        "0x0.0000000000001p-1022",  # the least subnormal
        "0x1.fffffffffffffp+1023",  # the largest
        "-0x0.0p+0",
        "0x1.0000000000000p+0",
    ],
)
def test_the_edges_of_the_range_have_the_form(s):
    assert reading.HEX.fullmatch(s) and canonical(s)


@pytest.mark.parametrize(
    "s",
    [
        "0x1.0000000000000p-1023",  # a subnormal written as a normal
        "0x0.0000000000000p-1022",  # zero written as a subnormal
        "0x1.0000000000000p+1024",  # past the largest
        "0x1.0000000000000p-0",  # float.hex writes +0
        "0x1.0000000000000p+01",  # no leading zero
        "0x1.000000000000p+0",  # twelve digits
        "0x1.0000000000000P+0",  # capital P
        " 0x1.0000000000000p+0",  # float.fromhex takes blanks; float.hex writes none
    ],
)
def test_texts_float_hex_does_not_write_are_not_of_the_form(s):
    assert not reading.HEX.fullmatch(s) and not canonical(s)


def test_a_row_off_the_form_is_refused_as_before():
    with pytest.raises(reading.CertificateError) as caught:
        reading.floats([["0x1.0000000000000p+0", "0x1.0000000000000p-0"]], "certificate.inputs.Q", None, None, "x")
    assert (caught.value.key, caught.value.position) == ("certificate.inputs.Q", (1, 2))
    assert caught.value.problem == "expected x as float.hex writes it, got the text '0x1.0000000000000p-0'"
    got = reading.floats([["inf", "0x1.8000000000000p+1"]], "b", None, None, "bounds", inf=True)
    assert got == [[math.inf, 3.0]]
    # a row is matched joined by commas: a text that holds one (two texts in one) is not taken for two
    two = "0x1.0000000000000p+0,0x1.0000000000000p+0"
    with pytest.raises(reading.CertificateError) as caught:
        reading.floats([[two, "0x1.0000000000000p+0"]], "certificate.inputs.K", None, None, "x")
    assert (caught.value.position, caught.value.problem) == (
        (1, 1),
        f"expected x as float.hex writes it, got the text '{two[:-1]}'…",
    )
    with pytest.raises(reading.CertificateError) as caught:
        reading.floats([["inf", 7]], "b", None, None, "bounds", inf=True)
    assert (caught.value.position, caught.value.problem) == (
        (1, 2),
        "expected bounds as float.hex writes it, got the number 7",
    )


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 13), st.integers(-400, 400), st.integers(0, 10**13), st.booleans())
def test_texts_are_the_decimal_texts(digits, exponent, seed, negative):
    q = 10 ** (digits - 1) + seed % (9 * 10 ** (digits - 1))
    q = -q if negative else q
    assert texts([q], [exponent]) == [text(q, exponent)]


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 13),
    st.lists(st.tuples(st.integers(-400, 400), st.integers(0, 10**13), st.booleans(), st.booleans()), min_size=1),
    st.integers(1, 3),
)
def test_a_rows_line_is_its_decimal_texts_each_with_a_comma(digits, entries, rows):
    """text_lines, the workers' texts built as bytes: each row's line is text(q, e) + "," for each entry, "," for
    a blank one, whatever exponents share a row (each row the entries turned by one more)."""
    turned = [entries[k:] + entries[:k] for k in range(rows)]
    q = np.array([[10 ** (digits - 1) + s % (9 * 10 ** (digits - 1)) for _, s, _, _ in row] for row in turned])
    q = np.where(np.array([[neg for *_, neg, _ in row] for row in turned]), -q, q)
    e = np.array([[x for x, *_ in row] for row in turned])
    blank = np.array([[b for *_, b in row] for row in turned])
    want = [
        "".join(("" if b else text(a, x)) + "," for a, x, b in zip(*row)).encode("ascii")
        for row in zip(q.tolist(), e.tolist(), blank.tolist())
    ]
    assert text_lines(q, e, digits, blank) == want


def test_each_form_of_a_text_is_in_its_line():
    q, e = np.array([[1234, -1234, 1234, 1234, -1234, 1000, 1234, 1234]]), np.array([[0, -2, -4, -9, -10, 3, 1, -12]])
    blank = np.array([[False] * 7 + [True]])
    assert text_lines(q, e, 4, blank) == [b"1234,-12.34,0.1234,0.000001234,-1.234E-7,1.000E+6,1.234E+4,,"]


def test_a_wide_table_of_scalars_passes_and_nesting_past_the_limit_is_refused():
    wide = "[" + ",".join("[" + ",".join(["1.5"] * 64) + "]" for _ in range(64)) + "]"
    assert len(parse_text('{"a": ' + wide + "}", "s.json", json_=True)["a"]) == 64
    deep = '{"a": [1, ' + "[" * (NESTING + 1) + "]" * (NESTING + 1) + "]}"
    with pytest.raises(LimitError) as caught:
        parse_text(deep, "s.json", json_=True)
    assert (
        str(caught.value)
        == f"s.json: a[2]{'[1]' * (NESTING - 2)}: lists and tables nested more than {NESTING} deep (the limit)"
    )
