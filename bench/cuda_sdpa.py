"""torch's CUDA SDPA kernels (flash, memory-efficient) in bfloat16 against the exact values.

    python bench/cuda_sdpa.py            # 2 heads × 256 queries × 64 dimensions
    python bench/cuda_sdpa.py --n 1024

Skips (one line, exit 0) where torch or a CUDA GPU is missing. The inputs are made once in bfloat16, as
the kernels get them; the spec holds those exact values (each bfloat16 value's exact decimal expansion),
and symattn's compare measures each kernel's output in bfloat16 ULPs (the float64 path with bounds).
"""

from __future__ import annotations

import argparse
import sys
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the same steps on torch's CPU kernels")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("cuda_sdpa: skipped: torch is not installed")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("cuda_sdpa: skipped: no CUDA GPU (torch.cuda.is_available() is False)")
        return 0
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from symattn.input.floats import FloatResult
    from symattn.input.spec import load_spec
    from symattn.kernel.spec_comparison import compare

    torch.manual_seed(0)
    h, n, d = args.heads, args.n, args.d
    Q, K, V = (torch.randn(1, h, n, d, device=args.device).to(torch.bfloat16) for _ in range(3))

    def columns(M):  # (1, h, n, d) → n rows of h·d: the spec's heads side by side
        return M[0].transpose(0, 1).reshape(n, h * d).float().cpu().tolist()

    spec = load_spec(
        {
            "heads": h,
            **{name: [[str(Decimal(x)) for x in row] for row in columns(M)] for name, M in zip("QKV", (Q, K, V))},
        }
    )
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("mem-efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                out = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
        except RuntimeError as exc:  # a backend this GPU or build lacks
            print(f"cuda_sdpa: {name}: not available here ({str(exc).splitlines()[0]})")
            continue
        rows = tuple(tuple(Fraction(x) for x in row) for row in columns(out))
        start = time.perf_counter()
        c = compare(spec, FloatResult(name, "bfloat16", rows, ()))
        seconds = time.perf_counter() - start
        worst = c.worst
        print(
            f"cuda_sdpa: {name} bfloat16, {h}×{n}×{d}: {c.correctly_rounded} of {len(c.entries)} correctly rounded, "
            f"max {worst.ulps if worst else '—'} ULP, max relative "
            f"{c.worst_relative.relative if c.worst_relative else '—'}; refined by arb {c.refined}; "
            f"compare took {seconds:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
