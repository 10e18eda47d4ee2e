"""A kernel's tensors in memory as the float64 engine's inputs and results, read exactly.

torch tensors (on any device: moved to the CPU, detached) and numpy arrays (ml_dtypes' bfloat16 and
float8 included) of any float format: every float8, float16, bfloat16 and float32 value is a float32
value and widens to float64 exactly, so nothing is rounded on the way in. Q, K and V come as (B, H, N, D)
(``layout="bhnd"``), (B, N, H, D) (``"bnhd"``), without the batch axis, or as one head's (N, D); K and V
may have fewer heads than Q (grouped-query, multi-query), which the shapes say.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from symattn.input import limits
from symattn.input.errors import LimitError, ShapeError, SpecError
from symattn.input.floats import FORMATS, FloatResult
from symattn.input.tensorfile import Array, not_float32
from symattn.kernel import float64, layouts, score_mods
from symattn.kernel.gradient_heads import gradient_heads
from symattn.kernel.inputs import GRADIENTS, Inputs, check_gradient_tokens, result_shape

LAYOUTS = ("bhnd", "bnhd")
KINDS = ("output", "lse", "dq", "dk", "dv", "dsink")
DESCALES = ("q_descale", "k_descale", "v_descale")


def exact_array(x: Any, name: str) -> Array:
    """A tensor or array as float64 values (exactly the given floats) and its format; an Array (a file's, as
    ``symattn compare`` reads it) as it is."""
    if isinstance(x, Array):
        return x
    if type(x).__module__.partition(".")[0] == "torch":
        t = layouts.dense_torch(x, name)
        fmt = str(t.dtype).removeprefix("torch.")
        if fmt not in FORMATS:
            raise SpecError(name, None, f"dtype {t.dtype}; expected one of {', '.join(FORMATS)}")
        if fmt not in ("float16", "float32", "float64"):  # bfloat16 and float8: numpy has no such dtype
            t = t.float()  # exact: each of their values is a float32 value
        values = t.numpy()
    else:
        values = np.asarray(x)
        fmt = values.dtype.name
        if fmt not in FORMATS:
            raise SpecError(name, None, f"dtype {values.dtype}; expected one of {', '.join(FORMATS)}")
    if values.ndim > 4 or values.size > limits.TENSOR_ENTRIES:
        raise LimitError(name, "shape", f"{tuple(values.shape)}; at most 4 axes and {limits.TENSOR_ENTRIES} entries")
    return Array(fmt, np.ascontiguousarray(values, dtype=np.float64))


def _bhnd(values: np.ndarray, layout: str) -> np.ndarray:
    """(B, H, N, D) of a 4-, 3- or 2-axis array in ``layout``."""
    if values.ndim == 2:
        return values[None, None]
    if values.ndim == 3:
        values = values[None]
    return values if layout == "bhnd" else values.transpose(0, 2, 1, 3)


def inputs_of(
    q: Array,
    k: Array,
    v: Array,
    *,
    kind: str,
    dout: Array | None,
    causal: bool,
    causal_align: str,
    window: Any,
    scale: Any,
    layout: str,
    packing: dict[str, Any] | None = None,
) -> Inputs:
    """The engine's inputs for the tensors of one call (checked: one line naming the argument for each fault).
    ``packing``: varlen's cu_seqlens_q/k, a paged cache's block_table and seqlens_k, FP8's descales."""
    if layout not in LAYOUTS:
        raise SpecError("layout", None, f"expected {' or '.join(map(repr, LAYOUTS))}, got {layout!r}")
    given = {name: x for name, x in (packing or {}).items() if x is not None}
    mode = "varlen" if {"cu_seqlens_q", "cu_seqlens_k"} & set(given) else "standard"
    if {"block_table", "seqlens_k"} & set(given):
        if mode == "varlen":
            raise SpecError("block_table", None, "give varlen's cu_seqlens or a paged cache's block_table, not both")
        mode = "paged"
    if mode == "standard" and (not q.values.ndim == k.values.ndim == v.values.ndim or q.values.ndim not in (2, 3, 4)):
        shapes = ", ".join(f"{n} {tuple(a.values.shape)}" for n, a in zip("qkv", (q, k, v)))
        raise ShapeError("q", "shape", f"q, k and v need 2, 3 or 4 axes alike ({layout}); got {shapes}")
    for name, given_array in (("q", q), ("k", k), ("v", v)):
        if 0 in given_array.values.shape:
            raise ShapeError(name, "shape", "an axis of length 0 (no entries)")

    def allowed_of(n: int, m: int) -> np.ndarray | None:
        return _allowed(n, m, causal, causal_align, window)

    allowed_of(1, 1)  # the keywords checked once, before any sequence's mask names its sequence

    if mode == "varlen":
        Q, packed = layouts.varlen(
            q.values, k.values, v.values, given.get("cu_seqlens_q"), given.get("cu_seqlens_k"), allowed_of
        )
        layout = "bnhd"  # (total, heads, d): a batch of one without its axis, as bnhd
    elif mode == "paged":
        if q.values.ndim != 4:
            raise ShapeError(
                "q", "shape", f"{tuple(q.values.shape)}; with a KV cache q is (batch, queries, heads, d) ({layout})"
            )
        Q = _bhnd(q.values, layout)
        packed = layouts.paged(k.values, v.values, given.get("block_table"), given.get("seqlens_k"), Q.shape[0], layout)
    else:
        Q, K4, V4 = (_bhnd(a.values, layout) for a in (q, k, v))
        if K4.shape[0] != Q.shape[0] or V4.shape[0] != Q.shape[0]:
            raise ShapeError("k", "shape", f"a batch of {K4.shape[0]} (k) and {V4.shape[0]} (v); q has {Q.shape[0]}")
        if V4.shape[1:3] != K4.shape[1:3]:
            raise ShapeError(
                "v", "shape", f"v {tuple(V4.shape)} needs the heads and keys of k {tuple(K4.shape)} (bhnd)"
            )
        for name, whole in (("k", k), ("v", v)):
            _float32_values(name, whole.values)
        packed = layouts.Packed(list(K4), list(V4), [None] * Q.shape[0])
    batch, heads, n, d = Q.shape
    K0, V0 = packed.K[0], packed.V[0]
    kv, dv = K0.shape[0], V0.shape[2]
    for K, V in zip(packed.K, packed.V):
        if V.shape[:2] != K.shape[:2]:
            raise ShapeError(
                "v", "shape", f"v {tuple(v.values.shape)} needs the heads and keys of k {tuple(k.values.shape)}"
            )
        if K.shape[2] != d:
            raise ShapeError("k", "shape", f"k's heads have {K.shape[2]} dimensions, q's {d} (d_k)")
    if kv == 0 or heads % kv:
        raise ShapeError("k", "shape", f"{kv} key/value heads do not divide q's {heads} heads")
    m = max(K.shape[1] for K in packed.K)
    if max(n, m) > limits.KERNEL_TOKENS or max(d, dv) > limits.DIMS:
        raise LimitError(
            "q", "shape", f"{n} queries, {m} keys, d {d}; at most {limits.KERNEL_TOKENS} tokens and {limits.DIMS} dims"
        )
    if batch * heads > limits.BATCH_HEADS:
        from symattn.input.batched import grid, other_layout

        hint = other_layout(q.values.shape, layout) if mode == "standard" else ""
        limit = f"{grid(batch, heads)} ({layout}); at most {limits.BATCH_HEADS} (the limit){hint}"
        raise LimitError("q", "shape", limit)
    _float32_values("q", q.values)
    if mode != "standard":  # named in the arrays as given: varlen's (total, heads, d), a cache's own axes
        for name, whole, used in zip("kv", (k, v), packed.used or (None, None)):
            _float32_values(name, whole.values, used)
    sequences = len(packed.starts) - 1 if mode == "varlen" else None
    scales = layouts.descales({x: given.get(x) for x in DESCALES}, batch, kv, sequences)
    if kind in GRADIENTS and (scales or mode == "paged"):
        raise SpecError(
            "kind", None, f"{kind} is for training: FP8 descales and paged caches take kind 'output' or 'lse'"
        )
    exact = _scale(scale)
    from symattn import variants

    rules = [
        score_mods.of_argument(variants.kernel_rule(name), name, value, batch, heads, causal_align)
        for name, value in given.get("variants", {}).items()
    ]
    order, value = variants.rule_order(given.get("order"))  # FlashAttention's unless the keyword says
    rules = sorted((r for r in rules if r is not None), key=lambda r: order.index(r.kind))
    named = value if variants.ORDER_ACTS <= {r.kind for r in rules} else None  # the reports name it
    made = []
    for b in range(batch):
        K, V = packed.K[b], packed.V[b]
        allowed = packed.masks[b] if packed.masks[b] is not None else allowed_of(n, K.shape[1])
        for h in range(heads):
            g = h // (heads // kv)  # consecutive query heads share a key/value head, as torch's enable_gqa
            factor = _factor(scales, b, g)
            values = V[g] * scales["v_descale"][b, g] if "v_descale" in scales else V[g]  # exact: ≤ 48 bits
            mods = tuple(rule(b, h, n, K.shape[1]) for rule in rules)
            head = float64.head(Q[b, h], K[g], values, exact, allowed, factor, mods)
            if head is None:
                raise SpecError("scale", None, f"{scale!r} is beyond the float range the bounds assume")
            made.append(head)
    count = heads
    if kind in GRADIENTS:
        check_gradient_tokens("q", n, m, limits.KERNEL_GRADIENT_TOKENS, "the float64 path")
        if dout is None:
            raise SpecError("dout", None, f"missing: kind={kind!r} needs the dO the gradient is for")
        want = _shape_of(q, dv)
        if dout.values.ndim != q.values.ndim:
            raise ShapeError("dout", "shape", f"{tuple(dout.values.shape)}; O's shape is {want}")
        dO = _bhnd(dout.values, layout)
        if dO.shape != (batch, heads, n, dv):
            raise ShapeError("dout", "shape", f"{tuple(dout.values.shape)}; O's shape is {want}")
        _float32_values("dout", dout.values)
        if kind == "dsink":
            return replace(_logit_gradients(made, dO, heads, scale is None), order=named)
        made, count = gradient_heads(made, dO, GRADIENTS[kind], kv, scale is None)
    elif dout is not None:
        raise SpecError("dout", None, "is for kind dq, dk, dv or dsink")
    return Inputs(tuple(made), batch, count, layout, packed.starts, packed.key_starts, named)


