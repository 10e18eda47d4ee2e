"""The steps of the scores' variants (issue 20), after the scaling: ALiBi's distance bias, then the
soft-capping z ← c·tanh(z / c)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import ClassVar

from symattn.derivation.steps import Scaling
from symattn.exact import numeric
from symattn.exact.head_figures import figures
from symattn.exact.model import Model
from symattn.exact.rounding import Figures, Num, NumRow, NumRows, is_exact
from symattn.input.numeral import Numeral
from symattn.input.spec import Spec


@dataclass(frozen=True)
class AlibiBias:
    """z_ij = S_ij · scale − m·|i − j|: the slope, the focus row's distances and bias, the biased scores."""

    kind: ClassVar[str] = "alibi"
    slope: Num  # m as shown
    exponent: Fraction | None  # the paper's m = 2^exponent; None when the spec gives m
    given: Numeral | None  # the slope the spec gives
    head: int  # 1-based, and of how many heads (the paper's 2^(−8h/H))
    heads: int
    distances: tuple[int, ...]  # |f − j| for the focus row f
    bias: NumRow  # −m·|f − j|
    Z: NumRows  # the scaled scores plus the bias, before any mask
    exact: bool
    cross: bool
    rotated: bool = False  # RoPE: the bias comes on top of the rotated Q and K's scores
    capped: bool = False  # a softcap comes next: the biased scores go on to it, not to the softmax


@dataclass(frozen=True)
class SoftCap:
    """z ← c·tanh(z / c): the cap, the focus row before and after, and every capped score."""

    kind: ClassVar[str] = "softcap"
    cap: Numeral
    before: NumRow  # the focus row's (biased) scaled scores
    after: NumRow  # c·tanh(z / c) of each
    Z: NumRows  # every capped score, before any mask
    exact: bool
    after_exact: bool


@dataclass(frozen=True)
class SinkShare:
    """The sink's share of each row: e^s over the whole denominator; the weights add up to 1 minus it."""

    kind: ClassVar[str] = "sinks"
    logit: Numeral
    sink: Num  # the focus row's e^s (or e^(s − shift)) as in its softmax
    total: Num  # the focus row's denominator
    share: Num  # the focus row's share
    shares: NumRow  # every row's


def sink_steps(spec: Spec, fig: Figures) -> tuple:
    """The sink's step, after the softmax; none without sinks."""
    if spec.sinks is None or fig.sink_exp is None or fig.sink_share is None:
        return ()
    f = spec.focus
    return (SinkShare(spec.sinks[0], fig.sink_exp[f], fig.exp_sum[f], fig.sink_share[f], fig.sink_share),)


def score_variant_steps(spec: Spec, model: Model, fig: Figures, scaling: Scaling) -> tuple:
    """The scaling step, then each variant's own step; the scaling alone for plain scores."""
    from symattn.exact.score_variants import BiasedModel, bias_shown, distance

    if not isinstance(model, BiasedModel):
        return (scaling,)
    plain = figures(model.plain(), spec).unmasked
    steps: list = [replace(scaling, Z=plain, exact=is_exact(plain))]
    uncapped = figures(model.uncapped(), spec).unmasked if spec.softcap is not None else fig.unmasked
    f = spec.focus
    if spec.alibi is not None:
        slope = spec.alibi.slopes[0]
        exact = numeric.as_fraction(model.slope)
        shown = numeric.round_expr(model.slope, spec.decimals.scaled)
        steps.append(
            AlibiBias(
                slope=Num(shown, exact is not None and Fraction(shown) == exact),
                exponent=None if slope.given is not None else slope.exponent,
                given=slope.given,
                head=slope.head,
                heads=slope.heads,
                distances=tuple(distance(f, j) for j in range(model.n_keys)),
                bias=bias_shown(model, spec.decimals.scaled, spec.notation)[f],
                Z=uncapped,
                exact=is_exact(uncapped),
                cross=spec.is_cross,
                rotated=spec.rope is not None,
                capped=spec.softcap is not None,
            )
        )
    if spec.softcap is not None:
        steps.append(
            SoftCap(
                spec.softcap,
                uncapped[f],
                fig.unmasked[f],
                fig.unmasked,
                is_exact(fig.unmasked),
                is_exact([fig.unmasked[f]]),
            )
        )
    return tuple(steps)
