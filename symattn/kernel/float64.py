"""Attention in float64 with a rigorous a-priori bound on every value's error: the kernel engine's cheap path.

This is the one place floats enter the exact side, and every float carries a bound that holds by IEEE
arithmetic alone (round to nearest, unit roundoff u = 2^-53; γ_n = n·u / (1 − n·u)):

- **Scores.** Inputs that are float32 values (float16 and bfloat16 included) have significands of at
  most 24 bits, so each product q·k has at most 48 and is exact in float64. Rows of Q and K are split
  (``Split``, s = ``exact_s(d)``: the high parts lie on a grid of u·σ) so that the high parts' product is
  exact in any summation order, fused multiply-adds included (BLAS); only the small rest carries γ_d of
  its magnitude. (Before issue 30, s was one bit short and that sum could round: see docs/kernel.md.)
- **exp.** Our own, not libm's: e^t = 2^k · e^r with k = rint(t / ln 2), r = t − k·ln 2 (Cody–Waite),
  and e^r by its Taylor polynomial of degree 13 in Horner's form on |r| ≤ 0.35. RHO, its relative error,
  is computed at import in exact rationals (``_relative_error``: Horner's rounding step by step, the
  coefficients' rounding, Lagrange's remainder, the reduction's error): about 4.2u. Below T = −700 the
  value is 0, off by e^t for the true t within eT of T: at most TINY = 2^-1000 only where T + eT < −693.15
  surely (``exps``: SURELY_UNDER); elsewhere below the floor eT > 5.99, and the entry has no bound (inf).
- **Sums, division.** Row sums and the products with V are summed in chunks of about √m keys: each
  loses at most γ_{chunk + chunks} of its sum of magnitudes (products e·v one rounding more), not γ_m;
  each division and product one rounding. Every bound is formed in floats from
  non-negative terms and multiplied by SAFETY (1 + 10^-4), far more than the few roundings of forming it.
- **Underflow.** A product or quotient below 2^-1022 is off by up to 2^-1075 absolute, which no u|x|
  covers. Only a nonzero e below 2^-800 (``tiny``; e ≥ e^-700 > 2^-1010, |v| ≥ 2^-149) makes e·v, e/ℓ
  (ℓ ≥ 1) or their bounds' products subnormal: there N's bound adds UNDER = 2^-1070 (32 such
  underflows) per tiny e of the row, plus one, and O's and A's bounds UNDER where they or N, e are tiny.
  One query row, 100 keys at z − M = −699 with v ≈ 8.7·10^-19 gave O = 2.322·10^-320 with a bound of 0
  beside 2.342·10^-320 exactly. An underflowed e (0, bounded by TINY) needs nothing in A (TINY/ℓ ≫ 2^-1075),
  but TINY·Σ|v| does for a column of V below 2^-22: O's bound adds UNDER where the row has one (``lost``).

The values and bounds come by blocks of query rows, so memory stays O(block · keys + N · D).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from symattn.input.records import record
from symattn.kernel.cores import in_bands

U = 2.0**-53
SAFETY = 1.0001
TINY = 2.0**-1000  # bounds e^t for t < −700 (e^-699 < 2^-1000)
FLOOR = -700.0
SURELY_UNDER = -694.0  # fl(T + eT) below it: T + eT ≤ −694/(1 + u) < ln TINY = −693.147
BLOCK = 256  # query rows per block
_DEGREE = 13
_COEFFS = [1.0]
for _i in range(1, _DEGREE + 1):
    _COEFFS.append(_COEFFS[-1] / _i)  # fl(1/i!): each within u of 1/i!, covered by RHO
_INV_LN2 = 1.4426950408889634
_LN2_HI = 0.693147180369123816490  # ln 2 to 32 significant bits: k · _LN2_HI is exact for |k| < 2^21
_LN2_LO = 1.90821492927058770002e-10  # fl(ln 2 − _LN2_HI); |ln 2 − _LN2_HI − _LN2_LO| < 2^-86
_TERMS = 80
_LN2_BELOW = sum((Fraction(1, k * 2**k) for k in range(1, _TERMS + 1)), Fraction(0))  # ln 2 = Σ 1/(k·2^k)
_LN2 = (_LN2_BELOW, _LN2_BELOW + Fraction(1, (_TERMS + 1) * 2**_TERMS))  # the rest is below 1/((n+1)·2^n)
_REACH = Fraction(35, 100) + Fraction(1, 2**40)  # |r| ≤ _REACH for the exact reduced argument too


def horner_error(coeffs: list[float], reach: Fraction) -> Fraction:
    """A bound on |Horner's float value − the exact polynomial with these float coefficients| for |x| ≤ reach.

    The running recursion E_i = ρE_{i+1} + u(ρ(P_{i+1} + E_{i+1})(2 + u) + |ĉ_i|): fl(fl(p·x) + c) rounds
    twice a step, and P_i = Σ_{j≥i} |ĉ_j| ρ^(j−i) bounds the exact partial value.
    """
    u, rho, n = Fraction(U), reach, len(coeffs) - 1
    c = [abs(Fraction(x)) for x in coeffs]
    P = [sum((c[j] * rho ** (j - i) for j in range(i, n + 1)), Fraction(0)) for i in range(n + 1)]
    E = Fraction(0)
    for i in range(n - 1, -1, -1):
        E = rho * E + u * (rho * (P[i + 1] + E) * (2 + u) + c[i])
    return E


def _relative_error() -> Fraction:
    """A bound on |exp_bounded(t) − e^t| / e^t for t in [−700, 0], in exact rationals.

    Horner's rounding by the running recursion E_i = ρE_{i+1} + u(2ρ(P_{i+1} + E_{i+1}) + ĉ_i) (two
    roundings a step; P_i bounds the partial polynomial), the coefficients' own rounding, Lagrange's
    remainder, and the argument's error: both Cody–Waite steps rounded, |k| ≤ 1011, ln 2's split.
    """
    u, rho = Fraction(U), _REACH
    c = [Fraction(x) for x in _COEFFS]
    E = horner_error(_COEFFS, rho)
    factorials = [math.factorial(i) for i in range(_DEGREE + 2)]
    coeffs = sum((abs(c[i] - Fraction(1, factorials[i])) * rho**i for i in range(_DEGREE + 1)), Fraction(0))
    truncation = rho ** (_DEGREE + 1) / factorials[_DEGREE + 1] * Fraction(14192, 10000)  # e^0.35 < 1.4192
    polynomial = (E + coeffs + truncation) / Fraction(7046, 10000)  # relative to e^r ≥ e^-0.35 > 0.7046
    split = max(
        abs(_LN2[0] - Fraction(_LN2_HI) - Fraction(_LN2_LO)), abs(_LN2[1] - Fraction(_LN2_HI) - Fraction(_LN2_LO))
    )
    argument = 2 * u * rho + u * 1011 * Fraction(_LN2_LO) + 1011 * split  # |r̂ − (t − k ln 2)|
    growth = argument * Fraction(10001, 10000)  # e^δ − 1 ≤ 1.0001 δ for δ < 10^-4
    return (1 + polynomial) * (1 + growth) - 1


RHO = math.nextafter(float(_relative_error()), math.inf)  # the relative error of exp_bounded on [−700, 0]


def gamma(n: int) -> float:
    """γ_n rounded up generously: n·u/(1 − n·u) ≤ (n + 1)·u for n·u < 10^-6."""
    assert n * U < 1e-6
    return (n + 1) * U


def exp_bounded(t: np.ndarray) -> np.ndarray:
    """e^t for t ≤ 0 (masked entries −inf give 0), within RHO relative for t ≥ −700; 0 below."""
    low = t < FLOOR
    r = np.where(low, 0.0, t)  # s, then r in place: each step the same roundings as written out
    k = r * _INV_LN2
    np.rint(k, out=k)
    step = k * _LN2_HI
    r -= step  # exact: k·_LN2_HI is exact and, for k ≠ 0, within a factor 2 of s (Sterbenz)
    np.multiply(k, _LN2_LO, out=step)
    r -= step
    if r.size and max(float(r.max()), -float(r.min())) > 0.35:  # never: |r| ≤ ln 2 / 2 + a few ulps
        raise ArithmeticError("exp_bounded: argument reduction left |r| > 0.35")
    p = np.multiply(r, _COEFFS[_DEGREE], out=step)  # Horner's first step, c_13·r, then + c_12, ...
    p += _COEFFS[_DEGREE - 1]
    for c in reversed(_COEFFS[: _DEGREE - 1]):
        p *= r
        p += c
    out = np.ldexp(p, k.astype(np.int32), out=p)  # exact: p·2^k stays normal above e^-700
    out[low] = 0.0
    return out


def is_float32(a: np.ndarray) -> bool:
    """Every entry finite and a float32 value (float16 and bfloat16 ones are), so products are exact."""
    return bool(np.all(np.isfinite(a)) and np.all(a.astype(np.float32).astype(np.float64) == a))


@record
class Head:
    """One head's exact inputs as float64 arrays: Q (n×d), K (m×d), V (m×dv), all float32 values."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    scale: float  # a float within scale_error · scale of the scale c (Z = c·S)
    scale_error: float  # relative
    exact_scale: Fraction | None  # c exactly; None: 1/√d
    allowed: np.ndarray | None  # n×m booleans, True = may attend; None: every key


