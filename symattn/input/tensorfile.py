"""Float arrays from ``.npy`` and ``.safetensors`` bytes, read by numpy's and safetensors' own readers, and
integer ones (a kernel layout's cu_seqlens, block table and sequence lengths) by the same readers.

Shared by the float results ``compare`` reads (``floats.py``) and the spec keys that name a file
(``filematrix.py``). Every float8, float16, bfloat16, float32 or float64 value is a float64 exactly, so
the array returned (float64) holds the exact values; NaN and infinities are left for the caller to judge.

Well-kept readers beat our own grammars, and the limits stay ours, checked before either reads:

- ``.npy``: numpy's header reader (``numpy.lib.format``: the header is a Python literal, read by
  ``ast.literal_eval``, never evaluated) with a header limit of ``NPY_HEADER`` bytes, then, once the dtype
  is a float's and the shape within ``TENSOR_ENTRIES`` and the data exactly as long as the shape says,
  ``numpy.lib.format.read_array`` with ``allow_pickle=False``. bfloat16 has no numpy dtype: torch and
  ml_dtypes save it as two raw bytes (``<V2``) or by name (``bfloat16``, with ml_dtypes).
- ``.safetensors``: the ``safetensors`` package (Hugging Face's Rust reader: the header's JSON, the
  dtypes, every tensor's offsets and length, the file wholly covered), after our header limit; two
  tensors of one name are refused (the package would keep one of them).

Integers are whole numbers only: a float, object, structured or big-endian array is refused in one line, and
nothing is ever unpickled (``allow_pickle=False``).
"""

from __future__ import annotations

import io
import json
import math
import struct
from typing import Any

import numpy as np

from symattn.input import limits
from symattn.input.errors import LimitError, SpecError
from symattn.input.records import record

NPY_MAGIC = b"\x93NUMPY"
_NPY_FLOATS = {"float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "bfloat16"}
_SAFETENSORS_DTYPES = {
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}
WIDTH = {"float8_e4m3fn": 1, "float8_e5m2": 1, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_NUMPY = {"float16": "<f2", "float32": "<f4", "float64": "<f8"}
KINDS = "a float16, bfloat16, float32 or float64 array"
_SAFETENSORS_INTEGERS = {
    f"{kind}{bits}": np.dtype(f"<{kind.lower()}{bits // 8}") for kind in ("I", "U") for bits in (8, 16, 32, 64)
}


def dtype_of(fmt: str) -> np.dtype:
    """A format's numpy dtype, whose values widen to float64 exactly: ml_dtypes' for bfloat16 and float8,
    imported only for them (it takes a second to load)."""
    if fmt in _NUMPY:
        return np.dtype(_NUMPY[fmt])
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, fmt))


@record
class Array:
    """A float array as read: its format and its values as float64 (exactly), in C order."""

    format: str  # a key of DTYPES
    values: np.ndarray  # float64, of the file's shape

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)


def read_npy(source: str, data: bytes) -> Array:
    """The array of a ``.npy`` file's bytes."""
    shape, dtype, header, body = _npy_header(source, data)
    fmt = _npy_format(dtype)
    if fmt is None:
        raise SpecError(source, "descr", f"expected {KINDS} (header {header[:80]!r})")
    _length(source, body, WIDTH[fmt], shape, "shape", fmt)
    values = _npy_values(source, data)
    if values.dtype.kind == "V" and values.dtype.name != "bfloat16":  # raw bytes of bfloat16 (torch's <V2)
        values = (np.ascontiguousarray(values).view("<u2").astype(np.uint32) << 16).view(np.float32)
    with np.errstate(invalid="ignore"):  # a signalling NaN's bits widen to a NaN, which is named after, in one line
        widened = values.astype(np.float64)
    return Array(fmt, np.ascontiguousarray(widened).reshape(shape))


