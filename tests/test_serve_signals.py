"""symattn serve stopped by SIGTERM to its process group (a terminal closing, a job runner): one line, no
traceback from the workers (issue 28)."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="starlette (the web extra) is needed for symattn serve")
httpx = pytest.importorskip("httpx")

from symattn.input.limits import WORKERS  # noqa: E402

from .conftest import wait_until  # noqa: E402
from .test_serve import _children, as_json, seed_raw  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _idle(pids: list[int]) -> bool:
    """Every process waits in a read from a pipe (Linux's wchan)."""

    def waits(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/wchan").read_text().endswith("pipe_read")
        except OSError:
            return False

    return len(pids) == WORKERS and all(waits(pid) for pid in pids)


def test_sigterm_to_the_group_ends_the_server_and_its_warm_workers_in_one_line(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "symattn", "serve", "--port", "0"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a shell's job is
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 60)
        line = process.stdout.readline() if ready else ""
        url = re.fullmatch(r"symattn serve: (http://\S+/) \(Ctrl-C stops\)\n", line).group(1)
        answer = httpx.post(url + "api/render", json={"spec": as_json(seed_raw()), "compute": False}, timeout=60)
        assert answer.status_code == 200
        # both workers warm and waiting on their stdin: there SIGTERM, then the server's own stop, found them
        assert wait_until(lambda: _idle(_children(process.pid)), 60)
        os.killpg(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert (process.returncode, err) == (130, "symattn: interrupted\n")
