"""Both cores for the float64 path's independent pieces of work: processes, or threads for numpy's own.

The pieces are the same ones one process works through, so each result is the same, whichever process
made it, and they come back in order: the output does not depend on the number of cores. The work's data
reach the processes by fork (copied, never pickled); only the pieces' numbers and their results are sent.

The processes are this module's own, not a pool's: when the command ends early (its time limit, Ctrl-C, a
bug), they are killed and reaped before the error goes on, so none outlives it or prints a traceback, and
none waits for a piece nobody will read. Each also dies with its parent (Linux), however that dies.

Each forked process runs BLAS on one thread (threadpoolctl): the processes are the parallelism, and two
processes' BLAS pools each as wide as the machine fought over the cores (timings swung 3-5x). Every
figure is decided on rigorous bounds, so BLAS's summation order changes no digit of the output.

Work that is numpy's loops and BLAS on large arrays (bands of rows of the deciding, lean's first bound,
two floats' rows) goes on threads instead (map_threads): those loops let go of the GIL, and a thread
costs no fork, no pickled result and no copy-on-write fault afterwards on every page this process
writes (at (2, 8, 1024, 128) these took a fifth of the text report's time). Arb's rows stay in
processes (python-flint holds the GIL), and so do several heads' float64 bounds and the error-free
sums, which were no quicker on threads.
"""

from __future__ import annotations

import gc
import os
import pickle
import selectors
import signal
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

_FRAME = struct.Struct("<Q")
_STOPS = {signal.SIGALRM, signal.SIGINT, signal.SIGTERM}  # what ends a command early: held while workers change
BAND = 2**16  # entries of one band of rows (bands): its temporaries (a few dozen) fit in the cache
_busy = False  # map_forked is running here: one level of processes, none inside another


def map_forked(function: Callable[[Any, Any], Any], data: Any, pieces: Sequence[Any], parallel: bool = True) -> list:
    """[function(data, piece) for piece in pieces], in as many forked processes as there are cores (at most
    one a piece) where ``parallel`` and there are two pieces and two cores, else here."""
    global _busy
    cores = min(len(pieces), os.cpu_count() or 1)
    if not parallel or cores < 2 or _busy:
        return [function(data, piece) for piece in pieces]
    _busy = True
    _imported()
    workers: dict[int, tuple[int, int, int]] = {}  # results' fd: (pid, pieces' fd, piece it works on)
    try:
        with _stops_held():  # no worker made and not yet known to _end
            for _ in range(cores):
                theirs = [fd for answers, (_, asks, _) in workers.items() for fd in (answers, asks)]
                pid, asks, answers = _fork(function, data, pieces, theirs)
                workers[answers] = (pid, asks, -1)
        return _deal(workers, len(pieces))
    finally:
        try:
            _end(workers)
        finally:
            _busy = False


def map_threads(function: Callable[[Any], Any], pieces: Sequence[Any], blas: bool = False) -> list:
    """[function(piece) for piece in pieces], on a thread a core: for numpy's work on bands of rows, whose
    loops and BLAS let go of the GIL (``blas``: BLAS on one thread meanwhile, threadpoolctl, as in the
    forked workers). Each piece is computed as it is alone, so the results are the same ones. No process is
    forked: no copy-on-write fault afterwards on each page of this process's memory, nothing pickled. The
    threads end before this returns (a later fork copies no live thread); inside a worker, or within
    one_process, the pieces go here, one after another."""
    threads = min(len(pieces), os.cpu_count() or 1)
    if threads < 2 or _busy:
        return [function(piece) for piece in pieces]
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    # each piece in a copy of the caller's context: numpy's errstate (a context variable) holds there too
    caller = contextvars.copy_context()

    def run(piece: Any) -> Any:
        return caller.copy().run(function, piece)

    with _blas_on_one_thread(blas):
        pool = ThreadPoolExecutor(threads)
        try:
            return list(pool.map(run, pieces))
        finally:  # the time limit or Ctrl-C: the pieces not begun are dropped, the running ones end
            pool.shutdown(wait=True, cancel_futures=True)


