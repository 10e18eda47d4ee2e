"""Re-check a certificate of ``symattn compute --certify`` independently of the engine that made it.

A certificate holds, for every value, the enclosure ``[lo, hi]`` that decided its digits,
and the inputs (Q, K, V as exact fractions, the scale, the mask). This module recomputes
attention from those inputs on its own: exact fractions for the scores, then mpmath's
interval arithmetic (``mpmath.iv``), not the fixed-point engine of ``numeric.py``, for √d_k,
every exp, sum, weight and output. For each value it proves two things:

1. the exact value lies in ``[lo, hi]``: mpmath's interval, which holds the exact value,
   lies inside it (the precision is raised until it does, or a bound is seen to be wrong);
2. every point of ``[lo, hi]`` rounds half-up to the shown value, at the shown significant
   digits: so the shown value is the exact value correctly rounded.

Rational values are also checked against their exact fraction.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Mapping

from .errors import SpecError

CHECKED = ("sqrt_dk", "scale", "scores", "scaled", "exp", "exp_sum", "weights", "output")
START_BITS = 128
MAX_BITS = 1 << 16


@dataclass(frozen=True)
class Verification:
    checked: int  # values proved
    failures: tuple[str, ...]  # one line each: where, and what is wrong

    @property
    def ok(self) -> bool:
        return not self.failures and self.checked > 0


def _fraction(text: Any, where: str, source: str = "certificate") -> Fraction:
    if not isinstance(text, str) or not text or len(text) > 20000:
        raise SpecError(source, where, f"expected a decimal or fraction as a string, got {text!r}")
    try:
        if "/" in text:
            num, den = text.split("/")
            return Fraction(int(num), int(den))
        return Fraction(Decimal(text))
    except (ValueError, ZeroDivisionError, InvalidOperation):
        raise SpecError(source, where, f"not a number: {text!r}") from None


def _round_significant(x: Fraction, digits: int) -> Fraction:
    """x rounded half-up (away from zero on ties) to ``digits`` significant digits, exactly."""
    if x == 0:
        return Fraction(0)
    a = abs(x)
    k = (a.numerator.bit_length() - a.denominator.bit_length()) * 30103 // 100000  # about log10(a)
    while Fraction(10) ** k > a:  # make 10^k <= a < 10^(k+1)
        k -= 1
    while Fraction(10) ** (k + 1) <= a:
        k += 1
    unit = Fraction(10) ** (k - digits + 1)
    q = (a / unit * 2 + 1).__floor__() // 2
    return (q * unit) * (1 if x > 0 else -1)


def _shown_digits(text: str) -> int:
    return len(Decimal(text).as_tuple().digits)


class _Inputs:
    def __init__(self, cert: Mapping[str, Any], mask: Any, source: str):
        inputs = cert.get("inputs")
        if not isinstance(inputs, Mapping):
            raise SpecError(source, "certificate.inputs", "missing: the exact Q, K, V and scale")
        self.Q, self.K, self.V = ([[_fraction(x, f"certificate.inputs.{name}", source) for x in row]
                                   for row in inputs[name]] for name in ("Q", "K", "V"))
        self.d_k = len(self.Q[0])
        scale = inputs.get("scale")
        self.scale = "sqrt" if scale == "sqrt" else _fraction(scale, "certificate.inputs.scale", source)
        self.mask = mask

    def enclosures(self, prec: int) -> dict[str, Any]:
        """mpmath intervals of every value, and ``known``: the values this module knows exactly, by structure."""
        from mpmath import iv
        iv.prec = prec
        n, m, dv = len(self.Q), len(self.K), len(self.V[0])

        def ivf(x: Fraction):
            return iv.mpf(x.numerator) / x.denominator
        scores = [[sum((a * b for a, b in zip(q, k)), Fraction(0)) for k in self.K] for q in self.Q]
        root = _exact_root(self.d_k)
        sqrt_dk = iv.sqrt(self.d_k)
        c_exact = (None if root is None else 1 / Fraction(root)) if self.scale == "sqrt" else self.scale
        c = (1 / sqrt_dk) if c_exact is None else ivf(c_exact)
        known: dict[str, list[list[Fraction | None]]] = {
            "sqrt_dk": [[None if root is None else Fraction(root)]], "scale": [[c_exact]], "scores": scores}
        scaled, exps, sums, weights, outputs = [], [], [], [], []
        k_scaled, k_exp, k_sum, k_weights, k_out = [], [], [], [], []
        for i in range(n):
            allowed = [j for j in range(m) if self.mask[i][j]]
            z = [ivf(scores[i][j]) * c if self.mask[i][j] else None for j in range(m)]
            e = [iv.exp(x) if x is not None else iv.mpf(0) for x in z]
            total = sum(e[1:], e[0])
            w = [x / total for x in e]
            scaled.append(z)
            exps.append(e)
            sums.append([total])
            weights.append(w)
            outputs.append([sum((w[j] * ivf(self.V[j][k]) for j in range(m)), iv.mpf(0)) for k in range(dv)])
            # exactly known, by Lindemann–Weierstrass: e^z is rational only at z = 0
            zs = [None if c_exact is None and scores[i][j] != 0 else scores[i][j] * (c_exact or 0)
                  for j in range(m)]
            k_scaled.append(zs)
            ke = [(Fraction(1) if zs[j] == 0 else None) if self.mask[i][j] else Fraction(0) for j in range(m)]
            k_exp.append(ke)
            k_sum.append([sum(ke, Fraction(0)) if all(x is not None for x in ke) else None])
            groups: dict[Fraction, list[int]] = {}
            for j in allowed:
                groups.setdefault(scores[i][j], []).append(j)
            flat = len(groups) == 1 or c_exact == 0
            kw = [(Fraction(1, len(allowed)) if flat else None) if self.mask[i][j] else Fraction(0) for j in range(m)]
            k_weights.append(kw)
            row_out: list[Fraction | None] = []
            for k in range(dv):
                means = {sum((self.V[j][k] for j in g), Fraction(0)) / len(g) for g in groups.values()}
                row_out.append(means.pop() if flat or len(means) == 1 else None)
            k_out.append(row_out)
        known.update(scaled=k_scaled, exp=k_exp, exp_sum=k_sum, weights=k_weights, output=k_out)
        return {"sqrt_dk": [[sqrt_dk]], "scale": [[c]], "scores": [[ivf(x) for x in row] for row in scores],
                "scaled": scaled, "exp": exps, "exp_sum": sums, "weights": weights, "output": outputs,
                "known": known}


def _exact_root(n: int) -> int | None:
    from math import isqrt
    r = isqrt(n)
    return r if r * r == n else None


def _ends(x: Any) -> tuple[Fraction, Fraction]:
    """The ends of an mpmath interval, exactly: each a raw binary float (sign, mantissa, exponent, bits)."""
    def exact(end: tuple) -> Fraction:
        sign, man, exp, _ = end
        if not man and exp:  # ±infinity (or NaN): no finite bound
            raise OverflowError
        return Fraction(-man if sign else man) * Fraction(2) ** exp
    lo, hi = x._mpi_
    return exact(lo), exact(hi)


def _matrix(entry: Any, name: str) -> list[list[Any]]:
    # scalars and columns (exp_sum) as matrices, so every quantity is checked the same way
    if name in ("sqrt_dk", "scale"):
        return [[entry]]
    if name == "exp_sum":
        return [[x] for x in entry]
    return entry


def verify(data: Mapping[str, Any], source: str = "<certificate>") -> Verification:
    """Re-check every value of a certificate (the JSON of ``compute --certify``; ``source`` names it in errors)."""
    cert = data.get("certificate") if isinstance(data, Mapping) else None
    if not isinstance(cert, Mapping):
        raise SpecError(source, "certificate", "missing: not the output of symattn compute --certify")
    inputs = _Inputs(cert, data.get("mask"), source)
    rational = cert.get("rational", {})
    failures: list[str] = []
    pending: list[tuple[str, int, int, Fraction, Fraction, str]] = []
    checked = 0
    for name in CHECKED:
        if name not in data:
            continue
        values = _matrix(data[name]["value"], name)
        bounds = _matrix(data[name].get("bounds"), name) if data[name].get("bounds") is not None else None
        if bounds is None:
            failures.append(f"{name}: no bounds")
            continue
        for i, row in enumerate(values):
            for j, text in enumerate(row):
                where = f"{name}[{i + 1}][{j + 1}]"
                lo_text, hi_text = bounds[i][j]
                if text == "-inf":
                    if (lo_text, hi_text) != ("-inf", "-inf") or inputs.mask[i][j]:
                        failures.append(f"{where}: -inf where the mask allows the key")
                    else:
                        checked += 1
                    continue
                lo, hi = _fraction(lo_text, where), _fraction(hi_text, where)
                shown = _fraction(text, where)
                digits = _shown_digits(text)
                if lo > hi:
                    failures.append(f"{where}: the bounds are the wrong way round")
                elif _round_significant(lo, digits) != shown or _round_significant(hi, digits) != shown:
                    failures.append(f"{where}: {text} is not the rounding of every point of [{lo_text}, {hi_text}]")
                else:
                    pending.append((name, i, j, lo, hi, where))
                exact = _matrix(rational.get(name), name)[i][j] if rational.get(name) is not None else None
                if exact is not None and not (lo <= _fraction(exact, where) <= hi):
                    failures.append(f"{where}: the exact fraction {exact} is outside the bounds")
    bits = START_BITS
    while pending and bits <= MAX_BITS:
        boxes = inputs.enclosures(bits)
        still = []
        for name, i, j, lo, hi, where in pending:
            known = boxes["known"][name][i][j]
            if known is not None:  # exactly known here too (scores, exp 0, masked keys, flat rows)
                if lo <= known <= hi:
                    checked += 1
                else:
                    failures.append(f"{where}: the exact value {known} is outside [{lo}, {hi}]")
                continue
            if lo == hi:
                failures.append(f"{where}: a bound of zero width needs a value known exactly, and this one is not")
                continue
            try:
                a, b = _ends(boxes[name][i][j])
            except OverflowError:
                still.append((name, i, j, lo, hi, where))
                continue
            if lo <= a and b <= hi:
                checked += 1
            elif b < lo or a > hi:
                failures.append(f"{where}: the exact value is outside [{lo}, {hi}]")
            else:
                still.append((name, i, j, lo, hi, where))
        pending = still
        bits *= 2
    failures += [f"{where}: not decided at {MAX_BITS} bits" for *_, where in pending]
    return Verification(checked, tuple(failures))


__all__ = ["Verification", "verify"]
