"""The claimant's own numbers, carried forward: each step from their claims before it (error carried forward).

``Chain.implied(quantity, row, col, head)`` is the claimed number where there is one (the most
precise, a row section's first), and otherwise what the claimant's earlier numbers give, down to
the inputs: (closed form, whether it depends on a claim). The steps are those of the derivation,
within each head, from the heads' outputs into ``concat`` and the output after W_O, and back through
the gradients. Exact closed forms only: nothing is evaluated here.
"""

from __future__ import annotations

import math
from fractions import Fraction

import sympy

from symattn import variants
from symattn.checking.layout import Layout
from symattn.exact import numeric
from symattn.input.claims import PRODUCTS, Claim
from symattn.input.numeral import Numeral
from symattn.input.quantities import INPUTS
from symattn.input.reader import Entry

Value = tuple[sympy.Expr, bool]  # a closed form, and whether it follows from a claim


def rational(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)


def claimed_value(x: Numeral) -> sympy.Expr:
    """A claimed number's exact value: an angle written as a multiple of π ("3pi/4", "135deg") is that multiple."""
    return rational(x.value) * sympy.pi if x.form == "pi" else rational(x.value)


def number(x: Entry) -> sympy.Rational:
    assert isinstance(x, Numeral)  # the checker's spec has numbers only: values are substituted for symbols
    return rational(x.value)


def base(quantity: str) -> str:
    """Weights in percent are the weights."""
    return "weights" if quantity == "percent" else quantity


