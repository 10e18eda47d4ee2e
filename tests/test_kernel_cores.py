"""The engine's forked processes run BLAS on one thread (threadpoolctl), and the report is the same byte for
byte with one process or several; the API's causal masks are the spec's (issue 30)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from symattn.kernel import heads
from symattn.kernel.cores import map_forked
from symattn.variants.masks import Diagonal


def _threads(data, piece):
    from threadpoolctl import threadpool_info

    return sorted({(pool["user_api"], pool["num_threads"]) for pool in threadpool_info()})


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: map_forked forks nothing")
def test_each_forked_process_runs_blas_on_one_thread():
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=2):  # the suite runs on one thread a pool (conftest): widen this process's
        here = {pool["user_api"]: pool["num_threads"] for pool in threadpool_info()}
        assert here["blas"] == 2  # numpy's BLAS is loaded and wider here, so there is a pool to cap
        for pools in map_forked(_threads, None, [0, 1]):
            assert pools and all(threads == 1 for _, threads in pools), pools


def _gqa(batches: int, tokens: int, seed: int) -> tuple[np.ndarray, ...]:
    """(out, q, k, v): float32 inputs of 4 query heads over 2 KV heads, d = 16, and numpy's attention of them."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batches, 4, tokens, 16)).astype(np.float32)
    k, v = (rng.standard_normal((batches, 2, tokens, 16)).astype(np.float32) for _ in range(2))
    s = np.einsum("bhnd,bhmd->bhnm", q.astype(np.float64), np.repeat(k, 2, axis=1).astype(np.float64)) / 4
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((w / w.sum(axis=-1, keepdims=True)) @ np.repeat(v, 2, axis=1)).astype(np.float32), q, k, v


def test_one_process_or_several_give_the_same_report(monkeypatch):
    from symattn.kernel import compare

    out, q, k, v = _gqa(batches=1, tokens=48, seed=7)
    monkeypatch.setattr(heads, "PARALLEL_WORK", 10**18)
    alone = compare(out, q, k, v, max_ulp=1)
    monkeypatch.setattr(heads, "PARALLEL_WORK", 0)
    forked = compare(out, q, k, v, max_ulp=1)
    assert forked.to_json() == alone.to_json() and forked.text() == alone.text()


@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_the_apis_masks_are_the_specs(align):
    from symattn.kernel.tensors import _allowed

    for n, m in ((5, 9), (9, 9), (4, 4)):
        for window in (None, 1, 3, 20):
            offset = m - n if align == "bottom-right" else 0
            diagonal = Diagonal(align, offset, window, m)
            expected = np.array([[diagonal.allows(True, i, j) for j in range(m)] for i in range(n)])
            assert np.array_equal(_allowed(n, m, True, align, window), expected), (n, m, window)


def test_threads_give_the_pieces_results_in_order_with_the_callers_errstate():
    import warnings

    from symattn.kernel.cores import map_threads

    def divide(n: int) -> float:
        return float(np.float64(n) / np.float64(0.0))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(divide="ignore", invalid="ignore"):  # the caller's, held in each thread's piece
            got = map_threads(divide, [0, 1, -1, 2])
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            map_threads(divide, [1, 2])
    assert [str(x) for x in got] == ["nan", "inf", "-inf", "inf"]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: map_threads starts no thread")
def test_threads_run_blas_on_one_thread_and_give_it_back():
    from threadpoolctl import threadpool_info, threadpool_limits

    from symattn.kernel.cores import map_threads

    def blas(_: int) -> int:
        return next(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")

    with threadpool_limits(limits=2, user_api="blas"):
        assert map_threads(blas, [0, 1], blas=True) == [1, 1]
        assert blas(0) == 2


def test_bands_cover_each_row_once_in_order(monkeypatch):
    from symattn.kernel import cores

    monkeypatch.setattr(cores, "BAND", 10)
    assert cores.bands((7, 3)) == [slice(0, 3), slice(3, 6), slice(6, 9)]
    assert cores.bands((5, 40)) == [slice(i, i + 1) for i in range(5)]  # a row at least
    assert cores.bands((25,)) == [slice(0, 10), slice(10, 20), slice(20, 30)]
    assert cores.bands((0, 4)) == []


def test_a_batchs_report_is_the_same_in_many_bands_on_threads_or_in_one(monkeypatch):
    from symattn.kernel import compare, cores

    out, q, k, v = _gqa(batches=2, tokens=40, seed=11)
    out[1, 3, 7, 5] += np.float32(3e-6)  # one entry far off: the largest error, named by its place
    monkeypatch.setattr(heads, "LEAN_WORK", 0)  # lean's first bound and its threads, at this size
    reports = []
    for band, work in ((10**9, 10**18), (48, 0)):  # all here, in order; or bands of three rows, lean's pieces
        monkeypatch.setattr(cores, "BAND", band)  # and the heads on threads
        monkeypatch.setattr(heads, "PARALLEL_WORK", work)
        got = compare(out, q, k, v, worst=10)
        reports.append((got.text(), got.to_json()))
    assert reports[0] == reports[1]
    assert "out[1, 3, 7, 5]" in reports[0][0]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: map_threads starts no thread")
def test_an_error_in_a_piece_drops_the_pieces_not_begun():
    import threading
    import time

    from symattn.kernel.cores import map_threads

    begun: list[int] = []
    lock = threading.Lock()

    def piece(n: int) -> int:
        with lock:
            begun.append(n)
        if n == 0:
            raise ValueError("piece 0")
        time.sleep(0.05)
        return n

    before = threading.active_count()
    with pytest.raises(ValueError, match="piece 0"):
        map_threads(piece, list(range(40)))
    assert len(begun) < 40 and threading.active_count() == before  # its threads have ended
