"""The derivation's step of the online softmax: the focus row block by block, the identity with the softmax's
output, and with ``split_keys`` each split's (O_s, LSE_s) and their merge."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import sympy

from symattn.exact import numeric
from symattn.exact.num import NEG_INFINITY, Num, NumRow
from symattn.exact.rounding import exact_or_rounded, from_model
from symattn.input.decimals import round_half_up, terminating_decimals
from symattn.variants.tiling import Block, SplitPart, Tiling
from symattn.variants.tiling_head import Tiled


def _num(expr: sympy.Expr, decimals: int) -> Num:
    if expr is sympy.S.NegativeInfinity:
        return NEG_INFINITY
    exact = numeric.as_fraction(expr)
    if exact is not None:
        return exact_or_rounded([[exact]], decimals)[0][0]
    return Num(numeric.round_expr(expr, decimals), False)


def tiling_step(spec: Any, model: Any, fig: Any, setting: Any) -> Tiling:
    tiled = Tiled(model, setting.block)
    f, d, notation, n = spec.focus, spec.decimals, spec.notation, model.n_queries

    def shown(quantity: str, places: int) -> Any:
        return from_model(tiled, quantity, places, notation)

    m = [[_num(tiled.m(b, i), d.scaled) for i in range(n)] for b in range(tiled.blocks)]  # as z is shown
    r, l_sum = shown("rescale", d.exp), shown("running_sum", d.exp)
    acc, lse = shown("accumulator", d.output), shown("lse", d.exp)
    z = model.scaled
    blocks = []
    for b in range(tiled.blocks):
        keys = tiled.keys_of(b)
        row_z = tuple(_num(z[f, j], d.scaled) for j in keys)
        blocks.append(
            Block(
                b + 1,
                keys.start + 1,
                keys.stop,
                row_z,
                m[b - 1][f] if b > 0 else NEG_INFINITY,
                m[b][f],
                r[b][f],
                l_sum[b - 1][f] if b > 0 else Num(Decimal(0), True),
                l_sum[b][f],
                acc[b * n + f],
            )
        )
    output, lse_f = fig.output[f], lse[f][0]  # as the weighted sum showed it
    apart: NumRow = ()
    if spec.rounding == "hand":  # each block from the numbers shown before it, as a student works them
        blocks, output, lse_f = _by_hand(tiled, f, d, fig.scaled[f], blocks)
        if [x.fraction for x in output] != [x.fraction for x in fig.output[f]]:
            apart = fig.output[f]
    splits = _splits(tiled, f, setting.split, d) if setting.split else ()
    return Tiling(
        setting.block or model.n_keys,
        tuple(blocks),
        output,
        lse_f,
        tuple(x[0] for x in lse),
        tiled.identity,
        splits,
        apart,
    )


def _by_hand(tiled: Tiled, f: int, d: Any, z: Any, exact: list[Block]) -> tuple[list[Block], Any, Num]:
    """The focus row's blocks from the shown z and each block's shown m, rescale, l and acc before it (the
    chain ``symattn check`` carries a student's numbers along), then O = acc / l and LSE = m + log l."""
    V = tiled.model.V
    out: list[Block] = []
    m: Num | None = None
    l_old, acc_old = Num(Decimal(0), True), None
    for b, block in enumerate(exact):
        keys = tiled.allowed(f, b)
        if not keys and m is None:  # nothing seen yet: m = −∞, l = 0 and acc = 0, exactly
            out.append(block)
            continue
        top = max((z[j] for j in keys), key=lambda x: x.fraction, default=m)
        new = top if m is None or top is None or top.fraction > m.fraction else m
        assert new is not None
        r = Num(Decimal(0), True) if m is None else _hand(sympy.exp(_q(m) - _q(new)), d.exp)
        terms = [sympy.exp(_q(z[j]) - _q(new)) for j in keys]
        l_new = _hand(_q(r) * _q(l_old) + sympy.Add(*terms), d.exp)
        acc = tuple(
            _hand(
                (_q(r) * _q(acc_old[c]) if acc_old else sympy.Integer(0))
                + sympy.Add(*[t * V[j, c] for t, j in zip(terms, keys)]),
                d.output,
            )
            for c in range(V.cols)
        )
        shown_z = tuple(z[j] for j in tiled.keys_of(b))
        out.append(replace(block, z=shown_z, m_old=m or NEG_INFINITY, m=new, rescale=r, l_old=l_old, l=l_new, acc=acc))
        m, l_old, acc_old = new, l_new, acc
    if m is None or acc_old is None:  # the focus row sees no key: the exact blocks say so
        return exact, tuple(NEG_INFINITY for _ in range(V.cols)), NEG_INFINITY
    output = tuple(_hand(_q(a) / _q(l_old), d.output) for a in acc_old)
    return out, output, _hand(_q(m) + sympy.log(_q(l_old)), d.exp)


def _hand(expr: sympy.Expr, decimals: int) -> Num:
    """A value worked from shown numbers: rounded to the step's decimals (a product of two shown numbers has
    more digits than either), unless it has no more digits than that."""
    exact = numeric.as_fraction(expr)
    places = None if exact is None else terminating_decimals(exact)
    if exact is not None and (places is None or places > decimals):
        return Num(round_half_up(exact, decimals), False)
    return _num(expr, decimals)


def _q(x: Num) -> sympy.Rational:
    fraction = x.fraction
    return sympy.Rational(fraction.numerator, fraction.denominator)


def _splits(tiled: Tiled, f: int, count: int, d: Any) -> tuple[SplitPart, ...]:
    """Split-KV: each split's own softmax over its keys (O_s, LSE_s), and the merge weight e^(LSE_s − LSE)."""
    model = tiled.model
    size = -(-tiled.n_keys // count)
    z, V = model.scaled, model.V
    total = sympy.log(sympy.Add(*[sympy.exp(z[f, j]) for j in range(tiled.n_keys) if model.may_attend(f, j)]))
    out = []
    for s in range(-(-tiled.n_keys // size)):
        keys = [j for j in range(s * size, min((s + 1) * size, tiled.n_keys)) if model.may_attend(f, j)]
        first, last = s * size + 1, min((s + 1) * size, tiled.n_keys)
        if not keys:  # every key of the split is masked: it adds nothing
            out.append(SplitPart(s + 1, first, last, (), NEG_INFINITY, _num(sympy.Integer(0), d.weights)))
            continue
        exps = [sympy.exp(z[f, j]) for j in keys]
        den = sympy.Add(*exps)
        row: NumRow = tuple(
            _num(sympy.Add(*[e * V[j, c] for e, j in zip(exps, keys)]) / den, d.output) for c in range(V.cols)
        )
        lse = sympy.log(den)
        out.append(SplitPart(s + 1, first, last, row, _num(lse, d.exp), _num(sympy.exp(lse - total), d.weights)))
    return tuple(out)


__all__ = ["tiling_step"]
