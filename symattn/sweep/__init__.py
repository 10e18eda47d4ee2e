"""``symattn sweep``: a kernel's whole test grid against the exact oracle, case by case on Dask workers (issue 31).

``sweep(GRID, "module:function")`` returns a :class:`~symattn.sweep.report.SweepReport`; the CLI prints its
text or JSON. Dask (the ``sweep`` extra) is imported only when cases run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from symattn.sweep.pipeline import sweep

__all__ = ["sweep"]


def __getattr__(name: str) -> Any:
    if name == "sweep":
        from symattn.sweep.pipeline import sweep

        return sweep
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