@record
class ModHead(Head):
    """A head whose scores are modified: FP8's descales in the scale, score modifiers (kernel/score_mods.py)."""

    factor: Fraction | None = None  # FP8's q_descale·k_descale: c is factor times the scale above
    mods: tuple[Any, ...] = ()  # score modifiers on z before the mask, in order


def extras(head: Head) -> tuple[Fraction | None, tuple[Any, ...]]:
    """A head's (factor, mods): (None, ()) for a plain one."""
    return getattr(head, "factor", None), getattr(head, "mods", ())


@record
class Block:
    """Query rows [start, stop): float values of the weights and output and bounds on their errors."""

    start: int
    stop: int
    weights: np.ndarray
    weights_error: np.ndarray
    output: np.ndarray
    output_error: np.ndarray
    shift: np.ndarray  # each row's maximum scaled score M (a float): the sum below is of e^(z − M)
    total: np.ndarray  # Σ e^(z − M), a column
    total_error: np.ndarray
    stage: tuple | None = None  # with blocks(stages=True): the rows' exps (exps, and extra_term's)
    scores: tuple | None = None  # with stages: the scores' exact part, their rest and the rows' 2^e (_scores)


def head(
    Q: np.ndarray,
    K: np.ndarray,
    V: np.ndarray,
    exact_scale: Fraction | None,
    allowed: np.ndarray | None,
    factor: Fraction | None = None,
    mods: tuple[Any, ...] = (),
) -> Head | None:
    """A head of float32-valued arrays with the scale c (None: 1/√d; times ``factor`` where given) as a float
    and its error; None where c is beyond the float range the bounds assume."""
    if exact_scale is None:
        scale = 1.0 / np.sqrt(float(Q.shape[1]))  # two roundings: within 2.01u
    else:
        scale = float(exact_scale)  # correctly rounded: within u
    error = 3 * U
    if factor is not None:  # fl(fl(c)·fl(factor)): (1 + 2.01u)(1 + u)² − 1 < 5u
        scale, error = scale * float(factor), 5 * U
    if not 2.0**-900 < abs(scale) < 2.0**900:
        return None
    if factor is None and not mods:
        return Head(Q, K, V, scale, error, exact_scale, allowed)
    return ModHead(Q, K, V, scale, error, exact_scale, allowed, factor, mods)


