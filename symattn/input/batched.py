"""Q, K and V files with batch and head axes, as kernels hold them (issue 22): (H, N, D) or (B, H, N, D)
with ``layout = "bhnd"`` (the default), (N, H, D) or (B, N, H, D) with ``layout = "bnhd"``.

Each batch becomes the multi-head spec symattn already knows: Q of N rows and H·D columns (the heads'
blocks side by side), K and V with one block per key/value head, ``heads = H`` and, where K has fewer
heads than Q, ``kv_heads`` (grouped-query). The batches past the first are kept beside the spec;
only ``compare`` takes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from symattn.input import filematrix, limits
from symattn.input.errors import LimitError, ShapeError, SpecError, brief
from symattn.input.filematrix import FileMatrix
from symattn.input.reader import Reader, parse_index

if TYPE_CHECKING:  # numpy only where files are read: render of a spec of numbers starts without it
    import numpy as np

LAYOUTS = ("bhnd", "bnhd")
Batch = tuple[FileMatrix, FileMatrix, FileMatrix]  # one batch's Q, K, V, each (N, heads · D)

WEIGHTS_AXES = "weights with batch and head axes: compare one head's (N, M) weights"


def read_batched(
    reader: Reader, data: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[Batch, ...], str, tuple[FileMatrix, ...], bool]:
    """The spec's keys with Q, K, V of batch 0 as matrices (and heads, kv_heads set), every batch, the layout,
    the dO of ``[backward] grad_output`` of every batch past the first (a file with batch and head axes), and
    whether the files had head axes (then their heads were checked here, against BATCH_HEADS, as the
    in-memory API checks them: a spec's own ``heads`` keeps its smaller limit).

    Q, K and V that are not all files of 3 or 4 axes are left as they are (no batches).
    """
    layout = reader.choice(data.get("layout", "bhnd"), "layout", LAYOUTS)
    given = {key: data.get(key) for key in ("Q", "K", "V")}
    if not all(filematrix.names_file(v) for v in given.values()) or reader.folder is None:
        return dict(data), (), layout, (), False
    from symattn.input import tensorfile  # numpy's: only for a spec that names files

    raw = {key: str(v) for key, v in given.items()}
    arrays = {key: filematrix.read_array(v, key, reader.source, reader.folder) for key, v in raw.items()}
    for key, a in arrays.items():
        if 0 in a.values.shape:  # no entries: no head to compare, whatever the other axes say
            shape = ", ".join(map(str, a.values.shape))
            raise ShapeError(reader.source, key, f"{raw[key]!r}: shape ({shape}) has an axis of length 0 (no entries)")
    axes = {key: a.values.ndim for key, a in arrays.items()}
    if all(tensorfile.one_head(a.values.shape, layout) for a in arrays.values()):  # one head each: matrices
        out = dict(data)
        for key, a in arrays.items():
            out[key] = filematrix.matrix_of(a, raw[key], key, reader.source, limits.KERNEL_TOKENS)
        return out, (), layout, (), False
    if len(set(axes.values())) != 1 or axes["Q"] not in (3, 4):
        shapes = ", ".join(f"{k} {tuple(a.values.shape)}" for k, a in arrays.items())
        raise ShapeError(reader.source, "Q", f"Q, K and V need 3 or 4 axes alike ({layout}); got {shapes}")
    bhnd = {key: to_bhnd(a.values, layout) for key, a in arrays.items()}
    Q, K, V = bhnd["Q"], bhnd["K"], bhnd["V"]
    batch, heads, n, d = Q.shape
    if K.shape[0] != batch or V.shape[0] != batch:
        raise ShapeError(reader.source, "K", f"a batch of {K.shape[0]} (K) and {V.shape[0]} (V); Q has {batch}")
    kv = K.shape[1]
    if V.shape[1] != kv or K.shape[2] != V.shape[2]:
        raise ShapeError(
            reader.source, "V", f"V {tuple(V.shape)} needs the batch, heads and keys of K {tuple(K.shape)} (bhnd)"
        )
    if K.shape[3] != d:
        raise ShapeError(reader.source, "K", f"K's heads have {K.shape[3]} dimensions, Q's {d} (d_k)")
    if heads % kv:
        raise ShapeError(reader.source, "K", f"{kv} key/value heads do not divide Q's {heads} heads")
    if batch * heads > limits.BATCH_HEADS:
        hint = other_layout(arrays["Q"].values.shape, layout)
        raise LimitError(reader.source, "Q", f"{grid(batch, heads)}; at most {limits.BATCH_HEADS} (the limit){hint}")
    _given(reader, data, "heads", heads)
    if kv < heads or "kv_heads" in data:
        _given(reader, data, "kv_heads", kv)
    for key in bhnd:  # named in the file's own axes, as numpy indexes it
        _finite(arrays[key].values, str(raw[key]), key, reader.source)
    batches = tuple(
        tuple(_side_by_side(bhnd[key][b], arrays[key].format, str(raw[key]), key, reader) for key in ("Q", "K", "V"))
        for b in range(batch)
    )
    out = dict(data)
    out["Q"], out["K"], out["V"] = batches[0]
    out["heads"] = heads
    if kv < heads:
        out["kv_heads"] = kv
    grads = _grad_outputs(reader, data, layout, (batch, heads, n, V.shape[3]))
    if grads:
        out["backward"] = {**data["backward"], "grad_output": grads[0]}
    return out, batches if batch > 1 else (), layout, grads[1:], True  # type: ignore[return-value]


def _finite(values: Any, raw: str, key: str, source: str) -> None:
    """Refuse a NaN or an infinity, naming the first in the file's own axes with its value, as the matrix
    reader does: ``Q: 'q.npy'[0, 0, 2, 5]: not a finite number: nan``."""
    from symattn.input import tensorfile

    bad = tensorfile.not_finite(values)
    if bad:
        (at, what), *_ = bad
        raise SpecError(source, key, f"{filematrix.place(raw, at)}: not a finite number: {what}")


def _grad_outputs(reader: Reader, data: Mapping[str, Any], layout: str, shape: tuple[int, ...]) -> tuple:
    """``[backward] grad_output`` as a file with batch and head axes (dO of O's shape): each batch's (N, H·dv)
    matrix, as Q's; none where it is not such a file (the matrix reader checks it then)."""
    backward = data.get("backward")
    raw = backward.get("grad_output") if isinstance(backward, Mapping) else None
    if not filematrix.names_file(raw) or reader.folder is None:
        return ()
    key = "backward.grad_output"
    a = filematrix.read_array(str(raw), key, reader.source, reader.folder)
    if a.values.ndim not in (3, 4):
        return ()

    dO = to_bhnd(a.values, layout)
    if dO.shape != shape:
        want = shape if layout == "bhnd" else (shape[0], shape[2], shape[1], shape[3])
        raise ShapeError(reader.source, key, f"{str(raw)!r}: shape {tuple(a.values.shape)}; O's is {want} ({layout})")
    _finite(a.values, str(raw), key, reader.source)
    return tuple(_side_by_side(dO[b], a.format, str(raw), key, reader) for b in range(shape[0]))


def first_not_float32(batches: tuple[Batch, ...], layout: str, heads: int) -> tuple[str, str] | None:
    """The first value of Q, K or V (in that order) that is no float32 value, as its key and the place in the
    file's own axes with tensorfile.not_float32's words (``'q.npy'[0, 0, 0, 0]: no float32 value: 0.1; …``);
    None where all are."""
    import numpy as np

    from symattn.input import tensorfile

    d = batches[0][0].array.shape[1] // heads
    for i, key in enumerate(("Q", "K", "V")):
        matrices = [b[i] for b in batches]
        count = heads if key == "Q" else batches[0][1].array.shape[1] // d  # K's and V's heads: kv heads
        n, width = matrices[0].array.shape
        values = np.stack([m.array for m in matrices]).reshape(len(batches), n, count, width // count)
        found = tensorfile.not_float32(values if layout == "bnhd" else values.transpose(0, 2, 1, 3))
        if found is not None:
            return key, f"{filematrix.place(matrices[0].name, found[0])}: {found[1]}"
    return None


def grid(batch: int, heads: int) -> str:
    """``1 batch × 80 heads``: counts of batches and heads, each noun as its count needs."""
    return f"{batch} batch{'' if batch == 1 else 'es'} × {heads} head{'' if heads == 1 else 's'}"


def other_layout(shape: tuple[int, ...], layout: str) -> str:
    """``; read as layout='bnhd', 8 heads`` where Q of this shape (3 or 4 axes) fits BATCH_HEADS read in the
    other layout: the usual slip, a (B, N, H, D) tensor given as bhnd; else nothing."""
    if len(shape) not in (3, 4):
        return ""
    four = shape if len(shape) == 4 else (1, *shape)
    other, heads = ("bnhd", four[2]) if layout == "bhnd" else ("bhnd", four[1])
    if four[0] * heads > limits.BATCH_HEADS:
        return ""
    return f"; read as layout={other!r}, {heads} head{'' if heads == 1 else 's'}"


def to_bhnd(values: np.ndarray, layout: str) -> np.ndarray:
    """(B, H, N, D) of a 3- or 4-axis array in ``layout``."""
    if values.ndim == 3:
        values = values[None]
    return values if layout == "bhnd" else values.transpose(0, 2, 1, 3)


def _side_by_side(heads: np.ndarray, fmt: str, name: str, key: str, reader: Reader) -> FileMatrix:
    """(H, N, D) as (N, H·D): the heads' column blocks side by side, as a multi-head spec has them."""
    import numpy as np

    h, n, d = heads.shape
    if n > limits.KERNEL_TOKENS or d > limits.DIMS:  # each head's d, as the in-memory API (32 × 128 is Llama's)
        raise LimitError(
            reader.source, key, f"{n} tokens, head dim {d}; at most {limits.KERNEL_TOKENS} and {limits.DIMS}"
        )
    return FileMatrix(np.ascontiguousarray(heads.transpose(1, 0, 2).reshape(n, h * d)), fmt, name)


def _given(reader: Reader, data: Mapping[str, Any], key: str, value: int) -> None:
    """A spec's own ``heads`` or ``kv_heads`` beside files that have them: a whole number, theirs."""
    if key not in data:
        return
    given = parse_index(data[key])
    if given is None:
        raise reader.error(key, f"expected a whole number (the files have {value}), got {brief(data[key])}")
    if given != value:
        raise reader.error(key, f"{brief(data[key])}, but the files have {value}")


def arrange(result: Any, layout: str, quantity: str, batch: int, heads: int) -> Any:
    """A result with batch and head axes as compare's float64 path lines heads up: (N, B·H·D) for O, and
    (B·H, N) for the log-sum-exp (a row per head), batch by batch."""
    values = result.array
    if quantity == "weights":
        raise SpecError("--quantity", None, WEIGHTS_AXES)
    if values is None or values.ndim < 3:
        raise ShapeError(
            result.source, "shape", f"the spec has {batch} batches × {heads} heads: the result needs those axes too"
        )
    if quantity.startswith("lse"):  # (B, H, N), as FlashAttention returns it whatever the layout
        if values.ndim != 3 or values.shape[:2] != (batch, heads):
            raise ShapeError(
                result.source,
                "shape",
                f"an LSE of shape {tuple(values.shape)}; the spec's {batch} batches × {heads} heads need "
                f"({batch}, {heads}, queries)",
            )
        values = values.reshape(-1, values.shape[-1])
    else:
        values = to_bhnd(values, layout)
        if values.shape[:2] != (batch, heads):
            raise ShapeError(
                result.source,
                "shape",
                f"{values.shape[0]} batches × {values.shape[1]} heads ({layout}); the spec has {batch} × {heads}",
            )
        values = values.transpose(2, 0, 1, 3).reshape(values.shape[2], -1)
    import numpy as np

    values = np.ascontiguousarray(values)
    return replace(type(result).of_array(result.source, result.format, values), given=result.given)


__all__ = ["LAYOUTS", "arrange", "first_not_float32", "read_batched", "to_bhnd"]
