"""The worker processes and their pool: work never runs on the server's event loop.

A few worker processes (:class:`Pool`) do it, each request under SIGALRM
(:func:`symattn.input.limits.deadline`, which works in a process's main thread) and, as a backstop for
code that ignores signals, killed and replaced by the server when it runs past the limit. A thread could
not be stopped. PDF exports queue for all workers but one (the TeX slots), so TeX never holds them all; a
worker's TeX run (its own process group) ends with the worker, at SIGTERM, when the server stops or dies.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from symattn.input.errors import SymattnError
from symattn.input.limits import GRACE_SECONDS, REQUEST_SECONDS, WAITING, WARM_SECONDS, WORKERS
from symattn.input.messages import message_language, messages_in, said
from symattn.web.tasks import REQUEST_SOURCE, check_task, render_task, run_task, time_limit_message

if TYPE_CHECKING:
    import asyncio

# --- in the worker process ----------------------------------------------------------


def _read_frame(stream) -> bytes | None:
    """One length-prefixed message from a pipe; None at its end."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    size = int.from_bytes(head, "big")
    data = stream.read(size)
    return data if len(data) == size else None


def _write_frame(stream, data: bytes) -> None:
    stream.write(len(data).to_bytes(4, "big") + data)
    stream.flush()


def worker_main() -> None:
    """A worker process: tasks in on stdin, results out on stdout, one at a time, until stdin closes.

    SIGTERM (the server stopping, or dying: see :func:`_end_with_parent`) kills its TeX run first.
    """
    import pickle
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle; it ends us
    signal.signal(signal.SIGTERM, _terminate)
    _end_with_parent()
    channel_in, channel_out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the channel
    _warm()
    _write_frame(channel_out, READY)  # the server times a request from here, not from the start-up
    while True:
        frame = _read_frame(channel_in)
        if frame is None:
            return
        name, body, seconds, *language = pickle.loads(frame)  # (name, body, seconds[, language of errors])
        lang = language[0] if language else "en"
        try:
            with messages_in(lang):  # the errors in the language the page asked in
                result = run_task(name, body, seconds)
        except Exception:  # a bug in symattn: say so, keep serving
            import traceback

            traceback.print_exc()
            result = (
                "error",
                (500, f"{REQUEST_SOURCE}: internal error in symattn; the server's log has the details", None),
            )
        try:
            _write_frame(channel_out, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
        except (OSError, ValueError):
            return


def _terminate(signum: int, frame: Any) -> None:
    import os

    from symattn.rendering.pdf import end_tex

    end_tex()  # first: no TeX run outlives us
    # at once, not by SystemExit: that one, raised where the worker already ends (threading's shutdown), was a
    # traceback on the server's stderr at every stop; there is nothing to flush, the request is the server's
    os._exit(128 + signum)


def _end_with_parent() -> None:
    """Linux: SIGTERM when the server dies, however it dies, so that no TeX run outlives it."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the server's own stop ends us; an orphan ends when stdin does


def _warm() -> None:
    """Import and compile what a request needs before the first one comes (templates, SymPy)."""
    from symattn.input import builtin
    from symattn.input.files import read_table

    try:
        raw = read_table(builtin.example_path(builtin.DEFAULT, "zh"))
        render_task({"spec": raw})
        check_task({"spec": raw, "claims": {"sqrt_dk": "1.414"}})
    except SymattnError:  # pragma: no cover - the built-in example is valid
        pass


# --- the worker pool, on the server's side -----------------------------------------


class Failure(Exception):
    """A request that ends in an HTTP error: status, message, where."""

    def __init__(self, status: int, message: str, where: Any = None):
        super().__init__(message)
        self.status, self.message, self.where = status, message, where


READY = b"ready"  # a worker's first frame: warmed up, waiting for tasks

# what a worker process runs (tests swap in a worker whose TeX runs are slow)
WORKER_CODE = "from symattn.web.pool import worker_main; worker_main()"


class Worker:
    """One worker process (``python -c``, so that nothing of the server's state or main module is copied)."""

    def __init__(self) -> None:
        import os
        import subprocess
        from pathlib import Path

        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        # its own session: Ctrl-C in the terminal reaches the server only, which ends the workers
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
            start_new_session=True,
        )
        self.ready = False

    def wait_ready(self) -> bool:
        """Wait (in a thread: it blocks) for the worker's start-up to end; False if it died in it."""
        if not self.ready:
            self.ready = _read_frame(self.process.stdout) == READY
        return self.ready

    def exchange(self, message: bytes) -> bytes | None:
        """Send a task and wait for its result (in a thread: both block)."""
        if not self.wait_ready():
            return None
        _write_frame(self.process.stdin, message)
        return _read_frame(self.process.stdout)

    def end(self) -> None:
        """Kill it now, and its TeX run with it (TeX has a process group of its own, which a kill misses)."""
        import os
        import signal

        if self.process.poll() is None:
            try:
                # stopped, it can neither start nor reap a child while we kill them
                os.kill(self.process.pid, signal.SIGSTOP)
                for child in _children(self.process.pid):
                    _kill_group_of(child)
            except ProcessLookupError:
                pass
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            assert stream is not None  # both are pipes (see __init__)
            try:
                stream.close()
            except OSError:
                pass

    def close(self, seconds: float = 2.0) -> None:
        """Ask it to stop (end of input; SIGTERM, which ends a TeX run too), then make sure."""
        import subprocess

        assert self.process.stdin is not None  # a pipe (see __init__)
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.terminate()
            self.process.wait(seconds)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.end()


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux; elsewhere none are known, and a worker's SIGTERM must do)."""
    import os

    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found = []
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children") as fh:
                found += [int(p) for p in fh.read().split()]
        except OSError:
            pass
    return found


def _kill_group_of(pid: int) -> None:
    """Kill a worker's child (latexmk) and the process group it leads; the worker is stopped meanwhile."""
    import os
    import signal

    for kill, target in ((os.killpg, pid), (os.kill, pid)):  # os.kill too: a child not yet in its own group
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Pool:
    """WORKERS processes, each doing one task at a time; one that runs past its time is killed and replaced.

    PDF exports take a TeX slot as well as a worker, and there is one slot fewer than workers: however
    many exports are asked for, and however long their TeX runs, one worker stays free for the rest.
    """

    def __init__(self, size: int = WORKERS, seconds: float = REQUEST_SECONDS):
        from concurrent.futures import ThreadPoolExecutor

        if size < 2:
            raise ValueError("a pool needs two workers at least: one of them never runs TeX")
        self.size, self.seconds = size, seconds
        self.waiting = 0
        self.idle: asyncio.Queue[Worker] | None = None  # both made by start(), on the event loop
        self.tex_slots: asyncio.Semaphore | None = None
        # one blocking exchange per busy worker: never on the event loop
        self.threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="symattn-worker")
        self.workers: list[Worker] = []

    def _spawn(self) -> Worker:
        worker = Worker()
        self.workers.append(worker)
        return worker

    def _replace(self, worker: Worker) -> Worker:
        worker.end()
        self.workers.remove(worker)
        return self._spawn()

    async def start(self) -> None:
        import asyncio

        self.idle = idle = asyncio.Queue[Worker]()
        self.tex_slots = asyncio.Semaphore(self.size - 1)
        for _ in range(self.size):
            idle.put_nowait(self._spawn())

    async def stop(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, w.close) for w in self.workers))
        self.workers.clear()
        self.threads.shutdown(wait=False, cancel_futures=True)

    async def run(self, name: str, body: Any, extra_seconds: float = 0.0, tex: bool = False) -> Any:
        """The result of a task; ``tex``: it runs TeX, so it waits for a TeX slot first (exports queue)."""
        idle, tex_slots = self._started()
        if self.waiting >= WAITING:
            raise Failure(503, f"{REQUEST_SOURCE}: {said('server_busy', n=WAITING)}")
        self.waiting += 1
        try:
            if tex:
                await tex_slots.acquire()
            try:
                worker = await idle.get()
            except BaseException:
                if tex:
                    tex_slots.release()
                raise
        finally:
            self.waiting -= 1
        try:
            return await self._exchange(worker, name, body, extra_seconds)
        finally:
            if tex:
                tex_slots.release()

    def _started(self) -> tuple[asyncio.Queue[Worker], asyncio.Semaphore]:
        assert self.idle is not None and self.tex_slots is not None, "Pool.start() first"
        return self.idle, self.tex_slots

    async def _exchange(self, worker: Worker, name: str, body: Any, extra_seconds: float) -> Any:
        import asyncio
        import pickle

        replace = True
        try:
            message = pickle.dumps((name, body, self.seconds, message_language()), protocol=pickle.HIGHEST_PROTOCOL)
            loop = asyncio.get_running_loop()
            # a fresh worker's start-up (imports, templates) is not the request's time: wait for it apart
            try:
                started = await asyncio.wait_for(loop.run_in_executor(self.threads, worker.wait_ready), WARM_SECONDS)
            except TimeoutError:
                raise Failure(503, f"{REQUEST_SOURCE}: {said('server_starting')}") from None
            if not started:
                raise Failure(503, f"{REQUEST_SOURCE}: {said('server_stopped')}")
            frame = await asyncio.wait_for(
                loop.run_in_executor(self.threads, worker.exchange, message),
                self.seconds + extra_seconds + GRACE_SECONDS,
            )
            if frame is None:
                raise Failure(503, f"{REQUEST_SOURCE}: {said('server_memory')}")
            status, result = pickle.loads(frame)
            replace = False
        except TimeoutError:
            raise Failure(422, time_limit_message(self.seconds)) from None
        except OSError:
            raise Failure(503, f"{REQUEST_SOURCE}: {said('server_stopped')}") from None
        finally:
            # a worker that ran over, died, or whose client went away mid-task is replaced
            self._started()[0].put_nowait(self._replace(worker) if replace else worker)
        if status == "error":
            raise Failure(*result)
        return result
