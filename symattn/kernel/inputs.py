"""The float64 engine's inputs in memory: every (batch, head) as float32-valued arrays, and how the result's
batch and head axes lie.

Both ways into the engine build one of these and hand it to :func:`symattn.kernel.engine.run`: a spec
with its ``.npy``/``.safetensors`` files (:func:`of_spec`, for ``symattn compare``) and a kernel's tensors
in memory (:mod:`symattn.kernel.tensors`, for ``symattn.kernel.compare``). There is no second engine.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from symattn.input import limits
from symattn.input.errors import LimitError, ShapeError, SpecError
from symattn.input.floats import FloatResult
from symattn.input.records import record
from symattn.kernel import float64, float64_backward

GRADIENTS = {"dq": "dQ", "dk": "dK", "dv": "dV", "dsink": "dsink"}  # a kind as asked, the quantity the engine names


@record
class Inputs:
    """Every (batch, head)'s inputs, batch by batch and query head by query head (a
    float64_backward.GradientHead for dQ, dK and dV); the result's axes are in ``layout`` order."""

    heads: tuple[float64.Head, ...]
    batch: int = 1
    head_count: int = 1  # query heads per batch
    layout: str = "bhnd"  # or "bnhd"
    starts: tuple[int, ...] = ()  # varlen: cu_seqlens_q, each sequence's first token (places name it)
    key_starts: tuple[int, ...] = ()  # varlen: cu_seqlens_k (dK and dV are summed up by sequence and head)
    order: str | None = None  # where a cap and a distance bias both act: their order (variants.ORDER_KEY's value)


def of_spec(spec: Any, quantity: str, grad_output: FloatResult | None) -> Inputs | None:
    """A spec's inputs for the float64 path, or None where the exact path decides (decimal inputs,
    projections, W_O, a variant whose part it refuses); a batch the float64 path cannot take is refused."""
    from symattn import variants
    from symattn.kernel.heads import heads_of

    if quantity in GRADIENTS:
        if spec.kernel.batches or spec.heads > 1 or quantity == "dsink":  # dsink: (H,), summed over the batches
            from symattn.kernel.spec_gradients import batched_gradients

            return batched_gradients(spec, GRADIENTS[quantity], grad_output)
        if grad_output is None:
            grad_output = spec_grad_output(spec)
        gradient = _gradient_head(spec, grad_output)
        return None if gradient is None else Inputs((gradient,), layout=spec.kernel.layout)
    if grad_output is not None:
        raise SpecError("--grad-output", None, "is for --quantity dq, dk, dv or dsink")
    spec = replace(spec, backward=None)  # the forward pass: whatever [backward] says of dO
    if spec.kernel.batches:
        if quantity == "weights":  # as arrange refuses them with one batch (no batch is the float64 path's)
            from symattn.input.batched import WEIGHTS_AXES

            raise SpecError("--quantity", None, WEIGHTS_AXES)
        heads: list = []
        for b in range(spec.kernel.batch):
            part = heads_of(spec.of_batch(b), quantity)
            if part is None:
                refuse_no_float32(spec, f"a batch of {spec.kernel.batch} needs")
                raise SpecError(
                    spec.source,
                    "Q",
                    f"a batch of {spec.kernel.batch} needs the float64 path: Q, K and V of float32 values, and no "
                    f"projection, W_O, {variants.float64_words(noun=True)}",
                )
            heads += part
        return Inputs(tuple(heads), spec.kernel.batch, spec.heads, spec.kernel.layout)
    found = heads_of(spec, quantity)
    return None if found is None else Inputs(tuple(found), 1, spec.heads, spec.kernel.layout)


def refuse_no_float32(spec: Any, needs: str) -> None:
    """Refuse the first value of a batched spec's Q, K or V that is no float32 value, at its place in the file."""
    from symattn.input.batched import first_not_float32

    found = first_not_float32(spec.kernel.batches, spec.kernel.layout, spec.heads)
    if found is not None:
        key, where = found
        raise SpecError(spec.source, key, f"{where}; {needs} it")


def result_shape(inputs: Inputs, kind: str, dims: int) -> tuple[int, ...]:
    """The shape of the result ``kind`` (output, lse, dq, dk, dv) for a q of ``dims`` axes in the inputs' layout
    (the LSE has one axis fewer): its leading batch and head axes dropped where they are of length one."""
    head = inputs.heads[0]
    batch, heads, layout = inputs.batch, inputs.head_count, inputs.layout
    n, m, dv = head.Q.shape[0], head.K.shape[0], head.V.shape[1]
    if kind == "lse":
        full: tuple[int, ...] = (batch, heads, n)
        if dims <= 2:
            return (n,)
        dims -= 1
    else:
        rows, cols = {"dk": (m, head.K.shape[1]), "dv": (m, dv), "dq": (n, head.Q.shape[1])}.get(kind, (n, dv))
        full = (batch, heads, rows, cols) if layout == "bhnd" else (batch, rows, heads, cols)
        if dims <= 2:
            return (rows, cols)
    while len(full) > dims and full[0] == 1:
        full = full[1:]
    return full


