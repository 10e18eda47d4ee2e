"""Multi-head attention: one exact model per head, their concatenation, and W_O.

The layout is torch.nn.MultiheadAttention's, with weights as we multiply them
(X W, where torch computes x Wᵀ): head h takes columns h·d_head … (h+1)·d_head − 1
of Q, K and V and is scaled by 1/√d_head; the head outputs are concatenated in
order and multiplied by W_O, plus b_O.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cached_property
from typing import ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact import engine
from symattn.exact.base import ForwardPass, Rounding, lcm_of_denominators
from symattn.exact.heads import build_heads
from symattn.exact.model import Model
from symattn.exact.numeric import Fixed
from symattn.exact.rounding import NumRows, exact_or_rounded, from_model
from symattn.input.records import record
from symattn.input.spec import Spec


@record(eq=False)
class MultiHead(Rounding, ForwardPass):
    heads: tuple[Model, ...]
    W_O: tuple[tuple[Fraction, ...], ...] | None = None
    b_O: tuple[Fraction, ...] | None = None
    kind: ClassVar[str] = "heads"
    compare = Model.compare  # the sign of (entry − r), decided exactly: the same code serves every Rounding

    @property
    def _headroom_bits(self) -> int:
        return max(h._headroom_bits for h in self.heads)

    def exact(self, quantity: str) -> ImmutableMatrix:
        if quantity not in ("concat", "output"):
            raise ValueError(f"unknown quantity {quantity!r}; expected concat or output")
        return getattr(self, quantity)

    @cached_property
    def concat(self) -> ImmutableMatrix:
        return ImmutableMatrix.hstack(*[h.output for h in self.heads])

    @cached_property
    def output(self) -> ImmutableMatrix:
        """concat · W_O + b_O (the concatenation itself without W_O)."""
        if self.W_O is None:
            return self.concat
        C = self.concat
        W = self.W_O
        b = self.b_O or (Fraction(0),) * len(W[0])
        return ImmutableMatrix(
            C.rows,
            len(W[0]),
            lambda i, k: (
                sympy.Add(*[C[i, c] * sympy.Rational(W[c][k].numerator, W[c][k].denominator) for c in range(C.cols)])
                + sympy.Rational(b[k].numerator, b[k].denominator)
            ),
        )

    # --- numbers ---------------------------------------------------------

    def rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        concat = tuple(sum((list(r) for r in rows), []) for rows in zip(*[h.rationals("output") for h in self.heads]))
        if quantity == "concat" or self.W_O is None:
            return tuple(tuple(row) for row in concat)
        W, b = self.W_O, self.b_O or (Fraction(0),) * len(self.W_O[0])
        # an irrational entry of concat times an exact 0 of W_O adds nothing: the sum may still be rational
        # (all of W_O's column 0: the output is exactly b_O, whose rounding no enclosure could decide)
        return tuple(
            tuple(
                None
                if any(x is None and W[c][k] != 0 for c, x in enumerate(row))
                else sum((x * W[c][k] for c, x in enumerate(row) if W[c][k] != 0), Fraction(0)) + b[k]
                for k in range(len(W[0]))
            )
            for row in concat
        )

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        bits = -(-bits // 32) * 32
        per_head = [h._enclosures("output", bits) for h in self.heads]
        widths = [h.v.shape[1] for h in self.heads]
        rows = []
        for i in range(self.heads[0].n_queries):
            row: list[Fixed] = []
            for boxes, width in zip(per_head, widths):
                row += boxes[i * width : (i + 1) * width]
            rows.append(row)
        if quantity == "concat" or self.W_O is None:
            return [b for row in rows for b in row]
        den = lcm_of_denominators(list(self.W_O) + [self.b_O or ()])
        cols = [[int(self.W_O[c][k] * den) for c in range(len(self.W_O))] for k in range(len(self.W_O[0]))]
        bias = self.b_O or (Fraction(0),) * len(cols)
        shifts = [Fixed.exact(b, bits) for b in bias]
        return [
            Fixed(box.lo + shift.lo, box.hi + shift.hi, bits)
            for row in engine.weighted_sums(rows, cols, den, bits, self.heads[0].numeric_engine)
            for box, shift in zip(row, shifts)
        ]

    def figures_output(self, spec: Spec, concat: NumRows) -> NumRows:
        """The output after W_O as shown: exact values rounded, or (hand) from the shown concat."""
        decimals = spec.decimals.output
        if spec.rounding == "hand":
            W_O = self.W_O
            assert W_O is not None  # called only for a spec with W_O (the caller checks spec.W_O)
            b = self.b_O or (Fraction(0),) * len(W_O[0])
            return exact_or_rounded(
                [
                    [
                        sum((x.fraction * W_O[c][k] for c, x in enumerate(row)), Fraction(0)) + b[k]
                        for k in range(len(W_O[0]))
                    ]
                    for row in concat
                ],
                decimals,
                spec.notation,
            )
        return from_model(self, "output", decimals, spec.notation)


def build_multihead(spec: Spec) -> MultiHead:
    def fractions(m):
        return None if m is None else tuple(tuple(x.value for x in row) for row in m)

    b_O = None if spec.b_O is None else tuple(x.value for x in spec.b_O)
    return MultiHead(build_heads(spec), fractions(spec.W_O), b_O)


__all__ = ["MultiHead", "build_multihead"]
