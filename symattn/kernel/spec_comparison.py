"""How far a float result of attention is from the exact one: per entry in ULPs and relative, and in summary.

This is the tool a kernel author runs: save the kernel's O (or A) as ``.npy`` or JSON,
then ``symattn compare SPEC RESULT``. Each float is read exactly (``floats.py``); the
exact value is enclosed by the model's correctly rounded digits, and every error shown
is decided on that enclosure, so its three digits and its histogram bucket are right:
the model's precision doubles until both ends of the error's interval agree.

The ULP is that of the exact value in the result's format (the spacing of the floats
around it), so an error of at most 0.5 ULP means the float is the correctly rounded one.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

from symattn.input import limits
from symattn.input.errors import EvaluationError, ShapeError, SpecError
from symattn.input.floats import FloatResult
from symattn.kernel import spec_variants
from symattn.kernel.comparison import (
    EDGES,
    EXACT_DIGITS,
    START_DIGITS,
    Comparison,
    Entries,
    Entry,
    _decide,
    _half_unit,
)
from symattn.kernel.comparison_report import WORST, bucket_label, comparison_data, render_comparison

QUANTITIES = ("output", "weights", "lse", "dq", "dk", "dv", "dsink")
GRADIENTS = {"dq": "dQ", "dk": "dK", "dv": "dV"}  # for a given dO (--grad-output), from the backward model


def compare(
    spec: Any,
    result: FloatResult,
    quantity: str = "output",
    lse_base: str = "e",
    grad_output: FloatResult | None = None,
    worst: int | None = None,
) -> Comparison:
    """Compare a float matrix with the exact ``quantity`` (``output``, ``weights``, or ``lse``: each query's
    log-sum-exp of its scaled scores, natural or with ``lse_base`` "2" in base 2, one row per head; or
    ``dq``, ``dk``, ``dv``: the gradients for the dO of ``grad_output``) of a spec. With ``worst``, the
    float64 path decides only what a report of the ``worst`` largest errors shows (every bucket, the
    maxima, those entries); reading another entry is an error."""
    from symattn.input.spec import load_spec
    from symattn.kernel import engine, inputs

    if quantity not in QUANTITIES:
        raise SpecError("--quantity", None, f"expected one of {', '.join(QUANTITIES)}, got {quantity!r}")
    spec = load_spec(spec)
    if spec.is_symbolic:
        raise SpecError(spec.source, "subs", "compare needs numbers, not symbols")
    if lse_base not in ("e", "2"):
        raise SpecError("--lse-base", None, f"expected e or 2, got {lse_base!r}")
    how = "lse2" if quantity == "lse" and lse_base == "2" else GRADIENTS.get(quantity, quantity)
    fast = inputs.of_spec(spec, quantity, grad_output)
    if fast is not None:  # Q, K, V (and dO) of float32 values: the float64 path
        if quantity == "dsink":  # (H,): a number per query head, summed over the batches
            _per_head_shape(result, fast.head_count)
        fast = replace(fast, order=spec_variants.named_order(spec))  # its reports name it
        return engine.run(fast, result, how, worst, _matrix_places(spec, how))
    if quantity in GRADIENTS:
        spec = _with_grad_output(spec, grad_output)
    if quantity == "lse":
        raise SpecError(
            spec.source, "Q", "--quantity lse needs Q, K and V of float32 values (the exact floats a kernel saw)"
        )
    places, axes = _matrix_places(spec, how), None
    if result.array is not None and not result.rows:  # head axes (one batch): lined up as the float64 path does
        from symattn.input.batched import arrange
        from symattn.kernel.places import lined_places

        dims = result.array.ndim
        result = arrange(result, spec.kernel.layout, quantity, 1, spec.heads)
        axes = (1, spec.heads)
        places = lined_places(how, spec.kernel.layout, dims, 1, spec.heads, result.shape[1] // spec.heads)
    from symattn.kernel.places import as_given

    places = as_given(places, how, result.given, spec.kernel.layout)
    from symattn.exact.base import Rounding  # SymPy: the exact path only
    from symattn.exact.factory import build

    model: Any = build(spec)
    if quantity in GRADIENTS:
        model, quantity = model.backward, GRADIENTS[quantity]  # the spec has [backward] (_with_grad_output)
    assert isinstance(model, Rounding)  # every kind but the symbolic one rounds
    rationals = model.rationals(quantity)
    rows, cols = len(rationals), len(rationals[0])
    got = (len(result.rows), len(result.rows[0]))
    if got != (rows, cols):
        raise ShapeError(
            result.source,
            "shape",
            f"the result is {result.shape_text()} and the exact {quantity} is {result.shape_text(rows, cols)}",
        )
    shown = model.significant(quantity, EXACT_DIGITS)
    pending = {(i, j) for i in range(rows) for j in range(cols) if result.rows[i][j] is not None}
    decided: dict[tuple[int, int], tuple[Decimal | None, Decimal | None, int]] = {}
    digits = START_DIGITS
    while True:
        approx = model.significant(quantity, digits) if any(rationals[i][j] is None for i, j in pending) else None
        for i, j in sorted(pending):
            x = result.rows[i][j]
            assert x is not None  # pending holds the finite floats only
            exact = rationals[i][j]
            if exact is not None:
                lo = hi = exact
            else:
                assert approx is not None  # computed while an entry without an exact value is pending
                middle = Fraction(approx[i][j])
                half = _half_unit(approx[i][j])
                lo, hi = middle - half, middle + half
            outcome = _decide(x, lo, hi, result.format)
            if outcome is not None:
                decided[(i, j)] = outcome
        pending -= set(decided)
        if not pending:
            break
        digits *= 2
        if digits > limits.DIGITS:
            i, j = min(pending)
            raise EvaluationError(
                f"{result.source}: the error of {places.text(i, j)} is not decided at {limits.DIGITS} digits"
            )
    entries = []
    for i in range(rows):
        for j in range(cols):
            if (i, j) in decided:
                ulps, relative, bucket = decided[(i, j)]
                entries.append(Entry(i, j, result.rows[i][j], shown[i][j], ulps, relative, bucket))
            else:
                entries.append(Entry(i, j, None, shown[i][j], None, None, len(EDGES)))
    from symattn.kernel.enclosing import ExactEnclosure
    from symattn.kernel.rowscale import row_relative

    enclosure = ExactEnclosure(model, quantity, rationals, digits)
    zero = {(e.row, e.col) for e in entries if e.ulps == 0}  # an error of exactly 0 ULP: x is the exact value
    figures = row_relative(result, enclosure, zero, places=places)
    entries = [replace(e, row_relative=figures.at(e.row, e.col)) for e in entries]
    return Comparison(
        result.source,
        quantity,
        result.format,
        Entries(entries),
        result.not_finite,
        digits,
        None,
        axes,
        places=places,
        order=spec_variants.named_order(spec),
        enclose=lambda: enclosure,
    )


def _matrix_places(spec: Any, quantity: str) -> Any:
    """A matrix result's places; several heads' outputs side by side (no W_O) have a segment of columns each."""
    from symattn.kernel.places import matrix_places

    segment = None
    if quantity == "output" and spec.heads > 1 and spec.W_O is None:
        segment = len(spec.V[0]) // spec.kv_groups
    return matrix_places(quantity, spec.heads, segment)


def _per_head_shape(result: FloatResult, heads: int) -> None:
    """A dsink result is (H,), as the API takes it (tensors.result_of); a file of one row of H is read as one."""
    given = result.given or (result.array.shape if result.array is not None else result.shape)
    if tuple(given) != (heads,):
        raise ShapeError(result.source, "shape", f"{tuple(given)}; the dsink of this spec is ({heads},)")


def _with_grad_output(spec: Any, grad_output: FloatResult | None) -> Any:
    """The spec with ``[backward]`` given as the dO of a result file (its floats exactly), checked."""
    from symattn.input.numeral import Numeral
    from symattn.input.parts import Backward
    from symattn.kernel.inputs import checked_grad_output

    grad_output = checked_grad_output(spec, grad_output, limits.GRADIENT_TOKENS, "the exact backward pass")
    rows = tuple(tuple(Numeral(str(v), v, "fraction", None) for v in row if v is not None) for row in grad_output.rows)
    return replace(spec, backward=Backward("given", grad_output=rows))


__all__ = ["WORST", "Comparison", "Entry", "bucket_label", "compare", "comparison_data", "render_comparison"]
