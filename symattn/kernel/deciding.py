"""Deciding a float's error against an interval [lo, hi] of float64 ends, vectorised with numpy.

An entry's error in ULPs (three digits), its histogram bucket and its relative error are decided when
every point of [lo, hi] gives the same ones. numpy's own roundings are covered by margins (WIDEN, MARGIN);
an entry too near a boundary for them is left to ``comparison._decide``, in exact rationals.
"""

from __future__ import annotations

import functools
from dataclasses import fields, replace
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import numpy as np

from symattn.input.decimals import significant_exact
from symattn.input.floats import FORMATS
from symattn.input.records import record
from symattn.kernel.comparison import EDGES

MARGIN = 1e-9  # in units of the third digit: far above numpy's own rounding of the figures (≈ 1e-12)
WIDEN = 2.0**-48  # the relative rounding of near, far and the relative error's division
_POWERS = EDGES[1:]  # the histogram's edges past 0: consecutive powers of two (bucket reads them off the bits)
_LEAST = _POWERS[0].numerator.bit_length() - _POWERS[0].denominator.bit_length()
assert EDGES[0] == 0 and _POWERS == tuple(Fraction(2) ** (_LEAST + k) for k in range(len(_POWERS)))
# Errors' fields that are no floats: the flags, and the buckets
_KINDS = {"bounded": bool, "bucket_ok": bool, "crosses": bool, "bucket": np.int64}
# y < BELOW·t: y's three digits, half-up (each within 0.5%), are below t's: a bound this far under the
# largest lower bound cannot give the largest figure, nor tie with it
BELOW = 0.98


def is_double(v: Fraction) -> bool:
    """Whether a rational is a float64 value (then float() is exact): a dyadic one of at most 53 bits, in range."""
    den, num = v.denominator, abs(v.numerator)
    if den & (den - 1) or num == 0:
        return num == 0
    odd = num >> ((num & -num).bit_length() - 1)
    return odd.bit_length() <= 53 and den.bit_length() <= 1075 and num.bit_length() - den.bit_length() <= 1023


