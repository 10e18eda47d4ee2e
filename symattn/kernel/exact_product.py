"""A matrix product A·B of floats with a rigorous bound a few units of the last place wide: BLAS products whose
main part is error-free (the idea of Ozaki's scheme, in its two-slice form).

Each row of A and each column of B is split by :class:`.float64.Split` (Rump, Ogita and Oishi's
ExtractScalar) with s = :func:`.float64.exact_s` (m), m the inner dimension: A = H + L with H_ij a multiple of
2^(e_i+s−53), |H_ij| ≤ 2^e_i and |L_ij| ≤ 2^(e_i+s−53), where |A_ij| < 2^e_i in row i; B = H' + L' likewise
with 2^f_k of column k. Then

- **H·H' is exact, in any order.** Its products are multiples of 2^(e_i+f_k+2s−106) of at most
  2^(e_i+f_k), so every partial sum of m of them holds at most m·2^(106−2s) ≤ 2^53 units (2s ≥ 53 + log2 m):
  a float, whatever order BLAS sums in, fused multiply-adds included (each is then an exact value rounded to
  itself). This needs the unit itself representable, 2^(e_i+f_k+2s−106) ≥ 2^-1074, and σ = 2^(e+s) a float:
  :func:`product` returns None where a row and a column could fall below it, or an entry past 2^(1022−s).
- **The rest R = H·L' + L·B** goes through two BLAS products in floats. A dot product of length m is
  within γ_m Σ|x_j y_j| of its value, products rounded or not, in any order (γ_m = m·u/(1 − m·u)), plus
  2^-1075 for each product that falls below 2^-1022 (gradual underflow: absolute, not relative), at most
  m·2^-1075 a dot product. A priori |L'_jk| ≤ 2^(f_k+s−53) and |L_ij| ≤ 2^(e_i+s−53), so the two
  products are within γ_m (2^(f_k+s−53) Σ_j|H_ij| + 2^(e_i+s−53) Σ_j|B_jk|) + 2m·2^-1074 of H·L' + L·B. Σ_j|H_ij|
  is exact (m multiples of 2^(e_i+s−53) of at most 2^e_i, m ≤ 2^s); Σ_j|B_jk| is a float sum of m
  non-negative terms, below its value by at most γ_m of it.
- **Two additions**, R̂ = fl(R₁ + R₂) and P = fl(H·H' + R̂), each within u of its result (a subnormal
  sum is exact).

So |P − A·B| ≤ u|P| + u|R̂| + γ_m (2^(f_k+s−53) Σ_j|H_ij| + 2^(e_i+s−53) Σ_j|B_jk|) + 2m·2^-1074,
entry by entry. The bound is formed in floats from non-negative terms and multiplied by SAFETY (1 + 10^-4),
far more than the few roundings of forming it (:mod:`.float64`'s rule). At m = 4096 (s = 33) the rest is
within about 2^-20·γ_m ≈ u/256 of |A|·|B|'s scale: what is left is the products' last rounding, u|P|.
Three BLAS products and a few passes over A and B: about three times a plain float64 product.
No floor: an entry of A is taken as it is (an exp's own bound is its caller's, float64.exps).
"""

from __future__ import annotations

import numpy as np

from symattn.kernel.float64 import SAFETY, Split, U, exact_s, gamma

LEAST = 2.0**-1074  # the least subnormal


class Columns:
    """B's columns split once (ExtractScalar, as above) and Σ_j|B_jk| rounded up, for products of several A
    with the same B (the blocks of a head's rows times its V)."""

    def __init__(self, B: np.ndarray):
        m = B.shape[0]
        self.B, self.s = B, exact_s(m)
        self.split = Split.of(np.ascontiguousarray(B.T), self.s)
        self.sums = np.sum(np.abs(B), axis=0, keepdims=True) * (1 + 2 * gamma(m))  # rounded up past its value
        self.top = float(np.max(np.abs(B))) if B.size else 0.0


def product(
    A: np.ndarray, B: np.ndarray, columns: Columns | None = None, nonnegative: bool = False
) -> tuple[np.ndarray, np.ndarray] | None:
    """(P, error): P = fl(A·B) as above and a bound on |P − A·B| for each entry, for finite float A (n×m) and
    B (m×k); None where the exact part's unit would fall below the subnormals (rows and columns far below
    2^-400 together). ``columns``: Columns(B), where the caller has it already; ``nonnegative``: every
    entry of A is ≥ 0 (exps), so |A| = A and |H| = H (x ≥ 0 gives fl(x + σ) ≥ σ)."""
    m = A.shape[1]
    made = Columns(B) if columns is None else columns
    s = made.s
    largest = np.max(A if nonnegative else np.abs(A), axis=1, keepdims=True, initial=0.0)
    if A.size and B.size and max(float(np.max(largest)), made.top) >= 2.0 ** (1022 - s):
        return None  # σ = 2^(e+s) past the floats
    rows, cols = Split.of(A, s, largest), made.split
    if A.size and B.size and float(rows.top.min()) * float(cols.top.min()) * 2.0 ** (2 * s - 106) < LEAST:
        return None  # the exact part's unit below the subnormals
    exact = rows.high @ cols.high.T
    rest = rows.high @ cols.low.T
    rest += rows.low @ B
    P = exact + rest
    f = 2.0 ** (s - 53)
    high_sums = np.sum(rows.high if nonnegative else np.abs(rows.high), axis=1, keepdims=True)  # exact: see above
    small = gamma(m) * f * (high_sums * cols.top.T + rows.top * made.sums) + 2 * m * LEAST
    return P, SAFETY * (U * np.abs(P) + U * np.abs(rest) + small)


__all__ = ["Columns", "product"]
