"""The steps of the backward pass as plain data: dL/dO, dV and dA, the softmax, the scaling, dQ and dK,
the projections, and a recap. Imported only for a derivation with ``[backward]``, which keeps the
classes (each costs start-up time to define) out of every other run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from symattn import variants
from symattn.derivation.modern import GradGroups, grad_groups_step
from symattn.derivation.steps import Derivation, Dot, Facts, Picture, assemble, pictures, scale_parts, top_keys
from symattn.exact.head_figures import figures
from symattn.exact.model import Model
from symattn.exact.rounding import Figures, Num, NumRow, NumRows, is_exact
from symattn.input.numeral import Numeral
from symattn.input.records import record
from symattn.input.spec import Matrix, Spec

if TYPE_CHECKING:
    from symattn.exact.backward import BackwardModel
    from symattn.exact.multihead import MultiHead


@record
class Loss:
    """The loss and dL/dO."""

    kind: ClassVar[str] = "backward_loss"
    loss: str  # "sum", "mse" or "given"
    O: NumRows  # the output as shown
    O_exact: bool
    T: Matrix | None  # the target (mse)
    dO: NumRows
    exact: bool


@record
class GradValues:
    """dV = Aᵀ dO and dA = dO Vᵀ."""

    kind: ClassVar[str] = "backward_values"
    dV: NumRows
    dV_exact: bool
    dV_dots: tuple[Dot, ...]  # row: a key, col: a column of V; terms A_ij × dO_ik over the queries
    dA: NumRows
    dA_exact: bool
    dA_dots: tuple[Dot, ...]  # row: a query, col: a key; terms dO_ik × V_jk
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)


@record
class SoftmaxGradRow:
    row: int
    alpha: NumRow
    jacobian: NumRows  # ∂α_j/∂z_k, m × m
    jacobian_exact: bool
    dA: NumRow
    products: tuple[Dot, ...]  # dZ_k = Σ_j J_jk dA_j
    dot: Num  # rowsum(dA ⊙ A)
    dot_terms: tuple[tuple[Num, Num], ...]  # (dA_k, α_k)
    dZ: NumRow
    dZ_exact: bool
    masked: tuple[int, ...]  # keys this query may not attend to: zero gradient


@record
class GradSoftmax:
    kind: ClassVar[str] = "backward_softmax"
    rows: tuple[SoftmaxGradRow, ...]
    dZ: NumRows
    exact: bool
    stable: bool
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)


@record
class GradScaling:
    kind: ClassVar[str] = "backward_scaling"
    d_k: int
    scale: str
    scale_value: Numeral | None
    sqrt_dk: Num
    dS: NumRows
    exact: bool
    capped: bool = False  # a monotone map of z: dS from dY, the gradient of the scores before it


@record
class GradQK:
    """dQ = dS K and dK = dSᵀ Q."""

    kind: ClassVar[str] = "backward_qk"
    dQ: NumRows
    dQ_exact: bool
    dQ_dots: tuple[Dot, ...]
    dK: NumRows
    dK_exact: bool
    dK_dots: tuple[Dot, ...]
    note_at: int | None = None  # where the document says why shown terms need not add up (see addition.py)
    rotated: bool = False  # a Q/K part's: dQ′ = dS K′ and dK′ = dSᵀ Q′, turned back in the next step


@record
class GradProjected:
    name: str  # "Q", "K" or "V"
    source: str  # "X" or "X_kv"
    dW: NumRows
    dW_exact: bool
    db: NumRow | None
    db_exact: bool


@record
class GradProjections:
    kind: ClassVar[str] = "backward_projections"
    products: tuple[GradProjected, ...]
    dX: NumRows
    dX_exact: bool
    dX_kv: NumRows | None
    dX_kv_exact: bool


@record
class GradOutputProjection:
    kind: ClassVar[str] = "backward_output_projection"
    dO: NumRows
    dW_O: NumRows
    dW_O_exact: bool
    db_O: NumRow | None
    db_O_exact: bool
    dconcat: NumRows
    dconcat_exact: bool
    heads: int


@record
class BackwardHead:
    """One head's backward steps, on its slice of dL/d(concat)."""

    kind: ClassVar[str] = "backward_head"
    index: int
    first: int
    width: int
    dO: NumRows
    dO_exact: bool
    derivation: Derivation
    projected: bool  # W_O follows the heads: their slices are of dC, the gradient of the concatenation; else of dO


@record
class GradVariants(Facts):
    """The parts' steps after the softmax's backward (a map's dY, a denominator's own gradient): each one a
    fact, named as its part declares (None without the part)."""

    kind: ClassVar[str] = "backward_variants"
    facts_of: ClassVar[str] = "backward_variants"
    facts: tuple[tuple[str, Any], ...]


