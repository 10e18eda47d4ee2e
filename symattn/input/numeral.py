"""A strict grammar for the numbers users type.

Never ``float``, ``eval`` or ``sympify``: a numeral is read from its text into
an exact :class:`fractions.Fraction`, and the text is kept so that ``1.0`` is
displayed as ``1.0``.

Accepted forms::

    decimal   [+-] digits [. digits] [e [+-] digits]     1.0  -.5  1e-2
    fraction  [+-] digits / digits                        1/3  -2/7
    percent   decimal %          (claims only)            40.3%
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal
from fractions import Fraction

from symattn.input.errors import SymattnError, brief
from symattn.input.limits import CLAIM_EXPONENT, NUMBER_EXPONENT, NUMBER_LENGTH
from symattn.input.messages import said
from symattn.input.records import record

# ASCII digits only: Python's \d also matches '٣' and '３', which no reader of a
# handout would take for a digit and pdflatex cannot set
_DECIMAL = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?")
_FRACTION = re.compile(r"([+-]?)([0-9]+)/([0-9]+)")
_NOT_FINITE = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan", "+nan", "-nan", "snan"}


class NumeralError(SymattnError, ValueError):
    """A text is not a number of our grammar. Callers add the location."""


class RangeError(NumeralError):
    """A number whose exponent is past the ones a spec takes (1e300): a number, but not one of ours."""


class NotFiniteError(NumeralError):
    """inf or nan: never a number here, and never a symbol name either."""


@record
class Numeral:
    """An exact number together with the way the user wrote it."""

    text: str
    value: Fraction
    form: str  # "decimal", "fraction", "percent", "-infinity" (claims on masked scores), "pi" (an angle: value·π)
    # Digits after the point of ``value`` as written: "0.650" -> 3, "40.3%" -> 3,
    # "1e-2" -> 2, "10" -> 0. None for fractions, which claim exactness.
    decimals: int | None
    mantissa: str = ""  # decimal part without exponent, sign included ("-1.5")
    exponent: int = 0

    @property
    def is_negative(self) -> bool:
        return self.value < 0

    @property
    def is_infinite(self) -> bool:
        """Only a claim can be −∞ (a masked score); its ``value`` is then a placeholder 0."""
        return self.form == "-infinity"

    @property
    def exact(self) -> bool:
        """A numeral is its own exact value."""
        return True


_MAX_INT_BITS = int(NUMBER_LENGTH * 3.33) + 1  # about NUMBER_LENGTH decimal digits


def has_foreign_digits(text: str) -> bool:
    """Whether a text holds a digit other than 0-9 (Arabic-Indic ٣, fullwidth ３, superscript ²)."""
    return any(ch.isdigit() and not ch.isascii() for ch in text)


def in_ascii_digits(text: str) -> str:
    """A number written in another script's decimal digits, spelt in 0-9 (٣٫٥ as 3.5): what to write instead."""
    out = []
    for ch in text:
        if ch == "٫":  # the Arabic decimal separator
            out.append(".")
        elif ch.isdecimal() and not ch.isascii():
            out.append(str(unicodedata.decimal(ch)))
        else:
            out.append(ch)
    return "".join(out)


def _not_a_number(text: str) -> str:
    if re.fullmatch(r"[+-]?[0-9]+,[0-9]+", text):
        return said("decimal_comma", text=repr(text), point=repr(text.replace(",", ".")))
    if has_foreign_digits(text):
        return said("ascii_digits", text=repr(text))
    return said("not_number", text=repr(text))


def _parse_decimal(text: str, body: str, max_exponent: int = NUMBER_EXPONENT) -> tuple[Fraction, int, str, int]:
    match = _DECIMAL.fullmatch(body)
    if not match or not (match.group(2) or match.group(3)):
        raise NumeralError(_not_a_number(text))
    sign, whole, frac, exp = match.groups()
    frac = frac or ""
    if exp and len(exp.lstrip("+-0")) > len(str(max_exponent)):
        raise RangeError(said("exponent_range", most=max_exponent, text=repr(text)))
    exponent = int(exp) if exp else 0
    if abs(exponent) > max_exponent:
        raise RangeError(said("exponent_range", most=max_exponent, text=repr(text)))
    digits = int((whole or "0") + frac)
    if sign == "-":
        digits = -digits
    power = exponent - len(frac)
    value = Fraction(digits * 10**power) if power >= 0 else Fraction(digits, 10**-power)
    mantissa = sign.replace("+", "") + (whole or "0") + ("." + frac if match.group(3) is not None else "")
    return value, max(len(frac) - exponent, 0), mantissa, exponent


