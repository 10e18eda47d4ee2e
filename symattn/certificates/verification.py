"""What a certificate's verification found, and the checks both certificate versions share: the SHA-256
of the files it names, and rounding half-up to significant digits, exactly."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from symattn.certificates.reader import Reader, brief, kind_of


@dataclass(frozen=True)
class Verification:
    checked: int  # values proved
    failures: tuple[str, ...]  # one line each: where, and what is wrong
    files: tuple[str, ...] = ()  # one line per file the certificate names: its SHA-256 matched, or it is absent
    paths: tuple[str, ...] = ()  # how many values each path decided (a float64-path certificate)

    @property
    def ok(self) -> bool:
        return not self.failures and self.checked > 0


def round_significant(x: Fraction, digits: int) -> Fraction:
    """x rounded half-up (away from zero on ties) to ``digits`` significant digits, exactly."""
    if x == 0:
        return Fraction(0)
    a = abs(x)
    k = (a.numerator.bit_length() - a.denominator.bit_length()) * 30103 // 100000  # about log10(a)
    while Fraction(10) ** k > a:  # make 10^k <= a < 10^(k+1)
        k -= 1
    while Fraction(10) ** (k + 1) <= a:
        k += 1
    unit = Fraction(10) ** (k - digits + 1)
    q = (a / unit * 2 + 1).__floor__() // 2
    return (q * unit) * (1 if x > 0 else -1)


_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_files(cert: Mapping[str, Any], read: Reader, base: Path | None) -> tuple[list[str], list[str]]:
    """Each file the certificate names, hashed where it is present (as recorded, else beside the
    certificate, ``base``): a failure where its SHA-256 differs; a line saying what was checked."""
    from symattn.input.sources import sha256_file

    files = cert.get("files", [])
    if not isinstance(files, list):
        raise read.error("certificate.files", f"expected a list of files, got {kind_of(files)}")
    failures, lines = [], []
    for n, entry in enumerate(files, 1):
        if not isinstance(entry, Mapping) or set(entry) != {"name", "path", "sha256"}:
            raise read.error("certificate.files", "expected a table of name, path and sha256", (n,))
        name, path, digest = entry["name"], entry["path"], entry["sha256"]
        for key, raw in (("name", name), ("path", path)):
            if not isinstance(raw, str) or not 0 < len(raw) <= 4096:
                raise read.error(
                    f"certificate.files.{key}", f"expected a text of 1 to 4096 characters, got {brief(raw)}", (n,)
                )
        if not isinstance(digest, str) or _SHA256.fullmatch(digest) is None:
            raise read.error("certificate.files.sha256", f"expected 64 lowercase hex digits, got {brief(digest)}", (n,))
        where = next(
            (p for p in (Path(path), None if base is None else base / path) if p is not None and p.is_file()), None
        )
        if where is None:
            lines.append(f"{name} {path}: absent, its SHA-256 not checked")
        elif (got := sha256_file(where)) != digest:
            failures.append(
                f"{name} {where}: its SHA-256 is {got}, the certificate's is {digest}: not the file certified"
            )
        else:
            lines.append(f"{name} {where}: SHA-256 matches")
    return failures, lines


__all__ = ["Verification", "check_files", "round_significant"]
