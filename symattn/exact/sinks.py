"""Attention sinks (gpt-oss): one sink logit s per head in every softmax's denominator,

    α_ij = e^{z_ij} / (e^{s} + Σ_k e^{z_ik}),

so a row's weights sum to 1 − (the sink's share e^{s} / (e^{s} + Σ_k e^{z_ik})). The stable softmax
subtracts M_i = max(max_k z_ik, s) from every exponent, the sink's included.

Exactness, for algebraic z and rational s (Lindemann–Weierstrass): the denominator is rational only
when every z and s are 0; a weight (and the share) only when every z of the row equals s, then
1/(n + 1); an output only when the mean of V over each group of equal exponents, the sink counted as a
key with V = 0 in its group, is the same. With a softcap the same values are rational, and the others
are not known to be (None).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cached_property

import sympy
from sympy import ImmutableMatrix

from symattn.exact import numeric, rounding
from symattn.exact.model import Model
from symattn.exact.numeric import Fixed
from symattn.exact.rounding import Figures, Num, NumRow
from symattn.exact.score_variants import BiasedBoxes, BiasedModel, softcap_fixed, sub
from symattn.input.errors import EvaluationError
from symattn.input.limits import PRECISION_BITS
from symattn.input.spec import Decimals

SINK_QUANTITIES = ("sink_exp", "sink_exp_shifted", "sink_share")  # one number per query


@dataclass(frozen=True, eq=False)
class SinkModel(BiasedModel):
    """A head with a sink logit (and any ALiBi bias or softcap)."""

    sink: Fraction = Fraction(0)

    @cached_property
    def _s(self) -> sympy.Expr:
        return sympy.Rational(self.sink.numerator, self.sink.denominator)

    def extra_quantities(self) -> tuple[str, ...]:
        return super().extra_quantities() + ("sink_exp", "sink_share")

    def _z_value(self, i: int, j: int) -> Fraction | None:
        return self._capped_value(self._form(i, j), i, j)

    def _z_box(self, i: int, j: int, bits: int) -> Fixed:
        box = self._form_box(self._form(i, j), bits)
        return box if self.softcap is None else softcap_fixed(box, self.softcap, bits)

    @cached_property
    def sink_wins(self) -> tuple[bool, ...]:
        """For each row, whether the sink's logit is the largest exponent (ties: the sink)."""
        out = []
        cap = self.softcap
        for i, top in enumerate(self.row_max):
            value = self._z_value(i, top)
            if value is not None:
                out.append(self.sink >= value)
                continue
            if cap is not None and abs(self.sink) >= cap:
                # c·tanh(y/c) lies strictly inside (−c, c): a sink at or past ±c is above (below) every z, however
                # close a saturated z comes to c (within e^−10⁶ for c = 10^−6: no box at any precision separates them)
                out.append(self.sink > 0)
                continue
            bits = 64
            while True:  # z is irrational here, so it differs from the rational s and the boxes separate
                box = self._z_box(i, top, bits)
                scaled = self.sink * (1 << box.bits)
                if box.hi < scaled:
                    out.append(True)
                    break
                if box.lo > scaled:
                    out.append(False)
                    break
                bits *= 2
                if bits > PRECISION_BITS:
                    raise EvaluationError("cannot compare a score with the sink")
        return tuple(out)

    # --- closed forms -----------------------------------------------------------

    @cached_property
    def _shift(self) -> tuple[sympy.Expr, ...]:
        Z = self.scaled
        return tuple(self._s if win else Z[i, self.row_max[i]] for i, win in enumerate(self.sink_wins))

    @cached_property
    def sink_exp(self) -> ImmutableMatrix:
        return ImmutableMatrix([[sympy.exp(self._s)] for _ in range(self.n_queries)])

    @cached_property
    def sink_exp_shifted(self) -> ImmutableMatrix:
        return ImmutableMatrix([[sympy.exp(self._s - m)] for m in self._shift])

    @cached_property
    def exp_sum(self) -> ImmutableMatrix:
        E = self.exp
        return ImmutableMatrix([[sympy.Add(*E.row(i), sympy.exp(self._s))] for i in range(E.rows)])

    @cached_property
    def exp_shifted_sum(self) -> ImmutableMatrix:
        E, S = self.exp_shifted, self.sink_exp_shifted
        return ImmutableMatrix([[sympy.Add(*E.row(i), S[i, 0])] for i in range(E.rows)])

    @cached_property
    def sink_share(self) -> ImmutableMatrix:
        sums = self.exp_sum
        return ImmutableMatrix([[sympy.exp(self._s) / sums[i, 0]] for i in range(self.n_queries)])

    def exact(self, quantity: str) -> ImmutableMatrix:
        return getattr(self, quantity) if quantity in SINK_QUANTITIES else super().exact(quantity)

    def sink_term(self, i: int, stable: bool) -> sympy.Expr:
        return self.sink_exp_shifted[i, 0] if stable else sympy.exp(self._s)

    # --- which values are rational ------------------------------------------------

    def _flat_at_sink(self, i: int) -> bool:
        """Every score the row may attend to equals s (then every weight and the share are 1/(n + 1))."""
        return self._row_is_flat(i) and self._z_value(i, self.row_max[i]) == self.sink

    def _rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        n, m, ok = self.n_queries, self.n_keys, self.may_attend
        if quantity in ("shifted", "exp_shifted"):
            rows = []
            for i in range(n):
                top = None if self.sink_wins[i] else self._z_value(i, self.row_max[i])
                shift = self.sink if self.sink_wins[i] else top
                group = next(g for g in self._groups[i] if self.row_max[i] in g)
                row: list[Fraction | None] = []
                for j in range(m):
                    z = self._z_value(i, j)
                    if not ok(i, j):
                        row.append(None if quantity == "shifted" else Fraction(0))
                        continue
                    if not self.sink_wins[i] and j in group:
                        d: Fraction | None = Fraction(0)
                    else:
                        d = z - shift if z is not None and shift is not None else None
                    row.append(d if quantity == "shifted" else (Fraction(1) if d == 0 else None))
                rows.append(tuple(row))
            return tuple(rows)
        if quantity in ("sink_exp", "sink_exp_shifted"):
            out = []
            for i in range(n):
                if quantity == "sink_exp":
                    out.append((Fraction(1) if self.sink == 0 else None,))
                else:
                    top = self._z_value(i, self.row_max[i])
                    out.append((Fraction(1) if self.sink_wins[i] or top == self.sink else None,))
            return tuple(out)
        if quantity in ("exp_sum", "exp_shifted_sum"):
            exps, sinks = self.rationals(quantity[: -len("_sum")]), self.rationals("sink_" + quantity[:-4])
            return tuple(
                (
                    Fraction(self._allowed_count(i) + 1)
                    if sinks[i][0] == 1 and all(e == 1 for j, e in enumerate(row) if ok(i, j))
                    else None,
                )
                for i, row in enumerate(exps)
            )
        if quantity in ("weights", "sink_share"):
            return tuple(
                tuple(
                    Fraction(0)
                    if quantity == "weights" and not ok(i, j)
                    else Fraction(1, self._allowed_count(i) + 1)
                    if self._flat_at_sink(i)
                    else None
                    for j in range(m if quantity == "weights" else 1)
                )
                for i in range(n)
            )
        if quantity == "products":
            weights = self.rationals("weights")
            return tuple(
                tuple(self._product(weights[i][j], v) for v in self.v_rows[j]) for i in range(n) for j in range(m)
            )
        return super()._rationals(quantity)

    def _rational_output(self, i: int, k: int) -> Fraction | None:
        # the sink is a key with V = 0, in the group of the scores equal to s (or a group of its own)
        den, columns = self._v_integers
        column = columns[k]
        groups = [[sum(column[j] for j in g), len(g)] for g in self._groups[i]]
        for g, members in zip(groups, self._groups[i]):
            if self._z_value(i, members[0]) == self.sink:
                g[1] += 1
                break
        else:
            groups.append([0, 1])
        first, count = groups[0]
        if any(total * count != first * size for total, size in groups[1:]):
            return None
        return Fraction(first, count * den)

    @property
    def _headroom_bits(self) -> int:
        return super()._headroom_bits + 3 * int(abs(self.sink)) + 8

    @cached_property
    def _exp_bits(self) -> int:
        return max(super()._exp_bits, int(self.sink * 3 // 2) + 8)

    def _magnitude_bits(self, quantity: str) -> int:
        return self._exp_bits if quantity in ("exp", "exp_sum", "sink_exp") else 0

    def _new_boxes(self, bits: int) -> SinkBoxes:
        return SinkBoxes(self, bits)


def sink_shares(model: Model) -> tuple[sympy.Expr, ...]:
    """Each row's sink share e^s / (e^s + Σ_k e^{z_ik}), for the backward pass (dS_sink)."""
    assert isinstance(model, SinkModel)  # asked for only with sinks
    return tuple(model.sink_share[i, 0] for i in range(model.n_queries))


class SinkBoxes(BiasedBoxes):
    """Enclosures with the sink's term in every denominator."""

    model: SinkModel

    @cached_property
    def _sink_box(self) -> Fixed:
        return Fixed.exact(self.model.sink, self.prec)

    def _rows(self, shifted: bool) -> list[list[Fixed | None]]:
        rows = super()._rows(shifted)
        if not shifted:
            return rows
        model, zero = self.model, Fixed(0, 0, self.prec)
        z = self._z
        for i, win in enumerate(model.sink_wins):
            if win:  # z − s for every key (exactly 0 where z = s)
                rows[i] = [
                    None if b is None else zero if model._z_value(i, j) == model.sink else sub(b, self._sink_box)
                    for j, b in enumerate(z[i])
                ]
        return rows

    @cached_property
    def _sink_exps(self) -> list[Fixed]:
        box = numeric.exp_fixed(self._sink_box, self.prec, self.bits)
        return [box] * self.model.n_queries

    @cached_property
    def _sink_exps_shifted(self) -> list[Fixed]:
        model, one = self.model, Fixed(1 << self.bits, 1 << self.bits, self.bits)
        out = []
        for i, win in enumerate(model.sink_wins):
            top = self._z[i][model.row_max[i]]
            if win or model._z_value(i, model.row_max[i]) == model.sink:
                out.append(one)
            else:
                assert top is not None  # the row maximum is a key the row may attend to
                out.append(numeric.exp_fixed(sub(self._sink_box, top), self.prec, self.bits))
        return out

    def sink_exp(self) -> list[Fixed]:
        return self._sink_exps

    def sink_exp_shifted(self) -> list[Fixed]:
        return self._sink_exps_shifted

    def exp_sum(self) -> list[Fixed]:
        return [Fixed(b.lo + s.lo, b.hi + s.hi, b.bits) for b, s in zip(super().exp_sum(), self._sink_exps)]

    def exp_shifted_sum(self) -> list[Fixed]:
        sums = super().exp_shifted_sum()
        return [Fixed(b.lo + s.lo, b.hi + s.hi, b.bits) for b, s in zip(sums, self._sink_exps_shifted)]

    @cached_property
    def _weights(self) -> list[list[Fixed]]:
        bits, rows = self.bits, []
        for row, sink in zip(self._exp_shifted, self._sink_exps_shifted):
            lo_sum, hi_sum = sum(b.lo for b in row) + sink.lo, sum(b.hi for b in row) + sink.hi
            rows.append([Fixed((lo << bits) // hi_sum, -((-(hi << bits)) // lo_sum), bits) for lo, hi, _ in row])
        return rows

    def sink_share(self) -> list[Fixed]:
        bits, out = self.bits, []
        for row, sink in zip(self._exp_shifted, self._sink_exps_shifted):
            lo_sum, hi_sum = sum(b.lo for b in row) + sink.lo, sum(b.hi for b in row) + sink.hi
            out.append(Fixed((sink.lo << bits) // hi_sum, -((-(sink.hi << bits)) // lo_sum), bits))
        return out


# --- the numbers a document shows ---------------------------------------------------


def _logit(model: SinkModel, decimals: int, notation: str) -> Num:
    return rounding.exact_or_rounded([[model.sink]], decimals, notation)[0][0]


def sink_figures(model: Model, fig: Figures, decimals: Decimals, stable: bool, notation: str) -> Figures:
    """The exact figures with the sink: its e^s (or e^(s − M)) and share per row, and s as the row's
    maximum where the sink is the largest exponent."""
    if not isinstance(model, SinkModel):
        return fig
    row_max = fig.row_max
    if stable and row_max is not None:
        row_max = sink_shift(model, row_max, decimals.scaled, notation)
    exps = rounding._from_model(model, "sink_exp_shifted" if stable else "sink_exp", decimals.exp, notation)
    shares = rounding._from_model(model, "sink_share", decimals.weights, notation)
    return replace(fig, row_max=row_max, sink_exp=tuple(r[0] for r in exps), sink_share=tuple(r[0] for r in shares))


def sink_shift(model: Model, row_max: NumRow, decimals: int, notation: str) -> NumRow:
    """The maximum subtracted from each row: s where the sink is the largest exponent."""
    if not isinstance(model, SinkModel):
        return row_max
    s = _logit(model, decimals, notation)
    return tuple(s if win else m for m, win in zip(row_max, model.sink_wins))


def sink_exps_by_hand(model: Model, row_max: NumRow | None, decimals: int, notation: str) -> NumRow | None:
    """By hand, each row's e^s (stable: e^(s − shown maximum)), rounded like every exp."""
    if not isinstance(model, SinkModel):
        return None
    s = model.sink
    shifts = [Fraction(0)] * model.n_queries if row_max is None else [m.fraction for m in row_max]
    return tuple(
        rounding._exp_of(rounding.exact_or_rounded([[s - m]], 64, "fixed")[0][0], decimals, notation) for m in shifts
    )
