"""The forward pass's steps: QKᵀ with its sums, the scaling, the mask, the softmax, ×V and the matrix form,
for one head, several heads and symbols."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from symattn import variants
from symattn.derivation.modern import groups_step, kv_of
from symattn.derivation.steps import (
    Concat,
    Derivation,
    Dot,
    Head,
    Masking,
    MatrixForm,
    OutputProjection,
    Projected,
    Projecting,
    Recap,
    Scaling,
    Scores,
    Setup,
    Softmax,
    SoftmaxRow,
    Step,
    ToyVsReal,
    WeightedRow,
    WeightedSum,
    assemble,
    attended_keys,
    formula_scale,
    pictures,
    scale_parts,
    transpose,
)
from symattn.exact.head_figures import figures
from symattn.exact.model import Model
from symattn.exact.rounding import Figures, Num, NumRows, is_exact
from symattn.input.spec import Spec
from symattn.variants import ADD, DENOMINATOR, MAP, QK

if TYPE_CHECKING:
    from symattn.exact.multihead import MultiHead
    from symattn.exact.symbolic import SymbolicModel


def _core_steps(spec: Spec, model: Model, fig: Figures) -> tuple[Step, ...]:
    """Scores, scaling, masking, softmax, weights × V and the matrix form."""
    f = spec.focus
    rows = range(model.n_queries) if spec.document.expand == "all" else [f]
    scale_kind, scale_value = scale_parts(spec)
    said_kind, said_value = formula_scale(spec)  # the formula's factor: one of exactly 1 is none
    turned = next((p.scores_step(spec, model, fig) for p, _ in variants.stage(spec, QK)), None)
    Q, K = (spec.Q, spec.K) if turned is None else turned[1:]  # a Q/K part's: the dots of its Q' and K'
    dots = tuple(Dot(i, j, tuple(zip(Q[i], K[j])), fig.scores[i][j]) for i in rows for j in range(model.n_keys))
    softmax_rows = tuple(
        SoftmaxRow(
            i,
            fig.softmax_input[i],
            fig.exp[i],
            fig.exp_sum[i],
            fig.weights[i],
            fig.percent[i],
            attended_keys(model, i),
            is_exact([fig.weights[i]]),
            fig.scaled[i],
            fig.row_max[i] if fig.row_max is not None else None,
            is_exact([fig.softmax_input[i]]),
            terms=() if fig.denominator is None else (fig.denominator[i],),
            facts=tuple(f for p, _ in variants.stage(spec, DENOMINATOR) for f in p.softmax_facts(spec, fig, i)),
        )
        for i in rows
    )
    weighted = tuple(
        WeightedRow(
            i,
            fig.weights[i],
            fig.products[i],
            fig.output[i],
            spec.V[i] if not spec.is_cross and i < len(spec.V) else (),
            is_exact([fig.weights[i]]),
            is_exact(fig.products[i]),
            is_exact([fig.output[i]]),
        )
        for i in rows
    )
    av_dots: tuple[Dot, ...] = ()
    if spec.document.expand == "all":
        av_dots = tuple(
            Dot(i, k, tuple((fig.weights[i][j], spec.V[j][k]) for j in range(model.n_keys)), fig.output[i][k])
            for i in range(model.n_queries)
            for k in range(model.V.cols)
        )
    steps: list[Any] = [
        *variants.placing(spec, model),  # where the tokens stand, what is cached (with positions)
        *(() if turned is None else (turned[0],)),
        Scores(transpose(K), dots, fig.scores, is_exact(fig.scores), rotated=turned is not None),
        # the scaling, then the steps of the parts that change z (a bias, a cap) where the spec has them
        *_z_steps(
            spec,
            model,
            fig,
            Scaling(spec.d_k, scale_kind, scale_value, fig.sqrt_dk, fig.unmasked, is_exact(fig.unmasked)),
        ),
    ]
    _number_zero_steps(steps)
    if spec.allowed is not None:
        steps.append(
            Masking(spec.mask, spec.allowed, spec.key_padding, fig.scaled, is_exact(fig.scaled), variants.masking(spec))
        )
    steps += [
        Softmax(softmax_rows),
        *(step for p, _ in variants.stage(spec, DENOMINATOR) for step in p.after_softmax(spec, fig)),
        WeightedSum(spec.V, weighted),
        *variants.after_weighted(spec, model, fig),  # the online softmax, block by block, where the spec walks it
        MatrixForm(
            fig.weights,
            is_exact(fig.weights),
            fig.output,
            is_exact(fig.output),
            av_dots,
            parts=variants.formula_parts(spec),
            scale=said_kind,
            scale_value=said_value,
        ),
    ]
    return tuple(steps)


def _number_zero_steps(steps: list[Any]) -> None:
    """The parts' steps before step 1 (MLA's latent, a turn by position), each told its place among them, so that
    two of them read 0.1 and 0.2, not two step 0s."""
    zero = [k for k, step in enumerate(steps) if hasattr(step, "zero")]
    for n, k in enumerate(zero, 1):
        steps[k] = replace(steps[k], zero=(n, len(zero)))


def _z_steps(spec: Spec, model: Model, fig: Figures, scaling: Scaling) -> tuple[Any, ...]:
    """The scaling step, then each additive and monotone part's own step; the scaling alone where no part
    changes z or the softmax's denominator. The scaling shows z before any of them."""
    if not model.varied:
        return (scaling,)
    shown_cache: dict[tuple[int, ...], NumRows] = {}

    def shown(*stages: int) -> NumRows:
        # the unmasked z without the parts of these stages (this head's own where none is left out)
        kept = model.without(*stages)
        if len(kept.parts) == len(model.parts):
            return fig.unmasked
        if stages not in shown_cache:
            shown_cache[stages] = figures(kept, spec).unmasked
        return shown_cache[stages]

    plain = shown(ADD, MAP, DENOMINATOR)
    steps: list[Any] = [replace(scaling, Z=plain, exact=is_exact(plain))]
    steps += [p.z_step(spec, model, fig, shown) for p, _ in variants.of(spec) if p.stage in (ADD, MAP)]
    return tuple(steps)


