"""The derivation's steps as immutable plain data, and the Derivation that holds them.

A derivation records *what was done* and *which numbers are shown*, never how
it reads: no strings but the user's own labels and title. The renderer picks a
template per step ``kind`` and a language file for the prose.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from symattn import variants
from symattn.derivation.modern import Groups
from symattn.exact.model import Model
from symattn.exact.rounding import Num, NumRows
from symattn.input.formula import Formula
from symattn.input.numeral import Numeral
from symattn.input.reader import Entry
from symattn.input.records import record
from symattn.input.spec import Matrix, Spec

# a shown value: a rounded number, or (in a symbolic derivation) a formula
Shown = Num | Formula
ShownRow = tuple[Shown, ...]
ShownRows = tuple[ShownRow, ...]
Operand = Numeral | Shown


class Facts:
    """A step (or row) whose facts of the variants are read as attributes (``step.window``): the (name,
    value) pairs its parts gave, else the value a part declares for it without the part
    (:func:`symattn.variants.fact`). The templates read them as any field."""

    facts_of: ClassVar[str]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "facts":
            raise AttributeError(name)
        for key, value in self.__dict__.get("facts", ()):
            if key == name:
                return value
        return variants.fact(self.facts_of, name)


@record
class Dot:
    """One expanded sum of products: Σ a×b = result, for entry (row, col)."""

    row: int
    col: int
    terms: tuple[tuple[Operand, Operand], ...]
    result: Operand
    bias: Entry | None = None  # + b, in a projection


@record
class Setup:
    kind: ClassVar[str] = "setup"
    d_k: int
    scale: str  # "sqrt", "none" or "number"
    scale_value: Numeral | None
    sqrt_dk: Shown
    Q: Matrix
    K: Matrix
    V: Matrix
    projected: bool = False  # Q, K, V come from the projection step
    heads: int = 1
    d_model: int | None = None


@record
class Projected:
    """One of Q = X W_Q + b_Q, K, V."""

    name: str  # "Q", "K" or "V"
    source: str  # "X" or "X_kv"
    W: Matrix
    b: tuple[Entry, ...] | None
    result: Matrix
    dots: tuple[Dot, ...]


@record
class Projecting:
    kind: ClassVar[str] = "projecting"
    X: Matrix
    X_kv: Matrix | None
    products: tuple[Projected, ...]
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)


@record
class Masking:
    kind: ClassVar[str] = "masking"
    mask: str  # "none" (key padding only), "causal" or "matrix"
    allowed: tuple[tuple[bool, ...], ...]
    key_padding: tuple[bool, ...] | None
    Z: ShownRows  # −∞ where masked
    exact: bool
    diagonal: Any = None  # what the mask parts show (the causal diagonal's alignment, a window), where it matters


@record
class Scores:
    kind: ClassVar[str] = "scores"
    KT: Matrix
    dots: tuple[Dot, ...]
    S: ShownRows
    exact: bool
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)
    rotated: bool = False  # the dots are of Q' and K' as a Q/K part turned them


@record
class Scaling:
    kind: ClassVar[str] = "scaling"
    d_k: int
    scale: str
    scale_value: Numeral | None
    sqrt_dk: Shown
    Z: ShownRows
    exact: bool


@record
class SoftmaxRow(Facts):
    facts_of: ClassVar[str] = "softmax_row"
    row: int
    z: ShownRow  # what goes into e^z: the scaled scores, or those minus shift
    exp: ShownRow
    total: Shown
    weights: ShownRow
    percent: ShownRow
    top: tuple[int, ...]  # the most-attended keys (ties share the top)
    weights_exact: bool
    scaled: ShownRow = ()  # the scaled scores before a stable shift
    shift: Num | None = None  # stable softmax: the row maximum subtracted
    z_exact: bool = True
    exp_as_is: tuple[bool, ...] = ()  # (symbols) e^z has no simpler form, so its line would read e^z = e^z
    terms: tuple[Num, ...] = ()  # a denominator part's term in the sum, as shown
    facts: tuple[tuple[str, Any], ...] = ()  # a denominator part's (its term and logit, named its way)


@record
class Softmax:
    kind: ClassVar[str] = "softmax"
    rows: tuple[SoftmaxRow, ...]
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)


@record
class WeightedRow:
    row: int
    weights: ShownRow
    products: ShownRows  # weight_j × V_j, one vector per key
    output: ShownRow
    before: tuple[Entry, ...]  # V of the same token, for the before/after table
    weights_exact: bool
    products_exact: bool
    output_exact: bool
    logistic: bool = False  # (symbols) the weights are written c/(1 + e^d), not as step 3's e^z/sum


@record
class WeightedSum:
    kind: ClassVar[str] = "weighted_sum"
    V: Matrix
    rows: tuple[WeightedRow, ...]
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)


@record
class MatrixForm:
    kind: ClassVar[str] = "matrix_form"
    A: ShownRows
    A_exact: bool
    O: ShownRows
    O_exact: bool
    dots: tuple[Dot, ...]  # every entry of AV, with expand = "all"
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)
    parts: tuple[str, ...] = ()  # the parts that change the formula beyond 2017's, by name, in the order they act
    scale: str = "sqrt"  # the scores' factor in the formula: "sqrt" (1/√d_k), "none" or "number" (scale_value)
    scale_value: Numeral | None = None


@record
class Picture:
    """A picture of a matrix as the document shows it: a heatmap (one panel per head), and for the weights
    the focus row's token diagram. The renderer measures and draws it."""

    kind: ClassVar[str] = "picture"
    name: str  # "A" (the weights) or "dZ" (their gradient through the softmax)
    panels: tuple[ShownRows, ...]  # the matrix of each head (one, for one head)
    allowed: tuple[tuple[bool, ...], ...] | None  # False where masked
    diagram: bool  # with the token diagram (the "figures" setting is "all")


