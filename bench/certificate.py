"""Certificates at kernel sizes (issue 22 §4): how long compute --certify and verify-certificate take, as
ratios against a plain numpy float64 attention of the same shape measured in the same run.

    python bench/certificate.py               # 256 × 64 (float16) and 4096 × 128 (float32), the float64 path
    python bench/certificate.py --quick       # 256 × 64 only
    python bench/certificate.py --exact       # also the exact path at 256 × 64 (minutes to verify)

The float64 path (compute --certify --float64) certifies the output: each value's float and bound, which
verify-certificate recomputes, and arb where the bound does not decide the digits. 256 × 64 is two whole
`symattn` processes from a spec naming .npy files. At 4096 × 128 the spec reader's token limit (1024)
stops compute, so the certificate is made in this process (derivation.float_certificate, the function
compute calls) and written out; verify-certificate is a whole process, as a reader runs it.

The arb values dominate verify-certificate's time (mpmath's exps of each of their rows): at 4096 × 128
and 10 digits about 0.5% of the outputs need arb, at 8 digits (`--digits 8`) under 0.01%.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RUN = [sys.executable, "-m", "symattn"]


def reference_s(Q, K, V) -> float:
    """Seconds of a plain numpy float64 attention with the row-max shift (the best of three)."""
    import numpy as np

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        Z = (Q @ K.T) / np.sqrt(Q.shape[1])
        E = np.exp(Z - Z.max(axis=1, keepdims=True))
        _ = (E @ V) / E.sum(axis=1, keepdims=True)
        best = min(best, time.perf_counter() - start)
    return best


def verify(cert: Path) -> tuple[float, str, int]:
    start = time.perf_counter()
    said = subprocess.run(
        [*RUN, "verify-certificate", str(cert), "--max-seconds", "3600"], capture_output=True, text=True, cwd=ROOT
    )
    return time.perf_counter() - start, said.stdout.strip() or said.stderr.strip(), said.returncode


def line(shape: str, made: float, size: int, checked: float, ref: float, code: int) -> str:
    return (
        f"{shape}: compute --certify {made:.1f} s, {size / 1e6:.1f} MB; verify-certificate {checked:.1f} s, "
        f"exit {code}; numpy float64 reference {ref * 1e3:.1f} ms (verify / numpy {checked / ref:.0f}×)"
    )


def small(folder: Path, n: int, d: int, digits: int, exact: bool) -> None:
    import numpy as np

    rng = np.random.default_rng(1)
    arrays = {m: rng.standard_normal((n, d)).astype(np.float16) for m in "qkv"}
    for m, a in arrays.items():
        np.save(folder / f"{m}.npy", a)
    spec = folder / "spec.toml"
    spec.write_text('Q = "q.npy"\nK = "k.npy"\nV = "v.npy"\n', encoding="utf-8")
    ref = reference_s(*(arrays[m].astype(np.float64) for m in "qkv"))
    cert = folder / "cert.json"
    start = time.perf_counter()
    command = [*RUN, "compute", str(spec), "--certify", "--float64", "--digits", str(digits), "-o", str(cert)]
    subprocess.run(command, check=True, cwd=ROOT)
    made = time.perf_counter() - start
    checked, said, code = verify(cert)
    print(line(f"{n}×{d} float64 path, {digits} digits", made, cert.stat().st_size, checked, ref, code))
    print(said)
    if not exact:
        return
    decimals = folder / "exact.json"  # the exact path reads the same numbers as exact decimals
    decimals.write_text(
        json.dumps({m.upper(): [[str(Decimal(float(x))) for x in row] for row in a] for m, a in arrays.items()})
    )
    start = time.perf_counter()
    subprocess.run([*RUN, "compute", str(decimals), "--certify", "--no-exact", "-o", str(cert)], check=True, cwd=ROOT)
    made = time.perf_counter() - start
    checked, said, code = verify(cert)
    print(line(f"{n}×{d} exact path, 15 digits", made, cert.stat().st_size, checked, ref, code))
    print(said)


def large(folder: Path, n: int, d: int, digits: int) -> None:
    import numpy as np

    from symattn.certificates.float_maker import certificate_json
    from symattn.kernel import float64

    rng = np.random.default_rng(2)
    Q, K, V = (rng.standard_normal((n, d)).astype(np.float32).astype(np.float64) for _ in range(3))
    ref = reference_s(Q, K, V)
    head = float64.head(Q, K, V, None, None)
    assert head is not None
    cert = folder / "large.json"
    start = time.perf_counter()
    with cert.open("w", encoding="utf-8") as out:
        for piece in certificate_json(head, digits, []):
            out.write(piece)
    made = time.perf_counter() - start
    checked, said, code = verify(cert)
    shape = f"{n}×{d} float64 path, {digits} digits (made in process)"
    print(line(shape, made, cert.stat().st_size, checked, ref, code))
    print(said)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="256 × 64 only")
    parser.add_argument("--exact", action="store_true", help="also the exact path at 256 × 64 (minutes)")
    parser.add_argument("--digits", type=int, default=10, help="significant digits of the float64 path (default 10)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    small(folder, 256, 64, args.digits, args.exact)
    if not args.quick:
        large(folder, 4096, 128, args.digits)


if __name__ == "__main__":
    main()
