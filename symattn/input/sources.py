"""The files a spec was read from, and their SHA-256: what a certificate names, so that it binds to them.

``spec_sources`` lists the spec file itself and any input files the spec records (``Spec.kernel.sources``, where a
spec names files for its matrices), each with its path relative to the certificate's folder: the verifier
looks for a file there and nowhere else. Hashing streams each file, a regular file of at most
``limits.HASHED_BYTES``, and never follows what is not one (a FIFO or device would not end).
"""

from __future__ import annotations

import hashlib
import os
import stat
import unicodedata
from pathlib import Path

from symattn.input import limits
from symattn.input.errors import LimitError, SpecError, shown
from symattn.input.files import note_read

CHUNK = 1 << 20


def spec_sources(spec, folder: str | Path | None = None) -> list[tuple[str, str, str]]:
    """(name, path in the certificate, path here) of every file the spec's numbers come from: "spec" for the
    spec file (none for a spec given as data or a built-in example), then the spec's own ``sources``.

    The certificate's paths are relative to ``folder``, the one the certificate is written to (None: the
    spec's own), '/'-separated; a file outside it (or a link that leads out) is refused in one line, as the
    verifier would refuse to look there.
    """
    from symattn.input.builtin import EXAMPLES

    path = Path(spec.source)
    # a built-in example is symattn's own file, at a path of this machine: not an input to bind to
    own = path.is_file() and path.resolve().parent == EXAMPLES.resolve()
    named = [("spec", spec.source)] if path.is_file() and not own else []
    named += [(str(name), str(path)) for name, path in spec.kernel.sources]
    base = Path(path.parent if folder is None else folder)
    return [(name, relative_inside(here, base), here) for name, here in named]


def relative_inside(path: str, folder: Path) -> str:
    """``path`` relative to ``folder``, '/'-separated; refused where it lies outside, links followed."""
    relative = Path(os.path.relpath(os.path.abspath(path), os.path.abspath(folder)))
    real, base = Path(path).resolve(), folder.resolve()
    if unnameable(str(relative)):  # the verifiers refuse such a path
        raise SpecError(path, None, "a control character or an undecodable byte in its name: rename it to certify")
    if relative.parts[:1] == ("..",) or not real.is_relative_to(base):
        raise SpecError(
            path,
            None,
            f"outside {shown(os.path.abspath(folder))}, the folder the certificate is written to: a certificate "
            "names only files in its own folder (write it beside its spec, with -o)",
        )
    return relative.as_posix()


def unnameable(path: str) -> bool:
    """A control character or a lone surrogate (an undecodable byte) in ``path``: no file a certificate names."""
    return any(unicodedata.category(ch) in ("Cc", "Cs") for ch in path)


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a regular file, streamed, as 64 lowercase hex digits; one-line errors otherwise."""
    source = str(path)
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise SpecError(source, None, "not a regular file: nothing to hash")
            if info.st_size > limits.HASHED_BYTES:
                raise LimitError(source, None, f"larger than {limits.HASHED_BYTES // 2**30} GiB (the limit to hash)")
            note_read(info)
            digest = hashlib.sha256()
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
            return digest.hexdigest()
    except OSError as exc:
        raise SpecError(source, None, f"cannot read file: {exc.strerror or exc}") from None


def hashes(sources: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The certificate's ``files``: name, path as the certificate records it, and SHA-256 of each source."""
    return [{"name": name, "path": path, "sha256": sha256_file(here)} for name, path, here in sources]


__all__ = ["hashes", "relative_inside", "sha256_file", "spec_sources", "unnameable"]