@record
class Head:
    """One head of multi-head attention: the core steps on its slice of columns."""

    kind: ClassVar[str] = "head"
    index: int  # 0-based
    first: int  # first column of Q, K, V (0-based)
    width: int  # d_head
    derivation: Derivation
    kv_index: int | None = None  # grouped-query: the key/value head it uses (0-based); None: its own columns
    first_v: int | None = None  # first column of V where V's width differs from Q's and K's (MLA's d_v); else None
    width_v: int | None = None  # d_v there


@record
class Concat:
    kind: ClassVar[str] = "concat"
    heads: int
    O: NumRows
    exact: bool


@record
class OutputProjection:
    kind: ClassVar[str] = "output_projection"
    W_O: Matrix
    b_O: tuple[Numeral, ...] | None
    result: NumRows
    exact: bool
    dots: tuple[Dot, ...]
    heads: int  # what W_O multiplies: one head's output as it is, or the heads' concatenation
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)


@record
class Substitution:
    """The values of the symbols, and the numeric derivation that follows from them."""

    kind: ClassVar[str] = "substitution"
    values: tuple[tuple[str, Numeral], ...]
    derivation: Derivation


@record
class Recap:
    kind: ClassVar[str] = "recap"
    top: int
    score: Num
    percent: Num  # the top weight in whole percent
    value: tuple[Entry, ...]  # V of the top token
    rotated: bool = False  # the scores are Q′K′ᵀ of a Q/K part
    z: Num | None = None  # with an additive or monotone part: the top key's z, which the softmax weighs instead
    tied: tuple[int, ...] = ()  # every key that ties for the top (none: one key alone), as Step 3 names them
    tied_values: tuple[tuple[Entry, ...], ...] = ()  # their V rows
    scale: str = "sqrt"  # what the recap says of the scaling: "sqrt", "none" or "number" (scale_value)
    scale_value: Numeral | None = None


@record
class ToyVsReal(Facts):
    """What this example is, fact by fact, to set beside a real model (its parts' facts too)."""

    kind: ClassVar[str] = "toy_vs_real"
    facts_of: ClassVar[str] = "toy_vs_real"
    d_k: int
    n_tokens: int
    n_keys: int
    cross: bool
    projected: bool  # Q, K, V from X and W
    heads: int
    d_model: int | None
    output_projection: bool  # W_O
    mask: str  # "none", "causal" or "matrix"
    padding: bool
    scale: str  # "sqrt", "none" or "number"
    scale_value: Numeral | None
    softmax: str
    symbolic: bool
    kv_heads: int | None = None  # grouped-query: fewer key/value heads than heads
    facts: tuple[tuple[str, Any], ...] = ()  # its parts' facts (symattn.variants)


class AnyStep(Protocol):
    """Any step a derivation holds: plain data with its kind, one of ``Step`` below or of ``BackwardStep``.

    A protocol, not a union: the backward steps live in backward.py, which imports this module (and is
    imported only for a derivation with ``[backward]``), so this module cannot name them.
    """

    kind: ClassVar[str]


