"""Errors symattn raises on bad input.

Every error names where the problem is: the file (or ``<dict>`` for Python
input), the key, and the 1-based position inside a matrix. The CLI prints
``symattn: <message>`` and exits 2 for these and only these.
"""

from __future__ import annotations


class SymattnError(Exception):
    """Base class of every error caused by user input."""


def _where(source: str, key: str | None, position: tuple[int, ...]) -> str:
    parts = [source]
    if key:
        parts.append(key + "".join(f"[{p}]" for p in position))
    return ": ".join(parts)


class SpecError(SymattnError, ValueError):
    """A spec or claims file is malformed: bad key, shape, number or label."""

    def __init__(self, source: str, key: str | None, problem: str, position: tuple[int, ...] = ()):
        self.source = source
        self.key = key
        self.position = position
        self.problem = problem
        super().__init__(f"{_where(source, key, position)}: {problem}")


class ShapeError(SpecError):
    """Two matrices do not fit together."""


class EvaluationError(SymattnError, ArithmeticError):
    """A value could not be rounded reliably (e.g. a tie hidden in a closed form)."""


class RenderError(SymattnError, ValueError):
    """A derivation cannot be rendered as asked (unknown format, language or template)."""
