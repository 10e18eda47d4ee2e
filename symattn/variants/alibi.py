"""ALiBi's distance bias (Press et al., 2022), one part: ``alibi = true`` or ``alibi_slopes = [...]`` adds
−m_h·|i − j| to each scaled score of head h, with the query at position i and the key at position j, both
counted 0, 1, … from the first row (cross-attention too). ``alibi = true`` takes the paper's slopes
m_h = 2^(−8h/H), h = 1..H; ``alibi_slopes`` gives one decimal per head.

Exactness. A biased score is y = p·scale + q·m with rationals p (the score's rational part) and
q = −|i − j|, the coordinate over this part's basis m = k·2^e. Whether two are equal, and whether one is
rational, is decided from (p, q) alone:

- when scale/m = t is rational (1/√2 with the paper's m = 2^(−1/2), or rational scale and slope),
  y = (p·t + q)·m: order and equality are those of the rational p·t + q, since m > 0;
- otherwise 1, scale and m are linearly independent over Q (scale is c·√r, m is k·2^e; 2^e lies in
  Q(√r) only when it is rational or r = 2 and e − 1/2 is an integer, the case above), so y is
  rational iff each of p·scale and q·m is, and two are equal iff their (p, q) are; the order of unequal
  ones is decided by enclosures, which must separate them.

e^z is then rational only at z = 0 (Lindemann–Weierstrass), and the weights and outputs follow the
model's rules on the groups of equal z. A score with transcendental terms (a Q/K part's) keeps them: the
key is (terms, this key), :mod:`symattn.variants.forms`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.exact.num import Num, NumRow, NumRows
from symattn.input.files import kind_of
from symattn.input.messages import said
from symattn.input.numeral import Numeral
from symattn.input.records import record
from symattn.variants import positions
from symattn.variants.base import ADD, MAP, HeadPart, KernelNumber, Part, Quantity, Rows, Where

if TYPE_CHECKING:  # the spec reads the part without SymPy (compare's float64 path never imports it)
    import sympy
    from sympy import ImmutableMatrix

    from symattn.exact.numeric import Fixed

NEEDS = "alibi = true or alibi_slopes (the distance bias of ALiBi)"  # what a claim on its quantities needs

# --- limits of ALiBi ---------------------------------------------------------------------------
ALIBI_SLOPE = 100  # the largest alibi_slopes entry: the bias −m·|i − j| then stays within ABS_Z's reach


# --- the setting ----------------------------------------------------------------------------------


@record
class Slope:
    """One head's ALiBi slope: 2^exponent (the paper's), or the decimal the spec gives."""

    exponent: Fraction = Fraction(0)  # m = 2^exponent when ``given`` is None
    given: Numeral | None = None
    head: int = 1  # which head (1-based), of how many: the paper's exponent is −8·head/heads
    heads: int = 1

    @property
    def is_paper(self) -> bool:
        return self.given is None


@record
class Alibi:
    """The slopes of every head (one for a single head)."""

    slopes: tuple[Slope, ...]

    @property
    def is_paper(self) -> bool:
        return self.slopes[0].is_paper

    def head(self, index: int) -> Alibi:
        return Alibi((self.slopes[index],))


def paper_slopes(heads: int) -> tuple[Slope, ...]:
    """The paper's slopes 2^(−8h/H), h = 1..H: a geometric sequence from 2^(−8/H) down to 2^(−8)."""
    return tuple(Slope(Fraction(-8 * h, heads), None, h, heads) for h in range(1, heads + 1))


def distance(i: int, j: int) -> int:
    """|i − j|, query and key both counted 0, 1, … from the first row (cross-attention too)."""
    return abs(i - j)


# --- the step of a derivation ----------------------------------------------------------------------


