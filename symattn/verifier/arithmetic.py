"""Enclosures of the exact values of one head's row, in integers and mpmath's directed roundings.

Every input is a float32 value, so each matrix is exactly integers · 2^-shift, and each score is an exact
integer. Everything else is an interval of integers at a binary point 2^-P, each end rounded outward:

- e^(c·(S_j − S_max)): the exponent's ends by mpmath's ``mpf_mul`` rounded down and up (c enclosed by
  ``mpf_sqrt`` and ``mpf_div`` rounded outward), then ``mpf_exp`` rounded down and up, then floor and
  ceiling at 2^-P (what ``mpmath.iv.exp`` does at an interval's ends); e^0 = 1 exactly; masked keys 0;
- sums and products with exact integers by midpoint and radius: Σ v·x over x in [lo, hi] is exactly
  (Σ v·(lo + hi) ± Σ |v|·(hi − lo)) / 2; a product of two intervals by |a|·s + r·|b| + r·s;
- log ℓ by ``mpf_log`` rounded down and up, ln 2 by ``mpf_ln2`` both ways; divisions at the end as
  exact fractions.

The backward pass is the one of docs/kernel.md: dP = dO·Vᵀ, D_i = Σ_j A_ij dP_ij, dS = A ∘ (dP − D),
dQ = c·dS·K, dK = c·dSᵀ·Q, dV = Aᵀ·dO, dK and dV summed over a group's query heads.

A denominator logit s (a float, exact) is one more term e^s of each row's ℓ, with no value: every
term is shifted by the larger of c·S_max and s, so that none exceeds 1 (e^(s − c·S_max) is enclosed as the
others are), the LSE is that shift plus log ℓ, and the weights A = e/ℓ, which add up to less than 1, go
through the same backward formulas.

A tanh cap c maps each z (after the bias) to c·tanh(z/c); with ``tanh_cap_order`` "before-bias" it maps the
scaled score first and the bias comes after, z = c·tanh(t/c) − m·|i − j| (FlashAttention's order), each end of
the capped interval less the exact bias, rounded outward. tanh(y) = sign(y)·(1 − E)/(1 + E) with
E = e^(−2|y|), which falls as E grows: each end of z's interval takes E from ``mpf_exp`` rounded the other
way, then the subtraction, sum, division and product by c each rounded outward, so the capped interval holds
c·tanh of every point of z's (tanh rises). Every term is then e^(z_j − z_top) with both ends enclosed so.
Backward, dS_ij is multiplied by the cap's derivative 1 − tanh²(y) = 4E/(1 + E)², which rises with E: its
ends come from E's at the largest and the smallest |y| of the interval, exactly as fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction
from operator import mul

from mpmath.libmp import (
    from_int,
    from_man_exp,
    mpf_abs,
    mpf_add,
    mpf_div,
    mpf_exp,
    mpf_ln2,
    mpf_log,
    mpf_mul,
    mpf_neg,
    mpf_sqrt,
    mpf_sub,
)

from .reading import Inputs

_LN2_ABOVE = 0.6932  # above ln 2: a float exponent below −(P + 1)·this is certainly below −P·ln 2


def integers(rows: list[list[float]]) -> tuple[list[list[int]], int]:
    """rows = ints · 2^-shift exactly (every float is a dyadic rational)."""
    ratios = [[x.as_integer_ratio() for x in row] for row in rows]
    shift = max((d.bit_length() - 1 for row in ratios for _, d in row), default=0)
    return [[n << (shift - d.bit_length() + 1) for n, d in row] for row in ratios], shift


def fraction(x: tuple) -> Fraction:
    """An mpf value exactly."""
    sign, man, exp, _ = x
    value = Fraction(man) * Fraction(2) ** exp
    return -value if sign else value


def _mpf(x: float) -> tuple:
    """A float as an mpf, exactly."""
    n, d = x.as_integer_ratio()
    return from_man_exp(n, 1 - d.bit_length())


def _exp_ends(lo: tuple, hi: tuple, bits: int) -> tuple[int, int]:
    """e^t for t in [lo, hi] at the binary point 2^-bits, rounded outward (0 and 1 unit below 2^-bits)."""
    if fraction(hi) < -(bits + 1) * Fraction(_LN2_ABOVE):
        return 0, 1
    return fixed(mpf_exp(lo, bits, "f"), bits, False), fixed(mpf_exp(hi, bits, "c"), bits, True)


def _tanh_end(y: tuple, bits: int, up: bool) -> tuple:
    """tanh(y) rounded down (``up`` False) or up: sign(y)·(1 − E)/(1 + E), E = e^(−2|y|) taken the other way."""
    negative = y[0] == 1 and y[1] != 0
    larger = up != negative  # the end wanted of tanh(|y|): a smaller E gives a larger one
    E = mpf_exp(mpf_mul(mpf_abs(y), from_int(-2)), bits, "f" if larger else "c")  # the product is exact
    num = mpf_sub(from_int(1), E, bits, "c" if larger else "f")
    den = mpf_add(from_int(1), E, bits, "f" if larger else "c")
    r = mpf_div(num, den, bits, "c" if larger else "f")
    return mpf_neg(r) if negative else r


def _cap_slope(lo: tuple, hi: tuple, bits: int) -> tuple[int, int]:
    """1 − tanh²(y) for y in [lo, hi] at 2^-bits, rounded outward: 4E/(1 + E)², E = e^(−2|y|), rises with E."""
    ends = [abs(fraction(lo)), abs(fraction(hi))]
    least = Fraction(0) if fraction(lo) <= 0 <= fraction(hi) else min(ends)
    out = []
    for a, rounding in ((max(ends), "f"), (least, "c")):
        E = fraction(mpf_exp(from_man_exp(*_dyadic(-2 * a)), bits + 16, rounding)) if a else Fraction(1)
        out.append(4 * E / (1 + E) ** 2)
    g_lo, g_hi = out
    return math.floor(g_lo * (1 << bits)), math.ceil(g_hi * (1 << bits))


def _dyadic(x: Fraction) -> tuple[int, int]:
    """A dyadic fraction as (mantissa, exponent)."""
    d = x.denominator
    assert d & (d - 1) == 0  # ends of mpf values: powers of two below
    return x.numerator, 1 - d.bit_length()


def fixed(x: tuple, bits: int, up: bool) -> int:
    """A non-negative mpf at the binary point 2^-bits, rounded down (or up)."""
    _, man, exp, _ = x
    shift = exp + bits
    if shift >= 0:
        return man << shift
    return -((-man) >> -shift) if up else man >> -shift


class Head:
    """One (batch, query head) of the inputs, its group's K and V, as exact integers."""

    def __init__(self, exact: Exact, b: int, h: int):
        t = exact.inputs
        self.exact, self.g = exact, h // (t.heads // t.kv_heads)
        n, m = t.queries, t.keys
        q0, k0 = (b * t.heads + h) * n, (b * t.kv_heads + self.g) * m
        self.Q = exact.Q[q0 : q0 + n]
        self.K, self.V = exact.K[k0 : k0 + m], exact.V[k0 : k0 + m]
        self.dO = exact.dO[q0 : q0 + n] if exact.dO is not None else None
        self.K_columns = [list(c) for c in zip(*self.K)]
        self.V_columns = [list(c) for c in zip(*self.V)]
        self.logit = None if t.logits is None else _mpf(t.logits[h])  # the head's denominator logit s, exactly
        self.slope = None if t.slopes is None else t.slopes[h]  # the head's distance bias −m·|i − j|
        self.cap = None if t.tanh_cap is None else _mpf(t.tanh_cap)  # c of c·tanh(z/c), after the bias
        self.cap_first = t.cap_first  # or before it: z = c·tanh(t/c) − m·|i − j|, t the scaled score

    def allowed(self, i: int) -> list[int]:
        mask = self.exact.inputs.mask
        return list(range(len(self.K))) if mask is None else [j for j, x in enumerate(mask[i]) if x == "1"]

    def scores(self, i: int) -> list[int]:
        q = self.Q[i]
        return [sum(map(mul, q, k)) for k in self.K]

    def grads(self, i: int) -> list[int]:
        """dP_ij = dO_i · V_j, exactly (unit 2^-(gs + vs))."""
        g = self.dO[i]  # type: ignore[index]
        return [sum(map(mul, g, v)) for v in self.V]


