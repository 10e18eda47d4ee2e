"""Spec matrices given as a file name: ``Q = "q.npy"``, ``K = "qkv.safetensors:k"`` (issue 22).

The file is found beside the spec, and only there: the name is relative, has no ``..``, and no link
may lead it out of the spec's folder; it is opened as a regular file, without waiting on a FIFO.
Its floats (float16, bfloat16, float32 or float64) are the exact dyadic rationals they are.

A :class:`FileMatrix` keeps them as a float64 array (exact by construction) and makes the
:class:`Numeral` entries of a row only when something reads that row, so the float64 path of
``compare`` takes the array as it is, and a 1024 × 64 file never becomes 65,536 Fractions there;
render, compute and check see the same exact values as rationals.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from symattn.input import limits
from symattn.input.errors import LimitError, SpecError, numpy_index
from symattn.input.files import beside, note_read
from symattn.input.numeral import Numeral

if TYPE_CHECKING:  # numpy only where a file is read: render of a spec of numbers starts without it
    import numpy as np

    from symattn.input import tensorfile

# a tensor's name is whatever follows the file's ':' ("a:b" too); an empty one is refused where it is read
_NAME = re.compile(r"(?P<path>[^:]+\.(?P<kind>npy|safetensors))(?::(?P<tensor>.*))?", re.DOTALL)


class FileMatrix(Sequence[tuple[Numeral, ...]]):
    """A matrix read from a file: rows of exact Numerals made on demand, and the float64 array itself."""

    def __init__(self, array: np.ndarray, format: str, name: str):
        self.array = array  # 2-D float64, every value finite and exactly the file's float
        self.array.setflags(write=False)
        self.format = format  # float16, bfloat16, float32 or float64: the file's
        self.name = name  # as the spec gave it
        self._rows: dict[int, tuple[Numeral, ...]] = {}

    def __len__(self) -> int:
        return self.array.shape[0]

    @overload
    def __getitem__(self, index: int) -> tuple[Numeral, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[tuple[Numeral, ...], ...]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        i = range(len(self))[index]  # negative indices, and IndexError past the end
        if i not in self._rows:
            self._rows[i] = tuple(map(numeral, self.array[i].tolist()))
        return self._rows[i]

    def __iter__(self) -> Iterator[tuple[Numeral, ...]]:
        return (self[i] for i in range(len(self)))

    def columns(self, start: int, stop: int) -> FileMatrix:
        """Columns start to stop (0-based, stop excluded): one head's block, still an array."""
        import numpy as np

        return FileMatrix(np.ascontiguousarray(self.array[:, start:stop]), self.format, self.name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FileMatrix):
            import numpy as np

            return self.array.shape == other.array.shape and bool(np.array_equal(self.array, other.array))
        return isinstance(other, tuple) and tuple(self) == other

    def __hash__(self) -> int:
        return hash(tuple(self))  # as the tuple of rows it equals

    def __repr__(self) -> str:
        return f"FileMatrix({self.name!r}, {self.format}, {self.array.shape[0]}×{self.array.shape[1]})"


def has_formulas(m: Sequence[Sequence[object]]) -> bool:
    """Whether a matrix holds a formula: never one read from a file (whose rows are then not made)."""
    if isinstance(m, FileMatrix) or all(isinstance(x, Numeral) for row in m for x in row):
        return False  # numbers only: SymPy (the formulas' module) is not imported for them
    from symattn.input.formula import Formula

    return any(isinstance(x, Formula) for row in m for x in row)


def numeral(x: float) -> Numeral:
    """A float as the Numeral of its exact decimal (every binary float has one): text, value, digits."""
    value = Fraction(x)
    if x == 0:
        return Numeral("0", value, "decimal", 0, "0", 0)
    exact = Decimal(x)  # exact: Decimal keeps every digit of a binary float
    if -6 <= exact.adjusted() < 21:
        text = format(exact, "f")
        return Numeral(text, value, "decimal", len(text.partition(".")[2]), text, 0)
    sign, digits, _ = exact.as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = ("-" if sign else "") + shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
    power = exact.adjusted()
    return Numeral(f"{mantissa}e{power}", value, "decimal", max(len(shown) - 1 - power, 0), mantissa, power)


def read(raw: str, key: str, source: str, folder: Path | None, max_rows: int) -> FileMatrix:
    """The matrix a spec key names as ``FILE.npy``, ``FILE.safetensors`` or ``FILE.safetensors:TENSOR``."""
    return matrix_of(read_array(raw, key, source, folder), raw, key, source, max_rows)


def file_part(raw: str) -> str:
    """The file of a name that :func:`names_file` accepts (``qkv.safetensors:k``: ``qkv.safetensors``)."""
    match = _NAME.fullmatch(raw)
    assert match is not None  # the caller checked names_file
    return match["path"]


def names_file(raw: object) -> bool:
    """Whether a spec value is a file name of ours (a string ending .npy, .safetensors or .safetensors:NAME)."""
    return isinstance(raw, str) and _NAME.fullmatch(raw) is not None


def read_array(raw: str, key: str, source: str, folder: Path | None) -> tensorfile.Array:
    """The array of any shape (up to 4 axes) that a spec key names; not yet checked for NaN."""
    from symattn.input import tensorfile

    return _read(raw, key, source, folder, tensorfile.read_npy, tensorfile.read_safetensors)


