"""A matrix entry with symbols: its text and SymPy expression. Apart from the grammar that makes one
(:mod:`formula`), so that readers and renderers can tell a formula from a number without importing
SymPy, which the float64 path never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from symattn.input.records import record

if TYPE_CHECKING:
    import sympy


@record
class Formula:
    """A matrix entry with symbols, or a computed symbolic value."""

    text: str  # as typed ("" for computed values)
    expr: sympy.Expr

    @property
    def exact(self) -> bool:
        return True

    @property
    def is_negative(self) -> bool:
        return bool(self.expr.could_extract_minus_sign()) and not self.is_infinite

    @property
    def is_infinite(self) -> bool:
        import sympy  # loaded already: it made self.expr

        return self.expr == sympy.S.NegativeInfinity

    @property
    def is_sum(self) -> bool:
        import sympy

        return isinstance(self.expr, sympy.Add)

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(s.name for s in self.expr.free_symbols)


__all__ = ["Formula"]
