"""The exact attention model: every intermediate as a SymPy closed form.

    S = Q Kᵀ                      rational (DomainMatrix over QQ)
    Z = S · scale                 scale = 1/√d_k stays algebraic
    E = e^Z, sums Σ_k E_ik        exp stays symbolic
    A_ij = E_ij / Σ_k E_ik
    O = A V

Numbers come from :meth:`Model.rounded` and :meth:`Model.significant`, which
evaluate every exponential once and round each value correctly
(see :mod:`symattn.numeric`). The model makes no strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import Sequence

import sympy
from mpmath import iv
from sympy import ImmutableMatrix
from sympy.polys.domains import QQ
from sympy.polys.matrices import DomainMatrix

from . import numeric
from .numeric import Fixed
from .spec import Matrix, Spec

Rows = tuple[tuple[Decimal, ...], ...]

QUANTITIES = ("scale", "sqrt_dk", "scores", "scaled", "exp", "exp_sum", "weights", "products", "output")


def _domain_matrix(m: Matrix) -> DomainMatrix:
    return DomainMatrix([[QQ(x.value.numerator, x.value.denominator) for x in row] for row in m],
                        (len(m), len(m[0])), QQ)


def _fraction(x: sympy.Expr) -> Fraction:
    return Fraction(int(x.p), int(x.q))


@dataclass(frozen=True, eq=False)
class Model:
    """Exact Q, K, V and everything computed from them. Build with :func:`build_model`."""

    Q: ImmutableMatrix
    K: ImmutableMatrix
    V: ImmutableMatrix
    d_k: int
    scale: sympy.Expr  # Z = S * scale
    scores: ImmutableMatrix
    scaled: ImmutableMatrix

    @property
    def n_queries(self) -> int:
        return self.Q.rows

    @property
    def n_keys(self) -> int:
        return self.K.rows

    @cached_property
    def sqrt_dk(self) -> sympy.Expr:
        return sympy.sqrt(self.d_k)

    @cached_property
    def exp(self) -> ImmutableMatrix:
        return self.scaled.applyfunc(sympy.exp)

    @cached_property
    def exp_sum(self) -> ImmutableMatrix:
        e = self.exp
        return ImmutableMatrix([[sympy.Add(*e.row(i))] for i in range(e.rows)])

    @cached_property
    def weights(self) -> ImmutableMatrix:
        e, sums = self.exp, self.exp_sum
        return ImmutableMatrix(e.rows, e.cols, lambda i, j: e[i, j] / sums[i, 0])

    @cached_property
    def output(self) -> ImmutableMatrix:
        # Σ_j V_jk e^{z_ij} over the row sum: one fraction per entry, as a reader writes it
        e, sums, V = self.exp, self.exp_sum, self.V
        return ImmutableMatrix(e.rows, V.cols, lambda i, k: sympy.Add(
            *[V[j, k] * e[i, j] for j in range(e.cols)]) / sums[i, 0])

    @cached_property
    def products(self) -> ImmutableMatrix:
        """Row i*n_keys + j holds A_ij · V_j: the terms of output row i."""
        A, V = self.weights, self.V
        return ImmutableMatrix(A.rows * A.cols, V.cols, lambda r, k: A[r // A.cols, r % A.cols] * V[r % A.cols, k])

    def exact(self, quantity: str) -> ImmutableMatrix:
        """The closed forms of one quantity as a matrix (1×1 for scalars)."""
        if quantity in ("scale", "sqrt_dk"):
            return ImmutableMatrix([[getattr(self, quantity)]])
        return getattr(self, quantity)

    # --- numbers ---------------------------------------------------------

    def rounded(self, quantity: str, decimals: int | Sequence[int]) -> Rows:
        """Every entry rounded half-up to ``decimals`` places, each digit correct."""
        return self._numbers(quantity, lambda boxes, exact, bits: numeric.decide(
            boxes, exact, decimals, bits + numeric.start_bits(max(_seq(decimals))), quantity))

    def significant(self, quantity: str, digits: int) -> Rows:
        """Every entry rounded half-up to ``digits`` significant digits."""
        return self._numbers(quantity, lambda boxes, exact, bits: numeric.decide_significant(
            boxes, exact, digits, bits + numeric.start_bits(digits), quantity))

    def _numbers(self, quantity: str, method) -> Rows:
        exact_matrix = self.exact(quantity)
        rows, cols = exact_matrix.shape
        exact = [x for row in self.rationals(quantity) for x in row]
        flat = method(lambda bits: self._enclosures(quantity, bits), exact, self._magnitude_bits(quantity))
        return tuple(tuple(flat[i * cols:(i + 1) * cols]) for i in range(rows))

    def rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        """The exact rational value of each entry, or None where it is irrational."""
        matrix = self.exact(quantity)
        if quantity == "output":
            return tuple(tuple(self._rational_output(i, k) for k in range(matrix.cols)) for i in range(matrix.rows))
        return tuple(tuple(numeric.as_fraction(x) for x in matrix.row(i)) for i in range(matrix.rows))

    def _rational_output(self, i: int, k: int) -> Fraction | None:
        # By Lindemann–Weierstrass, Σ_j V_jk e^{z_j} / Σ_j e^{z_j} (z algebraic) is
        # rational iff the mean of V over each group of equal z is the same.
        groups: dict[sympy.Expr, list[Fraction]] = {}
        for j in range(self.n_keys):
            v = self.V[j, k]
            if not isinstance(v, sympy.Rational):
                return None
            groups.setdefault(self.scaled[i, j], []).append(_fraction(v))
        means = {sum(vs, Fraction(0)) / len(vs) for vs in groups.values()}
        return means.pop() if len(means) == 1 else None

    def _magnitude_bits(self, quantity: str) -> int:
        return self._exp_bits if quantity in ("exp", "exp_sum") else 0

    @cached_property
    def _exp_bits(self) -> int:
        # bits above the point that e^z may need: z * log2(e), from a coarse enclosure
        top = max(Fixed.from_interval(z, 0).hi for row in self._z_box(16) for z in row)
        return max(0, top * 3 // 2 + 8)

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        bits = -(-bits // 64) * 64  # coarse steps, so quantities share one evaluation
        if bits not in self._boxes:
            self._boxes[bits] = _Boxes(self, bits)
        return getattr(self._boxes[bits], quantity)()

    @cached_property
    def _boxes(self) -> dict[int, "_Boxes"]:
        return {}

    def _z_box(self, bits: int) -> list[list["iv.mpf"]]:
        cache: dict = {}
        return [[numeric.enclose(self.scaled[i, j], bits, cache) for j in range(self.n_keys)]
                for i in range(self.n_queries)]


def _seq(x: int | Sequence[int]) -> Sequence[int]:
    return [x] if isinstance(x, int) else x


class _Boxes:
    """Enclosures of every quantity at one working precision, each exp computed once."""

    def __init__(self, model: Model, bits: int):
        self.model = model
        self.bits = bits
        self.prec = bits + 32 + model._exp_bits

    def _flat(self, matrix: ImmutableMatrix) -> list[Fixed]:
        cache: dict = {}
        return [Fixed.from_interval(numeric.enclose(x, self.prec, cache), self.bits) for x in matrix]

    def scale(self) -> list[Fixed]:
        return self._flat(ImmutableMatrix([[self.model.scale]]))

    def sqrt_dk(self) -> list[Fixed]:
        return self._flat(ImmutableMatrix([[self.model.sqrt_dk]]))

    def scores(self) -> list[Fixed]:
        return self._flat(self.model.scores)

    def scaled(self) -> list[Fixed]:
        return self._flat(self.model.scaled)

    @cached_property
    def _z(self) -> list[list["iv.mpf"]]:
        return self.model._z_box(self.prec)

    @cached_property
    def _exp(self) -> list[Fixed]:
        with numeric.working_precision(self.prec):
            return [Fixed.from_interval(iv.exp(z), self.bits) for row in self._z for z in row]

    def exp(self) -> list[Fixed]:
        return self._exp

    def exp_sum(self) -> list[Fixed]:
        out = []
        for row in _chunks(self.exp(), self.model.n_keys):
            out.append(Fixed(sum(b.lo for b in row), sum(b.hi for b in row), self.bits))
        return out

    @cached_property
    def _weights(self) -> list[list[Fixed]]:
        # shift each row by about its maximum so no exp overflows or vanishes;
        # the quotient does not depend on the shift
        bits = self.bits
        rows = []
        with numeric.working_precision(self.prec):
            for zs in self._z:
                shift = max(Fixed.from_interval(z, 16).hi for z in zs) * iv.mpf(2) ** -16
                boxes = [Fixed.from_interval(iv.exp(z - shift), bits) for z in zs]
                lo_sum = sum(b.lo for b in boxes)
                hi_sum = sum(b.hi for b in boxes)
                rows.append([Fixed((b.lo << bits) // hi_sum, -((-(b.hi << bits)) // lo_sum), bits)
                             for b in boxes])
        return rows

    def weights(self) -> list[Fixed]:
        return [b for row in self._weights for b in row]

    def products(self) -> list[Fixed]:
        V = self.model.V
        if not all(isinstance(v, sympy.Rational) for v in V):
            return self._flat(self.model.products)
        out = []
        for row in self._weights:
            for j, b in enumerate(row):
                for k in range(V.cols):
                    v = _fraction(V[j, k])
                    ends = sorted((b.lo * v, b.hi * v))
                    out.append(Fixed(ends[0].numerator // ends[0].denominator,
                                     -((-ends[1].numerator) // ends[1].denominator), self.bits))
        return out

    def output(self) -> list[Fixed]:
        V = self.model.V
        if all(isinstance(v, sympy.Rational) for v in V):
            return self._output_rational(V)
        return self._output_general(V)

    def _output_rational(self, V: ImmutableMatrix) -> list[Fixed]:
        # O = A V / 1 with V = v / D in integers: exact integer dot products of the ends
        den = 1
        for v in V:
            den = den * int(v.q) // _gcd(den, int(v.q))
        cols = [[int(V[j, k] * den) for j in range(V.rows)] for k in range(V.cols)]
        out = []
        for row in self._weights:
            for col in cols:
                lo = sum(b.lo * v if v >= 0 else b.hi * v for b, v in zip(row, col))
                hi = sum(b.hi * v if v >= 0 else b.lo * v for b, v in zip(row, col))
                out.append(Fixed(lo // den, -((-hi) // den), self.bits))
        return out

    def _output_general(self, V: ImmutableMatrix) -> list[Fixed]:
        cache: dict = {}
        one = 1 << self.bits
        out = []
        with numeric.working_precision(self.prec):
            v_boxes = [[numeric.enclose(V[j, k], self.prec, cache) for k in range(V.cols)] for j in range(V.rows)]
            for row in self._weights:
                a = [iv.mpf([iv.mpf(b.lo) / one, iv.mpf(b.hi) / one]) for b in row]
                for k in range(V.cols):
                    total = iv.mpf(0)
                    for j, w in enumerate(a):
                        total += w * v_boxes[j][k]
                    out.append(Fixed.from_interval(total, self.bits))
        return out


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _scale(spec: Spec) -> sympy.Expr:
    if spec.scale == "sqrt":
        return 1 / sympy.sqrt(spec.d_k)
    if spec.scale == "none":
        return sympy.Integer(1)
    return sympy.Rational(spec.scale.value.numerator, spec.scale.value.denominator)


def build_model(spec: Spec) -> Model:
    """Compute the exact model of a validated spec."""
    Q, K, V = (_domain_matrix(m) for m in (spec.Q, spec.K, spec.V))
    scores = (Q * K.transpose()).to_Matrix()
    scale = _scale(spec)
    return Model(
        Q=ImmutableMatrix(Q.to_Matrix()), K=ImmutableMatrix(K.to_Matrix()), V=ImmutableMatrix(V.to_Matrix()),
        d_k=spec.d_k, scale=scale,
        scores=ImmutableMatrix(scores),
        scaled=ImmutableMatrix(scores).applyfunc(lambda s: s * scale),
    )