def _projecting(spec: Spec) -> Projecting:
    p = spec.projection
    assert p is not None  # called only for a spec with X and W
    products = []
    for name, result in (("Q", spec.Q), ("K", spec.K), ("V", spec.V)):
        X, W, b = p.weights(name)
        rows: range | list[int]
        if spec.document.expand == "all":
            rows = range(len(X))
        elif name == "Q" or not spec.is_cross:
            rows = [spec.focus]
        else:
            rows = []
        dots = tuple(
            Dot(i, k, tuple((x, W[c][k]) for c, x in enumerate(X[i])), result[i][k], b[k] if b else None)
            for i in rows
            for k in range(len(W[0]))
        )
        products.append(Projected(name, "X" if name == "Q" or p.X_kv is None else "X_kv", W, b, result, dots))
    return Projecting(p.X, p.X_kv, tuple(products))


def derive_symbolic(spec: Spec, model: SymbolicModel) -> Derivation:
    import sympy

    from symattn.exact.symbolic import formulas, logistic
    from symattn.input.formula import Formula

    rows = range(len(spec.tokens)) if spec.document.expand == "all" else [spec.focus]
    scale_kind, scale_value = scale_parts(spec)
    root = Formula("", sympy.sqrt(spec.d_k))
    S, Z, E, A, O = (formulas(getattr(model, q)) for q in ("scores", "scaled", "exp", "weights", "output"))
    sums = formulas(model.exp_sum)
    unmasked = Z if spec.allowed is None else formulas(replace(model, allowed=None).scaled)
    dots = tuple(Dot(i, j, tuple(zip(spec.Q[i], spec.K[j])), S[i][j]) for i in rows for j in range(len(spec.keys)))
    steps: list[Step] = [
        Setup(spec.d_k, scale_kind, scale_value, root, spec.Q, spec.K, spec.V, projected=spec.projection is not None)
    ]
    if spec.projection is not None:
        steps.append(_projecting(spec))
    steps += [
        Scores(transpose(spec.K), dots, S, True),
        Scaling(spec.d_k, scale_kind, scale_value, root, unmasked, True),
    ]
    if spec.allowed is not None:
        steps.append(Masking(spec.mask, spec.allowed, spec.key_padding, Z, True, variants.masking(spec)))
    # e^z that SymPy leaves as it is (not e^0 = 1, nor e^−∞ = 0) would only repeat itself
    as_is = [
        tuple(isinstance(e.expr, sympy.exp) and e.expr == sympy.exp(z.expr) for z, e in zip(Z[i], E[i]))
        for i in range(len(spec.tokens))
    ]
    steps.append(
        Softmax(
            tuple(SoftmaxRow(i, Z[i], E[i], sums[i][0], A[i], (), (), True, Z[i], exp_as_is=as_is[i]) for i in rows)
        )
    )
    steps.append(
        WeightedSum(
            spec.V,
            tuple(
                WeightedRow(
                    i,
                    A[i],
                    formulas(model.products[i]),
                    O[i],
                    spec.V[i] if not spec.is_cross else (),
                    True,
                    True,
                    True,
                    logistic=any(logistic(a.expr) is not None for a in A[i]),
                )
                for i in rows
            ),
        )
    )
    av_dots: tuple[Dot, ...] = ()
    if spec.document.expand == "all":
        av_dots = tuple(
            Dot(i, k, tuple((A[i][j], spec.V[j][k]) for j in range(len(spec.keys))), O[i][k])
            for i in range(len(spec.tokens))
            for k in range(len(spec.V[0]))
        )
    scale, value = formula_scale(spec)
    steps.append(MatrixForm(A, True, O, True, av_dots, scale=scale, scale_value=value))
    steps.append(_toy(spec))
    return assemble(spec, tuple(steps), symbolic=True)


