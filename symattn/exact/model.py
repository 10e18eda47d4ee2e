"""The exact attention model: every intermediate as a SymPy closed form.

    S = Q Kᵀ                      exact rationals (DomainMatrix over ZZ with a common denominator)
    Z = S · scale                 scale = 1/√d_k stays algebraic; masked entries are −∞
    E = e^Z, sums Σ_k E_ik        exp stays symbolic; e^−∞ = 0
    A_ij = E_ij / Σ_k E_ik
    O = A V

"Stable" softmax subtracts each row's maximum first (``shifted``,
``exp_shifted``, ``exp_shifted_sum``); the weights are the same.

Numbers come from :meth:`Model.rounded` and :meth:`Model.significant`, which
evaluate every exponential once and round each value correctly
(see :mod:`symattn.exact.numeric`). The model makes no strings.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import ClassVar

import sympy
from sympy import ImmutableMatrix
from sympy.polys.matrices import DomainMatrix

from symattn.exact import engine, numeric
from symattn.exact.base import (
    INFINITE_QUANTITIES,
    QUANTITIES,
    ClosedForms,
    ForwardPass,
    Mask,
    Rounding,
    integer_matrix,
    rational_matrix,
    row_sums,
)
from symattn.exact.boxes import Boxes
from symattn.exact.numeric import Fixed
from symattn.input.errors import EvaluationError, LimitError
from symattn.input.limits import ABS_Z, PRECISION_BITS, WORK_BITS
from symattn.input.reader import is_numbers
from symattn.input.spec import Spec


@dataclass(frozen=True, eq=False)
class Model(ClosedForms, Rounding, ForwardPass):
    """Exact Q, K, V and everything computed from them. Build with :func:`~symattn.exact.heads.build_model`.

    Each matrix is held as integers over ZZ and a common denominator (Q = q / dq);
    integer products are many times faster than products over QQ. The SymPy
    matrices (``Q``, ``scores``, ``weights``, …) are built on first use.
    """

    q: DomainMatrix
    k: DomainMatrix
    v: DomainMatrix
    s: DomainMatrix  # S = Q Kᵀ = s / (dq dk)
    dq: int
    dk: int
    dv: int
    d_k: int
    scale: sympy.Expr  # Z = S * scale
    allowed: Mask | None = None  # True where a query may attend to a key; None: everywhere
    kind: ClassVar[str] = "head"
    plain_scores: ClassVar[bool] = True  # z = n·scale/den, as compute's structure printer and certificates assume
    rotated: ClassVar[tuple[str, ...]] = ()  # quantities before the scores: RoPE's Q_rot, K_rot (exact/rope.py)

    @property
    def n_queries(self) -> int:
        return self.q.shape[0]

    @property
    def n_keys(self) -> int:
        return self.k.shape[0]

    def may_attend(self, i: int, j: int) -> bool:
        return self.allowed is None or self.allowed[i][j]

    def vary(self, i: int, j: int, z: sympy.Expr) -> sympy.Expr:
        """z_ij after the variants of the scores (ALiBi's bias, the softcap): itself here."""
        return z

    def sink_term(self, i: int, stable: bool) -> sympy.Expr:
        """A sink's term in row i's denominator (e^s, or e^(s − M) for the stable softmax); 0 here."""
        return sympy.Integer(0)

    def extra_quantities(self) -> tuple[str, ...]:
        """A variant's own quantities, for compute (ALiBi's "bias"); none here."""
        return ()

    # --- closed forms ----------------------------------------------------

    @cached_property
    def Q(self) -> ImmutableMatrix:
        return rational_matrix(self.q, self.dq)

    @cached_property
    def K(self) -> ImmutableMatrix:
        return rational_matrix(self.k, self.dk)

    @cached_property
    def V(self) -> ImmutableMatrix:
        return rational_matrix(self.v, self.dv)

    @cached_property
    def scores(self) -> ImmutableMatrix:
        return rational_matrix(self.s, self.dq * self.dk)

    @cached_property
    def sqrt_dk(self) -> sympy.Expr:
        return sympy.sqrt(self.d_k)

    @cached_property
    def scaled(self) -> ImmutableMatrix:
        S = self.scores
        return ImmutableMatrix(
            S.rows, S.cols, lambda i, j: S[i, j] * self.scale if self.may_attend(i, j) else sympy.S.NegativeInfinity
        )

    @cached_property
    def row_max(self) -> tuple[int, ...]:
        """For each row, the key with the largest score that may be attended to."""
        scores = self.score_integers[1]
        return tuple(
            max((j for j in range(self.n_keys) if self.may_attend(i, j)), key=lambda j: row[j])
            for i, row in enumerate(scores)
        )

    @cached_property
    def shifted(self) -> ImmutableMatrix:
        S = self.scores
        return ImmutableMatrix(
            S.rows,
            S.cols,
            lambda i, j: (
                (S[i, j] - S[i, self.row_max[i]]) * self.scale if self.may_attend(i, j) else sympy.S.NegativeInfinity
            ),
        )

    @cached_property
    def exp_shifted(self) -> ImmutableMatrix:
        return self.shifted.applyfunc(sympy.exp)

    @cached_property
    def exp_shifted_sum(self) -> ImmutableMatrix:
        return row_sums(self.exp_shifted)

    @cached_property
    def products(self) -> ImmutableMatrix:
        """Row i*n_keys + j holds A_ij · V_j: the terms of output row i."""
        A, V = self.weights, self.V
        return ImmutableMatrix(A.rows * A.cols, V.cols, lambda r, k: A[r // A.cols, r % A.cols] * V[r % A.cols, k])

    def exact(self, quantity: str) -> ImmutableMatrix:
        """The closed forms of one quantity as a matrix (1×1 for scalars)."""
        if quantity not in QUANTITIES:
            raise ValueError(f"unknown quantity {quantity!r}; expected one of {', '.join(QUANTITIES)}")
        if quantity in ("scale", "sqrt_dk"):
            return ImmutableMatrix([[getattr(self, quantity)]])
        return getattr(self, quantity)

    # --- numbers ---------------------------------------------------------

    def compare(self, quantity: str, row: int, col: int, r: Fraction) -> int:
        """The sign of (entry - r): -1, 0 or 1, decided exactly."""
        exact = self.rationals(quantity)[row][col]
        if exact is not None:
            return (exact > r) - (exact < r)
        cols = len(self.rationals(quantity)[0])
        bits = numeric.start_bits(0, self._magnitude_bits(quantity)) + max(0, -numeric.log10_floor(r) * 4 if r else 0)
        while bits <= PRECISION_BITS + self._headroom_bits:
            box = self._enclosures(quantity, bits)[row * cols + col]
            scaled = r * (1 << box.bits)
            if box.hi < scaled:
                return -1
            if box.lo > scaled:
                return 1
            bits *= 2
        raise EvaluationError(f"cannot compare {quantity} entry with {r}: it may be equal")

    def _is_infinite(self, quantity: str, row: int, col: int) -> bool:
        return quantity in INFINITE_QUANTITIES and not self.may_attend(row, col)

    def _may_be_infinite(self, quantity: str) -> bool:
        return quantity in INFINITE_QUANTITIES and self.allowed is not None

    def rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        """The exact rational value of each entry, or None where it is irrational (or −∞).

        Decided from the structure, without building closed forms: by
        Lindemann–Weierstrass, e^z (z algebraic) is rational only at z = 0, and a
        softmax weight only when every score its query may attend to is equal.
        """
        table = self._rational_tables.get(quantity)
        if table is None:
            table = self._rational_tables[quantity] = self._rationals(quantity)
        return table

    @cached_property
    def _rational_tables(self) -> dict[str, tuple[tuple[Fraction | None, ...], ...]]:
        return {}

    def _rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        ok = self.may_attend
        if quantity in ("scale", "sqrt_dk"):
            return ((numeric.as_fraction(getattr(self, quantity)),),)
        if quantity in ("weights", "products", "output"):  # from the groups alone (RoPE's scores have no integers)
            return self._softmax_rationals(quantity)
        den, scores = self.score_integers
        if quantity in ("scores", "scaled", "shifted"):
            # from the integers, not the closed forms: z = n·scale/den is rational iff the scale is, or n = 0
            c = Fraction(1) if quantity == "scores" else numeric.as_fraction(self.scale)
            top = [row[self.row_max[i]] if quantity == "shifted" else 0 for i, row in enumerate(scores)]
            return tuple(
                tuple(
                    None
                    if quantity != "scores" and not ok(i, j)
                    else Fraction((x - top[i]) * c.numerator, den * c.denominator)
                    if c is not None
                    else Fraction(0)
                    if x == top[i]
                    else None
                    for j, x in enumerate(row)
                )
                for i, row in enumerate(scores)
            )
        top = [row[self.row_max[i]] for i, row in enumerate(scores)]
        if quantity == "exp":
            return tuple(
                tuple((Fraction(1) if x == 0 else None) if ok(i, j) else Fraction(0) for j, x in enumerate(row))
                for i, row in enumerate(scores)
            )
        if quantity == "exp_shifted":
            return tuple(
                tuple((Fraction(1) if x == top[i] else None) if ok(i, j) else Fraction(0) for j, x in enumerate(row))
                for i, row in enumerate(scores)
            )
        if quantity in ("exp_sum", "exp_shifted_sum"):
            target = (lambda i: 0) if quantity == "exp_sum" else (lambda i: top[i])
            return tuple(
                (
                    Fraction(self._allowed_count(i))
                    if all(x == target(i) for j, x in enumerate(row) if ok(i, j))
                    else None,
                )
                for i, row in enumerate(scores)
            )
        return self._softmax_rationals(quantity)

    def _softmax_rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        """weights, products and output: rational where the groups of equal scores say so."""
        n, m = self.n_queries, self.n_keys
        ok = self.may_attend
        weights = tuple(
            tuple(
                Fraction(0) if not ok(i, j) else (Fraction(1, self._allowed_count(i)) if self._row_is_flat(i) else None)
                for j in range(m)
            )
            for i in range(n)
        )
        if quantity == "weights":
            return weights
        if quantity == "products":
            return tuple(
                tuple(self._product(weights[i][j], v) for v in self.v_rows[j]) for i in range(n) for j in range(m)
            )
        if quantity == "output":
            return tuple(tuple(self._rational_output(i, k) for k in range(self.v.shape[1])) for i in range(n))
        raise ValueError(f"unknown quantity {quantity!r}; expected one of {', '.join(QUANTITIES)}")

    def _allowed_count(self, i: int) -> int:
        return self.n_keys if self.allowed is None else sum(self.allowed[i])

    @cached_property
    def v_rows(self) -> list[list[Fraction]]:
        return [[Fraction(int(x), self.dv) for x in row] for row in self.v.to_list()]

    @cached_property
    def _v_integers(self) -> tuple[int, list[list[int]]]:
        """V = columns / den with integer columns."""
        rows = self.v.to_list()
        return self.dv, [[int(row[k]) for row in rows] for k in range(self.v.shape[1])]

    @cached_property
    def score_integers(self) -> tuple[int, list[list[int]]]:
        """S = rows / den with integer rows (fast to hash, compare and multiply)."""
        return self.dq * self.dk, [[int(x) for x in row] for row in self.s.to_list()]

    @cached_property
    def _groups(self) -> list[list[list[int]]]:
        # the keys each row may attend to, grouped by equal score
        return self._grouped(self.score_integers[1])

    def _grouped(self, scores: Sequence[Sequence[Hashable]]) -> list[list[list[int]]]:
        """The keys each row may attend to, grouped by equal ``scores`` (exact stand-ins for the scores)."""
        out = []
        for i, row in enumerate(scores):
            groups: dict[Hashable, list[int]] = {}
            for j, x in enumerate(row):
                if self.may_attend(i, j):
                    groups.setdefault(x, []).append(j)
            out.append(list(groups.values()))
        return out

    @cached_property
    def _all_distinct(self) -> list[bool]:
        return [all(len(group) == 1 for group in groups) for groups in self._groups]

    @cached_property
    def _constant_columns(self) -> list[Fraction | None]:
        den, columns = self._v_integers
        return [Fraction(col[0], den) if len(set(col)) == 1 else None for col in columns]

    def _row_is_flat(self, i: int) -> bool:
        return len(self._groups[i]) == 1

    @staticmethod
    def _product(weight: Fraction | None, v: Fraction) -> Fraction | None:
        if v == 0:
            return Fraction(0)
        return None if weight is None else weight * v

    def _rational_output(self, i: int, k: int) -> Fraction | None:
        # By Lindemann–Weierstrass, Σ_j V_jk e^{z_j} / Σ_j e^{z_j} (z algebraic) is
        # rational iff the mean of V over each group of equal z is the same.
        den, columns = self._v_integers
        column = columns[k]
        groups = self._groups[i]
        if self._all_distinct[i]:  # rational iff V is constant over the keys this row may attend to
            if self.allowed is None:
                return self._constant_columns[k]
            values = {column[group[0]] for group in groups}
            return Fraction(values.pop(), den) if len(values) == 1 else None
        first, count = sum(column[j] for j in groups[0]), len(groups[0])
        for group in groups[1:]:  # usually the second group already differs
            if sum(column[j] for j in group) * count != first * len(group):
                return None
        return Fraction(first, count * den)

    def _magnitude_bits(self, quantity: str) -> int:
        return self._exp_bits if quantity in ("exp", "exp_sum") else 0

    @cached_property
    def _exp_bits(self) -> int:
        # bits above the point that e^z may need: z * log2(e) < 1.5 z
        den, rows = self.score_integers
        top = Fraction(max(max(row) for row in rows), den) * _upper(self.scale)
        return max(0, int(top * 3 // 2) + 8)

    @cached_property
    def largest_z(self) -> tuple[Fraction, int, int]:
        """An upper bound of max |z| over the entries that may be attended to, and where it is."""
        den, rows = self.score_integers
        top, i, j = max(
            (abs(x), i, j) for i, row in enumerate(rows) for j, x in enumerate(row) if self.may_attend(i, j)
        )
        return Fraction(top, den) * _upper(self.scale), i, j

    @cached_property
    def _headroom_bits(self) -> int:
        # e^z needs 1.5 |z| bits above the point; a weight e^(z_j − max) as many below it
        return int(3 * self.largest_z[0]) + 64

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        bits = -(-bits // 32) * 32  # coarse steps, so quantities share one evaluation
        if bits not in self._boxes:
            self._boxes[bits] = self._new_boxes(bits)
        return getattr(self._boxes[bits], quantity)()

    def _new_boxes(self, bits: int) -> Boxes:
        """The enclosures at one precision (a variant's model encloses its own scores)."""
        return Boxes(self, bits)

    @cached_property
    def _boxes(self) -> dict[int, Boxes]:
        return {}

    @cached_property
    def numeric_engine(self) -> str:
        """The numeric engine of this model's enclosures, chosen when it is first needed."""
        return engine.name()

    def _exp_arguments(self, shifted: bool) -> list[list[int | None]]:
        """The integers n with z = n · scale / den (minus the row maximum when ``shifted``); None where masked."""
        rows = self.score_integers[1]
        return [
            [x - (row[self.row_max[i]] if shifted else 0) if self.may_attend(i, j) else None for j, x in enumerate(row)]
            for i, row in enumerate(rows)
        ]

    def _z_fixed(self, c: Fixed, shifted: bool) -> list[list[Fixed | None]]:
        """z (or z minus its row maximum) at 2**-c.bits, from ``c`` enclosing the scale: exact
        integer products. None where masked."""
        den = self.score_integers[0]
        out = []
        for row in self._exp_arguments(shifted):
            boxes: list[Fixed | None] = []
            for n in row:
                if n is None:
                    boxes.append(None)
                    continue
                lo, hi = (n * c.lo, n * c.hi) if n >= 0 else (n * c.hi, n * c.lo)
                boxes.append(Fixed(lo // den, -(-hi // den), c.bits))
            out.append(boxes)
        return out


def _upper(x: sympy.Expr) -> Fraction:
    # a rational upper bound of a positive constant
    box = Fixed.from_interval(numeric.enclose(x, 64), 32)
    return Fraction(box.hi, 1 << 32)


def scale_of(spec: Spec) -> sympy.Expr:
    """The exact factor Z = S · scale."""
    if spec.scale == "sqrt":
        return 1 / sympy.sqrt(spec.d_k)
    if spec.scale == "none":
        return sympy.Integer(1)
    return sympy.Rational(spec.scale.value.numerator, spec.scale.value.denominator)


def model_fields(spec: Spec) -> dict:
    """A numeric head's fields from its spec: Q, K, V as integers over a denominator, S = QKᵀ (for RoPE the
    scores before the rotation), d_k, the scale and the mask. Every head model (and its variants) takes them."""
    Q, K, V = spec.Q, spec.K, spec.V
    if not (is_numbers(Q) and is_numbers(K) and is_numbers(V)):
        raise ValueError("a spec with formulas has a symbolic model: use build_symbolic")
    (q, dq), (k, dk), (v, dv) = (integer_matrix(m) for m in (Q, K, V))
    return dict(
        q=q,
        k=k,
        v=v,
        s=q * k.transpose(),
        dq=dq,
        dk=dk,
        dv=dv,
        d_k=spec.d_k,
        scale=scale_of(spec),
        allowed=spec.allowed,
    )


def check_work(model: Model, source: str) -> None:
    """Refuse scores whose exponentials no one could print or store, before any is evaluated."""
    z, i, j = model.largest_z
    if z > ABS_Z:
        digits = z * Fraction(4343, 10000)  # log10(e) < 0.4343
        raise LimitError(
            source,
            "scaled",
            f"|z| = |S·scale| is about {_approximately(z)}, more than {ABS_Z} "
            f"(the limit): e^z would have about {_approximately(digits)} digits",
            (i + 1, j + 1),
        )
    work = model.n_queries * model.n_keys * model._headroom_bits
    if work > WORK_BITS:
        raise LimitError(
            source,
            "scaled",
            f"{model.n_queries}×{model.n_keys} scores with |z| up to "
            f"{_approximately(z)} need {work // 8 // 2**20} MiB of exact digits; "
            f"the limit is {WORK_BITS // 8 // 2**20} MiB",
            (i + 1, j + 1),
        )


def _approximately(x: Fraction) -> str:
    # an integer for a message, without str() of a huge int
    n = int(x)
    if n.bit_length() < 60:
        return str(n)
    return f"10^{int(n.bit_length() * 0.30103)}"
