"""The log-sum-exp of each query row (what kernels return beside O) in float64, with a rigorous bound.

lse_i = log Σ_j e^(z_ij) over the allowed keys, z the scaled scores. From a block of the float64 path
(:mod:`symattn.kernel.float64`): lse = M + log ℓ, M the row's float maximum and ℓ = Σ e^(z − M) ≥ 1
with its bound e_ℓ, so log ℓ is off by at most e_ℓ / (ℓ − e_ℓ).

The log is our own, not libm's: ℓ = f · 2^e with f in [1/√2, √2), log f = 2 atanh z with
z = (f − 1)/(f + 1), |z| ≤ 0.1716 (f − 1 exact by Sterbenz's lemma; f + 1 and the division round), and
atanh z / z = Σ w^i/(2i + 1), w = z², by Horner to degree 9. Its error, LOG_ERROR · u · |ẑ|, is bounded
in exact rationals at import: the rounding of z through atanh's slope 2/(1 − z²), Horner's rounding
(``float64.horner_error``), the coefficients' rounding, the series' remainder, w's rounding through the
polynomial's slope, and the last product. Base 2 divides by ln 2 with one more bounded rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from symattn.kernel.float64 import _LN2, _LN2_HI, _LN2_LO, SAFETY, Block, U, horner_error

_DEGREE = 9
_COEFFS = [1.0 / (2 * i + 1) for i in range(_DEGREE + 1)]  # fl(1/(2i+1))
_REACH = Fraction(1716, 10000)  # |z| ≤ (√2 − 1)/(√2 + 1) = 0.17157…


def _log_error() -> Fraction:
    """C with |log f̂ − log f| ≤ C · u · |ẑ| for f in [1/√2, √2)."""
    u, z = Fraction(U), _REACH
    w = z * z
    c = [Fraction(x) for x in _COEFFS]
    exact = [Fraction(1, 2 * i + 1) for i in range(_DEGREE + 1)]
    q_max = sum((x * w**i for i, x in enumerate(c)), Fraction(0)) * (1 + 4 * u)  # bounds q̂ too
    remainder = w ** (_DEGREE + 1) / ((2 * _DEGREE + 3) * (1 - w))
    coeffs = sum((abs(a - b) * w**i for i, (a, b) in enumerate(zip(c, exact))), Fraction(0))
    slope = sum((i * x * w ** (i - 1) for i, x in enumerate(c) if i), Fraction(0))
    w_rounding = slope * u * w * (1 + 5 * u)  # ŵ = fl(ẑ²): one rounding of ẑ²
    polynomial = horner_error(_COEFFS, w * (1 + 5 * u)) + coeffs + remainder + w_rounding
    z_rounding = 2 / (1 - w) * (2 * u + u * u) * (1 + 3 * u)  # per unit |ẑ|: |2 atanh ẑ − 2 atanh z|
    total = 2 * polynomial / u + 2 * q_max * (1 + u) + z_rounding / u  # 2ẑ·q: the last product rounds once
    return total * Fraction(10001, 10000)


LOG_ERROR = math.nextafter(float(_log_error()), math.inf)
_SPLIT = max(abs(end - Fraction(_LN2_HI) - Fraction(_LN2_LO)) for end in _LN2)
INV_LN2 = float(1 / _LN2[0])  # correctly rounded: within u of 1/ln 2 (the interval's width is 2^-86)


def log_bounded(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log x for x ≥ 1 and a bound on its error."""
    f, e = np.frexp(x)
    low = f < 0.7071067811865476  # below 1/√2 (to within a float: either side is fine for |z| ≤ 0.1716)
    f = np.where(low, 2 * f, f)
    e = np.where(low, e - 1, e).astype(np.float64)
    z = (f - 1) / (f + 1)
    w = z * z
    q = np.full_like(w, _COEFFS[_DEGREE])
    for c in reversed(_COEFFS[:_DEGREE]):
        q *= w
        q += c
    log_f = (2 * z) * q
    s2 = e * _LN2_LO + log_f
    value = e * _LN2_HI + s2  # e·_LN2_HI is exact: |e| < 2^11, _LN2_HI has 32 bits
    error = SAFETY * (
        U * np.abs(value)
        + U * np.abs(s2)
        + U * np.abs(e * _LN2_LO)
        + np.abs(e) * float(_SPLIT) * 2
        + LOG_ERROR * U * np.abs(z)
    )
    return value, error


def lse(block: Block, base: str = "e") -> tuple[np.ndarray, np.ndarray]:
    """Each row's log-sum-exp (natural, or base 2) and a bound on its error: one value per row."""
    ell, e_ell, M = block.total[:, 0], block.total_error[:, 0], block.shift[:, 0]
    log_ell, e_log = log_bounded(ell)
    value = M + log_ell
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(ell > e_ell, ell - e_ell, 0.0)
        error = SAFETY * (U * np.abs(value) + e_log + e_ell / room)
    error[~np.isfinite(error)] = np.inf
    if base == "2":
        scaled = value * INV_LN2
        error = SAFETY * (U * np.abs(scaled) + np.abs(value) * U * INV_LN2 + error * INV_LN2)
        value = scaled
    return value, error


__all__ = ["INV_LN2", "LOG_ERROR", "lse", "log_bounded"]
