"""The numbers an LMS quiz asks for: each asked number's right value, its tolerance, and what the classic
slips give instead, all decided from the exact model (never from floats).

A gap's value is the exact value rounded half-up to the decimals the sheet asks for (a quantity the sheet
does not round, the scores, is its own digits); its tolerance is half a unit of the last decimal,
so that an LMS accepts exactly the answers that round to the value. Each slip (:data:`SLIPS`) is the
classic slip's value at the same decimals, kept only where it differs from the right value and from the
slips before it; ``truncated`` is the value cut off after the asked decimals instead of rounded. An MLA
sheet's gaps get MLA's own slips too (:mod:`symattn.classroom.mla_slips`), read from the exact model of the
slipped table.
An entry that a mask makes −∞ is no gap (:func:`masked`).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from symattn.checking.verdicts import ASKED_BY
from symattn.classroom.mla_slips import SLIPS as MLA_SLIPS
from symattn.classroom.mla_slips import slipped_models, source
from symattn.classroom.sheets import answer_values, asked_decimals
from symattn.classroom.variants import Asked, Variant
from symattn.input.decimals import round_half_up
from symattn.input.errors import SpecError
from symattn.input.records import record

# the classic slips that ``check`` names (checking.slips.SLIPS), MLA's, then truncation instead of rounding
SLIPS = ("no_scaling", "column_softmax", "no_exp", "transposed_V", *MLA_SLIPS, "truncated")


@record
class Slip:
    name: str  # one of SLIPS
    value: Decimal


@record
class Gap:
    """One asked number as an LMS asks for it."""

    asked: Asked
    value: Decimal  # the right answer, at its decimals
    decimals: int
    slips: tuple[Slip, ...]
    rounded: bool = True  # False: asked as its own digits (the scores, MLA's latent and q̃)

    @property
    def tolerance(self) -> Decimal:
        """Half a unit of the last asked decimal: 0.0005 for three decimals."""
        return Decimal(5).scaleb(-self.decimals - 1)

    def accepts(self, answer: Fraction) -> bool:
        """The LMS's own right/wrong: within the tolerance of the value, ends included (as Moodle and Canvas do)."""
        return abs(answer - Fraction(self.value)) <= Fraction(self.tolerance)


def _place(a: Asked) -> tuple[int, int]:
    """Where an asked number stands in the model's table of its quantity (scalars and row sums: column 0)."""
    return (a.row or 0, a.col or 0)


def gaps(v: Variant, with_slips: bool = True) -> tuple[Gap, ...]:
    """Every asked number of a variant as a gap, in the order of the sheet's boxes (without the slips'
    values unless ``with_slips``: grading needs only the right answers)."""
    from symattn.checking.slips import Slips
    from symattn.exact import numeric
    from symattn.exact.heads import build_model

    model = build_model(v.spec)
    places = asked_decimals(v)
    slips = Slips(model, {}, stable=v.spec.softmax == "stable")
    caches: dict[int, dict] = {}
    mla = slipped_models(v) if with_slips else ()
    mla_caches: dict[str, dict[int, dict]] = {name: {} for name, *_ in mla}
    out = []
    for a, num in zip(v.asked, answer_values(v)):
        if num.is_infinite:  # masked: given, not asked (see masked)
            continue
        if num.scientific:  # a draw that suits hand work does not show these; an LMS gap cannot hold them
            raise SpecError(v.spec.source, a.key, f"an LMS gap needs a number in fixed notation, got {num.value}")
        field = ASKED_BY[a.quantity]
        rounded = field in places
        if rounded:  # asked at these decimals (an exact value is written with them too)
            decimals = places[field]
            value = num.value if not num.exact else round_half_up(Fraction(num.value), decimals)
        else:  # not rounded (the scores): its own digits
            value = num.value
            exponent = value.as_tuple().exponent
            assert isinstance(exponent, int)  # a finite number (checked above)
            decimals = max(0, -exponent)
        found: list[Slip] = []
        seen = {value}
        i, j = _place(a)
        for name in SLIPS if with_slips else ():
            shown: Decimal | None
            if name == "truncated":
                shown = _truncated(source(v.spec, model, a.quantity), a.quantity, i, j, value, decimals)
            elif name in MLA_SLIPS:
                shown = _slipped(mla, mla_caches, name, a.quantity, i, j, decimals, rounded)
            elif model.allowed is not None:  # the slips are those of unmasked attention (as check names them)
                shown = None
            else:
                expr = slips.value(name, a.quantity, i, j)
                shown = None if expr is None else numeric.round_expr(expr, decimals, caches)
            if shown is not None and shown not in seen:
                seen.add(shown)
                found.append(Slip(name, shown))
        out.append(Gap(a, value, decimals, tuple(found), rounded))
    return tuple(out)


def _slipped(mla, caches, name: str, quantity: str, i: int, j: int, decimals: int, rounded: bool) -> Decimal | None:
    """An MLA slip's value of one entry: rounded as the gap is, or (a quantity asked as its own digits, which
    a slip keeps exact) its own digits; None where the slip does not apply or masks the entry."""
    from symattn.exact import numeric
    from symattn.input.decimals import terminating_decimals

    found = next(((spec, m) for slip, spec, m in mla if slip == name), None)
    if found is None:
        return None
    spec, model = found
    if quantity in ("scaled", "shifted", "exp", "weights") and not model.may_attend(i, j):
        return None
    expr = source(spec, model, quantity).exact(quantity)[i, j]
    exact = numeric.as_fraction(expr)
    places = None if exact is None or rounded else terminating_decimals(exact)
    if places is not None:
        assert exact is not None  # places come from an exact value
        return round_half_up(exact, places)
    return numeric.round_expr(expr, decimals, caches[name])


def masked(v: Variant) -> tuple[str, ...]:
    """The asked numbers that a mask makes −∞: an LMS cannot ask them, so its quiz shows them as given,
    and grading takes them as answered (claims ``-inf``)."""
    return tuple(a.key for a, num in zip(v.asked, answer_values(v)) if num.is_infinite)


def _truncated(model, quantity: str, i: int, j: int, rounded: Decimal, decimals: int) -> Decimal:
    """The exact value cut off (towards zero) after ``decimals``, from its half-up rounding and one exact
    comparison: below a positive rounding it is one unit less, above a negative one it is one unit more."""
    unit = Decimal(1).scaleb(-decimals)
    sign = model.compare(quantity, i, j, Fraction(rounded))
    if rounded > 0 and sign < 0:
        return rounded - unit
    if rounded < 0 and sign > 0:
        return rounded + unit
    return rounded  # (a value that rounds to 0 is 0 cut off too)


__all__ = ["Gap", "SLIPS", "Slip", "gaps", "masked"]
