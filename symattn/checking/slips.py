"""The classic slips of hand-worked attention, and which one a wrong claim shows.

A wrong claim is tested against each slip in ``SLIPS``, in this order: ``no_scaling``
(softmax of the unscaled scores), ``column_softmax`` (normalised down a column),
``no_exp`` (the scaled scores normalised without e^x) and ``transposed_V`` (A·Vᵀ).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

import sympy

from symattn.checking.report import Verdict
from symattn.exact import numeric
from symattn.exact.model import Model
from symattn.input.claims import Claim

SLIPS = ("no_scaling", "column_softmax", "no_exp", "transposed_V")


class Slips:
    """The classic slips of one model: what each gives, and which one a wrong claim shows."""

    def __init__(self, model: Model, tables: dict, stable: bool = False):
        self.model = model
        self.tables = tables  # a cache shared with the checker; the slips' roundings under "slips"
        self.stable = stable  # exps are e^(z − max)

    def diagnose(self, quantity: str, i: int, j: int, c: Fraction, d: int | None) -> str | None:
        """The first classic slip that gives the claimed digits exactly, if any (unmasked specs only).

        A claim of fewer than three significant digits (0.40) could match a slip by chance: none is named.
        """
        if d is None or self.model.allowed is not None or abs(c) * Fraction(10) ** d < 100:
            return None
        for slip in SLIPS:
            value = self.value(slip, quantity, i, j)
            if value is not None and Fraction(numeric.round_expr(value, d, self.tables.setdefault("slips", {}))) == c:
                return slip
        return None

    def value(self, slip: str, quantity: str, i: int, j: int) -> sympy.Expr | None:
        """What a quantity's entry is when computed with one classic slip, or None where it does not apply."""
        m = self.model
        S, V, n, keys = m.scores, m.V, m.n_queries, m.n_keys
        if slip == "no_scaling":
            if m.scale == 1 or quantity not in ("scaled", "exp", "weights", "output"):
                return None
            if quantity == "scaled":
                return S[i, j]
            if quantity == "exp":  # e^S, or with the stable softmax e^(S − the row's largest S)
                return sympy.exp(S[i, j] - (S[i, m.row_max[i]] if self.stable else 0))
            weights = [sympy.exp(S[i, k]) / sympy.Add(*[sympy.exp(S[i, r]) for r in range(keys)]) for k in range(keys)]
            return weights[j] if quantity == "weights" else sympy.Add(*[w * V[k, j] for k, w in enumerate(weights)])
        if slip == "column_softmax" and quantity == "weights" and n > 1:
            return m.exp[i, j] / sympy.Add(*[m.exp[r, j] for r in range(n)])
        if slip == "no_exp" and quantity == "weights":
            total = sympy.Add(*[m.scaled[i, k] for k in range(keys)])
            return None if total == 0 else m.scaled[i, j] / total
        if slip == "transposed_V" and quantity == "output" and V.rows == V.cols:
            return sympy.Add(*[m.weights[i, k] * V[j, k] for k in range(keys)])
        return None


def diagnose_rows(
    results: tuple[Verdict, ...],
    slips_of: Callable[[Claim], Slips | None],
    position: Callable[[Claim], tuple[int, int]],
) -> tuple[Verdict, ...]:
    """Short claims (fewer than three significant digits) named after all, when a whole row shows the slip.

    One 0.4 may match a slip by chance; a row of two or more wrong claims of one quantity (of one head)
    that each match the same slip at their own decimals (scaled = the scores, say) is the slip.
    """
    rows: dict[tuple[int | None, str, int], list[int]] = {}
    for k, v in enumerate(results):
        slips = slips_of(v.claim)
        if (
            slips is not None
            and slips.model.allowed is None
            and v.verdict == "wrong"
            and v.diagnosis is None
            and v.claim.number.decimals is not None
            and not v.claim.number.is_infinite
            and v.claim.quantity != "percent"
        ):
            rows.setdefault((v.claim.head, v.claim.quantity, position(v.claim)[0]), []).append(k)
    out = list(results)
    for (_, quantity, i), members in rows.items():
        if len(members) < 2:
            continue
        slips = slips_of(results[members[0]].claim)
        assert slips is not None  # grouped only where there are slips
        tables = slips.tables.setdefault("slips", {})
        for slip in SLIPS:
            values = [slips.value(slip, quantity, i, position(results[k].claim)[1]) for k in members]
            if all(
                x is not None
                and Fraction(numeric.round_expr(x, _decimals(results[k].claim), tables))
                == results[k].claim.number.value
                for x, k in zip(values, members)
            ):
                for k in members:
                    out[k] = replace(out[k], diagnosis=slip)
                break
    return tuple(out)


def _decimals(claim: Claim) -> int:
    d = claim.number.decimals
    assert d is not None  # only claims with decimals are grouped in rows
    return d


__all__ = ["SLIPS", "Slips", "diagnose_rows"]
