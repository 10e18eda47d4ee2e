"""The class lists symattn reads: a teacher's roster (``id,name``) and the ``index.csv`` that exercise wrote.

A student id names the student's folder, feedback file and QTI entry, so it is plain ASCII, and no two
ids of one class may differ only in case: on a disk or in a zip reader that ignores case (Windows, macOS,
most unzip tools there) ``A1/`` and ``a1/`` are one folder, and one student's sheet would replace the
other's. Such a class is refused with both ids named, rather than renamed behind the teacher's back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from symattn.input import limits
from symattn.input.errors import LimitError, SpecError, brief, clip, shown

_STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_student_id(student: str, source: str, key: str, position: int) -> str:
    """A student id as exercise allows it: it names the student's folder and feedback file, so it is plain."""
    if not _STUDENT_ID.fullmatch(student):
        raise SpecError(
            source,
            key,
            "expected an id of at most 64 letters, digits, '.', '_' or '-', starting "
            f"with a letter or digit, got {brief(student)}",
            (position,),
        )
    return student


def check_distinct(ids: Iterable[tuple[int, str]], source: str, key: str, where: str = "line") -> None:
    """Every (position, id) of a class differs from the others, in more than case."""
    seen: dict[str, tuple[int, str]] = {}
    for position, student in ids:
        first = seen.setdefault(student.casefold(), (position, student))
        if first[0] == position:
            continue
        if first[1] == student:
            problem = f"duplicate student id {brief(student)} (also {where} {first[0]})"
            raise SpecError(source, key, problem, (position,))
        raise SpecError(
            source,
            key,
            f"student ids {brief(first[1])} ({where} {first[0]}) and {brief(student)} differ only in case; their "
            "folders and files would be one on a disk that ignores case: make them differ in more than case",
            (position,),
        )


def read_roster(path: str | Path) -> list[tuple[str, str]]:
    """Students from a CSV file with an ``id,name`` header; ids become folder names, so they are plain."""
    from symattn.input.csvfile import read_csv

    header, rows = read_csv(path, "a roster", quoted=False)
    if len(rows) > limits.STUDENTS:
        raise LimitError(str(path), "id", f"{len(rows)} students; an exercise has at most {limits.STUDENTS}")
    if not rows or "id" not in header:
        raise SpecError(str(path), "id", "expected a CSV file with an id,name header and one student per line")
    out = [
        (check_student_id((row.get("id") or "").strip(), str(path), "id", line), _name(row.get("name"), path, line))
        for line, row in enumerate(rows, 2)
    ]
    check_distinct(((line, student) for line, (student, _) in enumerate(out, 2)), str(path), "id")
    return out


def _name(raw: str | None, path: str | Path, line: int) -> str:
    """A student's name as the sheets show it: in NFC, and only characters every output sets (as labels)."""
    from symattn.input.text import normalize

    return check_name(normalize((raw or "").strip()), str(path), "name", line)


def check_name(name: str, source: str, key: str, position: int) -> str:
    """A name as the sheets show it: at most ``STUDENT_NAME`` characters that every output sets (as labels)."""
    from symattn.input.text import unsupported_character

    if len(name) > limits.STUDENT_NAME:
        raise LimitError(source, key, f"a name of {len(name)} characters; at most {limits.STUDENT_NAME}", (position,))
    bad = unsupported_character(name)
    if bad is not None:
        raise SpecError(source, key, bad, (position,))
    return name


def read_index(path: str | Path) -> dict[str, tuple[str, int]]:
    """id -> (name, variant seed), from index.csv; ids as exercise allows them (they name feedback files)."""
    from symattn.input.csvfile import read_csv

    source = str(path)
    header, rows = read_csv(path, "an index file", quoted=True)
    if not {"id", "seed"} <= set(header):
        raise SpecError(source, None, "expected the columns id, name and seed (the index.csv that exercise wrote)")
    if len(rows) > limits.STUDENTS:
        raise LimitError(source, "id", f"{len(rows)} students; a class has at most {limits.STUDENTS}")
    out = {}
    for line, row in enumerate(rows, 2):
        student = check_student_id(row.get("id", ""), source, "id", line)
        seed = row.get("seed", "")
        if not (seed.isascii() and seed.isdigit() and len(seed) <= 20):  # counted before int()
            raise SpecError(source, "seed", f"expected a whole variant seed, got {brief(seed)}", (line,))
        # exercise wrote a plain name; one edited in since is shown with its controls as escapes, cut short
        out[student] = (shown(clip(row.get("name", ""), limits.STUDENT_NAME)), int(seed))
    check_distinct(((line, row.get("id", "")) for line, row in enumerate(rows, 2)), source, "id")
    return out


__all__ = ["check_distinct", "check_name", "check_student_id", "read_index", "read_roster"]