def decide(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, fmt: str):
    """Vectorised comparison._decide: (decided, ulps, relative, bucket), each figure as (q, exponent) of
    q·10^exponent with q of three digits (relative: q = −1 where it has none: an exact 0); a band of rows
    at a time, on a thread a core."""
    from symattn.kernel.cores import in_bands

    def band(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple:
        ok, (q_u, k_u), (q_r, k_r), bucket = decided(_errors(x, lo, hi, fmt))
        return ok, q_u, k_u, q_r, k_r, bucket

    ok, q_u, k_u, q_r, k_r, bucket = in_bands(band, (x, lo, hi), (bool,) + (np.int64,) * 5)
    return ok, (q_u, k_u), (q_r, k_r), bucket


def decided(e: Errors):
    """``decide`` of the bounds ``_errors`` gives (not those of ``errors``)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ok_u, q_u, k_u = _digits(e.ulps_lo, e.ulps_hi)
        ok_r, q_r, k_r = _digits(e.relative_lo, e.relative_hi)
    ok = e.bucket_ok & ok_u & ok_r & ~e.crosses
    return ok, (q_u, k_u), (q_r, k_r), e.bucket


def at(e: Errors, where) -> Errors:
    """The bounds of the entries ``where`` (an index into each array)."""
    return Errors(*(getattr(e, f.name)[where] for f in fields(e)))


@record
class Errors:
    """Float bounds on each entry's error against every point of [lo, hi]: in ULPs (rigorous where
    ``bounded``), relative (rigorous everywhere: 0 and ∞ where the exact value's sign is open), and
    its histogram bucket (decided where ``bucket_ok``)."""

    bounded: np.ndarray
    ulps_lo: np.ndarray
    ulps_hi: np.ndarray
    relative_lo: np.ndarray
    relative_hi: np.ndarray
    bucket: np.ndarray
    bucket_ok: np.ndarray
    crosses: np.ndarray


def errors(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, fmt: str) -> Errors:
    """The bounds ``decide`` rounds, for the entries a report may show (kernel.needed)."""
    return reported(_errors(x, lo, hi, fmt), lo, hi)


def reported(e: Errors, lo: np.ndarray, hi: np.ndarray) -> Errors:
    """``errors`` of the bounds ``_errors`` gives."""
    from symattn.kernel.cores import in_bands

    def band(crosses, lo, hi, relative_lo, relative_hi) -> tuple:
        signed = ~crosses & (lo != 0) & (hi != 0)
        return np.where(signed, relative_lo, 0.0), np.where(signed & (relative_hi >= 0), relative_hi, np.inf)

    made = in_bands(band, (e.crosses, lo, hi, e.relative_lo, e.relative_hi), (np.float64, np.float64))
    return replace(e, relative_lo=made[0], relative_hi=made[1])


def pieces(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, fmt: str) -> Errors:
    """``_errors`` of matrices, a band of rows at a time, on a thread a core (cores.in_bands): each entry's
    figures are its own."""
    from symattn.kernel.cores import in_bands

    names = [f.name for f in fields(Errors)]

    def band(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
        part = _errors(x, lo, hi, fmt)
        return [getattr(part, name) for name in names]

    return Errors(*in_bands(band, (x, lo, hi), [_KINDS.get(name, np.float64) for name in names]))


def _errors(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, fmt: str) -> Errors:
    precision, emin = FORMATS[fmt]
    with np.errstate(over="ignore", invalid="ignore"):  # near float64's largest: inf, a figure left open
        below, above = x - lo, hi - x  # both ≥ 0 inside [lo, hi]; fl(lo − x) = −fl(x − lo) exactly
        near = np.maximum(-np.minimum(below, above), 0.0)  # the distance to [lo, hi]: 0 inside
        near *= 1 - WIDEN
        far = np.maximum(below, above)  # to the farther end
        far *= 1 + WIDEN
    u_lo, u_hi = _ulp(lo, precision, emin), _ulp(hi, precision, emin)
    crosses = (lo < 0) & (hi > 0)
    u_small = np.where(crosses, 2.0 ** (emin - precision + 1), np.minimum(u_lo, u_hi))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        e_lo, e_hi = near / np.maximum(u_lo, u_hi), far / u_small
        b_lo, b_hi = bucket(e_lo), bucket(e_hi)
        positive = lo > 0
        small = np.where(positive, lo, -hi)
        big = np.where(positive, hi, -lo)
        r_lo, r_hi = near / big, far / small
        r_lo *= 1 - WIDEN
        r_hi *= 1 + WIDEN
    bounded = (lo != 0) & (hi != 0) & np.isfinite(x)  # _ulp(0) is no ULP of 0
    return Errors(bounded, e_lo, e_hi, r_lo, r_hi, b_lo, bounded & (b_lo == b_hi), crosses)


def bucket(e: np.ndarray) -> np.ndarray:
    """np.searchsorted(EDGES, e, "left") (how many edges lie below each e ≥ 0, NaN past them all), from e's
    bits: EDGES are 0 and the powers of two from 2^LEAST on, so a positive e in (2^(p−1), 2^p] lies above
    0 and above p − LEAST of the powers. p = ⌈log₂ e⌉ is e's biased exponent, one more where its
    fraction is not 0 (the carry of adding 2^52 − 1 to its bits), less 1023; subnormals give p ≤ −1022."""
    bits = np.ascontiguousarray(e, dtype=np.float64).view(np.int64)
    p = bits + ((1 << 52) - 1)
    p >>= 52
    p += 1 - 1023 - _LEAST
    np.clip(p, 1, len(_POWERS) + 1, out=p)
    p[e == 0] = 0
    p[np.isnan(e)] = len(_POWERS) + 1
    return p


def hopeless(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, fmt: str) -> np.ndarray:
    """Where comparison._decide of a float x on [lo, hi] is sure to find the three digits of its two ends'
    errors in ULPs, or of its relative errors, different (so it returns None), without exact rationals.

    _decide takes e_lo = near/U and e_hi = far/U' (near and far the least and largest |x − e| over [lo, hi],
    U ≥ U' the ULPs of the ends, powers of two), and r_lo = near/|the larger end|, r_hi = far/|the smaller|.
    ``_errors`` forms near and far with one rounding each (u = 2⁻⁵³; near is exactly 0 where x lies inside),
    divides (exact by a power of two above 2⁻¹⁰⁰⁰, else one rounding) and multiplies by 1 ∓ WIDEN (2⁻⁴⁸), so
    e_lo ≤ ê_lo(1 + u)/((1 − WIDEN)(1 − u)²) ≤ ê_lo(1 + 2⁻⁴⁷) ≤ fl(ê_lo(1 + 2⁻⁴⁶)), and likewise each other
    figure: :func:`_apart` of those ends."""
    e = _errors(x, lo, hi, fmt)
    apart = _apart(e.ulps_lo, e.ulps_hi) | _apart(e.relative_lo, e.relative_hi)
    return ((lo > 0) | (hi < 0)) & np.isfinite(lo) & np.isfinite(hi) & np.isfinite(x) & apart


def _apart(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Where every figure below A = fl(low(1 + 2⁻⁴⁶)) and every figure above B = fl(high(1 − 2⁻⁴⁶)) have
    different three digits, half-up. With 10^k ≤ A (k from A's log10, checked below), t_A = A·10^(2−k) and
    t_B as numpy forms them are within 10⁻¹² of the exact ones, far inside MARGIN: where 100 + MARGIN ≤ t_A
    ≤ t_B ≤ 999.5 − MARGIN, the digits of A and B are ⌊t + 1/2⌋ in one decade, and ⌊t_B + 1/2 − MARGIN⌋ >
    ⌊t_A + 1/2 + MARGIN⌋ puts a rounding boundary between them (half-up rounding is monotone). A = 0 (x
    inside [lo, hi]) shows 0, which no B > 0 does. Only finite figures, 0 or above 2⁻¹⁰⁰⁰."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        a, b = low * (1 + 2.0**-46), high * (1 - 2.0**-46)
        k = np.floor(np.log10(np.where(a > 0, a, 1.0))).astype(np.int64)
        scale = 10.0 ** (2 - k).astype(np.float64)
        t_a, t_b = a * scale, b * scale
        digits = (
            (t_a >= 100 + MARGIN)
            & (t_b <= 999.5 - MARGIN)
            & (np.floor(t_b + 0.5 - MARGIN) > np.floor(t_a + 0.5 + MARGIN))
        )
        finite = (b > 2.0**-1000) & np.isfinite(b)
        return finite & (((a > 2.0**-1000) & digits) | (a == 0))


def _ulp(y: np.ndarray, precision: int, emin: int) -> np.ndarray:
    """floats.ulp of each float: at a power of two the spacing below it (Kahan's ulp)."""
    m, e = np.frexp(y)  # |y| = m·2^e, m in [1/2, 1): floor(log2 |y|) = e − 1, exactly
    e -= 1
    e -= (np.abs(m) == 0.5) & (e > emin)
    return np.ldexp(1.0, np.maximum(e, emin) - precision + 1)


def _digits(lo: np.ndarray, hi: np.ndarray):
    """Where every number in [lo, hi] rounds half-up to the same three significant digits: q, exponent."""
    safe = np.where((lo > 0) & np.isfinite(hi), lo, 1.0)
    k = np.floor(np.log10(safe)).astype(np.int64)
    scale = 10.0 ** (2 - k).astype(np.float64)
    t_lo, t_hi = lo * scale, hi * scale
    q = np.floor(t_lo + 0.5 - MARGIN)
    ok = (
        (lo > 0)
        & np.isfinite(hi)
        & (t_lo >= 100 + MARGIN)
        & (t_hi <= 999.5 - MARGIN)
        & (q == np.floor(t_hi + 0.5 + MARGIN))
    )
    return ok, q.astype(np.int64), k - 2


@functools.lru_cache(maxsize=65536)  # the ULP figures of a comparison repeat: 900 digit triples, few exponents
def figure(q: int, exponent: int) -> Decimal:
    """q·10^exponent as the Decimal that significant_exact gives for it (its digits, that exponent)."""
    return Decimal(f"{q}E{exponent}")


def shown_many(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised :func:`shown` for up to 13 digits, where numpy's scaling (relative error < 1e-15) stays far
    from the rounding boundaries: (ok, signed q, exponent) with the value q·10^exponent; a band of rows at a
    time, on a thread a core (each entry's digits are its own)."""
    from symattn.kernel.cores import in_bands

    ok, q, exponent = in_bands(_shown_many, (lo, hi), (bool, np.int64, np.int64))
    return ok, q, exponent


def _shown_many(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    same = ((lo > 0) | (hi < 0)) & np.isfinite(lo) & np.isfinite(hi)
    ok = np.zeros(lo.shape, dtype=bool)
    q = np.zeros(lo.shape, dtype=np.int64)
    exponent = np.zeros(lo.shape, dtype=np.int64)
    at = np.flatnonzero(same)  # the entries still open, each computed as it would be among all of them
    a, b = np.abs(lo.ravel()[at]), np.abs(hi.ravel()[at])
    top = np.floor(np.log10(np.maximum(a, b))).astype(np.int64)
    with np.errstate(over="ignore", invalid="ignore"):  # past float64's range: inf or nan, left to shown()
        for k in range(13, 0, -1):
            scale = 10.0 ** (k - 1 - top).astype(np.float64)
            ta, tb = a * scale + 0.5, b * scale + 0.5
            fa, fb = np.floor(ta), np.floor(tb)
            clear = (  # each end far from a rounding boundary and inside the decade
                (ta - fa > 0.01)
                & (fa + 1 - ta > 0.01)
                & (tb - fb > 0.01)
                & (fb + 1 - tb > 0.01)
                & (np.minimum(ta, tb) > 10.0 ** (k - 1) + 0.51)
                & (np.maximum(ta, tb) < 10.0**k - 0.01)
            )
            fits = clear & (fa == fb)
            q.ravel()[at[fits]] = fa[fits].astype(np.int64)
            exponent.ravel()[at[fits]] = top[fits] - k + 1
            ok.ravel()[at[fits]] = True
            rest = clear & (fa != fb)  # unsure at k digits: left to shown()
            at, a, b, top = at[rest], a[rest], b[rest], top[rest]
    return ok, np.where(lo < 0, -q, q), exponent


def shown(lo: float, hi: float, digits: int) -> Decimal:
    """The exact value to as many significant digits (at most ``digits``) as every point of [lo, hi] agrees on."""
    a, b = Decimal(lo), Decimal(hi)  # exact: a float's decimal expansion is finite
    if a == b:
        return significant_exact(Fraction(lo), digits)
    width = b - a
    top = max(abs(a), abs(b))
    k = min(digits, max(1, top.adjusted() - width.adjusted()))
    while k >= 1:
        ra, rb = _round(a, k), _round(b, k)
        if ra == rb:
            return ra
        k -= 1
    return Decimal(0) if a <= 0 <= b else _round(a, 1)


def _round(x: Decimal, digits: int) -> Decimal:
    if x == 0:
        return Decimal(0)
    q = x.quantize(Decimal(1).scaleb(x.adjusted() - digits + 1), ROUND_HALF_UP)
    if len(q.as_tuple().digits) > digits:  # 9.99 → 10.0: one digit too many
        q = q.quantize(Decimal(1).scaleb(q.adjusted() - digits + 1), ROUND_HALF_UP)
    return q


__all__ = [
    "Errors",
    "at",
    "decide",
    "decided",
    "errors",
    "figure",
    "hopeless",
    "is_double",
    "pieces",
    "reported",
    "shown",
    "shown_many",
]