class Exact:
    """The certificate's inputs as integers, and the scale's enclosure at a precision."""

    def __init__(self, inputs: Inputs):
        self.inputs = inputs
        self.Q, self.qs = integers(inputs.Q)
        self.K, self.ks = integers(inputs.K)
        self.V, self.vs = integers(inputs.V)
        self.dO: list[list[int]] | None = None
        self.gs = 0
        if inputs.dO is not None:
            self.dO, self.gs = integers(inputs.dO)
        self._heads: dict[tuple[int, int], Head] = {}
        self._scales: dict[int, tuple[tuple, tuple]] = {}

    def head(self, b: int, h: int) -> Head:
        if (b, h) not in self._heads:
            if len(self._heads) >= 8:  # a few heads at a time (a group's): their columns are lists
                self._heads.clear()
            self._heads[(b, h)] = Head(self, b, h)
        return self._heads[(b, h)]

    def scale(self, bits: int) -> tuple[tuple, tuple]:
        """(c rounded down, c rounded up), c = the scale, or 1/√d_k."""
        if bits not in self._scales:
            self._scales[bits] = self._scale(bits)
        return self._scales[bits]

    def _scale(self, bits: int) -> tuple[tuple, tuple]:
        c = self.inputs.scale
        if c is None:
            d = from_int(len(self.inputs.Q[0]))
            return mpf_div(from_int(1), mpf_sqrt(d, bits, "c"), bits, "f"), mpf_div(
                from_int(1), mpf_sqrt(d, bits, "f"), bits, "c"
            )
        p, q = from_int(c.numerator), from_int(c.denominator)
        return mpf_div(p, q, bits, "f"), mpf_div(p, q, bits, "c")


