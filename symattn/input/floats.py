"""Float results read exactly: a ``.npy`` file (NumPy's format, also what ``numpy.save(t.numpy())``
writes for a torch tensor), a tensor of a ``.safetensors`` file (``FILE.safetensors:NAME``) or a JSON
array, each entry as the float it stands for.

A binary float is a dyadic rational, so ``Fraction(x)`` is exact. A JSON number is read from its decimal
text with a strict grammar, never through ``float()``, and rounded to the nearest float64, ties to even,
as ``json.load`` reads it: the repr that ``json.dump`` writes gives back exactly the kernel's float, and
is measured as that float, not as the shorter decimal (which lies up to half a ULP from it). With
``--dtype`` every number must then be one of that format's floats, as a file's values must. NaN and
infinities stay as they are (``None`` with a note of which): a kernel that returns them has an error the
report must show, not a crash.

The files are read by numpy's and safetensors' own readers within our limits (``tensorfile.py``,
shared with the spec keys that name a file). A file's dtype is its format unless ``--dtype`` names
another that holds every value exactly: a bfloat16 result saved as float32 is measured in bfloat16's ULPs.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from symattn.input import limits, tensorfile
from symattn.input.errors import LimitError, SpecError
from symattn.input.files import note_read
from symattn.input.records import record

# precision p (significand bits, with the hidden one) and the smallest normal exponent of each format
FORMATS = {
    "float8_e4m3fn": (4, -6),
    "float8_e5m2": (3, -14),
    "float16": (11, -14),
    "bfloat16": (8, -126),
    "float32": (24, -126),
    "float64": (53, -1022),
}
# the least magnitude that rounds to infinity in float64: the largest float plus half its spacing
FLOAT64_LIMIT = Fraction(2) ** 1024 - Fraction(2) ** 970
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]{1,4})?")


@record
class FloatResult:
    """A matrix of floats: each entry exact (a Fraction) or None where it is not finite."""

    source: str
    format: str  # a key of FORMATS: the format the entries are measured in
    rows: Sequence[tuple[Fraction | None, ...]]  # a tuple, or a file's ArrayRows
    not_finite: tuple[tuple[tuple[int, int], str], ...]  # ((row, col) 0-based, "nan" | "inf" | "-inf")
    # a .npy file's floats as float64, exactly (NaN and infinities as they are): compare's float64 path
    # takes them from here, not back from the Fractions. A result with batch and head axes (3 or 4 of
    # them) has no rows yet: compare lines its heads up with the spec's (batched.arrange)
    array: Any = field(default=None, compare=False, repr=False)
    # the shape of the array as the file or tensor gave it, axes of length one included: places name them
    # all (places.as_given), though compare drops them to line the heads up; () for JSON
    given: tuple[int, ...] = field(default=(), compare=False, repr=False)

    @staticmethod
    def of_array(source: str, fmt: str, values: np.ndarray) -> FloatResult:
        """A matrix of a file's floats: its rows of Fractions made only as they are read (ArrayRows)."""
        bad = tensorfile.not_finite(values)
        return FloatResult(source, fmt, ArrayRows(values), tuple(((i, j), v) for (i, j), v in bad), values)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0])

    def shape_text(self, rows: int | None = None, cols: int | None = None) -> str:
        """The shape as its file or tensor gave it, leading axes of one kept (1×1×16×8), or that shape with
        ``rows`` × ``cols`` for its last two axes: a message's shapes, in the result's own axes."""
        mine = self.shape
        wanted = mine if rows is None or cols is None else (rows, cols)
        lead = self.given[:-2] if len(self.given) > 2 else ()
        return "×".join(map(str, (*lead, *wanted)))

    def value(self, i: int, j: int) -> Fraction | None:
        """One entry exactly (None where not finite): of a file's floats, without making its row."""
        if self.array is not None and self.array.ndim == 2:
            x = float(self.array[i, j])
            return Fraction(x) if math.isfinite(x) else None
        return self.rows[i][j]

    def floats(self) -> tuple[np.ndarray, np.ndarray]:
        """Every entry as a float64 (0 where not finite) and where it is finite: a file's own floats, or each
        Fraction as a float64 (a JSON result's are floats of its format: exact)."""
        if self.array is not None and self.array.ndim == 2:
            finite = np.isfinite(self.array)
            return np.where(finite, self.array, 0.0), finite
        finite = np.array([[v is not None for v in row] for row in self.rows], dtype=bool)
        x = np.array([[0.0 if v is None else float(v) for v in row] for row in self.rows], dtype=np.float64)
        return x, finite


