"""The derivation of a spec: the one orchestrator, choosing the steps by the model's kind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from symattn.derivation.addition import mark_first_inexact
from symattn.derivation.forward import derive_head, derive_heads, derive_symbolic
from symattn.derivation.steps import Derivation, Substitution
from symattn.exact.base import AttentionModel
from symattn.exact.factory import build
from symattn.input import limits
from symattn.input.errors import LimitError
from symattn.input.spec import Spec

if TYPE_CHECKING:
    from symattn.exact.backward import BackwardModel
    from symattn.exact.symbolic import SymbolicModel


def _check_size(spec: Spec) -> None:
    """A document shows every row and column: refuse sizes no page can hold."""
    matrices = {"Q": spec.Q, "K": spec.K, "V": spec.V}
    if spec.projection is not None:
        matrices.update(X=spec.projection.X, W_Q=spec.projection.W_Q)
    for key, m in matrices.items():
        if len(m) > limits.DOCUMENT_TOKENS:
            raise LimitError(
                spec.source,
                key,
                f"{len(m)} rows; a document shows at most {limits.DOCUMENT_TOKENS} "
                f"(compute and check take up to {limits.TOKENS})",
            )
        if len(m[0]) > limits.DOCUMENT_DIMS:
            raise LimitError(
                spec.source,
                key,
                f"{len(m[0])} columns; a document shows at most "
                f"{limits.DOCUMENT_DIMS} (compute and check take up to {limits.DIMS})",
            )


def derive(spec: Spec, model: AttentionModel | None = None) -> Derivation:
    """Build the whole derivation of a spec, in the document's order of steps.

    ``model``: the spec's exact model (:func:`~symattn.exact.factory.build`), if already built.
    """
    _check_size(spec)
    model = build(spec) if model is None else model
    return mark_first_inexact(_DERIVE[model.kind](spec, model))


def _derive_symbolic(spec: Spec, model: SymbolicModel) -> Derivation:
    """The formulas; with a value for every symbol, the numbers too (derived again), before the closing table."""
    from symattn.exact.symbolic import has_all_values, substitute  # only documents with symbols need them

    derivation = derive_symbolic(spec, model)
    if not has_all_values(spec):
        return derivation
    steps = derivation.steps
    return replace(derivation, steps=steps[:-1] + (Substitution(spec.subs, derive(substitute(spec))),) + steps[-1:])


def _derive_backward(spec: Spec, model: BackwardModel) -> Derivation:
    """The forward derivation, then the backward steps before the closing toy-vs-real table."""
    from symattn.derivation.backward import backward_steps  # only the backward pass needs its step kinds

    forward = _DERIVE[model.forward.kind](spec, model.forward)
    return replace(forward, steps=forward.steps[:-1] + backward_steps(spec, model) + forward.steps[-1:])


# each entry takes the model of its kind
_DERIVE: dict[str, Callable[[Spec, Any], Derivation]] = {
    "head": derive_head,
    "heads": derive_heads,
    "symbolic": _derive_symbolic,
    "backward": _derive_backward,
}


__all__ = ["derive"]
