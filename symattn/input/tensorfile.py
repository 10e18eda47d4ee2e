"""Float arrays from ``.npy`` and ``.safetensors`` bytes, parsed by fixed grammars, never unpickled.

Shared by the float results ``compare`` reads (``floats.py``) and the spec keys that name a file
(``filematrix.py``). Every float16, bfloat16, float32 or float64 value is a float64 exactly, so the
array returned (float64) holds the exact values; NaN and infinities are left for the caller to judge.

The ``.npy`` header is a Python dict literal, matched against a regular expression (a float descr,
the order, a shape of digits), never evaluated. The ``.safetensors`` header is JSON: an object of
tensors, each exactly ``dtype``, ``shape`` and ``data_offsets``, plus an optional ``__metadata__``
of strings; duplicate names and anything else are refused.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass

import numpy as np

from symattn.input import limits
from symattn.input.errors import LimitError, SpecError

NPY_MAGIC = b"\x93NUMPY"
# bfloat16 has no numpy dtype: torch and ml_dtypes save it as two raw bytes ('|V2', '<V2') or by name
_NPY_DESCR = {"f2": "float16", "f4": "float32", "f8": "float64", "V2": "bfloat16", "bfloat16": "bfloat16"}
_HEADER = re.compile(
    r"\{\s*'descr'\s*:\s*'(?P<descr>[<>|=]?(?:f[248]|V2|bfloat16))'\s*,\s*'fortran_order'\s*:\s*"
    r"(?P<fortran>True|False)\s*,\s*'shape'\s*:\s*\((?P<shape>[0-9,\s]*)\)\s*(?:,\s*)?\}\s*"
)  # no two \s* side by side: linear
_SAFETENSORS_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64"}
WIDTH = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
KINDS = "a float16, bfloat16, float32 or float64 array"


@dataclass(frozen=True)
class Array:
    """A float array as read: its format and its values as float64 (exactly), in C order."""

    format: str  # float16, bfloat16, float32 or float64
    values: np.ndarray  # float64, of the file's shape


def read_npy(source: str, data: bytes) -> Array:
    """The array of a ``.npy`` file's bytes."""
    if not data or not data.startswith(NPY_MAGIC[: len(data)]):
        raise SpecError(source, None, "not a .npy file (no \\x93NUMPY magic)")
    major = data[6] if len(data) > 6 else None
    if major is not None and major not in (1, 2, 3):
        raise SpecError(source, None, f"unsupported .npy version {major}")
    start = 10 if major in (None, 1) else 12
    if len(data) < start:  # the magic, maybe its version, and no room for the header's length
        raise SpecError(source, None, f"a truncated .npy file: {len(data)} bytes, the preamble alone takes {start}")
    size = struct.unpack("<H", data[8:10])[0] if major == 1 else struct.unpack("<I", data[8:12])[0]
    if size > limits.NPY_HEADER:  # before matching: a long header is never a float array's
        raise LimitError(source, None, f"a .npy header of {size} bytes; at most {limits.NPY_HEADER} (the limit)")
    if start + size > len(data):
        raise SpecError(
            source, None, f"a truncated .npy file: {len(data)} bytes, the preamble and header take {start + size}"
        )
    header = data[start : start + size].decode("latin-1")
    match = _HEADER.fullmatch(header)
    if match is None:
        raise SpecError(source, "descr", f"expected {KINDS} (header {header.strip()[:80]!r})")
    descr = match["descr"]
    fmt = _NPY_DESCR[descr.lstrip("<>|=")]
    parts = [p.strip() for p in match["shape"].split(",") if p.strip()]
    shape = _shape(source, parts)
    big = descr[0] == ">" and fmt != "bfloat16"  # raw bytes of bfloat16: little-endian, as torch writes them
    values = _decode(source, data[start + size :], fmt, shape, big, "shape")
    if match["fortran"] == "True" and len(shape) > 1:
        values = values.reshape(shape[::-1]).transpose()
    return Array(fmt, np.ascontiguousarray(values.reshape(shape)))