NEG_INFINITY_TEXTS = ("-inf", "-infinity", "−∞", "-∞")
# 5.12×10^30, 5.12 x 10^{30}, 5.12*10^-3, 5.12·10^30: as a handout writes m × 10^k
_TIMES_TEN = re.compile(r"([+-]?[0-9]*\.?[0-9]+)\s*[×x*·]\s*10\s*\^\s*\{?\s*([+-−]?[0-9]+)\s*\}?")


def parse_claimed(raw: object) -> Numeral:
    """A claimed number: a numeral, a percentage, or −∞ (written -inf, −∞ or -∞) for a masked score."""
    if isinstance(raw, str) and raw.strip().lower() in NEG_INFINITY_TEXTS:
        return Numeral(raw.strip(), Fraction(0), "-infinity", None)
    if isinstance(raw, str):  # the minus sign U+2212, as symattn's own documents print it: a student's "-"
        raw = raw.replace("\u2212", "-")
    if isinstance(raw, float) and raw == float("-inf"):
        return Numeral("-inf", Fraction(0), "-infinity", None)
    if isinstance(raw, str):
        text = raw.strip()
        if len(text) > NUMBER_LENGTH:  # before any pattern: on long text they backtrack for minutes
            raise NumeralError(said("long_number", most=NUMBER_LENGTH, text=repr(text[:20])))
        times = _TIMES_TEN.fullmatch(text)
        body = f"{times.group(1)}e{times.group(2).replace('−', '-')}" if times else text
        if times or re.fullmatch(r"[+-]?[0-9]*\.?[0-9]*[eE][+-]?[0-9]+", body):
            # scientific claims say how many significant digits they claim: 5.12e30 rounds at 10^28
            value, _, mantissa, exponent = _parse_decimal(text, body, CLAIM_EXPONENT)
            frac = mantissa.partition(".")[2]
            return Numeral(text, value, "decimal", len(frac) - exponent, mantissa, exponent)
    return parse_numeral(raw, allow_percent=True)


def parse_numeral(raw: object, *, allow_percent: bool = False) -> Numeral:
    """Read one number from a string, int, Fraction, Decimal or float.

    A float is read through its shortest ``repr``, which is the literal the
    user typed in Python source (``0.1`` -> 1/10), never its binary value.
    """
    if isinstance(raw, bool):
        raise NumeralError(said("not_number", text=brief(raw)))
    if isinstance(raw, int):
        if raw.bit_length() > _MAX_INT_BITS:
            raise NumeralError(said("long_digits", most=NUMBER_LENGTH))
        return Numeral(str(raw), Fraction(raw), "decimal", 0, str(raw), 0)
    if isinstance(raw, Fraction):
        if max(abs(raw.numerator).bit_length(), raw.denominator.bit_length()) > _MAX_INT_BITS:
            raise NumeralError(said("long_digits", most=NUMBER_LENGTH))
        if raw.denominator == 1:
            return parse_numeral(raw.numerator)
        return Numeral(str(raw), raw, "fraction", None)
    if isinstance(raw, (Decimal, float)):
        raw = repr(raw) if isinstance(raw, float) else str(raw)
    if not isinstance(raw, str):
        raise NumeralError(said("not_number", text=brief(raw) if raw is None else repr(raw)))
    text = raw.strip()
    if len(text) > NUMBER_LENGTH:
        raise NumeralError(said("long_number", most=NUMBER_LENGTH, text=repr(text[:20])))
    if text.lower() in _NOT_FINITE:
        raise NotFiniteError(said("not_finite", text=repr(text)))
    match = _FRACTION.fullmatch(text)
    if match:
        sign, num, den = match.groups()
        if int(den) == 0:
            raise NumeralError(said("division_by_zero", text=repr(text)))
        value = Fraction(int(num), int(den)) * (-1 if sign == "-" else 1)
        return Numeral(text, value, "fraction", None)
    if allow_percent and text.endswith("%"):
        value, decimals, mantissa, exponent = _parse_decimal(text, text[:-1])
        return Numeral(text, value / 100, "percent", decimals + 2, mantissa, exponent)
    value, decimals, mantissa, exponent = _parse_decimal(text, text)
    return Numeral(text, value, "decimal", decimals, mantissa, exponent)