@record
class AlibiBias:
    """z_ij = S_ij · scale − m·|i − j|: the slope, the focus row's distances and bias, the biased scores."""

    kind: ClassVar[str] = "alibi"
    slope: Num  # m as shown
    exponent: Fraction | None  # the paper's m = 2^exponent; None when the spec gives m
    given: Numeral | None  # the slope the spec gives
    head: int  # 1-based, and of how many heads (the paper's 2^(−8h/H))
    heads: int
    distances: tuple[int, ...]  # |f − j| for the focus row f
    bias: NumRow  # −m·|f − j|
    Z: NumRows  # the scaled scores plus the bias, before any mask
    exact: bool
    cross: bool
    rotated: bool = False  # the bias comes on top of the scores of Q and K turned by a Q/K part
    capped: bool = False  # a softcap comes next: the biased scores go on to it, not to the softmax
    query_position: int | None = None  # the focus query's position where the spec gives positions
    key_positions: tuple[int, ...] = ()  # and each key's (empty: the rows, 0, 1, …)


# --- the part -------------------------------------------------------------------------------------


class AlibiPart(Part):
    name = "alibi"
    keys = ("alibi", "alibi_slopes")
    stage = ADD
    title = "ALiBi"
    unstated = keys
    web_fields = (
        {"key": "alibi", "kind": "flag", "choices": ["false", "true"], "default": "false"},
        {"key": "alibi_slopes", "kind": "list", "default": ""},
    )
    quantities = (  # a head's slope m (claimed hN.alibi_slope with several) and its bias −m·|i − j|
        Quantity("alibi_slope", "scaled", rows=None, cols=None, asked_by="scaled", needs=NEEDS),
        Quantity("bias", "scaled", asked_by="scaled", needs=NEEDS),
    )
    step_kinds = ("alibi",)
    facts = (("toy_vs_real", "alibi", False),)
    certify = "--certify does not cover ALiBi or softcap"
    z_word = "biased"
    argument = "alibi_slopes"
    grid_key = "alibi"
    kernel_rule = "distance_bias"  # symattn.kernel.compare(alibi_slopes=…): −m·|i + offset − j|
    certified = True  # version-3 certificates hold the slopes (rows' distances), and both verifiers have the rule

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Alibi | None:
        """``alibi = true`` or ``alibi_slopes = [...]`` (one positive decimal per head), or None."""
        heads = where.heads
        if "alibi" in data and "alibi_slopes" in data:
            raise reader.error("alibi_slopes", said("alibi_both"))
        if "alibi" in data:
            if not reader.flag(data["alibi"], "alibi"):
                return None
            alibi = Alibi(paper_slopes(heads))
        elif "alibi_slopes" in data:
            raw = data["alibi_slopes"]
            count = said("slopes_count", heads=heads, n=len(raw) if isinstance(raw, list) else 0)
            not_list = said("slopes_list", heads=heads, got=kind_of(raw))
            slopes = []
            for h, (m, error) in enumerate(reader.per_head(raw, "alibi_slopes", heads, not_list, count), 1):
                if not 0 < m.value <= ALIBI_SLOPE:
                    raise error(said("slope_range", most=ALIBI_SLOPE, got=m.text))
                slopes.append(Slope(given=m, head=h, heads=heads))
            alibi = Alibi(tuple(slopes))
        else:
            return None
        self._refuse(reader, where.symbolic, "alibi" if "alibi" in data else "alibi_slopes")
        return alibi

    def check(self, reader: Any, setting: Any, symbolic: bool) -> None:
        if setting is not None:
            self._refuse(reader, symbolic, "alibi")

    @staticmethod
    def _refuse(reader: Any, symbolic: bool, key: str) -> None:
        if symbolic:
            raise reader.error(key, "symbols are not supported with ALiBi; give numbers")

    def head(self, setting: Alibi, index: int) -> Alibi:
        return setting.head(index)

    kernel_per_head = True

    def kernel_numbers(self, setting: Alibi) -> tuple[KernelNumber, ...]:
        """Each slope as given, or the paper's 2^(−8h/H): a float where 8h/H is a whole number."""
        out = []
        for s in setting.slopes:
            if s.given is not None:
                out.append(KernelNumber(s.given.value, s.given.text, "alibi_slopes", (s.head,)))
                continue
            e = s.exponent
            value = Fraction(2) ** int(e) if e.denominator == 1 else None
            out.append(KernelNumber(value, f"2^({e})", "alibi", (s.head,)))
        return tuple(out)

    def head_part(self, setting: Alibi, spec: Any) -> Bias:
        slope = setting.slopes[0]
        k = Fraction(1) if slope.given is None else slope.given.value
        placed = positions.of(spec)  # the tokens' positions (their rows where the spec gives none)
        return Bias(slope_expr(slope), k, slope.exponent, placed.queries, placed.keys)

    def toy(self, spec: Any, setting: Any) -> tuple[tuple[str, Any], ...]:
        return (("alibi", True),)

    def operand(self, setting: Any, sig: Any, i: int, k: int) -> Num | None:
        return sig("bias", i, k) if i != k else None  # −m·|i − j| (none on the diagonal, where it is 0)

    def z_step(self, spec: Any, model: Any, fig: Any, shown: Any) -> AlibiBias:
        from symattn.exact import numeric, rounding
        from symattn.exact.rounding import is_exact

        part = model.owner("bias")
        slope = spec.setting("alibi").slopes[0]
        exact = numeric.as_fraction(part.slope)
        rounded = numeric.round_expr(part.slope, spec.decimals.scaled)
        Z, f = shown(MAP), spec.focus  # the biased scores, before any map
        given = spec.setting("positions") is not None  # positions the spec gives: the step says them
        # a slope that terminates is shown whole (2^-4 = 0.0625), else rounded (≈)
        shown_slope = (
            Num(rounded, False) if exact is None else rounding.exact_or_rounded([[exact]], spec.decimals.scaled)[0][0]
        )
        return AlibiBias(
            slope=shown_slope,
            exponent=None if slope.given is not None else slope.exponent,
            given=slope.given,
            head=slope.head,
            heads=slope.heads,
            distances=tuple(part.gap(f, j) for j in range(model.n_keys)),
            bias=part.shown(model, spec.decimals.scaled, spec.notation)[f],
            Z=Z,
            exact=is_exact(Z),
            cross=spec.is_cross,
            rotated=model.qk is not None,
            capped=bool(model.stage_parts(MAP)),
            query_position=part.q_pos[f] if given else None,
            key_positions=part.k_pos if given else (),
        )

    def sweep_argument(self, value: Any, heads: int, drawn: Any) -> Any:
        """The paper's slopes, 2^(−8h/H) for h = 1..H."""
        import torch

        return torch.tensor([2.0 ** (-8 * h / heads) for h in range(1, heads + 1)]) if value else None

    def score_mod(self, argument: Any, scores: Any, i: Any, j: Any, causal: bool, align: str) -> Any:
        """The bias −m_h·|i − j|."""
        if argument is None:
            return scores
        return scores - argument.to(scores.dtype)[:, None, None] * (i - j).abs().to(scores.dtype)


