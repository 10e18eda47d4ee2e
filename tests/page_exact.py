"""The exact values a page should show, computed here from the spec's own text: fractions for the
inputs, mpmath at 60 digits for √ and e^z. None of symattn's code: an independent second opinion.

Keys are ``(quantity, head, i, j, …)``, head 0 outside multi-head attention and 1, 2, … inside it, with
the quantity names of :mod:`page_reader`.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
from mpmath import mpf

mpmath.mp.dps = 60
NEG_INF = None  # a masked score


def _num(text) -> Fraction:
    return Fraction(str(text))


def _m(rows) -> list[list[mpf]]:
    return [[mpf(_num(x).numerator) / _num(x).denominator for x in row] for row in rows]


def _mul(A, B):
    return [[mpmath.fsum(a * b for a, b in zip(row, col)) for col in zip(*B)] for row in A]


def _T(A):
    return [list(col) for col in zip(*A)]


def _add_bias(A, b):
    return A if b is None else [[x + y for x, y in zip(row, b)] for row in A]


def _colsum(A):
    return [[mpmath.fsum(col) for col in zip(*A)]]


def _put(out: dict, name: str, head: int, rows) -> None:
    out[(name, head)] = rows
    for i, row in enumerate(rows):
        for j, x in enumerate(row):
            out[(name, head, i, j)] = x


def exact(spec: dict) -> dict:
    """Every quantity of the derivation (and its backward pass, with the loss Σ O), exactly enough."""
    out: dict = {}
    vec = lambda key: None if key not in spec else _m([spec[key]])[0]  # noqa: E731
    if "X" in spec:
        X = _m(spec["X"])
        Xkv = _m(spec["X_kv"]) if "X_kv" in spec else X
        W = {n: _m(spec["W_" + n]) for n in "QKV"}
        Q = _add_bias(_mul(X, W["Q"]), vec("b_Q"))
        K = _add_bias(_mul(Xkv, W["K"]), vec("b_K"))
        V = _add_bias(_mul(Xkv, W["V"]), vec("b_V"))
    else:
        Q, K, V = _m(spec["Q"]), _m(spec["K"]), _m(spec["V"])
    for name, rows in (("Q", Q), ("K", K), ("V", V)):
        _put(out, name, 0, rows)
    h = spec.get("heads", 1)
    width, vwidth = len(Q[0]) // h, len(V[0]) // h
    n, m = len(Q), len(K)
    heads, outputs = [], []
    for index in range(h):
        head = index + 1 if h > 1 else 0
        cols, vcols = slice(index * width, (index + 1) * width), slice(index * vwidth, (index + 1) * vwidth)
        Qh, Kh, Vh = [r[cols] for r in Q], [r[cols] for r in K], [r[vcols] for r in V]
        c = 1 / mpmath.sqrt(width)
        S = _mul(Qh, _T(Kh))
        Z = [[s * c for s in row] for row in S]
        allowed = [[spec.get("mask") != "causal" or j <= i for j in range(m)] for i in range(n)]
        Zm = [[z if ok else NEG_INF for z, ok in zip(row, oks)] for row, oks in zip(Z, allowed)]
        top = [max(z for z in row if z is not None) for row in Zm]
        shifted = [[None if z is None else z - t for z in row] for row, t in zip(Zm, top)]
        into = shifted if spec.get("softmax") == "stable" else Zm
        E = [[mpf(0) if z is None else mpmath.exp(z) for z in row] for row in into]
        total = [mpmath.fsum(row) for row in E]
        A = [[e / s for e in row] for row, s in zip(E, total)]
        O = _mul(A, Vh)
        for name, rows in (("KT", _T(Kh)), ("S", S), ("Z", Z), ("Zm", Zm), ("z", shifted), ("exp", E), ("A", A)):
            _put(out, name, head, rows)
        _put(out, "sum", head, [[s] for s in total])
        _put(out, "O", head, O)
        for i in range(n):
            for j in range(m):
                for k in range(len(Vh[0])):
                    out[("prod", head, i, j, k)] = A[i][j] * Vh[j][k]
            J = [[A[i][j] * ((1 if j == k else 0) - A[i][k]) for k in range(m)] for j in range(m)]
            out[(f"J:{i}", head)] = J
        heads.append((head, Qh, Kh, Vh, A, c))
        outputs.append(O)
    C = [sum((o[i] for o in outputs), []) for i in range(n)]
    _put(out, "C", 0, C)
    final = C
    if "W_O" in spec:
        W_O = _m(spec["W_O"])
        final = _add_bias(_mul(C, W_O), vec("b_O"))
        _put(out, "OUT", 0, final)
    dO = [[mpf(1)] * len(final[0]) for _ in final]
    _put(out, "dO", 0, dO)
    dC = dO
    if "W_O" in spec:
        _put(out, "dW_O", 0, _mul(_T(C), dO))
        _put(out, "db_O", 0, _colsum(dO))
        dC = _mul(dO, _T(W_O))
        _put(out, "dC", 0, dC)
    grads = {"dQ": [[] for _ in Q], "dK": [[] for _ in K], "dV": [[] for _ in V]}
    for index, (head, Qh, Kh, Vh, A, c) in enumerate(heads):
        dOh = [row[index * len(Vh[0]) : (index + 1) * len(Vh[0])] for row in dC]
        dV, dA = _mul(_T(A), dOh), _mul(dOh, _T(Vh))
        r = [mpmath.fsum(x * a for x, a in zip(drow, arow)) for drow, arow in zip(dA, A)]
        dZ = [[a * (g - ri) for a, g in zip(arow, drow)] for arow, drow, ri in zip(A, dA, r)]
        dS = [[z * c for z in row] for row in dZ]
        dQ, dK = _mul(dS, Kh), _mul(_T(dS), Qh)
        for name, rows in (("dO", dOh), ("dV", dV), ("dA", dA), ("dZ", dZ), ("JdA", dZ), ("dS", dS)):
            _put(out, name, head, rows)
        for name, rows in (("dQ", dQ), ("dK", dK)):
            _put(out, name, head, rows)
        _put(out, "r", head, [[x] for x in r])
        for name, rows in (("dQ", dQ), ("dK", dK), ("dV", dV)):
            for full, part in zip(grads[name], rows):
                full += part
    if "X" in spec:
        Xkv_ = Xkv if "X_kv" in spec else X
        for name, inputs in (("Q", X), ("K", Xkv_), ("V", Xkv_)):
            _put(out, "dW_" + name, 0, _mul(_T(inputs), grads["d" + name]))
            _put(out, "db_" + name, 0, _colsum(grads["d" + name]))
        dX = _mul(grads["dQ"], _T(W["Q"]))
        through_kv = [
            [a + b for a, b in zip(x, y)] for x, y in zip(_mul(grads["dK"], _T(W["K"])), _mul(grads["dV"], _T(W["V"])))
        ]
        if "X_kv" in spec:
            _put(out, "dX", 0, dX)
            _put(out, "dX_kv", 0, through_kv)
        else:
            _put(out, "dX", 0, [[a + b for a, b in zip(x, y)] for x, y in zip(dX, through_kv)])
    return out