def _logit_gradients(forward: list, dO: np.ndarray, heads: int, sqrt_scale: bool) -> Inputs:
    """dsink's inputs (gradient_heads.logit_gradients): one row, a number per query head."""
    from symattn import variants
    from symattn.kernel.gradient_heads import logit_gradients

    made = logit_gradients(forward, dO, sqrt_scale)
    if made is None:
        given = variants.argument_of("denominator_logit")
        raise SpecError("kind", None, f"dsink is the gradient of the logits {given} gives: give {given}")
    return Inputs(tuple(made), 1, heads)


def _factor(scales: dict[str, np.ndarray], b: int, g: int) -> Fraction | None:
    """q_descale·k_descale of (batch b, kv head g), exactly; None where neither is given."""
    if "q_descale" not in scales and "k_descale" not in scales:
        return None
    f = Fraction(1)
    for name in ("q_descale", "k_descale"):
        if name in scales:
            f *= Fraction(float(scales[name][b, g]))
    return f


def _shape_of(q: Array, dv: int) -> tuple[int, ...]:
    shape = list(q.values.shape)
    shape[-1] = dv
    return tuple(shape)


def _float32_values(name: str, a: np.ndarray, used: np.ndarray | None = None) -> None:
    """Refuse a NaN, an infinity or a float64 value that is no float32 value, naming the first as numpy indexes
    the array given (0-based: ``q[0, 0, 2, 5]``, a paged cache's ``k[block, offset, kv head, column]``);
    ``used``: where a paged cache holds some batch's keys (the rest of a cache is not read)."""
    found = not_float32(a, used)
    if found is not None:
        raise SpecError(name, None, found[1], index=found[0])