PART = AlibiPart()


def slope_expr(slope: Slope) -> sympy.Expr:
    """The exact slope: 2^e (algebraic, or rational when e is an integer), or the given decimal."""
    import sympy

    if slope.given is not None:
        value = slope.given.value
        return sympy.Rational(value.numerator, value.denominator)
    return sympy.Pow(2, sympy.Rational(slope.exponent.numerator, slope.exponent.denominator))


# --- one head's bias ------------------------------------------------------------------------------


@record
class Bias(HeadPart):
    """−m·|i − j| on one head's scaled scores, m = k · 2^e."""

    slope: sympy.Expr
    slope_k: Fraction
    slope_e: Fraction
    q_pos: tuple[int, ...] = ()  # each query's and key's position (symattn.variants.positions)
    k_pos: tuple[int, ...] = ()
    stage: ClassVar[int] = ADD
    quantities: ClassVar[tuple[str, ...]] = ("alibi_slope", "bias")
    computed: ClassVar[tuple[str, ...]] = ("alibi_slope", "bias")
    exposes: ClassVar[tuple[str, ...]] = ("slope", "bias", "_ratio")

    def expose(self, model: Any, name: str) -> Any:
        if name == "bias":
            return self.exact(model, "bias")
        if name == "_ratio":
            return self.linear(model.scale).ratio
        return getattr(self, name)

    def gap(self, i: int, j: int) -> int:
        """|p_i − p_j|: how far apart query i and key j stand."""
        return distance(self.q_pos[i], self.k_pos[j]) if self.q_pos else distance(i, j)

    def coordinate(self, i: int, j: int) -> Fraction:
        return Fraction(-self.gap(i, j))

    def magnitude(self, i: int, j: int) -> Fraction:
        """An upper bound of |m·|i − j||."""
        return self._upper * self.gap(i, j)

    @cached_property
    def _upper(self) -> Fraction:
        from symattn.variants.forms import upper

        return upper(self.slope)

    def vary(self, model: Any, i: int, j: int, z: sympy.Expr) -> sympy.Expr:
        return z + self.exact(model, "bias")[i, j]

    def linear(self, scale: sympy.Expr) -> Linear:
        return Linear(self, scale)

    def basis_box(self, bits: int) -> Fixed:
        from symattn.exact import numeric
        from symattn.exact.numeric import Fixed

        return Fixed.from_interval(numeric.enclose(self.slope, bits + 8), bits)

    def exact(self, model: Any, quantity: str) -> ImmutableMatrix:
        """−m·|i − j| for every query i and key j (masked or not); the slope m as a 1×1 matrix."""
        from sympy import ImmutableMatrix

        if quantity == "alibi_slope":
            return ImmutableMatrix([[self.slope]])
        if "bias" not in model.memo:
            model.memo["bias"] = ImmutableMatrix(
                model.n_queries, model.n_keys, lambda i, j: -self.slope * self.gap(i, j)
            )
        return model.memo["bias"]

    def rationals(self, model: Any, quantity: str) -> Rows | None:
        if quantity == "alibi_slope":
            from symattn.exact import numeric

            return ((numeric.as_fraction(self.slope),),)
        if quantity != "bias":
            return None
        linear = self.linear(model.scale)
        return tuple(
            tuple(linear.value(Fraction(0), self.coordinate(i, j)) for j in range(model.n_keys))
            for i in range(model.n_queries)
        )

    def boxes(self, boxes: Any, quantity: str) -> list[Fixed]:
        from symattn.variants.forms import times

        model = boxes.model
        basis = self.basis_box(boxes.prec)
        if quantity == "alibi_slope":
            return boxes.flat([[basis]])
        return boxes.flat(
            [[times(self.coordinate(i, j), basis) for j in range(model.n_keys)] for i in range(model.n_queries)]
        )

    def shown(self, model: Any, decimals: int, notation: str = "fixed") -> NumRows:
        """The bias as the document shows it: exact, padded to one width, where every entry terminates."""
        from symattn.exact import rounding
        from symattn.input.decimals import terminating_decimals

        exact = model.rationals("bias")
        places = [terminating_decimals(x) if x is not None else None for row in exact for x in row]
        if all(p is not None and p <= decimals for p in places):  # short enough to show whole (−1.5, not −1.500)
            return rounding.exact_or_rounded(exact, decimals, notation)
        return rounding.exact_width(  # the exact ones unpadded (0, −0.125) beside the rounded (−0.188)
            tuple(
                tuple(Num(d, x is not None and Fraction(d) == x) for d, x in zip(row, exact_row))
                for row, exact_row in zip(model.rounded("bias", decimals), exact)
            )
        )

    def by_hand(self, model: Any, unmasked: NumRows, decimals: int, notation: str) -> NumRows:
        """By hand, the biased scores are the shown scaled scores plus the shown bias."""
        from symattn.exact import rounding

        bias = self.shown(model, decimals, notation)
        values = [[z.fraction + b.fraction for z, b in zip(row, brow)] for row, brow in zip(unmasked, bias)]
        return rounding.exact_or_rounded(values, decimals, notation)

    # --- the claimant's numbers carried forward ------------------------------------------

    def implied(self, chain: Any, model: Any, quantity: str, row: int, col: int | None, head: int | None) -> Any:
        """The slope (exact), the bias from the claimant's own slope, and z from their own scores and bias
        where they claimed a slope or a bias; None for the rest (the head's rule)."""
        if quantity == "alibi_slope":
            return self.slope, False
        if quantity == "bias" and col is not None:
            m, carried = chain.implied("alibi_slope", None, None, head)
            return -m * distance(row, col), carried
        if quantity == "scaled" and col is not None and chain.names & {"alibi_slope", "bias"}:
            (x, a), (factor, b) = chain.implied("scores", row, col, head), chain.implied("scale")
            bias, c = chain.implied("bias", row, col, head)
            z = x * factor + bias
            for part in model.stage_parts(MAP):  # then any monotone map, on the claimant's biased score
                z = part.vary(model, row, col, z)
            return z, a or b or c
        return None

    def operands(self, explainer: Any, model: Any, quantity: str, i: int, k: int, head: int | None) -> Any:
        """A wrong bias: the slope times −|i − j|."""
        if quantity != "bias":
            return None
        return ((explainer.sig("alibi_slope", 0, 0, head), Num(Decimal(-distance(i, k)), True)),)

    def explained(self, explainer: Any, model: Any, quantity: str, row: int | None, head: int | None) -> Any:
        """A wrong slope is an input of the spec: nothing to show but its value."""
        return () if quantity == "alibi_slope" else None


