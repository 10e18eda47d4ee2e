"""The gradients of attention, written once over any *algebra* (an element type with +, −, ·, a
constant and the scale), the chain rule step by step:

    dO = dL/dO               ones (L = Σ O), O − T (L = ½ Σ (O − T)²), or given
    dV = Aᵀ dO               dA = dO Vᵀ
    dZ = A ⊙ (dA − rowsum(dA ⊙ A))      the softmax Jacobian, row by row
    dS = scale · dZ          dQ = dS K          dK = dSᵀ Q
    then W_O (several heads), and the projections: dW = Xᵀ dQ, db = Σ_rows dQ, dX.

A head's parts (:mod:`symattn.variants`) bring their own rules: a monotone map takes dZ to the gradient
of the z before it (×dz/dy), a Q/K part makes dQ and dK from dS, and a denominator part has a gradient of
its own per head after the heads'.

The backward model runs them on closed forms, enclosures and exponential polynomials
(:mod:`symattn.exact.backward`, :mod:`symattn.exact.exactness`); the hand chain of
:mod:`symattn.exact.rounding` runs them on the numbers as shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

from symattn.input.records import record
from symattn.variants.base import DENOMINATOR, MAP, QK

Grid = list  # a matrix: a list of rows of algebra elements


def total(alg, items: Iterable) -> Any:
    """The sum of elements of an algebra (its zero for none)."""
    total = None
    for x in items:
        total = x if total is None else total + x
    return alg.zero if total is None else total


def matmul(alg, A: Grid, B: Grid) -> Grid:
    """A B for matrices of elements."""
    return [[total(alg, (row[t] * B[t][k] for t in range(len(B)))) for k in range(len(B[0]))] for row in A]


def transpose(A: Grid) -> Grid:
    return [list(col) for col in zip(*A)]


def _consts(alg, rows: Sequence[Sequence[Fraction]]) -> Grid:
    return [[alg.const(x) for x in row] for row in rows]


@record
class Inputs:
    """The exact inputs of the backward pass, as rationals (weights come from the algebra)."""

    V: tuple[tuple[tuple[Fraction, ...], ...], ...]  # per head
    K: tuple[tuple[tuple[Fraction, ...], ...], ...]
    Q: tuple[tuple[tuple[Fraction, ...], ...], ...]
    W_O: tuple[tuple[Fraction, ...], ...] | None
    b_O: tuple[Fraction, ...] | None
    loss: str
    dO: tuple[tuple[Fraction, ...], ...] | None  # given, or all ones
    target: tuple[tuple[Fraction, ...], ...] | None
    X: tuple[tuple[Fraction, ...], ...] | None
    X_kv: tuple[tuple[Fraction, ...], ...] | None
    W: dict | None  # "Q", "K", "V" -> weight matrix
    biases: tuple[str, ...]  # "Q", "K", "V" with a bias
    kv_heads: int = 0  # grouped-query: key/value heads shared by consecutive query heads; 0: one per head
    # per head, the rules of its parts (their ``gradient``), in the order they act; None: no head has any
    rules: tuple[tuple[Any, ...], ...] | None = None


def _head_gradients(
    alg, A: Grid, V: Grid, K: Grid, Q: Grid, dO: Grid, hook: Callable, rules: Sequence[Any] = ()
) -> dict[str, Grid]:
    """One head's gradients, each passed through ``hook`` (hand rounding replaces it by what is shown); its
    parts' ``rules`` in the order they act."""
    n, m = len(A), len(A[0])
    out = {"dO": dO}
    out["dV"] = hook("dV", matmul(alg, transpose(A), dO))
    out["dA"] = dA = hook("dA", matmul(alg, dO, transpose(V)))
    out["dot"] = dot = hook("dot", [[total(alg, (dA[i][k] * A[i][k] for k in range(m)))] for i in range(n)])
    out["dZ"] = dZ = hook("dZ", [[A[i][j] * (dA[i][j] - dot[i][0]) for j in range(m)] for i in range(n)])
    for rule in reversed(rules):  # back through each monotone map of z, the last first: × its dz/dy
        if rule.stage == MAP:
            dZ = rule.through(alg, dZ, out, hook)
    out["dS"] = dS = hook("dS", [[alg.scale(x) for x in row] for row in dZ])
    qk = next((rule for rule in rules if rule.stage == QK), None)
    if qk is not None:  # a Q/K part makes dQ and dK from dS
        qk.through(alg, dS, K, Q, out, hook)
        return out
    out["dQ"] = hook("dQ", matmul(alg, dS, K))
    out["dK"] = hook("dK", matmul(alg, transpose(dS), Q))
    return out