class ArrayRows(Sequence):
    """The rows of a float64 matrix as exact Fractions (None where not finite), each row made the first time
    it is read: compare's float64 path works on the array, and only a few entries need their Fraction."""

    def __init__(self, values: np.ndarray):
        self.values = values
        self._made: dict[int, tuple[Fraction | None, ...]] = {}

    def __len__(self) -> int:
        return self.values.shape[0]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        i = range(len(self))[i]  # an IndexError past the end, as a tuple's
        row = self._made.get(i)
        if row is None:  # exact: a binary float is a dyadic rational
            row = self._made[i] = tuple(Fraction(x) if math.isfinite(x) else None for x in self.values[i].tolist())
        return row

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ArrayRows):  # NaN and None alike: both stand for "not finite"
            return bool(np.array_equal(self.values, other.values, equal_nan=True))
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))


def read_result(path: str | Path, fmt: str | None = None, layout: str = "bhnd", key: str = "result") -> FloatResult:
    """A float matrix from ``.npy`` or ``.safetensors`` (``FILE.safetensors:NAME``: its own dtype, or ``fmt``
    where every value is one of that format) or ``.json`` (``fmt``, default float64); an array's axes are
    read in ``layout``. ``key``: what a JSON file's messages call it (``result[2][1]``, a gradient's ``dO``)."""
    source = str(path)
    if fmt is not None and fmt not in FORMATS:
        raise SpecError(source, None, f"unknown float format {fmt!r}; expected one of {', '.join(FORMATS)}")
    array, data = _tensor(path)
    if array is not None:
        return array_result(source, array, fmt, layout)
    return _json(source, data, fmt or "float64", key)


def read_tensor(path: str | Path, fmt: str | None = None) -> tensorfile.Array:
    """A float tensor of any shape from ``.npy`` or ``.safetensors`` (``FILE.safetensors:NAME``), as a kernel
    returned it, measured in ``fmt`` where every value is one of that format (default: its own)."""
    source = str(path)
    array, _ = _tensor(path)
    if array is None:
        raise SpecError(source, None, "expected a .npy or .safetensors file: this layout's result keeps its axes")
    return measured(source, array, fmt)


def read_tensors(path: str | Path, fmt: str | None = None) -> dict[str, tensorfile.Array]:
    """Every tensor of a ``.safetensors`` file by name (split-KV partials and their merge), each measured in
    ``fmt`` where every value is one of that format (default: its own)."""
    source = str(path)
    if not source.lower().endswith(".safetensors"):
        raise SpecError(source, None, "expected a .safetensors file, whose tensors are named")
    entries = tensorfile.safetensors_entries(source, _read_bytes(path))
    return {
        name: measured(f"{source}:{name}", tensorfile.safetensors_array(source, name, entry, axes=5), fmt)
        for name, entry in sorted(entries.items())
    }


def _tensor(path: str | Path) -> tuple[tensorfile.Array | None, bytes]:
    """The array of a .npy or .safetensors result, or None and the bytes of any other (JSON)."""
    source = str(path)
    file, colon, name = source.partition(".safetensors:")  # FILE.safetensors:NAME, the name any text ("a:b")
    if colon and not Path(path).is_file():
        if not name:
            raise SpecError(source, None, "expected a tensor's name after ':' (FILE.safetensors:NAME)")
        return tensorfile.read_safetensors(source, _read_bytes(file + ".safetensors"), name), b""
    data = _read_bytes(path)
    if source.lower().endswith(".safetensors"):
        return tensorfile.read_safetensors(source, data, None), data
    if source.lower().endswith(".npy") or data.startswith(tensorfile.NPY_MAGIC):
        return tensorfile.read_npy(source, data), data
    return None, data


