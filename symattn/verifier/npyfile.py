"""A strict, minimal reader of the ``.npy`` files a certificate names: floats only.

Accepted: format versions 1.0, 2.0 and 3.0; a header that is the dict numpy writes, its keys in numpy's
order (``{'descr': ..., 'fortran_order': ..., 'shape': (...), }``, spaces and the last comma optional, as
other writers leave them; matched whole by a regular expression, never evaluated); ``descr`` one of
``<f2``/``>f2`` (float16), ``<f4``/``>f4`` (float32), ``<f8``/``>f8`` (float64), little- or big-endian as
numpy reads both (compute --certify takes both), or two raw bytes (``|V2``, ``<V2``, ``bfloat16``) read as
bfloat16, the upper half of a little-endian float32, as torch and ml_dtypes write it; C or Fortran order;
and a body of exactly the bytes the shape needs. Everything else (integers, objects and pickles, a short or
long body) is refused with one line.
"""

from __future__ import annotations

import re
import struct

MAGIC = b"\x93NUMPY"
HEADER_MOST = 1 << 16  # numpy's own headers are under a few hundred bytes
_HEADER = re.compile(
    r"\{ *'descr' *: *'(?P<descr>[<>]f[248]|\|V2|<V2|bfloat16)' *, *'fortran_order' *: *(?P<fortran>True|False) *,"
    r" *'shape' *: *\((?P<shape> *(?:[0-9]{1,12} *, *)*(?:[0-9]{1,12} *)?)\) *,? *\} *\n"
)
_WIDTH = {"f2": 2, "f4": 4, "f8": 8, "V2": 2, "bfloat16": 2}
_FORMAT = {"f2": "e", "f4": "f", "f8": "d"}


class NpyError(ValueError):
    """The file is not an .npy file this reader takes; the message says why, in one line."""


def read_npy(data: bytes) -> tuple[tuple[int, ...], list[float]]:
    """(shape, values in C order as Python floats) of an .npy file's bytes."""
    if data[:6] != MAGIC or len(data) < 10:
        raise NpyError("not an .npy file (no \\x93NUMPY magic and version)")
    major, minor = data[6], data[7]
    if (major, minor) == (1, 0):
        size, start = struct.unpack("<H", data[8:10])[0], 10
    elif (major, minor) in ((2, 0), (3, 0)) and len(data) >= 12:
        size, start = struct.unpack("<I", data[8:12])[0], 12
    else:
        raise NpyError(f"format version {major}.{minor}; this reader takes 1.0, 2.0 and 3.0")
    if size > HEADER_MOST or start + size > len(data):
        raise NpyError(f"a header of {size} bytes, past the file or past {HEADER_MOST}")
    try:
        header = data[start : start + size].decode("ascii")
    except UnicodeDecodeError:
        raise NpyError("a header that is not ASCII") from None
    match = _HEADER.fullmatch(header)
    if match is None:
        raise NpyError(f"a header this reader does not take (f2, f4, f8 or bf16 only): {header[:80]!r}")
    descr, kind = match["descr"], match["descr"].lstrip("<>|")
    shape = tuple(int(x) for x in match["shape"].replace(" ", "").split(",") if x)
    count = 1
    for n in shape:
        count *= n
    body = data[start + size :]
    if len(body) != count * _WIDTH[kind]:
        raise NpyError(f"{len(body)} bytes of data; shape {shape} of {descr} needs {count * _WIDTH[kind]}")
    if kind in _FORMAT:  # '<' or '>': struct's own byte orders
        values = list(struct.unpack(f"{descr[0]}{count}{_FORMAT[kind]}", body))
    else:  # bfloat16: each value's two bytes are the upper half of a little-endian float32
        wide = bytearray(4 * count)
        wide[2::4], wide[3::4] = body[0::2], body[1::2]
        values = list(struct.unpack(f"<{count}f", bytes(wide)))
    if match["fortran"] == "True" and len(shape) > 1:
        values = _c_order(values, shape)
    return shape, values


def _c_order(values: list[float], shape: tuple[int, ...]) -> list[float]:
    """Fortran-ordered values (the first index fastest) in C order (the last index fastest)."""
    out = [0.0] * len(values)
    strides_f, step = [], 1
    for n in shape:
        strides_f.append(step)
        step *= n
    for c_index in range(len(values)):
        rest, f_index = c_index, 0
        for n, stride in zip(reversed(shape), reversed(strides_f)):
            rest, i = divmod(rest, n)
            f_index += i * stride
        out[c_index] = values[f_index]
    return out


__all__ = ["NpyError", "read_npy"]
