"""Whether each expanded line adds up: its shown result is what its shown terms give, rounded.

In exact rounding every result is the exact value rounded, not a sum of the rounded numbers shown
before it, so ``0.241×10 + (−0.097)×10 + (−0.144)×2 ≈ 1.150`` may stand where the terms give 1.152.
The derivation marks the first block where that happens (``note_at``), and the document says why once,
there. Everything is decided on the shown Decimals (as exact fractions), never on floats; e^z is
rounded correctly by the model's own enclosures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

from symattn.derivation.steps import AnyStep, Derivation, Dot
from symattn.input.decimals import round_half_up

# a shown value, or an entry as typed: a Num, a Numeral or (symbolic) a Formula
Value = Any


class _Shown:
    """An intermediate the line shows in parentheses (dA − r): exact, from the numbers shown."""

    exact = True
    is_infinite = False

    def __init__(self, value: Fraction | None) -> None:
        self.value = value


def _exact(x: Value) -> Fraction | None:
    """The value of a shown number as an exact fraction; None for a formula or −∞ (nothing to add)."""
    if getattr(x, "is_infinite", False) or not isinstance(getattr(x, "value", None), Decimal | Fraction):
        return None
    return Fraction(x.value)


def rounds_to(value: Fraction, shown: Value) -> bool:
    """Whether ``shown`` is ``value``: exactly where it claims to be exact (=), else rounded half-up at its
    last shown digit (≈; m × 10^k rounds at its own last digit too)."""
    if shown.exact:
        return _exact(shown) == value
    exponent = shown.value.as_tuple().exponent
    assert isinstance(exponent, int)  # a finite Decimal
    return round_half_up(value, -exponent) == shown.value


def _sum(values: Iterable[Fraction | None]) -> Fraction | None:
    total = Fraction(0)
    for v in values:
        if v is None:
            return None  # a formula or −∞: nothing to round
        total += v
    return total


def _times(a: Value, b: Value) -> Fraction | None:
    x, y = _exact(a), _exact(b)
    return None if x is None or y is None else x * y


def _adds(value: Fraction | None, shown: Value) -> bool:
    return value is None or _exact(shown) is None or rounds_to(value, shown)


def dot_adds_up(dot: Dot) -> bool:
    """Σ a×b (+ b) = result."""
    bias = [] if dot.bias is None else [_exact(dot.bias)]
    return _adds(_sum([_times(a, b) for a, b in dot.terms] + bias), dot.result)


def _exp_adds_up(z: Value, shown: Value) -> bool:
    """e^z ≈ shown, decided by the model's own correct rounding of the closed form."""
    x = _exact(z)
    if x is None or _exact(shown) is None:
        return True  # e^−∞ = 0, or a formula
    if x == 0:
        return shown.value == 1
    if shown.exact:
        return False  # e^z of a nonzero rational is irrational
    import sympy

    from symattn.exact.numeric import round_expr

    power = sympy.exp(sympy.Rational(x.numerator, x.denominator))
    _, digits, exponent = shown.value.as_tuple()
    assert isinstance(exponent, int)  # a finite Decimal
    got = round_expr(power, len(digits), significant=True) if shown.scientific else round_expr(power, -exponent)
    return got == shown.value


def _dots(dots: Sequence[Dot]) -> bool:
    return all(dot_adds_up(d) for d in dots)


def _minus(a: Value, b: Value) -> Fraction | None:
    x, y = _exact(a), _exact(b)
    return None if x is None or y is None else x - y


def _softmax_row(row: Any) -> bool:
    """z − max, each e^z, their sum (with a denominator part's term), and each e^z / sum."""
    return (
        (row.shift is None or all(_adds(_minus(s, row.shift), z) for s, z in zip(row.scaled, row.z)))
        and all(_exp_adds_up(z, e) for z, e in zip(row.z, row.exp))
        and _adds(_sum(_exact(e) for e in row.exp + row.terms), row.total)
        and all(_adds(_ratio(e, row.total), w) for e, w in zip(row.exp, row.weights))
    )


