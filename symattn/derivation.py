"""The derivation: the worked example's steps as immutable plain data.

A derivation records *what was done* and *which numbers are shown*, never how
it reads: no strings but the user's own labels and title. The renderer picks a
template per step ``kind`` and a language file for the prose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

from .model import Model, build_model
from .numeral import Numeral
from .rounding import Figures, Num, NumRow, NumRows, figures, is_exact
from .spec import Matrix, Spec

Operand = Union[Numeral, Num]


@dataclass(frozen=True)
class Dot:
    """One expanded sum of products: Σ a×b = result, for entry (row, col)."""

    row: int
    col: int
    terms: tuple[tuple[Operand, Operand], ...]
    result: Num


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
    z: NumRow
    exp: NumRow
    total: Num
    weights: NumRow
    percent: NumRow
    top: tuple[int, ...]  # the most-attended keys (ties share the top)
    weights_exact: bool


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
class Recap:
    kind: ClassVar[str] = "recap"
    top: int
    score: Num
    percent: Num  # the top weight in whole percent
    value: tuple[Numeral, ...]  # V of the top token


@dataclass(frozen=True)
class ToyVsReal:
    kind: ClassVar[str] = "toy_vs_real"
    d_k: int
    n_tokens: int


Step = Union[Setup, Scores, Scaling, Softmax, WeightedSum, MatrixForm, Recap, ToyVsReal]
STEP_KINDS = ("setup", "scores", "scaling", "softmax", "weighted_sum", "matrix_form", "recap", "toy_vs_real")


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


def _top(model: Model, row: int) -> tuple[int, ...]:
    # e^z is increasing and scale > 0, so the largest exact score wins
    scores = [model.scores[row, j] for j in range(model.n_keys)]
    best = max(scores)
    return tuple(j for j, s in enumerate(scores) if s == best)


def _transpose(m: Matrix) -> Matrix:
    return tuple(zip(*m))


def derive(spec: Spec, model: Model | None = None) -> Derivation:
    """Build the whole derivation of a spec, in the document's order of steps."""
    model = build_model(spec) if model is None else model
    fig: Figures = figures(model, spec)
    f = spec.focus
    rows = range(model.n_queries) if spec.expand == "all" else [f]
    scale_kind = spec.scale if isinstance(spec.scale, str) else "number"
    scale_value = None if isinstance(spec.scale, str) else spec.scale

    dots = tuple(
        Dot(i, j, tuple(zip(spec.Q[i], spec.K[j])), fig.scores[i][j])
        for i in rows for j in range(model.n_keys))
    softmax_rows = tuple(
        SoftmaxRow(i, fig.scaled[i], fig.exp[i], fig.exp_sum[i], fig.weights[i], fig.percent[i], _top(model, i),
                   is_exact([fig.weights[i]]))
        for i in rows)
    weighted = tuple(
        WeightedRow(i, fig.weights[i], fig.products[i], fig.output[i], spec.V[i] if i < len(spec.V) else (),
                    is_exact([fig.weights[i]]), is_exact(fig.products[i]), is_exact([fig.output[i]]))
        for i in rows)
    av_dots = ()
    if spec.expand == "all":
        av_dots = tuple(
            Dot(i, k, tuple((fig.weights[i][j], spec.V[j][k]) for j in range(model.n_keys)), fig.output[i][k])
            for i in range(model.n_queries) for k in range(model.V.cols))
    top = _top(model, f)[0]
    steps = (
        Setup(spec.d_k, scale_kind, scale_value, fig.sqrt_dk, spec.Q, spec.K, spec.V),
        Scores(_transpose(spec.K), dots, fig.scores, is_exact(fig.scores)),
        Scaling(spec.d_k, scale_kind, scale_value, fig.sqrt_dk, fig.scaled, is_exact(fig.scaled)),
        Softmax(softmax_rows),
        WeightedSum(spec.V, weighted),
        MatrixForm(fig.weights, is_exact(fig.weights), fig.output, is_exact(fig.output), av_dots),
        Recap(top, fig.scores[f][top], fig.percent_whole[f][top], spec.V[top]),
        ToyVsReal(spec.d_k, len(spec.tokens)),
    )
    return Derivation(spec.title, spec.lang, spec.tokens, spec.tokens, f, spec.rounding, spec.expand, steps)


__all__ = ["Derivation", "Dot", "Num", "STEP_KINDS", "derive"] + [
    "Setup", "Scores", "Scaling", "Softmax", "SoftmaxRow", "WeightedSum", "WeightedRow",
    "MatrixForm", "Recap", "ToyVsReal"]
