"""A spec's variants on the float64 path (``symattn compare SPEC``): each part's setting as the rule of
:mod:`symattn.kernel.score_mods` that ``symattn.kernel.compare`` takes its keyword by (``Part.kernel_rule``),
so that a spec and tensors make the same heads.

A kernel saw binary values. A spec's number that is exactly a float64 value (30, 0.5, 0.125, or any float's
whole decimal expansion) is that value. One that is not (0.1, or a paper's slope 2^(−8/3)) is refused
in one line naming the key and its position: whether the kernel took float32's 0.100000001490116… or float64's
0.1000000000000000055… is not the spec's to guess, and exact values of the wrong one would put the rounding of
the setting into the kernel's error. The exact path still takes such a spec's decimals as written, where Q, K
and V are decimals too (no float32 values: no kernel's).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np

from symattn.input.errors import SpecError
from symattn.kernel import score_mods
from symattn.kernel.deciding import is_double


def check(spec: Any) -> None:
    """Refuse a variant's number that is no float64 value, naming its key and 1-based position."""
    from symattn import variants

    for part, setting in variants.kernel_parts(spec):
        for number in part.kernel_numbers(setting):
            if number.value is None or not is_double(number.value):
                raise SpecError(spec.source, number.key, _refusal(number, part.argument), number.position or ())


def keywords(source: str, given: dict[str, Any]) -> dict[str, Any]:
    """A layout spec's variants (input/kernel_spec.py) as compare's keywords: a file's
    array as it is (its floats exactly), numbers as the floats they must be (one, or a list)."""
    out: dict[str, Any] = {}
    for key, value in given.items():
        if not isinstance(value, tuple):  # tensorfile.Array
            out[key] = value
            continue
        for number in value:
            if not is_double(number.value):
                raise SpecError(source, key, _refusal(number, key), number.position or ())
        floats = [float(number.value) for number in value]
        out[key] = floats[0] if value[0].position is None else np.array(floats)
    return out


def _refusal(number: Any, argument: str) -> str:
    why = "the float64 path takes the binary values a kernel saw"
    if number.value is None:
        return f"{number.text} is no float64 value, and {why}: give the kernel's as {argument}"
    x = float(number.value)
    nearest = f"float32: {Decimal(float(np.float32(x)))}; float64: {Decimal(x)}"
    return f"{number.text} is no float64 value, and {why}: give the float's exact decimal ({nearest})"


def named_order(spec: Any) -> str | None:
    """The spec's order of a cap and a distance bias where it has both (its reports name it), else None."""
    from symattn import variants

    kinds = {part.kernel_rule for part, _ in variants.kernel_parts(spec)}
    return variants.spec_order(spec) if variants.ORDER_ACTS <= kinds else None


def mods(spec: Any, n: int, m: int) -> tuple[Any, ...]:
    """The score rules of a single-head spec of n queries and m keys, in the order they act (its numbers
    checked by :func:`check`)."""
    from symattn import variants

    given = spec.setting("positions")  # a distance bias counts the spec's positions, where it gives them
    placed = None if given is None else (given.queries, given.keys)
    rules = []
    for part, setting in variants.kernel_parts(spec):
        numbers = [float(x.value) for x in part.kernel_numbers(setting) if x.value is not None]  # check()ed
        value = np.array(numbers) if part.kernel_per_head else numbers[0]
        rule = score_mods.of_argument(part.kernel_rule, part.argument, value, 1, 1, "top-left", placed)
        if rule is not None:
            rules.append(rule)
    order = variants.rule_order(variants.spec_order(spec), keyword=False)[0]
    return tuple(rule(0, 0, n, m) for rule in sorted(rules, key=lambda r: order.index(r.kind)))


__all__ = ["check", "keywords", "mods", "named_order"]