def _ratio(a: Value, b: Value) -> Fraction | None:
    x, y = _exact(a), _exact(b)
    return None if x is None or not y else x / y


def _weighted_row(row: Any, V: Sequence[Sequence[Value]]) -> bool:
    """Each weight × its value vector, and their sum."""
    products = all(
        _adds(_times(w, v), p) for w, vector, shown in zip(row.weights, V, row.products) for v, p in zip(vector, shown)
    )
    return products and all(_adds(_sum(_exact(p[k]) for p in row.products), out) for k, out in enumerate(row.output))


def _grad_softmax_row(row: Any) -> bool:
    """J dA entry by entry, r = Σ dA α, and each α (dA − r)."""
    compact = all(
        _adds(_times(alpha, _Shown(_minus(dA, row.dot))), dz) for alpha, dA, dz in zip(row.alpha, row.dA, row.dZ)
    )
    return _dots(row.products) and _adds(_sum(_times(a, b) for a, b in row.dot_terms), row.dot) and compact


def _norm_row(row: Any) -> bool:
    """RMSNorm's backward of a row: s = Σ (w g)_j x_j, then each (w g)_t × 1/σ − x_t × s × 1/(d σ³)."""
    pairs = list(zip(row.wg, row.x))
    total = _sum(_times(a, b) for a, b in pairs)
    lines = all(
        _adds(_minus(_Shown(_times(a, row.inv)), _Shown(_times(_Shown(_times(x, row.dot)), row.inv3))), out)
        for (a, x), out in zip(pairs, row.out)
    )
    return _adds(total, row.dot) and lines


# the blocks of each step kind that show expanded lines, in the document's order
CHECKS: dict[str, Callable[[Any], list[bool]]] = {
    "projecting": lambda s: [_dots(p.dots) for p in s.products],
    "scores": lambda s: [_dots(s.dots)],
    "softmax": lambda s: [_softmax_row(row) for row in s.rows],
    "weighted_sum": lambda s: [_weighted_row(row, s.V) for row in s.rows],
    "matrix_form": lambda s: [_dots(s.dots)],
    "output_projection": lambda s: [_dots(s.dots)],
    "backward_values": lambda s: [_dots(s.dV_dots), _dots(s.dA_dots)],
    "backward_softmax": lambda s: [_grad_softmax_row(row) for row in s.rows],
    "backward_qk": lambda s: [_dots(s.dQ_dots), _dots(s.dK_dots)],
    "backward_norm": lambda s: [_norm_row(s.query), _norm_row(s.key)],
}
NESTED = ("head", "backward_head", "substitution")  # steps that hold a derivation of their own, shown in place


def _mark(derivation: Derivation, path: list[str]) -> Derivation | None:
    """The derivation with its first block that does not add up marked, or None if every line adds up."""
    for i, step in enumerate(derivation.steps):
        new: AnyStep | None = None
        if step.kind in NESTED:
            inner = _mark(step.derivation, path)  # type: ignore[attr-defined]
            if inner is not None:
                path.insert(0, step.kind)
                new = replace(step, derivation=inner)  # type: ignore[type-var]
        elif step.kind in CHECKS:
            at = next((j for j, ok in enumerate(CHECKS[step.kind](step)) if not ok), None)
            if at is not None:
                path.append(f"{step.kind}[{at}]")
                new = replace(step, note_at=at)  # type: ignore[type-var]
        if new is not None:
            return replace(derivation, steps=derivation.steps[:i] + (new,) + derivation.steps[i + 1 :])
    return None


def first_inexact(derivation: Derivation) -> str | None:
    """Where the first line that does not add up stands, as ``head/softmax[2]``; None if all add up."""
    path: list[str] = []
    if _mark(derivation, path) is None:
        return None
    return "/".join(p for p in path if p)


def mark_first_inexact(derivation: Derivation) -> Derivation:
    """In exact rounding, note the first block whose shown terms do not give its shown result."""
    if derivation.rounding != "exact":
        return derivation  # by hand every number comes from the numbers shown before it
    return _mark(derivation, []) or derivation