def gradients(alg, inputs: Inputs, weights: Sequence[Grid], hook: Callable = lambda name, m: m) -> dict[str, Grid]:
    """Every gradient; per-head ones are named ``name@h`` (h from 0) when there are several heads or W_O."""
    heads = len(weights)
    Vs = [_consts(alg, v) for v in inputs.V]
    outputs = [matmul(alg, A, V) for A, V in zip(weights, Vs)]
    concat: Grid = [sum((o[i] for o in outputs), []) for i in range(len(outputs[0]))]
    out: dict[str, Grid] = {}
    if inputs.loss == "mse":
        O = concat
        if inputs.W_O is not None:
            concat = hook("concat", concat)
            O = matmul(alg, concat, _consts(alg, inputs.W_O))
            if inputs.b_O is not None:
                O = [[x + alg.const(b) for x, b in zip(row, inputs.b_O)] for row in O]
        O = hook("O", O)
        assert inputs.target is not None  # the squared error always has its target (see build_backward)
        dO = [[o - alg.const(t) for o, t in zip(row, trow)] for row, trow in zip(O, inputs.target)]
    else:
        assert inputs.dO is not None  # given, or all ones, for every loss but the squared error
        dO = _consts(alg, inputs.dO)
        if inputs.W_O is not None:
            concat = hook("concat", concat)
    out["dO"] = dO = hook("dO", dO)
    split = heads > 1 or inputs.W_O is not None
    if inputs.W_O is not None:
        out["dW_O"] = hook("dW_O", matmul(alg, transpose(concat), dO))
        if inputs.b_O is not None:
            out["db_O"] = hook("db_O", [[total(alg, col) for col in zip(*dO)]])
        dO = out["dconcat"] = hook("dconcat", matmul(alg, dO, transpose(_consts(alg, inputs.W_O))))
    per_head = []
    first = 0
    for h, A in enumerate(weights):
        width = len(inputs.V[h][0])
        dO_h = [row[first : first + width] for row in dO]
        first += width
        prefix = (lambda name, m, h=h: hook(f"{name}@{h}", m)) if split else hook
        rules = () if inputs.rules is None else inputs.rules[h]
        K, Q = _consts(alg, inputs.K[h]), _consts(alg, inputs.Q[h])
        grads = _head_gradients(alg, A, Vs[h], K, Q, dO_h, prefix, rules)
        per_head.append(grads)
        if split:
            out.update({f"{name}@{h}": m for name, m in grads.items()})
    every = inputs.rules or ()
    for k, rule in enumerate(every[0] if every else ()):  # a denominator part's own, per head
        if rule.stage == DENOMINATOR:
            rule.layer(alg, [r[k] for r in every], per_head, out, hook, split)
    if split:
        out["dQ"] = _side_by_side(per_head, "dQ")
        size = heads // (inputs.kv_heads or heads)
        groups = [per_head[first : first + size] for first in range(0, heads, size)]
        for name in ("dK", "dV"):  # a shared K or V gathers the gradients of every query head of its group
            out[name] = _side_by_side([{name: _add(alg, [g[name] for g in group])} for group in groups], name)
    else:
        out.update(per_head[0])
    if inputs.X is not None:
        _projections(alg, inputs, out, hook)
    return out


def _side_by_side(per_head: list[dict[str, Grid]], name: str) -> Grid:
    return [sum((g[name][i] for g in per_head), []) for i in range(len(per_head[0][name]))]


def _add(alg, grids: list[Grid]) -> Grid:
    """The elementwise sum of equal-shaped matrices (one matrix stays as it is)."""
    if len(grids) == 1:
        return grids[0]
    return [[total(alg, cells) for cells in zip(*rows)] for rows in zip(*grids)]


def _projections(alg, inputs: Inputs, out: dict[str, Grid], hook: Callable) -> None:
    assert inputs.X is not None and inputs.W is not None  # called only with a projection, which gives both
    X = _consts(alg, inputs.X)
    X_kv = X if inputs.X_kv is None else _consts(alg, inputs.X_kv)
    for name, source in (("Q", X), ("K", X_kv), ("V", X_kv)):
        grad = out[f"d{name}"]
        out[f"dW_{name}"] = hook(f"dW_{name}", matmul(alg, transpose(source), grad))
        if name in inputs.biases:
            out[f"db_{name}"] = hook(f"db_{name}", [[total(alg, col) for col in zip(*grad)]])
    W = {name: transpose(_consts(alg, inputs.W[name])) for name in ("Q", "K", "V")}
    from_q = matmul(alg, out["dQ"], W["Q"])
    from_kv = matmul(alg, out["dK"], W["K"])
    from_kv = [[a + b for a, b in zip(r, s)] for r, s in zip(from_kv, matmul(alg, out["dV"], W["V"]))]
    if inputs.X_kv is None:
        out["dX"] = hook("dX", [[a + b for a, b in zip(r, s)] for r, s in zip(from_q, from_kv)])
    else:
        out["dX"] = hook("dX", from_q)
        out["dX_kv"] = hook("dX_kv", from_kv)


def jacobian(alg, A: Grid) -> Grid:
    """∂α_j/∂z_k = α_j(δ_jk − α_k) of every row: row i·m + j, column k."""
    one, zero = alg.const(Fraction(1)), alg.zero
    m = len(A[0])
    return [[row[j] * ((one if j == k else zero) - row[k]) for k in range(m)] for row in A for j in range(m)]
