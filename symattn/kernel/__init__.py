"""The kernel oracle: float results of attention against the exact values (issue 30).

``symattn.kernel.compare(out, q, k, v, ...)`` takes a kernel's tensors in memory and returns a
:class:`~symattn.kernel.report.Report`; ``symattn compare SPEC RESULT`` reads a spec and files and makes
the same report by the same engine. Names are imported on first use, so that importing one of the
engine's modules (the certificates do) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from symattn.kernel.oracle import compare
    from symattn.kernel.report import Report

_EXPORTS = {"compare": "oracle", "Report": "report"}
__all__ = ["Report", "compare"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
