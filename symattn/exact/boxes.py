"""Rigorous enclosures of one head's quantities at one working precision, each exponential computed once.

Without parts every z is n · scale / den: exact integer products with one enclosure of the scale, and
the exps from the integers n at once (FLINT or mpmath). With parts each z is enclosed from its exact form
(:mod:`symattn.variants.forms`), through the monotone maps, and each exp from its z; a denominator part
adds its terms to the sums and the weights' denominators, and each part encloses its own quantities.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from functools import cached_property
from typing import Any

import sympy

from symattn.exact import engine, numeric
from symattn.exact.numeric import Fixed
from symattn.variants.base import MAP
from symattn.variants.forms import narrow, sub

ROWS_AT_ONCE = 64  # rows of exps made at once where only the weights need them
LARGE = 1 << 18  # scores (queries × keys) from which the weights' exps are made a few rows at a time


class Boxes:
    """Enclosures of every quantity at one working precision, each exp computed once."""

    def __init__(self, model: Any, bits: int):  # the Model whose enclosures these are
        self.model = model
        self.bits = bits
        self.prec = bits + 32 + model._exp_bits
        self.cache: dict[str, Any] = {}  # the parts' own, at this precision

    def _scalar(self, x: sympy.Expr) -> list[Fixed]:
        return [Fixed.from_interval(numeric.enclose(x, self.prec), self.bits)]

    def scale(self) -> list[Fixed]:
        return self._scalar(self.model.scale)

    def sqrt_dk(self) -> list[Fixed]:
        return self._scalar(self.model.sqrt_dk)

    def scores(self) -> list[Fixed]:
        if self.model.qk is not None:
            return [narrow(b, self.bits) for row in self.model.qk.score_boxes(self.model, self.prec) for b in row]
        den, rows = self.model.score_integers
        return [Fixed.exact(Fraction(x, den), self.bits) for row in rows for x in row]

    def flat(self, rows: list[list[Fixed | None]]) -> list[Fixed]:
        """Rows of boxes at the working precision (or finer) as one list at ``bits`` (None: 0)."""
        zero = Fixed(0, 0, self.bits)
        return [zero if b is None else narrow(b, self.bits) for row in rows for b in row]

    @cached_property
    def _scale(self) -> Fixed:
        # the scale once per precision, shared by z and every exp
        return Fixed.from_interval(numeric.enclose(self.model.scale, self.prec + 8), self.prec)

    @cached_property
    def basis(self) -> Fixed | None:
        """The additive part's basis at the working precision (None without one)."""
        add = self.model.forms.add if self.model.parts else None
        return None if add is None else add.basis_box(self.prec)

    def form_box(self, form: Any) -> Fixed:
        """y of an exact form at the working precision."""
        return self.model.forms.box_with(form, self._scale, self.basis)

    def mapped_box(self, form: Any) -> Fixed:
        """z of an exact form (after the monotone maps) at the working precision."""
        return self.model.forms.mapped_box(self.form_box(form), self.prec)

    def _rows(self, shifted: bool) -> list[list[Fixed | None]]:
        """z (or z minus the row's maximum) of a head with parts, from the forms; None where masked."""
        model, forms = self.model, self.model.forms
        zero = Fixed(0, 0, self.prec)
        mapped = bool(model.stage_parts(MAP))
        out: list[list[Fixed | None]] = []
        for i in range(model.n_queries):
            top = {j for group in model._groups[i] for j in group if model.row_max[i] in group}
            row: list[Fixed | None] = []
            for j in range(model.n_keys):
                if not model.may_attend(i, j):
                    row.append(None)
                elif shifted and j in top:
                    row.append(zero)  # z − max z is exactly 0 for the maximum's group
                elif shifted and mapped:  # the mapped z minus the mapped maximum
                    row.append(sub(self.mapped_box(forms.form(i, j)), self.mapped_box(forms.form(i, model.row_max[i]))))
                else:
                    row.append(self.mapped_box(forms.shifted_form(i, j) if shifted else forms.form(i, j)))
            out.append(row)
        if shifted and model.denominator is not None:  # its logit may be the row's maximum
            out = model.denominator.shifted_rows(self, out)
        return out

    @cached_property
    def _z(self) -> list[list[Fixed | None]]:
        if self.model.parts:
            return self._rows(shifted=False)
        return self.model._z_fixed(self._scale, shifted=False)

    @cached_property
    def _z_shifted(self) -> list[list[Fixed | None]]:
        if self.model.parts:
            return self._rows(shifted=True)
        return self.model._z_fixed(self._scale, shifted=True)

    def scaled(self) -> list[Fixed]:
        return self.flat(self._z)

    def shifted(self) -> list[Fixed]:
        return self.flat(self._z_shifted)

    def _exps(self, shifted: bool) -> list[list[Fixed]]:
        if self.model.parts:  # each exp from its z's box
            zero = Fixed(0, 0, self.bits)
            rows = self._z_shifted if shifted else self._z
            return [[zero if z is None else numeric.exp_fixed(z, self.prec, self.bits) for z in row] for row in rows]
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

    def _sums(self, rows: list[list[Fixed]], terms: list[Fixed] | None) -> list[Fixed]:
        sums = [Fixed(sum(b.lo for b in row), sum(b.hi for b in row), self.bits) for row in rows]
        if terms is None:
            return sums
        return [Fixed(b.lo + s.lo, b.hi + s.hi, b.bits) for b, s in zip(sums, terms)]

    def terms(self, shifted: bool) -> list[Fixed] | None:
        """A denominator part's term of each row (None without one)."""
        part = self.model.denominator
        return None if part is None else part.term_boxes(self, shifted)

    def exp_sum(self) -> list[Fixed]:
        return self._sums(self._exp, self.terms(False))

    def exp_shifted_sum(self) -> list[Fixed]:
        return self._sums(self._exp_shifted, self.terms(True))

    @cached_property
    def _weights(self) -> list[list[Fixed]]:
        # from the exps of z minus the row maximum: none overflows or vanishes,
        # and the quotient is the same (a denominator part's term in each sum)
        bits, terms = self.bits, self.terms(True)
        rows = []
        for i, row in enumerate(self._exp_rows_shifted()):
            lo_sum = sum(b.lo for b in row) + (terms[i].lo if terms else 0)
            hi_sum = sum(b.hi for b in row) + (terms[i].hi if terms else 0)
            rows.append([Fixed((lo << bits) // hi_sum, -((-(hi << bits)) // lo_sum), bits) for lo, hi, _ in row])
        return rows

    def _exp_rows_shifted(self) -> Iterator[list[Fixed]]:
        """The rows of exp_shifted: those kept, or from LARGE scores on made ROWS_AT_ONCE rows at a time and
        let go (a million boxes at 1024 tokens: the weights need them one row at a time). A head with parts
        makes its exps and keeps them, as exp_shifted does."""
        small = self.model.n_queries * self.model.n_keys < LARGE  # then kept: exp_shifted may be asked next
        if small or "_exp_shifted" in self.__dict__ or self.model.parts:
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
        v_rows = [[(v.numerator, v.denominator) for v in values] for values in self.model.v_rows]
        for row in self._weights:
            for b, values in zip(row, v_rows):
                for p, q in values:  # [lo, hi] · p/q in integers, floor and ceiling (q > 0)
                    low, high = (b.lo * p, b.hi * p) if p >= 0 else (b.hi * p, b.lo * p)
                    out.append(Fixed(low // q, -(-high // q), self.bits))
        return out

    @cached_property
    def _output(self) -> list[list[Fixed]]:
        den, cols = self.model._v_integers
        return engine.weighted_sums(self._weights, cols, den, self.bits, self.model.numeric_engine)

    def output(self) -> list[Fixed]:
        return [b for row in self._output for b in row]
