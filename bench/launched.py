"""A whole process's own wall seconds, CPU seconds and peak memory, for the benches.

Linux counts into a process's peak (ru_maxrss) the peak of the memory it replaced at exec: a child spawned
straight from a bench, whose arrays and certificates hold hundreds of MB, reports the bench's own size as its
peak (verify-certificate at 4096 read 0.44 to 0.53 GiB that way, 0.28 GiB alone). So the child is spawned by a
small Python process started for it, which times it (Popen to wait4: its own start-up left out) and reports
wait4's figures for it: its CPU seconds with those of the workers it forked and reaped, and its peak.
"""

from __future__ import annotations

import json
import subprocess
import sys

_LAUNCHER = """
import json, os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
out = child.stdout.read()
_, status, usage = os.wait4(child.pid, 0)
seconds = time.perf_counter() - start
cpu = usage.ru_utime + usage.ru_stime
print(json.dumps([seconds, cpu, usage.ru_maxrss, os.waitstatus_to_exitcode(status), out.decode("utf-8", "replace")]))
"""


def launched(command: list[str], cwd: str) -> tuple[float, float, float, int, str]:
    """(wall seconds, CPU seconds, peak GiB, exit status, what it printed) of ``command`` run in ``cwd``."""
    said = subprocess.run([sys.executable, "-c", _LAUNCHER, *command], cwd=cwd, capture_output=True, text=True)
    seconds, cpu, peak_kib, code, out = json.loads(said.stdout)
    return seconds, cpu, peak_kib / 2**20, code, out
