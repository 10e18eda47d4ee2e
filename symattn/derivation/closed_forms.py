"""Closed forms as text: SymPy's str() of each distinct subexpression once (:class:`Printer`), and one head's
closed forms written from its integers (:class:`Structure`), which SymPy's printer takes minutes for at 64×64.
compute's JSON (:mod:`symattn.derivation.intermediates`) and the checker's reports
(:mod:`symattn.checking.closed`) both print with them.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import sympy

if TYPE_CHECKING:
    from symattn.exact.model import Model


class Printer:
    """str() of SymPy expressions, each distinct subexpression printed once.

    A row's sum of exps appears in every weight and output of that row; SymPy's
    printer would order and print it again each time.
    """

    def __init__(self) -> None:
        from sympy.printing.str import StrPrinter

        memo: dict = {}

        class Memo(StrPrinter):
            def _print(self, expr, **kwargs):  # same text as str(expr): printing is context-free
                if kwargs:
                    return super()._print(expr, **kwargs)
                if expr not in memo:
                    memo[expr] = super()._print(expr)
                return memo[expr]

        self.printer = Memo()

    def __call__(self, expr: Any) -> str:
        return self.printer.doprint(expr)


class Structure:
    """The text of one head's closed forms, from its integers: z_ij = n_ij · c·√m / den.

    A sum lists its terms a·e^z by increasing value, as SymPy's str() orders a sum of numbers
    (it sorts on their float values; only terms whose floats tie could come out in another
    order); terms with equal z are collected (2*exp(z)).
    """

    def __init__(self, model: Model, inline: bool = False) -> None:

        self.model = model
        self.inline = inline  # each row's sum written out in place of its name: exactly SymPy's str()
        self.den, self.rows = model.score_integers
        c, root = model.scale.as_coeff_Mul()  # the scale is c·√m, m square-free (1: rational)
        self.c = Fraction(int(c.p), int(c.q))
        self.root = (
            ""
            if root == 1
            else f"sqrt({int(root.base)})"
            if isinstance(root, sympy.Pow) and root.exp == sympy.S.Half and root.base.is_Integer
            else None
        )
        if self.root is None:
            raise ValueError(f"the scale {model.scale} is not a rational times a square root")
        self._exp_text: dict[int, str] = {}
        self._sums: list[str] | None = None

    def names(self) -> list[str]:
        if self.inline:
            return [f"({text})" for text in self.sums()]
        return [f"s_{i + 1}" for i in range(len(self.rows))]

    def z(self, n: int) -> str:
        """The text of z = n · c·√m / den."""
        r = Fraction(n * self.c.numerator, self.den * self.c.denominator)
        if not self.root or r == 0:
            return str(r)
        p, q = r.numerator, r.denominator
        head = self.root if p == 1 else "-" + self.root if p == -1 else f"{p}*{self.root}"
        return head if q == 1 else f"{head}/{q}"

    def exp(self, n: int) -> str:
        """e^z: 1 at z = 0, E at z = 1."""
        text = self._exp_text.get(n)
        if text is None:
            z = self.z(n)
            text = self._exp_text[n] = "1" if z == "0" else "E" if z == "1" else f"exp({z})"
        return text

    def matrix(self, quantity: str) -> list[list[str]]:
        ok, rows = self.model.may_attend, self.rows
        if quantity == "scores":
            return [[str(Fraction(n, self.den)) for n in row] for row in rows]
        if quantity == "scaled":
            return [[self.z(n) if ok(i, j) else "-oo" for j, n in enumerate(row)] for i, row in enumerate(rows)]
        if quantity == "exp":
            return [[self.exp(n) if ok(i, j) else "0" for j, n in enumerate(row)] for i, row in enumerate(rows)]
        if quantity == "exp_sum":
            return [[text] for text in self.sums()]
        names = self.names()
        if quantity == "weights":
            rational = self.model.rationals("weights")
            return [
                [
                    _over(self.exp(n), names[i])
                    if rational[i][j] is None
                    else self._sympy("weights", i, j)
                    if self.inline
                    else str(rational[i][j])
                    for j, n in enumerate(row)
                ]
                for i, row in enumerate(rows)
            ]
        if quantity == "output":
            return self._output(names)
        raise ValueError(f"no structural text for {quantity!r}")

    def _sympy(self, quantity: str, i: int, k: int) -> str:
        """str() of one rational weight or output entry's expression, built as the model builds it:
        SymPy cancels some ((2*exp(z))/(4*exp(z)) is 1/2) and not others."""
        e, sums = self.model.exp, self.model.exp_sum
        if quantity == "weights":
            return str(e[i, k] / sums[i, 0])
        V = self.model.V
        return str(sympy.Add(*[V[j, k] * e[i, j] for j in range(e.cols)]) / sums[i, 0])

    def _terms(self, i: int) -> list[tuple[int, list[int]]]:
        # the keys row i may attend to, grouped by score
        return [(self.rows[i][g[0]], g) for g in self.model._groups[i]]

    def _sorted(self, parts: list[tuple[int, int]], den: int) -> list[tuple[int, int, str]]:
        """Terms (t/den)·e^z, z from the score integer n, by increasing value (in logarithms: e^z may
        overflow a float), as (p, q, text of e^z) with p/q = t/den in lowest terms."""
        factor = float(self.c) * (math.sqrt(int(self.root[5:-1])) if self.root else 1.0) / self.den
        log = math.log

        def key(part: tuple[int, int]) -> tuple[int, float]:
            t, n = part
            size = log(abs(t)) + n * factor
            return (1, size) if t > 0 else (0, -size)

        out = []
        for t, n in sorted(parts, key=key):
            g = math.gcd(t, den)
            out.append((t // g, den // g, self.exp(n)))
        return out

    def _ordered(self, parts: list[tuple[int, int]], den: int) -> list[tuple[int, int, str]]:
        """The terms in the order SymPy's str() prints them: by value, except that a sum of a positive
        number (a rational, e^0 = 1, or E itself) and one negative product puts the number first, as
        in "1 - exp(1/100)" (Expr.as_ordered_terms)."""
        out = self._sorted(parts, den)
        if len(out) == 2:
            numbers = [t for t in out if t[2] == "1" or (t[2] == "E" and t[:2] == (1, 1))]
            if len(numbers) == 1 and numbers[0][0] > 0:
                other = out[0] if out[1] is numbers[0] else out[1]
                if other[0] < 0:
                    return [numbers[0], other]
        return out

    def sums(self) -> list[str]:
        if self._sums is None:
            self._sums = []
            for i in range(len(self.rows)):
                parts = [(len(g), n) for n, g in self._terms(i)]
                self._sums.append(_join(self._ordered(parts, 1)))
        return self._sums

    def _output(self, names: list[str]) -> list[list[str]]:
        den, columns = self.model._v_integers
        rational = self.model.rationals("output")
        out = []
        for i in range(len(self.rows)):
            terms = self._terms(i)
            row = []
            for k, column in enumerate(columns):
                if rational[i][k] is not None:
                    row.append(self._sympy("output", i, k) if self.inline else str(rational[i][k]))
                    continue
                parts = [(column[g[0]] if len(g) == 1 else sum(column[j] for j in g), n) for n, g in terms]
                parts = [(t, n) for t, n in parts if t]
                ordered = self._ordered(parts, den)
                if len(ordered) == 1:
                    row.append(_times(*ordered[0], names[i]))
                else:
                    row.append(f"({_join(ordered)})/{names[i]}")
            out.append(row)
        return out


def _over(x: str, name: str) -> str:
    return f"{x}/{name}"


def _times(p: int, q: int, x: str, name: str | None = None) -> str:
    """(p/q)·x / name as SymPy prints a product: 3*exp(z)/(10*s_1), -E/2, 5/2, -1/(3*s_1)."""
    top = str(abs(p)) if x == "1" else x if abs(p) == 1 else f"{abs(p)}*{x}"
    sign = "-" if p < 0 else ""
    if name is None:
        return f"{sign}{top}" if q == 1 else f"{sign}{top}/{q}"
    return f"{sign}{top}/{name}" if q == 1 else f"{sign}{top}/({q}*{name})"


def _join(parts: list[tuple[int, int, str]]) -> str:
    """A sum Σ (p/q)·x as SymPy prints it: terms in the order given, negative ones with " - "."""
    text: list[str] = []
    for p, q, x in parts:
        term = _times(p, q, x)
        if not text:
            text.append(term)
        elif p < 0:
            text.append(" - " + term[1:])
        else:
            text.append(" + " + term)
    return "".join(text) if text else "0"
