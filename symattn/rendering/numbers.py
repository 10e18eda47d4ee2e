"""Shown numbers as LaTeX math and as plain text: the digits as decided, the user's text as typed."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from symattn.exact.num import Num
from symattn.input.decimals import Percent
from symattn.input.numeral import Numeral
from symattn.input.symbolic_entry import Formula


def tex_number(x: Num | Numeral | Formula | Decimal | int) -> str:
    """A shown number, or a number as the user typed it, in LaTeX math."""
    if isinstance(x, Formula):
        from symattn.rendering import printing  # SymPy's LaTeX printer: only documents with symbols need it

        return "-\\infty" if x.is_infinite else printing.latex(x.expr)
    if isinstance(x, Num):
        if x.is_infinite:
            return "-\\infty"
        if x.scientific:
            return _scientific(x.value, "\\times 10^{{{}}}")
        return format(x.value, "f")
    if isinstance(x, Percent):
        return tex_number(Decimal(x)) + "\\%"
    if isinstance(x, Decimal):
        return _scientific(x, "\\times 10^{{{}}}") if _is_scientific(x) else format(x, "f")
    if isinstance(x, int):
        return str(x)
    if isinstance(x, Numeral):
        if x.form == "pi":  # an angle as a multiple of π, as claimed ("3pi/4", "135deg"): no taller than a line
            return _of_pi(x.value)
        if x.form == "fraction":
            sign = "-" if x.value < 0 else ""
            return f"{sign}\\frac{{{abs(x.value.numerator)}}}{{{x.value.denominator}}}"
        mantissa = x.mantissa.lstrip("+")
        if x.exponent:
            mantissa += f"\\times 10^{{{x.exponent}}}"
        return mantissa + ("\\%" if x.form == "percent" else "")
    raise TypeError(f"not a number: {x!r}")


def _of_pi(r: Fraction) -> str:
    """r·π in TeX: 0, \\pi, -2\\pi, 3\\pi/4."""
    if r == 0:
        return "0"
    top = abs(r.numerator)
    pi = ("" if top == 1 else str(top)) + "\\pi"
    return ("-" if r < 0 else "") + (pi if r.denominator == 1 else f"{pi}/{r.denominator}")


def _is_scientific(value: Decimal) -> bool:
    # a Decimal rounded above its units place (5.12E+30) came from significant digits
    exponent = value.as_tuple().exponent  # a letter for NaN and infinities, which are not finite
    return value.is_finite() and value != 0 and isinstance(exponent, int) and exponent > 0


def _scientific(value: Decimal, power: str) -> str:
    """m × 10^k with the digits as decided: 5.120 × 10^30 keeps its trailing zero."""
    sign, digits, _ = value.as_tuple()
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return ("-" if sign else "") + mantissa + power.format(value.adjusted())


def _is_compound_sum(x: Formula) -> bool:
    from symattn.rendering import printing

    return printing.is_compound_sum(x.expr)


def tex_operand(x: Num | Numeral) -> str:
    """A factor in a product: negatives and scientific forms get parentheses."""
    text = tex_number(x)
    needs = (
        (x.is_negative and not x.is_infinite)
        or (isinstance(x, Numeral) and (x.exponent or x.form in ("fraction", "pi")))
        or (isinstance(x, Formula) and _is_compound_sum(x))
        or (isinstance(x, Num) and x.scientific)
    )
    return f"\\left({text}\\right)" if needs else text


def tex_inline(x: Num | Numeral) -> str:
    """A number no taller than a line, for table cells and superscripts: a formula's fractions use ``/``."""
    if isinstance(x, Formula) and not x.is_infinite:
        from symattn.rendering import printing

        return printing.latex(x.expr, inline=True)
    if isinstance(x, Numeral) and x.form == "fraction":
        return f"{'-' if x.value < 0 else ''}{abs(x.value.numerator)}/{x.value.denominator}"
    return tex_number(x)


def tex_vector(items, number: Callable[[Any], str] = tex_number) -> str:
    """``[x, y]``; brackets that grow (``\\left[…\\right]``) around formulas with fractions."""
    texts = [number(x) for x in items]
    tall = any(isinstance(x, Formula) and "\\frac" in text for x, text in zip(items, texts))
    left, right = ("\\left[", "\\right]") if tall else ("[", "]")
    return left + ",\\ ".join(texts) + right


def relation(exact: bool) -> str:
    return "=" if exact else "\\approx"


def plain_number(x: Num | Numeral | Decimal | int) -> str:
    """A number for plain text: shown digits, or the user's text as typed."""
    if isinstance(x, Numeral):
        return x.text.lstrip("+")
    if isinstance(x, Formula):
        return x.text or str(x.expr)
    if isinstance(x, Num) and x.is_infinite:
        return "−∞"
    if isinstance(x, Num) and x.scientific:
        return _scientific(x.value, "×10^{}")
    if isinstance(x, Percent):
        return plain_number(Decimal(x)) + "%"
    if isinstance(x, Decimal) and _is_scientific(x):
        return _scientific(x, "×10^{}")
    return tex_number(x)


def plain_operand(x: Num | Numeral) -> str:
    text = plain_number(x)
    return f"({text})" if x.is_negative else text


def plain_relation(exact: bool) -> str:
    return "=" if exact else "≈"
