"""A cheap first bound on a plain head's outputs: two products (BLAS, any order) and a bound per row.

For the text report of ``compare`` at kernel sizes (issue 30, "Speed"): most entries need only their
bucket, so a bound some thirty times wider than :mod:`.float64`'s still decides them, and the rows of the
entries it leaves open, or that a report may show, are computed again by :mod:`.float64` (:class:`Tight`,
heads.py). It costs what numpy's own attention costs: Q·Kᵀ, the exps, E·V, and no array of n × m bounds.
Only plain heads (:class:`.float64.Head`: float32-valued Q, K, V, a scale, a mask) take it.

Each bound holds by IEEE arithmetic alone (round to nearest, u = 2^-53, γ_n = n·u/(1 − n·u)), whatever
order BLAS sums in, fused multiply-adds included: a dot product of length n computed in any order is within
γ_n Σ|x_i y_i| of its value (Higham, *Accuracy and Stability*, §3.1). Every bound is formed in floats from
non-negative terms and multiplied by SAFETY (1 + 10^-4), far more than the few roundings of forming it.
For query row i (c the float scale, within ε_c·c of the exact one, z_ij = c·q_i·k_j exactly):

- **Norms.** q̄_i ≥ ‖q_i‖₂ and k̄ ≥ max_j ‖k_j‖₂: the floats' sums of squares are within γ_d of the true
  ones and the square root rounds once, both covered by SAFETY.
- **Scores.** S = fl(Q·Kᵀ): |S_ij − q_i·k_j| ≤ γ_d Σ_l |q_il k_jl| ≤ γ_d q̄_i k̄ =: σ_i (Cauchy–Schwarz);
  |q_i·k_j| ≤ q̄_i k̄ likewise, so |S_ij| ≤ q̄_i k̄ + σ_i =: s_i.
- **Scaled.** Z = fl(c·S): |Z_ij − z_ij| ≤ u|Z_ij| + c·σ_i + ε_c·c·s_i ≤ c·(u·s_i(1 + u) + σ_i + ε_c·s_i) =: η_i.
- **Shift.** T = fl(Z − M), M the row's largest Z (a float: the softmax is the same for any shift):
  |T_ij − (z_ij − M)| ≤ u|T_ij| + η_i ≤ 2u·c·s_i(1 + u) + η_i =: τ_i, since |Z|, |M| ≤ c·s_i(1 + u).
- **exp.** :func:`.float64.exp_bounded`, within RHO relative for T ≥ −700: each E_ij is within ε_i·E_ij of
  e^(z_ij − M), ε_i = (1 + 2RHO)(τ_i(1 + τ_i) + RHO) (as :func:`.float64.exps`, no bound for τ_i > 0.5);
  below −700 (only where 2c·s_i(1 + u) + τ_i may pass 700, checked then) E_ij = 0 and e^(z − M) < 2^-1000:
  τ_i is the row's, and where τ_i ≤ 0.5 the true z − M < −699.5 (ln 2^-1000 = −693.15); where τ_i > 0.5
  the whole row has no bound, so no key's bound rests on TINY beyond its τ (float64.exps's hole, not here).
- **Sums.** By chunks of CHUNK keys: ℓ = Σ_c fl(Σ_{j in c} E_ij) and N = Σ_c fl(E_c·V_c), one BLAS product a
  chunk, each chunk's sum within γ_CHUNK of its magnitudes and the chunks' sum γ_chunks more, so γ_g with
  g = CHUNK + chunks in all. ℓ is within γ_g ℓ (non-negative terms) and, with the exps' errors,
  e_ℓ = γ_g ℓ + ε ℓ + 2^-1000·m·[any below]. N is within γ_g Σ_j E_ij|v_jk|, and the exps add
  ε Σ_j E_ij|v_jk| + 2^-1000 Σ_j|v_jk|; Σ_j E_ij|v_jk| ≤ min(‖E_i‖₂‖v_k‖₂, ℓ_i·max_j|v_jk|) (Cauchy–Schwarz,
  and each E ≥ 0), with ‖E_i‖₂ from the floats' sum of squares as the norms above.
- **Quotient.** O = N/ℓ as :func:`.float64._block`: u|O| + e_N/ℓ + (|N| + e_N)·e_ℓ/(ℓ(ℓ − e_ℓ)).
"""

from __future__ import annotations

import numpy as np

from symattn.kernel.float64 import BLOCK, FLOOR, RHO, SAFETY, TINY, Head, U, exp_bounded, gamma

CHUNK = 256  # keys of one product E·V: each part within γ_256, their sum γ_chunks more
PIECE = 32768  # entries of one exp at a time: its Horner steps stay in the cache


def covers(head: Head) -> bool:
    """A plain head (no FP8 factor, no score modifier) whose every query row may attend to some key."""
    return type(head) is Head and (head.allowed is None or bool(head.allowed.any(axis=1).all()))


def _norms(x: np.ndarray) -> np.ndarray:
    """An upper bound on each row's Euclidean norm."""
    return np.sqrt(np.einsum("ij,ij->i", x, x)) * SAFETY


