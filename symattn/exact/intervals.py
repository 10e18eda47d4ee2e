"""Rigorous intervals of SymPy closed forms, in mpmath's interval arithmetic (its exponents unbounded).

:mod:`symattn.exact.numeric` rounds from them; an expression is built from rationals, +, *, powers, sqrt,
exp, tanh, cos and sin, as the exact models write them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import mpmath
import sympy
from mpmath import iv, libmp

from symattn.input.errors import EvaluationError


@contextmanager
def working_precision(bits: int) -> Iterator[None]:
    """Set mpmath's interval precision, restoring it afterwards."""
    saved = iv.prec
    iv.prec = bits
    try:
        yield
    finally:
        iv.prec = saved


def enclose(expr: sympy.Expr, prec: int, cache: dict | None = None) -> iv.mpf:
    """A rigorous interval for a closed form built from rationals, +, *, powers, sqrt, exp, tanh, cos and sin."""
    cache = {} if cache is None else cache
    hit = cache.get(expr)
    if hit is not None:
        return hit
    with working_precision(prec):
        result = _enclose(expr, prec, cache)
    cache[expr] = result
    return result


def _enclose(expr: sympy.Expr, prec: int, cache: dict) -> iv.mpf:
    if isinstance(expr, sympy.Rational):
        return iv.mpf(int(expr.p)) / iv.mpf(int(expr.q))
    if expr is sympy.E:
        return iv.exp(iv.mpf(1))
    if expr is sympy.pi:
        return +iv.pi  # force evaluation at this precision
    args = [enclose(a, prec, cache) for a in expr.args]
    if isinstance(expr, sympy.Add):
        total = args[0]
        for a in args[1:]:
            total = total + a
        return total
    if isinstance(expr, sympy.Mul):
        total = args[0]
        for a in args[1:]:
            total = total * a
        return total
    if isinstance(expr, sympy.exp):
        return _exp(args[0])
    if isinstance(expr, sympy.tanh):  # a cap's c·tanh(z/c): x occurs once, so this is tight
        return 1 - 2 / (iv.exp(2 * args[0]) + 1)
    if isinstance(expr, sympy.cos):  # rotations by position
        return iv.cos(args[0])
    if isinstance(expr, sympy.sin):
        return iv.sin(args[0])
    if isinstance(expr, sympy.Pow):
        base, exponent = expr.args
        if isinstance(exponent, sympy.Integer):
            return args[0] ** int(exponent)
        if exponent == sympy.S.Half:
            return iv.sqrt(args[0])
        if isinstance(exponent, sympy.Rational) and exponent == -sympy.S.Half:
            return 1 / iv.sqrt(args[0])
        return iv.exp(args[1] * iv.log(args[0]))
    raise EvaluationError(f"cannot evaluate {expr} numerically (does it contain a symbol without a value?)")


HUGE = 1 << 20  # |x| past any z the limits let a model reach (ABS_Z): only a carried absurd claim (1e5000)


def _exp(x: iv.mpf) -> iv.mpf:
    """e^x rigorously; at a huge end, bounded by powers of two (mpmath takes minutes for e^(−10^5000)):
    2^v < e^v < 4^v above HUGE, 0 < e^v < 2^v below −HUGE."""
    big = libmp.from_int(HUGE)

    def end(v: tuple, up: bool) -> tuple:
        if libmp.mpf_lt(v, libmp.mpf_neg(big)):
            return libmp.from_man_exp(1, libmp.to_int(v, libmp.round_ceiling)) if up else libmp.fzero
        if libmp.mpf_gt(v, big):
            n = libmp.to_int(v, libmp.round_ceiling if up else libmp.round_floor)
            return libmp.from_man_exp(1, 2 * n if up else n)
        return libmp.mpf_exp(v, iv.prec, libmp.round_ceiling if up else libmp.round_floor)

    lo, hi = x._mpi_
    return iv.mpf([mpmath.mp.make_mpf(end(lo, False)), mpmath.mp.make_mpf(end(hi, True))])


__all__ = ["HUGE", "enclose", "working_precision"]
