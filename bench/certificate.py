"""Certificates at kernel sizes (issue 22 §4): how long compute --certify and verify-certificate take, as
ratios against a plain numpy float64 attention of the same shape measured in the same run.

    python bench/certificate.py               # 256 × 64 (float16) and 4096 × 128 (float32), the float64 path
    python bench/certificate.py --quick       # 256 × 64 only
    python bench/certificate.py --exact       # also the exact path at 256 × 64 (minutes to verify)

The float64 path (compute --certify --float64) certifies the output and both LSEs: each value's float and
bound, which verify-certificate recomputes, and exact rules, double words or arb where the bound does not
decide the digits. 256 × 64 is two whole `symattn` processes from a spec naming .npy files. At 4096 × 128
the certificate is made in this process (certificates.tensor_maker.certificate_json, the function compute
calls: version 5 at this size, its floats packed) and written out; verify-certificate is a whole process, as
a reader runs it, the best of three (its first run beside), each run just after two of numpy's (whose
best is the reference, the second warm again after the verifier's process: the VM's speed drifts by 10 to
15% from minute to minute, and a ratio of figures taken minutes apart drifted with it), and its line gives
CPU seconds (with its forked workers') beside the wall clock, against numpy's on one BLAS thread, and its
peak memory. (Version 2,
which this bench measured before, spent minutes in mpmath's exps of its 2679 arb values.)
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


def reference_s(Q, K, V, times: int = 3) -> float:
    """Seconds of a plain numpy float64 attention with the row-max shift (the best of ``times``)."""
    import numpy as np

    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        attention(np, Q, K, V)
        best = min(best, time.perf_counter() - start)
    return best


def attention(np, Q, K, V):
    Z = (Q @ K.T) / np.sqrt(Q.shape[1])
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return (E @ V) / E.sum(axis=1, keepdims=True)


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
    """The certificate compute --certify --float64 writes (O and both LSEs), made in this process
    past the spec's token limit, then verify-certificate as a whole process: wall and CPU seconds (with its
    forked workers'), and its peak memory, against numpy's float64 attention (CPU: BLAS on one thread)."""
    import numpy as np

    from symattn.certificates.float_tensors import build
    from symattn.certificates.tensor_maker import certificate_json

    rng = np.random.default_rng(2)
    Q, K, V = (rng.standard_normal((n, d)).astype(np.float32).astype(np.float64) for _ in range(3))
    reference_s(Q, K, V), reference_cpu(Q, K, V)  # warm: BLAS's start-up paid here, not in the figures
    tensors = build({"Q": Q, "K": K, "V": V}, 1, 1, 1, "bhnd", None, None)
    assert tensors is not None
    cert = folder / "large.json"
    start = time.perf_counter()
    with cert.open("w", encoding="utf-8") as out:
        for piece in certificate_json(tensors, digits, []):
            out.write(piece)
    made = time.perf_counter() - start
    runs, beside = [], []  # the best of three, as numpy's, each beside a run of numpy's (the VM's speed drifts)
    for _ in range(3):
        beside.append((reference_s(Q, K, V, 2), reference_cpu(Q, K, V, 2)))  # two: the second is warm again
        runs.append(verified(cert))
    ref, ref_cpu = min(x[0] for x in beside), min(x[1] for x in beside)
    checked, cpu, peak, said, code = runs[0]  # the first beside
    best, best_cpu = min(r[0] for r in runs), min(r[1] for r in runs)
    written = json.loads(cert.read_text(encoding="utf-8"))["certificate"]
    print(
        f"{n}×{n}×{d} float64 path, version {written['version']}, {digits} digits (made in process, {made:.1f} s, "
        f"{cert.stat().st_size / 1e6:.1f} MB; paths {written['paths']['output']}): verify-certificate {best:.1f} s "
        f"({best / ref:.1f}× numpy's {ref * 1e3:.0f} ms; its first run {checked:.1f} s), CPU {best_cpu:.2f} s "
        f"({best_cpu / ref_cpu:.1f}× numpy's {ref_cpu * 1e3:.0f} ms on one thread), peak {peak:.2f} GiB, exit "
        f"{', '.join(str(r[4]) for r in runs)}"
    )
    print(said)


def reference_cpu(Q, K, V, times: int = 3) -> float:
    """CPU seconds of the same attention with BLAS on one thread (the best of ``times``): a ratio of CPU
    times holds on a machine that other work keeps busy."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    best = float("inf")
    with threadpool_limits(limits=1):
        for _ in range(times):
            start = time.process_time()
            attention(np, Q, K, V)
            best = min(best, time.process_time() - start)
    return best


def verified(cert: Path) -> tuple[float, float, float, str, int]:
    """(wall seconds, CPU seconds with its forked workers', peak GiB, what it said, exit status) of
    verify-certificate as a whole process (bench/launched.py: its own figures, not this bench's size)."""
    from bench.launched import launched

    seconds, cpu, peak, code, out = launched(
        [*RUN, "verify-certificate", str(cert), "--max-seconds", "3600"], str(ROOT)
    )
    return seconds, cpu, peak, out.strip(), code


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