def read_npy_integers(source: str, data: bytes) -> np.ndarray:
    """The whole numbers of a ``.npy`` file's bytes (cu_seqlens, a block table) as int64: a little-endian
    integer array, read without pickle; a float, object or big-endian array is refused in one line."""
    shape, dtype, _, body = _npy_header(source, data)
    if dtype.names is not None or dtype.subdtype is not None or dtype.hasobject or dtype.kind not in "iu":
        what = "an object array" if dtype.hasobject else f"a {_dtype_name(dtype)} array"
        raise SpecError(source, "descr", f"{what} where whole numbers are needed (int32 or int64, as torch saves them)")
    if dtype.byteorder == ">":
        raise SpecError(
            source, "descr", f"a big-endian {dtype.name} array ({dtype.str!r}); save it little-endian (numpy's default)"
        )
    _length(source, body, dtype.itemsize, shape, "shape", dtype.name)
    return _whole(source, _npy_values(source, data).reshape(shape))


def _npy_header(source: str, data: bytes) -> tuple[tuple[int, ...], np.dtype, str, int]:
    """A ``.npy`` file's shape, dtype, header text and the bytes of data after it, read by numpy within our
    header limit."""
    if not data or not data.startswith(NPY_MAGIC[: len(data)]):
        raise SpecError(source, None, "not a .npy file (no \\x93NUMPY magic)")
    major = data[6] if len(data) > 6 else None
    if major is not None and major not in (1, 2, 3):
        raise SpecError(source, None, f"unsupported .npy version {major}")
    start = 10 if major in (None, 1) else 12
    if len(data) < start:  # the magic, maybe its version, and no room for the header's length
        raise SpecError(source, None, f"a truncated .npy file: {len(data)} bytes, the preamble alone takes {start}")
    size = struct.unpack("<H", data[8:10])[0] if major == 1 else struct.unpack("<I", data[8:12])[0]
    if size > limits.NPY_HEADER:  # before numpy reads it: a long header is never a float array's
        raise LimitError(source, None, f"a .npy header of {size} bytes; at most {limits.NPY_HEADER} (the limit)")
    if start + size > len(data):
        raise SpecError(
            source, None, f"a truncated .npy file: {len(data)} bytes, the preamble and header take {start + size}"
        )
    raw = data[start : start + size]
    try:  # version 3's header is UTF-8, and a UTF-8 text in an older one is shown as its author wrote it
        header = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        header = raw.decode("latin-1").strip()
    if "bfloat16" in header:  # a dtype numpy knows by that name once ml_dtypes has registered it
        dtype_of("bfloat16")
    stream = io.BytesIO(data)
    read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    try:
        np.lib.format.read_magic(stream)
        shape, _, dtype = read(stream, max_header_size=limits.NPY_HEADER)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):  # numpy's reading of the literal
        raise SpecError(source, None, f"a .npy header numpy cannot read ({header[:80]!r})") from None
    return _shape(source, shape), dtype, header, len(data) - stream.tell()


def _npy_values(source: str, data: bytes) -> np.ndarray:
    try:
        return np.lib.format.read_array(
            io.BytesIO(data), allow_pickle=False, max_header_size=limits.NPY_HEADER
        )  # numpy's own reading: byte order and Fortran order as the header says
    except (ValueError, OSError) as exc:  # not expected once the length is checked: still one line
        raise SpecError(source, None, f"numpy cannot read the data: {exc}") from None


def _npy_format(dtype: np.dtype) -> str | None:
    """The format of a .npy dtype that is a float's (a void of two bytes: bfloat16's raw bytes), else None."""
    if dtype.names is not None or dtype.subdtype is not None or dtype.hasobject:
        return None
    if dtype.kind == "V":
        return "bfloat16" if dtype.itemsize == 2 else None
    return _NPY_FLOATS.get(dtype.name) if dtype.kind == "f" else None


def read_safetensors(source: str, data: bytes, name: str | None) -> Array:
    """The tensor ``name`` (or the only one) of a ``.safetensors`` file's bytes."""
    name, entry = _named(source, safetensors_entries(source, data), name)
    return safetensors_array(source, name, entry)


def _named(source: str, tensors: dict[str, Any], name: str | None) -> tuple[str, Any]:
    """The tensor ``name`` of a file's, or its only one."""
    if name is None:
        if len(tensors) != 1:
            names = ", ".join(sorted(tensors)[:5])
            raise SpecError(source, None, f"{len(tensors)} tensors ({names}…): name one as FILE.safetensors:NAME")
        name = next(iter(tensors))
    if name not in tensors:
        raise SpecError(source, None, f"no tensor named {name[:80]!r}")
    return name, tensors[name]


