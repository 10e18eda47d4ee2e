"""Closed forms of checked entries, made only when shown.

A 64-token check has thousands of claims; building SymPy's expression of every output entry
and printing it with SymPy's ``str()`` took most of the time. :class:`Closed` keeps the entry's
place; its text comes from the model's structure (the same text ``str()`` gives, written from
the integers behind it) where the model is one numeric head, else from SymPy's printer with
each distinct subexpression printed once. ``expr`` builds SymPy's expression for printers
that need it (LaTeX).
"""

from __future__ import annotations

from typing import Any

import sympy

from symattn.derivation.closed_forms import Printer, Structure

_STRUCTURED = ("scores", "scaled", "exp", "exp_sum", "weights", "output")


class Texts:
    """The str() texts of the closed forms of one check, each model's tables made once."""

    def __init__(self) -> None:
        self._printer = Printer()
        self._structures: dict[int, Structure | None] = {}
        self._matrices: dict[tuple[int, str], list[list[str]]] = {}
        self._models: list[Any] = []  # keeps each model alive while its id is a key

    def _structure(self, model: Any) -> Structure | None:
        key = id(model)
        if key not in self._structures:
            self._models.append(model)
            try:
                self._structures[key] = (
                    Structure(model, inline=True) if model.kind == "head" and not model.parts else None
                )
            except ValueError:  # a scale that is not a rational times a square root
                self._structures[key] = None
        return self._structures[key]

    def text(self, model: Any, name: str, i: int, j: int) -> str:
        structure = self._structure(model) if name in _STRUCTURED else None
        if structure is None:
            return self.print(model.exact(name)[i, j])
        key = (id(model), name)
        if key not in self._matrices:
            self._matrices[key] = structure.matrix(name)
        return self._matrices[key][i][j]

    def print(self, expr: sympy.Expr) -> str:
        return self._printer(expr)


class Closed:
    """One entry's closed form: str() is SymPy's text of it; ``expr`` is the expression."""

    __slots__ = ("_expr", "_model", "_name", "_at", "_texts", "_text")

    def __init__(self, texts: Texts, model: Any = None, name: str = "", at: tuple[int, int] = (0, 0), expr=None):
        self._texts, self._model, self._name, self._at, self._expr = texts, model, name, at, expr
        self._text: str | None = None

    @property
    def expr(self) -> sympy.Expr:
        if self._expr is None:
            self._expr = self._model.exact(self._name)[self._at]
        return self._expr

    def __str__(self) -> str:
        if self._text is None:
            if self._expr is not None or self._model is None:
                self._text = self._texts.print(self.expr)
            else:
                self._text = self._texts.text(self._model, self._name, *self._at)
        return self._text

    def __repr__(self) -> str:
        return f"Closed({self})"

    def __eq__(self, other: object) -> bool:
        other_expr = other.expr if isinstance(other, Closed) else other
        return bool(self.expr == other_expr)

    def __hash__(self) -> int:
        return hash(self.expr)


__all__ = ["Closed", "Texts"]
