"""dQ, dK and dV of a spec with batch and head axes (``symattn compare --quantity dq``): its heads and dO.

dO comes from ``--grad-output`` (a ``.npy`` or ``.safetensors`` file of O's shape, in the spec's layout)
or, where that is not given, from the spec's own ``[backward] grad_output`` file. The heads are those of
:mod:`symattn.kernel.gradient_heads`, as ``symattn.kernel.compare`` makes them from tensors.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from symattn import variants
from symattn.input import limits, tensorfile
from symattn.input.errors import ShapeError, SpecError
from symattn.input.floats import FloatResult
from symattn.kernel import float64
from symattn.kernel.gradient_heads import gradient_heads, logit_gradients
from symattn.kernel.inputs import Inputs, check_gradient_tokens, refuse_no_float32


def batched_gradients(spec: Any, quantity: str, grad_output: FloatResult | None) -> Inputs:
    """The float64 path's inputs for ``quantity`` (dQ, dK, dV, dsink) of every (batch, head) of ``spec``."""
    from symattn.kernel.heads import heads_of

    batch, heads, layout = spec.kernel.batch, spec.heads, spec.kernel.layout
    asked = "dsink" if quantity == "dsink" else "dq, dk and dv"
    if spec.projection is not None or spec.W_O is not None:
        raise SpecError(spec.source, "heads", f"--quantity {asked} of several heads take Q, K and V (no W or W_O)")
    forward: list[float64.Head] = []
    for b in range(batch):
        part = heads_of(replace(spec.of_batch(b), backward=None), "output")
        if part is None:
            refuse_no_float32(spec, f"--quantity {asked} of {batch} batches × {heads} heads need")
            raise SpecError(
                spec.source,
                "Q",
                f"--quantity {asked} of {batch} batches × {heads} heads need the float64 path: Q, K and V of "
                f"float32 values, and no {variants.float64_words(noun=True)}",
            )
        forward += part
    if quantity == "dsink" and not float64.extra_logits(forward[0], slice(0, 1), 1):
        given = variants.argument_of("denominator_logit")
        why = "missing: --quantity dsink is the gradient of the logits this key gives (a number per query head)"
        raise SpecError(spec.source, given, why)
    n, m, dv = len(spec.Q), len(spec.K), forward[0].V.shape[1]
    check_gradient_tokens(spec.source, n, m, limits.KERNEL_GRADIENT_TOKENS, "the float64 path")
    dO = _grad_output(spec, grad_output, (batch, heads, n, dv))
    if quantity == "dsink":  # a LogitGradient per query head (gradient_heads.logit_gradients), one row
        made = logit_gradients(forward, dO, spec.scale == "sqrt")
        assert made is not None  # the logit is there (above)
        return Inputs(tuple(made), 1, heads)
    made, count = gradient_heads(forward, dO, quantity, spec.kv_groups, spec.scale == "sqrt")
    return Inputs(tuple(made), batch, count, layout)


def _grad_output(spec: Any, grad_output: FloatResult | None, shape: tuple[int, int, int, int]) -> np.ndarray:
    """dO as (B, H, N, dv) float32 values: --grad-output's file, else the spec's [backward] grad_output."""
    from symattn.input.batched import to_bhnd
    from symattn.input.filematrix import FileMatrix

    batch, heads, n, dv = shape
    layout = spec.kernel.layout
    if grad_output is not None and grad_output.array is None and batch == 1:  # JSON: the rows of O, N × H·dv
        return _typed(grad_output.source, grad_output.rows, n, heads, dv)
    if grad_output is not None:
        source, values = grad_output.source, grad_output.array
        if values is not None and values.ndim == 2 and batch == heads == 1:  # one head's dO (dsink)
            values = values[None, None] if layout == "bhnd" else values[None, :, None]
        if values is None or values.ndim not in (3, 4):
            why = f"dO of {batch} batches × {heads} heads: a .npy or .safetensors file of O's shape"
            raise ShapeError(source, "shape", why)
        dO = to_bhnd(values, layout)
        if dO.shape != shape:
            want = shape if layout == "bhnd" else (batch, n, heads, dv)
            raise ShapeError(source, "shape", f"dO is {tuple(values.shape)} and O is {want} ({layout})")
        found = tensorfile.not_float32(values)
        if found is not None:  # named in the file's own axes, its value said
            raise SpecError(source, "dO", found[1], index=found[0])
    else:
        given = None if spec.backward is None else spec.backward.grad_output
        if given is None:
            why = "missing: --quantity dq, dk, dv and dsink need dO (--grad-output, or [backward] grad_output)"
            raise SpecError("--grad-output", None, why)
        if not isinstance(given, FileMatrix):  # typed in the spec: its rows of numbers, N × H·dv as O's
            return _typed(
                f"{spec.source}: backward.grad_output", [[x.value for x in row] for row in given], n, heads, dv
            )
        source = f"{spec.source}: backward.grad_output"
        rows = [given, *spec.kernel.grad_outputs]
        dO = np.stack([np.asarray(r.array).reshape(n, heads, dv).transpose(1, 0, 2) for r in rows])
        found = tensorfile.not_float32(dO)  # (B, H, N, dv) as the heads were lined up, whatever the file's axes
        if found is not None:
            b, h, i, c = found[0]
            raise SpecError(source, "dO", f"batch {b}, head {h}, query {i}, column {c}: {found[1]}")
    return np.ascontiguousarray(dO)


def _typed(source: str, rows: Any, n: int, heads: int, dv: int) -> np.ndarray:
    """dO of one batch from rows of exact numbers (a JSON file's, or typed in the spec) laid out as O is, N × H·dv:
    each must be a float32 value, as a kernel's dO is (a rational that is none is refused, not rounded)."""
    if (len(rows), len(rows[0])) != (n, heads * dv):
        raise ShapeError(source, "shape", f"dO is {len(rows)}×{len(rows[0])} and O is {n}×{heads * dv}")
    for i, row in enumerate(rows):
        for j, x in enumerate(row):
            if x is None or Fraction(float(np.float32(x))) != x:
                shown = "not finite" if x is None else repr(float(x))  # 0.1, as typed
                raise SpecError(source, "dO", f"{shown} is not a float32 value", (i + 1, j + 1))
    values = np.array([[float(x) for x in row] for row in rows], dtype=np.float64)
    return np.ascontiguousarray(values.reshape(n, heads, dv).transpose(1, 0, 2)[None])


__all__ = ["batched_gradients"]
