"""``symattn sweep``: a kernel's whole test grid against the exact oracle, read, run and reported.

grid file → cases (grid.py) → the record to resume, or a new one (journal.py) → Dask (cluster.py), each
case on a worker (case.py) → rows → report (report.py). Nothing runs before the grid, the kernel's name and
``-o`` are checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from symattn.input.errors import SpecError, brief
from symattn.sweep.grid import load_grid
from symattn.sweep.report import SweepReport

KERNEL_NAME = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def sweep(
    grid_path: str,
    kernel: str,
    *,
    scheduler: str | None = None,
    output: str | None = None,
    resume: bool = False,
    case_seconds: float | None = None,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> SweepReport:
    """Every case of the grid at ``grid_path`` for the kernel ``MODULE:FUNCTION``; ``progress(total)`` gives the
    callback each finished case calls (a progress bar)."""
    from symattn.sweep.journal import Journal

    grid = load_grid(grid_path)
    if KERNEL_NAME.fullmatch(kernel) is None:
        raise SpecError("--kernel", None, f"expected MODULE:FUNCTION such as mykernels:attention, got {brief(kernel)}")
    if resume and output is None:
        raise SpecError("--resume", None, "goes on from the record of -o FILE: give -o too")
    if scheduler is None:  # the local cluster's workers hold tensors on this machine's devices
        from symattn.sweep.cluster import device_here

        problem = device_here(grid.device)
        if problem is not None:
            raise SpecError(grid_path, "device", problem)
    done: dict[str, dict[str, Any]] = {}
    journal = None
    if output is not None:
        journal, done = Journal.resume(output, grid, kernel) if resume else (Journal.start(output, grid, kernel), {})
    rows = list(done.values())
    try:
        todo = [case for case in grid.cases if case.key not in done]
        if todo:
            from symattn.sweep.cluster import connect, stream

            tick = progress(len(todo)) if progress is not None else None

            def finished(row: dict[str, Any]) -> None:
                rows.append(row)
                if journal is not None:
                    journal.add(row)
                if tick is not None:
                    tick()

            with connect(scheduler) as client:
                stream(client, todo, settings(grid), kernel, case_seconds, finished)
    finally:
        if journal is not None:
            journal.close()
    return SweepReport(grid, kernel, tuple(sorted(rows, key=lambda r: r["case"])))


def settings(grid: Any) -> dict[str, Any]:
    """What a worker needs of the grid besides the case's point."""
    names = ("seed", "rule", "rtol", "atol", "max_ulp", "kinds", "causal_align", "device")
    return {name: getattr(grid, name) for name in names}


__all__ = ["sweep"]
