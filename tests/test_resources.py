"""Hostile inputs end within 10 s and 1 GB: each runs in its own process under RLIMIT_AS."""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MEMORY = 1 << 30  # bytes of address space
SECONDS = 10


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def square(n: int) -> list[list[str]]:
    return [[str((i * 7 + j * 3) % 19 / 10) for j in range(n)] for i in range(n)]


def claims_64() -> dict:
    rows = square(64)
    return {
        "Q": rows,
        "K": rows,
        "V": rows,
        "claims": {q: [["0.5"] * 64 for _ in range(64)] for q in ("scaled", "weights", "output")},
    }


HOSTILE = {
    "power tower": ("render", {"Q": [["((((((((16^16)^16)^16)^16)^16)^16)^16)^16)"]], "K": [[1]], "V": [[1]]}),
    "expansion": ("render", {"Q": [["(a+b+c+d+e+f+g+h)^16"]], "K": [["(a+b+c+d+e+f+g+h)^16"]], "V": [[1]]}),
    "z = 1e10": ("render", {"scale": "none", "Q": [["1e5"], [0]], "K": [["1e5"], [0]], "V": [[1], [2]]}),
    "z = 1e8": ("render", {"scale": "none", "Q": [["1e4"], [0]], "K": [["1e4"], [0]], "V": [[1], [2]]}),
    "z = 1e12": ("compute", {"scale": "none", "Q": [["1e6"]], "K": [["1e6"]], "V": [[1]]}),
    "scale 1e50": ("render", {"scale": "1e50", "Q": [[1]], "K": [[1]], "V": [[1]]}),
    "Q 1e10": ("render", {"Q": [["1e10"]], "K": [[1]], "V": [[1]]}),
    "Q 1e20": ("compute", {"Q": [["1e20"]], "K": [[1]], "V": [[1]]}),
    "e^9900 render": ("render", {"Q": [["99.5"]], "K": [["99.5"]], "V": [[1]]}),
    "e^9900 compute": ("compute", {"Q": [["99.5"]], "K": [["99.5"]], "V": [[1]], "scale": "none"}),
    "weight 1e-2850": ("compute", {"scale": "none", "Q": [[1], [0]], "K": [[0], [-6562]], "V": [[1], [2]]}),
    "nested lists": ("render", '{"Q": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "big integer": ("render", '{"Q": [[' + "9" * 100_000 + ']], "K": [[1]], "V": [[1]]}'),
    "64×64 claims": ("check", claims_64()),
    "64×64 exact forms": ("compute", {"Q": square(64), "K": square(64), "V": square(64)}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_ends_in_time_and_memory(tmp_path, name):
    command, content = HOSTILE[name]
    path = tmp_path / "input.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "symattn", command, str(path), "--max-seconds", "6"],
        capture_output=True,
        timeout=60,
        preexec_fn=_limit_memory,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    elapsed = time.monotonic() - start
    err = done.stderr.decode("utf-8")
    assert done.returncode in (0, 1, 2), err
    assert elapsed < SECONDS, f"{name}: {elapsed:.1f} s"
    if done.returncode == 2:
        assert err.count("\n") == 1 and err.startswith("symattn: "), err


@pytest.mark.parametrize(
    "content",
    [
        "Q = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n",
        "Q = [[" + "9" * 100_000 + "]]\n",
    ],
)
def test_hostile_toml(tmp_path, content):
    path = tmp_path / "input.toml"
    path.write_text(content, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "symattn", "render", str(path)],
        capture_output=True,
        timeout=60,
        preexec_fn=_limit_memory,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and done.stderr.count(b"\n") == 1


def test_reading_a_device_is_bounded():
    # /dev/zero never ends: refused as it is opened, never read
    done = subprocess.run(
        [sys.executable, "-m", "symattn", "render", "/dev/zero"],
        capture_output=True,
        timeout=60,
        preexec_fn=_limit_memory,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert (done.returncode, done.stderr) == (
        2,
        b"symattn: /dev/zero: not a regular file\n",
    )
