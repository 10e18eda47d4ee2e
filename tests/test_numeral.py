from fractions import Fraction

import pytest

from symattn.input.numeral import NumeralError, parse_numeral


@pytest.mark.parametrize(
    "raw, value, decimals, form",
    [
        ("0.9", Fraction(9, 10), 1, "decimal"),
        ("1.0", Fraction(1), 1, "decimal"),
        ("0.650", Fraction(13, 20), 3, "decimal"),
        ("-.5", Fraction(-1, 2), 1, "decimal"),
        ("+2", Fraction(2), 0, "decimal"),
        ("1e-2", Fraction(1, 100), 2, "decimal"),
        ("1.5E1", Fraction(15), 0, "decimal"),
        (" 3 ", Fraction(3), 0, "decimal"),
        ("1/3", Fraction(1, 3), None, "fraction"),
        ("-2/7", Fraction(-2, 7), None, "fraction"),
        (10, Fraction(10), 0, "decimal"),
        (Fraction(3, 4), Fraction(3, 4), None, "fraction"),
        (0.1, Fraction(1, 10), 1, "decimal"),
    ],
)
def test_parse(raw, value, decimals, form):
    n = parse_numeral(raw)
    assert (n.value, n.decimals, n.form) == (value, decimals, form)


def test_text_is_kept():
    assert parse_numeral("1.0").text == "1.0"
    assert parse_numeral("0.10").mantissa == "0.10"
    from decimal import Decimal

    assert parse_numeral(Decimal("1.00")).text == "1.00"


def test_percent_only_when_allowed():
    n = parse_numeral("40.3%", allow_percent=True)
    assert (n.value, n.decimals, n.form) == (Fraction(403, 1000), 3, "percent")
    with pytest.raises(NumeralError, match=r"^not a number: '40.3%'$"):
        parse_numeral("40.3%")


@pytest.mark.parametrize(
    "raw, message",
    [
        ("abc", "not a number: 'abc'"),
        ("", "not a number: ''"),
        (".", "not a number: '.'"),
        ("1.2.3", "not a number: '1.2.3'"),
        ("0x10", "not a number: '0x10'"),
        ("1_000", "not a number: '1_000'"),
        ("__import__('os')", "not a number: \"__import__('os')\""),
        ("1/0", "division by zero: '1/0'"),
        ("1e999", "exponent out of range (at most 50): '1e999'"),
        ("nan", "not a finite number: 'nan'"),
        (float("inf"), "not a finite number: 'inf'"),
        (True, "not a number: true"),
        (None, "not a number: null"),
        ("9" * 65, "number longer than 64 characters: '99999999999999999999'…"),
    ],
)
def test_rejects(raw, message):
    with pytest.raises(NumeralError) as info:
        parse_numeral(raw)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "raw, text, value, decimals",
    [
        ("\u22123.35735781894581", "-3.35735781894581", Fraction(-335735781894581, 10**14), 14),
        ("\u22127.071e\u22121", "-7.071e-1", Fraction(-7071, 10**4), 4),
        ("\u22122.06\u00d710^\u22123", "-2.06\u00d710^-3", Fraction(-206, 10**5), 5),
        ("\u221240.3%", "-40.3%", Fraction(-403, 1000), 3),
    ],
)
def test_a_claim_takes_the_minus_sign_symattns_documents_print(raw, text, value, decimals):
    from symattn.input.numeral import parse_claimed

    got = parse_claimed(raw)
    assert (got.text, got.value, got.decimals) == (text, value, decimals)
    assert parse_claimed("\u2212\u221e").is_infinite
