"""The verdict on one claim, and why: the exact value, the claimant's own implied value, an explanation.

Each claim gets one verdict, the first that holds:

``exact``       it equals the exact value;
``rounded``     the exact value rounded half-up to the claim's decimals gives it;
``carried``     it follows from the claimant's own earlier numbers (error carried
                forward, :mod:`symattn.checking.chain`), or is a rounding of their own
                more precise claim of the same number;
``too-coarse``  rounded or carried, but with fewer decimals than the claims file's
                ``decimals`` table asks for its quantity (more are fine); ``expected`` is
                the exact value at the asked decimals, and later claims that follow from
                it are ``carried``;
``input-rounding``  with ``inputs = "rounded"``, not right for the exact inputs but for some inputs
                that round to the typed ones (decided on interval enclosures,
                :mod:`symattn.checking.enclosure`); ``rounded_inputs`` names them;
``last-digit``  one unit off in the last place from the rounded exact or carried
                value (``truncated`` when cutting the exact value gives it), where a
                rounding slip is plausible: the claim has decimals, or the value is not
                an integer (an integer one off from an exact integer is ``wrong``); and
                where some rounding lies on its path (``rounds_on_path``): a product or
                sum of the given decimals exact at the claim's decimals is ``wrong``;
``wrong``       anything else.

With the stable softmax, ``exp`` and ``exp_sum`` are e^(z − max) and its sum, as the document
shows them; a claim that is wrong for that but right for e^z gets the verdict it has for e^z,
with the note ``unshifted``.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import Any

import sympy

from symattn import variants
from symattn.checking.chain import Chain, base, rational
from symattn.checking.claim_notation import like_claim
from symattn.checking.closed import Closed, Texts
from symattn.checking.enclosure import ROUNDED_QUANTITIES, TILED, Enclosure, depends_on, explains, is_supported
from symattn.checking.explain import Explainer
from symattn.checking.layout import Layout
from symattn.checking.products import own_sum, term_verdict
from symattn.checking.report import Verdict
from symattn.checking.slips import Slips
from symattn.exact import numeric
from symattn.exact.rounding import Num, is_extreme
from symattn.input.claims import PRODUCTS, Claim
from symattn.input.decimals import Percent, round_half_up, terminating_decimals, truncate
from symattn.input.limits import CLAIM_EXPONENT, NUMBER_LENGTH
from symattn.input.quantities import COLUMNS, GRADIENTS, HEAD_FORWARD, INPUTS, SCALARS, shape
from symattn.input.records import record
from symattn.input.spec import Spec

SIGNIFICANT = 6
SLIPS = ("carried", "last-digit", "wrong")  # what decide() says beyond exact and rounded, best first
# bits above the point of a carried value that some claim may round to: past 10^(CLAIM_EXPONENT + NUMBER_LENGTH)
CARRIED_BITS = int((CLAIM_EXPONENT + NUMBER_LENGTH) * 3.33) + 64
# the field of a ``decimals`` table that asks for each claimed quantity's decimals
ASKED_BY = {
    "sqrt_dk": "sqrt_dk",
    "scores": "scores",
    "scaled": "scaled",
    "shifted": "scaled",
    "exp": "exp",
    "exp_sum": "exp",
    "weights": "weights",
    "percent": "percent",
    "output": "output",
    "concat": "output",
    **{g: "gradients" for g in GRADIENTS},
    **PRODUCTS,  # a score's or an output's terms, at the decimals asked of it
    **{q.name: q.asked_by for q in variants.QUANTITIES if q.asked_by},  # a part's own (with the scores')
}


@record
class _Exact:
    """What a claim is compared with: the exact value (rational or None), its closed form, its
    SIGNIFICANT digits, and its rounding to the claim's decimals."""

    rational: Fraction | None
    closed: Closed
    shown: Num
    rounded: Decimal | None


