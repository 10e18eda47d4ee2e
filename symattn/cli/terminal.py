"""What the command line shows on a terminal only: progress bars and step counters on stderr (tqdm).

Piped or redirected, nothing is printed: a bar never changes what is written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def steps(label: str) -> Iterator[None]:
    """For a long render, compute or check on a terminal: a counter of the steps done (each quantity rounded,
    each claim checked), shown once the run has taken half a second (SYMATTN_PROGRESS_DELAY seconds); nothing
    when stderr is not a terminal."""
    if not is_terminal(sys.stderr):
        yield
        return
    from tqdm import tqdm

    from symattn.exact.progress import listening

    text = os.environ.get("SYMATTN_PROGRESS_DELAY", "")
    delay = float(text) if text.replace(".", "", 1).isdigit() else 0.5
    bar = tqdm(desc=label, unit=" steps", delay=delay, leave=False, file=sys.stderr, dynamic_ncols=True)

    def done(what: str) -> None:
        bar.set_postfix_str(what, refresh=False)
        bar.update()

    try:
        with listening(done):
            yield
    finally:
        bar.close()


def progress(label: str) -> Callable | None:
    """A progress bar for a batch, on stderr when it is a terminal; None (silence) otherwise."""
    if not is_terminal(sys.stderr):
        return None
    from tqdm import tqdm

    def bar(items):
        return tqdm(items, desc=label, unit="student", leave=False, file=sys.stderr, dynamic_ncols=True)

    return bar


def counter(label: str, unit: str) -> Callable[[int], Callable[[], None]] | None:
    """For work that finishes piece by piece (a sweep's cases): given the total, a callback to call as each
    piece finishes, moving a bar on stderr when it is a terminal; None (silence) otherwise."""
    if not is_terminal(sys.stderr):
        return None
    from tqdm import tqdm

    def start(total: int) -> Callable[[], None]:
        bar = tqdm(total=total, desc=label, unit=f" {unit}", leave=False, file=sys.stderr, dynamic_ncols=True)
        return lambda: bar.update()

    return start


__all__ = ["counter", "is_terminal", "progress", "steps"]