def intervals(head: Head, first: int = 0, last: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] around each exact output of a plain head (see covers), of its query rows [first, last)."""
    from symattn.kernel.float64 import interval

    n, m, dv = head.Q.shape[0] if last is None else last, head.K.shape[0], head.V.shape[1]
    q_bar, k_bar = _norms(head.Q[first:n]), float(np.max(_norms(head.K), initial=0.0))
    v_max, v_sum = np.max(np.abs(head.V), axis=0, initial=0.0), np.sum(np.abs(head.V), axis=0) * SAFETY
    v_norm = _norms(np.ascontiguousarray(head.V.T))
    lo, hi = np.empty((n - first, dv)), np.empty((n - first, dv))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # no bound: inf, as float64's
        for start in range(first, n, BLOCK):
            stop = min(start + BLOCK, n)
            bar = q_bar[start - first : stop - first, None]
            O, eO = _block(head, start, stop, bar, k_bar, (v_max, v_sum, v_norm), m)
            lo[start - first : stop - first], hi[start - first : stop - first] = interval(O, eO)
    return lo, hi


def _block(head: Head, start: int, stop: int, q_bar, k_bar: float, v: tuple, m: int):
    v_max, v_sum, v_norm = v
    c, d = head.scale, head.Q.shape[1]
    sigma = gamma(d) * q_bar * k_bar * SAFETY
    s = (q_bar * k_bar + sigma) * SAFETY
    eta = SAFETY * c * (U * s * (1 + U) + sigma + head.scale_error * s)
    reach = c * s * (1 + U) * SAFETY  # |Z| and |M| are at most this
    tau = SAFETY * (2 * U * reach + eta)
    Z = head.Q[start:stop] @ head.K.T
    Z *= c
    mask = None if head.allowed is None else head.allowed[start:stop]
    if mask is not None:
        Z[~mask] = -np.inf
    M = np.max(Z, axis=1, keepdims=True)
    Z -= M  # T, in place
    under = np.zeros(tau.shape, dtype=bool)
    deep = (2 * reach + tau >= -FLOOR).ravel()  # rows whose T may pass below −700
    if deep.any():
        below = Z[deep] < FLOOR
        if mask is not None:
            below &= mask[deep]
        under[deep] = below.any(axis=1, keepdims=True)
    flat = Z.reshape(-1)
    for at in range(0, flat.size, PIECE):  # in place, a piece at a time
        flat[at : at + PIECE] = exp_bounded(flat[at : at + PIECE])
    E = Z
    eps = SAFETY * (1 + 2 * RHO) * (tau * (1 + tau) + RHO)
    eps[tau > 0.5] = np.inf
    tiny = np.where(under, TINY, 0.0)
    width = min(m, CHUNK)  # keys per product: sums of chunk sums lose γ_{width + chunks}, not γ_m
    chunks = -(-m // width)
    g = gamma(width + chunks)
    ell = np.zeros((stop - start, 1))
    N = np.zeros((stop - start, head.V.shape[1]))
    for at in range(0, m, width):
        ell += np.sum(E[:, at : at + width], axis=1, keepdims=True)
        N += E[:, at : at + width] @ head.V[at : at + width]
    e_ell = SAFETY * ((g + eps) * ell + tiny * m)
    B = np.minimum(_norms(E)[:, None] * v_norm, ell * v_max) * SAFETY  # ≥ Σ_j E_ij |v_jk|
    eN = SAFETY * ((g + eps) * B + tiny * v_sum)
    O = N / ell
    room = np.where(ell > e_ell, ell * (ell - e_ell), 0.0)  # no room: no bound (inf)
    eO = SAFETY * (U * np.abs(O) + eN / ell + (np.abs(N) + eN) * e_ell / room)
    eO[~np.isfinite(eO)] = np.inf
    return O, eO


class Tight:
    """The rows of a comparison of plain heads side by side (columns ``offsets[h]:offsets[h + 1]`` head h's)
    whose ends are :mod:`.float64`'s bound, not this module's: ``rows`` computes them again, head by head,
    and writes them into ``lo`` and ``hi`` in place, so an exact value shows the digits it showed before."""

    def __init__(self, heads: list[Head], offsets: list[int], lo: np.ndarray, hi: np.ndarray):
        self.heads, self.offsets, self.lo, self.hi = heads, offsets, lo, hi
        self.done: set[tuple[int, int]] = set()  # (head, row)

    def rows(self, wanted: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Computes each head's rows that hold a ``wanted`` entry (booleans like lo) and are not done yet;
        returns them as (head, rows)."""
        out = []
        for h, head in enumerate(self.heads):
            cols = slice(self.offsets[h], self.offsets[h + 1])
            new = [i for i in np.flatnonzero(wanted[:, cols].any(axis=1)).tolist() if (h, i) not in self.done]
            if new:
                self.lo[new, cols], self.hi[new, cols] = tight(head, new)
                self.done.update((h, i) for i in new)
                out.append((h, np.array(new)))
        return out

    def row(self, i: int, j: int) -> None:
        """Computes the row of entry (i, j), if it is not done yet."""
        h = int(np.searchsorted(self.offsets, j, side="right")) - 1
        if (h, i) not in self.done:
            one = np.zeros(self.lo.shape, dtype=bool)
            one[i, j] = True
            self.rows(one)


def tight(head: Head, rows: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """:mod:`.float64`'s [lo, hi] of the outputs of the given query rows (a bound lost: none at all)."""
    from dataclasses import replace

    from symattn.kernel.float64 import blocks, interval

    allowed = None if head.allowed is None else head.allowed[rows]
    sub = replace(head, Q=head.Q[rows], allowed=allowed)
    lo, hi = np.empty((len(rows), head.V.shape[1])), np.empty((len(rows), head.V.shape[1]))
    for b in blocks(sub, weights=False):
        lo[b.start : b.stop], hi[b.start : b.stop] = interval(b.output, b.output_error)
    return np.where(np.isnan(lo), -np.inf, lo), np.where(np.isnan(hi), np.inf, hi)


__all__ = ["Tight", "covers", "intervals", "tight"]
