"""LaTeX for symbolic values, written for people (SymPy's LatexPrinter, adjusted).

SymPy's own forms are correct but hard to read in print: it writes 1/√2 as
``\\frac{\\sqrt{2}}{2}`` and puts that fraction inside exponents. This printer:

- writes a rationalized scale as a division by the root, as the derivation
  explains it: √2·a/2 prints ``\\frac{a}{\\sqrt{2}}`` (inline: ``a/\\sqrt{2}``);
- never puts a fraction in a superscript: exponents are printed inline
  (``e^{(b - a)/\\sqrt{2}}``), and a long one as ``\\exp\\!\\left(…\\right)``;
- prints a two-term softmax c·e^x/(e^x + e^y) in its logistic form
  c/(1 + e^{y−x}), but only once SymPy has proved the two equal;
- leads a sum with a positive term (``b - a`` rather than ``- a + b``);
- in ``inline`` mode (table cells, running text, superscripts) writes every
  fraction with ``/``, so that nothing is taller than a line.

Only the printing changes, never the value; the output is deterministic.
"""

from __future__ import annotations

import sympy
from sympy import Add, Mul, Pow, S
from sympy.printing.latex import LatexPrinter
from sympy.printing.precedence import PRECEDENCE
from sympy.simplify import fraction

from symattn.exact.symbolic import logistic
from symattn.rendering.layout import tex_width

LONG_EXPONENT = 80.0  # pt (estimated at full size): longer exponents are written \exp\!\left(…\right)


def _root_of(factor: sympy.Expr) -> int | None:
    """m when ``factor`` is √m for a positive integer m."""
    if isinstance(factor, Pow) and factor.exp == S.Half and factor.base.is_Integer and factor.base > 0:
        return int(factor.base)
    return None


def over_root(expr: sympy.Expr) -> tuple[sympy.Expr, int, int] | None:
    """``(numerator, r, m)`` with expr == numerator / (r·√m), when expr carries a rationalized 1/√m.

    Every term must hold the same √m once and a denominator divisible by m
    (√2·a/2 = a/√2, √2·a/4 = a/(2√2), as with d_k = 8); the numerator then has integer
    coefficients and no roots or fractions left at its top level.
    """
    terms = Add.make_args(expr)
    roots = set()
    for term in terms:
        found = [m for m in map(_root_of, Mul.make_args(term)) if m is not None]
        if len(found) != 1:
            return None
        roots.add(found[0])
    if len(roots) != 1:
        return None
    m = roots.pop()
    quotient = Add(*[term / sympy.sqrt(m) for term in terms])
    content, rest = quotient.as_content_primitive()
    if not isinstance(content, sympy.Rational) or content.q % m:
        return None
    numerator = content.p * rest
    if fraction(numerator, exact=True)[1] != 1 or any(
        _root_of(f) for t in Add.make_args(numerator) for f in Mul.make_args(t)
    ):
        return None
    return numerator, content.q // m, m


