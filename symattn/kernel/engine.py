"""The float64 engine's one entry: in-memory inputs and a float result in, a Comparison out.

``symattn compare`` (a spec and its files) and ``symattn.kernel.compare`` (a kernel's tensors) both build
:class:`~symattn.kernel.inputs.Inputs` and call :func:`run`: the same heads, the same lining up of batch
and head axes, the same places, so the same figures, byte for byte.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from symattn.input.floats import FloatResult
from symattn.kernel.comparison import Comparison
from symattn.kernel.inputs import Inputs


def run(
    inputs: Inputs,
    result: FloatResult,
    quantity: str,
    worst: int | None = None,
    places: Any = None,
    symbol: str | None = None,
    complete: bool = False,
) -> Comparison:
    """Compare ``result`` with the exact ``quantity`` (output, weights, lse, lse2, dQ, dK, dV) of ``inputs``.

    A result with batch and head axes (or inputs of several batches) is lined up as the heads are, and its
    places name those axes; a matrix result keeps ``places`` (places.Places). With ``worst``, only what a
    report of the ``worst`` largest errors and each (batch, head)'s summary show is decided; reading any other
    entry is an error, or with ``complete`` decides every entry then (``Comparison.whole``, the JSON's, which
    a tie of figures past the entries decided reads in either case: kernel/ties.py).
    ``symbol`` names the result in every place (``out[1, 2, 77, 5]``); None keeps the quantity's own (``o``).
    """
    from symattn.input.batched import arrange
    from symattn.kernel.heads import compare_head
    from symattn.kernel.places import as_given, lined_places

    heads = list(inputs.heads)
    axes = None
    if inputs.batch > 1 or (result.array is not None and not result.rows):  # batch and head axes
        dims = result.array.ndim if result.array is not None else 2
        _check_shape(inputs, result, quantity)
        result = arrange(result, inputs.layout, quantity, inputs.batch, inputs.head_count)
        axes = (inputs.batch, inputs.head_count)
        width = result.shape[1] // (inputs.batch * inputs.head_count)
        places = lined_places(quantity, inputs.layout, dims, inputs.batch, inputs.head_count, width)
    if places is not None:
        places = as_given(places, quantity, result.given, inputs.layout)
    if symbol is not None:
        places = replace(places, symbol=symbol)
    if inputs.starts:  # varlen: a query is a token of the packed sequences, and its place names its sequence
        named = tuple("token" if a == "query" else a for a in places.axes)
        sequences = inputs.key_starts if quantity in ("dK", "dV") else inputs.starts  # a row of dK is a key's
        places = replace(places, axes=named, starts=inputs.starts, sequences=sequences)
    comparison = replace(
        compare_head(heads, result, quantity, worst, places), batch_heads=axes, places=places, order=inputs.order
    )
    if worst is None:
        return comparison

    @cache
    def whole() -> Comparison:  # every entry decided: the same figures, as the decided ones are (tests/test_lean.py)
        whole = compare_head(heads, result, quantity, None, places)
        return replace(whole, batch_heads=axes, places=places, order=inputs.order)

    if complete:  # an EntryTable: its entries not decided read these (else reading one is an error)
        comparison.entries.full = lambda: whole().entries
    return replace(comparison, complete=whole)  # ties.order's figures tied past those decided read it too


def _check_shape(inputs: Inputs, result: FloatResult, quantity: str) -> None:
    """Refuse a result not of the inputs' shape in the shapes as given (``(2, 4, 63, 16); the output of
    these q, k and v is (2, 4, 64, 16)``), not in the matrix the heads are lined up in."""
    from symattn.input.errors import ShapeError
    from symattn.kernel.inputs import result_shape

    if result.array is None or quantity in ("weights", "dsink"):  # weights: refused by arrange
        return
    given = tuple(result.given or result.array.shape)
    kind = "lse" if quantity == "lse2" else quantity.lower() if quantity in ("dQ", "dK", "dV") else quantity
    wanted = result_shape(inputs, kind, len(given) + (kind == "lse"))  # the q of an LSE has one axis more
    if given != wanted:
        raise ShapeError(result.source, "shape", f"{given}; the {kind} of these q, k and v is {wanted}")


__all__ = ["run"]
