"""Which intervals of float64 ends round to one value at a given count of significant digits, vectorised.

A float64-path certificate shows an output when every point of [lo, hi] rounds half-up (away from zero)
to the same ``digits`` significant digits. numpy scales each end by an exact power of ten (one rounding)
and adds 0.5 (one more): t off by at most 2.3·10^-16 · t. The margin is 10^-15 · 10^digits, over four
times that; an entry inside it, or scaled by more than 10^22 (not exact in float64), is left undecided
(the maker refines it with arb; the verifier checks it in exact rationals).
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

MOST = 13  # significant digits the margin covers (0.01 of the last digit at 13)
_FOUR = (np.arange(10**4)[:, None] // np.array([1000, 100, 10, 1]) % 10 + ord("0")).astype(np.uint8)
_POWERS = np.array([float(10**k) for k in range(23)])  # exact: 10^22 < 2^53 · 2^22


def significant_many(lo: np.ndarray, hi: np.ndarray, digits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, signed q, exponent): where ok, every point of [lo, hi] rounds to q·10^exponent, q of ``digits`` digits."""
    if not 1 <= digits <= MOST:
        raise ValueError(f"digits must be from 1 to {MOST}, got {digits}")
    same = ((lo > 0) | (hi < 0)) & np.isfinite(lo) & np.isfinite(hi)
    a, b = np.where(same, np.abs(lo), 1.0), np.where(same, np.abs(hi), 1.0)
    small, big = np.minimum(a, b), np.maximum(a, b)
    with np.errstate(divide="ignore"):
        top = np.floor(np.log10(big)).astype(np.int64)
    exponent = top - digits + 1
    reach = np.abs(exponent) <= 22
    power = _POWERS[np.where(reach, np.abs(exponent), 0)]
    up = exponent < 0
    ta = np.where(up, small * power, small / power) + 0.5
    tb = np.where(up, big * power, big / power) + 0.5
    margin = 10.0 ** (digits - 15)
    fa, fb = np.floor(ta), np.floor(tb)
    ok = (
        same
        & reach
        & (ta - fa > margin)
        & (fa + 1 - ta > margin)
        & (tb - fb > margin)
        & (fb + 1 - tb > margin)
        & (fa == fb)
        & (fa >= 10.0 ** (digits - 1))  # log10's floor was not one too high
        & (fb < 10.0**digits)  # nor one too low
    )
    q = np.where(ok, fa, 0).astype(np.int64)
    return ok, np.where(lo < 0, -q, q), exponent


def text(q: int, exponent: int) -> str:
    """q·10^exponent as compute shows a Decimal of those digits: "0.4171325333", "2.028E+4"."""
    return str(Decimal(f"{q}E{exponent}"))


def texts(q: list[int], exponent: list[int]) -> list[str]:
    """[text(a, e) for a, e in zip(q, exponent)], each q nonzero: the digits placed by str(Decimal)'s own rule
    (Python's decimal.__str__, scientific off): with the coefficient's n digits and the exponent e, the point
    goes after e + n of them where e ≤ 0 and e + n > −6, else after the first with "E" and e + n − 1."""
    out = []
    for a, e in zip(q, exponent):
        digits = str(a)
        sign = ""
        if a < 0:
            sign, digits = "-", digits[1:]
        left = e + len(digits)
        if e <= 0 and left > -6:
            if e == 0:
                out.append(sign + digits)
            elif left <= 0:
                out.append(sign + "0." + "0" * -left + digits)
            else:
                out.append(sign + digits[:left] + "." + digits[left:])
        else:
            point = "." + digits[1:] if len(digits) > 1 else ""
            out.append(f"{sign}{digits[0]}{point}E{left - 1:+d}")
    return out


def text_lines(q: np.ndarray, exponent: np.ndarray, digits: int, blank: np.ndarray) -> list[bytes]:
    """Each row of q (a matrix) as one line of ASCII: every entry's text(q, exponent) followed by a comma, a
    ``blank`` entry as the comma alone; every other |q| has ``digits`` digits. A row's shown values joined
    the same way are equal to its line exactly where each is its text (no text holds a comma). Built as
    bytes in numpy: texts, Python's loop, took 0.13 s of a verifier's worker for 131,072 values."""
    rows, columns = q.shape
    a, negative, exponent, blank = np.abs(q).ravel(), q.ravel() < 0, exponent.ravel(), blank.ravel()
    chunks = -(-digits // 4)  # q's digits four at a time, through a table of their bytes
    parts = np.stack([(a // 10 ** (4 * k)) % 10**4 for k in reversed(range(chunks))], axis=1)
    figures = _FOUR[parts].reshape(len(a), 4 * chunks)[:, 4 * chunks - digits :]
    present = sorted(set(exponent[~blank].tolist()))  # not np.unique: it imports numpy.ma (10 ms a process)
    layouts = {e: [*_layout(digits, e), ord(",")] for e in present}
    made = np.zeros((len(a), 1 + max(map(len, layouts.values()), default=1)), dtype=np.uint8)  # a sign's room
    made[blank, 0] = ord(",")
    lengths = np.ones(len(a), dtype=np.int64)
    for e, layout in layouts.items():  # a byte's value, or −1 − i for q's i-th digit
        at = np.nonzero((exponent == e) & ~blank)[0]
        body = np.empty((len(at), len(layout) + 1), dtype=np.uint8)
        body[:, 0] = ord("-")
        for k, part in enumerate(layout, 1):
            body[:, k] = figures[at, -1 - part] if part < 0 else part
        ahead = ~negative[at]
        body[ahead, :-1] = body[ahead, 1:]  # no sign: the text a byte to the left, a NUL (dropped) after it
        body[ahead, -1] = 0
        made[at, : body.shape[1]] = body
        lengths[at] = len(layout) + negative[at]
    line = made[made != 0].tobytes()  # the texts one after another: no text holds a NUL
    ends = np.cumsum(lengths.reshape(rows, columns).sum(axis=1)).tolist()
    return [line[start:end] for start, end in zip([0, *ends[:-1]], ends)]


def _layout(n: int, e: int) -> list[int]:
    """text's bytes for q of n digits and exponent e: a byte's value, or −1 − i for q's i-th digit."""
    digit = [-1 - i for i in range(n)]
    left = e + n
    if e <= 0 and left > -6:
        if e == 0:
            return digit
        if left <= 0:
            return [ord("0"), ord("."), *[ord("0")] * -left, *digit]
        return [*digit[:left], ord("."), *digit[left:]]
    point = [ord("."), *digit[1:]] if n > 1 else []
    return [digit[0], *point, *f"E{left - 1:+d}".encode("ascii")]


__all__ = ["MOST", "significant_many", "text", "text_lines", "texts"]
