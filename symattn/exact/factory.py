"""The one place where a model kind is chosen: the derivation, compute, the checker and the web page
call :func:`build` and then use the model through its interface (:class:`~symattn.exact.base.AttentionModel`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from symattn.exact.base import AttentionModel
from symattn.exact.heads import build_model
from symattn.exact.model import Model
from symattn.input import limits
from symattn.input.errors import LimitError
from symattn.input.spec import Spec

if TYPE_CHECKING:
    from symattn.exact.multihead import MultiHead


def build(spec: Spec) -> AttentionModel:
    """The exact model a spec asks for: symbols, several heads (or W_O), or one head; with
    ``[backward]``, the backward pass over it."""
    if spec.kernel.batches:  # issue 22: several batches are compare's, on its float64 path
        from symattn.input.errors import SpecError

        raise SpecError(
            spec.source,
            "Q",
            f"a batch of {spec.kernel.batch} is for compare (with float32-valued inputs); a derivation takes one batch",
        )
    n, m = len(spec.tokens), len(spec.keys)
    if max(n, m) > limits.TOKENS:  # kernel-sized files: the float64 path's (compare), never Python objects
        raise LimitError(
            spec.source,
            "Q" if n >= m else "K",
            f"{max(n, m)} tokens; compute, check and render take at most {limits.TOKENS} (compare takes up to "
            f"{limits.KERNEL_TOKENS} from .npy or .safetensors files of float32 values, on its float64 path)",
        )
    if spec.is_symbolic:
        from symattn.exact.symbolic import build_symbolic, has_all_values

        if spec.backward is not None and not has_all_values(spec):
            # gradients are derived with numbers: the formulas stop at the forward pass
            from symattn.input.errors import SpecError

            raise SpecError(
                spec.source,
                "backward",
                "the backward pass of a spec with symbols needs a value for every symbol ([subs] or --subs)",
            )
        return build_symbolic(spec)
    numeric: Model | MultiHead
    if spec.heads > 1 or spec.W_O is not None:
        from symattn.exact.multihead import build_multihead

        numeric = build_multihead(spec)
    else:
        numeric = build_model(spec)
    if spec.backward is not None:
        from symattn.exact.backward import build_backward

        return build_backward(spec, numeric)
    return numeric