@record
class GradRecap:
    kind: ClassVar[str] = "backward_recap"
    shapes: tuple[tuple[str, int, int], ...]  # (gradient, rows, columns) in the order of the steps


# the steps of the backward pass (each one an AnyStep of steps.py, which cannot name them)
BackwardStep = (
    Loss
    | GradValues
    | GradSoftmax
    | GradScaling
    | GradQK
    | GradProjections
    | GradOutputProjection
    | BackwardHead
    | GradGroups
    | Picture
    | GradRecap
    | GradVariants
)


def _shape(rows: NumRows) -> tuple[int, int]:
    return len(rows), len(rows[0])


def _head_backward(
    spec: Spec, model: Model, fig: Figures, shown: dict[str, NumRows], suffix: str, dO: NumRows
) -> tuple[BackwardStep, ...]:
    """dV and dA, the softmax step, the scaling, dQ and dK of one head."""
    names: tuple[str, ...] = ("dV", "dA", "dot", "dZ", "dS", "dQ", "dK", "jacobian", "jacobian_dA")
    names += tuple(name for p in model.parts if p.stage != variants.DENOMINATOR for name in p.gradients)
    g = {name: shown[name + suffix] for name in names}
    g.update({name: shown[name] for p in model.stage_parts(variants.DENOMINATOR) for name in p.gradients})
    n, m = model.n_queries, model.n_keys
    f = spec.focus
    every = spec.document.expand == "all"
    rows = range(n) if every else [f]
    keys = range(m) if every else [top_keys(model, f)[0]]
    A = fig.weights
    V, K, Q = spec.V, spec.K, spec.Q
    qk = variants.stage(spec, variants.QK)
    turned = qk[0][0].backward_inputs(spec, model) if qk else None  # a Q/K part's Q′ and K′, as shown
    if turned is not None:
        Q, K = turned
    dQ, dK = ("dQ", "dK") if turned is None else model.qk.gradients[:2]
    dV_dots = tuple(
        Dot(j, k, tuple((A[i][j], dO[i][k]) for i in range(n)), g["dV"][j][k]) for j in keys for k in range(len(V[0]))
    )
    dA_dots = tuple(
        Dot(i, j, tuple((dO[i][k], V[j][k]) for k in range(len(V[0]))), g["dA"][i][j]) for i in rows for j in range(m)
    )
    softmax_rows = []
    for i in rows:
        J = g["jacobian"][i * m : (i + 1) * m]
        products = tuple(
            Dot(i, k, tuple((J[j][k], g["dA"][i][j]) for j in range(m)), g["jacobian_dA"][i][k]) for k in range(m)
        )
        softmax_rows.append(
            SoftmaxGradRow(
                i,
                A[i],
                J,
                is_exact(J),
                g["dA"][i],
                products,
                g["dot"][i][0],
                tuple((g["dA"][i][k], A[i][k]) for k in range(m)),
                g["dZ"][i],
                is_exact([g["dZ"][i]]),
                tuple(j for j in range(m) if not model.may_attend(i, j)),
            )
        )
    scale_kind, scale_value = scale_parts(spec)
    dQ_dots = tuple(
        Dot(i, t, tuple((g["dS"][i][j], K[j][t]) for j in range(m)), g[dQ][i][t])
        for i in rows
        for t in range(len(K[0]))
    )
    dK_dots = tuple(
        Dot(j, t, tuple((g["dS"][i][j], Q[i][t]) for i in range(n)), g[dK][j][t])
        for j in keys
        for t in range(len(Q[0]))
    )
    head = int(suffix[1:] or 0)  # its index in a denominator part's gradient
    facts = tuple(f for f in (p.backward_fact(spec, model, fig, g, head) for p, _ in variants.of(spec)) if f)
    steps: tuple[BackwardStep, ...] = (
        GradValues(g["dV"], is_exact(g["dV"]), dV_dots, g["dA"], is_exact(g["dA"]), dA_dots),
        GradSoftmax(tuple(softmax_rows), g["dZ"], is_exact(g["dZ"]), spec.softmax == "stable"),
        *((GradVariants(facts),) if facts else ()),
        GradScaling(
            spec.d_k,
            scale_kind,
            scale_value,
            fig.sqrt_dk,
            g["dS"],
            is_exact(g["dS"]),
            bool(model.stage_parts(variants.MAP)),
        ),
        GradQK(g[dQ], is_exact(g[dQ]), dQ_dots, g[dK], is_exact(g[dK]), dK_dots, rotated=turned is not None),
    )
    for p, _ in qk:  # its steps after dQ and dK's
        steps += p.backward_after_qk(spec, model, g, keys[0])
    return steps


