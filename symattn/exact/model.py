"""The exact attention model of one head: every intermediate as a SymPy closed form.

    S = Q Kᵀ                      exact rationals (DomainMatrix over ZZ with a common denominator)
    Z = S · scale                 scale = 1/√d_k stays algebraic; masked entries are −∞
    E = e^Z, sums Σ_k E_ik        exp stays symbolic; e^−∞ = 0
    A_ij = E_ij / Σ_k E_ik
    O = A V

"Stable" softmax subtracts each row's maximum first (``shifted``,
``exp_shifted``, ``exp_shifted_sum``); the weights are the same.

A head with variants holds their parts (:mod:`symattn.variants`), in the order they act: a Q/K part
makes the scores, additive and monotone parts change z, a denominator part adds a term to every
softmax's sum. The model asks them; z's exact form and what is decided on it are
:mod:`symattn.variants.forms`. Without parts every z is n·scale/den for integers n, and the model
decides everything on those integers, fast.

Numbers come from :meth:`Model.rounded` and :meth:`Model.significant`, which
evaluate every exponential once and round each value correctly
(see :mod:`symattn.exact.numeric`). The model makes no strings.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace
from fractions import Fraction
from functools import cached_property, cmp_to_key
from typing import Any, ClassVar

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
    Rows,
    rational_matrix,
)
from symattn.exact.boxes import Boxes
from symattn.exact.numeric import Fixed
from symattn.exact.rationals import Rationals
from symattn.input.errors import EvaluationError
from symattn.input.limits import PRECISION_BITS
from symattn.input.records import record
from symattn.input.spec import Spec
from symattn.variants.base import ADD, DENOMINATOR, MAP, QK
from symattn.variants.forms import Forms, Unordered, upper


@record(eq=False)
class Model(Rationals, ClosedForms, Rounding, ForwardPass):
    """Exact Q, K, V and everything computed from them. Build with :func:`~symattn.exact.heads.build_model`.

    Each matrix is held as integers over ZZ and a common denominator (Q = q / dq);
    integer products are many times faster than products over QQ. The SymPy
    matrices (``Q``, ``scores``, ``weights``, …) are built on first use.
    """

    q: DomainMatrix
    k: DomainMatrix
    v: DomainMatrix
    s: DomainMatrix  # S = Q Kᵀ = s / (dq dk), before any Q/K part
    dq: int
    dk: int
    dv: int
    d_k: int
    scale: sympy.Expr  # Z = S * scale
    allowed: Mask | None = None  # True where a query may attend to a key; None: everywhere
    parts: tuple[Any, ...] = ()  # the head parts of its variants, in the order they act (symattn.variants)
    kind: ClassVar[str] = "head"

    def __getattr__(self, name: str) -> Any:
        # what a part adds to the model (a slope, the rotated structures): model.<name>, found on its parts
        if name.startswith("__") or name in ("parts", "memo"):
            raise AttributeError(name)
        for part in self.__dict__.get("parts", ()):
            if name in part.exposes:
                return part.expose(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def n_queries(self) -> int:
        return self.q.shape[0]

    @property
    def n_keys(self) -> int:
        return self.k.shape[0]

    def may_attend(self, i: int, j: int) -> bool:
        return self.allowed is None or self.allowed[i][j]

    # --- the parts ---------------------------------------------------------

    @cached_property
    def memo(self) -> dict[str, Any]:
        """What the parts compute once per model (their structures, enclosures at each precision)."""
        return {}

    def stage_parts(self, stage: int) -> tuple[Any, ...]:
        return tuple(p for p in self.parts if p.stage == stage)

    @cached_property
    def qk(self) -> Any:
        """The part that makes the scores from Q and K, or None (S = QKᵀ)."""
        return next(iter(self.stage_parts(QK)), None)

    @cached_property
    def denominator(self) -> Any:
        """The part with a term in every softmax denominator, or None."""
        return next(iter(self.stage_parts(DENOMINATOR)), None)

    @property
    def varied(self) -> bool:
        """Whether a part changes z or the softmax's denominator (else z = S · scale)."""
        return any(p.stage != QK for p in self.parts)

    def without(self, *stages: int) -> Model:
        """The same head without the parts of these stages (the scores before a bias, z before a cap)."""
        return replace(self, parts=tuple(p for p in self.parts if p.stage not in stages))

    @cached_property
    def forms(self) -> Forms:
        return Forms(self)

    @property
    def before_scores(self) -> tuple[str, ...]:
        """The quantities a Q/K part makes before the scores (compute writes them first)."""
        return self.qk.computed if self.qk is not None else ()

    def extra_quantities(self) -> tuple[str, ...]:
        """The later parts' own quantities, for compute (the additive part's term, the denominator's)."""
        return tuple(q for p in self.parts if p.stage != QK for q in p.computed)

    def owner(self, quantity: str) -> Any:
        """The part whose quantity this is, or None."""
        return next((p for p in self.parts if quantity in p.quantities), None)

    def vary(self, i: int, j: int, z: sympy.Expr) -> sympy.Expr:
        """z_ij after the additive and monotone parts (z itself without)."""
        for part in self.parts:
            if part.stage in (ADD, MAP):
                z = part.vary(self, i, j, z)
        return z

    def z_before(self, part: Any, i: int, j: int) -> sympy.Expr:
        """z_ij as it comes into a part: S·scale through the additive and monotone parts before it."""
        z = self.scores[i, j] * self.scale
        for p in self.parts:
            if p is part:
                break
            if p.stage in (ADD, MAP):
                z = p.vary(self, i, j, z)
        return z

    def z_derivative(self, i: int, j: int) -> sympy.Expr:
        """dz/dy of the monotone parts at (i, j): y the scaled score with its additive terms (1 without)."""
        out: sympy.Expr = sympy.Integer(1)
        for part in self.stage_parts(MAP):
            out = out * part.derivative(self, i, j)
        return out

    def denominator_terms(self, i: int, stable: bool) -> tuple[sympy.Expr, ...]:
        """A denominator part's term in row i's sum (e^(s − M) for the stable softmax); none without one."""
        return () if self.denominator is None else (self.denominator.term(self, i, stable),)

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
        if self.qk is not None:
            return self.qk.scores(self)
        return rational_matrix(self.s, self.dq * self.dk)

    @cached_property
    def sqrt_dk(self) -> sympy.Expr:
        return sympy.sqrt(self.d_k)

    def _z(self, i: int, j: int) -> sympy.Expr:
        # S·scale, then the additive and monotone parts (masked: −∞)
        if not self.may_attend(i, j):
            return sympy.S.NegativeInfinity
        return self.vary(i, j, self.scores[i, j] * self.scale)

    @cached_property
    def scaled(self) -> ImmutableMatrix:
        S = self.scores
        return ImmutableMatrix(S.rows, S.cols, self._z)

    @cached_property
    def row_max(self) -> tuple[int, ...]:
        """For each row, the key with the largest z that may be attended to (the first, on ties)."""
        if not self.parts:
            scores = self.score_integers[1]
            return tuple(
                max((j for j in range(self.n_keys) if self.may_attend(i, j)), key=lambda j: row[j])
                for i, row in enumerate(scores)
            )
        forms, out = self.forms, []
        for i in range(self.n_queries):
            keys = [j for j in range(self.n_keys) if self.may_attend(i, j)]

            def order(a: int, b: int, i: int = i) -> int:
                return forms.compare(forms.form(i, a), forms.form(i, b))

            try:
                out.append(max(keys, key=cmp_to_key(order)))
            except Unordered:
                raise EvaluationError(
                    "cannot order two biased scores"
                    if self.varied
                    else f"cannot decide the largest score of row {i + 1}"
                ) from None
        return tuple(out)

    @cached_property
    def shift(self) -> tuple[sympy.Expr, ...]:
        """What the stable softmax subtracts from each row: its largest z (or a denominator part's logit)."""
        Z = self.scaled
        top = tuple(Z[i, self.row_max[i]] for i in range(Z.rows))
        return top if self.denominator is None else self.denominator.shift(self, top)

    @cached_property
    def shifted(self) -> ImmutableMatrix:
        if self.varied:
            Z = self.scaled
            return ImmutableMatrix(
                Z.rows,
                Z.cols,
                lambda i, j: Z[i, j] - self.shift[i] if self.may_attend(i, j) else sympy.S.NegativeInfinity,
            )
        S = self.scores
        return ImmutableMatrix(
            S.rows,
            S.cols,
            lambda i, j: (
                (S[i, j] - S[i, self.row_max[i]]) * self.scale if self.may_attend(i, j) else sympy.S.NegativeInfinity
            ),
        )

    @cached_property
    def exp_sum(self) -> ImmutableMatrix:
        E = self.exp
        return ImmutableMatrix([[sympy.Add(*E.row(i), *self.denominator_terms(i, False))] for i in range(E.rows)])

    @cached_property
    def exp_shifted(self) -> ImmutableMatrix:
        return self.shifted.applyfunc(sympy.exp)

    @cached_property
    def exp_shifted_sum(self) -> ImmutableMatrix:
        E = self.exp_shifted
        return ImmutableMatrix([[sympy.Add(*E.row(i), *self.denominator_terms(i, True))] for i in range(E.rows)])

    @cached_property
    def products(self) -> ImmutableMatrix:
        """Row i*n_keys + j holds A_ij · V_j: the terms of output row i."""
        A, V = self.weights, self.V
        return ImmutableMatrix(A.rows * A.cols, V.cols, lambda r, k: A[r // A.cols, r % A.cols] * V[r % A.cols, k])

    def exact(self, quantity: str) -> ImmutableMatrix:
        """The closed forms of one quantity as a matrix (1×1 for scalars)."""
        part = self.owner(quantity)
        if part is not None:
            return part.exact(self, quantity)
        if quantity not in QUANTITIES:
            raise ValueError(f"unknown quantity {quantity!r}; expected one of {', '.join(QUANTITIES)}")
        if quantity in ("scale", "sqrt_dk"):
            return ImmutableMatrix([[getattr(self, quantity)]])
        return getattr(self, quantity)

    def significant(self, quantity: str, digits: int) -> Rows:
        try:
            return super().significant(quantity, digits)
        except EvaluationError:
            for part in self.stage_parts(MAP):  # a map whose values no fixed-point box separates
                found = part.significant(self, quantity, digits)
                if found is not None:
                    return found
            raise

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

    @cached_property
    def score_integers(self) -> tuple[int, list[list[int]]]:
        """S = rows / den with integer rows (fast to hash, compare and multiply)."""
        if self.qk is not None:
            raise TypeError(self.qk.not_rational)
        return self.dq * self.dk, [[int(x) for x in row] for row in self.s.to_list()]

    @cached_property
    def _groups(self) -> list[list[list[int]]]:
        # the keys each row may attend to, grouped by equal z (exact stand-ins: the integers, or the forms' keys)
        if not self.parts:
            return self._grouped(self.score_integers[1])
        forms = self.forms
        return self._grouped([[forms.key(forms.form(i, j)) for j in range(self.n_keys)] for i in range(self.n_queries)])

    @property
    def groups(self) -> list[list[list[int]]]:
        return self._groups

    def _grouped(self, scores: Sequence[Sequence[Hashable]]) -> list[list[list[int]]]:
        """The keys each row may attend to, grouped by equal ``scores`` (exact stand-ins for z)."""
        out = []
        for i, row in enumerate(scores):
            groups: dict[Hashable, list[int]] = {}
            for j, x in enumerate(row):
                if self.may_attend(i, j):
                    groups.setdefault(x, []).append(j)
            out.append(list(groups.values()))
        return out

    def _magnitude_bits(self, quantity: str) -> int:
        large = ("exp", "exp_sum") + tuple(q for p in self.parts for q in p.large)
        return self.exp_bits if quantity in large else 0

    @cached_property
    def exp_bits(self) -> int:
        """Bits above the point that e^z may need: z * log2(e) < 1.5 z."""
        if self.qk is not None:
            top = self.qk.highest(self)
        else:
            den, rows = self.score_integers
            top = Fraction(max(max(row) for row in rows), den)
        bits = max(0, int(top * upper(self.scale) * 3 // 2) + 8)
        return bits if self.denominator is None else max(bits, self.denominator.exp_bits(self))

    @property
    def _exp_bits(self) -> int:
        return self.exp_bits

    @cached_property
    def largest_z(self) -> tuple[Fraction, int, int]:
        """An upper bound of max |z| over the entries that may be attended to, and where it is."""
        ok = self.may_attend
        if not self.parts:
            den, rows = self.score_integers
            top, i, j = max((abs(x), i, j) for i, row in enumerate(rows) for j, x in enumerate(row) if ok(i, j))
            return Fraction(top, den) * upper(self.scale), i, j
        scale = upper(self.scale)
        if self.qk is not None:
            magnitudes = self.qk.magnitudes(self)
        else:
            den, rows = self.score_integers
            magnitudes = [[abs(Fraction(x, den)) for x in row] for row in rows]
        adds = self.stage_parts(ADD)
        top, i, j = max(
            (x * scale + sum((p.magnitude(i, j) for p in adds), Fraction(0)), i, j)
            for i, row in enumerate(magnitudes)
            for j, x in enumerate(row)
            if ok(i, j)
        )
        for part in self.stage_parts(MAP):
            top = min(top, part.bound)
        return top, i, j

    @cached_property
    def _headroom_bits(self) -> int:
        # e^z needs 1.5 |z| bits above the point; a weight e^(z_j − max) as many below it
        bits = int(3 * self.largest_z[0]) + 64
        return bits if self.denominator is None else bits + self.denominator.headroom

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        bits = -(-bits // 32) * 32  # coarse steps, so quantities share one evaluation
        if bits not in self._boxes:
            self._boxes[bits] = Boxes(self, bits)
        boxes = self._boxes[bits]
        part = self.owner(quantity)
        return part.boxes(boxes, quantity) if part is not None else getattr(boxes, quantity)()

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


def scale_of(spec: Spec) -> sympy.Expr:
    """The exact factor Z = S · scale."""
    if spec.scale == "sqrt":
        return 1 / sympy.sqrt(spec.d_k)
    if spec.scale == "none":
        return sympy.Integer(1)
    return sympy.Rational(spec.scale.value.numerator, spec.scale.value.denominator)
