"""Benchmark of symattn serve: server time per update, as the page asks for it, in process.

    python bench/serve.py              # the seed and an 8×8 spec, 30 updates each
    python bench/serve.py --runs 100

An update is one POST /api/render (HTML fragment and intermediates, as the page
sends it) through Starlette's TestClient, so it includes the JSON in and out,
the hop to a worker process and back, and the work. The baseline, measured in
the same run, is the same work called directly in this process: derive, render
Markdown, the HTML fragment and compute. The target is a median of at most
50 ms per update for both sizes (issue 10).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from symattn.input import builtin  # noqa: E402
from symattn.input.files import read_table  # noqa: E402
from symattn.web.app import create_app  # noqa: E402
from symattn.web.tasks import render_task  # noqa: E402

TARGET_MS = 50.0


def square(n: int, seed: int = 0) -> dict:
    rng = random.Random(seed)

    def matrix() -> list[list[str]]:
        return [[f"{rng.randint(-100, 100) / 100:.2f}" for _ in range(n)] for _ in range(n)]

    return {"Q": matrix(), "K": matrix(), "V": matrix()}


def edits(raw: dict, runs: int) -> list[dict]:
    """The spec with one entry changed each time, as a teacher types (nothing is cached between them)."""
    out = []
    for i in range(runs):
        spec = {k: ([list(r) for r in v] if k in ("Q", "K", "V") else v) for k, v in raw.items()}
        spec["Q"][-1][0] = f"0.{(i * 37) % 89 + 10}"
        out.append(spec)
    return out


def median_ms(fn, specs: list[dict]) -> float:
    times = []
    for spec in specs:
        start = time.perf_counter()
        fn(spec)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    from starlette.testclient import TestClient

    cases = [("seed", read_table(builtin.example_path("seed", "zh"))), ("8x8", square(8))]
    failed = False
    with TestClient(create_app(hosts=("testserver",))) as client:
        for name, raw in cases:

            def served(spec: dict) -> None:
                response = client.post("/api/render", json={"spec": spec, "format": "html"})
                assert response.status_code == 200, response.text

            def direct(spec: dict) -> None:
                render_task({"spec": spec, "format": "html"})

            for spec in edits(raw, 3):  # warm both sides: templates compiled, workers ready
                served(spec)
                direct(spec)
            specs = edits(raw, args.runs)
            server, baseline = median_ms(served, specs), median_ms(direct, specs)
            ok = server <= TARGET_MS
            failed |= not ok
            print(
                f"{name:5s} server {server:6.1f} ms per update (median of {args.runs}), "
                f"direct call {baseline:6.1f} ms, ratio {server / baseline:4.2f}; "
                f"target ≤ {TARGET_MS:.0f} ms: {'ok' if ok else 'MISSED'}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