class FormulaPrinter(LatexPrinter):
    """SymPy's LatexPrinter with the forms above; ``inline=True`` writes fractions with ``/``."""

    _default_settings = {**LatexPrinter._default_settings, "inline": False, "fold_frac_powers": True}

    def __init__(self, settings: dict | None = None):
        super().__init__(settings)
        self._given = dict(settings or {})

    @property
    def inline(self) -> bool:
        return bool(self._settings["inline"])

    def _inline_printer(self) -> FormulaPrinter:
        return self if self.inline else FormulaPrinter({**self._given, "inline": True})

    def _sup(self, expr: sympy.Expr) -> str:
        """An exponent: always inline, so no fraction sits in a superscript."""
        return self._inline_printer()._print(expr)

    def _fraction(self, numer: str, denom: str, numer_is_sum: bool, denom_is_compound: bool) -> str:
        if not self.inline:
            return rf"\frac{{{numer}}}{{{denom}}}"
        return f"{f'({numer})' if numer_is_sum else numer}/{f'({denom})' if denom_is_compound else denom}"

    def _print_over_root(self, numerator: sympy.Expr, r: int, m: int) -> str:
        sign = ""
        if numerator.could_extract_minus_sign() and not isinstance(numerator, Add):
            sign, numerator = "- " if not self.inline else "-", -numerator
        root = f"\\sqrt{{{m}}}" if r == 1 else f"{r} \\sqrt{{{m}}}"
        return sign + self._fraction(self._print(numerator), root, isinstance(numerator, Add), r != 1)

    # --- exponentials and powers ---------------------------------------------

    def _print_exp(self, expr: sympy.exp, exp: str | None = None) -> str:
        arg = expr.args[0]
        sup = self._sup(arg)
        if tex_width(sup) <= LONG_EXPONENT:
            tex = f"e^{{{sup}}}"
        else:
            tex = rf"\exp\!\left({self._print(arg)}\right)"
        return self._do_exponent(tex, exp)

    def _print_Pow(self, expr: Pow) -> str:
        if (
            self.inline
            and expr.exp.is_number
            and expr.exp.is_negative
            and not (expr.exp.is_Rational and expr.exp.q != 1 and abs(expr.exp.p) != 1)
        ):
            return self._print_Mul(expr)
        return super()._print_Pow(expr)

    def _helper_print_standard_power(self, expr: Pow, template: str) -> str:
        # as SymPy's, with the exponent printed inline
        base = self.parenthesize(expr.base, PRECEDENCE["Pow"])
        if expr.base.is_Symbol:
            base = self.parenthesize_super(base)
        return template % (base, self._sup(expr.exp))

    def _print_Rational(self, expr: sympy.Rational) -> str:
        if self.inline and expr.q != 1:
            return f"{'-' if expr.p < 0 else ''}{abs(expr.p)}/{expr.q}"
        return super()._print_Rational(expr)

    # --- products and sums -----------------------------------------------------

    def _print_Mul(self, expr: sympy.Expr) -> str:
        if isinstance(expr, Mul):
            scaled = over_root(expr)
            if scaled is not None:
                return self._print_over_root(*scaled)
            rewritten = logistic(expr)
            if rewritten is not None:
                return self._print_logistic(*rewritten)
        if not self.inline:
            return super()._print_Mul(expr)
        sign = ""
        if expr.could_extract_minus_sign():
            sign, expr = "-", -expr
        numer, denom = fraction(expr, exact=True)
        if denom == 1:
            return sign + (super()._print_Mul(expr) if isinstance(expr, Mul) else self._print(expr))
        return sign + self._fraction(
            self._print(numer), self._print(denom), isinstance(numer, Add), isinstance(denom, (Add, Mul))
        )

    def _print_logistic(self, c: sympy.Expr, d: sympy.Expr) -> str:
        sign = ""
        if c.could_extract_minus_sign():
            sign, c = ("-" if self.inline else "- "), -c
        cn, cd = fraction(c, exact=True)
        one_plus = f"1 + {self._print(sympy.exp(d))}"
        brackets = "({})" if self.inline else "\\left({}\\right)"
        denom = one_plus if cd == 1 else f"{self._print(cd)} {brackets.format(one_plus)}"
        return sign + self._fraction(self._print(cn), denom, isinstance(cn, Add), True)

    def _print_Add(self, expr: sympy.Expr, order: str | None = None) -> str:
        scaled = over_root(expr)
        if scaled is not None:
            return self._print_over_root(*scaled)
        terms = list(self._as_ordered_terms(expr, order=order))
        if terms[0].could_extract_minus_sign():  # lead with a positive term: b - a, not - a + b
            first = next((i for i, t in enumerate(terms) if not t.could_extract_minus_sign()), 0)
            terms.insert(0, terms.pop(first))
        tex = ""
        for i, term in enumerate(terms):
            if i == 0:
                pass
            elif term.could_extract_minus_sign():
                tex += " - "
                term = -term
            else:
                tex += " + "
            term_tex = self._print(term)
            if self._needs_add_brackets(term):
                term_tex = rf"\left({term_tex}\right)"
            tex += term_tex
        return tex


def latex(expr: sympy.Expr, *, inline: bool = False) -> str:
    """A symbolic value in LaTeX math; ``inline`` for table cells, running text and superscripts."""
    return FormulaPrinter({"inline": inline}).doprint(expr)


def is_compound_sum(expr: sympy.Expr) -> bool:
    """A sum that prints as a sum (not as one fraction over a root): a factor of it needs parentheses."""
    return isinstance(expr, Add) and over_root(expr) is None