class Linear:
    """The rules of y's rational part c·scale + q·m (the module's docstring says why they hold)."""

    def __init__(self, bias: Bias, scale: sympy.Expr):
        from symattn.variants.forms import scale_parts

        self.c, self.r = scale_parts(scale)
        e, k = bias.slope_e, bias.slope_k
        self.slope_rational = k * Fraction(2) ** int(e) if e.denominator == 1 else None
        if self.r == 1 and e.denominator == 1:
            power: Fraction | None = -e
        elif self.r == 2 and (e - Fraction(1, 2)).denominator == 1:
            power = Fraction(1, 2) - e
        else:
            power = None
        self.ratio = None if power is None else self.c / k * Fraction(2) ** int(power)  # scale/m where rational

    def key(self, p: Fraction, q: Fraction) -> Hashable:
        return p * self.ratio + q if self.ratio is not None else (p, q)

    def value(self, p: Fraction, q: Fraction) -> Fraction | None:
        """The exact rational value of p·scale + q·m, or None where it is irrational."""
        if self.ratio is not None:
            key = p * self.ratio + q
            if key == 0:
                return Fraction(0)
            return None if self.slope_rational is None else key * self.slope_rational
        total = Fraction(0)
        if p != 0:
            if self.r != 1:
                return None
            total += p * self.c
        if q != 0:
            if self.slope_rational is None:
                return None
            total += q * self.slope_rational
        return total

    def sign(self, p: Fraction, q: Fraction) -> int | None:
        """The sign of a nonzero difference where it is decided without enclosures, else None."""
        if q == 0:  # the same distance: the scores decide (scale > 0)
            return (p > 0) - (p < 0)
        if self.ratio is not None:  # y = (p·t + q)·m with m > 0
            key = p * self.ratio + q
            return (key > 0) - (key < 0)
        return None


__all__ = ["PART", "Alibi", "AlibiBias", "Bias", "Slope", "distance", "paper_slopes", "slope_expr"]
