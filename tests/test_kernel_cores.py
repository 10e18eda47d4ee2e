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


def test_one_process_or_several_give_the_same_report(monkeypatch):
    from symattn.kernel import compare

    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 4, 48, 16)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, 48, 16)).astype(np.float32) for _ in range(2))
    s = np.einsum("bhnd,bhmd->bhnm", q.astype(np.float64), np.repeat(k, 2, axis=1).astype(np.float64)) / 4
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    out = ((w / w.sum(axis=-1, keepdims=True)) @ np.repeat(v, 2, axis=1)).astype(np.float32)
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
