"""symattn's pytest plugin: ``pytest --symattn-summary`` prints, at the end of the session, one table of
every attention check the tests made (``symattn.testing.assert_attention_close`` and
``symattn.kernel.compare``): the test, the kind, the shape, the dtype, the rule, its worst figure and
where, and pass or fail. That is the sweep table of a kernel's tests.

pytest loads it through the ``pytest11`` entry point wherever symattn is installed (or ``-p
symattn.pytest_plugin``). Under pytest-xdist each worker keeps its own rows and sends them to the
controller in ``workeroutput`` when it finishes; the controller prints them all, in the order of the tests.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from symattn.kernel import record

_KEY = "symattn_checks"
_collected: list[dict[str, str]] = []  # the controller's rows: its own and every worker's
_order: dict[str, int] = {}  # each test's place in the session's order, as collected


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("symattn")
    group.addoption(
        "--symattn-summary",
        action="store_true",
        default=False,
        help="print a table of every attention check (symattn.testing) at the end of the session",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("symattn_summary"):
        _collected.clear()
        _order.clear()
        record.start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    record.test = item.nodeid  # the rows a test's checks add (its fixtures' too) carry its name
    try:
        return (yield)
    finally:
        record.test = ""


def pytest_collection_finish(session: pytest.Session) -> None:
    """The tests' order, without pytest-xdist (under it, each worker's is the same: see below)."""
    _order.update({item.nodeid: n for n, item in enumerate(session.items) if item.nodeid not in _order})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """pytest-xdist, on the controller: the order of the tests a worker collected (every worker's is one)."""
    _order.update({nodeid: n for n, nodeid in enumerate(ids) if nodeid not in _order})


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not session.config.getoption("symattn_summary"):
        return
    rows = record.stop()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its rows go to the controller
        workeroutput[_KEY] = rows
    else:
        _collected.extend(rows)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist, on the controller: a worker finished and sent its rows."""
    _collected.extend(getattr(node, "workeroutput", {}).get(_KEY, []))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not config.getoption("symattn_summary") or hasattr(config, "workerinput"):
        return
    # in the order of the tests (stable: a test's own checks stay in theirs); a row of no test collected last
    rows = sorted(_collected, key=lambda r: _order.get(r["test"], len(_order)))
    terminalreporter.section("symattn: attention checks")
    for line in table(rows):
        terminalreporter.write_line(line)


def table(rows: list[dict[str, str]]) -> list[str]:
    """The rows as a plain text table with a header, each column as wide as its widest cell."""
    if not rows:
        return ["no attention checks were made"]
    header = {c: c for c in record.COLUMNS}
    widths = {c: max(len(r[c]) for r in [header, *rows]) for c in record.COLUMNS}
    lines = ["  ".join(r[c].ljust(widths[c]) for c in record.COLUMNS).rstrip() for r in [header, *rows]]
    failed = sum(1 for r in rows if r["result"] != "pass")
    return [*lines, f"{len(rows)} checks, {len(rows) - failed} passed, {failed} failed"]


__all__ = ["table"]