def per_head(raw: str, key: str, source: str, folder: Path | None, heads: int) -> tuple[Numeral, ...]:
    """The numbers of a per-head key's file (a kernel keyword of one number a head): ``heads`` finite floats,
    shape (heads,), each as the Numeral of its exact decimal."""
    from symattn.input import tensorfile

    values = read_array(raw, key, source, folder).values
    if values.shape != (heads,):
        axes = tuple(values.shape)  # Python's tuple: (3,) for one axis
        raise SpecError(source, key, f"{_brief(raw)}: expected shape ({heads},), one number per head, got {axes}")
    bad = tensorfile.not_finite(values.reshape(1, heads))
    if bad:
        (_, h), what = bad[0]
        raise SpecError(source, key, f"{place(raw, (h,))}: not a finite number: {what}")
    return tuple(numeral(float(x)) for x in values)


def place(raw: str, index: tuple[int, ...]) -> str:
    """A value of the file a spec key names, as numpy indexes it (0-based): ``'q.npy'[0, 0, 2, 5]``."""
    return _brief(raw) + numpy_index(index)


def read_integers(raw: str, key: str, source: str, folder: Path | None) -> np.ndarray:
    """The whole numbers (int64, up to 4 axes) of the file a spec key names: a kernel layout's cu_seqlens,
    block table or sequence lengths; a float, object or big-endian array is refused in one line."""
    from symattn.input import tensorfile

    return _read(raw, key, source, folder, tensorfile.read_npy_integers, tensorfile.read_safetensors_integers)


def _read(raw: str, key: str, source: str, folder: Path | None, npy: Any, safetensors: Any) -> Any:
    """What ``npy`` or ``safetensors`` reads of the file a spec key names, found beside the spec only."""

    def error(problem: str, limit: bool = False) -> SpecError:
        return (LimitError if limit else SpecError)(source, key, problem)

    match = _NAME.fullmatch(raw)
    if match is None:
        if folder is None:
            raise error("expected a matrix (a list of rows), got a string")
        raise error(f"expected a matrix (a list of rows) or a .npy or .safetensors file name, got {_brief(raw)}")
    if folder is None:
        raise error(f"a file name ({_brief(raw)}) is read only from a spec file, beside it; give the rows here")
    name = match["path"]
    if match["tensor"] is not None and match["kind"] == "npy":
        raise error(f"{_brief(raw)}: a .npy file holds one array; no name follows it")
    if match["tensor"] == "":
        raise error(f"{_brief(raw)}: expected a tensor's name after ':' (FILE.safetensors:NAME)")
    real, problem = beside(name, folder, "spec")
    if real is None:
        raise error(problem)
    data = _read_bytes(real, name, error)
    shown = _brief(name)
    try:
        if match["kind"] == "npy":
            return npy(shown, data)
        return safetensors(shown, data, match["tensor"])
    except SpecError as exc:
        raise (LimitError if isinstance(exc, LimitError) else SpecError)(source, key, str(exc)) from None


def _read_bytes(path: Path, name: str, error: Any) -> bytes:
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW), "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise error(f"{_brief(name)}: not a regular file")
            if info.st_size > limits.TENSOR_BYTES:
                raise error(f"{_brief(name)}: larger than {limits.TENSOR_BYTES // 2**20} MiB (the limit)", limit=True)
            note_read(info)
            return fh.read(limits.TENSOR_BYTES + 1)
    except OSError as exc:
        raise error(f"{_brief(name)}: cannot read file: {exc.strerror or exc}") from None


def matrix_of(array: tensorfile.Array, raw: str, key: str, source: str, max_rows: int) -> FileMatrix:
    values = array.values
    shape = list(values.shape)
    axes = tuple(shape)
    while len(shape) > 2 and shape[0] == 1:  # (1, n, d) and (1, 1, n, d): a batch of one, one head
        shape.pop(0)
    if len(shape) != 2 or 0 in shape:
        raise SpecError(source, key, f"{_brief(raw)}: expected a matrix (rows, columns), got shape {axes}")
    rows, cols = shape
    if rows > max_rows or cols > limits.DIMS:
        raise LimitError(source, key, f"{_brief(raw)}: {rows}×{cols}; at most {max_rows}×{limits.DIMS}")
    values = values.reshape(rows, cols)
    from symattn.input import tensorfile

    bad = tensorfile.not_finite(values)
    if bad:  # named in the file's own axes, as numpy indexes it
        import numpy as np

        (i, j), what = bad[0]
        at = tuple(int(x) for x in np.unravel_index(i * cols + j, array.values.shape))
        raise SpecError(source, key, f"{place(raw, at)}: not a finite number: {what}")
    return FileMatrix(values, array.format, raw)


def _brief(text: str) -> str:
    # a file name is echoed as far as a path usually goes (a test's temporary folder passes 80), not further
    return repr(text if len(text) <= 200 else text[:200] + "…")


__all__ = [
    "FileMatrix",
    "has_formulas",
    "matrix_of",
    "names_file",
    "numeral",
    "read",
    "read_array",
    "read_integers",
]
