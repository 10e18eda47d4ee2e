"""Soft-capping (Gemma 2), one part: ``softcap = c`` maps every (biased) scaled score z ↦ c·tanh(z / c),
before the mask and the softmax, so that every score lies in (−c, c).

Exactness. tanh is increasing, so the cap keeps the order of the scores and their ties: the groups of
equal z, the row maxima and so the softmax's rational weights and outputs are decided before the cap
(:mod:`symattn.variants.forms`). Its values are rational only at 0: c·tanh(x/c) = 0 at x = 0, and by
Lindemann–Weierstrass e^{2x/c} is transcendental at any other algebraic x, so c·tanh(x/c) =
c·(1 − 2/(e^{2x/c} + 1)) is irrational there; a capped z minus its row's capped maximum is 0 in the
maximum's group and not known to be rational elsewhere. Its box is tanh(x) = 1 − 2/(e^{2x} + 1) in
mpmath's interval arithmetic, x occurring once (no widening by dependence). A tiny c saturates: two
capped scores can differ by 10^−300000, which no fixed-point box separates, so the shifted scores then
come from :func:`saturated`. Backward, dz/dy = 1 − tanh²(y/c).

The order beside ALiBi's bias (``softcap_order``): "after-bias" caps the biased scores, c·tanh((s − m·d)/c), as a
spec's derivation does; "before-bias" caps first and adds the bias after, c·tanh(s/c) − m·d, as FlashAttention's
kernels (``apply_softcap`` on the scores, then the bias in ``apply_mask``) and its ``attention_ref`` do. The
in-memory API and a layout spec take FlashAttention's by default, a spec the derivation's; the exact model takes
the derivation's only (its ties and maxima are decided before the cap, :mod:`symattn.variants.forms`), and
the float64 path (score_mods) and version-3 certificates both.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.exact.num import Num, NumRow, NumRows
from symattn.input.errors import EvaluationError, SpecError, brief
from symattn.input.limits import PRECISION_BITS
from symattn.input.messages import said
from symattn.input.numeral import Numeral
from symattn.input.records import record
from symattn.variants.base import MAP, HeadPart, KernelNumber, Part, Where

if TYPE_CHECKING:  # the spec reads the part without SymPy or mpmath (compare's float64 path never imports them)
    import sympy
    from mpmath import iv

    from symattn.exact.numeric import Fixed

# --- limits of softcap -------------------------------------------------------------------
SOFTCAP = 1000  # the largest softcap c: capped scores lie in (−c, c), well inside ABS_Z

# --- the order beside ALiBi's bias ---------------------------------------------------------------
ORDER_KEY = "softcap_order"
# each order's kernel rules, in the order they act on z (symattn/kernel/score_mods.py)
ORDERS = {
    "before-bias": ("tanh_cap", "distance_bias", "denominator_logit"),  # FlashAttention's
    "after-bias": ("distance_bias", "tanh_cap", "denominator_logit"),  # a spec's derivation's
}
KEYWORD_ORDER = "before-bias"  # symattn.kernel.compare's, assert_attention_close's, a sweep's, a layout spec's
SPEC_ORDER = "after-bias"  # a spec's (the exact model's only one)


def order_refusal(value: Any) -> str | None:
    """Why a softcap_order is refused (the message after the key), or None."""
    if isinstance(value, str) and value in ORDERS:
        return None
    got = repr(value) if isinstance(value, str) else brief(value)
    return (
        "expected 'before-bias' (FlashAttention's: the cap, then ALiBi's bias) or 'after-bias' (the bias, then "
        f"the cap), got {got}"
    )


# --- the steps of a derivation ---------------------------------------------------------------------


@record
class Capping:
    """A spec's setting: the cap c, and where it acts beside ALiBi's bias (``ORDERS``' keys)."""

    cap: Numeral
    order: str = SPEC_ORDER


@record
class SoftCap:
    """z ← c·tanh(z / c): the cap, the focus row before and after, and every capped score."""

    kind: ClassVar[str] = "softcap"
    cap: Numeral
    before: NumRow  # the focus row's (biased) scaled scores
    after: NumRow  # c·tanh(z / c) of each
    Z: NumRows  # every capped score, before any mask
    exact: bool
    after_exact: bool
    order: str | None = None  # with ALiBi's bias too: where the cap acts (ORDERS' keys); None without it


@record
class CapBack:
    """dY = dZ ⊙ tanh′ with tanh′ = 1 − tanh²(y/c): the focus row key by key, and both matrices."""

    cap: Numeral
    row: int
    keys: tuple[int, ...]  # the keys the focus row may attend to
    dZ: NumRow  # the focus row's dZ, tanh′ and dY at those keys
    prime: NumRow
    dY: NumRow
    primes: NumRows
    primes_exact: bool
    dY_all: NumRows
    dY_exact: bool


# --- the part -------------------------------------------------------------------------------------


class Softcap(Part):
    name = "softcap"
    keys = ("softcap", ORDER_KEY)
    stage = MAP
    title = "softcap"
    noun = "soft-capping"
    unstated = keys
    web_fields = ({"key": "softcap", "kind": "text", "default": ""},)
    step_kinds = ("softcap",)
    facts = (("toy_vs_real", "softcap", False), ("backward_variants", "cap", None))
    certify = "--certify does not cover ALiBi or softcap"
    z_word = "capped"
    argument = "softcap"
    grid_key = "softcap"
    kernel_rule = "tanh_cap"  # symattn.kernel.compare(softcap=c): c·tanh(z/c) with its bound
    certified = True  # certificates from version 4 on hold the cap, and both verifiers have the rule

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Capping | None:
        """``softcap = c``: z ← c·tanh(z / c) on the scaled scores, c a decimal > 0; ``softcap_order``: where
        beside ALiBi's bias ("after-bias", the default, or "before-bias")."""
        order = data.get(ORDER_KEY, SPEC_ORDER)
        if ORDER_KEY in data:
            if "softcap" not in data:
                raise reader.error(ORDER_KEY, "only with softcap: it says where the cap acts beside ALiBi's bias")
            why = order_refusal(order)
            if why is not None:
                raise reader.error(ORDER_KEY, why)
        if "softcap" not in data:
            return None
        c = reader.number(data["softcap"], "softcap")
        if c.value == 0:  # the API takes FlashAttention's 0 as no cap; a spec has no cap by leaving it out
            raise reader.error("softcap", said("softcap_zero"))
        if not 0 < c.value <= SOFTCAP:
            raise reader.error("softcap", said("softcap_range", most=SOFTCAP, got=c.text))
        setting = Capping(c, order)
        self.check(reader, setting, where.symbolic)
        return setting

    def check(self, reader: Any, setting: Any, symbolic: bool) -> None:
        if setting is not None and symbolic:
            raise reader.error("softcap", "symbols are not supported with softcap; give numbers")

    def kernel_numbers(self, setting: Capping) -> tuple[KernelNumber, ...]:
        return (KernelNumber(setting.cap.value, setting.cap.text, "softcap"),)

    def head_part(self, setting: Capping, spec: Any) -> Cap:
        if setting.order != SPEC_ORDER and spec.setting("alibi") is not None:
            raise SpecError(
                spec.source,
                ORDER_KEY,
                f"{setting.order!r} (FlashAttention's order: the cap, then ALiBi's bias) is taken by symattn "
                "compare on the float64 path (float32 inputs) and by --certify --float64; the exact model applies "
                "the bias, then the cap ('after-bias')",
            )
        return Cap(setting.cap.value)

    def toy(self, spec: Any, setting: Any) -> tuple[tuple[str, Any], ...]:
        return (("softcap", True),)

    def operand(self, setting: Capping, sig: Any, i: int, k: int) -> Numeral:
        """What a wrong scaled score's explanation shows of the cap: c."""
        return setting.cap

    def z_step(self, spec: Any, model: Any, fig: Any, shown: Any) -> SoftCap:
        from symattn.exact.rounding import is_exact

        before, f = shown(MAP), spec.focus  # the scores before the cap
        after, setting = fig.unmasked, spec.setting("softcap")
        order = setting.order if spec.setting("alibi") is not None else None
        return SoftCap(setting.cap, before[f], after[f], after, is_exact(after), is_exact([after[f]]), order)

    def backward_fact(self, spec: Any, model: Any, fig: Any, g: Mapping[str, Any], head: int) -> tuple[str, CapBack]:
        from symattn.exact.rounding import is_exact

        f = spec.focus
        keys = tuple(j for j in range(model.n_keys) if model.may_attend(f, j))
        cap = CapBack(
            spec.setting("softcap").cap,
            f,
            keys,
            tuple(g["dZ"][f][j] for j in keys),
            tuple(g["tanh_prime"][f][j] for j in keys),
            tuple(g["dZ_pre"][f][j] for j in keys),
            g["tanh_prime"],
            is_exact(g["tanh_prime"]),
            g["dZ_pre"],
            is_exact(g["dZ_pre"]),
        )
        return "cap", cap

    def grid_refusal(self, entry: Any) -> str | None:
        if not _is_decimal(entry, SOFTCAP):
            return f"expected a number from 0 (none) to {SOFTCAP}, got {brief(entry)}"
        if Decimal(entry) != 0 and float(Decimal(entry)) == 0:  # the kernel's float would be 0: no cap at all
            return f"{brief(entry)} is 0 as a float, which is no cap: give 0 for none, or a cap a float holds"
        return None

    def grid_value(self, entry: Any) -> float:
        return float(Decimal(entry))

    def score_mod(self, argument: Any, scores: Any, i: Any, j: Any, causal: bool, align: str) -> Any:
        import torch

        return scores if argument is None else torch.tanh(scores / argument) * argument


def _is_decimal(entry: Any, most: int) -> bool:
    if type(entry) is int:
        return 0 <= entry <= most
    if not isinstance(entry, str) or type(entry) is str:  # a TOML float keeps its text (FloatText), a str does not
        return False
    try:
        value = Decimal(entry)
    except ArithmeticError:
        return False
    return value.is_finite() and 0 <= value <= most


PART = Softcap()


# --- one head's cap -------------------------------------------------------------------------------


@record
class Cap(HeadPart):
    """c·tanh(z / c) on one head's z."""

    c: Fraction
    stage: ClassVar[int] = MAP
    gradients: ClassVar[tuple[str, ...]] = ("tanh_prime", "dZ_pre")
    silent: ClassVar[tuple[str, ...]] = ("dS",)  # dZ × tanh′ × scale: the document shows how

    @cached_property
    def _cap(self) -> sympy.Expr:
        import sympy

        return sympy.Rational(self.c.numerator, self.c.denominator)

    @property
    def bound(self) -> Fraction:
        """Every capped z lies strictly inside (−c, c)."""
        return self.c

    def vary(self, model: Any, i: int, j: int, z: sympy.Expr) -> sympy.Expr:
        import sympy

        return self._cap * sympy.tanh(z / self._cap)

    def value(self, y: Fraction | None) -> Fraction | None:
        """c·tanh(y/c) where rational: only at y = 0."""
        return Fraction(0) if y == 0 else None

    def box(self, z: Fixed, prec: int) -> Fixed:
        """c·tanh(z/c) of a box, rigorously: tanh(x) = 1 − 2/(e^(2x) + 1) in mpmath's interval arithmetic
        (x occurs once, so the interval is not widened by dependence)."""
        from mpmath import iv

        from symattn.exact import numeric
        from symattn.exact.numeric import Fixed

        with numeric.working_precision(prec + 16):
            c = iv.mpf(self.c.numerator) / self.c.denominator
            x = iv.mpf([z.lo, z.hi]) / (iv.mpf(2) ** z.bits)
            capped = c * (1 - 2 / (iv.exp(2 * x / c) + 1))
        return Fixed.from_interval(capped, z.bits)

    def derivative(self, model: Any, i: int, j: int) -> sympy.Expr:
        """1 − tanh²(y_ij/c) at the score before the cap (0 where masked: its gradient is 0 there anyway)."""
        import sympy

        if not model.may_attend(i, j):
            return sympy.Integer(0)
        return 1 - sympy.tanh(model.z_before(self, i, j) / self._cap) ** 2

    def gradient(self, model: Any) -> Primes:
        return Primes(
            tuple(tuple(self.derivative(model, i, j) for j in range(model.n_keys)) for i in range(model.n_queries))
        )

    def significant(self, model: Any, quantity: str, digits: int) -> Any:
        """z − max of saturated scores, which the fixed-point boxes cannot separate (None: not shifted)."""
        return saturated(model, self, digits) if quantity == "shifted" else None

    def by_hand(self, model: Any, unmasked: NumRows, decimals: int, notation: str) -> NumRows:
        """c·tanh(shown z / c), correctly rounded (0 stays exactly 0)."""
        import sympy

        from symattn.exact import numeric
        from symattn.input.decimals import round_half_up

        def capped(z: Num) -> Num:
            value = z.fraction
            if value == 0:
                return Num(round_half_up(value, decimals), True)
            x = sympy.Rational(value.numerator, value.denominator)
            return Num(numeric.round_expr(self.vary(model, 0, 0, x), decimals), False)

        return tuple(tuple(capped(z) for z in row) for row in unmasked)


@record
class Primes:
    """Backward through the cap: tanh′ = 1 − tanh²(y/c) of each score before it (SymPy; 0 where masked), then
    dY = dZ ⊙ tanh′, the gradient of y, before dS."""

    primes: tuple[tuple[sympy.Expr, ...], ...]
    stage: ClassVar[int] = MAP
    names: ClassVar[tuple[str, ...]] = ("tanh_prime", "dZ_pre")
    after: ClassVar[str] = "dZ"  # its gradients come right after dZ
    forms: ClassVar[bool] = True  # compute prints their closed forms

    def through(self, alg: Any, dZ: Any, out: dict, hook: Any) -> Any:
        out["tanh_prime"] = t = hook("tanh_prime", [[alg.real(x) for x in row] for row in self.primes])
        out["dZ_pre"] = dZ = hook("dZ_pre", [[g * d for g, d in zip(row, trow)] for row, trow in zip(dZ, t)])
        return dZ


# --- saturated scores ------------------------------------------------------------------------------

SMALLEST_BITS = 1 << 22  # 2^−(2^22) ≈ 10^−1262612: a saturated z − max below it has no digits we write


def saturated(model: Any, cap: Cap, digits: int) -> tuple[tuple[Decimal, ...], ...]:
    """Every entry of a capped head's ``shifted`` to ``digits`` significant digits, past saturation.

    With c = 10^−6, c·tanh(y/c) is c·(1 − 2e^(−2y/c)) for y ≈ 0.7: two such capped scores differ by about
    10^−300000. Written as 2c·e^(2m)·(e^(2(x − m)) − 1) / ((e^(2x) + 1)(e^(2m) + 1)), with x = y/c and m
    the maximum's, the difference has no cancellation, and mpmath's intervals, whose exponents are
    unbounded, give it to any relative precision. Against a denominator part's logit s that is the row's
    maximum, c·tanh(x) − s is (c − s) − 2c/(e^(2x) + 1), exact where s = c. A value below 10^−(10^6)
    (c = 10^−30 makes 10^−(3·10^29)) has no digits to write: refused, naming the entry.
    """
    from symattn.exact import numeric

    exact = model.rationals("shifted")
    rows = []
    for i in range(model.n_queries):
        row = []
        for j in range(model.n_keys):
            if not model.may_attend(i, j):
                row.append(Decimal("-Infinity"))
            elif exact[i][j] is not None:
                row.append(numeric.significant_exact(exact[i][j], digits))
            else:
                row.append(_decided(model, cap, i, j, digits))
        rows.append(tuple(row))
    return tuple(rows)


def _decided(model: Any, cap: Cap, i: int, j: int, digits: int) -> Decimal:
    from symattn.exact import numeric

    prec = 64
    while prec <= PRECISION_BITS:
        box = _enclosure(model, cap, i, j, prec)
        if numeric.exponent_bits(box) < -SMALLEST_BITS:
            raise EvaluationError(f"shifted[{i + 1}][{j + 1}] is below 10^-1000000 in size: it has no digits to show")
        shown = numeric.significant_of(box, digits)
        if shown is not None:
            return shown
        prec *= 2
    raise EvaluationError(f"cannot decide the rounding of shifted[{i + 1}][{j + 1}]: it may be an exact tie")


def _enclosure(model: Any, cap: Cap, i: int, j: int, prec: int) -> iv.mpf:
    from mpmath import iv

    from symattn.exact import numeric

    c, forms = cap.c, model.forms
    bits = prec + 16 + max(c.denominator.bit_length() - c.numerator.bit_length(), 0)  # x = y/c to 2^−prec

    def over_c(form: Any) -> iv.mpf:
        box = forms.box(form, bits)
        return iv.mpf([box.lo, box.hi]) / (iv.mpf(2) ** bits) / _rational(c)

    with numeric.working_precision(prec + 16):
        x = over_c(forms.form(i, j))
        if model.denominator is not None and model.denominator.wins(model)[i]:
            s = model.denominator.logit
            return _rational(c - s) - 2 * _rational(c) / (iv.exp(2 * x) + 1)
        top = model.row_max[i]
        m = over_c(forms.form(i, top))
        d = over_c(forms.minus(forms.form(i, j), forms.form(i, top)))
        # c·(tanh x − tanh m) = 2c·e^(2m)·(e^(2d) − 1) / ((e^(2x) + 1)(e^(2m) + 1)), d = x − m: nothing cancels
        return 2 * _rational(c) * iv.exp(2 * m) * (iv.exp(2 * d) - 1) / ((iv.exp(2 * x) + 1) * (iv.exp(2 * m) + 1))


def _rational(x: Fraction) -> iv.mpf:
    from mpmath import iv

    return iv.mpf(x.numerator) / x.denominator


__all__ = [
    "KEYWORD_ORDER",
    "ORDERS",
    "ORDER_KEY",
    "PART",
    "SPEC_ORDER",
    "Cap",
    "CapBack",
    "Capping",
    "SoftCap",
    "Softcap",
]