def safetensors_entries(source: str, data: bytes) -> dict[str, Any]:
    """Every tensor of a ``.safetensors`` file's bytes, by name, as the package reads them (not yet converted:
    :func:`safetensors_array`); at least one."""
    from safetensors import SafetensorError, deserialize

    if len(data) < 8:
        raise SpecError(source, None, "not a .safetensors file (shorter than its 8-byte header length)")
    size = struct.unpack("<Q", data[:8])[0]
    if size > limits.SAFETENSORS_HEADER:
        raise LimitError(
            source, None, f"a .safetensors header of {size} bytes; at most {limits.SAFETENSORS_HEADER} (the limit)"
        )
    if 8 + size > len(data):
        raise SpecError(source, None, f"a .safetensors header of {size} bytes in a file of {len(data)}")
    try:  # the package keeps one of two tensors of a name: ask the JSON itself first
        json.loads(data[8 : 8 + size].decode("utf-8"), object_pairs_hook=_names, parse_constant=_no)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpecError(source, None, f"not a .safetensors header: {exc}") from None
    except RecursionError:
        raise SpecError(source, None, "not a .safetensors header: nested too deep") from None
    try:
        tensors = dict(deserialize(data))
    except SafetensorError as exc:
        problem = str(exc).removeprefix("Error while deserializing header: ")
        problem = problem.removeprefix("Error while deserializing: ")
        raise SpecError(source, None, f"not a .safetensors file: {problem}") from None
    if not tensors:
        raise SpecError(source, None, "a .safetensors file without tensors")
    return tensors


def safetensors_array(source: str, name: str, entry: Any, axes: int = 4) -> Array:
    """One tensor of :func:`safetensors_entries` as a float Array (its floats exactly), of at most ``axes``
    axes (5: split-KV partials, a split axis before (B, H, N, D))."""
    if entry["dtype"] not in _SAFETENSORS_DTYPES:
        kinds = ", ".join(_SAFETENSORS_DTYPES)
        raise SpecError(source, name, f"dtype {str(entry['dtype'])[:20]!r}; expected {kinds}")
    fmt = _SAFETENSORS_DTYPES[entry["dtype"]]
    shape = _shape(source, entry["shape"], axes)
    _length(source, len(entry["data"]), WIDTH[fmt], shape, name, fmt)
    if fmt == "bfloat16":  # the upper half of a float32: widened exactly by a shift
        bits = np.frombuffer(bytes(entry["data"]), dtype="<u2").astype(np.uint32) << 16
        values = bits.view(np.float32).astype(np.float64)
    else:
        values = np.frombuffer(bytes(entry["data"]), dtype=dtype_of(fmt)).astype(np.float64)
    return Array(fmt, values.reshape(shape))


def read_safetensors_integers(source: str, data: bytes, name: str | None) -> np.ndarray:
    """The whole numbers of a ``.safetensors`` tensor (I8 to I64, U8 to U64) as int64."""
    name, entry = _named(source, safetensors_entries(source, data), name)
    dtype = _SAFETENSORS_INTEGERS.get(entry["dtype"])
    if dtype is None:
        raise SpecError(
            source,
            name,
            f"dtype {str(entry['dtype'])[:20]!r} where whole numbers are needed (I32 or I64, as torch saves them)",
        )
    shape = _shape(source, entry["shape"])
    _length(source, len(entry["data"]), dtype.itemsize, shape, name, dtype.name)
    return _whole(source, np.frombuffer(bytes(entry["data"]), dtype=dtype).reshape(shape))


def _whole(source: str, values: np.ndarray) -> np.ndarray:
    """Integers in their own dtype (a message names an int32 file's as int32; layouts.integers makes them
    int64); a uint64 past int64's range is refused, naming the first (0-based)."""
    if values.dtype == np.uint64 and values.size and values.max() > np.iinfo(np.int64).max:
        at = tuple(int(i) for i in np.argwhere(values > np.iinfo(np.int64).max)[0])
        raise SpecError(source, None, f"{values[at]} is past int64's range", index=at)
    return np.ascontiguousarray(values)


def _dtype_name(dtype: np.dtype) -> str:
    """A .npy dtype in words: bfloat16 for two raw bytes, as torch saves it."""
    return "bfloat16" if dtype.kind == "V" and dtype.itemsize == 2 else dtype.name


