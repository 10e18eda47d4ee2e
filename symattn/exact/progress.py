"""Progress of long runs, told to whoever listens: the CLI shows a bar on a terminal, nothing else does.

The model says ``step("weights")`` as it rounds each quantity, and the checker says ``step("claim")``
for each claim; with no listener (the library, a pipe, the web page) a step costs one lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_listener: ContextVar[Callable[[str], None] | None] = ContextVar("symattn_progress", default=None)


def step(what: str) -> None:
    listener = _listener.get()
    if listener is not None:
        listener(what)


@contextmanager
def listening(callback: Callable[[str], None] | None) -> Iterator[None]:
    """Send every step in the block to ``callback`` (None: to nobody)."""
    token = _listener.set(callback)
    try:
        yield
    finally:
        _listener.reset(token)


__all__ = ["listening", "step"]
