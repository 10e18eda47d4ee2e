"""Rigorous enclosures of one head's quantities at one working precision, each exponential computed once."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from functools import cached_property
from typing import Any

import sympy

from symattn.exact import engine, numeric
from symattn.exact.numeric import Fixed

ROWS_AT_ONCE = 64  # rows of exps made at once where only the weights need them
LARGE = 1 << 18  # scores (queries × keys) from which the weights' exps are made a few rows at a time


class Boxes:
    """Enclosures of every quantity at one working precision, each exp computed once."""

    def __init__(self, model: Any, bits: int):  # the Model whose enclosures these are
        self.model = model
        self.bits = bits
        self.prec = bits + 32 + model._exp_bits

    def _scalar(self, x: sympy.Expr) -> list[Fixed]:
        return [Fixed.from_interval(numeric.enclose(x, self.prec), self.bits)]

    def scale(self) -> list[Fixed]:
        return self._scalar(self.model.scale)

    def sqrt_dk(self) -> list[Fixed]:
        return self._scalar(self.model.sqrt_dk)

    def scores(self) -> list[Fixed]:
        den, rows = self.model.score_integers
        return [Fixed.exact(Fraction(x, den), self.bits) for row in rows for x in row]

    def _flat(self, rows: list[list[Fixed | None]]) -> list[Fixed]:
        zero = Fixed(0, 0, self.bits)
        return [
            zero if b is None else Fixed(b.lo >> (b.bits - self.bits), -(-b.hi >> (b.bits - self.bits)), self.bits)
            for row in rows
            for b in row
        ]

    @cached_property
    def _scale(self) -> Fixed:
        # the scale once per precision, shared by z and every exp
        return Fixed.from_interval(numeric.enclose(self.model.scale, self.prec + 8), self.prec)

    @cached_property
    def _z(self) -> list[list[Fixed | None]]:
        return self.model._z_fixed(self._scale, shifted=False)

    @cached_property
    def _z_shifted(self) -> list[list[Fixed | None]]:
        return self.model._z_fixed(self._scale, shifted=True)

    def scaled(self) -> list[Fixed]:
        return self._flat(self._z)

    def shifted(self) -> list[Fixed]:
        return self._flat(self._z_shifted)

    def _exps(self, shifted: bool) -> list[list[Fixed]]:
        return engine.exps(
            self.model._exp_arguments(shifted),
            self.model.score_integers[0],
            self._scale,
            self.prec,
            self.bits,
            self.model.numeric_engine,
        )

    @cached_property
    def _exp(self) -> list[list[Fixed]]:
        return self._exps(shifted=False)

    @cached_property
    def _exp_shifted(self) -> list[list[Fixed]]:
        return self._exps(shifted=True)

    def exp(self) -> list[Fixed]:
        return [b for row in self._exp for b in row]

    def exp_shifted(self) -> list[Fixed]:
        return [b for row in self._exp_shifted for b in row]

    def _sums(self, rows: list[list[Fixed]]) -> list[Fixed]:
        return [Fixed(sum(b.lo for b in row), sum(b.hi for b in row), self.bits) for row in rows]

    def exp_sum(self) -> list[Fixed]:
        return self._sums(self._exp)

    def exp_shifted_sum(self) -> list[Fixed]:
        return self._sums(self._exp_shifted)

    @cached_property
    def _weights(self) -> list[list[Fixed]]:
        # from the exps of z minus the row maximum: none overflows or vanishes,
        # and the quotient is the same
        bits = self.bits
        rows = []
        for row in self._exp_rows_shifted():
            lo_sum = sum(b.lo for b in row)
            hi_sum = sum(b.hi for b in row)
            rows.append([Fixed((lo << bits) // hi_sum, -((-(hi << bits)) // lo_sum), bits) for lo, hi, _ in row])
        return rows

    def _exp_rows_shifted(self) -> Iterator[list[Fixed]]:
        """The rows of exp_shifted: those kept, or from LARGE scores on made ROWS_AT_ONCE rows at a time and
        let go (a million boxes at 1024 tokens: the weights need them one row at a time). A variant's own
        exps (its scores are not S · scale) are made and kept as exp_shifted makes them."""
        small = self.model.n_queries * self.model.n_keys < LARGE  # then kept: exp_shifted may be asked next
        if small or "_exp_shifted" in self.__dict__ or type(self)._exps is not Boxes._exps:
            yield from self._exp_shifted
            return
        arguments = self.model._exp_arguments(True)
        for start in range(0, len(arguments), ROWS_AT_ONCE):
            chunk = arguments[start : start + ROWS_AT_ONCE]
            yield from engine.exps(
                chunk, self.model.score_integers[0], self._scale, self.prec, self.bits, self.model.numeric_engine
            )

    def weights(self) -> list[Fixed]:
        return [b for row in self._weights for b in row]

    def products(self) -> list[Fixed]:
        out = []
        for row in self._weights:
            for b, values in zip(row, self.model.v_rows):
                for v in values:
                    ends = sorted((b.lo * v, b.hi * v))
                    out.append(
                        Fixed(
                            ends[0].numerator // ends[0].denominator,
                            -((-ends[1].numerator) // ends[1].denominator),
                            self.bits,
                        )
                    )
        return out

    @cached_property
    def _output(self) -> list[list[Fixed]]:
        den, cols = self.model._v_integers
        return engine.weighted_sums(self._weights, cols, den, self.bits, self.model.numeric_engine)

    def output(self) -> list[Fixed]:
        return [b for row in self._output for b in row]