def _grad_projections(spec: Spec, shown: dict[str, NumRows]) -> GradProjections:
    p = spec.projection
    assert p is not None  # called only for a spec with X and W
    products = []
    for name in ("Q", "K", "V"):
        db = shown.get(f"db_{name}")
        products.append(
            GradProjected(
                name,
                "X" if name == "Q" or p.X_kv is None else "X_kv",
                shown[f"dW_{name}"],
                is_exact(shown[f"dW_{name}"]),
                None if db is None else db[0],
                db is not None and is_exact(db),
            )
        )
    dX_kv = shown.get("dX_kv")
    return GradProjections(
        tuple(products), shown["dX"], is_exact(shown["dX"]), dX_kv, dX_kv is not None and is_exact(dX_kv)
    )


def _turned(spec: Spec, model: BackwardModel) -> dict[str, NumRows]:
    """Each head's Q′ and K′ of a Q/K part as its step shows them, by the names its rows have (``name@h``
    per head): a hand backward pass works from them."""
    out: dict[str, NumRows] = {}
    subs = [spec.head(h) for h in range(spec.heads)] if spec.heads > 1 else [spec]
    for h, (head, sub) in enumerate(zip(model.heads, subs)):
        qk = variants.stage(sub, variants.QK)
        factors = head.qk.factors if head.qk is not None else None
        shown = qk[0][0].backward_inputs(sub, head) if qk and factors else None
        if factors and shown is not None:
            out.update({name + (f"@{h}" if model.is_split else ""): rows for name, rows in zip(factors, shown)})
    return out


def backward_steps(spec: Spec, model: BackwardModel) -> tuple[BackwardStep, ...]:
    """The steps of the backward pass, in the order a reader works them."""
    from symattn.exact.rounding import gradient_figures

    heads = model.heads
    subs = [spec.head(h) for h in range(spec.heads)] if spec.heads > 1 else [spec]
    figs = [figures(h, sub) for h, sub in zip(heads, subs)]
    concat = tuple(sum((f.output[i] for f in figs), ()) for i in range(len(spec.tokens)))
    output = concat
    if spec.W_O is not None:
        assert model.forward.kind == "heads"  # W_O makes the forward model several heads
        output = cast("MultiHead", model.forward).figures_output(spec, concat)
    weights = [f.weights for f in figs]
    shown = gradient_figures(model, spec, weights, output, concat, figs[0].sqrt_dk, _turned(spec, model))
    b = spec.backward
    assert b is not None  # the backward model is built only for a spec with [backward]
    steps: list[BackwardStep] = [Loss(b.loss, output, is_exact(output), b.target, shown["dO"], is_exact(shown["dO"]))]
    shapes = [("dO", *_shape(shown["dO"]))]
    if not model.is_split:
        own = _head_backward(spec, heads[0], figs[0], shown, "", shown["dO"])
        steps += own[:2] + pictures(spec, "dZ", (shown["dZ"],)) + own[2:]  # dZ drawn after its step
    else:
        if spec.W_O is not None:
            db = shown.get("db_O")
            steps.append(
                GradOutputProjection(
                    shown["dO"],
                    shown["dW_O"],
                    is_exact(shown["dW_O"]),
                    None if db is None else db[0],
                    db is not None and is_exact(db),
                    shown["dconcat"],
                    is_exact(shown["dconcat"]),
                    spec.heads,
                )
            )
            shapes += (
                [("dW_O", *_shape(shown["dW_O"]))]
                + ([("db_O", 1, len(db[0]))] if db else [])
                + [("dconcat", *_shape(shown["dconcat"]))]
            )
        for h, (head, sub, fig) in enumerate(zip(heads, subs, figs)):
            width = len(sub.V[0])
            dO = shown[f"dO@{h}"]
            inner = assemble(sub, _head_backward(sub, head, fig, shown, f"@{h}", dO))
            steps.append(BackwardHead(h, h * width, width, dO, is_exact(dO), inner, spec.W_O is not None))
        steps += pictures(spec, "dZ", tuple(shown[f"dZ@{h}"] for h in range(spec.heads)))
        steps += [g for g in [grad_groups_step(spec, shown, is_exact)] if g is not None]  # shared K and V add up
    shapes += [(name, *_shape(shown[name])) for name in ("dV", "dA", "dZ", "dS", "dQ", "dK") if name in shown]
    if spec.projection is not None:
        steps.append(_grad_projections(spec, shown))
        for name in ("dW_Q", "db_Q", "dW_K", "db_K", "dW_V", "db_V", "dX", "dX_kv"):
            if name in shown:
                shapes.append((name, *_shape(shown[name])))
    steps.append(GradRecap(tuple(shapes)))
    return tuple(steps)


__all__ = [
    "BackwardHead",
    "BackwardStep",
    "GradOutputProjection",
    "GradProjected",
    "GradProjections",
    "GradQK",
    "GradRecap",
    "GradScaling",
    "GradSoftmax",
    "GradValues",
    "GradVariants",
    "Loss",
    "SoftmaxGradRow",
    "backward_steps",
]
