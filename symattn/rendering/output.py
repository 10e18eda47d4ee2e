"""Write a finished text to ``-o PATH`` without harming what is there.

What the path holds decides how it is written, as careful Unix tools do:

- a new path or a regular file: a temporary file in the same folder, fsync,
  then rename over it. A new file gets ``0666 & ~umask``; an existing one keeps
  its mode and, where the process may set it, its owner;
- a symlink: the file it points to is written (the link stays);
- a file with several hard links: written in place, so every link sees it;
- a device, FIFO or socket: opened and written, never renamed over;
- a folder, a read-only file, an empty name: refused with one line.

The text is encoded in full before anything is opened, so a failure in the
document never leaves a half-written file. Bytes (a PDF) are written as they are.
A document made in pieces (an iterable of bytes: a certificate of 8192 × 1024) is
written as it comes into the temporary file that is then renamed; where there is
none to rename (a device, a FIFO, several hard links, stdout) it is gathered first
in an unnamed temporary file (:func:`spooled`), so that nothing reaches the target
unless the whole document was made.

A folder of files (a class, feedback) is written by :func:`write_files`, which
never follows a link: nothing it writes lands outside the folder.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO

from symattn.input.errors import OutputError, shown
from symattn.input.files import was_read

Data = bytes | Iterable[bytes]  # whole, or in pieces (an unnamed file of the whole document, too)
CHUNK = 1 << 20


def write_output(path: str, text: str | bytes | Iterable[bytes]) -> None:
    """Write ``text`` (UTF-8), bytes as they are, or pieces of bytes as they come, to ``path``; raise
    :class:`OutputError` on any problem."""
    if not path:
        raise OutputError(path, "empty file name")
    data: Data = (
        bytes(text)
        if isinstance(text, (bytes, bytearray, memoryview))
        else text.encode("utf-8")
        if isinstance(text, str)
        else text
    )
    target, info = _target(path)
    try:
        if info is None:
            _replace(target, data, None)
        elif stat.S_ISDIR(info.st_mode):
            raise OutputError(path, "is a folder; give a file name")
        elif not stat.S_ISREG(info.st_mode):
            _write_special(target, spooled(data), info)
        else:
            _not_an_input(path, info)
            if not (info.st_mode & 0o222) or not os.access(target, os.W_OK):
                raise OutputError(
                    path, f"the file is read-only (mode {stat.S_IMODE(info.st_mode):04o}); refusing to replace it"
                )
            if info.st_nlink > 1:
                _write_in_place(target, spooled(data))
            else:
                _replace(target, data, info)
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError.from_os(path, exc) from None


def _not_an_input(path: str, info: os.stat_result) -> None:
    """-o naming a file this command read (its spec, a result, a .npy file: by any name or link) is refused:
    ``compare spec.toml o.npy -o o.npy`` replaced the kernel's output with the report."""
    if was_read(info):
        raise OutputError(path, "is one of this command's own inputs; refusing to replace it (give another -o)")


def _target(path: str) -> tuple[str, os.stat_result | None]:
    """The file ``path`` names (links followed within the rules of _resolve) and its stat (None: none yet)."""
    target = _resolve(path)
    try:
        return target, os.stat(target)
    except FileNotFoundError:
        return target, None
    except OSError as exc:
        raise OutputError.from_os(path, exc) from None


def open_growing(path: str, first: bytes) -> tuple[int, bool]:
    """Start a file that grows as work finishes (a sweep's record, a line per case) at ``path`` with ``first``
    in it, by the rules above: a new or regular file is made whole by a rename (its mode kept), then opened
    to append; a file of several links is truncated in place; a device or FIFO is opened and written. The
    descriptor, and whether it is a regular file (whose lines can be fsync'd and read back)."""
    if not path:
        raise OutputError(path, "empty file name")
    target, info = _target(path)
    append = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    try:
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise OutputError(path, "is a folder; give a file name")
        if info is not None and not stat.S_ISREG(info.st_mode):
            _write_special(target, first, info)
            return os.open(target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)), False
        if info is not None:
            _not_an_input(path, info)
        if info is not None and (not (info.st_mode & 0o222) or not os.access(target, os.W_OK)):
            mode = stat.S_IMODE(info.st_mode)
            raise OutputError(path, f"the file is read-only (mode {mode:04o}); refusing to replace it")
        if info is not None and info.st_nlink > 1:
            _write_in_place(target, first)
        else:
            _replace(target, first, info)
        return os.open(target, append), True
    except OutputError:
        raise
    except OSError as exc:
        raise OutputError.from_os(path, exc) from None


