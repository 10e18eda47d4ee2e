"""Spec, claims and other input files read safely: bounded in size and nesting, UTF-8, every float kept as
the text the user typed (TOML and JSON alike)."""

from __future__ import annotations

import itertools
import json
import os
import stat
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

from symattn.input import limits
from symattn.input.errors import LimitError, SpecError, brief, clip, shown
from symattn.input.numeral import NumeralError


class FloatText(str):
    """The text of a TOML or JSON float: a number, never a formula."""

    __slots__ = ()  # no instance dict: a JSON of millions of numbers holds one of these each


def kind_of(value: object) -> str:
    # in the words of TOML and JSON (a JSON number arrives as FloatText); a Python name only for Python input
    names = {
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        FloatText: "a number",
        dict: "a table",
        list: "a list",
        tuple: "a list",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def _toml_float(text: str) -> str:
    return FloatText(text.replace("_", ""))


def read_table(
    path: str | Path,
    regular_only: bool = False,
    what: str = "a spec or claims file",
    limit: int | None = None,
    numbers: int | None = None,
) -> dict[str, Any]:
    """Read a TOML or JSON file with every float kept as its text.

    The size is checked (see :func:`read_text`; ``limit`` bytes, default ``limits.FILE_BYTES``), and so is the
    nesting of lists and tables; a JSON file of more than ``numbers`` numbers is refused as it is read.
    """
    path = Path(path)
    text = read_text(path, what, regular_only=regular_only, limit=limit)
    return parse_text(text, str(path), json_=path.suffix.lower() == ".json", numbers=numbers, what=what)


def beside(name: str, folder: Path, owner: str) -> tuple[Path | None, str]:
    """(the real path, "") of a file that a file names, found in ``folder``, the naming file's own, and only
    there: the name is relative, has no "..", and no link leads it out; else (None, the problem, in words
    that begin with the name as written). ``owner``: the naming file, as the problem names its folder."""
    shown_name = repr(name if len(name) <= 200 else name[:200] + "…")
    pure = PurePosixPath(name)
    drive = name[1:2] == ":" and name[:1].isascii() and name[:1].isalpha()  # C:…, as Windows reads it
    if "\\" in name or "\x00" in name or pure.is_absolute() or drive:
        return None, f"{shown_name}: a file name relative to the {owner}'s folder is needed"
    if ".." in pure.parts:
        return None, f"{shown_name}: a file name may not go up a folder (..)"
    base = folder.resolve()
    try:
        real = (base / name).resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # missing, or a loop of links
        return None, f"{shown_name}: cannot read file: {getattr(exc, 'strerror', None) or 'a loop of links'}"
    if not real.is_relative_to(base):
        return None, f"{shown_name}: leads outside the {owner}'s folder (through a link)"
    return real, ""


def named_spec(name: str, source: str, folder: Path) -> tuple[Path | None, str]:
    """(the real path, "") of the spec that the claims file ``source`` names (``name``, as written), read from
    its ``folder`` only (:func:`beside`), or (None, why it cannot be read)."""
    path, shown_name = folder / name, brief(name)
    if Path(source).is_file() and path.is_file() and path.samefile(source):
        return None, f"{shown_name} is this claims file itself; name the spec's own file"
    if not path.is_file():
        why = "a folder" if path.is_dir() else "not a regular file" if path.exists() else "no such file"
        return None, f"cannot read {shown_name}: {why}"
    return beside(name, folder, "claims file")


def read_text(
    path: str | Path, what: str = "a spec or claims file", regular_only: bool = False, limit: int | None = None
) -> str:
    """A file's UTF-8 text (a BOM allowed), at most ``limit`` bytes (default ``limits.FILE_BYTES``); ``what``
    names the file in the error (see :func:`read_bytes`)."""
    raw = read_bytes(path, what, regular_only, limit)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), None, f"not UTF-8 text (byte {exc.start + 1})") from None


# each regular file read, as (device, inode, change time): -o replaces none of them; the change time tells a
# new file that was given the inode of one deleted since (a long test run's) from the file that was read
_READ: set[tuple[int, int, int]] = set()


def note_read(info: os.stat_result) -> None:
    """Remember a regular file as one this process read (an input): ``-o`` never replaces it."""
    _READ.add((info.st_dev, info.st_ino, info.st_ctime_ns))


def was_read(info: os.stat_result) -> bool:
    """Whether the file of ``info`` is one this process read (:func:`note_read`), by whatever name or link."""
    return (info.st_dev, info.st_ino, info.st_ctime_ns) in _READ


