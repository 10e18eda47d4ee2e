"""The files a spec was read from, and their SHA-256: what a certificate names, so that it binds to them.

``spec_sources`` lists (name, path) pairs: the spec file itself, and any input files the spec records
(``Spec.kernel.sources``, where a spec names files for its matrices). Hashing streams each file, a regular file
of at most ``limits.HASHED_BYTES``, and never follows what is not one (a FIFO or device would not end).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from symattn.input import limits
from symattn.input.errors import LimitError, SpecError

CHUNK = 1 << 20


def spec_sources(spec) -> list[tuple[str, str]]:
    """(name, path) of every file the spec's numbers come from: "spec" for the spec file (none for a spec
    given as data or a built-in example), then the spec's own ``sources``, if it records any."""
    from symattn.input.builtin import EXAMPLES

    path = Path(spec.source)
    # a built-in example is symattn's own file, at a path of this machine: not an input to bind to
    own = path.is_file() and path.resolve().parent == EXAMPLES.resolve()
    out = [("spec", spec.source)] if path.is_file() and not own else []
    return out + [(str(name), str(path)) for name, path in spec.kernel.sources]


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
            digest = hashlib.sha256()
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
            return digest.hexdigest()
    except OSError as exc:
        raise SpecError(source, None, f"cannot read file: {exc.strerror or exc}") from None


def hashes(sources: list[tuple[str, str]]) -> list[dict[str, str]]:
    """The certificate's ``files``: name, path as recorded, and SHA-256 of each source."""
    return [{"name": name, "path": path, "sha256": sha256_file(path)} for name, path in sources]


__all__ = ["hashes", "sha256_file", "spec_sources"]
