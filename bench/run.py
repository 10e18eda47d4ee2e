"""Benchmarks: symattn against a plain SymPy script and the lean flint+arb pipeline, as ratios
measured in one run.

    python bench/run.py            # sizes 3, 8, 16, 32, 64 at 50 digits, the scale targets, CLI start-up
    python bench/run.py --quick    # sizes up to 16, no scale targets
    python bench/run.py --startup  # only the CLI start-up ratio (the goal: at most 1.3x)

Scale targets (issue 12): 64×64 at 50 digits in process, every intermediate numeric, within 3× of
bench/lean_flint.py (and the mpmath engine beside it); `symattn compute --no-exact` on 128×64 at
30 digits ≤ 3 s whole process; 512×64 at 30 digits finishes under 2 GB peak RSS; the default
`symattn compute` (with exact strings) at 64×64 at most 3× the `--no-exact` time.

Absolute times on shared machines are noise; the ratio of two runs made side by
side in the same process is the figure to quote.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import sympy
from sympy.core.cache import clear_cache

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from symattn.derivation.derive import derive  # noqa: E402
from symattn.derivation.intermediates import compute  # noqa: E402
from symattn.exact import engine  # noqa: E402
from symattn.exact.heads import build_model  # noqa: E402
from symattn.input.spec import load_spec  # noqa: E402
from symattn.rendering.renderer import render  # noqa: E402


def random_spec(n: int, d: int, seed: int = 0) -> dict:
    rng = random.Random(seed)

    def matrix(rows: int, cols: int) -> list[list[str]]:
        return [[f"{rng.randint(-100, 100) / 100:.2f}" for _ in range(cols)] for _ in range(rows)]

    return {"Q": matrix(n, d), "K": matrix(n, d), "V": matrix(n, d)}


def plain_sympy(raw: dict, digits: int):
    """What a careful user writes with SymPy alone: exact matrices, then evalf."""
    Q, K, V = (sympy.Matrix([[sympy.Rational(x) for x in row] for row in raw[k]]) for k in ("Q", "K", "V"))
    n = Q.rows
    Z = (Q * K.T) / sympy.sqrt(Q.cols)
    A = sympy.Matrix(n, n, lambda i, j: sympy.exp(Z[i, j]) / sum(sympy.exp(Z[i, k]) for k in range(n)))
    weights = A.evalf(digits)
    return weights, (weights * V).evalf(digits)


def ours(raw: dict, digits: int):
    model = build_model(load_spec(raw))
    return model.significant("weights", digits), model.significant("output", digits)


def timed(fn, *args) -> float:
    # the same start for both sides: SymPy's cache emptied, garbage collected
    clear_cache()
    gc.collect()
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def best_of(repeat: int, fn, *args) -> float:
    return min(timed(fn, *args) for _ in range(repeat))


def end_to_end_seed() -> None:
    from symattn.input import builtin

    spec = load_spec(builtin.example_path("seed", "zh"))
    render(derive(spec), "markdown")


def all_intermediates(raw: dict, digits: int) -> None:
    compute(load_spec(raw), digits=digits, exact=False)


def lean_flint(raw: dict, digits: int) -> None:
    from lean_flint import lean

    Q, K, V = ([[int(Fraction(x) * 100) for x in row] for row in raw[k]] for k in ("Q", "K", "V"))
    lean(Q, K, V, 100, len(Q[0]), digits)


# run the CLI in a child that reports its own peak resident memory (kB on Linux) on its last line
_CHILD = (
    "import resource, sys\nfrom symattn.cli.commands import main\ncode = main(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(code)"
)


def cli_compute(raw: dict, *args: str) -> tuple[float, int]:
    """Seconds and peak RSS (MiB) of `symattn compute SPEC ARGS` as a new process."""
    folder = Path(tempfile.mkdtemp(prefix="symattn-bench-"))
    spec = folder / "spec.json"
    spec.write_text(json.dumps(raw))
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            "compute",
            str(spec),
            "-o",
            str(folder / "out.json"),
            "--max-seconds",
            "3600",
            *args,
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    return seconds, int(done.stderr.split()[-1]) // 1024


def scale_targets() -> None:
    from symattn.exact.engine import name

    sys.path.insert(0, str(ROOT / "bench"))
    raw = random_spec(64, 64)
    ours_s = best_of(5, all_intermediates, raw, 50)
    lean_s = best_of(5, lean_flint, raw, 50)
    with engine.use("mpmath"):
        mpmath_s = best_of(3, all_intermediates, raw, 50)
    print(
        f"64x64 at 50 digits, all intermediates numeric, in process ({name()} engine): {ours_s * 1000:.1f} ms; "
        f"lean flint+arb {lean_s * 1000:.1f} ms = {ours_s / lean_s:.2f}x (target <= 3x); "
        f"mpmath engine {mpmath_s * 1000:.1f} ms = {mpmath_s / lean_s:.2f}x",
        flush=True,
    )
    no_exact = min(cli_compute(raw, "--no-exact")[0] for _ in range(3))
    with_exact = min(cli_compute(raw)[0] for _ in range(3))
    print(
        f"symattn compute 64x64 (15 digits), whole process: {with_exact:.2f} s with exact strings, "
        f"{no_exact:.2f} s --no-exact = {with_exact / no_exact:.2f}x (target <= 3x)",
        flush=True,
    )
    seconds, rss = min(cli_compute(random_spec(128, 64), "--no-exact", "--digits", "30") for _ in range(3))
    print(
        f"symattn compute --no-exact 128x64 at 30 digits, whole process: {seconds:.2f} s (target <= 3 s), "
        f"peak RSS {rss} MiB",
        flush=True,
    )
    seconds, rss = cli_compute(random_spec(512, 64), "--no-exact", "--digits", "30")
    print(
        f"symattn compute --no-exact 512x64 at 30 digits, whole process: {seconds:.1f} s, peak RSS {rss} MiB "
        f"(target < 2048 MiB)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--digits", type=int, default=50)
    parser.add_argument("--startup", action="store_true", help="only the CLI start-up ratio")
    args = parser.parse_args()
    if args.startup:
        return _print_startup()
    sizes = [3, 8, 16] if args.quick else [3, 8, 16, 32, 64]

    print(f"{'size':>8} {'digits':>6} {'plain sympy s':>14} {'symattn s':>10} {'speed-up':>9}")
    for n in sizes:
        raw = random_spec(n, n)
        ours_s = best_of(3, ours, raw, args.digits)
        plain_s = best_of(3 if n <= 16 else 1, plain_sympy, raw, args.digits)  # 30 s at 64: once is enough
        print(f"{n:>4}x{n:<3} {args.digits:>6} {plain_s:>14.3f} {ours_s:>10.3f} {plain_s / ours_s:>8.1f}x", flush=True)

    seed_raw = {
        "Q": [["1.0", "0.0"], ["0.0", "1.0"], ["0.9", "0.1"]],
        "K": [["1.0", "0.2"], ["0.1", "1.0"], ["0.8", "0.3"]],
        "V": [["10", "0"], ["0", "10"], ["1", "1"]],
    }
    e2e = best_of(5, end_to_end_seed)
    plain_seed = best_of(5, plain_sympy, seed_raw, 15)
    print(
        f"built-in example end to end (spec -> Markdown): {e2e * 1000:.1f} ms, "
        f"{e2e / plain_seed:.2f}x the time the plain script needs for the numbers alone"
    )

    if not args.quick:
        scale_targets()

    _print_startup()


def _print_startup() -> None:
    from startup import startup  # bench/startup.py, beside this file

    mine, base = startup(sys.executable, 9)
    print(
        f"CLI start-up: symattn render {mine * 1000:.0f} ms vs python -c 'import sympy' {base * 1000:.0f} ms "
        f"= {mine / base:.2f}x"
    )


if __name__ == "__main__":
    main()
