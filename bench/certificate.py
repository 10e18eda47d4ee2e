"""A certificate at kernel sizes: compute --certify of one 256 × 64 head, its size, and verify-certificate's time
(issue 22: a 256 × 64 certificate verifies; it was refused past the 4 MiB limit of a spec).

    python bench/certificate.py             # 256 × 64, float16 inputs (about 25 s to make, 3 min to verify)
    python bench/certificate.py --n 64      # a smaller head, in seconds

Each step is a whole `symattn` process. The verifier is mpmath's interval arithmetic, independent of the
engine that made the certificate, so it is the slow step.
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


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=256, help="tokens (default 256)")
    parser.add_argument("--d", type=int, default=64, help="dimensions (default 64)")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    folder = Path(tempfile.mkdtemp())
    spec = folder / "spec.json"
    matrices = {m: rng.standard_normal((args.n, args.d)).astype(np.float16) for m in "QKV"}
    spec.write_text(json.dumps({m: [[str(Decimal(float(x))) for x in row] for row in a] for m, a in matrices.items()}))
    cert = folder / "cert.json"
    run = [sys.executable, "-m", "symattn"]
    start = time.perf_counter()
    subprocess.run([*run, "compute", str(spec), "--certify", "--no-exact", "-o", str(cert)], check=True, cwd=ROOT)
    made = time.perf_counter() - start
    start = time.perf_counter()
    said = subprocess.run(
        [*run, "verify-certificate", str(cert), "--max-seconds", "3600"], capture_output=True, text=True, cwd=ROOT
    )
    checked = time.perf_counter() - start
    print(
        f"{args.n}×{args.d}: compute --certify {made:.1f} s, {cert.stat().st_size / 1e6:.1f} MB; "
        f"verify-certificate {checked:.1f} s, exit {said.returncode}"
    )
    print(said.stdout.strip() or said.stderr.strip())


if __name__ == "__main__":
    main()
