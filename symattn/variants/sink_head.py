"""One head's attention sink, exactly (the part is :mod:`symattn.variants.sinks`): one sink logit s in every
softmax's denominator,

    α_ij = e^{z_ij} / (e^{s} + Σ_k e^{z_ik}),

so a row's weights sum to 1 − (the sink's share e^{s} / (e^{s} + Σ_k e^{z_ik})). The stable softmax
subtracts M_i = max(max_k z_ik, s) from every exponent, the sink's included (ties: the sink).

Exactness, for algebraic z and rational s (Lindemann–Weierstrass): the denominator is rational only
when every z and s are 0; a weight (and the share) only when every z of the row equals s, then
1/(n + 1); an output only when the mean of V over each group of equal exponents, the sink counted as a
key with V = 0 in its group, is the same. Where z is not known to be rational (a monotone map's, a
Q/K part's), the same values are rational and the others are not known to be (None). Whether the sink
is the row's maximum is decided exactly where z is rational; a map that keeps z strictly inside
(−b, b) puts a sink at or past ±b above (below) every z, however close a saturated z comes to b
(within e^−10⁶ for b = 10^−6: no box at any precision separates them); otherwise the enclosures of z
decide. A z that is irrational differs from the rational s, so they separate; a z merely not known to
be rational (c·tanh(y/c) = s needs e^{2y/c} algebraic, which Lindemann–Weierstrass does not rule out
for a transcendental y) might equal s, and should the boxes never separate them the model says so
(EvaluationError) instead of guessing.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact import numeric
from symattn.exact.numeric import Fixed
from symattn.input.errors import EvaluationError
from symattn.input.limits import PRECISION_BITS
from symattn.input.records import record
from symattn.variants.base import DENOMINATOR, MAP, HeadPart, Rows
from symattn.variants.forms import sub


@record
class Sink(HeadPart):
    """A head's sink logit s: a term e^s in every softmax denominator, with no value of its own."""

    logit: Fraction
    stage: ClassVar[int] = DENOMINATOR
    quantities: ClassVar[tuple[str, ...]] = ("sink_exp", "sink_exp_shifted", "sink_share")  # one number per query
    computed: ClassVar[tuple[str, ...]] = ("sink_exp", "sink_share")
    columns: ClassVar[tuple[str, ...]] = quantities
    gradients: ClassVar[tuple[str, ...]] = ("dsinks",)
    large: ClassVar[tuple[str, ...]] = ("sink_exp",)
    exposes: ClassVar[tuple[str, ...]] = ("sink", "sink_wins", "sink_exp", "sink_exp_shifted", "sink_share")

    def expose(self, model: Any, name: str) -> Any:
        if name == "sink":
            return self.logit
        if name == "sink_wins":
            return self.wins(model)
        return self.exact(model, name)

    @cached_property
    def _s(self) -> sympy.Expr:
        return sympy.Rational(self.logit.numerator, self.logit.denominator)

    def wins(self, model: Any) -> tuple[bool, ...]:
        """For each row, whether the sink's logit is the largest exponent (ties: the sink)."""
        if "sink_wins" not in model.memo:
            model.memo["sink_wins"] = self._wins(model)
        return model.memo["sink_wins"]

    def _wins(self, model: Any) -> tuple[bool, ...]:
        forms, s = model.forms, self.logit
        bounds = [part.bound for part in model.stage_parts(MAP)]
        out = []
        for i, top in enumerate(model.row_max):
            value = forms.z_value(i, top)
            if value is not None:
                out.append(s >= value)
                continue
            if bounds and abs(s) >= min(bounds):  # every z lies strictly inside (−b, b)
                out.append(s > 0)
                continue
            bits = 64
            while True:  # z is irrational here, so it differs from the rational s and the boxes separate
                box = forms.z_box(i, top, bits)
                scaled = s * (1 << box.bits)
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

    def shift(self, model: Any, top: list[sympy.Expr]) -> tuple[sympy.Expr, ...]:
        """What the stable softmax subtracts from each row: s where the sink is the largest exponent."""
        return tuple(self._s if win else m for m, win in zip(top, self.wins(model)))

    def term(self, model: Any, i: int, stable: bool) -> sympy.Expr:
        """The sink's term in row i's denominator: e^s, or e^(s − M) for the stable softmax."""
        return self.exact(model, "sink_exp_shifted")[i, 0] if stable else sympy.exp(self._s)

    def exact(self, model: Any, quantity: str) -> ImmutableMatrix:
        key = "sink:" + quantity
        if key not in model.memo:
            n = model.n_queries
            if quantity == "sink_exp":
                found = ImmutableMatrix([[sympy.exp(self._s)] for _ in range(n)])
            elif quantity == "sink_exp_shifted":
                found = ImmutableMatrix([[sympy.exp(self._s - m)] for m in model.shift])
            else:
                sums = model.exp_sum
                found = ImmutableMatrix([[sympy.exp(self._s) / sums[i, 0]] for i in range(n)])
            model.memo[key] = found
        return model.memo[key]

    # --- which values are rational ------------------------------------------------

    def _flat_at_sink(self, model: Any, i: int) -> bool:
        """Every z the row may attend to equals s (then every weight and the share are 1/(n + 1))."""
        return model.row_is_flat(i) and model.forms.z_value(i, model.row_max[i]) == self.logit

    def rationals(self, model: Any, quantity: str) -> Rows | None:
        n, m, ok = model.n_queries, model.n_keys, model.may_attend
        forms, s, wins = model.forms, self.logit, self.wins(model)
        if quantity in ("shifted", "exp_shifted"):
            rows = []
            for i in range(n):
                top = None if wins[i] else forms.z_value(i, model.row_max[i])
                shift = s if wins[i] else top
                group = next(g for g in model.groups[i] if model.row_max[i] in g)
                row: list[Fraction | None] = []
                for j in range(m):
                    z = forms.z_value(i, j)
                    if not ok(i, j):
                        row.append(None if quantity == "shifted" else Fraction(0))
                        continue
                    if not wins[i] and j in group:
                        d: Fraction | None = Fraction(0)
                    else:
                        d = z - shift if z is not None and shift is not None else None
                    row.append(d if quantity == "shifted" else (Fraction(1) if d == 0 else None))
                rows.append(tuple(row))
            return tuple(rows)
        if quantity in ("sink_exp", "sink_exp_shifted"):
            if quantity == "sink_exp":
                return tuple((Fraction(1) if s == 0 else None,) for _ in range(n))
            return tuple(
                (Fraction(1) if wins[i] or forms.z_value(i, model.row_max[i]) == s else None,) for i in range(n)
            )
        if quantity in ("exp_sum", "exp_shifted_sum"):
            exps, terms = model.rationals(quantity[: -len("_sum")]), model.rationals("sink_" + quantity[:-4])
            return tuple(
                (
                    Fraction(model.allowed_count(i) + 1)
                    if terms[i][0] == 1 and all(e == 1 for j, e in enumerate(row) if ok(i, j))
                    else None,
                )
                for i, row in enumerate(exps)
            )
        if quantity in ("weights", "sink_share"):
            return tuple(
                tuple(
                    Fraction(0)
                    if quantity == "weights" and not ok(i, j)
                    else Fraction(1, model.allowed_count(i) + 1)
                    if self._flat_at_sink(model, i)
                    else None
                    for j in range(m if quantity == "weights" else 1)
                )
                for i in range(n)
            )
        if quantity == "products":
            return model.products_of(model.rationals("weights"))
        if quantity == "output":
            return tuple(tuple(self._output(model, i, k) for k in range(model.v.shape[1])) for i in range(n))
        return None

    def _output(self, model: Any, i: int, k: int) -> Fraction | None:
        # the sink is a key with V = 0, in the group of the z equal to s (or a group of its own)
        den, columns = model.v_columns
        column = columns[k]
        members = model.groups[i]
        groups = [[sum(column[j] for j in g), len(g)] for g in members]
        for g, group in zip(groups, members):
            if model.forms.z_value(i, group[0]) == self.logit:
                g[1] += 1
                break
        else:
            groups.append([0, 1])
        first, count = groups[0]
        if any(total * count != first * size for total, size in groups[1:]):
            return None
        return Fraction(first, count * den)

    @property
    def headroom(self) -> int:
        """Bits a weight e^(z − s) may need below the point, beyond the scores'."""
        return 3 * int(abs(self.logit)) + 8

    def exp_bits(self, model: Any) -> int:
        return int(self.logit * 3 // 2) + 8

    # --- enclosures --------------------------------------------------------------------

    def _box(self, boxes: Any) -> Fixed:
        return Fixed.exact(self.logit, boxes.prec)

    def shifted_rows(self, boxes: Any, rows: list[list[Fixed | None]]) -> list[list[Fixed | None]]:
        """z − s for every key of a row whose maximum is the sink (exactly 0 where z = s)."""
        model, zero = boxes.model, Fixed(0, 0, boxes.prec)
        z, s = boxes._z, self._box(boxes)
        for i, win in enumerate(self.wins(model)):
            if win:
                rows[i] = [
                    None if b is None else zero if model.forms.z_value(i, j) == self.logit else sub(b, s)
                    for j, b in enumerate(z[i])
                ]
        return rows

    def term_boxes(self, boxes: Any, shifted: bool) -> list[Fixed]:
        key = "sink:shifted" if shifted else "sink:exp"
        if key not in boxes.cache:
            boxes.cache[key] = self._shifted_terms(boxes) if shifted else self._terms(boxes)
        return boxes.cache[key]

    def _terms(self, boxes: Any) -> list[Fixed]:
        return [numeric.exp_fixed(self._box(boxes), boxes.prec, boxes.bits)] * boxes.model.n_queries

    def _shifted_terms(self, boxes: Any) -> list[Fixed]:
        model, one = boxes.model, Fixed(1 << boxes.bits, 1 << boxes.bits, boxes.bits)
        out = []
        for i, win in enumerate(self.wins(model)):
            top = boxes._z[i][model.row_max[i]]
            if win or model.forms.z_value(i, model.row_max[i]) == self.logit:
                out.append(one)
            else:
                assert top is not None  # the row maximum is a key the row may attend to
                out.append(numeric.exp_fixed(sub(self._box(boxes), top), boxes.prec, boxes.bits))
        return out

    def boxes(self, boxes: Any, quantity: str) -> list[Fixed]:
        if quantity != "sink_share":
            return self.term_boxes(boxes, quantity == "sink_exp_shifted")
        bits, out = boxes.bits, []
        for row, term in zip(boxes._exp_shifted, self.term_boxes(boxes, True)):
            lo_sum, hi_sum = sum(b.lo for b in row) + term.lo, sum(b.hi for b in row) + term.hi
            out.append(Fixed((term.lo << bits) // hi_sum, -((-(term.hi << bits)) // lo_sum), bits))
        return out

    # --- the numbers a document shows ---------------------------------------------------

    def exact_figures(self, model: Any, fig: Any, decimals: Any, stable: bool, notation: str) -> Any:
        """The exact figures with the sink: its e^s (or e^(s − M)) and share per row, and s as the row's
        maximum where the sink is the largest exponent."""
        from dataclasses import replace

        from symattn.exact.rounding import from_model

        row_max = fig.row_max
        if stable and row_max is not None:
            row_max = self.shown_shift(model, row_max, decimals.scaled, notation)
        exps = from_model(model, "sink_exp_shifted" if stable else "sink_exp", decimals.exp, notation)
        shares = from_model(model, "sink_share", decimals.weights, notation)
        return replace(fig, row_max=row_max, denominator=tuple(r[0] for r in exps), share=tuple(r[0] for r in shares))

    def shown_shift(self, model: Any, row_max: Any, decimals: int, notation: str) -> Any:
        """The maximum subtracted from each row: s where the sink is the largest exponent."""
        from symattn.exact.rounding import exact_or_rounded

        s = exact_or_rounded([[self.logit]], decimals, notation)[0][0]
        return tuple(s if win else m for m, win in zip(row_max, self.wins(model)))

    def terms_by_hand(self, model: Any, row_max: Any, decimals: int, notation: str) -> Any:
        """By hand, each row's e^s (stable: e^(s − shown maximum)), rounded like every exp."""
        from symattn.exact.rounding import exact_or_rounded, exp_of

        shifts = [Fraction(0)] * model.n_queries if row_max is None else [m.fraction for m in row_max]
        return tuple(
            exp_of(exact_or_rounded([[self.logit - m]], 64, "fixed")[0][0], decimals, notation) for m in shifts
        )

    # --- a claimant's numbers carried forward, and a wrong claim's operands ------------------

    def term_name(self, stable: bool) -> str:
        """The quantity of its term in the document's softmax (e^(s − M) with the stable one)."""
        return "sink_exp_shifted" if stable else "sink_exp"

    def implied(self, chain: Any, model: Any, quantity: str, row: int, col: int | None, head: int | None) -> Any:
        if quantity == "sink_share":  # the sink's e^s over the claimant's (or the exact) sum
            (total, b), (term, c) = chain.implied("exp_sum", row, None, head), chain.denominator_term(row, head)
            return term / total, b or c
        if quantity == "dsinks":  # −Σ_i share_i · r_i, from the claimant's shares and row sums
            pairs = [
                (chain.implied("sink_share", i, None, head), chain.implied("rowsum", i, None, head))
                for i in range(model.n_queries)
            ]
            total, carried = chain.dot(pairs)
            return -total, carried
        return None

    def explained(self, explainer: Any, model: Any, quantity: str, row: int | None, head: int | None) -> Any:
        sig = explainer.sig
        if quantity == "dsinks":  # Σ_i share_i × (−r_i), one number per head
            return tuple(
                (sig("sink_share", i, 0, head), negative(sig("rowsum", i, 0, head))) for i in range(model.n_queries)
            )
        if quantity == "sink_share":  # e^s over the row's sum
            return (sig(self.term_name(explainer.layout.stable), row, 0, head), sig("exp_sum", row, 0, head))
        return None

    # --- the backward pass -------------------------------------------------------------

    def gradient(self, model: Any) -> Shares:
        """Each row's sink share e^s / (e^s + Σ_k e^{z_ik}), for ds."""
        share = self.exact(model, "sink_share")
        return Shares(tuple(share[i, 0] for i in range(model.n_queries)))


@record
class Shares:
    """The sink logit's gradient: ds = −Σ_i share_i · rowsum_i, one number per head (the sink has no value,
    so its column of dA is 0 and dZ is the softmax's as without it)."""

    shares: tuple[sympy.Expr, ...]  # per row (SymPy)
    stage: ClassVar[int] = DENOMINATOR
    names: ClassVar[tuple[str, ...]] = ("dsinks",)
    forms: ClassVar[bool] = True

    @staticmethod
    def layer(alg: Any, rules: list[Shares], per_head: list[dict], out: dict, hook: Any, split: bool) -> None:
        """dsinks of every head, from its shares and its rowsum (``dot``)."""
        from symattn.exact.gradients import total

        ds = [
            alg.zero - total(alg, (alg.real(s) * r[0] for s, r in zip(rule.shares, g["dot"])))
            for rule, g in zip(rules, per_head)
        ]
        out["dsinks"] = hook("dsinks", [ds])
        if split:  # each head's own, for check's claims on hN.dsinks
            out.update({f"dsinks@{h}": hook(f"dsinks@{h}", [[x]]) for h, x in enumerate(out["dsinks"][0])})


def negative(x: Any) -> Any:
    from symattn.exact.num import Num

    return Num(-x.value, x.exact, x.scientific)


__all__ = ["Shares", "Sink", "negative"]