def _allowed(n: int, m: int, causal: bool, align: str, window: Any) -> np.ndarray | None:
    """Where query i may attend key j, as the mask part's mask_mod says for the whole matrix at once."""
    from symattn import variants

    return variants.kernel_mask(n, m, causal, align, window)


def _scale(scale: Any) -> Fraction | None:
    """The scale c of Z = c·Q·Kᵀ exactly: None for 1/√d; a float as the float it is."""
    if scale is None:
        return None
    if isinstance(scale, np.floating | np.integer):  # numpy's scalars, as a shape's arithmetic gives them
        scale = scale.item()
    if isinstance(scale, bool) or not isinstance(scale, (int, float, Fraction)) or not np.isfinite(float(scale)):
        raise SpecError("scale", None, f"expected a finite number (the float the kernel multiplies by), got {scale!r}")
    if scale <= 0:  # as a spec's scale must be
        raise SpecError("scale", None, f"{scale!r}: must be positive")
    return Fraction(scale)


def result_of(out: Array, kind: str, inputs: Inputs, dims: int, source: str) -> FloatResult:
    """A kernel's result (O, its LSE or a gradient) in the shape the inputs give it, as compare reads a file's."""
    if kind == "dsink":  # (H,): a number per query head, summed over the batches
        if out.values.shape != (inputs.head_count,):
            raise ShapeError(
                source, "shape", f"{tuple(out.values.shape)}; the dsink of these q, k and v is ({inputs.head_count},)"
            )
        return replace(FloatResult.of_array(source, out.format, out.values.reshape(1, -1)), given=out.values.shape)
    wanted = result_shape(inputs, kind, dims)
    if out.values.shape != wanted:
        raise ShapeError(source, "shape", f"{tuple(out.values.shape)}; the {kind} of these q, k and v is {wanted}")
    if dims == 2 or (kind == "lse" and dims == 3):  # a matrix: one head's, or the heads' LSE a row each
        matrix = FloatResult.of_array(source, out.format, out.values.reshape(-1, wanted[-1]))
        return replace(matrix, given=out.values.shape)
    return FloatResult(source, out.format, (), (), out.values, out.values.shape)  # places name every axis


__all__ = ["KINDS", "LAYOUTS", "exact_array", "inputs_of", "result_of"]
