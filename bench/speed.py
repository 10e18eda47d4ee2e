"""Where a class or an author waits (issue 19): `symattn check` of 64 tokens × 64 dims with claims
on scores, weights and output (12288 claims, all correct), and `symattn compute --backward` at
32 tokens × 16 dims, each as a ratio against the forward `symattn compute` of the same spec,
measured side by side in one run (whole processes: start-up included).

    python bench/speed.py              # check 64x64 (the target: at most 3 s)
    python bench/speed.py --backward   # also compute --backward at 32 tokens (the target: 2 s)

Absolute times on shared machines are noise; the ratios are the figures to quote.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from symattn.exact.heads import build_model  # noqa: E402
from symattn.input.spec import load_spec  # noqa: E402


def rows(r: int, c: int, k: int) -> list[list[str]]:
    # tests/test_layout.py's rows(): one decimal, a pattern with repeated and zero scores
    return [[f"{((i * 7 + j * k) % 19 - 9) / 10:.1f}" for j in range(c)] for i in range(r)]


def spec(n: int, d: int) -> dict:
    return {"Q": rows(n, d, 3), "K": rows(n, d, 5), "V": rows(n, d, 2)}


def claims(raw: dict) -> dict:
    model = build_model(load_spec(raw))
    return {q: [[format(x, "f") for x in row] for row in model.rounded(q, 3)] for q in ("scores", "weights", "output")}


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: str, data: dict, *args: str) -> tuple[float, float]:
    """Seconds of `symattn COMMAND FILE ARGS` as a new process: wall clock, and CPU (less noisy when
    the machine is shared)."""
    folder = Path(tempfile.mkdtemp(prefix="symattn-bench-"))
    path = folder / "in.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    cmd = [sys.executable, "-m", "symattn", command, str(path), "-o", str(folder / "out"), "--max-seconds", "3600"]
    start, start_cpu = time.perf_counter(), cpu()
    subprocess.run([*cmd, *args], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start, cpu() - start_cpu


def best(repeat: int, *args) -> tuple[float, float]:
    runs = [run(*args) for _ in range(repeat)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def line(what: str, target: str, ours: tuple[float, float], forward: tuple[float, float], size: str) -> str:
    return (
        f"{what}: {ours[0]:.2f} s wall, {ours[1]:.2f} s CPU (target {target}); forward compute {size} "
        f"{forward[0]:.2f} s wall, {forward[1]:.2f} s CPU; ratio {ours[0] / forward[0]:.2f}x wall, "
        f"{ours[1] / forward[1]:.2f}x CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backward", action="store_true", help="also compute --backward at 32 tokens")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    raw = spec(64, 64)
    data = {**raw, "claims": claims(raw)}
    forward = best(args.repeat, "compute", raw)
    checked = best(args.repeat, "check", data, "--format", "json")
    print(line("symattn check 64x64, 12288 claims, JSON", "<= 3 s", checked, forward, "64x64"), flush=True)
    checked = best(args.repeat, "check", data)
    print(line("symattn check 64x64, 12288 claims, text", "<= 3 s", checked, forward, "64x64"), flush=True)
    if args.backward:
        raw = spec(32, 16)
        forward = best(args.repeat, "compute", raw)
        backward = best(1, "compute", raw, "--backward")
        print(line("symattn compute --backward 32x16", "<= 2 s", backward, forward, "32x16"), flush=True)


if __name__ == "__main__":
    main()