def read_bytes(
    path: str | Path, what: str = "a spec or claims file", regular_only: bool = False, limit: int | None = None
) -> bytes:
    """A file's bytes, at most ``limit`` (default ``limits.FILE_BYTES``); ``what`` names the file in the error.

    The size is checked before reading. Only a regular file is read: a FIFO (opened without waiting for a
    writer), a device, a socket or a folder is refused as it is opened, whatever the caller saw before.
    ``regular_only`` (files found in a folder, not named by the user) refuses a link too.
    """
    source = str(path)
    most = limits.FILE_BYTES if limit is None else limit
    flags = os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if regular_only else 0)
    try:
        with os.fdopen(os.open(path, flags), "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise SpecError(source, None, "not a regular file")
            if info.st_size > most:
                raise _too_large(source, what, most)
            note_read(info)
            raw = fh.read(most + 1)
    except OSError as exc:
        raise SpecError(source, None, f"cannot read file: {exc.strerror or exc}") from None
    if len(raw) > most:  # grown since fstat
        raise _too_large(source, what, most)
    return raw


def parse_text(
    text: str, source: str, json_: bool = False, numbers: int | None = None, what: str = "the file"
) -> dict[str, Any]:
    """TOML (or JSON) text as a table, every float kept as its text, nesting bounded; nothing in it is run.
    ``numbers``: the most JSON numbers ``what`` may hold (each is an object: 80 bytes for "0," in the file)."""
    try:
        data = _parse(text, source, json_, numbers, what)
    except RecursionError:
        raise _too_deep(source, None) from None
    _check_nesting(data, source)
    return data


def _parse(text: str, source: str, json_: bool, numbers: int | None, what: str) -> dict[str, Any]:
    if json_:
        twice: list[bool] = []
        number: Any = FloatText if numbers is None else _counted(numbers, source, what)
        try:
            data = json.loads(
                text,
                parse_float=number,
                parse_int=number,
                parse_constant=_reject_constant,
                object_pairs_hook=lambda pairs: _table(pairs, twice),
            )
        except json.JSONDecodeError as exc:
            raise SpecError(source, None, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except NumeralError as exc:
            raise SpecError(source, None, str(exc)) from None
        if not isinstance(data, dict):
            raise SpecError(source, None, f"expected a JSON object, got {kind_of(data)}")
        if twice:
            _refuse_twice(data, source)
        return data
    try:
        return tomllib.loads(text, parse_float=_toml_float)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(source, None, f"invalid TOML: {shown(exc)}") from None
    except ValueError:  # tomllib turns integers into int(), which stops at 4300 digits
        raise LimitError(
            source,
            None,
            f"an integer with thousands of digits; numbers may have at most {limits.NUMBER_LENGTH} characters",
        ) from None


def _counted(most: int, source: str, what: str) -> Any:
    """FloatText of each JSON number, refusing the one past ``most`` (in one line, before memory runs out)."""
    count = itertools.count(1)

    def number(text: str) -> FloatText:
        if next(count) > most:
            raise LimitError(source, None, f"more than {most} numbers, the most {what} may hold")
        return FloatText(text)

    return number


class TwiceError(ValueError):
    """A JSON object names one key twice."""


def once_each(pairs: list[tuple[str, Any]], what: str = "key") -> dict[str, Any]:
    """A JSON object's pairs as a dict (json's ``object_pairs_hook``), refusing a key given twice: JSON keeps the
    last of two silently (a forged first copy, a second "id"); TOML refuses them, and so do we."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise TwiceError(f"the {what} {brief(key)} twice")
        out[key] = value
    return out


def _too_large(source: str, what: str, most: int | None = None) -> LimitError:
    most = limits.FILE_BYTES if most is None else most
    return LimitError(source, None, f"larger than {most // 2**20} MiB (the limit for {what})")


def _too_deep(source: str, key: str | None) -> LimitError:
    return LimitError(source, key, f"lists and tables nested more than {limits.NESTING} deep (the limit)")


def _check_nesting(data: dict[str, Any], source: str) -> None:
    # level by level, so that no depth of input can exhaust the stack; scalars are not carried
    level: list[tuple[tuple, dict | list]] = [((), data)]
    for _ in range(limits.NESTING):
        following = []
        for path, value in level:
            inner = value.values() if isinstance(value, dict) else value
            if not any(issubclass(t, (dict, list)) for t in set(map(type, inner))):  # scalars only: in C
                continue
            items = value.items() if isinstance(value, dict) else enumerate(value, 1)
            following += [(path + (k,), v) for k, v in items if isinstance(v, (dict, list))]
        if not following:
            return
        level = following
    path = level[0][0]
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    raise _too_deep(source, key)


class _Twice(dict):
    """A JSON object that gave ``key`` more than once (json would keep the last copy and say nothing)."""

    key = ""


def _table(pairs: list[tuple[str, Any]], twice: list[bool]) -> dict[str, Any]:
    table = dict(pairs)
    if len(table) == len(pairs):
        return table
    marked = _Twice(table)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            marked.key = key
            break
        seen.add(key)
    twice.append(True)
    return marked


def _refuse_twice(data: dict[str, Any], source: str) -> None:
    """One line naming the first key given twice, in the file's order, and the object it lies in (see
    :func:`once_each`; the object is found afterwards, as json's hook does not know where it is)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:  # depth first, in the file's order; a stack, so any depth is safe
        path, value = stack.pop()
        if isinstance(value, _Twice):
            where = clip(path.lstrip("."), 100) or None  # the keys on the way are user text too
            raise SpecError(source, where, f"the key {brief(value.key)} twice in one object; keep one")
        items = (
            [(f"{path}.{k}", v) for k, v in value.items()]
            if isinstance(value, dict)
            else [(f"{path}[{i}]", v) for i, v in enumerate(value, 1)]
        )
        stack += [(p, v) for p, v in reversed(items) if isinstance(v, (dict, list))]


def _reject_constant(name: str) -> None:
    raise NumeralError(f"not a finite number: {name}")
