"""Trivial answers: a claimed row of all zeros, all equal, or a row of the inputs copied, when that is not right.

The numbers a student carries from such a row follow from it correctly, but show little of the method, so
the grading policy scores them as ``carried-trivial``, apart from ``carried``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from symattn.classroom.template import ASKABLE as STEPS  # a sheet's steps, in order

# the steps of one row that a trivial answer can start: each later step of the row is computed from it
_ROW_STEPS = ("scores", "scaled", "exp", "weights", "output")


def trivial_rows(results: Sequence[Any], spec: Any) -> dict[tuple[str, int], str]:
    """(step, row) -> kind of each claimed row that is trivial and not right as given: ``zeros``, ``inputs``
    (a row of Q, K or V copied) or ``equal`` (all entries the same)."""
    rows: dict[tuple[str, int], list[Any]] = {}
    for v in results:
        if v.claim.quantity in _ROW_STEPS and v.claim.row is not None and v.head is None:
            rows.setdefault((v.claim.quantity, v.claim.row), []).append(v)
    given = (getattr(spec, name, None) for name in ("Q", "K", "V", "X"))  # X: a spec with projections
    inputs = [tuple(x.value for x in r) for m in given if m is not None for r in m]
    out = {}
    for at, vs in rows.items():
        # a row that is right as given (each claim exact or correctly rounded) is no dodge, even if trivial
        if all(v.verdict in ("exact", "rounded") for v in vs) or any(v.claim.number.is_infinite for v in vs):
            continue
        values = tuple(v.claim.number.value for v in sorted(vs, key=lambda v: v.claim.col or 0))
        if all(x == 0 for x in values):
            out[at] = "zeros"
        elif len(values) > 1 and values in inputs:
            out[at] = "inputs"
        elif len(values) > 1 and len(set(values)) == 1:
            out[at] = "equal"
    return out


def from_trivial(v: Any, trivial: Mapping[tuple[str, int], str]) -> bool:
    """A carried claim of a row whose chain passes through a trivial answer of an earlier step."""
    step = "weights" if v.claim.quantity == "percent" else v.claim.quantity
    if v.verdict != "carried" or v.claim.row is None or step not in STEPS:
        return False
    return any(row == v.claim.row and STEPS.index(s) < STEPS.index(step) for s, row in trivial)


__all__ = ["from_trivial", "trivial_rows"]
