"""The lean baseline of issue "scale": exact attention with python-flint alone, no SymPy, no checks.

    python bench/lean_flint.py            # 64×64 at 50 digits, best of 5
    python bench/lean_flint.py --n 128 --d 64 --digits 30

Exact integer products (fmpz_mat) for QKᵀ, then arb balls for 1/√d_k, every exp, the row
sums, the weights and A·V, with the precision raised until every weight and output is
known to well past the requested digits (relative radius below 10^-(digits+3)). It
prints the values' count and the time; symattn's own engine is measured against it in
the same run by bench/run.py. Needs python-flint (pip install python-flint).
"""

from __future__ import annotations

import argparse
import random
import sys
import time


def lean(
    Q: list[list[int]], K: list[list[int]], V: list[list[int]], den: int, d_k: int, digits: int
) -> tuple[list[list[str]], list[list[str]]]:
    """Weights and output of attention, inputs = integers / den, to ``digits`` significant digits.

    The fastest honest pipeline we know: exact integer scores, each row shifted by its maximum (so every
    exp is of a number ≤ 0 and no ball grows with the scores), list comprehensions rather than
    per-entry matrix writes, and one arb_mat product for A·V.
    """
    from flint import arb, arb_mat, ctx, fmpz_mat

    S = (fmpz_mat(Q) * fmpz_mat(K).transpose()).tolist()  # exact: den² · scores
    Vd = None
    prec = int(digits * 3.33) + 32
    while True:
        ctx.prec = prec
        c = 1 / (arb(den * den) * arb(d_k).sqrt())
        rows = []
        for srow in S:
            top = max(srow)
            e = [(c * int(s - top)).exp() for s in srow]
            total = sum(e[1:], e[0])
            rows.append([x / total for x in e])
        A = arb_mat(rows)
        Vd = arb_mat(V) / den
        O = A * Vd
        bound = arb(10) ** (-(digits + 3))
        if all(x.rad() <= bound * abs(x.mid()) for M in (A, O) for x in M.entries() if x.mid() != 0):
            break
        prec *= 2

    def strings(M):
        return [[M[i, j].str(digits, radius=False) for j in range(M.ncols())] for i in range(M.nrows())]

    return strings(A), strings(O)


def random_inputs(n: int, d: int, seed: int = 0) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    rng = random.Random(seed)  # the same draws as bench/run.py: integers in [-100, 100], / 100

    def matrix(rows: int, cols: int) -> list[list[int]]:
        return [[rng.randint(-100, 100) for _ in range(cols)] for _ in range(rows)]

    return matrix(n, d), matrix(n, d), matrix(n, d)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--digits", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    Q, K, V = random_inputs(args.n, args.d)
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        weights, output = lean(Q, K, V, 100, args.d, args.digits)
        best = min(best, time.perf_counter() - start)
    print(
        f"lean flint+arb: {args.n}x{args.d} at {args.digits} digits: {best * 1000:.1f} ms "
        f"(best of {args.repeat}); output[0][0] = {output[0][0]}",
        file=sys.stdout,
    )


if __name__ == "__main__":
    main()