class Checker:
    """The verdicts on one spec's claims: exact values, the claimant's own implied values, explanations."""

    def __init__(self, spec: Spec, model: Any, claims: tuple[Claim, ...], asked: tuple[tuple[str, int], ...] = ()):
        self.spec = spec
        self.asked = dict(asked)  # Decimals field -> the decimals asked
        self.layout = Layout(spec, model)
        self.chain = Chain(self.layout, claims)
        self.explainer = Explainer(self.layout, self.sig)
        self._tables: dict = {}
        self.texts = Texts()  # closed forms printed only when shown

    @staticmethod
    def position(claim: Claim) -> tuple[int, int]:
        """The entry of the model's matrix a claim is on (a scalar is 1×1, a sum per row a column)."""
        if claim.quantity in SCALARS:
            return 0, 0
        assert claim.row is not None  # every other quantity has a row
        if claim.quantity in COLUMNS:
            return claim.row, 0
        assert claim.col is not None  # and a column
        return claim.row, claim.col

    def table(self, model: Any, method: str, quantity: str, *args: int) -> tuple:
        """A whole matrix of the model's numbers, computed once for every claim on it."""
        key = (id(model), method, quantity, *args)
        if key not in self._tables:
            self._tables[key] = getattr(model, method)(quantity, *args)
        return self._tables[key]

    @cached_property
    def slips(self) -> tuple[Slips, ...]:
        """The classic slips of each head (their roundings share the checker's tables)."""
        return tuple(Slips(h, self._tables, self.layout.stable) for h in self.layout.heads)

    def slips_of(self, claim: Claim) -> Slips | None:
        """The slips a claim may show: a head's forward quantities only."""
        if claim.quantity not in HEAD_FORWARD or self.layout.is_layer(claim.quantity, claim.head):
            return None
        return self.slips[self.layout.index(claim.head)]

    def labels(self, claim: Claim, quantity: str) -> tuple[Any, Any, str | None, str | None]:
        """A claim's place in its own matrix: hN.Q[i][j] is column j of head N's columns, as written."""
        col = claim.col
        if claim.prefix is not None and col is not None:
            col -= claim.prefix * shape(quantity, self.spec, True)[1]
        return self.layout.labels(quantity, claim.row, col)

    # --- exact values ----------------------------------------------------

    def exact(self, quantity: str, i: int, j: int, decimals: int | None, head: int | None, model=None) -> _Exact:
        if quantity in INPUTS:
            value = getattr(self.spec, quantity)[i][j].value
            rounded = None if decimals is None else round_half_up(value, decimals)
            return _Exact(value, Closed(self.texts, expr=rational(value)), self.sig(quantity, i, j), rounded)
        model = model or self.layout.model(quantity, head)
        name = self.layout.name(quantity)
        value = self.table(model, "rationals", name)[i][j]
        rounded = self.table(model, "rounded", name, decimals)[i][j] if decimals is not None else None
        return _Exact(value, Closed(self.texts, model, name, (i, j)), self.sig(quantity, i, j, head, model), rounded)

    def sig(self, quantity: str, i: int, j: int, head: int | None = None, model=None) -> Num:
        """The exact value to SIGNIFICANT digits (a terminating one whole: 0.92, not 0.920000)."""
        if quantity in INPUTS:
            return self.significant(None, quantity, getattr(self.spec, quantity)[i][j].value, i, j)
        model = model or self.layout.model(quantity, head)
        name = self.layout.name(quantity)
        return self.significant(model, name, self.table(model, "rationals", name)[i][j], i, j)

    def significant(self, model: Any, name: str, exact: Fraction | None, i: int, j: int) -> Num:
        places = None if exact is None else terminating_decimals(exact)
        if exact is not None and places is not None and not is_extreme(exact):
            return Num(round_half_up(exact, places), True)
        if exact is not None and model is None:  # an input that does not terminate (1/3)
            return Num(numeric.significant_exact(exact, SIGNIFICANT), False)
        value = self.table(model, "significant", name, SIGNIFICANT)[i][j]
        return Num(
            value, exact is not None and Fraction(value) == exact, value.is_finite() and is_extreme(Fraction(value))
        )

    # --- verdicts --------------------------------------------------------

    def verdict(self, claim: Claim) -> Verdict:
        if claim.term is not None:  # one term of a partial product
            return term_verdict(self, claim)
        quantity, head = base(claim.quantity), claim.head
        i, j = self.position(claim)
        L = self.layout
        is_masked = quantity in ("scaled", "shifted") and not L.heads[L.index(head)].may_attend(i, j)
        unmasked = L.unmasked(head) if is_masked else None
        if claim.number.is_infinite:
            return self.infinite(claim, quantity, i, j, is_masked)
        d = claim.number.decimals
        exact = self.exact(quantity, i, j, d, head, unmasked)
        y, from_claims = self.chain.computed(quantity, claim.row, claim.col, head)
        verdict, carried = self.decide(claim, exact, y, from_claims)
        for other in self.chain.others(quantity, claim.row, claim.col, head) if verdict in SLIPS else ():
            found = self.decide(claim, exact, *other)  # the other route's own numbers may give it
            if SLIPS.index(found[0]) < SLIPS.index(verdict):
                verdict, carried = found
        note = None
        if verdict in ("wrong", "last-digit") and L.stable and quantity in ("exp", "exp_sum"):
            # e^z where the document shows e^(z − max): right in the other convention
            plain = self.unshifted(claim, i, j, d)
            if plain is not None:
                exact, verdict, carried, note = plain[0], plain[1], plain[2], "unshifted"
        asked = self.coarse(claim) if verdict in ("rounded", "carried") else None
        own = None  # a too-coarse claim carried from the claimant's own terms: how they add up
        if asked is not None:  # right at its own decimals, but the sheet asks for more
            unit = 2 if claim.quantity == "percent" else 0
            # carried: their own number at the asked decimals (at its own decimals, it is the claim)
            carried = self.carried_at(y, asked + unit) if verdict == "carried" else None
            own = own_sum(self, claim) if verdict == "carried" else None
            verdict, note = "too-coarse", ("from_terms" if own is not None else note)
            exact = self.exact(quantity, i, j, asked + unit, head, unmasked)
        rounded_inputs: tuple[str, ...] = ()
        if verdict in ("wrong", "last-digit") and not is_masked:
            rounded_inputs = self.input_rounding(claim, quantity, i, j)
            if rounded_inputs:
                verdict = "input-rounding"
        truncated = False
        if verdict == "last-digit":
            assert d is not None  # one unit off in the last place: the claim has decimals
            model = unmasked or L.model(quantity, head)
            truncated = self.is_truncation(model, L.name(quantity), i, j, claim.number.value, d, exact.rational)
        explanation = own
        if (
            own is None
            and verdict in ("wrong", "last-digit", "too-coarse")
            and (quantity not in variants.VIEWED or variants.explains(quantity))
        ):
            explanation = self.explainer.explain(quantity, claim.row, claim.col, head, exact.shown)
        expected: Decimal | Num | None = exact.rounded
        shown_carried: Decimal | Num | None = carried
        if claim.quantity == "percent":  # report in the claim's own unit
            expected, shown_carried = (None if x is None else Percent(x.scaleb(2)) for x in (exact.rounded, carried))
        elif claim.number.form == "decimal" and claim.number.exponent:  # m·10^k as claimed, not in fixed digits
            expected = like_claim(
                claim, exact.rounded, lambda d: self.exact(quantity, i, j, d, head, unmasked).rounded, exact.shown.value
            )
            shown_carried = like_claim(claim, carried, lambda d: self.carried_at(y, d))
        slips = self.slips_of(claim) if verdict == "wrong" else None
        diagnosis = None if slips is None else slips.diagnose(quantity, i, j, claim.number.value, d)
        row_label, col_label, row_axis, col_axis = self.labels(claim, quantity)
        return Verdict(
            claim,
            verdict,
            truncated,
            exact.shown,
            exact.closed,
            expected,
            shown_carried,
            explanation,
            row_label,
            col_label,
            masked=is_masked,
            diagnosis=diagnosis,
            row_axis=row_axis,
            col_axis=col_axis,
            note=note,
            asked=asked,
            rounded_inputs=rounded_inputs,
        )

    @cached_property
    def enclosure(self) -> Enclosure | None:
        """The inputs' intervals through the forward pass, with ``inputs = "rounded"`` on a spec they cover."""
        if self.spec.inputs != "rounded" or not is_supported(self.spec):
            return None
        return Enclosure(self.spec, self.layout.heads[0])

    def input_rounding(self, claim: Claim, quantity: str, i: int, j: int) -> tuple[str, ...]:
        """The inputs whose rounding explains a claim the exact inputs contradict (none: it is not explained)."""
        enclosure = self.enclosure
        if enclosure is None or quantity not in ROUNDED_QUANTITIES + TILED or claim.number.decimals is None:
            return ()
        if not explains(enclosure.reach(quantity, i, j), claim.number):
            return ()
        return depends_on(self.spec, quantity, i, j)

    def coarse(self, claim: Claim) -> int | None:
        """The decimals asked for a claim's quantity (in its own unit) where it gives fewer."""
        field = ASKED_BY.get(claim.quantity)
        asked = None if field is None else self.asked.get(field)
        d = claim.number.decimals
        if asked is None or d is None:  # a fraction claims exactness
            return None
        unit = 2 if claim.quantity == "percent" else 0  # percent decimals are the percentage's
        if d - unit >= asked:
            return None
        same = self.chain.index.get((claim.head, base(claim.quantity), claim.row, claim.col), [])
        # a shorter copy of their own number given at the asked decimals loses nothing
        precise = any(o.number.decimals is None or o.number.decimals >= asked + unit for o in same if o is not claim)
        return None if precise else asked

    def carried_at(self, y: sympy.Expr, decimals: int) -> Decimal:
        return numeric.round_expr(y, decimals, self._tables.setdefault("enclosures", {}), most_bits=CARRIED_BITS)

    def decide(self, claim: Claim, exact: _Exact, y: sympy.Expr, from_claims: bool) -> tuple[str, Decimal | None]:
        """The verdict against one exact value and one carried value, and the carried value rounded."""
        d, c = claim.number.decimals, claim.number.value
        if claim.number.form == "pi":  # an angle as a multiple of π ("3pi/4"): exact, carried or wrong
            if _of_pi(exact.closed.expr, c):
                return "exact", None
            return ("carried" if from_claims and _of_pi(y, c) else "wrong"), None
        if y.has(sympy.nan, sympy.zoo):  # e.g. weights from a claimed sum of 0: no value to carry
            from_claims = False
        carried = None
        if from_claims and d is not None:
            try:
                carried = numeric.round_expr(y, d, self._tables.setdefault("enclosures", {}), most_bits=CARRIED_BITS)
            except numeric.TooLarge:  # e^(1e5000) from a claimed 1e5000: beyond every claim, never carried
                from_claims = False
        if exact.rational is not None and exact.rational == c:
            return "exact", carried
        if exact.rounded is not None and Fraction(exact.rounded) == c:
            return "rounded", carried
        if self.is_carried(claim, y, from_claims, carried):
            return "carried", carried
        if (
            d is not None
            and self.one_off(c, d, exact.rounded, carried)
            and is_plausible_rounding(claim, exact.rational)
            and self.rounds_on_path(claim, exact.rational, y, from_claims)
        ):
            return "last-digit", carried
        return "wrong", carried

    def rounds_on_path(self, claim: Claim, exact: Fraction | None, y: sympy.Expr, from_claims: bool) -> bool:
        """Whether some rounding lies on a claim's path, so that one unit off may be a rounding slip: the exact
        value has more decimals than the claim shows, an exp, a root or a turn comes before it, the claimant's
        own value has more decimals, or it differs from the exact one through their own rounded claims."""
        d = claim.number.decimals
        assert d is not None  # one unit off in the last place: the claim has decimals
        if not fits(exact, d) or not self.is_exact_path(claim):
            return True
        if not from_claims:
            return False
        own = Fraction(int(y.p), int(y.q)) if isinstance(y, sympy.Rational) else None
        return not fits(own, d) or (own != exact and self.has_rounded_claims)

    def is_exact_path(self, claim: Claim) -> bool:
        """Whether a claim's quantity is made of the given exact decimals by products and sums alone: Q, K and V,
        an MLA latent and absorbed query, and the scores (and their terms) where no part turns or normalizes q, k;
        or made in one step from exact numbers (a turn's angle, and its cos and sin)."""
        quantity = PRODUCTS.get(claim.quantity, base(claim.quantity))
        if quantity in INPUTS + variants.EXACT_PRODUCTS + variants.ONE_STEP:
            return True
        head = self.layout.heads[self.layout.index(claim.head)]
        if quantity == "scaled" and head.qk is None and head.scale.is_Rational:  # z = S × a rational c, if no part
            i, j = self.position(claim)  # adds to it: then one product more of the given decimals
            s, z = (self.exact(q, i, j, None, claim.head).rational for q in ("scores", "scaled"))
            return s is not None and z == s * Fraction(int(head.scale.p), int(head.scale.q))
        return quantity == "scores" and head.qk is None

    @cached_property
    def has_rounded_claims(self) -> bool:
        """Whether a claim shows fewer decimals than its exact value has (an earlier rounding to carry)."""
        for c in self.chain.index.values():
            for claim in c:
                if claim.number.decimals is None or claim.number.is_infinite:
                    continue
                i, j = self.position(claim)
                q = base(claim.quantity)
                is_masked = q in ("scaled", "shifted") and not self.layout.heads[
                    self.layout.index(claim.head)
                ].may_attend(i, j)
                if is_masked:
                    continue
                if not fits(self.exact(q, i, j, None, claim.head).rational, claim.number.decimals):
                    return True
        return False

    def unshifted(self, claim: Claim, i: int, j: int, d: int | None) -> tuple[_Exact, str, Decimal | None] | None:
        """The verdict on an exp (or a sum of exps) as e^z, if that one is right."""
        quantity, head = claim.quantity, claim.head
        model = self.layout.heads[self.layout.index(head)]
        value = self.table(model, "rationals", quantity)[i][j]
        rounded = self.table(model, "rounded", quantity, d)[i][j] if d is not None else None
        shown = self.significant(model, quantity, value, i, j)
        exact = _Exact(value, model.exact(quantity)[i, j], shown, rounded)
        chain = self.chain
        if quantity == "exp":
            z, from_claims = chain.implied("scaled", claim.row, claim.col, head)
            y = sympy.Integer(0) if not model.may_attend(i, j) else sympy.exp(z)
        else:  # the claimed exps of the row, or e^z of the claimed (or exact) scaled scores
            terms = []
            for k in range(model.n_keys):
                mine = chain.claimed("exp", i, k, head)
                if mine is not None:
                    terms.append((rational(mine), True))
                elif not model.may_attend(i, k):
                    terms.append((sympy.Integer(0), False))
                else:
                    z, a = chain.implied("scaled", i, k, head)
                    terms.append((sympy.exp(z), a))
            # a denominator part's term is one of the sum too
            y, from_claims = (
                sympy.Add(*[t for t, _ in terms], *model.denominator_terms(i, False)),
                any(a for _, a in terms),
            )
        verdict, carried = self.decide(claim, exact, y, from_claims)
        return (exact, verdict, carried) if verdict in ("exact", "rounded", "carried") else None

    def infinite(self, claim: Claim, quantity: str, i: int, j: int, is_masked: bool) -> Verdict:
        """−∞ is exact for a masked score and wrong anywhere else."""
        exact = self.exact(quantity, i, j, None, claim.head)
        explanation = (
            None if is_masked else self.explainer.explain(quantity, claim.row, claim.col, claim.head, exact.shown)
        )
        row_label, col_label, row_axis, col_axis = self.labels(claim, quantity)
        return Verdict(
            claim,
            "exact" if is_masked else "wrong",
            False,
            exact.shown,
            exact.closed,
            None,
            None,
            explanation,
            row_label,
            col_label,
            row_axis=row_axis,
            col_axis=col_axis,
        )

    def is_carried(self, claim: Claim, y: sympy.Expr, from_claims: bool, carried: Decimal | None) -> bool:
        c, d = claim.number.value, claim.number.decimals
        for other in self.chain.index.get((claim.head, base(claim.quantity), claim.row, claim.col), []):
            od = other.number.decimals
            if (
                other is not claim
                and d is not None
                and other.number.form != "pi"  # value·π: its value is not the angle
                and (od is None or od > d)
                and Fraction(round_half_up(other.number.value, d)) == c
            ):
                return True
        if not from_claims:
            return False
        if d is None:
            return isinstance(y, sympy.Rational) and Fraction(int(y.p), int(y.q)) == c
        assert carried is not None  # decide() rounds y whenever it follows from claims and d is given
        return Fraction(carried) == c

    @staticmethod
    def one_off(c: Fraction, d: int, expected: Decimal | None, carried: Decimal | None) -> bool:
        unit = Fraction(10) ** -d
        return any(ref is not None and abs(Fraction(ref) - c) == unit for ref in (expected, carried))

    @staticmethod
    def is_truncation(model, quantity: str, i: int, j: int, c: Fraction, d: int, exact: Fraction | None) -> bool:
        if exact is not None:
            return Fraction(truncate(exact, d)) == c
        # cutting x toward zero gives c  <=>  c <= x < c + unit (x >= 0), mirrored below zero
        unit = Fraction(10) ** -d
        low, high = (c, c + unit) if c >= 0 else (c - unit, c)
        return (
            model.compare(quantity, i, j, low) >= 0 > model.compare(quantity, i, j, high)
            if c >= 0
            else model.compare(quantity, i, j, low) > 0 >= model.compare(quantity, i, j, high)
        )


def fits(value: Fraction | None, decimals: int) -> bool:
    """Whether a value is a decimal of at most ``decimals`` places (an irrational one never is)."""
    places = None if value is None else terminating_decimals(value)
    return places is not None and places <= decimals


def _of_pi(value: sympy.Expr, c: Fraction) -> bool:
    """Whether an exact value is c·π: its quotient by π is the rational c (an algebraic angle never is, but 0)."""
    q = value / sympy.pi
    return isinstance(q, sympy.Rational) and Fraction(int(q.p), int(q.q)) == c


def is_plausible_rounding(claim: Claim, exact: Fraction | None) -> bool:
    """A rounding slip is plausible where the claim has decimals, or the value is not an integer
    (in the claim's own unit: 40% is an integer percentage)."""
    number = claim.number
    assert number.decimals is not None  # a fraction claims exactness: never one unit off
    percent = number.form == "percent"
    if number.decimals - (2 if percent else 0) > 0:
        return True
    return exact is None or (exact * (100 if percent else 1)).denominator != 1


__all__ = ["ASKED_BY", "Checker", "SIGNIFICANT", "is_plausible_rounding"]
