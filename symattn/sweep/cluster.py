"""The cases on Dask: a local cluster on this machine's cores, or a running one at ``--scheduler``.

Cases go out as futures, as many at a time as the cluster has threads (so that a worker holds only the case
it runs), and come back as they finish. Three ways a case ends without its own row, each one failed row
that says so while the sweep goes on:

- its worker died while running it (a kernel that crashed it, a kill -9): Dask's ``KilledWorker``. The local
  cluster gives a case one try (``allowed-failures`` 0); a running cluster as many as its scheduler allows;
- it ran past ``--case-seconds`` (counted from the worker's event that it started): the future is cancelled
  and its worker restarted by its nanny, which stops the kernel wherever it is;
- anything else its task raised on the worker.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from symattn.input.errors import SymattnError, brief
from symattn.sweep.case import TOPIC, row, run_case
from symattn.sweep.grid import Case

TICK = 0.25  # seconds between looks at the running cases' clocks
CONNECT = 20  # seconds to reach a scheduler and find a worker


class ClusterError(SymattnError, ConnectionError):
    """Dask is not installed, or the scheduler cannot be reached."""


@contextmanager
def connect(scheduler: str | None) -> Iterator[Any]:
    """A Dask client: of a new local cluster (one single-threaded worker process per core), or of ``scheduler``."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError("symattn sweep runs on Dask: pip install 'symattn[sweep]'") from None
    if scheduler is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        _importable_here()
        # one try per case: a kernel that kills its worker is a failed row, not four dead workers
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            cluster = LocalCluster(
                n_workers=cores,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                scheduler_kwargs={"dashboard": False},  # no web server: nobody looks at it, and it starts slowly
                # its HTTP routes (health, metrics) start all the same: on the loopback and a free port, not
                # on every interface's 8787, which a second sweep (or another Dask) holds
                dashboard_address="127.0.0.1:0",
            )
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
        return
    if not scheduler.startswith(("tcp://", "tls://")) or not scheduler.isprintable():
        raise ClusterError(f"--scheduler: expected an address such as tcp://HOST:PORT, got {brief(scheduler)}")
    try:
        client = Client(scheduler, timeout=CONNECT)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"--scheduler {brief(scheduler)}: no Dask scheduler answered ({exc})") from None
    try:
        client.wait_for_workers(1, timeout=CONNECT)
    except TimeoutError:
        client.close()
        raise ClusterError(f"--scheduler {brief(scheduler)}: the scheduler has no worker") from None
    with client:
        yield client


def device_here(device: str) -> str | None:
    """Why the local cluster's workers, which run on this machine, cannot hold tensors on ``device``; None where
    they can. (A scheduler's workers are elsewhere: their devices are theirs.)"""
    kind, _, index = device.partition(":")
    if kind == "cpu":
        return None
    import torch

    backend = {"cuda": torch.cuda, "mps": getattr(torch.backends, "mps", None), "xpu": getattr(torch, "xpu", None)}
    module = backend.get(kind)
    if module is None or not module.is_available():
        return f"{device!r}: torch has no {kind} device on this machine, where the local cluster's workers run"
    count = module.device_count() if hasattr(module, "device_count") else 1
    if index and int(index) >= count:
        return f"{device!r}: this machine has {count} {kind} device{'s' if count != 1 else ''}"
    return None


def _importable_here() -> None:
    """The local workers import the kernel as ``python -m`` would here: the current folder on their path. Dask's
    nanny spawns them with this process's sys.path (not PYTHONPATH's): under the ``symattn`` script that lacks
    the folder, so it goes on both (every case failed "No module named 'mykernels'" there)."""
    here = os.getcwd()
    path = os.environ.get("PYTHONPATH", "")
    if here not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, path) if p)
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def stream(
    client: Any,
    cases: Sequence[Case],
    settings: dict[str, Any],
    kernel: str,
    case_seconds: float | None,
    done: Callable[[dict[str, Any]], None],
) -> None:
    """Run ``cases`` on the cluster, calling ``done`` with each row as its case finishes."""
    from distributed import wait

    starts: dict[str, tuple[float, str]] = {}
    lock = threading.Lock()

    def started(event: tuple[float, dict[str, Any]]) -> None:
        with lock:
            starts[event[1]["key"]] = (time.monotonic(), event[1]["worker"])

    client.subscribe_topic(TOPIC, started)
    run = uuid.uuid4().hex[:12]
    waiting = list(reversed(cases))
    running: dict[Any, Case] = {}
    try:
        while waiting or running:
            slots = max(1, sum(client.nthreads().values()))
            while waiting and len(running) < slots:
                case = waiting.pop()
                key = f"symattn-case-{run}-{case.index}"
                future = client.submit(run_case, settings, case.index, case.point, kernel, key, key=key, pure=False)
                running[future] = case
            try:
                finished = wait(list(running), timeout=TICK, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                finished = set()
            for future in finished:
                done(_row_of(future, running.pop(future)))
            if case_seconds is not None:
                for future in list(running):
                    with lock:
                        began = starts.get(future.key)
                    if began is not None and time.monotonic() - began[0] > case_seconds:
                        done(_timed_out(client, future, running.pop(future), began[1], case_seconds))
    finally:
        client.unsubscribe_topic(TOPIC)
        if running:
            client.cancel(list(running), force=True)


def _row_of(future: Any, case: Case) -> dict[str, Any]:
    from distributed import KilledWorker

    if future.status == "finished":
        return future.result()
    exc = future.exception() if future.status == "error" else None
    if isinstance(exc, KilledWorker):
        last = getattr(exc, "last_worker", None)
        tries = getattr(exc, "allowed_failures", 0) + 1
        why = f"its worker died while running it ({tries} {'try' if tries == 1 else 'tries'}): "
        why += "the kernel crashed it or it was killed"
        return row(case.index, case.point, [], why, 0.0, getattr(last, "address", "?"))
    why = f"its task raised {type(exc).__name__}: {exc}" if exc is not None else f"its future was {future.status}"
    return row(case.index, case.point, [], why, 0.0, "?")


def _timed_out(client: Any, future: Any, case: Case, worker: str, seconds: float) -> dict[str, Any]:
    """Cancel the case and restart its worker (the kernel cannot be stopped otherwise)."""
    future.cancel(force=True)
    status = client.restart_workers([worker], raise_for_error=False).get(worker)
    then = "its worker was restarted" if status == "OK" else f"its worker could not be restarted ({status})"
    return row(case.index, case.point, [], f"timed out after {seconds:g} s (--case-seconds); {then}", seconds, worker)


__all__ = ["ClusterError", "connect", "stream"]