def reopen_growing(path: str, most: int) -> tuple[int, bytes]:
    """A file :func:`open_growing` began, opened again to go on appending: its descriptor (at its end) and its
    bytes, at most ``most`` of them. Only a regular, writable file can be resumed."""
    target = _resolve(path)
    try:
        fd = os.open(target, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK)
    except OSError as exc:
        raise OutputError.from_os(path, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OutputError(path, "not a regular file: only a file's record can be resumed")
        if info.st_size > most:
            raise OutputError(path, f"larger than {most} bytes: not a record this command wrote")
        data = b"".join(iter(lambda: os.read(fd, CHUNK), b""))
        os.set_blocking(fd, True)
    except OutputError:
        os.close(fd)
        raise
    except OSError as exc:
        os.close(fd)
        raise OutputError.from_os(path, exc) from None
    return fd, data


def _resolve(path: str) -> str:
    """Follow symlinks to the file that is to be written."""
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:
        return os.path.realpath(path)  # a new file, or a link to one not yet made
    except OSError as exc:  # a loop of links
        raise OutputError.from_os(path, exc) from None


def _replace(target: str, data: Data, info: os.stat_result | None) -> None:
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"the folder {shown(folder)} does not exist")
    tmp = _temporary(folder, os.path.basename(target))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            write_all(fd, data)
            if info is not None:
                os.fchmod(fd, stat.S_IMODE(info.st_mode))
                try:
                    os.fchown(fd, info.st_uid, info.st_gid)
                except PermissionError:
                    pass  # only root may give a file away; the mode is kept all the same
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _temporary(folder: str, name: str) -> str:
    # a fresh name next to the target; O_EXCL makes a clash an error, never a clobber
    return os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def _write_in_place(target: str, data: Data) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_special(target: str, data: Data, info: os.stat_result) -> None:
    if stat.S_ISSOCK(info.st_mode):
        raise OSError(errno.ENXIO, "is a socket")
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    if stat.S_ISFIFO(info.st_mode):
        flags |= os.O_NONBLOCK  # no reader: fail at once (ENXIO) instead of waiting forever
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(info.st_mode):
            raise OSError(errno.ENXIO, "the FIFO has no reader") from None
        raise
    try:
        os.set_blocking(fd, True)
        write_all(fd, data)
    finally:
        os.close(fd)


def spooled(data: Data) -> bytes | IO[bytes]:
    """A document in pieces, made whole in an unnamed temporary file before any of it is written; bytes as
    they are. A failure while it is made leaves nothing behind (the file has no name)."""
    if isinstance(data, bytes):
        return data
    try:
        spool = tempfile.TemporaryFile()
    except OSError as exc:  # the temporary folder full or not writable
        raise OutputError.from_os(tempfile.gettempdir(), exc) from None
    try:
        for piece in data:
            spool.write(piece)
        spool.seek(0)
    except BaseException as exc:
        spool.close()
        if isinstance(exc, OSError):
            raise OutputError.from_os(tempfile.gettempdir(), exc) from None
        raise
    return spool


def write_all(fd: int, data: Data) -> None:
    """Every byte of ``data`` to ``fd``."""
    for piece in pieces(data):
        _write_bytes(fd, piece)


def pieces(data: Data) -> Iterator[bytes]:
    """``data`` in pieces: bytes whole, pieces as they come, or a file's, a megabyte at a time (then closed)."""
    if isinstance(data, bytes):
        yield data
        return
    read = getattr(data, "read", None)
    if read is None:
        yield from data
        return
    try:
        yield from iter(lambda: read(CHUNK), b"")
    finally:
        data.close()  # type: ignore[attr-defined]


def _write_bytes(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def check_folder(folder: str, force: bool, holds: str, what: str) -> None:
    """Refuse a folder to write ``what`` into that is not a folder, or, unless ``force``, that already holds
    files (they may be ``holds``, which writing would lose)."""
    _check_is_folder(folder)
    try:
        busy = os.path.isdir(folder) and any(os.scandir(folder))
    except OSError as exc:
        raise OutputError.from_os(folder, exc) from None
    if busy and not force:
        raise OutputError(
            folder,
            f"the folder is not empty (it may hold {holds}); write {what} to a new folder, "
            "or give --force to write over it",
        )


def write_files(folder: str, files: list[tuple[str, str | bytes]] | tuple[tuple[str, str | bytes], ...]) -> None:
    """Write each (path inside ``folder``, '/'-separated; content), making the folders it needs.

    Nothing lands outside the folder: a path that is not a plain name inside it, or that passes through a
    symlink or onto anything but a regular file, is refused before the first file is written.
    """
    _check_is_folder(folder)
    targets = _targets(folder, files)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise OutputError.from_os(folder, exc) from None
    for path, data in targets:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as exc:
            raise OutputError.from_os(os.path.dirname(path), exc) from None
        write_output(path, data)


def _targets(folder: str, files) -> list[tuple[str, str | bytes]]:
    """The path of each file inside ``folder``; refuses any that would leave it (see :func:`write_files`)."""
    targets = []
    for relative, data in files:
        parts = relative.split("/")
        if any(p in ("", ".", "..") or "\0" in p for p in parts):
            raise OutputError(relative, "not a plain file name inside the folder " + shown(folder))
        path = folder
        for i, part in enumerate(parts):
            path = os.path.join(path, part)
            last = i == len(parts) - 1
            if os.path.islink(path):
                raise OutputError(path, "is a link; refusing to write through it")
            if os.path.lexists(path) and not (os.path.isfile(path) if last else os.path.isdir(path)):
                raise OutputError(path, "not a regular file; refusing to write over it" if last else "not a folder")
        targets.append((path, data))
    return targets


def is_file_name(path: str) -> bool:
    """Whether ``-o PATH`` names a regular file or a new one (not a device, a FIFO or a folder): only such a
    document has files beside it."""
    return bool(path) and (not os.path.exists(path) or os.path.isfile(path))


def write_beside(path: str, text: str | bytes, files: tuple[tuple[str, str | bytes], ...]) -> None:
    """Write ``text`` to ``path`` (as :func:`write_output` does) and each (name, content) of ``files`` beside
    it, in the folder that ``path`` names (a link's own folder, not its target's), where a relative link
    from the document finds them. A name there that is a link or not a regular file is refused before
    anything is written."""
    folder = os.path.dirname(path) or "."
    targets = _targets(folder, files) if os.path.isdir(folder) else []
    write_output(path, text)  # refuses a missing folder, before any file is made
    for target, data in targets:
        write_output(target, data)


def _check_is_folder(folder: str) -> None:
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise OutputError(folder, "not a folder; give a new or empty folder")
