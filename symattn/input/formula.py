"""Symbolic matrix entries: a small grammar of numbers, symbols, + - * / ^, (), sqrt() and exp().

The text is parsed by our own recursive-descent parser into SymPy objects built
one node at a time; it is never passed to ``eval``, ``sympify`` or
``parse_expr``. Anything else (an unknown function such as ``__import__``, an
attribute, a string) is rejected before anything is built.

    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "/") unary)*
    unary  := ("+" | "-") unary | power
    power  := atom ("^" unary)?
    atom   := number | symbol | ("sqrt" | "exp") "(" expr ")" | "(" expr ")"
    symbol := a letter, then letters, digits or _      a, q_11, x2
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import sympy

from symattn.input.limits import (
    FORMULA_BITS,
    FORMULA_DEPTH,
    FORMULA_LENGTH,
    FORMULA_POWER,
    FORMULA_TERMS,
    expanded_terms,
)
from symattn.input.numeral import NumeralError, parse_numeral
from symattn.input.symbolic_entry import Formula as Formula

FUNCTIONS = {"sqrt": sympy.sqrt, "exp": sympy.exp}
RESERVED = {"inf", "infinity", "nan", "oo", "zoo"}  # read as numbers by other tools; never symbols here
SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_TOKEN = re.compile(
    r"\s*(?:(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*/^()])|(?P<other>\S))"
)


class FormulaError(NumeralError):
    """A text is neither a number nor a formula of our grammar. Callers add the location."""


def is_symbol_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and SYMBOL.fullmatch(name) is not None
        and name not in FUNCTIONS
        and name.lower() not in RESERVED
    )


def terms(expr: sympy.Expr) -> int:
    """An upper bound on the terms of ``expr`` once multiplied out (as ``sympy.expand`` does)."""
    if isinstance(expr, sympy.Add):
        return sum(terms(a) for a in expr.args)
    if isinstance(expr, sympy.Mul):
        return math.prod(terms(a) for a in expr.args)
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer) and expr.exp > 0:
        return expanded_terms(terms(expr.base), int(expr.exp))
    return 1  # a number, a symbol, exp(), sqrt(), 1/(…): expand keeps it whole


def symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, real=True)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = self._tokenize(text)
        self.pos = 0
        self.depth = 0

    def _tokenize(self, text: str) -> list[tuple[str, str]]:
        tokens, i = [], 0
        while i < len(text):
            match = _TOKEN.match(text, i)
            if not match or match.end() == i:
                if text[i:].strip() == "":
                    break
                raise FormulaError(f"unexpected {text[i:].strip()[0]!r} in {text!r}")
            kind = match.lastgroup
            assert kind is not None  # every alternative of _TOKEN is a named group
            tokens.append((kind, match.group(kind)))
            i = match.end()
        return tokens

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise FormulaError(f"unexpected end of {self.text!r}")
        self.pos += 1
        return token

    def expect(self, op: str) -> None:
        token = self.take()
        if token != ("op", op):
            raise FormulaError(f"expected {op!r} but found {token[1]!r} in {self.text!r}")

    def parse(self) -> sympy.Expr:
        expr = self.expr()
        token = self.peek()
        if token is not None:
            found = token[1]
            raise FormulaError(f"expected an operator before {found!r} in {self.text!r}")
        return expr

    def expr(self) -> sympy.Expr:
        self.depth += 1
        if self.depth > FORMULA_DEPTH:
            raise FormulaError(f"nested too deeply: {self.text!r}")
        value = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            right = self.term()
            value = self.checked(value + right if op == "+" else value - right)
        self.depth -= 1
        return value

    def term(self) -> sympy.Expr:
        value = self.unary()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take()[1]
            right = self.unary()
            if op == "/" and right == 0:
                raise FormulaError(f"division by zero in {self.text!r}")
            value = self.checked(value * right if op == "*" else value / right)
        return value

    def checked(self, value: sympy.Expr) -> sympy.Expr:
        # refuse a formula as soon as it grows past what can be worked with, before the next step
        if isinstance(value, sympy.Rational) and max(abs(value.p).bit_length(), value.q.bit_length()) > FORMULA_BITS:
            raise FormulaError(f"a number in {self.text!r} has more than {FORMULA_BITS} bits (the limit)")
        if terms(value) > FORMULA_TERMS:
            raise FormulaError(f"{self.text!r} has more than {FORMULA_TERMS} terms once multiplied out (the limit)")
        return value

    def unary(self) -> sympy.Expr:
        if self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            value = self.unary()
            return -value if op == "-" else value
        return self.power()

    def power(self) -> sympy.Expr:
        base = self.atom()
        if self.peek() == ("op", "^"):
            self.take()
            exponent = self.unary()
            if not exponent.is_number or abs(exponent) > FORMULA_POWER:
                raise FormulaError(
                    f"an exponent must be a number from -{FORMULA_POWER} to {FORMULA_POWER} in {self.text!r}"
                )
            if (
                isinstance(base, sympy.Rational)
                and abs(exponent) * max(abs(base.p).bit_length(), base.q.bit_length()) > FORMULA_BITS
            ):
                raise FormulaError(f"a number in {self.text!r} has more than {FORMULA_BITS} bits (the limit)")
            if base == 0 and exponent.is_negative:
                raise FormulaError(f"division by zero in {self.text!r}")
            return self.checked(base**exponent)
        return base

    def atom(self) -> sympy.Expr:
        kind, value = self.take()
        if kind == "number":
            n = parse_numeral(value).value
            return sympy.Rational(n.numerator, n.denominator)
        if kind == "name":
            if self.peek() == ("op", "("):
                if value not in FUNCTIONS:
                    raise FormulaError(f"unknown function {value!r} in {self.text!r}; allowed: exp, sqrt")
                self.take()
                argument = self.expr()
                self.expect(")")
                return FUNCTIONS[value](argument)
            if value in FUNCTIONS:
                raise FormulaError(f"{value} needs parentheses: {value}(…) in {self.text!r}")
            if not is_symbol_name(value):
                raise FormulaError(f"{value!r} is not a symbol name (a letter, then letters, digits or _)")
            return symbol(value)
        if value == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        raise FormulaError(f"unexpected {value!r} in {self.text!r}")


def parse_formula(text: str) -> Formula:
    """Parse a formula entry. Raises FormulaError, never evaluates anything."""
    if not isinstance(text, str):
        raise FormulaError(f"not a number: {text!r}")
    if len(text) > FORMULA_LENGTH:
        raise FormulaError(f"formula longer than {FORMULA_LENGTH} characters")
    return Formula(text.strip(), _Parser(text.strip()).parse())


def value_of(entry: object) -> sympy.Expr:
    """The SymPy value of a matrix entry (a Numeral or a Formula)."""
    if isinstance(entry, Formula):
        return entry.expr
    value: Fraction = entry.value  # type: ignore[attr-defined]
    return sympy.Rational(value.numerator, value.denominator)