def _read_bytes(path: str | Path) -> bytes:
    source = str(path)
    try:  # a FIFO opened without waiting for a writer, and refused with anything else not a regular file
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise SpecError(source, None, "not a regular file")
            note_read(info)
            data = f.read(limits.RESULT_BYTES + 1)
    except OSError as exc:
        raise SpecError(source, None, f"cannot read file: {exc.strerror or exc}") from None
    if len(data) > limits.RESULT_BYTES:
        raise LimitError(source, None, f"larger than {limits.RESULT_BYTES // 2**20} MiB")
    return data


def array_result(source: str, array: tensorfile.Array, fmt: str | None = None, layout: str = "bhnd") -> FloatResult:
    """A result of a file's array (or a tensor's) in ``layout``, measured in ``fmt`` (default: its own format)."""
    array = measured(source, array, fmt)
    shape = list(array.values.shape)
    parts = str(tuple(shape))  # Python's tuple: (3,) for one axis
    while len(shape) > 2 and shape[0] == 1 and (len(shape) > 3 or tensorfile.one_head(tuple(shape), layout)):
        shape.pop(0)  # (1, n, d) and (1, 1, n, d): a batch of one, one head; a batch of one
    if len(shape) == 1:
        shape = [1, shape[0]]
    if len(shape) in (3, 4) and 0 not in shape:  # batch and head axes: compare lines them up with the spec's
        if array.values.size > limits.TENSOR_ENTRIES:
            raise LimitError(source, "shape", f"{parts}: more than {limits.TENSOR_ENTRIES} entries (the limit)")
        return FloatResult(source, array.format, (), (), array.values.reshape(shape), array.values.shape)
    if 0 in shape:  # a result of no entries, whatever its axes
        raise SpecError(source, "shape", f"{parts} has an axis of length 0 (no entries)")
    if len(shape) != 2:
        raise SpecError(source, "shape", f"expected a matrix (rows, columns), got shape {parts}")
    rows, cols = shape
    if max(rows, cols) > limits.KERNEL_TOKENS or rows * cols > limits.TENSOR_ENTRIES:  # O, A or a row of LSE
        raise LimitError(
            source,
            "shape",
            f"{rows}×{cols}; at most {limits.KERNEL_TOKENS} rows or columns and {limits.TENSOR_ENTRIES} entries",
        )
    matrix = FloatResult.of_array(source, array.format, array.values.reshape(rows, cols))
    return replace(matrix, given=array.values.shape)


def measured(source: str, array: tensorfile.Array, fmt: str | None) -> tensorfile.Array:
    """The array measured in ``fmt`` (checked: every value one of its), or in its own format."""
    if fmt is None or fmt == array.format:
        return array
    if fmt not in FORMATS:
        raise SpecError(source, None, f"unknown float format {fmt!r}; expected one of {', '.join(FORMATS)}")
    in_format(source, array.values, fmt, array.format)
    return tensorfile.Array(fmt, array.values)


def in_format(source: str, values: np.ndarray, fmt: str, held: str, key: str | None = None) -> None:
    """Refuse, in one line naming the first, a finite value that is not one of ``fmt``'s (the file holds ``held``):
    at its place in the array, 0-based (``r.npy[0, 3, 17, 5]``), or, with the ``key`` of a JSON result's rows,
    as its reader names them (``result[1][2]``)."""
    with np.errstate(all="ignore"):  # out of range: inf or NaN, unequal to the value
        back = values.astype(tensorfile.dtype_of(fmt)).astype(np.float64)
    wrong = np.isfinite(values) & (back != values)
    if wrong.any():
        at = tuple(int(i) for i in np.argwhere(wrong)[0])
        why = f"{float(values[at])!r} is not a {fmt} value: --dtype {fmt} needs every value to be one"
        why += f" (the file holds {held})"
        if key is not None:
            raise SpecError(source, key, why, tuple(i + 1 for i in at))
        raise SpecError(source, None, why, index=at)


