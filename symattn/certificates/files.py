"""The files a certificate names: found in its own folder only, hashed, and read back through their spec.

Each path is relative to the certificate's folder: no absolute path, no ``..``, no link that leads out of
the folder (the path is resolved and must stay inside), regular files only, opened without following a
link and without waiting (a FIFO or a device is refused, never read). Anything else is one line, exit 2.

The values bind through the spec. Where the spec and every file it reads are present and their SHA-256
match, the verifier reads the spec itself, with the same strict readers as ``compute`` (so its ``.npy``
and ``.safetensors`` files too), and hands it back: each certificate version then checks that the spec's
inputs are its own, value by value, and that the files the spec reads are exactly the others named. A
certificate that names input files names its spec too; where the spec is absent, no file's values can be
checked, and each is said to be not checked rather than hashed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from symattn.certificates.reader import Reader, brief, kind_of
from symattn.input import limits
from symattn.input.errors import LimitError, shown
from symattn.input.records import record
from symattn.input.sources import unnameable

_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"spec|[A-Za-z_][A-Za-z0-9_]{0,31}(?:\.[A-Za-z_][A-Za-z0-9_]{0,31})?")  # "spec", a spec key
_ENTRY = {"name", "path", "sha256"}
CHUNK = 1 << 20


@record
class Named:
    """What the files a certificate names showed: failures (a SHA-256 that differs), one line per file, and
    the spec as the verifier read it (None where it is not named, absent, or it or a file it reads differs)."""

    failures: tuple[str, ...]
    lines: tuple[str, ...]
    spec: Any = None
    spec_shown: str = ""  # the spec's path as the lines show it
    extra: dict[str, Path] | None = None  # the files named beside the spec's (version 3: grad_output), found here


def check_files(cert: Mapping[str, Any], read: Reader, base: Path | None, extra: tuple[str, ...] = ()) -> Named:
    """Hash each file the certificate names, found in ``base`` (its folder; None: given as data, no folder),
    and read the spec back where it and its files are there and theirs. ``extra``: names of files that are
    not the spec's (a version reads them itself)."""
    raw = cert.get("files", [])
    if not isinstance(raw, list):
        raise read.error("certificate.files", f"expected a list of files, got {kind_of(raw)}")
    entries = [_entry(read, n, entry) for n, entry in enumerate(raw, 1)]
    names = [name for name, _, _ in entries]
    for n, name in enumerate(names, 1):
        if name in names[: n - 1]:
            raise read.error("certificate.files.name", f"{brief(name)} a second time", (n,))
    if entries and "spec" not in names:
        raise read.error(
            "certificate.files",
            "input files without their spec: a file's values are checked only through the spec that reads it",
        )
    if base is None:
        given = "not checked: the certificate was given as data, not a file"
        return Named((), tuple(f"{name} {shown(path)}: {given}" for name, path, _ in entries))
    found = [_find(read, base, path, n) for n, (_, path, _) in enumerate(entries, 1)]
    spec_absent = entries and found[names.index("spec")] is None
    failures, lines = [], []
    for n, ((name, path, digest), real) in enumerate(zip(entries, found), 1):
        label = f"{name} {shown(str(base / path))}"
        if real is None:
            lines.append(f"{label}: absent, its SHA-256 not checked")
        elif spec_absent:
            lines.append(f"{label}: not checked: its values are read only through the spec, which is absent")
        elif (got := _sha256(read, real, path, n)) != digest:
            failures.append(f"{label}: its SHA-256 is {got}, the certificate's is {digest}: not the file certified")
        else:
            lines.append(f"{label}: SHA-256 matches")
    if not entries:  # made from arrays (or its files struck out): said, as the standalone verifier says it
        return Named((), ("its inputs are the certificate's own: it names no files to check them against",))
    if failures:
        return Named(tuple(failures), tuple(lines))
    if None in found:
        return Named((), (*lines, "its inputs are not checked against its files: not all of them are here"))
    spec_path = base / entries[names.index("spec")][1]
    spec = _read_spec(spec_path)
    others = {name: path for name, path, _ in entries if name != "spec" and name not in extra}
    _same_files(read, spec, base, others, shown(str(spec_path)))
    beside = {name: real for (name, _, _), real in zip(entries, found) if name in extra and real is not None}
    return Named((), tuple(lines), spec, shown(str(spec_path)), beside)


