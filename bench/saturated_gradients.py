"""Saturated gradients (issue 30): dQ, dK, dV checks with inputs scaled ×s (one key takes nearly all of each row's
weight) against the same check unscaled, as ratios. Usage: python bench/saturated_gradients.py B,H,N,D SCALE."""

from __future__ import annotations

import sys
import time

import torch

from symattn.testing import assert_attention_close


def _timed(shape: tuple[int, ...], scale: float, kind: str) -> float:
    torch.manual_seed(0)
    q, k = ((torch.randn(shape) * scale).float() for _ in range(2))
    v, dout = torch.randn(shape).float(), torch.randn(shape).float()
    leaves = [t.clone().double().requires_grad_() for t in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*leaves).backward(dout.double())
    got = dict(zip(("dq", "dk", "dv"), (t.grad.float() for t in leaves)))
    start = time.perf_counter()
    assert_attention_close(got[kind], q, k, v, kind=kind, dout=dout)
    return time.perf_counter() - start


def main() -> None:
    shape = tuple(int(x) for x in sys.argv[1].split(","))
    scale = float(sys.argv[2])
    for kind in ("dq", "dk", "dv"):
        base, saturated = _timed(shape, 1.0, kind), _timed(shape, scale, kind)
        print(f"{kind} {shape} ×{scale:g}: {saturated:.2f} s, unscaled {base:.2f} s, ratio {saturated / base:.1f}")


if __name__ == "__main__":
    main()