def _shape(source: str, dims: tuple[int, ...] | list[int], axes: int = 4) -> tuple[int, ...]:
    parts = [str(n) for n in dims]
    if len(parts) > axes:
        raise SpecError(source, "shape", f"{len(parts)} axes; at most {axes}")
    if any(isinstance(n, bool) or not isinstance(n, int) for n in dims):  # True passed as 1; numpy refuses it
        raise SpecError(source, "shape", f"({', '.join(parts)}): every dimension a whole number")
    if any(len(p) > 9 for p in parts):  # a dimension of a billion: refused before any product
        raise LimitError(source, "shape", f"a dimension of more than 9 digits; at most {limits.TOKENS}×{limits.DIMS}")
    shape = tuple(int(n) for n in dims)
    if any(n < 0 for n in shape):
        raise SpecError(source, "shape", f"({', '.join(parts)}): a negative dimension")
    if math.prod(shape) > limits.TENSOR_ENTRIES:  # before anything that size is made
        many = f"more than {limits.TENSOR_ENTRIES} entries (the limit)"
        raise LimitError(source, "shape", f"({', '.join(parts)}): {many}")
    return shape


def _length(source: str, length: int, width: int, shape: tuple[int, ...], key: str, fmt: str) -> None:
    """The data must be exactly as long as the shape says: nothing cut off, nothing after."""
    count = math.prod(shape)
    if length != count * width:
        dims = "×".join(map(str, shape)) or "a scalar"
        raise SpecError(source, key, f"{length} bytes of data for {dims} {fmt} ({count * width} expected)")


def _names(pairs: list[tuple[str, object]]) -> dict[str, object]:
    from symattn.input.files import once_each

    return once_each(pairs, "name")


def _no(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def not_finite(values: np.ndarray) -> list[tuple[tuple[int, ...], str]]:
    """Where the values are NaN or infinite (positions 0-based, C order), each with "nan", "inf" or "-inf"."""
    bad = np.argwhere(~np.isfinite(values))
    return [
        (tuple(int(i) for i in at), "nan" if np.isnan(x) else ("inf" if x > 0 else "-inf"))
        for at in bad
        for x in [values[tuple(at)]]
    ]


FLOAT32_TAKEN = "float16, bfloat16 and float8"  # the formats whose every value is a float32 value


def not_float32(values: np.ndarray, used: np.ndarray | None = None) -> tuple[tuple[int, ...], str] | None:
    """The one check of the float64 path's inputs: the place (0-based, C order) of the first NaN or infinity,
    else of the first value that is no float32 value, and why (``not a finite number: nan``, ``no float32
    value: 0.1; the float64 path takes float32 values (…)``); None where every value (``used``: of those where
    it is True, axes but the last) is a finite float32 one. Every caller words it so."""
    within = np.ones(values.shape, dtype=bool) if used is None else np.broadcast_to(used[..., None], values.shape)
    bad = ~np.isfinite(values) & within
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return at, f"not a finite number: {'nan' if np.isnan(values[at]) else 'inf' if values[at] > 0 else '-inf'}"
    with np.errstate(over="ignore"):
        bad = (values.astype(np.float32).astype(np.float64) != values) & within
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    why = f"the float64 path takes float32 values ({FLOAT32_TAKEN} ones are)"
    return at, f"no float32 value: {float(values[at])!r}; {why}"


def one_head(shape: tuple[int, ...], layout: str) -> bool:
    """Whether an array of ``shape`` is one head's matrix: (N, D), or (1, N, D), (1, 1, N, D) in bhnd; in bnhd
    (1, 1, D) or (1, 1, 1, D) only, since the leading 1 of (1, H, D) is one query of H heads, not H queries."""
    return len(shape) <= 2 or all(n == 1 for n in shape[: -2 if layout == "bhnd" else -1])


__all__ = [
    "WIDTH",
    "Array",
    "dtype_of",
    "KINDS",
    "NPY_MAGIC",
    "FLOAT32_TAKEN",
    "not_finite",
    "not_float32",
    "one_head",
    "read_npy",
    "read_npy_integers",
    "read_safetensors",
    "read_safetensors_integers",
    "safetensors_array",
    "safetensors_entries",
]