# the steps of the forward pass
Step = (
    Setup
    | Groups
    | Projecting
    | Scores
    | Scaling
    | Masking
    | Softmax
    | WeightedSum
    | MatrixForm
    | Picture
    | Head
    | Concat
    | OutputProjection
    | Substitution
    | Recap
    | ToyVsReal
)
STEP_KINDS = (
    "setup",
    "groups",
    "projecting",
    "scores",
    "scaling",
    "masking",
    "softmax",
    "weighted_sum",
    "matrix_form",
    "picture",
    "head",
    "concat",
    "output_projection",
    "substitution",
    "recap",
    "toy_vs_real",
    "backward_loss",
    "backward_values",
    "backward_softmax",
    "backward_scaling",
    "backward_qk",
    "backward_variants",
    "backward_projections",
    "backward_output_projection",
    "backward_head",
    "backward_recap",
    "backward_groups",
    *variants.STEP_KINDS,  # each part's own
)


@record
class Derivation:
    title: str | None
    lang: str
    tokens: tuple[str, ...]  # query labels
    key_tokens: tuple[str, ...]  # key labels (the same tokens in self-attention)
    focus: int
    rounding: str
    expand: str
    steps: tuple[AnyStep, ...]
    softmax: str = "plain"
    mask: str = "none"
    symbolic: bool = False  # formulas instead of numbers
    columns: int = 0  # the most columns of any matrix shown (LaTeX's bmatrix needs to know above 10)
    paper: str = "letter"  # "a4" or "letter"
    cjk_font: str | None = None  # ctex's fontset, or None for ctex's own
    heading_level: int = 1  # the level of the top heading (1: LaTeX \section, Markdown #)
    numbered: bool = False  # LaTeX headings numbered, in the table of contents
    figures: str = "all"  # "all", "weights" (the heatmaps only) or "none"
    engine: str | None = None  # a PDF's TeX engine; None: pdflatex where it sets every character, else xelatex


def top_keys(model: Model, row: int) -> tuple[int, ...]:
    # e^z is increasing and scale > 0, so the largest exact score wins (among keys it may attend to)
    scores = [(model.scores[row, j], j) for j in range(model.n_keys) if model.may_attend(row, j)]
    best = max(s for s, _ in scores)
    return tuple(j for s, j in scores if s == best)


def attended_keys(model: Model, row: int) -> tuple[int, ...]:
    """The keys with the largest z (after any part's), which get the largest weight: ties share the top."""
    best = model.row_max[row]
    return next(tuple(group) for group in model._groups[row] if best in group)


def pictures(spec: Spec, name: str, panels: tuple[ShownRows, ...]) -> tuple[Picture, ...]:
    """The picture of a matrix, one panel per head, unless the spec asks for no figures."""
    if spec.document.figures == "none":
        return ()
    return (Picture(name, panels, spec.allowed, name == "A" and spec.document.figures == "all"),)


def transpose(m: Matrix) -> Matrix:
    return tuple(zip(*m))


def scale_parts(spec: Spec) -> tuple[str, Numeral | None]:
    return (spec.scale, None) if isinstance(spec.scale, str) else ("number", spec.scale)


def formula_scale(spec: Spec) -> tuple[str, Numeral | None]:
    """scale_parts as the formula and the recap say it: a factor of exactly 1 scales nothing."""
    kind, value = scale_parts(spec)
    return ("none", None) if value is not None and value.value == 1 else (kind, value)


def assemble(spec: Spec, steps: tuple[AnyStep, ...], symbolic: bool = False) -> Derivation:
    return Derivation(
        spec.document.title,
        spec.document.lang,
        spec.tokens,
        spec.keys,
        spec.focus,
        spec.rounding,
        spec.document.expand,
        steps,
        spec.softmax,
        spec.mask,
        symbolic,
        columns(spec),
        spec.document.page,
        spec.document.cjk_font,
        spec.document.heading_level,
        spec.document.numbered,
        spec.document.figures,
        spec.document.engine,
    )


def columns(spec: Spec) -> int:
    matrices = [spec.Q, spec.K, spec.V] + ([spec.W_O] if spec.W_O is not None else [])
    if spec.projection is not None:
        matrices += spec.projection.inputs()
    return max([len(spec.keys), len(spec.tokens)] + [len(m[0]) for m in matrices])
