"""Both cores for the float64 path's independent pieces of work (several heads, arb rows, compensated sums).

The pieces are the same ones one process works through, so each result is the same, whichever process
made it, and they come back in order: the output does not depend on the number of cores. The work's data
reach the processes by fork (copied, never pickled); only the pieces and their results are sent.

Each forked process runs BLAS on one thread (threadpoolctl): the processes are the parallelism, and two
processes' BLAS pools each as wide as the machine fought over the cores (timings swung 3-5x). Every
figure is decided on rigorous bounds, so BLAS's summation order changes no digit of the output.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

_SHARED: Any = None  # (function, data) while map_forked runs: what the forked processes read


def map_forked(function: Callable[[Any, Any], Any], data: Any, pieces: Sequence[Any], parallel: bool = True) -> list:
    """[function(data, piece) for piece in pieces], in as many forked processes as there are cores (at most
    one a piece) where ``parallel`` and there are two pieces and two cores, else here."""
    global _SHARED
    cores = min(len(pieces), os.cpu_count() or 1)
    if not parallel or cores < 2 or _SHARED is not None:  # one level of processes: none inside another
        return [function(data, piece) for piece in pieces]
    _SHARED = (function, data)
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(cores, mp_context=context, initializer=_one_thread) as pool:
            return list(pool.map(_run, pieces))
    finally:
        _SHARED = None


def _one_thread() -> None:
    """In each forked process: BLAS and OpenMP on one thread for the process's whole life."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def _run(piece: Any) -> Any:
    function, data = _SHARED
    return function(data, piece)


__all__ = ["map_forked"]