def _toy(spec: Spec) -> ToyVsReal:
    scale_kind, scale_value = scale_parts(spec)
    return ToyVsReal(
        d_k=spec.d_k,
        n_tokens=len(spec.tokens),
        n_keys=len(spec.keys),
        cross=spec.is_cross,
        projected=spec.projection is not None or variants.makes_inputs(spec),
        heads=spec.heads,
        d_model=_d_model(spec),
        output_projection=spec.W_O is not None,
        mask=spec.mask,
        padding=spec.key_padding is not None,
        scale=scale_kind,
        scale_value=scale_value,
        softmax=spec.softmax,
        symbolic=spec.is_symbolic,
        kv_heads=spec.kv_heads if spec.is_grouped else None,
        facts=variants.toy(spec),
    )


def _d_model(spec: Spec) -> int | None:
    """X's width; with several heads and Q given, the heads' columns side by side (their concat's width)."""
    if spec.projection is not None:
        return len(spec.projection.X[0])
    if variants.makes_inputs(spec):  # made from hidden rows (MLA's X): their width, not the heads' columns
        return variants.hidden_width(spec)
    return len(spec.Q[0]) if spec.heads > 1 else None


def derive_head(spec: Spec, model: Model) -> Derivation:
    fig: Figures = figures(model, spec)
    f = spec.focus
    scale_kind, scale_value = scale_parts(spec)
    tops = attended_keys(model, f)  # the largest z (with a bias, not always the largest score), ties together
    top = tops[0]
    steps: list[Step] = [
        Setup(
            spec.d_k,
            scale_kind,
            scale_value,
            fig.sqrt_dk,
            spec.Q,
            spec.K,
            spec.V,
            projected=spec.projection is not None or variants.makes_inputs(spec),  # X W, or a part's (MLA's)
        )
    ]
    if spec.projection is not None:
        steps.append(_projecting(spec))
    steps += _core_steps(spec, model, fig)
    steps += pictures(spec, "A", (fig.weights,))
    z = fig.scaled[f][top] if model.stage_parts(ADD) or model.stage_parts(MAP) else None
    tied = tops if len(tops) > 1 else ()
    recap = Recap(
        top,
        fig.scores[f][top],
        fig.percent_whole[f][top],
        spec.V[top],
        model.qk is not None,
        z,
        tied,
        tuple(spec.V[k] for k in tied),
        *formula_scale(spec),
    )
    steps += [recap, _toy(spec)]
    return assemble(spec, tuple(steps))


def derive_heads(spec: Spec, mh: MultiHead) -> Derivation:
    heads = []
    weights = []
    concat_rows: list[list[Num]] = [[] for _ in spec.tokens]
    for h, model in enumerate(mh.heads):
        sub = spec.head(h)
        fig = figures(model, sub)
        weights.append(fig.weights)
        width, width_v, kv = len(sub.Q[0]), len(sub.V[0]), kv_of(spec, h)
        v = ((h if kv is None else kv) * width_v, width_v) if width_v != width else (None, None)  # V's own columns
        heads.append(Head(h, h * width, width, assemble(sub, _core_steps(sub, model, fig)), kv, *v))
        for i, row in enumerate(fig.output):
            concat_rows[i] += row
        if h == 0:
            sqrt_dk = fig.sqrt_dk  # the same for every head
    concat = tuple(tuple(row) for row in concat_rows)
    scale_kind, scale_value = scale_parts(spec)
    steps: list[Step] = [
        Setup(
            spec.d_k,
            scale_kind,
            scale_value,
            sqrt_dk,
            spec.Q,
            spec.K,
            spec.V,
            projected=spec.projection is not None or variants.makes_inputs(spec),  # X W, or a part's (MLA's)
            heads=spec.heads,
            # X W_Q is d_model wide; Q given directly is all the heads' columns; a part's made Q: no d_model
            d_model=None if variants.makes_inputs(spec) else len(spec.Q[0]),
        ),
        *([_projecting(spec)] if spec.projection is not None else []),
        *[g for g in [groups_step(spec)] if g is not None],
        *variants.before_heads(spec, mh.heads),  # what the heads share (MLA's latent), said once
        *heads,
        *pictures(spec, "A", tuple(weights)),
        *([Concat(spec.heads, concat, is_exact(concat))] if spec.heads > 1 else []),  # one head: its output is all
    ]
    if spec.W_O is not None:
        result = mh.figures_output(spec, concat)
        rows = range(len(spec.tokens)) if spec.document.expand == "all" else [spec.focus]
        dots = tuple(
            Dot(
                i,
                k,
                tuple((concat[i][c], spec.W_O[c][k]) for c in range(len(spec.W_O))),
                result[i][k],
                spec.b_O[k] if spec.b_O else None,
            )
            for i in rows
            for k in range(len(spec.W_O[0]))
        )
        steps.append(OutputProjection(spec.W_O, spec.b_O, result, is_exact(result), dots, spec.heads))
    steps.append(_toy(spec))
    return assemble(spec, tuple(steps))