def bands(shape: tuple[int, ...]) -> list[slice]:
    """An array's first axis in bands of about BAND entries (at least a row each): for map_threads, each
    band's temporaries stay in the cache."""
    width = 1
    for n in shape[1:]:
        width *= n
    step = max(1, BAND // max(1, width))
    return [slice(i, i + step) for i in range(0, shape[0] if shape else 0, step)]


def in_bands(function: Callable[..., Sequence[Any]], arrays: Sequence[Any], kinds: Sequence[Any]) -> list:
    """function(*(a[rows] for a in arrays)) for each band of rows of the arrays (their first axis, as
    ``bands`` cuts it), on threads: its results, one array per dtype of ``kinds``, written into whole arrays
    of the arrays' shape. Each entry's results must be its own (the same in any band)."""
    import numpy as np

    shape = arrays[0].shape
    made = [np.empty(shape, dtype=kind) for kind in kinds]

    def band(rows: slice) -> None:
        for whole, part in zip(made, function(*(a[rows] for a in arrays))):
            whole[rows] = part

    map_threads(band, bands(shape))
    return made


@contextmanager
def _blas_on_one_thread(limit: bool) -> Iterator[None]:
    if not limit:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _deal(workers: dict[int, tuple[int, int, int]], count: int) -> list:
    """Each worker a piece at a time, the next one as soon as it answers; the results in the pieces' order."""
    results: list[Any] = [None] * count
    following = 0
    with selectors.DefaultSelector() as waiting:
        for fd, (pid, asks, _) in list(workers.items()):
            if following < count:
                os.write(asks, _FRAME.pack(following))
                workers[fd] = (pid, asks, following)
                following += 1
            waiting.register(fd, selectors.EVENT_READ)
        left = count
        while left:
            for key, _ in waiting.select():
                pid, asks, piece = workers[key.fd]
                kind, value = pickle.loads(_read_frame(key.fd))
                if kind == "error":  # the worker's exception, raised here as the same call would raise it
                    raise value
                results[piece] = value
                left -= 1
                if following < count:
                    os.write(asks, _FRAME.pack(following))
                    workers[key.fd] = (pid, asks, following)
                    following += 1
    return results


def _fork(
    function: Callable[[Any, Any], Any], data: Any, pieces: Sequence[Any], theirs: list[int]
) -> tuple[int, int, int]:
    """A worker, and the pipes to it: (pid, where its pieces' numbers go, where its results come from).
    ``theirs``: the other workers' pipe ends, which this one closes (so each sees its own pipe end)."""
    parent = os.getpid()
    asks_read, asks = os.pipe()
    answers, answers_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: it never returns into the caller's code
        status = 1
        try:
            # the parent owns Ctrl-C and the time limit, and kills its workers; SIGTERM ends one quietly
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            for fd in (asks, answers, *theirs):
                os.close(fd)
            _end_with_parent(parent)
            gc.freeze()  # the parent's objects: no collection here walks them (each a copy-on-write fault)
            _one_thread()
            _kept_memory()
            _work(function, data, pieces, asks_read, answers_write)
            status = 0
        finally:
            os._exit(status)  # no atexit, no flushing of the parent's buffers
    os.close(asks_read)
    os.close(answers_write)
    return pid, asks, answers


def _imported() -> None:
    """What every worker imports (_one_thread, _kept_memory), imported here once before the fork rather than
    in each worker after it: 20 ms of each one's start."""
    import ctypes.util  # noqa: F401

    import threadpoolctl  # noqa: F401


def _one_thread() -> None:
    """In a worker: BLAS and OpenMP on one thread for the process's whole life."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def _kept_memory() -> None:
    """In a worker: glibc keeps the memory numpy frees for its next arrays (blocks of 8 MB, made and freed
    hundreds of times) rather than giving it back and faulting it in again, zeroed, page by page: that took
    a fifth of the CPU time of every entry decided at 4096 keys. The worker is ours and short-lived, so what
    it keeps is given back when it ends. Elsewhere than glibc, nothing changes."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, 32 * 2**20)  # M_MMAP_THRESHOLD: arrays below 32 MB come from the heap
        libc.mallopt(-1, 256 * 2**20)  # M_TRIM_THRESHOLD: the heap's free top is kept up to 256 MB
    except (OSError, AttributeError):
        pass


def _work(function: Callable[[Any, Any], Any], data: Any, pieces: Sequence[Any], asks: int, answers: int) -> None:
    """A worker's life: a piece's number in, its result out, until the parent closes the pipe (or dies)."""
    while True:
        raw = _read_exactly(asks, _FRAME.size)
        if raw is None:
            return
        (index,) = _FRAME.unpack(raw)
        try:
            answer: tuple[str, Any] = ("ok", function(data, pieces[index]))
        except Exception as exc:  # a bug: the parent raises it as its own
            answer = ("error", exc)
        try:
            body = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an exception that does not pickle: its words, then
            body = pickle.dumps(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
        try:
            _write_all(answers, _FRAME.pack(len(body)) + body)
        except OSError:  # the parent has gone
            return


def _end(workers: dict[int, tuple[int, int, int]]) -> None:
    """Stop every worker and reap it: done ones leave on the closed pipe, busy ones are killed. The time
    limit and Ctrl-C wait meanwhile (they would cut this short and leave a process behind); one that
    Python had caught before they were held ends this early, and the next round stops the rest."""
    caught: BaseException | None = None
    while workers:
        try:
            with _stops_held():
                for answers, (pid, asks, _) in workers.items():  # all killed first: their memory goes at once
                    for fd in (asks, answers):
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                while workers:
                    _, (pid, _, _) = workers.popitem()
                    try:
                        os.waitpid(pid, 0)
                    except ChildProcessError:
                        pass
        except BaseException as exc:  # the time limit or Ctrl-C: raised once every worker is gone
            caught = caught or exc
    if caught is not None:
        raise caught


@contextmanager
def _stops_held() -> Iterator[None]:
    """The time limit, Ctrl-C and SIGTERM wait inside: the system holds new ones, and one that Python has
    already caught but not yet handled is noted and raised on the way out. Only the main thread runs
    Python's handlers, so elsewhere the mask alone does."""
    noted: list[int] = []
    swapped: dict[int, Any] = {}
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        if threading.current_thread() is threading.main_thread():
            for held_stop in sorted(_STOPS):
                swapped[held_stop] = signal.signal(held_stop, lambda signum, frame: noted.append(signum))
        yield
    finally:
        for swapped_stop, handler in swapped.items():
            signal.signal(swapped_stop, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    for stop in dict.fromkeys(noted):
        signal.raise_signal(stop)


def _read_frame(fd: int) -> bytes:
    head = _read_exactly(fd, _FRAME.size)
    if head is None:
        raise RuntimeError("a worker process ended without its result")
    (size,) = _FRAME.unpack(head)
    body = _read_exactly(fd, size)
    if body is None:
        raise RuntimeError("a worker process ended in the middle of its result")
    return body


def _read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes, or None at the end of the pipe."""
    parts, got = [], 0
    while got < size:
        chunk = os.read(fd, min(size - got, 1 << 24))
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _end_with_parent(parent: int) -> None:
    """Linux: SIGKILL when the parent dies, however it dies."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere a worker ends on the closed pipe once its piece is done
    if os.getppid() != parent:  # the parent died before prctl took hold
        os._exit(1)


@contextmanager
def one_process() -> Iterator[None]:
    """map_forked works here, in this process, while inside: where something else is the parallelism (a Dask
    worker of a sweep, one per core) and forking a threaded process would only add processes."""
    global _busy
    before, _busy = _busy, True
    try:
        yield
    finally:
        _busy = before


__all__ = ["bands", "in_bands", "map_forked", "map_threads", "one_process"]
