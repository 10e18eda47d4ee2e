"""How the right number of a wrong claim comes about: the operands, with the user's inputs, and the result.

Most quantities are sums of products (pairs); the others have their own operands, named in
:class:`~symattn.checking.report.Explanation` and shown by the report templates (``explain``):
``sqrt_dk`` and ``scale`` (d_k), ``scaled`` (a score and d_k or the scale), ``shifted`` (z and the
row's maximum), ``exp`` (its exponent), ``exp_sum`` (the exps), ``weights`` (an exp and the sum),
``dZ`` (α and dA − r), ``dS`` (dZ and the scale), ``dO`` (O and the target, for the squared error).
Q, K, V and the output after W_O are ``affine``: products, plus a bias. A head's parts give the operands
of their own quantities (``operands`` and ``explained`` of :class:`~symattn.variants.base.HeadPart`).
"""

from __future__ import annotations

from collections.abc import Callable

from symattn import variants
from symattn.checking.layout import Layout
from symattn.checking.report import Explanation
from symattn.exact.rounding import Num
from symattn.input.quantities import INPUTS

Sig = Callable[..., Num]  # sig(quantity, row, col, head): the exact value to SIGNIFICANT digits


class Explainer:
    def __init__(self, layout: Layout, sig: Sig):
        self.layout = layout
        self.sig = sig

    def explain(self, quantity: str, row: int | None, col: int | None, head: int | None, result: Num) -> Explanation:
        L, spec = self.layout, self.layout.spec
        if quantity == "sqrt_dk":  # scalars: no row, no column
            return Explanation(quantity, row, col, (spec.d_k,), result)
        if quantity == "scale":  # 1/√d_k, the spec's own number, or none (1)
            scale: tuple = (spec.d_k,) if spec.scale == "sqrt" else () if spec.scale == "none" else (spec.scale,)
            return Explanation(quantity, row, col, scale, result)
        if quantity in variants.VIEWED:  # a route's own (MLA's latent): the pairs its part gives
            assert row is not None and col is not None  # each is a matrix
            pairs = variants.route_operands(self, spec, quantity, row, col, head)
            return Explanation(quantity, row, col, pairs, result)
        model = L.heads[L.index(head)]
        for part in model.parts:  # a part's own quantity of a row or of the head
            operands = part.explained(self, model, quantity, row, head)
            if operands is not None:
                return Explanation(quantity, row, col, operands, result)
        assert row is not None
        if quantity == "exp_sum":  # a column: a row, no column
            keys = range(len(spec.keys))
            terms = tuple(self.sig("exp", row, j, head) for j in keys)
            if model.denominator is not None:  # + its term
                terms += (self.sig(model.denominator.term_name(L.stable), row, 0, head),)
            return Explanation(quantity, row, col, terms, result)
        if quantity == "rowsum":
            keys = range(len(spec.keys))
            pairs = tuple((self.sig("dA", row, k, head), self.sig("weights", row, k, head)) for k in keys)
            return Explanation(quantity, row, col, pairs, result)
        assert col is not None  # every other quantity is a matrix
        if quantity in INPUTS:
            p = spec.projection
            made = None if p is not None else variants.input_operands(self, spec, quantity, row, col)
            if made is not None:  # K or V that a part made (MLA's latent times W_UK or W_UV)
                return Explanation(quantity, row, col, (made, None), result, affine=True)
            assert p is not None  # Q, K and V are claimed only when computed from X and W (or made by a part)
            X, W, b = p.weights(quantity)
            operands = (tuple(zip(X[row], [w[col] for w in W])), b[col] if b else None)
            return Explanation(quantity, row, col, operands, result, affine=True)
        if L.is_layer(quantity, head) and quantity != "dO":
            return self.layer(quantity, row, col, result)
        return Explanation(quantity, row, col, self.operands(quantity, row, col, head), result)

    def layer(self, quantity: str, row: int, col: int, result: Num) -> Explanation:
        """concat, the output after W_O, the gradients through W_O and after the heads."""
        L, spec = self.layout, self.layout.spec
        if quantity in ("concat", "dQ", "dK", "dV"):  # one head's number, in its columns
            width = L.width_v if quantity in ("concat", "dV") else L.width_q
            head, local = divmod(col, width)
            name = "output" if quantity == "concat" else quantity
            if quantity in ("dK", "dV") and len(L.group(head)) > 1:  # a shared K or V: its heads' sum
                terms = tuple(self.sig(quantity, row, local, h) for h in L.group(head))
                return Explanation(quantity, row, col, terms, result, summed=True)
            return Explanation(quantity, row, col, self.operands(name, row, local, head), result)
        if quantity == "output":
            if spec.W_O is None:
                return self.layer("concat", row, col, result)
            pairs = tuple((self.sig("concat", row, c), w[col]) for c, w in enumerate(spec.W_O))
            bias = spec.b_O[col] if spec.b_O else None
            return Explanation(quantity, row, col, (pairs, bias), result, affine=True)
        if quantity == "dconcat":
            assert spec.W_O is not None  # claimed only with W_O
            W = spec.W_O[col]
            return Explanation(quantity, row, col, tuple((self.sig("dO", row, k), W[k]) for k in range(len(W))), result)
        if quantity == "dW_O":
            n = range(len(spec.tokens))
            return Explanation(
                quantity, row, col, tuple((self.sig("concat", i, row), self.sig("dO", i, col)) for i in n), result
            )
        p = spec.projection
        assert p is not None  # dX and dW_* are claimed only with X and W (the claims reader says so)
        if quantity == "dX":
            pairs = tuple(
                (self.sig(f"d{name}", row, c), getattr(p, f"W_{name}")[col][c])
                for name in ("Q", "K", "V")
                for c in range(len(getattr(p, f"W_{name}")[0]))
            )
            return Explanation(quantity, row, col, pairs, result)
        X = p.X if quantity == "dW_Q" else p.source_of_keys
        gradient = quantity[-1]
        return Explanation(
            quantity, row, col, tuple((X[i][row], self.sig(f"d{gradient}", i, col)) for i in range(len(X))), result
        )

    def operands(self, quantity: str, i: int, k: int, head: int | None) -> tuple:
        """The operands of one head's quantity (with the head's own columns of Q, K and V)."""
        L = self.layout
        sub = L.head_specs[L.index(head)]
        model = L.heads[L.index(head)]

        def sig(name: str, r: int, c: int) -> Num:
            return self.sig(name, r, c, head)

        keys = range(model.n_keys)
        for part in model.parts:  # a part's own operands (a Q/K part's scores, its Q′ and K′)
            found = part.operands(self, model, quantity, i, k, head)
            if found is not None:
                return found
        if quantity == "scores":
            return tuple(zip(sub.Q[i], sub.K[k]))
        if quantity == "scaled":
            # d_k (over its root), the spec's number (times it), or None: no scaling, z is the score
            factor = sub.d_k if sub.scale == "sqrt" else None if sub.scale == "none" else sub.scale
            operands = (sig("scores", i, k), factor)
            if not model.varied:
                return operands
            # + an additive part's term, then a monotone map's (None where the head has none)
            return operands + tuple(variants.operand(sub, at, sig, i, k) for at in (variants.ADD, variants.MAP))
        if quantity == "shifted":
            return (sig("scaled", i, k), sig("scaled", i, model.row_max[i]))
        if quantity == "exp":
            return (sig("shifted" if L.stable else "scaled", i, k),)
        if quantity == "weights":
            return (sig("exp", i, k), sig("exp_sum", i, 0))
        if quantity == "output":
            return tuple((sig("weights", i, j), sub.V[j][k]) for j in keys)
        return self.gradient(quantity, i, k, head)

    def gradient(self, quantity: str, row: int, col: int, head: int | None) -> tuple:
        """Pairs whose products sum to the gradient (for dZ: α × (dA − r); for dS: dZ × scale)."""
        L = self.layout
        sub = L.head_specs[L.index(head)]
        model = L.heads[L.index(head)]
        n, keys = model.n_queries, model.n_keys

        def sig(name: str, r: int, c: int) -> Num:
            return self.sig(name, r, c, head)

        if quantity == "dO":
            b = L.spec.backward
            if L.is_layer("dO", head) and b is not None and b.loss == "mse":  # O − T
                assert b.target is not None  # the squared error always has its target
                return (self.sig("output", row, col), b.target[row][col])
            return ()
        if quantity == "dV":
            return tuple((sig("weights", i, row), sig("dO", i, col)) for i in range(n))
        if quantity == "dA":
            return tuple((sig("dO", row, k), sub.V[col][k]) for k in range(len(sub.V[0])))
        if quantity == "dZ":
            difference = Num(sig("dA", row, col).value - sig("rowsum", row, 0).value, False)
            return ((sig("weights", row, col), difference),)
        if any(quantity in part.silent for part in model.parts):
            return ()  # a part's (dZ × a map's dz/dy × scale, dQ′ turned back): the document shows how
        if quantity == "dS":
            return ((sig("dZ", row, col), self.sig("scale", 0, 0)),)
        if quantity == "dQ":
            return tuple((sig("dS", row, j), sub.K[j][col]) for j in range(keys))
        assert quantity == "dK"  # the last of a head's gradients
        return tuple((sig("dS", i, row), sub.Q[i][col]) for i in range(n))


__all__ = ["Explainer"]
