"""Run-to-run determinism: how several results of one kernel on the same inputs differ from each other.

A kernel that sums in a varying order (atomic adds in a backward pass) gives results that differ run to
run. The bitwise spread counts the entries that are not the same bits in every run, and the largest
distance between two runs at one entry in ULPs: the number of floats of the result's format from one
value to the other (1 for neighbours, as the ULP distance of the libraries' tests counts), counted
exactly on the format's bit patterns, which run in the floats' order once the sign is taken off. Each
run's own distance to the exact value is its comparison's (``report.Report.runs``).
"""

from __future__ import annotations

import numpy as np

from symattn.input.errors import SpecError
from symattn.input.floats import FloatResult
from symattn.input.records import record
from symattn.input.tensorfile import dtype_of

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@record
class Spread:
    entries: int
    differ: int  # entries whose bits are not the same in every run
    ulps_apart: int  # the most steps between two runs' values at one entry, in the format's floats (both finite)
    cell: tuple[int, int] | None  # in compare's lined-up matrix: the first entry that far apart (Report.spread_at)
    not_finite: int = 0  # of those that differ, the entries not finite in some run: no ULP distance counted there


def spread(results: list[FloatResult], fmt: str) -> Spread:
    """The bitwise spread of several results, lined up alike (each the same shape), measured in ``fmt``."""
    arrays = [_values(r, fmt) for r in results]
    shape = arrays[0].shape
    for r, a in zip(results, arrays):
        if a.shape != shape:
            raise SpecError(r.source, "shape", f"{tuple(a.shape)}; the first run is {tuple(shape)}")
    bits = [a.view(np.uint64) for a in arrays]  # float64 of a narrower float: its bits, one to one
    differ = np.zeros(shape, dtype=bool)
    for b in bits[1:]:
        differ |= b != bits[0]
    finite = np.logical_and.reduce([np.isfinite(a) for a in arrays])
    ordinals = [_ordinals(np.where(finite, a, 0.0), fmt) for a in arrays]
    low, high = np.minimum.reduce(ordinals), np.maximum.reduce(ordinals)
    apart = np.where(finite, high - low, 0)
    most = int(apart.max()) if apart.size else 0
    at = None
    if most:
        i, j = divmod(int(np.argmax(apart)), shape[1])
        at = (i, j)
    lost = int(np.count_nonzero(differ & ~finite))
    return Spread(int(np.prod(shape)), int(np.count_nonzero(differ)), most, at, lost)


def _values(result: FloatResult, fmt: str) -> np.ndarray:
    """A lined-up result's values as float64, each exactly one of ``fmt``'s floats (NaN and infinities kept)."""
    if result.array is not None and result.array.ndim == 2:  # a file's or a tensor's: of its format already
        return np.ascontiguousarray(result.array, dtype=np.float64)
    x, finite = result.floats()  # JSON: each number a float of the format already (floats._json checks it)
    return np.where(finite, x, np.nan)


def _ordinals(values: np.ndarray, fmt: str) -> np.ndarray:
    """Each float's place in the order of ``fmt``'s floats (+0 and −0 both 0), as int64: the bit pattern
    without its sign, negated for a negative float. Exact for float64 too (at most 2^63 − 2^52)."""
    floats = values.astype(dtype_of(fmt))
    width = floats.dtype.itemsize
    raw = floats.view(_BITS[width]).astype(np.uint64)
    sign = np.uint64(1) << np.uint64(8 * width - 1)
    magnitude = (raw & ~sign).astype(np.int64)
    return np.where(raw & sign, -magnitude, magnitude)


__all__ = ["Spread", "spread"]
