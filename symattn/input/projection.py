"""Learned projections: Q = X W_Q + b_Q (and K, V), computed exactly.

The products are exact rationals; they become the Q, K, V of the model, each
written as its exact decimal (or as a fraction where it does not terminate).
"""

from __future__ import annotations

from fractions import Fraction

from symattn.input.decimals import round_half_up, terminating_decimals
from symattn.input.numeral import Numeral
from symattn.input.reader import Entry, Matrix, Numerals, is_number_row, is_numbers
from symattn.input.records import record

Row = tuple[Entry, ...]


@record
class Projection:
    """The inputs of Q = X W_Q + b_Q, K = X_kv W_K + b_K, V = X_kv W_V + b_V."""

    X: Matrix
    X_kv: Matrix | None  # cross-attention: keys and values from another sequence
    W_Q: Matrix
    W_K: Matrix
    W_V: Matrix
    b_Q: Row | None = None
    b_K: Row | None = None
    b_V: Row | None = None

    @property
    def source_of_keys(self) -> Matrix:
        return self.X if self.X_kv is None else self.X_kv

    def inputs(self) -> list[Matrix]:
        """Every matrix given (biases as one-row matrices)."""
        out = [self.X, self.W_Q, self.W_K, self.W_V] + ([self.X_kv] if self.X_kv is not None else [])
        return out + [(b,) for b in (self.b_Q, self.b_K, self.b_V) if b is not None]

    def weights(self, name: str) -> tuple[Matrix, Matrix, Row | None]:
        """(input, W, b) of one projection: "Q", "K" or "V"."""
        X = self.X if name == "Q" else self.source_of_keys
        return X, getattr(self, f"W_{name}"), getattr(self, f"b_{name}")


def numeral_of(value: Fraction, width: int = 0) -> Numeral:
    """A computed exact value as a numeral: its exact decimal (at least ``width``
    places), or p/q if it repeats."""
    # built directly, not parsed: a computed value is not held to the length of typed numbers
    places = terminating_decimals(value)
    if places is None:
        return (
            Numeral(str(value), value, "fraction", None)
            if value.denominator != 1
            else Numeral(str(value), value, "decimal", 0, str(value))
        )
    text = format(round_half_up(value, max(places, width)), "f")
    return Numeral(text, value, "decimal", max(places, width), text)


def product(X: Numerals, W: Numerals, b: tuple[Numeral, ...] | None) -> tuple[tuple[Fraction, ...], ...]:
    """X W + b, exactly."""
    cols = list(zip(*W))
    return tuple(
        tuple(
            sum((x.value * w.value for x, w in zip(row, col)), Fraction(0)) + (b[k].value if b else 0)
            for k, col in enumerate(cols)
        )
        for row in X
    )


def _symbolic_product(X: Matrix, W: Matrix, b: Row | None) -> Matrix:
    import sympy

    from symattn.input.formula import Formula, value_of

    out = []
    for row in X:
        entries = []
        for k in range(len(W[0])):
            expr = sympy.expand(
                sympy.Add(*[value_of(x) * value_of(w[k]) for x, w in zip(row, W)]) + (value_of(b[k]) if b else 0)
            )
            entries.append(
                numeral_of(Fraction(int(expr.p), int(expr.q)))
                if isinstance(expr, sympy.Rational)
                else Formula("", expr)
            )
        out.append(tuple(entries))
    return tuple(out)


def project(projection: Projection, name: str) -> Matrix:
    """Q, K or V as numerals, padded to the same decimals across the matrix (formulas with symbols)."""
    X, W, b = projection.weights(name)
    if not (is_numbers(X) and is_numbers(W) and (b is None or is_number_row(b))):
        return _symbolic_product(X, W, b)
    values = product(X, W, b)
    places = [terminating_decimals(v) for row in values for v in row]
    width = max((p for p in places if p is not None), default=0)
    return tuple(tuple(numeral_of(v, width) for v in row) for row in values)