def read_safetensors(source: str, data: bytes, name: str | None) -> Array:
    """The tensor ``name`` (or the only one) of a ``.safetensors`` file's bytes."""
    if len(data) < 8:
        raise SpecError(source, None, "not a .safetensors file (shorter than its 8-byte header length)")
    size = struct.unpack("<Q", data[:8])[0]
    if size > limits.SAFETENSORS_HEADER:
        raise LimitError(
            source, None, f"a .safetensors header of {size} bytes; at most {limits.SAFETENSORS_HEADER} (the limit)"
        )
    if 8 + size > len(data):
        raise SpecError(source, None, f"a .safetensors header of {size} bytes in a file of {len(data)}")
    try:
        header = json.loads(data[8 : 8 + size].decode("utf-8"), object_pairs_hook=_names, parse_constant=_no)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpecError(source, None, f"not a .safetensors header: {exc}") from None
    except RecursionError:
        raise SpecError(source, None, "not a .safetensors header: nested too deep") from None
    if not isinstance(header, dict):
        raise SpecError(source, None, "not a .safetensors header: expected a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SpecError(source, "__metadata__", "expected an object of strings")
    if not header:
        raise SpecError(source, None, "a .safetensors file without tensors")
    if name is None:
        if len(header) != 1:
            names = ", ".join(sorted(header)[:5])
            raise SpecError(source, None, f"{len(header)} tensors ({names}…): name one as FILE.safetensors:NAME")
        name = next(iter(header))
    if name not in header:
        raise SpecError(source, None, f"no tensor named {name[:80]!r}")
    entry = header[name]
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise SpecError(source, name, "expected exactly dtype, shape and data_offsets")
    dtype, shape_raw, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in _SAFETENSORS_DTYPES:
        raise SpecError(source, name, f"dtype {str(dtype)[:20]!r}; expected F16, BF16, F32 or F64")
    if not isinstance(shape_raw, list) or not all(type(n) is int and n >= 0 for n in shape_raw):
        raise SpecError(source, name, "shape: expected a list of whole numbers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int and n >= 0 for n in offsets)) or (
        offsets[0] > offsets[1]
    ):
        raise SpecError(source, name, "data_offsets: expected [begin, end]")
    shape = _shape(source, [str(n) for n in shape_raw])
    body = data[8 + size :]
    if offsets[1] > len(body):
        raise SpecError(source, name, f"data_offsets end at byte {offsets[1]} of {len(body)} bytes of data")
    fmt = _SAFETENSORS_DTYPES[dtype]
    values = _decode(source, body[offsets[0] : offsets[1]], fmt, shape, False, name)
    return Array(fmt, values.reshape(shape))


def _shape(source: str, parts: list[str]) -> tuple[int, ...]:
    if len(parts) > 4:
        raise SpecError(source, "shape", f"{len(parts)} axes; at most 4")
    if any(len(p) > 9 for p in parts):  # refused before int(), which stops at 4300 digits
        raise LimitError(source, "shape", f"a dimension of more than 9 digits; at most {limits.TOKENS}×{limits.DIMS}")
    shape = tuple(int(p) for p in parts)
    if math.prod(shape) > limits.TENSOR_ENTRIES:  # before anything that size is made
        many = f"more than {limits.TENSOR_ENTRIES} entries (the limit)"
        raise LimitError(source, "shape", f"({', '.join(parts)}): {many}")
    return shape


def _decode(source: str, body: bytes, fmt: str, shape: tuple[int, ...], big: bool, key: str) -> np.ndarray:
    count, width = math.prod(shape), WIDTH[fmt]
    if len(body) != count * width:
        dims = "×".join(map(str, shape)) or "a scalar"
        raise SpecError(source, key, f"{len(body)} bytes of data for {dims} {fmt} ({count * width} expected)")
    order = ">" if big else "<"
    if fmt == "bfloat16":  # the upper half of a float32: widened exactly by a shift
        bits = np.frombuffer(body, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    kind = {"float16": "f2", "float32": "f4", "float64": "f8"}[fmt]
    return np.frombuffer(body, dtype=order + kind).astype(np.float64)


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


__all__ = ["Array", "KINDS", "NPY_MAGIC", "WIDTH", "not_finite", "read_npy", "read_safetensors"]
