"""--max-seconds ends the command: exit 2 and one line, soon after the limit, with no process left behind
(worker processes included) and no traceback. The time limits of verify-certificate, compare and compute
on inputs far too big for one second; map_forked's workers when the time limit or a bug ends the work.

The upper bounds on wall time here are hang checks (a command that waits for its workers' minutes of work,
or for ever), not timings: each is many times what the command takes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from symattn.input import limits
from symattn.input.errors import LimitError
from symattn.kernel import cores, float64

from .conftest import ROOT

HANG = 60  # seconds: far past a one-second limit; reaching it means the command hangs

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="processes are looked for in /proc")


def processes(where: int, field: int) -> list[int]:
    """The processes whose /proc stat field (after the name) ``field`` is ``where``: 1 the parent, 2 the group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended while we looked
            continue
        if int(text[text.rindex(")") + 2 :].split()[field]) == where:
            found.append(int(stat.parent.name))
    return found


def made_workers(monkeypatch) -> list[int]:
    """The pids of the workers map_forked forks from now on (a list that fills as it forks)."""
    made: list[int] = []
    fork = cores._fork

    def recording(*args, **kwargs):
        pid, asks, answers = fork(*args, **kwargs)
        made.append(pid)
        return pid, asks, answers

    monkeypatch.setattr(cores, "_fork", recording)
    return made


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` that still exist, as processes or as zombies not yet reaped."""
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def ended_by_the_limit(args: list[str], cwd: Path, source: str) -> None:
    """``symattn ARGS --max-seconds 1`` in a process group of its own: exit 2, the time limit's line alone on
    stderr, nothing on stdout, and no process of its group left once it has ended."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "symattn", *args, "--max-seconds", "1"]
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"symattn {' '.join(args)} --max-seconds 1 was still running after {HANG} s")
    assert (proc.returncode, out, err) == (
        2,
        "",
        f"symattn: {source}: took longer than 1 s (the time limit; raise it with --max-seconds)\n",
    )
    assert processes(proc.pid, 2) == []  # its workers went with it


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """An 8192 × 64 head as .npy files (seconds of float64 work, whatever the machine) and a float32 result."""
    folder = tmp_path_factory.mktemp("kernel")
    rng = np.random.default_rng(28)
    for name in "qkv":
        np.save(folder / f"{name}.npy", rng.standard_normal((8192, 64)).astype(np.float16))
    np.save(folder / "o.npy", np.zeros((8192, 64), dtype=np.float32))
    (folder / "s.toml").write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    return folder


def slow_certificate(n: int, dv: int) -> dict:
    """A genuine float64-path certificate whose every value is given to arb: verifying it is mpmath's exps
    of every row, in worker processes, a minute of work."""
    from symattn.certificates.float_digits import significant_many, text
    from symattn.certificates.float_maker import METHOD, exact_decimal, portable

    rng = np.random.default_rng(7)
    Q, K = (rng.standard_normal((n, 8)).astype(np.float16).astype(np.float64) for _ in range(2))
    V = (1 + 2 * rng.random((n, dv))).astype(np.float16).astype(np.float64)  # outputs in [1, 3): 2 digits decide
    (block,) = float64.blocks(float64.head(Q, K, V, None, None), weights=False, block=n)
    lo, hi = float64.interval(block.output, block.output_error)
    ok, q, e = significant_many(lo, hi, 2)
    assert ok.all()

    def hexes(a):
        return [[float.hex(x) for x in row] for row in a.tolist()]

    return {
        "d_k": 8,
        "output": {
            "value": [[text(x, y) for x, y in zip(qs, es)] for qs, es in zip(q.tolist(), e.tolist())],
            "path": ["a" * dv] * n,
            "float": hexes(block.output),
            "bound": hexes(portable(block.output_error)),
        },
        "certificate": {
            "version": 2,
            "path": "float64",
            "method": METHOD,
            "digits": 2,
            "paths": {"float64": 0, "compensated": 0, "arb": n * dv},
            "files": [],
            "enclosures": [
                {"at": [i + 1, k + 1], "bounds": [exact_decimal(Fraction(lo[i, k])), exact_decimal(Fraction(hi[i, k]))]}
                for i in range(n)
                for k in range(dv)
            ],
            "inputs": {"Q": hexes(Q), "K": hexes(K), "V": hexes(V), "scale": "sqrt", "mask": None},
        },
    }


def test_verify_certificate_ends_at_its_time_limit(tmp_path):
    # on main it printed its line, then waited for its workers (minutes), which printed KeyboardInterrupt tracebacks
    (tmp_path / "c.json").write_text(json.dumps(slow_certificate(1024, 4)), encoding="utf-8")
    ended_by_the_limit(["verify-certificate", "c.json"], tmp_path, "c.json")


def test_compare_ends_at_its_time_limit(kernel):
    ended_by_the_limit(["compare", "s.toml", "o.npy"], kernel, "s.toml")


def test_compute_ends_at_its_time_limit_and_leaves_no_file(kernel):
    before = sorted(os.listdir(kernel))
    ended_by_the_limit(["compute", "s.toml", "--certify", "--float64", "-o", "c.json"], kernel, "s.toml")
    assert sorted(os.listdir(kernel)) == before  # neither the certificate nor its temporary file


def sleeper(data, piece):
    time.sleep(data)
    return piece


def test_the_time_limit_kills_map_forkeds_workers(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # two workers, however many cores this machine has
    made = made_workers(monkeypatch)  # other tests' servers or clusters may hold children of this process too
    start = time.monotonic()
    with pytest.raises(LimitError) as info:
        with limits.deadline(0.5, "w.json"):
            cores.map_forked(sleeper, HANG, [1, 2, 3])
    assert str(info.value) == "w.json: took longer than 0.5 s (the time limit; raise it with --max-seconds)"
    assert len(made) == 2 and alive(made) == []  # killed and reaped, not left to sleep
    assert time.monotonic() - start < HANG / 2  # a hang check: the workers' sleep was not waited for
    assert cores.map_forked(sleeper, 0, [1, 2, 3]) == [1, 2, 3]  # and the next call has its workers again


def failing(data, piece):
    if piece == 3:
        raise ZeroDivisionError(f"piece {piece}")
    return piece * data


def test_a_workers_error_is_raised_here_and_every_worker_ends(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    made = made_workers(monkeypatch)
    assert cores.map_forked(failing, 10, [0, 1, 2, 4, 5]) == [0, 10, 20, 40, 50]  # in the pieces' order
    with pytest.raises(ZeroDivisionError, match="^piece 3$"):
        cores.map_forked(failing, 10, list(range(6)))
    assert len(made) == 4 and alive(made) == []


def test_an_alarm_python_caught_before_the_workers_end_still_ends_every_worker(monkeypatch):
    """The alarm can ring before _end holds the stops, with Python's handler still to run: it then runs
    inside _end. Every worker is still killed and reaped, the time limit is raised after, and the next
    call has its workers again (under load, a worker was left asleep and map_forked stayed busy)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    made = made_workers(monkeypatch)
    real = signal.pthread_sigmask
    calls: list[int] = []

    def ringing(how, mask):
        calls.append(how)
        if len(calls) == 3:  # _end's hold: the workers are made, their pieces done
            signal.raise_signal(signal.SIGALRM)  # Python runs the handler at its next instruction, here
        return real(how, mask)

    monkeypatch.setattr(signal, "pthread_sigmask", ringing)
    with pytest.raises(LimitError) as info:
        with limits.deadline(HANG, "w.json"):
            cores.map_forked(sleeper, 0, [1, 2, 3])
    assert str(info.value) == f"w.json: took longer than {HANG} s (the time limit; raise it with --max-seconds)"
    assert len(made) == 2 and alive(made) == []
    monkeypatch.setattr(signal, "pthread_sigmask", real)
    assert cores.map_forked(sleeper, 0, [1, 2, 3]) == [1, 2, 3] and len(made) == 4


def test_a_time_limit_that_a_reader_wrapped_in_its_key_is_the_time_limits_own_line():
    """A file reader names its key in what it raises; the alarm ringing while Q's file was read came out as
    's.toml: Q: s.toml: took longer than 1 s' under load."""
    with pytest.raises(LimitError) as info:
        with limits.deadline(HANG, "s.toml"), limits.alarm_guard():
            try:
                signal.raise_signal(signal.SIGALRM)
            except LimitError as exc:
                raise LimitError("s.toml", "Q", str(exc)) from None  # as filematrix wraps a reader's error
    assert str(info.value) == f"s.toml: took longer than {HANG} s (the time limit; raise it with --max-seconds)"
