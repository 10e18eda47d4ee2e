"""Errors symattn raises on bad input.

Every error names where the problem is: the file (or ``<dict>`` for Python
input), the key, and the 1-based position inside a matrix typed in the spec (``Q[1][2]``), or the 0-based
index of an array read from a file or given in memory, as numpy writes it (``q[0, 0, 2, 5]``). The CLI prints
``symattn: <message>`` and exits 2 for these and only these.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_INPUT = 2  # bad input, a limit, an output path refused
EXIT_IO = 74  # writing failed: disk full, I/O error (sysexits' EX_IOERR)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_BROKEN_PIPE = 141  # the reader went away (128 + SIGPIPE)


class SymattnError(Exception):
    """Base class of every error caused by user input."""

    exit_code = EXIT_INPUT


def shown(text: object) -> str:
    """User text for a one-line message: controls, separators and format characters escaped.

    Printable text (Chinese labels included) stays as it is; any other
    character is written as ``repr`` writes it (``\\n``, ``\\u2028``, ``\\x85``),
    so a message is always one line and never sends a control sequence to the
    terminal.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


BRIEF = 50  # characters of user text a message echoes


def clip(text: str, most: int = BRIEF) -> str:
    """User text cut to ``most`` characters and "…" where it is longer (a 5000-digit number is not echoed whole)."""
    return text if len(text) <= most else text[:most] + "…"


def brief(value: object, most: int = BRIEF) -> str:
    """User text for a message, quoted and escaped as ``repr`` does, cut by :func:`clip`; an int is written as
    it is, up to ``most`` digits; true, false and null as a TOML or JSON file wrote them."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        # str() of an int past 4300 digits raises; 3.33 bits a digit: a bound before converting
        return str(value) if value.bit_length() <= 3 * most else f"a number of more than {most} digits"
    if isinstance(value, float) or (isinstance(value, str) and type(value) is not str):
        return clip(str(value), most)  # a number, as written (a TOML or JSON float keeps its text): unquoted
    return repr(clip(str(value), most))


def _where(source: str, key: str | None, position: tuple[int, ...], index: tuple[int, ...] = ()) -> str:
    parts = [shown(source)]
    if key:  # a key is the user's text too (a TOML key of 100 KB): cut short
        parts.append(shown(clip(key, 2 * BRIEF)) + "".join(f"[{p}]" for p in position))
    if index:
        parts[-1] += numpy_index(index)
    return ": ".join(parts)


def numpy_index(index: tuple[int, ...]) -> str:
    """An array's place as numpy writes it, 0-based: ``[0, 0, 2, 5]``."""
    return f"[{', '.join(map(str, index))}]"


class SpecError(SymattnError, ValueError):
    """A spec or claims file is malformed: bad key, shape, number or label."""

    def __init__(
        self, source: str, key: str | None, problem: str, position: tuple[int, ...] = (), index: tuple[int, ...] = ()
    ):
        self.source = source
        self.key = key
        self.position = position
        self.index = index  # 0-based, of an array (a file's, a tensor's): numpy's [i, j]
        self.problem = problem
        super().__init__(f"{_where(source, key, position, index)}: {problem}")

    def named(self, source: str) -> str:
        """Its line with ``source`` named where this names its own (a sweep names compare's ``out`` by its kind)."""
        return f"{_where(source, self.key, self.position, self.index)}: {self.problem}"


class ShapeError(SpecError):
    """Two matrices do not fit together."""


class EvaluationError(SymattnError, ArithmeticError):
    """A value could not be rounded reliably (e.g. a tie hidden in a closed form).

    Raised deep in the engine, which knows no file; :func:`evaluating` names the file and key once."""

    source: str | None = None


class UndecidedRounding(EvaluationError):
    """An entry's rounding that no precision decided: its value may sit exactly on a tie."""

    def __init__(self, quantity: str, row: int, col: int):
        super().__init__(f"cannot decide the rounding of {quantity}[{row + 1}][{col + 1}]: it may be an exact tie")
        self.quantity, self.row, self.col = quantity, row, col


@contextmanager
def evaluating(source: str, key: str | None = None) -> Iterator[None]:
    """Name the file (and key) in an :class:`EvaluationError` raised inside that names none yet."""
    try:
        yield
    except EvaluationError as exc:
        if exc.source is not None:
            raise
        located = EvaluationError(f"{_where(source, key, ())}: {exc}")
        located.source = source
        raise located from None


class RenderError(SymattnError, ValueError):
    """A derivation cannot be rendered as asked (unknown format, language or template)."""


class LimitError(SpecError):
    """An input is larger, or its work longer, than a limit of :mod:`symattn.input.limits` allows."""


class OutputError(SymattnError, OSError):
    """The output path cannot be written, or writing it failed."""

    def __init__(self, path: str, problem: str, error_number: int | None = None):
        self.path = path
        self.problem = problem
        super().__init__(f"{shown(path) if path else repr(path)}: {problem}")
        if error_number in _IO_ERRNOS:
            self.exit_code = EXIT_IO

    @classmethod
    def from_os(cls, path: str, exc: OSError) -> OutputError:
        reason = exc.strerror or str(exc) or type(exc).__name__
        return cls(path, f"cannot write: {reason[0].lower()}{reason[1:]}", exc.errno)


_IO_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT}
