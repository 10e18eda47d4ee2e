"""Chosen outputs of a plain head to within about 3u of their own size: scores, exps and sums in two floats.

The float64 path's bound (:mod:`.float64`, :mod:`.compensated`) is dominated by its exps: each e^t is within
about 4u of the true one, so an output O = Σ e_j v_j / Σ e_j is off by up to 4u · Σ e_j |v_j| / ℓ, which is
many times |O| where the terms cancel. Here every number is carried as an unevaluated sum of two floats
(hi + lo), so that each exp is within about 2^-70 of its value and each sum within about 2^-80 of its
magnitudes; what is left is the final quotient's three roundings, 3u|O|. Every step's error is bounded from
IEEE arithmetic alone (round to nearest, u = 2^-53); every bound is formed in floats from non-negative terms
and multiplied by SAFETY (1 + 10^-4), far more than the roundings of forming it.

- **Scores.** With Split (:class:`.float64.Split`), S = high·highᵀ + rest where the first product is exact;
  rest is off by at most u|rest| + γ_d·d·2^(e+e'+s−52) (float64._scores). TwoSum makes S_hi + S_lo of the
  two floats exactly, so each score's error is that of rest alone, about 2^-80 of |q||k|.
- **The scaled difference.** T_j = c·(S_j − S_r), r the row's key of the largest S_hi (softmax is the
  same for any shift, and the exact S_r shifts numerator and denominator alike). c is a pair of floats
  within ε_c·c of the scale (exact rationals when the table loads). The difference's high parts by TwoSum
  (exact), the product c_hi·a by Dekker's TwoProduct (exact: no underflow for 2^-100 ≤ c ≤ 2^100 and
  float32 inputs), the small terms in floats, each off by u of itself: η_j, the absolute error of T_j, is
  the sum of those roundings, c·(the scores' errors) and ε_c·c·|S_j − S_r|.
- **exp.** e^T = 2^(k div N) · 2^((k mod N)/N) · e^r, N = 256, k = rint(T_hi·N/ln 2), r = T − k·ln 2/N
  with ln 2/N = L1 + L2 + L3 (L1 of 35 bits: k·L1 exact for |k| < 2^18; TwoSum for T_hi − k·L1; L3 below
  2^-100 of ln 2/N). |r| ≤ ln 2/(2N) + 2^-40 < 0.00136. e^r = 1 + r + r²·P(r) with P the Taylor polynomial
  of degree 4 (truncation r^7/7! < 2^-79), Horner's rounding bounded in rationals (float64.horner_error).
  2^(j/N) comes from a table of pairs of floats (arb at 300 bits when the module loads, within 2^-104).
  The products of pairs: TwoProduct of the high parts, the cross terms in floats. Each exp's relative error
  ρ_j is the argument's error (e^η − 1 ≤ 1.0001η) plus the evaluation's; below T = −480 the value is 0,
  off by at most 2^-692 (so every product below stays far above the subnormals). Only a row's largest ρ_j
  is used (ρ_max below), so it is bounded as a whole: each of its terms (and of η's) by that term's largest
  in the row, a sum of maxima being at least the maximum of the sums; a third fewer passes over the keys.
- **Sums.** ℓ = Σ e_j and N_k = Σ e_j v_jk over terms that are exact: e_hi split by Veltkamp into 26 and
  27 bits, each times a float32 v (at most 51 bits, and a multiple of 2^-893: exact), e_lo·v rounded (u of
  it). The terms are added by a tree of TwoSums (each exact: s + q = a + b), the errors q summed apart in
  floats. A node's |q| ≤ u|s| and a level's |s| add to at most (1 + u)^H Σ|p| (H levels), so Σ|q| ≤
  H·u·(1 + u)^H·Σ|p| and the pair (s, σ = fl(Σq)) is within γ_n·H·u·(1 + u)^H·Σ|p| of Σp: about 2^-80 Σ|p|.
  Σ ê_j|v_j| ≤ (1 + 2u)Σ|p|, so the exps' errors add ρ_max·(1 + 2u)·Σ|p|.
- **Quotient.** O = fl(fl(N_s + N_σ) / fl(ℓ_s + ℓ_σ)): three roundings, then the sums' errors through the
  division as :mod:`.compensated` carries them.
- **Two-float quotient** (:func:`quotients`, for compare's entries the float64 bounds leave open, whose
  exact value it shows to 17 digits). Ñ = N_s + N_σ and ℓ̃ = L + L₂ (L = fl(ℓ_s + ℓ_σ), L₂ its TwoSum
  error) are exact sums of floats with |N − Ñ| ≤ e_N and |ℓ − ℓ̃| ≤ e_ℓ (the bounds above before the
  roundings of N and L). q₁ = fl(N/L); p + p' = q₁·L by TwoProduct (exact: checked |p| ≥ 2^-900);
  r = Ñ − q₁ℓ̃ = ((N_s − p) − p') + (N_σ − q₁L₂) is formed in five operations, each off by at most u of
  its result (subnormal sums are exact; the product adds 2^-1075): r̂ within e_r of r; q₂ = fl(r̂/L).
  Then Ñ/ℓ̃ = q₁ + r/ℓ̃ exactly, |r/ℓ̃ − r/L| = |r||L₂|/(ℓ̃L) ≤ u|r|/ℓ̃ (|L₂| ≤ uL, ℓ̃ ≥ L(1 − u)), so
  |Ñ/ℓ̃ − q₁ − q₂| ≤ u(|r̂| + e_r)(1 + 4u)/L + e_r/L + u|q₂| + 2^-1074; and
  |N/ℓ − Ñ/ℓ̃| ≤ e_N/ℓ + |Ñ|e_ℓ/(ℓℓ̃) with ℓ ≥ fl(L(1 − 2u)) − e_ℓ (no bound unless that passes L/2,
  where its own rounding is u of it). No 3u|O| is left: what remains is the exps' and scores' errors.
  Here the low parts are split again, with the same s (:func:`.float64.exact_s`): with q = h + l, l = h₂ + l₂
  and k likewise, S = h·h' + (h·h₂' + h₂·h') + (h·l₂' + l₂·h' + l·l'), the first two sums of products exact
  (the grid argument of :class:`.float64.Split`), so the rest loses u of its four additions and γ_d of
  each of the last three sums' magnitudes (each product exact: parts of float32 values have at most 24
  bits), bounded a priori by |h| ≤ 2^e, |l| ≤ 2^(e+s−53): d·f·(2^e·2^e₂' + 2^e₂·2^e' + f·2^e·2^e') with
  f = 2^(s−53), about 2^-24 of what :func:`outputs` leaves.
- **Subnormal outputs** (after cancellation: tests/test_kernel_doubled_subnormal.py, against 50-digit mpmath).
  No rounding above is taken as u of its result where that result may be subnormal. q₁·L = p + p' is exact
  only while p' does not underflow: where |p| < 2^-900 and q₁ ≠ 0 no bound is given (a subnormal or tiny q₁
  goes to arb). Where q₁ = 0 (N/L underflowed, or N cancelled to 0) p = p' = c = 0 exactly and r is
  fl(N_s + N_σ). Of r's five operations a sum of floats whose result is subnormal is exact, and q₁·L₂ is
  off by at most 2^-1075: e_r's 5·2^-1074. q₂ = fl(r̂/L) subnormal or 0 is off by at most 2^-1075: the
  bound's 2^-1074. In :func:`outputs` a subnormal O = fl(N/L) is off by at most 2^-1075 too, within
  SAFETY·eN/L's m·2^-1074/L where L ≤ 2m: each T_j ≤ ln 2, as |S_j − S_r| beyond S_hi's order is at most
  ulp(S), so wherever c·|S| < 2^51.
  An exact output in the subnormal range by way of exps below the floor (e^-700·v) gets O = 0 within
  TINY·Σ|v|: true, and left to arb.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction
from functools import cache

import numpy as np

from symattn.kernel.compensated import _split, _two_sum  # Knuth's TwoSum, Veltkamp's split (26 + 27 bits)
from symattn.kernel.cores import map_threads
from symattn.kernel.float64 import SAFETY, Head, Split, U, extras, gamma, horner_error, is_float32

_N = 256  # table entries 2^(j/N)
# e^-480 < 2^-692 (ln 2^-692 = −479.65): below it a term is 0, off by at most TINY, for its true T within η
# of t1 + t_lo: where η > 10^-4 the term's ρ is inf (``big``: η enters e_arg), so the row has no bound
_FLOOR = -480.0
TINY = 2.0**-692
_REACH = Fraction(136, 100000)  # |r| ≤ ln 2 / 512 + 2^-40 < 0.00136
_TAIL = [1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720]  # P(r) = Σ r^i / (i + 2)!, i ≤ 4: fl of each
_ENTRIES = 2**17  # rows × keys of a piece: its temporaries stay in the cache (128 × 4096 took 1.6× as long)
_LEAST = 16  # rows of a piece at least: each piece's products read all of K (4 rows of 32768 keys: 1.6× as long)
_PAIRS = 64  # (row, column) pairs summed at once: 3 · keys terms each
_SCALE_RANGE = (2.0**-100, 2.0**100)
PARALLEL_EXPS = 1 << 18  # rows × keys below which one thread is as quick as two
# flint's precision is the process's, not a thread's: two pieces on threads making the constants at once
# set and restored it under each other, and the table came out of 53-bit balls (sound, its ρ 10^6 times wider)
_PRECISION = threading.Lock()


@cache
def _constants() -> dict:
    """The table 2^(j/N) as pairs of floats, ln 2 / N in three parts and the exp's constant error, from arb
    balls at 300 bits (each ball's radius counted)."""
    from flint import arb, ctx

    with _PRECISION:  # flint's precision is the process's: one thread at a time sets it
        saved, ctx.prec = ctx.prec, 300
        try:

            def exact(x) -> tuple[Fraction, Fraction]:
                man, exp = x.mid().man_exp()
                rman, rexp = x.rad().man_exp()
                return Fraction(int(man)) * Fraction(2) ** int(exp), Fraction(int(rman)) * Fraction(2) ** int(rexp)

            hi, lo, worst = [], [], Fraction(0)
            for j in range(_N):
                mid, rad = exact(arb(2) ** (arb(j) / _N))
                h = float(mid)
                low = float(mid - Fraction(h))
                hi.append(h)
                lo.append(low)
                worst = max(worst, abs(mid - Fraction(h) - Fraction(low)) + rad)  # 2^(j/N) ≥ 1: relative too
            mid, rad = exact(arb(2).log() / _N)
            m, e = math.frexp(float(mid))
            l1 = math.ldexp(math.floor(m * 2**35) / 2**35, e)  # 35 bits: k·L1 exact for |k| < 2^18
            l2 = float(mid - Fraction(l1))
            l3 = abs(mid - Fraction(l1) - Fraction(l2)) + rad
        finally:
            ctx.prec = saved
    u = Fraction(U)
    r = _REACH
    coeffs = sum(
        (abs(Fraction(c) - Fraction(1, math.factorial(i + 2))) * r**i for i, c in enumerate(_TAIL)), Fraction(0)
    )
    horner = horner_error(_TAIL, r)
    # r²·P̂(r): Horner's error and the coefficients' times r², the truncation Σ_{i≥7} r^i/i! ≤ 1.001·r^7/7!,
    # the two roundings of fl(fl(r·r)·P̂) (P̂ < 0.51), then 1 + r + that as a pair (one rounding of the
    # low part, below u·(u + r²·0.51 + 2^-60)), all relative to e^r ≥ e^-0.00136 > 0.9986
    poly = r * r * (horner + coeffs) + Fraction(1001, 1000) * r**7 / 5040 + 3 * u * r * r * Fraction(51, 100)
    poly += u * (u + r * r + Fraction(1, 2**60))
    evaluation = poly / Fraction(9986, 10000)
    # the pairs' product 2^(j/N)·e^r: TwoProduct exact, the cross terms' three roundings and the dropped
    # lo·lo (each below 2^-100 of the product), the table's own error
    product = 4 * u * u * Fraction(1001, 1000) + worst
    rho = (1 + evaluation) * (1 + product) - 1
    return {
        "hi": np.array(hi),
        "lo": np.array(lo),
        "inv": float(1 / mid),  # N / ln 2, rounded: k is any integer near; r is then reduced exactly
        "l1": l1,
        "l2": l2,
        "l3": math.nextafter(float(l3), math.inf),
        "rho": math.nextafter(float(rho), math.inf),
    }


def prepare() -> None:
    """The exp's table made now, in this process (before a fork: its workers have it, and flint, already)."""
    _constants()


@cache
def _scale_pair(d: int, exact_scale: Fraction | None) -> tuple[float, float, float]:
    """(c_hi, c_lo, bound on |c − c_hi − c_lo|): the scale (None: 1/√d) as a pair of floats."""
    if exact_scale is None:  # c = 1/√d in [x, x + 2^-200], x = ⌊2^200/√d⌋ / 2^200
        x = Fraction(math.isqrt((1 << 400) // d), 1 << 200)
        slack = Fraction(1, 1 << 199)
    else:
        x, slack = exact_scale, Fraction(0)
    hi = float(x)
    lo = float(x - Fraction(hi))
    return hi, lo, math.nextafter(float(abs(x - Fraction(hi) - Fraction(lo)) + slack), math.inf)


def covers(head: Head) -> bool:
    """A plain head (no factor, no score modifiers) whose scale lies where the products stay exact."""
    if extras(head) != (None, ()):
        return False
    c = _scale_pair(head.Q.shape[1], head.exact_scale)[0]
    return _SCALE_RANGE[0] <= c <= _SCALE_RANGE[1]


def takes(head: Head) -> bool:
    """Whether :func:`quotients` takes the head's outputs: one :func:`covers` with V of float32 values (e·v exact)."""
    return covers(head) and is_float32(head.V)


def _two_product(a: np.ndarray | float, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = a * b
    ah, al = _split(np.asarray(a, dtype=np.float64))
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl  # Dekker: p + err = a·b exactly


def _arguments(
    head: Head, rows: np.ndarray, split: Split, again: Split | None = None, scores: tuple | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(T_hi, T_lo, η, kept): T = c·(S_j − S_r) of the rows as pairs; η two columns bounding the error of
    each key in its row, the first over the keys whose exps are made (kept, T ≥ the floor), the second over
    every kept key (each of η's terms by its largest in the row: a sum of maxima is at least the maximum of
    the sums, and only the row's largest ρ is used); kept the allowed keys (None: all); with ``again``
    (:func:`_keys_again`) the scores' rest as :func:`_rest` bounds it; ``scores``: :func:`outputs`'."""
    d = head.Q.shape[1]
    if scores is not None:  # float64's products of these rows (outputs, not quotients): the same sums, made once
        at = rows - scores[3]
        exact, rest, top = scores[0][at], scores[1][at], scores[2][at]
    else:
        q = Split.of(head.Q[rows], split.s)
        exact, top = q.high @ split.high.T, q.top  # exact (float64.Split)
        if again is not None:
            rest, eS = _rest(q, split, again, d)
        else:
            rest = q.high @ split.low.T + q.low @ split.whole.T
    S_hi, S_lo = _two_sum(exact, rest)
    kept = None if head.allowed is None else head.allowed[rows]
    ref = np.argmax(S_hi if kept is None else np.where(kept, S_hi, -np.inf), axis=1)
    at = np.arange(len(ref))
    a_s, a_e = _two_sum(S_hi, -S_hi[at, ref][:, None])
    b = S_lo - S_lo[at, ref][:, None]
    r1 = a_e + b
    c_hi, c_lo, e_c = _scale_pair(d, head.exact_scale)
    t1, t2 = _two_product(c_hi, a_s)
    t3 = c_hi * r1
    t4 = c_lo * a_s
    t5 = t2 + t3
    T_lo = t5 + t4
    f = gamma(d) * d * 2.0 ** (split.s - 52) * SAFETY  # |low| ≤ 2^(e+s−53): eS = SAFETY·(u|rest| + f·2^e·2^e')
    eS_ref = (
        eS[at, ref] if again is not None else SAFETY * (U * np.abs(rest[at, ref]) + f * top[:, 0] * split.top[ref, 0])
    )

    def most(keys: np.ndarray | None) -> np.ndarray:  # η's terms, each its largest over these keys
        R1 = _most(np.abs(r1), keys)
        if again is not None:
            eS_most = _most(eS, keys)
        else:  # the largest 2^e' of all keys: at least that of these
            eS_most = SAFETY * (U * _most(np.abs(rest), keys) + f * top * float(np.max(split.top, initial=0.0)))
        return SAFETY * (
            U * (_most(np.abs(b), keys) + R1) * c_hi  # b's and r1's roundings, times c
            + U * sum(_most(np.abs(x), keys) for x in (t3, t4, t5, T_lo))  # the four products' and sums' roundings
            + abs(c_lo) * R1 * 2  # c_lo·r1, dropped
            + e_c * (_most(np.abs(a_s), keys) + R1) * 2  # the scale's own error, of c·(|a_s| + |r1|)
            + (c_hi + abs(c_lo)) * 2 * (eS_most + eS_ref[:, None])  # the scores' errors
        )

    above = t1 >= _FLOOR  # the keys whose exps are made; those below are 0, within TINY while η ≤ 10^-4
    live = above if kept is None else kept & above
    eta = most(None if bool(live.all()) else live)
    every = eta if bool(above.all()) else most(kept)
    return t1, T_lo, np.concatenate([eta, every], axis=1), kept


def _most(x: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
    """Each row's largest entry of x (x ≥ 0) among its kept keys (0 where none), as a column."""
    return np.max(x if kept is None else np.where(kept, x, 0.0), axis=1, keepdims=True, initial=0.0)


def _keys_again(k: Split) -> Split:
    """K's low parts split again, made once a call for :func:`_rest`."""
    return Split.of(k.low, k.s)


def _rest(q: Split, k: Split, kl: Split, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(rest, bound): S − q.high·k.highᵀ as one float and a bound on its error, the low parts split again
    (the module's docstring, *Two-float quotient*); ``kl``: :func:`_keys_again` of k."""
    ql = Split.of(q.low, k.s)
    both = q.high @ kl.high.T + ql.high @ k.high.T  # two exact sums (float64.exact_s), one rounding
    small = q.high @ kl.low.T  # three sums of d exact products: γ_d of their magnitudes, two additions
    p12 = small + ql.low @ k.high.T
    small = p12 + q.low @ k.low.T
    rest = both + small
    f = 2.0 ** (k.s - 53)  # |low| ≤ f·2^e of its row (float64.Split)
    sums = d * f * (q.top @ kl.top.T + ql.top @ k.top.T + f * (q.top @ k.top.T))
    rounded = np.abs(both) + np.abs(p12) + np.abs(small) + np.abs(rest)
    return rest, SAFETY * (U * rounded + gamma(d) * sums)


def _exps(t1: np.ndarray, t_lo: np.ndarray, eta: np.ndarray, kept: np.ndarray | None):
    """(E_hi, E_lo, ρ, under): e^T as pairs, each kept key's within ρ·(E_hi + E_lo) of e^T, ρ a column (the
    row's: each term's largest; the factor 1/(1 − ρ) folded into SAFETY; inf where an argument's error
    passes 10^-4); ``eta``: :func:`_arguments`' columns; ``under``: the kept terms below the floor (0, off by ≤
    TINY). A key not kept or under is computed as T = 0 and set to 0: its terms add nothing to the maxima."""
    k_ = _constants()
    low = t1 < _FLOOR
    under = low if kept is None else kept & low
    live = ~low if kept is None else kept & ~low
    every = bool(live.all())
    t = t1 if every else np.where(live, t1, 0.0)
    tl = t_lo if every else np.where(live, t_lo, 0.0)
    k = np.rint(t * k_["inv"])
    x1 = k * k_["l1"]  # exact: |k| < 2^18, L1 of 35 bits
    r_s, r_e = _two_sum(t, -x1)
    kl2 = k * k_["l2"]
    u1 = r_e + tl
    r_lo = u1 - kl2
    # r = T − k·ln 2/N: r_s + r_lo, off by the roundings of kl2, u1, r_lo, k·L3 and T's own η
    e_arg = SAFETY * (
        U * (_most(np.abs(kl2), None) + _most(np.abs(u1), None) + _most(np.abs(r_lo), None))
        + _most(np.abs(k), None) * k_["l3"]
        + eta[:, :1]
    )
    r_hi, r_lo = _two_sum(r_s, r_lo)  # exact; now |r_lo| ≤ u|r_hi| (k·L2 alone reaches 2^-25)
    if r_hi.size and float(np.max(np.abs(r_hi))) > float(_REACH) - 2.0**-40:  # 0 where not live
        raise ArithmeticError("doubled: argument reduction left |r| past its reach")
    p = np.full_like(r_hi, _TAIL[-1])
    for c in reversed(_TAIL[:-1]):
        p *= r_hi
        p += c
    p *= r_hi * r_hi
    h, small = _two_sum(np.ones_like(r_hi), r_hi)  # exact
    # e^(r_hi + r_lo) = e^(r_hi) + r_lo + (e^(r_hi) − 1)·r_lo + …: the last terms below 0.0015·|r_lo|
    small += p + r_lo
    j = (k.astype(np.int64)) % _N
    th, tl_ = k_["hi"][j], k_["lo"][j]
    p1, p2 = _two_product(th, h)
    a1, a2 = th * small, tl_ * h
    p3 = p2 + (a1 + a2)
    # the product's roundings (th·low, tl·h, their sum, p3) and the dropped tl·low, relative to p1 ≥ 0.998
    product = (
        U * (2 * (_most(np.abs(a1), None) + _most(np.abs(a2), None)) + _most(np.abs(p3), None))
        + _most(np.abs(tl_ * small), None) * 1.01
    ) * 1.003
    scale = ((k.astype(np.int64) - j) // _N).astype(np.int32)
    E_hi, E_lo = np.ldexp(p1, scale), np.ldexp(p3, scale)  # below 2^-1022 E_lo rounds: 2^-380 of E at most
    if not every:
        E_hi[~live], E_lo[~live] = 0.0, 0.0
    rho = SAFETY * (
        k_["rho"]
        + e_arg * 1.0001
        + _most(np.abs(r_lo), None) * 0.0015
        + U * _most(np.abs(small), None) * 1.002
        + product
    )
    # no bound where an argument's error passes 10^-4: e^η − 1 ≤ 1.0001η no longer holds, and a key below
    # the floor is within TINY only for its true T below it too (its e_arg is SAFETY·η: t is 0 here)
    return E_hi, E_lo, np.where((e_arg > 1e-4) | (SAFETY * eta[:, 1:] > 1e-4), np.inf, rho), under


def _tree_sums(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s, σ, bound) of each row of terms: s + σ within bound of the row's exact sum (the module's docstring)."""
    n = X.shape[1]
    magnitude = np.abs(X).sum(axis=1)
    levels = 0
    sigma = np.zeros(X.shape[0])
    while X.shape[1] > 1:
        if X.shape[1] % 2:
            X = np.concatenate([X, np.zeros((X.shape[0], 1))], axis=1)
        half = X.shape[1] // 2
        X, q = _two_sum(X[:, :half], X[:, half:])
        sigma += q.sum(axis=1)
        levels += 1
    g = gamma(2 * n + levels)
    bound = SAFETY * (g * levels * U * (1 + U) ** levels) * (1 + 2 * g) * magnitude
    return X[:, 0], sigma, bound


def outputs(
    head: Head, pairs: list[tuple[int, int]], split: Split | None = None, scores: tuple | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Values and error bounds of the outputs O[i, k] for the (query row, column) pairs asked for, in that
    order (inf where no bound holds). The head must be one :func:`covers`. ``scores``: a float64 block's
    (float64.Block.scores: its products with ``split`` and its first row), which holds every row asked."""
    value, error, _, _ = _all(head, pairs, split, False, scores)
    return value, error


def quotients(head: Head, pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q1, q2, bound): the outputs as :func:`outputs` asks, each exact O[i, k] within bound of q1 + q2, the
    quotient carried to a second float (the module's docstring, *Two-float quotient*): no 3u|O| left."""
    q1, _, q2, error = _all(head, pairs, Split.of(head.K), True)
    return q1, q2, error


def _all(
    head: Head, pairs: list[tuple[int, int]], split: Split | None, tight: bool, scores: tuple | None = None
) -> tuple[np.ndarray, ...]:
    split = Split.of(head.K) if split is None else split
    value, error = np.full(len(pairs), np.nan), np.full(len(pairs), np.inf)
    low, bound = np.zeros(len(pairs)), np.full(len(pairs), np.inf)
    by_row: dict[int, list[int]] = {}
    for n, (i, _) in enumerate(pairs):
        by_row.setdefault(i, []).append(n)
    rows = sorted(by_row)
    parallel = len(rows) * head.K.shape[0] >= PARALLEL_EXPS
    count = -(-len(rows) // max(_LEAST, _ENTRIES // head.K.shape[0]))
    count += count % 2 if count > 1 or parallel else 0  # an even count of equal pieces: both cores end together
    size = max(1, -(-len(rows) // max(count, 1)))  # (216 rows: 108 and 108, where 128 and 88 left one core idle)
    pieces = [rows[start : start + size] for start in range(0, len(rows), size)]
    data = (head, pairs, by_row, split, _keys_again(split) if tight else None, scores)

    def piece(rows: list[int]) -> tuple:
        return _piece(data, rows)

    # numpy's and BLAS's work on arrays of rows × keys: on threads (quicker than forked processes, whose
    # copy-on-write faults the parent paid for afterwards), each piece computed as it is alone
    made = map_threads(piece, pieces, blas=True) if parallel else [piece(p) for p in pieces]
    for where, O, eO, q2, e2 in made:
        value[where], error[where], low[where], bound[where] = O, eO, q2, e2
    return value, error, low, bound


def _piece(data: tuple, rows: list[int]) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(places in ``pairs``, values, bounds, second floats, their bounds) of the pairs in the given query rows."""
    head, pairs, by_row, split, again, scores = data
    chunk = np.array(rows)
    with np.errstate(invalid="ignore", over="ignore"):
        t1, t_lo, eta, kept = _arguments(head, chunk, split, again, scores)
        E_hi, E_lo, rho, under = _exps(t1, t_lo, eta, kept)
    rho_row, m = rho[:, 0], head.K.shape[0]
    tiny_row = np.where(np.any(under, axis=1), TINY, 0.0)
    ls, lsig, lb = _tree_sums(np.concatenate([E_hi, E_lo], axis=1))
    e_ell = SAFETY * (lb + rho_row * (1 + 2 * U) * (np.abs(E_hi).sum(axis=1) + np.abs(E_lo).sum(axis=1)) * 1.001)
    e_ell += tiny_row * m
    hh, hl = _split(E_hi)
    absV = np.abs(head.V)
    mine = [(r, n) for r, i in enumerate(rows) for n in by_row[i]]
    places, values, bounds, lows, seconds = [], [], [], [], []
    for part in range(0, len(mine), _PAIRS):
        some = mine[part : part + _PAIRS]
        r = np.array([x for x, _ in some])
        cols = np.array([pairs[n][1] for _, n in some])
        Vc = head.V[:, cols].T  # pairs × keys
        terms = np.concatenate([hh[r] * Vc, hl[r] * Vc, E_lo[r] * Vc], axis=1)
        Ns, Nsig, Nb = _tree_sums(terms)
        sizes = np.abs(terms)
        P = sizes.sum(axis=1) * (1 + 2 * gamma(terms.shape[1]))
        with np.errstate(invalid="ignore"):  # an exp without a bound (ρ = ∞) times terms of 0: NaN, no bound
            eN = SAFETY * (
                Nb
                + rho_row[r] * (1 + 2 * U) * P
                + U * sizes[:, 2 * m :].sum(axis=1) * 1.001  # e_lo·v's roundings: |fl(e_lo·v)| = fl(|e_lo|·|v|)
                + m * 2.0**-1074
                + tiny_row[r] * absV[:, cols].sum(axis=0)
            )
        N = Ns + Nsig
        L, L2 = _two_sum(ls[r], lsig[r])  # L exactly as before (fl(ls + lsig)); L + L2 = ls + lsig
        eN0, eL0 = eN, e_ell[r]  # |Ns + Nsig − N| and |ls + lsig − ℓ|, before N's and L's roundings
        eN = SAFETY * (eN + U * np.abs(N))
        eL = SAFETY * (e_ell[r] + U * L)
        O = N / L
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(L > eL, L * (L - eL), 0.0)
            eO = SAFETY * (U * np.abs(O) + eN / L + (np.abs(N) + eN) * eL / room)
            q2, e2 = _second(Ns, Nsig, O, L, L2, eN0, eL0)
        eO[~np.isfinite(eO)] = np.inf
        places += [n for _, n in some]
        values.append(O)
        bounds.append(eO)
        lows.append(q2)
        seconds.append(e2)
    return places, np.concatenate(values), np.concatenate(bounds), np.concatenate(lows), np.concatenate(seconds)


def _second(Ns, Nsig, q1, L, L2, eN0, eL0) -> tuple[np.ndarray, np.ndarray]:
    """(q2, bound): ℓ's and N's exact values within eL0 and eN0 of L + L2 and Ns + Nsig; O = N/ℓ within
    bound of q1 + q2 (the module's docstring, *Two-float quotient*); inf where no bound holds."""
    p, pe = _two_product(q1, L)  # exact: q1·L = p + pe (checked far above the subnormals below)
    a = Ns - p
    b = a - pe
    c = q1 * L2
    d = Nsig - c
    r = b + d  # Ñ − q1·ℓ̃, five roundings
    e_r = SAFETY * (U * (np.abs(a) + np.abs(b) + np.abs(c) + np.abs(d) + np.abs(r)) + 5 * 2.0**-1074)
    q2 = r / L
    low = L * (1 - 2 * U)  # below ℓ̃ = L + L2 ≥ L(1 − u)
    floor = low - eL0  # below ℓ (off by at most u of it where it passes L/2, as bad asks)
    whole = np.abs(Ns) + np.abs(Nsig)  # at least |Ñ|
    e2 = SAFETY * (
        eN0 / floor  # N's own error, through the division
        + whole * eL0 / (floor * low)  # ℓ's
        + U * (np.abs(r) + e_r) * (1 + 4 * U) / L  # r/ℓ̃ against r/L: |L2| ≤ u·L
        + e_r / L  # r's roundings
        + U * np.abs(q2)  # q2's
        + 2.0**-1074
    )
    # no bound: ℓ's error reaches ℓ, or q1·L near the subnormals (TwoProduct would not be exact)
    bad = ~(floor > 0.5 * L) | ~np.isfinite(e2) | ~np.isfinite(q2) | ((np.abs(p) < 2.0**-900) & (q1 != 0))
    return np.where(bad, 0.0, q2), np.where(bad, np.inf, e2)


__all__ = ["TINY", "covers", "outputs", "prepare", "quotients", "takes"]
