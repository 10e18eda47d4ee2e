"""``python -m symattn.verifier CERT``: exit 0 when every value and file is proved, 1 when one is not, 2 when
the certificate is refused (malformed, or not of its files), each problem one line."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

from .binding import check_files
from .checking import verify_values
from .reading import (
    ORDERS,
    Certificate,
    CertificateError,
    Inputs,
    certificate,
    certifies,
    listed,
    own_inputs,
    parse,
    shortened,
)

CERTIFICATE_MOST = 1 << 30  # bytes of a certificate (symattn's own limit)
CLAIM = (
    "each exact value, computed here from the certificate's inputs in exact integers and mpmath's exp and "
    "log rounded outward, lies within the certificate's float ± bound and rounds half-up to the digits shown"
)


def read(path: Path) -> Certificate:
    """The certificate at ``path``: a regular file of at most 1 GiB, UTF-8 JSON, read strictly."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise CertificateError("", f"cannot open: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > CERTIFICATE_MOST:  # before fdopen: a folder fails there
        os.close(fd)
        raise CertificateError("", f"not a regular file of at most {CERTIFICATE_MOST} bytes")
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(CERTIFICATE_MOST + 1)
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark allowed, as verify-certificate reads it (RFC 8259 §8.1)
    except UnicodeDecodeError as exc:
        raise CertificateError("", f"not UTF-8 text (byte {exc.start + 1})") from None
    return certificate(parse(text))


def run(path: Path) -> tuple[int, list[str]]:
    """(exit status, the lines to print) of verifying the certificate at ``path``: the last one the verdict.
    Each line one line: a character that is not printable (a newline, a control, a lone surrogate in a key
    or a path the certificate holds) is written as ``repr`` writes it, so a certificate cannot add a line
    to the report or send a control sequence to the terminal."""
    code, lines = _run(path)
    return code, [line if line.isprintable() else "".join(_printable(ch) for ch in line) for line in lines]


def _printable(ch: str) -> str:
    return ch if ch.isprintable() else repr(ch)[1:-1]


def _run(path: Path) -> tuple[int, list[str]]:
    try:
        cert = read(path)
        failures, files, bound = check_files(cert, path.parent)
        checked, wrong = verify_values(cert)
    except CertificateError as exc:
        return 2, [f"{path}: {exc}"]
    t = cert.inputs
    named = certifies(tuple(cert.tables), t)
    if failures or wrong:
        lines = [*failures, *shortened(wrong), *files, *_suspect(t, checked, wrong), named]
        return 1, [f"{path}: {line}" for line in lines] + [f"{path}: NOT verified: {verdict(failures, wrong)}"]
    inputs = "Q, K, V and dO" if t.dO is not None else "Q, K and V"
    said = (
        f"its inputs {inputs} are the values of the .npy files named, read here (the spec is hashed, not read: "
        f"{listed(own_inputs(t))} are the certificate's own)"
        if bound
        else "its inputs are not all checked against files: not every one is an .npy file here"
    )
    lines = [*files, said, named, f"{checked} values verified: {CLAIM}"]
    return 0, [f"{path}: {line}" for line in lines]


def _suspect(t: Inputs, checked: int, wrong: list[str]) -> list[str]:
    """Where most values fail and the certificate gives a variant's inputs (which no file here binds), the
    line naming them: a certificate whose tanh_cap_order is not its values' fails so."""
    total = checked + len(wrong)
    given = [
        key for key, x in (("denominator_logits", t.logits), ("bias_slopes", t.slopes), ("tanh_cap", t.tanh_cap)) if x
    ]
    if 2 * len(wrong) < total or not given:
        return []
    if t.slopes and t.tanh_cap:
        order = ORDERS[1] if t.cap_first else ORDERS[0]
        given.append(f'tanh_cap_order "{order}"' if t.order_given else 'no tanh_cap_order (which means "after-bias")')
    return [
        f"{len(wrong)} of {total} values fail, as they do where an input the certificate alone gives is not the one "
        f"its values were made with (the spec is hashed, not read here): it names {listed(given)}"
    ]


# what a failure line says of its value (checking.Value.judge), and the verdict's words for one and for n
REFUTED = (
    ("does not round to", "does not round to the value shown", "do not round to the value shown"),
    ("float ± bound", "lies outside the certificate's float ± bound", "lie outside the certificate's float ± bound"),
    ("enclosure", "lies outside the certificate's enclosure", "lie outside the certificate's enclosure"),
    ("not decided at", "is not decided", "are not decided"),
    ("the exact value is not", "is not the exact value given", "are not the exact values given"),
)


def verdict(files: list[str], wrong: list[str]) -> str:
    """What failed, counted: ``1600 values do not round to the value shown; 1 file is not the file certified``."""
    parts = [
        f"{len(files)} files are not the files certified" if len(files) > 1 else "1 file is not the file certified"
    ]
    parts = parts if files else []
    for phrase, one, many in REFUTED:
        n = sum(phrase in line for line in wrong)
        if n:
            parts.append(f"1 value {one}" if n == 1 else f"{n} values {many}")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symattn.verifier", description=__doc__)
    parser.add_argument("certificate", help="the JSON of symattn compute --certify --float64")
    args = parser.parse_args(argv)
    try:
        code, lines = run(Path(args.certificate))
    except KeyboardInterrupt:
        return 130
    for line in lines:  # the report on stdout, its verdict last; a certificate refused (2) on stderr
        print(line, file=sys.stderr if code == 2 else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main())
