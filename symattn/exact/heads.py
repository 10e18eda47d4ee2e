"""The one place where a head's model kind is chosen: plain or rotary scores, then plain, biased/capped or
sink softmax (issue 20). Every kind takes :func:`~symattn.exact.model.model_fields`; RoPE adds its
rotation, the score variants their slope, cap and sink.
"""

from __future__ import annotations

from symattn.exact.model import Model, check_work, model_fields
from symattn.exact.rope import RotaryModel
from symattn.exact.rope_variants import RotaryBiasedModel, RotarySinkModel
from symattn.exact.score_variants import BiasedModel, variant_fields
from symattn.exact.sinks import SinkModel
from symattn.input.spec import Spec

# (RoPE, the bias/cap, the sink) -> the model kind; a sink's model carries any bias and cap too
KINDS: dict[tuple[bool, bool, bool], type[Model]] = {
    (False, False, False): Model,
    (False, True, False): BiasedModel,
    (False, True, True): SinkModel,
    (True, False, False): RotaryModel,
    (True, True, False): RotaryBiasedModel,
    (True, True, True): RotarySinkModel,
}


def build_model(spec: Spec) -> Model:
    """The exact model of a validated single-head spec."""
    if spec.heads > 1:
        raise ValueError("a multi-head spec has one model per head: use build_heads")
    variants = spec.alibi is not None or spec.softcap is not None or spec.sinks is not None
    kind = KINDS[spec.rope is not None, variants, spec.sinks is not None]
    extra = variant_fields(spec) if variants else {}
    if spec.rope is not None:
        extra["rope"] = spec.rope  # model_fields' s: the scores before the rotation
    model = kind(**model_fields(spec), **extra)
    check_work(model, spec.source)
    return model


def build_heads(spec: Spec) -> tuple[Model, ...]:
    """One model per head (a single one without heads)."""
    if spec.heads == 1:
        return (build_model(spec),)
    return tuple(build_model(spec.head(h)) for h in range(spec.heads))


__all__ = ["KINDS", "build_heads", "build_model"]
