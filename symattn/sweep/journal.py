"""A sweep's record at ``-o FILE``: a header line, then one JSON line per finished case, each fsync'd as it
finishes, so that an interrupted sweep resumes (``--resume``) without running its finished cases again.

The file is begun by the rules of every ``-o`` (:func:`symattn.rendering.output.open_growing`: a symlink's
target written, a mode kept, a device or FIFO written, a folder or read-only file refused). The header names
the grid's digest and the kernel: a record of another grid or kernel is refused in one line, never mixed in.
A last line cut short by a crash is dropped and run again.
"""

from __future__ import annotations

import json
import os
from typing import Any

from symattn.input.errors import OutputError, SpecError, brief
from symattn.rendering.output import open_growing, reopen_growing, write_all
from symattn.sweep.grid import Case, Grid

FORMAT = 1  # the record's own version, in its header
MOST = 1 << 30  # bytes of a record that --resume reads


def header(grid: Grid, kernel: str) -> dict[str, Any]:
    return {"symattn_sweep": FORMAT, "grid": grid.source, "digest": grid.digest, "kernel": kernel}


class Journal:
    """The open record: ``add`` appends a row as one line and, in a regular file, fsyncs it."""

    def __init__(self, path: str, fd: int, regular: bool):
        self.path, self.fd, self.regular = path, fd, regular

    @classmethod
    def start(cls, path: str, grid: Grid, kernel: str) -> Journal:
        fd, regular = open_growing(path, _line(header(grid, kernel)))
        return cls(path, fd, regular)

    @classmethod
    def resume(cls, path: str, grid: Grid, kernel: str) -> tuple[Journal, dict[str, dict[str, Any]]]:
        """The record opened to go on, and its finished rows by case key (the grid's points)."""
        if not os.path.lexists(path):
            raise SpecError(path, None, "no record to resume (the file does not exist); run without --resume")
        fd, data = reopen_growing(path, MOST)
        try:
            lines = data.split(b"\n")
            if lines[-1]:  # a line cut short as the sweep stopped: its case runs again
                os.ftruncate(fd, len(data) - len(lines[-1]))
            os.lseek(fd, 0, os.SEEK_END)
            done = _rows(path, lines[:-1], grid, kernel)
        except OSError as exc:
            os.close(fd)
            raise OutputError.from_os(path, exc) from None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, True), done

    def add(self, row: dict[str, Any]) -> None:
        try:
            write_all(self.fd, _line(row))
            if self.regular:
                os.fsync(self.fd)
        except OSError as exc:
            raise OutputError.from_os(self.path, exc) from None

    def close(self) -> None:
        os.close(self.fd)


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _rows(path: str, lines: list[bytes], grid: Grid, kernel: str) -> dict[str, dict[str, Any]]:
    if not lines:
        raise SpecError(path, None, "empty: not the record of a sweep (symattn sweep -o)")
    first = _json(path, lines[0], 1)
    if not isinstance(first, dict) or first.get("symattn_sweep") != FORMAT:
        raise SpecError(path, None, "line 1: not the record of a sweep (symattn sweep -o)")
    if first.get("digest") != grid.digest:
        raise SpecError(
            path,
            None,
            f"the record of another grid ({brief(first.get('grid'))}), not {grid.source} as it is now; "
            "run without --resume to start again",
        )
    if first.get("kernel") != kernel:
        raise SpecError(path, None, f"the record of the kernel {brief(first.get('kernel'))}, not {kernel}")
    keys = {case.key: case for case in grid.cases}
    done = {}
    for n, line in enumerate(lines[1:], start=2):
        row = _json(path, line, n)
        case = _case_of(row, keys)
        if case is None:
            raise SpecError(path, None, f"line {n}: not a row of a case of {grid.source}")
        done[case.key] = row | {"case": case.index}
    return done


def _json(path: str, line: bytes, n: int) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        raise SpecError(path, None, f"line {n}: not JSON") from None


def _case_of(row: Any, keys: dict[str, Case]) -> Case | None:
    if not isinstance(row, dict) or row.get("verdict") not in ("pass", "fail"):
        return None
    some = next(iter(keys.values()))
    point = {k: row.get(k) for k in some.point}
    return keys.get(Case(0, point).key)


__all__ = ["Journal", "header"]
