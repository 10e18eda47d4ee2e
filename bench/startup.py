"""Start-up (issue 29): `python -m symattn render` of the built-in example against `python -c "import sympy"`,
as the median of 9 runs of each, interleaved, and their ratio (the goal: at most 1.3×).

    python bench/startup.py                       # this interpreter
    python bench/startup.py --python VENV/bin/python --runs 9

The issue measures in a clean venv (`python -m venv V && V/bin/pip install .`): other packages' .pth
files slow both commands alike, but not by the same share. Each command is a new process; the
symattn under measurement is this checkout's (PYTHONPATH), byte-compiled first, as an installed one is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seconds(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def startup(python: str, runs: int) -> tuple[float, float]:
    """Median wall seconds of `symattn render` and of `import sympy`, run by turns so that drift hits both."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # as installed: pip byte-compiles a package, and SymPy's bytecode is there already
    subprocess.run([python, "-m", "compileall", "-q", str(ROOT / "symattn")], check=True, env=env)
    with tempfile.TemporaryDirectory(prefix="symattn-bench-") as folder:
        # -o into a temporary folder: a benchmark never writes to a system path
        render = [python, "-m", "symattn", "render", "-o", str(Path(folder) / "seed.md")]
        sympy = [python, "-c", "import sympy"]
        seconds(render, env)  # the first run warms the disk cache for both
        ours, base = [], []
        for _ in range(runs):
            base.append(seconds(sympy, env))
            ours.append(seconds(render, env))
    return statistics.median(ours), statistics.median(base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter to measure (a clean venv's)")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    mine, base = startup(args.python, args.runs)
    print(
        f"start-up: symattn render {mine * 1000:.0f} ms, import sympy {base * 1000:.0f} ms "
        f"(median of {args.runs}, interleaved) = {mine / base:.2f}x"
    )


if __name__ == "__main__":
    main()
