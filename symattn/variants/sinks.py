"""Attention sinks (gpt-oss), one part: ``sinks = [s_1, …]`` gives each head a sink logit s, one more term
e^s in every softmax's denominator with no value of its own, so the weights of a row add up to less than 1.

This module reads and checks the key, declares what claims may name (each row's ``sink_share``, and
backward the logit's gradient ``dsinks``) and makes the steps a document shows; one head's sink, exactly
(why its values are rational where they are, its enclosures, its gradient), is
:mod:`symattn.variants.sink_head`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.exact.num import Num, NumRow
from symattn.input.files import kind_of
from symattn.input.messages import said
from symattn.input.numeral import Numeral
from symattn.input.records import record
from symattn.variants.base import DENOMINATOR, KernelNumber, Part, Quantity, Where

if TYPE_CHECKING:  # one head's sink is exact arithmetic: the spec reads the part without SymPy
    from symattn.derivation.steps import Dot
    from symattn.variants.sink_head import Sink

# --- limits of sinks ---------------------------------------------------------------------------
SINK_LOGIT = 100  # the largest |s| of a sink logit: e^100 has 44 digits before the point


# --- the steps of a derivation ---------------------------------------------------------------------


@record
class SinkShare:
    """The sink's share of each row: e^s over the whole denominator; the weights add up to 1 minus it."""

    kind: ClassVar[str] = "sinks"
    logit: Numeral
    sink: Num  # the focus row's e^s (or e^(s − shift)) as in its softmax
    total: Num  # the focus row's denominator
    share: Num  # the focus row's share
    shares: NumRow  # every row's


@record
class SinkBack:
    """ds = Σ_i share_i × (−r_i): the sink logit's gradient, one number for the head."""

    logit: Numeral
    dot: Dot  # terms (share_i, −r_i), result ds


# --- the part -------------------------------------------------------------------------------------


class Sinks(Part):
    name = "sinks"
    keys = ("sinks",)
    stage = DENOMINATOR
    title = "sinks"
    unstated = keys
    web_fields = ({"key": "sinks", "kind": "list", "default": ""},)
    quantities = (
        Quantity("sink_share", "output", cols=None, needs="sinks"),
        Quantity("dsinks", None, rows=None, cols=None, gradient=True, asked_by="gradients", needs="sinks"),
    )
    step_kinds = ("sinks",)
    facts = (
        ("softmax_row", "sink", None),
        ("softmax_row", "sink_logit", None),
        ("toy_vs_real", "sinks", False),
        ("backward_variants", "sink", None),
    )
    certify = "--certify does not cover sinks"
    argument = "sinks"
    grid_key = "sinks"
    gradient = "dsink"
    gradient_noun = "the sink logits"
    drawn = True
    kernel_rule = "denominator_logit"  # symattn.kernel.compare(sinks=…): e^s in each row's denominator, bounded
    certified = True  # version-3 certificates hold the sinks, and both verifiers have the rule

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> tuple[Numeral, ...] | None:
        """``sinks = [s_1, …]`` (or a file of them): one sink logit per head, of size at most SINK_LOGIT."""
        if "sinks" not in data:
            return None
        heads, raw = where.heads, data["sinks"]
        count = said("sinks_count", heads=heads, n=len(raw) if isinstance(raw, list) else 0)
        given = reader.per_head(raw, "sinks", heads, said("sinks_list", heads=heads, got=kind_of(raw)), count)
        sinks = []
        for s, error in given:
            if abs(s.value) > SINK_LOGIT:
                raise error(said("sink_range", most=SINK_LOGIT, got=s.text))
            sinks.append(s)
        self.check(reader, tuple(sinks), where.symbolic)
        return tuple(sinks)

    def check(self, reader: Any, setting: Any, symbolic: bool) -> None:
        if setting is not None and symbolic:
            raise reader.error("sinks", "symbols are not supported with sinks; give numbers")

    def head(self, setting: tuple[Numeral, ...], index: int) -> tuple[Numeral, ...]:
        return setting[index : index + 1]

    kernel_per_head = True

    def kernel_numbers(self, setting: tuple[Numeral, ...]) -> tuple[KernelNumber, ...]:
        return tuple(KernelNumber(s.value, s.text, "sinks", (h,)) for h, s in enumerate(setting, 1))

    def head_part(self, setting: tuple[Numeral, ...], spec: Any) -> Sink:
        from symattn.variants.sink_head import Sink

        return Sink(setting[0].value)

    def toy(self, spec: Any, setting: Any) -> tuple[tuple[str, Any], ...]:
        return (("sinks", True),)

    def softmax_facts(self, spec: Any, fig: Any, row: int) -> tuple[tuple[str, Any], ...]:
        """Its e^s (or e^(s − shift)) in the row's denominator, and s as the spec gives it."""
        return (("sink", fig.denominator[row]), ("sink_logit", spec.setting("sinks")[0]))

    def after_softmax(self, spec: Any, fig: Any) -> tuple[SinkShare, ...]:
        """The sink's share of each row."""
        if fig.denominator is None or fig.share is None:
            return ()
        f = spec.focus
        return (SinkShare(spec.setting("sinks")[0], fig.denominator[f], fig.exp_sum[f], fig.share[f], fig.share),)

    def backward_fact(self, spec: Any, model: Any, fig: Any, g: Mapping[str, Any], head: int) -> tuple[str, SinkBack]:
        """``spec`` is the head's own (its sink is ``sinks[0]``), ``head`` its index in dsinks."""
        from symattn.derivation.steps import Dot
        from symattn.variants.sink_head import negative

        assert fig.share is not None  # the figures of a head with a sink show its share
        ds = g["dsinks"][0][head]
        terms = tuple((share, negative(r[0])) for share, r in zip(fig.share, g["dot"]))
        return "sink", SinkBack(spec.setting("sinks")[0], Dot(0, head, terms, ds))

    def sweep_argument(self, value: Any, heads: int, drawn: Any) -> Any:
        """The seed's sink logits, one per head."""
        import torch

        return torch.from_numpy(drawn) if value else None

    def score_mod(self, argument: Any, scores: Any, i: Any, j: Any, causal: bool, align: str) -> Any:
        """One more column: the head's sink logit in every row's softmax."""
        import torch

        if argument is None:
            return scores
        column = argument.to(scores.dtype)[None, :, None, None].expand(*scores.shape[:-1], 1)
        return torch.cat([scores, column], dim=-1)


PART = Sinks()

__all__ = ["PART", "SINK_LOGIT", "SinkBack", "SinkShare", "Sinks"]