def bound(named: Named) -> tuple[str, ...]:
    """The lines of the files, and the line that says the inputs are theirs: once a version has checked it."""
    return (*named.lines, f"its inputs are the values the spec {named.spec_shown} gives, read here from its files")


def _entry(read: Reader, n: int, entry: Any) -> tuple[str, str, str]:
    if not isinstance(entry, Mapping) or set(entry) != _ENTRY:
        unknown = sorted(set(entry) - _ENTRY) if isinstance(entry, Mapping) else []
        if unknown:
            raise read.error(
                f"certificate.files.{unknown[0]}", "an unknown field: a file has name, path and sha256", (n,)
            )
        raise read.error("certificate.files", "expected a table of name, path and sha256", (n,))
    name, path, digest = entry["name"], entry["path"], entry["sha256"]
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise read.error(
            "certificate.files.name", f'expected "spec" or a spec key such as "Q", got {brief(name)}', (n,)
        )
    if not isinstance(path, str) or not 0 < len(path) <= 4096:
        raise read.error("certificate.files.path", f"expected a text of 1 to 4096 characters, got {brief(path)}", (n,))
    if not isinstance(digest, str) or _SHA256.fullmatch(digest) is None:
        raise read.error("certificate.files.sha256", f"expected 64 lowercase hex digits, got {brief(digest)}", (n,))
    if unnameable(path):
        raise read.error("certificate.files.path", f"{brief(path)}: a control character or a lone surrogate", (n,))
    pure = PurePosixPath(path)
    if "\\" in path or "\x00" in path or pure.is_absolute() or re.match(r"[A-Za-z]:", path):
        raise read.error(
            "certificate.files.path", f"{brief(path)}: a path relative to the certificate's folder is needed", (n,)
        )
    if ".." in pure.parts:
        raise read.error("certificate.files.path", f"{brief(path)}: a path may not go up a folder (..)", (n,))
    return name, path, digest


def _find(read: Reader, base: Path, path: str, n: int) -> Path | None:
    """The file, resolved, inside the certificate's folder; None where there is none."""
    folder = base.resolve()
    try:
        real = (folder / path).resolve(strict=True)
    except FileNotFoundError:
        return None
    except (OSError, RuntimeError) as exc:  # a loop of links, a folder we may not enter
        reason = getattr(exc, "strerror", None) or "a loop of links"
        raise read.error("certificate.files.path", f"{brief(path)}: cannot read file: {reason}", (n,)) from None
    if not real.is_relative_to(folder):
        raise read.error(
            "certificate.files.path", f"{brief(path)}: leads outside the certificate's folder (through a link)", (n,)
        )
    return real


def _sha256(read: Reader, real: Path, path: str, n: int) -> str:
    """The SHA-256 of a regular file, streamed; opened without following a link and without waiting."""
    import hashlib

    key = "certificate.files.path"
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO, a device, a folder: refused as it was opened, never read
            os.close(fd)
            raise read.error(key, f"{brief(path)}: not a regular file", (n,))
        with os.fdopen(fd, "rb") as fh:
            if info.st_size > limits.HASHED_BYTES:
                most = limits.HASHED_BYTES // 2**30
                raise LimitError(read.source, key, f"{brief(path)}: larger than {most} GiB (the limit to hash)", (n,))
            digest = hashlib.sha256()
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
            return digest.hexdigest()
    except OSError as exc:
        raise read.error(key, f"{brief(path)}: cannot read file: {exc.strerror or exc}", (n,)) from None


def _read_spec(path: Path) -> Any:
    """The spec, read as ``compute`` reads one (its own errors name it), from its place in the folder."""
    from symattn.input.files import read_table
    from symattn.input.spec import spec_from_mapping

    return spec_from_mapping(read_table(path, regular_only=True), str(path), path.parent)


def _same_files(read: Reader, spec: Any, base: Path, named: dict[str, str], spec_name: str) -> None:
    """The files the spec reads are exactly the others the certificate names, at the same paths."""
    reads = {key: PurePosixPath(Path(path).relative_to(base)).as_posix() for key, path in spec.kernel.sources}
    for key, path in reads.items():
        if named.get(key) != path:
            raise read.error(
                "certificate.files",
                f"the spec {spec_name} reads {key} from {shown(path)}, which the certificate does not name: "
                "it is not of these files",
            )
    for key in named:
        if key not in reads:
            raise read.error(
                "certificate.files",
                f"names a file for {key}, which the spec {spec_name} does not read: it is not of these files",
            )


__all__ = ["Named", "bound", "check_files"]
