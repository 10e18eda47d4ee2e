"""The backward step of the score variants as plain data: back through softcap's c·tanh(y/c), whose
derivative is 1 − tanh²(y/c), and the sink logit's own gradient ds = −Σ_i share_i · r_i (the sink has
no value, so its column of dA is 0 and dZ is the softmax's as without it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from symattn.derivation.steps import Dot
from symattn.exact.model import Model
from symattn.exact.rounding import Figures, Num, NumRow, NumRows, is_exact
from symattn.input.numeral import Numeral
from symattn.input.spec import Spec


@dataclass(frozen=True)
class CapBack:
    """dY = dZ ⊙ tanh′ with tanh′ = 1 − tanh²(y/c): the focus row key by key, and both matrices."""

    cap: Numeral
    row: int
    keys: tuple[int, ...]  # the keys the focus row may attend to
    dZ: NumRow  # the focus row's dZ, tanh′ and dY at those keys
    prime: NumRow
    dY: NumRow
    primes: NumRows
    primes_exact: bool
    dY_all: NumRows
    dY_exact: bool


@dataclass(frozen=True)
class SinkBack:
    """ds = Σ_i share_i × (−r_i): the sink logit's gradient, one number for the head."""

    logit: Numeral
    dot: Dot  # terms (share_i, −r_i), result ds


@dataclass(frozen=True)
class GradVariants:
    kind: ClassVar[str] = "backward_variants"
    cap: CapBack | None
    sink: SinkBack | None


def _neg(x: Num) -> Num:
    return Num(-x.value, x.exact, x.scientific)


def variants_back_step(spec: Spec, model: Model, fig: Figures, g: dict[str, NumRows], head: int) -> GradVariants | None:
    """The step after the softmax's, for a head with softcap or a sink (None without either); ``spec`` is
    the head's own (its sink is ``sinks[0]``), ``head`` its index in dsinks."""
    cap = sink = None
    f = spec.focus
    if spec.softcap is not None:
        keys = tuple(j for j in range(model.n_keys) if model.may_attend(f, j))
        cap = CapBack(
            spec.softcap,
            f,
            keys,
            tuple(g["dZ"][f][j] for j in keys),
            tuple(g["tanh_prime"][f][j] for j in keys),
            tuple(g["dZ_pre"][f][j] for j in keys),
            g["tanh_prime"],
            is_exact(g["tanh_prime"]),
            g["dZ_pre"],
            is_exact(g["dZ_pre"]),
        )
    if spec.sinks is not None:
        assert fig.sink_share is not None  # the figures of a head with a sink show its share
        ds = g["dsinks"][0][head]
        terms = tuple((share, _neg(r[0])) for share, r in zip(fig.sink_share, g["dot"]))
        sink = SinkBack(spec.sinks[0], Dot(0, head, terms, ds))
    if cap is None and sink is None:
        return None
    return GradVariants(cap, sink)
