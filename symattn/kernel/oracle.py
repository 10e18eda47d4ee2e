"""``symattn.kernel.compare``: a kernel's result in memory against the exact values, in one call.

The kernel author's tensors go where ``symattn compare`` takes a spec and files: the same engine
(:func:`symattn.kernel.engine.run`), the same verdicts (``tolerance.py``), the same reports
(:class:`symattn.kernel.report.Report`: ``to_json()`` is ``symattn compare --format json``, ``text()`` its
text). A result is named ``out`` in every place: ``out[1, 2, 77, 5]``, numpy's 0-based indices on the
result's own axes.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from symattn import variants
from symattn.input.errors import SpecError
from symattn.kernel import engine, record, report, spread, tensors
from symattn.kernel.comparison_report import WORST
from symattn.kernel.inputs import GRADIENTS
from symattn.kernel.places import matrix_places
from symattn.kernel.tolerance import ALLCLOSE_ATOL, ALLCLOSE_RTOL, checked_tolerance, parse_tolerance, parse_ulps

PACKING = ("cu_seqlens_q", "cu_seqlens_k", "block_table", "seqlens_k", "q_descale", "k_descale", "v_descale")


def compare(
    out: Any,
    q: Any,
    k: Any,
    v: Any,
    *,
    kind: str = "output",
    dout: Any = None,
    causal: bool = False,
    causal_align: str = "top-left",
    window: int | tuple[int, int] | None = None,
    scale: float | None = None,
    layout: str = "bhnd",
    cu_seqlens_q: Any = None,
    cu_seqlens_k: Any = None,
    block_table: Any = None,
    seqlens_k: Any = None,
    q_descale: Any = None,
    k_descale: Any = None,
    v_descale: Any = None,
    rule: str | None = None,
    reference: Any = None,
    rtol: Any = None,
    atol: Any = None,
    max_ulp: Any = None,
    lse_base: str | int = "e",
    worst: int | None = WORST,
    **variant_arguments: Any,
) -> report.Report:
    """How far a kernel's ``out`` is from the exact attention of ``q``, ``k``, ``v``: a
    :class:`~symattn.kernel.report.Report` (``.ok``, ``.comparison``, ``.verdict``, ``.to_json()``, ``.text()``).

    ``out``: the kernel's output O (``kind="output"``), its log-sum-exp (``"lse"``, (B, H, N), natural or
    with ``lse_base="2"`` base 2) or the gradient dQ, dK or dV (``"dq"``, ``"dk"``, ``"dv"``, for the ``dout``
    it was given: dQ per query head, dK and dV per key/value head), or the gradient of the logits a DENOMINATOR
    part's keyword gives (``"dsink"``, (H,), summed over the batches); a list of several results of one kernel
    reports their bitwise spread
    and each one's own figures (``Report.runs``, ``Report.spread``). Tensors are torch's (any device) or
    numpy's, in any float format from float8 to float64, read exactly; K and V may have fewer heads than Q.

    ``rule``: "allclose" (|out − exact| ≤ atol + rtol·|exact| for every entry; torch.allclose's 1e-5 and
    1e-8 for a tolerance not given), "flash" (FlashAttention's max|out − exact| ≤ rtol·max|reference −
    exact| + atol, rtol 2 and atol 0 unless given; needs ``reference``, the naive attention in the
    kernel's dtype) or "ulp" (every error at most ``max_ulp`` ULP). None: "flash" with a reference,
    "allclose" with rtol or atol, else no verdict. ``max_ulp`` holds beside any rule. ``worst``: the largest
    errors ``text()`` lists (None: every entry). A variant's keyword, as FlashAttention names it (each part
    of :mod:`symattn.variants` says its own), takes the float64 path where the part names a rule of
    kernel/score_mods.py for it, and is refused in one line where not; ``variants.ORDER_KEY`` says where a cap
    acts beside a distance bias ("before-bias", FlashAttention's and the default, or "after-bias"); any other
    keyword is a TypeError.
    """
    packing = dict(zip(PACKING, (cu_seqlens_q, cu_seqlens_k, block_table, seqlens_k, q_descale, k_descale, v_descale)))
    for name, value in variant_arguments.items():  # a variant's keyword, as FlashAttention names it
        if name == variants.ORDER_KEY:  # where the cap acts beside the distance bias (FlashAttention's: before)
            packing["order"] = value
            continue
        if variants.kernel_rule(name):  # on the float64 path in memory (kernel/score_mods.py)
            packing.setdefault("variants", {})[name] = value
            continue
        refusal = variants.argument_refusal(name)
        if refusal is None:
            raise TypeError(f"compare() got an unexpected keyword argument {name!r}")
        if value is not None:
            raise SpecError(name, None, refusal)
    if kind not in tensors.KINDS:
        raise SpecError("kind", None, f"expected one of {', '.join(tensors.KINDS)}, got {kind!r}")
    lse_base = base_of(lse_base)
    if worst is not None:  # a whole number (numpy's too), not a bool: True is no count
        whole = not isinstance(worst, bool) and hasattr(type(worst), "__index__")
        if not whole or worst.__index__() < 1:
            raise SpecError("worst", None, f"expected a whole number from 1 up, or None (every entry), got {worst!r}")
        worst = worst.__index__()
    rtol, atol, bound = _tolerance(rtol, "rtol"), _tolerance(atol, "atol"), _ulps(max_ulp)
    if not isinstance(causal, bool | np.bool_):  # "yes" would be true, and so would "no"
        raise SpecError("causal", None, f"expected True or False, got {causal!r}")
    window = _whole_numbers(window)
    masks = {"causal": bool(causal), "causal_align": causal_align, "window": window, "scale": scale, "layout": layout}
    return judged(out, q, k, v, kind, dout, masks, packing, rule, reference, rtol, atol, bound, lse_base, worst)


def _whole_numbers(window: Any) -> Any:
    """A window (w, or FlashAttention's (left, right)) given as numpy's or torch's integers, as Python's: a
    window computed from a shape is numpy's int64. Anything else is left for the window's own check."""

    def whole(x: Any) -> Any:
        return x.__index__() if not isinstance(x, bool) and hasattr(type(x), "__index__") else x

    if hasattr(window, "tolist") and hasattr(window, "ndim"):  # numpy's or torch's array: (2,) a pair, () one
        window = window.tolist()
    return tuple(whole(x) for x in window) if isinstance(window, (tuple, list)) else whole(window)


def judged(
    out: Any,
    q: Any,
    k: Any,
    v: Any,
    kind: str,
    dout: Any,
    masks: dict[str, Any],
    packing: dict[str, Any],
    rule: str | None,
    reference: Any,
    rtol: Fraction | None,
    atol: Fraction | None,
    bound: Decimal | None,
    lse_base: str,
    worst: int | None,
    keys: Any = None,
    symbol: str | None = "out",
    sources: tuple[str, ...] = (),
    reference_name: str = "reference",
) -> report.Report:
    """compare's report from its checked arguments; ``keys``: attention over a split's keys alone (a
    partials.Split of flash-decoding), ``symbol`` the result's name in places (None:
    the quantity's, as ``symattn compare`` names a file's), ``sources`` the results' names (their files)."""
    naive = rule_inputs(rule, reference, rtol, atol, bound)
    given = tensors.exact_array(q, "q"), tensors.exact_array(k, "k"), tensors.exact_array(v, "v")
    grad = None if dout is None else tensors.exact_array(dout, "dout")
    inputs = tensors.inputs_of(*given, kind=kind, dout=grad, packing=packing, **masks)
    if keys is not None:
        from symattn.kernel.partials import restricted

        inputs = restricted(inputs, keys)
    dims = given[0].values.ndim
    how = "lse2" if kind == "lse" and lse_base == "2" else GRADIENTS.get(kind, kind)
    places = matrix_places(how, inputs.head_count if dims > 2 else 1)
    runs = runs_of(out)
    sources = sources or (("out",) if len(runs) == 1 else tuple(f"run {i}" for i in range(len(runs))))
    results = [tensors.result_of(tensors.exact_array(r, s), kind, inputs, dims, s) for r, s in zip(runs, sources)]
    against = None
    if naive is not None:
        against = tensors.result_of(tensors.exact_array(naive, reference_name), kind, inputs, dims, reference_name)
    if rule == "allclose" and rtol is None and atol is None:  # torch.allclose's defaults, as the CLI's
        rtol, atol = ALLCLOSE_RTOL, ALLCLOSE_ATOL
    # a verdict or several runs read every entry (its worst place, the spread); the text alone its few
    plain = rule is None and naive is None and rtol is None and atol is None and bound is None and len(results) == 1
    reports = []
    for result in results:
        comparison = engine.run(inputs, result, how, worst if plain else None, places, symbol=symbol, complete=True)
        shape = result.given or (tuple(result.array.shape) if result.array is not None else result.shape)
        reports.append(report.judge(comparison, result, against, rtol, atol, bound, shape, worst))
    made = reports[0]
    if len(reports) > 1:
        where = made.comparison.where
        made = report.of_runs(reports, spread.spread([where.line_up(r) for r in results], made.comparison.format))
    record.add(made, kind)
    return made


def runs_of(out: Any) -> list[Any]:
    """The results given: several runs of one kernel (a list or tuple of tensors or arrays), or one."""
    several = isinstance(out, (list, tuple)) and len(out) > 0 and all(hasattr(r, "shape") for r in out)
    return list(out) if several else [out]


def base_of(lse_base: Any) -> str:
    """ "e" or "2" for an LSE's base as given: those texts, or the number 2 (as the CLI's ``--lse-base 2``)."""
    if not isinstance(lse_base, bool) and lse_base == 2:
        return "2"
    if lse_base not in ("e", "2"):
        raise SpecError("lse_base", None, f"expected 'e' or '2' (or 2), got {lse_base!r}")
    return lse_base


def rule_inputs(rule: str | None, reference: Any, rtol: Any, atol: Any, bound: Decimal | None) -> Any:
    """The reference a rule needs (None where it takes none), each rule's arguments checked."""
    if rule not in (None, *report.RULES):
        raise SpecError("rule", None, f"expected one of {', '.join(report.RULES)}, got {rule!r}")
    if rule == "flash" and reference is None:
        raise SpecError("reference", None, "missing: FlashAttention's rule measures out against the naive reference")
    if rule == "ulp" and bound is None:
        raise SpecError("max_ulp", None, "missing: rule='ulp' needs the bound")
    if rule in ("allclose", "ulp") and reference is not None:
        raise SpecError("reference", None, f"is for rule='flash'; rule={rule!r} measures out alone")
    if rule == "ulp" and (rtol is not None or atol is not None):
        raise SpecError("rtol" if rtol is not None else "atol", None, "is for rule 'allclose' or 'flash'")
    return reference


def _tolerance(value: Any, name: str) -> Fraction | None:
    """A tolerance as the decimal a person writes: 1e-3 is 1/1000 (a float by its shortest repr)."""
    if value is None:
        return None
    if isinstance(value, Fraction):
        return checked_tolerance(value, name)
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise SpecError(name, None, f"expected a number such as 1e-3, got {value!r}")
    return parse_tolerance(repr(value) if isinstance(value, float) else str(value), name)


def _ulps(value: Any) -> Decimal | None:
    if value is None:
        return None
    found = None if isinstance(value, bool) else parse_ulps(repr(value) if isinstance(value, float) else str(value))
    if found is None:
        raise SpecError("max_ulp", None, f"expected a number of ULPs such as 0.5, 2 or 1e3, got {value!r}")
    return found


__all__ = ["PACKING", "compare", "judged", "runs_of"]