def gradient_head(head: float64.Head, dO: np.ndarray, sqrt_scale: bool) -> float64_backward.GradientHead:
    """One head and the dO its gradients are for (float32 values); where the scale is 1/√d with d = 4^k,
    that scale is a float exactly."""
    fields = {f: getattr(head, f) for f in head.__dataclass_fields__}
    d = head.Q.shape[1]
    root = math.isqrt(d)
    factor, mods = float64.extras(head)
    if sqrt_scale and factor is None and root * root == d and root & (root - 1) == 0:
        fields.update(scale_error=0.0, exact_scale=Fraction(1, root))
    if factor is None and not mods:
        return float64_backward.GradientHead(**fields, dO=dO)
    return float64_backward.ModGradientHead(**fields, dO=dO)


def spec_grad_output(spec: Any) -> FloatResult | None:
    """The spec's own ``[backward] grad_output`` read from a file, as --grad-output's result; None else."""
    from symattn.input.filematrix import FileMatrix

    given = None if spec.backward is None else spec.backward.grad_output
    if not isinstance(given, FileMatrix):
        return None
    return FloatResult.of_array(f"{spec.source}: backward.grad_output", given.format, np.asarray(given.array))


def check_gradient_tokens(source: str, queries: int, keys: int, limit: int, path: str) -> None:
    if max(queries, keys) > limit:
        raise LimitError(
            source, "Q", f"{max(queries, keys)} tokens; --quantity dq, dk and dv take at most {limit} ({path})"
        )


def checked_grad_output(spec: Any, grad_output: FloatResult | None, limit: int, path: str) -> FloatResult:
    """grad_output, refused in one line where it is missing or not dO's shape, or the spec no single head
    of at most ``limit`` tokens."""
    if grad_output is None:
        raise SpecError("--grad-output", None, "missing: --quantity dq, dk and dv need the dO file they are for")
    if spec.projection is not None or spec.heads > 1 or spec.W_O is not None:
        raise SpecError(spec.source, "heads", "--quantity dq, dk and dv take one head of Q, K and V (no X, W or W_O)")
    check_gradient_tokens(spec.source, len(spec.Q), len(spec.K), limit, path)
    shape, got = (len(spec.Q), len(spec.V[0])), (len(grad_output.rows), len(grad_output.rows[0]))
    if got != shape:
        raise ShapeError(grad_output.source, "shape", f"dO is {got[0]}×{got[1]} and O is {shape[0]}×{shape[1]}")
    if grad_output.not_finite:
        (i, j), value = grad_output.not_finite[0]
        if grad_output.array is None:  # JSON: its typed rows, 1-based
            raise SpecError(grad_output.source, "dO", f"not a finite number: {value}", (i + 1, j + 1))
        at = np.unravel_index(i * shape[1] + j, grad_output.given or grad_output.array.shape)  # the file's own axes
        raise SpecError(grad_output.source, "dO", f"not a finite number: {value}", index=tuple(int(x) for x in at))
    return grad_output


def _gradient_head(spec: Any, grad_output: FloatResult | None) -> float64_backward.GradientHead | None:
    """The one head of the float64 path for dq, dk and dv (float64_backward), checked against its own
    limit; None where the exact path decides (inputs or dO no float32 values, scores it does not model)."""
    from symattn.kernel.deciding import is_double
    from symattn.kernel.heads import heads_of

    grad_output = checked_grad_output(spec, grad_output, limits.KERNEL_GRADIENT_TOKENS, "the float64 path")
    heads = None if spec.kernel.batches else heads_of(replace(spec, backward=None), "output")
    if heads is None:
        return None
    dO = grad_output.array
    if dO is None:  # JSON: its numbers exactly, where they are floats
        if not all(is_double(v) for row in grad_output.rows for v in row if v is not None):
            return None
        dO = np.array([[float(v) for v in row if v is not None] for row in grad_output.rows], dtype=np.float64)
    if dO.ndim != 2 or not float64.is_float32(dO):
        return None
    return gradient_head(heads[0], dO, spec.scale == "sqrt")


__all__ = [
    "GRADIENTS",
    "Inputs",
    "check_gradient_tokens",
    "checked_grad_output",
    "gradient_head",
    "of_spec",
    "refuse_no_float32",
    "result_shape",
    "spec_grad_output",
]