def _sum(pairs: list[tuple[Value, Value]]) -> Value:
    carried = any(x or y for (_, x), (_, y) in pairs)
    if all(isinstance(a, sympy.Rational) and isinstance(b, sympy.Rational) for (a, _), (b, _) in pairs):
        # claimed numbers times inputs: the same rational, in integers (SymPy's Add of 64 terms is slow)
        num, den = 0, 1
        for (a, _), (b, _) in pairs:
            p, q = int(a.p) * int(b.p), int(a.q) * int(b.q)
            if q != den:
                common = math.lcm(den, q)
                num, den, p = num * (common // den), common, p * (common // q)
            num += p
        return sympy.Rational(num, den), carried
    return sympy.Add(*[a * b for (a, _), (b, _) in pairs]), carried


class Chain:
    """The implied values of one claims file against one layout. A head's parts carry their own quantities
    forward (``implied`` of :class:`~symattn.variants.base.HeadPart`), reading this chain."""

    dot = staticmethod(_sum)  # Σ a·b of (value, carried) pairs

    def __init__(self, layout: Layout, claims: tuple[Claim, ...]):
        self.layout = layout
        self.spec = layout.spec
        self.index: dict[tuple[int | None, str, int | None, int | None], list[Claim]] = {}
        # claimed partial products: (head, the sum's quantity, row, col) -> term -> the claimed term
        self.terms: dict[tuple[int | None, str, int | None, int | None], dict[int, Claim]] = {}
        for c in claims:
            if c.term is not None:
                self.terms.setdefault((c.head, PRODUCTS[c.quantity], c.row, c.col), {})[c.term] = c
                continue
            self.index.setdefault((c.head, base(c.quantity), c.row, c.col), []).append(c)
        self.names = {name for _, name, _, _ in self.index}
        self._cache: dict[tuple, Value] = {}
        self._implied: dict[tuple, Value] = {}
        self.enclosures: dict[int, dict] = {}  # shared by the comparisons of claimed maxima

    def claimed(self, quantity: str, row: int | None, col: int | None, head: int | None = None) -> Fraction | None:
        best = self.best(quantity, row, col, head)
        return None if best is None else best.value

    def best(self, quantity: str, row: int | None, col: int | None, head: int | None = None) -> Numeral | None:
        """The claimed number that feeds what follows: a row section's in its own row, the most precise of several."""
        found = [c for c in self.index.get((head, quantity, row, col), []) if not c.number.is_infinite]
        if not found:
            return None
        return max(found, key=lambda c: (c.in_row_section, c.number.decimals is None, c.number.decimals or 0)).number

    def implied(self, quantity: str, row: int | None = None, col: int | None = None, head: int | None = None) -> Value:
        key = (head, quantity, row, col)
        found = self._implied.get(key)
        if found is None:  # an output row asks for each claimed weight once per column: looked up once
            value = self.best(quantity, row, col, head)
            found = self._implied[key] = (
                (claimed_value(value), True) if value is not None else self.computed(quantity, row, col, head)
            )
        return found

    def computed(self, quantity: str, row: int | None, col: int | None, head: int | None = None) -> Value:
        """The value of one quantity from the implied values before it."""
        key = (head, quantity, row, col)
        if key not in self._cache:
            if key in self.terms:  # the claimant's own partial products, added up
                self._cache[key] = self.summed(key)
            elif quantity in INPUTS or quantity in ("sqrt_dk", "scale") or self.layout.is_layer(quantity, head):
                self._cache[key] = self._layer(quantity, row, col)
            else:
                self._cache[key] = (
                    self._route(quantity, row, col, head)
                    or self._part(quantity, row, col, head)
                    or self._head(quantity, row, col, head)
                )
        return self._cache[key]

    def others(self, quantity: str, row: int | None, col: int | None, head: int | None = None) -> tuple[Value, ...]:
        """Other ways than ``computed``'s that a quantity follows from the claimant's own numbers: a score or an
        output entry that a route carries its own way (MLA's u, the online softmax's acc / l) also follows by the
        head's rule, since both give one exact value."""
        if (head, quantity, row, col) in self.terms or row is None or quantity in INPUTS:
            return ()
        if quantity in variants.VIEWED or self.layout.is_layer(quantity, head):
            return ()
        if variants.carried_core(self, self.spec, quantity, row, col, head) is None:
            return ()
        return (self._part(quantity, row, col, head) or self._head(quantity, row, col, head),)

    def summed(self, key: tuple) -> Value:
        """A score or an output entry as the sum of the claimant's terms, each claimed or else their own."""
        total = self.own_terms(key)
        return sympy.Add(*[x for x, _ in total]), any(a for _, a in total)

    def own_terms(self, key: tuple) -> list[Value]:
        """The terms of a score or an output entry with claimed terms: each claimed, or else their own."""
        head, quantity, row, col = key
        terms = self.terms[key]
        return [
            (rational(terms[t].number.value), True)
            if t in terms and not terms[t].number.is_infinite
            else self.term(quantity, row, col, t, head)
            for t in range(self.term_count(quantity, head))
        ]

    def term_count(self, quantity: str, head: int | None) -> int:
        m = self.layout.heads[self.layout.index(head)]
        return m.d_k if quantity == "scores" else m.n_keys

    def factors(self, quantity: str, row: int, col: int, t: int, head: int | None) -> tuple[Value, Value]:
        """The two numbers whose product is term t of a score (q_i,t and k_j,t, of Q′ and K′ where a Q/K part
        turns or normalizes them) or of an output entry (p_it and v_t,c), from the claimant's own numbers."""
        L = self.layout
        h = L.index(head)
        m = L.heads[h]
        if quantity == "output":
            v0 = L.kv_index(h) * L.width_v
            return self.implied("weights", row, t, head), self.implied("V", t, v0 + col)
        factors = m.qk.factors if m.qk is not None else None
        if factors is not None:  # the part's own rows, each head's columns from 0
            return self.implied(factors[0], row, t, head), self.implied(factors[1], col, t, head)
        q0, k0 = h * L.width_q, L.kv_index(h) * L.width_q
        return self.implied("Q", row, q0 + t), self.implied("K", col, k0 + t)

    def term(self, quantity: str, row: int, col: int, t: int, head: int | None) -> Value:
        """Term t of a score or of an output entry, from the claimant's own numbers before it."""
        (a, x), (b, y) = self.factors(quantity, row, col, t, head)
        return a * b, x or y

    # --- the layer: inputs, scalars, concat and the output after W_O, the gradients around the heads -------

    def _layer(self, quantity: str, row: int | None, col: int | None) -> Value:
        L, spec = self.layout, self.spec
        if quantity in INPUTS:
            assert row is not None and col is not None  # an entry of a matrix
            made = variants.carried_input(self, spec, quantity, row, col)  # K, V from their MLA latent
            return made if made is not None else (number(getattr(spec, quantity)[row][col]), False)
        if quantity == "sqrt_dk":
            return L.heads[0].sqrt_dk, False
        if quantity == "scale":  # the claimant's multiplier: 1/(their √d_k) where the scale is 1/√d_k
            if spec.scale == "sqrt":
                root, a = self.implied("sqrt_dk")
                return 1 / root, a
            return L.heads[0].scale, False
        assert row is not None and col is not None  # the layer's other quantities are matrices
        if quantity in ("concat", "dQ", "dK", "dV"):  # the heads' side by side
            width = L.width_v if quantity in ("concat", "dV") else L.width_q
            head, local = divmod(col, width)
            if quantity in ("dK", "dV"):  # a shared K or V: the sum over its group of query heads
                parts = [self.implied(quantity, row, local, h) for h in L.group(head)]
                return sympy.Add(*[x for x, _ in parts]), any(a for _, a in parts)
            return self.implied("output" if quantity == "concat" else quantity, row, local, head)
        if quantity == "output":
            if spec.W_O is None:
                return self.implied("concat", row, col)
            pairs = [(self.implied("concat", row, c), (number(w[col]), False)) for c, w in enumerate(spec.W_O)]
            total, a = _sum(pairs)
            return total + (number(spec.b_O[col]) if spec.b_O else 0), a
        return self._layer_gradient(quantity, row, col)

    def _layer_gradient(self, quantity: str, row: int, col: int) -> Value:
        spec, b = self.spec, self.spec.backward
        assert b is not None  # gradient claims are checked only with [backward]
        if quantity == "dO":
            if b.loss == "sum":
                return sympy.Integer(1), False
            if b.loss == "given":
                assert b.grad_output is not None  # the reader requires grad_output for loss "given"
                return number(b.grad_output[row][col]), False
            assert b.target is not None  # and a target for the squared error
            out, a = self.implied("output", row, col)
            return out - number(b.target[row][col]), a
        if quantity == "dconcat":  # dO W_Oᵀ
            assert spec.W_O is not None  # claimed only with W_O
            W = spec.W_O[col]
            return _sum([(self.implied("dO", row, k), (number(W[k]), False)) for k in range(len(W))])
        if quantity == "dW_O":  # concatᵀ dO
            return _sum([(self.implied("concat", i, row), self.implied("dO", i, col)) for i in range(len(spec.tokens))])
        p = spec.projection
        assert p is not None  # dX and dW_* are claimed only with X and W (the claims reader says so)
        if quantity == "dX":
            terms = []
            for name in ("Q", "K", "V"):
                W = getattr(p, f"W_{name}")
                terms += [(self.implied(f"d{name}", row, c), (number(W[col][c]), False)) for c in range(len(W[0]))]
            return _sum(terms)
        name = quantity[-1]  # dW_Q, dW_K, dW_V: Xᵀ dQ (X_kv for K and V)
        X = p.X if name == "Q" else p.source_of_keys
        return _sum([((number(X[i][row]), False), self.implied(f"d{name}", i, col)) for i in range(len(X))])

    # --- one head ----------------------------------------------------------------------------------------

    def _route(self, quantity: str, row: int | None, col: int | None, head: int | None) -> Value | None:
        """A quantity of the softmax's route (the online softmax's, the LSE), from the claimant's numbers."""
        if quantity not in variants.VIEWED:  # a score or an output along the route's own numbers (MLA's q̃, u)
            return None if row is None else variants.carried_core(self, self.spec, quantity, row, col, head)
        assert row is not None  # each has a row (a block, or a query)
        return variants.carried(self, self.spec, self.layout.heads[self.layout.index(head)], quantity, row, col, head)

    def _part(self, quantity: str, row: int | None, col: int | None, head: int | None) -> Value | None:
        """A quantity that one of the head's parts carries forward its own way (None: the head's rule)."""
        m = self.layout.heads[self.layout.index(head)]
        for part in m.parts:
            found = part.implied(self, m, quantity, row, col, head)
            if found is not None:
                return found
        return None

    def _head(self, quantity: str, row: int | None, col: int | None, head: int | None) -> Value:
        assert row is not None  # every quantity of a head but a part's own has a row
        L = self.layout
        h = L.index(head)
        m = L.heads[h]
        g = L.kv_index(h)  # grouped-query: the shared K and V of its group
        q0, k0, v0 = h * L.width_q, g * L.width_q, g * L.width_v  # the head's first columns of Q, of K and of V

        def at(name: str, i: int, j: int | None) -> Value:
            return self.implied(name, i, j, head)

        if quantity in ("exp", "weights", "dZ") and col is not None and not m.may_attend(row, col):
            return sympy.Integer(0), False  # masked: e^−∞ = 0, whatever was claimed before the mask
        if quantity == "scores":
            if "Q" in self.names or "K" in self.names:  # from the claimant's own Q and K
                assert col is not None
                return _sum(
                    [(self.implied("Q", row, q0 + k), self.implied("K", col, k0 + k)) for k in range(L.width_q)]
                )
            return m.scores[row, col], False
        if quantity in ("scaled", "dS"):
            (x, a), (factor, b) = at("scores" if quantity == "scaled" else "dZ", row, col), self.implied("scale")
            assert col is not None  # an entry of a matrix
            if quantity == "scaled":
                return m.vary(row, col, x * factor), a or b  # + an additive part's term, then any map
            return x * m.z_derivative(row, col) * factor, a or b  # back through any map: × its dz/dy
        if quantity == "shifted":  # z − the claimant's own maximum of the row
            assert col is not None
            (z, a), (top, b) = at("scaled", row, col), self.top(row, head)
            return z - top, a or b
        if quantity == "exp":
            z, a = at("shifted" if L.stable else "scaled", row, col)
            return sympy.exp(z), a
        if quantity == "exp_sum":
            exps = [at("exp", row, j) for j in range(m.n_keys)]
            term, b = self.denominator_term(row, head)  # a denominator part's term (0 without one)
            return sympy.Add(*[e for e, _ in exps], term), any(a for _, a in exps) or b
        if quantity == "weights":
            (e, a), (total, b) = at("exp", row, col), at("exp_sum", row, None)
            return e / total, a or b
        if quantity == "output":
            assert col is not None  # an entry of a matrix
            return _sum([(at("weights", row, j), self.implied("V", j, v0 + col)) for j in range(m.n_keys)])
        return self._head_gradient(quantity, row, col, head, (q0, k0, v0, h * L.width_v))

    def top(self, row: int, head: int | None) -> Value:
        """What the claimant's stable softmax subtracts from a row: the largest of their own scaled
        scores (claimed, else implied by their earlier numbers, else exact), or a denominator part's logit s
        above it (ties: s)."""
        key = ("top", head, row)
        if key not in self._cache:
            m = self.layout.heads[self.layout.index(head)]
            values = [self.implied("scaled", row, j, head) for j in range(m.n_keys) if m.may_attend(row, j)]
            if not any(a for _, a in values):  # the exact row: the model's own maximum
                best: Value = self.implied("scaled", row, m.row_max[row], head)
            else:
                best = values[0]
                for value in values[1:]:
                    if numeric.sign(value[0] - best[0], self.enclosures) == 1:
                        best = value
                best = best[0], True
            if m.denominator is not None:  # its logit joins the row's maximum
                s = rational(m.denominator.logit)
                if numeric.sign(s - best[0], self.enclosures) in (0, 1):
                    best = s, best[1]
            self._cache[key] = best
        return self._cache[key]

    def denominator_term(self, row: int, head: int | None) -> Value:
        """A denominator part's e^s in a row's sum: e^(s − the claimant's maximum) with the stable softmax
        (0 without one)."""
        m = self.layout.heads[self.layout.index(head)]
        if m.denominator is None:
            return sympy.Integer(0), False
        s = rational(m.denominator.logit)
        if not self.layout.stable:
            return sympy.exp(s), False
        top, a = self.top(row, head)
        return sympy.exp(s - top), a

    def _head_gradient(self, quantity: str, row: int, col: int | None, head: int | None, first) -> Value:
        """A head's gradient from the claimant's own weights (and dA, dZ, ...) before it."""
        L = self.layout
        m = L.heads[L.index(head)]
        q0, k0, v0, o0 = first  # the head's first columns of Q, K, V and of the heads' outputs side by side
        n, keys = m.n_queries, m.n_keys

        def at(name: str, i: int, j: int | None) -> Value:
            return self.implied(name, i, j, head)

        if quantity == "rowsum":  # r_i = Σ_k dA_ik α_ik
            return _sum([(at("dA", row, k), at("weights", row, k)) for k in range(keys)])
        assert col is not None
        if quantity == "dO":  # one head's slice of dconcat (of dO without W_O)
            return self.implied("dconcat" if self.spec.W_O is not None else "dO", row, o0 + col)
        if quantity == "dV":
            return _sum([(at("weights", i, row), at("dO", i, col)) for i in range(n)])
        if quantity == "dA":
            return _sum([(at("dO", row, k), self.implied("V", col, v0 + k)) for k in range(L.width_v)])
        if quantity == "dZ":  # α × (dA − r)
            (w, a), (g, c), (r, e) = at("weights", row, col), at("dA", row, col), at("rowsum", row, None)
            return w * (g - r), a or c or e
        if quantity == "dQ":
            return _sum([(at("dS", row, j), self.implied("K", j, k0 + col)) for j in range(keys)])
        if quantity == "dK":
            return _sum([(at("dS", i, row), self.implied("Q", i, q0 + col)) for i in range(n)])
        raise ValueError(quantity)  # pragma: no cover - the claims reader allows no other quantity


__all__ = ["Chain", "Value", "base", "number", "rational"]
