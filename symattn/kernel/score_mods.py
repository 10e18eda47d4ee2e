"""Score modifiers on the float64 path, each with its rigorous bound and its arb form for refinement; a
part of :mod:`symattn.variants` names the rule its keyword takes (``Part.kernel_rule``). Each acts on the
scaled scores z = c·q·k before the mask and the softmax, in the order variants.rule_order gives: a cap before
the distance bias (FlashAttention's, compare's keywords' default) or after it (a spec's).

- **distance bias** (``Bias``): z ← z − m·|i + offset − j|, offset 0 (top-left) or M − N (bottom-right,
  FlashAttention's). The slope m is a float as given (a float32 value is exact); m·|…| is
  one rounding, u|m·dist| (none for a float32 m: 24 + 14 bits), and the subtraction one more:
  e_z' = e_z + u|m·dist| + u|z'|.
- **tanh cap** (``Cap``): z ← c·tanh(z/c), c a float. x̂ = fl(ẑ/c) is within e_z/c + u|x̂| of z/c,
  and |tanh′| ≤ 1, so tanh(x̂) is within that of tanh(z/c). tanh(x̂) = sign(x̂)·(1 − E)/(1 + E) with
  E = e^{−2|x̂|} by float64's own exp (within RHO·E, or TINY below −700): τ(E) = (1 − E)/(1 + E) has
  |τ′| ≤ 2 on E ≥ 0, so the exp's error adds 2·RHO·E/(1 − RHO) (2·TINY below: its argument −2|x̂| is
  exact, so below −700 its exp is below TINY; x̂'s own error goes in through e_x); 1 − Ê, 1 + Ê and the
  quotient round three times, 3.01u|τ̂|; the product with c once more:
  e_z' = u|ẑ'| + c·(e_z/c + u|x̂| + 2·RHO·Ê/(1 − RHO) + 2·TINY + 3.01u|τ̂|), times SAFETY.
- **denominator logit** (``Denominator``, a DENOMINATOR part's): leaves z alone; its logit s (a float,
  exact, not scaled) is one more term e^s of each row's denominator, with no value (gpt-oss's; FlashAttention's
  ``learnable_sink``). The float64 path shifts by M = max(max_j z_j, s), so e^(s − M) is its exps' own
  (``float64.extra_term``: s − M rounds once) and joins the row sum ℓ with one rounding more
  (``float64.joined``); arb adds e^s to ℓ.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from symattn.input.errors import ShapeError, SpecError
from symattn.input.records import record
from symattn.kernel.float64 import FLOOR, RHO, SAFETY, TINY, U, exp_bounded


def _rows(rows: Any, count: int) -> np.ndarray:
    """The query indices of a block (a slice or an index array)."""
    return np.arange(rows.start or 0, (rows.start or 0) + count) if isinstance(rows, slice) else np.asarray(rows)


@record
class Bias:
    """z − slope·|i + offset − j|. A head of stacked query heads (dK, dV of a group: gradient_heads)
    has a slope per head: row r is query r mod ``rows`` of head r // ``rows``."""

    slopes: tuple[float, ...]
    rows: int
    offset: int
    positions: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # a spec's (queries', keys'): |p_i − p_j|

    def stacked(self, mods: list[Any]) -> Bias:
        """The bias of a group's stacked rows: each head's slope, head by head."""
        return Bias(tuple(s for b in mods for s in b.slopes), self.rows, self.offset, self.positions)

    def distance(self, i: Any, j: Any) -> Any:
        """|i + offset − j| of query i and key j (numpy arrays broadcast), or of their positions where given."""
        if self.positions is None:
            return np.abs(i + self.offset - j)
        return np.abs(np.asarray(self.positions[0])[i] - np.asarray(self.positions[1])[j])

    def at(self, r: np.ndarray, m: int) -> np.ndarray:
        slope = np.asarray(self.slopes)[r // self.rows]
        return slope[:, None] * self.distance((r % self.rows)[:, None], np.arange(m)[None, :])

    def float64(self, Z: np.ndarray, eZ: np.ndarray, rows: Any) -> tuple[np.ndarray, np.ndarray]:
        b = self.at(_rows(rows, Z.shape[0]), Z.shape[1])
        out = Z - b
        return out, SAFETY * (eZ + U * np.abs(b) + U * np.abs(out))

    def arb(self, z: Any, r: int, j: int) -> Any:
        from flint import arb

        m = Fraction(self.slopes[r // self.rows]) * int(self.distance(r % self.rows, j))
        return z - arb(m.numerator) / m.denominator


@record
class Cap:
    """c·tanh(z / c)."""

    c: float

    def stacked(self, mods: list[Any]) -> Cap:
        return self  # one c for every head of a call

    def float64(self, Z: np.ndarray, eZ: np.ndarray, rows: Any) -> tuple[np.ndarray, np.ndarray]:
        tau, e_tau = self.tanh(Z, eZ)
        out = self.c * tau
        return out, SAFETY * (U * np.abs(out) + self.c * e_tau)

    def derivative(self, Z: np.ndarray, eZ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """1 − tanh²(z/c), the cap's derivative, and its bound: |1 − τ̂² − (1 − τ²)| ≤ (2|τ̂| + e_τ)·e_τ,
        and τ̂² and 1 − τ̂² round once each."""
        tau, e_tau = self.tanh(Z, eZ)
        g = 1.0 - tau * tau
        return g, SAFETY * ((2 * np.abs(tau) + e_tau) * e_tau + U * tau * tau + U * np.abs(g))

    def tanh(self, Z: np.ndarray, eZ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """tanh(z/c) and its bound (the module's derivation; |x̂| ≤ 1/2 by :func:`_expm1`)."""
        c = self.c
        x = Z / c
        ex = eZ / c + U * np.abs(x)
        t = -2.0 * np.abs(x)  # exact
        E = exp_bounded(t)
        tau = np.sign(x) * (1.0 - E) / (1.0 + E)
        e_exp = np.where(t < FLOOR, 2 * TINY, 2 * RHO * E / (1 - RHO))
        near = t >= -1.0  # 1 − E cancels: RHO·E would be an absolute bound on a small τ
        if near.any():
            N, e_N = _expm1(np.where(near, t, 0.0))
            N = -N  # 1 − e^t ∈ [0, 0.633]
            small = np.sign(x) * N / (2.0 - N)
            tau, e_exp = np.where(near, small, tau), np.where(near, 1.07 * e_N, e_exp)
        return tau, SAFETY * (ex + e_exp + 3.01 * U * np.abs(tau))

    def arb(self, z: Any, i: int, j: int) -> Any:
        from flint import arb

        c = Fraction(self.c)
        cap = arb(c.numerator) / c.denominator
        return cap * (z / cap).tanh()

    def arb_derivative(self, z: Any) -> Any:
        from flint import arb

        c = Fraction(self.c)
        t = (z / (arb(c.numerator) / c.denominator)).tanh()
        return 1 - t * t


_EXPM1 = [1.0 / math.factorial(k + 1) for k in range(18)]  # e^t − 1 = t·Σ_k t^k/(k + 1)!, k ≤ 17


def _expm1(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """e^t − 1 for t ∈ [−1, 0] and a bound relative to it, where 1 − e^t by an exp loses RHO absolute.

    e^t − 1 = t·p(t), p = Σ_{k≤17} t^k/(k + 1)! + e^ξ t^18/19! (Lagrange, ξ ∈ [t, 0], e^ξ ≤ 1): the rest is at
    most 1/19! < 8.3e-18. Horner's p̂ from the rounded coefficients (each within u of c_k: at most
    u·Σ c_k |t|^k = u(e^|t| − 1)/|t| ≤ 1.72u in all) is within Higham's running bound u(2μ − |p̂|) of p of
    those coefficients (Accuracy and Stability of Numerical Algorithms, Algorithm 5.1; μ sums non-negative
    floats, its own roundings far below SAFETY). t·p̂ rounds once more. With N = 1 − e^t ∈ [0, 0.633],
    τ = N/(2 − N) has |dτ/dN| = 2/(2 − N)² ≤ 1.07, and 2 − N̂ and the quotient round twice (3.01u|τ̂|)."""
    p = np.full(t.shape, _EXPM1[-1])
    mu = np.abs(p) / 2
    a = np.abs(t)
    for c in reversed(_EXPM1[:-1]):
        p = p * t + c
        mu = a * mu + np.abs(p)
    e_p = U * (2 * mu - np.abs(p)) + 1.72 * U + 8.3e-18
    value = t * p
    return value, SAFETY * (a * e_p + U * np.abs(value))


@record
class Denominator:
    """A logit per query head, in the denominator only (no value). A head of stacked query heads (dK, dV of a GQA
    group) has one per head: row r is query r mod ``rows`` of head r // ``rows``, as ``Bias``."""

    logits: tuple[float, ...]
    rows: int

    def stacked(self, mods: list[Any]) -> Denominator:
        return Denominator(tuple(s for mod in mods for s in mod.logits), self.rows)

    def float64(self, Z: np.ndarray, eZ: np.ndarray, rows: Any) -> tuple[np.ndarray, np.ndarray]:
        return Z, eZ  # the scores are the plain ones

    def arb(self, z: Any, i: int, j: int) -> Any:
        return z

    def logit(self, rows: Any, count: int) -> np.ndarray:
        """The logit of each of the block's query rows, a column."""
        return np.asarray(self.logits)[_rows(rows, count) // self.rows][:, None]

    def arb_exp(self, i: int) -> Any:
        """e^s of query row i as an arb ball (s exactly the float given)."""
        from flint import arb

        s = Fraction(self.logits[i // self.rows])
        return (arb(s.numerator) / s.denominator).exp()


LOGIT_LIMIT = 2.0**40  # the figures of a larger denominator logit's outputs lie past 10^(−10^13) (kernel/deviation.py)


def of_argument(kind: str, name: str, value: Any, batch: int, heads: int, align: str, positions: Any = None) -> Any:
    """A keyword's rule for (batch b, head h) of n queries and m keys: ``rule(b, h, n, m)``; None where the
    value is None (or a cap of 0, FlashAttention's "none"). ``kind``: the part's (``Part.kernel_rule``);
    ``positions``: a spec's (queries', keys'), which a distance bias counts instead of the alignment."""
    if value is None:
        return None
    if kind == "tanh_cap":
        if not isinstance(value, bool) and isinstance(value, (int, float)) and value == 0:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e300:
            raise SpecError(name, None, f"expected a positive number (FlashAttention's {name}), got {value!r}")
        cap = Cap(float(value))
        return _ordered(kind, lambda b, h, n, m: cap)
    from symattn.kernel.tensors import exact_array

    a = exact_array(value if hasattr(value, "shape") else np.asarray(value, dtype=np.float64), name).values
    if kind == "denominator_logit":  # one logit per query head, as FlashAttention's learnable_sink (H,)
        if a.shape != (heads,):
            raise ShapeError(name, "shape", f"{tuple(a.shape)}; expected ({heads},), a finite logit per query head")
        for h, s in enumerate(a.tolist()):  # past 2^40 every other weight is below e^(−10^12): refused, not ranked
            if not -np.inf < s <= LOGIT_LIMIT:
                raise SpecError(name, None, f"{s!r} is not a finite logit at most 2^40 (1099511627776)", index=(h,))
        return _ordered(kind, lambda b, h, n, m: Denominator((float(a[h]),), n))
    given = a.shape
    if a.shape == (heads,):
        a = np.broadcast_to(a, (batch, heads))
    if a.shape != (batch, heads):
        raise ShapeError(name, "shape", f"{given}; expected ({heads},) or ({batch}, {heads}), finite")
    bad = np.argwhere(~np.isfinite(a))
    if bad.size:  # the place as given: (h,) of a slope a head, (b, h) of a slope a batch and head
        place = tuple(int(x) for x in bad[0])[-len(given) :]
        raise SpecError(name, None, f"{float(a[tuple(bad[0])])!r} is not a finite slope", index=place)

    def bias(b: int, h: int, n: int, m: int) -> Bias:  # the distance aligned as the causal mask is
        return Bias((float(a[b, h]),), n, m - n if align == "bottom-right" else 0, positions)

    return _ordered(kind, bias)


def _ordered(kind: str, rule: Any) -> Any:
    rule.kind = kind  # sorted by the order variants.rule_order gives (FlashAttention's, or a spec's)
    return rule


__all__ = ["Bias", "Cap", "Denominator", "of_argument"]