class Row:
    """Row i of a head at the binary point 2^-bits: its exps' ends, ℓ's ends, and what depends on them."""

    def __init__(self, head: Head, i: int, bits: int):
        ex = head.exact
        self.head, self.i, self.bits = head, i, bits
        self.allowed = head.allowed(i)
        S = head.scores(i)
        self.c = ex.scale(bits + 16)
        shift = ex.qs + ex.ks
        c_float = float(fraction(self.c[1]))
        m_float = head.slope or 0.0
        # the shift's key: the largest score (with a bias, the largest z as floats tell it: any key would do,
        # and this one leaves every term at most about 1)
        top = max(self.allowed, key=S.__getitem__)
        cap = None if head.cap is None else float(fraction(head.cap))
        first = cap is not None and head.cap_first  # the cap before the bias: z's order is not t's
        c_cap = cap or 1.0

        def z_first(j: int) -> float:  # z_j = c·tanh(t_j/c) − m·|i − j| as floats tell it
            return c_cap * math.tanh(math.ldexp(float(S[j]) * c_float, -shift) / c_cap) - m_float * abs(i - j)

        if first:
            top = max(self.allowed, key=z_first)
        elif head.slope is not None:
            top = max(self.allowed, key=lambda j: math.ldexp(float(S[j]) * c_float, -shift) - m_float * abs(i - j))
        self.S, self.top, self.near, self.top_key = S, S[top], abs(i - top), top
        m = len(head.K)
        self.lo, self.hi = [0] * m, [0] * m
        one = 1 << bits
        extra, self.over = self._logit_term(bits)  # e^(s − z_top)'s ends, or (1, 1) where s is above z_top
        for j in self.allowed:
            gap, farther = S[j] - self.top, abs(i - j) - self.near
            if gap == 0 and (farther == 0 or head.slope is None) and self.over is None:
                self.lo[j] = self.hi[j] = one  # z_j = z_top: the same t, capped or not
                continue
            t_gap = math.ldexp(gap * c_float, -shift) - m_float * farther
            if first:
                t_gap = z_first(j) - z_first(top)
            elif cap is not None:  # z's gap, capped: the floats are far within the margin of _LN2_ABOVE
                t_top = math.ldexp(self.top * c_float, -shift) - m_float * self.near
                t_gap = cap * (math.tanh((t_top + t_gap) / cap) - math.tanh(t_top / cap))
            if t_gap < -(bits + 1) * _LN2_ABOVE:
                self.hi[j] = 1  # e^t < 2^-bits
                continue
            if cap is not None:  # e^(z_j − z_top), or e^(z_j − s) where s is above z_top
                P = bits + 16
                z_lo, z_hi = self.z_ends(j, P)
                base = (head.logit, head.logit) if self.over is not None else self.shift(P)
                d_lo, d_hi = mpf_sub(z_lo, base[1], bits, "f"), mpf_sub(z_hi, base[0], bits, "c")
                self.lo[j], self.hi[j] = _exp_ends(d_lo, d_hi, bits)
                continue
            g = from_man_exp(gap, -shift)
            t_lo, t_hi = mpf_mul(g, self.c[1], bits, "f"), mpf_mul(g, self.c[0], bits, "c")
            if head.slope is not None:  # − m·(|i − j| − |i − top|), exactly
                bias = mpf_mul(_mpf(head.slope), from_int(farther))
                t_lo, t_hi = mpf_sub(t_lo, bias, bits, "f"), mpf_sub(t_hi, bias, bits, "c")
            if self.over is not None:  # shifted by s: e^(c·(S_j − S_max) − (s − c·S_max))
                t_lo, t_hi = mpf_sub(t_lo, self.over[1], bits, "f"), mpf_sub(t_hi, self.over[0], bits, "c")
            self.lo[j], self.hi[j] = _exp_ends(t_lo, t_hi, bits)
        self.L = (sum(self.lo) + extra[0], sum(self.hi) + extra[1])
        self.mid = [a + b for a, b in zip(self.lo, self.hi)]  # at 2^-(bits + 1)
        self.rad = [b - a for a, b in zip(self.lo, self.hi)]

    def _logit_term(self, bits: int) -> tuple[tuple[int, int], tuple[tuple, tuple] | None]:
        """The denominator logit's term of ℓ at 2^-bits, and the ends of s − c·S_max where that is above 0, in
        which case every term is shifted by s instead of c·S_max (so that none exceeds 1); ((0, 0), None)
        without one."""
        s = self.head.logit
        if s is None:
            return (0, 0), None
        P = bits + 16
        z_lo, z_hi = self.shift(P)
        d_lo, d_hi = mpf_sub(s, z_hi, P, "f"), mpf_sub(s, z_lo, P, "c")
        if d_lo[0] == 0 and d_lo[1]:  # d > 0: s is the row's maximum
            return (1 << bits, 1 << bits), (d_lo, d_hi)
        return _exp_ends(d_lo, d_hi, bits), None

    def shift(self, P: int) -> tuple[tuple, tuple]:
        """The ends of the shift's z = c·S_top − m·|i − top| (capped where the head has a cap), at P bits."""
        return self.z_ends(self.top_key, P)

    def t_ends(self, j: int, P: int) -> tuple[tuple, tuple]:
        """The ends of t_j = c·S_j − m·|i − j|, the score before a cap (c·S_j where the cap comes first), at P
        bits."""
        ex = self.head.exact
        score = from_man_exp(self.S[j], -(ex.qs + ex.ks))
        c_lo, c_hi = self.c if self.S[j] >= 0 else self.c[::-1]
        lo, hi = mpf_mul(score, c_lo, P, "f"), mpf_mul(score, c_hi, P, "c")
        if self.head.slope is not None and not (self.head.cap is not None and self.head.cap_first):
            lo, hi = self._biased(lo, hi, j, P)
        return lo, hi

    def _biased(self, lo: tuple, hi: tuple, j: int, P: int) -> tuple[tuple, tuple]:
        """[lo, hi] − m·|i − j|, each end rounded outward."""
        bias = mpf_mul(_mpf(self.head.slope or 0.0), from_int(abs(self.i - j)))
        return mpf_sub(lo, bias, P, "f"), mpf_sub(hi, bias, P, "c")

    def z_ends(self, j: int, P: int) -> tuple[tuple, tuple]:
        """The ends of z_j: t_j, or c·tanh(t_j/c) with a cap (tanh rises, so each end maps to its own), minus
        the bias where the cap comes first."""
        lo, hi = self.t_ends(j, P)
        cap = self.head.cap
        if cap is None:
            return lo, hi
        y_lo, y_hi = mpf_div(lo, cap, P, "f"), mpf_div(hi, cap, P, "c")
        lo, hi = mpf_mul(cap, _tanh_end(y_lo, P, False), P, "f"), mpf_mul(cap, _tanh_end(y_hi, P, True), P, "c")
        if self.head.slope is not None and self.head.cap_first:
            lo, hi = self._biased(lo, hi, j, P)
        return lo, hi

    def output(self, k: int) -> tuple[Fraction, Fraction]:
        v = self.head.V_columns[k]
        mid, rad = sum(map(mul, v, self.mid)), sum(map(mul, map(abs, v), self.rad))
        n_lo, n_hi = mid - rad, mid + rad
        L_lo, L_hi = self.L
        unit = self.head.exact.vs + 1
        return Fraction(n_lo, (L_hi if n_lo >= 0 else L_lo) << unit), Fraction(
            n_hi, (L_lo if n_hi >= 0 else L_hi) << unit
        )

    def lse(self, base2: bool) -> tuple[Fraction, Fraction]:
        P = self.bits + 16
        s = self.head.logit
        shift: tuple = self.shift(P) if self.over is None else (s, s)  # by s exactly, where it is above z_top
        lo = mpf_add(shift[0], mpf_log(from_man_exp(self.L[0], -self.bits), P, "f"), P, "f")
        hi = mpf_add(shift[1], mpf_log(from_man_exp(self.L[1], -self.bits), P, "c"), P, "c")
        if not base2:
            return fraction(lo), fraction(hi)
        ln2 = (mpf_ln2(P, "f"), mpf_ln2(P, "c"))
        a = mpf_div(lo, ln2[1] if lo[0] == 0 else ln2[0], P, "f")  # lo ≥ 0: over the larger ln 2
        b = mpf_div(hi, ln2[0] if hi[0] == 0 else ln2[1], P, "c")
        return fraction(a), fraction(b)

    def backward(self) -> None:
        """dS_ij as midpoints and radii at 2^-(bits + 1 + gs + vs), and A's at 2^-(bits + 1)."""
        P = self.bits
        dP = self.head.grads(self.i)
        L_lo, L_hi = self.L
        a_mid, a_rad = [], []
        for lo, hi in zip(self.lo, self.hi):
            a, z = (lo << P) // L_hi, -((-(hi << P)) // L_lo)
            a_mid.append(a + z)
            a_rad.append(z - a)
        D_mid, D_rad = sum(map(mul, a_mid, dP)), sum(map(mul, a_rad, map(abs, dP)))
        s_mid, s_rad = [], []
        for am, ar, p in zip(a_mid, a_rad, dP):
            y_mid = (p << (P + 1)) - D_mid
            mid, rad = am * y_mid, abs(am) * D_rad + ar * (abs(y_mid) + D_rad)
            low = mid >> (P + 1)
            s_mid.append(low)
            s_rad.append(-((-rad) >> (P + 1)) + (1 if low << (P + 1) != mid else 0))
        if self.head.cap is not None:  # dS_ij·(1 − tanh²(t_ij/c)), the cap's derivative in [g_lo, g_hi] ⊂ [0, 1]
            for j in self.allowed:
                t_lo, t_hi = self.t_ends(j, P + 16)
                cap = self.head.cap
                g = _cap_slope(mpf_div(t_lo, cap, P + 16, "f"), mpf_div(t_hi, cap, P + 16, "c"), P)
                x = (s_mid[j] - s_rad[j], s_mid[j] + s_rad[j])
                ends = [a * b for a in x for b in g]
                lo, hi = min(ends) >> P, -((-max(ends)) >> P)
                s_mid[j] = (lo + hi) >> 1
                s_rad[j] = hi - s_mid[j]
        self.a_mid, self.a_rad, self.s_mid, self.s_rad = a_mid, a_rad, s_mid, s_rad

    def dq(self, c: int) -> tuple[int, int]:
        """dQ_ic / scale at 2^-(bits + 1 + gs + vs + ks), as (midpoint, radius)."""
        k = self.head.K_columns[c]
        return sum(map(mul, self.s_mid, k)), sum(map(mul, self.s_rad, map(abs, k)))


def scaled(mid: int, rad: int, unit: int, c: tuple[tuple, tuple]) -> tuple[Fraction, Fraction]:
    """c · [mid − rad, mid + rad] · 2^-unit, c > 0 in [c[0], c[1]]."""
    c_lo, c_hi = fraction(c[0]), fraction(c[1])
    x_lo, x_hi = Fraction(mid - rad, 1 << unit), Fraction(mid + rad, 1 << unit)
    return x_lo * (c_hi if x_lo < 0 else c_lo), x_hi * (c_hi if x_hi > 0 else c_lo)


__all__ = ["Exact", "Head", "Row", "fraction", "scaled"]
