"""Build one head's exact model from a spec: its Q, K, V as integers over denominators, its scale and mask,
and the head parts of its variants (:mod:`symattn.variants`), in the order they act; and refuse, before
anything is evaluated, scores whose exponentials no one could print or store.
"""

from __future__ import annotations

from fractions import Fraction

from symattn import variants
from symattn.exact.base import integer_matrix
from symattn.exact.model import Model, scale_of
from symattn.input.errors import LimitError
from symattn.input.limits import ABS_Z, WORK_BITS
from symattn.input.reader import is_numbers
from symattn.input.spec import Spec


def model_fields(spec: Spec) -> dict:
    """A numeric head's fields from its spec: Q, K, V as integers over a denominator, S = QKᵀ (before any Q/K
    part), d_k, the scale, the mask and the parts."""
    Q, K, V = spec.Q, spec.K, spec.V
    if not (is_numbers(Q) and is_numbers(K) and is_numbers(V)):
        raise ValueError("a spec with formulas has a symbolic model: use build_symbolic")
    (q, dq), (k, dk), (v, dv) = (integer_matrix(m) for m in (Q, K, V))
    return dict(
        q=q,
        k=k,
        v=v,
        s=q * k.transpose(),
        dq=dq,
        dk=dk,
        dv=dv,
        d_k=spec.d_k,
        scale=scale_of(spec),
        allowed=spec.allowed,
        parts=variants.head_parts(spec),
    )


def build_model(spec: Spec) -> Model:
    """The exact model of a validated single-head spec."""
    if spec.heads > 1:
        raise ValueError("a multi-head spec has one model per head: use build_heads")
    model = Model(**model_fields(spec))
    check_work(model, spec.source)
    return model


def build_heads(spec: Spec) -> tuple[Model, ...]:
    """One model per head (a single one without heads)."""
    if spec.heads == 1:
        return (build_model(spec),)
    return tuple(build_model(spec.head(h)) for h in range(spec.heads))


def check_work(model: Model, source: str) -> None:
    """Refuse scores whose exponentials no one could print or store, before any is evaluated."""
    z, i, j = model.largest_z
    if z > ABS_Z:
        digits = z * Fraction(4343, 10000)  # log10(e) < 0.4343
        raise LimitError(
            source,
            "scaled",
            f"|z| = |S·scale| is about {_approximately(z)}, more than {ABS_Z} "
            f"(the limit): e^z would have about {_approximately(digits)} digits",
            (i + 1, j + 1),
        )
    work = model.n_queries * model.n_keys * model._headroom_bits
    if work > WORK_BITS:
        raise LimitError(
            source,
            "scaled",
            f"{model.n_queries}×{model.n_keys} scores with |z| up to "
            f"{_approximately(z)} need {work // 8 // 2**20} MiB of exact digits; "
            f"the limit is {WORK_BITS // 8 // 2**20} MiB",
            (i + 1, j + 1),
        )


def _approximately(x: Fraction) -> str:
    # an integer for a message, without str() of a huge int
    n = int(x)
    if n.bit_length() < 60:
        return str(n)
    return f"10^{int(n.bit_length() * 0.30103)}"


__all__ = ["build_heads", "build_model", "check_work", "model_fields"]
