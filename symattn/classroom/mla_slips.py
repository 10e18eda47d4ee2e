"""The classic slips of MLA worked by hand (issue 32), as an LMS quiz plants them beside the right answers.

Each slip is the student's [mla] table with one matrix mishandled; its values are read from the exact model
of that table, so a slip shows in the quantity where it is made and is carried into every later one (as
``no_scaling`` is in :mod:`symattn.classroom.gaps`). A slip applies only where its table has the shapes of a
real spec (a transpose needs a square matrix, leaving a matrix out needs an identity's shape):

``transposed_W_DKV``  W_DKVᵀ for W_DKV: the latent c_KV = X W_DKVᵀ
``transposed_W_UK``   W_UKᵀ for W_UK: K = c_KV W_UKᵀ (naive), q̃ = q W_UK (absorbed): the same scores
``transposed_W_UV``   W_UVᵀ for W_UV: V = c_KV W_UVᵀ, o = u W_UVᵀ
``swapped_up``        the up-projections swapped: K from W_UV and V from W_UK
``skipped_W_UK``      no W_UK: the scores q c_jᵀ of the latent itself
``skipped_W_UV``      no W_UV: V = c_KV, o = u
"""

from __future__ import annotations

from typing import Any

SLIPS = ("transposed_W_DKV", "transposed_W_UK", "transposed_W_UV", "swapped_up", "skipped_W_UK", "skipped_W_UV")


def _transposed(m: list[list[Any]]) -> list[list[Any]] | None:
    return [list(col) for col in zip(*m)] if len(m) == len(m[0]) else None


def _identity(m: list[list[Any]]) -> list[list[Any]] | None:
    """The identity in the place of m (None where m is not square: leaving it out changes a shape)."""
    return [["1" if r == c else "0" for c in range(len(m))] for r in range(len(m))] if len(m) == len(m[0]) else None


def _slipped_table(name: str, table: dict[str, Any]) -> dict[str, Any] | None:
    """The [mla] table with the slip made, or None where it does not apply (or changes nothing)."""
    if name == "swapped_up":
        W_UK, W_UV = table["W_UK"], table["W_UV"]
        if (len(W_UK[0]) != len(W_UV[0])) or W_UK == W_UV:
            return None
        return {**table, "W_UK": W_UV, "W_UV": W_UK}
    how, _, key = name.partition("_")
    made = (_transposed if how == "transposed" else _identity)(table[key])
    return None if made is None or made == table[key] else {**table, key: made}


def slipped_models(v: Any) -> tuple[tuple[str, Any, Any], ...]:
    """(slip, spec, exact model) of every MLA slip that applies to a variant's table, in the order of SLIPS."""
    from symattn.exact.heads import build_model
    from symattn.input.errors import SymattnError
    from symattn.input.spec import spec_from_mapping

    data = v.mapping
    if "mla" not in data:
        return ()
    table = {k: [list(row) for row in m] for k, m in data["mla"].items()}
    out = []
    for name in SLIPS:
        made = _slipped_table(name, table)
        if made is None:
            continue
        try:
            spec = spec_from_mapping({**data, "mla": made}, v.spec.source)
            out.append((name, spec, build_model(spec)))
        except SymattnError:  # a table the spec's rules refuse (its shapes): no such slip here
            continue
    return tuple(out)


def source(spec: Any, model: Any, quantity: str) -> Any:
    """What holds a quantity's exact values and compares them: the model, or MLA's view of it."""
    from symattn import variants
    from symattn.classroom.mla_sheet import QUANTITIES

    return variants.view(spec, quantity, model) if quantity in QUANTITIES else model


__all__ = ["SLIPS", "slipped_models", "source"]
