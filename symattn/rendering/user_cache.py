"""The user's cache folder, where work that every run would repeat is kept: the compiled templates and the
parsed language files. Never the installed package; a folder that cannot be made or written means no
cache, never an error, and every entry is checked against its source before it is used."""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def folder(name: str) -> str | None:
    """``$XDG_CACHE_HOME/symattn/<name>`` (``~/.cache`` without it), made if need be; None where it cannot be
    written."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "symattn", name)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


def parsed(path: Path, parse: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """``parse`` of a UTF-8 file's text, kept with the hash of the bytes it was parsed from: tomllib takes
    10 to 20 ms over a language file of 50 kB, marshal reads its tables back in under one (issue 29's
    start-up)."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    where = folder("parsed")
    entry = where and os.path.join(where, f"{path.stem}.marshal")
    if entry:
        try:
            with open(entry, "rb") as fh:
                kept = marshal.load(fh)
            if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == digest and isinstance(kept[1], dict):
                return kept[1]
        except (OSError, EOFError, ValueError, TypeError):
            pass  # none yet, or cut short: parse again
    value = parse(data.decode("utf-8"))
    if entry:
        _keep(entry, (digest, value))
    return value


def _keep(entry: str, value: tuple[str, dict[str, Any]]) -> None:
    """Write the entry whole or not at all: another process may read it at the same time."""
    try:
        code = marshal.dumps(value)
    except ValueError:  # a value marshal cannot hold (a TOML date): no entry
        return
    try:
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(entry), suffix=".part")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(code)
        os.replace(temporary, entry)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
