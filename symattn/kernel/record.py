"""The checks a test session made, for the pytest plugin's summary (``--symattn-summary``).

``symattn.kernel.compare`` (and so ``symattn.testing.assert_attention_close``) adds a row here for each
call while recording is on; the plugin turns it on, names the running test, and prints the rows at the
end (under pytest-xdist each worker sends its rows to the controller). Rows are plain strings, so that
they cross processes as they are. Off (the default), nothing is kept.
"""

from __future__ import annotations

from typing import Any

_rows: list[dict[str, str]] | None = None
test = ""  # the test running now (its pytest node id), set by the plugin

COLUMNS = ("test", "kind", "shape", "dtype", "rule", "figure", "at", "result")


def start() -> None:
    global _rows
    _rows = []


def stop() -> list[dict[str, str]]:
    """The rows recorded since start(), in order; recording is off again."""
    global _rows
    rows, _rows = _rows or [], None
    return rows


def add(report: Any, kind: str) -> None:
    """A row for one report (report.Report), where recording is on."""
    if _rows is None:
        return
    runs = report.runs or (report,)
    figures = "; ".join(r.figure() for r in runs)
    places = "; ".join(r.worst_place or "—" for r in runs)
    _rows.append(
        {
            "test": test,
            "kind": kind + (f" ×{len(runs)} runs" if report.runs else ""),
            "shape": "(" + ", ".join(map(str, report.shape)) + ")",
            "dtype": report.comparison.format,
            "rule": report.rule_text(),
            "figure": figures,
            "at": places,
            "result": "pass" if report.ok else "FAIL",
        }
    )


__all__ = ["COLUMNS", "add", "start", "stop"]
