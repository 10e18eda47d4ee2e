"""The float64 path's vectorised deciding at kernel sizes (issue 30, "Speed"): the histogram bucket read off
a float's bits, the figures formed a band of rows at a time on threads, and the worst entries found
from the buckets down. Each is checked against the plain form it replaces, on hostile values too."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from symattn.kernel import cores, deciding, rowscale
from symattn.kernel.comparison import EDGES, ZERO
from symattn.kernel.entry_table import ranked_at


def test_a_bucket_is_the_count_of_edges_below_it():
    e = np.array([0.0, -0.0, 5e-324, 0.5, np.nextafter(0.5, 1), 1.0, 1.5, 2.0, 3.0, 2.0**20, 2.0**20 + 1])
    e = np.concatenate([e, [np.inf, np.nan, 2.0**-1022, 1e300]])
    assert deciding.bucket(e).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 22, 23, 23, 23, 1, 23]


def test_buckets_agree_with_a_search_of_the_edges_at_every_edge_and_between():
    edges = np.array([float(x) for x in EDGES])
    rng = np.random.default_rng(3)
    e = np.concatenate(
        [
            edges,
            np.nextafter(edges, np.inf),
            np.nextafter(edges[1:], 0.0),
            np.abs(rng.standard_normal(20000)) * 10.0 ** rng.integers(-12, 12, 20000),
            [np.inf, np.nan, 5e-324, 1e-310, 2.0**-1074 * 3],
        ]
    )
    assert np.array_equal(deciding.bucket(e), np.searchsorted(edges, e, "left"))


def _hostile(rows: int, cols: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals of every size and sign, ends at 0 and ±∞, x on the ends, inside and outside."""
    rng = np.random.default_rng(seed)
    n = rows * cols
    mid = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    half = np.abs(rng.standard_normal(n)) * 10.0 ** rng.integers(-20, 2, n) * np.abs(mid)
    lo, hi = mid - half, mid + half
    x = mid + rng.standard_normal(n) * half * 3
    x[::7], x[::11] = lo[::7], hi[::11]
    lo[::13], hi[::17], lo[::19], hi[::23] = -np.inf, np.inf, 0.0, 0.0
    lo = np.minimum(lo, hi)
    return x.reshape(rows, cols), lo.reshape(rows, cols), hi.reshape(rows, cols)


@pytest.mark.parametrize("fmt", ["float32", "bfloat16", "float16", "float64"])
def test_errors_in_bands_on_threads_are_the_whole_arrays_errors(monkeypatch, fmt):
    x, lo, hi = _hostile(60, 37, seed=5)
    whole = deciding._errors(x, lo, hi, fmt)
    monkeypatch.setattr(cores, "BAND", 100)  # bands of two rows, on threads
    banded = deciding.pieces(x, lo, hi, fmt)
    for f in fields(deciding.Errors):
        assert np.array_equal(getattr(banded, f.name), getattr(whole, f.name), equal_nan=True), f.name
    made = deciding.decide(x, lo, hi, fmt)
    plain = deciding.decided(whole)
    assert all(np.array_equal(a, b) for a, b in zip(_flat(made), _flat(plain)))


def _flat(decided) -> list[np.ndarray]:
    ok, (q_u, k_u), (q_r, k_r), bucket = decided
    return [ok, q_u, k_u, q_r, k_r, bucket]


def test_the_near_and_far_distances_are_the_absolute_ones():
    x = np.array([1.0, 3.0, 5.0, 2.0, 0.0])
    lo = np.array([2.0, 2.0, 2.0, -np.inf, 0.0])
    hi = np.array([4.0, 4.0, 4.0, np.inf, 0.0])
    e = deciding._errors(x, lo, hi, "float64")
    near = e.ulps_lo * np.maximum(deciding._ulp(lo, 53, -1022), deciding._ulp(hi, 53, -1022))
    assert (near / (1 - deciding.WIDEN)).tolist()[:3] == [1.0, 0.0, 1.0]
    assert e.ulps_lo[3] == 0.0 and e.ulps_hi[3] == np.inf


def test_row_figures_in_bands_are_the_whole_arrays(monkeypatch):
    x, lo, hi = _hostile(30, 24, seed=9)
    x[x > 1e20] = np.inf
    with np.errstate(all="ignore"):
        whole = rowscale._figures(x, lo, hi, 8)
        largest = rowscale.may_be_largest(x, lo, hi, 8)
        monkeypatch.setattr(cores, "BAND", 50)
        banded = rowscale._figures(x, lo, hi, 8)
        assert np.array_equal(rowscale.may_be_largest(x, lo, hi, 8), largest)
    finite = np.isfinite(x)
    for a, b in zip(banded, whole):
        assert np.array_equal(a[finite], b[finite], equal_nan=True)


def _sorted(finite, bucket, keys, count):
    """ranked_at's order by a sort of every finite entry: the bucket (ZERO last), the key, the place."""
    order = sorted(
        (n for n in range(finite.size) if finite.flat[n]),
        key=lambda n: (-(-1 if bucket.flat[n] == ZERO else bucket.flat[n]), -keys.flat[n], n),
    )
    return order[:count]


@pytest.mark.parametrize("seed", range(6))
def test_the_worst_entries_are_those_of_a_full_sort(seed):
    rng = np.random.default_rng(seed)
    shape = (30, 40)
    finite = rng.random(shape) > 0.1
    bucket = rng.integers(0, [2, 4, 24, 24, 3, 24][seed], shape)  # a crowded top bucket, or a sparse one
    bucket[rng.random(shape) < 0.05] = ZERO
    bucket[~finite] = len(EDGES)
    keys = rng.integers(-1, [3, 10**6, 5, 10**6, 2, 50][seed], shape).astype(np.int64)
    keys[~finite] = -1
    for count in (1, 3, 11, 100, 2000):
        assert ranked_at(finite, bucket, keys, count).tolist() == _sorted(finite, bucket, keys, count)