def blocks(
    head: Head,
    weights: bool = True,
    block: int = BLOCK,
    split: Split | None = None,
    stages: bool = False,
    rows: tuple[int, int] | None = None,
) -> Iterator[Block]:
    """The head's weights (only with ``weights``) and output with their error bounds, block by block;
    ``split``: K's (Split.of(head.K)), where the caller has it already; with ``stages`` each block keeps its
    exp stage, for sums redone from the same exps (compensated.stage_outputs); ``rows``: only the query rows
    [start, stop), start a multiple of ``block`` (the blocks are those of the whole pass)."""
    split, absV = Split.of(head.K) if split is None else split, np.abs(head.V)
    both = np.concatenate([head.V, absV], axis=1)  # N = E·V and B = E·|V| in one product
    first, end = (0, head.Q.shape[0]) if rows is None else rows
    for start in range(first, end, block):
        with np.errstate(invalid="ignore", over="ignore"):  # 0·inf and overflow leave no bound: inf below
            yield _block(head, start, min(start + block, end), weights, split, both, stages)


def exact_s(d: int) -> int:
    """The least s of :class:`Split` for which any sum of d products high·high' is exact: 2s ≥ 53 + log2 d.

    high is a multiple of u·σ = 2^(e+s−53), not of 2^(e+s−52): x + σ falls below σ for x < 0, where the
    floats are twice as fine (Rump, Ogita and Oishi, ExtractScalar: q ∈ eps·σ·ℤ). So products are
    multiples of 2^(e+e'+2s−106) of at most 2^(e+e'), and every partial sum of d of them, at most
    d·2^(e+e'), holds at most 2^53 of those units when 2^(2s−53) ≥ d.
    """
    return -(-(53 + max(1, d - 1).bit_length()) // 2)


@record
class Split:
    """Rows x = high + low (Rump–Ogita–Oishi's ExtractScalar with σ = 2^(e+s), |x| < 2^e per row).

    fl(x + σ) lies in [σ − 2^e, σ + 2^e] (both floats: rounding is monotone), so high = fl(x + σ) − σ is
    exact (Sterbenz), |high| ≤ 2^e, and high is a multiple of 2^(e+s−53), the spacing of the floats in
    [σ/2, σ); low = x − high is the addition's rounding error, a float, exact, with |low| ≤ half that
    spacing above σ: |low| ≤ 2^(e+s−53). High and low of a float32 value have at most 24 bits each.
    With s = :func:`exact_s` (d), any sum of d products high·high' is exact in float64.
    """

    whole: np.ndarray
    high: np.ndarray
    low: np.ndarray
    top: np.ndarray  # 2^e of each row
    s: int

    @staticmethod
    def of(x: np.ndarray, s: int | None = None, largest: np.ndarray | None = None) -> Split:
        """``largest``: each row's max |x| as a column, where the caller has it already."""
        s = exact_s(x.shape[1]) if s is None else s
        largest = np.max(np.abs(x), axis=1, keepdims=True) if largest is None else largest
        _, e = np.frexp(largest)  # max < 2^e (e = 0 for a zero row)
        sigma = np.ldexp(1.0, e + s)
        high = (x + sigma) - sigma  # exact (ExtractScalar): a multiple of 2^(e+s−53)
        return Split(x, high, x - high, np.ldexp(1.0, e), s)


def _scores(q: np.ndarray, keys: Split, then: Any = None, keep: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """S = q·Kᵀ and a bound on its error: the high parts' product is exact, the rest is small. The products
    once, the rest entry by entry in bands of rows whose temporaries stay in the cache (the same floats);
    ``then(S, eS)``: what a band makes of them instead (``scaled``'s z); ``keep``: a list the products and the
    rows' 2^e go to (doubled.outputs's scores, not made twice)."""
    d = q.shape[1]
    rows = Split.of(q, keys.s)
    exact = rows.high @ keys.high.T
    rest = rows.high @ keys.low.T
    rest += rows.low @ keys.whole.T  # products exact (≤ 24 + 24 bits); sums not
    if keep is not None:
        keep.append((exact, rest, rows.top))
    # |high| ≤ 2^e, |k'| < 2^e', |low| ≤ 2^(e+s−53): Σ|high·low'| + Σ|low·k'| ≤ d·2^(e+e'+s−52), and each
    # of the two sums loses at most γ_d of its own (products rounded or not); then two additions, u each
    factor = gamma(d) * d * 2.0 ** (keys.s - 52) * SAFETY

    def band(exact: np.ndarray, rest: np.ndarray, top: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        S = exact + rest
        eS = SAFETY * (U * np.abs(S) + U * np.abs(rest) + factor * (top * keys.top.T))
        return (S, eS) if then is None else then(S, eS)

    S, eS = in_bands(band, (exact, rest, rows.top), (np.float64, np.float64))
    return S, eS


def scaled(
    head: Head, rows: slice | np.ndarray, split: Split, keep: list | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """z = c·q·k of the given query rows (before any modifier) and its bound."""
    c, error = head.scale, head.scale * head.scale_error

    def z(S: np.ndarray, eS: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        Z = S * c
        return Z, SAFETY * (U * np.abs(Z) + eS * c + (np.abs(S) + eS) * error)

    return _scores(head.Q[rows], split, z, keep)


def exps(head: Head, rows: slice | np.ndarray, split: Split, keep: list | None = None):
    """The exp stage of the given query rows: E = e^(z − M) and its error eE, the relative bound eps of
    each entry, which entries underflowed (bounded by TINY), the row maxima M.

    The true t = z − M lies within eT of T. Where T < FLOOR, E = 0 and its error is e^t ≤ e^(T + eT): TINY
    bounds it only where T + eT < ln TINY = −693.147, so an entry is under where fl(T + eT) < −694 (then
    T + eT ≤ −694/(1 + u)). eT is a priori (the split's rest, c·γ_d·d·2^(s−52)·2^(e+e′) of ``scaled``,
    or a modifier's own): a key large where the query is 0 gets eT of 10 and more while the row's maximum
    keeps a tiny one, and T = −702 within 12 reaches e^-690 > TINY. Every other entry below the floor has
    eT > 5.99 > 0.5: no bound, eE = inf (not E·eps, 0·inf). Where eT < 5.99 nothing changed (issue 30).
    """
    Z, eZ = scaled(head, rows, split, keep)
    for mod in extras(head)[1]:  # score modifiers: before the mask, each with its own bound
        Z, eZ = mod.float64(Z, eZ, rows)
    mask = None if head.allowed is None else head.allowed[rows]
    if mask is not None:
        Z[~mask] = -np.inf
    M = np.max(Z, axis=1, keepdims=True)
    for logit in extra_logits(head, rows, Z.shape[0]):  # a denominator's logit joins the maximum: T ≤ 0 still
        M = np.maximum(M, logit)
    # the rest entry by entry, in bands (as in ``scaled``)
    E, eE, eps, under = in_bands(_stage, (Z, eZ, M) if mask is None else (Z, eZ, M, mask), (np.float64,) * 3 + (bool,))
    return E, eE, eps, under, M


def _stage(Z: np.ndarray, eZ: np.ndarray, M: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(E, eE, eps, under) of :func:`exps` from the scores, their bounds and the rows' maxima."""
    T = Z - M  # T ≤ 0; the softmax is the same for any shift, so shifting by the float M is exact
    eT = SAFETY * (U * np.abs(T) + eZ)
    E = exp_bounded(T)
    big = eT > 0.5  # where e^{eT} − 1 ≤ eT + eT² no longer bounds usefully: no bound at all
    eps = SAFETY * (1 + 2 * RHO) * (eT * (1 + eT) + RHO)
    eps[big] = np.inf
    low = T < FLOOR  # E = 0 there
    under = low & (T + eT < SURELY_UNDER)  # e^t < TINY for every t within eT of T: TINY bounds it
    lost = low & ~under  # E = 0 beside an e^t that may pass TINY: eT > 5.99, no bound
    if mask is not None:
        eps[~mask] = 0.0  # a masked key: exactly 0
        under &= mask
        lost &= mask
    with np.errstate(invalid="ignore"):  # 0·inf where lost: replaced below
        eE = E * eps
    eE[under] = TINY
    eE[lost] = np.inf
    return E, eE, eps, under


def extra_logits(head: Head, rows: slice | np.ndarray, count: int) -> list[np.ndarray]:
    """The logits in the denominator alone (no value) of the given query rows, a column each: a DENOMINATOR
    part's rule (kernel/score_mods.Denominator); none without one."""
    return [mod.logit(rows, count) for mod in extras(head)[1] if hasattr(mod, "logit")]


def extra_term(head: Head, rows: slice | np.ndarray, M: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """e^(s − M) of each row's denominator logit s (a float, exact) and its bound; None without one. s − M rounds
    once (u|T|), and the exp is the one of ``exps``: within eT(1 + eT) + RHO relative, or TINY below FLOOR,
    which holds here without ``exps``' test: eT ≤ 1.0001u|T|, so T < −700 gives T + eT < −699.9."""
    logits = extra_logits(head, rows, M.shape[0])
    if not logits:
        return None
    T = logits[0] - M  # ≤ 0: M is at least s
    eT = SAFETY * U * np.abs(T)
    E = exp_bounded(T)
    eE = np.where(T < FLOOR, TINY, E * SAFETY * (1 + 2 * RHO) * (eT * (1 + eT) + RHO))
    return E, eE


def joined(ell: np.ndarray, e_ell: np.ndarray, term: tuple[np.ndarray, np.ndarray] | None):
    """ℓ + e^(s − M), the denominator logit's term added to the row sums: one rounding more, u|ℓ'|, and the
    term's bound."""
    if term is None:
        return ell, e_ell
    total = ell + term[0].reshape(ell.shape)
    return total, SAFETY * (e_ell + term[1].reshape(ell.shape) + U * total)


def _block(head: Head, start: int, stop: int, weights: bool, split: Split, both: np.ndarray, keep: bool) -> Block:
    m, dv = head.K.shape[0], head.V.shape[1]
    absV = both[:, dv:]
    width = math.isqrt(m - 1) + 1  # keys per chunk: sums of chunk sums lose γ_{width + chunks}, not γ_m
    chunks = -(-m // width)
    g_sum = gamma(width + chunks + 1)  # +1: the products e·v round once more
    kept: list | None = [] if keep else None
    E, eE, eps, under, M = exps(head, slice(start, stop), split, kept)
    ell = _chunked(E, width, chunks)
    e_ell = SAFETY * (g_sum * ell + np.sum(eE, axis=1, keepdims=True))
    extra = extra_term(head, slice(start, stop), M)
    ell, e_ell = joined(ell, e_ell, extra)  # a logit with no value: its e^(s − M)
    eps_row = np.max(eps, axis=1, keepdims=True)
    tiny_row = np.where(np.any(under, axis=1, keepdims=True), TINY, 0.0)
    NB = _chunked(E, width, chunks, both)
    N, B = NB[:, :dv], NB[:, dv:]
    under_row = UNDER * tiny_terms(np.sum(tiny(E), axis=1, keepdims=True))  # products e·v below 2^-1022
    eN = SAFETY * ((g_sum + eps_row * (1 + g_sum)) * B + tiny_row * np.sum(absV, axis=0) + under_row)
    O = N / ell
    room = np.where(ell > e_ell, ell * (ell - e_ell), 0.0)  # no room: no bound (inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        eO = SAFETY * (U * np.abs(O) + eN / ell + (np.abs(N) + eN) * e_ell / room + UNDER * tiny(O, N) + lost(tiny_row))
    eO[~np.isfinite(eO)] = np.inf
    if weights:
        A, eA = divided(E, eE, ell, e_ell)
    else:
        A = eA = np.empty((0, 0))
    stage = (E, eE, eps, under, M, extra) if keep else None
    return Block(start, stop, A, eA, O, eO, M, ell, e_ell, stage, (*kept[0], start) if kept else None)


def divided(E: np.ndarray, eE: np.ndarray, ell: np.ndarray, e_ell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weights A = E / ℓ (ℓ a column of row sums) and their bound, from E's and ℓ's."""
    room = np.where(ell > e_ell, ell * (ell - e_ell), 0.0)  # no room: no bound (inf)
    A = E / ell
    with np.errstate(divide="ignore", invalid="ignore"):
        eA = SAFETY * (U * A + eE / ell + (E + eE) * e_ell / room + UNDER * tiny(A, E))
    eA[~np.isfinite(eA)] = np.inf
    return A, eA


def _chunked(E: np.ndarray, width: int, chunks: int, V: np.ndarray | None = None) -> np.ndarray:
    """Row sums of E (a column), or E·V, as sums over chunks of ``width`` keys of each chunk's sum, in any
    order: E·V a BLAS product a chunk, added in turn (as numpy summed them stacked, without the copy)."""
    n, m = E.shape
    if V is not None:
        out = np.zeros((n, V.shape[1]))
        for start in range(0, m, width):
            out += E[:, start : start + width] @ V[start : start + width]
        return out
    if chunks * width != m:  # zeros pad the last chunk: they add nothing and lose nothing
        E = np.concatenate([E, np.zeros((n, chunks * width - m))], axis=1)
    return E.reshape(n, chunks, width).sum(axis=2).sum(axis=1, keepdims=True)


UNDER = 2.0**-1070  # 32 underflows, each off by at most 2^-1075 (half the least subnormal), absolute
SMALL = 2.0**-800  # a factor or result below it may make a product, or a bound's product, subnormal


def tiny(*arrays: np.ndarray) -> np.ndarray:
    """1.0 where any of the arrays (broadcast) is nonzero and below SMALL, else 0.0: there a product and the few
    products of its bound may underflow, each off by at most 2^-1075 absolute, which no relative u covers (a
    weight near e^-700 times a small dA − D gives a subnormal dS, and its products with Q and K more)."""
    out = np.zeros(np.broadcast_shapes(*(a.shape for a in arrays)), dtype=bool)
    for a in arrays:
        out |= (a != 0) & (np.abs(a) < SMALL)
    return out.astype(np.float64)


def lost(tiny_row: np.ndarray) -> np.ndarray:
    """UNDER where a row has an exp below the floor (``tiny_row`` TINY): TINY·Σ|v| falls below 2^-1022 for
    V's columns below 2^-22, and with what it passes through (eN, eN/ℓ) it may round to 0 there, each
    rounding off by at most 2^-1075: an output of 0 with the bound 0 beside e^-1000·2^-149 exactly (a
    helper's attack, session 14)."""
    return np.where(tiny_row > 0, UNDER, 0.0)


def tiny_terms(count: np.ndarray) -> np.ndarray:
    """The underflows of a product's entries with ``count`` tiny terms: each term's three products and bound
    products (32 in UNDER), and once more for the sums' and the scale's bounds where any term is tiny."""
    return np.where(count > 0, count + 1, 0)


def interval(value: np.ndarray, error: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] holding value ± error: each end moved one float outward past its rounding."""
    return np.nextafter(value - error, -np.inf), np.nextafter(value + error, np.inf)


__all__ = [
    "RHO",
    "Block",
    "Head",
    "ModHead",
    "extras",
    "blocks",
    "head",
    "exact_s",
    "exp_bounded",
    "gamma",
    "interval",
    "is_float32",
    "joined",
    "extra_term",
    "lost",
]
