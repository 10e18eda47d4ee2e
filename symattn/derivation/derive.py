"""The derivation: the worked example's steps as immutable plain data.

A derivation records *what was done* and *which numbers are shown*, never how
it reads: no strings but the user's own labels and title. The renderer picks a
template per step ``kind`` and a language file for the prose.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Union

from symattn.input import limits
from symattn.input.errors import LimitError
from symattn.exact.model import AttentionModel, Model, build
from symattn.input.numeral import Numeral
from symattn.exact.rounding import Figures, Num, NumRow, NumRows, figures, is_exact
from symattn.input.spec import Matrix, Spec

Operand = Union[Numeral, Num]


@dataclass(frozen=True)
class Dot:
    """One expanded sum of products: Σ a×b = result, for entry (row, col)."""

    row: int
    col: int
    terms: tuple[tuple[Operand, Operand], ...]
    result: Operand
    bias: Numeral | None = None  # + b, in a projection


@dataclass(frozen=True)
class Setup:
    kind: ClassVar[str] = "setup"
    d_k: int
    scale: str  # "sqrt", "none" or "number"
    scale_value: Numeral | None
    sqrt_dk: Num
    Q: Matrix
    K: Matrix
    V: Matrix
    projected: bool = False  # Q, K, V come from the projection step
    heads: int = 1
    d_model: int | None = None


@dataclass(frozen=True)
class Projected:
    """One of Q = X W_Q + b_Q, K, V."""

    name: str  # "Q", "K" or "V"
    source: str  # "X" or "X_kv"
    W: Matrix
    b: tuple[Numeral, ...] | None
    result: Matrix
    dots: tuple[Dot, ...]


@dataclass(frozen=True)
class Projecting:
    kind: ClassVar[str] = "projecting"
    X: Matrix
    X_kv: Matrix | None
    products: tuple[Projected, ...]


@dataclass(frozen=True)
class Masking:
    kind: ClassVar[str] = "masking"
    mask: str  # "none" (key padding only), "causal" or "matrix"
    allowed: tuple[tuple[bool, ...], ...]
    key_padding: tuple[bool, ...] | None
    Z: NumRows  # −∞ where masked
    exact: bool


@dataclass(frozen=True)
class Scores:
    kind: ClassVar[str] = "scores"
    KT: Matrix
    dots: tuple[Dot, ...]
    S: NumRows
    exact: bool


@dataclass(frozen=True)
class Scaling:
    kind: ClassVar[str] = "scaling"
    d_k: int
    scale: str
    scale_value: Numeral | None
    sqrt_dk: Num
    Z: NumRows
    exact: bool


@dataclass(frozen=True)
class SoftmaxRow:
    row: int
    z: NumRow  # what goes into e^z: the scaled scores, or those minus shift
    exp: NumRow
    total: Num
    weights: NumRow
    percent: NumRow
    top: tuple[int, ...]  # the most-attended keys (ties share the top)
    weights_exact: bool
    scaled: NumRow = ()  # the scaled scores before a stable shift
    shift: Num | None = None  # stable softmax: the row maximum subtracted
    z_exact: bool = True


@dataclass(frozen=True)
class Softmax:
    kind: ClassVar[str] = "softmax"
    rows: tuple[SoftmaxRow, ...]


@dataclass(frozen=True)
class WeightedRow:
    row: int
    weights: NumRow
    products: NumRows  # weight_j × V_j, one vector per key
    output: NumRow
    before: tuple[Numeral, ...]  # V of the same token, for the before/after table
    weights_exact: bool
    products_exact: bool
    output_exact: bool


@dataclass(frozen=True)
class WeightedSum:
    kind: ClassVar[str] = "weighted_sum"
    V: Matrix
    rows: tuple[WeightedRow, ...]


@dataclass(frozen=True)
class MatrixForm:
    kind: ClassVar[str] = "matrix_form"
    A: NumRows
    A_exact: bool
    O: NumRows
    O_exact: bool
    dots: tuple[Dot, ...]  # every entry of AV, with expand = "all"


@dataclass(frozen=True)
class Head:
    """One head of multi-head attention: the core steps on its slice of columns."""

    kind: ClassVar[str] = "head"
    index: int  # 0-based
    first: int  # first column of Q, K, V (0-based)
    width: int  # d_head
    derivation: "Derivation"


@dataclass(frozen=True)
class Concat:
    kind: ClassVar[str] = "concat"
    heads: int
    O: NumRows
    exact: bool


@dataclass(frozen=True)
class OutputProjection:
    kind: ClassVar[str] = "output_projection"
    W_O: Matrix
    b_O: tuple[Numeral, ...] | None
    result: NumRows
    exact: bool
    dots: tuple[Dot, ...]


@dataclass(frozen=True)
class Substitution:
    """The values of the symbols, and the numeric derivation that follows from them."""

    kind: ClassVar[str] = "substitution"
    values: tuple[tuple[str, Numeral], ...]
    derivation: "Derivation"


@dataclass(frozen=True)
class Recap:
    kind: ClassVar[str] = "recap"
    top: int
    score: Num
    percent: Num  # the top weight in whole percent
    value: tuple[Numeral, ...]  # V of the top token


@dataclass(frozen=True)
class ToyVsReal:
    """What this example is, fact by fact, to set beside a real model."""

    kind: ClassVar[str] = "toy_vs_real"
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


# the steps of the backward pass (backward_derivation.py, imported only for them) are steps too
Step = Union[Setup, Projecting, Scores, Scaling, Masking, Softmax, WeightedSum, MatrixForm, Head, Concat,
             OutputProjection, Substitution, Recap, ToyVsReal]
STEP_KINDS = ("setup", "projecting", "scores", "scaling", "masking", "softmax", "weighted_sum", "matrix_form",
              "head", "concat", "output_projection", "substitution", "recap", "toy_vs_real", "backward_loss",
              "backward_values", "backward_softmax", "backward_scaling", "backward_qk", "backward_projections",
              "backward_output_projection", "backward_head", "backward_recap")


@dataclass(frozen=True)
class Derivation:
    title: str | None
    lang: str
    tokens: tuple[str, ...]  # query labels
    key_tokens: tuple[str, ...]  # key labels (the same tokens in self-attention)
    focus: int
    rounding: str
    expand: str
    steps: tuple[Step, ...]
    softmax: str = "plain"
    mask: str = "none"
    symbolic: bool = False  # formulas instead of numbers
    columns: int = 0  # the most columns of any matrix shown (LaTeX's bmatrix needs to know above 10)
    paper: str = "letter"  # "a4" or "letter"
    cjk_font: str | None = None  # ctex's fontset, or None for ctex's own


def _top(model: Model, row: int) -> tuple[int, ...]:
    # e^z is increasing and scale > 0, so the largest exact score wins (among keys it may attend to)
    scores = [(model.scores[row, j], j) for j in range(model.n_keys) if model.may_attend(row, j)]
    best = max(s for s, _ in scores)
    return tuple(j for s, j in scores if s == best)


def _transpose(m: Matrix) -> Matrix:
    return tuple(zip(*m))


def _scale(spec: Spec) -> tuple[str, Numeral | None]:
    return (spec.scale, None) if isinstance(spec.scale, str) else ("number", spec.scale)


def _core_steps(spec: Spec, model: Model, fig: Figures) -> tuple[Step, ...]:
    """Scores, scaling, masking, softmax, weights × V and the matrix form."""
    f = spec.focus
    rows = range(model.n_queries) if spec.expand == "all" else [f]
    scale_kind, scale_value = _scale(spec)
    dots = tuple(Dot(i, j, tuple(zip(spec.Q[i], spec.K[j])), fig.scores[i][j])
                 for i in rows for j in range(model.n_keys))
    stable = fig.row_max is not None
    softmax_rows = tuple(
        SoftmaxRow(i, fig.softmax_input[i], fig.exp[i], fig.exp_sum[i], fig.weights[i], fig.percent[i],
                   _top(model, i), is_exact([fig.weights[i]]), fig.scaled[i], fig.row_max[i] if stable else None,
                   is_exact([fig.softmax_input[i]]))
        for i in rows)
    weighted = tuple(
        WeightedRow(i, fig.weights[i], fig.products[i], fig.output[i],
                    spec.V[i] if not spec.is_cross and i < len(spec.V) else (),
                    is_exact([fig.weights[i]]), is_exact(fig.products[i]), is_exact([fig.output[i]]))
        for i in rows)
    av_dots = ()
    if spec.expand == "all":
        av_dots = tuple(
            Dot(i, k, tuple((fig.weights[i][j], spec.V[j][k]) for j in range(model.n_keys)), fig.output[i][k])
            for i in range(model.n_queries) for k in range(model.V.cols))
    steps: list[Step] = [
        Scores(_transpose(spec.K), dots, fig.scores, is_exact(fig.scores)),
        Scaling(spec.d_k, scale_kind, scale_value, fig.sqrt_dk, fig.unmasked, is_exact(fig.unmasked)),
    ]
    if spec.allowed is not None:
        steps.append(Masking(spec.mask, spec.allowed, spec.key_padding, fig.scaled, is_exact(fig.scaled)))
    steps += [
        Softmax(softmax_rows),
        WeightedSum(spec.V, weighted),
        MatrixForm(fig.weights, is_exact(fig.weights), fig.output, is_exact(fig.output), av_dots),
    ]
    return tuple(steps)


def _projecting(spec: Spec) -> Projecting:
    p = spec.projection
    products = []
    for name, result in (("Q", spec.Q), ("K", spec.K), ("V", spec.V)):
        X, W, b = p.weights(name)
        if spec.expand == "all":
            rows = range(len(X))
        elif name == "Q" or not spec.is_cross:
            rows = [spec.focus]
        else:
            rows = []
        dots = tuple(Dot(i, k, tuple((x, W[c][k]) for c, x in enumerate(X[i])), result[i][k],
                         b[k] if b else None)
                     for i in rows for k in range(len(W[0])))
        products.append(Projected(name, "X" if name == "Q" or p.X_kv is None else "X_kv", W, b, result, dots))
    return Projecting(p.X, p.X_kv, tuple(products))


def _derivation(spec: Spec, steps: tuple[Step, ...], symbolic: bool = False) -> Derivation:
    return Derivation(spec.title, spec.lang, spec.tokens, spec.keys, spec.focus, spec.rounding, spec.expand,
                      steps, spec.softmax, spec.mask, symbolic, _columns(spec), spec.page, spec.cjk_font)


def _columns(spec: Spec) -> int:
    matrices = [spec.Q, spec.K, spec.V] + ([spec.W_O] if spec.W_O is not None else [])
    if spec.projection is not None:
        matrices += spec.projection.inputs()
    return max([len(spec.keys), len(spec.tokens)] + [len(m[0]) for m in matrices])


def _derive_symbolic(spec: Spec, model: AttentionModel) -> Derivation:
    import sympy

    from symattn.input.formula import Formula
    from symattn.exact.symbolic import formulas, has_all_values, substitute
    rows = range(len(spec.tokens)) if spec.expand == "all" else [spec.focus]
    scale_kind, scale_value = _scale(spec)
    root = Formula("", sympy.sqrt(spec.d_k))
    S, Z, E, A, O = (formulas(getattr(model, q)) for q in ("scores", "scaled", "exp", "weights", "output"))
    sums = formulas(model.exp_sum)
    unmasked = Z if spec.allowed is None else formulas(replace(model, allowed=None).scaled)
    dots = tuple(Dot(i, j, tuple(zip(spec.Q[i], spec.K[j])), S[i][j]) for i in rows for j in range(len(spec.keys)))
    steps: list[Step] = [Setup(spec.d_k, scale_kind, scale_value, root, spec.Q, spec.K, spec.V,
                               projected=spec.projection is not None)]
    if spec.projection is not None:
        steps.append(_projecting(spec))
    steps += [
        Scores(_transpose(spec.K), dots, S, True),
        Scaling(spec.d_k, scale_kind, scale_value, root, unmasked, True),
    ]
    if spec.allowed is not None:
        steps.append(Masking(spec.mask, spec.allowed, spec.key_padding, Z, True))
    steps.append(Softmax(tuple(SoftmaxRow(i, Z[i], E[i], sums[i][0], A[i], (), (), True, Z[i]) for i in rows)))
    steps.append(WeightedSum(spec.V, tuple(
        WeightedRow(i, A[i], formulas(model.products[i]), O[i], spec.V[i] if not spec.is_cross else (),
                    True, True, True) for i in rows)))
    av_dots = ()
    if spec.expand == "all":
        av_dots = tuple(Dot(i, k, tuple((A[i][j], spec.V[j][k]) for j in range(len(spec.keys))), O[i][k])
                        for i in range(len(spec.tokens)) for k in range(len(spec.V[0])))
    steps.append(MatrixForm(A, True, O, True, av_dots))
    if has_all_values(spec):
        steps.append(Substitution(spec.subs, derive(substitute(spec))))
    steps.append(_toy(spec))
    return _derivation(spec, tuple(steps), symbolic=True)


def _toy(spec: Spec) -> ToyVsReal:
    scale_kind, scale_value = _scale(spec)
    return ToyVsReal(
        d_k=spec.d_k, n_tokens=len(spec.tokens), n_keys=len(spec.keys), cross=spec.is_cross,
        projected=spec.projection is not None, heads=spec.heads,
        d_model=len(spec.projection.X[0]) if spec.projection is not None else None,
        output_projection=spec.W_O is not None, mask=spec.mask, padding=spec.key_padding is not None,
        scale=scale_kind, scale_value=scale_value, softmax=spec.softmax, symbolic=spec.is_symbolic)


def _check_size(spec: Spec) -> None:
    """A document shows every row and column: refuse sizes no page can hold."""
    matrices = {"Q": spec.Q, "K": spec.K, "V": spec.V}
    if spec.projection is not None:
        matrices.update(X=spec.projection.X, W_Q=spec.projection.W_Q)
    for key, m in matrices.items():
        if len(m) > limits.DOCUMENT_TOKENS:
            raise LimitError(spec.source, key, f"{len(m)} rows; a document shows at most {limits.DOCUMENT_TOKENS} "
                                               f"(compute and check take up to {limits.TOKENS})")
        if len(m[0]) > limits.DOCUMENT_DIMS:
            raise LimitError(spec.source, key, f"{len(m[0])} columns; a document shows at most "
                                               f"{limits.DOCUMENT_DIMS} (compute and check take up to {limits.DIMS})")


def derive(spec: Spec, model: AttentionModel | None = None) -> Derivation:
    """Build the whole derivation of a spec, in the document's order of steps.

    ``model``: the spec's exact model (:func:`~symattn.exact.model.build`), if already built.
    """
    _check_size(spec)
    model = build(spec) if model is None else model
    return _DERIVE[model.kind](spec, model)


def _derive_head(spec: Spec, model: Model) -> Derivation:
    fig: Figures = figures(model, spec)
    f = spec.focus
    scale_kind, scale_value = _scale(spec)
    top = _top(model, f)[0]
    steps: list[Step] = [Setup(spec.d_k, scale_kind, scale_value, fig.sqrt_dk, spec.Q, spec.K, spec.V,
                               projected=spec.projection is not None)]
    if spec.projection is not None:
        steps.append(_projecting(spec))
    steps += _core_steps(spec, model, fig)
    steps += [Recap(top, fig.scores[f][top], fig.percent_whole[f][top], spec.V[top]),
              _toy(spec)]
    return _derivation(spec, tuple(steps))


def _derive_heads(spec: Spec, mh: AttentionModel) -> Derivation:
    heads = []
    concat_rows: list[list[Num]] = [[] for _ in spec.tokens]
    for h, model in enumerate(mh.heads):
        sub = spec.head(h)
        fig = figures(model, sub)
        width = len(sub.Q[0])
        heads.append(Head(h, h * width, width, _derivation(sub, _core_steps(sub, model, fig))))
        for i, row in enumerate(fig.output):
            concat_rows[i] += row
        if h == 0:
            sqrt_dk = fig.sqrt_dk  # the same for every head
    concat = tuple(tuple(row) for row in concat_rows)
    scale_kind, scale_value = _scale(spec)
    steps: list[Step] = [
        Setup(spec.d_k, scale_kind, scale_value, sqrt_dk, spec.Q, spec.K, spec.V, projected=True,
              heads=spec.heads, d_model=len(spec.projection.X[0])),
        _projecting(spec),
        *heads,
        Concat(spec.heads, concat, is_exact(concat)),
    ]
    if spec.W_O is not None:
        result = mh.figures_output(spec, concat)
        rows = range(len(spec.tokens)) if spec.expand == "all" else [spec.focus]
        dots = tuple(Dot(i, k, tuple((concat[i][c], spec.W_O[c][k]) for c in range(len(spec.W_O))), result[i][k],
                         spec.b_O[k] if spec.b_O else None)
                     for i in rows for k in range(len(spec.W_O[0])))
        steps.append(OutputProjection(spec.W_O, spec.b_O, result, is_exact(result), dots))
    steps.append(_toy(spec))
    return _derivation(spec, tuple(steps))


def _derive_backward(spec: Spec, model: AttentionModel) -> Derivation:
    """The forward derivation, then the backward steps before the closing toy-vs-real table."""
    from symattn.derivation.backward import backward_steps
    forward = _DERIVE[model.forward.kind](spec, model.forward)
    return replace(forward, steps=forward.steps[:-1] + backward_steps(spec, model) + forward.steps[-1:])


_DERIVE = {"head": _derive_head, "heads": _derive_heads, "symbolic": _derive_symbolic, "backward": _derive_backward}


__all__ = ["Derivation", "Dot", "Num", "STEP_KINDS", "derive"] + [
    "Setup", "Projecting", "Projected", "Scores", "Scaling", "Masking", "Softmax", "SoftmaxRow", "WeightedSum",
    "WeightedRow", "MatrixForm", "Head", "Concat", "OutputProjection", "Recap", "ToyVsReal"]