def _json(source: str, data: bytes, fmt: str, key: str = "result") -> FloatResult:
    try:
        raw = json.loads(
            data.decode("utf-8"),
            parse_float=str,
            parse_int=str,
            parse_constant=lambda name: {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[name],
        )
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(source, None, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise LimitError(source, None, "lists nested too deep (a result is rows of numbers)") from None
    if isinstance(raw, list) and raw and not isinstance(raw[0], list):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(r, list) and r for r in raw):
        raise SpecError(source, None, "expected a JSON array of rows of numbers")
    if len(raw) > limits.TOKENS or max(len(r) for r in raw) > limits.DIMS:
        raise LimitError(source, None, f"at most {limits.TOKENS}×{limits.DIMS} entries")
    if len({len(r) for r in raw}) != 1:
        raise SpecError(source, None, "rows of different lengths")
    rows: list[list[Fraction | None]] = []
    bad = []
    for i, row in enumerate(raw):
        values: list[Fraction | None] = []
        for j, x in enumerate(row):
            if x in ("nan", "inf", "-inf"):
                bad.append(((i, j), x))
                values.append(None)
            elif isinstance(x, str) and len(x) > limits.RESULT_NUMBER_LENGTH:  # before it is matched or converted
                raise LimitError(
                    source,
                    key,
                    f"{len(x)} characters; a number has at most {limits.RESULT_NUMBER_LENGTH} (the limit)",
                    (i + 1, j + 1),
                )
            elif isinstance(x, str) and _DECIMAL.fullmatch(x):
                value = _decimal(x)
                if abs(value) >= FLOAT64_LIMIT:  # no format holds it; compare's floats would overflow
                    shown = x if len(x) <= 40 else x[:20] + "…"
                    why = f"{shown} is beyond float64's range (at most about 1.8e308)"
                    raise SpecError(source, key, why, (i + 1, j + 1))
                values.append(nearest(value, "float64"))  # json.load's float: a float's repr is that float
            else:
                what = repr(x) if isinstance(x, str) else _KINDS.get(type(x), "null")  # never a deep repr
                if isinstance(x, list):  # a tensor of more axes than rows and columns
                    what += " (JSON holds rows of numbers, two axes: a tensor of more goes in a .npy file)"
                raise SpecError(source, key, f"not a number: {what}", (i + 1, j + 1))
        rows.append(values)
    result = FloatResult(source, fmt, tuple(tuple(r) for r in rows), tuple(bad))
    if fmt != "float64":  # --dtype: every value one of its floats, as a file's must be
        in_format(source, result.floats()[0], fmt, "decimals", key)
    return result


_KINDS = {list: "a list", dict: "an object", bool: "a boolean"}


def _decimal(text: str) -> Fraction:
    mantissa, _, exponent = text.lower().partition("e")
    whole, _, digits = mantissa.partition(".")
    value = Fraction(int(whole + digits), 10 ** len(digits))
    e = int(exponent) if exponent else 0
    return value * Fraction(10) ** e


def nearest(value: Fraction, fmt: str) -> Fraction:
    """The float of ``fmt`` nearest ``value``, ties to even, its exponent unbounded above (as IEEE rounds, and
    json.load reads a decimal into float64): a float's repr, as json.dump writes it, gives back that float."""
    u = ulp(value, fmt)
    return round(value / u) * u  # Fraction's round: half to even


def ulp(value: Fraction, fmt: str) -> Fraction:
    """The unit in the last place of ``value`` in a binary format (subnormals included; ulp(0) is the smallest):
    the spacing of the floats around it, and at a power of two the spacing below it, the two floats nearest
    it (Kahan's ulp): so an error of at most half of it is the correctly rounded float's, there too (the float
    just below 1 is 1 ULP from 1, not the half of the spacing above)."""
    precision, emin = FORMATS[fmt]
    x = abs(value)
    if x == 0:
        return Fraction(2) ** (emin - precision + 1)
    e = x.numerator.bit_length() - x.denominator.bit_length()  # floor(log2 x) is e or e - 1
    if Fraction(2) ** e > x:
        e -= 1
    if e > emin and x == Fraction(2) ** e:
        e -= 1
    return Fraction(2) ** (max(e, emin) - precision + 1)


__all__ = [
    "FORMATS",
    "FloatResult",
    "array_result",
    "in_format",
    "measured",
    "nearest",
    "read_result",
    "read_tensor",
    "read_tensors",
    "ulp",
]
