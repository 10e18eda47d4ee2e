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
from .reading import Certificate, CertificateError, certificate, parse

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
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > CERTIFICATE_MOST:
            raise CertificateError("", f"not a regular file of at most {CERTIFICATE_MOST} bytes")
        raw = fh.read(CERTIFICATE_MOST + 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CertificateError("", f"not UTF-8 text (byte {exc.start + 1})") from None
    return certificate(parse(text))


def run(path: Path) -> tuple[int, list[str]]:
    """(exit status, the lines to print) of verifying the certificate at ``path``."""
    try:
        cert = read(path)
        failures, files, bound = check_files(cert, path.parent)
        checked, wrong = verify_values(cert)
    except CertificateError as exc:
        return 2, [f"{path}: {exc}"]
    failures += wrong
    lines = [f"{path}: {line}" for line in failures]
    if failures:
        return 1, lines + [f"{path}: {line}" for line in files]
    inputs = "Q, K, V and dO" if cert.inputs.dO is not None else "Q, K and V"
    t = cert.inputs
    given = ["the scale", "the mask"] + [
        name
        for name, x in (("the denominator logits", t.logits), ("the slopes", t.slopes), ("the tanh cap", t.tanh_cap))
        if x
    ]
    own = ", ".join(given[:-1]) + f" and {given[-1]} are"
    said = (
        f"its inputs {inputs} are the values of the .npy files named, read here (the spec is hashed, not read: "
        f"{own} the certificate's own)"
        if bound
        else "its inputs are not all checked against files: not every one is an .npy file here"
    )
    return 0, [f"{path}: {checked} values verified: {CLAIM}", *(f"{path}: {line}" for line in files), f"{path}: {said}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symattn.verifier", description=__doc__)
    parser.add_argument("certificate", help="the JSON of symattn compute --certify --float64")
    args = parser.parse_args(argv)
    try:
        code, lines = run(Path(args.certificate))
    except KeyboardInterrupt:
        return 130
    for line in lines:
        print(line, file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
