"""The files a certificate names: found in its own folder only, hashed, and the ``.npy`` inputs read.

A path must be relative, without ``..``, and stay inside the certificate's folder once links are resolved; a
file is opened without following a link and without waiting, and must be a regular file. A SHA-256 that
differs is a failure (exit 1). Q, K, V and ``grad_output`` (dO) given as ``.npy`` files are read from the
very bytes that were hashed (:mod:`.npyfile`) and must hold exactly the certificate's inputs; any other
file (the spec, a ``.safetensors`` file) is hashed, and its values are not read here.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path, PurePosixPath

from .npyfile import NpyError, read_npy
from .reading import Certificate, CertificateError, Inputs

NPY_MOST = 1 << 31  # bytes of one .npy input read whole (hashed from the same bytes)
HASH_MOST = 1 << 34  # bytes of any other file, hashed as it streams
INPUTS = {"Q": "Q", "K": "K", "V": "V", "grad_output": "dO"}  # a file's name: the input it holds


def check_files(cert: Certificate, folder: Path | None) -> tuple[list[str], list[str], bool]:
    """(failures, one line per file, whether every input is bound to a file's values)."""
    failures, lines = [], []
    bound = {name: False for name in ("Q", "K", "V", "dO") if name != "dO" or cert.inputs.dO is not None}
    for n, (name, path, digest) in enumerate(cert.files, 1):
        _relative(path, n)
        label = f"{name} {path}"
        if folder is None:
            lines.append(f"{label}: not checked (the certificate was given as data)")
            continue
        real = _inside(folder, path, n)
        if real is None:
            lines.append(f"{label}: absent, not checked")
            continue
        reads = name in INPUTS and path.lower().endswith(".npy")
        data, got = _read(real, path, n, reads)
        if got != digest:
            failures.append(f"{label}: its SHA-256 is {got}, the certificate's is {digest}: not the file certified")
            continue
        if data is None:
            lines.append(f"{label}: SHA-256 matches (its values are not read here)")
            continue
        _same_values(cert.inputs, INPUTS[name], data, path)
        bound[INPUTS[name]] = True
        lines.append(f"{label}: SHA-256 matches, and its values are the certificate's {INPUTS[name]}")
    return failures, lines, all(bound.values()) and not failures


def _relative(path: str, n: int) -> None:
    pure = PurePosixPath(path)
    if "\\" in path or "\x00" in path or pure.is_absolute() or (len(path) > 1 and path[1] == ":"):
        raise CertificateError(
            "certificate.files.path", f"{path[:60]!r}: not a path relative to the certificate's folder", (n,)
        )
    if ".." in pure.parts:
        raise CertificateError("certificate.files.path", f"{path[:60]!r}: goes up a folder (..)", (n,))


def _inside(folder: Path, path: str, n: int) -> Path | None:
    base = Path(os.path.realpath(folder))
    real = Path(os.path.realpath(base / path))
    if real != base and base not in real.parents:
        raise CertificateError(
            "certificate.files.path", f"{path[:60]!r}: leads outside the certificate's folder (through a link)", (n,)
        )
    return real if os.path.lexists(real) else None


def _read(real: Path, path: str, n: int, whole: bool) -> tuple[bytes | None, str]:
    """(the bytes, where ``whole``; their SHA-256): a regular file, opened without waiting or following."""
    key = "certificate.files.path"
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        raise CertificateError(key, f"{path[:60]!r}: cannot open: {exc.strerror}", (n,)) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > (NPY_MOST if whole else HASH_MOST):  # before fdopen
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CertificateError(key, f"{path[:60]!r}: not a regular file", (n,))
        raise CertificateError(key, f"{path[:60]!r}: {info.st_size} bytes, past this verifier's limit", (n,))
    with os.fdopen(fd, "rb") as fh:
        digest = hashlib.sha256()
        if whole:
            data = fh.read()
            digest.update(data)
            return data, digest.hexdigest()
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
        return None, digest.hexdigest()


def _same_values(inputs: Inputs, name: str, data: bytes, path: str) -> None:
    """The .npy file holds exactly the input ``name``: Q, K, V or dO, in the certificate's layout."""
    try:
        shape, values = read_npy(data)
    except NpyError as exc:
        raise CertificateError(f"certificate.inputs.{name}", f"{path[:60]!r}: {exc}") from None
    rows = getattr(inputs, name)
    heads = inputs.kv_heads if name in ("K", "V") else inputs.heads
    tokens, width = len(rows) // (inputs.batch * heads), len(rows[0])
    index = _index(shape, inputs.batch, heads, tokens, width, inputs.layout)
    if index is None:
        raise CertificateError(
            f"certificate.inputs.{name}",
            f"{path[:60]!r} has shape {shape}, which does not hold {inputs.batch} × {heads} × {tokens} × {width} "
            f"({inputs.layout})",
        )
    for r, row in enumerate(rows):
        got = [values[index(r, c)] for c in range(width)]
        if got != row:
            c = next(c for c in range(width) if got[c] != row[c])
            raise CertificateError(
                f"certificate.inputs.{name}",
                f"{row[c].hex()}, but {path[:60]!r} holds {got[c].hex()} there: the certificate is not of its files",
                (r + 1, c + 1),
            )


def _index(shape: tuple[int, ...], batch: int, heads: int, tokens: int, width: int, layout: str):
    """index(row, column) into the file's C-order values of the certificate's row (batch, head, token) and
    column; None where the shape does not fit. A matrix (leading axes of one) holds one batch, its heads'
    columns side by side; 3 or 4 axes hold (batch,) head, token, column, or with bnhd (batch,) token, head."""
    if len(shape) >= 2 and all(x == 1 for x in shape[:-2]):
        if batch != 1 or shape[-2:] != (tokens, heads * width):
            return None
        return lambda r, c: (r % tokens) * heads * width + (r // tokens) * width + c
    if len(shape) not in (3, 4):
        return None
    full = (1, *shape) if len(shape) == 3 else shape
    want = (batch, heads, tokens, width) if layout == "bhnd" else (batch, tokens, heads, width)
    if full != want:
        return None

    def at(r: int, c: int) -> int:
        b, rest = divmod(r, heads * tokens)
        h, t = divmod(rest, tokens)
        if layout == "bhnd":
            return ((b * heads + h) * tokens + t) * width + c
        return ((b * tokens + t) * heads + h) * width + c

    return at


__all__ = ["check_files"]
