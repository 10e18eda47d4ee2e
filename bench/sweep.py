"""The throughput of a sweep: a 64-case grid at 1024 tokens (torch's SDPA against the exact values), on a
local Dask cluster (a worker per core) against the same cases one after another in this process.

    python bench/sweep.py            # 64 cases at 1024 tokens: batch 1, 2; heads 2, 4; kv_heads 1, 2; head_dim
                                     # 32, 64; float32, bfloat16; causal or not
    python bench/sweep.py --quick    # 8 cases at 256 tokens

The figure to quote is the ratio (one process's seconds over the cluster's), measured side by side in one
run; absolute times on shared machines are noise. Run it when the machine is quiet.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from symattn.sweep.case import run_case  # noqa: E402
from symattn.sweep.grid import load_grid  # noqa: E402
from symattn.sweep.pipeline import settings, sweep  # noqa: E402

KERNEL = "tests.sweep_kernels:sdpa"


def grid_text(tokens: int, quick: bool) -> str:
    extra = "" if quick else "batch = [1, 2]\nhead_dim = [32, 64]\n"
    heads = "[2]" if quick else "[2, 4]"
    return (
        'seed = 1\nrule = "flash"\n[grid]\n'
        f"heads = {heads}\nkv_heads = [1, 2]\nseqlen = [{tokens}]\n"
        + (extra or "head_dim = [64]\n")
        + 'dtype = ["float32", "bfloat16"]\ncausal = [false, true]\n'
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    tokens = 256 if args.quick else 1024
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "grid.toml"
        path.write_text(grid_text(tokens, args.quick))
        grid = load_grid(str(path))
        start = time.perf_counter()
        report = sweep(str(path), KERNEL)
        cluster = time.perf_counter() - start
        start = time.perf_counter()
        alone = [run_case(settings(grid), c.index, c.point, KERNEL, "") for c in grid.cases]
        one = time.perf_counter() - start
    assert report.ok and all(r["verdict"] == "pass" for r in alone), "a case failed"
    cases = len(grid.cases)
    print(f"{cases} cases at {tokens} tokens: local cluster {cluster:.1f} s ({cases / cluster:.2f} cases/s, start-up")
    print(f"included), one process {one:.1f} s ({cases / one:.2f} cases/s): the cluster's throughput is")
    print(f"{one / cluster:.2f}x one process's")


if __name__ == "__main__":
    main()
